#!/usr/bin/env node
// Prepares and drives the home directory of an ssb-server that
// scripts/ssb-server.sh runs as a conformance target.
//
//   node ssb-home.js init    --dir DIR --host H --port P [--caps-hex HEX] [--seed HEX]
//       writes DIR/config (loopback only, no discovery, no outgoing gossip)
//       and DIR/secret (from the ed25519 seed if given); prints SSB_ID=@...
//   node ssb-home.js wait    --dir DIR [--timeout SECONDS]
//       retries until the server accepts a secret-handshake connection with
//       its own key and answers whoami
//   node ssb-home.js publish --dir DIR --text T [--type post] [--count N]
//       appends N messages to the server's own feed through ssb-client;
//       prints SSB_MSG_KEY=%... and SSB_MSG_SEQ=n for each
//
// The server and this script must agree on everything a client needs (host,
// port, network key, identity), so both read it from DIR: the server through
// ssb-config (HOME and ssb_appname point it at DIR), this script directly.
'use strict'

const fs = require('fs')
const path = require('path')
const ssbKeys = require('ssb-keys')
const ssbClient = require('ssb-client')

// The main network's caps.shs (ssb-caps); used when no network key is given.
const MAIN_NETWORK_CAPS_BASE64 = '1KHLiKZvAvjbY1ziZEHMXawbCEIM6qwjCDm3VYRan/s='

function fail (message) {
  process.stderr.write('ssb-home: ' + message + '\n')
  process.exit(1)
}

function parseOptions (args, known) {
  const options = {}
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]
    if (!arg.startsWith('--')) fail('unexpected argument ' + JSON.stringify(arg))
    const name = arg.slice(2)
    if (!known.includes(name)) fail('unknown option --' + name + ' (known: ' + known.join(', ') + ')')
    if (i + 1 >= args.length) fail('option --' + name + ' needs a value')
    options[name] = args[++i]
  }
  return options
}

function requireOption (options, name) {
  if (options[name] === undefined) fail('--' + name + ' is required')
  return options[name]
}

function hexToBuffer (hex, expectedLength, what) {
  if (!/^([0-9a-fA-F]{2})*$/.test(hex)) fail(what + ' is not hex: ' + hex)
  const buffer = Buffer.from(hex, 'hex')
  if (buffer.length !== expectedLength) fail(what + ' must be ' + expectedLength + ' bytes, got ' + buffer.length)
  return buffer
}

// Same layout ssb-keys' storage writes, so ssb-server loads it unchanged.
function secretFileText (keys) {
  return '# SSB secret of a conformance-test ssb-server; throwaway identity.\n' +
    JSON.stringify(keys, null, 2) + '\n' +
    '#\n#   ' + keys.id + '\n'
}

function init (options) {
  const dir = path.resolve(requireOption(options, 'dir'))
  const host = requireOption(options, 'host')
  const port = Number(requireOption(options, 'port'))
  if (!Number.isInteger(port) || port <= 0 || port > 65535) fail('bad --port ' + options.port)
  const capsBase64 = options['caps-hex'] !== undefined
    ? hexToBuffer(options['caps-hex'], 32, '--caps-hex').toString('base64')
    : MAIN_NETWORK_CAPS_BASE64

  fs.mkdirSync(dir, { recursive: true })
  const config = {
    host: host,
    port: port,
    caps: { shs: capsBase64 },
    // Only a TCP listener on the given loopback address: no ws listener (its
    // default would be a random or fixed public port) and the device-only
    // unix socket inside DIR.
    connections: {
      incoming: {
        net: [{ host: host, port: port, scope: ['device', 'local', 'public'], transform: 'shs' }],
        unix: [{ scope: 'device', transform: 'noauth' }]
      },
      outgoing: { net: [{ transform: 'shs' }] }
    },
    // No UDP broadcast (ssb-local), no outgoing gossip of any kind: the
    // server only ever talks to the harness that connects to it.
    local: false,
    pub: false,
    gossip: {
      local: false, friends: false, seed: false, global: false,
      pub: false, autoPopulate: false, connections: 0
    },
    seeds: [],
    logging: { level: 'info' }
  }
  fs.writeFileSync(path.join(dir, 'config'), JSON.stringify(config, null, 2) + '\n')

  const secretPath = path.join(dir, 'secret')
  let keys
  if (fs.existsSync(secretPath)) {
    keys = ssbKeys.loadSync(secretPath)
  } else {
    const seed = options.seed !== undefined ? hexToBuffer(options.seed, 32, '--seed') : undefined
    keys = ssbKeys.generate('ed25519', seed)
    fs.writeFileSync(secretPath, secretFileText(keys), { mode: 0o600 })
  }
  process.stdout.write('SSB_ID=' + keys.id + '\n')
}

function clientConfig (dir) {
  const configPath = path.join(dir, 'config')
  if (!fs.existsSync(configPath)) fail(configPath + ' is missing; run init first')
  const config = JSON.parse(fs.readFileSync(configPath, 'utf8'))
  config.path = dir
  config.timers = { handshake: 5000 }
  return config
}

function connect (dir) {
  const config = clientConfig(dir)
  const keys = ssbKeys.loadSync(path.join(dir, 'secret'))
  // The server's own key: ssb-master grants the server's identity every
  // method, publish included.
  return new Promise((resolve, reject) => {
    ssbClient(keys, { host: config.host, port: config.port, key: keys.id, caps: config.caps, timers: config.timers, path: dir },
      (err, client) => err ? reject(err) : resolve(client))
  })
}

function call (fn, ...args) {
  return new Promise((resolve, reject) => fn(...args, (err, value) => err ? reject(err) : resolve(value)))
}

async function wait (options) {
  const dir = path.resolve(requireOption(options, 'dir'))
  const timeoutMs = Number(options.timeout || 60) * 1000
  const deadline = Date.now() + timeoutMs
  let lastError = null
  while (Date.now() < deadline) {
    try {
      const client = await connect(dir)
      const who = await call(client.whoami)
      await call(client.close, true)
      process.stdout.write('SSB_ID=' + who.id + '\n')
      return
    } catch (err) {
      lastError = err
      await new Promise(resolve => setTimeout(resolve, 200))
    }
  }
  fail('server did not answer within ' + timeoutMs / 1000 + 's: ' + (lastError && lastError.message))
}

async function publish (options) {
  const dir = path.resolve(requireOption(options, 'dir'))
  const text = requireOption(options, 'text')
  const type = options.type || 'post'
  const count = Number(options.count || 1)
  if (!Number.isInteger(count) || count < 0) fail('bad --count ' + options.count)
  const client = await connect(dir)
  try {
    for (let i = 1; i <= count; i++) {
      // Distinct texts when publishing several, so each message is unique.
      const content = { type: type, text: count === 1 ? text : text + ' ' + i }
      const msg = await call(client.publish, content)
      process.stdout.write('SSB_MSG_KEY=' + msg.key + '\nSSB_MSG_SEQ=' + msg.value.sequence + '\n')
    }
  } finally {
    await call(client.close, true)
  }
}

async function main () {
  const [command, ...args] = process.argv.slice(2)
  switch (command) {
    case 'init': return init(parseOptions(args, ['dir', 'host', 'port', 'caps-hex', 'seed']))
    case 'wait': return wait(parseOptions(args, ['dir', 'timeout']))
    case 'publish': return publish(parseOptions(args, ['dir', 'text', 'type', 'count']))
    default: fail('usage: ssb-home.js init|wait|publish --dir DIR ... (see the comment at the top)')
  }
}

// ssb-replicate-from.js reuses the client side.
module.exports = { connect, call, clientConfig }

if (require.main === module) main().catch(err => fail(err.stack || String(err)))

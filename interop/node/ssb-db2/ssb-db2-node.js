#!/usr/bin/env node
// An SSB node on the modern JavaScript stack, as Manyverse runs it:
// secret-stack with ssb-master, ssb-db2 (its compat plugins db, ebt,
// log-stream and history-stream: createHistoryStream for the classic format),
// ssb-ebt and ssb-conn, pinned in interop/node/ssb-db2/package.json
// (installed by scripts/install-node-deps.sh). Run it through
// scripts/ssb-db2.sh; the conformance targets `ssb-db2` (server) and
// `ssb-db2-client` (client) in conformance/targets/builtin.toml do.
//
//   node ssb-db2-node.js serve --port P [--host 127.0.0.1] [--messages N]
//       [--publish-interval MS] [--seed HEX] [--network-key HEX] [--dir DIR] [--keep-home]
//     Listens on HOST:PORT (secret handshake, box stream, muxrpc), publishes
//     N messages (default 3) to its own feed with ssb.db.publish, one after
//     the other (--publish-interval: MS milliseconds apart; default 0, so
//     that several share a millisecond, as a burst of posts does), then
//     prints KEY=VALUE lines, SSB_READY=1 last:
//       SSB_ID=@...ed25519 SSB_SECRET=<secret file> SSB_HOME=<dir>
//       SSB_HOST SSB_PORT SSB_SEQUENCE=<last seq> SSB_READY=1
//     and serves until SIGTERM/SIGINT (exit 0, its home deleted). The secret
//     file is ssb-keys' own format: a peer holding it is the node's own
//     identity, which ssb-master lets call `publish` (capability `publish`).
//
//   node ssb-db2-node.js replicate --peer-host H --peer-port P
//       --peer-public-key @...ed25519 [--feed @...ed25519] [--until-sequence N]
//       [--seed HEX] [--network-key HEX] [--timeout SECONDS] [--dir DIR] [--keep-home]
//     A fresh node (no listener) asks ssb-ebt for FEED (default: the peer's
//     own feed) and for its own, as ssb-replication-scheduler does for the
//     feeds it follows, connects to the peer with ssb.conn.connect and waits
//     until it holds FEED up to N (without --until-sequence: at least one
//     message, then 3 s without a new one). ssb-ebt opens the session as the
//     client of the connection (["ebt","replicate"], version 3, classic);
//     ssb-db2 validates every message it appends. It then reads the feed back
//     and checks it again with ssb-validate and ssb-keys (chain, signatures,
//     message ids). Prints one "SSB_MSG seq=n key=%... verified=true" line
//     per message and "SSB_REPLICATED feed=@... count=N latest_sequence=N";
//     exit 0 only then, 4 if a held message does not verify, 5 if FEED is not
//     held (up to N) within --timeout (default 60), 1 on other errors.
//     This stack replicates by EBT only (no createHistoryStream client: the
//     legacy ssb-replicate is not part of it), as Manyverse does.
'use strict'

const fs = require('fs')
const os = require('os')
const path = require('path')
const pull = require('pull-stream')
const SecretStack = require('secret-stack')
const ssbKeys = require('ssb-keys')
const validate = require('ssb-validate')
const { verifyHeldItems } = require('../ssb-held')

// The main network's caps.shs (ssb-caps).
const MAIN_NETWORK_KEY_HEX = 'd4a1cb88a66f02f8db635ce26441cc5dac1b08420ceaac230839b755845a9ffb'
const EXIT_ERROR = 1
const EXIT_USAGE = 2
const EXIT_INVALID_MESSAGE = 4
const EXIT_TIMEOUT = 5
const POLL_MS = 200
const QUIET_MS = 3000

class ExitError extends Error {
  constructor (code, message) {
    super(message)
    this.code = code
  }
}

function parseOptions (args, known, flags) {
  const options = {}
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]
    const name = arg.startsWith('--') ? arg.slice(2) : null
    if (flags.includes(name)) { options[name] = true; continue }
    if (!known.includes(name)) throw new ExitError(EXIT_USAGE, 'unknown argument ' + JSON.stringify(arg))
    if (i + 1 >= args.length) throw new ExitError(EXIT_USAGE, arg + ' needs a value')
    options[name] = args[++i]
  }
  return options
}

function hexBytes (hex, length, what) {
  if (!new RegExp('^[0-9a-fA-F]{' + 2 * length + '}$').test(hex)) throw new ExitError(EXIT_USAGE, what + ' must be ' + length + ' bytes of hex')
  return Buffer.from(hex, 'hex')
}

function feedId (value, what) {
  if (!/^@[A-Za-z0-9+/]{43}=\.ed25519$/.test(value || '')) throw new ExitError(EXIT_USAGE, what + ' is not an @<base64>.ed25519 feed id: ' + value)
  return value
}

function wholeNumber (value, what, min) {
  if (!/^[0-9]+$/.test(String(value)) || Number(value) < min) throw new ExitError(EXIT_USAGE, 'bad ' + what + ' ' + value)
  return Number(value)
}

function sleep (ms) {
  return new Promise(resolve => setTimeout(resolve, ms))
}

// Every argument is checked before anything happens (no home, no listener):
// then one turn of the event loop, so that a caller can stop the program
// right after its arguments were accepted (tests/harness/test_placeholder_types.py).
function argumentsChecked () {
  return new Promise(resolve => setImmediate(resolve))
}

function call (fn, ...args) {
  return new Promise((resolve, reject) => fn(...args, (err, value) => err ? reject(err) : resolve(value)))
}

// The node's home: its secret (ssb-keys' file format) and ssb-db2's log and
// indexes; a fresh temporary one unless --dir is given.
function prepareHome (options, seedHex) {
  const dir = options.dir ? path.resolve(options.dir) : fs.mkdtempSync(path.join(os.tmpdir(), 'ssb-db2.'))
  fs.mkdirSync(dir, { recursive: true })
  const secretPath = path.join(dir, 'secret')
  let keys
  if (fs.existsSync(secretPath)) {
    keys = ssbKeys.loadSync(secretPath)
  } else {
    keys = ssbKeys.generate('ed25519', seedHex ? hexBytes(seedHex, 32, '--seed') : undefined)
    fs.writeFileSync(secretPath, '# SSB secret of a conformance-test ssb-db2 node; throwaway identity.\n' +
      JSON.stringify(keys, null, 2) + '\n#\n#   ' + keys.id + '\n', { mode: 0o600 })
  }
  const removeHome = () => {
    if (!options.dir && !options['keep-home']) fs.rmSync(dir, { recursive: true, force: true })
  }
  // However the process exits (the serve mode's stop, the replicate mode's
  // signals, the watchdog), the temporary home goes with it; not on SIGKILL.
  process.on('exit', removeHome)
  return { dir, secretPath, keys, removeHome }
}

// The plugins and their order are Manyverse's (src/backend/ssb.ts), less
// what has nothing to do with the wire (queries, blobs, its own utilities)
// and less ssb-friends and ssb-replication-scheduler, whose ebt.request
// calls the replicate mode makes itself.
function startNode ({ dir, keys, networkKey, incoming }) {
  const create = SecretStack({ appKey: networkKey.toString('base64') })
    .use(require('ssb-master'))
    .use(require('ssb-db2'))
    .use(require('ssb-db2/compat/db'))
    .use(require('ssb-db2/compat/ebt'))
    .use(require('ssb-db2/compat/log-stream'))
    .use(require('ssb-db2/compat/history-stream'))
    .use(require('ssb-ebt'))
    .use(require('ssb-conn'))
  return create({
    path: dir,
    keys,
    caps: { shs: networkKey.toString('base64') },
    host: incoming ? incoming.host : undefined,
    port: incoming ? incoming.port : undefined,
    connections: {
      incoming: incoming
        ? { net: [{ host: incoming.host, port: incoming.port, scope: ['device', 'local', 'public'], transform: 'shs' }] }
        : {},
      outgoing: { net: [{ transform: 'shs' }] }
    },
    // ssb-config's defaults, which Manyverse's config inherits.
    timers: { connection: 0, reconnect: 5000, ping: 5 * 60e3, handshake: 5000 },
    // No scheduler (no gossip of its own, no LAN, no network-change
    // reconnects): the node talks only to whoever the harness points at it.
    conn: { autostart: false, populatePubs: false },
    db2: {}
  })
}

// secret-stack emits multiserver:listening once its listeners are up
// (lib/core.js, the callback of ms.server).
function listening (sbot, seconds) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new ExitError(EXIT_ERROR, 'not listening within ' + seconds + ' s')), seconds * 1000)
    sbot.once('multiserver:listening', () => { clearTimeout(timer); resolve() })
  })
}

async function serve (options) {
  const host = options.host || '127.0.0.1'
  const port = wholeNumber(options.port, '--port', 1)
  const count = options.messages === undefined ? 3 : wholeNumber(options.messages, '--messages', 0)
  const interval = options['publish-interval'] === undefined ? 0 : wholeNumber(options['publish-interval'], '--publish-interval', 0)
  const networkKey = hexBytes(options['network-key'] || MAIN_NETWORK_KEY_HEX, 32, '--network-key')
  if (options.seed !== undefined) hexBytes(options.seed, 32, '--seed')
  await argumentsChecked()
  const home = prepareHome(options, options.seed)
  const sbot = startNode({ dir: home.dir, keys: home.keys, networkKey, incoming: { host, port } })
  const listened = listening(sbot, 30)
  let stopping = false
  const stop = (code) => {
    if (stopping) return
    stopping = true
    const done = () => { home.removeHome(); process.exit(code) }
    setTimeout(done, 5000)
    sbot.close(true, done)
  }
  process.on('SIGTERM', () => stop(0))
  process.on('SIGINT', () => stop(0))
  // ssb-replication-scheduler asks ssb-ebt for the node's own feed (hops 0).
  sbot.ebt.request(sbot.id, true)
  let sequence = 0
  for (let i = 1; i <= count; i++) {
    if (i > 1 && interval) await sleep(interval)
    const msg = await call(sbot.db.publish, { type: 'post', text: count === 1 ? 'conformance seed message' : 'conformance seed message ' + i })
    sequence = msg.value.sequence
  }
  await listened
  process.stdout.write([
    'SSB_ID=' + sbot.id,
    'SSB_SECRET=' + home.secretPath,
    'SSB_HOME=' + home.dir,
    'SSB_HOST=' + host,
    'SSB_PORT=' + port,
    'SSB_NETWORK_KEY=' + networkKey.toString('hex'),
    'SSB_SEQUENCE=' + sequence,
    'SSB_READY=1'
  ].join('\n') + '\n')
}

function collect (source) {
  return new Promise((resolve, reject) => pull(source, pull.collect((err, items) => err ? reject(err) : resolve(items))))
}

async function heldSequence (sbot, feed) {
  const clock = await call(sbot.getVectorClock)
  return clock[feed] || 0
}

// Every held message of FEED, checked again: no gap, the chain and
// signatures (ssb-validate), and that each stored key is the message's id.
// Sorted here: ssb-db2's createHistoryStream orders by timestamp (jitdb's
// min(arrival, declared)), not by sequence, and messages of the same
// millisecond come in any order (docs/findings/ssb-db2-8.md).
async function verifyHeld (sbot, feed) {
  const items = (await collect(sbot.createHistoryStream({ id: feed, keys: true })))
    .sort((a, b) => a.value.sequence - b.value.sequence)
  return verifyHeldItems(items, {
    validate, ssbKeys, hmacKey: null, invalid: text => new ExitError(EXIT_INVALID_MESSAGE, text)
  })
}

async function replicate (options) {
  const peerHost = options['peer-host']
  if (!peerHost) throw new ExitError(EXIT_USAGE, '--peer-host is required')
  const peerPort = wholeNumber(options['peer-port'], '--peer-port', 1)
  const peerKey = feedId(options['peer-public-key'], '--peer-public-key')
  const feed = feedId(options.feed || peerKey, '--feed')
  const timeout = wholeNumber(options.timeout === undefined ? 60 : options.timeout, '--timeout', 1)
  const until = options['until-sequence'] !== undefined ? wholeNumber(options['until-sequence'], '--until-sequence', 1) : null
  const networkKey = hexBytes(options['network-key'] || MAIN_NETWORK_KEY_HEX, 32, '--network-key')
  if (options.seed !== undefined) hexBytes(options.seed, 32, '--seed')
  await argumentsChecked()
  const deadline = Date.now() + timeout * 1000
  const home = prepareHome(options, options.seed)
  // The harness stops a client it is done with by SIGTERM.
  process.once('SIGTERM', () => process.exit(143))
  process.once('SIGINT', () => process.exit(130))
  const sbot = startNode({ dir: home.dir, keys: home.keys, networkKey, incoming: null })
  const finish = () => new Promise(resolve => {
    setTimeout(resolve, 3000)
    sbot.close(true, () => resolve())
  }).then(home.removeHome)
  try {
    if (sbot.id === feed) throw new ExitError(EXIT_ERROR, 'the feed to replicate is the node\'s own')
    sbot.ebt.request(sbot.id, true)
    sbot.ebt.request(feed, true)
    const address = 'net:' + peerHost + ':' + peerPort + '~shs:' + peerKey.slice(1, -'.ed25519'.length)
    process.stderr.write('ssb-db2-node: ' + sbot.id + ' replicating ' + feed + ' from ' + address + '\n')
    await call(sbot.conn.connect, address).catch(err => {
      throw new ExitError(EXIT_ERROR, 'could not connect to ' + address + ': ' + err.message)
    })
    let held = 0
    let lastGrowth = Date.now()
    for (;;) {
      const now = await heldSequence(sbot, feed)
      if (now !== held) lastGrowth = Date.now()
      held = now
      if (until !== null ? held >= until : (held > 0 && Date.now() - lastGrowth >= QUIET_MS)) break
      if (Date.now() > deadline) {
        throw new ExitError(EXIT_TIMEOUT, 'holds ' + held + (until !== null ? ' of the ' + until : '') + ' message(s) of ' +
          feed + ' after ' + timeout + ' s; this stack replicates by EBT only ' +
          '(["ebt","replicate"]), so a peer that refuses it sends nothing')
      }
      await sleep(POLL_MS)
    }
    const lines = await verifyHeld(sbot, feed)
    process.stdout.write(lines.join('\n') + '\n')
    process.stdout.write('SSB_REPLICATED feed=' + feed + ' count=' + lines.length + ' latest_sequence=' + held + '\n')
  } finally {
    await finish()
  }
}

async function main () {
  const [command, ...args] = process.argv.slice(2)
  const common = ['seed', 'network-key', 'dir']
  const flags = ['keep-home']
  if (command === 'serve') return serve(parseOptions(args, ['host', 'port', 'messages', 'publish-interval', ...common], flags))
  if (command === 'replicate') {
    const options = parseOptions(args, ['peer-host', 'peer-port', 'peer-public-key', 'feed', 'until-sequence', 'timeout', ...common], flags)
    // Bounded whatever the peer does.
    const watchdog = setTimeout(() => {
      process.stderr.write('ssb-db2-node: no result ' + (options.timeout || 60) + ' s + 5 s after start\n')
      process.exit(EXIT_TIMEOUT)
    }, (Number(options.timeout) || 60) * 1000 + 5000)
    watchdog.unref()
    await replicate(options)
    process.exit(0)
  }
  throw new ExitError(EXIT_USAGE, 'usage: ssb-db2-node.js serve|replicate ... (see the comment at the top)')
}

main().catch(err => {
  process.stderr.write('ssb-db2-node: ' + (err instanceof ExitError ? err.message : (err.stack || String(err))) + '\n')
  process.exit(err instanceof ExitError ? err.code : EXIT_ERROR)
})

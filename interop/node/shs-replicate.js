#!/usr/bin/env node
// An SSB client made of the npm packages ssb-server itself runs on, for the
// harness's client role (the `secret-handshake` target in
// conformance/targets/builtin.toml):
//
//   node shs-replicate.js --peer-host H --peer-port P --peer-public-key @<base64>.ed25519
//       --feed @<base64>.ed25519 [--network-key HEX] [--timeout SECONDS]
//
// Connects, runs the secret handshake as client (npm secret-handshake, box
// stream by pull-box-stream) with a fresh identity, calls
// createHistoryStream({id: FEED, keys: true, live: false}) over muxrpc and
// verifies every message with ssb-validate (signature, sequence, previous)
// and that each key is the message's id. Prints
// `SSB_REPLICATED feed=FEED count=N` and exits 0 only then; on any failure
// (a handshake that does not verify among them) prints the reason on stderr
// and exits 1. Same contract as `python -m reference_impl.ssb replicate`.
'use strict'

const net = require('net')
const pull = require('pull-stream')
const toPull = require('stream-to-pull-stream')
const shs = require('secret-handshake')
const sodium = require('chloride')
const muxrpc = require('muxrpc')
const ssbValidate = require('ssb-validate')

// The main network's caps.shs (ssb-caps); used when no network key is given.
const MAIN_NETWORK_KEY_HEX = 'd4a1cb88a66f02f8db635ce26441cc5dac1b08420ceaac230839b755845a9ffb'
const KNOWN_OPTIONS = ['peer-host', 'peer-port', 'peer-public-key', 'feed', 'network-key', 'timeout']

function fail (message) {
  process.stderr.write('shs-replicate: ' + message + '\n')
  process.exit(1)
}

function parseOptions (args) {
  const options = {}
  for (let i = 0; i < args.length; i += 2) {
    const name = args[i].startsWith('--') ? args[i].slice(2) : null
    if (!KNOWN_OPTIONS.includes(name)) fail('unknown argument ' + JSON.stringify(args[i]) + ' (known: --' + KNOWN_OPTIONS.join(', --') + ')')
    if (i + 1 >= args.length) fail('option --' + name + ' needs a value')
    options[name] = args[i + 1]
  }
  for (const name of ['peer-host', 'peer-port', 'peer-public-key', 'feed']) {
    if (options[name] === undefined) fail('--' + name + ' is required')
  }
  return options
}

function feedKey (feedId, option) {
  const match = /^@([A-Za-z0-9+/]{43}=)\.ed25519$/.exec(feedId)
  if (!match) fail(option + ' is not an @<base64>.ed25519 feed id: ' + feedId)
  return Buffer.from(match[1], 'base64')
}

function main () {
  const options = parseOptions(process.argv.slice(2))
  const port = Number(options['peer-port'])
  if (!Number.isInteger(port) || port <= 0 || port > 65535) fail('bad --peer-port ' + options['peer-port'])
  const timeoutSeconds = Number(options.timeout || 30)
  if (!(timeoutSeconds > 0)) fail('bad --timeout ' + options.timeout)
  const networkKeyHex = (options['network-key'] || MAIN_NETWORK_KEY_HEX).toLowerCase()
  if (!/^[0-9a-f]{64}$/.test(networkKeyHex)) fail('--network-key must be 32 bytes of hex')
  const networkKey = Buffer.from(networkKeyHex, 'hex')
  const serverKey = feedKey(options['peer-public-key'], '--peer-public-key')
  const feed = options.feed
  feedKey(feed, '--feed')

  setTimeout(() => fail('replication did not finish within ' + timeoutSeconds + ' s'), timeoutSeconds * 1000).unref()

  const identity = sodium.crypto_sign_keypair()
  const socket = net.connect(port, options['peer-host'])
  socket.on('error', (err) => fail('connection error: ' + err.message))
  const wire = toPull.duplex(socket)
  const handshake = shs.createClient(identity, networkKey, timeoutSeconds * 1000)(serverKey, (err, plain) => {
    if (err) fail('handshake failed: ' + err.message)
    replicate(plain, feed, () => socket.end())
  })
  pull(wire, handshake, wire)
}

function replicate (plain, feed, done) {
  // No local procedures: calls the server makes on us get muxrpc's error.
  // Four arguments: muxrpc 6 returns the API itself (three give a factory).
  const rpc = muxrpc({ createHistoryStream: 'source' }, {}, {}, null)
  pull(plain, rpc.stream, plain)
  pull(
    rpc.createHistoryStream({ id: feed, keys: true, live: false }),
    pull.collect((err, items) => {
      if (err) fail('createHistoryStream ended with an error: ' + (err.message || err))
      let state = ssbValidate.initial()
      items.forEach((item, index) => {
        const position = index + 1
        if (!item || typeof item !== 'object' || !item.value) fail('message ' + position + ': not {key, value, timestamp}: ' + JSON.stringify(item).slice(0, 200))
        if (item.value.author !== feed) fail('message ' + position + ': not a message of ' + feed)
        if (item.value.sequence !== position) fail('message ' + position + ': has sequence ' + item.value.sequence)
        const id = ssbValidate.id(item.value)
        if (item.key !== id) fail('message ' + position + ': key ' + item.key + ' is not its id ' + id)
        try {
          state = ssbValidate.append(state, null, item.value)
        } catch (invalid) {
          fail('message ' + position + ': ' + invalid.message)
        }
      })
      if (items.length === 0) fail('the peer sent no message of ' + feed)
      process.stdout.write('SSB_REPLICATED feed=' + feed + ' count=' + items.length + '\n')
      rpc.close(() => {
        done()
        process.exit(0)
      })
    })
  )
}

main()

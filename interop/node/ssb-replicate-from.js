#!/usr/bin/env node
// Makes a running ssb-server (started by scripts/ssb-server.sh replicate)
// replicate one feed from a peer the way it does on the real network, and
// reports what it got.
//
//   node ssb-replicate-from.js --dir DIR --peer-host H --peer-port P
//       --peer-key @...ed25519 --feed @...ed25519 --timeout SECONDS
//       [--until-sequence N]
//
// 1. Publishes, as the server's own identity, {type: 'contact', contact:
//    FEED, following: true}; ssb-friends then asks ssb-replicate (and
//    ssb-ebt) to replicate FEED. Waits until ssb-friends has FEED at hop 1.
// 3. Tells the server to connect to the peer (gossip.connect). ssb-server, as
//    the client of that connection, offers ebt.replicate; when the peer
//    refuses it, legacy replication (ssb-replicate legacy.js) asks the peer
//    for FEED with createHistoryStream {seq: last + 1, live: true} once the
//    peer has called createHistoryStream on it. Every message is validated
//    (signature, author, sequence, previous) by ssb-db on append.
// 4. Polls the server until it holds FEED up to N (--until-sequence), or,
//    without it, until it holds at least one message and has got no new one
//    for QUIET_MS (legacy replication streams live, so no end of stream says
//    "that was all"; whoever needs the whole feed compares, as the interop
//    case does with its own fetch). Only ssb-server's own connection reaches
//    the peer: a recording relay in between sees one session. Then reads the
//    feed back and checks each message again with ssb-validate and ssb-keys
//    (chain, signature, message id).
//
// Output (stdout), on success, exit 0:
//   SSB_MSG seq=1 key=%...sha256 verified=true      (one line per message)
//   SSB_REPLICATED feed=@... count=N latest_sequence=N
// Exit 4: a held message does not verify; 5: FEED not held (up to N) within
// the timeout (the server's log says why, e.g. ssb-replicate's "Error
// replicating with ..." for a message that failed validation); 1: other errors.
'use strict'

const path = require('path')
const pull = require('pull-stream')
const ssbKeys = require('ssb-keys')
const validate = require('ssb-validate')
const { connect, call, clientConfig } = require('./ssb-home')
const { verifyHeldItems } = require('./ssb-held')

const EXIT_ERROR = 1
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

function parseOptions (args, known) {
  const options = {}
  for (let i = 0; i < args.length; i += 2) {
    const name = args[i].replace(/^--/, '')
    if (!args[i].startsWith('--') || !known.includes(name)) throw new ExitError(EXIT_ERROR, 'unknown argument ' + args[i])
    if (i + 1 >= args.length) throw new ExitError(EXIT_ERROR, args[i] + ' needs a value')
    options[name] = args[i + 1]
  }
  for (const name of ['dir', 'peer-host', 'peer-port', 'peer-key', 'feed', 'timeout']) {
    if (options[name] === undefined) throw new ExitError(EXIT_ERROR, '--' + name + ' is required')
  }
  for (const name of ['peer-key', 'feed']) {
    if (!/^@[A-Za-z0-9+/]{43}=\.ed25519$/.test(options[name])) throw new ExitError(EXIT_ERROR, '--' + name + ' is not a feed id: ' + options[name])
  }
  return options
}

function sleep (ms) {
  return new Promise(resolve => setTimeout(resolve, ms))
}

function collect (source) {
  return new Promise((resolve, reject) => pull(source, pull.collect((err, items) => err ? reject(err) : resolve(items))))
}

function multiserverAddress (host, port, feedId) {
  return 'net:' + host + ':' + port + '~shs:' + feedId.slice(1, -'.ed25519'.length)
}

async function heldSequence (server, feed) {
  const clock = await call(server.getVectorClock)
  return clock[feed] || 0
}

// Every held message of FEED, checked again here: sequence order, the
// chain and signatures (ssb-validate, the validator ssb-db uses), and that
// the stored key is the message's id (ssb-keys hash).
async function verifyHeld (server, feed, hmacKey) {
  const items = await collect(server.createHistoryStream({ id: feed, keys: true }))
  return verifyHeldItems(items, {
    validate, ssbKeys, hmacKey: hmacKey, invalid: text => new ExitError(EXIT_INVALID_MESSAGE, text)
  })
}

async function run (options) {
  const dir = path.resolve(options.dir)
  const deadline = Date.now() + Number(options.timeout) * 1000
  if (!(deadline > Date.now())) throw new ExitError(EXIT_ERROR, 'bad --timeout ' + options.timeout)
  const config = clientConfig(dir)
  const feed = options.feed

  const until = options['until-sequence'] !== undefined ? Number(options['until-sequence']) : null
  if (until !== null && (!Number.isInteger(until) || until < 1)) throw new ExitError(EXIT_ERROR, 'bad --until-sequence ' + options['until-sequence'])

  const server = await connect(dir)
  try {
    const whoami = await call(server.whoami)
    if (whoami.id === feed) throw new ExitError(EXIT_ERROR, 'the feed to replicate is the server\'s own')
    await call(server.publish, { type: 'contact', contact: feed, following: true })
    for (;;) {
      const hops = await call(server.friends.hops, {})
      if (hops[feed] === 1) break
      if (Date.now() > deadline) throw new ExitError(EXIT_TIMEOUT, 'ssb-friends did not take up the follow of ' + feed + ' in time')
      await sleep(POLL_MS)
    }
    const address = multiserverAddress(options['peer-host'], options['peer-port'], options['peer-key'])
    const connectToPeer = () => call(server.gossip.connect, address).catch(err => {
      throw new ExitError(EXIT_ERROR, 'ssb-server could not connect to ' + address + ': ' + err.message)
    })
    await connectToPeer()

    let held = 0
    let connections = 1
    let lastGrowth = Date.now()
    const done = () => until !== null ? held >= until : (held > 0 && Date.now() - lastGrowth >= QUIET_MS)
    for (;;) {
      const now = await heldSequence(server, feed)
      if (now !== held) lastGrowth = Date.now()
      held = now
      if (done()) break
      if (Date.now() > deadline) {
        throw new ExitError(EXIT_TIMEOUT, 'ssb-server holds ' + held + (until !== null ? ' of the ' + until : '') +
          ' message(s) of ' + feed + ' after ' + options.timeout + ' s (' + connections + ' connection(s) to the peer). ' +
          'ssb-db appends only a message that continues the feed it holds (a first message of ' +
          'sequence 1); it keeps others aside without a word in its log')
      }
      // ssb-gossip's schedule drops a connection to a peer that is not a
      // long-term one after 10 s; as on the network, connect again, and
      // legacy replication asks for held + 1 on the new connection.
      const peers = await call(server.gossip.peers)
      const peer = peers.find(p => p.key === options['peer-key'])
      if (!peer || (peer.state !== 'connected' && peer.state !== 'connecting')) {
        connections++
        process.stderr.write('ssb-replicate-from: connection to the peer dropped with ' + held +
          ' message(s) held; connecting again\n')
        await connectToPeer()
      }
      await sleep(POLL_MS)
    }
    const hmacKey = null // main-network messages are signed without an hmac key
    const lines = await verifyHeld(server, feed, hmacKey)
    process.stdout.write(lines.join('\n') + '\n')
    process.stdout.write('SSB_REPLICATED feed=' + feed + ' count=' + lines.length + ' latest_sequence=' + held + '\n')
  } finally {
    await call(server.close, true).catch(() => {})
  }
}

async function main () {
  const options = parseOptions(process.argv.slice(2),
    ['dir', 'peer-host', 'peer-port', 'peer-key', 'feed', 'timeout', 'until-sequence'])
  // Bounded whatever the server or the peer do.
  const watchdog = setTimeout(() => {
    process.stderr.write('ssb-replicate-from: no result ' + options.timeout + ' s + 5 s after start\n')
    process.exit(EXIT_TIMEOUT)
  }, Number(options.timeout) * 1000 + 5000)
  watchdog.unref()
  await run(options)
}

main().then(() => process.exit(0), err => {
  process.stderr.write('ssb-replicate-from: ' + (err instanceof ExitError ? err.message : (err.stack || String(err))) + '\n')
  process.exit(err instanceof ExitError ? err.code : EXIT_ERROR)
})

#!/usr/bin/env node
// ilp-plugin-mini-accounts (npm, pinned in interop/node/mini-accounts/package.json,
// installed by scripts/install-node-deps.sh) as a BTP server, set up as an
// Interledger connector runs it: the multi-account BTP server connectors
// (ilp-connector, moneyd) give their clients. Run it through
// scripts/ilp-plugin-mini-accounts.sh; the target `ilp-plugin-mini-accounts`
// in conformance/targets/builtin.toml does.
//
//   node mini-accounts-server.js --port P [--host 127.0.0.1] [--ilp-address test.conformance]
//
// Listens on HOST:PORT (WebSocket, BTP 2.0) and prints
// `BTP_READY url=ws://HOST:PORT/ port=PORT` once listening (PORT 0: a free
// port); serves until SIGTERM/SIGINT (exit 0).
//
// The plugin gets what a connector gives it: a store (ilp-store-memory; with
// a store mini-accounts runs in its "username or hash of the token" account
// mode, src/index.ts lines 111-113), the connector's ILDCP answer
// (debugHostIldcpInfo: the address ILP-ADDRESS, asset XRP, scale 9; a client
// asking `peer.config` gets ILP-ADDRESS.<its account>) and a data handler for
// the ILP Prepares its clients send: a connector without routes, answering
// each with an ILP Reject F02 (Unreachable). Nothing else is overridden:
// authentication (every auth_token is accepted and names the account
// sha256(token), mini-accounts' design), framing, errors and the WebSocket
// are the plugin's own code (and ilp-plugin-btp 1.5.0's, its base class).
// Messages without an `ilp` entry get mini-accounts' own Error F00 ("invalid
// packet, no ilp protocol data."), as in a connector.
//
// Output (stdout): BTP_READY, then BTP_PREPARE {json} per ILP Prepare its data
// handler gets. Tokens are never printed (leave DEBUG unset: ilp-logger's
// trace output names them).
'use strict'

const IlpPacket = require('ilp-packet')
const MiniAccountsPlugin = require('ilp-plugin-mini-accounts').default
const MemoryStore = require('ilp-store-memory')

function die (code, message) {
  process.stderr.write(`mini-accounts-server: error: ${message}\n`)
  process.exit(code)
}

function parseArgs (argv) {
  const opts = { host: '127.0.0.1', port: null, ilpAddress: 'test.conformance' }
  for (let i = 0; i < argv.length; i++) {
    const value = () => {
      if (i + 1 >= argv.length) die(2, `${argv[i]} needs a value`)
      return argv[++i]
    }
    switch (argv[i]) {
      case '--host': opts.host = value(); break
      case '--port': opts.port = value(); break
      case '--ilp-address': opts.ilpAddress = value(); break
      default: die(2, `unknown argument ${argv[i]}`)
    }
  }
  if (!/^[0-9]+$/.test(opts.port || '') || Number(opts.port) > 65535) die(2, '--port is required (0..65535)')
  opts.port = Number(opts.port)
  if (!/^(g|private|example|peer|self|test[1-3]?|local)([.][a-zA-Z0-9_~-]+)+$/.test(opts.ilpAddress)) {
    die(2, `--ilp-address is not an ILP address: ${opts.ilpAddress}`)
  }
  return opts
}

async function main () {
  const opts = parseArgs(process.argv.slice(2))
  const plugin = new MiniAccountsPlugin({
    // wsOpts.port 0 makes mini-accounts fall back to port 3000 in its own
    // bookkeeping (src/index.ts lines 95-104), but the WebSocket server gets
    // these options as they are, so it listens on a free port.
    wsOpts: { host: opts.host, port: opts.port },
    debugHostIldcpInfo: { clientAddress: opts.ilpAddress, assetCode: 'XRP', assetScale: 9 }
  }, { store: new MemoryStore() })
  plugin.registerDataHandler(async (data) => {
    const prepare = IlpPacket.deserializeIlpPrepare(data)
    process.stdout.write(`BTP_PREPARE ${JSON.stringify({ destination: prepare.destination, amount: prepare.amount })}\n`)
    return IlpPacket.serializeIlpReject({
      code: 'F02',
      triggeredBy: opts.ilpAddress,
      message: 'no route (conformance test connector)',
      data: Buffer.alloc(0)
    })
  })
  await plugin.connect()
  const wss = plugin._wss
  const ready = () => {
    const address = wss.address()
    const host = address.family === 'IPv6' || address.family === 6 ? `[${address.address}]` : address.address
    process.stdout.write(`BTP_READY url=ws://${host}:${address.port}/ port=${address.port}\n`)
  }
  if (wss.address()) ready()
  else wss.once('listening', ready)
  wss.on('error', (err) => die(1, `cannot listen on ${opts.host}:${opts.port}: ${err.message}`))
  const stop = async () => {
    setTimeout(() => process.exit(0), 3000)
    try { await plugin.disconnect() } catch (e) { }
    process.exit(0)
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
}

main().catch((err) => die(1, err && err.stack ? err.stack : String(err)))

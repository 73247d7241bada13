#!/usr/bin/env node
// A BTP peer built on ilp-plugin-btp (npm), the JavaScript BTP implementation
// Interledger connectors use: the independent implementation the harness
// interoperates with.  Run it through scripts/ilp-plugin-btp.sh.
//
//   node ilp-plugin-btp-peer.js server --port P [--host 127.0.0.1] (--token T | --token-env VAR | --token-file F)
//        [requests] [--stay S] [--timeout S]
//   node ilp-plugin-btp-peer.js client --url ws://HOST:PORT/ (--token T | --token-env VAR | --token-file F)
//        [requests] [--stay S] [--timeout S]
//
// requests (sent once connected, in order, each waiting for its answer):
//   --send-message TEXT    plugin.sendData(TEXT as UTF-8): a Message whose primary
//                          entry is `ilp`, content type 0 (application/octet-stream)
//   --send-money AMOUNT    plugin.sendMoney(AMOUNT): a Transfer of AMOUNT
//   --send-balance         a Message whose primary entry is `balance` (content type 2,
//                          data {}): the balance query of docs/btp-adapter.md
//
// The server listens (new BtpPlugin({listener: {port, secret}}), on --host
// only) and prints `BTP_READY url=ws://HOST:PORT/ port=PORT` once listening;
// requests go to the first client once it has authenticated.  The client
// connects with server 'btp+ws://:TOKEN@HOST:PORT/' (or the btpToken option
// when the token is not URL-safe: the plugin would send the URL's
// percent-encoding as the token).
//
// Either side answers the peer's requests:
//   Message with an `ilp` entry -> the data handler: Response whose `ilp`
//     entry is `echo:` + the data (printed BTP_DATA)
//   Transfer -> the money handler: balance += amount, empty Response
//     (printed BTP_MONEY)
//   Message whose primary entry is `balance` -> Response with primary entry
//     `balance`, content type 2, {"balance":"<decimal>"} (the adapter)
//   anything else -> as ilp-plugin-btp does (a Message without `ilp`: empty Response)
//
// ilp-plugin-btp's base class does not move money (its sendMoney is a no-op
// and an incoming Transfer is answered with an Error); the README says
// plugins "should override sendMoney and _handleMoney", and so does this
// script, with a plain Transfer and a balance tally.  The balance adapter
// is an override of _handleData.  Everything else -- auth, framing, request
// ids, errors, the WebSocket -- is the plugin's own code.
//
// Output (stdout): BTP_READY (server), BTP_CONNECTED, BTP_RESPONSE {json} per
// request, BTP_DATA {json}, BTP_MONEY {json}, BTP_DONE.  The token is never
// printed.  With --stay S it leaves S seconds after its requests (server
// default: until SIGTERM; client default: 0).  Exit: 0 ok, 1 error,
// 2 usage, 3 not connected (auth refused, or not within --timeout, default 20 s), 6 a request failed.
'use strict'

let connected = false

const crypto = require('crypto')
const { requireApi, requireLibrary } = require('./versioned-require')
// The pinned ilp-plugin-btp, or a versioned target's release (docs/versions.md).
const loaded = requireLibrary('ilp-plugin-btp')
const BtpPlugin = typeof loaded.library === 'function' ? loaded.library : loaded.library.default
requireApi('ilp-plugin-btp', loaded.version, { BtpPlugin }, [
  'BtpPlugin', 'BtpPlugin.prototype.connect', 'BtpPlugin.prototype.disconnect',
  'BtpPlugin.prototype.sendData', 'BtpPlugin.prototype.registerDataHandler',
  'BtpPlugin.prototype.registerMoneyHandler', 'BtpPlugin.prototype._call'
])
const BtpPacket = require('btp-packet')

function die (code, message) {
  process.stderr.write(`ilp-plugin-btp-peer: error: ${message}\n`)
  process.exit(code)
}

function line (tag, body) {
  process.stdout.write(body === undefined ? `${tag}\n` : `${tag} ${JSON.stringify(body)}\n`)
}

function parseArgs (argv) {
  const opts = { role: argv[0], host: '127.0.0.1', port: null, url: null, token: null, stay: null, timeout: 20, requests: [] }
  if (opts.role !== 'server' && opts.role !== 'client') die(2, 'first argument must be server or client')
  const value = (i) => {
    if (i + 1 >= argv.length) die(2, `${argv[i]} needs a value`)
    return argv[i + 1]
  }
  for (let i = 1; i < argv.length; i++) {
    const arg = argv[i]
    switch (arg) {
      case '--host': opts.host = value(i); i++; break
      case '--port': opts.port = Number(value(i)); i++; break
      case '--url': opts.url = value(i); i++; break
      case '--token': opts.token = value(i); i++; break
      case '--token-env': {
        const name = value(i); i++
        if (process.env[name] === undefined) die(2, `environment variable ${name} is not set`)
        opts.token = process.env[name]
        break
      }
      case '--token-file': {
        // The harness hands secrets over as 0600 files: neither the process
        // list nor the environment shows them.  One trailing newline is not
        // part of the token.
        const file = value(i); i++
        try {
          opts.token = require('fs').readFileSync(file, 'utf8').replace(/\r?\n$/, '')
        } catch (err) {
          die(2, `cannot read --token-file ${file}: ${err.code || err.message}`)
        }
        break
      }
      case '--stay': opts.stay = Number(value(i)); i++; break
      case '--timeout': opts.timeout = Number(value(i)); i++; break
      case '--send-message': opts.requests.push({ kind: 'message', text: value(i) }); i++; break
      case '--send-money': {
        const amount = value(i); i++
        if (!/^[0-9]+$/.test(amount)) die(2, `--send-money needs a non-negative integer, got ${amount}`)
        opts.requests.push({ kind: 'money', amount })
        break
      }
      case '--send-balance': opts.requests.push({ kind: 'balance' }); break
      default: die(2, `unknown argument ${arg}`)
    }
  }
  if (opts.token === null) die(2, '--token, --token-env or --token-file is required')
  if (opts.role === 'server' && !(Number.isInteger(opts.port) && opts.port >= 0 && opts.port <= 65535)) die(2, '--port is required (0..65535)')
  if (opts.role === 'client' && !opts.url) die(2, '--url is required')
  if (opts.stay !== null && !(opts.stay >= 0)) die(2, '--stay must be >= 0')
  if (!(opts.timeout > 0)) die(2, '--timeout must be > 0')
  return opts
}

class PeerPlugin extends BtpPlugin {
  constructor (options) {
    super(options)
    this.balance = 0n
  }

  async sendMoney (amount) {
    await this._call('', {
      type: BtpPacket.TYPE_TRANSFER,
      requestId: crypto.randomBytes(4).readUInt32BE(0),
      data: { amount: String(amount), protocolData: [] }
    })
  }

  async _handleMoney (from, btpPacket) {
    if (!this._moneyHandler) throw new Error('no money handler registered')
    await this._moneyHandler(btpPacket.data.amount)
    return []
  }

  async _handleData (from, btpPacket) {
    const first = btpPacket.data.protocolData[0]
    if (first && first.protocolName === 'balance') {
      return [{
        protocolName: 'balance',
        contentType: BtpPacket.MIME_APPLICATION_JSON,
        data: Buffer.from(JSON.stringify({ balance: this.balance.toString() }))
      }]
    }
    return super._handleData(from, btpPacket)
  }
}

function entriesJson (protocolData) {
  return protocolData.map((p) => {
    const out = { name: p.protocolName, content_type: p.contentType, data_hex: p.data.toString('hex') }
    if (p.contentType === 1 || p.contentType === 2) out.data_text = p.data.toString('utf8')
    return out
  })
}

async function sendRequest (plugin, request) {
  try {
    if (request.kind === 'message') {
      const reply = await plugin.sendData(Buffer.from(request.text, 'utf8'))
      line('BTP_RESPONSE', { request: 'message', ok: true, ilp_hex: reply.toString('hex'), ilp_text: reply.toString('utf8') })
    } else if (request.kind === 'money') {
      await plugin.sendMoney(request.amount)
      line('BTP_RESPONSE', { request: `money:${request.amount}`, ok: true })
    } else {
      const response = await plugin._call('', {
        type: BtpPacket.TYPE_MESSAGE,
        requestId: crypto.randomBytes(4).readUInt32BE(0),
        data: { protocolData: [{ protocolName: 'balance', contentType: BtpPacket.MIME_APPLICATION_JSON, data: Buffer.from('{}') }] }
      })
      const body = { request: 'balance', ok: true, protocol_data: entriesJson(response.protocolData) }
      const first = response.protocolData[0]
      if (first && first.protocolName === 'balance') {
        try { body.balance = JSON.parse(first.data.toString('utf8')).balance } catch (e) { body.balance_error = e.message }
      }
      line('BTP_RESPONSE', body)
    }
    return true
  } catch (err) {
    // _call rejects with Error(JSON.stringify(btpErrorData)) for a BTP Error.
    let error = err.message
    try { error = JSON.parse(err.message) } catch (e) { }
    line('BTP_RESPONSE', { request: request.kind === 'money' ? `money:${request.amount}` : request.kind, ok: false, error })
    return false
  }
}

function urlSafe (token) {
  return /^[A-Za-z0-9._~-]*$/.test(token)
}

async function main () {
  const opts = parseArgs(process.argv.slice(2))
  let plugin
  if (opts.role === 'server') {
    plugin = new PeerPlugin({
      listener: { port: opts.port, secret: opts.token, wsOpts: { host: opts.host, port: opts.port } }
    })
  } else {
    let target
    try { target = new URL(opts.url) } catch (e) { die(2, `bad --url ${opts.url}`) }
    if (target.protocol !== 'ws:' && target.protocol !== 'wss:') die(2, '--url must be ws:// or wss://')
    const hostPort = `${target.host}${target.pathname}`
    plugin = urlSafe(opts.token)
      ? new PeerPlugin({ server: `btp+${target.protocol}//:${opts.token}@${hostPort}`, reconnectInterval: 250 })
      : new PeerPlugin({ server: `btp+${target.protocol}//${hostPort}`, btpToken: opts.token, reconnectInterval: 250 })
  }
  plugin.registerDataHandler(async (data) => {
    line('BTP_DATA', { data_hex: data.toString('hex'), data_text: data.toString('utf8') })
    return Buffer.concat([Buffer.from('echo:'), data])
  })
  plugin.registerMoneyHandler(async (amount) => {
    plugin.balance += BigInt(amount)
    line('BTP_MONEY', { amount: String(amount), balance: plugin.balance.toString() })
  })

  const timer = setTimeout(() => die(3, `not connected within ${opts.timeout} s`), opts.timeout * 1000)
  const connecting = plugin.connect()
  if (opts.role === 'server') {
    // connect() creates the WebSocket server synchronously and resolves only
    // once a client has authenticated.
    const wss = plugin._wss
    wss.on('error', (err) => die(1, `cannot listen on ${opts.host}:${opts.port}: ${err.message}`))
    wss.on('listening', () => {
      const address = wss.address()
      const host = address.family === 'IPv6' || address.family === 6 ? `[${address.address}]` : address.address
      line(`BTP_READY url=ws://${host}:${address.port}/ port=${address.port}`)
    })
  }
  await connecting
  clearTimeout(timer)
  connected = true
  line('BTP_CONNECTED', { role: opts.role })

  let failed = 0
  for (const request of opts.requests) {
    if (!await sendRequest(plugin, request)) failed++
  }
  const stay = opts.stay !== null ? opts.stay : (opts.role === 'server' ? Infinity : 0)
  const finish = async () => {
    line('BTP_DONE', { balance: plugin.balance.toString(), failed })
    try { await plugin.disconnect() } catch (e) { }
    process.exit(failed ? 6 : 0)
  }
  process.on('SIGTERM', finish)
  process.on('SIGINT', finish)
  if (stay !== Infinity) setTimeout(finish, stay * 1000)
}

main().catch((err) => die(connected ? 1 : 3, err && err.message ? err.message : String(err)))

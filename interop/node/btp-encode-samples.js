#!/usr/bin/env node
// btp-packet -> Python: encodes a fixed set of sample packets with
// btp-packet (serialize() and its serializeResponse/Error/Message/Transfer
// helpers, the way ilp-plugin-btp calls them) and prints them as JSON:
//
//   { "tool": "btp-packet <version>",
//     "samples": [ { "id", "description", "hex", "packet" } ] }
//
// `packet` is the sample in the JSON form of vectors/btp/packets.json
// (reference_impl.btp.packet.packet_to_json), built from what was handed to
// btp-packet, not from decoding its output.  tests/interop/
// test_btp_packet_crosscheck.py decodes every `hex` with the reference codec
// and compares, and checks the reference encoder writes the same bytes.
//
// Usage: node interop/node/btp-encode-samples.js
'use strict'

const crypto = require('crypto')
const btp = require('btp-packet')
const { fromJs } = require('./btp-common')

const version = require('btp-packet/package.json').version

function bytes (label, size) {
  // Deterministic filler: bytes of a label's repeated SHA-256.
  const out = Buffer.alloc(size)
  let block = crypto.createHash('sha256').update(label).digest()
  for (let i = 0; i < size; i++) {
    if (i % 32 === 0 && i > 0) block = crypto.createHash('sha256').update(block).digest()
    out[i] = block[i % 32]
  }
  return out
}

function text (size, seed) {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789 '
  const raw = bytes('text/' + seed, size)
  let s = ''
  for (const b of raw) s += alphabet[b % alphabet.length]
  return s
}

const pd = (protocolName, contentType, data) => ({ protocolName, contentType, data: Buffer.isBuffer(data) ? data : Buffer.from(data, 'utf8') })
const TIME = '2017-11-15T14:00:00.000Z'

const samples = []

function add (id, description, packet, encode) {
  const buffer = encode ? encode() : btp.serialize(packet)
  // The JSON form of what went in: triggeredAt as the GeneralizedTime
  // btp-packet writes, data as UTF-8 bytes, Buffers as hex.
  const asRead = {
    type: packet.type,
    requestId: packet.requestId,
    data: Object.assign({}, packet.data, packet.type === btp.TYPE_ERROR ? { triggeredAt: new Date(packet.data.triggeredAt) } : {})
  }
  samples.push({ id, description, hex: buffer.toString('hex'), packet: fromJs(asRead) })
}

add('response-empty', 'serializeResponse with no protocol data',
  { type: btp.TYPE_RESPONSE, requestId: 1, data: { protocolData: [] } },
  () => btp.serializeResponse(1, []))
add('response-ilp', 'Response with an ilp entry',
  { type: btp.TYPE_RESPONSE, requestId: 0xfffffffe, data: { protocolData: [pd('ilp', btp.MIME_APPLICATION_OCTET_STREAM, bytes('fulfill', 45))] } })
add('message-auth', 'the auth Message as ilp-plugin-btp sends it',
  { type: btp.TYPE_MESSAGE, requestId: 123456789, data: { protocolData: [pd('auth', btp.MIME_APPLICATION_OCTET_STREAM, Buffer.alloc(0)), pd('auth_username', btp.MIME_TEXT_PLAIN_UTF8, 'alice'), pd('auth_token', btp.MIME_TEXT_PLAIN_UTF8, 'secret')] } },
  () => btp.serializeMessage(123456789, [pd('auth', btp.MIME_APPLICATION_OCTET_STREAM, Buffer.alloc(0)), pd('auth_username', btp.MIME_TEXT_PLAIN_UTF8, 'alice'), pd('auth_token', btp.MIME_TEXT_PLAIN_UTF8, 'secret')]))
add('message-empty', 'Message without protocol data',
  { type: btp.TYPE_MESSAGE, requestId: 0, data: { protocolData: [] } })
add('message-ilp-large', 'Message with a 70000-byte ilp entry (three-byte long-form lengths)',
  { type: btp.TYPE_MESSAGE, requestId: 2, data: { protocolData: [pd('ilp', 0, bytes('large', 70000))] } })
add('message-content-types', 'one entry of each content type, UTF-8 text beyond ASCII, content type 200',
  { type: btp.TYPE_MESSAGE, requestId: 3, data: { protocolData: [pd('a', 0, bytes('a', 3)), pd('b', 1, 'grüße ✓'), pd('c', 2, '{"k":[1,2,3]}'), pd('d', 200, bytes('d', 2))] } })
const many = []
for (let i = 0; i < 300; i++) many.push(pd('p' + i, i % 3, i % 3 ? 'v' + i : bytes('m' + i, i % 5)))
add('message-300-entries', '300 entries: a two-byte count', { type: btp.TYPE_MESSAGE, requestId: 4, data: { protocolData: many } })
const exactly256 = many.slice(0, 256)
add('message-256-entries', '256 entries', { type: btp.TYPE_MESSAGE, requestId: 5, data: { protocolData: exactly256 } })
add('message-long-name', 'a 200-character protocol name', { type: btp.TYPE_MESSAGE, requestId: 6, data: { protocolData: [pd('x'.repeat(200), 1, 'y')] } })
add('transfer-0', 'serializeTransfer of amount 0',
  { type: btp.TYPE_TRANSFER, requestId: 7, data: { amount: '0', protocolData: [] } },
  () => btp.serializeTransfer({ amount: '0' }, 7, []))
add('transfer-max', 'Transfer of amount 2^64-1',
  { type: btp.TYPE_TRANSFER, requestId: 8, data: { amount: '18446744073709551615', protocolData: [pd('paychan', 2, '{"claim":"c"}')] } })
add('transfer-typical', 'Transfer with a claim',
  { type: btp.TYPE_TRANSFER, requestId: 9, data: { amount: '1000', protocolData: [pd('claim', 0, bytes('claim', 96))] } })
let index = 0
for (const [code, name] of [['T00', 'UnreachableError'], ['F00', 'NotAcceptedError'], ['F01', 'InvalidFieldsError'],
  ['F03', 'TransferNotFoundError'], ['F04', 'InvalidFulfillmentError'], ['F05', 'DuplicateIdError'],
  ['F06', 'AlreadyRolledBackError'], ['F07', 'AlreadyFulfilledError'], ['F08', 'InsufficientBalanceError']]) {
  index++
  add('error-' + code.toLowerCase(), 'serializeError ' + code + ' ' + name,
    { type: btp.TYPE_ERROR, requestId: 100 + index, data: { code, name, triggeredAt: TIME, data: '', protocolData: [] } },
    () => btp.serializeError({ code, name, triggeredAt: TIME, data: '' }, 100 + index, []))
}
add('error-time-millis', 'Error with milliseconds and text data',
  { type: btp.TYPE_ERROR, requestId: 200, data: { code: 'F00', name: 'NotAcceptedError', triggeredAt: '2017-12-24T16:14:32.279Z', data: 'grüße', protocolData: [pd('x', 1, 'y')] } })
add('error-time-round-second', 'Error at a whole second: btp-packet still writes .000',
  { type: btp.TYPE_ERROR, requestId: 201, data: { code: 'T00', name: 'UnreachableError', triggeredAt: '2017-12-25T00:00:00.000Z', data: '', protocolData: [] } })
add('error-data-8192', 'Error with 8192 bytes of data',
  { type: btp.TYPE_ERROR, requestId: 202, data: { code: 'F00', name: 'NotAcceptedError', triggeredAt: TIME, data: text(8192, 'e'), protocolData: [] } })

process.stdout.write(JSON.stringify({ tool: 'btp-packet ' + version, samples }, null, 1) + '\n')

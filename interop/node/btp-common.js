'use strict'
// Conversions between the project's JSON form of a BTP packet (the `packet`
// objects of vectors/btp/packets.json, written by
// reference_impl.btp.packet.packet_to_json) and btp-packet's objects.
//
// JSON form: { type, type_id, request_id, amount (decimal string),
//   code, name, triggered_at (GeneralizedTime text), data_hex,
//   protocol_data: [{ name, content_type, data_hex }] }
// btp-packet: { type, requestId, data: { amount (string), code, name,
//   triggeredAt (Date when read, date string when written), data (UTF-8
//   string), protocolData: [{ protocolName, contentType, data (Buffer) }] } }

const GENERALIZED_TIME = /^(\d{4})(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)(?:\.(\d{1,3}))?Z$/

// "20171224161432.27Z" -> "2017-12-24T16:14:32.270Z" (what Date#toISOString gives), or null.
function generalizedTimeToIso (text) {
  const m = GENERALIZED_TIME.exec(text)
  if (!m) return null
  return m[1] + '-' + m[2] + '-' + m[3] + 'T' + m[4] + ':' + m[5] + ':' + m[6] + '.' + (m[7] || '').padEnd(3, '0') + 'Z'
}

// btp-packet's inverse of generalizedTimeToIso for what it writes: always .mmmZ.
function isoToGeneralizedTime (iso) {
  return iso.replace(/[-:T]/g, '')
}

function entriesToJs (entries) {
  return (entries || []).map(e => ({
    protocolName: e.name,
    contentType: e.content_type,
    data: Buffer.from(e.data_hex, 'hex')
  }))
}

function entriesFromJs (entries) {
  return entries.map(e => ({
    name: e.protocolName,
    content_type: e.contentType,
    data_hex: Buffer.from(e.data).toString('hex')
  }))
}

// Our JSON form -> the object btp-packet's serialize() takes.  Throws for
// the BTP 1 types, which btp-packet 2.x does not have.
function toJs (packet) {
  const protocolData = entriesToJs(packet.protocol_data)
  switch (packet.type_id) {
    case 1:
    case 6:
      return { type: packet.type_id, requestId: packet.request_id, data: { protocolData } }
    case 7:
      return { type: 7, requestId: packet.request_id, data: { amount: packet.amount, protocolData } }
    case 2: {
      const iso = generalizedTimeToIso(packet.triggered_at)
      return {
        type: 2,
        requestId: packet.request_id,
        data: {
          code: packet.code,
          name: packet.name,
          triggeredAt: iso === null ? packet.triggered_at : iso,
          data: Buffer.from(packet.data_hex, 'hex').toString('utf8'),
          protocolData
        }
      }
    }
    default:
      throw new Error('btp-packet has no packet type ' + packet.type_id)
  }
}

const TYPE_NAMES = { 1: 'Response', 2: 'Error', 6: 'Message', 7: 'Transfer' }

// What btp-packet's deserialize() returned -> our JSON form.  A triggeredAt
// that is an Invalid Date becomes the string "Invalid Date".
function fromJs (js) {
  const out = { type: TYPE_NAMES[js.type] || String(js.type), type_id: js.type, request_id: js.requestId }
  if (js.type === 7) out.amount = String(js.data.amount)
  if (js.type === 2) {
    out.code = js.data.code
    out.name = js.data.name
    const when = js.data.triggeredAt
    out.triggered_at = when instanceof Date
      ? (isNaN(when) ? 'Invalid Date' : isoToGeneralizedTime(when.toISOString()))
      : String(when)
    out.data_hex = Buffer.from(js.data.data, 'utf8').toString('hex')
  }
  out.protocol_data = entriesFromJs(js.data.protocolData)
  return out
}

module.exports = { generalizedTimeToIso, isoToGeneralizedTime, toJs, fromJs, entriesToJs, entriesFromJs }

#!/usr/bin/env node
// Cross-checks the project's golden BTP vectors against btp-packet, the npm
// codec that ilp-plugin-btp (and so most BTP deployments) runs on:
//
//   packets.json    every vector must deserialize to the vector's fields
//                   (type, requestId, amount, code, name, triggeredAt, data,
//                   each protocolData entry), and serializing those fields
//                   must give the vector's bytes (canonical_hex for the
//                   non-canonical ones)
//   malformed.json  every vector must make deserialize() throw
//
// A vector may carry `js_divergence`: a documented, deliberate difference
// between the spec (which the vector follows) and btp-packet.  Such a vector
// that btp-packet disagrees with is reported as `diverges`, not as a
// failure; one that no longer disagrees is reported as ok with a note.
//
// Usage: node interop/node/check-btp-vectors.js DIR_OR_FILE...
//   A directory means packets.json and malformed.json inside it (each must
//   exist); a file is checked by its base name.  Prints one line per vector,
//   `ok <file> <id>`, `FAIL <file> <id>: why` or `diverges <file> <id>: ...`,
//   then a summary, and exits non-zero when any vector failed or nothing
//   was checked.
'use strict'

const fs = require('fs')
const path = require('path')
const btp = require('btp-packet')
const { generalizedTimeToIso, toJs } = require('./btp-common')
const { runVectorChecks } = require('./vector-report')

const VECTOR_FILES = ['packets.json', 'malformed.json']

class Findings {
  constructor () {
    this.problems = []
    this.notes = []
  }

  fail (message) { this.problems.push(message) }
  note (message) { this.notes.push(message) }

  equal (what, actual, expected) {
    if (JSON.stringify(actual) !== JSON.stringify(expected)) {
      this.fail(what + ': vector has ' + shorten(JSON.stringify(expected)) + ' but btp-packet gives ' + shorten(JSON.stringify(actual)))
    }
  }
}

function shorten (text) {
  text = String(text)
  return text.length > 120 ? text.slice(0, 56) + '...' + text.slice(-56) + ' (' + text.length + ' chars)' : text
}

function hex (value, what) {
  if (typeof value !== 'string' || !/^([0-9a-fA-F]{2})*$/.test(value)) {
    throw new Error((what || 'field') + ' is not a hex string: ' + shorten(JSON.stringify(value)))
  }
  return Buffer.from(value, 'hex')
}

function vectorId (vector, index) {
  return vector && vector.id !== undefined ? String(vector.id) : '#' + index
}

// ---------------------------------------------------------------- packets.json

function checkValid (vector, findings) {
  if (!vector.packet || vector.hex === undefined) throw new Error('vector lacks hex or packet')
  const wire = hex(vector.hex, 'hex')
  const expected = vector.packet
  let js
  try {
    js = btp.deserialize(wire)
  } catch (err) {
    findings.fail('btp-packet cannot deserialize it: ' + err.message)
    return
  }
  findings.equal('type', js.type, expected.type_id)
  findings.equal('requestId', js.requestId, expected.request_id)
  const data = js.data || {}
  if (expected.type_id === 7) findings.equal('amount', String(data.amount), expected.amount)
  if (expected.type_id === 2) {
    findings.equal('code', data.code, expected.code)
    findings.equal('name', data.name, expected.name)
    const when = data.triggeredAt
    if (!(when instanceof Date) || isNaN(when)) {
      findings.fail('triggeredAt: vector has ' + expected.triggered_at + ' but btp-packet gives ' + String(when))
    } else {
      findings.equal('triggeredAt', when.toISOString(), generalizedTimeToIso(expected.triggered_at))
    }
    findings.equal('data (btp-packet reads it as UTF-8 text)', Buffer.from(String(data.data), 'utf8').toString('hex'), expected.data_hex)
  }
  const entries = data.protocolData || []
  findings.equal('protocolData length', entries.length, expected.protocol_data.length)
  const n = Math.min(entries.length, expected.protocol_data.length)
  for (let i = 0; i < n; i++) {
    const got = entries[i]
    const want = expected.protocol_data[i]
    findings.equal('protocolData[' + i + '].protocolName', got.protocolName, want.name)
    findings.equal('protocolData[' + i + '].contentType', got.contentType, want.content_type)
    findings.equal('protocolData[' + i + '].data', Buffer.from(got.data).toString('hex'), want.data_hex)
  }

  // The other direction: btp-packet's encoding of the same fields.
  const canonical = vector.canonical === false ? vector.canonical_hex : vector.hex
  if (canonical === undefined) throw new Error('non-canonical vector without canonical_hex')
  let encoded
  try {
    encoded = btp.serialize(toJs(expected))
  } catch (err) {
    findings.fail('btp-packet cannot serialize the fields: ' + err.message)
    return
  }
  findings.equal('serialize(fields)', encoded.toString('hex'), String(canonical).toLowerCase())
  if (vector.canonical === false) findings.note('not canonical; serialize gives canonical_hex')
}

// ---------------------------------------------------------------- malformed.json

function checkMalformed (vector, findings) {
  if (vector.hex === undefined) throw new Error('vector lacks hex')
  const wire = hex(vector.hex, 'hex')
  let js
  try {
    js = btp.deserialize(wire)
  } catch (err) {
    findings.note('btp-packet: ' + String(err.message).split('\n')[0])
    return
  }
  let what = 'type ' + js.type + ', requestId ' + js.requestId
  const when = js.data && js.data.triggeredAt
  if (when instanceof Date) what += ', triggeredAt ' + (isNaN(when) ? 'Invalid Date' : when.toISOString())
  findings.fail('btp-packet accepted it (' + what + '); vector reason: ' + vector.reason)
}

// ---------------------------------------------------------------- driver

function runVectors (fileName, list, check) {
  const results = []
  if (!Array.isArray(list)) return results
  for (let i = 0; i < list.length; i++) {
    const findings = new Findings()
    const id = vectorId(list[i], i)
    try {
      check(list[i], findings)
    } catch (err) {
      findings.fail(err.message)
    }
    results.push({ fileName, id, findings, divergence: list[i] && list[i].js_divergence })
  }
  return results
}

function checkFile (filePath) {
  const fileName = path.basename(filePath)
  const data = JSON.parse(fs.readFileSync(filePath, 'utf8'))
  switch (fileName) {
    case 'packets.json':
      return runVectors(fileName, data.vectors, checkValid)
    case 'malformed.json':
      return runVectors(fileName, data.malformed, checkMalformed)
    default:
      throw new Error('no checker for ' + fileName + ' (known: ' + VECTOR_FILES.join(', ') + ')')
  }
}

function main () {
  return runVectorChecks('check-btp-vectors.js', VECTOR_FILES, checkFile)
}

main().catch(err => {
  console.error(err.stack || String(err))
  process.exit(1)
})

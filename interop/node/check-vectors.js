#!/usr/bin/env node
// Cross-checks the project's golden SSB vectors against independent
// JavaScript implementations, the ones the real ssb-server runs on:
//
//   shs.json        shs1-crypto and secret-handshake's crypto.js (sodium via chloride)
//   boxstream.json  pull-box-stream
//   rpc.json        packet-stream-codec
//   feed.json       ssb-keys (signatures, message ids) and ssb-validate
//
// Usage: node interop/node/check-vectors.js DIR_OR_FILE...
//   A directory means the four files above inside it (each must exist); a
//   file is checked by its base name.  Prints one line per vector,
//   `ok <file> <id>` or `FAIL <file> <id>: why`, then a summary, and exits
//   non-zero when any vector failed or nothing was checked.
'use strict'

const fs = require('fs')
const path = require('path')
const { runVectorChecks } = require('./vector-report')
const pull = require('pull-stream')
const sodium = require('chloride')
const shs1 = require('shs1-crypto')
const shsCrypto = require('secret-handshake/crypto')
const boxStream = require('pull-box-stream')
const psc = require('packet-stream-codec')
const ssbKeys = require('ssb-keys')
const ssbValidate = require('ssb-validate')

const VECTOR_FILES = ['shs.json', 'boxstream.json', 'rpc.json', 'feed.json']

// ---------------------------------------------------------------- helpers

// Collects the mismatches of one vector; a vector with none is ok.
class Findings {
  constructor () {
    this.problems = []
    this.notes = []
  }

  fail (message) { this.problems.push(message) }
  note (message) { this.notes.push(message) }

  equalBytes (what, actual, expectedHex) {
    if (expectedHex === undefined || expectedHex === null) return
    const actualHex = Buffer.isBuffer(actual) ? actual.toString('hex') : String(actual)
    if (actualHex !== String(expectedHex).toLowerCase()) {
      this.fail(what + ': vector has ' + shorten(expectedHex) + ' but the JS implementation gives ' + shorten(actualHex))
    }
  }

  equal (what, actual, expected) {
    if (expected === undefined) return
    if (JSON.stringify(actual) !== JSON.stringify(expected)) {
      this.fail(what + ': vector has ' + shorten(JSON.stringify(expected)) + ' but the JS implementation gives ' + shorten(JSON.stringify(actual)))
    }
  }

  check (what, condition) {
    if (!condition) this.fail(what)
    return condition
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

function required (vector, fields) {
  const missing = fields.filter(field => vector[field] === undefined)
  if (missing.length) throw new Error('vector lacks field(s) ' + missing.join(', '))
}

function vectorId (vector, index) {
  return vector && vector.id !== undefined ? String(vector.id) : '#' + index
}

// Drains a pull-stream source, keeping both the items and how it ended:
// the checks need to know whether a stream erred and what it yielded before.
function drain (source) {
  return new Promise(resolve => {
    const items = []
    pull(source, pull.drain(item => { items.push(item) }, err => {
      resolve({ items, error: err && err !== true ? err : null })
    }))
  })
}

const CURVE25519_BASE_POINT = Buffer.concat([Buffer.from([9]), Buffer.alloc(31)])

function curve25519Public (secret) {
  return sodium.crypto_scalarmult(secret, CURVE25519_BASE_POINT)
}

// ---------------------------------------------------------------- shs.json

function checkShsValid (vector, findings) {
  required(vector, ['network_key', 'client_seed', 'server_seed',
    'client_ephemeral_secret', 'server_ephemeral_secret', 'msg1', 'msg2', 'msg3', 'msg4'])
  const networkKey = hex(vector.network_key, 'network_key')
  const client = sodium.crypto_sign_seed_keypair(hex(vector.client_seed, 'client_seed'))
  const server = sodium.crypto_sign_seed_keypair(hex(vector.server_seed, 'server_seed'))
  findings.equalBytes('client_public (ed25519 from client_seed)', client.publicKey, vector.client_public)
  findings.equalBytes('server_public (ed25519 from server_seed)', server.publicKey, vector.server_public)

  const clientEphemeralSecret = hex(vector.client_ephemeral_secret, 'client_ephemeral_secret')
  const serverEphemeralSecret = hex(vector.server_ephemeral_secret, 'server_ephemeral_secret')
  const clientEphemeralPublic = curve25519Public(clientEphemeralSecret)
  const serverEphemeralPublic = curve25519Public(serverEphemeralSecret)
  findings.equalBytes('client_ephemeral_public (curve25519 of its secret)', clientEphemeralPublic, vector.client_ephemeral_public)
  findings.equalBytes('server_ephemeral_public (curve25519 of its secret)', serverEphemeralPublic, vector.server_ephemeral_public)

  const msg1 = hex(vector.msg1, 'msg1')
  const msg2 = hex(vector.msg2, 'msg2')
  const msg3 = hex(vector.msg3, 'msg3')
  const msg4 = hex(vector.msg4, 'msg4')

  // shs1-crypto, client role: builds msg1/msg3 and accepts msg2/msg4.
  const clientState = {
    network_identifier: networkKey,
    client_longterm_sk: client.secretKey,
    client_longterm_pk: client.publicKey,
    client_ephemeral_sk: clientEphemeralSecret,
    client_ephemeral_pk: clientEphemeralPublic,
    server_longterm_pk: server.publicKey
  }
  findings.equalBytes('msg1 (shs1-crypto createMsg1)', shs1.createMsg1(clientState), vector.msg1)
  if (!findings.check('msg2 rejected by shs1-crypto verifyMsg2', shs1.verifyMsg2(clientState, msg2))) return
  findings.equalBytes('msg3 (shs1-crypto createMsg3)', shs1.createMsg3(clientState), vector.msg3)
  findings.equalBytes('shared_secret_ab (shs1-crypto, client side)', clientState.shared_secret_ab, vector.shared_secret_ab)
  findings.equalBytes('shared_secret_aB (shs1-crypto, client side)', clientState.shared_secret_aB, vector.shared_secret_aB)
  if (!findings.check('msg4 rejected by shs1-crypto verifyMsg4', shs1.verifyMsg4(clientState, msg4))) return
  const clientOutcome = shs1.clientOutcome(clientState)
  findings.equalBytes('client_to_server_key (shs1-crypto client encryption_key)', clientOutcome.encryption_key, vector.client_to_server_key)
  findings.equalBytes('client_to_server_nonce (shs1-crypto client encryption_nonce)', clientOutcome.encryption_nonce, vector.client_to_server_nonce)
  findings.equalBytes('server_to_client_key (shs1-crypto client decryption_key)', clientOutcome.decryption_key, vector.server_to_client_key)
  findings.equalBytes('server_to_client_nonce (shs1-crypto client decryption_nonce)', clientOutcome.decryption_nonce, vector.server_to_client_nonce)
  findings.equalBytes('shared_secret_Ab (client long-term x server ephemeral)',
    sodium.crypto_scalarmult(sodium.crypto_sign_ed25519_sk_to_curve25519(client.secretKey), serverEphemeralPublic),
    vector.shared_secret_Ab)

  // shs1-crypto, server role: accepts msg1/msg3 and builds msg2/msg4.
  const serverState = {
    network_identifier: networkKey,
    server_longterm_sk: server.secretKey,
    server_longterm_pk: server.publicKey,
    server_ephemeral_sk: serverEphemeralSecret,
    server_ephemeral_pk: serverEphemeralPublic
  }
  if (!findings.check('msg1 rejected by shs1-crypto verifyMsg1', shs1.verifyMsg1(serverState, msg1))) return
  findings.equalBytes('msg2 (shs1-crypto createMsg2)', shs1.createMsg2(serverState), vector.msg2)
  if (!findings.check('msg3 rejected by shs1-crypto verifyMsg3', shs1.verifyMsg3(serverState, msg3))) return
  findings.equalBytes('client long-term key recovered from msg3', serverState.client_longterm_pk, vector.client_public)
  findings.equalBytes('msg4 (shs1-crypto createMsg4)', shs1.createMsg4(serverState), vector.msg4)
  const serverOutcome = shs1.serverOutcome(serverState)
  findings.equalBytes('server_to_client_key (shs1-crypto server encryption_key)', serverOutcome.encryption_key, vector.server_to_client_key)
  findings.equalBytes('server_to_client_nonce (shs1-crypto server encryption_nonce)', serverOutcome.encryption_nonce, vector.server_to_client_nonce)
  findings.equalBytes('client_to_server_key (shs1-crypto server decryption_key)', serverOutcome.decryption_key, vector.client_to_server_key)
  findings.equalBytes('client_to_server_nonce (shs1-crypto server decryption_nonce)', serverOutcome.decryption_nonce, vector.client_to_server_nonce)

  // secret-handshake's own crypto.js, the code ssb-server actually runs.  Its
  // initialize() derives ephemeral keys from a random seed, so the state is
  // built by hand with the vector's curve25519 ephemeral keys instead.
  const alice = {
    app_key: networkKey,
    local: {
      kx_pk: clientEphemeralPublic,
      kx_sk: Buffer.from(clientEphemeralSecret),
      publicKey: client.publicKey,
      secretKey: client.secretKey,
      app_mac: sodium.crypto_auth(clientEphemeralPublic, networkKey)
    },
    remote: { publicKey: server.publicKey }
  }
  const bob = {
    app_key: networkKey,
    local: {
      kx_pk: serverEphemeralPublic,
      kx_sk: Buffer.from(serverEphemeralSecret),
      publicKey: server.publicKey,
      secretKey: server.secretKey,
      app_mac: sodium.crypto_auth(serverEphemeralPublic, networkKey)
    },
    remote: {}
  }
  findings.equalBytes('msg1 (secret-handshake createChallenge)', shsCrypto.createChallenge(alice), vector.msg1)
  if (!findings.check('msg1 rejected by secret-handshake verifyChallenge', shsCrypto.verifyChallenge(bob, msg1))) return
  findings.equalBytes('msg2 (secret-handshake createChallenge)', shsCrypto.createChallenge(bob), vector.msg2)
  if (!findings.check('msg2 rejected by secret-handshake clientVerifyChallenge', shsCrypto.clientVerifyChallenge(alice, msg2))) return
  findings.equalBytes('msg3 (secret-handshake clientCreateAuth)', shsCrypto.clientCreateAuth(alice), vector.msg3)
  if (!findings.check('msg3 rejected by secret-handshake serverVerifyAuth', shsCrypto.serverVerifyAuth(bob, msg3))) return
  findings.equalBytes('msg4 (secret-handshake serverCreateAccept)', shsCrypto.serverCreateAccept(bob), vector.msg4)
  if (!findings.check('msg4 rejected by secret-handshake clientVerifyAccept', shsCrypto.clientVerifyAccept(alice, msg4))) return
  shsCrypto.clean(alice)
  shsCrypto.clean(bob)
  // Box stream keys and nonces as secret-handshake's protocol.js derives them.
  findings.equalBytes('client_to_server_key (secret-handshake client encryptKey)', alice.encryptKey, vector.client_to_server_key)
  findings.equalBytes('client_to_server_key (secret-handshake server decryptKey)', bob.decryptKey, vector.client_to_server_key)
  findings.equalBytes('server_to_client_key (secret-handshake server encryptKey)', bob.encryptKey, vector.server_to_client_key)
  findings.equalBytes('server_to_client_key (secret-handshake client decryptKey)', alice.decryptKey, vector.server_to_client_key)
  findings.equalBytes('client_to_server_nonce (secret-handshake client encrypt nonce)', alice.remote.app_mac.slice(0, 24), vector.client_to_server_nonce)
  findings.equalBytes('client_to_server_nonce (secret-handshake server decrypt nonce)', bob.local.app_mac.slice(0, 24), vector.client_to_server_nonce)
  findings.equalBytes('server_to_client_nonce (secret-handshake server encrypt nonce)', bob.remote.app_mac.slice(0, 24), vector.server_to_client_nonce)
  findings.equalBytes('server_to_client_nonce (secret-handshake client decrypt nonce)', alice.local.app_mac.slice(0, 24), vector.server_to_client_nonce)
}

// Invalid handshakes.  `invalid` entries test the server role: input_hex is
// everything the client sends (msg1, then msg3 if the rejection is at msg3)
// and output_hex what the server writes before rejecting (msg2 or nothing).
// `invalid_client` entries test the client role the same way: msg1 is the
// client's own first message, input_hex is msg2 (+ msg4), output_hex is the
// client's msg3 or nothing.  Each role is played by both JS implementations.
// secret-handshake's crypto.js, what ssb-server runs, must reject at the
// vector's step having written exactly output_hex.  shs1-crypto, the test
// suite's own crypto, computes some shared secrets a step later than
// secret-handshake (it only checks msg1's/msg2's hmac), so it must just not
// accept anything the vector rejects; a later rejection, or running out of
// input before it looks at the bad key, is noted.  A throw from sodium
// (e.g. on a low-order curve point) counts as rejecting.

function playShs1Server (vector, input) {
  const serverEphemeralSecret = hex(vector.server_ephemeral_secret, 'server_ephemeral_secret')
  const server = sodium.crypto_sign_seed_keypair(hex(vector.server_seed, 'server_seed'))
  const state = {
    network_identifier: hex(vector.network_key, 'network_key'),
    server_longterm_sk: server.secretKey,
    server_longterm_pk: server.publicKey,
    server_ephemeral_sk: serverEphemeralSecret,
    server_ephemeral_pk: curve25519Public(serverEphemeralSecret)
  }
  return playSteps([
    ['msg1', 64, msg => shs1.verifyMsg1(state, msg), () => shs1.createMsg2(state)],
    ['msg3', 112, msg => shs1.verifyMsg3(state, msg), () => shs1.createMsg4(state)]
  ], input)
}

function playSecretHandshakeServer (vector, input) {
  const serverEphemeralSecret = hex(vector.server_ephemeral_secret, 'server_ephemeral_secret')
  const serverEphemeralPublic = curve25519Public(serverEphemeralSecret)
  const server = sodium.crypto_sign_seed_keypair(hex(vector.server_seed, 'server_seed'))
  const networkKey = hex(vector.network_key, 'network_key')
  const bob = {
    app_key: networkKey,
    local: {
      kx_pk: serverEphemeralPublic,
      kx_sk: Buffer.from(serverEphemeralSecret),
      publicKey: server.publicKey,
      secretKey: server.secretKey,
      app_mac: sodium.crypto_auth(serverEphemeralPublic, networkKey)
    },
    remote: {}
  }
  return playSteps([
    ['msg1', 64, msg => shsCrypto.verifyChallenge(bob, msg), () => shsCrypto.createChallenge(bob)],
    ['msg3', 112, msg => shsCrypto.serverVerifyAuth(bob, msg), () => shsCrypto.serverCreateAccept(bob)]
  ], input)
}

function clientKeys (vector) {
  const clientEphemeralSecret = hex(vector.client_ephemeral_secret, 'client_ephemeral_secret')
  const client = sodium.crypto_sign_seed_keypair(hex(vector.client_seed, 'client_seed'))
  return {
    networkKey: hex(vector.network_key, 'network_key'),
    client,
    clientEphemeralSecret,
    clientEphemeralPublic: curve25519Public(clientEphemeralSecret),
    serverPublic: hex(vector.server_public, 'server_public')
  }
}

function playShs1Client (vector, input, findings) {
  const keys = clientKeys(vector)
  const state = {
    network_identifier: keys.networkKey,
    client_longterm_sk: keys.client.secretKey,
    client_longterm_pk: keys.client.publicKey,
    client_ephemeral_sk: keys.clientEphemeralSecret,
    client_ephemeral_pk: keys.clientEphemeralPublic,
    server_longterm_pk: keys.serverPublic
  }
  findings.equalBytes('msg1 (shs1-crypto createMsg1)', shs1.createMsg1(state), vector.msg1)
  return playSteps([
    ['msg2', 64, msg => shs1.verifyMsg2(state, msg), () => shs1.createMsg3(state)],
    ['msg4', 80, msg => shs1.verifyMsg4(state, msg), () => Buffer.alloc(0)]
  ], input)
}

function playSecretHandshakeClient (vector, input, findings) {
  const keys = clientKeys(vector)
  const alice = {
    app_key: keys.networkKey,
    local: {
      kx_pk: keys.clientEphemeralPublic,
      kx_sk: Buffer.from(keys.clientEphemeralSecret),
      publicKey: keys.client.publicKey,
      secretKey: keys.client.secretKey,
      app_mac: sodium.crypto_auth(keys.clientEphemeralPublic, keys.networkKey)
    },
    remote: { publicKey: keys.serverPublic }
  }
  findings.equalBytes('msg1 (secret-handshake createChallenge)', shsCrypto.createChallenge(alice), vector.msg1)
  return playSteps([
    ['msg2', 64, msg => shsCrypto.clientVerifyChallenge(alice, msg), () => shsCrypto.clientCreateAuth(alice)],
    ['msg4', 80, msg => shsCrypto.clientVerifyAccept(alice, msg), () => Buffer.alloc(0)]
  ], input)
}

// Feeds input to [step, size, verify, reply] steps in order.  Returns the
// step that rejected (null if none did, or if the input ran out first, then
// with `incomplete`) and everything written before it.
function playSteps (steps, input) {
  const written = []
  let offset = 0
  for (const [step, size, verify, reply] of steps) {
    if (offset + size > input.length) return { rejectedAt: null, incomplete: step, output: Buffer.concat(written) }
    const message = input.slice(offset, offset + size)
    offset += size
    let accepted
    let error = null
    let answer = null
    try {
      // Building the reply is part of taking the message: it is where
      // some implementations first use the peer's ephemeral key.
      accepted = verify(message)
      if (accepted) answer = reply()
    } catch (err) {
      accepted = false
      error = err.message
    }
    if (!accepted) return { rejectedAt: step, error, output: Buffer.concat(written) }
    written.push(answer)
  }
  return { rejectedAt: null, output: Buffer.concat(written) }
}

function judgeShsInvalid (vector, findings, plays) {
  required(vector, ['step', 'input_hex', 'output_hex'])
  const input = hex(vector.input_hex, 'input_hex')
  for (const [implementation, play, authoritative] of plays) {
    const outcome = play(vector, input, findings)
    const how = outcome.error ? ' (throws: ' + outcome.error + ')' : ''
    if (outcome.rejectedAt === vector.step) {
      findings.equalBytes('output_hex (' + implementation + ' output before rejecting)', outcome.output, vector.output_hex)
      findings.note(implementation + ' rejects at ' + outcome.rejectedAt + how)
      continue
    }
    const what = outcome.rejectedAt !== null
      ? implementation + ' rejects at ' + outcome.rejectedAt + how
      : outcome.incomplete
        ? implementation + ' has not rejected by the end of the input (it would next need ' + outcome.incomplete + ')'
        : implementation + ' accepted every message'
    const vectorSays = 'the vector at ' + vector.step + ' (' + vector.reason + ')'
    if (authoritative || (outcome.rejectedAt === null && !outcome.incomplete)) {
      findings.fail(what + ', ' + vectorSays)
    } else {
      findings.note(what + ', ' + vectorSays + ': a later check, not an acceptance')
    }
  }
}

function checkShsInvalidServer (vector, findings) {
  required(vector, ['network_key', 'server_seed', 'server_ephemeral_secret'])
  const server = sodium.crypto_sign_seed_keypair(hex(vector.server_seed, 'server_seed'))
  findings.equalBytes('server_public (ed25519 from server_seed)', server.publicKey, vector.server_public)
  findings.equalBytes('server_ephemeral_public (curve25519 of its secret)',
    curve25519Public(hex(vector.server_ephemeral_secret, 'server_ephemeral_secret')), vector.server_ephemeral_public)
  judgeShsInvalid(vector, findings, [['secret-handshake', playSecretHandshakeServer, true], ['shs1-crypto', playShs1Server, false]])
}

function checkShsInvalidClient (vector, findings) {
  required(vector, ['network_key', 'client_seed', 'client_ephemeral_secret', 'server_public'])
  const keys = clientKeys(vector)
  findings.equalBytes('client_public (ed25519 from client_seed)', keys.client.publicKey, vector.client_public)
  findings.equalBytes('client_ephemeral_public (curve25519 of its secret)', keys.clientEphemeralPublic, vector.client_ephemeral_public)
  judgeShsInvalid(vector, findings, [['secret-handshake', playSecretHandshakeClient, true], ['shs1-crypto', playShs1Client, false]])
}

// ---------------------------------------------------------------- boxstream.json

const BOX_MAX_BODY = 4096 // pull-box-stream splits larger writes
const BOX_HEADER_LENGTH = 34 // boxed: 16-byte mac + 2-byte length + 16-byte body mac

async function checkBoxValid (vector, findings) {
  required(vector, ['key', 'nonce', 'bodies', 'wire'])
  const key = hex(vector.key, 'key')
  const nonce = hex(vector.nonce, 'nonce')
  const bodies = vector.bodies.map((body, i) => hex(body, 'bodies[' + i + ']'))
  const goodbye = vector.goodbye !== false

  // Boxing: pull-box-stream queues header then body per packet, and the
  // goodbye header when its source ends.
  const boxed = await drain(pull(pull.values(bodies.map(b => Buffer.from(b))), boxStream.createBoxStream(key, nonce)))
  if (boxed.error) return findings.fail('pull-box-stream failed to box: ' + boxed.error.message)
  const chunks = boxed.items
  const goodbyeChunk = chunks[chunks.length - 1]
  const packetChunks = chunks.slice(0, -1)
  const wireChunks = goodbye ? chunks : packetChunks
  findings.equalBytes('wire (pull-box-stream boxing of bodies' + (goodbye ? ' + goodbye' : '') + ')', Buffer.concat(wireChunks), vector.wire)
  if (Array.isArray(vector.boxes)) {
    const packets = []
    for (let i = 0; i + 1 < packetChunks.length; i += 2) packets.push({ header: packetChunks[i], body: packetChunks[i + 1] })
    if (findings.check('boxes: vector has ' + vector.boxes.length + ' packets, pull-box-stream made ' + packets.length,
      packets.length === vector.boxes.length)) {
      vector.boxes.forEach((expected, i) => {
        findings.equalBytes('boxes[' + i + '].header', packets[i].header, expected.header)
        findings.equalBytes('boxes[' + i + '].body', packets[i].body, expected.body)
      })
    }
  }
  if (vector.goodbye_header !== undefined) {
    if (goodbye) findings.equalBytes('goodbye_header', goodbyeChunk, vector.goodbye_header)
    else findings.check('goodbye_header should be null when goodbye is false', vector.goodbye_header === null)
  }

  // Unboxing the wire gives the bodies back (as pull-box-stream's packets);
  // without a goodbye the stream must end in an error ("unexpected hangup").
  const unboxed = await drain(pull(pull.values([hex(vector.wire, 'wire')]), boxStream.createUnboxStream(key, nonce)))
  const expectedPackets = []
  for (const body of bodies) {
    for (let offset = 0; offset < body.length; offset += BOX_MAX_BODY) expectedPackets.push(body.slice(offset, offset + BOX_MAX_BODY))
  }
  findings.equal('bodies (pull-box-stream unboxing of wire)', unboxed.items.map(b => b.toString('hex')), expectedPackets.map(b => b.toString('hex')))
  if (goodbye) {
    findings.check('pull-box-stream erred unboxing a wire that ends in a goodbye: ' + (unboxed.error && unboxed.error.message), !unboxed.error)
  } else {
    findings.check('pull-box-stream ended cleanly on a wire without goodbye (expected an error)', unboxed.error)
    if (unboxed.error) findings.note('no goodbye -> pull-box-stream: ' + unboxed.error.message)
  }
}

// pull-box-stream is more lenient than the guide in two ways that
// vectors/ssb/README.md documents.  For invalid vectors with these reasons
// the check confirms pull-box-stream shows exactly that leniency (and
// nothing worse); if it ever turns strict, the normal checks apply.
const BOX_LENIENCIES = {
  'body length exceeds 4096': {
    what: 'pull-box-stream has no 4096-byte limit and reads the declared longer body',
    shows: (unboxed) => unboxed.items.some(body => body.length > BOX_MAX_BODY)
  },
  'data after goodbye': {
    what: 'pull-box-stream stops reading at the goodbye and never looks at the bytes after it',
    shows: (unboxed, wire) => !unboxed.error && bytesThroughGoodbye(unboxed.items) < wire.length
  }
}

function bytesThroughGoodbye (bodies) {
  return bodies.reduce((total, body) => total + BOX_HEADER_LENGTH + body.length, 0) + BOX_HEADER_LENGTH
}

async function checkBoxInvalid (vector, findings) {
  required(vector, ['key', 'nonce', 'wire'])
  const wire = hex(vector.wire, 'wire')
  const unboxed = await drain(pull(pull.values([wire]),
    boxStream.createUnboxStream(hex(vector.key, 'key'), hex(vector.nonce, 'nonce'))))
  const lenience = BOX_LENIENCIES[vector.reason]
  if (lenience && lenience.shows(unboxed, wire)) {
    // Still, the authentic bodies before the bad data must come out as the
    // vector lists them.
    if (Array.isArray(vector.bodies_before_error)) {
      findings.equal('bodies_before_error (first packets pull-box-stream yields)',
        unboxed.items.slice(0, vector.bodies_before_error.length).map(b => b.toString('hex')), vector.bodies_before_error)
    }
    findings.note('documented divergence (vectors/ssb/README.md): ' + lenience.what)
    return
  }
  if (Array.isArray(vector.bodies_before_error)) {
    findings.equal('bodies_before_error (pull-box-stream packets before it stopped)',
      unboxed.items.map(b => b.toString('hex')), vector.bodies_before_error)
  }
  if (unboxed.error) {
    findings.note('pull-box-stream: ' + unboxed.error.message + (unboxed.items.length ? ' after ' + unboxed.items.length + ' packet(s)' : ''))
    return
  }
  // A clean end means it read a goodbye; pull-box-stream never reads past it.
  const consumed = bytesThroughGoodbye(unboxed.items)
  const unread = consumed < wire.length ? '; ' + (wire.length - consumed) + ' byte(s) after the goodbye never read' : ''
  findings.fail('pull-box-stream accepted the wire (' + unboxed.items.length + ' packet(s), clean end' + unread + ')' +
    (vector.reason ? '; vector reason: ' + vector.reason : ''))
}

// ---------------------------------------------------------------- rpc.json

const BODY_TYPE_CODES = { binary: 0, buffer: 0, string: 1, utf8: 1, utf8_string: 1, json: 2 }

function bodyTypeCode (bodyType) {
  if (typeof bodyType === 'number') return bodyType
  const code = BODY_TYPE_CODES[String(bodyType).toLowerCase()]
  if (code === undefined) throw new Error('unknown body_type ' + JSON.stringify(bodyType))
  return code
}

const RPC_GOODBYE = Buffer.alloc(9)

async function decodeRpcWire (wire) {
  return drain(pull(pull.values([wire]), psc.decode()))
}

async function checkRpcValid (vector, findings) {
  required(vector, ['wire'])
  const wire = hex(vector.wire, 'wire')
  const isGoodbye = wire.equals(RPC_GOODBYE)
  if (isGoodbye || vector.goodbye === true) {
    const decoded = await decodeRpcWire(wire)
    if (decoded.error) return findings.fail('packet-stream-codec failed to decode wire: ' + decoded.error.message)
    findings.equal('decoded (packet-stream-codec)', decoded.items, ['GOODBYE'])
    return
  }
  required(vector, ['req', 'stream', 'end', 'body_type', 'body_hex'])
  // A goodbye after the packet lets the decoder end cleanly: without one,
  // pull-reader reports a hangup after bodies shorter than a header.
  const decoded = await decodeRpcWire(Buffer.concat([wire, RPC_GOODBYE]))
  if (decoded.error) return findings.fail('packet-stream-codec failed to decode wire: ' + decoded.error.message)
  if (!findings.check('packet-stream-codec decoded ' + JSON.stringify(decoded.items.map(p => p === 'GOODBYE' ? p : 'packet')) +
    ', expected one packet then the appended goodbye', decoded.items.length === 2)) return
  const packet = decoded.items[0]
  if (packet === 'GOODBYE') return findings.fail('packet-stream-codec took the packet for a goodbye (it treats any body length 0 as goodbye)')
  const type = bodyTypeCode(vector.body_type)
  const body = hex(vector.body_hex, 'body_hex')
  findings.equal('req', packet.req, vector.req)
  findings.equal('stream', packet.stream, vector.stream)
  findings.equal('end', packet.end, vector.end)
  findings.equal('body type code', packet.type, type)
  findings.equal('body length', packet.length, body.length)
  if (type === 0) findings.equalBytes('body', packet.value, vector.body_hex)
  else if (type === 1) findings.equal('body (utf8 string)', packet.value, body.toString('utf8'))
  else findings.equal('body (JSON)', packet.value, JSON.parse(body.toString('utf8')))

  // Encoding: packet-stream-codec serialises a JSON body itself with
  // JSON.stringify, so a JSON body is compared byte for byte only when the
  // vector's body is already in that form.
  const value = type === 0 ? body : type === 1 ? body.toString('utf8') : JSON.parse(body.toString('utf8'))
  const [head, encodedBody] = psc.encodePair({ req: vector.req, stream: vector.stream, end: vector.end, value })
  if (type === 2 && !encodedBody.equals(body)) {
    findings.note('JSON body is not in JSON.stringify form; encode compared the header only')
    findings.equalBytes('header (packet-stream-codec encodePair)', head, wire.slice(0, 9).toString('hex'))
  } else {
    findings.equalBytes('wire (packet-stream-codec encodePair)', Buffer.concat([head, encodedBody]), vector.wire)
  }
}

// Rejected means the decoder erred before yielding a packet, or erred on
// bytes left over after its packets.  An error right after packets that used
// up the whole wire is only the missing goodbye (see checkRpcValid).
async function checkRpcInvalid (vector, findings) {
  required(vector, ['wire'])
  const wire = hex(vector.wire, 'wire')
  const decoded = await decodeRpcWire(wire)
  const packets = decoded.items.filter(item => item !== 'GOODBYE')
  const consumed = packets.reduce((total, packet) => total + 9 + packet.length, 0)
  if (decoded.error && (packets.length === 0 || consumed < wire.length)) {
    findings.note('packet-stream-codec: ' + decoded.error.message + (packets.length ? ' after ' + packets.length + ' packet(s)' : ''))
  } else {
    findings.fail('packet-stream-codec decoded it without error: ' + shorten(JSON.stringify(decoded.items)) +
      (vector.reason ? '; vector reason: ' + vector.reason : ''))
  }
}

// ---------------------------------------------------------------- feed.json

function withoutSignature (message) {
  const copy = Object.assign({}, message)
  delete copy.signature
  return copy
}

function messageId (message) {
  return '%' + ssbKeys.hash(JSON.stringify(message, null, 2))
}

// canonical / signed_canonical may be given as the JSON text or as its hex.
function textField (value) {
  if (typeof value !== 'string') return value
  // Hex of a JSON object starts with 7b ('{'); JSON text itself never is all hex.
  if (/^([0-9a-fA-F]{2})+$/.test(value) && value.startsWith('7b')) return Buffer.from(value, 'hex').toString('utf8')
  return value
}

function hmacKeyOf (vector, file) {
  const key = vector.hmac_key !== undefined ? vector.hmac_key : file.hmac_key
  if (key === undefined || key === null) return null
  if (/^[0-9a-fA-F]{64}$/.test(key)) return Buffer.from(key, 'hex').toString('base64')
  return key
}

// The state ssb-validate would have after `previous`, which may be null (no
// message yet), a full signed message, a {key, value} record, or a feed
// state {id, sequence, timestamp}.
function stateAfter (previous, author) {
  const state = ssbValidate.initial()
  if (previous === null || previous === undefined) return state
  let feedState
  if (previous.signature !== undefined && previous.author !== undefined) {
    feedState = { id: messageId(previous), sequence: previous.sequence, timestamp: previous.timestamp }
    author = previous.author
  } else if (previous.key !== undefined && previous.value !== undefined) {
    feedState = { id: previous.key, sequence: previous.value.sequence, timestamp: previous.value.timestamp }
    author = previous.value.author
  } else if (previous.id !== undefined && previous.sequence !== undefined) {
    feedState = { id: previous.id, sequence: previous.sequence, timestamp: previous.timestamp }
  } else {
    throw new Error('cannot read `previous`: ' + shorten(JSON.stringify(previous)))
  }
  state.feeds[author] = Object.assign(feedState, { queue: [] })
  return state
}

function checkFeedValid (vector, findings, chainState, file) {
  required(vector, ['message'])
  const message = vector.message
  const hmacKey = hmacKeyOf(vector, file)
  if (vector.author_seed !== undefined) {
    const keys = ssbKeys.generate('ed25519', hex(vector.author_seed, 'author_seed'))
    findings.equal('author (ssb-keys id from author_seed)', keys.id, message.author)
    // ed25519 signatures are deterministic: signing the unsigned message
    // again must give the vector's signature.
    findings.equal('signature (ssb-keys signObj)', ssbKeys.signObj(keys, hmacKey, withoutSignature(message)).signature, message.signature)
  }
  findings.equal('canonical (JSON.stringify(message without signature, null, 2))', JSON.stringify(withoutSignature(message), null, 2), textField(vector.canonical))
  findings.equal('signed_canonical (JSON.stringify(message, null, 2))', JSON.stringify(message, null, 2), textField(vector.signed_canonical))
  findings.check('signature rejected by ssb-keys verifyObj', ssbKeys.verifyObj({ public: message.author.slice(1) }, hmacKey, message))
  findings.equal('message_id (ssb-keys hash of signed JSON)', messageId(message), vector.message_id)

  // ssb-validate sees the valid messages in file order as one stream; a
  // message whose author it has not seen and that starts mid-feed gets the
  // state its `previous` implies.
  if (!chainState.feeds[message.author] && message.sequence !== 1) {
    chainState.feeds[message.author] = { id: message.previous, sequence: message.sequence - 1, timestamp: 0, queue: [] }
    findings.note('ssb-validate started mid-feed at sequence ' + message.sequence)
  }
  try {
    ssbValidate.append(chainState, hmacKey, message)
  } catch (err) {
    findings.fail('ssb-validate rejected it: ' + err.message.split('\n')[0])
    // Keep the chain going from this message so one bad vector does not
    // fail all the following ones.
    chainState.feeds[message.author] = { id: messageId(message), sequence: message.sequence, timestamp: message.timestamp, queue: [] }
  }
}

function checkFeedInvalid (vector, findings, file) {
  required(vector, ['message'])
  let message = vector.message
  if (typeof message === 'string') {
    try {
      message = JSON.parse(message)
    } catch (err) {
      findings.note('message text is not JSON: ' + err.message)
      return
    }
  }
  if (message === null || typeof message !== 'object' || Array.isArray(message)) {
    findings.note('not a JSON object')
    return
  }
  const state = stateAfter(vector.previous, message.author)
  try {
    ssbValidate.append(state, hmacKeyOf(vector, file), message)
  } catch (err) {
    findings.note('ssb-validate: ' + err.message.split('\n')[0])
    return
  }
  findings.fail('ssb-validate accepted it' + (vector.reason ? '; vector reason: ' + vector.reason : ''))
}

// ---------------------------------------------------------------- driver

async function runVectors (fileName, list, check) {
  const results = []
  if (!Array.isArray(list)) return results
  for (let i = 0; i < list.length; i++) {
    const findings = new Findings()
    const id = vectorId(list[i], i)
    try {
      await check(list[i], findings)
    } catch (err) {
      findings.fail(err.message)
    }
    // A vector may document a known, deliberate disagreement between the
    // spec (which the vector follows) and the JavaScript implementation.
    // Such a disagreement is reported as "diverges", not as a failure; a
    // documented divergence that no longer shows up is reported too.
    const divergence = list[i] && list[i].js_divergence
    results.push({ fileName, id, findings, divergence })
  }
  return results
}

async function checkFile (filePath) {
  const fileName = path.basename(filePath)
  const data = JSON.parse(fs.readFileSync(filePath, 'utf8'))
  switch (fileName) {
    case 'shs.json':
      return [].concat(
        await runVectors(fileName, data.vectors, checkShsValid),
        await runVectors(fileName, data.invalid, checkShsInvalidServer),
        await runVectors(fileName, data.invalid_client, checkShsInvalidClient))
    case 'boxstream.json':
      return [].concat(
        await runVectors(fileName, data.vectors, checkBoxValid),
        await runVectors(fileName, data.invalid, checkBoxInvalid))
    case 'rpc.json':
      return [].concat(
        await runVectors(fileName, data.vectors, checkRpcValid),
        await runVectors(fileName, data.invalid, checkRpcInvalid))
    case 'feed.json': {
      const chainState = ssbValidate.initial()
      return [].concat(
        await runVectors(fileName, data.valid, (v, f) => checkFeedValid(v, f, chainState, data)),
        await runVectors(fileName, data.invalid, (v, f) => checkFeedInvalid(v, f, data)))
    }
    default:
      throw new Error('no checker for ' + fileName + ' (known: ' + VECTOR_FILES.join(', ') + ')')
  }
}

function main () {
  return runVectorChecks('check-vectors.js', VECTOR_FILES, checkFile)
}

main().catch(err => {
  console.error(err.stack || String(err))
  process.exit(1)
})

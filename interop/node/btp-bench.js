#!/usr/bin/env node
// Measures btp-packet's deserialize() and serialize() for bench/btp_bench.py,
// on the same bytes the Python codec is timed on, taking turns with it so
// both see the same machine load.  Line-delimited JSON on stdin/stdout:
//
//   -> { "packets": [ { "id", "hex", "packet" (JSON form of packets.json) } ] }
//   <- { "tool": "btp-packet <version>", "node": "<version>" }
//      (after checking every packet decodes to its fields and encodes to
//      its bytes, and a warm-up that lets V8 optimise the code)
//   -> { "id", "op": "decode" | "encode", "seconds": s }
//   <- { "rate": calls per second over about s seconds }
//
// It exits when stdin ends.
'use strict'

const readline = require('readline')
const btp = require('btp-packet')
const { toJs, fromJs } = require('./btp-common')

let sink = 0
const cases = {}

function batchFor (fn) {
  // A batch that takes about 10 ms.
  let batch = 1
  for (;;) {
    const t = process.hrtime.bigint()
    for (let i = 0; i < batch; i++) fn()
    if (Number(process.hrtime.bigint() - t) > 1e7) return batch
    batch *= 2
  }
}

function rate (fn, batch, seconds) {
  let count = 0
  const start = process.hrtime.bigint()
  let elapsed = 0
  while (elapsed < seconds * 1e9) {
    for (let i = 0; i < batch; i++) fn()
    count += batch
    elapsed = Number(process.hrtime.bigint() - start)
  }
  return count / (elapsed / 1e9)
}

function setup (packets) {
  for (const sample of packets) {
    const wire = Buffer.from(sample.hex, 'hex')
    const object = toJs(sample.packet)
    const decoded = fromJs(btp.deserialize(wire))
    if (JSON.stringify(decoded) !== JSON.stringify(sample.packet)) {
      throw new Error(sample.id + ': btp-packet decodes it to ' + JSON.stringify(decoded))
    }
    if (!btp.serialize(object).equals(wire)) throw new Error(sample.id + ': btp-packet encodes it differently')
    const decode = () => { sink += btp.deserialize(wire).requestId }
    const encode = () => { sink += btp.serialize(object).length }
    rate(decode, batchFor(decode), 0.2)  // warm-up
    rate(encode, batchFor(encode), 0.2)
    cases[sample.id] = {
      decode: { fn: decode, batch: batchFor(decode) },
      encode: { fn: encode, batch: batchFor(encode) }
    }
  }
}

const lines = readline.createInterface({ input: process.stdin })
lines.on('line', line => {
  const request = JSON.parse(line)
  if (request.packets) {
    setup(request.packets)
    process.stdout.write(JSON.stringify({
      tool: 'btp-packet ' + require('btp-packet/package.json').version,
      node: process.version
    }) + '\n')
    return
  }
  const c = cases[request.id] && cases[request.id][request.op]
  if (!c) throw new Error('unknown case ' + line)
  process.stdout.write(JSON.stringify({ rate: rate(c.fn, c.batch, request.seconds), sink: sink > 0 }) + '\n')
})

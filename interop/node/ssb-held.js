'use strict'
// The check of a replicated feed's held messages shared by the nodes that
// replicate one (ssb-replicate-from.js for ssb-server, ssb-db2/ssb-db2-node.js).
// ssb-validate and ssb-keys are passed in: each node checks with the
// packages of its own stack.

// verifyHeldItems(items, { validate, ssbKeys, hmacKey, invalid }): ITEMS
// ({ key, value }, in sequence order) checked again: no gap, the chain and
// signatures (validate.append with HMACKEY), and that each stored key is the
// message's id (ssbKeys.hash). Throws invalid(text) at the first that fails;
// else returns one "SSB_MSG seq=<n> key=<key> verified=true" line a message.
function verifyHeldItems (items, { validate, ssbKeys, hmacKey, invalid }) {
  let state = validate.initial()
  const lines = []
  for (const [index, item] of items.entries()) {
    const msg = item.value
    if (msg.sequence !== index + 1) throw invalid('held message ' + (index + 1) + ' has sequence ' + msg.sequence)
    try {
      state = validate.append(state, hmacKey, msg)
    } catch (err) {
      throw invalid('held message ' + msg.sequence + ' does not validate: ' + err.message)
    }
    const id = '%' + ssbKeys.hash(JSON.stringify(msg, null, 2))
    if (id !== item.key) throw invalid('held message ' + msg.sequence + ' is stored as ' + item.key + ' but its id is ' + id)
    lines.push('SSB_MSG seq=' + msg.sequence + ' key=' + item.key + ' verified=true')
  }
  return lines
}

module.exports = { verifyHeldItems }

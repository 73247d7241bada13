'use strict'
// The command line the vector cross-checks share (check-vectors.js for SSB,
// check-btp-vectors.js for BTP): expand directories to their vector files,
// run a file's checker, print one line per vector and a total, and exit 1
// when a vector failed (or none passed), 2 on usage.
//
// A checker returns [{ id, findings: { problems: [], notes: [] }, divergence }]
// where `divergence` is the documented reason the npm implementation is
// known to differ for that vector (then a problem is reported, not failed).

const fs = require('fs')
const path = require('path')

async function runVectorChecks (scriptName, vectorFiles, checkFile) {
  const args = process.argv.slice(2)
  if (!args.length) {
    process.stderr.write('usage: node ' + scriptName + ' DIR_OR_FILE...\n')
    process.exit(2)
  }
  const files = []
  for (const arg of args) {
    if (fs.existsSync(arg) && fs.statSync(arg).isDirectory()) {
      for (const name of vectorFiles) files.push(path.join(arg, name))
    } else {
      files.push(arg)
    }
  }
  let passed = 0
  let failed = 0
  let diverged = 0
  for (const file of files) {
    const fileName = path.basename(file)
    let results
    try {
      if (!fs.existsSync(file)) throw new Error('file not found: ' + file)
      results = await checkFile(file)
      if (!results.length) throw new Error('no vectors found (layout not recognised?)')
    } catch (err) {
      console.log('FAIL ' + fileName + ' -: ' + err.message)
      failed++
      continue
    }
    for (const { id, findings, divergence } of results) {
      const notes = findings.notes.length ? ' (' + findings.notes.join('; ') + ')' : ''
      if (divergence && findings.problems.length) {
        console.log('diverges ' + fileName + ' ' + id + ': documented: ' + divergence + '; observed: ' + findings.problems.join('; '))
        diverged++
      } else if (divergence) {
        console.log('ok ' + fileName + ' ' + id + ' (documented divergence not observed: ' + divergence + ')' + notes)
        passed++
      } else if (findings.problems.length) {
        console.log('FAIL ' + fileName + ' ' + id + ': ' + findings.problems.join('; ') + notes)
        failed++
      } else {
        console.log('ok ' + fileName + ' ' + id + notes)
        passed++
      }
    }
  }
  console.log(passed + ' passed, ' + failed + ' failed, ' + diverged + ' documented divergences')
  process.exit(failed > 0 || passed === 0 ? 1 : 0)
}

module.exports = { runVectorChecks }

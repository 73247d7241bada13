// The library a launch adapter drives, and what the adapter says when it
// cannot drive that release (docs/versions.md, docs/targets.md).
//
// A versioned target (`conformance certify --target stompit@0.26.0`) has
// its release installed by the harness with `npm install --prefix DIR`
// and DIR handed over as CONFORMANCE_PACKAGE_DIR: the library is then
// taken from DIR/node_modules, never from interop/node/node_modules (Node
// looks there first, before NODE_PATH, so NODE_PATH could not do it).
// Without the variable it is the pinned release of interop/node/package.json.
//
// cannotDrive() prints `CANNOT_DRIVE <library> <version>: <reason>` on
// stdout and exits 8 before the adapter is ready or connects: the harness
// records the target as not started with that reason, not as a client or
// server that broke a rule.
'use strict'

const fs = require('fs')
const path = require('path')

const EXIT_CANNOT_DRIVE = 8

function cannotDrive (library, version, reason) {
  process.stdout.write(`CANNOT_DRIVE ${library} ${version}: ${reason}\n`)
  process.stderr.write(`error: this adapter cannot drive ${library} ${version}: ${reason}\n`)
  process.exit(EXIT_CANNOT_DRIVE)
}

function packageRoot (name) {
  const dir = process.env.CONFORMANCE_PACKAGE_DIR
  if (dir) return path.join(dir, 'node_modules', name)
  return path.dirname(require.resolve(`${name}/package.json`))
}

function libraryVersion (name) {
  try {
    return JSON.parse(fs.readFileSync(path.join(packageRoot(name), 'package.json'), 'utf8')).version
  } catch (err) {
    return '(unknown version)'
  }
}

// require() of the release to drive; a release that does not load (a
// syntax this Node refuses, a native module that did not build) cannot be
// driven.
function requireLibrary (name) {
  const dir = process.env.CONFORMANCE_PACKAGE_DIR
  const version = libraryVersion(name)
  let resolved = name
  if (dir) {
    const root = packageRoot(name)
    if (!fs.existsSync(path.join(root, 'package.json'))) {
      cannotDrive(name, '(not installed)', `${root} does not exist (CONFORMANCE_PACKAGE_DIR=${dir})`)
    }
    resolved = require.resolve(root)
  }
  try {
    const library = require(resolved)
    process.stderr.write(`${name} ${version} from ${dir ? packageRoot(name) : 'interop/node'}\n`)
    return { library, version }
  } catch (err) {
    cannotDrive(name, version, `require failed: ${err && err.message ? err.message.split('\n')[0] : err}`)
  }
}

// Every name of `needed` ("connect", "Channel", "prototype.sendData") must
// be a function of `library`; else the release cannot be driven.
function requireApi (name, version, library, needed) {
  const missing = needed.filter((dotted) => {
    let value = library
    for (const part of dotted.split('.')) value = value == null ? undefined : value[part]
    return typeof value !== 'function'
  })
  if (missing.length) cannotDrive(name, version, `no ${missing.join(', ')} in its API`)
}

module.exports = { EXIT_CANNOT_DRIVE, cannotDrive, requireLibrary, requireApi, libraryVersion }

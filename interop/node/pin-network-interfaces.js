'use strict'
// Preloaded (`node --require`) into ssb-server by scripts/ssb-server.sh:
// from here on, os.networkInterfaces() answers the list the host had when
// ssb-server started.
//
// Why: ssb-gossip 1.1.1 (schedule.js) hands gossip.reconnect to
// on-change-network 0.0.2, which polls os.networkInterfaces() every second
// and, when the non-internal addresses differ from the previous poll, calls
// it; reconnect (ssb-gossip index.js) closes every connection but the
// node's own. On a certification host every container that starts or stops
// beside the run adds or removes a veth interface, so ssb-server ended the
// harness's sessions mid-case for a reason outside the protocol
// (docs/findings/ssb-server-16.md, "Sessions dropped on a host network
// change"). A node in its own network namespace (the container target)
// never sees those changes; this gives the process target the same view.
// Nothing else is touched: ssb-server's protocol code runs unchanged.

const os = require('os')

const atStart = JSON.stringify(os.networkInterfaces())

os.networkInterfaces = function pinnedNetworkInterfaces () {
  // A fresh copy each time: callers may modify what they get.
  return JSON.parse(atStart)
}

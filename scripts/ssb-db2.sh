#!/usr/bin/env bash
# Runs an SSB node on the modern JavaScript stack (secret-stack 6.4 with
# ssb-db2 8 and its compat plugins, ssb-ebt 9, ssb-conn 6: Manyverse's pins,
# interop/node/ssb-db2/package.json, installed by scripts/install-node-deps.sh)
# as a conformance target: the `ssb-db2` and `ssb-db2-client` targets.
#
# Server (foreground until SIGTERM/SIGINT; its temporary home is deleted):
#   scripts/ssb-db2.sh serve --port PORT [--host 127.0.0.1] [--messages N] [--publish-interval MS]
#       [--seed HEX] [--network-key HEX] [--dir DIR] [--keep-home]
#   Prints SSB_ID=@...ed25519, SSB_SECRET=<secret file>, SSB_HOME, SSB_HOST,
#   SSB_PORT, SSB_NETWORK_KEY, SSB_SEQUENCE and SSB_READY=1 (last) once it
#   listens and has published its N seed messages (default 3).
#
# Client (replicates one feed from a peer by EBT, then exits):
#   scripts/ssb-db2.sh replicate --peer-host HOST --peer-port PORT
#       --peer-public-key @...ed25519 [--feed @...ed25519] [--until-sequence N]
#       [--seed HEX] [--network-key HEX] [--timeout SECONDS]
#   Prints "SSB_MSG seq=n key=%... verified=true" per message and
#   "SSB_REPLICATED feed=@... count=N latest_sequence=N"; exit 0 only then,
#   4 a held message does not verify, 5 timeout, 1 other errors, 2 usage.
# See interop/node/ssb-db2/ssb-db2-node.js.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
node_dir="$(cd "$script_dir/../interop/node/ssb-db2" && pwd)"

case "${1:-}" in
    -h|--help|"")
        awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"
        [ -n "${1:-}" ] && exit 0 || exit 2 ;;
esac

command -v node >/dev/null 2>&1 || { echo "ssb-db2.sh: ERROR: node is not on PATH" >&2; exit 1; }
[ -f "$node_dir/node_modules/ssb-db2/package.json" ] || {
    echo "ssb-db2.sh: ERROR: ssb-db2 is not installed; run scripts/install-node-deps.sh" >&2
    exit 1
}
exec node "$node_dir/ssb-db2-node.js" "$@"

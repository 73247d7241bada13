#!/usr/bin/env bash
# Runs ilp-plugin-btp (npm, pinned in interop/node/package.json, installed by
# scripts/install-node-deps.sh) as a BTP peer: the independent BTP
# implementation the harness interoperates with.
#
# Server (foreground until killed, or --stay S after the first client):
#   scripts/ilp-plugin-btp.sh server --port PORT (--token T | --token-env VAR | --token-file F)
#       [--host 127.0.0.1] [--send-message TEXT]... [--send-money AMOUNT]...
#       [--send-balance]... [--stay S] [--timeout S]
#   Prints `BTP_READY url=ws://HOST:PORT/ port=PORT` once listening (PORT 0
#   picks a free port), `BTP_CONNECTED {...}` once a client authenticated.
#
# Client:
#   scripts/ilp-plugin-btp.sh client --url ws://HOST:PORT/ (--token T | --token-env VAR | --token-file F)
#       [--send-message TEXT]... [--send-money AMOUNT]... [--send-balance]...
#       [--stay S] [--timeout S]
#
# --send-message TEXT is plugin.sendData(TEXT): a Message whose primary entry
# is `ilp` (application/octet-stream); --send-money is a Transfer; the peer's
# Messages go to a data handler answering `echo:` + data, its Transfers to a
# money handler adding to a balance.  Output lines: BTP_READY, BTP_CONNECTED,
# BTP_RESPONSE {json}, BTP_DATA {json}, BTP_MONEY {json}, BTP_DONE {json}.
# Exit: 0 ok, 1 error, 2 usage, 3 not connected (auth refused, or not
# within --timeout, default 20 s), 6 a request was refused.  See interop/node/ilp-plugin-btp-peer.js.
# Prefer --token-file or --token-env: a --token shows in the process list.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
node_dir="$(cd "$script_dir/../interop/node" && pwd)"

case "${1:-}" in
    -h|--help|"")
        awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"
        [ -n "${1:-}" ] && exit 0 || exit 2 ;;
esac

command -v node >/dev/null 2>&1 || { echo "ilp-plugin-btp.sh: ERROR: node is not on PATH" >&2; exit 1; }
# A versioned target (docs/versions.md) brings its own release in
# CONFORMANCE_PACKAGE_DIR; the peer script's other modules stay the pinned ones.
[ -f "${CONFORMANCE_PACKAGE_DIR:-$node_dir}/node_modules/ilp-plugin-btp/package.json" ] || {
    echo "ilp-plugin-btp.sh: ERROR: ilp-plugin-btp is not installed; run scripts/install-node-deps.sh" >&2
    exit 1
}
exec node "$node_dir/ilp-plugin-btp-peer.js" "$@"

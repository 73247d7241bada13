#!/usr/bin/env bash
# Runs ilp-plugin-mini-accounts 4.2.0 (npm, pinned in
# interop/node/mini-accounts/package.json, installed by
# scripts/install-node-deps.sh) as a BTP server, as an Interledger connector
# runs it: the `ilp-plugin-mini-accounts` target.
#
#   scripts/ilp-plugin-mini-accounts.sh --port PORT [--host 127.0.0.1] [--ilp-address test.conformance]
#
# Prints `BTP_READY url=ws://HOST:PORT/ port=PORT` once listening (PORT 0
# picks a free port) and serves until SIGTERM/SIGINT. Every auth_token is
# accepted (mini-accounts makes an account of each: sha256(token)). See
# interop/node/mini-accounts/mini-accounts-server.js.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
node_dir="$(cd "$script_dir/../interop/node/mini-accounts" && pwd)"

case "${1:-}" in
    -h|--help|"")
        awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"
        [ -n "${1:-}" ] && exit 0 || exit 2 ;;
esac

command -v node >/dev/null 2>&1 || { echo "ilp-plugin-mini-accounts.sh: ERROR: node is not on PATH" >&2; exit 1; }
[ -f "$node_dir/node_modules/ilp-plugin-mini-accounts/package.json" ] || {
    echo "ilp-plugin-mini-accounts.sh: ERROR: ilp-plugin-mini-accounts is not installed; run scripts/install-node-deps.sh" >&2
    exit 1
}
exec node "$node_dir/mini-accounts-server.js" "$@"

#!/usr/bin/env bash
# Runs the OCaml RIPP peer (interop/ripp-ocaml), building it first when it
# is missing or stale (scripts/build-ocaml-ripp.sh; dune makes a no-op
# rebuild take well under a second). All arguments go to ripp_peer:
#   scripts/ocaml-ripp-peer.sh consume --schemas FILE --port 0 ...
#   scripts/ocaml-ripp-peer.sh produce --schemas FILE --peer-host H --peer-port N ...
# Used by the conformance target ocaml-ripp (conformance/targets/builtin.toml).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The build's own output goes to stderr: stdout carries RIPP_READY and the
# event lines the harness reads.
project="$repo/interop/ripp-ocaml"
exe="$project/_build/default/bin/ripp_peer.exe"
# Build only when the binary is missing or older than a source: a server
# and a client launched at once must not both run dune (dune refuses a
# second instance on a locked build directory).
if [ ! -x "$exe" ] || [ -n "$(find "$project/bin" "$project/dune-project" -newer "$exe" -print -quit)" ]; then
    out="$("$repo/scripts/build-ocaml-ripp.sh")"
    printf '%s\n' "$out" | sed '$d' >&2
    exe="$(printf '%s\n' "$out" | tail -n 1)"
fi
exec "$exe" "$@"

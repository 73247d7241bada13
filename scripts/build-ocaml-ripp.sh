#!/usr/bin/env bash
# Builds the independent RIPP peer interop/ripp-ocaml/ (OCaml, the real
# bin_prot library through [@@deriving bin_io]) into
# interop/ripp-ocaml/_build/default/bin/ripp_peer.exe and prints that path
# on its last line. Installs the toolchain first when it is missing
# (scripts/install-ocaml.sh; root or sudo). dune rebuilds only what changed,
# so a second run takes well under a second.
#
# Usage: scripts/build-ocaml-ripp.sh [--no-install]
#   --no-install   fail instead of installing a missing toolchain
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
project="$repo/interop/ripp-ocaml"

install=1
for arg in "$@"; do
    case "$arg" in
        --no-install) install=0 ;;
        *) echo "build-ocaml-ripp.sh: ERROR: unknown option $arg (--no-install)" >&2; exit 2 ;;
    esac
done

if ! command -v dune >/dev/null 2>&1 || ! ocamlfind query bin_prot ppx_bin_prot yojson >/dev/null 2>&1; then
    if [ "$install" -eq 0 ]; then
        echo "build-ocaml-ripp.sh: ERROR: the OCaml toolchain or bin_prot is missing (scripts/install-ocaml.sh)" >&2
        exit 1
    fi
    "$repo/scripts/install-ocaml.sh"
fi

cd "$project"
# --root: never let dune climb to an enclosing dune-project; the build
# directory stays inside interop/ripp-ocaml/_build (git-ignored).
# flock: two builds started at once (a server and a client target) take
# turns instead of the second failing on dune's build-directory lock.
mkdir -p _build
flock _build/.ripp-build.lock dune build --root . --display quiet ./bin/ripp_peer.exe
exe="$project/_build/default/bin/ripp_peer.exe"
[ -x "$exe" ] || { echo "build-ocaml-ripp.sh: ERROR: $exe was not built" >&2; exit 1; }
echo "$exe"

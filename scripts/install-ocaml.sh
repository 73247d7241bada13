#!/usr/bin/env bash
# Installs the OCaml toolchain and the real bin_prot library from Debian's
# packages, for the independent RIPP peer in interop/ripp-ocaml/ (built by
# scripts/build-ocaml-ripp.sh). Idempotent: a second run only checks.
#
# Usage: scripts/install-ocaml.sh        (as root, or with sudo available)
#
# Why Debian's packages and not opam: the only registries this project's
# machines reach are PyPI, Debian's and npm; Debian ships bin_prot and its
# ppx deriver (the library RIPP's OCaml workers use), so the peer's payload
# codec is code the project did not write.
set -euo pipefail

die() {
    echo "install-ocaml.sh: ERROR: $*" >&2
    exit 1
}

# ocaml-nox: compiler; dune: build system; ocaml-findlib: library lookup;
# libppx-bin-prot-ocaml-dev + libbin-prot-ocaml-dev: [@@deriving bin_io];
# libfieldslib-ocaml-dev and libppxlib-ocaml-dev: what the deriver links
# against (named so a partial install is repaired too); libyojson-ocaml-dev:
# reads the JSON vector files (vectors/ripp/*.json).
packages=(ocaml-nox dune ocaml-findlib libppx-bin-prot-ocaml-dev libbin-prot-ocaml-dev
          libfieldslib-ocaml-dev libppxlib-ocaml-dev libyojson-ocaml-dev)

# shellcheck source=lib/debian-packages.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/debian-packages.sh"
mapfile -t missing < <(missing_debian_packages "${packages[@]}")
if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-ocaml.sh: $(ocamlfind ocamlopt -version 2>/dev/null | sed 's/^/ocaml /') bin_prot $(dpkg-query -W -f='${Version}' libbin-prot-ocaml-dev) already installed"
    exit 0
fi

install_debian_packages install-ocaml.sh "${missing[@]}"
echo "install-ocaml.sh: installed; bin_prot $(dpkg-query -W -f='${Version}' libbin-prot-ocaml-dev)"

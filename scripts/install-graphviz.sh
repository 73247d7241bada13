#!/usr/bin/env bash
# Installs Graphviz (`dot`) from Debian's packages, for the pictures of
# `conformance learn` (model.svg beside model.dot, docs/learn.md). Without
# it learn still writes the model as JSON and DOT. Idempotent: a second run
# only checks.
#
# Usage: scripts/install-graphviz.sh        (as root, or with sudo available)
set -euo pipefail

die() {
    echo "install-graphviz.sh: ERROR: $*" >&2
    exit 1
}

packages=(graphviz)

# shellcheck source=lib/debian-packages.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/debian-packages.sh"
mapfile -t missing < <(missing_debian_packages "${packages[@]}")
if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-graphviz.sh: graphviz $(dpkg-query -W -f='${Version}' graphviz) already installed"
    exit 0
fi

install_debian_packages install-graphviz.sh "${missing[@]}"
command -v dot >/dev/null 2>&1 || die "graphviz is installed but dot is not on PATH"
echo "install-graphviz.sh: installed; $(dot -V 2>&1)"

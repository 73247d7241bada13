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

missing=()
for p in "${packages[@]}"; do
    if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
        missing+=("$p")
    fi
done
if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-graphviz.sh: graphviz $(dpkg-query -W -f='${Version}' graphviz) already installed"
    exit 0
fi

command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install ${missing[*]} by hand"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "run as root (apt-get install ${missing[*]})"
    sudo=(sudo)
fi

echo "install-graphviz.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# A fresh machine has no package lists: without an update the install
# finds nothing.
"${sudo[@]}" apt-get update -q >/dev/null
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
for p in "${packages[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] \
        || die "$p is still not installed"
done
command -v dot >/dev/null 2>&1 || die "graphviz is installed but dot is not on PATH"
echo "install-graphviz.sh: installed; $(dot -V 2>&1)"

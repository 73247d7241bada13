#!/usr/bin/env bash
# The main job: set up, then certify the built-in reference nodes and print
# the verdict. Extra arguments go to `conformance certify` (e.g. --target
# ssb-server, which also needs scripts/install-node-deps.sh).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
scripts/setup.sh
exec .venv/bin/conformance certify "$@"

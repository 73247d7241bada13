#!/usr/bin/env bash
# The main job: set up, then certify the built-in reference nodes and print
# the verdict. Extra arguments go to `conformance certify` (e.g. --target
# ssb-server, which also needs scripts/install-node-deps.sh).
#
# Setup installs only what certifying needs (scripts/setup.sh without
# flags: the harness and its base dependencies into .venv). Two targets are
# certified at a time (--jobs 2: most of a certification waits on read
# deadlines and silence windows, docs/jobs.md; the verdicts are the serial
# run's); a --jobs of your own wins. The CLI lives in .venv, not on the
# PATH: the last lines say how to run it.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
scripts/setup.sh
set +e
.venv/bin/conformance certify --jobs 2 "$@"
code=$?
set -e
cat >&2 <<MSG

certify.sh: exit status $code (README.md, "Exit status"). The harness is installed in
  $repo/.venv; run it as .venv/bin/conformance ... from $repo,
  or put it on the PATH first: source .venv/bin/activate
MSG
exit "$code"

#!/usr/bin/env bash
# The test suite: set up (Python, the npm interop packages, RabbitMQ and
# OCaml with bin_prot from Debian's packages for the STOMP and RIPP interop
# tests, the Allure command line and
# Chromium for the report tests), then run
# every test. Extra arguments go to pytest. Exit code 5 from pytest (no
# tests collected) is turned into a failure: an empty run proves nothing.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
scripts/setup.sh --node --rabbitmq --ocaml
scripts/install-report-deps.sh
set +e
.venv/bin/python -m pytest tests -p no:cacheprovider "$@"
code=$?
set -e
if [ "$code" -eq 5 ]; then
    echo "test.sh: ERROR: pytest collected no tests (exit 5)" >&2
    exit 1
fi
exit "$code"

#!/usr/bin/env bash
# Creates .venv (Python >= 3.11) and installs the harness into it, editable,
# with the test extras. Idempotent: a second run only checks.
#
# Usage: scripts/setup.sh [--node] [--rabbitmq] [--ocaml] [--swpt] [--activemq]
#   --node      also installs the npm interop packages (scripts/install-node-deps.sh)
#   --rabbitmq  also installs Debian's rabbitmq-server for the STOMP target
#               `rabbitmq` (scripts/install-rabbitmq.sh; root or sudo)
#   --ocaml     also installs OCaml and bin_prot from Debian's packages for
#               the RIPP peer `ocaml-ripp` (scripts/install-ocaml.sh)
#   --swpt      also installs swpt_stomp 0.1.0 in a venv of its own for the
#               STOMP targets `swpt-server` and `swpt-client`
#               (scripts/install-swpt-stomp.sh), and RabbitMQ, its broker
#   --activemq  also installs Debian's activemq 5.17 and Java 17 for the STOMP
#               target `activemq` (scripts/install-activemq.sh; root or sudo)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

python="${PYTHON:-python3}"
"$python" - <<'PY' || { echo "setup: ERROR: Python >= 3.11 is required (set PYTHON=...)" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY

if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $("$python" --version)"
    "$python" -m venv .venv
fi
stamp=.venv/.installed-from
# setup.py builds the C accelerators (BTP codec, RIPP envelope decoder): a
# change to it or to their sources reinstalls too, so no built module is stale.
want="$(cat pyproject.toml setup.py reference_impl/btp/_fastcodec.c reference_impl/ripp/_fastenvelope.c | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "setup: installing the harness and its dependencies into .venv"
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e ".[test]"
    echo "$want" > "$stamp"
fi
for arg in "$@"; do
    case "$arg" in
        --node) scripts/install-node-deps.sh ;;
        --rabbitmq) scripts/install-rabbitmq.sh ;;
        --ocaml) scripts/install-ocaml.sh ;;
        --swpt) scripts/install-rabbitmq.sh && scripts/install-swpt-stomp.sh ;;
        --activemq) scripts/install-activemq.sh ;;
        *) echo "setup: ERROR: unknown option $arg (--node, --rabbitmq, --ocaml, --swpt, --activemq)" >&2; exit 2 ;;
    esac
done

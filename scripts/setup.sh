#!/usr/bin/env bash
# Creates .venv (Python >= 3.11) and installs the harness into it, editable:
# by default only what `conformance certify` needs (the base install, as
# scripts/certify.sh runs it); the project's own tests and the aggregation
# add their extras. Idempotent: a second run only checks, and an extra once
# installed stays (a later run without its flag does not remove it).
#
# Usage: scripts/setup.sh [--test-fast] [--test] [--aggregate] [--node] [--rabbitmq] [--ocaml] [--swpt] [--activemq] [--graphviz]
#        scripts/setup.sh --help
#   --test-fast also installs the fast tier's test extra, `.[test-fast]`
#               (Hypothesis, the STOMP client libraries, actionlint, ruff, ...):
#               what scripts/test.sh --fast runs with
#   --test      also installs the test extra, `.[test]`: the fast tier's and
#               PySpark, DuckDB, NumPy, Selenium; what the other tiers run with
#   --aggregate also installs the aggregate extra, `.[aggregate]` (PySpark) for
#               `conformance ingest|compact|matrix` (scripts/nightly.sh passes it)
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
#   --graphviz  also installs Debian's graphviz, so that `conformance learn`
#               draws its models as SVG (scripts/install-graphviz.sh; root or sudo)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

# The usage is the comment above, from "Usage:" to its end.
usage() { sed -n '/^# Usage:/,/^[^#]/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"; }
for arg in "$@"; do
    case "$arg" in
        -h|--help) usage; exit 0 ;;
        --test-fast|--test|--aggregate|--node|--rabbitmq|--ocaml|--swpt|--activemq|--graphviz) ;;
        *) echo "setup: ERROR: unknown option $arg" >&2; usage >&2; exit 2 ;;
    esac
done

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
# The stamp holds the hash and the extras installed with it ("HASH test,aggregate").
read -r have have_extras 2>/dev/null < "$stamp" || true
extras=",${have_extras:-},"
missing=0
for arg in "$@"; do
    case "$arg" in
        # The test extra holds the aggregate one (PySpark): --aggregate after
        # --test installs nothing (the nightly's setup step inside a test run).
        --aggregate) [[ "$extras" == *",aggregate,"* || "$extras" == *",test,"* ]] \
                         || { extras="${extras}aggregate,"; missing=1; } ;;
        --test) [[ "$extras" == *",test,"* ]] || { extras="${extras}test,"; missing=1; } ;;
        # The test extra holds the fast tier's.
        --test-fast) [[ "$extras" == *",test-fast,"* || "$extras" == *",test,"* ]] \
                         || { extras="${extras}test-fast,"; missing=1; } ;;
    esac
done
extras="$(tr ',' '\n' <<< "$extras" | sed '/^$/d' | LC_ALL=C sort -u | paste -sd, -)"
# The npm installs need nothing of .venv: they run beside pip's (on a new
# clone 26 s and 26 s one after the other on this project's 2-core machines,
# each of them often waiting on downloads), their output shown when both end.
node_pid="" node_log=""
stop_node_install() { if [ -n "$node_pid" ]; then kill "$node_pid" 2>/dev/null || true; fi; rm -f "$node_log"; }
trap stop_node_install EXIT
for arg in "$@"; do
    if [ "$arg" = --node ]; then
        node_log="$(mktemp)"
        scripts/install-node-deps.sh >"$node_log" 2>&1 &
        node_pid=$!
    fi
done
if [ "${have:-}" != "$want" ] || [ "$missing" -eq 1 ]; then
    echo "setup: installing the harness${extras:+ with the extras $extras} and its dependencies into .venv"
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e ".${extras:+[$extras]}"
    echo "$want${extras:+ $extras}" > "$stamp"
fi
if [ -n "$node_pid" ]; then
    node_code=0
    wait "$node_pid" || node_code=$?
    node_pid=""
    cat "$node_log"
    [ "$node_code" -eq 0 ] || { echo "setup: ERROR: scripts/install-node-deps.sh failed (exit $node_code)" >&2; exit "$node_code"; }
fi
for arg in "$@"; do
    case "$arg" in
        --test-fast|--test|--aggregate|--node) ;;
        --rabbitmq) scripts/install-rabbitmq.sh ;;
        --ocaml) scripts/install-ocaml.sh ;;
        --swpt) scripts/install-rabbitmq.sh && scripts/install-swpt-stomp.sh ;;
        --activemq) scripts/install-activemq.sh ;;
        --graphviz) scripts/install-graphviz.sh ;;
        *) echo "setup: ERROR: unknown option $arg" >&2; exit 2 ;;
    esac
done

#!/usr/bin/env bash
# The test suite, by tier (docs/testing.md has what each runs and how long):
#
#   scripts/test.sh [--fast | --tier TIER] [--workers N] [--times FILE] [PYTEST_ARGS...]
#
#   full (default)  every test. Sets up .venv, the npm interop packages,
#                   RabbitMQ, ActiveMQ and OCaml with bin_prot (Debian
#                   packages, root),
#                   the Allure command line and Chromium (root). The
#                   container tests need a Docker engine and the images
#                   (scripts/docker-build-images.sh); without them they are
#                   skipped, with CONFORMANCE_REQUIRE_DOCKER=1 they fail.
#   fast            (--fast) the inner loop: codecs, vectors, sans-I/O cores,
#                   harness core, every reference node certified, under
#                   3 minutes. Only .venv with the test-fast extra: no system
#                   package, no Docker, no JVM (no PySpark), no npm package.
#   containers      tests/containers only (the engine and images as for full).
#   nightly         the Hypothesis property tests with the nightly profile:
#                   10,000 examples each (tests/fuzz_budget.py); .venv and
#                   OCaml with bin_prot (the differential tests). The
#                   fuzz-nightly workflow runs it.
#
#   --workers N     pytest-xdist workers (default TEST_WORKERS, else 10 for
#                   the full tier and 8 for the others: most of the suite
#                   waits on nodes, deadlines and JVMs, so more workers than
#                   cores pays; the full tier waits most). 1 runs in this
#                   process, serial.
#   --times FILE    one JSON line per test phase into FILE (tests/times_plugin.py);
#                   scripts/test_times.py FILE makes the table of docs/testing.md.
#   --setup-only    install what the tier needs, then stop without testing
#                   (scripts/fresh-machine-check.sh runs it in a new container)
#
# Which tests each tier runs, and which tests share a worker (those sharing
# a module- or session-scoped fixture), is decided in tests/conftest.py. Exit code 5 from pytest (no tests collected) is turned
# into a failure: an empty run proves nothing.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

tier=full workers="${TEST_WORKERS:-}" times="" setup_only=0 pytest_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --fast) tier=fast ;;
        --tier) shift; tier="${1:-}" ;;
        --tier=*) tier="${1#--tier=}" ;;
        --workers) shift; workers="${1:-}" ;;
        --workers=*) workers="${1#--workers=}" ;;
        --times) shift; times="${1:-}" ;;
        --times=*) times="${1#--times=}" ;;
        --setup-only) setup_only=1 ;;
        *) pytest_args+=("$1") ;;
    esac
    shift
done
if [ -z "$workers" ]; then
    if [ "$tier" = full ]; then workers=10; else workers=8; fi
fi
case "$tier" in
    fast|full|containers|nightly) ;;
    *) echo "test.sh: ERROR: unknown tier '$tier' (fast, full, containers, nightly)" >&2; exit 2 ;;
esac
[[ "$workers" =~ ^[1-9][0-9]*$ ]] || { echo "test.sh: ERROR: --workers takes a positive number, got '$workers'" >&2; exit 2; }

# Which tests a tier runs is decided in one place, tests/conftest.py (--tier).
case "$tier" in
    fast)
        scripts/setup.sh --test-fast ;;
    containers)
        scripts/setup.sh --test --node --rabbitmq --ocaml --swpt ;;
    nightly)
        scripts/setup.sh --test --ocaml ;;
    full)
        scripts/setup.sh --test --node --rabbitmq --ocaml --swpt --activemq
        scripts/install-report-deps.sh ;;
esac
if [ "$setup_only" -eq 1 ]; then
    echo "test.sh: tier $tier set up (--setup-only: no test run)" >&2
    exit 0
fi
if [ -n "$times" ]; then
    export CONFORMANCE_TEST_TIMES="$(realpath -m "$times")"
    rm -f "$CONFORMANCE_TEST_TIMES"
fi
parallel=()
if [ "$workers" -gt 1 ]; then
    # Scopes in collection order, which tests/conftest.py sorts longest
    # first (xdist would otherwise hand out the groups with most tests first).
    parallel=(-n "$workers" --dist loadgroup --no-loadscope-reorder)
fi
echo "test.sh: tier $tier, $workers worker(s)" >&2
# Bytecode is written and reused: the tests start thousands of Python
# processes (a pytest session per certification, a node per client case),
# and with PYTHONDONTWRITEBYTECODE set (as some images do) each of them
# compiles every module it imports, and pytest rewrites the suites' asserts
# again in every session: 12-18 % of a certification's CPU time here.
unset PYTHONDONTWRITEBYTECODE
if [ "$workers" -gt 1 ]; then
    # Every xdist worker collects the whole suite. On a new clone none of
    # the test modules has its assert-rewritten bytecode yet, so each
    # worker would rewrite and compile all of them at once (8.4 CPU-s each,
    # 2.8 once cached: ten workers spent ~90 CPU-s where ~40 do). One
    # collection first writes that cache (skipped while no test module
    # changed since the last one); its result is the real run's.
    compiled_stamp=.cache/test-modules-compiled
    if [ ! -e "$compiled_stamp" ] || [ -n "$(find tests -name '*.py' -newer "$compiled_stamp" -print -quit)" ]; then
        warm_started=$SECONDS
        mkdir -p .cache
        touch "$compiled_stamp.new"
        .venv/bin/python -m pytest tests --tier "$tier" -p no:cacheprovider --collect-only -q \
            "${pytest_args[@]}" >/dev/null 2>&1 || true
        mv -f "$compiled_stamp.new" "$compiled_stamp"
        echo "test.sh: test modules compiled in $((SECONDS - warm_started)) s" >&2
    fi
fi
# The machine's CPU time over the run (every process, not only pytest's
# children: JVMs, brokers, containers), read from /proc/stat, so that the
# closing line says whether the run was bound by the CPU or by waiting.
cpu_jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $5+$6}' /proc/stat 2>/dev/null || echo "0 0"; }
read -r busy_before idle_before <<<"$(cpu_jiffies)"
started=$SECONDS
set +e
.venv/bin/python -m pytest tests --tier "$tier" -p no:cacheprovider "${parallel[@]}" "${pytest_args[@]}"
code=$?
set -e
echo "test.sh: tier $tier finished in $((SECONDS - started)) s (pytest exit $code)" >&2
read -r busy_after idle_after <<<"$(cpu_jiffies)"
awk -v b=$((busy_after - busy_before)) -v i=$((idle_after - idle_before)) -v n="$(nproc)" \
    -v hz="$(getconf CLK_TCK)" 'BEGIN { if (b + i > 0)
        printf "test.sh: machine CPU busy %.0f%% of %d core(s) over the run (%.0f CPU-s)\n", 100 * b / (b + i), n, b / hz
    }' >&2
if [ "$code" -eq 5 ]; then
    echo "test.sh: ERROR: pytest collected no tests (exit 5)" >&2
    exit 1
fi
exit "$code"

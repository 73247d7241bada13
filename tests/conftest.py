"""What the whole test suite shares: the tiers, the xdist groups, the
order of the run and the Hypothesis profiles (docs/testing.md).

Tiers. Every test gets the marks of what it needs beyond Python and the
harness (``TIER_NEEDS`` below, by file): ``spark`` (a JVM), ``containers``
(a Docker engine and the project's images), ``node_interop`` (the npm
packages), ``rabbitmq``, ``activemq``, ``ocaml`` and ``report_ui`` (Debian
packages),
``full`` (too long for the fast tier). The fast tier (``--tier fast``,
``scripts/test.sh --fast``) is every test with none of them.

Groups. Under ``-n N --dist loadgroup`` (``scripts/test.sh``), tests that
share a fixture of module or session scope defined in tests/ (a broker, a
Spark session, a node a module starts once, the OCaml build) run on one
worker, so that the fixture starts once, not once per worker; every other
test is handed out alone.

Order. The longest tests start first (``tests/durations.json``, written
from a run's phase times by scripts/test_times.py), so that no worker
still runs a long test alone at the end of the run.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Phase times into CONFORMANCE_TEST_TIMES when set (scripts/test.sh --times):
# hooks of this conftest by import.
from .times_plugin import pytest_runtest_call, pytest_runtest_setup, pytest_runtest_teardown  # noqa: F401

TESTS = Path(__file__).resolve().parent

# What each file's tests need beyond Python and the harness. A file not
# named needs nothing more: its tests are in the fast tier.
TIER_NEEDS: dict[str, tuple[str, ...]] = {
    "aggregate/": ("spark",),
    "containers/": ("containers",),
    # A new machine's whole setup in a fresh container: many minutes of
    # apt-get, pip and npm. The containers tier runs it, and the nightly
    # fresh-machine workflow; the full tier (CI's) leaves it out.
    "containers/test_fresh_machine.py::test_the_full_tier_sets_itself_up_on_a_fresh_machine": (
        "containers",
        "fresh_machine",
    ),
    "interop/": ("node_interop",),
    "report/": ("report_ui",),
    # Five certifications and a tshark per capture they write.
    "report/test_captures.py": ("report_ui", "full"),
    "ci/": ("nightly_workflow",),
    # Installs from PyPI and npm and whole certifications of older releases.
    "versions/test_versions_e2e.py": ("full",),
    "versions/test_versions_e2e.py::test_older_ilp_plugin_btp_is_certified_and_its_secret_is_in_no_log": (
        "node_interop",
        "full",
    ),
    "ripp/test_binprot.py": (),
    "ripp/test_interop.py": ("ocaml",),
    "ripp/test_ocaml_differential.py": ("ocaml",),
    "ripp/test_ocaml_peer.py": ("ocaml",),
    "ripp/test_ocaml_roundtrip.py": ("ocaml",),
    "stomp/test_rabbitmq.py": ("rabbitmq",),
    "stomp/test_interop.py": ("rabbitmq",),
    "stomp/test_swpt.py": ("swpt",),
    "stomp/test_activemq.py": ("activemq",),
    "stomp/test_activemq.py::test_stompit_delivers_to_activemq": ("activemq", "node_interop"),
    "stomp/test_stompit.py": ("node_interop",),
    "ssb/test_node_own_feed_request.py": ("node_interop",),
    "harness/test_interop_command.py": ("node_interop",),
    # 195 certifications of faulty reference nodes: minutes of CPU. The fast
    # tier keeps test_reference_node_without_a_fault_passes_every_case.
    "mutation/test_mutation.py::test_fault_is_caught_by_exactly_its_own_cases": ("full",),
    # One certification per conformant variant (the late ones minutes of waiting).
    "mutation/test_variants.py::test_variant_is_certified_conformant": ("full",),
    # Whole certifications compared or repeated over several faulty nodes
    # (a minute each, half a minute of CPU): the fast tier keeps the
    # harness's unit tests and one certification per reference node.
    "harness/test_case_jobs.py::test_reference_verdicts_do_not_depend_on_case_jobs": ("full",),
    "harness/test_btp_certify.py::test_each_broken_btp_node_fails_the_rules_it_breaks": ("full",),
    "harness/test_certify.py::test_each_broken_node_fails_the_rule_it_breaks": ("full",),
    # Live fuzzing runs (nodes started, Hypothesis for real): seconds each.
    "fuzz/test_live.py": ("full",),
    # Certifications of the BTP and SSB reference nodes' grammar faults
    # (10-25 s each, the clients' launches); the fast tier certifies each
    # reference node whole.
    "btp/test_suite_grammar.py": ("full",),
    "ssb/test_suite_grammar.py": ("full",),
    # certify + mutation + interop end to end (53 s, the fast tier's longest);
    # the cross-check's logic keeps its unit tests in the fast tier.
    "harness/test_crosscheck.py::test_interop_writes_the_cross_check_with_real_certifications": (
        "full",
    ),
    # conformance learn end to end: each learns reference nodes, faults and
    # variants (half a minute to two minutes of queries).
    "learn/test_learn_ripplehost.py": ("full",),
    "learn/test_learn_stomp.py": ("full",),
    "learn/test_learn_ripp.py": ("full",),
    "learn/test_learn_btp.py": ("full",),
    # Every reference node through each impairment profile that must change
    # no verdict: 20 certifications (docs/impairment.md).
    "harness/test_impair.py::test_reference_verdicts_hold_under_impairment": ("full",),
}

DURATIONS = TESTS / "durations.json"
"""Seconds each long test took in a full run (scripts/test_times.py
--write-durations): the longest start first. A test not in it (new, or
under 2 s) counts as 0 and keeps its place in file order."""


def _needs(nodeid: str) -> tuple[str, ...]:
    path = nodeid.removeprefix("tests/")
    best = ""
    for prefix in TIER_NEEDS:
        if path.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return TIER_NEEDS.get(best, ()) if best else ()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The fast tier does not even import a test file whose every test it
    leaves out: tests/aggregate import PySpark, which the fast tier's setup
    does not install (the test-fast extra, pyproject.toml)."""
    if config.getoption("--tier", None) != "fast" or collection_path.suffix != ".py":
        return None
    try:
        path = collection_path.resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return None
    if not set(_needs(path)) & set(NOT_FAST):
        return None
    # A test of the file named on its own with needs the fast tier runs.
    for key, needs in TIER_NEEDS.items():
        if key.startswith(path + "::") and not set(needs) & set(NOT_FAST):
            return None
    return True


def _shared_fixture_group(item: pytest.Item) -> str | None:
    """The xdist group of a test that uses a fixture of wider than function
    scope defined in tests/: its session-scoped fixtures when it has any
    (all their users share one worker, so the Spark session starts once),
    else the modules that define its module-scoped ones. None: no such
    fixture, the test may run on any worker."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    sessions, modules = set(), set()
    for name in info.names_closure:
        for fixturedef in info.name2fixturedefs.get(name, ()):
            code = getattr(fixturedef.func, "__code__", None)
            if (
                fixturedef.scope == "function"
                or code is None
                or TESTS not in Path(code.co_filename).parents
            ):
                continue
            if fixturedef.scope == "session":
                sessions.add(f"{fixturedef.baseid}::{name}")
            else:
                modules.add(fixturedef.baseid or code.co_filename)
    return "+".join(sorted(sessions or modules)) or None


TIERS = ("fast", "full", "containers", "nightly")
NOT_FAST = (
    "spark",
    "containers",
    "node_interop",
    "report_ui",
    "rabbitmq",
    "ocaml",
    "swpt",
    "activemq",
    "nightly_workflow",
    "full",
    "fresh_machine",
)
"""Marks that keep a test out of the fast tier."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tier",
        choices=TIERS,
        default=None,
        help="run one tier of the test suite (docs/testing.md): fast = no test marked "
        f"{', '.join(NOT_FAST)}; containers = only the container tier; full = all but "
        "fresh_machine; "
        "nightly = the Hypothesis property tests with the nightly profile (10,000 examples "
        "each). Default: every collected test.",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    group_of: dict[int, str | None] = {}
    for item in items:
        for need in _needs(item.nodeid):
            item.add_marker(need)
        group = group_of[id(item)] = _shared_fixture_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    tier = config.getoption("--tier")
    if tier in ("fast", "containers", "nightly", "full"):

        def wanted(item: pytest.Item) -> bool:
            marks = {mark.name for mark in item.iter_markers()}
            if tier == "full":
                return "fresh_machine" not in marks
            if tier == "nightly":
                # The property tests (Hypothesis marks what it wraps).
                return bool(getattr(getattr(item, "obj", None), "is_hypothesis_test", False))
            return not marks & set(NOT_FAST) if tier == "fast" else "containers" in marks

        keep = [item for item in items if wanted(item)]
        dropped = [item for item in items if not wanted(item)]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep
    # Longest first (a stable sort: file order otherwise). Under xdist every
    # worker sorts the same way, so their collections still agree.
    try:
        durations = json.loads(DURATIONS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        durations = {}
    if durations:
        # A group (one worker, in file order) goes by its longest test.
        longest: dict[str, float] = {}
        for item in items:
            group = group_of[id(item)]
            if group is not None:
                longest[group] = max(longest.get(group, 0.0), durations.get(item.nodeid, 0.0))

        def length(item: pytest.Item) -> float:
            group = group_of[id(item)]
            return longest[group] if group is not None else durations.get(item.nodeid, 0.0)

        items.sort(key=lambda item: -length(item))


def pytest_sessionstart(session: pytest.Session) -> None:
    """Each process that runs tests (an xdist worker, or pytest alone)
    shares its fork server with the `conformance` commands its tests run
    (conformance/core/forkserver.py, share_with_children): their sessions
    are forked from it from the first one on, instead of each command
    starting its first session as a new interpreter and a server of its
    own for the next. Not for xdist's controller (it runs no test) nor a
    run that only collects."""
    config = session.config
    controller = not hasattr(config, "workerinput") and bool(
        getattr(config.option, "numprocesses", None)
    )
    if not controller and not config.option.collectonly:
        from conformance.core import forkserver

        forkserver.share_with_children()


def pytest_configure(config: pytest.Config) -> None:
    if (
        config.getoption("--tier") == "nightly"
        and os.environ.get("HYPOTHESIS_PROFILE") != "nightly"
    ):
        # Before any test module is imported: tests/fuzz_budget.py reads it then.
        os.environ["HYPOTHESIS_PROFILE"] = "nightly"
        settings.load_profile("nightly")
    for name, about in (
        ("spark", "needs a JVM (PySpark): tests/aggregate"),
        ("rabbitmq", "needs Debian's rabbitmq-server (scripts/install-rabbitmq.sh)"),
        ("ocaml", "needs OCaml with bin_prot (scripts/install-ocaml.sh)"),
        ("activemq", "needs Debian's activemq and Java 17 (scripts/install-activemq.sh)"),
        (
            "swpt",
            "needs swpt_stomp and RabbitMQ (scripts/install-swpt-stomp.sh, "
            "scripts/install-rabbitmq.sh)",
        ),
        ("nightly_workflow", "lints the nightly workflow (actionlint) and runs its steps"),
        ("full", "too long for the fast tier's 3 minutes: full tier only"),
        (
            "fresh_machine",
            "a new machine's setup in a fresh container (scripts/fresh-machine-check.sh): "
            "the containers tier and the fresh-machine workflow, not the full tier",
        ),
    ):
        config.addinivalue_line("markers", f"{name}: {about}")


# The tests' JVMs (Spark drivers, the standalone master and worker) live
# seconds on little data: compiling with C1 only costs far less CPU than
# the JVM's full tiered JIT and changes no result (measured on
# bench/spark_bench.py --quick --floor: 210 -> 121 CPU-seconds). Set for
# this session and what it starts, unless the caller set them.
for _variable in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
    os.environ.setdefault(_variable, "-XX:TieredStopAtLevel=1")
# The executors a standalone worker starts take their JVM options from the
# application's configuration, not from those variables: the same C1-only
# option reaches them as an administrator's default (tests/spark-conf/
# spark-defaults.conf; the cluster test's six steps: 218 -> 185 CPU-s).
os.environ.setdefault("SPARK_CONF_DIR", str(Path(__file__).resolve().parent / "spark-conf"))


# The Ctrl-C tests send SIGINT to a CLI they start, as a terminal does to
# its foreground job, whose SIGINT is at its default. A command that a
# non-interactive shell starts in the background (`scripts/test.sh --fast
# > log &`) gets SIGINT ignored, and an ignored signal stays ignored in
# every process started from it: the CLI never saw the Ctrl-C and ran to
# its end (exit 0; pytest exit 0 instead of 2). Give it back its default
# here, so that the processes the tests start have it too.
if (
    signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    and threading.current_thread() is threading.main_thread()
):
    signal.signal(signal.SIGINT, signal.default_int_handler)


# Hypothesis: "ci" (the default) keeps each test's own number of examples;
# "nightly" (HYPOTHESIS_PROFILE=nightly, set by scripts/nightly.sh) runs
# NIGHTLY_EXAMPLES for every property (see tests/fuzz_budget.py).
settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("nightly", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def grammar_records():
    """The grammar violations recorded while a test runs (core/node_grammar.py),
    as if in case ``a.case.id``: what a suite's decoder of node output records
    for a grammar case."""
    from conformance.core import node_grammar

    records: list[node_grammar.GrammarRecord] = []
    node_grammar.begin_case("a.case.id", records.append)
    yield records
    node_grammar.begin_case("", None)

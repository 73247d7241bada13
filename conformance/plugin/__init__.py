"""The pytest plugin that turns suites into conformance runs.

It adds ``--target``, ``--targets-file``, ``--protocol``, ``--run-dir`` and
``--deadline``; starts and stops launched targets; decides per case whether
it applies to the target (role, capabilities); hands cases a wire trace and
connections with read deadlines; writes one result line per case; and labels
every case for Allure, attaching the wire trace as a hex dump.

The plugin is inert for tests without a ``requirement`` marker, so it can be
installed alongside any other test suite.

pytest loads this module (``-p conformance.plugin``, or the
``conformance`` entry point) and finds the hooks and fixtures on it: they
are defined along the plugin's seams and imported here.

- ``options``: the command-line options;
- ``state``: the session's state (RunState), its targets' runtimes;
- ``signals``: SIGTERM and Ctrl-C, which stop the targets cleanly;
- ``ordering``: case selection, prerequisites first, the case groups of
  ``--case-jobs`` and its xdist controller;
- ``preflight``: the plan and the preflight before the first case;
- ``protocol_hooks``: a protocol suite's own ``prepare`` and ``preflight``;
- ``fixtures``: ``target``, ``peer_target``, ``connect``, ``ws_connect``,
  ``deadline``, ``wire_trace``, ``requirement_spec``, ``node_grammar``;
- ``outcomes``: how each case ends, as a typed value in its stash;
- ``reporting``: records, traces, Allure labels, progress lines.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ..core import impair
from ..core.results import new_run_id
from ..core.run_folder import RunFolder
from ..core.targets import TargetError, load_targets
from ..core.versioned_targets import resolve_versioned
from .fixtures import (
    connect,
    deadline,
    node_grammar,
    peer_target,
    requirement_spec,
    target,
    wire_trace,
    ws_connect,
)
from .options import pytest_addoption
from .ordering import (
    GROUPS_FILE_KEY,
    RUN_ID_KEY,
    STARTED_WALL_KEY,
    CaseJobsController,
    PrerequisiteOrder,
    pytest_collection_modifyitems,
)
from .outcomes import (
    CaseInterrupted,
    ConformanceFailure,
    RunDeadlineExceeded,
    pytest_runtest_call,
    pytest_runtest_protocol,
    pytest_runtest_setup,
)
from .preflight import begin_run
from .reporting import (
    flush_blocked,
    pytest_report_teststatus,
    pytest_runtest_makereport,
    register_allure_ids,
    unregister_allure_ids,
)
from .signals import SessionTerminated, pytest_keyboard_interrupt, stop_targets
from .state import STATE, RunState, state_of

__all__ = [
    # hooks
    "pytest_addoption",
    "pytest_configure",
    "pytest_sessionstart",
    "pytest_sessionfinish",
    "pytest_collection_modifyitems",
    "pytest_runtestloop",
    "pytest_runtest_setup",
    "pytest_runtest_call",
    "pytest_runtest_makereport",
    "pytest_runtest_protocol",
    "pytest_report_teststatus",
    "pytest_keyboard_interrupt",
    "pytest_unconfigure",
    # fixtures
    "connect",
    "deadline",
    "node_grammar",
    "peer_target",
    "requirement_spec",
    "target",
    "wire_trace",
    "ws_connect",
    # the exceptions cases end with (their names are conformance.plugin.*)
    "CaseInterrupted",
    "ConformanceFailure",
    "RunDeadlineExceeded",
    "SessionTerminated",
]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "requirement(case_id, level, citation, *, role, needs, depends, errata, "
        "shares): the rule a conformance case checks (conformance.core.requirements)",
    )
    workerinput = getattr(config, "workerinput", None)
    # A pytest-xdist worker (certify --case-jobs N) records under the
    # controller's run id, not one of its own.
    run_id = config.getoption("--run-id") or (workerinput or {}).get(RUN_ID_KEY) or new_run_id()
    run_dir = Path(config.getoption("--run-dir") or RunFolder.default(run_id).path)
    try:
        targets = load_targets(config.getoption("--targets-file"))
    except TargetError as exc:
        raise pytest.UsageError(str(exc)) from None
    name = config.getoption("--target")
    peer = config.getoption("--peer")
    try:
        # NAME@VERSION: NAME at another release (docs/versions.md).
        resolve_versioned(targets, [name, peer])
    except TargetError as exc:
        raise pytest.UsageError(str(exc)) from None
    for given in (name, peer):
        if given is not None and given not in targets:
            raise pytest.UsageError(
                f"unknown target {given!r}; known: {', '.join(sorted(targets))}"
            )
    state = RunState(config, run_id, run_dir, config.getoption("--deadline"), targets, name)
    state.peer_name = peer
    profile = config.getoption("--impair")
    if profile:
        try:
            seed = config.getoption("--impair-seed")
            state.impairment = impair.Impairment(
                impair.parse_profile(profile), seed if seed is not None else impair.new_seed()
            )
        except impair.ImpairmentError as exc:
            raise pytest.UsageError(str(exc)) from None
        impair.activate(state.impairment)
    elif config.getoption("--impair-seed") is not None:
        raise pytest.UsageError("--impair-seed goes with --impair")
    run_timeout = config.getoption("--run-timeout")
    if run_timeout is not None and run_timeout <= 0:
        raise pytest.UsageError(
            f"--run-timeout must be a positive number of seconds, got {run_timeout}"
        )
    state.run_timeout = run_timeout
    config.pluginmanager.register(PrerequisiteOrder(), "conformance-prerequisite-order")
    if workerinput is not None:
        # The run deadline counts from the controller's start, not from
        # this worker's.
        state.worker_id = workerinput["workerid"]
        state.groups_file = workerinput.get(GROUPS_FILE_KEY)
        started_wall = workerinput.get(STARTED_WALL_KEY)
        if started_wall is not None:
            state.started = time.monotonic() - max(0.0, time.time() - started_wall)
    elif getattr(config.option, "dist", "no") != "no":
        config.pluginmanager.register(CaseJobsController(state), "conformance-case-jobs-controller")
    config.stash[STATE] = state
    register_allure_ids()


def pytest_sessionstart(session: pytest.Session) -> None:
    state = session.config.stash.get(STATE, None)
    if state is not None:
        state.session = session


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(STATE, None)
    if state is not None:
        state.finishing = True  # from here SIGTERM stops the nodes without raising
        flush_blocked(state)  # the run of blocked cases the session ended with


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """Before any case: write the plan of the run, then the preflight. A
    misconfigured or unreachable target stops the run here with one clear
    error instead of one error per case."""
    return begin_run(session, state_of(session.config))


def pytest_unconfigure(config: pytest.Config) -> None:
    unregister_allure_ids()
    state = config.stash.get(STATE, None)
    if state is not None:
        stop_targets(state)

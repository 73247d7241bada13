"""The pytest plugin that turns suites into conformance runs.

It adds ``--target``, ``--targets-file``, ``--protocol``, ``--run-dir`` and
``--deadline``; starts and stops launched targets; decides per case whether
it applies to the target (role, capabilities); hands cases a wire trace and
connections with read deadlines; writes one result line per case; and labels
every case for Allure, attaching the wire trace as a hex dump.

The plugin is inert for tests without a ``requirement`` marker, so it can be
installed alongside any other test suite.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import json
import os
import signal
import socket
import sys
import tempfile
import textwrap
import threading
import time
from urllib.parse import urlsplit
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import pytest

from . import __version__
from .core.requirements import (
    BLOCKED_PREFIX,
    NODE_STATE,
    NOT_APPLICABLE_PREFIX,
    Requirement,
    blocked,
    not_applicable,
    requirement_of,
)
from .core.results import (
    BLOCKED,
    ERROR,
    FAILED,
    NOT_APPLICABLE,
    PASSED,
    ResultRecord,
    ResultWriter,
    console_text,
    new_run_id,
    utc_now,
)
from .core.redact import Redactor
from .core.run_folder import RunFolder, session_label
from .core.selection import hint, selected
from .core.targets import (
    Target,
    TargetError,
    TargetNotStarted,
    TargetRuntime,
    definition_problems,
    load_targets,
    make_work_dir,
    runtime_problems,
)
from .core import impair
from .core.transport import DEFAULT_READ_DEADLINE, DeadlineExceeded, TcpConnection, WireTrace

SILENT_CASES_BEFORE_UNRESPONSIVE = 3
"""After this many consecutive cases in which the target sent not one byte
while a case waited for bytes it must send, the target is declared
unresponsive and the remaining cases end at once with outcome ``error``
(they are recorded, never skipped), so a run against a dead node ends in
seconds with a clear verdict instead of waiting out every deadline."""

try:
    import allure
    import allure_commons
    from allure_commons.types import AttachmentType
    from allure_commons.utils import md5 as allure_md5
    from allure_pytest.utils import get_history_id
except ImportError:  # allure-pytest is a dependency, but keep the core usable without it
    allure = None


class ConformanceFailure(AssertionError):
    """A case's failure, prefixed with the requirement it checks."""


class CaseInterrupted(Exception):
    """The outcome of a case an interrupt (SIGTERM, Ctrl-C) cut short: no
    verdict. Reported for the phase that was running (see
    pytest_runtest_protocol) so that Allure and JUnit show the case broken
    rather than passed; results.jsonl gets no line for it."""


INTERRUPTED_PREFIX = "interrupted: no verdict"


class RunDeadlineExceeded(Exception):
    """The run's deadline (``--run-timeout``) passed before the case started."""


PREFLIGHT_EXIT_CODE = 4
"""pytest's exit status when the preflight stopped the run (pytest's own
code for a usage error: the target's definition or address is wrong)."""


@dataclass
class RunState:
    config: pytest.Config
    run_id: str
    run_dir: Path
    deadline: float
    targets: dict[str, Target]
    target_name: str | None
    runtime: TargetRuntime | None = None
    peer_name: str | None = None
    peer_runtime: TargetRuntime | None = None
    writer: ResultWriter | None = None
    """Created on the first result, so that test runs without conformance
    cases leave no run directory behind."""
    startup_error: str | None = None
    not_started: bool = False
    """The target did not start (startup_error says how): every case that
    would need it ends in ``error`` with that message, marked
    ``start_failure``; not a preflight error (docs/targets.md, "Not ready")."""
    silent_cases: int = 0
    done: int = 0
    total: int = 0
    blocked_run: dict[str, Any] | None = None
    """Progress lines: consecutive cases blocked by one root cause, held
    back to be printed as one line (_flush_blocked)."""
    finishing: bool = False
    """pytest_sessionfinish has begun: a SIGTERM now stops the nodes but
    raises nothing (see _raise_session_terminated)."""
    unresponsive: str | None = None
    case_state: dict[str, dict[str, Any]] = field(default_factory=dict)
    case_results: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Per case id, the outcome of each of its items this run (with the root
    cause of a blocked one), for judging the cases that depend on it."""
    run_timeout: float | None = None
    started: float = field(default_factory=time.monotonic)
    readded: list[str] = field(default_factory=list)
    """Node ids of prerequisites put back after --case, -k or --deselect
    removed them: run, and recorded with ``prerequisite_only``."""
    redactor: Redactor = field(default_factory=Redactor)
    """The credentials of the target and peer: masked in traces, messages
    and reports."""
    worker_id: str | None = None
    """The pytest-xdist worker this session is (``gw0``, ...) under
    ``certify --case-jobs N``; None in an ordinary session."""
    groups_file: str | None = None
    """Worker: where to write the case groups for the controller's scheduler."""
    session: Any = None
    """The pytest session (set at its start): SIGTERM sets its shouldstop."""
    sigterm_handler: Any = None
    """The SIGTERM handler this session replaced (see _interrupt_on_sigterm),
    put back at the end; None while it replaced none."""
    impairment: impair.Impairment | None = None
    """The run's network impairment (--impair, --impair-seed): every
    connection with the target goes through its relay (core/impair.py)."""
    project_suite: bool = True
    """Whether the cases come from the project's own suites (conformance.*),
    whose protocol preflight (conformance/suites/<protocol>/preflight.py)
    applies; a suite from elsewhere (a user's, or a test's fake suite) is
    judged by the generic checks alone."""

    def peer_for(self) -> TargetRuntime:
        """The interop peer (server role), started on first use."""
        if self.peer_runtime is None:
            assert self.peer_name is not None
            peer = self.targets[self.peer_name]
            _interrupt_on_sigterm(self)
            runtime = TargetRuntime(
                peer, make_work_dir(peer.name), RunFolder(self.run_dir).logs, run_id=self.run_id
            )
            runtime.log_dir.mkdir(parents=True, exist_ok=True)
            try:
                if self.project_suite:
                    prepare_runtime(runtime)
                runtime.start_server()
            except (
                BaseException
            ):  # SessionTerminated too: the half-started node and its work dir go
                runtime.stop()
                raise
            self.peer_runtime = runtime
            for secret in runtime.secret_values():
                self.redactor.add(secret)
        return self.peer_runtime

    def runtime_for(self, protocol: str) -> TargetRuntime:
        """The target runtime, started on first use."""
        if self.startup_error:
            raise (TargetNotStarted if self.not_started else TargetError)(self.startup_error)
        if self.runtime is None:
            name = self.target_name or f"reference-{protocol}"
            if name not in self.targets:
                raise TargetError(
                    f"unknown target {name!r}; known targets: {sorted(self.targets)} "
                    "(add your own with --targets-file)"
                )
            target = self.targets[name]
            _interrupt_on_sigterm(self)
            runtime = TargetRuntime(
                target, make_work_dir(target.name), RunFolder(self.run_dir).logs, run_id=self.run_id
            )
            runtime.log_dir.mkdir(parents=True, exist_ok=True)
            try:
                if self.project_suite:
                    prepare_runtime(runtime)
                # In an interop run the target is only the client; its
                # server role is not needed.
                if self.peer_name is None:
                    runtime.start_server()
            except TargetError as exc:
                self.startup_error = str(exc)
                self.not_started = isinstance(exc, TargetNotStarted)
                runtime.stop()
                raise (TargetNotStarted if self.not_started else TargetError)(
                    self.startup_error
                ) from None
            except (
                BaseException
            ):  # SessionTerminated too: the half-started node and its work dir go
                runtime.stop()
                raise
            self.runtime = runtime
            for secret in runtime.secret_values():
                self.redactor.add(secret)
        return self.runtime


_STATE = pytest.StashKey[RunState]()


class SessionTerminated(KeyboardInterrupt):
    """SIGTERM to a session that started targets: the CLI's way to stop it
    (Ctrl-C, --jobs, the --run-timeout backstop), and a CI runner's or
    ``kill``'s. pytest ends an interrupted session the way it ends any
    other, so pytest_unconfigure stops the nodes and removes the work dirs,
    which hold the targets' credentials. Without this the default action
    ends the process at once and the work dirs stay in the temp dir."""


_SIGTERM_STATE: RunState | None = None
"""The session state _raise_session_terminated stops (set with the handler)."""


def _raise_session_terminated(signum: int, frame: object) -> None:
    # Once: a second SIGTERM must not cut short the clean-up the first one
    # started (the CLI sends SIGKILL if it takes too long).
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    state = _SIGTERM_STATE
    if state is not None:
        # The exception below can be swallowed: a handler runs wherever the
        # main thread is, and an exception raised inside sys.unraisablehook
        # or an asyncio callback is only logged (seen: inside allure's
        # fixture finalizer, the session then ran on until the CLI's
        # SIGKILL). So first the nodes and the work dirs holding their
        # credentials go, and the session stops after its current case
        # whatever becomes of the exception. stop() is idempotent:
        # pytest_unconfigure calls it again.
        if state.session is not None:
            state.session.shouldstop = "stopped by SIGTERM"
        for runtime in (state.runtime, state.peer_runtime):
            if runtime is not None:
                runtime.stop()
    if (
        isinstance(sys.exc_info()[1], KeyboardInterrupt)
        or _ctrl_c_in_asyncio()
        or (state is not None and state.finishing)
    ):
        # An interrupt is being handled already (Ctrl-C reaches the session
        # and the CLI, which then sends SIGTERM), or the session is ending:
        # an exception raised now would escape pytest's own handling of the
        # first and end the process with pages of chained tracebacks. The
        # nodes are stopped and the session stops; that is all SIGTERM asks.
        return
    raise SessionTerminated()


def _ctrl_c_in_asyncio() -> bool:
    """A Ctrl-C is on its way through an async case: asyncio.Runner (which
    runs it) took the SIGINT, cancels the case's task and raises
    KeyboardInterrupt only once that task has ended; until then none is
    being handled. A SessionTerminated raised into the loop meanwhile cut
    asyncio.wait_for's own cancellation short, and the orphaned recv() task
    printed "Task exception was never retrieved" and its traceback (about
    one run in five of test_a_case_cut_short_by_an_interrupt_is_nowhere_passed
    [ctrl-c]). _interrupt_count is the Runner's (CPython 3.11 to 3.13)."""
    handler = signal.getsignal(signal.SIGINT)
    runner = getattr(getattr(handler, "func", None), "__self__", None)
    return isinstance(runner, asyncio.Runner) and getattr(runner, "_interrupt_count", 0) > 0


def _interrupt_on_sigterm(state: RunState) -> None:
    """Before a session makes its first work dir: let SIGTERM interrupt it
    rather than kill it outright. Only in the main thread (the only one that
    may set handlers) and only over the default action, so that a program
    embedding pytest keeps its own handler."""
    global _SIGTERM_STATE
    if (
        state.sigterm_handler is not None
        or threading.current_thread() is not threading.main_thread()
    ):
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        _SIGTERM_STATE = state
        state.sigterm_handler = signal.signal(signal.SIGTERM, _raise_session_terminated)


def pytest_sessionstart(session: pytest.Session) -> None:
    state = session.config.stash.get(_STATE, None)
    if state is not None:
        state.session = session


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(_STATE, None)
    if state is not None:
        state.finishing = True  # from here SIGTERM stops the nodes without raising
        _flush_blocked(state)  # the run of blocked cases the session ended with


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "conformance harness")
    group.addoption(
        "--target",
        default=None,
        help="name of the target to certify (see `conformance targets`); "
        "default: the built-in reference node of the suite's protocol",
    )
    group.addoption(
        "--targets-file",
        action="append",
        default=[],
        help="TOML file of target definitions (repeatable; later names win)",
    )
    group.addoption(
        "--protocol",
        action="append",
        default=[],
        help="only run cases of this protocol (repeatable)",
    )
    group.addoption(
        "--run-dir",
        default=None,
        help="directory for results.jsonl, traces and logs (default reports/runs/RUN_ID)",
    )
    group.addoption("--run-id", default=None, help="run id to record (default: generated)")
    group.addoption(
        "--peer",
        default=None,
        help="interop runs: the target playing the server role opposite --target (the client)",
    )
    group.addoption(
        "--progress",
        action="store_true",
        help="print one line per finished case (case id, level, outcome) to stderr",
    )
    group.addoption(
        "--deadline",
        type=float,
        default=DEFAULT_READ_DEADLINE,
        help=f"seconds to wait for bytes a target must send (default {DEFAULT_READ_DEADLINE})",
    )
    group.addoption(
        "--run-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="deadline of the whole run: cases not started when it passes are recorded as "
        "error (the running case ends at its own read deadline)",
    )
    group.addoption(
        "--impair",
        default=None,
        metavar="PROFILE",
        help="every connection with the target through a loopback relay that impairs the byte "
        "stream: fragment, coalesce, delay, throttle, stall, with parameters "
        "(delay:ms=200,jitter=50; docs/impairment.md)",
    )
    group.addoption(
        "--impair-seed",
        type=int,
        default=None,
        metavar="N",
        help="the impairment's seed (default: drawn at random and recorded)",
    )
    group.addoption(
        "--case",
        action="append",
        default=[],
        metavar="PATTERN",
        help="only the cases whose id matches (a case id or a shell-style glob, e.g. 'ssb.shs.*'; "
        "repeatable); their prerequisites run too (conformance.core.selection)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "requirement(case_id, level, citation, *, role, needs, depends, errata, "
        "shares): the rule a conformance case checks (conformance.core.requirements)",
    )
    workerinput = getattr(config, "workerinput", None)
    # A pytest-xdist worker (certify --case-jobs N) records under the
    # controller's run id, not one of its own.
    run_id = config.getoption("--run-id") or (workerinput or {}).get(_RUN_ID_KEY) or new_run_id()
    run_dir = Path(config.getoption("--run-dir") or RunFolder.default(run_id).path)
    try:
        targets = load_targets(config.getoption("--targets-file"))
    except TargetError as exc:
        raise pytest.UsageError(str(exc)) from None
    name = config.getoption("--target")
    peer = config.getoption("--peer")
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
    config.pluginmanager.register(_PrerequisiteOrder(), "conformance-prerequisite-order")
    if workerinput is not None:
        # The run deadline counts from the controller's start, not from
        # this worker's.
        state.worker_id = workerinput["workerid"]
        state.groups_file = workerinput.get(_GROUPS_FILE_KEY)
        started_wall = workerinput.get(_STARTED_WALL_KEY)
        if started_wall is not None:
            state.started = time.monotonic() - max(0.0, time.time() - started_wall)
    elif getattr(config.option, "dist", "no") != "no":
        config.pluginmanager.register(
            _CaseJobsController(state), "conformance-case-jobs-controller"
        )
    config.stash[_STATE] = state
    if allure is not None and not allure_commons.plugin_manager.is_registered(_ALLURE_RESULT_IDS):
        allure_commons.plugin_manager.register(_ALLURE_RESULT_IDS)


def _state(config: pytest.Config) -> RunState:
    return config.stash[_STATE]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Keep the cases of the chosen protocols and of the target's protocol,
    and remember them all: ``-k`` and ``--deselect`` run after this, and
    the prerequisites they remove are put back (see below)."""
    state = _state(config)
    protocols = set(config.getoption("--protocol"))
    if state.target_name:
        protocols = (
            protocols & {state.targets[state.target_name].protocol}
            if protocols
            else {state.targets[state.target_name].protocol}
        )
    if protocols:
        keep, drop = [], []
        for item in items:
            req = requirement_of(item)
            (keep if req is None or req.protocol in protocols else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    config.stash[_ALL_CASES] = [item for item in items if requirement_of(item) is not None]
    patterns = config.getoption("--case")
    if patterns:
        keep, drop = [], []
        for item in items:
            req = requirement_of(item)
            (keep if req is not None and selected(req.case_id, patterns) else drop).append(item)
        if not keep:
            found = sorted({requirement_of(item).protocol for item in config.stash[_ALL_CASES]})  # type: ignore[union-attr]
            raise pytest.UsageError(
                f"--case {' '.join(patterns)} matches no case of this suite"
                + (f" ({hint(found)})" if found else "")
            )
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep


_ALL_CASES = pytest.StashKey[list[pytest.Item]]()
_STARTED_WALL_KEY = "conformance_started_wall"
"""workerinput key: the controller's start (time.time()), for --run-timeout."""
_RUN_ID_KEY = "conformance_run_id"
_GROUPS_FILE_KEY = "conformance_groups_file"
"""workerinput key: the file in which worker gw0 writes ``{nodeid: group}``."""
_PREFLIGHT_FAILED_KEY = "conformance_preflight_failed"
"""workeroutput key: the worker's preflight stopped the run."""


def case_groups(cases: list[pytest.Item]) -> dict[int, str]:
    """``id(item) -> group name`` for the cases that must run one after
    another in one worker: a case with its prerequisites and dependents
    (the blocked-by judgement reads their results in the same session),
    and the cases naming one shared state (``shares``); a ``node`` state
    joins every server-role case. Connected cases form one group, named
    after its first case in collection order. Cases connected to no other
    are left out: they may run anywhere, at any time."""
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        parent.setdefault(key, key)
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    def union(a: str, b: str) -> None:
        parent[find(a)] = find(b)

    reqs = [(item, requirement_of(item)) for item in cases]
    node_wide = any(NODE_STATE in req.shares for _, req in reqs if req is not None)
    for _, req in reqs:
        if req is None:
            continue
        case = "case:" + req.case_id
        find(case)
        for dep in req.depends:
            union(case, "case:" + dep)
        for name in req.shares:
            union(case, "state:" + name)
        if node_wide and req.role == "server":
            union(case, "state:" + NODE_STATE)
    members: dict[str, list[tuple[pytest.Item, Requirement]]] = {}
    for item, req in reqs:
        if req is not None:
            members.setdefault(find("case:" + req.case_id), []).append((item, req))
    groups: dict[int, str] = {}
    for group in members.values():
        if len(group) > 1:
            for item, _ in group:
                groups[id(item)] = group[0][1].case_id
    return groups


class _CaseJobsController:
    """In the pytest-xdist controller (``certify --case-jobs N``): the run
    id and start for the workers, the scheduler that keeps each group of
    :func:`case_groups` on one worker, and the progress lines, which workers
    cannot print (xdist does not show their output). Each worker puts its
    case's record on the teardown report (``conformance_case``)."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.started_wall = time.time()
        self.readded_told = False
        # In the temp dir, not the run dir: a session without cases (the
        # project's own tests) has no run dir and must not make one.
        self.groups_file = (
            Path(tempfile.gettempdir()) / f"conformance-case-groups.{os.getpid()}.json"
        )
        self.preflight_failed = False

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[_STARTED_WALL_KEY] = self.started_wall
        node.workerinput[_RUN_ID_KEY] = self.state.run_id
        node.workerinput[_GROUPS_FILE_KEY] = str(self.groups_file)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        if getattr(node, "workeroutput", {}).get(_PREFLIGHT_FAILED_KEY):
            self.preflight_failed = True

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # The status of a serial session stopped by its preflight.
        if self.preflight_failed:
            session.exitstatus = PREFLIGHT_EXIT_CODE
        self.groups_file.unlink(missing_ok=True)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        # xdist's own loadgroup reads xdist_group marks through a node id
        # suffix, which pytest 9 no longer lets a plugin set; the scheduler
        # takes the groups from worker gw0's file instead.
        if config.getvalue("dist") != "loadgroup":
            return None
        from xdist.scheduler import LoadScopeScheduling

        groups_file = self.groups_file

        class CaseGroupScheduling(LoadScopeScheduling):
            """Loadscope with one scope per case group; a case in no group
            is a scope of its own. Bigger scopes are handed out first."""

            groups: dict[str, str] | None = None

            def _split_scope(self, nodeid: str) -> str:
                if self.groups is None:
                    try:
                        self.groups = json.loads(groups_file.read_text(encoding="utf-8"))
                        groups_file.unlink()
                    except (OSError, ValueError):
                        self.groups = {}  # no conformance cases: every test is its own scope
                group = self.groups.get(nodeid)
                return "group:" + group if group else nodeid

        return CaseGroupScheduling(config, log)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        case = getattr(report, "conformance_case", None)
        if not case or not self.state.config.getoption("--progress"):
            return
        if case.get("readded") and not self.readded_told:
            self.readded_told = True
            _print_readded(case["readded"])
        self.state.total = case["total"]
        _print_progress(
            self.state,
            case["case_id"],
            case["level"],
            case["outcome"],
            case["duration"],
            case["message"],
            case.get("prerequisite_only", False),
        )


class _PrerequisiteOrder:
    """A second ``pytest_collection_modifyitems``, run last (after -k and
    --deselect); a module can hold only one function of that name."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, items: list[pytest.Item], config: pytest.Config
    ) -> None:
        _order_by_prerequisites(items, config)
        _write_groups(items, config)


def _write_groups(items: list[pytest.Item], config: pytest.Config) -> None:
    """Under pytest-xdist, worker gw0 tells the controller's scheduler which
    tests must share a worker (before xdist sends the collection, so the
    file is there when the scheduler starts; every worker collects the
    same): the case groups of :func:`case_groups`, and for any other test
    its ``xdist_group`` mark. The mark has to come this way: xdist's own
    loadgroup appends it to ``item._nodeid``, which pytest 9 ignores, so the
    project's own test suite (scripts/test.sh, ``-n N --dist loadgroup``)
    relies on this too. A session with no group writes nothing: no run dir
    appears for it."""
    state = _state(config)
    if state.worker_id != "gw0" or not state.groups_file:
        return
    cases = config.stash.get(_ALL_CASES, [])
    groups = case_groups(cases)
    named = {item.nodeid: groups[id(item)] for item in cases if id(item) in groups}
    for item in items:
        if item.nodeid in named:
            continue
        marks = sorted(
            {
                str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                for mark in item.iter_markers("xdist_group")
            }
        )
        if marks:
            named[item.nodeid] = "xdist_group:" + "+".join(marks)
    if named:
        _write_atomically(Path(state.groups_file), json.dumps(named))


def _order_by_prerequisites(items: list[pytest.Item], config: pytest.Config) -> None:
    """Run prerequisites before the cases that depend on them, in file order
    otherwise, and put back the prerequisites that -k or --deselect removed:
    a dependent cannot be judged without them. An unknown prerequisite or a
    cycle is a usage error naming it."""
    state = _state(config)
    every = config.stash.get(_ALL_CASES, [])
    by_id: dict[str, list[pytest.Item]] = {}
    for item in every:
        by_id.setdefault(requirement_of(item).case_id, []).append(item)  # type: ignore[union-attr]
    for item in every:
        req = requirement_of(item)
        assert req is not None
        for dep in req.depends:
            if dep not in by_id:
                raise pytest.UsageError(
                    f"case {req.case_id} ({item.nodeid}) depends on {dep}, which is no collected case of "
                    f"protocol {req.protocol} (a typo, or a file of the suite left out of the run?)"
                )
    # A prerequisite must be at least as strong as its dependent: a MUST
    # case blocked by a failed SHOULD would make a node not conformant for
    # breaking a SHOULD.
    rank = {"MUST": 3, "SHOULD": 2, "MAY": 1}
    for item in every:
        req = requirement_of(item)
        for dep in req.depends:  # type: ignore[union-attr]
            dep_req = requirement_of(by_id[dep][0])
            if rank[dep_req.level.value] < rank[req.level.value]:  # type: ignore[union-attr]
                raise pytest.UsageError(
                    f"case {req.case_id} ({req.level.value}) depends on {dep} ({dep_req.level.value}): "  # type: ignore[union-attr]
                    "a prerequisite must be at least as strong as the case that depends on it"
                )
    # Check the whole graph for cycles, selected or not, so that a cycle is
    # found however the run is narrowed.
    done: set[str] = set()
    visiting: list[str] = []

    def check(case_id: str) -> None:
        if case_id in done:
            return
        if case_id in visiting:
            cycle = visiting[visiting.index(case_id) :] + [case_id]
            raise pytest.UsageError("prerequisite cycle: " + " -> ".join(cycle))
        visiting.append(case_id)
        for member in by_id[case_id]:
            for dep in requirement_of(member).depends:  # type: ignore[union-attr]
                check(dep)
        visiting.pop()
        done.add(case_id)

    for case_id in by_id:
        check(case_id)
    if not any(requirement_of(item) and requirement_of(item).depends for item in every):  # type: ignore[union-attr]
        state.total = sum(1 for item in items if requirement_of(item) is not None)
        return
    ordered: list[pytest.Item] = []
    placed: set[int] = set()

    def place(item: pytest.Item) -> None:
        if id(item) in placed:
            return
        placed.add(id(item))
        req = requirement_of(item)
        if req is not None:
            for dep in req.depends:
                for member in by_id[dep]:
                    place(member)
        ordered.append(item)

    selected = {id(item) for item in items}
    for item in items:
        place(item)
    readded = [item for item in ordered if id(item) not in selected]
    if readded:
        state.readded = [item.nodeid for item in readded]
    items[:] = ordered
    state.total = sum(1 for item in items if requirement_of(item) is not None)


def _writer(state: RunState) -> ResultWriter:
    if state.writer is None:
        state.writer = ResultWriter(state.run_dir)
    return state.writer


# ------------------------------------------------------------------ fixtures


@pytest.fixture
def requirement_spec(request: pytest.FixtureRequest) -> Requirement:
    req = requirement_of(request.node)
    if req is None:
        raise RuntimeError("requirement_spec is only for cases with a @requirement marker")
    return req


@pytest.fixture
def wire_trace(request: pytest.FixtureRequest) -> WireTrace:
    trace = WireTrace(redactor=_state(request.config).redactor)
    request.node.stash[_TRACE] = trace
    return trace


_TRACE = pytest.StashKey[WireTrace]()


@pytest.fixture
def target(request: pytest.FixtureRequest, requirement_spec: Requirement) -> TargetRuntime:
    """The target under test, started if the harness launches it, after
    checking that this case applies to it."""
    state = _state(request.config)
    if state.unresponsive:
        # A case that would not apply anyway stays not applicable, and one
        # whose prerequisite did not pass is blocked by it: the verdict
        # lists only what the silence cost.
        if state.runtime is not None:
            reason = not_applicable_reason(state.runtime, requirement_spec)
            if reason:
                not_applicable(reason)
        check_prerequisites(state, requirement_spec, request.node)
        raise TargetError(state.unresponsive)
    if state.not_started:
        # The target did not start: a case that would not apply stays not
        # applicable, one whose prerequisite did not pass is blocked by it,
        # every other ends in error naming the start failure.
        started_as = state.targets[state.target_name or f"reference-{requirement_spec.protocol}"]
        reason = target_not_applicable_reason(
            started_as, requirement_spec, lambda name: name in started_as.credentials
        )
        if reason:
            not_applicable(reason)
        check_prerequisites(state, requirement_spec, request.node)
        raise TargetNotStarted(state.startup_error)
    runtime = state.runtime_for(requirement_spec.protocol)
    reason = not_applicable_reason(runtime, requirement_spec)
    if reason:
        not_applicable(reason)
    check_prerequisites(state, requirement_spec, request.node)
    note = runtime.ensure_server()
    if note:
        request.node.stash[_NOTE] = note
    return runtime


def check_prerequisites(state: RunState, req: Requirement, item: pytest.Item) -> None:
    """End the case before it runs when a prerequisite did not pass in this
    run: not applicable when the prerequisite was (with its reason),
    otherwise blocked by the root cause (the case that failed or errored
    for its own rule; a blocked prerequisite passes its root on)."""
    results = [
        (dep, result)
        for dep in req.depends
        for result in state.case_results.get(dep) or [{"outcome": None}]
    ]
    for dep, result in results:
        if result["outcome"] == NOT_APPLICABLE:
            not_applicable(f"{result['message']} (as for its prerequisite {dep})")
    for dep, result in results:
        outcome = result["outcome"]
        if outcome == PASSED:
            continue
        if outcome == BLOCKED:
            root, root_outcome, root_message = result["root"]
            if root == req.case_id:
                # The prerequisite met a breach of this very case's rule (an
                # oversized box while reading a feed, say): a case is never
                # blocked by itself. It runs and judges its own rule, on
                # bytes of its own trace.
                continue
            via = [dep] + result["via"]
        else:
            root, root_outcome, via = dep, outcome or "not run", []
            root_message = (
                _own_text(dep, result["message"])
                if outcome
                else "the prerequisite has no result in this run"
            )
        item.stash[_BLOCK] = {"root": (root, root_outcome, root_message), "via": via}
        blocked(root, root_outcome, root_message, " <- ".join(via))


_BLOCK = pytest.StashKey[dict[str, Any]]()


def _own_text(case_id: str, message: str) -> str:
    """A failure message without the ``case-id [LEVEL, citation]: `` prefix
    (a blocked message names the case already)."""
    if message.startswith(case_id + " ["):
        end = message.find("]: ")
        if end != -1:
            return message[end + 3 :]
    return message


_NOTE = pytest.StashKey[str]()


def not_applicable_reason(runtime: TargetRuntime, req: Requirement) -> str | None:
    return target_not_applicable_reason(runtime.target, req, runtime.has_credential)


def target_not_applicable_reason(
    t: Target, req: Requirement, has_credential: Callable[[str], bool]
) -> str | None:
    """Why the case does not apply to target ``t`` (its roles, launch
    commands, capabilities, and the credentials ``has_credential`` says it
    has), or None."""
    if req.role not in t.roles:
        return f"target {t.name} does not play the {req.role} role (roles: {', '.join(t.roles)})"
    if req.role == "client" and not t.can_launch("client"):
        return (
            f"target {t.name} has no launch.client command (nor a [container.client] table), so the "
            "harness cannot make it connect to the harness"
        )
    for need in req.needs:
        if need.startswith("credential:"):
            cred = need.split(":", 1)[1]
            if not has_credential(cred):
                return f"target {t.name} has no {cred} credential configured"
        elif need not in t.capabilities:
            return f"target {t.name} lacks the {need!r} capability (capabilities: {', '.join(t.capabilities) or 'none'})"
    return None


@pytest.fixture
def peer_target(request: pytest.FixtureRequest, target: TargetRuntime) -> TargetRuntime:
    """Interop cases: the other implementation, in the server role (--peer)."""
    state = _state(request.config)
    if state.peer_name is None:
        not_applicable("no --peer target given: interop cases need two implementations")
    peer = state.peer_for()
    if "server" not in peer.target.roles:
        not_applicable(f"peer {peer.target.name} does not play the server role")
    if peer.target.protocol != target.target.protocol:
        raise TargetError(
            f"peer {peer.target.name} speaks {peer.target.protocol}, target {target.target.protocol}"
        )
    note = peer.ensure_server()
    if note:
        request.node.stash[_NOTE] = "peer: " + note
    return peer


@pytest.fixture
def deadline(request: pytest.FixtureRequest) -> float:
    return _state(request.config).deadline


@pytest.fixture
async def connect(
    target: TargetRuntime, wire_trace: WireTrace, deadline: float
) -> AsyncIterator[Callable[..., Awaitable[TcpConnection]]]:
    """``await connect()`` opens a TCP connection to the target's server role.
    Every connection is closed when the case ends."""
    opened: list[TcpConnection] = []

    async def open_connection(label: str = "") -> TcpConnection:
        conn = await TcpConnection.open(target.host, target.port, wire_trace, deadline, label)
        opened.append(conn)
        return conn

    yield open_connection
    for conn in opened:
        conn.abort()
    await asyncio.sleep(0)  # let the aborted transports release their sockets


@pytest.fixture
async def ws_connect(target: TargetRuntime, wire_trace: WireTrace, deadline: float):
    """``await ws_connect()`` opens a WebSocket to the target's ``url``.
    Every connection is closed when the case ends."""
    from .core.websocket import WebSocketConnection  # only protocols over WebSocket need it

    if not target.url:
        raise TargetError(
            f"target {target.target.name} has no url (set url, or launch.outputs url)"
        )
    opened: list[WebSocketConnection] = []

    async def open_connection(label: str = "") -> WebSocketConnection:
        conn = await WebSocketConnection.open(target.url, wire_trace, deadline, label)
        opened.append(conn)
        return conn

    yield open_connection
    for conn in opened:
        await conn.close()


# ------------------------------------------------------------------ hooks


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before the case's fixtures: the run deadline, and the prerequisites of
    a case that does not use the ``target`` fixture (which checks them)."""
    req = requirement_of(item)
    if req is None:
        return
    state = _state(item.config)
    impair.begin_case(req.case_id)
    if state.run_timeout is not None and time.monotonic() - state.started > state.run_timeout:
        raise RunDeadlineExceeded(run_deadline_message(state.run_timeout))
    if "target" not in getattr(item, "fixturenames", ()):
        check_prerequisites(state, req, item)


def run_deadline_message(run_timeout: float) -> str:
    return f"run deadline of {run_timeout:g} s exceeded (--run-timeout); case not run"


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """Before any case: write the plan of the run, then the preflight. A
    misconfigured or unreachable target stops the run here with one clear
    error instead of one error per case."""
    config = session.config
    if config.option.collectonly or session.testsfailed:
        return None
    cases = [item for item in session.items if requirement_of(item) is not None]
    if not cases:
        return None
    state = _state(config)
    protocol = requirement_of(cases[0]).protocol  # type: ignore[union-attr]
    module = getattr(cases[0], "module", None)
    state.project_suite = bool(module is not None and module.__name__.startswith("conformance."))
    name = state.target_name or f"reference-{protocol}"
    # Under --case-jobs every worker collects the same cases: the first
    # writes the plan; the controller prints what workers would print.
    if state.worker_id in (None, "gw0"):
        _write_plan(state, name, cases)
    if state.readded and config.getoption("--progress") and state.worker_id is None:
        _print_readded(state.readded)
    # Each worker runs the preflight: a launched target is started once per
    # worker (its own node, its own state); a target at an address is one
    # node that every worker reaches.
    error = preflight(state, protocol)
    if error:
        state.run_dir.mkdir(parents=True, exist_ok=True)
        error = state.redactor.text(error)
        _write_atomically(
            # For the runner: why this session stopped before its first case.
            RunFolder(state.run_dir).preflight(name, state.peer_name),
            json.dumps(
                {"target": name, "peer": state.peer_name, "error": error, "time": utc_now()},
                indent=2,
            )
            + "\n",
        )
        if state.worker_id is not None:
            # pytest.exit in a worker is a crash to xdist's controller; a
            # stop request ends the whole session (the controller sets the
            # preflight's exit status), and this worker runs no case.
            session.shouldstop = f"preflight: {error}"
            config.workeroutput[_PREFLIGHT_FAILED_KEY] = True  # type: ignore[attr-defined]
            return True
        pytest.exit(f"preflight: {error}", returncode=PREFLIGHT_EXIT_CODE)
    return None


def _write_plan(state: RunState, name: str, cases: list[pytest.Item]) -> None:
    target = state.targets.get(name)
    lines = []
    for item in cases:
        req = requirement_of(item)
        assert req is not None
        lines.append(
            json.dumps(
                {
                    "target": name,
                    "implementation": target.implementation if target else "?",
                    "implementation_version": target.version if target else "?",
                    "peer": state.peer_name,
                    "protocol": req.protocol,
                    "role": req.role,
                    "case_id": req.case_id,
                    "level": req.level.value,
                    "citation": req.full_citation,
                    "depends": list(req.depends),
                    "errata": list(req.errata),
                },
                sort_keys=True,
            )
        )
    state.run_dir.mkdir(parents=True, exist_ok=True)
    _write_atomically(
        # For the runner: it records the cases a killed session never reached.
        RunFolder(state.run_dir).plan(name, state.peer_name),
        "\n".join(lines) + "\n",
    )


def _write_atomically(path: Path, text: str) -> None:
    """Write a file whole or not at all (a reader, or another worker writing
    the same file, never sees half of it)."""
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    part.write_text(text, encoding="utf-8")
    os.replace(part, path)


def _print_readded(readded: list[str]) -> None:
    import sys

    sys.stderr.write(
        f"  prerequisites run although --case/-k/--deselect left them out: {len(readded)} "
        f"({', '.join(readded[:5])}{', ...' if len(readded) > 5 else ''})\n"
    )


def preflight(state: RunState, protocol: str) -> str | None:
    """Check the target's (and the interop peer's) definition, start it if
    the harness launches it, and try its address once. Returns what is
    wrong, or None."""
    name = state.target_name or f"reference-{protocol}"
    if name not in state.targets:
        return f"unknown target {name!r}; known targets: {sorted(state.targets)} (add your own with --targets-file)"
    # The target's server role is used in a certify run of a target that has
    # one (a client-only target is certified through its launched client);
    # in an interop run the target is the client and the peer the server.
    serving = state.peer_name is None and "server" in state.targets[name].roles
    checks = [(name, state.targets[name], serving, lambda: state.runtime_for(protocol))]
    if state.peer_name is not None:
        checks.append((state.peer_name, state.targets[state.peer_name], True, state.peer_for))
    for label, target, serve, start in checks:
        problems = definition_problems(target, serving=serve)
        if problems:
            return f"target {label} is misconfigured: " + "; ".join(problems)
        refused = (
            impair.refusal(state.impairment.profile, protocol, state.deadline, target.params)
            if state.impairment
            else None
        )
        if refused:
            return refused
        try:
            runtime = start()
        except TargetNotStarted as exc:
            if label != name:
                # An interop run's server: the pair cannot run at all.
                return f"target {label} could not be started: {exc}"
            # Not a definition problem, and no rule's failure: the run goes
            # on, every case ends in error naming the start failure
            # (RunState.not_started) and the verdict says the target did not
            # start (docs/targets.md, "Not ready").
            continue
        except TargetError as exc:
            return f"target {label} could not be started: {exc}"
        problems = runtime_problems(runtime, serving=serve) + (
            protocol_problems(runtime, serve) if state.project_suite else []
        )
        if problems:
            return f"target {label} is misconfigured: " + "; ".join(problems)
        if serve:
            problem = unreachable(runtime, state.deadline)
            if problem:
                return f"target {label} is unreachable: {problem}"
    return None


def _protocol_preflight_module(protocol: str) -> Any:
    """``conformance/suites/<protocol>/preflight.py``, or None when the
    suite has none."""
    package = f"conformance.suites.{protocol}"
    try:
        return importlib.import_module(package + ".preflight")
    except ModuleNotFoundError as exc:
        if exc.name in (package, package + ".preflight"):
            return None
        raise


def prepare_runtime(runtime: TargetRuntime) -> None:
    """The protocol's ``prepare(runtime)``, when its preflight module has
    one: what must exist before the node starts or a client is launched
    (e.g. the run's TLS certificates, whose paths become params)."""
    module = _protocol_preflight_module(runtime.target.protocol)
    if module is not None and hasattr(module, "prepare"):
        module.prepare(runtime)


def protocol_problems(runtime: TargetRuntime, serving: bool) -> list[str]:
    """The protocol's own definition checks: ``preflight(runtime, serving)``
    in ``conformance/suites/<protocol>/preflight.py``, when the suite has one."""
    module = _protocol_preflight_module(runtime.target.protocol)
    if module is None:
        return []
    return list(module.preflight(runtime, serving=serving))


def unreachable(runtime: TargetRuntime, deadline: float) -> str | None:
    """One TCP connect to the target's server address within the read
    deadline; what went wrong, or None."""
    if runtime.url:
        parts = urlsplit(runtime.url)
        host = parts.hostname or ""
        try:
            port = parts.port or (443 if parts.scheme in ("wss", "https") else 80)
        except ValueError:
            return "the url's port is not a valid port number"
        # Host and port only: a URL may carry a user:password part.
        where = f"{parts.scheme}://{host}:{port}"
    else:
        host, port, where = runtime.host, runtime.port, f"{runtime.host}:{runtime.port}"
    try:
        with socket.create_connection((host, port), timeout=deadline):
            return None
    except socket.timeout:
        return f"no TCP connection to {where} within {deadline:g} s"
    except OSError as exc:
        return f"no TCP connection to {where}: {exc.strerror or exc}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    req = requirement_of(item)
    if req is None:
        return (yield)
    try:
        try:
            return (yield)
        except pytest.skip.Exception as skip:
            # A case is never blocked by itself: when the rule a helper
            # blames (``blocked()`` raised in the body, e.g. by
            # reading_the_feed) is the case's own, the case fails with it.
            own_failure = _blocked_by_itself(str(skip.msg), req.case_id)
            if own_failure is None:
                raise
            raise AssertionError(own_failure) from None
    except AssertionError as exc:
        state = _state(item.config)
        trace = item.stash.get(_TRACE, None)
        silent = (
            isinstance(exc, DeadlineExceeded)
            and trace is not None
            and not trace.bytes_in("received")
        )
        state.silent_cases = state.silent_cases + 1 if silent else 0
        if state.silent_cases >= SILENT_CASES_BEFORE_UNRESPONSIVE and not state.unresponsive:
            state.unresponsive = (
                f"target unresponsive: it sent no byte in {state.silent_cases} consecutive "
                f"cases that waited {state.deadline} s for an answer it must send; "
                "remaining cases not run"
            )
        # Assertion messages may quote what the target sent, secrets
        # included; mask them before pytest, JUnit or Allure see the text.
        # The harness's own words only: pytest's introspection of a
        # rewritten assert (``assert 44 == 42 / + where ... at 0x7f...``)
        # is no part of the finding.
        text = state.redactor.text(assertion_message(exc))
        exc.args = (text,)
        raise ConformanceFailure(
            f"{req.case_id} [{req.level.value}, {req.full_citation}]: {text}"
        ) from exc
    else:
        _state(item.config).silent_cases = 0


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    report: pytest.TestReport = yield
    req = requirement_of(item)
    if req is None:
        return report
    state = _state(item.config)
    if item.stash.get(_INTERRUPTED, None) is not None:
        # The report _report_interrupted makes for the phase an interrupt cut
        # short: labelled, with the trace so far, never recorded.
        report.conformance_interrupted = True  # type: ignore[attr-defined]
        if report.when == "setup":
            _label_for_allure(item, req, state)
        elif report.when == "call":
            _attach_trace(item)
        return report
    case = state.case_state.setdefault(
        item.nodeid, {"duration": 0.0, "outcome": None, "message": ""}
    )
    case["duration"] += report.duration
    if report.when == "setup":
        _label_for_allure(item, req, state)
    if report.skipped:
        case.update(_skip_outcome(report))
        if case["outcome"] == BLOCKED:
            block = item.stash.get(_BLOCK, None) or _parse_blocked(case["message"])
            case["root"], case["via"] = block["root"], block["via"]
            _label_blocked(case)
    elif report.when == "setup" and report.failed:
        case.update(outcome=ERROR, message=_failure_text(call), start_failure=_did_not_start(call))
    elif report.when == "call":
        if report.passed:
            case.update(outcome=PASSED)
        elif report.failed:
            is_failure = call.excinfo is not None and call.excinfo.errisinstance(AssertionError)
            case.update(
                outcome=FAILED if is_failure else ERROR,
                message=_failure_text(call),
                start_failure=_did_not_start(call),
            )
    if report.when == "call":
        _attach_trace(item)
        _attach_container_log(state)
    elif report.when == "teardown":
        if report.failed and case["outcome"] in (PASSED, None):
            case.update(outcome=ERROR, message="teardown failed: " + _failure_text(call))
        _record(item, req, state, case)
        if state.worker_id is not None:
            # For the controller's progress line (xdist sends the report's
            # attributes along).
            report.conformance_case = {  # type: ignore[attr-defined]
                "case_id": req.case_id,
                "level": req.level.value,
                "outcome": case["outcome"] or ERROR,
                "duration": case["duration"],
                "message": state.case_results[req.case_id][-1]["message"],
                "total": state.total,
                "readded": state.readded,
                "prerequisite_only": item.nodeid in state.readded,
            }
    item.stash.setdefault(_PHASES_DONE, {})[report.when] = report.outcome
    return report


_PHASES_DONE = pytest.StashKey[dict[str, str]]()
"""The phases of a case that reported, with their outcome."""
_INTERRUPTED = pytest.StashKey[str]()
"""The phase an interrupt cut short (see pytest_runtest_protocol)."""
_RECORDED = pytest.StashKey[bool]()
"""Set as soon as the case's line is in results.jsonl: an interrupt after
that (the rest of its teardown report, say) leaves its reports alone."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """An interrupt (SIGTERM, Ctrl-C) in the middle of a case reaches pytest
    as a KeyboardInterrupt that ends the protocol of the case without a
    report of the phase it cut short. allure-pytest would then write the
    case with the status of its last report, passed after a passed setup,
    and JUnit would write a nameless passed testcase; results.jsonl rightly
    has no line for it. So the cut phase gets a report of its own, broken
    (``CaseInterrupted``), before the interrupt goes on; inside
    allure-pytest's wrapper, which writes the result after this."""
    if requirement_of(item) is None:
        return (yield)
    try:
        return (yield)
    except KeyboardInterrupt as exc:
        _report_interrupted(item, exc)
        raise


def _report_interrupted(item: pytest.Item, exc: KeyboardInterrupt) -> None:
    # A SIGTERM now (the CLI sends one to every session after a Ctrl-C)
    # must not cut this short (pytest_keyboard_interrupt ignores it too).
    if signal.getsignal(signal.SIGTERM) is _raise_session_terminated:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if item.stash.get(_RECORDED, False):
        return  # its line is in results.jsonl: the interrupt came after it
    done = item.stash.get(_PHASES_DONE, {})
    if "setup" not in done:
        phase = "setup"
    elif "call" not in done and done["setup"] == "passed":
        phase = "call"
    else:
        phase = "teardown"
    how = "SIGTERM" if isinstance(exc, SessionTerminated) else "Ctrl-C (SIGINT)"
    message = (
        f"{INTERRUPTED_PREFIX}: {how} stopped the run during the case's {phase}; "
        "it has no result in results.jsonl"
    )
    item.stash[_INTERRUPTED] = phase

    def interrupted() -> None:
        raise CaseInterrupted(message)

    call = pytest.CallInfo.from_call(interrupted, when=phase)  # type: ignore[arg-type]
    report = item.ihook.pytest_runtest_makereport(item=item, call=call)
    item.ihook.pytest_runtest_logreport(report=report)


def _did_not_start(call: pytest.CallInfo[None]) -> bool:
    """Whether the case ended because the target (a role of it) did not
    start (TargetNotStarted): an error that is no rule's failure, which the
    verdict tells apart (results.summarize)."""
    return call.excinfo is not None and call.excinfo.errisinstance(TargetNotStarted)


def _skip_outcome(report: pytest.TestReport) -> dict[str, str]:
    reason = _skip_reason(report)
    if reason.startswith(NOT_APPLICABLE_PREFIX):
        return {"outcome": NOT_APPLICABLE, "message": reason[len(NOT_APPLICABLE_PREFIX) :]}
    if reason.startswith(BLOCKED_PREFIX):
        return {"outcome": BLOCKED, "message": reason}
    # Conformance cases are never skipped: any other skip is a harness bug.
    return {
        "outcome": ERROR,
        "message": f"case skipped, which conformance cases never are: {reason}",
    }


def _parse_blocked(message: str) -> dict[str, Any]:
    """Root and chain of a ``blocked by <case id> (<outcome>): <text>``
    message, for a case that called ``blocked()`` itself (its valid step,
    the rule a prerequisite stands for, failed within the case)."""
    first, _, rest = message.partition("\n")
    head, _, text = first[len(BLOCKED_PREFIX) :].partition(": ")
    root, _, outcome = head.partition(" (")
    via_prefix = "through the blocked prerequisite(s) "
    via = rest[len(via_prefix) :].split(" <- ") if rest.startswith(via_prefix) else []
    return {"root": (root, outcome.rstrip(")") or "failed", text), "via": via}


def _blocked_by_itself(message: str, case_id: str) -> str | None:
    """The root cause's text of a ``blocked by <case_id> ...`` message that
    names ``case_id`` itself, else None."""
    if not message.startswith(BLOCKED_PREFIX):
        return None
    root_id, _, text = _parse_blocked(message)["root"]
    return text if root_id == case_id else None


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        reason = str(longrepr[2])
        return reason[len("Skipped: ") :] if reason.startswith("Skipped: ") else reason
    return str(longrepr)


def assertion_message(exc: AssertionError) -> str:
    """The message a failed ``assert`` was given, without the lines pytest's
    assertion rewriting appends to it (``assert 44 == 42``, ``+ where 44 =
    <... object at 0x7f...>.msgno``, diffs); for an assert without a message,
    its source text (``assert reply.msgno == 42``). Any other AssertionError
    (raised by a helper, DeadlineExceeded, an assert pytest did not rewrite)
    keeps its text as it is.

    Rewriting joins the message and the introspection as ``MESSAGE\\nassert
    EXPLANATION...``: message lines after the first are indented by two
    spaces, the ``assert`` line is not, so the first unindented line
    starting with ``assert `` after line 0 begins the introspection."""
    text = str(exc)
    if type(exc) is not AssertionError:
        return text
    statement = _failed_assert(exc)
    if statement is None:
        return text
    lines = text.split("\n")
    if statement.msg is None:
        if not lines[0].startswith("assert "):
            return text  # not rewritten (plain asserts carry no text)
        return "assert " + ast.unparse(statement.test)
    glue = next((n for n, line in enumerate(lines) if n and line.startswith("assert ")), None)
    if glue is None:
        return text  # not rewritten: the message as given
    own = [lines[0]] + [line[2:] if line.startswith("  ") else line for line in lines[1:glue]]
    return "\n".join(own).rstrip()


def _failed_assert(exc: BaseException) -> ast.Assert | None:
    """The ``assert`` statement that raised ``exc``, or None when it came
    from anything else (or its source cannot be read)."""
    try:
        from _pytest._code import ExceptionInfo

        source = str(ExceptionInfo.from_exception(exc).traceback[-1].statement)
        tree = ast.parse(textwrap.dedent(source))
    except Exception:  # no source, a statement that does not parse alone
        return None
    node = tree.body[0] if len(tree.body) == 1 else None
    return node if isinstance(node, ast.Assert) else None


def _failure_text(call: pytest.CallInfo[None]) -> str:
    if call.excinfo is None:
        return ""
    exc = call.excinfo.value
    name = (
        "" if isinstance(exc, (AssertionError, RunDeadlineExceeded)) else f"{type(exc).__name__}: "
    )
    return (name + str(exc)).strip()


def _label_blocked(case: dict[str, Any]) -> None:
    """Allure shows a blocked case as skipped (its status detail is the
    ``blocked by ...`` message); the tag and label say it was blocked and by
    which case, so a report can be filtered down to root causes."""
    if allure is None:
        return
    allure.dynamic.tag("blocked")
    root = case.get("root")
    if root:
        allure.dynamic.label("blocked_by", root[0])


def _label_for_allure(item: pytest.Item, req: Requirement, state: RunState) -> None:
    if allure is None:
        return
    name = state.target_name or f"reference-{req.protocol}"
    target = state.targets.get(name)
    allure.dynamic.label("protocol", req.protocol)
    allure.dynamic.label("component", req.component)
    allure.dynamic.label("requirement", req.case_id)
    allure.dynamic.label("level", req.level.value)
    allure.dynamic.label("role", req.role)
    # A run certifies several targets of one protocol (the nightly: 21), each
    # running the same cases: the target (and interop peer) is a parameter,
    # so that allure-pytest's historyId differs per target and stays the same
    # across runs of one target (the report would otherwise keep one copy
    # and file the others under Retries), and it is the suite in the tree.
    allure.dynamic.parameter("target", name)
    if state.peer_name is not None:
        allure.dynamic.parameter("peer", state.peer_name)
    allure.dynamic.parent_suite(req.protocol)
    allure.dynamic.suite(session_label(name, state.peer_name))
    allure.dynamic.sub_suite(f"{req.component}, target role: {req.role}")
    allure.dynamic.severity(req.level.allure_severity)
    allure.dynamic.tag(req.level.value)
    allure.dynamic.title(req.case_id)
    allure.dynamic.description(
        f"{req.level.value}: {req.full_citation}\n\n{(item.obj.__doc__ or '').strip()}"
        if hasattr(item, "obj")
        else req.full_citation
    )
    for erratum in req.errata:
        allure.dynamic.label("erratum", erratum)
    for dep in req.depends:
        allure.dynamic.label("depends", dep)
    for shared in req.shares:
        allure.dynamic.label("shares", shared)
    if target is not None:
        allure.dynamic.label("target", target.name)
        allure.dynamic.label("implementation", f"{target.implementation} {target.version}")


_ALLURE_ID_PARAMETERS = ("target", "peer")
"""The parameters (set by _label_for_allure) that tell one target's copy of a
case from another's in the Allure ids."""


class _AllureResultIds:
    """An allure-commons plugin (``allure_commons.plugin_manager``, the hook
    allure-pytest's file writer implements) that sees each case's result
    just before it is written:

    - ``testCaseId``: allure-pytest makes it from the test's full name alone,
      which every target's copy of a case shares; here it also covers the
      target and peer parameters, so it differs per target and stays the same
      across runs of one target. (``historyId`` already covers them:
      allure-pytest computes it from the full name and the parameters.)
    - ``historyId`` of a case an interrupt cut short: allure-pytest computes
      it at the case's teardown, which such a case never reaches; it is
      computed here the same way (``allure_pytest.utils.get_history_id``)."""

    @staticmethod
    def _is_case(result: Any) -> bool:
        return any(label.name == "requirement" for label in result.labels)

    @allure_commons.hookimpl(tryfirst=True) if allure is not None else (lambda f: f)
    def report_result(self, result: Any) -> None:
        if not self._is_case(result):
            return
        ids = [
            f"{p.name}={p.value}"
            for p in sorted(result.parameters, key=lambda p: p.name)
            if p.name in _ALLURE_ID_PARAMETERS
        ]
        if result.fullName and ids:
            result.testCaseId = allure_md5(result.fullName, *ids)
        if result.historyId is None and result.fullName:
            result.historyId = get_history_id(
                result.fullName, result.parameters, original_values={}
            )


_ALLURE_RESULT_IDS = _AllureResultIds()


def _attach_trace(item: pytest.Item) -> None:
    trace = item.stash.get(_TRACE, None)
    if trace is None:
        return
    text = trace.render()
    if allure is not None:
        allure.attach(
            text, name="wire trace (hex dump, both directions)", attachment_type=AttachmentType.TEXT
        )
    item.stash[_RENDERED] = text


_RENDERED = pytest.StashKey[str]()


def _attach_container_log(state: RunState) -> None:
    """A container target's log lines written since the previous case (the
    first case also gets the start-up lines) go to this case's Allure
    result: what the node said while the case ran, beside its wire trace.
    The whole log goes to logs/ when the container is removed."""
    if allure is None:
        return
    from .core.containers import ALLURE_LOG_LIMIT

    for runtime in (state.runtime, state.peer_runtime):
        server = runtime.container if runtime is not None else None
        if server is None or server.container is None:
            continue
        text = state.redactor.text(server.new_log())
        if not text:
            continue
        if len(text) > ALLURE_LOG_LIMIT:
            text = (
                f"(first {len(text) - ALLURE_LOG_LIMIT} characters left out; the whole log: logs/"
                f"{server.log_path.name})\n" + text[-ALLURE_LOG_LIMIT:]
            )
        allure.attach(
            text,
            name=f"container log of {runtime.target.name} ({server.spec.image}) during this case",
            attachment_type=AttachmentType.TEXT,
        )


def _record(item: pytest.Item, req: Requirement, state: RunState, case: dict[str, Any]) -> None:
    outcome = case["outcome"] or ERROR
    message = case["message"] or ("" if case["outcome"] else "case produced no outcome")
    note = item.stash.get(_NOTE, None)
    if note:
        message = (message + "\n" if message else "") + note
    message = state.redactor.text(message)
    target = (
        state.runtime.target
        if state.runtime
        else state.targets.get(state.target_name or f"reference-{req.protocol}")
    )
    trace_file = None
    rendered = item.stash.get(_RENDERED, None)
    if rendered is not None:
        traces = RunFolder(state.run_dir).traces(
            target.name if target else (state.target_name or "unknown"),
            state.peer_runtime.target.name if state.peer_runtime else None,
        )
        traces.mkdir(parents=True, exist_ok=True)
        path = traces / f"{req.case_id}.txt"
        header = (
            f"{req.case_id} [{req.level.value}, {req.full_citation}]\noutcome: {outcome}\n"
            + (f"impairment: {state.impairment.describe()}\n" if state.impairment else "")
            + f"{message}\n\n"
        )
        path.write_text(header + rendered, encoding="utf-8")
        trace_file = str(path.relative_to(state.run_dir))
    _writer(state).append(
        ResultRecord(
            run_id=state.run_id,
            time=utc_now(),
            harness_version=__version__,
            target=target.name if target else (state.target_name or "?"),
            implementation=target.implementation if target else "?",
            implementation_version=target.version if target else "?",
            protocol=req.protocol,
            role=req.role,
            case_id=req.case_id,
            level=req.level.value,
            citation=req.full_citation,
            outcome=outcome,
            duration_s=round(case["duration"], 4),
            message=message,
            trace_file=trace_file,
            peer_implementation=(
                state.peer_runtime.target.implementation if state.peer_runtime else None
            ),
            depends=list(req.depends),
            errata=list(req.errata),
            blocked_by=case["root"][0] if outcome == BLOCKED and case.get("root") else None,
            start_failure=outcome == ERROR and bool(case.get("start_failure")),
            prerequisite_only=item.nodeid in state.readded,
            impairment=state.impairment.describe() if state.impairment else None,
        )
    )
    item.stash[_RECORDED] = True
    state.case_results.setdefault(req.case_id, []).append(
        {
            "outcome": outcome,
            "message": message,
            "root": case.get("root"),
            "via": case.get("via") or [],
        }
    )
    if state.config.getoption("--progress") and state.worker_id is None:
        _print_progress(
            state,
            req.case_id,
            req.level.value,
            outcome,
            case["duration"],
            message,
            item.nodeid in state.readded,
        )


_OUTCOME_LABEL = {
    PASSED: "pass",
    FAILED: "FAIL",
    NOT_APPLICABLE: "n/a ",
    ERROR: "ERR ",
    BLOCKED: "blk ",
}


def _print_progress(
    state: RunState,
    case_id: str,
    level: str,
    outcome: str,
    duration: float,
    message: str,
    prerequisite_only: bool = False,
) -> None:
    """One line per finished case, and under it what the node did (the
    message after its ``<case id> [<level>, <citation>]: `` prefix, its
    lines joined: results.console_text). Consecutive cases blocked by one
    root cause are held back and printed as one line when the run of them
    ends (``11 cases blocked by X (failed): <reason>``)."""
    state.done += 1
    if outcome == BLOCKED:
        root = _parse_blocked(message)["root"]
        pending = state.blocked_run
        if pending is not None and pending["root"] == root[0]:
            pending["last"] = state.done
            pending["cases"].append((case_id, level))
            return
        _flush_blocked(state)
        state.blocked_run = {
            "root": root[0],
            "first": state.done,
            "last": state.done,
            "cases": [(case_id, level)],
            "message": message,
            "duration": duration,
        }
        return
    _flush_blocked(state)
    text = console_text(message, case_id) if message and outcome != PASSED else ""
    line = (
        f"  [{state.done:>3}/{state.total}] {_OUTCOME_LABEL[outcome]} {level:<6} "
        f"{case_id} ({duration:.2f}s)"
        + (" (prerequisite of the selection)" if prerequisite_only else "")
    )
    _write_progress(line + (f"\n        {text}" if text else ""))


def _flush_blocked(state: RunState) -> None:
    """Print the held-back run of cases blocked by one root cause: one line
    for one case as for any other, one line for the whole run otherwise."""
    pending, state.blocked_run = state.blocked_run, None
    if pending is None:
        return
    cases = pending["cases"]
    first, last = pending["first"], pending["last"]
    if len(cases) == 1:
        case_id, level = cases[0]
        _write_progress(
            f"  [{first:>3}/{state.total}] {_OUTCOME_LABEL[BLOCKED]} {level:<6} {case_id} "
            f"({pending['duration']:.2f}s)\n        {console_text(pending['message'])}"
        )
        return
    levels = {}
    for _, level in cases:
        levels[level] = levels.get(level, 0) + 1
    counts = ", ".join(
        f"{n} {level}" for level, n in sorted(levels.items(), key=lambda i: _LEVEL_ORDER[i[0]])
    )
    reason = (
        console_text(pending["message"].splitlines()[0])
        .removeprefix(BLOCKED_PREFIX + pending["root"])
        .lstrip()
    )
    _write_progress(
        f"  [{first:>3}-{last}/{state.total}] {_OUTCOME_LABEL[BLOCKED]} {len(cases)} cases ({counts}) "
        f"blocked by {pending['root']} {reason}"
    )


_LEVEL_ORDER = {"MUST": 0, "SHOULD": 1, "MAY": 2}


def _write_progress(text: str) -> None:
    import sys

    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    """Show not-applicable cases as 'N/A' and blocked ones as 'BLOCKED'
    rather than as skipped, and a case an interrupt cut short as
    'INTERRUPTED' rather than failed."""
    if getattr(report, "conformance_interrupted", False):
        return "interrupted", "!", "INTERRUPTED"
    if report.skipped and report.when in ("setup", "call"):
        reason = _skip_reason(report)
        if reason.startswith(NOT_APPLICABLE_PREFIX):
            return "not_applicable", "n", "N/A"
        if reason.startswith(BLOCKED_PREFIX):
            return "blocked", "b", "BLOCKED"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """An interrupt (Ctrl-C, or SessionTerminated) reached pytest: from here
    pytest tears the fixtures down and then pytest_unconfigure stops the
    targets. A SIGTERM now (the CLI sends one to every session after a
    Ctrl-C to the whole group) would raise in the middle of that clean-up
    and cut it short, leaving nodes and work dirs behind: ignore it. This
    hook runs before the session's teardown (pytest's wrap_session), and
    first of its implementations: the terminal reporter's formats the
    interrupt's traceback, long enough for the CLI's SIGTERM to arrive, and
    a SessionTerminated raised in there escaped pytest as some 270 lines of
    chained tracebacks on the console (issue 24, item 14)."""
    if signal.getsignal(signal.SIGTERM) is _raise_session_terminated:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def pytest_unconfigure(config: pytest.Config) -> None:
    if allure is not None and allure_commons.plugin_manager.is_registered(_ALLURE_RESULT_IDS):
        allure_commons.plugin_manager.unregister(_ALLURE_RESULT_IDS)
    state = config.stash.get(_STATE, None)
    if state is not None:
        if state.sigterm_handler is not None:
            # After Ctrl-C the CLI sends SIGTERM too: it must not cut short
            # the clean-up below, which it would if it raised in the middle.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for runtime in (state.runtime, state.peer_runtime):
            if runtime is not None:
                runtime.stop()
        state.runtime = state.peer_runtime = None
        if state.sigterm_handler is not None:
            signal.signal(signal.SIGTERM, state.sigterm_handler)
            state.sigterm_handler = None

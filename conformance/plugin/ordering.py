"""Which cases run, in which order, and where: the protocol and --case
selection, prerequisites before the cases that depend on them (put back when
-k or --deselect removed them), and under ``certify --case-jobs N`` the case
groups that must share a pytest-xdist worker."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from ..core.requirements import NODE_STATE, Requirement, requirement_of
from ..core.selection import hint, selected
from .preflight import PREFLIGHT_EXIT_CODE, PREFLIGHT_FAILED_KEY
from .reporting import print_progress, print_readded, write_atomically
from .state import RunState, state_of

ALL_CASES = pytest.StashKey[list[pytest.Item]]()
"""Every collected case of the chosen protocols, before -k and --deselect."""
STARTED_WALL_KEY = "conformance_started_wall"
"""workerinput key: the controller's start (time.time()), for --run-timeout."""
RUN_ID_KEY = "conformance_run_id"
GROUPS_FILE_KEY = "conformance_groups_file"
"""workerinput key: the file in which worker gw0 writes ``{nodeid: group}``."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Keep the cases of the chosen protocols and of the target's protocol,
    and remember them all: ``-k`` and ``--deselect`` run after this, and
    the prerequisites they remove are put back (see below)."""
    state = state_of(config)
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
    config.stash[ALL_CASES] = [item for item in items if requirement_of(item) is not None]
    patterns = config.getoption("--case")
    if patterns:
        keep, drop = [], []
        for item in items:
            req = requirement_of(item)
            (keep if req is not None and selected(req.case_id, patterns) else drop).append(item)
        if not keep:
            found = sorted({requirement_of(item).protocol for item in config.stash[ALL_CASES]})  # type: ignore[union-attr]
            raise pytest.UsageError(
                f"--case {' '.join(patterns)} matches no case of this suite"
                + (f" ({hint(found)})" if found else "")
            )
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep


def case_groups(cases: list[pytest.Item]) -> dict[int, str]:
    """``id(item) -> group name`` for the cases that must run one after
    another in one worker: a case with its prerequisites and dependents
    (the blocked-by judgement reads their results in the same session),
    and the cases naming one shared state (``shares``); a ``node`` state
    joins every server-role case, and a grammar case (``grammar=True``)
    every case of its protocol and role. Connected cases form one group, named
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
    judged = {(req.protocol, req.role) for _, req in reqs if req is not None and req.grammar}
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
        if (req.protocol, req.role) in judged:
            # A grammar case judges what every case of its protocol and
            # role recorded: it runs after them, in their worker.
            union(case, f"grammar:{req.protocol}.{req.role}")
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


class CaseJobsController:
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
        node.workerinput[STARTED_WALL_KEY] = self.started_wall
        node.workerinput[RUN_ID_KEY] = self.state.run_id
        node.workerinput[GROUPS_FILE_KEY] = str(self.groups_file)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        if getattr(node, "workeroutput", {}).get(PREFLIGHT_FAILED_KEY):
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
            print_readded(case["readded"])
        self.state.total = case["total"]
        print_progress(
            self.state,
            case["case_id"],
            case["level"],
            case["outcome"],
            case["duration"],
            case["message"],
            case.get("prerequisite_only", False),
            case.get("blocked_by"),
            case.get("basis", "keyword"),
        )


class PrerequisiteOrder:
    """A second ``pytest_collection_modifyitems``, run last (after -k and
    --deselect); a module can hold only one function of that name."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, items: list[pytest.Item], config: pytest.Config
    ) -> None:
        _order_by_prerequisites(items, config)
        _grammar_cases_last(items)
        _write_groups(items, config)


def _grammar_cases_last(items: list[pytest.Item]) -> None:
    """Every grammar case after the other cases (core/node_grammar.py): it
    judges the violations they recorded. No case depends on one."""
    grammar = [item for item in items if (req := requirement_of(item)) and req.grammar]
    if grammar:
        kept = {id(item) for item in grammar}
        items[:] = [item for item in items if id(item) not in kept] + grammar


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
    state = state_of(config)
    if state.worker_id != "gw0" or not state.groups_file:
        return
    cases = config.stash.get(ALL_CASES, [])
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
        write_atomically(Path(state.groups_file), json.dumps(named))


def _order_by_prerequisites(items: list[pytest.Item], config: pytest.Config) -> None:
    """Run prerequisites before the cases that depend on them, in file order
    otherwise, and put back the prerequisites that -k or --deselect removed:
    a dependent cannot be judged without them. An unknown prerequisite or a
    cycle is a usage error naming it."""
    state = state_of(config)
    every = config.stash.get(ALL_CASES, [])
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

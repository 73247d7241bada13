"""The state of one session: its targets and their runtimes, the results so
far, and what the progress lines hold back."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ..core import impair
from ..core.case_outcome import CaseOutcome
from ..core.redact import Redactor
from ..core.results import ResultWriter
from ..core.run_folder import RunFolder
from ..core.targets import Target, TargetError, TargetNotStarted, TargetRuntime, make_work_dir
from ..core.transport import WireTrace
from .protocol_hooks import prepare_runtime
from .signals import interrupt_on_sigterm


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
    back to be printed as one line (reporting.flush_blocked)."""
    finishing: bool = False
    """pytest_sessionfinish has begun: a SIGTERM now stops the nodes but
    raises nothing (see signals._raise_session_terminated)."""
    unresponsive: str | None = None
    case_results: dict[str, list[CaseOutcome]] = field(default_factory=dict)
    """Per case id, the outcome of each of its items this run, as recorded
    (with the root cause of a blocked one), for judging the cases that
    depend on it."""
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
    """The SIGTERM handler this session replaced (see
    signals.interrupt_on_sigterm), put back at the end; None while it
    replaced none."""
    impairment: impair.Impairment | None = None
    """The run's network impairment (--impair, --impair-seed): every
    connection with the target goes through its relay (core/impair.py)."""
    project_suite: bool = True
    """Whether the cases come from the project's own suites (conformance.*),
    whose protocol preflight (conformance/suites/<protocol>/preflight.py)
    applies; a suite from elsewhere (a user's, or a test's fake suite) is
    judged by the generic checks alone."""

    def target_for(self, protocol: str) -> str:
        """The name of the target under test: --target, or the protocol's
        reference node."""
        return self.target_name or f"reference-{protocol}"

    def peer_for(self) -> TargetRuntime:
        """The interop peer (server role), started on first use."""
        if self.peer_runtime is None:
            assert self.peer_name is not None
            peer = self.targets[self.peer_name]
            interrupt_on_sigterm(self)
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
            name = self.target_for(protocol)
            if name not in self.targets:
                raise TargetError(
                    f"unknown target {name!r}; known targets: {sorted(self.targets)} "
                    "(add your own with --targets-file)"
                )
            target = self.targets[name]
            interrupt_on_sigterm(self)
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

    def result_writer(self) -> ResultWriter:
        """results.jsonl's writer, made on the first record."""
        if self.writer is None:
            self.writer = ResultWriter(self.run_dir)
        return self.writer


STATE = pytest.StashKey[RunState]()


def state_of(config: pytest.Config) -> RunState:
    return config.stash[STATE]


TRACE = pytest.StashKey[WireTrace]()
"""The case's wire trace (the wire_trace fixture's)."""
NOTE = pytest.StashKey[str]()
"""What the harness did to serve the case (a target's server restarted, say:
TargetRuntime.ensure_server), appended to its record's message."""

"""Before the first case: the plan of the run, then the preflight, which
stops a run against a misconfigured or unreachable target with one clear
error instead of one error per case."""

from __future__ import annotations

import json
import socket
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

from ..core import impair
from ..core.requirements import requirement_of
from ..core.results import utc_now
from ..core.run_folder import RunFolder
from ..core.targets import (
    TargetError,
    TargetNotStarted,
    TargetRuntime,
    definition_problems,
    runtime_problems,
)
from .protocol_hooks import protocol_problems
from .reporting import print_readded, write_atomically, write_plan

if TYPE_CHECKING:
    from .state import RunState

PREFLIGHT_EXIT_CODE = 4
"""pytest's exit status when the preflight stopped the run (pytest's own
code for a usage error: the target's definition or address is wrong)."""
PREFLIGHT_FAILED_KEY = "conformance_preflight_failed"
"""workeroutput key: the worker's preflight stopped the run."""


def begin_run(session: pytest.Session, state: RunState) -> bool | None:
    """pytest_runtestloop's work: write the plan of the run, then run the
    preflight; stop the session when it fails."""
    config = session.config
    if config.option.collectonly or session.testsfailed:
        return None
    cases = [item for item in session.items if requirement_of(item) is not None]
    if not cases:
        return None
    protocol = requirement_of(cases[0]).protocol  # type: ignore[union-attr]
    module = getattr(cases[0], "module", None)
    state.project_suite = bool(module is not None and module.__name__.startswith("conformance."))
    name = state.target_for(protocol)
    # Under --case-jobs every worker collects the same cases: the first
    # writes the plan; the controller prints what workers would print.
    if state.worker_id in (None, "gw0"):
        write_plan(state, name, cases)
    if state.readded and config.getoption("--progress") and state.worker_id is None:
        print_readded(state.readded)
    # Each worker runs the preflight: a launched target is started once per
    # worker (its own node, its own state); a target at an address is one
    # node that every worker reaches.
    error = preflight(state, protocol)
    if error:
        state.run_dir.mkdir(parents=True, exist_ok=True)
        error = state.redactor.text(error)
        write_atomically(
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
            config.workeroutput[PREFLIGHT_FAILED_KEY] = True  # type: ignore[attr-defined]
            return True
        pytest.exit(f"preflight: {error}", returncode=PREFLIGHT_EXIT_CODE)
    return None


def preflight(state: RunState, protocol: str) -> str | None:
    """Check the target's (and the interop peer's) definition, start it if
    the harness launches it, and try its address once. Returns what is
    wrong, or None."""
    name = state.target_for(protocol)
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

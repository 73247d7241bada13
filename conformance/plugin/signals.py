"""SIGTERM and Ctrl-C: a session that started targets stops them and removes
their work dirs, which hold the targets' credentials, however it is stopped."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from typing import Any, Protocol

import pytest

from ..core.targets import TargetRuntime


class RunState(Protocol):
    """What SIGTERM handling needs of the session's state (state.RunState,
    which uses this module to start its targets)."""

    runtime: TargetRuntime | None
    peer_runtime: TargetRuntime | None
    session: Any
    finishing: bool
    sigterm_handler: Any


class SessionTerminated(KeyboardInterrupt):
    """SIGTERM to a session that started targets: the CLI's way to stop it
    (Ctrl-C, --jobs, the --run-timeout backstop), and a CI runner's or
    ``kill``'s. pytest ends an interrupted session the way it ends any
    other, so pytest_unconfigure stops the nodes and removes the work dirs,
    which hold the targets' credentials. Without this the default action
    ends the process at once and the work dirs stay in the temp dir."""

    __module__ = "conformance.plugin"  # the name it is shown by (outcomes.ConformanceFailure)


STOPPED_BY_SIGTERM = "stopped by SIGTERM"
"""The session's ``shouldstop`` once a SIGTERM took it (stopped_by_signal)."""


def stopped_by_signal(session: Any) -> bool:
    """A SIGTERM stopped the session, and with it the targets: a case still
    running has no verdict, whatever it then saw. (After a Ctrl-C the
    CLI's SIGTERM follows: asyncio's Runner cancels the case's task, but
    asyncio.wait_for in CPython 3.11 returns the result instead of raising
    when the awaited read completes as the cancellation comes, and the
    read completes: the stopped node closed the connection. A case waiting
    for the node to drop it then passed in Allure.)"""
    return getattr(session, "shouldstop", None) == STOPPED_BY_SIGTERM


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
            state.session.shouldstop = STOPPED_BY_SIGTERM
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


def interrupt_on_sigterm(state: RunState) -> None:
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


def ignore_sigterm_now() -> None:
    """From here a SIGTERM (the CLI sends one to every session after a
    Ctrl-C) is ignored, when this session's handler was the one to take it:
    it must not cut short the report of an interrupted case or the clean-up
    that follows."""
    if signal.getsignal(signal.SIGTERM) is _raise_session_terminated:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


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
    ignore_sigterm_now()


def stop_targets(state: RunState) -> None:
    """Stop the session's nodes (their work dirs go with them), with SIGTERM
    ignored meanwhile, then put back the SIGTERM handler the session
    replaced."""
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

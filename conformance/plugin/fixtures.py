"""The fixtures cases use: the requirement, the target (started, and checked
for whether the case applies to it), the interop peer, the read deadline,
connections and the wire trace."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import AsyncIterator, Awaitable, Callable

import pytest

from ..core.node_grammar import GrammarJudge
from ..core.requirements import Requirement, not_applicable, requirement_of
from ..core.targets import Target, TargetError, TargetNotStarted, TargetRuntime
from ..core.transport import TcpConnection, WireTrace
from .outcomes import check_prerequisites, grammar_records_file
from .state import NOTE, TRACE, state_of


@pytest.fixture
def requirement_spec(request: pytest.FixtureRequest) -> Requirement:
    req = requirement_of(request.node)
    if req is None:
        raise RuntimeError("requirement_spec is only for cases with a @requirement marker")
    return req


@pytest.fixture
def node_grammar(request: pytest.FixtureRequest, requirement_spec: Requirement) -> GrammarJudge:
    """The grammar case's judge: ``with node_grammar.judging(): <its own
    exchange>`` fails the case on every violation of its rule the session
    recorded (core/node_grammar.py)."""
    if not requirement_spec.grammar:
        raise RuntimeError(f"node_grammar is for grammar cases; {requirement_spec.case_id} is not")
    state = state_of(request.config)
    return GrammarJudge(
        requirement_spec.case_id,
        grammar_records_file(state, requirement_spec),
        state.run_id,
        lambda depends: check_prerequisites(state, replace(requirement_spec, depends=depends)),
    )


@pytest.fixture
def wire_trace(request: pytest.FixtureRequest) -> WireTrace:
    trace = WireTrace(redactor=state_of(request.config).redactor)
    request.node.stash[TRACE] = trace
    return trace


@pytest.fixture
def target(request: pytest.FixtureRequest, requirement_spec: Requirement) -> TargetRuntime:
    """The target under test, started if the harness launches it, after
    checking that this case applies to it."""
    state = state_of(request.config)
    if state.unresponsive:
        # A case that would not apply anyway stays not applicable, and one
        # whose prerequisite did not pass is blocked by it: the verdict
        # lists only what the silence cost.
        if state.runtime is not None:
            reason = not_applicable_reason(state.runtime, requirement_spec)
            if reason:
                not_applicable(reason)
        check_prerequisites(state, requirement_spec)
        raise TargetError(state.unresponsive)
    if state.not_started:
        # The target did not start: a case that would not apply stays not
        # applicable, one whose prerequisite did not pass is blocked by it,
        # every other ends in error naming the start failure.
        started_as = state.targets[state.target_for(requirement_spec.protocol)]
        reason = target_not_applicable_reason(
            started_as, requirement_spec, lambda name: name in started_as.credentials
        )
        if reason:
            not_applicable(reason)
        check_prerequisites(state, requirement_spec)
        raise TargetNotStarted(state.startup_error)
    runtime = state.runtime_for(requirement_spec.protocol)
    reason = not_applicable_reason(runtime, requirement_spec)
    if reason:
        not_applicable(reason)
    check_prerequisites(state, requirement_spec)
    note = runtime.ensure_server()
    if note:
        request.node.stash[NOTE] = note
    return runtime


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
    state = state_of(request.config)
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
        request.node.stash[NOTE] = "peer: " + note
    return peer


@pytest.fixture
def deadline(request: pytest.FixtureRequest) -> float:
    return state_of(request.config).deadline


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
    from ..core.websocket import WebSocketConnection  # only protocols over WebSocket need it

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

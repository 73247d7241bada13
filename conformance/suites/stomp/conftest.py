"""Fixtures of the STOMP suites: TLS connections to the target's server,
connected sessions, the harness's frame settings, and (adapter.py) the
``accepted`` adapter."""

from __future__ import annotations

import ssl
from typing import Awaitable, Callable

import pytest

from conformance.core.pki import run_pki
from conformance.core.requirements import blocked
from conformance.core.targets import TargetRuntime
from conformance.core.transport import TcpConnection, WireTrace

from .adapter import accepted_messages, restart_target_server, smp_destination  # noqa: F401
from .client_server import launched_client  # noqa: F401  (client-role cases: the harness plays the server)
from .peer import Settings, StompPeer, TlsFiles, client_context, settings_of, tls_files
from .prerequisites import CONNECTED

HARNESS = "harness"
"""``cert=`` of open_peer: the harness's own client certificate (trusted by
the target)."""
UNTRUSTED = "untrusted"
"""``cert=`` of open_peer: a certificate from the run's second CA, which
nobody trusts."""


@pytest.fixture
def stomp(target: TargetRuntime) -> Settings:
    """Headers the harness puts into CONNECT and SEND frames for this target."""
    return settings_of(target)


@pytest.fixture
def tls(target: TargetRuntime) -> TlsFiles:
    return tls_files(target)


@pytest.fixture
async def open_peer(target: TargetRuntime, tls: TlsFiles, wire_trace: WireTrace, deadline: float):
    """``await open_peer(label, cert=HARNESS|UNTRUSTED|None, minimum=..., maximum=...)``:
    a TLS connection to the target's server (TlsRefused when the handshake
    fails, as the client sees it). Every connection is aborted when the case
    ends."""
    opened: list[TcpConnection] = []

    async def opener(
        label: str = "",
        *,
        cert: str | None = HARNESS,
        minimum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_3,
        maximum: ssl.TLSVersion | None = None,
    ) -> StompPeer:
        if cert == HARNESS:
            pair: tuple[str, str] | None = (tls.cert_file, tls.key_file)
        elif cert == UNTRUSTED:
            files = run_pki().cert_pair("untrusted-client")
            pair = (str(files[0]), str(files[1]))
        else:
            pair = None
        context = client_context(tls.ca_file, pair, minimum=minimum, maximum=maximum)
        conn = await TcpConnection.open(
            target.host, target.port, wire_trace, deadline, label, ssl=context
        )
        opened.append(conn)
        return StompPeer(conn)

    yield opener
    for conn in opened:
        conn.abort()


@pytest.fixture
def connected_peer(
    open_peer, stomp: Settings, target: TargetRuntime
) -> Callable[..., Awaitable[StompPeer]]:
    """``await connected_peer(label, heart_beat=(cx, cy))``: a session the
    target answered with CONNECTED. A refusal here is the rule of
    ``connect-gets-connected``, which every such case depends on: the case
    is blocked by it, not failed."""

    async def opener(label: str = "", *, heart_beat: tuple[int, int] | None = None) -> StompPeer:
        peer = await open_peer(label)
        try:
            await peer.connect(stomp.connect_headers(target, heart_beat=heart_beat))
        except AssertionError as exc:
            blocked(
                CONNECTED,
                "failed within this case",
                f"a valid CONNECT was not answered with CONNECTED ({exc}), so the step after it shows nothing",
            )
        return peer

    return opener

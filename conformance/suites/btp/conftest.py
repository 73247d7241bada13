"""Fixtures of the BTP suites: tokens, authenticated peers, launched clients."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest

from conformance.core.readiness import accept_launched_client
from conformance.core.targets import TargetRuntime
from conformance.core.transport import WireTrace
from conformance.core.websocket import WebSocketServer

from .peer import BtpPeer, target_auth_token, wrong_token_for
from .prerequisites import ERROR_CODE

DEFAULT_AUTH_TIMEOUT = 30.0


@pytest.fixture
def auth_token(target: TargetRuntime) -> bytes:
    return target_auth_token(target)


@pytest.fixture
def wrong_token(auth_token: bytes) -> bytes:
    return wrong_token_for(auth_token)


@pytest.fixture
def auth_timeout(target: TargetRuntime) -> float:
    """Seconds within which the target promises to drop a client that never
    authenticates (params.auth_timeout); the spec leaves it to the server."""
    return float(target.params.get("auth_timeout", DEFAULT_AUTH_TIMEOUT))


@pytest.fixture
def open_peer(ws_connect):
    async def opener(label: str = "") -> BtpPeer:
        return BtpPeer(await ws_connect(label), error_code_case=ERROR_CODE)

    return opener


@pytest.fixture
def authenticated_peer(open_peer, auth_token):
    async def opener(label: str = "") -> BtpPeer:
        peer = await open_peer(label)
        await peer.authenticate(auth_token)
        return peer

    return opener


@pytest.fixture
def launched_client(target: TargetRuntime, wire_trace: WireTrace, deadline: float):
    """Client-role cases: ``async with launched_client(send_message=...) as peer``
    listens on loopback, launches the target's client command pointed at the
    harness, and yields the accepted connection as a BtpPeer."""
    processes = []

    @asynccontextmanager
    async def launch(send_message: str = "", stay: float = 10.0):
        async with WebSocketServer(wire_trace, deadline) as server:
            process = target.launch_client(
                {
                    "peer_url": server.url,
                    "peer_host": server.host,
                    "peer_port": server.port,
                    "client_stay": stay,
                    "send_message": send_message or "conformance:hello",
                }
            )
            processes.append(process)
            wait = target.target.client_connect_timeout
            try:
                # Exiting before it connects: it did not start (an error).
                conn = await accept_launched_client(
                    server.accept,
                    process,
                    wait,
                    f"the client of target {target.target.name!r}",
                    server.url,
                )
            except AssertionError:
                process.stop()
                raise AssertionError(
                    f"target client did not connect; its output:\n{process.tail()}"
                ) from None
            yield BtpPeer(conn, role="client")

    yield launch
    for process in processes:
        process.stop()

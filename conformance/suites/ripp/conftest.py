"""Fixtures of the RIPP suites: the registry, peers connected to the
target's consumer, handshaken sessions, and launched producers."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest

from conformance.core.readiness import accept_launched_client
from conformance.core.requirements import blocked
from conformance.core.targets import TargetRuntime, client_timeout
from conformance.core.transport import TcpServer, WireTrace
from reference_impl.ripp.payloads import Schema

from .peer import RippPeer
from .prerequisites import HANDSHAKE
from .registry import load_registry


@pytest.fixture
def registry(target: TargetRuntime) -> dict[str, Schema]:
    return load_registry(target.params.get("registry_file"))


@pytest.fixture
def output(registry) -> tuple[str, Schema]:
    """The first output of the registry: the one the delta cases feed."""
    return next(iter(registry.items()))


@pytest.fixture
def open_peer(connect):
    async def opener(label: str = "") -> RippPeer:
        return RippPeer(await connect(label))

    return opener


@pytest.fixture
def ready_peer(open_peer, registry):
    """``await ready_peer()``: a connection whose Handshake (every output of
    the registry, as the registry has it) got ok=true. A refusal is the rule
    of accepts-compatible-schema, which such cases depend on."""

    async def opener(label: str = "") -> RippPeer:
        peer = await open_peer(label)
        negotiation = await peer.handshake(list(registry.items()))
        if not negotiation.ok:
            blocked(
                HANDSHAKE,
                "failed within this case",
                f"a Handshake with the registry's own schemas got ok=false ({negotiation.errors})",
            )
        return peer

    return opener


@pytest.fixture
def launched_producer(target: TargetRuntime, wire_trace: WireTrace, deadline: float):
    """Client-role cases: ``async with launched_producer(count=3, stay=2) as peer``
    listens on loopback, launches the target's producer pointed at the
    harness, and yields the accepted connection as a RippPeer (the case plays
    the consumer)."""
    processes = []

    @asynccontextmanager
    async def launch(count: int = 3, stay: float = 0.0):
        async with TcpServer(wire_trace, deadline) as server:
            process = target.launch_client(
                {
                    "peer_host": server.host,
                    "peer_port": server.port,
                    "source_id": "conformance-producer",
                    "count": count,
                    "client_stay": stay,
                    "client_timeout": client_timeout(deadline),
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
                    f"the producer of target {target.target.name!r}",
                    f"{server.host}:{server.port}",
                )
            except AssertionError:
                process.stop()
                raise AssertionError(
                    f"target producer did not connect; its output:\n{process.tail()}"
                ) from None
            yield RippPeer(conn, role="client")

    yield launch
    for process in processes:
        process.stop()

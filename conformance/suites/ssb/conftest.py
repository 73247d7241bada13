"""Fixtures of the SSB suites: keys, sessions, and launched clients."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import AsyncIterator

import pytest

from conformance.core.readiness import accept_launched_client
from conformance.core.targets import TargetError, TargetRuntime, client_timeout
from conformance.core.transport import Deadline, TcpConnection, TcpServer, WireTrace
from reference_impl.ssb.keys import MAIN_NETWORK_KEY, Keypair

from .session import SsbClientSession, server_public_key

NETWORK_KEY_SIZE = 32


@pytest.fixture
def network_key(target: TargetRuntime) -> bytes:
    """The target's network identifier (``network_key`` credential, hex in a
    file or env var), else the main network's."""
    if not target.has_credential("network_key") and "network_key" not in target.target.credentials:
        return MAIN_NETWORK_KEY
    raw = target.credential("network_key").strip()
    try:
        key = bytes.fromhex(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise TargetError(
            f"target {target.target.name}: network_key credential is not hex"
        ) from None
    if len(key) != NETWORK_KEY_SIZE:
        raise TargetError(
            f"target {target.target.name}: network_key must be 32 bytes, got {len(key)}"
        )
    return key


@pytest.fixture
def server_feed_id(target: TargetRuntime) -> str:
    feed_id = target.params.get("public_key")
    if not feed_id:
        raise TargetError(
            f"target {target.target.name} has no params.public_key (its @...ed25519 "
            "identity); set it in the targets file or have launch.outputs read it"
        )
    return str(feed_id)


@pytest.fixture
def server_public(server_feed_id: str) -> bytes:
    try:
        return server_public_key(server_feed_id)
    except ValueError as exc:
        raise TargetError(
            f"target public_key {server_feed_id!r} is not an SSB feed id: {exc}"
        ) from None


@pytest.fixture
def harness_keypair() -> Keypair:
    """A fresh identity per case, so cases cannot affect each other through
    per-peer state in the target."""
    return Keypair.generate()


@pytest.fixture
def open_session(connect, network_key: bytes, harness_keypair: Keypair, server_public: bytes):
    """``await open_session()``: a new connection with a completed handshake."""

    async def opener(keypair: Keypair | None = None, label: str = "") -> SsbClientSession:
        conn = await connect(label)
        return await SsbClientSession.open(
            conn, network_key, keypair or harness_keypair, server_public
        )

    return opener


@pytest.fixture
def target_keypair(target: TargetRuntime) -> Keypair:
    """The target's own identity, for the ``publish`` adapter: a peer that
    authenticates with the node's own key may call ``publish`` (ssb-server's
    master permission), which is how cases make new messages appear."""
    return Keypair.load(target.credential_file("secret_key"))


@pytest.fixture
def publish(open_session, target_keypair: Keypair):
    async def do_publish(text: str) -> dict:
        session = await open_session(target_keypair, "as the target's own identity, to publish")
        req = await session.request(["publish"], [{"type": "post", "text": text}], "async")
        reply = await session.next_message(req, "reply to publish")
        assert not reply.end, f"publish adapter call failed: {reply.body[:300]!r}"
        await session.goodbye()
        await session.conn.close()
        return reply.json()

    return do_publish


@pytest.fixture
def publish_burst(open_session, target_keypair: Keypair):
    """``await publish_burst(texts)``: one ``publish`` call per text, all sent
    in one write on one session before any answer is read, as a fast
    publisher (or an app posting a batch) does; the node appends them as fast
    as it can, so many share a millisecond (equal ``timestamp``s, which the
    guide's "Time the message was created" allows). Returns the answers in
    the order the calls were made."""

    async def do_publish_burst(texts: list[str]) -> list[dict]:
        session = await open_session(target_keypair, "as the target's own identity, to publish")
        calls = [
            session.request_message(["publish"], [{"type": "post", "text": text}], "async")
            for text in texts
        ]
        await session.send_boxes_in_one_write(
            calls,
            [f"RPC request {call.req}: publish" for call in calls],
            f"{len(calls)} boxes in one write, each carrying one publish call",
        )
        # One deadline for every answer: a node that trickles them cannot extend it.
        deadline = Deadline(session.conn.deadline)
        answers = []
        for call in calls:
            reply = await session.next_message(call.req, f"reply to publish {call.req}", deadline)
            assert not reply.end, f"publish adapter call {call.req} failed: {reply.body[:300]!r}"
            answers.append(reply.json())
        await session.goodbye()
        await session.conn.close()
        return answers

    return do_publish_burst


@pytest.fixture
def launched_client(target: TargetRuntime, wire_trace: WireTrace, deadline: float):
    """Client-role cases: ``async with launched_client(peer_keypair, feed) as (conn, process)``
    listens on loopback, launches the target's client command pointed at the
    harness, and yields the accepted connection."""
    processes = []

    @asynccontextmanager
    async def launch(
        peer_keypair: Keypair, feed: str
    ) -> AsyncIterator[tuple[TcpConnection, object]]:
        async with TcpServer(wire_trace, deadline) as server:
            process = target.launch_client(
                {
                    "peer_host": server.host,
                    "peer_port": server.port,
                    "peer_public_key": peer_keypair.feed_id,
                    "feed": feed,
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
                    f"the client of target {target.target.name!r}",
                    f"{server.host}:{server.port}",
                )
            except AssertionError:
                process.stop()
                raise AssertionError(
                    f"target client did not connect; its output:\n{process.tail()}"
                ) from None
            yield conn, process

    yield launch
    for process in processes:
        process.stop()

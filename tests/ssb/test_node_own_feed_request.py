"""The reference node, as server, calls createHistoryStream on each peer that
connects, once that peer has made its first request (for the node's own
feed, from the message after its latest), as real
peers' legacy replication does; ssb-server starts replicating the feeds it
follows from a peer only once that peer has called it (npm ssb-replicate,
legacy.js, ``rpc.once('call:createHistoryStream', next)``). The interop
scenario conformance/interop/ssb/test_legacy_replication.py relies on it.
"""

from __future__ import annotations

import asyncio

import pytest

from reference_impl.ssb.connection import Closed, Request, SsbConnection, StreamEnd
from reference_impl.ssb.keys import Keypair
from reference_impl.ssb.node import SsbNode

NETWORK_KEY = bytes(range(32))
READ_TIMEOUT = 5.0
SILENCE = 0.5


async def connect(node: SsbNode, port: int, keypair: Keypair):
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port), READ_TIMEOUT
    )
    conn = SsbConnection.client(NETWORK_KEY, keypair, node.keypair.public)
    writer.write(conn.data_to_send())
    return conn, reader, writer


async def first_request_of_node(conn, reader, writer) -> tuple[Request, list]:
    """Call whoami (the node asks only once the peer has made a request, as
    a JS peer answers the other's first call) and return the node's own
    request, with every event seen."""
    while not conn.is_open:
        events = await events_within(conn, reader, writer, READ_TIMEOUT, until_open=True)
        assert not any(isinstance(event, Closed) for event in events), events
    conn.request(["whoami"], [], "async")
    writer.write(conn.data_to_send())
    events = await events_within(conn, reader, writer, SILENCE * 2)
    requests = [event for event in events if isinstance(event, Request)]
    assert len(requests) == 1, events
    return requests[0], events


async def events_within(conn, reader, writer, seconds: float, until_open: bool = False) -> list:
    """Every event the node's bytes give within ``seconds`` (answers flushed)."""
    collected = []
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while (left := end - loop.time()) > 0:
        try:
            data = await asyncio.wait_for(reader.read(65536), left)
        except TimeoutError:
            break
        events = conn.receive_data(data) if data else conn.receive_eof()
        writer.write(conn.data_to_send())
        collected.extend(events)
        if (
            not data
            or any(isinstance(event, Closed) for event in events)
            or (until_open and conn.is_open)
        ):
            break
    return collected


@pytest.fixture
async def node():
    node = SsbNode(Keypair.generate(), NETWORK_KEY)
    for number in range(3):
        node.publish({"type": "post", "text": f"post {number + 1}"})
    _, port = await node.start("127.0.0.1", 0)
    yield node, port
    await node.close()


async def test_node_asks_a_connecting_peer_for_its_own_feed_from_the_next_message(node):
    server, port = node
    conn, reader, writer = await connect(server, port, Keypair.generate())
    try:
        # Nothing before the peer's first request.
        while not conn.is_open:
            await events_within(conn, reader, writer, READ_TIMEOUT, until_open=True)
        assert not [
            e for e in await events_within(conn, reader, writer, SILENCE) if isinstance(e, Request)
        ]
        request, _ = await first_request_of_node(conn, reader, writer)
        assert request.name == ["createHistoryStream"] and request.type == "source"
        # The first message it lacks (4), as the network reads `sequence`
        # (erratum SSB-E1), by the name clients must use.
        assert request.args == [{"id": server.feed_id, "sequence": 4, "live": False, "keys": False}]
        # Ending the stream (we hold nothing newer) closes the node's side too.
        conn.stream_end(request.req)
        writer.write(conn.data_to_send())
        await events_within(conn, reader, writer, SILENCE)
        # The node keeps serving on the same connection.
        req = conn.request(["whoami"], [], "async")
        writer.write(conn.data_to_send())
        answers = await events_within(conn, reader, writer, SILENCE * 2)
        assert any(getattr(event, "req", None) == -req for event in answers), answers
    finally:
        writer.close()


async def test_node_ignores_messages_of_its_own_feed_offered_by_the_peer(node):
    server, port = node
    conn, reader, writer = await connect(server, port, Keypair.generate())
    try:
        request, _ = await first_request_of_node(conn, reader, writer)
        forged = {
            "previous": None,
            "author": server.feed_id,
            "sequence": 4,
            "content": {"type": "post"},
        }
        conn.stream_send(request.req, forged)
        conn.stream_end(request.req)
        writer.write(conn.data_to_send())
        after = await events_within(conn, reader, writer, SILENCE)
        assert not any(isinstance(event, Closed) for event in after), after
        assert len(server.messages(server.feed_id)) == 3
        # The node closed its side of its own request after our end, as a
        # requester must ("closed by both ends").
        assert StreamEnd(request.req, None) in after, after
    finally:
        writer.close()


async def test_node_does_not_ask_its_own_identity(node):
    """A client using the node's own key (a publishing tool) is not a peer
    to replicate from; ssb-replicate skips it the same way."""
    server, port = node
    conn, reader, writer = await connect(server, port, server.keypair)
    try:
        while not conn.is_open:
            await events_within(conn, reader, writer, READ_TIMEOUT, until_open=True)
        conn.request(["whoami"], [], "async")
        writer.write(conn.data_to_send())
        events = await events_within(conn, reader, writer, SILENCE * 2)
        assert not [event for event in events if isinstance(event, Request)], events
    finally:
        writer.close()

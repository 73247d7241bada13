"""Tests of reference_impl.ssb.connection: two SsbConnections talking in memory."""

from __future__ import annotations

import pytest

from reference_impl.ssb.boxstream import MAX_BODY, BoxStreamDecoder, BoxStreamEncoder
from reference_impl.ssb.connection import (
    AsyncError,
    Closed,
    ConnectionState,
    Goodbye,
    HandshakeComplete,
    Request,
    Response,
    SsbConnection,
    StreamData,
    StreamEnd,
)
from reference_impl.ssb.faults import Fault
from reference_impl.ssb.keys import Keypair
from reference_impl.ssb.rpc import HEADER_SIZE as RPC_HEADER_SIZE
from reference_impl.ssb.rpc import RpcMessage
from reference_impl.ssb.shs import HELLO_SIZE

NETWORK_KEY = bytes(range(32))
CLIENT = Keypair.from_seed(bytes([1]) * 32)
SERVER = Keypair.from_seed(bytes([2]) * 32)


def new_pair(**server_kwargs) -> tuple[SsbConnection, SsbConnection]:
    client = SsbConnection.client(NETWORK_KEY, CLIENT, SERVER.public)
    server = SsbConnection.server(NETWORK_KEY, SERVER, **server_kwargs)
    return client, server


def pump(
    client: SsbConnection, server: SsbConnection, *, chunk: int | None = None
) -> tuple[list, list]:
    """Deliver bytes both ways until neither side has anything to send.

    Returns (events seen by the client, events seen by the server). With
    ``chunk``, bytes are delivered that many at a time.
    """
    client_events: list = []
    server_events: list = []
    while True:
        to_server = client.data_to_send()
        to_client = server.data_to_send()
        if not to_server and not to_client:
            return client_events, server_events
        for data, receiver, events in (
            (to_server, server, server_events),
            (to_client, client, client_events),
        ):
            step = chunk or max(len(data), 1)
            for start in range(0, len(data), step):
                events.extend(receiver.receive_data(data[start : start + step]))


def connected_pair() -> tuple[SsbConnection, SsbConnection]:
    client, server = new_pair()
    pump(client, server)
    assert client.is_open and server.is_open
    return client, server


def of_type(events: list, kind: type) -> list:
    return [event for event in events if isinstance(event, kind)]


class TestHandshake:
    def test_both_sides_learn_the_peer_identity(self):
        client, server = new_pair()
        client_events, server_events = pump(client, server)
        assert client_events == [HandshakeComplete(SERVER.public)]
        assert server_events == [HandshakeComplete(CLIENT.public)]
        assert server_events[0].peer_id == CLIENT.feed_id
        assert client.peer_public == SERVER.public and server.peer_public == CLIENT.public
        assert client.state is server.state is ConnectionState.OPEN

    def test_byte_by_byte_delivery(self):
        client, server = new_pair()
        pump(client, server, chunk=1)
        assert client.is_open and server.is_open
        req = client.request(["whoami"], [])
        _, server_events = pump(client, server, chunk=1)
        assert server_events == [Request(req, ["whoami"], "async", [])]

    def test_client_speaks_first_and_server_waits(self):
        client, server = new_pair()
        assert len(client.data_to_send()) == HELLO_SIZE
        assert client.data_to_send() == b""
        assert server.data_to_send() == b""

    def test_rpc_before_the_handshake_is_refused(self):
        client, _ = new_pair()
        with pytest.raises(RuntimeError):
            client.request(["whoami"], [])


class TestHandshakeFailureWritesNothing:
    def test_wrong_network_key(self):
        client = SsbConnection.client(bytes(32), CLIENT, SERVER.public)
        server = SsbConnection.server(NETWORK_KEY, SERVER)
        events = server.receive_data(client.data_to_send())
        assert events == [Closed("msg1: hmac mismatch", failed=True, stage="handshake")]
        assert server.data_to_send() == b""
        assert server.failed and server.state is ConnectionState.CLOSED
        # Whatever comes next is ignored, and still nothing is written.
        assert server.receive_data(b"\x00" * 200) == []
        assert server.data_to_send() == b""

    def test_client_dialled_the_wrong_server_key(self):
        client = SsbConnection.client(NETWORK_KEY, CLIENT, Keypair.generate().public)
        server = SsbConnection.server(NETWORK_KEY, SERVER)
        server.receive_data(client.data_to_send())
        client.receive_data(server.data_to_send())  # msg2
        events = server.receive_data(client.data_to_send())  # msg3
        assert len(events) == 1 and events[0].stage == "handshake" and events[0].failed
        assert events[0].reason.startswith("msg3")
        assert server.data_to_send() == b""  # no msg4

    def test_unauthorized_client(self):
        client, server = new_pair(authorize=lambda public: False)
        _, server_events = pump(client, server)
        assert server_events == [
            Closed("msg3: unauthorized client", failed=True, stage="handshake")
        ]
        assert not client.is_open

    def test_client_rejects_a_bad_server_hello(self):
        client, _ = new_pair()
        client.data_to_send()
        events = client.receive_data(bytes(HELLO_SIZE))
        assert events[0].stage == "handshake" and events[0].reason == "msg2: hmac mismatch"
        assert client.data_to_send() == b""

    def test_accepting_any_hello_is_only_a_fault(self):
        wrong_network_client = SsbConnection.client(bytes(32), CLIENT, SERVER.public)
        server = SsbConnection.server(NETWORK_KEY, SERVER, faults={Fault.ACCEPT_ANY_NETWORK_KEY})
        assert server.receive_data(wrong_network_client.data_to_send()) == []
        assert len(server.data_to_send()) == HELLO_SIZE  # it answered: the fault


class TestRpc:
    def test_async_round_trip(self):
        client, server = connected_pair()
        req = client.request(["whoami"], [])
        _, server_events = pump(client, server)
        assert server_events == [Request(req, ["whoami"], "async", [])]
        server.respond(req, {"id": SERVER.feed_id})
        client_events, _ = pump(client, server)
        assert len(client_events) == 1 and isinstance(client_events[0], Response)
        assert client_events[0].body.json() == {"id": SERVER.feed_id}

    def test_async_error(self):
        client, server = connected_pair()
        req = client.request(["nope"], [])
        pump(client, server)
        server.respond_error(req, "Error", "no such procedure")
        client_events, _ = pump(client, server)
        assert client_events == [
            AsyncError(-req, {"name": "Error", "message": "no such procedure", "stack": ""})
        ]

    def test_source_stream_is_closed_by_both_ends(self):
        client, server = connected_pair()
        req = client.request(["createHistoryStream"], [{"id": SERVER.feed_id}], "source")
        pump(client, server)
        for number in range(3):
            server.stream_send(req, {"n": number})
        server.stream_end(req)
        client_events, server_events = pump(client, server)
        assert [event.msg.json() for event in of_type(client_events, StreamData)] == [
            {"n": 0},
            {"n": 1},
            {"n": 2},
        ]
        assert of_type(client_events, StreamEnd) == [StreamEnd(-req, None)]
        # The client's automatic end reached the server, closing the stream.
        assert server_events == [StreamEnd(req, None)]
        assert server.rpc.open_incoming == frozenset() and client.rpc.open_outgoing == frozenset()

    def test_requests_in_both_directions(self):
        client, server = connected_pair()
        client_req = client.request(["a"], [])
        server_req = server.request(["b"], [])
        client_events, server_events = pump(client, server)
        assert client_events == [Request(server_req, ["b"], "async", [])]
        assert server_events == [Request(client_req, ["a"], "async", [])]


def decode_wire(receiver_params, data: bytes) -> list[bytes]:
    """The box bodies in ``data``, decoded with a fresh decoder: valid only
    for the first boxes sent after the handshake."""
    return BoxStreamDecoder(
        receiver_params.decrypt_key, receiver_params.decrypt_nonce
    ).receive_data(data)


class TestBoxing:
    def test_large_body_is_split_into_boxes_of_at_most_4096_bytes(self):
        client, server = connected_pair()
        req = client.request(["blob"], [])
        pump(client, server)
        payload = bytes(range(256)) * 80  # 20480 bytes
        server.respond(req, payload)
        wire = server.data_to_send()
        bodies = decode_wire(client.handshake.result, wire)
        assert all(len(body) <= MAX_BODY for body in bodies)
        assert [len(body) for body in bodies[:-1]] == [MAX_BODY] * (len(bodies) - 1)
        assert b"".join(bodies) == RpcMessage.from_bytes(-req, payload).encode()
        assert len(bodies) == -(-(RPC_HEADER_SIZE + len(payload)) // MAX_BODY)
        events = client.receive_data(wire)
        assert len(events) == 1 and events[0].body.body == payload

    def test_small_rpc_messages_share_a_box(self):
        client, server = connected_pair()
        for _ in range(3):
            client.request(["whoami"], [])
        bodies = decode_wire(server.handshake.result, client.data_to_send())
        assert len(bodies) == 1

    def test_box_failure_after_valid_boxes_writes_nothing(self):
        client, server = connected_pair()
        req = client.request(["whoami"], [])
        wire = bytearray(client.data_to_send())
        client.request(["whoami"], [])
        second = bytearray(client.data_to_send())
        second[-1] ^= 0x01  # corrupt the second box's body
        events = server.receive_data(bytes(wire + second))
        assert events[0] == Request(req, ["whoami"], "async", [])
        assert events[1] == Closed("body authentication failed", failed=True, stage="box stream")
        with pytest.raises(RuntimeError):
            server.respond(req, {"id": SERVER.feed_id})
        assert server.data_to_send() == b""

    def test_broken_rpc_framing_fails_the_connection(self):
        client, server = connected_pair()
        params = client.handshake.result
        forged = BoxStreamEncoder(params.encrypt_key, params.encrypt_nonce).encode(
            b"\x03" + bytes(8)
        )
        events = server.receive_data(forged)
        assert len(events) == 1 and events[0].failed and events[0].stage == "rpc"
        assert server.data_to_send() == b""


class TestClosing:
    def test_close_sends_rpc_then_box_goodbye(self):
        client, server = connected_pair()
        client.close()
        _, server_events = pump(client, server)
        assert server_events == [
            Goodbye(),
            Closed("peer sent the box stream goodbye", failed=False, stage="goodbye"),
        ]
        assert not client.is_open and client.closing
        with pytest.raises(RuntimeError):
            client.request(["whoami"], [])
        # The server may still answer with its own goodbyes.
        server.close()
        client_events, _ = pump(client, server)
        assert client_events == [
            Goodbye(),
            Closed("peer sent the box stream goodbye", failed=False, stage="goodbye"),
        ]

    def test_close_is_idempotent(self):
        client, server = connected_pair()
        client.close()
        first = client.data_to_send()
        client.close()
        assert client.data_to_send() == b""
        assert len(first) > 0

    def test_eof_after_rpc_goodbye_is_orderly(self):
        client, server = connected_pair()
        client.close()
        wire = client.data_to_send()
        rpc_goodbye_only = wire[:-34]  # drop the box stream goodbye header
        events = server.receive_data(rpc_goodbye_only)
        assert events == [Goodbye()]
        assert server.receive_eof() == [
            Closed(
                "peer closed the connection after its RPC goodbye", failed=False, stage="transport"
            )
        ]

    def test_eof_without_goodbye_is_a_failure(self):
        client, server = connected_pair()
        assert server.receive_eof() == [
            Closed("connection closed without a box stream goodbye", failed=True, stage="transport")
        ]
        assert server.receive_eof() == []

    def test_eof_during_handshake(self):
        client, server = new_pair()
        server.receive_data(client.data_to_send()[:10])
        events = server.receive_eof()
        assert events == [
            Closed("connection closed during the handshake", failed=True, stage="transport")
        ]
        assert server.data_to_send() == b""

"""The sans-I/O RPC layer: header codec, decoder, and the muxrpc endpoint's rules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ..fuzz_budget import examples

from reference_impl.ssb.rpc import (
    DEFAULT_MAX_BODY,
    FLAG_END,
    FLAG_STREAM,
    GOODBYE,
    HEADER_SIZE,
    AsyncError,
    BodyType,
    Goodbye,
    ProtocolViolation,
    Request,
    Response,
    RpcDecoder,
    RpcEndpoint,
    RpcError,
    RpcMessage,
    StreamData,
    StreamEnd,
    decode_header,
    encode_header,
)

FEED_ID = "@FCX/tsDLpubCPKKfIrw4gc+SQkHcaD17s7GI6i/ziWY=.ed25519"

i32 = st.integers(-(2**31), 2**31 - 1)
messages = st.builds(
    RpcMessage,
    req=i32,
    stream=st.booleans(),
    end=st.booleans(),
    body_type=st.sampled_from(BodyType),
    body=st.binary(max_size=64),
).filter(lambda msg: msg.encode() != GOODBYE)  # an all-zero packet *is* the goodbye


# --- header codec ----------------------------------------------------------------


@given(flags=st.integers(0, 255), length=st.integers(0, 2**32 - 1), req=i32)
def test_header_round_trip(flags, length, req):
    header = encode_header(flags, length, req)
    assert len(header) == HEADER_SIZE
    assert decode_header(header) == (flags, length, req)


def test_header_layout_matches_the_figure():
    # flags byte, u32 BE length, i32 BE request number (img/rpc_header.png)
    assert encode_header(0x0A, 0x0102, -1).hex() == "0a00000102ffffffff"
    assert encode_header(0, 0, 0) == GOODBYE


@pytest.mark.parametrize(
    "flags, length, req",
    [
        (256, 0, 1),
        (-1, 0, 1),
        (0, 2**32, 1),
        (0, -1, 1),
        (0, 0, 2**31),
        (0, 0, -(2**31) - 1),
    ],
)
def test_encode_header_rejects_values_that_do_not_fit(flags, length, req):
    with pytest.raises(ValueError):
        encode_header(flags, length, req)


def test_decode_header_needs_nine_bytes():
    with pytest.raises(ValueError):
        decode_header(b"\0" * 8)


# --- RpcMessage --------------------------------------------------------------------


def test_flags_combine_stream_end_and_body_type():
    assert RpcMessage.from_json(1, True, stream=True, end=True).flags == FLAG_STREAM | FLAG_END | 2
    assert RpcMessage.from_text(1, "x").flags == 1
    assert RpcMessage.from_bytes(1, b"x", stream=True).flags == FLAG_STREAM


def test_from_json_is_compact_like_json_stringify():
    msg = RpcMessage.from_json(1, {"name": ["blobs", "has"], "args": [1.0, "é", None]})
    assert msg.body == '{"name":["blobs","has"],"args":[1,"é",null]}'.encode()
    assert msg.json() == {"name": ["blobs", "has"], "args": [1, "é", None]}


def test_json_keeps_key_order():
    assert list(RpcMessage(1, False, False, BodyType.JSON, b'{"z":1,"a":2}').json()) == ["z", "a"]


@pytest.mark.parametrize(
    "msg",
    [
        RpcMessage.from_text(1, "true"),
        RpcMessage(1, False, False, BodyType.JSON, b"{nope"),
        RpcMessage(1, False, False, BodyType.JSON, b"NaN"),
        RpcMessage(1, False, False, BodyType.JSON, b'"\xff"'),
        RpcMessage(1, False, False, BodyType.JSON, b""),
    ],
)
def test_json_rejects_non_json_bodies(msg):
    with pytest.raises(RpcError):
        msg.json()


def test_from_value_picks_the_body_type_like_packet_stream_codec():
    assert RpcMessage.from_value(1, b"\x00").body_type is BodyType.BINARY
    assert RpcMessage.from_value(1, "text").body_type is BodyType.STRING
    assert RpcMessage.from_value(1, {"a": 1}).body_type is BodyType.JSON


# --- decoder -----------------------------------------------------------------------


@settings(max_examples=examples(60))
@given(batch=st.lists(messages, max_size=6), data=st.data())
def test_decoder_handles_any_chunking(batch, data):
    wire = b"".join(msg.encode() for msg in batch) + GOODBYE
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=8)))
    decoder = RpcDecoder()
    decoded = []
    for start, stop in zip([0, *cuts], [*cuts, len(wire)]):
        decoded += decoder.receive_data(wire[start:stop])
        assert decoder.ended == (stop == len(wire))
    assert decoded == batch
    assert decoder.ended
    decoder.end_of_data()


def test_decoder_byte_by_byte():
    wire = (
        RpcMessage.from_json(1, {"a": [1, 2]}, stream=True).encode()
        + RpcMessage.from_bytes(-2, b"xyz").encode()
    )
    decoder = RpcDecoder()
    decoded = [msg for byte in wire for msg in decoder.receive_data(bytes([byte]))]
    assert [msg.req for msg in decoded] == [1, -2]


def test_empty_body_with_flags_is_a_packet_not_goodbye():
    decoder = RpcDecoder()
    [msg] = decoder.receive_data(RpcMessage.from_bytes(7, b"", stream=True).encode())
    assert (msg.req, msg.stream, msg.body) == (7, True, b"")
    assert not decoder.ended


def test_declared_length_over_bound_fails_on_the_header():
    decoder = RpcDecoder(max_body=100)
    decoder.receive_data(encode_header(0x02, 100, 1))  # at the bound: waits for the body
    with pytest.raises(RpcError) as raised:
        RpcDecoder(max_body=100).receive_data(encode_header(0x02, 101, 1))
    assert raised.value.reason == "body length exceeds limit"


def test_default_bound():
    assert DEFAULT_MAX_BODY == 1 << 20
    with pytest.raises(RpcError):
        RpcDecoder().receive_data(encode_header(0x00, DEFAULT_MAX_BODY + 1, 1))


@pytest.mark.parametrize(
    "flags, reason",
    [
        (0x03, "unknown body type"),
        (0x0B, "unknown body type"),
        (0x12, "unknown flag bits"),
        (0x82, "unknown flag bits"),
    ],
)
def test_bad_flags_are_rejected(flags, reason):
    with pytest.raises(RpcError) as raised:
        RpcDecoder().receive_data(encode_header(flags, 2, 1) + b"{}")
    assert raised.value.reason == reason


def test_errors_are_sticky():
    decoder = RpcDecoder()
    with pytest.raises(RpcError):
        decoder.receive_data(encode_header(0x03, 0, 1))
    with pytest.raises(RpcError) as raised:
        decoder.receive_data(RpcMessage.from_json(1, True).encode())
    assert raised.value.reason == "unknown body type"
    with pytest.raises(RpcError):
        decoder.end_of_data()


@pytest.mark.parametrize("split", [False, True])
def test_data_after_goodbye_is_rejected(split):
    decoder = RpcDecoder()
    extra = RpcMessage.from_json(1, True).encode()
    with pytest.raises(RpcError) as raised:
        if split:
            decoder.receive_data(GOODBYE)
            decoder.receive_data(extra)
        else:
            decoder.receive_data(GOODBYE + extra)
    assert raised.value.reason == "data after goodbye"
    assert decoder.ended


@pytest.mark.parametrize("wire", [b"\x02\x00\x00", encode_header(0x02, 4, 1) + b"tr"])
def test_end_of_data_mid_packet_is_truncation(wire):
    decoder = RpcDecoder()
    assert decoder.receive_data(wire) == []
    with pytest.raises(RpcError) as raised:
        decoder.end_of_data()
    assert raised.value.reason == "truncated packet"


def test_end_of_data_between_packets_is_fine_even_without_goodbye():
    decoder = RpcDecoder()
    decoder.receive_data(RpcMessage.from_json(1, True).encode())
    decoder.end_of_data()
    assert not decoder.ended


# --- endpoint: a connected pair -----------------------------------------------------


class Pair:
    """Two endpoints wired back to back; ``deliver`` also forwards the
    receiver's automatic replies to the sender."""

    def __init__(self):
        self.client = RpcEndpoint()
        self.server = RpcEndpoint()

    def peer_of(self, endpoint):
        return self.server if endpoint is self.client else self.client

    def deliver(self, to, data):
        events = to.receive_data(data)
        automatic = to.data_to_send()
        echoed = self.peer_of(to).receive_data(automatic) if automatic else []
        return events, automatic, echoed


def history_request(pair):
    req, data = pair.client.request(["createHistoryStream"], [{"id": FEED_ID}], "source")
    events, _, _ = pair.deliver(pair.server, data)
    assert events == [Request(req, ["createHistoryStream"], "source", [{"id": FEED_ID}])]
    return req


def test_requests_are_numbered_from_one():
    endpoint = RpcEndpoint()
    numbers = [endpoint.request(["blobs", "has"], ["&x"])[0] for _ in range(3)]
    assert numbers == [1, 2, 3]
    assert endpoint.open_outgoing == {1, 2, 3}


def test_request_wire_format():
    req, data = RpcEndpoint().request(["createHistoryStream"], [{"id": FEED_ID}], "source")
    [msg] = RpcDecoder().receive_data(data)
    assert (msg.req, msg.stream, msg.end) == (1, True, False)
    assert msg.body == (
        b'{"name":["createHistoryStream"],"type":"source","args":[{"id":"'
        + FEED_ID.encode()
        + b'"}]}'
    )


def test_source_stream_ended_by_the_responder_is_closed_by_both_ends():
    pair = Pair()
    req = history_request(pair)
    first = pair.server.stream_send(req, {"key": "%a", "value": 1})
    second = pair.server.stream_send(req, {"key": "%b", "value": 2})
    events, _, _ = pair.deliver(pair.client, first + second)
    assert [type(event) for event in events] == [StreamData, StreamData]
    assert [event.req for event in events] == [-1, -1]
    assert events[1].msg.json() == {"key": "%b", "value": 2}

    end = pair.server.stream_end(req)
    assert RpcDecoder().receive_data(end) == [RpcMessage.from_json(-1, True, stream=True, end=True)]
    assert pair.server.open_incoming == {req}  # until the requester ends too
    events, automatic, echoed = pair.deliver(pair.client, end)
    assert events == [StreamEnd(-1, None)]
    # The requester answers with its own end, as the guide requires.
    assert automatic == RpcMessage.from_json(1, True, stream=True, end=True).encode()
    assert echoed == [StreamEnd(1, None)]
    assert pair.server.data_to_send() == b""  # it had ended already: no second end
    assert pair.client.open_outgoing == set() and pair.server.open_incoming == set()


def test_requester_aborts_a_source_stream_and_the_responder_closes_its_end():
    pair = Pair()
    req = history_request(pair)
    abort = pair.client.stream_close(req)
    assert abort == RpcMessage.from_json(1, True, stream=True, end=True).encode()
    events, automatic, echoed = pair.deliver(pair.server, abort)
    assert events == [StreamEnd(1, None)]
    assert automatic == RpcMessage.from_json(-1, True, stream=True, end=True).encode()
    assert echoed == [StreamEnd(-1, None)]
    assert pair.client.open_outgoing == set() and pair.server.open_incoming == set()


def test_data_in_flight_after_our_abort_is_accepted():
    pair = Pair()
    req = history_request(pair)
    in_flight = pair.server.stream_send(req, {"n": 1})
    pair.client.stream_close(req)
    [event] = pair.client.receive_data(in_flight)
    assert isinstance(event, StreamData) and event.req == -req


def test_nothing_is_sent_after_our_end():
    pair = Pair()
    req = history_request(pair)
    pair.server.stream_end(req)
    with pytest.raises(RpcError):
        pair.server.stream_send(req, 1)
    with pytest.raises(RpcError):
        pair.server.stream_end(req)
    pair.client.stream_close(req)
    with pytest.raises(RpcError):
        pair.client.stream_close(req)


def test_stream_ended_with_an_error():
    pair = Pair()
    req = history_request(pair)
    error = {"name": "Error", "message": "no such feed", "stack": ""}
    events, automatic, _ = pair.deliver(
        pair.client, pair.server.respond_error(req, "Error", "no such feed")
    )
    assert events == [StreamEnd(-1, error)]
    assert automatic == RpcMessage.from_json(1, True, stream=True, end=True).encode()
    assert pair.server.open_incoming == set()


def test_async_request_and_response():
    pair = Pair()
    req, data = pair.client.request(["blobs", "has"], ["&blob"], "async")
    [request] = pair.server.receive_data(data)
    assert request == Request(req, ["blobs", "has"], "async", ["&blob"])
    response = pair.server.respond(req, True)
    assert response == RpcMessage.from_json(-req, True).encode()
    [event] = pair.client.receive_data(response)
    assert isinstance(event, Response) and event.req == -req and event.body.json() is True
    assert pair.client.open_outgoing == set() and pair.server.open_incoming == set()
    with pytest.raises(RpcError):
        pair.server.respond(req, True)
    # A second response answers a request that is closed.
    [violation] = pair.client.receive_data(response)
    assert isinstance(violation, ProtocolViolation) and "closed" in violation.reason


def test_async_error():
    pair = Pair()
    pair.client.request(["blobs", "has"], ["x"])
    pair.client.request(["blobs", "has"], ["y"])
    req, data = pair.client.request(["blobs", "has"], ["this was a mistake"])
    pair.server.receive_data(data)
    error = pair.server.respond_error(req, "Error", "invalid hash:this was a mistake")
    [msg] = RpcDecoder().receive_data(error)
    assert (msg.req, msg.stream, msg.end) == (-3, False, True)
    assert msg.json() == {
        "name": "Error",
        "message": "invalid hash:this was a mistake",
        "stack": "",
    }
    assert pair.client.receive_data(error) == [AsyncError(-3, msg.json())]
    assert pair.client.open_outgoing == {1, 2}


def test_async_request_without_type_as_js_muxrpc_sends_it():
    server = RpcEndpoint()
    [event] = server.receive_data(
        RpcMessage.from_json(1, {"name": ["whoami"], "args": []}).encode()
    )
    assert event == Request(1, ["whoami"], "async", [])


def test_duplex_carries_data_both_ways():
    pair = Pair()
    req, data = pair.client.request(["ebt", "replicate"], [{"version": 3}], "duplex")
    pair.server.receive_data(data)
    [event] = pair.server.receive_data(pair.client.duplex_send(req, {"@a": 1}))
    assert isinstance(event, StreamData) and event.req == req
    [event] = pair.client.receive_data(pair.server.stream_send(req, {"@b": 2}))
    assert isinstance(event, StreamData) and event.req == -req
    events, _, echoed = pair.deliver(pair.server, pair.client.stream_close(req))
    assert events == [StreamEnd(req, None)] and echoed == [StreamEnd(-req, None)]


def test_requester_sends_no_data_on_a_source():
    pair = Pair()
    req = history_request(pair)
    with pytest.raises(RpcError):
        pair.client.duplex_send(req, 1)
    [violation] = pair.server.receive_data(RpcMessage.from_json(req, 1, stream=True).encode())
    assert isinstance(violation, ProtocolViolation)
    assert pair.server.open_incoming == {req}


@pytest.mark.parametrize(
    "msg, fragment",
    [
        (RpcMessage.from_json(-9, True), "never made"),
        (RpcMessage.from_json(-9, True, stream=True, end=True), "never made"),
        (RpcMessage.from_json(5, True, stream=True, end=True), "never opened"),
        (RpcMessage.from_json(0, True), "request number 0"),
        (RpcMessage.from_json(-(2**31), True), "never made"),
    ],
)
def test_packets_for_unknown_requests_are_violations(msg, fragment):
    [violation] = RpcEndpoint().receive_data(msg.encode())
    assert isinstance(violation, ProtocolViolation) and fragment in violation.reason
    assert violation.msg == msg


def test_packets_on_closed_streams_are_violations():
    pair = Pair()
    req = history_request(pair)
    pair.deliver(pair.client, pair.server.stream_end(req))  # closed on both sides now
    late_data = RpcMessage.from_json(-req, 1, stream=True).encode()
    late_end = RpcMessage.from_json(-req, True, stream=True, end=True).encode()
    for data in (late_data, late_end):
        [violation] = pair.client.receive_data(data)
        assert isinstance(violation, ProtocolViolation) and "closed" in violation.reason
    # Reusing a closed request number is not a new request.
    [violation] = pair.server.receive_data(
        RpcMessage.from_json(
            req, {"name": ["x"], "type": "source", "args": []}, stream=True
        ).encode()
    )
    assert isinstance(violation, ProtocolViolation) and "closed" in violation.reason
    assert pair.client.data_to_send() == b"" and pair.server.data_to_send() == b""


@pytest.mark.parametrize(
    "body, stream",
    [
        ({"name": ["blobs", "has"], "type": "async", "args": []}, True),
        ({"name": ["createHistoryStream"], "type": "source", "args": []}, False),
        ({"name": "blobs.has", "args": []}, False),
        ({"name": ["x"], "type": "teleport", "args": []}, False),
        ({"name": ["x"], "type": "async"}, False),
        ([1, 2], False),
    ],
)
def test_malformed_requests_are_violations(body, stream):
    endpoint = RpcEndpoint()
    [violation] = endpoint.receive_data(RpcMessage.from_json(1, body, stream=stream).encode())
    assert isinstance(violation, ProtocolViolation)
    assert endpoint.open_incoming == set()


def test_non_json_request_body_is_a_violation():
    [violation] = RpcEndpoint().receive_data(RpcMessage.from_text(1, "hello").encode())
    assert isinstance(violation, ProtocolViolation)


def test_wrong_stream_flag_on_replies_is_a_violation():
    pair = Pair()
    async_req, _ = pair.client.request(["blobs", "has"], [])
    source_req, _ = pair.client.request(["createHistoryStream"], [], "source")
    [first] = pair.client.receive_data(RpcMessage.from_json(-async_req, True, stream=True).encode())
    [second] = pair.client.receive_data(RpcMessage.from_json(-source_req, 1).encode())
    assert isinstance(first, ProtocolViolation) and isinstance(second, ProtocolViolation)
    assert pair.client.open_outgoing == {async_req, source_req}


def test_goodbye_both_ways():
    pair = Pair()
    assert pair.client.goodbye() == GOODBYE
    with pytest.raises(RpcError):
        pair.client.request(["blobs", "has"], [])
    assert pair.client.open_outgoing == set()
    assert pair.server.receive_data(GOODBYE) == [Goodbye()]
    with pytest.raises(RpcError) as raised:
        pair.server.receive_data(RpcMessage.from_json(1, True).encode())
    assert raised.value.reason == "data after goodbye"


def test_framing_errors_are_raised_not_reported():
    with pytest.raises(RpcError):
        RpcEndpoint().receive_data(encode_header(0x03, 1, 1) + b"x")


def test_peer_ending_a_stream_after_our_goodbye_gets_no_reply():
    pair = Pair()
    req = history_request(pair)
    end = pair.server.stream_end(req)
    pair.client.goodbye()
    assert pair.client.receive_data(end) == [StreamEnd(-req, None)]
    assert pair.client.data_to_send() == b""
    assert pair.client.open_outgoing == set()

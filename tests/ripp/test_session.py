"""Sans-I/O RIPP sessions (reference_impl/ripp/session.py) against the
profile: handshake and negotiation, duplicates, gaps, checkpoint acks,
heartbeats, refusals."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ..fuzz_budget import examples

from reference_impl.ripp import binprot as bp
from reference_impl.ripp.envelope import MsgType, encode_envelope, make_envelope
from reference_impl.ripp.payloads import (
    Field,
    FieldType,
    FieldValue,
    Handshake,
    Heartbeat,
    PatchDelta,
    RemoveDelta,
    Schema,
    SetDelta,
    encode_payload,
    fingerprint,
)
from reference_impl.ripp.schema import check_backward, negotiate
from reference_impl.ripp.session import (
    CheckpointAckReceived,
    CheckpointAnswered,
    Closed,
    ConsumerSession,
    DeltaApplied,
    DuplicateDiscarded,
    GapDetected,
    HeartbeatSent,
    NegotiationSent,
    ProducerSession,
    state_digest,
)

F = FieldType
V2 = Schema(
    "vwap",
    2,
    [Field("symbol", F("String")), Field("price", F("Float")), Field("volume", F("Int64"))],
)
V3 = Schema("vwap", 3, [Field("symbol", F("String")), Field("price", F("Float"))])
MS = 1_000_000


def price(p: float) -> SetDelta:
    return SetDelta([FieldValue("price", bp.encode(bp.FLOAT, p))])


def connect(interval_ms=100, registry=None, outputs=None):
    c = ConsumerSession("B", registry or {"vwap": V2}, heartbeat_interval_ms=interval_ms)
    p = ProducerSession("A", outputs or [("vwap", V2)])
    c.start(0)
    p.start(0)
    ev_c = c.receive_data(p.data_to_send(), 1)
    ev_p = p.receive_data(c.data_to_send(), 2)
    return c, p, ev_c, ev_p


def pump(src, dst, now):
    return dst.receive_data(src.data_to_send(), now)


def test_handshake_then_ok_negotiation():
    c, p, ev_c, ev_p = connect()
    assert NegotiationSent(True, []) in ev_c
    assert p.state == "open" and c.state == "open"
    assert p.negotiation.heartbeat_interval_ms == 100 and p.negotiation.worker_id == "B"
    hs_env = p.sent_log[0]
    assert (
        hs_env.msg_type == MsgType.HANDSHAKE
        and hs_env.sequence == 1
        and hs_env.fingerprint == bytes(32)
    )


def test_duplicates_discarded_seen_through_the_checkpoint_ack():
    c, p, _, _ = connect()
    for seq in (1, 2, 2, 1, 3):
        p.send_delta("vwap", b"\x04AAPL", price(float(seq)), 3, sequence_no=seq)
    events = pump(p, c, 4)
    assert [type(e) for e in events] == [
        DeltaApplied,
        DeltaApplied,
        DuplicateDiscarded,
        DuplicateDiscarded,
        DeltaApplied,
    ]
    assert c.data_to_send() == b""  # discards are silent
    p.request_checkpoint(9, 5)
    (answered,) = pump(p, c, 6)
    assert isinstance(answered, CheckpointAnswered)
    (received,) = pump(c, p, 7)
    assert isinstance(received, CheckpointAckReceived)
    (src,) = received.ack.sources
    assert (
        received.ack.checkpoint_id,
        src.source_output,
        src.last_sequence_no,
        src.applied_count,
    ) == (9, "vwap", 3, 3)
    expected = {b"\x04AAPL": {b"price": bp.encode(bp.FLOAT, 3.0)}}
    assert src.state_digest == state_digest(expected)


def test_gap_is_applied_and_reported():
    c, p, _, _ = connect()
    p.send_delta("vwap", b"k", price(1.0), 3, sequence_no=42)
    p.send_delta("vwap", b"k", price(2.0), 3, sequence_no=44)
    events = pump(p, c, 4)
    assert GapDetected("vwap", 1, 41) in events and GapDetected("vwap", 43, 43) in events
    assert c.sources["vwap"].last == 44 and c.sources["vwap"].applied == 2
    assert not c.closed


def test_set_patch_remove_state():
    c, p, _, _ = connect()
    p.send_delta(
        "vwap",
        b"a",
        SetDelta(
            [
                FieldValue("symbol", bp.encode(bp.BYTES, b"A")),
                FieldValue("price", bp.encode(bp.FLOAT, 1.0)),
            ]
        ),
        3,
    )
    p.send_delta("vwap", b"a", PatchDelta([FieldValue("price", bp.encode(bp.FLOAT, 2.0))]), 3)
    p.send_delta("vwap", b"b", price(5.0), 3)
    p.send_delta("vwap", b"b", RemoveDelta(), 3)
    p.send_delta("vwap", b"c", RemoveDelta(), 3)
    pump(p, c, 4)
    assert c.sources["vwap"].entries == {
        b"a": {b"symbol": b"\x01A", b"price": bp.encode(bp.FLOAT, 2.0)}
    }
    assert c.sources["vwap"].applied == 5


def test_incompatible_schemas_refused_and_closed():
    c, p, ev_c, ev_p = connect(registry={"vwap": V2}, outputs=[("vwap", V3)])
    assert NegotiationSent(False, ["vwap: missing field volume"]) in ev_c
    assert c.closed.kind == "rejected" and p.closed.kind == "rejected"
    assert "missing field volume" in p.closed.reason


def test_text_example_errors():
    assert check_backward(V2, V3) == ["missing field volume"]
    assert check_backward(V3, V2) == []


def test_version_mismatch_refused():
    c = ConsumerSession("B", {"vwap": V2})
    p = ProducerSession("A", [("vwap", V2)], protocol_version=2)
    c.start(0)
    p.start(0)
    events = pump(p, c, 1)
    assert NegotiationSent(False, ["unsupported protocol version 2"]) in events
    assert c.closed.kind == "rejected"
    assert negotiate({}, Handshake("a", [], 2)) == ["unsupported protocol version 2"]


def test_unknown_and_duplicate_outputs():
    assert negotiate({"vwap": V2}, Handshake("a", [("x", V2), ("vwap", V2), ("vwap", V2)])) == [
        "x: unknown output",
        "vwap: duplicate output",
    ]


def test_envelope_version_mismatch_closes_without_answer():
    c = ConsumerSession("B", {"vwap": V2})
    c.start(0)
    env = make_envelope(
        MsgType.HANDSHAKE,
        encode_payload(Handshake("A", [("vwap", V2)])),
        sequence=1,
        timestamp_ns=0,
        version=2,
    )
    (closed,) = c.receive_data(encode_envelope(env), 1)
    assert closed == Closed("envelope", closed.reason, "version")
    assert c.data_to_send() == b""


def test_flipped_bit_closes_without_answer():
    c = ConsumerSession("B", {"vwap": V2})
    c.start(0)
    data = bytearray(
        encode_envelope(
            make_envelope(
                MsgType.HANDSHAKE,
                encode_payload(Handshake("A", [("vwap", V2)])),
                sequence=1,
                timestamp_ns=0,
            )
        )
    )
    data[70] ^= 4
    (closed,) = c.receive_data(bytes(data), 1)
    assert closed.check == "crc" and c.data_to_send() == b""


def test_out_of_place_messages_close():
    c = ConsumerSession("B", {"vwap": V2})
    c.start(0)
    env = make_envelope(
        MsgType.HEARTBEAT, encode_payload(Heartbeat("A", 0, 0.5)), sequence=1, timestamp_ns=0
    )
    (closed,) = c.receive_data(encode_envelope(env), 1)
    assert closed.kind == "protocol" and c.data_to_send() == b""


def test_delta_with_unknown_fingerprint_closes_before_decoding():
    c, p, _, _ = connect()
    env = make_envelope(
        MsgType.DELTA, b"\xff\xff garbage", sequence=2, timestamp_ns=0, fingerprint=b"f" * 32
    )
    (closed,) = c.receive_data(encode_envelope(env), 3)
    assert closed.kind == "protocol" and "fingerprint" in closed.reason


def test_delta_with_field_not_in_writer_schema_closes():
    c, p, _, _ = connect()
    bad = SetDelta([FieldValue("nope", b"\x00")])
    p.send_delta("vwap", b"k", bad, 3)
    (closed,) = pump(p, c, 4)
    assert closed.kind == "payload"
    c, p, _, _ = connect()
    p.send_delta("vwap", b"k", SetDelta([FieldValue("price", b"\x00")]), 3)  # float needs 8 bytes
    (closed,) = pump(p, c, 4)
    assert closed.kind == "payload"


def test_heartbeats_at_the_negotiated_interval():
    c, p, _, _ = connect(interval_ms=100)
    assert p.next_deadline() == 2 + 100 * MS
    assert p.poll(50 * MS) == []
    sent = []
    for t in range(0, 1000 * MS + 1, 10 * MS):
        sent += [e for e in p.poll(t) if isinstance(e, HeartbeatSent)]
        pump(p, c, t)
        assert not c.closed
        assert c.poll(t) == []
    times = [e.heartbeat.timestamp_ns for e in sent]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert len(times) == 9 and all(g == 100 * MS for g in gaps)


def test_liveness_timeout_and_handshake_timeout():
    c, p, _, _ = connect(interval_ms=100)
    assert c.poll(299 * MS) == []
    (closed,) = c.poll(301 * MS)
    assert closed.kind == "liveness"
    lone = ConsumerSession("B", {})
    lone.start(0)
    assert lone.next_deadline() == 10_000_000_000
    (closed,) = lone.poll(10_000_000_000)
    assert closed.kind == "timeout"


def test_heartbeat_from_another_worker_closes():
    c, p, _, _ = connect()
    env = make_envelope(
        MsgType.HEARTBEAT, encode_payload(Heartbeat("Z", 0, 0.5)), sequence=5, timestamp_ns=0
    )
    (closed,) = c.receive_data(encode_envelope(env), 3)
    assert closed.kind == "protocol"


def test_producer_refuses_unrequested_checkpoint_ack():
    c, p, _, _ = connect()
    c._send(c.checkpoint_ack(77), 5)
    (closed,) = pump(c, p, 6)
    assert closed.kind == "protocol"


def test_byte_at_a_time_gives_the_same_result():
    c, p, _, _ = connect()
    for seq in (1, 2, 2, 3):
        p.send_delta("vwap", b"k", price(seq), 3, sequence_no=seq)
    data = p.data_to_send()
    events = []
    for i in range(len(data)):
        events += c.receive_data(data[i : i + 1], 4)
    assert [type(e) for e in events] == [
        DeltaApplied,
        DeltaApplied,
        DuplicateDiscarded,
        DeltaApplied,
    ]


FUZZ = settings(
    max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@FUZZ
@given(st.lists(st.binary(max_size=120), max_size=8), st.booleans())
def test_consumer_takes_any_bytes(chunks, after_handshake):
    if after_handshake:
        c, p, _, _ = connect()
    else:
        c = ConsumerSession("B", {"vwap": V2})
        c.start(0)
    for chunk in chunks:
        for e in c.receive_data(chunk, 5):
            assert not isinstance(e, Exception)
    assert c._reader.buffered < 63 + (1 << 20)


@FUZZ
@given(st.sampled_from(list(MsgType)), st.binary(max_size=120))
def test_consumer_takes_any_payload_in_a_sound_envelope(msg_type, payload):
    c, p, _, _ = connect()
    fp = fingerprint(V2) if msg_type == MsgType.DELTA else bytes(32)
    env = make_envelope(msg_type, payload, sequence=9, timestamp_ns=0, fingerprint=fp)
    c.receive_data(encode_envelope(env), 5)
    if c.closed:
        # refused: nothing sent back (profile P9)
        assert c.data_to_send() == b""

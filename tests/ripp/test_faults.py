"""What some RIPP faults change at their points (reference_impl/ripp/faults.py).
That every fault changes declared points only and no core module tests
for a fault is tests/mutation/test_fault_points.py's. The mutation run (tests/mutation) proves that each
fault still breaks its rule."""

from __future__ import annotations


import pytest

from reference_impl.faults import FaultPoints
from reference_impl.ripp import faults as ripp_faults
from reference_impl.ripp.envelope import (
    MAX_PAYLOAD,
    EnvelopeError,
    EnvelopeReader,
    MsgType,
    encode_envelope,
    make_envelope,
)
from reference_impl.ripp.payloads import (
    Heartbeat,
    SchemaNegotiation,
    decode_payload,
    encode_payload,
)
from reference_impl.ripp.session import ProducerSession


def _heartbeat(**changes) -> bytearray:
    env = make_envelope(
        MsgType.HEARTBEAT, encode_payload(Heartbeat("w", 1, 0.0)), sequence=1, timestamp_ns=1
    )
    data = bytearray(encode_envelope(env))
    for offset, value in changes.items():
        data[int(offset[1:])] = value
    return data


def test_reader_faults_switch_off_their_check_only():
    bad_version = bytes(_heartbeat(b4=9))
    with pytest.raises(EnvelopeError) as refused:
        EnvelopeReader().receive_data(bad_version)
    assert refused.value.check == "crc"  # the byte changed after the CRC was computed
    points = FaultPoints(ripp_faults.SPECS, {ripp_faults.Fault.IGNORE_ENVELOPE_VERSION})
    # With the version fault on, the CRC is still checked on the bytes as received.
    with pytest.raises(EnvelopeError) as still:
        EnvelopeReader(points=points).receive_data(bad_version)
    assert still.value.check == "crc"
    fixed = ripp_faults._with_crc(bad_version)
    with pytest.raises(EnvelopeError) as version:
        EnvelopeReader().receive_data(fixed)
    assert version.value.check == "version"
    [env] = EnvelopeReader(points=points).receive_data(fixed)
    assert env.version == 1 and env.msg_type == MsgType.HEARTBEAT
    unknown = ripp_faults._with_crc(bytes(_heartbeat(b5=99)))
    skip = FaultPoints(ripp_faults.SPECS, {ripp_faults.Fault.ACCEPT_UNKNOWN_TYPE})
    assert EnvelopeReader(points=skip).receive_data(unknown) == []
    bound = FaultPoints(ripp_faults.SPECS, {ripp_faults.Fault.NO_LENGTH_BOUND})
    header = bytearray(_heartbeat())[:59]
    header[55:59] = (MAX_PAYLOAD + 1).to_bytes(4, "little")
    with pytest.raises(EnvelopeError):
        EnvelopeReader().receive_data(bytes(header))
    assert EnvelopeReader(points=bound).receive_data(bytes(header)) == []  # waits for the bytes


def test_outgoing_envelope_faults():
    session = ProducerSession("w", [], faults={ripp_faults.Fault.CLIENT_NONZERO_FLAGS})
    session.start(1)
    data = session.data_to_send()
    assert data[6] == 1
    session = ProducerSession("w", [], faults={ripp_faults.Fault.CLIENT_BAD_CRC})
    session.start(1)
    with pytest.raises(EnvelopeError) as refused:
        EnvelopeReader().receive_data(session.data_to_send())
    assert refused.value.check == "crc"


def test_encoding_faults_keep_the_values():
    """non-minimal-ints writes the same values in longer forms, which
    bin_prot's reader (and ours) takes; accept-trailing-payload-bytes cuts a
    payload after its value and leaves an undecodable one as it was."""
    negotiation = SchemaNegotiation(True, [], 1, 500, "consumer")
    payload = encode_payload(negotiation)
    longer = ripp_faults.ints_in_four_bytes(payload, msg=negotiation)
    assert (
        longer != payload and len(longer) == len(payload) + 4 + 2
    )  # 01 -> fd 01 00 00 00, fe f4 01 -> fd f4 01 00 00
    assert decode_payload(MsgType.SCHEMA_NEGOTIATION, longer) == negotiation
    env = make_envelope(MsgType.SCHEMA_NEGOTIATION, payload + b"\x00", sequence=1, timestamp_ns=1)
    cut = ripp_faults.payload_trailing_bytes_dropped(env.payload, envelope=env)
    assert cut == payload
    broken = env._replace(payload=b"\x05")
    assert ripp_faults.payload_trailing_bytes_dropped(broken.payload, envelope=broken) == b"\x05"


def test_grammar_faults_break_the_crc_of_their_message_type_only():
    """checkpoint-ack-crc-big-endian and client-delta-crc-without-payload
    (the grammar cases' faults) change the CRC of one message type; every
    other envelope of the session passes the envelope checks."""
    heartbeat = bytes(_heartbeat())
    for change in (
        ripp_faults.checkpoint_ack_crc_big_endian,
        ripp_faults.delta_crc_without_payload,
    ):
        assert change(heartbeat) == heartbeat
    for msg_type, change in (
        (MsgType.CHECKPOINT_ACK, ripp_faults.checkpoint_ack_crc_big_endian),
        (MsgType.DELTA, ripp_faults.delta_crc_without_payload),
    ):
        sound = ripp_faults._with_crc(bytes(_heartbeat(b5=int(msg_type))))
        broken = change(sound)
        assert broken[:-4] == sound[:-4] and broken != sound
        with pytest.raises(EnvelopeError) as refused:
            EnvelopeReader().receive_data(broken)
        assert refused.value.check == "crc"

"""The BTP faults of issue 22 item 2 and the harness's reading of an Error
whose code is malformed (conformance/suites/btp/peer.py error_code_problem):
an Error unreadable because of its code is that rule's alone."""

from __future__ import annotations

import pytest

from conformance.suites.btp.peer import NON_CANONICAL_REASONS, error_code_problem
from conformance.suites.btp.test_packet_server import EXTRA_BYTES, envelope_with_extra_bytes
from reference_impl.btp.faults import Fault
from reference_impl.btp.packet import (
    BtpDecodeError,
    ContentType,
    Error,
    Message,
    ProtocolDataEntry,
    Response,
    decode_packet,
    encode_packet,
    generalized_time,
)
from reference_impl.btp.session import Authenticated, BtpSession

AUTH = Message(
    7,
    (
        ProtocolDataEntry("auth", ContentType.APPLICATION_OCTET_STREAM, b""),
        ProtocolDataEntry("auth_token", ContentType.TEXT_PLAIN_UTF8, b"t"),
    ),
)
DUPLICATE_NAMES = Message(8, (ProtocolDataEntry("p", ContentType.TEXT_PLAIN_UTF8, b"x"),) * 2)


def _answers(faults, *packets) -> list[bytes]:
    session = BtpSession.server(lambda token: token == b"t", faults=faults)
    out = []
    for packet in packets:
        session.receive_message(encode_packet(packet))
        out += session.messages_to_send()
    return out


def _error(code: str, data: bytes = b"why") -> bytes:
    return encode_packet(
        Error(5, code, "NotAcceptedError", generalized_time(), data), validate=False
    )


def test_answer_auth_twice_answers_the_auth_message_twice_and_nothing_else():
    assert [decode_packet(m) for m in _answers((), AUTH)] == [Response(7)]
    assert [decode_packet(m) for m in _answers((Fault.ANSWER_AUTH_TWICE,), AUTH)] == [
        Response(7),
        Response(7),
    ]
    probe = Message(9, (ProtocolDataEntry("probe", ContentType.TEXT_PLAIN_UTF8, b"x"),))
    assert [decode_packet(m) for m in _answers((Fault.ANSWER_AUTH_TWICE,), AUTH, probe)][2:] == [
        Response(9)
    ]


def test_error_code_four_characters_writes_four_bytes_no_other_field_changed():
    session = BtpSession.server(
        lambda token: token == b"t", faults=(Fault.ERROR_CODE_FOUR_CHARACTERS,)
    )
    assert any(isinstance(e, Authenticated) for e in session.receive_message(encode_packet(AUTH)))
    session.messages_to_send()
    session.receive_message(encode_packet(DUPLICATE_NAMES))
    (raw,) = session.messages_to_send()
    envelope_start = 6
    assert (
        raw[0] == 2 and raw[envelope_start : envelope_start + 5] == b"F010\x12"
    )  # then the name's length
    assert "its code field is 4 bytes, 'F010'" in error_code_problem(raw)


def test_error_code_problem_names_the_code_only_when_the_code_is_why_the_error_is_unreadable():
    assert error_code_problem(_error("F00")) is None  # readable
    assert error_code_problem(encode_packet(Response(5))) is None  # no Error
    assert error_code_problem("text") is None
    for code, size in (("F000", 4), ("F0", 2), ("F0000", 5)):
        problem = error_code_problem(_error(code, b"some data in the Error"))
        assert problem and f"its code field is {size} bytes, {code!r}" in problem, (code, problem)
    assert "not three IA5 characters" in error_code_problem(_error("F\u00e90"))
    # bytes after the envelope are not the Error's (erratum BTP-E3)
    assert error_code_problem(_error("F00") + b"\x0a\x0b") is None
    assert "its code field is 4 bytes, 'F000'" in error_code_problem(_error("F000") + b"\x0a\x0b")
    # unreadable for another reason (its name is not IA5): not the code's doing
    other = bytearray(_error("F00"))
    other[10] = 0xE9  # a byte of the name "NotAcceptedError"
    assert error_code_problem(bytes(other)) is None


def test_client_auth_token_octet_stream_changes_the_content_type_only():
    """docs/strictness-btp.md: the auth_token entry keeps its name and bytes;
    only its content type, which "a UTF-8 'auth_token' entry" fixes, is 0."""
    for faults, content_type in (
        ((), ContentType.TEXT_PLAIN_UTF8),
        ((Fault.CLIENT_AUTH_TOKEN_OCTET_STREAM,), ContentType.APPLICATION_OCTET_STREAM),
    ):
        session = BtpSession.client(b"secret", faults=faults)
        [auth] = [decode_packet(m) for m in session.messages_to_send()]
        assert [(e.name, e.content_type, e.data) for e in auth.protocol_data] == [
            ("auth", ContentType.APPLICATION_OCTET_STREAM, b""),
            ("auth_token", content_type, b"secret"),
        ]


PROBE = Message(9, (ProtocolDataEntry("probe", ContentType.TEXT_PLAIN_UTF8, b"x"),))


def test_acknowledgement_faults_change_the_probe_answer_alone():
    """ack-length-beyond-end and ack-length-long-form change the Response to
    an ordinary Message only: the auth Response stays as the correct node
    sends it; the first is unreadable, the second refused by the strict
    decoder for its non-canonical length alone (the canonical case's)."""
    correct = _answers((), AUTH, PROBE)
    assert correct == [encode_packet(Response(7)), encode_packet(Response(9))]
    beyond = _answers((Fault.ACK_LENGTH_BEYOND_END,), AUTH, PROBE)
    assert beyond[0] == correct[0] and beyond[1] == bytes.fromhex("0100000009030100")
    with pytest.raises(BtpDecodeError, match="length prefix beyond end"):
        decode_packet(beyond[1])
    long_form = _answers((Fault.ACK_LENGTH_LONG_FORM,), AUTH, PROBE)
    assert long_form[0] == correct[0] and long_form[1] == bytes.fromhex("010000000981020100")
    with pytest.raises(BtpDecodeError) as refused:
        decode_packet(long_form[1])
    assert refused.value.reason in NON_CANONICAL_REASONS


@pytest.mark.parametrize(
    ("fault", "extended"),
    [
        (
            Fault.CLIENT_REJECT_EXTRA_BYTES_IN_ENVELOPE,
            envelope_with_extra_bytes(Response(7), EXTRA_BYTES),
        ),
        (Fault.CLIENT_REJECT_BYTES_AFTER_ENVELOPE, encode_packet(Response(7)) + EXTRA_BYTES),
    ],
)
def test_client_reject_faults_do_not_take_an_extended_auth_response(fault, extended):
    """The correct client takes an auth Response with extra bytes at the
    end (RFC 0030, erratum BTP-E3) and is authenticated; the faulty one
    treats that Response as unreadable, and stays unauthenticated (silent),
    taking the plain one still."""
    for faults, taken in (((), True), ((fault,), False)):
        session = BtpSession.client(b"t", faults=faults)
        auth = decode_packet(session.messages_to_send()[0])
        assert isinstance(auth, Message)
        extended_auth = extended[:1] + auth.request_id.to_bytes(4, "big") + extended[5:]
        events = session.receive_message(extended_auth)
        assert any(isinstance(e, Authenticated) for e in events) is taken, (faults, events)
        assert session.messages_to_send() == []

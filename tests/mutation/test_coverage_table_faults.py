"""The faults added for the cases of the coverage tables (issue 11), at the
level of the sans-I/O cores: each breaks its one rule and, off, the core
keeps it. (That the conformance cases catch them end to end is
test_mutation.py's `conformance mutation` run.)"""

from __future__ import annotations

import pytest

from reference_impl.btp.faults import Fault as BtpFault
from reference_impl.btp.packet import (
    ContentType,
    Error,
    Message,
    ProtocolDataEntry,
    Response,
    decode_packet,
    encode_packet,
    generalized_time,
)
from reference_impl.btp.session import AuthFailed, Authenticated, BtpSession, UnreadablePacket
from reference_impl.ssb import shs
from reference_impl.ssb.faults import Fault
from reference_impl.ssb.feed import (
    FeedError,
    create_message,
    encode_signature,
    json_stringify,
    message_id,
    signing_input,
)
from reference_impl.ssb.keys import Keypair
from reference_impl.ssb.rpc import RpcDecoder, RpcEndpoint, RpcError, RpcMessage

NETWORK_KEY = bytes(range(32))


# --- SSB feeds, client side ---------------------------------------------------------


def _signed(keypair: Keypair, fields: dict) -> dict:
    msg = dict(fields)
    msg["signature"] = encode_signature(keypair.sign(signing_input(msg)))
    return msg


def _second_fields(keypair: Keypair, first: dict) -> dict:
    return {
        "previous": message_id(first),
        "author": keypair.feed_id,
        "sequence": 2,
        "timestamp": first["timestamp"] + 1,
        "hash": "sha256",
        "content": {"type": "post", "text": "two"},
    }


def _broken_second(rule: str) -> tuple[Keypair, dict, dict]:
    """(author, message 1, message 2 broken in ``rule``)."""
    keypair = Keypair.generate()
    first = create_message(keypair, None, 1, 1_700_000_000_000, {"type": "post", "text": "one"})
    fields = _second_fields(keypair, first)
    if rule == "signature":
        second = _signed(keypair, fields)
        second["signature"] = encode_signature(bytes(64))
    elif rule == "author":
        other = Keypair.generate()
        second = _signed(other, {**fields, "author": other.feed_id})
    elif rule == "previous":
        second = _signed(
            keypair,
            {**fields, "previous": message_id(first).replace("%", "%A", 1)[:-8] + ".sha256"},
        )
    elif rule == "sequence":
        second = _signed(keypair, {**fields, "sequence": 3})
    elif rule == "content":
        second = _signed(keypair, {**fields, "content": {"type": "po", "text": "short type"}})
    elif rule == "fields":
        second = _signed(keypair, {**fields, "extra": 1})
    elif rule == "order":
        order = ("previous", "author", "sequence", "hash", "timestamp", "content")
        second = _signed(keypair, {key: fields[key] for key in order})
    elif rule == "hash":
        second = _signed(keypair, {**fields, "hash": "blake2b"})
    elif rule == "format":
        second = {
            **fields,
            "signature": encode_signature(keypair.sign(json_stringify(fields).encode("utf-8"))),
        }
    else:
        raise AssertionError(rule)
    return keypair, first, second


FEED_FAULTS = [
    (Fault.CLIENT_SKIP_SIGNATURE_CHECK, "signature"),
    (Fault.CLIENT_SKIP_SIGNATURE_CHECK, "format"),
    (Fault.CLIENT_ACCEPT_FOREIGN_AUTHOR, "author"),
    (Fault.CLIENT_SKIP_PREVIOUS_CHECK, "previous"),
    (Fault.CLIENT_SKIP_SEQUENCE_CHECK, "sequence"),
    (Fault.CLIENT_SKIP_CONTENT_TYPE_LENGTH_CHECK, "content"),
    (Fault.CLIENT_ACCEPT_EXTRA_FIELDS, "fields"),
    (Fault.CLIENT_ACCEPT_ANY_FIELD_ORDER, "fields"),
    (Fault.CLIENT_ACCEPT_ANY_HASH_NAME, "hash"),
    (Fault.CLIENT_ACCEPT_COMPACT_JSON_SIGNATURE, "format"),
]


@pytest.mark.parametrize("fault,rule", FEED_FAULTS)
def test_each_feed_fault_accepts_the_message_its_rule_refuses(fault, rule):
    from reference_impl.ssb.feed import verify_message

    broken = "order" if fault is Fault.CLIENT_ACCEPT_ANY_FIELD_ORDER else rule
    _, first, second = _broken_second(broken)
    with pytest.raises(FeedError) as refused:
        verify_message(second, first)
    assert refused.value.reason == rule
    assert verify_message(second, first, faults=frozenset({fault})) == message_id(second)


@pytest.mark.parametrize("fault,rule", FEED_FAULTS)
def test_each_feed_fault_still_refuses_the_other_rules(fault, rule):
    """A fault lets through its own rule only: every other broken message is
    still refused (so each rejects-... case fails only for its fault)."""
    from reference_impl.ssb.feed import verify_message

    own = {"order" if fault is Fault.CLIENT_ACCEPT_ANY_FIELD_ORDER else rule}
    if fault is Fault.CLIENT_SKIP_SIGNATURE_CHECK:
        own = {"signature", "format"}  # a client that checks no signature accepts both
    for other in {
        "signature",
        "author",
        "previous",
        "sequence",
        "content",
        "fields",
        "order",
        "hash",
        "format",
    } - own:
        _, first, second = _broken_second(other)
        with pytest.raises(FeedError):
            verify_message(second, first, faults=frozenset({fault}))


# --- SSB handshake ------------------------------------------------------------------


def test_skip_client_auth_signature_check_accepts_msg3_signed_by_another_key():
    for faults, accepted in (
        (frozenset(), False),
        (frozenset({Fault.SKIP_CLIENT_AUTH_SIGNATURE_CHECK}), True),
    ):
        client_keys, server_keys = Keypair.generate(), Keypair.generate()
        server = shs.ServerHandshake(NETWORK_KEY, server_keys, faults=faults)
        secret = shs.generate_ephemeral_secret()
        msg2 = server.receive_data(shs.hello(NETWORK_KEY, shs.ephemeral_public(secret)))
        ab = shs.shared_secret_ab(secret, shs.open_hello(NETWORK_KEY, msg2, step="msg2"))
        signature = shs.client_auth_signature(
            network_key=NETWORK_KEY,
            client_keypair=Keypair.generate(),
            server_public=server_keys.public,
            shared_secret_ab=ab,
        )
        msg3 = shs.box_client_auth(
            network_key=NETWORK_KEY,
            shared_secret_ab=ab,
            shared_secret_aB=shs.client_shared_secret_aB(secret, server_keys.public),
            detached_signature_A=signature,
            client_public=client_keys.public,
        )
        if accepted:
            assert len(server.receive_data(msg3)) == shs.SERVER_ACCEPT_SIZE
        else:
            with pytest.raises(shs.HandshakeError):
                server.receive_data(msg3)


# --- SSB RPC, requester side --------------------------------------------------------


def test_client_request_faults_number_from_2_and_indent():
    req, data = RpcEndpoint(faults=frozenset({Fault.CLIENT_FIRST_REQUEST_NUMBER_2})).request(
        ["whoami"], []
    )
    assert req == 2
    _, indented = RpcEndpoint(faults=frozenset({Fault.CLIENT_INDENTED_JSON})).request(
        ["whoami"], []
    )
    _, compact = RpcEndpoint().request(["whoami"], [])
    assert b"\n  " in indented and b"\n" not in compact


def test_client_drop_rpc_split_across_boxes_loses_the_split_message():
    wire = RpcMessage.from_json(-1, {"a": 1}, stream=True).encode()
    decoder = RpcDecoder()
    assert len(decoder.receive_data(wire[:5]) + decoder.receive_data(wire[5:])) == 1
    decoder = RpcDecoder(faults=frozenset({Fault.CLIENT_DROP_RPC_SPLIT_ACROSS_BOXES}))
    assert decoder.receive_data(wire[:5]) == []
    with pytest.raises(RpcError):  # the rest of the message is read as a header
        decoder.receive_data(wire[5:])


# --- BTP ----------------------------------------------------------------------------


def _server(*faults) -> BtpSession:
    session = BtpSession.server(lambda token: token == b"t", faults=faults)
    auth = Message(
        7,
        (
            ProtocolDataEntry("auth", ContentType.APPLICATION_OCTET_STREAM, b""),
            ProtocolDataEntry("auth_token", ContentType.TEXT_PLAIN_UTF8, b"t"),
        ),
    )
    assert any(isinstance(e, Authenticated) for e in session.receive_message(encode_packet(auth)))
    session.messages_to_send()
    return session


def _probe(request_id: int) -> bytes:
    return encode_packet(
        Message(request_id, (ProtocolDataEntry("probe", ContentType.TEXT_PLAIN_UTF8, b"x"),))
    )


def test_reject_extra_bytes_in_envelope():
    plain = _probe(8)
    extended = plain[:5] + bytes((plain[5] + 2,)) + plain[6:] + b"\x0a\x0b"
    assert not any(isinstance(e, UnreadablePacket) for e in _server().receive_message(extended))
    assert any(
        isinstance(e, UnreadablePacket)
        for e in _server(BtpFault.REJECT_EXTRA_BYTES_IN_ENVELOPE).receive_message(extended)
    )
    assert not any(
        isinstance(e, UnreadablePacket)
        for e in _server(BtpFault.REJECT_EXTRA_BYTES_IN_ENVELOPE).receive_message(plain)
    )


def test_reject_bytes_after_envelope_and_reject_extra_bytes_in_envelope_each_break_their_own():
    """Erratum BTP-E3: bytes after the envelope are ignored; the fault
    reject-bytes-after-envelope (the old reading) makes them unreadable, and
    reject-extra-bytes-in-envelope still rejects only what is inside."""
    plain = _probe(8)
    after = plain + b"\x0a\x0b\x0c\x0d"
    inside = plain[:5] + bytes((plain[5] + 2,)) + plain[6:] + b"\x0a\x0b"

    def unreadable(payload: bytes, *faults) -> bool:
        events = _server(*faults).receive_message(payload)
        return any(isinstance(e, UnreadablePacket) for e in events)

    assert not unreadable(after)
    assert unreadable(after, BtpFault.REJECT_BYTES_AFTER_ENVELOPE)
    assert not unreadable(plain, BtpFault.REJECT_BYTES_AFTER_ENVELOPE)
    assert not unreadable(inside, BtpFault.REJECT_BYTES_AFTER_ENVELOPE)
    assert not unreadable(after, BtpFault.REJECT_EXTRA_BYTES_IN_ENVELOPE)
    assert unreadable(inside + b"\x0e", BtpFault.REJECT_EXTRA_BYTES_IN_ENVELOPE)


def test_serve_unknown_type_as_message_answers_type_9_only_when_it_reads_as_a_message():
    relabelled = b"\x09" + _probe(9)[1:]
    conformant = _server()
    conformant.receive_message(relabelled)
    assert conformant.messages_to_send() == []
    faulty = _server(BtpFault.SERVE_UNKNOWN_TYPE_AS_MESSAGE)
    faulty.receive_message(relabelled)
    answers = [decode_packet(m) for m in faulty.messages_to_send()]
    assert answers and answers[0].request_id == 9
    faulty.receive_message(
        bytes.fromhex("ff00112233445566778899aabbccddeeff")
    )  # garbage stays unanswered
    assert faulty.messages_to_send() == []


def _client(*faults) -> tuple[BtpSession, int]:
    session = BtpSession.client(b"t", faults=faults)
    auth = decode_packet(session.messages_to_send()[0])
    return session, auth.request_id


def test_client_reply_to_unexpected_error_answers_errors_not_responses():
    session, auth_id = _client(BtpFault.CLIENT_REPLY_TO_UNEXPECTED_ERROR)
    session.receive_message(encode_packet(Response(auth_id)))
    session.receive_message(encode_packet(Response(12345)))
    assert session.messages_to_send() == []
    session.receive_message(
        encode_packet(Error(12345, "F00", "NotAcceptedError", generalized_time(), b""))
    )
    assert [type(decode_packet(m)) for m in session.messages_to_send()] == [Error]


def test_client_reuse_request_id_and_refuse_auth_response_with_data():
    session, auth_id = _client(BtpFault.CLIENT_REUSE_REQUEST_ID)
    session.receive_message(encode_packet(Response(auth_id)))
    assert (
        session.send_message((ProtocolDataEntry("m", ContentType.TEXT_PLAIN_UTF8, b"x"),))
        == auth_id
    )
    info = (ProtocolDataEntry("info", ContentType.TEXT_PLAIN_UTF8, b"more"),)
    for faults, refused in (((), False), ((BtpFault.CLIENT_REFUSE_AUTH_RESPONSE_WITH_DATA,), True)):
        session, auth_id = _client(*faults)
        events = session.receive_message(encode_packet(Response(auth_id, info)))
        assert any(isinstance(e, AuthFailed) for e in events) is refused

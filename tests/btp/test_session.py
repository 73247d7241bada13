"""Tests of reference_impl.btp.session: the sans-I/O BTP session, both roles.

Pure: no sockets, no clock (``now`` is fixed), request ids from a counter
where a test needs to know them.
"""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timezone

import pytest

from reference_impl.btp.packet import (
    MAX_AMOUNT,
    ContentType,
    Error,
    Fulfill,
    Message,
    Prepare,
    ProtocolDataEntry,
    Reject,
    Response,
    Transfer,
    decode_packet,
    encode_packet,
)
from reference_impl.btp.session import (
    AUTH,
    AUTH_TOKEN,
    Authenticated,
    AuthFailed,
    BalanceChanged,
    BtpSession,
    Close,
    Fault,
    Ledger,
    RequestReceived,
    ResponseReceived,
    Role,
    SessionState,
    UnexpectedPacket,
    UnreadablePacket,
    balance_request_entry,
    balance_response_entry,
    duplicate_names,
    parse_balance,
    token_checker,
)

TOKEN = b"s3cret-token"
NOW = datetime(2017, 11, 15, 14, 0, 0, tzinfo=timezone.utc)
NOW_TEXT = "20171115140000.000Z"


def fixed_now() -> datetime:
    return NOW


def counter(start: int = 1):
    values = itertools.count(start)
    return lambda: next(values)


def entry(
    name: str, data: bytes = b"", content_type: int = ContentType.APPLICATION_OCTET_STREAM
) -> ProtocolDataEntry:
    return ProtocolDataEntry(name, content_type, data)


def auth_message(request_id: int = 1, token: bytes = TOKEN, *extra: ProtocolDataEntry) -> Message:
    return Message(
        request_id, (entry(AUTH), entry(AUTH_TOKEN, token, ContentType.TEXT_PLAIN_UTF8), *extra)
    )


def server(**options) -> BtpSession:
    options.setdefault("now", fixed_now)
    options.setdefault("random_id", counter(1000))
    return BtpSession.server(token_checker(TOKEN), **options)


def client(token: bytes = TOKEN, **options) -> BtpSession:
    options.setdefault("now", fixed_now)
    options.setdefault("random_id", counter(1))
    return BtpSession.client(token, **options)


def sent(session: BtpSession) -> list:
    return [decode_packet(payload) for payload in session.messages_to_send()]


def open_server(**options) -> BtpSession:
    session = server(**options)
    assert session.receive_message(encode_packet(auth_message(1))) == [Authenticated(1)]
    assert sent(session) == [Response(1)]
    return session


def feed(session: BtpSession, packet) -> list:
    return session.receive_message(encode_packet(packet, validate=False))


def pair(**server_options) -> tuple[BtpSession, BtpSession]:
    """A client and a server that have authenticated with each other."""
    c, s = client(), server(**server_options)
    shuttle(c, s)
    assert c.authenticated and s.authenticated
    return c, s


def shuttle(a: BtpSession, b: BtpSession) -> list:
    """Carry payloads both ways until neither has anything to send; all events."""
    events = []
    while True:
        moved = False
        for src, dst in ((a, b), (b, a)):
            for payload in src.messages_to_send():
                moved = True
                events.extend(dst.receive_message(payload))
        if not moved:
            return events


# --------------------------------------------------------------------------- client auth


def test_client_sends_the_auth_message_first():
    c = client()
    assert c.role is Role.CLIENT and c.state is SessionState.AUTHENTICATING
    [auth] = sent(c)
    assert isinstance(auth, Message)
    assert auth.protocol_data[0] == ProtocolDataEntry("auth", 0, b"")
    assert auth.protocol_data[1] == ProtocolDataEntry("auth_token", 1, TOKEN)
    assert c.auth_request_id == auth.request_id
    assert auth.request_id in c.in_flight


def test_client_auth_message_bytes():
    c = client(b"tok", random_id=lambda: 0x01020304)
    # type 6, id 01020304, 25 bytes: count 01 02; "auth" ct 0 data ""; "auth_token" ct 1 "tok"
    assert c.messages_to_send() == [
        bytes.fromhex("0601020304190102046175746800000a617574685f746f6b656e0103746f6b")
    ]


def test_client_empty_token_is_sent_not_omitted():
    [auth] = sent(client(b""))
    assert auth.protocol_data[1] == ProtocolDataEntry("auth_token", 1, b"")


def test_client_extra_auth_entries_follow_the_token():
    [auth] = sent(client(extra_auth_data=(entry("auth_username", b"alice", 1),)))
    assert [e.name for e in auth.protocol_data] == ["auth", "auth_token", "auth_username"]


def test_client_token_must_be_utf8():
    with pytest.raises(ValueError):
        BtpSession.client(b"\xff\xfe")


def test_client_authenticated_by_response():
    c = client()
    c.messages_to_send()
    assert feed(c, Response(1)) == [Authenticated(1)]
    assert c.authenticated and c.in_flight == frozenset()


def test_client_auth_error_fails_and_closes():
    c = client()
    c.messages_to_send()
    events = feed(c, Error(1, "F00", "NotAcceptedError", NOW_TEXT))
    assert isinstance(events[0], AuthFailed) and events[0].code == "F00"
    assert isinstance(events[1], Close)
    assert c.closed and c.messages_to_send() == []


def test_client_auth_timeout_closes():
    c = client()
    c.messages_to_send()
    events = c.auth_timed_out()
    assert isinstance(events[0], AuthFailed) and events[0].code is None
    assert isinstance(events[1], Close) and c.closed
    assert c.messages_to_send() == []


def test_auth_timeout_after_auth_is_ignored():
    c, s = pair()
    assert c.auth_timed_out() == [] and s.auth_timed_out() == []
    assert c.authenticated and s.authenticated


def test_client_pipelines_requests_after_auth_message():
    c = client()
    request_id = c.send_message([entry("ping")])
    packets = sent(c)
    assert [type(p) for p in packets] == [Message, Message]
    assert packets[0].protocol_data[0].name == "auth" and packets[1].request_id == request_id


def test_client_unrelated_response_while_authenticating_is_unexpected():
    c = client()
    c.messages_to_send()
    [event] = feed(c, Response(999))
    assert isinstance(event, UnexpectedPacket)
    assert c.state is SessionState.AUTHENTICATING and c.messages_to_send() == []


# --------------------------------------------------------------------------- server auth


def test_server_accepts_auth_with_response():
    s = server()
    assert feed(s, auth_message(7)) == [Authenticated(7)]
    assert sent(s) == [Response(7)]
    assert s.authenticated and s.auth_request_id == 7


def test_server_accepts_extra_secondary_entries():
    s = server()
    assert feed(s, auth_message(7, TOKEN, entry("auth_username", b"bob", 1))) == [Authenticated(7)]


def test_server_accepts_empty_token_when_expected():
    s = BtpSession.server(token_checker(b""), now=fixed_now)
    assert feed(s, auth_message(2, b"")) == [Authenticated(2)]


def test_server_token_content_type_is_not_checked_but_must_be_utf8():
    s = server()
    msg = Message(3, (entry(AUTH), entry(AUTH_TOKEN, TOKEN, 0)))
    assert feed(s, msg) == [Authenticated(3)]
    s = server()
    events = feed(s, Message(3, (entry(AUTH), entry(AUTH_TOKEN, b"\xff\xfe", 0))))
    assert isinstance(events[0], AuthFailed) and events[0].code == "F01"


def auth_failure(session: BtpSession, packet, code: str) -> Error:
    events = feed(session, packet)
    assert len(events) == 2, events
    assert isinstance(events[0], AuthFailed) and events[0].code == code
    assert isinstance(events[1], Close)
    assert session.closed
    [error] = sent(session)
    assert isinstance(error, Error)
    assert error.request_id == packet.request_id
    assert error.code == code
    assert error.triggered_at == NOW_TEXT
    return error


def test_server_rejects_wrong_token():
    error = auth_failure(server(), auth_message(5, b"wrong"), "F00")
    assert error.name == "NotAcceptedError"
    assert b"wrong" not in error.data and TOKEN not in error.data


@pytest.mark.parametrize(
    "packet",
    [
        Transfer(4, 10),
        Response(4),
        Error(4, "F00", "NotAcceptedError", NOW_TEXT),
        Message(4, (entry("ilp", b"\x0c"), entry(AUTH_TOKEN, TOKEN, 1))),
        Message(4, ()),
        Message(4, (entry(AUTH_TOKEN, TOKEN, 1), entry(AUTH))),
    ],
    ids=["transfer", "response", "error", "primary-ilp", "no-entries", "auth-not-primary"],
)
def test_server_rejects_anything_but_auth_first_with_f00(packet):
    auth_failure(server(), packet, "F00")


@pytest.mark.parametrize(
    "packet",
    [
        Message(4, (entry(AUTH),)),
        Message(4, (entry(AUTH), entry("auth_username", b"x", 1))),
        Message(4, (entry(AUTH, b"x"), entry(AUTH_TOKEN, TOKEN, 1))),
        Message(4, (entry(AUTH, b"", 1), entry(AUTH_TOKEN, TOKEN, 1))),
        Message(4, (entry(AUTH), entry(AUTH_TOKEN, TOKEN, 1), entry(AUTH_TOKEN, TOKEN, 1))),
        Message(4, (entry(AUTH), entry(AUTH_TOKEN, TOKEN, 1), entry("x"), entry("x"))),
    ],
    ids=["no-token", "no-token-other", "auth-data", "auth-content-type", "dup-token", "dup-other"],
)
def test_server_rejects_malformed_auth_with_f01(packet):
    auth_failure(server(), packet, "F01")


def test_server_ignores_everything_after_failed_auth():
    s = server()
    auth_failure(s, auth_message(5, b"nope"), "F00")
    assert feed(s, auth_message(6)) == []
    assert s.messages_to_send() == []


def test_server_auth_timeout_closes_silently():
    s = server()
    [event] = s.auth_timed_out()
    assert isinstance(event, Close)
    assert s.closed and s.messages_to_send() == []


def test_server_unreadable_before_auth_is_ignored_and_auth_still_works():
    s = server()
    [event] = s.receive_message(b"\x06\x00\x00")
    assert isinstance(event, UnreadablePacket) and event.reason == "truncated"
    assert s.messages_to_send() == [] and s.state is SessionState.AUTHENTICATING
    assert feed(s, auth_message(9)) == [Authenticated(9)]


def test_server_legacy_packet_before_auth_is_ignored():
    s = server()
    [event] = feed(s, Reject(3, b"\x00" * 16))
    assert isinstance(event, UnreadablePacket) and event.reason == "legacy BTP 1 type 5"
    assert s.messages_to_send() == [] and s.state is SessionState.AUTHENTICATING


def test_server_cannot_send_requests_before_auth():
    with pytest.raises(RuntimeError):
        server().send_message([entry("x")])


def test_second_auth_message_is_refused_but_connection_stays():
    s = open_server()
    [event] = feed(s, auth_message(2))
    assert isinstance(event, RequestReceived)
    [error] = sent(s)
    assert isinstance(error, Error) and error.code == "F00" and error.request_id == 2
    assert s.authenticated


def test_check_token_exception_rejects():
    def broken(token: bytes) -> bool:
        raise RuntimeError("boom")

    s = BtpSession.server(broken, now=fixed_now)
    events = feed(s, auth_message(1))
    assert isinstance(events[0], AuthFailed)


def test_server_needs_check_token_and_client_needs_token():
    with pytest.raises(ValueError):
        BtpSession(Role.SERVER)
    with pytest.raises(ValueError):
        BtpSession(Role.CLIENT)


# --------------------------------------------------------------------------- request ids and responses


def test_request_ids_are_unique_in_flight():
    c, _ = pair()
    values = iter([5, 5, 5, 6])
    c2 = BtpSession.client(TOKEN, random_id=lambda: next(values))
    assert c2.auth_request_id == 5
    assert c2.send_message([entry("x")]) == 6  # 5 is in flight: drawn again
    ids = {c.send_message([entry("x")]) for _ in range(50)}
    assert len(ids) == 50


def test_random_request_ids_by_default():
    c = BtpSession.client(TOKEN)
    ids = {c.send_message([entry("x")]) for _ in range(20)}
    assert len(ids) == 20 and all(0 <= i < 2**32 for i in ids)


def test_explicit_request_id_in_flight_is_refused():
    c, _ = pair()
    c.send_message([entry("x")], request_id=77)
    with pytest.raises(ValueError):
        c.send_message([entry("x")], request_id=77)


def test_response_matches_in_flight_request():
    c, s = pair()
    request_id = c.send_message([entry("ping")])
    events = shuttle(c, s)
    assert ResponseReceived(request_id, Response(request_id)) in events
    assert request_id not in c.in_flight


def test_error_is_a_response_too():
    c, s = pair(max_balance=5)
    request_id = c.send_transfer(6)
    events = shuttle(c, s)
    [received] = [e for e in events if isinstance(e, ResponseReceived)]
    assert received.request_id == request_id and isinstance(received.packet, Error)


def test_response_to_unknown_request_is_ignored():
    c, _ = pair()
    [event] = feed(c, Response(123456))
    assert isinstance(event, UnexpectedPacket) and event.packet == Response(123456)
    assert c.messages_to_send() == []


def test_second_response_is_ignored():
    c, s = pair()
    request_id = c.send_message([entry("ping")])
    shuttle(c, s)
    [event] = feed(c, Response(request_id))
    assert isinstance(event, UnexpectedPacket)
    [event] = feed(c, Error(request_id, "F00", "NotAcceptedError", NOW_TEXT))
    assert isinstance(event, UnexpectedPacket)
    assert c.messages_to_send() == [] and c.authenticated


def test_unexpected_response_on_server_is_ignored():
    s = open_server()
    [event] = feed(s, Response(42))
    assert isinstance(event, UnexpectedPacket)
    assert s.messages_to_send() == []


def test_unexpected_response_with_duplicate_names_still_silent():
    s = open_server()
    [event] = feed(s, Response(42, (entry("a"), entry("a"))))
    assert isinstance(event, UnexpectedPacket) and s.messages_to_send() == []


def test_cannot_request_after_close():
    c, _ = pair()
    c.close("bye")
    with pytest.raises(RuntimeError):
        c.send_transfer(1)


def test_close_returns_close_once():
    c, _ = pair()
    assert c.close("bye") == [Close("bye")]
    assert c.close("again") == []
    assert c.closed and c.close_reason == "bye"
    assert c.receive_message(encode_packet(Response(1))) == []


# --------------------------------------------------------------------------- unreadable packets


@pytest.mark.parametrize(
    "payload,reason",
    [
        (b"", "truncated"),
        (b"\x09\x00\x00\x00\x01\x00", "unknown packet type"),
        (bytes.fromhex("0600000001030101"), "length prefix beyond end"),
        (bytes.fromhex("060000000181020100"), "non-canonical length"),
        (bytes.fromhex("060000000107010101e1000100"), "non-IA5 character"),
        (bytes.fromhex("0600000001070101016101 01ff".replace(" ", "")), "bad content type"),
    ],
    ids=["empty", "type", "length", "long-form", "ia5", "utf8"],
)
def test_unreadable_packets_are_ignored(payload, reason):
    s = open_server()
    events = s.receive_message(payload)
    assert len(events) == 1 and isinstance(events[0], UnreadablePacket)
    if reason is not None:
        assert events[0].reason == reason
    assert s.messages_to_send() == []
    assert s.authenticated
    # and the connection goes on
    assert isinstance(feed(s, Message(5, (entry("ping"),)))[0], RequestReceived)
    assert sent(s) == [Response(5)]


def test_text_message_is_unreadable():
    s = open_server()
    [event] = s.receive_text_message("hello")
    assert isinstance(event, UnreadablePacket) and event.reason == "text message"
    assert s.messages_to_send() == []


@pytest.mark.parametrize(
    "packet",
    [
        Prepare(3, b"\x01" * 16, 10, b"\x02" * 32, NOW_TEXT),
        Fulfill(4, b"\x01" * 16, b"\x03" * 32),
        Reject(5, b"\x01" * 16),
    ],
    ids=["prepare", "fulfill", "reject"],
)
def test_legacy_types_are_ignored(packet):
    s = open_server()
    [event] = feed(s, packet)
    assert isinstance(event, UnreadablePacket) and event.reason.startswith("legacy BTP 1 type")
    assert s.messages_to_send() == [] and s.authenticated


def test_receive_message_never_raises_on_random_bytes():
    import random

    rng = random.Random(1234)
    s = open_server()
    for _ in range(2000):
        size = rng.randrange(0, 40)
        payload = bytes(rng.randrange(256) for _ in range(size))
        s.receive_message(payload)
    assert not s.closed


# --------------------------------------------------------------------------- serving requests


def test_plain_message_gets_empty_response():
    s = open_server()
    [event] = feed(s, Message(8, (entry("ilp", b"\x0c\x01"),)))
    assert event == RequestReceived(Message(8, (entry("ilp", b"\x0c\x01"),)))
    assert sent(s) == [Response(8)]


def test_message_without_entries_gets_empty_response():
    s = open_server()
    feed(s, Message(8, ()))
    assert sent(s) == [Response(8)]


def test_echo_message_returns_its_primary_entry():
    s = open_server()
    echo = entry("echo", b"hello", 1)
    feed(s, Message(8, (echo, entry("trace", b"x"))))
    assert sent(s) == [Response(8, (echo,))]


def test_duplicate_names_in_request_get_f01_and_connection_stays():
    s = open_server()
    events = feed(s, Message(8, (entry("ilp", b"a"), entry("ilp", b"b"))))
    assert isinstance(events[0], RequestReceived)
    [error] = sent(s)
    assert isinstance(error, Error) and error.code == "F01" and error.name == "InvalidFieldsError"
    assert error.request_id == 8 and s.authenticated


def test_duplicate_names_in_transfer_refused_without_balance_change():
    s = open_server()
    events = feed(s, Transfer(8, 5, (entry("x"), entry("x"))))
    assert not any(isinstance(e, BalanceChanged) for e in events)
    [error] = sent(s)
    assert error.code == "F01" and s.balance == 0


def test_duplicate_names_helper():
    assert duplicate_names(Message(1, (entry("a"), entry("b"), entry("a"), entry("a")))) == ["a"]
    assert duplicate_names(Message(1, (entry("a"), entry("b")))) == []


def test_requests_from_server_are_served_by_client():
    c, s = pair()
    request_id = s.send_transfer(11)
    events = shuttle(c, s)
    assert BalanceChanged(11, 11) in events
    assert ResponseReceived(request_id, Response(request_id)) in events
    assert c.balance == 11 and s.balance == 0


# --------------------------------------------------------------------------- transfers and balance


def test_transfer_increases_balance_and_gets_response():
    s = open_server()
    events = feed(s, Transfer(9, 25))
    assert events == [RequestReceived(Transfer(9, 25)), BalanceChanged(25, 25)]
    assert sent(s) == [Response(9)]
    assert s.balance == 25


def test_transfer_over_max_balance_is_refused_with_f08():
    s = open_server(initial_balance=90, max_balance=100)
    events = feed(s, Transfer(9, 11))
    assert events == [RequestReceived(Transfer(9, 11))]
    [error] = sent(s)
    assert (
        isinstance(error, Error)
        and error.code == "F08"
        and error.name == "InsufficientBalanceError"
    )
    assert error.triggered_at == NOW_TEXT
    assert s.balance == 90


def test_transfer_up_to_max_balance_is_accepted():
    s = open_server(initial_balance=90, max_balance=100)
    feed(s, Transfer(9, 10))
    assert sent(s) == [Response(9)] and s.balance == 100
    feed(s, Transfer(10, 0))
    assert sent(s) == [Response(10)] and s.balance == 100
    feed(s, Transfer(11, 1))
    assert sent(s)[0].code == "F08" and s.balance == 100


def test_transfer_of_max_uint64():
    s = open_server()
    feed(s, Transfer(9, MAX_AMOUNT))
    assert sent(s) == [Response(9)] and s.balance == MAX_AMOUNT
    feed(s, Transfer(10, 1))
    assert sent(s)[0].code == "F08" and s.balance == MAX_AMOUNT


def test_balance_changes_only_with_the_response():
    """Every Response to a Transfer comes with exactly its amount added;
    every Error with nothing added."""
    s = open_server(max_balance=1000)
    expected = 0
    for request_id, amount in enumerate([300, 300, 500, 300, 100, 1, 0], start=10):
        feed(s, Transfer(request_id, amount))
        [answer] = sent(s)
        if isinstance(answer, Response):
            expected += amount
        else:
            assert answer.code == "F08"
        assert s.balance == expected
    assert expected == 1000


def test_balance_message_reports_balance():
    s = open_server(initial_balance=7)
    feed(s, Transfer(2, 5))
    sent(s)
    feed(s, Message(3, (balance_request_entry(),)))
    [response] = sent(s)
    assert response == Response(3, (ProtocolDataEntry("balance", 2, b'{"balance":"12"}'),))
    assert parse_balance(response) == 12


def test_request_balance_round_trip():
    c, s = pair(initial_balance=3)
    request_id = c.request_balance()
    events = shuttle(c, s)
    [received] = [e for e in events if isinstance(e, ResponseReceived)]
    assert received.request_id == request_id and parse_balance(received.packet) == 3


def test_balance_request_entry_bytes():
    s = client(b"", random_id=lambda: 2)
    s.messages_to_send()
    s.receive_message(encode_packet(Response(2)))
    s.request_balance(request_id=0x10)
    assert s.messages_to_send() == [bytes.fromhex("06000000100e01010762616c616e636502027b7d")]


def test_balance_response_entry_bytes():
    assert encode_packet(Response(0x10, (balance_response_entry(12),))) == bytes.fromhex(
        "01000000101c01010762616c616e636502107b2262616c616e6365223a223132227d"
    )


@pytest.mark.parametrize(
    "packet",
    [
        Error(1, "F00", "NotAcceptedError", NOW_TEXT),
        Response(1),
        Response(1, (entry("other", b'{"balance":"1"}', 2),)),
        Response(1, (entry("balance", b'{"balance":"1"}', 1),)),
        Response(1, (entry("balance", b'{"balance":1}', 2),)),
        Response(1, (entry("balance", b'{"balance":"-1"}', 2),)),
        Response(1, (entry("balance", b'{"balance":"01"}', 2),)),
        Response(1, (entry("balance", b'{"balance":"1.5"}', 2),)),
        Response(1, (entry("balance", b"[]", 2),)),
        Response(1, (entry("balance", b"nope", 2),)),
    ],
    ids=[
        "error",
        "empty",
        "name",
        "content-type",
        "number",
        "negative",
        "leading-zero",
        "fraction",
        "array",
        "json",
    ],
)
def test_parse_balance_rejects(packet):
    with pytest.raises(ValueError):
        parse_balance(packet)


def test_ledger_is_shared_between_sessions():
    ledger = Ledger(0, 100)
    first = BtpSession.server(token_checker(TOKEN), ledger=ledger)
    second = BtpSession.server(token_checker(TOKEN), ledger=ledger)
    for session in (first, second):
        feed(session, auth_message(1))
        feed(session, Transfer(2, 40))
    assert ledger.balance == 80 and first.balance == second.balance == 80
    feed(second, Transfer(3, 40))
    assert sent(second)[-1].code == "F08"
    assert ledger.balance == 80


def test_ledger_rejects_bad_initial_balance():
    with pytest.raises(ValueError):
        Ledger(10, 5)


# --------------------------------------------------------------------------- auto_respond=False


def test_manual_responses():
    s = open_server(auto_respond=False)
    [event] = feed(s, Message(4, (entry("quote", b"?"),)))
    assert isinstance(event, RequestReceived)
    assert s.messages_to_send() == []
    s.respond(4, [entry("quote", b"42")])
    assert sent(s) == [Response(4, (entry("quote", b"42"),))]
    with pytest.raises(ValueError):
        s.respond(4)  # answered already
    feed(s, Message(5, (entry("quote"),)))
    s.respond_error(5, "T00", "busy")
    [error] = sent(s)
    assert error.code == "T00" and error.name == "UnreachableError" and error.data == b"busy"
    with pytest.raises(ValueError):
        s.respond_error(6, "X99")


def test_manual_mode_still_settles_transfers():
    s = open_server(auto_respond=False)
    feed(s, Transfer(4, 3))
    assert sent(s) == [Response(4)] and s.balance == 3


# --------------------------------------------------------------------------- faults


def test_fault_no_auth_required():
    s = server(faults=[Fault.NO_AUTH_REQUIRED])
    events = feed(s, Transfer(4, 10))
    assert BalanceChanged(10, 10) in events
    assert sent(s) == [Response(4)] and not s.closed
    # a real auth still works afterwards
    assert feed(s, auth_message(5)) == [Authenticated(5)]


def test_fault_reply_to_unexpected():
    s = open_server(faults=[Fault.REPLY_TO_UNEXPECTED])
    [event] = feed(s, Response(42))
    assert isinstance(event, UnexpectedPacket)
    [error] = sent(s)
    assert isinstance(error, Error) and error.request_id == 42


def test_fault_reply_to_unreadable():
    s = open_server(faults=["reply-to-unreadable"])
    s.receive_message(bytes.fromhex("0600000009ff"))
    [error] = sent(s)
    assert isinstance(error, Error) and error.request_id == 9
    s.receive_text_message("hi")
    assert isinstance(sent(s)[0], Error)


def test_fault_wrong_request_id():
    s = open_server(faults=[Fault.WRONG_REQUEST_ID])
    feed(s, Message(10, (entry("ping"),)))
    assert sent(s) == [Response(11)]
    feed(s, Transfer(2**32 - 1, 1))
    assert sent(s) == [Response(0)]


def test_fault_wrong_request_id_keeps_auth_answer_right():
    s = server(faults=[Fault.WRONG_REQUEST_ID])
    feed(s, auth_message(7))
    assert sent(s) == [Response(7)]


def test_fault_balance_on_error():
    s = open_server(max_balance=10, faults=[Fault.BALANCE_ON_ERROR])
    events = feed(s, Transfer(3, 11))
    [error] = sent(s)
    assert error.code == "F08"
    assert s.balance == 11 and BalanceChanged(11, 11) in events


def test_fault_accept_wrong_token():
    s = server(faults=[Fault.ACCEPT_WRONG_TOKEN])
    assert feed(s, auth_message(3, b"anything")) == [Authenticated(3)]


def test_fault_accept_wrong_token_still_needs_a_token_entry():
    s = server(faults=[Fault.ACCEPT_WRONG_TOKEN])
    events = feed(s, Message(3, (entry(AUTH),)))
    assert isinstance(events[0], AuthFailed)


@pytest.mark.parametrize(
    "auth_entry", [entry(AUTH, b"", 1), entry(AUTH, b"x")], ids=["content-type", "data"]
)
def test_fault_accept_malformed_auth_entry(auth_entry):
    s = server(faults=[Fault.ACCEPT_MALFORMED_AUTH_ENTRY])
    assert feed(s, Message(3, (auth_entry, entry(AUTH_TOKEN, TOKEN, 1)))) == [Authenticated(3)]


def test_fault_accept_malformed_auth_entry_still_checks_the_token():
    s = server(faults=[Fault.ACCEPT_MALFORMED_AUTH_ENTRY])
    auth_failure(s, Message(3, (entry(AUTH, b"x"), entry(AUTH_TOKEN, b"wrong", 1))), "F00")


def test_no_fault_is_default():
    assert server().faults == frozenset()


def test_unknown_fault_name_is_refused():
    with pytest.raises(ValueError):
        server(faults=["no-such-fault"])


def test_error_data_is_bounded_and_json_helpers():
    s = open_server(auto_respond=False)
    feed(s, Message(4, (entry("x"),)))
    s.respond_error(4, "F00", b"x" * 10000)
    [error] = sent(s)
    assert len(error.data) == 8192
    assert json.loads(balance_response_entry(5).data) == {"balance": "5"}

"""The sans-I/O Ripple host session: host-id exchange, msgno parity and
uniqueness, replies only for outstanding msgnos, closing at once on bad
frames, the profile's ERR answers, and the faults that bend them."""

from __future__ import annotations

import pytest

from reference_impl.ripplehost.faults import Fault
from reference_impl.ripplehost.frame import (
    MessageReader,
    encode_frame,
    encode_message,
    parse_frames,
)
from reference_impl.ripplehost.session import (
    AnswerReceived,
    Closed,
    HostIdentified,
    MessageReceived,
    RippleSession,
    Role,
    SessionError,
)

HOST_ID = {"type": "host-id", "hostname": "a.example"}
PING = {"type": "ping"}


def acceptor(*faults) -> RippleSession:
    return RippleSession(Role.ACCEPTOR, "b.example", faults=frozenset(faults))


def identified_acceptor(*faults) -> RippleSession:
    session = acceptor(*faults)
    events = session.receive_data(encode_message("MSG", 0, HOST_ID))
    assert events == [HostIdentified("a.example")]
    session.data_to_send()
    return session


def messages(data: bytes):
    return MessageReader().receive_data(data)


def test_host_id_exchange_between_two_sessions():
    initiator = RippleSession(Role.INITIATOR, "a.example")
    responder = acceptor()
    initiator.start()
    hello = initiator.data_to_send()
    [msg] = messages(hello)
    assert (msg.type, msg.msgno, msg.body) == ("MSG", 0, HOST_ID)
    assert responder.receive_data(hello) == [HostIdentified("a.example")]
    answer = responder.data_to_send()
    [rpy] = messages(answer)
    assert (rpy.type, rpy.msgno, rpy.body) == (
        "RPY",
        0,
        {"type": "host-id", "hostname": "b.example"},
    )
    assert initiator.receive_data(answer) == [HostIdentified("b.example")]
    assert initiator.identified and responder.identified and not initiator.outstanding


def test_msgno_parity_by_role():
    initiator = RippleSession(Role.INITIATOR, "a.example")
    initiator.start()
    initiator.receive_data(encode_message("RPY", 0, {"type": "host-id", "hostname": "b.example"}))
    assert [initiator.send_message(PING) for _ in range(3)] == [2, 4, 6]
    responder = identified_acceptor()
    assert [responder.send_message(PING) for _ in range(3)] == [1, 3, 5]


def test_initiator_sends_nothing_before_the_host_id_reply():
    initiator = RippleSession(Role.INITIATOR, "a.example")
    initiator.start()
    with pytest.raises(SessionError):
        initiator.send_message(PING)


def test_msgnos_skip_outstanding_ones_on_wrap():
    session = identified_acceptor()
    session._next_msgno = 2147483647
    assert session.send_message(PING) == 2147483647
    assert session.send_message(PING) == 1


def test_acceptor_answers_and_frees_the_msgno():
    session = identified_acceptor()
    [event] = session.receive_data(encode_message("MSG", 2, PING))
    assert isinstance(event, MessageReceived) and event.message.body == PING
    assert 2 in session.unanswered
    session.reply(2, {"type": "pong"})
    [rpy] = messages(session.data_to_send())
    assert (rpy.type, rpy.msgno) == ("RPY", 2) and 2 not in session.unanswered
    # answered, so msgno 2 may be used again
    assert isinstance(session.receive_data(encode_message("MSG", 2, PING))[0], MessageReceived)


@pytest.mark.parametrize(
    "data, reason",
    [
        (encode_message("MSG", 3, PING), "wrong parity"),
        (encode_message("RPY", 7, {"type": "pong"}), "not an outstanding MSG"),
        (encode_message("ERR", 1, {"type": "error"}), "not an outstanding MSG"),
        (b"MSG 1.0 2 . 1\r\n{}END\r\n", "frame breaks the grammar: missing END trailer"),
        (b"MSG 1.0 2 . 2\r\n{}END\r\n", "frame breaks the grammar: message has no type"),
    ],
)
def test_bad_frames_close_at_once_without_an_answer(data, reason):
    session = identified_acceptor()
    events = session.receive_data(data)
    assert len(events) == 1 and isinstance(events[0], Closed) and reason in events[0].reason
    assert session.closed and session.data_to_send() == b""
    assert session.receive_data(encode_message("MSG", 4, PING)) == []


def test_reused_outstanding_msgno_closes():
    session = identified_acceptor()
    session.receive_data(encode_message("MSG", 2, {"type": "hold", "seconds": 1}))
    events = session.receive_data(encode_message("MSG", 2, PING))
    assert isinstance(events[-1], Closed) and "reuses msgno 2" in events[-1].reason
    assert session.data_to_send() == b""
    session.reply(2, {"type": "held"})  # a late answer to a closed association is dropped
    assert session.data_to_send() == b""


def test_rpy_after_the_complete_answer_closes():
    session = identified_acceptor()
    msgno = session.send_message(PING)
    session.data_to_send()
    [answer] = session.receive_data(encode_message("RPY", msgno, {"type": "pong"}))
    assert isinstance(answer, AnswerReceived) and answer.request == PING
    [closed] = session.receive_data(encode_message("RPY", msgno, {"type": "pong"}))
    assert isinstance(closed, Closed)


def test_chunked_and_interleaved_messages_complete_separately():
    session = identified_acceptor()
    data = encode_message(
        "MSG", 2, {"type": "echo", "a": "x" * 40}, chunk_size=10
    ) + encode_message("MSG", 4, PING, chunk_size=4)
    frames = parse_frames(data)
    first = [f for f in frames if f.msgno == 2]
    second = [f for f in frames if f.msgno == 4]
    assert len(first) > 1 and len(second) > 1
    mixed = (
        [f for pair in zip(first, second) for f in pair]
        + first[len(second) :]
        + second[len(first) :]
    )
    events = session.receive_data(b"".join(encode_frame(f) for f in mixed))
    assert [(e.message.msgno, e.message.body["type"]) for e in events] == [(4, "ping"), (2, "echo")]


def test_frames_before_a_bad_frame_are_answered_then_close():
    session = identified_acceptor()
    events = session.receive_data(
        encode_message("MSG", 2, PING) + b'MSG 1.0 4 . 15\r\n{"type":"ping"}XXX\r\n'
    )
    assert isinstance(events[0], MessageReceived) and isinstance(events[1], Closed)
    assert "missing END trailer" in events[1].reason


def test_first_message_not_host_id_gets_err_and_close():
    session = acceptor()
    events = session.receive_data(encode_message("MSG", 0, PING))
    [err] = messages(session.data_to_send())
    assert (err.type, err.msgno, err.body["error"]) == ("ERR", 0, "host-id-required")
    assert isinstance(events[-1], Closed)


def test_host_id_in_a_node_frame_is_not_a_host_id():
    session = acceptor()
    session.receive_data(encode_message("MSG", 0, HOST_ID, to_user="x", from_user="y"))
    [err] = messages(session.data_to_send())
    assert err.type == "ERR" and session.closed


def test_repeated_host_id_gets_err_and_stays_open():
    session = identified_acceptor()
    assert session.receive_data(encode_message("MSG", 2, HOST_ID)) == []
    [err] = messages(session.data_to_send())
    assert (err.type, err.msgno, err.body["error"]) == (
        "ERR",
        2,
        "host-id-repeated",
    ) and not session.closed


def test_unsupported_version_gets_err():
    session = identified_acceptor()
    assert session.receive_data(encode_message("MSG", 2, PING, version="9.9")) == []
    [err] = messages(session.data_to_send())
    assert err.body["error"] == "unsupported-version" and err.body["supported"] == ["1.0"]


def test_node_frame_answered_with_users_swapped():
    session = identified_acceptor()
    session.receive_data(encode_message("MSG", 2, PING, to_user="bob", from_user="alice"))
    session.reply(2, {"type": "pong"})
    [rpy] = messages(session.data_to_send())
    assert (rpy.to_user, rpy.from_user) == ("alice", "bob")


def test_initiator_closes_on_err_to_its_host_id_and_on_msg_before_the_reply():
    initiator = RippleSession(Role.INITIATOR, "a.example")
    initiator.start()
    [closed] = initiator.receive_data(encode_message("ERR", 0, {"type": "error", "error": "no"}))
    assert isinstance(closed, Closed) and "refused" in closed.reason
    initiator = RippleSession(Role.INITIATOR, "a.example")
    initiator.start()
    [closed] = initiator.receive_data(encode_message("MSG", 1, PING))
    assert isinstance(closed, Closed)
    initiator = RippleSession(Role.INITIATOR, "a.example")
    initiator.start()
    [closed] = initiator.receive_data(encode_message("RPY", 0, PING))
    assert "not a host-id" in closed.reason


def test_initiator_closes_on_even_msg_from_the_acceptor():
    initiator = RippleSession(Role.INITIATOR, "a.example")
    initiator.start()
    initiator.receive_data(encode_message("RPY", 0, {"type": "host-id", "hostname": "b.example"}))
    [closed] = initiator.receive_data(encode_message("MSG", 2, PING))
    assert "wrong parity" in closed.reason


def test_rpy_and_err_in_progress_for_one_msgno_close():
    session = identified_acceptor()
    msgno = session.send_message(PING)
    data = encode_message("RPY", msgno, {"type": "pong"}, chunk_size=3)[:30]
    session.receive_data(b'RPY 1.0 1 * 3\r\n{"tEND\r\n')
    [closed] = session.receive_data(b"ERR 1.0 1 . 2\r\n{}END\r\n")
    assert isinstance(closed, Closed) and "RPY and ERR" in closed.reason and data


# ---------------------------------------------------------------- faults


def test_fault_accept_wrong_parity_and_reused_and_unknown_reply():
    assert isinstance(
        identified_acceptor(Fault.ACCEPT_WRONG_PARITY).receive_data(encode_message("MSG", 3, PING))[
            0
        ],
        MessageReceived,
    )
    session = identified_acceptor(Fault.ACCEPT_REUSED_MSGNO)
    session.receive_data(encode_message("MSG", 2, PING))
    assert isinstance(session.receive_data(encode_message("MSG", 2, PING))[0], MessageReceived)
    session = identified_acceptor(Fault.ACCEPT_UNKNOWN_REPLY)
    assert session.receive_data(encode_message("RPY", 9, PING)) == [] and not session.closed


def test_fault_malformed_handling():
    session = identified_acceptor(Fault.ANSWER_MALFORMED)
    session.receive_data(b"XYZ\r\n")
    [err] = messages(session.data_to_send())
    assert err.type == "ERR" and session.closed
    session = identified_acceptor(Fault.STAY_OPEN_ON_MALFORMED)
    assert session.receive_data(b"XYZ\r\n") == [] and not session.closed
    assert isinstance(session.receive_data(encode_message("MSG", 2, PING))[0], MessageReceived)


def test_fault_trailer_and_size():
    session = identified_acceptor(Fault.ACCEPT_MISSING_END)
    assert isinstance(
        session.receive_data(b'MSG 1.0 2 . 15\r\n{"type":"ping"}XXX\r\n')[0], MessageReceived
    )
    session = identified_acceptor(Fault.IGNORE_SIZE)
    assert isinstance(
        session.receive_data(b'MSG 1.0 2 . 3\r\n{"type":"ping"}END\r\n')[0], MessageReceived
    )


def test_fault_parities_and_reply_msgno():
    assert identified_acceptor(Fault.EVEN_MSGNOS).send_message(PING) % 2 == 0
    initiator = RippleSession(
        Role.INITIATOR, "a.example", faults=frozenset({Fault.CLIENT_ODD_MSGNOS})
    )
    initiator.start()
    assert messages(initiator.data_to_send())[0].msgno % 2 == 1
    session = identified_acceptor(Fault.REPLY_WRONG_MSGNO)
    session.receive_data(encode_message("MSG", 2, PING))
    session.reply(2, {"type": "pong"})
    assert messages(session.data_to_send())[0].msgno == 4


def test_fault_no_host_id_reply_and_client_faults():
    session = acceptor(Fault.NO_HOST_ID_REPLY)
    session.receive_data(encode_message("MSG", 0, HOST_ID))
    assert session.data_to_send() == b"" and session.identified
    initiator = RippleSession(
        Role.INITIATOR, "a.example", faults=frozenset({Fault.CLIENT_NO_HOST_ID})
    )
    initiator.start()
    assert initiator.data_to_send() == b"" and initiator.send_message(PING) == 0
    initiator = RippleSession(
        Role.INITIATOR, "a.example", faults=frozenset({Fault.CLIENT_REUSE_MSGNO})
    )
    initiator.start()
    initiator.receive_data(encode_message("RPY", 0, {"type": "host-id", "hostname": "b.example"}))
    assert [initiator.send_message(PING) for _ in range(2)] == [2, 2]


def test_fault_no_interleave():
    session = identified_acceptor(Fault.NO_INTERLEAVE)
    session.receive_data(b"MSG 1.0 2 * 1\r\n{END\r\n")
    [closed] = session.receive_data(encode_message("MSG", 4, PING))
    assert isinstance(closed, Closed)

"""The faults added for the suite's cases that no earlier fault broke
(chunking, CRLF before END, node frames, a MSG before the host-id, other
versions; client-side chunking), at the level of the sans-I/O session: each
breaks its one rule and, off, the session keeps it. (That the conformance
cases catch them end to end is test_suite.py's certification of every
fault, and `conformance mutation --protocol ripplehost`.)"""

from __future__ import annotations

from reference_impl.ripplehost.faults import Fault
from reference_impl.ripplehost.frame import (
    Frame,
    MessageReader,
    encode_body,
    encode_frame,
    encode_message,
)
from reference_impl.ripplehost.session import (
    Closed,
    HostIdentified,
    MessageReceived,
    RippleSession,
    Role,
)

HOST_ID = {"type": "host-id", "hostname": "a.example"}
ECHO = {"type": "echo", "data": "x" * 100}


def identified(role: Role, *faults) -> RippleSession:
    session = RippleSession(role, "b.example", faults=frozenset(faults))
    if role is Role.ACCEPTOR:
        assert session.receive_data(encode_message("MSG", 0, HOST_ID)) == [
            HostIdentified("a.example")
        ]
    else:
        session.start()
        session.receive_data(encode_message("RPY", 0, {"type": "host-id", "hostname": "a.example"}))
        assert session.identified
    session.data_to_send()
    return session


def received(session: RippleSession, data: bytes) -> list:
    return session.receive_data(data)


def test_refuse_chunked_closes_on_a_star_frame_in_either_role():
    chunked = encode_message("MSG", 2, ECHO, chunk_size=16)
    served = received(identified(Role.ACCEPTOR), chunked)
    assert [type(e) for e in served] == [MessageReceived] and served[0].message.body == ECHO
    assert isinstance(received(identified(Role.ACCEPTOR, Fault.REFUSE_CHUNKED), chunked)[0], Closed)
    from_acceptor = encode_message("MSG", 1, ECHO, chunk_size=16)
    assert [type(e) for e in received(identified(Role.INITIATOR), from_acceptor)] == [
        MessageReceived
    ]
    assert isinstance(
        received(identified(Role.INITIATOR, Fault.CLIENT_REFUSE_CHUNKED), from_acceptor)[0], Closed
    )
    # Single-frame messages are still served under the fault.
    single = received(
        identified(Role.ACCEPTOR, Fault.REFUSE_CHUNKED), encode_message("MSG", 2, ECHO)
    )
    assert [type(e) for e in single] == [MessageReceived]


def test_refuse_crlf_before_end_closes_only_on_content_ending_in_crlf():
    data = encode_frame(Frame("MSG", "1.0", 2, False, encode_body(ECHO) + b"\r\n"))
    served = received(identified(Role.ACCEPTOR), data)
    assert [type(e) for e in served] == [MessageReceived] and served[0].message.body == ECHO
    assert isinstance(
        received(identified(Role.ACCEPTOR, Fault.REFUSE_CRLF_BEFORE_END), data)[0], Closed
    )
    plain = received(
        identified(Role.ACCEPTOR, Fault.REFUSE_CRLF_BEFORE_END), encode_message("MSG", 2, ECHO)
    )
    assert [type(e) for e in plain] == [MessageReceived]


def test_refuse_node_frames_and_node_answer_as_host():
    node = encode_message("MSG", 2, ECHO, to_user="alice", from_user="bob")
    assert isinstance(
        received(identified(Role.ACCEPTOR, Fault.REFUSE_NODE_FRAMES), node)[0], Closed
    )
    for faults, users in (((), ("bob", "alice")), ((Fault.NODE_ANSWER_AS_HOST,), (None, None))):
        session = identified(Role.ACCEPTOR, *faults)
        [event] = received(session, node)
        session.reply(event.message.msgno, ECHO)
        [answer] = MessageReader().receive_data(session.data_to_send())
        assert (answer.type, answer.msgno, (answer.to_user, answer.from_user)) == ("RPY", 2, users)


def test_serve_before_host_id_serves_instead_of_err_and_close():
    ping = encode_message("MSG", 0, {"type": "ping"})
    session = RippleSession(Role.ACCEPTOR, "b.example")
    events = received(session, ping)
    [err] = MessageReader().receive_data(session.data_to_send())
    assert isinstance(events[-1], Closed) and (err.type, err.body["error"]) == (
        "ERR",
        "host-id-required",
    )
    faulty = RippleSession(
        Role.ACCEPTOR, "b.example", faults=frozenset({Fault.SERVE_BEFORE_HOST_ID})
    )
    assert [type(e) for e in received(faulty, ping)] == [MessageReceived] and not faulty.closed
    # A host-id still completes the exchange afterwards.
    assert received(faulty, encode_message("MSG", 2, HOST_ID)) == [HostIdentified("a.example")]


def test_serve_any_version_serves_instead_of_err():
    other = encode_message("MSG", 2, ECHO, version="9.9")
    session = identified(Role.ACCEPTOR)
    assert received(session, other) == []
    [err] = MessageReader().receive_data(session.data_to_send())
    assert (err.type, err.msgno, err.body["error"]) == ("ERR", 2, "unsupported-version")
    assert [
        type(e) for e in received(identified(Role.ACCEPTOR, Fault.SERVE_ANY_VERSION), other)
    ] == [MessageReceived]


def test_client_frame_faults_bend_only_the_initiator_they_are_given_to():
    """client-answer-malformed, client-accept-missing-end, client-ignore-size:
    the initiator closes silently on a bad header, a missing END and a wrong
    size without them; with each, it answers, or serves the bad frame. The
    acceptor's msgnos are odd, so the frames break only the rule at hand."""
    bad_header = b"MSG 1.0 3 .\r\n" + encode_body({"type": "ping"}) + b"END\r\n"
    content = encode_body(ECHO)
    missing_end = f"MSG 1.0 3 . {len(content)}\r\n".encode() + content + b"EDN\r\n"
    wrong_size = f"MSG 1.0 3 . {len(content) - 8}\r\n".encode() + content + b"END\r\n"
    for data in (bad_header, missing_end, wrong_size):
        session = identified(Role.INITIATOR)
        events = received(session, data)
        assert isinstance(events[-1], Closed) and session.data_to_send() == b"", data
    session = identified(Role.INITIATOR, Fault.CLIENT_ANSWER_MALFORMED)
    assert isinstance(received(session, bad_header)[-1], Closed)
    [err] = MessageReader().receive_data(session.data_to_send())
    assert (err.type, err.body["error"]) == ("ERR", "malformed-frame")
    for fault, data in (
        (Fault.CLIENT_ACCEPT_MISSING_END, missing_end),
        (Fault.CLIENT_IGNORE_SIZE, wrong_size),
    ):
        session = identified(Role.INITIATOR, fault)
        [event] = received(session, data)
        assert (
            isinstance(event, MessageReceived) and event.message.body == ECHO and not session.closed
        ), fault


def test_reuse_msgno_numbers_every_own_msg_alike_and_takes_each_answer_for_one():
    session = identified(Role.ACCEPTOR, Fault.REUSE_MSGNO)
    assert [session.send_message({"type": "ping"}) for _ in range(3)] == [1, 1, 1]
    for _ in range(3):
        events = received(session, encode_message("RPY", 1, {"type": "pong"}))
        assert not session.closed and events and not isinstance(events[0], Closed)
    assert isinstance(received(session, encode_message("RPY", 1, {"type": "pong"}))[0], Closed)
    plain = identified(Role.ACCEPTOR)
    assert [plain.send_message({"type": "ping"}) for _ in range(3)] == [1, 3, 5]


def test_close_on_answered_msgno_closes_on_any_reuse():
    for faults, closes in (((), False), ((Fault.CLOSE_ON_ANSWERED_MSGNO,), True)):
        session = identified(Role.ACCEPTOR, *faults)
        assert [type(e) for e in received(session, encode_message("MSG", 2, ECHO))] == [
            MessageReceived
        ]
        session.reply(2, ECHO)
        again = received(session, encode_message("MSG", 2, ECHO))
        assert (
            isinstance(again[0], Closed)
            if closes
            else [type(e) for e in again] == [MessageReceived]
        )


def test_msg_before_host_id_reply_and_client_no_wait_for_host_id():
    from reference_impl.ripplehost.frame import FrameParser

    acceptor = RippleSession(
        Role.ACCEPTOR, "b.example", faults=frozenset({Fault.MSG_BEFORE_HOST_ID_REPLY})
    )
    acceptor.receive_data(encode_message("MSG", 0, HOST_ID))
    assert [(f.type, f.msgno) for f in FrameParser().receive_data(acceptor.data_to_send())] == [
        ("MSG", 1),
        ("RPY", 0),
    ]
    initiator = RippleSession(
        Role.INITIATOR, "b.example", faults=frozenset({Fault.CLIENT_NO_WAIT_FOR_HOST_ID})
    )
    initiator.start()
    assert initiator.send_message({"type": "ping"}) == 2 and not initiator.identified
    plain = RippleSession(Role.INITIATOR, "b.example")
    plain.start()
    try:
        plain.send_message({"type": "ping"})
    except RuntimeError:
        pass
    else:
        raise AssertionError("without the fault the initiator waits for the host-id RPY")


def test_strictness_faults_take_what_the_session_refuses():
    """split-header-on-whitespace, int-parse-numbers, accept-bare-lf-trailer,
    accept-trailing-content (docs/strictness-ripplehost.md): the session closes
    on each input without them; with each, it serves the MSG as a lenient
    reader would, and still closes on the inputs the other faults are for."""
    ping = encode_body({"type": "ping"})
    size = str(len(ping)).encode()
    inputs = {
        Fault.SPLIT_HEADER_ON_WHITESPACE: [
            b"MSG 1.0 2 . " + size + b" \r\n" + ping + b"END\r\n",
            b"MSG 1.0 2  . " + size + b"\r\n" + ping + b"END\r\n",
        ],
        Fault.INT_PARSE_NUMBERS: [
            b"MSG 1.0 02 . " + size + b"\r\n" + ping + b"END\r\n",
            b"MSG 1.0 2 . 0" + size + b"\r\n" + ping + b"END\r\n",
            b"MSG 1.0 2 . +" + size + b"\r\n" + ping + b"END\r\n",
        ],
        Fault.ACCEPT_BARE_LF_TRAILER: [b"MSG 1.0 2 . " + size + b"\r\n" + ping + b"END\n"],
        Fault.ACCEPT_TRAILING_CONTENT: [
            encode_frame(Frame("MSG", "1.0", 2, False, ping + b"{}")),
            encode_frame(Frame("MSG", "1.0", 2, False, ping + b"x")),
        ],
    }
    # Each followed by a valid ping, as the suite sends them: the next frame
    # completes a trailer a reader may still be waiting for.
    after = encode_message("MSG", 4, {"type": "ping"})
    inputs = {fault: [data + after for data in datas] for fault, datas in inputs.items()}
    for fault, datas in inputs.items():
        for data in datas:
            strict = identified(Role.ACCEPTOR)
            events = received(strict, data)
            assert isinstance(events[-1], Closed) and strict.data_to_send() == b"", data
            lenient = identified(Role.ACCEPTOR, fault)
            events = received(lenient, data)
            assert not lenient.closed and [type(e) for e in events] == [MessageReceived] * 2
            assert events[0].message.msgno == 2, (fault, data)
            for other, other_datas in inputs.items():
                if other is not fault:
                    session = identified(Role.ACCEPTOR, fault)
                    assert isinstance(received(session, other_datas[0])[-1], Closed), (fault, other)
    # Under int-parse-numbers a negative size is still no size.
    negative = b"MSG 1.0 2 . -" + size + b"\r\n" + ping + b"END\r\n"
    assert isinstance(
        received(identified(Role.ACCEPTOR, Fault.INT_PARSE_NUMBERS), negative)[-1], Closed
    )


def test_answer_other_version_and_err_type_is_code_change_only_answers():
    for faults, version, err_type in (
        ((), "1.0", "error"),
        ((Fault.ANSWER_OTHER_VERSION,), "1.1", "error"),
        ((Fault.ERR_TYPE_IS_CODE,), "1.0", "unsupported-version"),
    ):
        session = identified(Role.ACCEPTOR, *faults)
        [event] = received(session, encode_message("MSG", 2, ECHO))
        session.reply(event.message.msgno, ECHO)
        [answer] = MessageReader().receive_data(session.data_to_send())
        assert (answer.type, answer.version, answer.body) == ("RPY", version, ECHO)
        received(session, encode_message("MSG", 4, ECHO, version="9.9"))
        [err] = MessageReader().receive_data(session.data_to_send())
        assert (err.type, err.version, err.body["type"], err.body["error"]) == (
            "ERR",
            version,
            err_type,
            "unsupported-version",
        )
    # The host-id RPY keeps the version in use under answer-other-version.
    session = RippleSession(
        Role.ACCEPTOR, "b.example", faults=frozenset({Fault.ANSWER_OTHER_VERSION})
    )
    received(session, encode_message("MSG", 0, HOST_ID))
    [reply] = MessageReader().receive_data(session.data_to_send())
    assert (reply.type, reply.version, reply.body["type"]) == ("RPY", "1.0", "host-id")


def test_accept_rpy_and_err_takes_the_err_as_the_answer():
    def with_own_msg(*faults) -> tuple[RippleSession, int]:
        session = identified(Role.ACCEPTOR, *faults)
        msgno = session.send_message({"type": "ping"})
        session.data_to_send()
        return session, msgno

    session, msgno = with_own_msg()
    rpy_chunk = encode_message("RPY", msgno, {"type": "pong", "pad": "x" * 20}, chunk_size=8)
    first_chunk = rpy_chunk[: rpy_chunk.index(b"END\r\n") + 5]
    err = encode_message("ERR", msgno, {"type": "error", "error": "x", "message": "y"})
    assert received(session, first_chunk) == []
    assert isinstance(received(session, err)[-1], Closed)
    faulty, msgno = with_own_msg(Fault.ACCEPT_RPY_AND_ERR)
    received(faulty, first_chunk)
    events = received(faulty, err)
    assert not faulty.closed and events and events[-1].message.type == "ERR"


def test_long_hostname_faults_name_254_characters_in_the_host_id_only():
    acceptor = RippleSession(Role.ACCEPTOR, "b.example", faults=frozenset({Fault.LONG_HOSTNAME}))
    received(acceptor, encode_message("MSG", 0, HOST_ID))
    [reply] = MessageReader().receive_data(acceptor.data_to_send())
    assert (reply.type, reply.body["type"], len(reply.body["hostname"])) == ("RPY", "host-id", 254)
    initiator = RippleSession(
        Role.INITIATOR, "b.example", faults=frozenset({Fault.CLIENT_LONG_HOSTNAME})
    )
    initiator.start()
    [opening] = MessageReader().receive_data(initiator.data_to_send())
    assert (opening.type, opening.body["type"], len(opening.body["hostname"])) == (
        "MSG",
        "host-id",
        254,
    )
    assert all(len(label) <= 63 for label in opening.body["hostname"].split("."))


def test_echo_rpy_size_one_short_breaks_only_the_rpy_to_an_echo():
    """echo-rpy-size-one-short (the server grammar case's fault): the RPY to
    an echo MSG, in the middle of a session, says one content byte fewer
    than it carries, so a reader finds no END where size puts it; the
    host-id RPY, other RPYs and ERRs stay frames of the grammar."""
    from reference_impl.ripplehost.frame import FrameError, FrameParser

    plain = identified(Role.ACCEPTOR)
    [event] = received(plain, encode_message("MSG", 2, ECHO))
    plain.reply(event.message.msgno, ECHO)
    [answer] = MessageReader().receive_data(plain.data_to_send())
    assert (answer.type, answer.body) == ("RPY", ECHO)
    session = RippleSession(
        Role.ACCEPTOR, "b.example", faults=frozenset({Fault.ECHO_RPY_SIZE_ONE_SHORT})
    )
    received(session, encode_message("MSG", 0, HOST_ID))
    [reply] = MessageReader().receive_data(session.data_to_send())
    assert (reply.type, reply.body["type"]) == ("RPY", "host-id")
    [event] = received(session, encode_message("MSG", 2, {"type": "ping"}))
    session.reply(event.message.msgno, {"type": "pong"})
    received(session, encode_message("MSG", 4, ECHO, version="9.9"))
    assert [(m.type, m.msgno) for m in MessageReader().receive_data(session.data_to_send())] == [
        ("RPY", 2),
        ("ERR", 4),
    ]
    [event] = received(session, encode_message("MSG", 6, ECHO))
    session.reply(event.message.msgno, ECHO, chunk_size=16)
    data = session.data_to_send()
    content = encode_body(ECHO)
    assert data.startswith(b"RPY 1.0 6 * 15\r\n" + content[:16] + b"END\r\n")
    try:
        FrameParser().receive_data(data)
    except FrameError as exc:
        assert exc.reason == "missing END trailer" and exc.data.startswith(b"RPY 1.0 6 * 15\r\n")
    else:
        raise AssertionError("the RPY to an echo parsed under echo-rpy-size-one-short")


def test_client_msg_header_trailing_space_breaks_only_msgs_after_the_host_id():
    """client-msg-header-trailing-space (the client grammar case's fault):
    after the host-id exchange, the initiator's MSGs end their header line
    with a space; its host-id MSG and its answers stay frames of the
    grammar."""
    from reference_impl.ripplehost.frame import FrameError, FrameParser

    session = RippleSession(
        Role.INITIATOR, "b.example", faults=frozenset({Fault.CLIENT_MSG_HEADER_TRAILING_SPACE})
    )
    session.start()
    [opening] = MessageReader().receive_data(session.data_to_send())
    assert (opening.type, opening.msgno, opening.body["type"]) == ("MSG", 0, "host-id")
    received(session, encode_message("RPY", 0, {"type": "host-id", "hostname": "a.example"}))
    assert session.identified
    [event] = received(session, encode_message("MSG", 1, ECHO))
    session.reply(event.message.msgno, ECHO)
    [answer] = MessageReader().receive_data(session.data_to_send())
    assert (answer.type, answer.msgno, answer.body) == ("RPY", 1, ECHO)
    assert session.send_message({"type": "ping"}) == 2
    data = session.data_to_send()
    size = len(encode_body({"type": "ping"}))
    assert data.startswith(b"MSG 1.0 2 . %d \r\n" % size)
    try:
        FrameParser().receive_data(data)
    except FrameError as exc:
        assert exc.reason == "fields not separated by single spaces"
    else:
        raise AssertionError("the initiator's MSG parsed under client-msg-header-trailing-space")
    plain = identified(Role.INITIATOR)
    plain.send_message({"type": "ping"})
    [ping] = MessageReader().receive_data(plain.data_to_send())
    assert (ping.type, ping.msgno) == ("MSG", 2)

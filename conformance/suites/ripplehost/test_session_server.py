"""Target as server (the acceptor): host identification and message numbers
(Ripple SCTP binding, "Host Identification", "Host Messages"; the profile,
docs/ripplehost-profile.md, sections 4 and 5)."""

from __future__ import annotations

from conformance.core.requirements import not_applicable, requirement
from reference_impl.ripplehost.frame import message_frames

from .conftest import identified
from .peer import (
    HARNESS_HOSTNAME,
    HOST_ID_TYPE,
    error_body_problem,
    expect_close,
    probe_body,
    summary,
)
from .prerequisites import HOST_ID
from .prerequisites import IDENTIFIED

BINDING = "Ripple SCTP binding"
HOST_IDENTIFICATION = f"{BINDING}, Host Identification"
HOST_MESSAGES = f"{BINDING}, Host Messages"
PARITY = (
    f'{HOST_MESSAGES} ("The host that initiated the association must use only even-numbered msgnos and the '
    'host that received the association must use only odd-numbered msgnos")'
)
SAME_MSGNO = (
    f'{HOST_MESSAGES} ("For RPY and ERR types, msgno must be identical to the original MSG")'
)
UNIQUE = (
    f'{HOST_MESSAGES} ("The msgno must be unique among MSG-type messages in the session ... that have not yet '
    'received a complete response")'
)
UNUSED_ACCEPTOR_MSGNO = 2147483647
"""The highest msgno (profile section 2), odd: an acceptor numbering its own
MSGs upwards does not reach it in a case's lifetime."""
CLOSE = (
    f'{BINDING}, Node Messages ("If a received frame does not meet either the host or node message format, the '
    'association must be immediately closed"; profile section 5: msgno rules are part of the format)'
)
PROFILE_DOC = "docs/ripplehost-profile.md"
MSGNO_CLOSE = (
    "close at once, no answer (the profile reads the msgno rules as part of the frame format the "
    "text's close rule names, after RFC 3080 2.2.1.1)"
)


@requirement(
    HOST_ID,
    "MUST",
    f'{HOST_IDENTIFICATION} ("Upon receiving a host-id message, the accepting host must reply with its own '
    "host-id message\"; profile section 4: an RPY of the host-id MSG's msgno)",
    errata=["RIPPLEHOST-E3"],
    basis="plain-words",
)
async def test_replies_with_host_id(open_peer):
    peer = await open_peer("host-id")
    answer = await peer.exchange_host_ids(msgno=0)
    problem = identified(answer)
    assert problem is None, (
        f"the acceptor must reply to the host-id MSG with its own host-id message: {problem}"
    )


@requirement(
    "ripplehost.hostid.server.sends-nothing-before-host-id-reply",
    "MUST",
    f'{HOST_IDENTIFICATION} ("Upon receiving a host-id message, the accepting host must reply with its own '
    'host-id message"; profile section 4: the acceptor sends nothing before that RPY)',
    depends=[HOST_ID],
    errata=["RIPPLEHOST-E3"],
    basis=f"profile: section 4, the acceptor sends nothing before its host-id RPY (an initiator "
    f"closes on a MSG of the acceptor that comes first), {PROFILE_DOC}",
)
async def test_sends_nothing_before_host_id_reply(open_peer):
    peer = await open_peer("nothing before the host-id RPY")
    await peer.send_message(
        "MSG", 0, {"type": HOST_ID_TYPE, "hostname": HARNESS_HOSTNAME}, "the initiator's host-id"
    )
    # The acceptor's MSGs are kept, not answered: the initiator does not know
    # whom it talks to before the host-id RPY, so none may come before it.
    answer = await peer.answer_to(0, "the acceptor's answer to the host-id MSG", serve=False)
    assert not peer.pending_msgs, (
        f"the acceptor sent {len(peer.pending_msgs)} MSG(s) of its own before its host-id RPY "
        f"({'; '.join(summary(m) for m in peer.pending_msgs)}); it must send nothing before that RPY "
        f"(then: {summary(answer)})"
    )


@requirement(
    "ripplehost.msgno.server.reply-carries-msgno",
    "MUST",
    SAME_MSGNO,
    depends=[HOST_ID],
    basis="plain-words",
)
async def test_reply_carries_msgno(identified_peer):
    peer = await identified_peer("answers carry the MSG's msgno")
    # Two MSGs in flight with unrelated msgnos: the answers are matched by
    # their echoed token, so a target counting its own answers, or answering
    # the wrong MSG, shows.
    sent = {}
    for msgno in (42, 1000):
        body = probe_body(f"msgno-{msgno}")
        sent[body["data"]] = msgno
        await peer.send_message("MSG", msgno, body, f"an echo MSG with msgno {msgno}")
    answers = []
    for _ in range(len(sent) + 20):  # bounded: MSGs of the target's own are answered and skipped
        if len(answers) == len(sent):
            break
        message = await peer.next_message("the answers to two echo MSGs (msgnos 42 and 1000)")
        if message.type == "MSG":
            await peer.answer_target_msg(message)
        else:
            answers.append(message)
    assert len(answers) == len(sent), (
        f"no two answers among {len(sent) + 20} messages of the target"
    )
    for answer in answers:
        data = answer.body.get("data")
        assert data in sent, (
            f"an answer that echoes neither MSG (the profile's echo returns the same body): "
            f"{summary(answer)}"
        )
        assert answer.msgno == sent[data], (
            f"the answer to the MSG with msgno {sent[data]} carries msgno "
            f"{answer.msgno}: {summary(answer)}"
        )


async def ping_me(peer, count: int, *, answer: bool) -> list:
    """Asks the acceptor for COUNT MSGs of its own (ping-me) and reads until
    their RPY and at least COUNT of its MSGs came (at most COUNT + 20
    messages: a target flooding MSGs fails); answers each of its MSGs if
    ANSWER. Returns the acceptor's MSGs."""
    msgno = peer.new_msgno()
    await peer.send_message(
        "MSG",
        msgno,
        {"type": "ping-me", "count": count},
        f"asking the acceptor for {count} MSGs of its own (profile section 7)",
    )
    own = []
    answered = False
    for _ in range(count + 20):  # bounded: a target flooding MSGs fails below
        if len(own) >= count and answered:
            break
        message = await peer.next_message(f"the RPY to ping-me and the acceptor's {count} MSGs")
        if message.type == "MSG":
            own.append(message)
            if answer:
                await peer.answer_target_msg(message)
        else:
            assert message.msgno == msgno and message.type == "RPY", (
                f"ping-me must be answered with an RPY of msgno {msgno}: {summary(message)}"
            )
            answered = True
    assert answered and len(own) >= count, (
        f"no RPY to ping-me and {count} MSGs of the acceptor among "
        f"{count + 20} messages (got {len(own)} MSGs)"
    )
    return own


@requirement(
    "ripplehost.msgno.server.uses-odd-msgnos",
    "MUST",
    PARITY,
    needs=["ping-me"],
    depends=IDENTIFIED,
    basis="plain-words",
)
async def test_uses_odd_msgnos(identified_peer):
    peer = await identified_peer("the acceptor's own MSGs")
    await ping_me(peer, 4, answer=True)
    frames = [frame for frame in peer.received_frames if frame.type == "MSG"]
    wrong = [frame.msgno for frame in frames if frame.msgno % 2 != 1]
    assert not wrong, (
        f"the acceptor must use only odd msgnos; its MSG frames carried "
        f"{[frame.msgno for frame in frames]} (even: {wrong})"
    )


@requirement(
    "ripplehost.msgno.server.unique-outstanding-msgnos",
    "MUST",
    UNIQUE,
    needs=["ping-me"],
    depends=IDENTIFIED,
    basis="plain-words",
)
async def test_unique_outstanding_msgnos(identified_peer):
    peer = await identified_peer("the acceptor's own MSGs, left unanswered")
    # None of the acceptor's MSGs is answered, so all are outstanding together
    # (its unprompted MSGs too, if it sends any).
    own = await ping_me(peer, 4, answer=False)
    msgnos = [message.msgno for message in own]
    assert len(set(msgnos)) == len(msgnos), (
        f"{len(msgnos)} MSGs of the acceptor awaiting their answers at once must have distinct msgnos; they "
        f"carried {msgnos}"
    )


@requirement(
    "ripplehost.msgno.server.closes-on-wrong-parity",
    "MUST",
    f"{PARITY}; {CLOSE}",
    depends=IDENTIFIED,
    basis=f"profile: section 5, a MSG whose msgno has the sender's wrong parity: {MSGNO_CLOSE}, "
    f"{PROFILE_DOC}",
)
async def test_closes_on_wrong_parity(identified_peer):
    peer = await identified_peer("a MSG with the acceptor's parity")
    await peer.send_message(
        "MSG", 7, {"type": "ping"}, "a MSG of the initiator with the odd msgno 7"
    )
    await expect_close(peer, "a MSG of the initiator with an odd msgno", silent=True)


@requirement(
    "ripplehost.msgno.server.closes-on-reused-msgno",
    "MUST",
    f"{UNIQUE}; {CLOSE}",
    needs=["hold"],
    depends=IDENTIFIED,
    basis=f"profile: section 5, a MSG reusing the msgno of the peer's MSG still awaiting its answer: "
    f"{MSGNO_CLOSE}, {PROFILE_DOC}",
)
async def test_closes_on_reused_msgno(identified_peer):
    peer = await identified_peer("a reused outstanding msgno")
    # First a reuse the rule allows: msgno 2 again once its MSG is answered.
    # A node closing on every reused msgno would pass the close below alone.
    for attempt in (
        "a ping with msgno 2",
        "a second ping with msgno 2, after the first was answered",
    ):
        await peer.send_message("MSG", 2, {"type": "ping"}, attempt)
        answer = await peer.answer_to(2, f"the answer to {attempt}")
        assert answer.type == "RPY", (
            f"{attempt} must be served: a msgno is unique only among MSGs awaiting their answers: "
            f"{summary(answer)}"
        )
    # The hold outlasts every window of the case, so the first MSG is still
    # awaiting its answer when the second one reuses its msgno.
    hold = min(30, max(5, round(3 * peer.conn.deadline)))
    await peer.send_message(
        "MSG",
        2,
        {"type": "hold", "seconds": hold},
        f"a MSG the acceptor answers only after {hold} s (profile section 7)",
    )
    early = [
        answer
        for answer in await peer.answers_within(min(0.5, peer.conn.deadline / 2))
        if answer.msgno == 2
    ]
    if early:
        not_applicable(
            f"the target answered the hold MSG at once ({summary(early[0])}), so no MSG of the "
            "harness stays outstanding and a reuse cannot be shown"
        )
    await peer.send_message(
        "MSG", 2, {"type": "ping"}, "a second MSG reusing msgno 2 while the first awaits its answer"
    )
    # No answer may cross here: the hold's RPY is due only after every window of the case.
    await expect_close(
        peer,
        "a MSG reusing the msgno of a MSG still awaiting its answer",
        silent=True,
        crossing=set(),
    )


@requirement(
    "ripplehost.msgno.server.closes-on-reply-to-unknown-msgno",
    "MUST",
    f"{SAME_MSGNO}; {CLOSE}",
    depends=IDENTIFIED,
    basis=f"profile: section 5, an RPY or ERR whose msgno is none of our MSGs awaiting an answer: "
    f"{MSGNO_CLOSE}, {PROFILE_DOC}",
)
async def test_closes_on_reply_to_unknown_msgno(identified_peer):
    for kind, body in (
        ("RPY", {"type": "pong"}),
        ("ERR", {"type": "error", "error": "conformance", "message": "an ERR for no MSG"}),
    ):
        peer = await identified_peer(f"an {kind} for no MSG")
        # Past any msgno the acceptor has used, or will soon: its own MSGs
        # (odd msgnos, sent at any moment after the host-id) count upwards.
        msgno = UNUSED_ACCEPTOR_MSGNO
        await peer.send_message(
            kind, msgno, body, f"an {kind} with msgno {msgno}, for which the acceptor sent no MSG"
        )
        await expect_close(peer, f"an {kind} whose msgno names no outstanding MSG", silent=True)


@requirement(
    "ripplehost.hostid.server.refuses-msg-before-host-id",
    "SHOULD",
    f'{HOST_IDENTIFICATION} ("Upon starting a session and negotiating TLS, the initiating host must send a '
    'host-id message"; profile section 4: any other first MSG gets ERR host-id-required, then the '
    "association closes)",
    depends=IDENTIFIED,
    errata=["RIPPLEHOST-E3"],
    basis=f"profile: section 4, an acceptor whose first complete MSG is not a host-id answers it with "
    f"ERR host-id-required and closes (a response of the profile's, SHOULD as erratum RIPPLEHOST-E3 "
    f"says), {PROFILE_DOC}",
)
async def test_refuses_msg_before_host_id(open_peer):
    peer = await open_peer("a MSG before the host-id")
    await peer.send_message(
        "MSG", 0, probe_body("before-host-id"), "an echo MSG where the host-id MSG is due"
    )
    answer = await peer.answer_to(0, "the answer to a MSG sent before the host-id")
    assert answer.type == "ERR", (
        f"a MSG before the host-id should be refused with ERR host-id-required (profile section 4), not served: "
        f"{summary(answer)}"
    )
    problem = error_body_problem(answer, "host-id-required")
    assert problem is None, problem
    await expect_close(peer, "its ERR host-id-required", silent=False)


@requirement(
    "ripplehost.msgno.server.closes-on-rpy-and-err-for-one-msgno",
    "MUST",
    f"{SAME_MSGNO}; {CLOSE}",
    needs=["ping-me"],
    depends=IDENTIFIED,
    basis=f"profile: section 5, an RPY and an ERR in progress for one msgno (one reply per MSG): "
    f"{MSGNO_CLOSE}, {PROFILE_DOC}",
)
async def test_closes_on_rpy_and_err_for_one_msgno(identified_peer):
    peer = await identified_peer("an RPY and an ERR for one MSG of the acceptor")
    own = (await ping_me(peer, 1, answer=False))[0]
    # The first chunk of an RPY, then a whole ERR, for the one MSG: each alone
    # is a valid answer, so only a node that tells them apart closes.
    await peer.send_frames(
        message_frames("RPY", own.msgno, {"type": "ok", "echo": own.body}, chunk_size=8)[:1],
        f"the first chunk of an RPY to the acceptor's MSG {own.msgno} (more '*')",
    )
    await peer.send_message(
        "ERR",
        own.msgno,
        {"type": "error", "error": "conformance", "message": "a second reply to one MSG"},
        f"an ERR to the same MSG {own.msgno} while the RPY is in progress",
    )
    await expect_close(
        peer, f"an RPY and an ERR in progress for the acceptor's msgno {own.msgno}", silent=True
    )

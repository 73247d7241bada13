"""Target as client (the initiator): the harness listens, launches the
target's client command pointed at it, and plays the acceptor (Ripple SCTP
binding, "Host Identification", "Host Messages", "Node Messages"; the specs
README on the END trailer; the profile, docs/ripplehost-profile.md, sections
2, 4 and 5). The malformed frames are the server cases' (malformed.py)."""

from __future__ import annotations

from conformance.core.node_grammar import exchange_cut_short, grammar_violation_in
from conformance.core.requirements import blocked, requirement
from conformance.core.transport import DeadlineExceeded
from reference_impl.ripplehost.frame import VERSION, message_frames

from .conftest import DEFAULT_CLIENT_MESSAGES
from .malformed import (
    BINDING,
    CLOSE,
    CLOSE_SILENTLY,
    FRAME_GRAMMAR,
    GRAMMAR_BASIS,
    HOST_MESSAGES,
    MISSING_END_BASIS,
    NUMBER,
    NUMBER_BASIS,
    PROFILE_DOC,
    SILENT_BASIS,
    SIZE,
    TRAILER,
    WRONG_SIZE_BASIS,
    malformed_headers,
    missing_end_frames,
    non_canonical_numbers,
    wrong_size_frames,
)
from .peer import (
    HARNESS_HOSTNAME,
    HOST_ID_TYPE,
    RipplePeer,
    expect_close,
    hostname_problem,
    other_versions,
    probe_body,
    summary,
)
from .prerequisites import (
    CLIENT_CLOSES_ON_MALFORMED,
    CLIENT_CLOSES_SILENTLY,
    CLIENT_GRAMMAR,
    CLIENT_HOST_ID,
    CLIENT_REPLY_MSGNO,
)

MAX_MESSAGES = len(DEFAULT_CLIENT_MESSAGES) + 20
"""Messages read while waiting for the initiator's answers: its own MSGs
(it was given three) may come first; a flood beyond this fails the case."""
PARITY = f'{HOST_MESSAGES} ("The host that initiated the association must use only even-numbered msgnos")'
OWN, NEXT = 3, 5
"""The msgnos of a forged frame and of the valid ping after it: the harness is
the acceptor here, whose msgnos are odd (an even one would be closed on for
its parity, whatever else is wrong with the frame)."""


async def answer_host_id(peer: RipplePeer) -> None:
    """The acceptor's part of the exchange: the first message must be the
    host-id MSG (its own case judges that); it is answered with the
    harness's host-id in an RPY of its msgno."""
    first = await peer.next_message("the initiator's host-id MSG")
    assert first.type == "MSG" and first.body.get("type") == HOST_ID_TYPE, (
        f"the initiator's first message must be its host-id MSG: {summary(first)}"
    )
    await peer.send_message(
        "RPY",
        first.msgno,
        {"type": HOST_ID_TYPE, "hostname": HARNESS_HOSTNAME},
        "the acceptor's host-id",
    )


async def own_msgs(peer: RipplePeer, count: int) -> list:
    """The initiator's next ``count`` MSGs, left unanswered (an initiator may
    close once its MSGs are answered)."""
    messages = []
    while len(messages) < count:
        message = await peer.next_message(
            f"the initiator's MSGs ({len(messages)} of {count} so far)"
        )
        assert message.type == "MSG", f"expected the initiator's MSGs, got {summary(message)}"
        messages.append(message)
    return messages


async def expect_close_on_forged_frame(
    launched_client, what: str, data: bytes, note: str, *, silent: bool
) -> None:
    """Launch the initiator, exchange host-ids, read its MSGs and leave them
    unanswered (a correct initiator has every reason to stay, except the
    forged frame), send ``data``; the initiator must close within the read
    deadline, with ``silent``, without sending a byte first. One launch per
    forged frame: the association ends with it."""
    async with launched_client() as client:
        peer = await client.accept()
        await answer_host_id(peer)
        await own_msgs(peer, len(DEFAULT_CLIENT_MESSAGES))
        await peer.send_raw(data, note)
        await expect_close(peer, what, silent=silent)


@requirement(
    CLIENT_HOST_ID,
    "MUST",
    f'{BINDING}, Host Identification ("Upon starting a session and negotiating TLS, the initiating host '
    'must send a host-id message")',
    role="client",
    errata=["RIPPLEHOST-E3"],
    basis="plain-words",
)
async def test_client_sends_host_id_first(launched_client):
    async with launched_client() as client:
        peer = await client.accept()
        first = await peer.next_message("the initiator's first message")
        assert first.type == "MSG", (
            f"the initiator's first message must be a MSG (its host-id): {summary(first)}"
        )
        assert first.body.get("type") == HOST_ID_TYPE, (
            f"the initiator's first message must be a host-id message, not {first.body.get('type')!r}: "
            f"{summary(first)}"
        )
        hostname = first.body.get("hostname")
        assert isinstance(hostname, str) and hostname, (
            f"the host-id must carry a hostname string: {summary(first)}"
        )
        problem = hostname_problem(hostname)
        assert problem is None, f"{problem}: {summary(first)}"
        assert not first.is_node, (
            f"the host-id must come in a host frame (profile section 4): {summary(first)}"
        )


@requirement(
    "ripplehost.hostid.client.waits-for-host-id-reply",
    "MUST",
    f'{BINDING}, Host Identification ("Upon starting a session and negotiating TLS, the initiating host '
    'must send a host-id message"; profile section 4: the initiator sends no other MSG before the RPY '
    "arrives)",
    role="client",
    depends=[CLIENT_HOST_ID],
    errata=["RIPPLEHOST-E3"],
    basis=f"profile: section 4, the initiator sends no other MSG before the acceptor's host-id RPY "
    f"arrives (it cannot know whom it talks to before), {PROFILE_DOC}",
)
async def test_client_waits_for_host_id_reply(launched_client, deadline):
    async with launched_client() as client:
        peer = await client.accept()
        first = await peer.next_message("the initiator's host-id MSG")
        assert first.type == "MSG" and first.body.get("type") == HOST_ID_TYPE, (
            f"the initiator's first message must be its host-id MSG: {summary(first)}"
        )
        # The RPY is held back for a while: an initiator that sends its other
        # MSGs without waiting for it shows them here (answered at once, it
        # could not be told from one that waits).
        window = min(1.0, deadline / 2)
        try:
            early = await peer.next_frame("nothing while the host-id RPY is held back", window)
        except DeadlineExceeded:
            early = None
        assert early is None, (
            f"with its host-id MSG unanswered for {window:g} s, the initiator sent {summary(early)}; it must send "
            "no other MSG before the acceptor's host-id RPY arrives (profile section 4)"
        )
        await peer.send_message(
            "RPY",
            first.msgno,
            {"type": HOST_ID_TYPE, "hostname": HARNESS_HOSTNAME},
            "the acceptor's host-id, held back",
        )
        # Its MSGs come after the RPY: the held-back window did hold something back.
        await own_msgs(peer, len(DEFAULT_CLIENT_MESSAGES))


@requirement(
    "ripplehost.msgno.client.uses-even-msgnos",
    "MUST",
    PARITY,
    role="client",
    depends=[CLIENT_HOST_ID],
    basis="plain-words",
)
async def test_client_uses_even_msgnos(launched_client):
    async with launched_client() as client:
        peer = await client.accept()
        await answer_host_id(peer)
        await own_msgs(peer, len(DEFAULT_CLIENT_MESSAGES))
        frames = [frame for frame in peer.received_frames if frame.type == "MSG"]
        odd = [frame.msgno for frame in frames if frame.msgno % 2]
        assert not odd, (
            f"the initiator must use only even msgnos; its MSG frames (host-id included) carried "
            f"{[frame.msgno for frame in frames]} (odd: {odd})"
        )


@requirement(
    "ripplehost.msgno.client.unique-outstanding-msgnos",
    "MUST",
    f'{HOST_MESSAGES} ("The msgno must be unique among MSG-type messages in the session ... that have not '
    'yet received a complete response")',
    role="client",
    depends=[CLIENT_HOST_ID],
    basis="plain-words",
)
async def test_client_unique_outstanding_msgnos(launched_client):
    async with launched_client() as client:
        peer = await client.accept()
        await answer_host_id(peer)
        # None of them is answered, so all are outstanding together.
        messages = await own_msgs(peer, len(DEFAULT_CLIENT_MESSAGES))
        msgnos = [message.msgno for message in messages]
        assert len(set(msgnos)) == len(msgnos), (
            f"{len(msgnos)} MSGs awaiting their answers at once must have distinct msgnos; they carried {msgnos}"
        )


@requirement(
    "ripplehost.msgno.client.reply-carries-msgno",
    "MUST",
    f'{HOST_MESSAGES} ("For RPY and ERR types, msgno must be identical to the original MSG")',
    role="client",
    depends=[CLIENT_HOST_ID],
    basis="plain-words",
)
async def test_client_reply_carries_msgno(launched_client):
    async with launched_client() as client:
        peer = await client.accept()
        await answer_host_id(peer)
        # The acceptor's own msgnos are odd; two in flight, matched by their echoed tokens.
        sent = {}
        for msgno in (1, 77):
            body = probe_body(f"msgno-{msgno}")
            sent[body["data"]] = msgno
            await peer.send_message(
                "MSG", msgno, body, f"an echo MSG of the acceptor with msgno {msgno}"
            )
        answers = []
        for _ in range(MAX_MESSAGES):
            if len(answers) == len(sent):
                break
            message = await peer.next_message(
                "the initiator's answers to two echo MSGs (msgnos 1 and 77)"
            )
            if message.type != "MSG":  # the initiator's own MSGs: left unanswered, so that it stays
                answers.append(message)
        assert len(answers) == len(sent), (
            f"over {MAX_MESSAGES} messages without the initiator's two answers"
        )
        for answer in answers:
            data = answer.body.get("data")
            assert data in sent, f"an answer that echoes neither MSG: {summary(answer)}"
            assert answer.msgno == sent[data], (
                f"the answer to the MSG with msgno {sent[data]} carries msgno {answer.msgno}: {summary(answer)}"
            )


@requirement(
    CLIENT_CLOSES_ON_MALFORMED,
    "MUST",
    CLOSE,
    role="client",
    depends=[CLIENT_HOST_ID],
    basis="plain-words",
)
async def test_client_closes_on_malformed_header(launched_client):
    for rule, data in malformed_headers(OWN, NEXT):
        await expect_close_on_forged_frame(
            launched_client,
            f"a frame with {rule}",
            data,
            f"a frame with {rule}, then a valid ping",
            silent=False,
        )


@requirement(
    CLIENT_CLOSES_SILENTLY,
    "MUST",
    CLOSE_SILENTLY,
    role="client",
    depends=[CLIENT_HOST_ID, CLIENT_CLOSES_ON_MALFORMED],
    basis=SILENT_BASIS,
)
async def test_client_closes_silently_on_malformed_header(launched_client):
    for rule, data in malformed_headers(OWN, NEXT):
        await expect_close_on_forged_frame(
            launched_client,
            f"a frame with {rule}",
            data,
            f"a frame with {rule}, then a valid ping",
            silent=True,
        )


@requirement(
    "ripplehost.frame.client.closes-on-non-canonical-number",
    "MUST",
    f"{NUMBER}; {CLOSE}",
    role="client",
    depends=[CLIENT_HOST_ID, CLIENT_CLOSES_ON_MALFORMED],
    basis=NUMBER_BASIS,
)
async def test_client_closes_on_non_canonical_number(launched_client):
    for rule, data in non_canonical_numbers(OWN, NEXT):
        await expect_close_on_forged_frame(
            launched_client,
            f"a frame with {rule}",
            data,
            f"a ping MSG with {rule}, then a valid ping",
            silent=False,
        )


@requirement(
    "ripplehost.frame.client.closes-on-missing-end",
    "MUST",
    f"{TRAILER}; {CLOSE}",
    role="client",
    depends=[CLIENT_HOST_ID, CLIENT_CLOSES_SILENTLY],
    errata=["RIPPLEHOST-E1"],
    basis=MISSING_END_BASIS,
)
async def test_client_closes_on_missing_end(launched_client):
    for rule, data in missing_end_frames(OWN, NEXT):
        await expect_close_on_forged_frame(
            launched_client,
            f"a frame with {rule}",
            data,
            f"an echo MSG of the right size with {rule}, then a valid ping",
            silent=True,
        )


@requirement(
    "ripplehost.frame.client.closes-on-wrong-size",
    "MUST",
    f"{SIZE}; {CLOSE}",
    role="client",
    depends=[CLIENT_HOST_ID, CLIENT_CLOSES_SILENTLY],
    errata=["RIPPLEHOST-E1"],
    basis=WRONG_SIZE_BASIS,
)
async def test_client_closes_on_wrong_size(launched_client):
    for rule, data in wrong_size_frames(OWN, NEXT):
        await expect_close_on_forged_frame(
            launched_client,
            f"a frame with {rule}",
            data,
            f"an echo MSG with {rule} (END not where size puts it), then a valid ping",
            silent=True,
        )


@requirement(
    "ripplehost.chunk.client.reassembles-chunked",
    "MUST",
    f'{HOST_MESSAGES} ("If more is ... it signifies there are more frames in the message; if it is ... '
    'this is the final frame")',
    role="client",
    depends=[CLIENT_HOST_ID, CLIENT_REPLY_MSGNO],
    basis="profile: section 3, a message is the content of its frames joined in order, the more flag "
    f"saying whether another frame follows (the text's meaning of the flag), {PROFILE_DOC}",
)
async def test_client_reassembles_chunked(launched_client):
    async with launched_client() as client:
        peer = await client.accept()
        await answer_host_id(peer)
        body = probe_body("chunked-" + "0123456789" * 30)
        frames = message_frames("MSG", 5, body, chunk_size=64)
        await peer.send_frames(frames, f"an echo MSG of the acceptor in {len(frames)} frames")
        for _ in range(MAX_MESSAGES):
            message = await peer.next_message(
                f"the initiator's answer to an echo MSG sent in {len(frames)} frames"
            )
            if message.type != "MSG":  # the initiator's own MSGs stay unanswered, so that it stays
                break
        else:
            raise AssertionError(
                f"over {MAX_MESSAGES} MSGs of the initiator and no answer to the harness's MSG"
            )
        assert message.msgno == 5 and message.type == "RPY" and message.body == body, (
            f"the {len(frames)} frames must be reassembled into one message, answered by the echo of its whole "
            f"body; got {summary(message)}"
        )


@requirement(
    "ripplehost.message.client.speaks-version-in-use",
    "MUST",
    f'{HOST_MESSAGES} ("The version indicates the Ripple protocol version"; profile section 6: '
    "every frame of an association carries the version its host-id exchange used)",
    role="client",
    depends=[CLIENT_HOST_ID, CLIENT_REPLY_MSGNO],
    basis="wire-format: version, the Ripple protocol version a frame is written in: an association "
    "speaks the version of its host-id exchange, so a frame labelled with another claims a "
    "protocol the peer did not ask for",
)
async def test_client_speaks_version_in_use(launched_client):
    async with launched_client() as client:
        peer = await client.accept()
        # The harness answers the host-id in its own version, 1.0: the
        # association speaks it from then on, whatever the initiator opened with.
        await answer_host_id(peer)
        await own_msgs(peer, len(DEFAULT_CLIENT_MESSAGES))
        body = probe_body("version")
        await peer.send_message("MSG", 5, body, f"an echo MSG of the acceptor, version {VERSION}")
        for _ in range(MAX_MESSAGES):
            answer = await peer.next_message("the initiator's answer to an echo MSG")
            if answer.type != "MSG":  # the initiator's own MSGs stay unanswered, so that it stays
                break
        else:
            raise AssertionError(
                f"over {MAX_MESSAGES} MSGs of the initiator and no answer to the harness's MSG"
            )
        wrong = other_versions(peer.received_frames, VERSION)
        assert not wrong, (
            f"every frame of an association speaking version {VERSION} (the harness's host-id "
            f"RPY and MSGs) must carry it; these carry another: {'; '.join(wrong)} (the answer: "
            f"{summary(answer)})"
        )


async def client_frames_shown(peer: RipplePeer) -> None:
    """Each kind of frame an initiator of the profile sends (sections 4, 6
    and 7): its host-id MSG and its own MSGs (the three it was given, left
    unanswered so that it stays); RPYs to the acceptor's echo MSGs, in one
    frame, in frames of 16 bytes ('*' ... '.') and in a node frame; the ERR
    to a MSG of no known type. Which answers come, and when, is the other
    cases' rules: an association the initiator ends early, or answers
    otherwise, shows less (exchange_cut_short)."""
    with exchange_cut_short(peer.trace):
        await answer_host_id(peer)
        asked = {
            1: (probe_body("grammar"), {}),
            3: ({**probe_body("grammar-chunked-" + "g" * 40), "chunk": 16}, {}),
            5: (probe_body("grammar-node"), {"to_user": "alice", "from_user": "bob"}),
            7: ({"type": "conformance-no-such-type"}, {}),
        }
        for msgno, (body, users) in asked.items():
            await peer.send_message(
                "MSG", msgno, body, f"a MSG of the acceptor ({body['type']})", **users
            )
        answered: set[int] = set()
        own = 0
        for _ in range(MAX_MESSAGES):
            if answered >= set(asked) and own >= len(DEFAULT_CLIENT_MESSAGES):
                break
            message = await peer.next_message(
                f"the initiator's answers to the acceptor's MSGs {sorted(asked)} and its own "
                f"{len(DEFAULT_CLIENT_MESSAGES)} MSGs"
            )
            if message.type == "MSG":
                own += 1
            else:
                answered.add(message.msgno)


@requirement(
    CLIENT_GRAMMAR,
    "MUST",
    FRAME_GRAMMAR,
    role="client",
    basis=f"{GRAMMAR_BASIS} that every frame an initiator sends has",
    grammar=True,
)
async def test_client_sends_well_formed_frames(launched_client, node_grammar):
    """Every frame the initiator sent in this run, in every case's traffic,
    is a frame of the grammar: the violations the other cases met (each of
    them blocked by this case) and those of its own exchange, which shows
    each kind of frame an initiator sends (client_frames_shown)."""
    with node_grammar.judging():
        async with launched_client() as client:
            try:
                peer = await client.accept()
            except AssertionError as exc:
                if grammar_violation_in(exc) is not None:
                    raise
                blocked(
                    CLIENT_HOST_ID,
                    "failed within this case",
                    "the initiator made no connection the harness could accept, so it sent no "
                    f"frame: {str(exc).splitlines()[0]}",
                )
            await client_frames_shown(peer)
            if not peer.received_frames:
                blocked(
                    CLIENT_HOST_ID,
                    "failed within this case",
                    "the initiator's connection carried no frame (not even its host-id MSG), so "
                    "there was nothing to judge",
                )

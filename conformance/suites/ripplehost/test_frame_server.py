"""Target as server (the acceptor): frames, chunking, node frames and unknown
messages (Ripple SCTP binding, "Host Messages", "Node Messages"; the specs
README on the END trailer; the profile, docs/ripplehost-profile.md,
sections 2, 3 and 6)."""

from __future__ import annotations

from conformance.core.node_grammar import exchange_cut_short
from conformance.core.requirements import blocked, requirement
from reference_impl.ripplehost.frame import VERSION, Frame, encode_body, message_frames

from .malformed import (
    CLOSE,
    CLOSE_SILENTLY,
    FRAME_GRAMMAR,
    GRAMMAR_BASIS,
    HOST_MESSAGES,
    MISSING_END_BASIS,
    NODE_MESSAGES,
    NUMBER,
    NUMBER_BASIS,
    PROFILE_DOC,
    README,
    SILENT_BASIS,
    SIZE,
    TRAILER,
    WRONG_SIZE_BASIS,
    content_not_json_object_frames,
    malformed_headers,
    missing_end_frames,
    non_canonical_numbers,
    wrong_size_frames,
)
from .peer import (
    RipplePeer,
    error_body_problem,
    expect_close,
    other_versions,
    probe_body,
    summary,
)
from .prerequisites import CLOSES_ON_MALFORMED, HOST_ID, IDENTIFIED, REASSEMBLES, SERVER_GRAMMAR

MORE = (
    f'{HOST_MESSAGES} ("If more is ... it signifies there are more frames in the message; if it is ... this is '
    'the final frame")'
)
CLOSES_SILENTLY = "ripplehost.frame.server.closes-silently-on-malformed-header"
REASSEMBLY_BASIS = (
    "profile: section 3, a message is the content of its frames joined in order, the more flag "
    f"saying whether another frame follows (the text's meaning of the flag), {PROFILE_DOC}"
)
OWN, NEXT = 2, 4
"""The msgnos of a forged frame and of the valid ping after it: the harness is
the initiator here, whose msgnos are even."""


@requirement(
    "ripplehost.frame.server.closes-on-malformed-header",
    "MUST",
    CLOSE,
    depends=IDENTIFIED,
    basis="plain-words",
)
async def test_closes_on_malformed_header(identified_peer):
    for rule, data in malformed_headers(OWN, NEXT):
        peer = await identified_peer(rule)
        await peer.send_raw(data, f"a frame with {rule}, then a valid ping")
        await expect_close(peer, f"a frame with {rule}", silent=False)


@requirement(
    CLOSES_SILENTLY,
    "MUST",
    CLOSE_SILENTLY,
    depends=[*IDENTIFIED, CLOSES_ON_MALFORMED],
    basis=SILENT_BASIS,
)
async def test_closes_silently_on_malformed_header(identified_peer):
    for rule, data in malformed_headers(OWN, NEXT):
        peer = await identified_peer(rule)
        await peer.send_raw(data, f"a frame with {rule}, then a valid ping")
        await expect_close(peer, f"a frame with {rule}", silent=True)


@requirement(
    "ripplehost.frame.server.closes-on-non-canonical-number",
    "MUST",
    f"{NUMBER}; {CLOSE}",
    depends=[*IDENTIFIED, CLOSES_ON_MALFORMED],
    basis=NUMBER_BASIS,
)
async def test_closes_on_non_canonical_number(identified_peer):
    for rule, data in non_canonical_numbers(OWN, NEXT):
        peer = await identified_peer(rule)
        await peer.send_raw(data, f"a ping MSG with {rule}, then a valid ping")
        await expect_close(peer, f"a frame with {rule}", silent=False)


@requirement(
    "ripplehost.frame.server.closes-on-missing-end",
    "MUST",
    f"{TRAILER}; {CLOSE}",
    depends=[*IDENTIFIED, CLOSES_SILENTLY],
    errata=["RIPPLEHOST-E1"],
    basis=MISSING_END_BASIS,
)
async def test_closes_on_missing_end(identified_peer):
    for rule, data in missing_end_frames(OWN, NEXT):
        peer = await identified_peer(rule)
        await peer.send_raw(data, f"an echo MSG of the right size with {rule}, then a valid ping")
        await expect_close(peer, f"a frame with {rule}", silent=True)


@requirement(
    "ripplehost.frame.server.closes-on-wrong-size",
    "MUST",
    f"{SIZE}; {CLOSE}",
    depends=[*IDENTIFIED, CLOSES_SILENTLY],
    errata=["RIPPLEHOST-E1"],
    basis=WRONG_SIZE_BASIS,
)
async def test_closes_on_wrong_size(identified_peer):
    for rule, data in wrong_size_frames(OWN, NEXT):
        peer = await identified_peer(rule)
        await peer.send_raw(
            data, f"an echo MSG with {rule} (END not where size puts it), then a valid ping"
        )
        await expect_close(peer, f"a frame with {rule}", silent=True)


@requirement(
    "ripplehost.chunk.server.reassembles-chunked",
    "MUST",
    MORE,
    depends=IDENTIFIED,
    basis=REASSEMBLY_BASIS,
)
async def test_reassembles_chunked(identified_peer):
    peer = await identified_peer("a chunked message")
    body = probe_body("chunked-" + "0123456789" * 30)
    msgno = peer.new_msgno()
    frames = message_frames("MSG", msgno, body, chunk_size=64)
    await peer.send_frames(frames, f"an echo MSG in {len(frames)} frames ('*' ... '*' '.')")
    answer = await peer.answer_to(msgno, f"the answer to an echo MSG sent in {len(frames)} frames")
    assert answer.type == "RPY" and answer.body == body, (
        f"the {len(frames)} frames must be reassembled into one message, answered by the echo of its whole body; "
        f"got {summary(answer)}"
    )


@requirement(
    "ripplehost.chunk.server.reassembles-interleaved",
    "MUST",
    f'{HOST_MESSAGES} ("This allows a host to chunk messages into discrete bits in order to interleave '
    'messages in the same stream")',
    depends=[*IDENTIFIED, REASSEMBLES],
    basis=f"profile: section 3, frames are keyed by type and msgno and the chunks of several messages "
    f"may interleave in any order (the text: the more flag lets a host interleave messages, and the "
    f"TCP binding needs it), {PROFILE_DOC}",
)
async def test_reassembles_interleaved(identified_peer):
    peer = await identified_peer("interleaved chunked messages")
    first, second, single = peer.new_msgno(), peer.new_msgno(), peer.new_msgno()
    bodies = {first: probe_body("first-" + "a" * 150), second: probe_body("second-" + "b" * 190)}
    chunked = {
        msgno: message_frames("MSG", msgno, body, chunk_size=48) for msgno, body in bodies.items()
    }
    order: list[Frame] = []
    for index in range(max(len(frames) for frames in chunked.values())):
        for msgno in (first, second):
            if index < len(chunked[msgno]):
                order.append(chunked[msgno][index])
        if index == 1:
            # A whole message between the chunks of the two others.
            order += message_frames("MSG", single, {"type": "ping"})
    await peer.send_frames(order, "interleaved frames")
    answers = {}
    for _ in range(3 + 20):  # bounded: MSGs of the target's own are answered and skipped
        if len(answers) == 3:
            break
        answer = await peer.next_message(
            f"the answers to MSGs {first} and {second} (chunked, interleaved) and "
            f"{single} (a ping between their chunks)"
        )
        if answer.type == "MSG":
            await peer.answer_target_msg(answer)
            continue
        assert answer.msgno in (first, second, single) and answer.msgno not in answers, (
            f"an answer with an unexpected or repeated msgno: {summary(answer)}"
        )
        answers[answer.msgno] = answer
    assert len(answers) == 3, (
        f"not the three answers among {3 + 20} messages of the target: {sorted(answers)}"
    )
    for msgno, body in bodies.items():
        answer = answers[msgno]
        assert answer.type == "RPY" and answer.body == body, (
            f"MSG {msgno}, sent in chunks interleaved with another message's, must be reassembled from its own "
            f"chunks and echoed whole; got {summary(answer)}"
        )
    assert answers[single].type == "RPY", (
        f"the ping between the chunks must be answered: {summary(answers[single])}"
    )


@requirement(
    "ripplehost.chunk.server.counts-crlf-before-end",
    "MUST",
    f"{README} (\"size counts every byte between the header's CRLF and END, so a line break written before "
    'END is content and is counted")',
    depends=IDENTIFIED,
    errata=["RIPPLEHOST-E1"],
    basis="erratum: RIPPLEHOST-E1 a frame is exactly size content bytes then END CRLF, so a CRLF "
    "written before END is content and counted in size (the README's second example, which the "
    "erratum names this case for)",
)
async def test_counts_crlf_before_end(identified_peer):
    peer = await identified_peer("CRLF before END")
    body = probe_body("crlf")
    msgno = peer.new_msgno()
    frame = Frame("MSG", VERSION, msgno, False, encode_body(body) + b"\r\n")
    await peer.send_frames([frame], "an echo MSG whose content ends in CRLF, counted in size")
    answer = await peer.answer_to(msgno, "the answer to an echo MSG whose content ends in CRLF")
    assert answer.type == "RPY" and answer.body == body, (
        f"the CRLF before END is content (counted in size); the MSG must be served: {summary(answer)}"
    )


@requirement(
    "ripplehost.node.server.accepts-node-frame",
    "SHOULD",
    f'{NODE_MESSAGES} ("Node messages are sent in frames of the following format"; "(type) (version) '
    '(msgno) (more) (size) (to-user) (from-user)(CRLF)")',
    depends=IDENTIFIED,
    basis="inference: the text defines the node frame as one of the two formats hosts exchange (its "
    "close rule names both), so a host that does not serve a MSG in a valid node frame cannot carry "
    "node messages; no sentence says a host must serve one",
)
async def test_accepts_node_frame(identified_peer):
    peer = await identified_peer("a node frame")
    body = probe_body("node")
    msgno, answer = await peer.request(
        body,
        "an echo MSG in a node frame (to-user alice, from-user bob)",
        to_user="alice",
        from_user="bob",
    )
    assert answer.type == "RPY" and answer.body == body, (
        f"a MSG in a node frame must be accepted and served like one in a host frame: {summary(answer)}"
    )


@requirement(
    "ripplehost.node.server.answer-swaps-users",
    "SHOULD",
    f'{NODE_MESSAGES} ("The to-user and from-user fields need only specify usernames"; profile section '
    "6: answers to a node frame are node frames with the users swapped)",
    depends=[*IDENTIFIED, "ripplehost.node.server.accepts-node-frame"],
    basis=f"profile: section 6, answers to a node frame are node frames with to-user and from-user "
    f"swapped, {PROFILE_DOC}",
)
async def test_answer_swaps_users(identified_peer):
    peer = await identified_peer("the users of an answer to a node frame")
    msgno, answer = await peer.request(
        probe_body("users"),
        "an echo MSG to-user alice from-user bob",
        to_user="alice",
        from_user="bob",
    )
    assert (answer.to_user, answer.from_user) == ("bob", "alice"), (
        f"the answer to a node frame from bob to alice should be a node frame to bob from alice: {summary(answer)}"
    )


@requirement(
    "ripplehost.message.server.err-for-unknown-type",
    "SHOULD",
    f'{HOST_MESSAGES} ("Message types MSG, RPY, and ERR correspond to the Ripple message types message, '
    'reply, and error"; profile section 6: a MSG of a type the host does not serve gets ERR unknown-type)',
    depends=IDENTIFIED,
    basis=f"profile: section 6, a MSG of a type the host does not serve is answered with ERR "
    f"unknown-type and the association stays, {PROFILE_DOC}",
)
async def test_err_for_unknown_type(identified_peer):
    peer = await identified_peer("a MSG of an unknown type")
    msgno, answer = await peer.request(
        {"type": "conformance-no-such-type"}, "a MSG of a type no host serves"
    )
    assert answer.type == "ERR", (
        f"a MSG of a type the host does not serve should get an ERR: {summary(answer)}"
    )
    problem = error_body_problem(answer, "unknown-type")
    assert problem is None, problem
    assert answer.body.get("message-type") == "conformance-no-such-type", (
        f"the ERR unknown-type should name the type of the MSG it refuses, "
        f"'conformance-no-such-type', in message-type (profile section 6): {summary(answer)}"
    )
    _, probe = await peer.request(probe_body("after-unknown"), "an echo MSG after the ERR")
    assert probe.type == "RPY", (
        f"the association should stay usable after the ERR: {summary(probe)}"
    )


@requirement(
    "ripplehost.message.server.err-for-unsupported-version",
    "SHOULD",
    f'{HOST_MESSAGES} ("The version indicates the Ripple protocol version"; profile section 6: a MSG of '
    "a version the host does not speak gets ERR unsupported-version)",
    depends=IDENTIFIED,
    basis=f"profile: section 6, a MSG whose version is not the host's gets ERR unsupported-version, "
    f"{PROFILE_DOC}",
)
async def test_err_for_unsupported_version(identified_peer):
    peer = await identified_peer("a MSG of another protocol version")
    msgno, answer = await peer.request(
        probe_body("version"), "an echo MSG of version 9.9", version="9.9"
    )
    assert answer.type == "ERR", (
        f"a MSG of a version the host does not speak should get an ERR, not be served: {summary(answer)}"
    )
    problem = error_body_problem(answer, "unsupported-version")
    assert problem is None, problem
    supported = answer.body.get("supported")
    assert isinstance(supported, list) and VERSION in supported, (
        f"the ERR unsupported-version should list the versions the host speaks in supported "
        f"(profile section 6), {VERSION} among them (the host-id exchange used it): {summary(answer)}"
    )
    _, probe = await peer.request(
        probe_body("after-version"), f"an echo MSG of version {VERSION} after the ERR"
    )
    assert probe.type == "RPY", (
        f"the association should stay usable after the ERR: {summary(probe)}"
    )


@requirement(
    "ripplehost.message.server.speaks-version-in-use",
    "MUST",
    f'{HOST_MESSAGES} ("The version indicates the Ripple protocol version"; profile section 6: '
    "every frame of an association carries the version its host-id exchange used)",
    depends=IDENTIFIED,
    basis="wire-format: version, the Ripple protocol version a frame is written in: an association "
    "speaks the version of its host-id exchange, so an answer labelled with another claims a "
    "protocol the peer did not ask for",
)
async def test_speaks_version_in_use(identified_peer):
    peer = await identified_peer("the version of the acceptor's frames")
    # An RPY in one frame, one in chunks and an ERR: every kind of frame the
    # acceptor writes in answer, each read for its version, not its presence.
    _, single = await peer.request(probe_body("version-single"), "an echo MSG")
    chunked_body = {**probe_body("version-chunked-" + "v" * 60), "chunk": 16}
    _, chunked = await peer.request(
        chunked_body, "an echo MSG asking for its RPY in frames of 16 bytes (profile section 7)"
    )
    _, refused = await peer.request({"type": "conformance-no-such-type"}, "a MSG of no known type")
    wrong = other_versions(peer.received_frames, VERSION)
    assert not wrong, (
        f"every frame of an association speaking version {VERSION} (its host-id exchange, every "
        f"MSG of the harness) must carry it; these carry another: {'; '.join(wrong)} (answers: "
        f"{summary(single)}; {summary(chunked)}; {summary(refused)})"
    )


@requirement(
    "ripplehost.message.server.closes-on-content-not-json-object",
    "MUST",
    f'{README} ("Messages carried in frames are JSON objects with at least a type"; profile '
    f"section 3: content that is not such an object breaks the message format); {CLOSE}",
    depends=[*IDENTIFIED, CLOSES_ON_MALFORMED],
    basis="profile: section 3, a message whose content is not one JSON object with a type breaks "
    f"the message format and the association is closed, as for a malformed frame, {PROFILE_DOC}",
)
async def test_closes_on_content_not_json_object(identified_peer):
    for rule, data in content_not_json_object_frames(OWN, NEXT):
        peer = await identified_peer(rule)
        await peer.send_raw(data, f"a MSG whose content is {rule}, then a valid ping")
        await expect_close(peer, f"a MSG whose content is {rule}", silent=False)


OWN_MSGS_SHOWN = 2
"""The acceptor's own MSGs the server grammar case asks for (ping-me)."""


async def shown_frames(open_peer, capabilities: tuple[str, ...]) -> list[RipplePeer]:
    """Each kind of frame an acceptor of the profile sends (sections 4, 6
    and 7): the RPY to the host-id MSG; RPYs to echo MSGs, in one frame, in
    frames of 16 bytes ('*' ... '.') and in a node frame; the ERR to a MSG
    of no known type; with the capability ping-me, MSGs of its own
    (answered); and on a second association the ERR host-id-required to a
    MSG sent before the host-id. Which answers come, and when, is the other
    cases' rules: an association the target ends early, or answers
    otherwise, shows less (exchange_cut_short)."""
    peer = await open_peer("each kind of frame the acceptor sends")
    with exchange_cut_short(peer.trace):
        await peer.exchange_host_ids()
        await peer.request(probe_body("grammar"), "an echo MSG")
        await peer.request(
            {**probe_body("grammar-chunked-" + "g" * 40), "chunk": 16},
            "an echo MSG asking for its RPY in frames of 16 bytes (profile section 7)",
        )
        await peer.request(
            probe_body("grammar-node"),
            "an echo MSG in a node frame (to-user alice, from-user bob)",
            to_user="alice",
            from_user="bob",
        )
        await peer.request({"type": "conformance-no-such-type"}, "a MSG of no known type")
        if "ping-me" in capabilities:
            await peer.request(
                {"type": "ping-me", "count": OWN_MSGS_SHOWN},
                f"asking the acceptor for {OWN_MSGS_SHOWN} MSGs of its own (profile section 7)",
            )
            own = 0
            for _ in range(OWN_MSGS_SHOWN + 20):  # bounded: its answers to ours are skipped
                if own == OWN_MSGS_SHOWN:
                    break
                message = await peer.next_message(f"the acceptor's {OWN_MSGS_SHOWN} own MSGs")
                if message.type == "MSG":
                    own += 1
                    await peer.answer_target_msg(message)
    refused = await open_peer("an ERR to a MSG before the host-id")
    with exchange_cut_short(refused.trace):
        await refused.send_message(
            "MSG", 0, probe_body("grammar-before-host-id"), "an echo MSG where the host-id is due"
        )
        await refused.answer_to(0, "the answer to a MSG sent before the host-id")
    return [peer, refused]


@requirement(
    SERVER_GRAMMAR,
    "MUST",
    FRAME_GRAMMAR,
    basis=f"{GRAMMAR_BASIS} that every frame an acceptor sends has",
    grammar=True,
)
async def test_sends_well_formed_frames(open_peer, target, node_grammar):
    """Every frame the acceptor sent in this run, in every case's traffic,
    is a frame of the grammar: the violations the other cases met (each of
    them blocked by this case) and those of its own exchange, which shows
    each kind of frame an acceptor sends (shown_frames)."""
    with node_grammar.judging():
        peers = await shown_frames(open_peer, tuple(target.target.capabilities))
        if not any(peer.received_frames for peer in peers):
            blocked(
                HOST_ID,
                "failed within this case",
                "the acceptor sent no frame on either association (not even its host-id RPY), "
                "so there was nothing to judge",
            )

"""The Ripple host reference node's faults: ``python -m reference_impl.ripplehost
serve|connect --fault NAME`` (repeatable). Each breaks one rule of the Ripple
host protocol (sctp-binding.txt) or of the project's profile
(docs/ripplehost-profile.md) on purpose; ``cases`` are the conformance cases
that must catch it (see reference_impl/faults.py and docs/mutation.md).

The case ids are the ones the ripplehost suite (conformance/suites/ripplehost/)
is to declare; the role in an id is the target's: "server" = the acceptor
(``serve``), "client" = the initiator (``connect``).

The sans-I/O session takes them as ``RippleSession(faults=...)``, the node
layer as ``RippleNode(faults=...)`` and ``run_initiator(faults=...)``.

Each fault is declared by what it changes (``changes``): at each named point
of :data:`POINTS` the session (or the node) computes the correct value and
hands it to :meth:`~reference_impl.faults.FaultPoints.apply`; the functions
below are what a faulty node does with it instead. The session and the node
hold no fault branch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..faults import FaultSpec, fault_enum
from .frame import MAX_MSGNO, Frame, FrameError, Reassembler, error_body, message_frames

POINTS: dict[str, str] = {
    # --- reading the peer's frames (session)
    "parser-options": (
        "the keyword arguments of the session's FrameParser (correct: its bounds; END required "
        "right after size bytes of content)"
    ),
    "reassembler-options": (
        "the keyword arguments of the session's Reassembler (correct: its bounds; a message's "
        "content is one JSON object and nothing after it)"
    ),
    "answer-msgno": (
        "which of our MSGs an incoming RPY or ERR frame answers (correct: the one of its msgno); "
        "context: outstanding (our MSGs awaiting their answers, msgno -> body, oldest first)"
    ),
    "frame-ignored": (
        "whether the session drops an incoming frame unread and keeps the association (correct: "
        "False); context: frame, outstanding"
    ),
    "frame-refusals": (
        "why the session closes the association on an incoming frame of valid grammar: "
        "(rule, reason) pairs in the order the rules are checked, the first one's reason given "
        "(correct: none for a frame it takes); context: frame, reassembler (the messages in "
        "progress)"
    ),
    "close-on-grammar-error": (
        "whether the session closes the association on a frame that breaks the grammar (correct: "
        "True; False: it drops what it buffered and reads on); context: error (the FrameError)"
    ),
    "grammar-error-answers": (
        "the frames the session sends after a frame that breaks the grammar, before it closes "
        "(correct: none, it closes silently); context: error, version"
    ),
    # --- the host-id exchange (session)
    "initiator-opening": (
        "the bodies of the MSGs the initiator opens the association with (correct: its host-id; "
        "with none, there is no exchange to wait for)"
    ),
    "may-send": (
        "whether the session may send a MSG of its own now (correct: once the host-id exchange "
        "is done); context: started (the initiator has opened the association)"
    ),
    "serve-before-host-id": (
        "whether the acceptor serves a MSG that comes before the initiator's host-id (correct: "
        "False, it answers ERR host-id-required and closes); context: message"
    ),
    "messages-before-host-id-reply": (
        "the bodies of the MSGs the acceptor sends right before its RPY to the initiator's "
        "host-id (correct: none)"
    ),
    "host-id-reply": (
        "the body of the acceptor's RPY to the initiator's host-id (correct: its own host-id; "
        "None: no RPY)"
    ),
    # --- messages (session)
    "own-parity": (
        "the parity of the session's own msgnos (correct: 0, even, for the initiator; 1, odd, "
        "for the acceptor)"
    ),
    "outgoing-frames": (
        "the frames of one message the session sends (MSG, RPY or ERR), before they are "
        "encoded (correct: the msgno of the MSG, or of the MSG answered; an answer to a node "
        "frame has the users swapped); context: identified (the host-id exchange is done), body"
    ),
    "outgoing-bytes": (
        "the bytes of one message's frames as written, after encoding (correct: each frame "
        "encoded by the codec, which writes only what the grammar reads); context: frames, "
        "identified, body"
    ),
    "version-accepted": (
        "whether the session serves a MSG of the peer's version (correct: its own version only); "
        "context: message"
    ),
    "release-answered-msgno": (
        "whether the peer may reuse a msgno once its MSG is answered (correct: True); context: "
        "msgno"
    ),
    # --- the message service (node)
    "service-answer": (
        "the node's answer to a MSG of the peer (node.Answer: RPY or ERR, body, chunk size, "
        "delay, pings; correct: node.answer_for(body)); context: body"
    ),
}
"""The fault points of the Ripple host session (reference_impl/ripplehost/
session.py) and node (node.py): name -> what the value is, and the context
that comes with it."""

ACCEPTOR_REUSED_MSGNO = 1
"""reuse-msgno: the msgno every MSG of the acceptor's own carries (its first)."""
INITIATOR_REUSED_MSGNO = 2
"""client-reuse-msgno: the msgno every MSG of the initiator carries after its host-id."""


# --------------------------------------------------------------------------- what the faults do


def lenient_trailer(options: dict[str, Any], **_: Any) -> dict[str, Any]:
    """accept-missing-end: any five bytes after the content are the trailer."""
    return {**options, "lenient_trailer": True}


def size_by_search(options: dict[str, Any], **_: Any) -> dict[str, Any]:
    """ignore-size: the content ends at the first END CRLF, whatever size says."""
    return {**options, "size_by_search": True}


def split_on_whitespace(options: dict[str, Any], **_: Any) -> dict[str, Any]:
    """split-header-on-whitespace: a header line is split on runs of spaces,
    so a space before its CRLF, or two between fields, is taken."""
    return {**options, "lenient_spaces": True}


def parse_numbers_as_int(options: dict[str, Any], **_: Any) -> dict[str, Any]:
    """int-parse-numbers, client-int-parse-numbers: msgno and size read by a
    general integer parser (a leading zero or a plus sign is taken)."""
    return {**options, "lenient_numbers": True}


def first_json_value(options: dict[str, Any], **_: Any) -> dict[str, Any]:
    """accept-trailing-content: a message is the first JSON value of its
    content, the bytes after it ignored."""
    return {**options, "first_value": True}


def trailer_as_line(options: dict[str, Any], **_: Any) -> dict[str, Any]:
    """accept-bare-lf-trailer: the trailer is the line END, ended by CRLF or a bare LF."""
    return {**options, "line_trailer": True}


OTHER_VERSION = "1.1"
"""answer-other-version: the version the faulty node writes in its answers."""


def answers_in_other_version(frames: list[Frame], *, body: Any, **_: Any) -> list[Frame]:
    """answer-other-version, client-answer-other-version: RPY and ERR frames
    carry version 1.1 (the host-id RPY keeps the version in use)."""
    if frames[0].type == "MSG" or (isinstance(body, dict) and body.get("type") == "host-id"):
        return frames
    return [frame._replace(version=OTHER_VERSION) for frame in frames]


def err_type_is_code(frames: list[Frame], *, body: Any, **_: Any) -> list[Frame]:
    """err-type-is-code: an ERR body's type is its code ({"type":"unknown-type",
    "error":"unknown-type",...}) instead of the profile's "error"."""
    if frames[0].type != "ERR" or not isinstance(body, dict) or "error" not in body:
        return frames
    first = frames[0]
    return message_frames(
        "ERR",
        first.msgno,
        {**body, "type": body["error"]},
        version=first.version,
        to_user=first.to_user,
        from_user=first.from_user,
        chunk_size=len(first.payload) if len(frames) > 1 else None,
    )


def _first_header_changed(data: bytes, change: Callable[[list[bytes]], list[bytes]]) -> bytes:
    """``data`` (the frames of one message) with the header line of its first
    frame split into its fields, changed, and joined again."""
    end = data.index(b"\r\n")
    return b" ".join(change(data[:end].split(b" "))) + data[end:]


def echo_rpy_size_one_short(data: bytes, *, frames: list[Frame], body: Any, **_: Any) -> bytes:
    """echo-rpy-size-one-short: the first frame of an RPY to an echo MSG
    says one content byte fewer than it carries, so its END is not where
    size puts it."""
    if frames[0].type != "RPY" or not isinstance(body, dict) or body.get("type") != "echo":
        return data

    def shorter(fields: list[bytes]) -> list[bytes]:
        return [*fields[:4], b"%d" % (int(fields[4]) - 1), *fields[5:]]

    return _first_header_changed(data, shorter)


def msg_header_trailing_space(
    data: bytes, *, frames: list[Frame], identified: bool, **_: Any
) -> bytes:
    """client-msg-header-trailing-space: after the host-id exchange, the
    first frame of each MSG has a space before its header line's CRLF (an
    empty last field, as a writer ending every field with a space makes)."""
    if frames[0].type != "MSG" or not identified:
        return data
    return _first_header_changed(data, lambda fields: [*fields, b""])


def other_parity(parity: int, **_: Any) -> int:
    return 1 - parity


def _with_msgno(frames: list[Frame], msgno: int) -> list[Frame]:
    return [frame._replace(msgno=msgno) for frame in frames]


def _msgs_after_host_id_carry(msgno: int) -> Callable[..., list[Frame]]:
    """A change giving every MSG sent after the host-id exchange ``msgno``."""

    def change(frames: list[Frame], *, identified: bool, **_: Any) -> list[Frame]:
        if frames[0].type == "MSG" and identified:
            return _with_msgno(frames, msgno)
        return frames

    change.__name__ = f"msgs_carry_{msgno}"
    return change


def take_answers_for_oldest(msgno: int, *, outstanding: dict[int, Any], **_: Any) -> int:
    """reuse-msgno: an answer to the reused msgno is taken for the oldest of
    our MSGs still awaiting one (each answer for one of them)."""
    if msgno == ACCEPTOR_REUSED_MSGNO and outstanding:
        return next(iter(outstanding))
    return msgno


def reply_msgno_plus_two(frames: list[Frame], *, body: Any, **_: Any) -> list[Frame]:
    """reply-wrong-msgno, client-reply-wrong-msgno: RPY and ERR carry the
    MSG's msgno + 2 (the host-id RPY keeps the right one)."""
    if frames[0].type == "MSG" or (isinstance(body, dict) and body.get("type") == "host-id"):
        return frames
    return _with_msgno(frames, (frames[0].msgno + 2) % (MAX_MSGNO + 1))


def answer_as_host(frames: list[Frame], **_: Any) -> list[Frame]:
    """node-answer-as-host: answers in host frames (no to-user, from-user)."""
    if frames[0].type == "MSG":
        return frames
    return [frame._replace(to_user=None, from_user=None) for frame in frames]


def ignore_unknown_reply(ignored: bool, *, frame: Frame, outstanding: dict[int, Any], **_: Any):
    """accept-unknown-reply: an RPY or ERR for no outstanding MSG is dropped."""
    return ignored or (frame.type != "MSG" and frame.msgno not in outstanding)


def _accepting(rule: str) -> Callable[..., list]:
    """A change that drops the refusal ``rule`` (the other rules still count)."""

    def change(refusals: list, **_: Any) -> list:
        return [refusal for refusal in refusals if refusal[0] != rule]

    change.__name__ = f"accept_{rule.replace('-', '_')}"
    return change


def _refusing(rule: str, what: str, test: Callable[[Frame], bool]) -> Callable[..., list]:
    """A change that refuses, before any other rule, a frame ``test`` holds for."""

    def change(refusals: list, *, frame: Frame, **_: Any) -> list:
        return [(rule, f"fault: refusing {what}"), *refusals] if test(frame) else refusals

    change.__name__ = f"refuse_{rule.replace('-', '_')}"
    return change


def _chunked(frame: Frame) -> bool:
    return frame.more


def _ends_in_crlf(frame: Frame) -> bool:
    """Content ending in CRLF: as if size excluded a line break before END."""
    return frame.payload.endswith(b"\r\n")


def _node_frame(frame: Frame) -> bool:
    return frame.is_node


refuse_chunked = _refusing("chunked", "a chunked frame", _chunked)
refuse_crlf_before_end = _refusing("crlf-before-end", "content ending in CRLF", _ends_in_crlf)
refuse_node_frames = _refusing("node-frame", "a node frame", _node_frame)


def refuse_interleaved(refusals: list, *, frame: Frame, reassembler: Reassembler, **_: Any):
    """no-interleave: a frame of another message while a chunked one is incomplete."""
    if reassembler.pending and not reassembler.in_progress(frame.type, frame.msgno):
        reason = "a frame of another message arrived while a chunked message was incomplete"
        return [*refusals, ("interleaved", reason)]
    return refusals


def stay_open(close: bool, **_: Any) -> bool:
    return False


def answer_malformed(frames: list[Frame], *, error: FrameError, version: str, **_: Any):
    """answer-malformed, client-answer-malformed: an ERR (msgno 0) before closing."""
    return [
        *frames,
        *message_frames("ERR", 0, error_body("malformed-frame", error.reason), version=version),
    ]


def no_host_id(bodies: list, **_: Any) -> list:
    """client-no-host-id: the initiator opens with nothing (and so waits for nothing)."""
    return []


def send_once_started(may_send: bool, *, started: bool, **_: Any) -> bool:
    """client-no-wait-for-host-id: MSGs go as soon as the host-id MSG is out."""
    return may_send or started


def serve_msg_before_host_id(serve: bool, *, message: Any, **_: Any) -> bool:
    """serve-before-host-id: a first MSG that is not a host-id is served."""
    return serve or message.body["type"] != "host-id"


LONG_HOSTNAME = ".".join(("h" * 63, "h" * 63, "h" * 63, "h" * 62))
"""long-hostname, client-long-hostname: 254 characters in labels of at most
63, one above a DNS name's 253 (profile section 4)."""


def long_hostname_reply(body: dict | None, **_: Any) -> dict | None:
    """long-hostname: the acceptor's host-id RPY names a 254-character hostname."""
    return None if body is None else {**body, "hostname": LONG_HOSTNAME}


def long_hostname_opening(bodies: list, **_: Any) -> list:
    """client-long-hostname: the initiator's host-id names a 254-character hostname."""
    return [
        {**body, "hostname": LONG_HOSTNAME} if body.get("type") == "host-id" else body
        for body in bodies
    ]


def ping_before_host_id_reply(bodies: list, **_: Any) -> list:
    return [*bodies, {"type": "ping"}]


def no_reply(body: dict | None, **_: Any) -> None:
    return None


def any_version(accepted: bool, **_: Any) -> bool:
    return True


def keep_answered_msgnos(release: bool, **_: Any) -> bool:
    """close-on-answered-msgno: a msgno stays taken after its MSG is answered,
    so any reuse of it closes the association."""
    return False


def ok_to_unknown_type(answer: Any, **_: Any) -> Any:
    """rpy-to-unknown-type: RPY {"type":"ok"} where the profile wants ERR unknown-type."""
    if answer.error and answer.body.get("error") == "unknown-type":
        return replace(answer, error=False, body={"type": "ok"})
    return answer


HOSTID_S = "ripplehost.hostid.server."
HOSTID_C = "ripplehost.hostid.client."
MSGNO_S = "ripplehost.msgno.server."
MSGNO_C = "ripplehost.msgno.client."
FRAME_S = "ripplehost.frame.server."
FRAME_C = "ripplehost.frame.client."
CHUNK_S = "ripplehost.chunk.server."
MESSAGE_S = "ripplehost.message.server."
MESSAGE_C = "ripplehost.message.client."
NODE_S = "ripplehost.node.server."
CHUNK_C = "ripplehost.chunk.client."

SPECS: tuple[FaultSpec, ...] = (
    # --- acceptor (serve)
    FaultSpec(
        "no-host-id-reply",
        "server",
        "never answer the initiator's host-id MSG (other MSGs are still served)",
        (HOSTID_S + "replies-with-host-id",),
        changes={"host-id-reply": no_reply},
    ),
    FaultSpec(
        "long-hostname",
        "server",
        "the acceptor's host-id RPY names a hostname of 254 characters (the profile allows 1..253)",
        (HOSTID_S + "replies-with-host-id",),
        changes={"host-id-reply": long_hostname_reply},
    ),
    FaultSpec(
        "even-msgnos",
        "server",
        "the acceptor numbers its own MSGs with even msgnos (the initiator's parity)",
        (MSGNO_S + "uses-odd-msgnos",),
        changes={"own-parity": other_parity},
    ),
    FaultSpec(
        "reply-wrong-msgno",
        "server",
        "RPY and ERR frames carry the MSG's msgno + 2 (the host-id reply keeps the right one)",
        (MSGNO_S + "reply-carries-msgno",),
        changes={"outgoing-frames": reply_msgno_plus_two},
    ),
    FaultSpec(
        "accept-wrong-parity",
        "server",
        "serve a MSG whose msgno has the acceptor's own (odd) parity instead of closing",
        (MSGNO_S + "closes-on-wrong-parity",),
        changes={"frame-refusals": _accepting("wrong-parity")},
    ),
    FaultSpec(
        "reuse-msgno",
        "server",
        "after the host-id exchange every MSG of the acceptor's own carries msgno 1, sent without waiting "
        "for answers (each answer to msgno 1 is taken for one of them)",
        (MSGNO_S + "unique-outstanding-msgnos",),
        changes={
            "outgoing-frames": _msgs_after_host_id_carry(ACCEPTOR_REUSED_MSGNO),
            "answer-msgno": take_answers_for_oldest,
        },
    ),
    FaultSpec(
        "accept-reused-msgno",
        "server",
        "serve a MSG that reuses the msgno of a MSG still awaiting its answer instead of closing",
        (MSGNO_S + "closes-on-reused-msgno",),
        changes={"frame-refusals": _accepting("reused-msgno")},
    ),
    FaultSpec(
        "close-on-answered-msgno",
        "server",
        "close the association on a MSG reusing any msgno the initiator used before, also one whose MSG "
        "was answered",
        (MSGNO_S + "closes-on-reused-msgno",),
        changes={"release-answered-msgno": keep_answered_msgnos},
    ),
    FaultSpec(
        "accept-rpy-and-err",
        "server",
        "take an ERR for a msgno whose RPY is in progress (and an RPY for one whose ERR is) as the "
        "answer instead of closing",
        (MSGNO_S + "closes-on-rpy-and-err-for-one-msgno",),
        changes={"frame-refusals": _accepting("rpy-and-err")},
    ),
    FaultSpec(
        "msg-before-host-id-reply",
        "server",
        'send a MSG {"type":"ping"} of the acceptor\'s own before the RPY to the initiator\'s host-id',
        (HOSTID_S + "sends-nothing-before-host-id-reply",),
        changes={"messages-before-host-id-reply": ping_before_host_id_reply},
    ),
    FaultSpec(
        "accept-unknown-reply",
        "server",
        "drop an RPY or ERR for a msgno with no outstanding MSG silently and keep the association",
        (MSGNO_S + "closes-on-reply-to-unknown-msgno",),
        changes={"frame-ignored": ignore_unknown_reply},
    ),
    FaultSpec(
        "answer-malformed",
        "server",
        "answer a frame that breaks the grammar with an ERR before closing",
        (FRAME_S + "closes-silently-on-malformed-header",),
        changes={"grammar-error-answers": answer_malformed},
    ),
    FaultSpec(
        "stay-open-on-malformed",
        "server",
        "after a frame that breaks the grammar, drop what is buffered and keep the association open",
        (FRAME_S + "closes-on-malformed-header",),
        changes={"close-on-grammar-error": stay_open},
    ),
    FaultSpec(
        "accept-missing-end",
        "server",
        "take any five bytes after the content as the trailer (a frame without END is served)",
        (FRAME_S + "closes-on-missing-end",),
        changes={"parser-options": lenient_trailer},
    ),
    FaultSpec(
        "ignore-size",
        "server",
        "end the content at the first END CRLF whatever size says (a wrong size is served)",
        (FRAME_S + "closes-on-wrong-size",),
        changes={"parser-options": size_by_search},
    ),
    FaultSpec(
        "split-header-on-whitespace",
        "server",
        "read a header line split on runs of spaces (a space before its CRLF, or two between fields, "
        "is taken)",
        (FRAME_S + "closes-on-malformed-header",),
        changes={"parser-options": split_on_whitespace},
    ),
    FaultSpec(
        "int-parse-numbers",
        "server",
        "read msgno and size with a general integer parser (02 and +15 are taken)",
        (FRAME_S + "closes-on-non-canonical-number",),
        changes={"parser-options": parse_numbers_as_int},
    ),
    FaultSpec(
        "accept-trailing-content",
        "server",
        "read a message as the first JSON value of its content and ignore the bytes after it (a "
        "JSON object followed by another is served)",
        (MESSAGE_S + "closes-on-content-not-json-object",),
        changes={"reassembler-options": first_json_value},
    ),
    FaultSpec(
        "accept-bare-lf-trailer",
        "server",
        "read the trailer as the line END, ended by CRLF or a bare LF (END LF is taken)",
        (FRAME_S + "closes-on-missing-end",),
        changes={"parser-options": trailer_as_line},
    ),
    FaultSpec(
        "answer-other-version",
        "server",
        "RPY and ERR frames carry version 1.1, not the version in use, 1.0 (the host-id RPY keeps "
        "1.0)",
        (MESSAGE_S + "speaks-version-in-use",),
        changes={"outgoing-frames": answers_in_other_version},
    ),
    FaultSpec(
        "echo-rpy-size-one-short",
        "server",
        "the first frame of each RPY to an echo MSG says one content byte fewer than it carries "
        "(END is not where size puts it), in the middle of a session",
        (FRAME_S + "sends-well-formed-frames",),
        changes={"outgoing-bytes": echo_rpy_size_one_short},
    ),
    FaultSpec(
        "err-type-is-code",
        "server",
        'ERR bodies carry their code as type ({"type":"unknown-type","error":"unknown-type",...}), '
        'not the profile\'s "error"',
        (
            MESSAGE_S + "err-for-unknown-type",
            MESSAGE_S + "err-for-unsupported-version",
            HOSTID_S + "refuses-msg-before-host-id",
        ),
        changes={"outgoing-frames": err_type_is_code},
    ),
    FaultSpec(
        "no-interleave",
        "server",
        "close the association when a frame of another message arrives while a chunked one is incomplete",
        (CHUNK_S + "reassembles-interleaved",),
        changes={"frame-refusals": refuse_interleaved},
    ),
    FaultSpec(
        "rpy-to-unknown-type",
        "server",
        'answer a MSG of a type the node does not know with RPY {"type":"ok"} instead of the '
        "profile's ERR",
        (MESSAGE_S + "err-for-unknown-type",),
        changes={"service-answer": ok_to_unknown_type},
    ),
    FaultSpec(
        "serve-before-host-id",
        "server",
        "serve a MSG that comes before the initiator's host-id instead of answering ERR host-id-required "
        "and closing",
        (HOSTID_S + "refuses-msg-before-host-id",),
        changes={"serve-before-host-id": serve_msg_before_host_id},
    ),
    FaultSpec(
        "serve-any-version",
        "server",
        "serve a MSG of any version instead of answering ERR unsupported-version",
        (MESSAGE_S + "err-for-unsupported-version",),
        changes={"version-accepted": any_version},
    ),
    FaultSpec(
        "refuse-chunked",
        "server",
        "close the association on a frame whose more flag is '*' (only single-frame messages are served)",
        (CHUNK_S + "reassembles-chunked",),
        changes={"frame-refusals": refuse_chunked},
    ),
    FaultSpec(
        "refuse-crlf-before-end",
        "server",
        "close the association on a frame whose content ends in CRLF (as if size excluded a line break "
        "before END)",
        (CHUNK_S + "counts-crlf-before-end",),
        changes={"frame-refusals": refuse_crlf_before_end},
    ),
    FaultSpec(
        "refuse-node-frames",
        "server",
        "close the association on a node frame (one with to-user and from-user)",
        (NODE_S + "accepts-node-frame",),
        changes={"frame-refusals": refuse_node_frames},
    ),
    FaultSpec(
        "node-answer-as-host",
        "server",
        "answer a MSG that came in a node frame with a host frame (no to-user and from-user)",
        (NODE_S + "answer-swaps-users",),
        changes={"outgoing-frames": answer_as_host},
    ),
    # --- initiator (connect)
    FaultSpec(
        "client-no-host-id",
        "client",
        "the initiator sends its messages without a host-id MSG first",
        (HOSTID_C + "sends-host-id-first",),
        changes={"initiator-opening": no_host_id},
    ),
    FaultSpec(
        "client-long-hostname",
        "client",
        "the initiator's host-id names a hostname of 254 characters (the profile allows 1..253)",
        (HOSTID_C + "sends-host-id-first",),
        changes={"initiator-opening": long_hostname_opening},
    ),
    FaultSpec(
        "client-no-wait-for-host-id",
        "client",
        "the initiator sends its other MSGs right after its host-id MSG, without waiting for the acceptor's "
        "host-id RPY",
        (HOSTID_C + "waits-for-host-id-reply",),
        changes={"may-send": send_once_started},
    ),
    FaultSpec(
        "client-odd-msgnos",
        "client",
        "the initiator numbers its MSGs (host-id included) with odd msgnos (the acceptor's parity)",
        (MSGNO_C + "uses-even-msgnos",),
        changes={"own-parity": other_parity},
    ),
    FaultSpec(
        "client-reuse-msgno",
        "client",
        "after the host-id exchange every MSG of the initiator carries msgno 2, sent without waiting "
        "for answers",
        (MSGNO_C + "unique-outstanding-msgnos",),
        changes={"outgoing-frames": _msgs_after_host_id_carry(INITIATOR_REUSED_MSGNO)},
    ),
    FaultSpec(
        "client-reply-wrong-msgno",
        "client",
        "the initiator's RPY and ERR frames carry the MSG's msgno + 2",
        (MSGNO_C + "reply-carries-msgno",),
        changes={"outgoing-frames": reply_msgno_plus_two},
    ),
    FaultSpec(
        "client-stay-open-on-malformed",
        "client",
        "the initiator drops a frame that breaks the grammar and keeps the association open",
        (FRAME_C + "closes-on-malformed-header",),
        changes={"close-on-grammar-error": stay_open},
    ),
    FaultSpec(
        "client-answer-malformed",
        "client",
        "the initiator answers a frame that breaks the grammar with an ERR before closing",
        (FRAME_C + "closes-silently-on-malformed-header",),
        changes={"grammar-error-answers": answer_malformed},
    ),
    FaultSpec(
        "client-accept-missing-end",
        "client",
        "the initiator takes any five bytes after the content as the trailer (a frame without END is served)",
        (FRAME_C + "closes-on-missing-end",),
        changes={"parser-options": lenient_trailer},
    ),
    FaultSpec(
        "client-ignore-size",
        "client",
        "the initiator ends the content at the first END CRLF whatever size says (a wrong size is served)",
        (FRAME_C + "closes-on-wrong-size",),
        changes={"parser-options": size_by_search},
    ),
    FaultSpec(
        "client-split-header-on-whitespace",
        "client",
        "the initiator reads a header line split on runs of spaces (a space before its CRLF, or two "
        "between fields, is taken)",
        (FRAME_C + "closes-on-malformed-header",),
        changes={"parser-options": split_on_whitespace},
    ),
    FaultSpec(
        "client-int-parse-numbers",
        "client",
        "the initiator reads msgno and size with a general integer parser (03 and +15 are taken)",
        (FRAME_C + "closes-on-non-canonical-number",),
        changes={"parser-options": parse_numbers_as_int},
    ),
    FaultSpec(
        "client-msg-header-trailing-space",
        "client",
        "after the host-id exchange, the header line of the initiator's MSGs ends with a space "
        "before its CRLF",
        (FRAME_C + "sends-well-formed-frames",),
        changes={"outgoing-bytes": msg_header_trailing_space},
    ),
    FaultSpec(
        "client-answer-other-version",
        "client",
        "the initiator's RPY and ERR frames carry version 1.1, not the version in use, 1.0",
        (MESSAGE_C + "speaks-version-in-use",),
        changes={"outgoing-frames": answers_in_other_version},
    ),
    FaultSpec(
        "client-refuse-chunked",
        "client",
        "the initiator closes the association on a frame whose more flag is '*'",
        (CHUNK_C + "reassembles-chunked",),
        changes={"frame-refusals": refuse_chunked},
    ),
)

Fault = fault_enum("Fault", SPECS)
"""One member per fault (``Fault.EVEN_MSGNOS`` is ``"even-msgnos"``)."""

REGISTRY: dict[str, FaultSpec] = {spec.name: spec for spec in SPECS}

NOT_ISOLABLE: dict[str, str] = {}
"""Cases whose rule cannot be broken without breaking other cases' rules too
(none so far)."""

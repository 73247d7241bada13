"""The harness's side of a Ripple host association, driven by the reference codec.

Cases use :class:`RipplePeer` to speak the host protocol the way a correct
host would (host-id exchange, MSGs with the harness's own msgno parity,
answers matched by msgno) and to put forged frames on the wire: frames
encoded by the sans-I/O codec (reference_impl/ripplehost/frame.py), then
chunked, interleaved or mutated byte by byte (``send_raw``). Every frame
sent is noted in the wire trace in decoded form beside its bytes, every
frame received too.

Frames from the target are read with the codec's :class:`FrameParser` under
the profile's bounds (docs/ripplehost-profile.md): a header line of at most
512 bytes, at most 65536 content bytes per frame (checked from the header,
before the content is buffered), 1 MiB per reassembled message, 32 messages
in progress. A target cannot make the harness buffer without end. A frame
that breaks the frame grammar is a NodeGrammarViolation of
``ripplehost.frame.<role>.sends-well-formed-frames`` (core/node_grammar.py):
that case fails for it, with the bytes, and the case that read it is blocked
by it. A message the profile cannot read (its joined content, the bounds on
reassembly) and a flood of frames fail the case that read them.
"""

from __future__ import annotations

import json
import secrets
from collections import deque
from typing import Any

from conformance.core import node_grammar
from conformance.core.transport import (
    Deadline,
    DeadlineExceeded,
    PeerClosed,
    ProtocolViolation,
    TcpConnection,
    short_hex,
    target_bytes,
)
from reference_impl.ripplehost.frame import (
    VERSION,
    Frame,
    FrameError,
    FrameParser,
    Message,
    Reassembler,
    encode_frame,
    message_frames,
)

from .prerequisites import CLIENT_GRAMMAR, SERVER_GRAMMAR

HOST_ID_TYPE = "host-id"
HARNESS_HOSTNAME = "conformance-harness.invalid"
"""The hostname the harness announces: ``.invalid`` (RFC 2606) can never
name a real host, so a target resolving it learns nothing and harms no one."""
INITIATOR, ACCEPTOR = "initiator", "acceptor"
PARITY = {INITIATOR: 0, ACCEPTOR: 1}
"""Host Messages: the host that initiated the association uses even msgnos,
the one that received it odd ones."""
MAX_FRAMES_WHILE_WAITING = 1000
"""Frames read while waiting for one particular message: a target sending
more than this in between is flooding, not answering."""


def summary(item: Frame | Message) -> str:
    """A frame or message in one line for traces and failure messages."""
    if isinstance(item, Frame):
        more = "*" if item.more else "."
        users = f" {item.to_user} {item.from_user}" if item.is_node else ""
        content = item.payload
        head = f"{item.type} {item.version} {item.msgno} {more} {len(content)}{users}"
    else:
        users = f" to-user {item.to_user} from-user {item.from_user}" if item.is_node else ""
        content = item.content
        head = f"{item.type} msgno {item.msgno} (version {item.version}, {item.frames} frame(s)){users}"
    shown = content[:160].decode("utf-8", "replace")
    return f"{head} {shown!r}" + (f"...(+{len(content) - 160} bytes)" if len(content) > 160 else "")


def body_bytes(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def probe_body(label: str = "probe") -> dict[str, Any]:
    """An echo request with a unique token, so that an answer can be told
    from an answer to any other message (the profile's ``echo`` type: the
    RPY carries the same ``data``)."""
    return {"type": "echo", "data": f"{label}-{secrets.token_hex(6)}"}


MAX_HOSTNAME_LENGTH = 253
"""The longest hostname (profile section 4): a DNS name's length in text
form, the text's hostname being "what comes after the @ in the user ID form"."""


def hostname_problem(hostname: str) -> str | None:
    """Why a host-id's hostname string breaks the profile's 1..253
    characters (section 4), or None; its value is read, not only its presence."""
    if len(hostname) > MAX_HOSTNAME_LENGTH:
        return (
            f"the host-id's hostname has {len(hostname)} characters, above the "
            f"{MAX_HOSTNAME_LENGTH} of a DNS name (profile section 4)"
        )
    return None


def error_body_problem(answer: Message, code: str) -> str | None:
    """Why an ERR's body is not the profile's (section 6)
    ``{"type":"error","error":CODE,"message":TEXT}`` with ``code``, or None:
    each value it fixes is checked, not only the code's presence."""
    body = answer.body
    if body.get("type") != "error":
        return f"the ERR body's type must be 'error', not {body.get('type')!r}: {summary(answer)}"
    if body.get("error") != code:
        return f"the ERR should carry the profile's code {code}: {summary(answer)}"
    if not isinstance(body.get("message"), str):
        return f"the ERR body's message must be a string: {summary(answer)}"
    return None


def other_versions(frames: list[Frame], version: str) -> list[str]:
    """The frames among ``frames`` whose version is not ``version`` (the one
    in use), each in one line; empty when all carry it."""
    return [summary(frame) for frame in frames if frame.version != version]


def describe_bytes(data: bytes) -> str:
    """Bytes the target sent, as frames where they parse, else as hex."""
    if not data:
        return "nothing"
    parser = FrameParser()
    try:
        frames = parser.receive_data(data)
    except FrameError as exc:
        return f"bytes that break the grammar ({exc.reason}): {short_hex(data)}"
    shown = "; ".join(summary(frame) for frame in frames)
    if parser.buffered:
        shown += ("; " if shown else "") + f"{parser.buffered} byte(s) of an incomplete frame"
    return shown


class RipplePeer:
    """One association of the harness with the target. ``role`` is the
    harness's own: INITIATOR when the harness connected (target as server),
    ACCEPTOR when the target connected to the harness (target as client)."""

    def __init__(self, conn: TcpConnection, role: str) -> None:
        self.conn = conn
        self.role = role
        self.parser = FrameParser()
        self.parsed = 0
        """Bytes of the target's on this association before the parser's
        buffer (made into frames, or handed back by :meth:`await_close`):
        where the frame it completes next starts."""
        self.grammar_break: node_grammar.NodeGrammarViolation | None = None
        """The frame that broke the grammar (the parser reads nothing after it)."""
        self.reassembler = Reassembler()
        self._frames: deque[Frame] = deque()
        self._next_msgno = PARITY[role]
        self.received_frames: list[Frame] = []
        """Every frame the target sent on this association, in order (the
        cases about msgno parity look at all of them)."""
        self.peer_hostname: str | None = None
        self.pending_msgs: list[Message] = []
        """MSGs of the target read but not answered (``answer_to(serve=False)``)."""
        self.outstanding: set[int] = set()
        """msgnos of the harness's MSGs (sent with :meth:`send_message`) whose
        complete answer has not been read: their RPY or ERR may cross a
        forged frame on the wire, and so is never "sent in answer" to it."""

    @property
    def trace(self):
        return self.conn.trace

    # ---------------------------------------------------------------- sending

    def new_msgno(self) -> int:
        """The next msgno of the harness's own parity, never reused in an association."""
        msgno = self._next_msgno
        self._next_msgno += 2
        return msgno

    async def send_frames(self, frames: list[Frame], note: str = "") -> bytes:
        """Each frame in a write of its own, noted in decoded form."""
        sent = b""
        for frame in frames:
            data = encode_frame(frame)
            await self.conn.send(data, (note + ": " if note else "") + summary(frame))
            sent += data
        return sent

    async def send_message(
        self, type_: str, msgno: int, body: dict[str, Any] | bytes, note: str = "", **options: Any
    ) -> bytes:
        """One message as its frames (``chunk_size``, ``to_user``,
        ``from_user``, ``version`` as for ``message_frames``)."""
        options.setdefault("version", VERSION)
        if type_ == "MSG":
            self.outstanding.add(msgno)
        return await self.send_frames(message_frames(type_, msgno, body, **options), note)

    async def send_raw(self, data: bytes, note: str) -> bool:
        """Forged bytes, in one write; False when the target had already hung
        up (for negative cases a reset is an answer, not an error)."""
        return await self.conn.send_quietly(data, note)

    # ---------------------------------------------------------------- receiving

    @property
    def grammar_case(self) -> str:
        """The grammar case of the target's role: the harness as initiator
        reads an acceptor's frames (server), as acceptor an initiator's."""
        return SERVER_GRAMMAR if self.role == INITIATOR else CLIENT_GRAMMAR

    def _frames_of(self, data: bytes, what: str) -> list[Frame]:
        """The frames ``data`` completes. Every bound the parser holds the
        bytes to is the profile's frame format, not a bound of the harness's
        own: the 65536 of size ("whose size is above the bound, does not
        meet either the host or node message format", profile section 2)
        and the 512 bytes of a header line (its table; no header of valid
        fields is longer than 306 bytes). So any FrameError of the parser
        is the grammar case's rule (core/node_grammar.py), recorded for it
        once. The frames the same read completed before the bad one were
        valid: they are read first, and the violation is raised at the read
        after them (again, unrecorded, at every read after that: the parser
        reads nothing after a bad frame)."""
        self._after_grammar_break()
        # Where the parser's buffer starts in the target's bytes: the frame
        # it completes next starts there.
        start = self.parsed
        held = self.parser.buffered
        try:
            frames = self.parser.receive_data(data)
        except FrameError as exc:
            # The frames completed before the bad one were valid, and so
            # reproduce their bytes (one spelling per field): the bad frame
            # starts right after them.
            offset = start + sum(len(encode_frame(frame)) for frame in exc.frames)
            self.grammar_break = node_grammar.violation(
                self.grammar_case,
                f"a frame that breaks the Ripple host frame grammar where {what} was due: "
                f"{exc.reason}",
                exc.data,
                direction=("server" if self.role == INITIATOR else "client") + " to harness",
                offset=offset,
                connection=self.conn.label,
            )
            if not exc.frames:
                raise self.grammar_break from None
            return exc.frames
        self.parsed = start + held + len(data) - self.parser.buffered
        return frames

    def _after_grammar_break(self) -> None:
        """Once a frame broke the grammar, no frame comes after it: every
        read raises its violation again (recorded when it was made)."""
        if self.grammar_break is not None:
            raise node_grammar.again(self.grammar_break)

    async def next_frame(self, what: str, deadline: float | Deadline | None = None) -> Frame:
        """The target's next frame. A close fails the case (PeerClosed),
        silence past the deadline too (DeadlineExceeded); a frame that breaks
        the grammar is the grammar case's (NodeGrammarViolation with its
        bytes, see :meth:`_frames_of`)."""
        limit = (
            deadline
            if isinstance(deadline, Deadline)
            else Deadline(self.conn.deadline if deadline is None else deadline)
        )
        while not self._frames:
            self._after_grammar_break()
            try:
                data = await self.conn.receive_some(limit)
            except DeadlineExceeded as exc:
                raise DeadlineExceeded(f"no {what}: {exc}") from None
            if not data:
                raise PeerClosed(f"target closed the connection while {what} was due")
            frames = self._frames_of(data, what)
            for frame in frames:
                self.trace.event(f"decoded frame: {summary(frame)}")
            self._frames.extend(frames)
            self.received_frames.extend(frames)
        return self._frames.popleft()

    async def next_message(self, what: str, deadline: float | Deadline | None = None) -> Message:
        """The target's next complete message (its frames reassembled; chunks
        of other messages may come in between)."""
        limit = (
            deadline
            if isinstance(deadline, Deadline)
            else Deadline(self.conn.deadline if deadline is None else deadline)
        )
        for _ in range(MAX_FRAMES_WHILE_WAITING):
            frame = await self.next_frame(what, limit)
            # What the reassembler refuses is no frame of bad grammar (each
            # frame was read): content that is no JSON object with a type is
            # the message format (profile section 3), chunks that change
            # their message's version or users a rule across frames, and the
            # bounds on reassembly the profile's resource limits. The case
            # that read it fails, as for a flood of frames below.
            with target_bytes(
                f"target sent a message the profile cannot read where {what} was due",
                frame.payload,
                FrameError,
            ):
                message = self.reassembler.add(frame)
            if message is not None:
                self.trace.event(f"decoded message: {summary(message)}")
                if message.type != "MSG":
                    self.outstanding.discard(message.msgno)
                return message
        raise ProtocolViolation(
            f"over {MAX_FRAMES_WHILE_WAITING} frames without a complete message while {what} "
            "was due"
        )

    async def answer_to(
        self, msgno: int, what: str, deadline: float | Deadline | None = None, *, serve: bool = True
    ) -> Message:
        """The complete RPY or ERR the target sends next. MSGs of the
        target's own that come first are answered as a host would (see
        :meth:`answer_target_msg`), or with ``serve=False`` kept unanswered
        in ``pending_msgs`` (a launched initiator may close once answered);
        an answer with another msgno fails the case with both msgnos."""
        limit = (
            deadline
            if isinstance(deadline, Deadline)
            else Deadline(self.conn.deadline if deadline is None else deadline)
        )
        for _ in range(MAX_FRAMES_WHILE_WAITING):
            message = await self.next_message(what, limit)
            if message.type == "MSG":
                if serve:
                    await self.answer_target_msg(message)
                else:
                    self.pending_msgs.append(message)
                continue
            if message.msgno != msgno:
                raise AssertionError(
                    f"awaiting {what} (an RPY or ERR with msgno {msgno}), the target answered "
                    f"with msgno {message.msgno}: {summary(message)}"
                )
            return message
        raise ProtocolViolation(f"over {MAX_FRAMES_WHILE_WAITING} messages without {what}")

    async def answer_target_msg(self, message: Message) -> None:
        """Answer a MSG of the target as a correct host would: its host-id
        with the harness's host-id, anything else with an RPY echoing it."""
        if message.body.get("type") == HOST_ID_TYPE:
            body: dict[str, Any] = {"type": HOST_ID_TYPE, "hostname": HARNESS_HOSTNAME}
        else:
            body = {"type": "ok", "echo": message.body}
        await self.send_message(
            "RPY",
            message.msgno,
            body,
            "answering the target's MSG",
            to_user=message.from_user,
            from_user=message.to_user,
        )

    async def request(
        self, body: dict[str, Any] | bytes, what: str, **options: Any
    ) -> tuple[int, Message]:
        """Send a MSG with a new msgno; its answer."""
        msgno = self.new_msgno()
        await self.send_message("MSG", msgno, body, what, **options)
        return msgno, await self.answer_to(msgno, f"the answer to {what}")

    # ---------------------------------------------------------------- host-id

    async def exchange_host_ids(self, msgno: int | None = None) -> Message:
        """The initiator's part: send the host-id MSG, return the target's
        answer (which the caller judges)."""
        msgno = self.new_msgno() if msgno is None else msgno
        await self.send_message(
            "MSG",
            msgno,
            {"type": HOST_ID_TYPE, "hostname": HARNESS_HOSTNAME},
            "the initiator's host-id",
        )
        return await self.answer_to(msgno, "the acceptor's answer to the host-id MSG")

    # ---------------------------------------------------------------- closing

    async def await_close(self, deadline: float | None = None) -> tuple[bool, bytes]:
        """Wait for the target to end the connection: ``(closed, what it sent
        meanwhile)``, the bytes including any frames parsed but not yet read
        and the start of a frame not yet whole (a frame the target began
        before is judged whole: under a fragmenting network its first bytes
        may come before the harness's last write, the rest after)."""
        unfinished = self.parser.drain()
        self.parsed += len(unfinished)
        pending = b"".join(encode_frame(frame) for frame in self._frames) + unfinished
        self._frames.clear()
        closed, data = await self.conn.await_close(deadline)
        return closed, pending + data

    async def answers_within(self, seconds: float) -> list[Message]:
        """The RPYs and ERRs the target sends within ``seconds`` (stops early
        on a close). MSGs of the target's own that come meanwhile are
        answered as a host would: a host may send its own MSGs at any moment
        after the host-id exchange (the profile, section 4), and they say
        nothing about the harness's MSGs."""
        window = Deadline(seconds)
        answers: list[Message] = []
        while not window.expired:
            try:
                message = await self.next_message("any answer within the window", window)
            except (DeadlineExceeded, PeerClosed):
                break
            if message.type == "MSG":
                await self.answer_target_msg(message)
            else:
                answers.append(message)
        return answers


# ---------------------------------------------------------------- the grammar cases


def sent_in_answer(data: bytes, crossing: set[int] | frozenset[int]) -> str | None:
    """What, among the bytes a target sent after a forged frame, it sent *in
    answer* to it (None: nothing). Two kinds of frame are not answers and
    may cross the forged frame on the wire, whatever the target does with it:
    a MSG (a request of the target's own; a host may send one at any moment
    after the host-id exchange, and the wire cannot show whether it left
    before or after the forged frame arrived), and an RPY or ERR answering a
    MSG of the harness in ``crossing`` (sent before the forged frame, still
    awaiting its answer). Anything else is: an answer to another msgno (a
    MSG in the forged bytes served), or bytes that are no frame at all."""
    if not data:
        return None
    parser = FrameParser()
    try:
        frames = parser.receive_data(data)
    except FrameError as exc:
        return f"bytes that break the grammar ({exc.reason}): {short_hex(data)}"
    answers = [frame for frame in frames if frame.type != "MSG" and frame.msgno not in crossing]
    if not answers:
        return None  # an unfinished frame at the close is a frame the target began before it closed
    return "; ".join(summary(frame) for frame in answers)


def served(data: bytes) -> list[str]:
    """The RPY frames among bytes the target sent: a frame it was meant to
    refuse was served (as far as the bytes parse)."""
    parser = FrameParser()
    try:
        frames = parser.receive_data(data)
    except FrameError:
        return []
    return [summary(frame) for frame in frames if frame.type == "RPY"]


async def expect_close(
    peer: RipplePeer, what: str, *, silent: bool, crossing: set[int] | frozenset[int] | None = None
) -> None:
    """The target must end the connection within the read deadline after
    ``what``; with ``silent``, without sending anything in answer first (the
    profile: "closed at once, with nothing sent in answer"; see
    :func:`sent_in_answer`: its own MSGs, and answers to ``crossing``, by
    default the harness's MSGs still awaiting an answer, are not answers)."""
    crossing = frozenset(peer.outstanding if crossing is None else crossing)
    closed, data = await peer.await_close()
    limit = peer.conn.deadline
    if not closed:
        raise AssertionError(
            f"after {what}, the target kept the connection open for {limit} s; the association "
            f"must be closed at once. Meanwhile it sent: {describe_bytes(data)}"
        )
    answered = sent_in_answer(data, crossing) if silent else None
    if answered:
        raise AssertionError(
            f"after {what}, the target sent {answered} before closing; the association must be "
            f"closed at once, with nothing sent in answer (all it sent: {describe_bytes(data)})"
        )

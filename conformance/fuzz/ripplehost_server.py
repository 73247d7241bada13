"""Fuzzing a Ripple host acceptor (the server role: sctp-binding.txt and
docs/ripplehost-profile.md, over TCP).

The machine plays the initiator: a host-id MSG first (or, to see it
refused, another MSG), then pings, echoes (chunked, interleaved, with a CR
LF before END, in node frames), MSGs of unknown types or another version,
MSGs of the wrong parity or reusing the msgno of one still held, answers to
msgnos nobody asked, frames that break the grammar (doubled spaces,
non-canonical numbers, a missing END, a wrong size) and mutated bytes of the
shared strategies, joined and split into writes at drawn points. Each
message is fed to the reference session (``RippleSession``, the acceptor,
answering as the reference node's service does: reference_impl/ripplehost/
node.py ``answer_for``) too; its answers are what may come back.

What the text allows beyond the plain reference (reference_impl/ripplehost/
variants.py) is no failure: MSGs of the target's own after the host-id RPY
(odd msgnos, unique while unanswered: the harness never answers them),
answers split, joined or late within the read deadline, another hostname.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from ..core.transport import Deadline, DeadlineExceeded, TcpConnection
from .machine import FuzzFailure, FuzzMachine, Message, send_action
from .strategies import RIPPLE_SPECIALS, mutated, ripplehost_valid_pieces
from reference_impl.ripplehost.frame import (
    FrameError,
    MessageReader,
    encode_message,
)
from reference_impl.ripplehost.frame import (
    Message as RippleMessage,
)
from reference_impl.ripplehost.node import answer_for
from reference_impl.ripplehost.session import (
    MAX_HOSTNAME_LEN,
    MessageReceived,
    RippleSession,
    Role,
)

FRAME_S = "ripplehost.frame.server."
CHUNK_S = "ripplehost.chunk.server."
NODE_S = "ripplehost.node.server."
MESSAGE_S = "ripplehost.message.server."
HOSTID_S = "ripplehost.hostid.server."
MSGNO_S = "ripplehost.msgno.server."

HOLD_SECONDS = 20
"""A held MSG stays unanswered longer than any example lasts."""
QUIET_SECONDS = 0.1
MODEL_HOSTNAME = "reference.model.invalid"

CASE_IDS = (
    FRAME_S + "closes-on-malformed-header",
    FRAME_S + "closes-silently-on-malformed-header",
    FRAME_S + "closes-on-non-canonical-number",
    FRAME_S + "closes-on-missing-end",
    FRAME_S + "closes-on-wrong-size",
    FRAME_S + "sends-well-formed-frames",
    CHUNK_S + "reassembles-chunked",
    CHUNK_S + "reassembles-interleaved",
    CHUNK_S + "counts-crlf-before-end",
    NODE_S + "accepts-node-frame",
    NODE_S + "answer-swaps-users",
    MESSAGE_S + "err-for-unknown-type",
    MESSAGE_S + "err-for-unsupported-version",
    MESSAGE_S + "speaks-version-in-use",
    MESSAGE_S + "closes-on-content-not-json-object",
    HOSTID_S + "replies-with-host-id",
    HOSTID_S + "sends-nothing-before-host-id-reply",
    HOSTID_S + "refuses-msg-before-host-id",
    MSGNO_S + "reply-carries-msgno",
    MSGNO_S + "uses-odd-msgnos",
    MSGNO_S + "unique-outstanding-msgnos",
    MSGNO_S + "closes-on-wrong-parity",
    MSGNO_S + "closes-on-reused-msgno",
    MSGNO_S + "closes-on-reply-to-unknown-msgno",
)

# --- what a rule draws: kinds of messages, made into bytes with the session's msgnos ------------

KINDS = (
    ("ping", MSGNO_S + "reply-carries-msgno"),
    ("echo", MSGNO_S + "reply-carries-msgno"),
    ("echo-chunked", CHUNK_S + "reassembles-chunked"),
    ("echo-answer-chunked", MSGNO_S + "reply-carries-msgno"),
    ("interleaved", CHUNK_S + "reassembles-interleaved"),
    ("crlf-before-end", CHUNK_S + "counts-crlf-before-end"),
    ("node-frame", NODE_S + "accepts-node-frame"),
    ("unknown-type", MESSAGE_S + "err-for-unknown-type"),
    ("other-version", MESSAGE_S + "err-for-unsupported-version"),
    ("ping-me", MSGNO_S + "uses-odd-msgnos"),
    ("reuse-answered", MSGNO_S + "closes-on-reused-msgno"),
    ("reuse-held", MSGNO_S + "closes-on-reused-msgno"),
    ("wrong-parity", MSGNO_S + "closes-on-wrong-parity"),
    ("reply-unknown", MSGNO_S + "closes-on-reply-to-unknown-msgno"),
    ("doubled-space", FRAME_S + "closes-on-malformed-header"),
    ("trailing-space", FRAME_S + "closes-on-malformed-header"),
    ("non-canonical", FRAME_S + "closes-on-non-canonical-number"),
    ("missing-end", FRAME_S + "closes-on-missing-end"),
    ("bare-lf-end", FRAME_S + "closes-on-missing-end"),
    ("wrong-size", FRAME_S + "closes-on-wrong-size"),
    ("not-json-object", MESSAGE_S + "closes-on-content-not-json-object"),
    ("trailing-content", MESSAGE_S + "closes-on-content-not-json-object"),
    ("piece", None),
)


CLOSING = {
    "reuse-held", "wrong-parity", "reply-unknown", "doubled-space", "trailing-space",
    "non-canonical", "missing-end", "bare-lf-end", "wrong-size", "not-json-object",
    "trailing-content",
}  # fmt: skip
WEIGHTED_KINDS = tuple(entry for entry in KINDS for _ in range(1 if entry[0] in CLOSING else 3))
"""The kinds the association goes on after three times as likely as those
it ends on: an example explores further than its first refusal."""


@st.composite
def drafts(draw) -> dict[str, Any]:
    """What one message is to be; the machine gives it msgnos."""
    kind, case = draw(st.sampled_from(WEIGHTED_KINDS))
    draft: dict[str, Any] = {
        "kind": kind,
        "case": case,
        "text": draw(st.text("abcxyz \u00e9\u4e2d", max_size=40)),
        "chunk": draw(st.integers(1, 24)),
        "number": draw(st.sampled_from(["02", "+4", "0x2", " 2"])),
        "size_delta": draw(st.sampled_from([-1, 1, 5])),
        "count": draw(st.integers(1, 3)),
    }
    if kind == "piece":
        draft["bytes"] = draw(answer_and_broken_pieces)
    draft["mutate"] = draw(st.integers(0, 4)) == 4 and kind != "reuse-held"
    return draft


def _usable_piece(piece: bytes) -> bool:
    if piece.startswith(b"MSG"):
        return b" * " in piece[:16] or b"2000000000" in piece
    if piece.startswith(b"RPY"):
        return int(piece.split(b" ")[2]) % 2 == 0
    return True


answer_and_broken_pieces = ripplehost_valid_pieces.filter(_usable_piece)
"""The shared pieces but whole MSGs, whose fixed msgnos could repeat one of
the example's within one write (a reuse or not, depending on how the target's
reads cut the stream), and answers to odd msgnos, which a target sending MSGs
of its own (the text allows it) may have outstanding."""


def _header_bytes(type_: str, msgno: str, more: str, size: int, users: str = "") -> bytes:
    return f"{type_} 1.0 {msgno} {more} {size}{users}\r\n".encode()


class RippleHostServerMachine(FuzzMachine):
    protocol = "ripplehost"
    role = "server"
    case_ids = CASE_IDS

    def __init__(self) -> None:
        super().__init__()
        self.conn: TcpConnection | None = None
        self.model: RippleSession | None = None
        self.reader = MessageReader()
        self.expected: list[tuple[RippleMessage, int]] = []
        self.matched: set[int] = set()
        """Indexes of the expected answers that came. Answers are matched by
        msgno, in any order: the node answers what its session refuses
        (another version) while it reads, the rest after the read."""
        self.cases: list[str | None] = []
        self.next_msgno = 2
        self.answered: list[int] = []
        self.host_id_answered = False
        self.target_msgnos: set[int] = set()
        self.optional_from: int | None = None
        """Expected answers from this index on may be left out (see _send)."""

    # -- rules
    @initialize(opening=st.integers(0, 7), cuts=st.lists(st.integers(0, 4096), max_size=3))
    def start(self, opening: int, cuts: list[int]) -> None:
        self.perform({"do": "connect"})
        if opening < 7:  # mostly (and what shrinking goes to) a proper host-id first
            body = {"type": "host-id", "hostname": "fuzz-harness.invalid"}
            first = Message(
                encode_message("MSG", 0, body), HOSTID_S + "replies-with-host-id", "host-id"
            )
        else:
            first = Message(
                encode_message("MSG", 0, {"type": "ping"}),
                HOSTID_S + "refuses-msg-before-host-id",
                "ping before host-id",
            )
        self.perform(send_action([first], cuts))

    @precondition(lambda self: self.open)
    @rule(
        batch=st.lists(drafts(), min_size=1, max_size=4),
        cuts=st.lists(st.integers(0, 4096), max_size=4),
        data=st.data(),
    )
    def send(self, batch: list[dict[str, Any]], cuts: list[int], data: st.DataObject) -> None:
        messages: list[Message] = []
        for draft in batch:
            messages += self.build(draft, data)
        self.perform(send_action(messages, cuts))

    @precondition(lambda self: not self.open)
    @rule()
    def reconnect(self) -> None:
        self.perform({"do": "connect"})
        body = {"type": "host-id", "hostname": "fuzz-harness.invalid"}
        first = Message(
            encode_message("MSG", 0, body), HOSTID_S + "replies-with-host-id", "host-id"
        )
        self.perform(send_action([first], []))

    # -- building messages with the association's msgnos
    def msgno(self) -> int:
        value = self.next_msgno
        self.next_msgno += 2
        return value

    def build(self, draft: dict[str, Any], drawing: st.DataObject) -> list[Message]:
        kind, case = draft["kind"], draft["case"]
        capabilities = self.runtime.target.capabilities
        if (
            (kind == "ping-me" and "ping-me" not in capabilities)
            or (kind == "reuse-held" and "hold" not in capabilities)
            or (kind == "reuse-answered" and not self.answered)
        ):
            kind, case = KINDS[0]  # what the target or the association cannot show: a ping
        text = draft["text"]
        messages: list[Message] = []
        if kind == "ping":
            data = encode_message("MSG", self.msgno(), {"type": "ping"})
        elif kind == "echo":
            data = encode_message("MSG", self.msgno(), {"type": "echo", "text": text})
        elif kind == "echo-chunked":
            data = encode_message(
                "MSG", self.msgno(), {"type": "echo", "text": text}, chunk_size=draft["chunk"]
            )
        elif kind == "echo-answer-chunked":
            body = {"type": "echo", "text": text, "chunk": draft["chunk"]}
            data = encode_message("MSG", self.msgno(), body)
        elif kind == "interleaved":
            a, b = self.msgno(), self.msgno()
            first = _frames(
                encode_message(
                    "MSG", a, {"type": "echo", "t": text + "a" * 20}, chunk_size=draft["chunk"]
                )
            )
            second = _frames(encode_message("MSG", b, {"type": "ping"}, chunk_size=4))
            woven = []
            for i in range(max(len(first), len(second))):
                woven += first[i : i + 1] + second[i : i + 1]
            data = b"".join(woven)
        elif kind == "crlf-before-end":
            content = b'{"type":"echo","t":"x"}\r\n'
            data = _header_bytes("MSG", str(self.msgno()), ".", len(content)) + content + b"END\r\n"
        elif kind == "node-frame":
            data = encode_message(
                "MSG", self.msgno(), {"type": "ping"}, to_user="alice", from_user="bob"
            )
        elif kind == "unknown-type":
            data = encode_message(
                "MSG", self.msgno(), {"type": "no-such-type-" + str(draft["count"])}
            )
        elif kind == "other-version":
            data = encode_message("MSG", self.msgno(), {"type": "ping"}, version="1.1")
        elif kind == "ping-me":
            data = encode_message("MSG", self.msgno(), {"type": "ping-me", "count": draft["count"]})
        elif kind == "reuse-answered":
            # Taken off the list until answered again: two MSGs of one msgno in
            # one write would be a reuse or not depending on how it is read.
            data = encode_message("MSG", self.answered.pop(0), {"type": "ping"})
        elif kind == "reuse-held":
            held = self.msgno()
            messages.append(
                Message(
                    encode_message("MSG", held, {"type": "hold", "seconds": HOLD_SECONDS}),
                    MSGNO_S + "reply-carries-msgno",
                    f"hold {held}",
                )
            )
            data = encode_message("MSG", held, {"type": "ping"})
        elif kind == "wrong-parity":
            data = encode_message("MSG", 2 * draft["count"] + 1, {"type": "ping"})
        elif kind == "reply-unknown":
            type_ = "RPY" if draft["count"] % 2 else "ERR"
            data = encode_message(type_, 99991 + 2 * draft["count"], {"type": "pong"})
        elif kind in ("doubled-space", "trailing-space"):
            content = b'{"type":"ping"}'
            header = _header_bytes("MSG", str(self.msgno()), ".", len(content))
            header = (
                header.replace(b" ", b"  ", 1)
                if kind == "doubled-space"
                else header.replace(b"\r\n", b" \r\n")
            )
            data = header + content + b"END\r\n"
        elif kind == "non-canonical":
            content = b'{"type":"ping"}'
            data = _header_bytes("MSG", draft["number"], ".", len(content)) + content + b"END\r\n"
        elif kind in ("missing-end", "bare-lf-end"):
            content = b'{"type":"ping"}'
            trailer = b"XXX\r\n" if kind == "missing-end" else b"END\n"
            data = _header_bytes("MSG", str(self.msgno()), ".", len(content)) + content + trailer
        elif kind == "wrong-size":
            content = b'{"type":"ping"}'
            size = len(content) + draft["size_delta"]
            data = _header_bytes("MSG", str(self.msgno()), ".", size) + content + b"END\r\n"
        elif kind == "not-json-object":
            content = b"[1,2]"
            data = _header_bytes("MSG", str(self.msgno()), ".", len(content)) + content + b"END\r\n"
        elif kind == "trailing-content":
            content = b'{"type":"ping"}{"x":1}'
            data = _header_bytes("MSG", str(self.msgno()), ".", len(content)) + content + b"END\r\n"
        else:
            data, case = draft["bytes"], None
        label = kind
        if draft.get("mutate"):
            changed = drawing.draw(mutated(data, RIPPLE_SPECIALS, 3))
            if changed != data:
                data, case, label = changed, None, f"{kind} (mutated)"
        messages.append(Message(data, case, label))
        return messages

    # -- state
    @property
    def open(self) -> bool:
        return (
            self.conn is not None
            and not self.conn.eof
            and self.model is not None
            and not self.model.closed
        )

    # -- actions
    async def execute(self, action: dict[str, Any]) -> None:
        if action["do"] == "connect":
            await self._connect()
        elif action["do"] == "send":
            await self._send(action)
        else:
            raise ValueError(f"unknown action {action['do']!r}")

    async def _connect(self) -> None:
        await self.close()
        runtime = self.runtime
        try:
            self.conn = await TcpConnection.open(
                runtime.host, runtime.port, self.trace, self.deadline, "fuzz"
            )
        except (DeadlineExceeded, ConnectionError, OSError) as exc:
            server = runtime.server
            if server is not None and not server.running():
                raise FuzzFailure(
                    self.cases[-1]
                    if self.cases and self.cases[-1]
                    else FRAME_S + "closes-on-malformed-header",
                    f"the target process exited (code {server.returncode}); its last output:\n"
                    f"{server.tail(10)}",
                ) from None
            self.session.unresponsive = True
            raise FuzzFailure(HOSTID_S + "replies-with-host-id", f"no connection: {exc}") from None
        self.model = RippleSession(Role.ACCEPTOR, MODEL_HOSTNAME)
        self.reader = MessageReader()
        self.expected, self.matched, self.cases = [], set(), []
        self.next_msgno, self.answered = 2, []
        self.host_id_answered = False
        self.target_msgnos = set()
        self.optional_from = None

    def feed_model(self, data: bytes, case: str | None) -> None:
        model = self.model
        assert model is not None
        index = len(self.cases)
        self.cases.append(case)
        if model.closed:
            return
        for event in model.receive_data(data):
            if isinstance(event, MessageReceived):
                answer = answer_for(event.message.body)
                if answer.delay:
                    continue  # held: answered after the example
                model.reply(
                    event.message.msgno,
                    answer.body,
                    error=answer.error,
                    chunk_size=answer.chunk_size,
                )
        for message in MessageReader(max_size=1 << 20).receive_data(model.data_to_send()):
            if message.type != "MSG":  # the node's own MSGs are judged by rule, not matched
                self.expected.append((message, index))

    def case_of(self, index: int) -> str:
        if 0 <= index < len(self.cases) and self.cases[index]:
            return self.cases[index]  # type: ignore[return-value]
        return FRAME_S + "closes-on-malformed-header"

    async def _send(self, action: dict[str, Any]) -> None:
        assert self.conn is not None
        messages, writes = self.expand(action)
        first_expected = len(self.expected)
        was_closed = self.model is not None and self.model.closed
        for item, data in zip(action["messages"], messages):
            self.feed_model(data, item.get("case"))
        if self.model is not None and self.model.closed and not was_closed:
            # The node answers the MSGs of a read after the session read all
            # of it: a frame it closes on drops the answers to the MSGs that
            # came in the same read. How the target's reads cut this write is
            # its own business, so these answers may come or not, in order.
            self.optional_from = first_expected
        for write in writes:
            if not await self.conn.send_quietly(write, f"{len(write)} bytes"):
                break
        await self._settle()

    async def _read(self, deadline: Deadline) -> bool:
        assert self.conn is not None
        data = await self.conn.receive_some(deadline)
        if not data:
            return False
        try:
            frames = self.reader.parser.receive_data(data)
        except FrameError as exc:
            # A frame of the target's that breaks the grammar is the grammar
            # case's rule (core/node_grammar.py), whatever the example sent.
            raise FuzzFailure(
                FRAME_S + "sends-well-formed-frames",
                f"the target sent bytes that break the grammar ({exc.reason}): {exc.data[:120]!r}",
            ) from None
        received = []
        for frame in frames:
            try:
                message = self.reader.reassembler.add(frame)
            except FrameError as exc:
                raise FuzzFailure(
                    self.case_of(len(self.cases) - 1),
                    f"the target sent a message the profile cannot read ({exc.reason}): "
                    f"{exc.data[:120]!r}",
                ) from None
            if message is not None:
                received.append(message)
        for message in received:
            self.trace.event(
                f"decoded: {message.type} {message.version} {message.msgno} "
                f"{json.dumps(message.body)[:200]}"
                + (f" users {message.to_user} {message.from_user}" if message.is_node else "")
            )
            self.judge(message)
        return True

    def judge(self, got: RippleMessage) -> None:
        if got.type == "MSG":
            if not self.host_id_answered:
                raise FuzzFailure(
                    HOSTID_S + "sends-nothing-before-host-id-reply",
                    f"the target sent MSG {got.msgno} before its host-id RPY",
                )
            if got.msgno % 2 != 1:
                raise FuzzFailure(
                    MSGNO_S + "uses-odd-msgnos", f"the acceptor's MSG has msgno {got.msgno} (even)"
                )
            if got.msgno in self.target_msgnos:
                raise FuzzFailure(
                    MSGNO_S + "unique-outstanding-msgnos",
                    f"the target's MSG reuses msgno {got.msgno} while its first MSG with it is "
                    "unanswered (the harness answers none)",
                )
            self.target_msgnos.add(got.msgno)
            return
        waiting = self.waiting()
        # An ERR for no MSG the reference answers, where it closes on a broken
        # frame: an answer to that frame (serving it is another rule's failure).
        closed_silently = (
            got.type == "ERR"
            and self.model is not None
            and self.model.closed
            and "grammar" in (self.model.close_reason or "")
            and not any(self.expected[i][0].msgno == got.msgno for i in waiting)
        )
        if not waiting or closed_silently:
            raise FuzzFailure(
                FRAME_S + "closes-silently-on-malformed-header"
                if closed_silently
                else self.case_of(len(self.cases) - 1),
                f"the target sent {got.type} {got.msgno} {json.dumps(got.body)[:120]} where the "
                f"reference sends nothing"
                + (
                    f" (it closes: {self.model.close_reason})"
                    if self.model and self.model.closed
                    else ""
                ),
                "(nothing)",
                f"{got.type} {got.msgno}",
            )
        # The answer to the MSG of the same msgno, else the first one due.
        position = next((i for i in waiting if self.expected[i][0].msgno == got.msgno), waiting[0])
        want, index = self.expected[position]
        case = self.case_of(index)
        shown_want = f"{want.type} {want.version} {want.msgno} {json.dumps(want.body)[:120]}"
        shown_got = f"{got.type} {got.version} {got.msgno} {json.dumps(got.body)[:120]}"

        def fail(rule: str, text: str) -> None:
            raise FuzzFailure(rule, text, shown_want, shown_got)

        if got.type != want.type:
            fail(case, f"the target answered {got.type} where the reference answers {want.type}")
        if got.msgno != want.msgno:
            fail(
                MSGNO_S + "reply-carries-msgno",
                f"{got.type} msgno {got.msgno}, the MSG's is {want.msgno}",
            )
        if got.version != want.version:
            fail(MESSAGE_S + "speaks-version-in-use", f"{got.type} in version {got.version!r}")
        if (got.to_user, got.from_user) != (want.to_user, want.from_user):
            fail(
                NODE_S + "answer-swaps-users",
                f"answer users {got.to_user} {got.from_user}, expected {want.to_user} {want.from_user}",
            )
        if want.body.get("type") == "host-id":
            hostname = got.body.get("hostname")
            if (
                got.body.get("type") != "host-id"
                or not isinstance(hostname, str)
                or not 1 <= len(hostname) <= MAX_HOSTNAME_LEN
            ):
                fail(
                    HOSTID_S + "replies-with-host-id",
                    "the host-id RPY is not a host-id of 1..253 characters",
                )
            self.host_id_answered = True
        elif want.type == "ERR":
            if got.body.get("type") != "error" or got.body.get("error") != want.body.get("error"):
                fail(case, "the ERR's body is not the profile's error with the reference's code")
        elif got.body != want.body:
            fail(case, "the answer's body is not the reference's")
        self.matched.add(position)
        if got.type in ("RPY", "ERR"):
            self.answered.append(got.msgno)

    def waiting(self) -> list[int]:
        """Indexes of the expected answers not come yet."""
        return [i for i in range(len(self.expected)) if i not in self.matched]

    def due(self) -> list[int]:
        """Those of them that must come (see optional_from)."""
        limit = len(self.expected) if self.optional_from is None else self.optional_from
        return [i for i in self.waiting() if i < limit]

    async def _settle(self) -> None:
        assert self.conn is not None and self.model is not None
        deadline = Deadline(self.deadline)
        while self.due():
            try:
                if not await self._read(deadline):
                    want, index = self.expected[self.due()[0]]
                    # A close comes from the last thing read: after shrinking,
                    # the message that made the target close is the last one.
                    raise FuzzFailure(
                        self.case_of(len(self.cases) - 1),
                        f"the target closed the association where the reference answers "
                        f"{want.type} {want.msgno} {json.dumps(want.body)[:120]}",
                        f"{want.type} {want.msgno}",
                        "(closed)",
                    )
            except DeadlineExceeded:
                want, index = self.expected[self.due()[0]]
                raise FuzzFailure(
                    self.case_of(index),
                    f"no answer within {self.deadline:g} s where the reference answers {want.type} "
                    f"{want.msgno} {json.dumps(want.body)[:120]}",
                    f"{want.type} {want.msgno}",
                    "(nothing)",
                ) from None
        if self.model.closed and not self.conn.eof:
            try:
                while not self.conn.eof and await self._read(deadline):
                    pass
            except DeadlineExceeded:
                raise FuzzFailure(
                    self.case_of(len(self.cases) - 1),
                    f"the target kept the association open {self.deadline:g} s after a frame "
                    f"the reference closes on ({self.model.close_reason})",
                    "(closed)",
                    "(open)",
                ) from None
        elif not self.model.closed and self.conn.eof:
            raise FuzzFailure(
                self.case_of(len(self.cases) - 1),
                "the target closed the association where the reference keeps it open",
                "(open)",
                "(closed)",
            )

    async def finish(self) -> None:
        if self.conn is None or self.conn.eof:
            return
        deadline = Deadline(QUIET_SECONDS)
        try:
            while not self.conn.eof and await self._read(deadline):
                pass
        except DeadlineExceeded:
            pass
        await self._settle()

    async def close(self) -> None:
        if self.conn is not None:
            self.conn.abort()
            self.conn = None


def _frames(data: bytes) -> list[bytes]:
    """The frames of one encoded message, each as its bytes."""
    out, rest = [], data
    while rest:
        head, _, tail = rest.partition(b"\r\n")
        size = int(head.split(b" ")[4])
        end = len(head) + 2 + size + 5
        out.append(rest[:end])
        rest = rest[end:]
    return out

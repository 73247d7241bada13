"""The harness's side of an SSB connection, driven by the reference cores.

Cases use :class:`SsbClientSession` to talk to a target server the way a
well-behaved peer would (handshake, box stream, RPC), and its lower-level
pieces to forge, tamper with or replay what they send. Every byte goes
through the connection's wire trace, with a note saying what it was.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from conformance.core import node_grammar
from conformance.core.node_grammar import NodeGrammarViolation
from conformance.core.transport import (
    SHOWN_BYTES,
    Deadline,
    DeadlineExceeded,
    PeerClosed,
    ProtocolViolation,
    TcpConnection,
    short_hex,
    target_bytes,
    violation_from,
)
from reference_impl.ssb import boxstream, rpc, shs
from reference_impl.ssb.boxstream import BoxStreamDecoder, BoxStreamEncoder, BoxStreamError
from reference_impl.ssb.keys import Keypair, feed_id_to_public
from reference_impl.ssb.rpc import BodyType, RpcDecoder, RpcError, RpcMessage

from .prerequisites import SERVER_GRAMMAR

# The bounds SSB sets on what the harness reads; beyond them the target's
# bytes are a ProtocolViolation (a failure naming them), never buffered.
MAX_BOX_BODY = boxstream.MAX_BODY
"""A box header may declare at most 4096 body bytes (guide, Box stream)."""
MAX_RPC_BODY = 1 << 20
"""The RPC header's u32 allows 4 GiB; no answer to the harness's requests
comes near 1 MiB (messages are at most 8 KiB), so a bigger declared length is
refused from the header, before any body is awaited."""
MAX_STREAM_ITEMS = 10_000
"""Bound on how many stream items a case collects, so that a target that
streams forever cannot exhaust memory."""
MAX_QUEUED_MESSAGES = 2 * MAX_STREAM_ITEMS
MAX_QUEUED_BYTES = 16 << 20
"""Bound on what the target sends that no case has read yet (answers on
other request numbers)."""
MAX_KEPT_BOX_BODIES = 1024
"""Box bodies kept for cases that judge how the target splits messages."""


class TargetRpcMessage(RpcMessage):
    """An RPC message the target sent: a body that does not parse is a
    ProtocolViolation (still an RpcError), so a case reading it fails
    naming the bytes instead of ending in ``error``. A JSON body that does
    not parse, or a STRING body that is not UTF-8, breaks the RPC message
    format: judged when the message was decoded (TargetRpcDecoder), by the
    grammar case of the target's role; a case that reads the body then
    gets that violation, unrecorded again, and is blocked by that case."""

    grammar_violation: NodeGrammarViolation | None = None

    def json(self) -> Any:
        if self.grammar_violation is not None and self.body_type is BodyType.JSON:
            raise node_grammar.again(self.grammar_violation)
        with target_bytes(
            f"the body of the target's RPC message (req {self.req}) is not valid JSON",
            self.body,
            RpcError,
        ):
            return super().json()

    def text(self) -> str:
        if self.grammar_violation is not None and self.body_type is BodyType.STRING:
            raise node_grammar.again(self.grammar_violation)
        with target_bytes(
            f"the body of the target's RPC message (req {self.req}) is not UTF-8 text",
            self.body,
            RpcError,
        ):
            return super().text()


class TargetRpcDecoder(RpcDecoder):
    """Splits the target's RPC stream, every message judged by the RPC
    message format once (core/node_grammar.py): a header the format does
    not allow (body type 3, unknown flag bits), bytes after the goodbye,
    and a JSON body that does not parse or a STRING body that is not UTF-8
    are NodeGrammarViolations of ``grammar_case`` (and RpcErrors); a body
    length over ``max_body``, the harness's own bound, a plain
    ProtocolViolation (and RpcError)."""

    def __init__(
        self, max_body: int, grammar_case: str, direction: str, connection: str = ""
    ) -> None:
        super().__init__(max_body)
        self.grammar_case = grammar_case
        self.direction = direction
        self.connection = connection
        self._break: NodeGrammarViolation | None = None
        self.decoded = 0
        """Messages decoded (and judged) so far."""

    def _violation(self, rule: str, data: bytes, error: RpcError) -> NodeGrammarViolation:
        return node_grammar.violation(
            self.grammar_case,
            rule,
            data,
            direction=self.direction,
            connection=self.connection,
            error=error,
        )

    def receive_data(self, data: bytes) -> list[RpcMessage]:
        if self._break is not None:  # no message after a broken frame: the same violation again
            raise node_grammar.again(self._break)
        try:
            messages = super().receive_data(data)
        except RpcError as exc:
            if exc.reason == "body length exceeds limit":
                raise violation_from(exc, "the target's RPC stream is malformed", data) from None
            self._break = self._violation(
                f"RPC bytes that break the RPC message format ({exc})", data, exc
            )
            raise self._break from None
        judged = []
        for m in messages:
            msg = TargetRpcMessage(m.req, m.stream, m.end, m.body_type, m.body)
            try:
                # The body as its type says (the base class's readers: this
                # class's would wrap the error): JSON parses, STRING is UTF-8.
                if msg.body_type is BodyType.JSON:
                    RpcMessage.json(msg)
                elif msg.body_type is BodyType.STRING:
                    RpcMessage.text(msg)
            except RpcError as exc:
                # A frozen dataclass: set as its __post_init__ sets fields.
                object.__setattr__(
                    msg,
                    "grammar_violation",
                    self._violation(
                        f"an RPC message (req {m.req}) whose {m.body_type.name} body does not read as "
                        f"its body type says ({exc})",
                        m.encode(),
                        exc,
                    ),
                )
            judged.append(msg)
        self.decoded += len(judged)
        return judged


class TargetBoxStreamDecoder(BoxStreamDecoder):
    """Decrypts the target's box stream; bad boxes and a header declaring
    more than MAX_BOX_BODY bytes are ProtocolViolations (and BoxStreamErrors,
    whose ``bodies`` still hold what decoded before the bad bytes)."""

    def __init__(self, key: bytes, nonce: bytes) -> None:
        super().__init__(key, nonce, max_body=MAX_BOX_BODY)
        self.violation: ProtocolViolation | None = None

    def receive_data(self, data: bytes) -> list[bytes]:
        if self.violation is not None:
            raise self.violation  # once failed, every later read fails the same way
        try:
            with target_bytes("the target's box stream does not decrypt", data, BoxStreamError):
                return super().receive_data(data)
        except ProtocolViolation as violation:
            self.violation = violation
            raise


def server_public_key(feed_id: str) -> bytes:
    return feed_id_to_public(feed_id)


@dataclass
class HandshakeOutcome:
    params: shs.BoxStreamParams
    msg1: bytes
    msg2: bytes
    msg3: bytes
    msg4: bytes


async def client_handshake(
    conn: TcpConnection, network_key: bytes, keypair: Keypair, server_public: bytes
) -> HandshakeOutcome:
    """The four handshake steps as client; a target answer that does not
    verify fails the case, quoting the bytes."""
    hs = shs.ClientHandshake(network_key, keypair, server_public)
    msg1 = hs.data_to_send()
    await conn.send(msg1, "msg1: client hello")
    msg2 = await conn.receive_exactly(shs.HELLO_SIZE, "msg2 (server hello, 64 bytes)")
    try:
        msg3 = hs.receive_data(msg2)
    except shs.HandshakeError as exc:
        raise ProtocolViolation(
            f"target's msg2 (server hello) does not verify ({exc})", msg2
        ) from None
    await conn.send(msg3, "msg3: client authenticate")
    msg4 = await conn.receive_exactly(shs.SERVER_ACCEPT_SIZE, "msg4 (server accept, 80 bytes)")
    try:
        hs.receive_data(msg4)
    except shs.HandshakeError as exc:
        raise ProtocolViolation(
            f"target's msg4 (server accept) does not verify ({exc})", msg4
        ) from None
    return HandshakeOutcome(hs.result, msg1, msg2, msg3, msg4)


class SsbClientSession:
    """An RPC session over a box stream, as the requester, on one connection.

    Receiving keeps the raw RpcMessages (flags, request number, body bytes)
    because the cases judge exactly those.
    """

    def __init__(self, conn: TcpConnection, params: shs.BoxStreamParams) -> None:
        self.conn = conn
        self.params = params
        self.encoder = BoxStreamEncoder(params.encrypt_key, params.encrypt_nonce)
        self.decoder = TargetBoxStreamDecoder(params.decrypt_key, params.decrypt_nonce)
        self.rpc_decoder = TargetRpcDecoder(
            MAX_RPC_BODY, SERVER_GRAMMAR, "server to harness", conn.label
        )
        self.next_req = 1
        self.inbox: list[RpcMessage] = []
        self.inbox_bytes = 0
        self.box_bodies: list[bytes] = []
        """The first MAX_KEPT_BOX_BODIES box bodies."""
        self.box_goodbye = False
        self.rpc_goodbye = False
        self._pending_violation: ProtocolViolation | None = None
        self.last_received = b""
        """The tail of the last chunk the target sent (for failure messages)."""

    @classmethod
    async def open(
        cls, conn: TcpConnection, network_key: bytes, keypair: Keypair, server_public: bytes
    ) -> SsbClientSession:
        outcome = await client_handshake(conn, network_key, keypair, server_public)
        return cls(conn, outcome.params)

    # -- sending
    async def send_rpc_bytes(self, data: bytes, note: str) -> None:
        self.conn.trace.record("sent-plain", data, note)
        await self.conn.send(self.encoder.encode(data), f"box stream carrying: {note}")

    async def send_boxes_in_one_write(
        self, messages: list[RpcMessage], notes: list[str], what: str
    ) -> None:
        """One box per RPC message (several messages in one box, or one over
        two boxes, are rules of their own), every box in one write."""
        boxes = b""
        for msg, note in zip(messages, notes, strict=True):
            self.conn.trace.record("sent-plain", msg.encode(), note)
            boxes += self.encoder.encode(msg.encode())
        await self.conn.send(boxes, what)

    def request_message(
        self, name: list[str], args: list, type_: str = "source", req: int | None = None
    ) -> RpcMessage:
        if req is None:
            req = self.next_req
            self.next_req += 1
        body = {"name": name, "type": type_, "args": args}
        return RpcMessage.from_json(req, body, stream=type_ != "async")

    async def request(self, name: list[str], args: list, type_: str = "source") -> int:
        msg = self.request_message(name, args, type_)
        await self.send_rpc_bytes(msg.encode(), f"RPC request {msg.req}: {json.dumps(msg.json())}")
        return msg.req

    async def end_stream(self, req: int, note: str = "") -> None:
        msg = RpcMessage.from_json(req, True, stream=True, end=True)
        await self.send_rpc_bytes(msg.encode(), note or f"RPC end of our stream {req}")

    async def goodbye(self) -> None:
        await self.send_rpc_bytes(rpc.GOODBYE, "RPC goodbye")
        await self.conn.send(self.encoder.goodbye(), "box stream goodbye")

    # -- receiving
    async def _pump(self, deadline: float | None = None) -> bool:
        """Read once; decode boxes and RPC messages into the inbox. Returns
        False when the target closed the connection. Bytes that do not
        decode fail the case (ProtocolViolation); messages that decoded
        before them are delivered first."""
        if self._pending_violation is not None:
            raise self._pending_violation
        data = await self.conn.receive_some(deadline)
        if not data:
            return False
        self.last_received = data[-SHOWN_BYTES:]
        try:
            bodies = self.decoder.receive_data(data)
        except BoxStreamError as violation:  # a TargetBoxStreamDecoder raises ProtocolViolations
            assert isinstance(violation, ProtocolViolation)
            if not violation.bodies:
                raise
            bodies, self._pending_violation = violation.bodies, violation
        if self.decoder.ended:
            self.box_goodbye = True
        for body in bodies:
            if len(self.box_bodies) < MAX_KEPT_BOX_BODIES:
                self.box_bodies.append(body)
            try:
                messages = self.rpc_decoder.receive_data(body)
            except ProtocolViolation:
                self.conn.trace.record(
                    "received-plain", body, "box body whose RPC bytes the harness refused"
                )
                raise
            for msg in messages:
                self.conn.trace.record("received-plain", msg.encode(), f"RPC {describe(msg)[:160]}")
                self._queue(msg)
        if self.rpc_decoder.ended:
            self.rpc_goodbye = True
        return True

    def _queue(self, msg: RpcMessage) -> None:
        if (
            len(self.inbox) >= MAX_QUEUED_MESSAGES
            or self.inbox_bytes + len(msg.body) > MAX_QUEUED_BYTES
        ):
            raise ProtocolViolation(
                f"target sent more than {len(self.inbox)} messages / {self.inbox_bytes} bytes that no case "
                f"has asked for (requests {sorted({-m.req for m in self.inbox[:1000]})[:10]}...); the harness "
                "buffers no more. The last one",
                msg.encode(),
            )
        self.inbox.append(msg)
        self.inbox_bytes += len(msg.body)

    def _take(self, index: int) -> RpcMessage:
        msg = self.inbox.pop(index)
        self.inbox_bytes -= len(msg.body)
        return msg

    async def next_message(
        self, req: int, what: str, deadline: float | Deadline | None = None
    ) -> RpcMessage:
        """The next message the target sends on our request ``req`` (it
        answers with ``-req``). Messages on other request numbers stay queued.

        The deadline is absolute for this message: every read toward it
        shares it, so a target trickling bytes, or sending messages on other
        request numbers, cannot extend it. A :class:`Deadline` may be shared
        with the caller (a whole stream)."""
        if not isinstance(deadline, Deadline):
            deadline = Deadline(self.conn.deadline if deadline is None else deadline)
        while True:
            for i, msg in enumerate(self.inbox):
                if msg.req == -req:
                    return self._take(i)
            if self.box_goodbye or self.rpc_goodbye:
                raise AssertionError(
                    f"target ended the session (goodbye) while the case awaited {what}"
                )
            try:
                if deadline.expired:
                    raise DeadlineExceeded
                alive = await self._pump(deadline.remaining())
            except DeadlineExceeded:
                raise DeadlineExceeded(f"no {what} within {deadline.seconds} s") from None
            if not alive:
                raise PeerClosed(
                    f"target closed the connection while the case awaited {what}"
                    + self._unfinished_box()
                )

    def _unfinished_box(self) -> str:
        """Where a closing target left its box stream, for the failure message."""
        needed = self.decoder.bytes_needed
        if self.decoder.ended or needed in (0, boxstream.HEADER_SIZE):
            return ""
        return (
            f", in the middle of a box ({needed} more bytes were due); the last bytes it sent: "
            f"{self.last_received.hex()}"
        )

    async def collect_stream(
        self, req: int, what: str, deadline: float | None = None, answer_end: bool = True
    ) -> tuple[list[RpcMessage], RpcMessage]:
        """Stream data on ``req`` until the target's end message; returns both.
        Answers the end with our own, as a requester must.

        The end is the message awaited: the whole stream must arrive within
        the deadline, and within MAX_STREAM_ITEMS items and MAX_QUEUED_BYTES
        bytes, so a stream that never ends fails the case in bounded time
        and memory."""
        items: list[RpcMessage] = []
        size = 0
        stream_deadline = Deadline(self.conn.deadline if deadline is None else deadline)
        while True:
            try:
                msg = await self.next_message(req, what, stream_deadline)
            except DeadlineExceeded:
                if not items:
                    raise
                raise DeadlineExceeded(
                    f"the stream of {what} did not end within {stream_deadline.seconds} s: {len(items)} items "
                    f"({size} bytes) came, the last {describe(items[-1])[:300]}"
                ) from None
            if msg.end:
                if answer_end:
                    await self.end_stream(
                        req, f"RPC end of stream {req} (answering the target's end)"
                    )
                return items, msg
            items.append(msg)
            size += len(msg.body)
            if len(items) > MAX_STREAM_ITEMS or size > MAX_QUEUED_BYTES:
                raise ProtocolViolation(
                    f"target sent more than {min(len(items), MAX_STREAM_ITEMS)} items / {size} bytes on stream {req} "
                    f"({what}) without ending it; the harness reads no more. The last item",
                    msg.encode(),
                )

    async def answers_until_end(
        self, reqs: dict[int, str], deadline: float | None = None
    ) -> tuple[dict[int, list[RpcMessage]], dict[int, RpcMessage]]:
        """The stream items on each request of ``reqs`` (number -> what it
        is, for the trace) and the end of each stream that ended, read as they
        come until every stream ended, the deadline passed (one for all) or
        MAX_STREAM_ITEMS items came, or the target closed the session after
        sending some. Unlike :meth:`collect_stream`, a stream still open then
        is no failure: the caller judges what came (a missing end is a rule of
        its own). A session closed before anything came is a failure, as in
        :meth:`next_message`. Ends are answered with ours."""
        items: dict[int, list[RpcMessage]] = {req: [] for req in reqs}
        ends: dict[int, RpcMessage] = {}
        window = Deadline(self.conn.deadline if deadline is None else deadline)
        count = 0
        while len(ends) < len(reqs):
            kept: list[RpcMessage] = []
            for msg in self.inbox:
                req = -msg.req
                if req not in items or req in ends:
                    kept.append(msg)  # another request's, or after its end: left for the caller
                    continue
                self.inbox_bytes -= len(msg.body)
                if msg.end:
                    ends[req] = msg
                    await self.end_stream(
                        req, f"RPC end of stream {req} (answering the target's end: {reqs[req]})"
                    )
                else:
                    items[req].append(msg)
                    count += 1
            self.inbox = kept
            if len(ends) == len(reqs):
                break
            if count >= MAX_STREAM_ITEMS:
                self.conn.trace.event(
                    f"{count} stream items read: the harness reads no more, and judges those"
                )
                break
            came = count or ends
            if self.box_goodbye or self.rpc_goodbye:
                if came:
                    break
                raise AssertionError(
                    f"target ended the session (goodbye) while the case awaited "
                    f"{' and '.join(reqs.values())}"
                )
            if window.expired:
                break
            try:
                alive = await self._pump(window.remaining())
            except DeadlineExceeded:
                break
            if not alive:
                if came:
                    break  # judged by what came; a stream left open is a rule of its own
                raise PeerClosed(
                    f"target closed the connection while the case awaited "
                    f"{' and '.join(reqs.values())}" + self._unfinished_box()
                )
        return items, ends

    async def quiet_for(self, req: int, seconds: float) -> list[RpcMessage]:
        """Everything the target sends on ``req`` within ``seconds`` (used to
        check that nothing comes); at most MAX_STREAM_ITEMS messages."""
        got: list[RpcMessage] = []
        window = Deadline(seconds)
        while len(got) < MAX_STREAM_ITEMS:
            try:
                got.append(await self.next_message(req, "more messages", window))
            except DeadlineExceeded:
                return got
        return got


async def expect_hang_up_without_writing(conn: TcpConnection, after: str) -> None:
    """The spec's rule for invalid handshake messages: the target closes the
    connection, and writes not one byte more."""
    closed, data = await conn.await_close()
    assert not data, (
        f"after {after}, the target wrote {len(data)} byte(s) instead of hanging up "
        f"silently: {short_hex(data, 96)}"
    )
    assert closed, (
        f"after {after}, the target kept the connection open for {conn.deadline} s without closing it"
    )


def describe(msg: RpcMessage) -> str:
    """A message as a failure message shows it: flags, number, body, bytes."""
    body: Any
    try:
        body = msg.value()
    except RpcError:  # also the ProtocolViolation of a TargetRpcMessage
        body = msg.body
    shown = body.hex() if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False)
    if len(shown) > 300:
        shown = shown[:300] + "..."
    return (
        f"req={msg.req} stream={msg.stream} end={msg.end} type={msg.body_type.name} "
        f"body={shown} (bytes {short_hex(msg.encode(), 96)})"
    )


def error_body(msg: RpcMessage) -> Any:
    """The body of an end/err message, or None if it is not JSON. A JSON
    body that does not parse is the grammar case's (raised: the reading
    case is blocked by it), not a body of another kind."""
    try:
        return msg.json()
    except NodeGrammarViolation:
        raise
    except Exception:
        return None


def flip_byte(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


def random_bytes(size: int) -> bytes:
    return os.urandom(size)

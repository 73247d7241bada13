"""The Ripple host reference node over TCP (TLS optional): asyncio around the
sans-I/O :class:`~.session.RippleSession`.

:class:`RippleNode` listens (the acceptor of every association);
:func:`run_initiator` connects to a host (the initiator), exchanges host-ids,
sends the given messages and waits for their answers. In both roles the
node answers the peer's MSGs with :func:`answer_for`, the reference's
message service (docs/ripplehost-profile.md, "The reference node's
messages"):

=========================================  ======================================================
MSG body                                   answer
=========================================  ======================================================
``{"type":"ping"}``                        RPY ``{"type":"pong"}``
``{"type":"echo", ...}``                   RPY with the same body; with ``"chunk": N`` (1..65536)
                                           the RPY is sent in frames of at most N content bytes
``{"type":"hold","seconds":S}``            RPY ``{"type":"held"}`` after S seconds (0 < S <= 30):
                                           keeps a MSG outstanding, so a peer can test msgno reuse
``{"type":"ping-me","count":N}``           RPY ``{"type":"ok","count":N}``, then N MSGs
                                           ``{"type":"ping"}`` of the node's own (1 <= N <= 16):
                                           shows the node's msgno parity
any other type                             ERR ``{"type":"error","error":"unknown-type",...}``
=========================================  ======================================================

A bad ``seconds``, ``count`` or ``chunk`` gets ERR ``bad-request``.

Output (one line each, flushed, through ``emit``): ``RIPPLE_HOST_ID``,
``RIPPLE_MSG`` (a MSG of the peer), ``RIPPLE_ANSWER`` (the RPY or ERR to one
of ours), ``RIPPLE_CLOSED``, each followed by a JSON object.

Robustness: every read has a deadline (the host-id deadline, then the idle
timeout, or the initiator's own), every write :data:`WRITE_TIMEOUT`, reads
are at most :data:`READ_SIZE` bytes and the codec bounds everything it
buffers; connections are capped; nothing a peer sends can raise out of a
handler.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..variants import UNPROMPTED_TRAFFIC, Shape, shape_writer
from .variants import UNPROMPTED_INTERVAL
from .frame import DEFAULT_MAX_SIZE, Message
from .session import (
    AnswerReceived,
    Closed,
    Event,
    HostIdentified,
    MessageReceived,
    RippleSession,
    Role,
    SessionError,
    error_body,
)

log = logging.getLogger(__name__)

READ_SIZE = 65536
WRITE_TIMEOUT = 10.0
HANDSHAKE_TIMEOUT = 10.0
DEFAULT_HOST_ID_TIMEOUT = 10.0
"""Seconds an initiator gets, once connected, to complete its host-id MSG."""
DEFAULT_IDLE_TIMEOUT = 120.0
DEFAULT_MAX_CONNECTIONS = 64
MAX_HOLD_SECONDS = 30.0
MAX_PING_ME = 16

Emit = Callable[[str, dict[str, Any]], None]


# ------------------------------------------------------------------ the message service


@dataclass(frozen=True)
class Answer:
    """What :func:`answer_for` decides: RPY or ERR, its body, its chunk size,
    how long to wait before sending it, and how many pings to send after."""

    error: bool
    body: dict[str, Any]
    chunk_size: int | None = None
    delay: float = 0.0
    pings: int = 0


def _bad(text: str) -> Answer:
    return Answer(True, error_body("bad-request", text))


def answer_for(body: dict[str, Any]) -> Answer:
    """The reference node's answer to a MSG body (pure; see the module table)."""
    kind = body["type"]
    if kind == "ping":
        return Answer(False, {"type": "pong"})
    if kind == "echo":
        chunk = body.get("chunk")
        if chunk is None:
            return Answer(False, body)
        if type(chunk) is not int or not 1 <= chunk <= DEFAULT_MAX_SIZE:
            return _bad(f"chunk must be an integer in 1..{DEFAULT_MAX_SIZE}")
        return Answer(False, body, chunk_size=chunk)
    if kind == "hold":
        seconds = body.get("seconds")
        if type(seconds) not in (int, float) or not 0 < seconds <= MAX_HOLD_SECONDS:
            return _bad(f"seconds must be a number in (0, {MAX_HOLD_SECONDS:g}]")
        return Answer(False, {"type": "held"}, delay=float(seconds))
    if kind == "ping-me":
        count = body.get("count")
        if type(count) is not int or not 1 <= count <= MAX_PING_ME:
            return _bad(f"count must be an integer in 1..{MAX_PING_ME}")
        return Answer(False, {"type": "ok", "count": count}, pings=count)
    return Answer(
        True,
        error_body(
            "unknown-type",
            f"this host does not know messages of type {kind!r}",
            **{"message-type": kind},
        ),
    )


# ------------------------------------------------------------------ messages to send


@dataclass(frozen=True)
class Outgoing:
    """A MSG to send: the body (a JSON object), optionally as a node frame
    (``to_user``/``from_user``) and chunked (``chunk_size``)."""

    body: dict[str, Any]
    to_user: str | None = None
    from_user: str | None = None
    chunk_size: int | None = None


def parse_outgoing(items: Any) -> list[Outgoing]:
    """The ``--send FILE`` format: a JSON array whose items are either a
    message object (it has a ``"type"``: sent as a host MSG) or
    ``{"body": {...}, "to_user": U, "from_user": U, "chunk_size": N}`` (no
    ``"type"``; users and chunk size optional). ValueError names a bad item."""
    if not isinstance(items, list):
        raise ValueError("the file must hold a JSON array of messages")
    result = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValueError(f"item {index} is not a JSON object")
        if "type" in item:
            item = {"body": item}
        body = item.get("body")
        if not isinstance(body, dict) or not isinstance(body.get("type"), str) or not body["type"]:
            raise ValueError(f"item {index}: the message must be a JSON object with a type")
        unknown = set(item) - {"body", "to_user", "from_user", "chunk_size"}
        if unknown:
            raise ValueError(f"item {index}: unknown keys {sorted(unknown)}")
        to_user, from_user = item.get("to_user"), item.get("from_user")
        if (to_user is None) != (from_user is None):
            raise ValueError(f"item {index}: a node frame needs both to_user and from_user")
        chunk = item.get("chunk_size")
        if chunk is not None and (type(chunk) is not int or not 1 <= chunk <= DEFAULT_MAX_SIZE):
            raise ValueError(
                f"item {index}: chunk_size must be an integer in 1..{DEFAULT_MAX_SIZE}"
            )
        result.append(Outgoing(body, to_user, from_user, chunk))
    return result


def message_json(message: Message) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "kind": message.type,
        "msgno": message.msgno,
        "version": message.version,
        "frames": message.frames,
        "body": message.body,
    }
    if message.is_node:
        shown["to_user"], shown["from_user"] = message.to_user, message.from_user
    return shown


def print_emit(kind: str, payload: dict[str, Any]) -> None:
    """The default ``emit``: ``RIPPLE_<KIND> {json}`` on stdout."""
    print(
        f"RIPPLE_{kind} {json.dumps(payload, separators=(',', ':'), ensure_ascii=True)}", flush=True
    )


# ------------------------------------------------------------------ one association over streams


@dataclass
class AssociationResult:
    """How an association ended, for the initiator's exit status."""

    peer_hostname: str | None = None
    answers: list[AnswerReceived] = field(default_factory=list)
    close_reason: str | None = None
    timed_out: bool = False


class Association:
    """Runs one session over a (reader, writer) pair until it closes.

    ``messages`` are sent once the host-id exchange is done (pipelined);
    ``until_answered`` makes the association end (``stay`` seconds after)
    once every one of them is answered; ``deadline`` (loop time) bounds the
    whole association for an initiator."""

    def __init__(
        self,
        session: RippleSession,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        emit: Emit,
        peer: str,
        messages: Sequence[Outgoing] = (),
        until_answered: bool = False,
        stay: float = 0.0,
        deadline: float | None = None,
        host_id_timeout: float = DEFAULT_HOST_ID_TIMEOUT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        variants: frozenset[str] = frozenset(),
        shape: Shape = Shape(),
    ) -> None:
        self.session = session
        self.reader = reader
        self.writer = shape_writer(writer, shape)
        self.unprompted = UNPROMPTED_TRAFFIC in variants
        self._own_pings: set[int] = set()
        """msgnos of the pings sent unprompted: their answers are not answers
        to the messages the initiator was asked to send."""
        self.emit = emit
        self.peer = peer
        self.messages = list(messages)
        self.until_answered = until_answered
        self.stay = stay
        self.deadline = deadline
        self.host_id_timeout = host_id_timeout
        self.idle_timeout = idle_timeout
        self.result = AssociationResult()
        self._timers: set[asyncio.Task] = set()
        self._expected = 0
        self._done_at: float | None = None

    def _write_pending(self) -> None:
        data = self.session.data_to_send()
        if data and not self.writer.is_closing():
            self.writer.write(data)

    async def _flush(self) -> None:
        self._write_pending()
        await asyncio.wait_for(self.writer.drain(), WRITE_TIMEOUT)

    def _read_timeout(self, loop_time: float) -> tuple[float, str]:
        if self._done_at is not None:
            return max(0.0, self._done_at - loop_time), "done"
        if self.deadline is not None:
            return max(0.0, self.deadline - loop_time), "timeout"
        if not self.session.identified:
            return self.host_id_timeout, "no host-id in time"
        return self.idle_timeout, "idle"

    async def run(self) -> AssociationResult:
        loop = asyncio.get_running_loop()
        session = self.session
        try:
            session.start()
            if session.may_send:
                self._send_messages()
            await self._flush()
            while not session.closed:
                timeout, why = self._read_timeout(loop.time())
                try:
                    data = await asyncio.wait_for(self.reader.read(READ_SIZE), timeout)
                except TimeoutError:
                    if why == "timeout":
                        self.result.timed_out = True
                    self._handle(session.close("done" if why == "done" else f"closing: {why}"))
                    break
                events = session.receive_data(data) if data else session.receive_eof()
                self._handle(events)
                await self._flush()
        except (ConnectionError, ssl.SSLError, OSError, TimeoutError) as exc:
            self._handle(session.close(f"connection lost: {exc}"))
        finally:
            for task in self._timers:
                task.cancel()
            self.result.close_reason = session.close_reason
            await self._close()
        return self.result

    async def _close(self) -> None:
        """Flush what the session queued before it closed, then close (bounded)."""
        try:
            self._write_pending()
            self.writer.close()
            await asyncio.wait_for(self.writer.wait_closed(), WRITE_TIMEOUT)
        except (ConnectionError, ssl.SSLError, OSError, TimeoutError):
            self.writer.transport.abort()

    def _handle(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, HostIdentified):
                self.result.peer_hostname = event.hostname
                self.emit("HOST_ID", {"peer": self.peer, "hostname": event.hostname})
                if self.unprompted:
                    self._ping_unprompted()
                    self._start_timer(self._keep_pinging())
                self._send_messages()
            elif isinstance(event, MessageReceived):
                self.emit("MSG", {"peer": self.peer, **message_json(event.message)})
                self._serve(event.message)
            elif isinstance(event, AnswerReceived):
                if event.message.msgno in self._own_pings:
                    self._own_pings.discard(event.message.msgno)
                    continue
                self.result.answers.append(event)
                self.emit("ANSWER", {"peer": self.peer, **message_json(event.message)})
                self._check_done()
            elif isinstance(event, Closed):
                self.emit(
                    "CLOSED", {"peer": self.peer, "reason": event.reason, "by_peer": event.by_peer}
                )

    def _send_messages(self) -> None:
        for outgoing in self.messages:
            self.session.send_message(
                outgoing.body,
                to_user=outgoing.to_user,
                from_user=outgoing.from_user,
                chunk_size=outgoing.chunk_size,
            )
            self._expected += 1
        self.messages = []
        self._check_done()

    def _check_done(self) -> None:
        if (
            self.until_answered
            and self.session.identified
            and len(self.result.answers) >= self._expected
            and self._done_at is None
        ):
            self._done_at = asyncio.get_running_loop().time() + self.stay

    def _start_timer(self, coroutine: Any) -> None:
        task = asyncio.create_task(coroutine)
        self._timers.add(task)
        task.add_done_callback(self._timers.discard)

    def _ping_unprompted(self) -> None:
        """Variant unprompted-traffic: a MSG of the node's own, not asked for."""
        if self.session.closed:
            return
        try:
            self._own_pings.add(self.session.send_message({"type": "ping"}))
        except SessionError:
            pass  # the session's bound on outstanding MSGs: the peer answers none; stop adding

    async def _keep_pinging(self) -> None:
        while not self.session.closed:
            await asyncio.sleep(UNPROMPTED_INTERVAL)
            self._ping_unprompted()
            self._write_pending()

    def _serve(self, message: Message) -> None:
        answer = self.session.fault_points.apply(
            "service-answer", answer_for(message.body), body=message.body
        )
        if answer.delay:
            self._start_timer(self._later(message.msgno, answer))
            return
        self._answer(message.msgno, answer)

    async def _later(self, msgno: int, answer: Answer) -> None:
        await asyncio.sleep(answer.delay)
        self._answer(msgno, answer)
        self._write_pending()

    def _answer(self, msgno: int, answer: Answer) -> None:
        session = self.session
        if session.closed:
            return
        session.reply(msgno, answer.body, error=answer.error, chunk_size=answer.chunk_size)
        for _ in range(answer.pings):
            try:
                session.send_message({"type": "ping"})
            except SessionError:
                break
            self._expected += 1


# ------------------------------------------------------------------ TLS


def server_tls_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """TLS 1.2 or higher, no client certificate (the text does not require
    one; hostnames "can be verified" against the server's)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


def client_tls_context(ca_file: str | None) -> ssl.SSLContext:
    """With ``ca_file``: the server's chain must verify against it (hostname
    not checked: peers are often reached by address). Without: no
    verification (the text makes it optional)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    else:
        context.verify_mode = ssl.CERT_NONE
    return context


# ------------------------------------------------------------------ the acceptor


class RippleNode:
    """The acceptor: ``host, port = await start(host, port)``, then ``await close()``.
    Every association runs a :class:`RippleSession` in the acceptor role and
    :class:`Association`; ``messages`` are sent to each initiator once its
    host-id is exchanged."""

    def __init__(
        self,
        hostname: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        faults: frozenset = frozenset(),
        messages: Sequence[Outgoing] = (),
        host_id_timeout: float = DEFAULT_HOST_ID_TIMEOUT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        emit: Emit = print_emit,
        session_options: dict[str, int] | None = None,
        variants: frozenset[str] = frozenset(),
        shape: Shape = Shape(),
    ) -> None:
        RippleSession(Role.ACCEPTOR, hostname)  # validates the hostname now, not per connection
        self.hostname = hostname
        self.ssl_context = ssl_context
        self.faults = frozenset(faults)
        self.messages = list(messages)
        self.host_id_timeout = host_id_timeout
        self.idle_timeout = idle_timeout
        self.max_connections = max_connections
        self.emit = emit
        self.session_options = dict(session_options or {})
        self.variants = frozenset(variants)
        self.shape = shape
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task] = set()

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(
            self._accept,
            host,
            port,
            ssl=self.ssl_context,
            ssl_handshake_timeout=HANDSHAKE_TIMEOUT if self.ssl_context else None,
            limit=READ_SIZE,
        )
        bound = self._server.sockets[0].getsockname()
        return bound[0], bound[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if len(self._handlers) >= self.max_connections:
            log.warning("refusing a connection: %d open", len(self._handlers))
            writer.transport.abort()
            return
        self._handlers.add(task)
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        try:
            session = RippleSession(
                Role.ACCEPTOR, self.hostname, faults=self.faults, **self.session_options
            )
            await Association(
                session,
                reader,
                writer,
                emit=self.emit,
                peer=peer,
                messages=self.messages,
                host_id_timeout=self.host_id_timeout,
                idle_timeout=self.idle_timeout,
                variants=self.variants,
                shape=self.shape,
            ).run()
        except asyncio.CancelledError:
            return  # only close() cancels handlers
        except Exception:  # a bug, not the peer's doing: log it, never take the node down
            log.exception("association handler failed")
            writer.transport.abort()
        finally:
            self._handlers.discard(task)


# ------------------------------------------------------------------ the initiator


class ConnectError(Exception):
    """The initiator could not reach the peer (or not in time)."""


async def run_initiator(
    peer_host: str,
    peer_port: int,
    hostname: str,
    messages: Sequence[Outgoing],
    *,
    timeout: float,
    stay: float = 0.0,
    ssl_context: ssl.SSLContext | None = None,
    faults: frozenset = frozenset(),
    emit: Emit = print_emit,
    variants: frozenset[str] = frozenset(),
    shape: Shape = Shape(),
) -> AssociationResult:
    """Connect, send the host-id, then ``messages`` (pipelined), serve the
    acceptor's MSGs, and close ``stay`` seconds after the last answer (or at
    ``timeout`` seconds from the start, ``result.timed_out``)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                peer_host,
                peer_port,
                ssl=ssl_context,
                limit=READ_SIZE,
                ssl_handshake_timeout=HANDSHAKE_TIMEOUT if ssl_context else None,
            ),
            timeout,
        )
    except TimeoutError:
        raise ConnectError(
            f"cannot connect to {peer_host}:{peer_port} within {timeout:g}s"
        ) from None
    except (OSError, ssl.SSLError) as exc:
        raise ConnectError(f"cannot connect to {peer_host}:{peer_port}: {exc}") from None
    session = RippleSession(Role.INITIATOR, hostname, faults=faults)
    association = Association(
        session,
        reader,
        writer,
        emit=emit,
        peer=f"{peer_host}:{peer_port}",
        messages=messages,
        until_answered=True,
        stay=stay,
        deadline=deadline,
        variants=variants,
        shape=shape,
    )
    return await association.run()

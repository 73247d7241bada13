"""A small asyncio BTP node over WebSocket: the reference target and client.

It runs :class:`~.session.BtpSession` over the ``websockets`` library:
:class:`BtpNode` listens and serves any number of authenticated clients
(sharing one :class:`~.session.Ledger`, the balance their Transfers
increase); :func:`run_client` connects to any BTP server, authenticates,
sends requests and serves the server's requests for a while.  Both answer
Messages, Transfers and the adapter's ``balance`` query
(``docs/btp-adapter.md``) the way session.py documents.

Deliberately small: no reconnection, no persistence.  It exists so that the
conformance suites have a known-good peer and, through
:class:`~.session.Fault`, known-bad ones the suites must flag.

Robustness: every read has a deadline (the auth deadline, then the idle
timeout, or the caller's); every write has one too; a WebSocket message is at
most :data:`MAX_MESSAGE_SIZE` bytes (a larger one makes ``websockets`` close
the connection with 1009); text messages and binary messages that do not
decode are unreadable packets, ignored without an answer; nothing a peer
sends can raise out of a connection handler.  A text message that is not
UTF-8 is a WebSocket protocol error, so ``websockets`` closes with 1007.
Tokens are never logged or printed (an ``auth_token`` entry is shown as
``<redacted>``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from ..variants import UNPROMPTED_TRAFFIC, Shape, ShapedTransport
from .packet import (
    MAX_AMOUNT,
    ContentType,
    Error,
    Packet,
    ProtocolDataEntry,
    Response,
    Transfer,
    packet_to_json,
)
from .session import (
    AUTH_TOKEN,
    Authenticated,
    AuthFailed,
    BalanceChanged,
    BtpSession,
    Close,
    Fault,
    Ledger,
    RequestReceived,
    ResponseReceived,
    SessionEvent,
    SessionState,
    UnexpectedPacket,
    UnreadablePacket,
    balance_request_entry,
    parse_balance,
    token_checker,
)
from .variants import (
    FRAGMENTED_MESSAGES,
    REORDER_WINDOW,
    REORDERED_ANSWERS,
    UNPROMPTED_INTERVAL,
    UNPROMPTED_NAME,
    UNPROMPTED_OUTSTANDING,
)

log = logging.getLogger(__name__)

DEFAULT_AUTH_TIMEOUT = 5.0
"""Seconds a client gets to send its auth Message (server), or a server to
answer it (client)."""
DEFAULT_IDLE_TIMEOUT = 120.0
"""Seconds without a message received before the server closes a connection."""
DEFAULT_REQUEST_TIMEOUT = 10.0
"""Seconds to wait for the answer to one of our requests."""
WRITE_TIMEOUT = 10.0
MAX_MESSAGE_SIZE = 64 * 1024 + 1024
"""Largest WebSocket message accepted: 64 KiB of protocol data plus room for
the BTP header and envelope.  BTP itself sets no limit; ILP packets are at
most 32 KiB."""
MAX_CONNECTIONS = 64
CLOSE_POLICY = 1008
CLOSE_NORMAL = 1000

_WS_OPTIONS: dict[str, Any] = {
    "max_size": MAX_MESSAGE_SIZE,
    "max_queue": 16,
    "compression": None,  # the bytes on the wire are the BTP packets, nothing else
    "open_timeout": 10,
    "close_timeout": 2,
    "ping_interval": 20,
    "ping_timeout": 20,
}


def _shaped(base: type[ServerConnection | ClientConnection], shape: Shape) -> Any:
    """``base`` whose transport writes leave shaped (variants split-writes,
    coalesce-writes, late-answers): the WebSocket connection writes frames
    (and the HTTP upgrade) to ``self.transport`` with ``write``/``write_eof``,
    ends it with ``close`` or ``abort``, and flow control stays the real
    transport's (see reference_impl/variants.py, ShapedTransport)."""

    class Shaped(base):  # type: ignore[valid-type, misc]
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(ShapedTransport(transport, shape))  # type: ignore[arg-type]

        def connection_lost(self, exc: Exception | None) -> None:
            self.transport.abort()  # drop what the shaper still holds: the socket is gone
            super().connection_lost(exc)

    Shaped.__name__ = Shaped.__qualname__ = f"Shaped{base.__name__}"
    return Shaped


# --------------------------------------------------------------------------- requests and their output


@dataclass(frozen=True)
class RequestSpec:
    """One request to send: a Message (one primary entry), a Transfer, or the balance query."""

    kind: str  # "message", "transfer" or "balance"
    name: str = ""
    content_type: int = ContentType.TEXT_PLAIN_UTF8
    data: bytes = b""
    amount: int = 0

    @classmethod
    def message(
        cls, name: str, data: bytes | str, content_type: int = ContentType.TEXT_PLAIN_UTF8
    ) -> RequestSpec:
        if isinstance(data, str):
            data = data.encode("utf-8")
        return cls("message", name, int(content_type), data)

    @classmethod
    def transfer(cls, amount: int) -> RequestSpec:
        if not 0 <= amount <= MAX_AMOUNT:
            raise ValueError(f"amount must be in 0..{MAX_AMOUNT}, got {amount}")
        return cls("transfer", amount=amount)

    @classmethod
    def balance(cls) -> RequestSpec:
        return cls("balance")

    @property
    def label(self) -> str:
        if self.kind == "transfer":
            return f"transfer:{self.amount}"
        if self.kind == "balance":
            return "balance"
        return f"message:{self.name}"

    def send(self, session: BtpSession) -> int:
        if self.kind == "transfer":
            return session.send_transfer(self.amount)
        if self.kind == "balance":
            return session.request_balance()
        return session.send_message((ProtocolDataEntry(self.name, self.content_type, self.data),))


@dataclass(frozen=True)
class RequestResult:
    """What came back for one :class:`RequestSpec` (``packet`` None: nothing in time)."""

    spec: RequestSpec
    request_id: int
    packet: Response | Error | None

    @property
    def ok(self) -> bool:
        return isinstance(self.packet, Response)


def _entry_json(entry: ProtocolDataEntry) -> dict:
    if entry.name == AUTH_TOKEN:
        return {"name": entry.name, "content_type": int(entry.content_type), "data": "<redacted>"}
    out: dict[str, Any] = {
        "name": entry.name,
        "content_type": int(entry.content_type),
        "data_hex": entry.data.hex(),
    }
    if entry.content_type in (ContentType.TEXT_PLAIN_UTF8, ContentType.APPLICATION_JSON):
        out["data_text"] = entry.data.decode("utf-8", "replace")
    return out


def packet_summary(packet: Packet) -> dict:
    """``packet`` as JSON-able dict for output lines (tokens redacted)."""
    out = packet_to_json(packet)
    out["protocol_data"] = [_entry_json(entry) for entry in packet.protocol_data]
    return out


def _line(tag: str, body: dict) -> str:
    return f"{tag} {json.dumps(body, separators=(',', ':'), sort_keys=False)}"


def format_result(result: RequestResult) -> str:
    """``BTP_RESPONSE {json}``: request label, request id, and the answer."""
    body: dict[str, Any] = {"request": result.spec.label, "request_id": result.request_id}
    if result.packet is None:
        body["type"] = None
    else:
        body.update(packet_summary(result.packet))
        body["request_id"] = result.request_id
        if result.spec.kind == "balance" and isinstance(result.packet, Response):
            try:
                body["balance"] = str(parse_balance(result.packet))
            except ValueError as exc:
                body["balance_error"] = str(exc)
    return _line("BTP_RESPONSE", body)


def format_event(event: SessionEvent, peer: str = "") -> str | None:
    """One stdout line for a session event (None: not worth a line)."""
    where = {"peer": peer} if peer else {}
    if isinstance(event, Authenticated):
        return _line("BTP_AUTHENTICATED", {**where, "request_id": event.request_id})
    if isinstance(event, AuthFailed):
        return _line("BTP_AUTH_FAILED", {**where, "code": event.code, "reason": event.reason})
    if isinstance(event, RequestReceived):
        return _line("BTP_RECEIVED", {**where, **packet_summary(event.packet)})
    if isinstance(event, BalanceChanged):
        return _line(
            "BTP_BALANCE", {**where, "balance": str(event.balance), "amount": str(event.amount)}
        )
    if isinstance(event, UnexpectedPacket):
        return _line("BTP_UNEXPECTED", {**where, "reason": event.reason})
    if isinstance(event, UnreadablePacket):
        return _line("BTP_UNREADABLE", {**where, "reason": event.reason, "detail": event.detail})
    if isinstance(event, Close):
        return _line("BTP_CLOSED", {**where, "reason": event.reason})
    return None


# --------------------------------------------------------------------------- one connection


class BtpError(Exception):
    """A client run failed.  ``kind``: "connect", "auth", "timeout", "closed"."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class BtpConnection:
    """A :class:`BtpSession` bound to one WebSocket connection.

    :meth:`run` reads until the session or the WebSocket ends, handing each
    message to the session and sending what it answers; :meth:`request`
    sends one of ours and waits for its answer.  ``on_event`` sees every
    session event.
    """

    def __init__(
        self,
        ws: ServerConnection | ClientConnection,
        session: BtpSession,
        *,
        auth_timeout: float = DEFAULT_AUTH_TIMEOUT,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        on_event: Callable[[SessionEvent], None] | None = None,
        variants: frozenset[str] = frozenset(),
    ) -> None:
        self.ws = ws
        self.session = session
        self.variants = frozenset(variants)
        self._own: dict[int, str] = {}
        """Variant unprompted-traffic: request id -> kind ("message",
        "transfer") of the requests of the node's own still in flight."""
        self._stopped_kinds: set[str] = set()
        self._unprompted_sent = 0
        self._unprompted_task: asyncio.Task[None] | None = None
        self._held: list[bytes] = []
        self._release_task: asyncio.Task[None] | None = None
        self.auth_timeout = auth_timeout
        self.idle_timeout = idle_timeout
        self._on_event = on_event
        loop = asyncio.get_running_loop()
        self.authenticated: asyncio.Future[bool] = loop.create_future()
        self.closed = asyncio.Event()
        self._waiters: dict[int, asyncio.Future[Response | Error]] = {}
        self._send_lock = asyncio.Lock()
        self.auth_failure: AuthFailed | None = None

    async def flush(self) -> None:
        """Send what the session has queued, in order; a peer that does not
        read for WRITE_TIMEOUT seconds is dropped. With variant
        reordered-answers, answers (Response, Error) are held instead and
        leave together, last first, REORDER_WINDOW seconds after the first
        of them (at once when the session is closed)."""
        async with self._send_lock:
            payloads = self.session.messages_to_send()
            if REORDERED_ANSWERS in self.variants:
                if not self.session.closed:
                    answers = [payload for payload in payloads if payload[:1] in (b"\x01", b"\x02")]
                    payloads = [
                        payload for payload in payloads if payload[:1] not in (b"\x01", b"\x02")
                    ]
                    self._held += answers
                    if self._held and self._release_task is None:
                        self._release_task = asyncio.get_running_loop().create_task(
                            self._release_held()
                        )
                else:
                    payloads = self._held[::-1] + payloads
                    self._held = []
            for payload in payloads:
                if not await self._send(payload):
                    return

    async def _send(self, payload: bytes) -> bool:
        try:
            message = self._fragments(payload) if FRAGMENTED_MESSAGES in self.variants else payload
            await asyncio.wait_for(self.ws.send(message), WRITE_TIMEOUT)
        except (ConnectionClosed, TimeoutError, OSError) as exc:
            log.info("cannot send to the peer (%r); dropping the connection", exc)
            self._handle(self.session.close("send failed"))
            return False
        return True

    async def _release_held(self) -> None:
        """Variant reordered-answers: the held answers leave, last first."""
        await asyncio.sleep(REORDER_WINDOW)
        async with self._send_lock:
            held, self._held = self._held[::-1], []
            self._release_task = None
            for payload in held:
                if not await self._send(payload):
                    return

    async def _fragments(self, payload: bytes) -> Any:
        """Variant fragmented-messages: ``payload`` as the fragments of one
        WebSocket message (websockets' ``send`` takes an async iterable and
        ends it with an empty final frame), a ping between the first two."""
        middle = 1 + (len(payload) - 1) // 2
        yield payload[:1]
        await self.ws.ping()  # a control frame inside the fragmented message
        yield payload[1:middle]
        yield payload[middle:]

    def _send_unprompted(self) -> None:
        """Variant unprompted-traffic: one request of the node's own, a
        Message or a Transfer in turn (a kind the peer refused is skipped), as
        long as fewer than UNPROMPTED_OUTSTANDING of them await an answer."""
        if self.session.closed or not self.session.authenticated:
            return
        in_flight = self.session.in_flight
        for request_id in [r for r in self._own if r not in in_flight]:
            del self._own[request_id]
        if len(self._own) >= UNPROMPTED_OUTSTANDING:
            return
        kinds = [kind for kind in ("message", "transfer") if kind not in self._stopped_kinds]
        if not kinds:
            return
        kind = kinds[self._unprompted_sent % len(kinds)]
        self._unprompted_sent += 1
        note = ProtocolDataEntry(
            UNPROMPTED_NAME,
            ContentType.TEXT_PLAIN_UTF8,
            f"unprompted {kind} {self._unprompted_sent} of the reference node".encode(),
        )
        if kind == "message":
            request_id = self.session.send_message((note,))
        else:
            request_id = self.session.send_transfer(1, (note,))
        self._own[request_id] = kind

    async def _keep_sending_unprompted(self) -> None:
        while not self.session.closed:
            await asyncio.sleep(UNPROMPTED_INTERVAL)
            self._send_unprompted()
            await self.flush()

    async def run(self) -> None:
        """Serve the connection until it ends; then close the WebSocket."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        points = self.session.fault_points
        try:
            await self.flush()  # a client's auth Message
            while not self.session.closed:
                auth_timeout = points.apply(
                    "auth-timeout", self.auth_timeout, auth_failed=self.auth_failure is not None
                )
                if self.session.state is SessionState.AUTHENTICATING and auth_timeout is not None:
                    timeout: float | None = started + auth_timeout - loop.time()
                    if timeout <= 0:
                        self._handle(self.session.auth_timed_out())
                        break
                else:
                    timeout = self.idle_timeout
                try:
                    message = await asyncio.wait_for(self.ws.recv(), timeout)
                except TimeoutError:
                    if self.session.state is SessionState.AUTHENTICATING:
                        continue  # the loop head decides
                    self._handle(self.session.close(f"idle for {self.idle_timeout:g} s"))
                    break
                except ConnectionClosed as exc:
                    code = exc.rcvd.code if exc.rcvd else "none"
                    self._handle(self.session.close(f"WebSocket closed by the peer (code {code})"))
                    break
                if isinstance(message, str):
                    events = self.session.receive_text_message(message)
                else:
                    events = self.session.receive_message(message)
                self._handle(events)
                await self.flush()
        except asyncio.CancelledError:
            self._handle(self.session.close("node shutting down"))
            raise
        finally:
            for task in (self._unprompted_task, self._release_task):
                if task is not None:
                    task.cancel()
            self._release_task = None
            await self.flush()  # the session is closed: held answers leave now
            self._finish()
            code = CLOSE_NORMAL if self.authenticated.result() else CLOSE_POLICY
            try:
                await asyncio.wait_for(self.ws.close(code), 3)
            except (TimeoutError, OSError, ConnectionClosed):
                pass

    def _finish(self) -> None:
        if not self.session.closed:
            self._handle(self.session.close("connection ended"))
        if not self.authenticated.done():
            self.authenticated.set_result(False)
        for future in self._waiters.values():
            if not future.done():
                future.set_exception(
                    BtpError("closed", f"connection closed: {self.session.close_reason}")
                )
        self._waiters.clear()
        self.closed.set()

    def _handle(self, events: Iterable[SessionEvent]) -> None:
        for event in events:
            if isinstance(event, Authenticated) and not self.authenticated.done():
                self.authenticated.set_result(True)
                if UNPROMPTED_TRAFFIC in self.variants and self._unprompted_task is None:
                    self._send_unprompted()  # queued right after the auth Response (server)
                    self._unprompted_task = asyncio.get_running_loop().create_task(
                        self._keep_sending_unprompted()
                    )
            elif isinstance(event, ResponseReceived) and event.request_id in self._own:
                kind = self._own.pop(event.request_id)
                if isinstance(event.packet, Error):
                    self._stopped_kinds.add(kind)  # refused: not sent again (an F error is final)
            elif isinstance(event, AuthFailed) and not self.authenticated.done():
                self.auth_failure = event
                self.authenticated.set_result(False)
            elif isinstance(event, ResponseReceived):
                future = self._waiters.pop(event.request_id, None)
                if future is not None and not future.done():
                    future.set_result(event.packet)
            elif isinstance(event, Close):
                self.closed.set()
                for future in self._waiters.values():
                    if not future.done():
                        future.set_exception(
                            BtpError("closed", f"connection closed: {event.reason}")
                        )
                self._waiters.clear()
                if not self.authenticated.done():
                    self.authenticated.set_result(False)
            if self._on_event is not None:
                try:
                    self._on_event(event)
                except Exception:
                    log.exception("event callback failed")

    async def request(
        self, spec: RequestSpec, timeout: float = DEFAULT_REQUEST_TIMEOUT
    ) -> RequestResult:
        """Send ``spec`` and wait for its Response or Error (``packet`` None after ``timeout``)."""
        if self.session.closed:
            raise BtpError("closed", f"connection closed: {self.session.close_reason}")
        request_id = spec.send(self.session)
        future: asyncio.Future[Response | Error] = asyncio.get_running_loop().create_future()
        self._waiters[request_id] = future
        await self.flush()
        try:
            packet = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self._waiters.pop(request_id, None)
            return RequestResult(spec, request_id, None)
        return RequestResult(spec, request_id, packet)


# --------------------------------------------------------------------------- the server


class BtpNode:
    """Listens for BTP clients and serves them; all share one :class:`Ledger`.

    ``requests`` are sent to every client once it has authenticated; their
    results go to ``on_result`` (and :attr:`results`).  ``on_event`` sees
    every session event with the peer's address.
    """

    def __init__(
        self,
        auth_token: bytes,
        *,
        initial_balance: int = 0,
        max_balance: int = MAX_AMOUNT,
        auth_timeout: float = DEFAULT_AUTH_TIMEOUT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        faults: Iterable[Fault | str] = (),
        requests: Sequence[RequestSpec] = (),
        on_event: Callable[[str, SessionEvent], None] | None = None,
        on_result: Callable[[RequestResult], None] | None = None,
        variants: Iterable[str] = (),
        shape: Shape = Shape(),
    ) -> None:
        self.ledger = Ledger(initial_balance, max_balance)
        self.variants = frozenset(variants)
        self.shape = shape
        self._check_token = token_checker(bytes(auth_token))
        self.auth_timeout = auth_timeout
        self.idle_timeout = idle_timeout
        self.request_timeout = request_timeout
        self.faults = frozenset(map(Fault, faults))
        self.requests = tuple(requests)
        self._on_event = on_event
        self._on_result = on_result
        self.results: list[RequestResult] = []
        self._server: Server | None = None
        self._connections: set[BtpConnection] = set()
        self.host = ""
        self.port = 0

    @property
    def balance(self) -> int:
        return self.ledger.balance

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ws://{host}:{self.port}/"

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> tuple[str, int]:
        """Listen on host:port (0: a free port); returns the bound address."""
        if self._server is not None:
            raise RuntimeError("the node is already serving")
        options: dict[str, Any] = dict(_WS_OPTIONS)
        if not self.shape.plain:
            options["create_connection"] = _shaped(ServerConnection, self.shape)
        self._server = await serve(self._on_connection, host, port, **options)
        self.host, self.port = list(self._server.sockets)[0].getsockname()[:2]
        log.info(
            "BTP node listening on %s (faults: %s)",
            self.url,
            ", ".join(sorted(self.faults)) or "none",  # Fault members are their names
        )
        return self.host, self.port

    async def close(self) -> None:
        """Stop listening and end every connection."""
        if self._server is not None:
            self._server.close(close_connections=True)
            try:
                await asyncio.wait_for(self._server.wait_closed(), 5)
            except TimeoutError:
                log.warning("some connections did not close in time")
            self._server = None

    async def __aenter__(self) -> BtpNode:
        if self._server is None:
            await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _on_connection(self, ws: ServerConnection) -> None:
        peer = "%s:%s" % tuple(ws.remote_address[:2]) if ws.remote_address else "?"
        if len(self._connections) >= MAX_CONNECTIONS:
            log.warning("refusing %s: %d connections already open", peer, MAX_CONNECTIONS)
            await ws.close(1013, "too many connections")
            return
        session = BtpSession.server(
            self._check_token, ledger=self.ledger, faults=self.faults, variants=self.variants
        )

        def on_event(event: SessionEvent) -> None:
            log.info("%s: %s", peer, _describe(event))
            if self._on_event is not None:
                self._on_event(peer, event)

        conn = BtpConnection(
            ws,
            session,
            auth_timeout=self.auth_timeout,
            idle_timeout=self.idle_timeout,
            on_event=on_event,
            variants=self.variants,
        )
        self._connections.add(conn)
        sender = asyncio.create_task(self._send_requests(conn)) if self.requests else None
        try:
            await conn.run()
        except Exception:  # never let one connection take the node down
            log.exception("%s: connection handler failed", peer)
        finally:
            self._connections.discard(conn)
            if sender is not None:
                sender.cancel()
                await asyncio.gather(sender, return_exceptions=True)

    async def _send_requests(self, conn: BtpConnection) -> None:
        if not await conn.authenticated:
            return
        for spec in self.requests:
            try:
                result = await conn.request(spec, self.request_timeout)
            except BtpError:
                return
            self.results.append(result)
            if self._on_result is not None:
                self._on_result(result)


def _describe(event: SessionEvent) -> str:
    """A log line for ``event``; never includes a token (RequestReceived
    shows only packet type, request id and entry names)."""
    if isinstance(event, RequestReceived):
        packet = event.packet
        names = ",".join(entry.name for entry in packet.protocol_data) or "-"
        amount = f" amount={packet.amount}" if isinstance(packet, Transfer) else ""
        return f"{type(packet).__name__} request_id={packet.request_id}{amount} entries={names}"
    if isinstance(event, ResponseReceived):
        return f"{type(event.packet).__name__} to request {event.request_id}"
    return repr(event)


# --------------------------------------------------------------------------- the client


@dataclass
class ClientRun:
    """What :func:`run_client` did."""

    results: list[RequestResult] = field(default_factory=list)
    balance: int = 0
    close_reason: str | None = None


async def run_client(
    url: str,
    auth_token: bytes,
    requests: Sequence[RequestSpec] = (),
    *,
    stay: float = 0.0,
    timeout: float = DEFAULT_REQUEST_TIMEOUT,
    initial_balance: int = 0,
    max_balance: int = MAX_AMOUNT,
    faults: Iterable[Fault | str] = (),
    on_event: Callable[[SessionEvent], None] | None = None,
    on_result: Callable[[RequestResult], None] | None = None,
    variants: Iterable[str] = (),
    shape: Shape = Shape(),
) -> ClientRun:
    """Connect to ``url``, authenticate, send ``requests`` one after the other
    (each waits for its answer, at most ``timeout`` s), keep serving the
    server's requests for ``stay`` more seconds, then close.

    Raises :class:`BtpError` ("connect", "auth", "timeout", "closed").  A
    request answered with an Error is a result, not an exception."""
    run = ClientRun()
    variants = frozenset(variants)
    options: dict[str, Any] = dict(_WS_OPTIONS)
    if not shape.plain:
        options["create_connection"] = _shaped(ClientConnection, shape)
    try:
        ws = await asyncio.wait_for(connect(url, proxy=None, **options), timeout)
    except (OSError, InvalidHandshake, InvalidURI, TimeoutError, ValueError) as exc:
        raise BtpError("connect", f"cannot connect to {url}: {exc or type(exc).__name__}") from None
    session = BtpSession.client(
        auth_token,
        initial_balance=initial_balance,
        max_balance=max_balance,
        faults=faults,
        variants=variants,
    )
    conn = BtpConnection(
        ws, session, auth_timeout=timeout, idle_timeout=None, on_event=on_event, variants=variants
    )
    reader = asyncio.create_task(conn.run())
    try:
        if not await conn.authenticated:
            failure = conn.auth_failure
            if failure is not None and failure.code is None:
                raise BtpError(
                    "timeout", f"authentication failed: {failure.reason} ({timeout:g} s)"
                )
            if failure is not None:
                raise BtpError("auth", f"authentication failed: {failure.reason}")
            raise BtpError(
                "closed", f"connection closed before authentication: {session.close_reason}"
            )
        for spec in requests:
            result = await conn.request(spec, timeout)
            if session.fault_points.apply("send-again", False, answer=result.packet):
                result = await conn.request(spec, timeout)
            run.results.append(result)
            if on_result is not None:
                on_result(result)
            if result.packet is None:
                raise BtpError(
                    "timeout",
                    f"no answer to {spec.label} (request {result.request_id}) within {timeout:g} s",
                )
        if stay > 0:
            try:
                await asyncio.wait_for(conn.closed.wait(), stay)
            except TimeoutError:
                pass
        return run
    finally:
        run.balance = session.balance
        if not session.closed:
            conn._handle(session.close("client done"))
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        try:
            await asyncio.wait_for(ws.close(), 3)
        except (TimeoutError, OSError, ConnectionClosed):
            pass
        run.close_reason = session.close_reason


__all__ = [
    "BtpConnection",
    "BtpError",
    "BtpNode",
    "ClientRun",
    "DEFAULT_AUTH_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_REQUEST_TIMEOUT",
    "Fault",
    "MAX_MESSAGE_SIZE",
    "RequestResult",
    "RequestSpec",
    "balance_request_entry",
    "format_event",
    "format_result",
    "packet_summary",
    "run_client",
]

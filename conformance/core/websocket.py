"""WebSocket connections to a target, with a deadline on every read and
every message recorded in the case's wire trace.

Protocols carried in WebSocket messages (BTP) use these instead of raw TCP.
The trace records message payloads (what the protocol sees); framing is
the websockets library's job and is checked by it.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.asyncio.server import ServerConnection
from websockets.asyncio.server import serve as ws_serve
from websockets.exceptions import (
    ConnectionClosed,
    InvalidHandshake,
    InvalidMessage,
    InvalidURI,
    PayloadTooBig,
    ProtocolError,
)

from . import impair
from .transport import (
    DEFAULT_READ_DEADLINE,
    HARNESS,
    SHOWN_BYTES,
    TARGET,
    Address,
    ConnectionTrace,
    Deadline,
    DeadlineExceeded,
    PeerClosed,
    ProtocolViolation,
    WireTrace,
)

MAX_MESSAGE_SIZE = 1 << 20
"""Largest message accepted from a target unless the protocol sets a
smaller bound (:meth:`WebSocketConnection.limit_message_size`); a bigger one
is refused from its frame header, before its payload is read or buffered,
and fails the case as a :class:`ProtocolViolation`."""

DEFAULT_BOUND_OF = "a WebSocket message (no protocol bound set)"
"""What :data:`MAX_MESSAGE_SIZE` bounds, as a refusal names it; a protocol
that lowers the bound names its own unit (:meth:`WebSocketConnection.limit_message_size`)."""

MAX_QUEUED_MESSAGES = 16
"""Messages the library buffers ahead of the case; then it stops reading
the socket (TCP backpressure), so a flooding target fills no memory."""

MAX_COLLECTED_BYTES = 1 << 20
"""Bytes of messages collected while watching for silence or a close; a
target that sends more is not silent, and reading on would only fill memory."""


_HEADER_TAIL = 9
"""Bytes of the previous chunk kept to find a frame header that began there:
the longest header read before the size check is 10 bytes (2 + an 8-byte
length; a client's mask key comes after the check)."""


def _frame_header(data: bytes, length: int) -> bytes | None:
    """The frame header in ``data`` that announces ``length`` payload bytes
    (any length encoding, mask bit set or not); None if not found."""
    encodings = [bytes([127]) + length.to_bytes(8, "big")]
    if length < 1 << 16:
        encodings.append(bytes([126]) + length.to_bytes(2, "big"))
    if length < 126:
        encodings.append(bytes([length]))
    found: list[tuple[int, bytes]] = []
    for encoding in encodings:
        for masked in (encoding, bytes([encoding[0] | 0x80]) + encoding[1:]):
            at = data.find(masked, 1)
            if at > 0:
                found.append((at, data[at - 1 : at + len(masked)]))
    return min(found)[1] if found else None


class _RawTap:
    """Keeps the head of raw chunks the target sent, so that a handshake or a
    frame the library refuses can be shown as hex (the trace holds message
    payloads, not frames): the first chunk (the HTTP answer to the upgrade),
    the chunk in which the frame parser failed and, for a frame over the size
    bound, its header. Once the parser refused a frame, reading stops: the
    library has written its close frame (1009 for a message too big), and the
    connection is dropped at once instead of reading and discarding the rest
    of the target's bytes until it hangs up."""

    first_head: bytes = b""
    first_size: int = 0
    refused_head: bytes = b""
    refused_size: int = 0
    refused_header: bytes | None = None
    refused_raw_total: int = 0
    raw_total: int = 0
    last_head: bytes = b""
    _tail: bytes = b""

    def data_received(self, data: bytes) -> None:
        self.raw_total += len(data)
        self.last_head = bytes(data[:SHOWN_BYTES])
        if not self.first_size:
            self.first_head, self.first_size = bytes(data[:SHOWN_BYTES]), len(data)
        protocol = getattr(self, "protocol", None)
        failed_before = getattr(protocol, "parser_exc", None) is not None
        super().data_received(data)  # type: ignore[misc]
        refused = getattr(protocol, "parser_exc", None)
        if not failed_before and refused is not None:
            self.refused_head, self.refused_size = bytes(data[:SHOWN_BYTES]), len(data)
            self.refused_raw_total = self.raw_total
            if isinstance(refused, PayloadTooBig) and refused.size is not None:
                self.refused_header = _frame_header(self._tail + bytes(data), refused.size)
            if (
                isinstance(refused, (PayloadTooBig, ProtocolError, UnicodeDecodeError))
                and self.transport is not None
            ):
                # The close frame is written (handed to the socket); read no
                # more of what the target sends, the case fails now.
                self.transport.abort()
        self._tail = bytes(data[-_HEADER_TAIL:])
        if getattr(protocol, "handshake_exc", None) is not None and self.transport is not None:
            # The answer to the upgrade is refused: the library would wait for
            # the target to close; end it now so the case fails at once.
            self.transport.abort()


class _TappedClientConnection(_RawTap, ClientConnection):
    pass


class _TappedServerConnection(_RawTap, ServerConnection):
    pass


_CONNECTION_OPTIONS: dict[str, Any] = {
    "max_size": MAX_MESSAGE_SIZE,
    "max_queue": MAX_QUEUED_MESSAGES,
    "ping_interval": None,
    "close_timeout": 1.0,
    # No permessage-deflate: a compressed message could inflate far beyond
    # what crossed the wire, and no protocol the harness tests needs it.
    "compression": None,
}


def _refused_bytes(ws: Any) -> ProtocolViolation | None:
    """If the library closed the connection because of the target's bytes (a
    frame over the size bound, a malformed frame, a text message that is not
    UTF-8), the violation naming them; None for an ordinary close."""
    cause = getattr(getattr(ws, "protocol", None), "parser_exc", None)
    if not isinstance(cause, (PayloadTooBig, ProtocolError, UnicodeDecodeError)):
        return None
    sent = getattr(ws.protocol, "close_sent", None)
    closing = f"with close code {sent.code}" if sent is not None else f"({_describe_close(ws)})"
    stopped = (
        f" and stopped reading ({getattr(ws, 'refused_raw_total', 0)} raw byte(s) read on this "
        "connection in all)"
    )
    header = getattr(ws, "refused_header", None)
    if isinstance(cause, PayloadTooBig):
        bound = getattr(ws.protocol, "max_message_size", None)
        of = getattr(ws, "size_bound_of", DEFAULT_BOUND_OF)
        announced = f"a {cause.size}-byte message" if cause.size is not None else "a message"
        what = (
            f"a WebSocket frame header announcing {announced} ({cause}), over the harness's bound of {bound} "
            f"bytes on {of}"
        )
        if header is not None:
            return ProtocolViolation(
                f"target sent {what}; the harness refused the message from that header, closed "
                f"the connection {closing} (message too big){stopped}. The frame header",
                header,
            )
    elif isinstance(cause, UnicodeDecodeError):
        what = (
            f"a text WebSocket message that is not UTF-8 ({cause.reason} at position {cause.start})"
        )
    else:
        what = f"a malformed WebSocket frame ({cause})"
    return ProtocolViolation(
        f"target sent {what}; the harness closed the connection {closing}{stopped}. "
        "The chunk of raw bytes holding that frame",
        getattr(ws, "refused_head", b""),
        size=getattr(ws, "refused_size", None) or None,
    )


def _describe_close(ws: Any) -> str:
    code = getattr(ws, "close_code", None)
    reason = getattr(ws, "close_reason", "") or ""
    return (
        f"close code {code}" + (f" ({reason})" if reason else "")
        if code is not None
        else "connection lost"
    )


async def _through_relay(url: str) -> dict[str, Any]:
    """``ws_connect`` arguments for a connection to a target at ``url``: with
    an impairment active, the socket of a connection through its relay (the
    URL, and so the Host header, stay the target's); none otherwise."""
    if impair.active() is None:
        return {}
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "wss" else 80)
    sock = await impair.connect_socket(parts.hostname or "", port)
    return {"sock": sock}


def _address(value: object) -> Address | None:
    return (str(value[0]), int(value[1])) if isinstance(value, tuple) and len(value) >= 2 else None


def _connect_trace(
    trace: WireTrace, ws: Any, initiator: str, label: str, base: object | None = None
) -> ConnectionTrace:
    """The WebSocket's connection in the case's trace: its socket's ends and
    the path of the upgrade (core/pcap.py writes the upgrade and frames)."""
    request = getattr(ws, "request", None)
    wire = trace.connect(
        "websocket",
        _address(getattr(ws, "local_address", None)),
        _address(getattr(ws, "remote_address", None)),
        initiator,
        label,
        base=trace if base is None else base,
    )
    wire.connection.path = getattr(request, "path", None) or "/"
    return wire


class WebSocketConnection:
    """One WebSocket connection, either opened by the harness or accepted from a target."""

    def __init__(
        self,
        ws: Any,
        trace: WireTrace | ConnectionTrace,
        deadline: float,
        label: str = "",
        initiator: str = HARNESS,
    ) -> None:
        self._ws = ws
        self.trace = (
            trace
            if isinstance(trace, ConnectionTrace)
            else _connect_trace(trace, ws, initiator, label)
        )
        """The case's trace, as this connection records into it."""
        self.deadline = deadline
        self.label = label
        self.closed = False
        self._raw_accounted = getattr(ws, "raw_total", 0)
        """Raw bytes received up to the last message recorded in the trace."""

    @classmethod
    async def open(
        cls, url: str, trace: WireTrace, deadline: float = DEFAULT_READ_DEADLINE, label: str = ""
    ) -> WebSocketConnection:
        tapped: list[_RawTap] = []

        class _Connection(_TappedClientConnection):
            # Remembered even when the handshake fails, to show what the target sent.
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                tapped.append(self)

        try:
            relayed = await asyncio.wait_for(_through_relay(url), deadline)
            ws = await asyncio.wait_for(
                ws_connect(
                    url,
                    open_timeout=deadline,
                    create_connection=_Connection,
                    **relayed,
                    **_CONNECTION_OPTIONS,
                ),
                deadline,
            )
        except asyncio.TimeoutError:
            refused = getattr(tapped[0].protocol, "handshake_exc", None) if tapped else None
            if refused is not None:
                raise ProtocolViolation(
                    f"target's answer to the WebSocket upgrade of {url} was refused ({refused})",
                    tapped[0].first_head,
                    size=tapped[0].first_size or None,
                ) from None
            raise DeadlineExceeded(
                f"WebSocket handshake with {url} did not complete within {deadline} s"
            ) from None
        except InvalidMessage as exc:
            head = tapped[0].first_head if tapped else b""
            if isinstance(exc.__cause__, EOFError):
                raise PeerClosed(
                    f"target closed the connection during the WebSocket handshake with {url}; "
                    f"it had sent {head.hex() or 'nothing'}"
                ) from None
            raise ProtocolViolation(
                f"target's answer to the WebSocket upgrade of {url} is not a valid HTTP "
                f"response ({exc}: {exc.__cause__})",
                head,
                size=(tapped[0].first_size or None) if tapped else None,
            ) from None
        except (OSError, InvalidHandshake, InvalidURI) as exc:
            raise ConnectionError(f"could not open WebSocket {url}: {exc}") from None
        conn = cls(ws, trace, deadline, label)
        conn.trace.event(
            f"WebSocket opened to {url}{impair.through()}{' (' + label + ')' if label else ''}"
        )
        return conn

    async def send(self, payload: bytes | str, note: str = "") -> None:
        data = payload.encode("utf-8") if isinstance(payload, str) else payload
        kind = "text" if isinstance(payload, str) else "binary"
        self.trace.record("sent", data, f"{kind} message" + (f": {note}" if note else ""))
        try:
            await asyncio.wait_for(self._ws.send(payload), self.deadline)
        except asyncio.TimeoutError:
            raise DeadlineExceeded(
                f"target did not take a {len(data)}-byte message within {self.deadline} s"
            ) from None
        except ConnectionClosed:
            # A target that hung up is a verdict about the target, not a
            # crash of the case: say so, with the close code it gave.
            self._note_closed()
            if (violation := _refused_bytes(self._ws)) is not None:
                raise violation from None
            raise PeerClosed(
                f"target had closed the WebSocket ({_describe_close(self._ws)}) when the harness "
                f"sent {note or f'a {len(data)}-byte {kind} message'}"
            ) from None

    async def send_quietly(self, payload: bytes | str, note: str = "") -> bool:
        try:
            await self.send(payload, note)
            return True
        except (PeerClosed, ConnectionClosed):
            return False

    def limit_message_size(self, max_size: int, of: str = DEFAULT_BOUND_OF) -> None:
        """Lower the largest message accepted from the target to the bound
        the protocol sets (a BTP packet, say); ``of`` names what is bounded,
        and where the bound comes from, in the failure of a frame over it.
        A frame header declaring more fails the case at once, from the
        header: none of its payload is awaited."""
        self._ws.protocol.max_message_size = min(max_size, MAX_MESSAGE_SIZE)
        self._ws.size_bound_of = of

    async def receive(self, what: str, deadline: float | Deadline | None = None) -> bytes | str:
        """The next message; fails naming ``what`` on deadline or close, and
        with a :class:`ProtocolViolation` when the target's frame was refused.
        A :class:`Deadline` is shared with the caller's other reads."""
        if isinstance(deadline, Deadline):
            limit, timeout = deadline.seconds, deadline.remaining()
        else:
            limit = timeout = self.deadline if deadline is None else deadline
        try:
            message = await asyncio.wait_for(self._ws.recv(), timeout)
        except asyncio.TimeoutError:
            raise DeadlineExceeded(
                f"no {what} within {limit} s" + self._unfinished_frame()
            ) from None
        except ConnectionClosed:
            self._note_closed()
            if (violation := _refused_bytes(self._ws)) is not None:
                raise violation from None
            raise PeerClosed(
                f"target closed the WebSocket ({_describe_close(self._ws)}) while the case "
                f"awaited {what}"
            ) from None
        self._record_received(message)
        return message

    def _unfinished_frame(self) -> str:
        """Raw bytes that arrived without making a complete message (a
        trickling target): noted in the trace as received bytes (they are
        not silence) and described for the failure message."""
        raw_total = getattr(self._ws, "raw_total", 0)
        pending = raw_total - self._raw_accounted
        if pending <= 0:
            return ""
        self._raw_accounted = raw_total
        head = getattr(self._ws, "last_head", b"")
        self.trace.record(
            "received",
            head,
            f"raw bytes of an unfinished WebSocket frame ({pending} bytes "
            "arrived without completing a message; the last chunk began so)",
            framed=True,
        )
        return f"; {pending} raw byte(s) arrived without completing a WebSocket message, the last chunk: {head.hex()}"

    def _record_received(self, message: bytes | str) -> None:
        self._raw_accounted = getattr(self._ws, "raw_total", 0)
        if isinstance(message, str):
            self.trace.record("received", message.encode("utf-8"), "text message")
        else:
            self.trace.record("received", message, "binary message")

    def _note_closed(self) -> None:
        if not self.closed:
            self.closed = True
            violation = _refused_bytes(self._ws)
            header = getattr(self._ws, "refused_header", None)
            if violation is not None and header is not None:
                self.trace.record(
                    "received",
                    header,
                    "header of a WebSocket frame over the size bound (its payload was not read)",
                    framed=True,
                )
            self.trace.event(
                f"WebSocket closed by the harness: {violation}"
                if violation
                else f"WebSocket closed by target: {_describe_close(self._ws)}"
            )
            self.trace.ended(HARNESS if violation else TARGET, "fin")

    def close_description(self) -> str:
        """How the connection ended, e.g. ``close code 1000``."""
        return _describe_close(self._ws)

    async def messages_within(
        self, seconds: float, limit: int = 100, max_bytes: int = MAX_COLLECTED_BYTES
    ) -> list[bytes | str]:
        """Every message that arrives within ``seconds`` (for silence checks),
        at most ``limit`` messages and about ``max_bytes`` bytes: a target
        sending more is not silent. Stops early when the target closes; a
        frame the harness refused fails with a :class:`ProtocolViolation`."""
        got: list[bytes | str] = []
        collected = 0
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while len(got) < limit and collected <= max_bytes:
            remaining = end - loop.time()
            if remaining <= 0:
                break
            try:
                message = await asyncio.wait_for(self._ws.recv(), remaining)
            except asyncio.TimeoutError:
                self._unfinished_frame()  # trickled bytes go into the trace
                break
            except ConnectionClosed:
                self._note_closed()
                if (violation := _refused_bytes(self._ws)) is not None:
                    raise violation from None
                break
            self._record_received(message)
            got.append(message)
            collected += len(message)
        return got

    async def await_close(self, deadline: float | None = None) -> tuple[bool, list[bytes | str]]:
        """Wait for the target to close; ``(closed, messages received meanwhile)``.
        Bounded like :meth:`messages_within`."""
        limit = self.deadline if deadline is None else deadline
        got = await self.messages_within(limit, limit=1000)
        return self.closed, got

    def abort(self) -> None:
        """Drop the connection at once, no closing handshake (as
        :meth:`TcpConnection.abort <conformance.core.transport.TcpConnection.abort>`)."""
        if not self.closed:
            self.trace.ended(HARNESS, "rst")
            transport = getattr(self._ws, "transport", None)
            if transport is not None:
                transport.abort()
            self.closed = True

    async def close(self) -> None:
        if not self.closed:
            self.trace.ended(HARNESS, "fin")
            try:
                await asyncio.wait_for(self._ws.close(), 2.0)
            except (asyncio.TimeoutError, ConnectionClosed, OSError):
                pass
            self.closed = True


class WebSocketServer:
    """The harness listening on loopback, for cases where the target is the
    client. ``accept`` has a deadline; connections stay open until the case ends."""

    def __init__(
        self, trace: WireTrace, deadline: float = DEFAULT_READ_DEADLINE, host: str = "127.0.0.1"
    ) -> None:
        self.trace = trace
        self.deadline = deadline
        self.host = host
        self.port = 0
        self._server: Any = None
        self._accepted: asyncio.Queue[WebSocketConnection] = asyncio.Queue()
        self._done = asyncio.Event()
        self._front: impair.ImpairRelay | None = None

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}/"

    async def __aenter__(self) -> WebSocketServer:
        async def handler(ws: Any) -> None:
            wire = _connect_trace(self.trace, ws, TARGET, "client")
            wire.event(
                f"target opened a WebSocket from {ws.remote_address[0]}:{ws.remote_address[1]}"
            )
            await self._accepted.put(WebSocketConnection(ws, wire, self.deadline, "client"))
            await self._done.wait()  # the case owns the connection until it ends

        self._server = await ws_serve(
            handler, self.host, 0, create_connection=_TappedServerConnection, **_CONNECTION_OPTIONS
        )
        self.port = next(iter(self._server.sockets)).getsockname()[1]
        listening = self.url
        self._front = await impair.front(self.host, self.port)
        if self._front is not None:
            self.port = self._front.port
        self.trace.event(
            f"harness listening on {listening}"
            + (f"; the target is given {self.url}{impair.through()}" if self._front else "")
        )
        return self

    async def accept(self, deadline: float) -> WebSocketConnection:
        try:
            return await asyncio.wait_for(self._accepted.get(), deadline)
        except asyncio.TimeoutError:
            raise DeadlineExceeded(
                f"target did not connect to {self.url} within {deadline} s"
            ) from None

    async def __aexit__(self, *exc: object) -> None:
        self._done.set()
        self._server.close()
        if self._front is not None:
            await self._front.stop()
        try:
            await asyncio.wait_for(self._server.wait_closed(), 3.0)
        except asyncio.TimeoutError:
            pass


class WebSocketRelay:
    """A recording relay between two nodes under test that speak over
    WebSocket (interop runs): the client connects to the relay, the relay
    opens its own WebSocket to the server, and every message either way is
    passed on and recorded (``client->server`` / ``server->client``), so an
    interop failure shows the protocol's bytes. Relaying messages rather
    than TCP bytes keeps client frames readable (they are masked on the
    wire) and lets the trace mask secrets such as BTP auth tokens; HTTP
    headers of the upgrade are not forwarded (credentials travel in-band)."""

    def __init__(
        self,
        server_url: str,
        trace: WireTrace,
        deadline: float = DEFAULT_READ_DEADLINE,
        host: str = "127.0.0.1",
    ) -> None:
        self.server_url = server_url
        self.trace = trace
        self.deadline = deadline
        self.host = host
        self.port = 0
        self._server: Any = None
        self._front: impair.ImpairRelay | None = None

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}/"

    async def _pump(self, source: Any, sink: Any, direction: str, wire: ConnectionTrace) -> None:
        side = direction.split("->")[0]
        try:
            async for message in source:
                data = message.encode("utf-8") if isinstance(message, str) else message
                wire.record(
                    direction,
                    data,
                    "text message" if isinstance(message, str) else "binary message",
                )
                await asyncio.wait_for(sink.send(message), self.deadline)
        except (ConnectionClosed, asyncio.TimeoutError, OSError):
            pass
        finally:
            wire.event(f"{side} side ended ({_describe_close(source)})")
            wire.ended(side, "fin")

    async def __aenter__(self) -> WebSocketRelay:
        async def handler(client: Any) -> None:
            # One connection in the trace per client WebSocket: from the
            # client's end to the server the relay forwards to.
            server = urlsplit(self.server_url)
            wire = self.trace.connect(
                "websocket",
                _address(client.remote_address),
                (server.hostname or "", server.port or (443 if server.scheme == "wss" else 80)),
                "client",
                "relayed",
            )
            wire.connection.path = server.path or "/"
            wire.event(
                f"client opened a WebSocket to the relay from {client.remote_address[0]}:"
                f"{client.remote_address[1]}"
            )
            try:
                upstream = await asyncio.wait_for(
                    ws_connect(
                        self.server_url,
                        max_size=MAX_MESSAGE_SIZE,
                        open_timeout=self.deadline,
                        ping_interval=None,
                        close_timeout=1.0,
                        **await _through_relay(self.server_url),
                    ),
                    self.deadline,
                )
            except (asyncio.TimeoutError, OSError, InvalidHandshake, InvalidURI) as exc:
                wire.event(f"relay could not reach the server {self.server_url}: {exc!r}")
                wire.ended("server", "rst")
                await client.close(1011, "relay: server unreachable")
                return
            async with upstream:
                tasks = [
                    asyncio.create_task(self._pump(client, upstream, "client->server", wire)),
                    asyncio.create_task(self._pump(upstream, client, "server->client", wire)),
                ]
                # When one side ends, end the other: a close is relayed as a close.
                done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in pending:
                    task.cancel()
                await client.close()

        self._server = await ws_serve(
            handler, self.host, 0, max_size=MAX_MESSAGE_SIZE, ping_interval=None, close_timeout=1.0
        )
        self.port = next(iter(self._server.sockets)).getsockname()[1]
        listening = self.url
        # Both connections are the harness's with a target: through the
        # impairment relay when the run has one.
        self._front = await impair.front(self.host, self.port)
        if self._front is not None:
            self.port = self._front.port
        self.trace.event(
            f"relay listening on {listening}, forwarding to {self.server_url}"
            + (f"; the client is given {self.url}{impair.through()}" if self._front else "")
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        if self._front is not None:
            await self._front.stop()
        try:
            await asyncio.wait_for(self._server.wait_closed(), 3.0)
        except asyncio.TimeoutError:
            pass

"""Connections to a target with a deadline on every read, and a wire trace.

Every byte a case sends or receives is recorded in a :class:`WireTrace`
(direction, time, bytes, an optional note such as "msg1 (client hello)").
The trace is what a failure shows: the plugin renders it as a hex dump,
attaches it to the Allure report and writes it beside the results.
"""

from __future__ import annotations

import asyncio
import ssl as ssl_module
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from . import impair
from .redact import Redactor

DEFAULT_READ_DEADLINE = 3.0
"""Seconds a case waits for bytes the spec says must come. Generous for
loopback; configurable with --deadline."""

MAX_READ_CHUNK = 65536
"""Largest single read from a socket."""

TRACE_BYTES_PER_DIRECTION = 64 * 1024
"""Bytes a wire trace keeps per direction: the prefix a failure needs to
show what the target did. Beyond it bytes are counted, not stored, so that a
flooding target cannot grow memory or trace files."""

TRACE_MAX_ENTRIES = 4096
"""Entries (chunks, notes) a trace keeps; a target trickling single bytes
makes one entry per byte."""

MAX_BYTES_WHILE_AWAITING_CLOSE = 1 << 20
"""Bytes collected while waiting for the target to hang up. A target that
sends this much is not hanging up; reading on would only fill memory."""

SHOWN_BYTES = 64
"""Bytes of the target's data a one-line failure message shows (as hex)."""


class DeadlineExceeded(AssertionError):
    """The target did not send what was expected in time. An AssertionError:
    a target that never answers fails the case (it is a verdict, not a crash)."""


class PeerClosed(AssertionError):
    """The target closed (or reset) the connection while the case expected
    more bytes, or while the harness was sending."""


class TlsRefused(ConnectionError):
    """The TLS handshake did not complete: the alert or reason, as the TLS
    library put it (e.g. ``TLSV1_ALERT_PROTOCOL_VERSION``), is in the text."""


class ProtocolViolation(AssertionError):
    """The target sent bytes that cannot be decoded, or that exceed a bound
    the protocol sets (a length prefix, a message size, a stream's length).

    An AssertionError, so the case fails with a verdict naming what the
    target sent, never ends in ``error``. Transports raise it, and so do the
    protocol readers of the suites, through :func:`target_bytes`; ``data``
    keeps only a bounded prefix of the offending bytes.
    """

    def __init__(
        self, what: str, data: bytes | bytearray | memoryview = b"", size: int | None = None
    ) -> None:
        self.what = what
        self.data = bytes(data[:SHOWN_BYTES])
        self.size = len(data) if size is None else size
        super().__init__(f"{what}; bytes: {self.shown()}")

    def __str__(self) -> str:
        # Our message, also when combined with a decoder's error class that
        # formats its own fields (see violation_from).
        return str(self.args[0]) if self.args else ""

    def shown(self) -> str:
        if not self.size:
            return "(none)"
        more = self.size - len(self.data)
        return self.data.hex() + (f"...(+{more} bytes)" if more > 0 else "")


_VIOLATION_CLASSES: dict[type[BaseException], type[ProtocolViolation]] = {}


def violation_from(
    error: BaseException, what: str, data: bytes | bytearray | memoryview
) -> ProtocolViolation:
    """A :class:`ProtocolViolation` that is also an instance of ``error``'s
    class (with its attributes, e.g. ``reason``), so that code catching the
    decoder's own error type goes on working, and code that does not fails
    the case with a verdict instead of ending it in ``error``."""
    error_class = type(error)
    violation_class = _VIOLATION_CLASSES.get(error_class)
    if violation_class is None:
        violation_class = type(
            f"{error_class.__name__}Violation", (ProtocolViolation, error_class), {}
        )
        _VIOLATION_CLASSES[error_class] = violation_class
    violation = violation_class.__new__(violation_class)
    violation.__dict__.update(getattr(error, "__dict__", {}))
    ProtocolViolation.__init__(violation, f"{what} ({error})", data)
    return violation


@contextmanager
def target_bytes(
    what: str, data: bytes | bytearray | memoryview, *decode_errors: type[BaseException]
) -> Iterator[None]:
    """Decode bytes the target sent: a decoder error (one of
    ``decode_errors``) is the target's fault, so it becomes a
    :class:`ProtocolViolation` naming ``what`` was being read and showing
    the bytes (see :func:`violation_from`). Transports and protocol readers
    all convert through here."""
    try:
        yield
    except ProtocolViolation:
        raise
    except decode_errors as exc:
        raise violation_from(exc, what, data) from None


class Deadline:
    """An absolute point in time by which one expected message must have
    arrived. Every read toward that message shares it, so a target that
    trickles bytes (one a second, say) cannot extend it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.at


@dataclass
class TraceEntry:
    direction: str
    """"sent" (harness -> target) and "received": bytes on the wire;
    "sent-plain" and "received-plain": the same traffic after decryption or
    before encryption, as a protocol layer saw it; "event": a note."""
    at: float
    data: bytes
    note: str = ""
    masked: frozenset[int] = frozenset()
    """Secret offsets found before the data was cut to the trace's bound
    (a secret across the cut would not be recognised in the kept prefix)."""
    connection: int | None = None
    """The number of the connection (:class:`TraceConnection`) the entry
    happened on; None for what belongs to no single connection (a listener
    opening, a relay starting, a case's own notes)."""
    framed: bool = False
    """On a connection whose entries are messages (WebSocket), these bytes
    are raw socket bytes instead (a frame the harness refused, an
    unfinished one): already framed, as on the wire."""


Address = tuple[str, int]
"""A host (an IP address as the socket gave it) and a port."""

HARNESS = "harness"
TARGET = "target"


@dataclass
class ConnectionEnd:
    """One side's end of a connection as the harness saw it: ``how`` is
    "fin" (an orderly close or half-close) or "rst" (a reset, an abort)."""

    by: str
    """:data:`HARNESS` or :data:`TARGET` (for a relayed connection: the
    relay's ``client`` or ``server``)."""
    how: str
    at: float


@dataclass
class TraceConnection:
    """One connection a case's trace holds entries of: its number within
    the case (1, 2, ...), its two ends and how it ended, so that a reader
    (and core/pcap.py) can tell the connections of a case apart."""

    number: int
    kind: str
    """"tcp", "tls" (the entries are the plaintext inside TLS),
    "websocket" (the entries are message payloads) or "relayed" (a relay
    between two nodes: "client->server" / "server->client")."""
    label: str
    local: Address | None
    """The harness's end (for a relayed connection: the client's end)."""
    peer: Address | None
    """The target's end (for a relayed connection: the server's)."""
    initiator: str
    """Which end opened it: :data:`HARNESS` (``local``) or :data:`TARGET` (``peer``)."""
    opened_at: float
    detail: str = ""
    """E.g. the TLS version and cipher."""
    path: str = ""
    """A WebSocket's resource (the path of its HTTP upgrade)."""
    ends: list[ConnectionEnd] = field(default_factory=list)

    def describe(self) -> str:
        def shown(address: Address | None) -> str:
            return f"{address[0]}:{address[1]}" if address else "?"

        near, far = ("client", "server") if self.kind == "relayed" else (HARNESS, TARGET)
        return (
            f"connection {self.number}: {near} {shown(self.local)} <-> {far} {shown(self.peer)}, "
            f"{self.kind}{' (' + self.label + ')' if self.label else ''}"
            f"{', path ' + self.path if self.path else ''}"
            f"{', ' + self.detail if self.detail else ''}"
        )


def socket_ends(writer: asyncio.StreamWriter | None) -> tuple[Address | None, Address | None]:
    """(local, peer) of a stream's socket, as the operating system names them."""
    if writer is None:
        return None, None

    def address(value: object) -> Address | None:
        return (
            (str(value[0]), int(value[1])) if isinstance(value, tuple) and len(value) >= 2 else None
        )

    return address(writer.get_extra_info("sockname")), address(writer.get_extra_info("peername"))


class ConnectionTrace:
    """The case's trace as one connection records into it: entries and
    events carry the connection's number. Anything else (the entries, the
    counts, ``bytes_in``, ``render``) is the whole trace's: code that reads
    ``conn.trace`` reads the case's trace, as before."""

    def __init__(self, base: object, whole: WireTrace, connection: TraceConnection) -> None:
        self._base = base
        """What records: the trace itself, or a wrapper of it that renames
        directions (the SSB MITM's legs)."""
        self.whole = whole
        self.connection = connection

    def record(
        self,
        direction: str,
        data: bytes | bytearray | memoryview,
        note: str = "",
        framed: bool = False,
    ) -> None:
        self._base.record(  # type: ignore[attr-defined]
            direction, data, note, connection=self.connection.number, framed=framed
        )

    def event(self, note: str) -> None:
        self._base.event(note, connection=self.connection.number)  # type: ignore[attr-defined]

    def ended(self, by: str, how: str) -> None:
        """One side closed (``how`` "fin") or reset ("rst") the connection;
        each side's first end is kept."""
        if not any(end.by == by for end in self.connection.ends):
            self.connection.ends.append(
                ConnectionEnd(by, how, time.monotonic() - self.whole.started)
            )

    def __getattr__(self, name: str) -> object:
        return getattr(self._base, name)


_ARROWS = {
    "sent": "harness -> target",
    "received": "target -> harness",
    "sent-plain": "harness -> target (plaintext)",
    "received-plain": "target -> harness (plaintext)",
    "client->server": "client -> server (relayed)",
    "server->client": "server -> client (relayed)",
}


@dataclass
class WireTrace:
    """Both directions of one or more connections, in order, up to a bound.

    Each direction keeps its first ``limit`` bytes; what comes after is
    counted in ``dropped_bytes`` and the rendering says how much was not
    kept. Entries beyond ``max_entries`` are counted the same way."""

    entries: list[TraceEntry] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    started_wall: float = field(default_factory=time.time)
    """The wall clock at ``started``: entries' times (``at``) are offsets from it."""
    limit: int = TRACE_BYTES_PER_DIRECTION
    """Bytes kept per direction."""
    max_entries: int = TRACE_MAX_ENTRIES
    kept_bytes: dict[str, int] = field(default_factory=dict)
    dropped_bytes: dict[str, int] = field(default_factory=dict)
    """Per direction: bytes seen but not kept."""
    dropped_entries: int = 0
    redactor: Redactor = field(default_factory=Redactor)
    """The run's secrets: masked wherever the trace is rendered (a BTP
    auth token, for one, crosses the wire in the clear)."""
    connections: list[TraceConnection] = field(default_factory=list)
    """The connections the entries happened on, numbered from 1 in the
    order they were opened."""

    def connect(
        self,
        kind: str,
        local: Address | None,
        peer: Address | None,
        initiator: str = HARNESS,
        label: str = "",
        detail: str = "",
        base: object | None = None,
    ) -> ConnectionTrace:
        """A new connection of this trace: what records through the view
        returned is marked with its number. ``base`` is what records (a
        wrapper of this trace that renames directions), the trace itself by
        default."""
        connection = TraceConnection(
            len(self.connections) + 1,
            kind,
            label,
            local,
            peer,
            initiator,
            time.monotonic() - self.started,
            detail,
        )
        self.connections.append(connection)
        return ConnectionTrace(self if base is None else base, self, connection)

    @property
    def dropped(self) -> int:
        """Bytes not kept, all directions together."""
        return sum(self.dropped_bytes.values())

    def total(self, direction: str) -> int:
        """Bytes seen in ``direction``, kept or not."""
        return self.kept_bytes.get(direction, 0) + self.dropped_bytes.get(direction, 0)

    def record(
        self,
        direction: str,
        data: bytes | bytearray | memoryview,
        note: str = "",
        connection: int | None = None,
        framed: bool = False,
    ) -> None:
        size = len(data)
        kept = self.kept_bytes.get(direction, 0)
        room = self.limit - kept
        entries_full = len(self.entries) >= self.max_entries
        if room <= 0 or entries_full:
            self.dropped_bytes[direction] = self.dropped_bytes.get(direction, 0) + size
            self.dropped_entries += entries_full
            return
        masked: frozenset[int] = frozenset()
        if size > room:
            masked = frozenset(i for i in self.redactor.masked_positions(bytes(data)) if i < room)
            self.dropped_bytes[direction] = self.dropped_bytes.get(direction, 0) + size - room
            note = (note + "; " if note else "") + f"first {room} of {size} bytes kept"
            data = data[:room]
        self.kept_bytes[direction] = kept + len(data)
        self.entries.append(
            TraceEntry(
                direction,
                time.monotonic() - self.started,
                bytes(data),
                note,
                masked,
                connection,
                framed,
            )
        )

    def event(self, note: str, connection: int | None = None) -> None:
        if len(self.entries) >= self.max_entries:
            self.dropped_entries += 1
            return
        self.entries.append(
            TraceEntry("event", time.monotonic() - self.started, b"", note, connection=connection)
        )

    def bytes_in(self, direction: str) -> bytes:
        """The kept bytes of ``direction`` (at most ``limit``)."""
        return b"".join(e.data for e in self.entries if e.direction == direction)

    def render(self) -> str:
        """The trace as text: one block per entry, a hex dump of its bytes;
        at the end, how many bytes per direction were not kept."""
        if not self.entries:
            return "(no traffic)\n"
        # With several connections, each line says which one it is of (and
        # the end lists them, with their addresses as the pcap shows them).
        several = len(self.connections) > 1
        lines = []
        for entry in self.entries:
            on = f"  [connection {entry.connection}]" if several and entry.connection else ""
            if entry.direction == "event":
                lines.append(f"[{entry.at:8.3f}s] -- {self.redactor.text(entry.note)}{on}")
                continue
            note = f"  {self.redactor.text(entry.note)}" if entry.note else ""
            lines.append(
                f"[{entry.at:8.3f}s] {_ARROWS.get(entry.direction, entry.direction)}  "
                f"{len(entry.data)} bytes{note}{on}"
            )
            masked = self.redactor.masked_positions(entry.data) | entry.masked
            lines.append(hexdump(entry.data, indent="    ", masked=masked))
        for direction, count in self.dropped_bytes.items():
            if count:
                lines.append(
                    f"({count} further bytes not kept, {_ARROWS.get(direction, direction)}: the trace "
                    f"keeps the first {self.limit} bytes per direction; "
                    f"{self.total(direction)} bytes in all)"
                )
        if self.dropped_entries:
            lines.append(
                f"({self.dropped_entries} further entries not kept: the trace keeps "
                f"{self.max_entries} entries)"
            )
        if several:
            lines.append("connections:")
            lines.extend(f"  {connection.describe()}" for connection in self.connections)
        return "\n".join(lines) + "\n"


def hexdump(
    data: bytes,
    indent: str = "",
    limit: int = 4096,
    masked: set[int] | frozenset[int] | None = None,
) -> str:
    """Offset, 16 hex bytes, and the printable ASCII, like ``hexdump -C``;
    bytes at ``masked`` offsets (secrets) print as ``**`` and ``*``."""
    shown = data[:limit]
    masked = masked or set()
    rows = []
    for offset in range(0, len(shown), 16):
        chunk = shown[offset : offset + 16]
        hexes = " ".join("**" if offset + i in masked else f"{b:02x}" for i, b in enumerate(chunk))
        text = "".join(
            "*" if offset + i in masked else chr(b) if 32 <= b < 127 else "."
            for i, b in enumerate(chunk)
        )
        rows.append(f"{indent}{offset:08x}  {hexes:<47}  |{text}|")
    if len(data) > limit:
        rows.append(f"{indent}... {len(data) - limit} more bytes")
    if not rows:
        rows.append(f"{indent}(empty)")
    return "\n".join(rows)


def short_hex(data: bytes, limit: int = SHOWN_BYTES) -> str:
    """Bytes for a one-line failure message."""
    text = data[:limit].hex()
    return text + (f"...(+{len(data) - limit} bytes)" if len(data) > limit else "") or "(none)"


class TcpConnection:
    """One TCP connection to the target; reads never wait past a deadline."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        trace: WireTrace | ConnectionTrace,
        deadline: float,
        label: str,
        initiator: str = HARNESS,
    ) -> None:
        self._reader = reader
        self._writer = writer
        tls = writer.get_extra_info("ssl_object") is not None
        if isinstance(trace, ConnectionTrace):
            # Registered when the target connected (TcpServer), before its
            # TLS handshake, so that the events of the handshake are its own.
            self.trace = trace
        else:
            local, peer = socket_ends(writer)
            self.trace = trace.connect("tcp", local, peer, initiator, label, base=trace)
        """The case's trace, as this connection records into it (its
        entries carry the connection's number)."""
        if tls:
            self.trace.connection.kind = "tls"
            self.trace.connection.detail = describe_tls(writer)
        self.deadline = deadline
        self.label = label
        self._buffer = bytearray()
        self.eof = False
        self.tls_alert: str | None = None
        """The TLS alert that ended the connection, if one did."""

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        trace: WireTrace,
        deadline: float = DEFAULT_READ_DEADLINE,
        label: str = "",
        ssl: ssl_module.SSLContext | None = None,
        server_hostname: str | None = None,
    ) -> TcpConnection:
        """Connect; with ``ssl``, also complete a TLS handshake within the
        same deadline. The trace then holds the plaintext: TLS records are
        the TLS library's business, the frames inside are the target's."""
        try:
            # Through the impairment relay when the run has one (core/impair.py).
            reader, writer = await asyncio.wait_for(
                impair.open_connection(
                    host,
                    port,
                    ssl=ssl,
                    server_hostname=(server_hostname or host) if ssl is not None else None,
                    ssl_handshake_timeout=deadline if ssl is not None else None,
                ),
                deadline,
            )
        except asyncio.TimeoutError:
            raise DeadlineExceeded(
                f"could not connect{' with TLS' if ssl else ''} to {host}:{port} "
                f"within {deadline} s"
            ) from None
        except ssl_module.SSLError as exc:
            trace.event(f"TLS handshake with {host}:{port} failed: {tls_reason(exc)}")
            raise TlsRefused(
                f"TLS handshake with {host}:{port} failed: {tls_reason(exc)}"
            ) from None
        except ConnectionResetError as exc:
            if ssl is not None:
                trace.event(f"connection reset during the TLS handshake with {host}:{port}")
                # A reset mid-handshake often means the node speaks no TLS on
                # that port (it read the ClientHello as its own protocol): its
                # log, attached to the case and in logs/, says what it made of it.
                detail = f" ({exc})" if str(exc) else ""
                raise TlsRefused(
                    f"TLS handshake with {host}:{port} failed: the target reset the connection"
                    f"{detail} before answering the ClientHello; does it speak TLS on this port? "
                    "(its log: the case's attachment, or the run's logs/)"
                ) from None
            raise ConnectionError(f"could not connect to {host}:{port}: {exc}") from None
        except OSError as exc:
            raise ConnectionError(f"could not connect to {host}:{port}: {exc}") from None
        through = impair.through()
        conn = cls(reader, writer, trace, deadline, label)
        if ssl is not None:
            conn.trace.event(
                f"connected to {host}:{port}{through} with {describe_tls(writer)}"
                f"{' (' + label + ')' if label else ''}; the trace shows the plaintext"
            )
        else:
            conn.trace.event(
                f"connected to {host}:{port}{through}{' (' + label + ')' if label else ''}"
            )
        return conn

    @property
    def tls(self) -> ssl_module.SSLObject | None:
        """The TLS session (peer certificate, version), or None on plain TCP."""
        return self._writer.get_extra_info("ssl_object")

    async def send(self, data: bytes, note: str = "") -> None:
        self.trace.record("sent", data, note)
        self._writer.write(data)
        try:
            await asyncio.wait_for(self._writer.drain(), self.deadline)
        except asyncio.TimeoutError:
            raise DeadlineExceeded(
                f"target did not read {len(data)} bytes within {self.deadline} s"
            ) from None
        except (ConnectionError, OSError) as exc:
            # The target hung up or reset: a verdict about the target (a
            # failure of the case), not a crash of the harness.
            self.trace.event(f"send failed: {exc}")
            raise PeerClosed(
                f"target closed or reset the connection while the harness sent "
                f"{note or f'{len(data)} bytes'} ({exc})"
            ) from None

    async def send_quietly(self, data: bytes, note: str = "") -> bool:
        """Send when the peer may already have hung up (negative cases): a
        reset is an answer, not an error. Returns whether the write went out."""
        try:
            await self.send(data, note)
            return True
        except (PeerClosed, ConnectionError, OSError):
            return False

    async def _read_some(self, timeout: float) -> bytes:
        try:
            data = await asyncio.wait_for(self._reader.read(MAX_READ_CHUNK), timeout)
        except ConnectionError as exc:
            data = b""
            self.trace.event(f"connection reset by target ({exc})")
            self.trace.ended(TARGET, "rst")
        except ssl_module.SSLError as exc:
            # In TLS 1.3 a server judges the client's certificate after the
            # client's handshake has finished: its refusal is an alert met
            # on the first read. It ends the connection like a close.
            data = b""
            self.tls_alert = tls_reason(exc)
            self.trace.event(f"TLS alert from the target: {self.tls_alert}")
        if data:
            self.trace.record("received", data)
        else:
            if not self.eof:
                self.trace.event("target closed the connection")
                self.trace.ended(TARGET, "fin")
            self.eof = True
        return data

    def _window(self, deadline: float | Deadline | None) -> tuple[float, float]:
        """``(seconds to name in messages, absolute end)`` of a read: the
        connection's deadline, a number of seconds from now, or a
        :class:`Deadline` the caller shares across several reads."""
        if isinstance(deadline, Deadline):
            return deadline.seconds, deadline.at
        limit = self.deadline if deadline is None else deadline
        return limit, time.monotonic() + limit

    async def receive_exactly(
        self, count: int, what: str, deadline: float | Deadline | None = None
    ) -> bytes:
        """Exactly ``count`` bytes, or a failure naming ``what`` was awaited.
        The deadline is for all ``count`` bytes together, not per read."""
        limit, end = self._window(deadline)
        while len(self._buffer) < count:
            if self.eof:
                raise PeerClosed(
                    f"target closed the connection after {len(self._buffer)} of the "
                    f"{count} bytes of {what}; got {short_hex(bytes(self._buffer))}"
                )
            remaining = end - time.monotonic()
            try:
                if remaining <= 0:
                    raise asyncio.TimeoutError
                self._buffer += await self._read_some(remaining)
            except asyncio.TimeoutError:
                raise DeadlineExceeded(
                    f"no {what} within {limit} s: received {len(self._buffer)} of {count} bytes "
                    f"({short_hex(bytes(self._buffer))})"
                ) from None
        data = bytes(self._buffer[:count])
        del self._buffer[:count]
        return data

    async def receive_some(self, deadline: float | Deadline | None = None) -> bytes:
        """Whatever is buffered or arrives next (b"" on close); raises
        DeadlineExceeded if nothing comes in time. A case reading in a loop
        passes one :class:`Deadline` to every call, so that a trickling
        target cannot keep it reading."""
        if self._buffer:
            data = bytes(self._buffer)
            self._buffer.clear()
            return data
        if self.eof:
            return b""
        limit, end = self._window(deadline)
        try:
            return await self._read_some(max(0.0, end - time.monotonic()))
        except asyncio.TimeoutError:
            raise DeadlineExceeded(f"target sent nothing within {limit} s") from None

    async def await_close(
        self,
        deadline: float | Deadline | None = None,
        max_bytes: int = MAX_BYTES_WHILE_AWAITING_CLOSE,
    ) -> tuple[bool, bytes]:
        """Wait for the target to hang up. Returns ``(closed, bytes_received_meanwhile)``:
        closed False means the connection was still open at the deadline, or
        that the target sent more than ``max_bytes`` meanwhile (it is not
        hanging up; the bytes returned are then the first ``max_bytes``)."""
        _, end = self._window(deadline)
        received = bytearray(self._buffer)
        self._buffer.clear()
        while not self.eof:
            remaining = end - time.monotonic()
            if remaining <= 0:
                return False, bytes(received)
            if len(received) > max_bytes:
                self.trace.event(
                    f"harness stops reading: the target sent over {max_bytes} bytes "
                    "instead of hanging up"
                )
                return False, bytes(received[:max_bytes])
            try:
                received += await self._read_some(remaining)
            except asyncio.TimeoutError:
                return False, bytes(received)
        return True, bytes(received)

    def finish_sending(self, note: str = "harness half-closes: it will send no more bytes") -> None:
        """Half-close (TCP FIN) so that the target sees the end of a truncated message."""
        self.trace.event(note)
        if self._writer.can_write_eof() and not self._writer.is_closing():
            try:
                self._writer.write_eof()
                self.trace.ended(HARNESS, "fin")
            except OSError:
                pass

    async def close(self) -> None:
        if self._writer.is_closing():
            return
        self.trace.ended(HARNESS, "fin")
        self._writer.close()
        try:
            await asyncio.wait_for(self._writer.wait_closed(), 1.0)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass

    def abort(self) -> None:
        if not self._writer.is_closing():
            self.trace.ended(HARNESS, "rst")
        self._writer.transport.abort()


class TcpServer:
    """A listening socket on loopback for client-role cases: the harness is
    the server, the target connects to it. ``accept`` has a deadline too."""

    def __init__(
        self,
        trace: WireTrace,
        deadline: float = DEFAULT_READ_DEADLINE,
        host: str = "127.0.0.1",
        ssl: ssl_module.SSLContext | None = None,
    ) -> None:
        self.trace = trace
        self.deadline = deadline
        self.host = host
        self.port = 0
        self.ssl = ssl
        self.tls_failures: list[str] = []
        """Handshakes that did not complete (with TLS): the target's client
        refused the harness's certificate, or offered no acceptable version."""
        self._server: asyncio.base_events.Server | None = None
        self._accepted: asyncio.Queue[TcpConnection] = asyncio.Queue()
        self._front: impair.ImpairRelay | None = None
        self.listen_port = 0
        """The harness's own listener; ``port`` is the impairment relay's
        in front of it when the run has one (the address the target gets)."""

    async def __aenter__(self) -> TcpServer:
        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peer = writer.get_extra_info("peername")
            wire = self.trace.connect(
                "tcp", *socket_ends(writer), TARGET, "client", base=self.trace
            )
            wire.event(f"target connected from {peer[0]}:{peer[1]}")
            if self.ssl is not None:
                # The handshake is done here, not by the listener, so that a
                # failed one is seen: a client-role case needs to know that
                # the target's client refused the harness's certificate.
                try:
                    await writer.start_tls(self.ssl, ssl_handshake_timeout=self.deadline)
                except (ssl_module.SSLError, ConnectionError, OSError, asyncio.TimeoutError) as exc:
                    reason = (
                        tls_reason(exc)
                        if isinstance(exc, ssl_module.SSLError)
                        else f"{type(exc).__name__}: {exc}"
                        if str(exc)
                        else type(exc).__name__
                    )
                    self.tls_failures.append(reason)
                    wire.event(f"TLS handshake with the target failed: {reason}")
                    wire.ended(HARNESS, "rst")
                    writer.transport.abort()
                    return
                wire.event(
                    f"TLS handshake with the target done: {describe_tls(writer)}; "
                    "the trace shows the plaintext"
                )
            await self._accepted.put(
                TcpConnection(reader, writer, wire, self.deadline, "client", TARGET)
            )

        self._server = await asyncio.start_server(on_connect, self.host, 0)
        self.port = self.listen_port = self._server.sockets[0].getsockname()[1]
        self._front = await impair.front(self.host, self.listen_port)
        if self._front is not None:
            self.port = self._front.port
        self.trace.event(
            f"harness listening on {self.host}:{self.listen_port}{' with TLS' if self.ssl else ''}"
            + (
                f"; the target is given {self.host}:{self.port}{impair.through()}"
                if self._front
                else ""
            )
        )
        return self

    async def accept(self, deadline: float) -> TcpConnection:
        try:
            return await asyncio.wait_for(self._accepted.get(), deadline)
        except asyncio.TimeoutError:
            raise DeadlineExceeded(
                f"target did not connect to {self.host}:{self.port} within {deadline} s"
            ) from None

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        if self._front is not None:
            await self._front.stop()
        while not self._accepted.empty():
            await self._accepted.get_nowait().close()
        try:
            await asyncio.wait_for(self._server.wait_closed(), 2.0)
        except asyncio.TimeoutError:
            pass


def tls_reason(exc: BaseException) -> str:
    """The TLS library's reason for a failure (``TLSV1_ALERT_UNKNOWN_CA``,
    ``CERTIFICATE_VERIFY_FAILED``, ...), with its text."""
    reason = getattr(exc, "reason", None)
    verify = getattr(exc, "verify_message", None)
    text = str(exc)
    return f"{reason}{': ' + verify if verify else ''} ({text})" if reason else text


def describe_tls(writer: asyncio.StreamWriter) -> str:
    ssl_object = writer.get_extra_info("ssl_object")
    if ssl_object is None:
        return "plain TCP"
    return f"{ssl_object.version()} ({ssl_object.cipher()[0] if ssl_object.cipher() else '?'})"


class TcpRelay:
    """A recording relay between two nodes under test (interop runs): the
    client connects to the relay, the relay to the server, and every byte
    either way goes into the trace, so an interop failure shows the bytes
    too. Bounded by the trace's memory limit."""

    def __init__(
        self, server_host: str, server_port: int, trace: WireTrace, host: str = "127.0.0.1"
    ) -> None:
        self.server_host = server_host
        self.server_port = server_port
        self.trace = trace
        self.host = host
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._front: impair.ImpairRelay | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.connections = 0
        """Client connections accepted so far: an interop case judging a
        TLS session by outcomes (the relay sees ciphertext only) still knows
        whether the client reconnected, and so had reason to resend."""

    async def __aenter__(self) -> TcpRelay:
        async def pump(
            reader: asyncio.StreamReader,
            writer: asyncio.StreamWriter,
            direction: str,
            wire: ConnectionTrace,
        ) -> None:
            side = direction.split("->")[0]
            try:
                while data := await reader.read(MAX_READ_CHUNK):
                    wire.record(direction, data)
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                wire.event(f"{side} closed its side")
                wire.ended(side, "fin")
                if writer.can_write_eof() and not writer.is_closing():
                    try:
                        writer.write_eof()
                    except OSError:
                        pass

        async def on_client(c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            # One connection in the trace per client connection: from the
            # client's end to the server the relay forwards to.
            wire = self.trace.connect(
                "relayed",
                socket_ends(c_writer)[1],
                (self.server_host, self.server_port),
                "client",
                "relayed",
            )
            wire.event(
                f"client connected to the relay; relaying to {self.server_host}:{self.server_port}"
            )
            try:
                s_reader, s_writer = await impair.open_connection(
                    self.server_host, self.server_port
                )
            except OSError as exc:
                wire.event(f"relay could not reach the server: {exc}")
                wire.ended("server", "rst")
                c_writer.close()
                return
            await asyncio.gather(
                pump(c_reader, s_writer, "client->server", wire),
                pump(s_reader, c_writer, "server->client", wire),
            )
            for writer in (c_writer, s_writer):
                writer.close()

        def track(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.ensure_future(on_client(reader, writer))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        self._server = await asyncio.start_server(track, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        # Both connections are the harness's with a target: the client's
        # comes through an impairment relay in front, the server's through
        # one behind (impair.open_connection), when the run has one.
        self._front = await impair.front(self.host, self.port)
        if self._front is not None:
            self.port = self._front.port
            self.trace.event(f"the client is given {self.host}:{self.port}{impair.through()}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        if self._front is not None:
            await self._front.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

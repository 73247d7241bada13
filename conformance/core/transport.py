"""Connections to a target with a deadline on every read, and a wire trace.

Every byte a case sends or receives is recorded in a :class:`WireTrace`
(direction, time, bytes, an optional note such as "msg1 (client hello)").
The trace is what a failure shows: the plugin renders it as a hex dump,
attaches it to the Allure report and writes it beside the results.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from .redact import Redactor

DEFAULT_READ_DEADLINE = 3.0
"""Seconds a case waits for bytes the spec says must come. Generous for
loopback; configurable with --deadline."""

MAX_READ_CHUNK = 65536


class DeadlineExceeded(AssertionError):
    """The target did not send what was expected in time. An AssertionError:
    a target that never answers fails the case (it is a verdict, not a crash)."""


class PeerClosed(AssertionError):
    """The target closed the connection while the case expected more bytes."""


@dataclass
class TraceEntry:
    direction: str
    """"sent" (harness -> target) and "received": bytes on the wire;
    "sent-plain" and "received-plain": the same traffic after decryption or
    before encryption, as a protocol layer saw it; "event": a note."""
    at: float
    data: bytes
    note: str = ""


@dataclass
class WireTrace:
    """Both directions of one or more connections, in order."""

    entries: list[TraceEntry] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    limit: int = 1 << 20
    """Bytes kept per direction; beyond it entries are counted, not stored,
    so that a target flooding us cannot exhaust memory."""
    dropped: int = 0
    redactor: Redactor = field(default_factory=Redactor)
    """The run's secrets: masked wherever the trace is rendered (a BTP
    auth token, for one, crosses the wire in the clear)."""

    def _kept(self) -> int:
        return sum(len(e.data) for e in self.entries)

    def record(self, direction: str, data: bytes, note: str = "") -> None:
        if self._kept() + len(data) > 2 * self.limit:
            self.dropped += len(data)
            return
        self.entries.append(TraceEntry(direction, time.monotonic() - self.started, bytes(data), note))

    def event(self, note: str) -> None:
        self.entries.append(TraceEntry("event", time.monotonic() - self.started, b"", note))

    def bytes_in(self, direction: str) -> bytes:
        return b"".join(e.data for e in self.entries if e.direction == direction)

    def render(self) -> str:
        """The trace as text: one block per entry, a hex dump of its bytes."""
        if not self.entries:
            return "(no traffic)\n"
        lines = []
        arrows = {"sent": "harness -> target", "received": "target -> harness",
                  "sent-plain": "harness -> target (plaintext)",
                  "received-plain": "target -> harness (plaintext)",
                  "client->server": "client -> server (relayed)",
                  "server->client": "server -> client (relayed)"}
        for entry in self.entries:
            if entry.direction == "event":
                lines.append(f"[{entry.at:8.3f}s] -- {self.redactor.text(entry.note)}")
                continue
            note = f"  {self.redactor.text(entry.note)}" if entry.note else ""
            lines.append(f"[{entry.at:8.3f}s] {arrows[entry.direction]}  {len(entry.data)} bytes{note}")
            lines.append(hexdump(entry.data, indent="    ", masked=self.redactor.masked_positions(entry.data)))
        if self.dropped:
            lines.append(f"({self.dropped} further bytes not kept)")
        return "\n".join(lines) + "\n"


def hexdump(data: bytes, indent: str = "", limit: int = 4096, masked: set[int] | None = None) -> str:
    """Offset, 16 hex bytes, and the printable ASCII, like ``hexdump -C``;
    bytes at ``masked`` offsets (secrets) print as ``**`` and ``*``."""
    shown = data[:limit]
    masked = masked or set()
    rows = []
    for offset in range(0, len(shown), 16):
        chunk = shown[offset:offset + 16]
        hexes = " ".join("**" if offset + i in masked else f"{b:02x}" for i, b in enumerate(chunk))
        text = "".join("*" if offset + i in masked else chr(b) if 32 <= b < 127 else "."
                       for i, b in enumerate(chunk))
        rows.append(f"{indent}{offset:08x}  {hexes:<47}  |{text}|")
    if len(data) > limit:
        rows.append(f"{indent}... {len(data) - limit} more bytes")
    if not rows:
        rows.append(f"{indent}(empty)")
    return "\n".join(rows)


def short_hex(data: bytes, limit: int = 64) -> str:
    """Bytes for a one-line failure message."""
    text = data[:limit].hex()
    return text + (f"...(+{len(data) - limit} bytes)" if len(data) > limit else "") or "(none)"


class TcpConnection:
    """One TCP connection to the target; reads never wait past a deadline."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 trace: WireTrace, deadline: float, label: str) -> None:
        self._reader = reader
        self._writer = writer
        self.trace = trace
        self.deadline = deadline
        self.label = label
        self._buffer = bytearray()
        self.eof = False

    @classmethod
    async def open(cls, host: str, port: int, trace: WireTrace,
                   deadline: float = DEFAULT_READ_DEADLINE, label: str = "") -> TcpConnection:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), deadline)
        except asyncio.TimeoutError:
            raise DeadlineExceeded(f"could not connect to {host}:{port} within {deadline} s") from None
        except OSError as exc:
            raise ConnectionError(f"could not connect to {host}:{port}: {exc}") from None
        trace.event(f"connected to {host}:{port}{' (' + label + ')' if label else ''}")
        return cls(reader, writer, trace, deadline, label)

    async def send(self, data: bytes, note: str = "") -> None:
        self.trace.record("sent", data, note)
        self._writer.write(data)
        try:
            await asyncio.wait_for(self._writer.drain(), self.deadline)
        except asyncio.TimeoutError:
            raise DeadlineExceeded(f"target did not read {len(data)} bytes within {self.deadline} s") from None
        except (ConnectionError, OSError) as exc:
            self.trace.event(f"send failed: {exc}")
            raise

    async def send_quietly(self, data: bytes, note: str = "") -> bool:
        """Send when the peer may already have hung up (negative cases): a
        reset is an answer, not an error. Returns whether the write went out."""
        try:
            await self.send(data, note)
            return True
        except (ConnectionError, OSError):
            return False

    async def _read_some(self, timeout: float) -> bytes:
        try:
            data = await asyncio.wait_for(self._reader.read(MAX_READ_CHUNK), timeout)
        except ConnectionResetError:
            data = b""
            self.trace.event("connection reset by target")
        if data:
            self.trace.record("received", data)
        else:
            if not self.eof:
                self.trace.event("target closed the connection")
            self.eof = True
        return data

    async def receive_exactly(self, count: int, what: str, deadline: float | None = None) -> bytes:
        """Exactly ``count`` bytes, or a failure naming ``what`` was awaited."""
        limit = self.deadline if deadline is None else deadline
        end = time.monotonic() + limit
        while len(self._buffer) < count:
            if self.eof:
                raise PeerClosed(f"target closed the connection after {len(self._buffer)} of the "
                                 f"{count} bytes of {what}; got {short_hex(bytes(self._buffer))}")
            remaining = end - time.monotonic()
            try:
                if remaining <= 0:
                    raise asyncio.TimeoutError
                self._buffer += await self._read_some(remaining)
            except asyncio.TimeoutError:
                raise DeadlineExceeded(
                    f"no {what} within {limit} s: received {len(self._buffer)} of {count} bytes "
                    f"({short_hex(bytes(self._buffer))})") from None
        data = bytes(self._buffer[:count])
        del self._buffer[:count]
        return data

    async def receive_some(self, deadline: float | None = None) -> bytes:
        """Whatever is buffered or arrives next (b"" on close); raises
        DeadlineExceeded if nothing comes in time."""
        if self._buffer:
            data = bytes(self._buffer)
            self._buffer.clear()
            return data
        if self.eof:
            return b""
        limit = self.deadline if deadline is None else deadline
        try:
            return await self._read_some(limit)
        except asyncio.TimeoutError:
            raise DeadlineExceeded(f"target sent nothing within {limit} s") from None

    async def await_close(self, deadline: float | None = None) -> tuple[bool, bytes]:
        """Wait for the target to hang up. Returns ``(closed, bytes_received_meanwhile)``:
        closed False means the connection was still open at the deadline."""
        limit = self.deadline if deadline is None else deadline
        end = time.monotonic() + limit
        received = bytes(self._buffer)
        self._buffer.clear()
        while not self.eof:
            remaining = end - time.monotonic()
            if remaining <= 0:
                return False, received
            try:
                received += await self._read_some(remaining)
            except asyncio.TimeoutError:
                return False, received
        return True, received

    def finish_sending(self, note: str = "harness half-closes: it will send no more bytes") -> None:
        """Half-close (TCP FIN) so that the target sees the end of a truncated message."""
        self.trace.event(note)
        if self._writer.can_write_eof() and not self._writer.is_closing():
            try:
                self._writer.write_eof()
            except OSError:
                pass

    async def close(self) -> None:
        if self._writer.is_closing():
            return
        self._writer.close()
        try:
            await asyncio.wait_for(self._writer.wait_closed(), 1.0)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass

    def abort(self) -> None:
        self._writer.transport.abort()


class TcpServer:
    """A listening socket on loopback for client-role cases: the harness is
    the server, the target connects to it. ``accept`` has a deadline too."""

    def __init__(self, trace: WireTrace, deadline: float = DEFAULT_READ_DEADLINE,
                 host: str = "127.0.0.1") -> None:
        self.trace = trace
        self.deadline = deadline
        self.host = host
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._accepted: asyncio.Queue[TcpConnection] = asyncio.Queue()

    async def __aenter__(self) -> TcpServer:
        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peer = writer.get_extra_info("peername")
            self.trace.event(f"target connected from {peer[0]}:{peer[1]}")
            await self._accepted.put(TcpConnection(reader, writer, self.trace, self.deadline, "client"))

        self._server = await asyncio.start_server(on_connect, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        self.trace.event(f"harness listening on {self.host}:{self.port}")
        return self

    async def accept(self, deadline: float) -> TcpConnection:
        try:
            return await asyncio.wait_for(self._accepted.get(), deadline)
        except asyncio.TimeoutError:
            raise DeadlineExceeded(f"target did not connect to {self.host}:{self.port} within {deadline} s") from None

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        while not self._accepted.empty():
            await self._accepted.get_nowait().close()
        try:
            await asyncio.wait_for(self._server.wait_closed(), 2.0)
        except asyncio.TimeoutError:
            pass


class TcpRelay:
    """A recording relay between two nodes under test (interop runs): the
    client connects to the relay, the relay to the server, and every byte
    either way goes into the trace, so an interop failure shows the bytes
    too. Bounded by the trace's memory limit."""

    def __init__(self, server_host: str, server_port: int, trace: WireTrace, host: str = "127.0.0.1") -> None:
        self.server_host = server_host
        self.server_port = server_port
        self.trace = trace
        self.host = host
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> TcpRelay:
        async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, direction: str) -> None:
            try:
                while data := await reader.read(MAX_READ_CHUNK):
                    self.trace.record(direction, data)
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                self.trace.event(f"{direction.split('->')[0]} closed its side")
                if writer.can_write_eof() and not writer.is_closing():
                    try:
                        writer.write_eof()
                    except OSError:
                        pass

        async def on_client(c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
            self.trace.event(f"client connected to the relay; relaying to {self.server_host}:{self.server_port}")
            try:
                s_reader, s_writer = await asyncio.open_connection(self.server_host, self.server_port)
            except OSError as exc:
                self.trace.event(f"relay could not reach the server: {exc}")
                c_writer.close()
                return
            await asyncio.gather(pump(c_reader, s_writer, "client->server"),
                                 pump(s_reader, c_writer, "server->client"))
            for writer in (c_writer, s_writer):
                writer.close()

        def track(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.ensure_future(on_client(reader, writer))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        self._server = await asyncio.start_server(track, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

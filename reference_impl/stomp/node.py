"""The reference STOMP server over TLS: asyncio around the sans-I/O
:class:`~.server.ServerConnection` and the durable :class:`~.store.Store`.

- TLS 1.3 minimum with client certificates required (tls.py): the handshake
  has :data:`HANDSHAKE_TIMEOUT`; a client that fails it never reaches STOMP.
- Group commit: every connection hands its accepted SENDs to one
  :class:`Committer`, which appends whatever has queued up and fsyncs once per
  batch in a worker thread; a connection writes the RECEIPTs (which the core
  releases only then) after its messages are durable. A pipelining client
  gets one fsync per read, not one per message.
- Heart-beats: once connected the node sends an EOL whenever it has sent
  nothing for a third of the agreed interval (so the client sees data well
  within the interval it asked for), and drops a client only after silence
  past :func:`grace_seconds` of the interval the client promised; with no
  heart-beats agreed an idle connected client is kept for ever (profile: the
  server SHOULD NOT terminate the connection unilaterally, without a
  reason). A client whose CONNECT is not complete ``connect_timeout``
  seconds after the handshake is dropped, however it trickles bytes.
- Every read is bounded (65536 bytes at a time, frames by the core's
  parser), every write has :data:`WRITE_TIMEOUT`, connections are capped at
  ``max_connections``; nothing a peer sends can raise out of a handler.

Faults (``--fault``, reference_impl/stomp/faults.py) go to every
connection's core as ``faults=...``; the node's own points (the TLS context,
the store, read timeouts, heart-beats, when stores happen) are applied here.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from ..variants import UNPROMPTED_TRAFFIC, Shape, shape_writer
from ..faults import FaultPoints
from .faults import FAULT_STORE_DELAY
from .faults import SPECS as FAULT_SPECS
from .server import DEFAULT_HEART_BEAT, ServerConnection
from .store import Store, StoredMessage, StoreError
from .tls import server_context
from .variants import OTHER_HEART_BEATS, SERVER_HEART_BEAT, UNPROMPTED_INTERVAL, FrameStyle

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT = 10.0
WRITE_TIMEOUT = 10.0
DEFAULT_CONNECT_TIMEOUT = 30.0
"""Seconds a client gets, after the TLS handshake, to send CONNECT."""
DEFAULT_MAX_CONNECTIONS = 256
READ_SIZE = 65536
MAX_TIMER_SECONDS = 86400.0
"""heart-beat values are unbounded integers; timers are capped at a day."""


DEFAULT_GRACE_MARGIN = 5.0


def grace_seconds(expect_ms: int, margin: float = DEFAULT_GRACE_MARGIN) -> float:
    """How long a client that promised data every ``expect_ms`` may stay
    silent before it is dropped: twice the interval, and at least ``margin``
    seconds more than it (STOMP 1.2: the receiver "SHOULD be tolerant and
    take into account an error margin")."""
    interval = expect_ms / 1000
    return min(max(2 * interval, interval + margin), MAX_TIMER_SECONDS)


def server_ssl_context(
    cert_file: str, key_file: str, ca_file: str, faults: frozenset = frozenset()
) -> ssl.SSLContext:
    """tls.server_context, as the TLS faults change it (the point server-tls-context)."""
    points = FaultPoints(FAULT_SPECS, faults)
    return points.apply("server-tls-context", server_context(cert_file, key_file, ca_file))


class Committer:
    """Appends submitted messages to the store in submission order, one
    fsync per batch, off the event loop; each submit's future resolves once
    its message is durable (or fails with StoreError)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._pending: list[tuple[StoredMessage, asyncio.Future]] = []
        self._task: asyncio.Task | None = None

    def submit(self, message: StoredMessage) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        self._pending.append((message, future))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())
        return future

    async def _run(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                await asyncio.to_thread(self.store.append, [message for message, _ in batch])
            except (
                Exception
            ) as exc:  # a disk error must reach the connections, not kill the committer
                error = exc if isinstance(exc, StoreError) else StoreError(str(exc))
                for _, future in batch:
                    if not future.done():
                        future.set_exception(error)
            else:
                for _, future in batch:
                    if not future.done():
                        future.set_result(None)

    async def drain(self) -> None:
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)


@dataclass
class _Link:
    """The clock of one connection."""

    last_write: float
    connect_deadline: float
    """CONNECT must be complete by then, however the bytes trickle in."""
    stored: list[StoredMessage] = field(default_factory=list)


class StompServerNode:
    """The server: ``await start(host, port)``, then ``await close()``."""

    def __init__(
        self,
        *,
        cert_file: str,
        key_file: str,
        ca_file: str,
        store_dir: str | Path,
        faults: frozenset = frozenset(),
        heart_beat: tuple[int, int] = DEFAULT_HEART_BEAT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        grace_margin: float = DEFAULT_GRACE_MARGIN,
        variants: frozenset[str] = frozenset(),
        shape: Shape = Shape(),
    ) -> None:
        self.faults = frozenset(faults)
        self._points = FaultPoints(FAULT_SPECS, self.faults)
        self.variants = frozenset(variants)
        """Conformant variants (reference_impl/stomp/variants.py): the frame
        ones go to each ServerConnection; other-heart-beats replaces
        ``heart_beat``; unprompted-traffic adds EOLs of the node's own."""
        self.shape = shape
        """How every connection's writes leave (split, coalesced, late)."""
        self.style = FrameStyle.from_variants(self.variants)
        if OTHER_HEART_BEATS in self.variants:
            heart_beat = SERVER_HEART_BEAT
        self.ssl_context = server_ssl_context(cert_file, key_file, ca_file, self.faults)
        self.store = Store(store_dir, wipe=self._points.apply("store-wiped-on-start", False))
        self.committer = Committer(self.store)
        self.heart_beat = heart_beat
        self.connect_timeout = connect_timeout
        self.max_connections = max_connections
        self.grace_margin = grace_margin
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task] = set()
        self._background: set[asyncio.Task] = set()
        self._sessions = 0

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(
            self._accept,
            host,
            port,
            ssl=self.ssl_context,
            ssl_handshake_timeout=HANDSHAKE_TIMEOUT,
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
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.committer.drain()
        self.store.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if len(self._handlers) >= self.max_connections:
            log.warning("refusing a connection: %d open", len(self._handlers))
            writer.transport.abort()
            return
        self._handlers.add(task)
        try:
            await self._serve(reader, shape_writer(writer, self.shape))
        except asyncio.CancelledError:
            # Only close() cancels handlers. Ending normally keeps asyncio's
            # stream callback from logging the cancellation as an error.
            return
        except Exception:  # a bug, not the peer's doing: log it, never take the server down
            log.exception("connection handler failed")
        finally:
            self._handlers.discard(task)

    async def _write(self, writer: asyncio.StreamWriter, link: _Link, data: bytes) -> None:
        if not data:
            return
        writer.write(data)
        link.last_write = asyncio.get_running_loop().time()
        await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT)

    def _read_timeout(self, conn: ServerConnection, link: _Link) -> float | None:
        return self._points.apply(
            "read-timeout",
            self._correct_read_timeout(conn, link),
            connected=conn.connected,
            heart_beat_header_missing=conn.heart_beat_header_missing,
        )

    def _correct_read_timeout(self, conn: ServerConnection, link: _Link) -> float | None:
        if not conn.connected:
            return max(0.0, link.connect_deadline - asyncio.get_running_loop().time())
        expect_ms = conn.heart_beats[1]
        return grace_seconds(expect_ms, self.grace_margin) if expect_ms else None

    async def _heart_beats(
        self, writer: asyncio.StreamWriter, link: _Link, interval_ms: int
    ) -> None:
        """An EOL whenever nothing was sent for half the interval: the other
        half is the margin for a loaded machine, so the client sees data
        well within the interval it asked for. (Variant other-heart-beats:
        for the whole interval, the latest the text allows.)"""
        loop = asyncio.get_running_loop()
        tick = min(
            interval_ms / (1000 if OTHER_HEART_BEATS in self.variants else 2000), MAX_TIMER_SECONDS
        )
        while not writer.is_closing():
            await asyncio.sleep(max(0.0, link.last_write + tick - loop.time()))
            if loop.time() - link.last_write >= tick and not writer.is_closing():
                writer.write(self.style.eol)
                link.last_write = loop.time()

    async def _unprompted(self, writer: asyncio.StreamWriter, link: _Link) -> None:
        """Variant unprompted-traffic: an EOL every UNPROMPTED_INTERVAL
        seconds from CONNECTED on, whatever was agreed."""
        while not writer.is_closing():
            await asyncio.sleep(UNPROMPTED_INTERVAL)
            if not writer.is_closing():
                writer.write(self.style.eol)
                link.last_write = asyncio.get_running_loop().time()

    def _store_late(self, message: StoredMessage) -> None:
        """A deferred store (the point deferred-stores): the write happens
        well after the RECEIPT."""

        async def later() -> None:
            await asyncio.sleep(FAULT_STORE_DELAY)
            await self.committer.submit(message)

        task = asyncio.create_task(later())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        self._sessions += 1
        peer = writer.get_extra_info("peername")
        conn = ServerConnection(
            heart_beat=self.heart_beat,
            faults=self.faults,
            session_id=f"s{self._sessions}",
            variants=self.variants,
        )
        link = _Link(last_write=loop.time(), connect_deadline=loop.time() + self.connect_timeout)
        beats: asyncio.Task | None = None
        unprompted: asyncio.Task | None = None
        # What the connection stored is kept only for a fault that reads it
        # (the point removed-after-cut): the store does not keep messages in memory.
        keep_stored = self._points.changes("removed-after-cut")
        log.info("connection %s from %s", conn.session_id, peer)
        try:
            while not conn.finished:
                try:
                    data = await asyncio.wait_for(
                        reader.read(READ_SIZE), self._read_timeout(conn, link)
                    )
                except TimeoutError:
                    if not conn.connected:
                        log.info("%s: no CONNECT in time", conn.session_id)
                        break
                    conn.heart_beat_timeout()
                    await self._write(writer, link, conn.data_to_send())
                    break
                if not data:
                    conn.receive_eof()
                    break
                requests = conn.receive_data(data)
                send_every = self._points.apply("heart-beat-send-interval", conn.heart_beats[0])
                if beats is None and conn.connected and send_every:
                    beats = asyncio.create_task(self._heart_beats(writer, link, send_every))
                if unprompted is None and conn.connected and UNPROMPTED_TRAFFIC in self.variants:
                    unprompted = asyncio.create_task(self._unprompted(writer, link))
                deferred = self._points.apply("deferred-stores", [], requests=requests)
                for request in deferred:
                    self._store_late(request.message)
                    conn.stored(request.request_id)
                requests = [request for request in requests if request not in deferred]
                futures = [
                    (request, self.committer.submit(request.message)) for request in requests
                ]
                # What needs no store (CONNECTED, an ERROR for the first frame) goes out now.
                await self._write(writer, link, conn.data_to_send())
                for request, future in futures:
                    try:
                        await future
                    except StoreError as exc:
                        log.error("%s: store failed: %s", conn.session_id, exc)
                        conn.store_failed(request.request_id, str(exc))
                        break
                    if keep_stored:
                        link.stored.append(request.message)
                    conn.stored(request.request_id)
                await self._write(writer, link, conn.data_to_send())
        except (ConnectionError, ssl.SSLError, OSError, TimeoutError) as exc:
            log.info("%s: connection lost: %s", conn.session_id, exc)
        finally:
            for task in (beats, unprompted):
                if task is not None:
                    task.cancel()
            removed = self._points.apply(
                "removed-after-cut", [], stored=link.stored, disconnected=conn.disconnected
            )
            if removed:
                await asyncio.to_thread(self.store.remove, removed)
            log.info("%s: closed (%s)", conn.session_id, conn.error or "no error")
            await self._close(writer)

    @staticmethod
    async def _close(writer: asyncio.StreamWriter) -> None:
        """Close after the last frame is flushed (bounded: a peer that stops
        reading cannot hold the connection open)."""
        try:
            writer.close()
            await asyncio.wait_for(writer.wait_closed(), WRITE_TIMEOUT)
        except (ConnectionError, ssl.SSLError, OSError, TimeoutError):
            writer.transport.abort()

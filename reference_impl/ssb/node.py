"""A small asyncio SSB node: the reference target and client of the harness.

It runs :class:`~.connection.SsbConnection` over TCP and serves what a peer
needs to replicate from it: ``createHistoryStream`` (every option of the
guide's "createHistoryStream" section), ``whoami`` and ``publish``. The
:func:`replicate` client fetches and verifies one feed from any peer.

It is deliberately minimal (no gossip, no EBT, no blobs, no persistence): it
exists so that conformance suites have a known-good peer to test against,
and, through :class:`Fault`, known-bad ones that the suites must flag (each
declared in faults.py as what it changes at the fault points met here).

Every read has a deadline (the handshake's, then the idle timeout) and every
buffer is bounded, so a silent or hostile peer cannot hold the node forever
or make it buffer without limit.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .connection import (
    AsyncError,
    Closed,
    ConnectionEvent,
    ConnectionState,
    Goodbye,
    HandshakeComplete,
    ProtocolViolation,
    Request,
    Response,
    SsbConnection,
    StreamData,
    StreamEnd,
)
from ..faults import FaultPoints
from ..variants import UNPROMPTED_TRAFFIC, Shape, shape_writer
from .faults import SPECS as FAULT_SPECS
from .faults import Fault
from .variants import UNPROMPTED_INTERVAL
from .feed import Feed, FeedError, create_message, verify_message
from .keys import MAIN_NETWORK_KEY, Keypair, feed_id_to_public
from .rpc import ASYNC_TYPES, RpcError

log = logging.getLogger(__name__)

DEFAULT_HANDSHAKE_TIMEOUT = 10.0
DEFAULT_IDLE_TIMEOUT = 60.0
"""Seconds without a byte received, or a message sent, before a connection
is closed (with goodbyes)."""
DEFAULT_REPLICATE_TIMEOUT = 30.0

READ_SIZE = 64 * 1024
"""Bytes asked of the socket per read; also the StreamReader's buffer limit."""
WRITE_BUFFER_HIGH = 256 * 1024
"""Above this many unsent bytes, writers wait (drain) for the peer to read."""
MAX_RPC_BODY = 256 * 1024
"""Largest RPC body accepted. Real requests are a few hundred bytes and a
message is at most 8 KiB, so this only bounds what a hostile peer can make us
buffer."""
MAX_STREAMS_PER_CONNECTION = 64
MAX_CONNECTIONS = 128
LINGER_SECONDS = 5.0
"""After our goodbye, how long to wait for the peer's before hanging up."""

_ERROR_NAME = "Error"


def _now_ms() -> int:
    return int(time.time() * 1000)


# --- createHistoryStream options ----------------------------------------------------


@dataclass(frozen=True)
class HistoryOptions:
    """The options of one createHistoryStream request, checked.

    ``sequence`` is the option as given (``seq`` standing in for it; 0 when
    absent); ``limit`` None means unlimited.
    """

    feed_id: str
    sequence: int
    limit: int | None
    live: bool
    old: bool
    keys: bool

    @property
    def start(self) -> int:
        """The sequence number of the first message the stream may send:
        ``sequence`` itself, as the network reads it (erratum SSB-E1,
        docs/errata/ssb.md), or 1 when it is absent or 0."""
        return max(self.sequence, 1)


def _sequence_option(options: dict, name: str) -> int | None:
    if name not in options:
        return None
    value = options[name]
    # JSON cannot tell 2 from 2.0, so accept an integral float too.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def _bool_option(options: dict, name: str, default: bool) -> bool:
    value = options.get(name, default)
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    return value


def parse_history_options(args: list) -> HistoryOptions:
    """Check the arguments of a createHistoryStream request.

    Raises ValueError with a message fit for the error reply. Follows the
    guide: ``id`` is required; ``sequence`` (or its legacy name ``seq``;
    both with different values is an error) is the first sequence number to
    send (SSB-E1), from the beginning when absent; ``live`` defaults
    to false, ``old`` and ``keys`` to true. A negative ``limit`` means no
    limit, as in the JS stack where -1 is the default.
    """
    if not args or not isinstance(args[0], dict):
        raise ValueError("createHistoryStream takes one argument, an options object")
    options = args[0]
    feed_id = options.get("id")
    if feed_id is None:
        raise ValueError("createHistoryStream: the id option is required")
    try:
        feed_id_to_public(feed_id)
    except ValueError as exc:
        raise ValueError(f"createHistoryStream: invalid id: {exc}") from None
    sequence = _sequence_option(options, "sequence")
    seq = _sequence_option(options, "seq")
    if sequence is not None and seq is not None and sequence != seq:
        raise ValueError(f"createHistoryStream: sequence ({sequence}) and seq ({seq}) conflict")
    limit = options.get("limit")
    if limit is not None:
        if isinstance(limit, float) and limit.is_integer():
            limit = int(limit)
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise ValueError(f"limit must be an integer, got {limit!r}")
        if limit < 0:
            limit = None
    return HistoryOptions(
        feed_id=feed_id,
        sequence=sequence if sequence is not None else (seq if seq is not None else 0),
        limit=limit,
        live=_bool_option(options, "live", False),
        old=_bool_option(options, "old", True),
        keys=_bool_option(options, "keys", True),
    )


# --- The node ---------------------------------------------------------------------


@dataclass
class _StoredFeed:
    """A feed plus, per message, its id and when this node received it (the
    ``key`` and ``timestamp`` of a keys=true reply). Feed.messages and
    Feed.ids copy their lists, which would make serving a feed quadratic."""

    feed: Feed
    ids: list[str]
    received: list[int]

    def add(self, msg: dict, received: int) -> str:
        msg_id = self.feed.add(msg)
        self.ids.append(msg_id)
        self.received.append(received)
        return msg_id


class SsbNode:
    """Holds feeds and serves them over SSB. Sans persistence: feeds live in memory.

    ``clock`` returns milliseconds since the epoch; it stamps new messages
    and received ones.
    """

    def __init__(
        self,
        keypair: Keypair,
        network_key: bytes = MAIN_NETWORK_KEY,
        *,
        fault: Fault | None = None,
        faults: Iterable[Fault | str] = (),
        handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        clock: Callable[[], int] = _now_ms,
        variants: Iterable[str] = (),
        shape: Shape = Shape(),
    ) -> None:
        self.keypair = keypair
        # Behaviours the guide allows that the plain node does not show (variants.py).
        self.variants = frozenset(variants)
        self.shape = shape
        self.network_key = network_key
        # Rules broken on purpose (faults.py); ``fault`` is one more.
        self.faults = frozenset(Fault(name) for name in (*faults, *([fault] if fault else [])))
        self._points = FaultPoints(FAULT_SPECS, self.faults)
        self.handshake_timeout = handshake_timeout
        self.idle_timeout = idle_timeout
        self._clock = clock
        self._feeds: dict[str, _StoredFeed] = {keypair.feed_id: _StoredFeed(Feed(keypair), [], [])}
        # Live streams wait on these; an append sets the feed's event and
        # drops it, so the next wait gets a fresh one.
        self._appended: dict[str, asyncio.Event] = {}
        self._server: asyncio.AbstractServer | None = None
        self._sessions: set[asyncio.Task[None]] = set()

    # --- feeds

    @property
    def feed_id(self) -> str:
        return self.keypair.feed_id

    @property
    def feed_ids(self) -> list[str]:
        """The feeds this node holds and serves, its own first."""
        return list(self._feeds)

    def messages(self, feed_id: str) -> list[dict]:
        """The messages held of ``feed_id`` (empty if none)."""
        stored = self._feeds.get(feed_id)
        return stored.feed.messages if stored else []

    def publish(self, content: dict | str) -> dict:
        """Append to the node's own feed; returns ``{key, value, timestamp}``.

        Raises FeedError if the content is not valid message content.
        """
        stored = self._feeds[self.feed_id]
        timestamp = self._points.apply("new-message-timestamp", self._clock())
        latest = stored.feed.latest
        msg = create_message(
            self.keypair,
            stored.ids[-1] if stored.ids else None,
            latest["sequence"] + 1 if latest else 1,
            timestamp,
            content,
        )
        msg_id = stored.add(msg, timestamp)
        self._notify(self.feed_id)
        return {"key": msg_id, "value": msg, "timestamp": timestamp}

    def add_message(self, msg: dict) -> str:
        """Verify ``msg`` as the next message of its author's feed and keep it.

        Returns the message id; raises FeedError if it does not verify or
        does not extend the feed held.
        """
        author = msg.get("author") if isinstance(msg, dict) else None
        stored = self._feeds.get(author) if isinstance(author, str) else None
        if stored is None:
            stored = _StoredFeed(Feed(), [], [])
        msg_id = stored.add(msg, self._clock())
        self._feeds.setdefault(author, stored)
        self._notify(author)
        return msg_id

    def _notify(self, feed_id: str) -> None:
        event = self._appended.pop(feed_id, None)
        if event is not None:
            event.set()

    async def _wait_for_append(self, feed_id: str) -> None:
        await self._appended.setdefault(feed_id, asyncio.Event()).wait()

    def _history_item(self, feed_id: str, sequence: int, keys: bool) -> Any:
        """Message ``sequence`` of ``feed_id`` as createHistoryStream sends it."""
        stored = self._feeds[feed_id]
        value = stored.feed.get(sequence)
        assert value is not None
        index = sequence - 1
        item = self._points.apply(
            "history-item",
            {"key": stored.ids[index], "value": value, "timestamp": stored.received[index]},
            own_feed=feed_id == self.feed_id,
            keypair=self.keypair,
            key_before=stored.ids[index - 1],
        )
        return item if keys else item["value"]

    def _feed_length(self, feed_id: str) -> int:
        stored = self._feeds.get(feed_id)
        return len(stored.feed) if stored else 0

    async def replicate(
        self,
        host: str,
        port: int,
        peer_public: bytes,
        feed_id: str,
        timeout: float = DEFAULT_REPLICATE_TIMEOUT,
    ) -> int:
        """Fetch what a peer has of ``feed_id`` beyond what this node holds,
        verify it and keep it, so this node serves it too. Returns how many
        messages were new. Raises ReplicationError."""
        stored = self._feeds.get(feed_id)
        new = await replicate(
            host,
            port,
            network_key=self.network_key,
            keypair=self.keypair,
            peer_public=peer_public,
            feed_id=feed_id,
            latest=stored.feed.latest if stored else None,
            timeout=timeout,
        )
        for msg in new:
            self.add_message(msg)
        return len(new)

    # --- serving

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> tuple[str, int]:
        """Listen on host:port (0: a free port); returns the bound address."""
        if self._server is not None:
            raise RuntimeError("the node is already serving")
        self._server = await asyncio.start_server(self._on_connection, host, port, limit=READ_SIZE)
        bound_host, bound_port = self._server.sockets[0].getsockname()[:2]
        log.info("serving %s on %s:%d", self.feed_id, bound_host, bound_port)
        return bound_host, bound_port

    async def close(self) -> None:
        """Stop listening and end every connection (with goodbyes where open)."""
        if self._server is not None:
            self._server.close()
        sessions = list(self._sessions)
        for task in sessions:
            task.cancel()
        await asyncio.gather(*sessions, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        peer = writer.get_extra_info("peername")
        if len(self._sessions) >= MAX_CONNECTIONS:
            log.warning("refusing %s: %d connections already open", peer, MAX_CONNECTIONS)
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._sessions.add(task)
        try:
            await _ServerSession(self, reader, writer).run()
        except asyncio.CancelledError:
            pass  # node shutdown; the session already said goodbye
        except Exception:
            log.exception("connection from %s failed", peer)
        finally:
            self._sessions.discard(task)


class _Link:
    """An SsbConnection bound to asyncio streams: flush, drain, read."""

    def __init__(
        self,
        conn: SsbConnection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        write_timeout: float,
    ) -> None:
        self.conn = conn
        self.reader = reader
        self.writer = writer
        self.write_timeout = write_timeout
        writer.transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)

    def flush(self) -> None:
        """Hand everything the connection has to send to the transport."""
        data = self.conn.data_to_send()
        if data and not self.writer.is_closing():
            self.writer.write(data)

    async def drain(self) -> None:
        """Wait until the transport's buffer is below its limit; a peer that
        reads nothing for write_timeout seconds raises TimeoutError."""
        if not self.writer.is_closing():
            await asyncio.wait_for(self.writer.drain(), self.write_timeout)

    async def read(self, timeout: float) -> bytes:
        """Up to READ_SIZE bytes; b"" at end of stream; TimeoutError after ``timeout``."""
        return await asyncio.wait_for(self.reader.read(READ_SIZE), timeout)

    async def hang_up(self) -> None:
        self.writer.close()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), 1.0)
        except (OSError, TimeoutError):
            pass


def _answer_with_error(conn: SsbConnection, request: Request, name: str, message: str) -> None:
    """The guide's answer to a request the node cannot serve: an error, which
    ends the request (the end/err flag; a stream's end)."""
    conn.respond_error(request.req, name, message)


class _ServerSession:
    """One accepted connection: handshake, then answer requests until goodbye."""

    def __init__(
        self, node: SsbNode, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.node = node
        self.conn = SsbConnection.server(
            node.network_key, node.keypair, max_rpc_body=MAX_RPC_BODY, faults=node.faults
        )
        self._points = node._points
        self.link = _Link(self.conn, reader, shape_writer(writer, node.shape), node.idle_timeout)
        self.peer_address = writer.get_extra_info("peername")
        # Variant unprompted-traffic: this node's own whoami requests (their
        # answers are taken and dropped) and the task that repeats them.
        self._own_requests: set[int] = set()
        self._asking: asyncio.Task[None] | None = None
        self.peer_id = "?"
        self._streams: dict[int, asyncio.Task[None]] = {}
        self._finished = False
        self._last_activity = 0.0
        self._closing_since: float | None = None
        # Our own createHistoryStream request to the peer (see
        # _ask_peer_for_own_feed): whether it is still to be made, and its
        # request number while it is open.
        self._own_feed_request_due = False
        self._own_feed_request: int | None = None

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        handshake_deadline = loop.time() + self.node.handshake_timeout
        self._last_activity = loop.time()
        try:
            while not self._finished:
                timeout = self._read_timeout(loop.time(), handshake_deadline)
                if timeout <= 0:
                    self._on_timeout()
                    break
                try:
                    data = await self.link.read(timeout)
                except TimeoutError:
                    continue  # _read_timeout decides whether the deadline passed
                except OSError as exc:
                    log.info("%s: connection error: %s", self.peer_address, exc)
                    break
                self._last_activity = loop.time()
                events = self.conn.receive_data(data) if data else self.conn.receive_eof()
                for event in events:
                    self._handle(event)
                self.link.flush()
                try:
                    await self.link.drain()
                except (OSError, TimeoutError) as exc:
                    log.info(
                        "%s: peer stopped reading (%r); dropping the connection",
                        self.peer_address,
                        exc,
                    )
                    break
                if not data:
                    break
        finally:
            if self._asking is not None:
                self._asking.cancel()
            self._stop_streams()
            if self.conn.is_open:
                self.conn.close()  # node shutdown or a timeout: still say goodbye
                self.link.flush()
            await self.link.hang_up()

    def _read_timeout(self, now: float, handshake_deadline: float) -> float:
        if self.conn.state is ConnectionState.HANDSHAKE:
            return handshake_deadline - now
        if self._closing_since is not None:
            return self._closing_since + min(LINGER_SECONDS, self.node.idle_timeout) - now
        return self._last_activity + self.node.idle_timeout - now

    def _on_timeout(self) -> None:
        if self.conn.state is ConnectionState.HANDSHAKE:
            log.info("%s: handshake timed out", self.peer_address)
        elif self._closing_since is None:
            log.info(
                "%s (%s): idle for %.0f s, closing",
                self.peer_address,
                self.peer_id,
                self.node.idle_timeout,
            )

    def _begin_close(self) -> None:
        """Send our RPC and box stream goodbyes; then wait a little for the peer's."""
        self._stop_streams()
        self.conn.close()
        self._closing_since = asyncio.get_running_loop().time()

    # --- events

    def _handle(self, event: ConnectionEvent) -> None:
        if isinstance(event, HandshakeComplete):
            self.peer_id = event.peer_id
            log.info("%s: handshake complete with %s", self.peer_address, self.peer_id)
            self._own_feed_request_due = self.conn.peer_public != self.node.keypair.public
            if UNPROMPTED_TRAFFIC in self.node.variants:
                if self._own_feed_request_due:  # at once, not when the peer's first request comes
                    self._own_feed_request_due = False
                    self._ask_peer_for_own_feed()
                self._ask_whoami()
                self._asking = asyncio.get_running_loop().create_task(self._keep_asking())
        elif isinstance(event, (Response, AsyncError)) and -event.req in self._own_requests:
            self._own_requests.discard(-event.req)
        elif isinstance(event, Request):
            # A request can share a read with data that then failed the
            # connection; a failed connection sends nothing, so drop it.
            if not self.conn.closing and not self.conn.failed:
                if self._own_feed_request_due:
                    self._own_feed_request_due = False
                    self._ask_peer_for_own_feed()
                self._on_request(event)
        elif isinstance(event, StreamEnd) and event.req > 0:
            # The requester ended (aborted) its stream; the endpoint has
            # already queued our end, so just stop producing.
            task = self._streams.pop(event.req, None)
            if task is not None:
                task.cancel()
        elif isinstance(event, ProtocolViolation):
            log.warning("%s: protocol violation: %s", self.peer_id, event.reason)
        elif isinstance(event, Goodbye):
            self._on_goodbye("RPC goodbye received")
        elif isinstance(event, Closed):
            self._on_closed(event)
        elif (
            isinstance(event, (StreamData, StreamEnd))
            and self._own_feed_request is not None
            and event.req == -self._own_feed_request
        ):
            self._on_own_feed_reply(event)
        elif isinstance(event, (Response, AsyncError, StreamData, StreamEnd)):
            # This node makes no requests on accepted connections.
            log.warning("%s: reply to a request we never made: %r", self.peer_id, event)

    def _on_goodbye(self, what: str) -> bool:
        """The peer said goodbye: answer with ours and end the connection.
        Returns whether the node answered it."""
        answer = self._points.apply("answer-goodbye", True)
        log.info("%s: %s; %s", self.peer_id, what, "closing" if answer else "not answering")
        if answer and not self.conn.closing:
            self._begin_close()
        return answer

    def _on_closed(self, event: Closed) -> None:
        if not event.failed:
            self._finished = self._on_goodbye(event.reason)
            return
        log.info("%s: connection failed (%s): %s", self.peer_address, event.stage, event.reason)
        # A truncated handshake message (end of stream within it) is as bad as a wrong one.
        if event.stage == "handshake" or self.conn.handshake.bytes_needed > 0:
            # Nothing is said after a rejected handshake: the peer learns only the hang-up.
            last_words = self._points.apply("bytes-after-rejected-handshake", b"")
            if last_words:
                self.link.writer.write(last_words)
        self._finished = True

    # --- our own request to the peer

    def _ask_whoami(self) -> None:
        """Variant unprompted-traffic: an async request of this node's own."""
        if self.conn.closing or self.conn.failed or not self.conn.is_open:
            return
        try:
            self._own_requests.add(self.conn.request(["whoami"], [], "async"))
        except (RpcError, RuntimeError) as exc:
            log.debug("%s: could not ask whoami: %s", self.peer_id, exc)

    async def _keep_asking(self) -> None:
        while not self._finished:
            await asyncio.sleep(UNPROMPTED_INTERVAL)
            self._ask_whoami()
            self.link.flush()

    def _ask_peer_for_own_feed(self) -> None:
        """Ask the peer for the messages of this node's feed after the latest
        it holds, as real peers' legacy replication asks for every feed it
        replicates, its own included (npm ssb-replicate, legacy.js).

        The call matters to the peer, not to us: ssb-server starts legacy
        replication of the feeds it follows only once its peer has called
        createHistoryStream on it (legacy.js, ``rpc.once('call:createHistoryStream',
        next)``) -- without it ssb-server never asks this node for anything.
        Made when the peer's first request arrives, as a JS peer answers the
        other's first call with its own: a call sent with msg4 reaches
        ssb-server before its connection handlers listen for it and is
        missed. ``sequence`` is the first message wanted, as the network
        reads it (erratum SSB-E1). Not live, so the stream ends."""
        options = {
            "id": self.node.feed_id,
            "sequence": self.node._feed_length(self.node.feed_id) + 1,
            "live": False,
            "keys": False,
        }
        try:
            self._own_feed_request = self.conn.request(["createHistoryStream"], [options], "source")
        except (RpcError, RuntimeError) as exc:
            log.debug("%s: could not ask for our own feed: %s", self.peer_id, exc)

    def _on_own_feed_reply(self, event: StreamData | StreamEnd) -> None:
        if isinstance(event, StreamEnd):
            # The endpoint closes our side of the stream by itself.
            self._own_feed_request = None
            if event.error is not None:
                log.info(
                    "%s: our createHistoryStream request ended with an error: %s",
                    self.peer_id,
                    _error_text(event.error),
                )
            return
        # This node never loses messages, so anything offered beyond its
        # latest is not ours to take (a fork, or someone else's key use).
        log.info(
            "%s: offered a message of our own feed beyond the latest we hold; ignored", self.peer_id
        )

    # --- procedures

    def _on_request(self, request: Request) -> None:
        name = request.name
        if name == ["createHistoryStream"]:
            if self._check_type(request, "source"):
                self._create_history_stream(request)
        elif name == ["whoami"]:
            if self._check_type(request, "async"):
                self.conn.respond(request.req, {"id": self.node.feed_id})
        elif name == ["publish"]:
            if self._check_type(request, "async"):
                self._publish(request)
        else:
            self._unknown(request)

    def _check_type(self, request: Request, expected: str) -> bool:
        """Whether the request's type fits the procedure; if not, reject it."""
        actual = "async" if request.type in ASYNC_TYPES else request.type
        if actual == expected:
            return True
        self.conn.respond_error(
            request.req,
            _ERROR_NAME,
            f"{'.'.join(request.name)} is a {expected} procedure, not {request.type}",
        )
        return False

    def _unknown(self, request: Request) -> None:
        dotted = ".".join(request.name)
        message = f"no such procedure: {dotted} ({request.type})"
        log.info("%s: %s", self.peer_id, message)
        answer = self._points.apply("unknown-procedure-answer", _answer_with_error)
        answer(self.conn, request, _ERROR_NAME, message)
        # An error answers one request; it does not end the session.
        if not self._points.apply("stay-open-after-error", True):
            self._begin_close()

    def _publish(self, request: Request) -> None:
        if self.conn.peer_public != self.node.keypair.public:
            self.conn.respond_error(
                request.req, _ERROR_NAME, "publish is only allowed to the node's own key"
            )
            return
        if len(request.args) != 1:
            self.conn.respond_error(request.req, _ERROR_NAME, "publish takes one argument: content")
            return
        try:
            published = self.node.publish(request.args[0])
        except FeedError as exc:
            self.conn.respond_error(request.req, _ERROR_NAME, f"invalid content: {exc}")
            return
        self.conn.respond(request.req, published)

    def _create_history_stream(self, request: Request) -> None:
        log.debug(
            "%s: createHistoryStream request %d, args %s",
            self.peer_id,
            request.req,
            json.dumps(request.args)[:300],
        )
        args = self._points.apply("history-request", request.args)
        try:
            options = parse_history_options(args)
        except ValueError as exc:
            refusal = self._points.apply("history-refusal", str(exc), args=args)
            if refusal is None:
                self.conn.stream_end(request.req)
            else:
                self.conn.respond_error(request.req, _ERROR_NAME, refusal)
            return
        if len(self._streams) >= MAX_STREAMS_PER_CONNECTION:
            self.conn.respond_error(request.req, _ERROR_NAME, "too many open streams")
            return
        options = self._points.apply(
            "history-options",
            options,
            requested=args[0],
            feed_held=options.feed_id in self.node._feeds,
        )
        # Where to start is fixed now, before anything else can append.
        first = options.start
        if not options.old:
            first = max(first, self.node._feed_length(options.feed_id) + 1)
        task = asyncio.create_task(self._serve_history(request.req, options, first))
        self._streams[request.req] = task

    async def _serve_history(self, req: int, options: HistoryOptions, first: int) -> None:
        """Send messages ``first``.. of the feed; if live, wait for more."""
        node, conn = self.node, self.conn
        sent = 0
        cursor = first
        try:
            while options.limit is None or sent < options.limit:
                if cursor <= node._feed_length(options.feed_id):
                    conn.stream_send(req, node._history_item(options.feed_id, cursor, options.keys))
                    sent += 1
                    cursor = self._points.apply(
                        "history-next-sequence",
                        cursor + 1,
                        sent=sent,
                        length=node._feed_length(options.feed_id),
                        message_of=node._feeds[options.feed_id].feed.get,
                    )
                    self.link.flush()
                    # A connection carrying live messages is not idle.
                    self._last_activity = asyncio.get_running_loop().time()
                    await self.link.drain()
                elif options.live:
                    await node._wait_for_append(options.feed_id)
                else:
                    break
            conn.stream_end(req)
            self.link.flush()
            await self.link.drain()
        except (RpcError, RuntimeError) as exc:
            # The connection closed or failed under us; nothing left to send to.
            log.debug("%s: stream %d stopped: %s", self.peer_id, req, exc)
        except (OSError, TimeoutError) as exc:
            log.info("%s: peer stopped reading (%s); dropping the connection", self.peer_id, exc)
            self.link.writer.transport.abort()
        finally:
            if self._streams.get(req) is asyncio.current_task():
                del self._streams[req]

    def _stop_streams(self) -> None:
        for task in self._streams.values():
            task.cancel()
        self._streams.clear()


# --- The client -------------------------------------------------------------------


class ReplicationError(Exception):
    """Replication failed. ``kind`` is one of "connect", "handshake",
    "invalid-message", "protocol", "timeout"; the CLI maps it to an exit code."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


async def replicate(
    host: str,
    port: int,
    *,
    network_key: bytes,
    keypair: Keypair,
    peer_public: bytes,
    feed_id: str,
    latest: dict | None = None,
    timeout: float = DEFAULT_REPLICATE_TIMEOUT,
    faults: Iterable[Fault | str] = (),
    shape: Shape = Shape(),
) -> list[dict]:
    """Fetch ``feed_id`` from the peer with createHistoryStream (live false).

    ``latest`` is the last message already held of the feed (None: none);
    only later messages are asked for, and the first must follow it. Every
    message is verified (author, sequence and previous chain, signature,
    and that the peer's ``key`` is its id) before it is returned. Ends with
    the RPC and box stream goodbyes. Raises ReplicationError. ``faults``:
    the client-role rules broken on purpose (faults.py).
    """
    points = FaultPoints(FAULT_SPECS, frozenset(faults))
    try:
        async with asyncio.timeout(timeout):
            return await _replicate(
                host, port, network_key, keypair, peer_public, feed_id, latest, points, shape
            )
    except TimeoutError:
        raise ReplicationError(
            "timeout", f"replication did not finish within {timeout:g} s"
        ) from None


async def _replicate(
    host: str,
    port: int,
    network_key: bytes,
    keypair: Keypair,
    peer_public: bytes,
    feed_id: str,
    latest: dict | None,
    points: FaultPoints,
    shape: Shape = Shape(),
) -> list[dict]:
    try:
        reader, writer = await asyncio.open_connection(host, port, limit=READ_SIZE)
    except OSError as exc:
        raise ReplicationError("connect", f"cannot connect to {host}:{port}: {exc}") from None
    conn = SsbConnection.client(
        network_key, keypair, peer_public, max_rpc_body=MAX_RPC_BODY, faults=points.active
    )
    # The overall timeout bounds every read and write here.
    link = _Link(conn, reader, shape_writer(writer, shape), write_timeout=DEFAULT_IDLE_TIMEOUT)
    try:
        link.flush()
        early_events = await _client_handshake(link, host, port, points)
        options: dict[str, Any] = {"id": feed_id}
        if latest is not None:
            # The first message wanted, as the network reads `sequence`
            # (erratum SSB-E1): ssb-replicate asks for `last + 1` too.
            options["sequence"] = latest["sequence"] + 1
        options.update({"live": False, "keys": True})
        options = points.apply("replication-request", options)
        req = conn.request(["createHistoryStream"], [options], "source")
        link.flush()
        received = await _receive_history(link, req, feed_id, latest, early_events, points)
        conn.close()
        link.flush()
        await link.drain()
        await _await_peer_goodbye(link)
        return received
    finally:
        await link.hang_up()


async def _read_events(link: _Link) -> list[ConnectionEvent]:
    try:
        data = await link.read(DEFAULT_IDLE_TIMEOUT)
    except OSError as exc:
        raise ReplicationError("connect", f"connection error: {exc}") from None
    return link.conn.receive_data(data) if data else link.conn.receive_eof()


async def _client_handshake(
    link: _Link, host: str, port: int, points: FaultPoints
) -> list[ConnectionEvent]:
    """Run the handshake; return the events that came in with its last
    message (the peer may start RPC right after msg4)."""
    while True:
        events = await _read_events(link)
        for event in events:
            if isinstance(event, Closed):
                if event.stage == "handshake":
                    raise ReplicationError("handshake", f"handshake failed: {event.reason}")
                # The server hung up mid-handshake: nothing is left to say.
                last_words = points.apply("bytes-after-handshake-cut", b"")
                if last_words and not link.writer.is_closing():
                    link.writer.write(last_words)
                raise ReplicationError(
                    "handshake",
                    f"{host}:{port} closed the connection during the handshake "
                    "(wrong network key or peer public key?)",
                )
        link.flush()
        await link.drain()
        if link.conn.state is not ConnectionState.HANDSHAKE:
            return [event for event in events if not isinstance(event, HandshakeComplete)]


async def _receive_history(
    link: _Link,
    req: int,
    feed_id: str,
    latest: dict | None,
    events: list[ConnectionEvent],
    points: FaultPoints,
) -> list[dict]:
    """Collect and verify the replies to our createHistoryStream ``req``,
    starting with ``events`` already received."""
    conn = link.conn
    received: list[dict] = []
    previous = latest
    while True:
        for event in events:
            if isinstance(event, StreamData) and event.req == -req:
                previous = _accept_history_item(event, feed_id, previous, points)
                received.append(previous)
            elif isinstance(event, StreamEnd) and event.req == -req:
                if event.error is not None:
                    raise ReplicationError(
                        "protocol",
                        f"createHistoryStream ended with an error: {_error_text(event.error)}",
                    )
                link.flush()
                return received
            elif isinstance(event, Request) and not conn.closing:
                # Peers such as ssb-server call their own procedures on us;
                # this client serves none of them.
                conn.respond_error(event.req, _ERROR_NAME, "this client serves no procedures")
            elif isinstance(event, Goodbye):
                raise ReplicationError("protocol", "peer said goodbye before ending the stream")
            elif isinstance(event, Closed):
                raise ReplicationError(
                    "protocol", f"connection ended before the stream did: {event.reason}"
                )
            elif isinstance(event, ProtocolViolation):
                log.warning("peer broke the RPC protocol: %s", event.reason)
        link.flush()
        await link.drain()
        events = await _read_events(link)


def _accept_history_item(
    event: StreamData,
    feed_id: str,
    previous: dict | None,
    points: FaultPoints,
) -> dict:
    """Verify one createHistoryStream reply (keys=true form); return the message."""
    position = (previous["sequence"] + 1) if previous else 1
    try:
        item = event.msg.json()
    except RpcError as exc:
        raise ReplicationError("invalid-message", f"message {position}: {exc}") from None
    if not isinstance(item, dict) or not {"key", "value"} <= item.keys():
        raise ReplicationError(
            "invalid-message",
            f"message {position}: expected {{key, value, timestamp}}, got {item!r:.200}",
        )
    value = item["value"]
    if not isinstance(value, dict) or not points.apply(
        "message-rule", value.get("author") == feed_id, rule="author"
    ):
        raise ReplicationError("invalid-message", f"message {position}: not a message of {feed_id}")
    value = points.apply("received-message", value)
    try:
        msg_id = verify_message(value, previous, faults=points.active)
    except FeedError as exc:
        raise ReplicationError("invalid-message", f"message {position}: {exc}") from None
    if item["key"] != msg_id:
        raise ReplicationError(
            "invalid-message", f"message {position}: key {item['key']!r} is not its id {msg_id}"
        )
    return value


async def _await_peer_goodbye(link: _Link) -> None:
    """After our goodbye, give the peer a moment to answer with its own."""
    try:
        async with asyncio.timeout(LINGER_SECONDS):
            while True:
                data = await link.read(LINGER_SECONDS)
                events = link.conn.receive_data(data) if data else link.conn.receive_eof()
                if not data or any(isinstance(event, Closed) for event in events):
                    return
    except (OSError, TimeoutError):
        pass  # we have what we came for; a peer slow to hang up is not an error


def _error_text(error: Any) -> str:
    if isinstance(error, dict) and "message" in error:
        return str(error["message"])
    return repr(error)


__all__ = [
    "Fault",
    "HistoryOptions",
    "ReplicationError",
    "SsbNode",
    "parse_history_options",
    "replicate",
]

"""The reference STOMP client node: a sans-I/O session and a thin asyncio layer.

:class:`ClientSession` delivers a list of SMP messages over one or more STOMP
1.2 connections, as the Swaptacular profile asks. It reads no sockets and no
clock: call :meth:`ClientSession.start_connection` when a (TLS) connection is
up, feed every byte received to :meth:`ClientSession.receive_data`, write
what :meth:`ClientSession.data_to_send` returns, call
:meth:`ClientSession.heartbeat` when a heart-beat is due and
:meth:`ClientSession.connection_lost` when the connection is gone, whoever
closed it. :func:`run_client` is the asyncio layer (TLS, server choice,
deadlines, heart-beats, reconnecting with back-off).

The rules, with the text each comes from (``swaptacular-stomp-transport.txt``
is "the profile", ``stomp-specification-1.2.md`` "STOMP"):

- CONNECT carries ``accept-version:1.2``, ``host`` (STOMP, "CONNECT or STOMP
  Frame": REQUIRED), ``login``/``passcode`` when the manifest has them, and
  ``heart-beat``. The values come from the manifest with every ``${NODE_ID}``
  in host, login and destination replaced by the node id (profile, manifest
  keys ``host``/``login``/``destination``: "The client MUST substitute all
  occurrences"; the passcode goes as written, see manifest.py); that is the
  caller's job (:func:`settings_from_manifest`), the session sends what it
  is given. CONNECT is not escaped (STOMP, "Value Encoding"), so a value with CR,
  LF or NUL cannot be sent at all and is refused up front.
- CONNECTED must say ``version:1.2``: we offer nothing else (STOMP, "Protocol
  Negotiation"), so any other answer is a server that does not speak ours.
- Every SEND carries ``destination``, ``receipt``, ``type``, ``content-type``
  and ``persistent:true`` (profile, "A Subset of the STOMP Protocol"); the
  body is the JSON text of the SMP message, with ``content-length`` (STOMP,
  "Header content-length": SHOULD).
- A message is delivered only once a RECEIPT for it arrives (profile, "STOMP
  Connections": "MUST consider a message to be successfully delivered, only
  after a RECEIPT command has been received"). A RECEIPT confirms every
  earlier SEND of the same connection (footnote 2: "Every STOMP RECEIPT
  command confirms the delivery of all preceding messages"). A RECEIPT whose
  ``receipt-id`` names no SEND in flight on this connection confirms nothing:
  the server is not doing what we asked, so the connection is given up
  (:class:`ProtocolViolation`) and what is unconfirmed is sent again.
- Receipt ids are unique per message and stay the same when the message is
  sent again: the profile calls the ``receipt`` header "a message ID", and a
  server may use it to recognise a message it has already stored.
- A connection that ends (dropped, ERROR, violation) leaves every message not
  yet receipted pending; the next connection sends them again first, in
  order, before any message never sent.
- Only subset commands are sent (profile: "MUST NOT presume that their peer
  nodes will understand" SUBSCRIBE and the others): CONNECT, SEND, DISCONNECT.
- When everything is delivered the session sends DISCONNECT with a receipt
  (STOMP, "DISCONNECT": the graceful shutdown) and sends nothing after it.
- Frames from the server other than CONNECTED, RECEIPT and ERROR (MESSAGE, a
  second CONNECTED, client commands) and malformed frames end the connection
  with :class:`ProtocolViolation`; an ERROR frame ends it with
  :class:`ServerError` (STOMP, "ERROR": the server closes after it).

Faults (``reference_impl/stomp/faults.py``, role "client"; :class:`ClientFault`
has the same names) reach the session as ``ClientSession(faults=...)``, the
TLS context as :func:`tls_context(faults=...)` and the ``${NODE_ID}`` ones
:func:`settings_from_manifest`; each changes a value at a named point
(:meth:`FaultPoints.apply`), so with none on the code below is the rule as
written.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import enum
import itertools
import json
import logging
import random
import ssl
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ..faults import FaultPoints
from ..variants import UNPROMPTED_TRAFFIC, Shape, shape_writer
from .faults import SPECS as FAULT_SPECS
from .faults import ClientFault
from .frame import (
    HEARTBEAT,
    Frame,
    FrameError,
    FrameParser,
    encode_frame,
    heart_beat_interval,
    parse_heart_beat,
)
from .tls import client_context
from .variants import (
    CLIENT_HEART_BEAT,
    CLOSE_WITHOUT_DISCONNECT,
    CONNECTION_PER_MESSAGE,
    EXTRA_HEADERS,
    JSON_CHARSET,
    LINGER,
    LINGER_SECONDS,
    ONE_SEND_AT_A_TIME,
    OTHER_HEART_BEATS,
    PROBE_SERVER_CERTIFICATE,
    UNPROMPTED_INTERVAL,
    VARIANT_HEADER,
    FrameStyle,
)

log = logging.getLogger("reference_impl.stomp.client")

JSON_CONTENT_TYPE = "application/json"

# What we can send and what we ask for, in ms (STOMP, "Heart-beating"). Sending
# every 10 s is cheap; asking for the server's every 10 s lets a dead server be
# noticed within about three windows without flooding a slow one.
DEFAULT_HEART_BEAT = (10_000, 10_000)

# SENDs in flight without a RECEIPT, at most: enough to pipeline (one RECEIPT
# confirms many), bounded so that a server that never answers costs a bounded
# resend.
DEFAULT_WINDOW = 128

# Bounds on what a server may make us buffer: our frames from servers are
# CONNECTED, RECEIPT and ERROR, all small.
MAX_SERVER_FRAME_BYTES = 1 << 20
MAX_SERVER_HEADERS = 128
MAX_SERVER_HEADER_LINE = 8192


def client_faults(names: Iterable[str] | None) -> frozenset[ClientFault]:
    """The members for ``--fault`` names (a ValueError names an unknown one)."""
    return frozenset(ClientFault(name) for name in names or ())


# --- messages and settings ---------------------------------------------------------------


@dataclass(frozen=True)
class OutgoingMessage:
    """One SMP message to deliver: its ``type`` header and its body bytes."""

    type: str
    body: bytes
    content_type: str = JSON_CONTENT_TYPE

    @classmethod
    def from_json(cls, type_name: str, body: object) -> OutgoingMessage:
        """The JSON text of ``body``, compact, UTF-8."""
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode(
            "utf-8"
        )
        return cls(type_name, text)


def _connect_safe(name: str, value: str | None) -> None:
    # CONNECT headers are not escaped: CR, LF or a NUL would cut the frame, so
    # such a value cannot be sent as given (and silently dropping characters
    # would send a different host than the manifest names).
    if value is not None and any(char in value for char in "\r\n\0"):
        raise ValueError(
            f"{name}: CR, LF and NUL cannot appear in a CONNECT header (STOMP 1.2 does not "
            f"escape CONNECT headers)"
        )


@dataclass(frozen=True)
class ClientSettings:
    """What the session sends, already substituted (``${NODE_ID}``)."""

    host: str
    destination: str
    login: str | None = None
    passcode: str | None = field(default=None, repr=False)
    heart_beat: tuple[int, int] = DEFAULT_HEART_BEAT
    receipt_prefix: str = "m"
    window: int = DEFAULT_WINDOW

    def __post_init__(self) -> None:
        _connect_safe("host", self.host)
        _connect_safe("login", self.login)
        _connect_safe("passcode", self.passcode)
        if self.window < 1:
            raise ValueError("window must be at least 1")
        if any(not 0 <= value < 2**31 for value in self.heart_beat):
            raise ValueError("heart-beat values must be in 0..2**31-1 ms")


# --- events ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Connected:
    """CONNECTED with version 1.2 arrived. Heart-beat intervals in ms, 0 for none:
    ``send_every`` we must send something at least that often; ``expect_every``
    the server promised to (STOMP, "Heart-beating")."""

    server: str | None
    send_every: int
    expect_every: int


@dataclass(frozen=True)
class Delivered:
    """Message ``index`` (its position in the list given) is delivered."""

    index: int
    receipt: str | None


@dataclass(frozen=True)
class ServerError:
    """The server sent ERROR; it closes the connection after it."""

    message: str | None
    frame: Frame


@dataclass(frozen=True)
class ProtocolViolation:
    """The server sent something we cannot go on after; the connection must be
    closed (what is not receipted will be sent again on the next one)."""

    reason: str
    data: bytes = b""


@dataclass(frozen=True)
class Disconnected:
    """The RECEIPT of our DISCONNECT: the server has everything; close."""


Event = Connected | Delivered | ServerError | ProtocolViolation | Disconnected


class State(enum.Enum):
    IDLE = "idle"  # no connection
    CONNECTING = "connecting"  # CONNECT sent, waiting for CONNECTED
    OPEN = "open"
    DISCONNECTING = "disconnecting"  # DISCONNECT sent
    CLOSING = "closing"  # this connection is over: the I/O layer closes it


@dataclass
class _InFlight:
    index: int
    receipt: str | None


class ClientSession:
    """Delivers ``messages`` (in order) over successive connections."""

    def __init__(
        self,
        settings: ClientSettings,
        messages: Sequence[OutgoingMessage],
        *,
        faults: Iterable[ClientFault] = (),
        variants: Iterable[str] = (),
    ) -> None:
        self.settings = settings
        self.messages = tuple(messages)
        self._points = FaultPoints(FAULT_SPECS, frozenset(faults))
        self.faults = self._points.active
        """The names of the faults on (none: the conformant client)."""
        self.variants = frozenset(variants)
        """Conformant variants (reference_impl/stomp/variants.py): the frame
        ones (style, header order and extras, charset) and linger act here;
        heart-beat values and the window come in ``settings``
        (:func:`variant_settings`)."""
        self.style = FrameStyle.from_variants(self.variants)
        self.lingering = False
        """Variant linger: everything is receipted and the DISCONNECT waits
        for :meth:`end_linger` (the I/O layer's clock)."""
        self.state = State.IDLE
        self.delivered: list[int] = []
        """Indexes of delivered messages, in the order they were confirmed."""
        self.abandoned: list[int] = []
        """Indexes given up (only with a fault on)."""
        self.connections = 0
        self._delivered_set: set[int] = set()
        # deques: a benchmark may hand over 10^5 messages; both ends are used.
        to_send = self._points.apply("messages-to-send", list(range(len(self.messages))))
        self._pending: deque[int] = deque(to_send)  # to send, in order
        if len(to_send) < len(self.messages):
            sent = set(to_send)
            self.abandoned += [index for index in range(len(self.messages)) if index not in sent]
        self._in_flight: deque[_InFlight] = deque()  # sent on this connection, not receipted
        self._counted_early: set[int] = set()
        self._outgoing = bytearray()
        self._parser: FrameParser | None = None
        self._disconnect_receipt: str | None = None
        self._disconnect_count = 0

    # --- state the I/O layer reads

    @property
    def all_delivered(self) -> bool:
        return len(self._delivered_set) == len(self.messages)

    @property
    def finished(self) -> bool:
        """Nothing is left to do: everything delivered or given up."""
        return not self._pending and not self._in_flight

    @property
    def closing(self) -> bool:
        """This connection is over; the I/O layer closes it."""
        return self.state is State.CLOSING

    @property
    def reported_delivered(self) -> int:
        """How many messages the session has said are delivered (with the fault
        count-before-receipt, also those only written)."""
        return len(self._counted_early | self._delivered_set)

    @property
    def unconfirmed(self) -> int:
        return len(self.messages) - len(self._delivered_set) - len(self.abandoned)

    def receipt_for(self, index: int) -> str:
        return f"{self.settings.receipt_prefix}-{index}"

    # --- driving the session

    def start_connection(self) -> None:
        """A new connection is up: send CONNECT."""
        if self.state is not State.IDLE:
            raise RuntimeError(f"start_connection in state {self.state.value}")
        self.connections += 1
        self._parser = FrameParser(
            max_frame_bytes=MAX_SERVER_FRAME_BYTES,
            max_headers=MAX_SERVER_HEADERS,
            max_header_line=MAX_SERVER_HEADER_LINE,
        )
        self._outgoing.clear()
        headers = [("accept-version", "1.2"), ("host", self.settings.host)]
        if self.settings.login is not None:
            headers.append(("login", self.settings.login))
        if self.settings.passcode is not None:
            headers.append(("passcode", self.settings.passcode))
        headers.append(("heart-beat", "%d,%d" % self.settings.heart_beat))
        headers = self._points.apply("connect-headers", headers)
        if EXTRA_HEADERS in self.variants:  # heart-beat, ..., accept-version
            headers.reverse()
        first_pending = self._send_frame(self._pending[0]) if self._pending else None
        for frame in self._points.apply(
            "connect-frames", [Frame("CONNECT", tuple(headers))], first_pending=first_pending
        ):
            self._outgoing += self.style.encode(frame)
        self.state = State.CONNECTING

    def data_to_send(self) -> bytes:
        data = bytes(self._outgoing)
        self._outgoing.clear()
        return data

    def heartbeat(self, *, unprompted: bool = False) -> None:
        """A heart-beat is due: one EOL, unless a frame is waiting to go anyway.
        (``unprompted``, variant unprompted-traffic: also before CONNECTED,
        once CONNECT is out: the grammar lets EOLs follow any frame's NULL.)"""
        states = (
            (State.CONNECTING, State.OPEN, State.DISCONNECTING)
            if unprompted
            else (State.OPEN, State.DISCONNECTING)
        )
        if self.state in states and not self._outgoing:
            self._outgoing += self.style.eol

    def connection_lost(self) -> None:
        """The connection is gone. Everything sent on it and not receipted is
        pending again, ahead of what was never sent."""
        unconfirmed = [item.index for item in self._in_flight]
        resent = self._points.apply("resent-after-drop", unconfirmed)
        self._pending.extendleft(reversed(resent))
        if len(resent) < len(unconfirmed):
            self.abandoned += [index for index in unconfirmed if index not in resent]
        self._in_flight.clear()
        self._outgoing.clear()
        self._parser = None
        self._disconnect_receipt = None
        self.lingering = False
        self.state = State.IDLE

    def receive_data(self, data: bytes) -> list[Event]:
        if self._parser is None or self.state in (State.IDLE, State.CLOSING):
            return []  # after the end of a connection nothing it says counts
        try:
            items = self._parser.receive_data(data)
        except FrameError as exc:
            return [self._violation(f"malformed frame from the server: {exc.reason}", exc.data)]
        events: list[Event] = []
        for item in items:
            if item is HEARTBEAT:
                continue
            events += self._frame(item)
            if self.state is State.CLOSING:
                break
        return events

    # --- internals

    def _violation(self, reason: str, data: bytes = b"") -> ProtocolViolation:
        self.state = State.CLOSING
        return ProtocolViolation(reason, data)

    def _frame(self, frame: Frame) -> list[Event]:
        if frame.command == "ERROR":
            self.state = State.CLOSING
            return [ServerError(frame.get("message"), frame)]
        if frame.command == "CONNECTED":
            if self.state is not State.CONNECTING:
                return [self._violation("a second CONNECTED frame", encode_frame(frame))]
            return self._connected(frame)
        if frame.command == "RECEIPT":
            if self.state is State.CONNECTING:
                return [self._violation("RECEIPT before CONNECTED", encode_frame(frame))]
            return self._receipt(frame)
        return [
            self._violation(
                f"unexpected {frame.command} frame from the server", encode_frame(frame)
            )
        ]

    def _connected(self, frame: Frame) -> list[Event]:
        version = frame.get("version")
        if version != "1.2":
            return [
                self._violation(
                    f"CONNECTED says version {version!r}; we asked for 1.2 only",
                    encode_frame(frame),
                )
            ]
        try:
            server_cx, server_cy = parse_heart_beat(frame.get("heart-beat", "0,0"))
        except ValueError as exc:
            return [
                self._violation(
                    f"CONNECTED heart-beat header unreadable: {exc}", encode_frame(frame)
                )
            ]
        our_cx, our_cy = self.settings.heart_beat
        self.state = State.OPEN
        events: list[Event] = [
            Connected(
                frame.get("server"),
                heart_beat_interval(our_cx, server_cy),
                heart_beat_interval(server_cx, our_cy),
            )
        ]
        for extra in self._points.apply(
            "frames-after-connected", [], destination=self.settings.destination
        ):
            self._outgoing += self.style.encode(extra)
        events += self._pump()
        return events

    def _send_frame(self, index: int) -> Frame:
        message = self.messages[index]
        content_type = message.content_type
        if JSON_CHARSET in self.variants and content_type == JSON_CONTENT_TYPE:
            content_type += ";charset=utf-8"
        headers = [
            ("destination", self.settings.destination),
            ("receipt", self.receipt_for(index)),
            ("type", message.type),
            ("content-type", content_type),
            ("persistent", "true"),
        ]
        headers = self._points.apply("send-headers", headers)
        if (
            EXTRA_HEADERS in self.variants
        ):  # a user-defined header, then persistent, ..., destination
            headers = [VARIANT_HEADER, *reversed(headers)]
        return Frame("SEND", tuple(headers), self._points.apply("send-body", message.body))

    def _pump(self) -> list[Event]:
        """Send pending messages up to the window; DISCONNECT once all is done."""
        if self.state is not State.OPEN:
            return []
        events: list[Event] = []
        room = self._points.apply(
            "send-window", self.settings.window - len(self._in_flight), pending=len(self._pending)
        )
        counted_when_written = self._points.apply("counted-when-written", False)
        while self._pending and room > 0:
            index = self._pending.popleft()
            frame = self._send_frame(index)
            self._outgoing += self._points.apply("send-bytes", self.style.encode(frame))
            self._in_flight.append(_InFlight(index, frame.get("receipt")))
            room -= 1
            if counted_when_written and index not in self._counted_early:
                self._counted_early.add(index)
                events.append(Delivered(index, None))
        if self._points.apply("disconnect-after-sends", False, in_flight=len(self._in_flight)):
            self._send_disconnect()
        elif not self._pending and not self._in_flight:
            if LINGER in self.variants:
                self.lingering = True
            elif CLOSE_WITHOUT_DISCONNECT in self.variants:
                self.state = State.CLOSING  # every message receipted: just close
            else:
                self._send_disconnect()
        return events

    def end_linger(self) -> None:
        """Variant linger: the connection was kept open long enough; DISCONNECT."""
        if self.lingering and self.state is State.OPEN:
            self.lingering = False
            self._send_disconnect()

    def _send_disconnect(self) -> None:
        self._disconnect_count += 1
        self._disconnect_receipt = (
            f"{self.settings.receipt_prefix}-disconnect-{self._disconnect_count}"
        )
        first_send = self._send_frame(0) if self.messages else None
        for frame in self._points.apply(
            "disconnect-frames",
            [Frame("DISCONNECT", (("receipt", self._disconnect_receipt),))],
            first_send=first_send,
        ):
            self._outgoing += self.style.encode(frame)
        self.state = State.DISCONNECTING

    def _confirm(self, confirmed: list[_InFlight]) -> list[Event]:
        """The SENDs ``confirmed`` (in flight) are delivered."""
        events: list[Event] = []
        if all(item is head for item, head in zip(confirmed, self._in_flight)):
            for _ in confirmed:  # the usual case: the oldest ones
                self._in_flight.popleft()
        else:
            gone = {id(item) for item in confirmed}
            self._in_flight = deque(item for item in self._in_flight if id(item) not in gone)
        for item in confirmed:
            if item.index in self._delivered_set:
                continue
            self._delivered_set.add(item.index)
            self.delivered.append(item.index)
            if item.index not in self._counted_early:
                events.append(Delivered(item.index, item.receipt))
        return events

    def _receipt(self, frame: Frame) -> list[Event]:
        receipt_id = frame.get("receipt-id")
        if receipt_id is None:
            return [self._violation("RECEIPT without a receipt-id header", encode_frame(frame))]
        if self._disconnect_receipt is not None and receipt_id == self._disconnect_receipt:
            # Everything before the DISCONNECT is confirmed with it.
            # (DISCONNECT goes out only when nothing is pending: no frame may
            # follow it, STOMP 1.2 "DISCONNECT".)
            events = self._confirm(list(self._in_flight))
            self._disconnect_receipt = None
            self.state = State.CLOSING
            return events + [Disconnected()]
        for position, item in enumerate(self._in_flight):
            if item.receipt == receipt_id:
                # footnote 2: it confirms every SEND before it too
                up_to_it = list(itertools.islice(self._in_flight, position + 1))
                events = self._confirm(self._points.apply("confirmed-by-receipt", up_to_it))
                if (
                    self.state is State.OPEN
                    and CONNECTION_PER_MESSAGE in self.variants
                    and self._pending
                    and not self._in_flight
                ):
                    self._send_disconnect()  # the next message goes on a connection of its own
                elif self.state is State.OPEN:
                    events += self._pump()
                return events
        return [
            self._violation(
                f"RECEIPT for {receipt_id!r}, which names no SEND in flight on this connection",
                encode_frame(frame),
            )
        ]


# --- asyncio layer -----------------------------------------------------------------------


class ClientFailure(Exception):
    """The run ended without delivering everything; ``kind`` is "timeout",
    "gave-up" (retries exhausted) or "abandoned" (fault no-resend)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class ClientRun:
    delivered: list[int]
    connections: int


# Reconnect after a failed or dropped connection: at most this many attempts in a
# row that deliver nothing new, waiting BACKOFF_FIRST then doubling up to
# BACKOFF_MAX between them, all inside the run's deadline.
MAX_FRUITLESS_ATTEMPTS = 6
BACKOFF_FIRST = 0.05
BACKOFF_MAX = 2.0
# How long past a promised heart-beat interval silence is tolerated (STOMP,
# "Heart-beating": the receiver "SHOULD be tolerant"): twice the interval plus this.
HEARTBEAT_GRACE = 1.0
# The last wait: for the RECEIPT of our DISCONNECT; everything is delivered by then.
DISCONNECT_WAIT = 5.0
READ_CHUNK = 65536


def tls_context(
    cert_file: str, key_file: str, ca_file: str, faults: frozenset[ClientFault] = frozenset()
) -> ssl.SSLContext:
    """The profile's client context (tls.client_context), as the TLS faults
    change it (the points client-certificate and client-tls-context)."""
    points = FaultPoints(FAULT_SPECS, faults)
    cert, key = points.apply("client-certificate", (cert_file, key_file))
    return points.apply("client-tls-context", client_context(cert, key, ca_file))


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    try:
        # A TLS close_notify exchange with a peer that went away can hang: bounded.
        await asyncio.wait_for(writer.wait_closed(), 1.0)
    except (OSError, ssl.SSLError, asyncio.TimeoutError, ConnectionError):
        pass


async def _probe_server_certificate(host: str, port: int, timeout: float) -> None:
    """Variant probe-server-certificate: what ``ssl.get_server_certificate``
    does (stomp.py 8.0.1 calls it before it connects): a TLS handshake that
    presents no certificate and checks nothing, the server's certificate
    taken, the socket closed at once without a byte or a TLS close."""
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    probe.check_hostname = False
    probe.verify_mode = ssl.CERT_NONE
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(
                host, port, ssl=probe, ssl_handshake_timeout=max(timeout, 0.01)
            ),
            max(timeout, 0.01),
        )
    except (OSError, ssl.SSLError, ConnectionError, asyncio.TimeoutError) as exc:
        log.info("certificate probe of %s:%d failed: %s", host, port, exc)
        return
    ssl_object = writer.get_extra_info("ssl_object")
    certificate = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    log.info(
        "certificate probe of %s:%d: %s, %d byte(s) of certificate",
        host,
        port,
        ssl_object.version() if ssl_object is not None else "?",
        len(certificate or b""),
    )
    writer.transport.abort()


async def _one_connection(
    session: ClientSession,
    host: str,
    port: int,
    context: ssl.SSLContext,
    deadline: float,
    on_event: Callable[[Event], None],
    shape: Shape = Shape(),
) -> str:
    """One connection, until it ends; returns why it ended (for the log)."""
    loop = asyncio.get_running_loop()

    def remaining() -> float:
        return deadline - loop.time()

    if remaining() <= 0:
        return "deadline"
    if PROBE_SERVER_CERTIFICATE in session.variants:
        await _probe_server_certificate(host, port, remaining())
    reader, writer = await asyncio.wait_for(
        # server_hostname defaults to host: sent as SNI (a DNS name only), and
        # checked against the certificate only if the context checks hostnames
        # (the fault check-hostname; the profile's client does not).
        asyncio.open_connection(
            host, port, ssl=context, ssl_handshake_timeout=max(remaining(), 0.01)
        ),
        remaining(),
    )
    writer = shape_writer(writer, shape)
    heartbeat_task: asyncio.Task | None = None
    unprompted_task: asyncio.Task | None = None
    linger_until: float | None = None
    try:
        session.start_connection()
        writer.write(session.data_to_send())
        if UNPROMPTED_TRAFFIC in session.variants:  # EOLs of its own from CONNECT on
            unprompted_task = asyncio.create_task(
                _send_heartbeats(session, writer, UNPROMPTED_INTERVAL, True)
            )
        await asyncio.wait_for(writer.drain(), max(remaining(), 0.01))
        expect_every = 0.0
        last_data = loop.time()
        disconnecting_since: float | None = None
        while True:
            now = loop.time()
            wait = remaining()
            if expect_every:
                wait = min(wait, last_data + expect_every - now)
            if disconnecting_since is not None:
                wait = min(wait, disconnecting_since + DISCONNECT_WAIT - now)
            if linger_until is not None:
                if now >= linger_until:  # variant linger: long enough; DISCONNECT now
                    linger_until = None
                    session.end_linger()
                    out = session.data_to_send()
                    if out:
                        writer.write(out)
                        await asyncio.wait_for(writer.drain(), max(remaining(), 0.01))
                    if session.state is State.DISCONNECTING and disconnecting_since is None:
                        disconnecting_since = loop.time()
                    continue
                wait = min(wait, linger_until - now)
            if wait <= 0:
                if remaining() <= 0:
                    return "deadline"
                if disconnecting_since is not None and now >= disconnecting_since + DISCONNECT_WAIT:
                    return "no RECEIPT for DISCONNECT"
                return f"no data for {expect_every:g} s although the server promised heart-beats"
            try:
                data = await asyncio.wait_for(reader.read(READ_CHUNK), wait)
            except asyncio.TimeoutError:
                continue  # the loop head tells which window ran out
            if not data:
                return "closed by the server"
            last_data = loop.time()
            for event in session.receive_data(data):
                on_event(event)
                if isinstance(event, Connected):
                    if event.expect_every:
                        expect_every = 2 * event.expect_every / 1000 + HEARTBEAT_GRACE
                    if event.send_every and heartbeat_task is None:
                        heartbeat_task = asyncio.create_task(
                            _send_heartbeats(session, writer, event.send_every / 1000)
                        )
            out = session.data_to_send()
            if out:
                writer.write(out)
                await asyncio.wait_for(writer.drain(), max(remaining(), 0.01))
            if session.state is State.DISCONNECTING and disconnecting_since is None:
                disconnecting_since = loop.time()
            if session.lingering and linger_until is None:
                linger_until = loop.time() + LINGER_SECONDS
            if session.closing:
                return "done" if session.finished else "ended by the session"
    finally:
        for task in (heartbeat_task, unprompted_task):
            if task is not None:
                task.cancel()
        await _close(writer)


async def _send_heartbeats(
    session: ClientSession, writer: asyncio.StreamWriter, every: float, unprompted: bool = False
) -> None:
    try:
        while True:
            await asyncio.sleep(every)
            session.heartbeat(unprompted=unprompted)
            data = session.data_to_send()
            if data:
                writer.write(data)
    except (OSError, ConnectionError, RuntimeError):
        return  # the connection is going; the reader notices


async def run_client(
    session: ClientSession,
    servers: Callable[[], tuple[str, int]],
    context: ssl.SSLContext,
    *,
    timeout: float,
    on_event: Callable[[Event], None] = lambda event: None,
    shape: Shape = Shape(),
) -> ClientRun:
    """Deliver everything the session holds within ``timeout`` seconds.

    ``servers()`` picks the server for each new connection (the profile:
    "the client SHOULD randomly choose one of the server addresses").
    Raises :class:`ClientFailure` when not everything got delivered."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    fruitless = 0
    backoff = BACKOFF_FIRST
    last_problem = "no connection made"
    while not session.finished:
        if loop.time() >= deadline:
            raise ClientFailure(
                "timeout",
                f"{session.unconfirmed} message(s) not receipted after {timeout:g} s; "
                f"last problem: {last_problem}",
            )
        before = len(session.delivered)
        host, port = servers()
        try:
            why = await _one_connection(session, host, port, context, deadline, on_event, shape)
        except (OSError, ssl.SSLError, ConnectionError, asyncio.TimeoutError) as exc:
            why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        log.info("connection to %s:%d ended: %s", host, port, why)
        if why != "done":
            last_problem = f"{host}:{port}: {why}"
        session.connection_lost()
        if session.finished:
            break
        if len(session.delivered) > before:
            fruitless, backoff = 0, BACKOFF_FIRST
        else:
            fruitless += 1
            if fruitless >= MAX_FRUITLESS_ATTEMPTS:
                raise ClientFailure(
                    "gave-up",
                    f"{fruitless} connection attempts in a row delivered nothing; "
                    f"{session.unconfirmed} message(s) not receipted; last problem: {last_problem}",
                )
        await asyncio.sleep(max(0.0, min(backoff, deadline - loop.time())))
        backoff = min(backoff * 2, BACKOFF_MAX)
    if session.abandoned:
        raise ClientFailure(
            "abandoned", f"{len(session.abandoned)} message(s) given up without a RECEIPT"
        )
    return ClientRun(list(session.delivered), session.connections)


def new_receipt_prefix(rng: random.Random | None = None) -> str:
    """Unique across runs too, so a server keeping receipts of an earlier run
    never confuses ours (``time_ns`` and 48 random bits)."""
    rng = rng or random.SystemRandom()
    return f"{time.time_ns():x}-{rng.getrandbits(48):012x}"


# --- the `client` command ----------------------------------------------------------------

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 5

# A messages file is written by the harness or by hand; bounded all the same.
MAX_MESSAGES_FILE_BYTES = 64 << 20
MAX_MESSAGE_BODY_BYTES = MAX_SERVER_FRAME_BYTES - 4096


class ClientUsageError(ValueError):
    """A problem with the command line or its files: one line to stderr, exit 2."""


def parse_messages(text: str) -> list[OutgoingMessage]:
    """The messages of a JSON-lines file: one ``{"type": str, "body": {...}}``
    object per line, blank lines skipped; message n (counting from 0) is the
    n-th object."""
    messages = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ClientUsageError(f"--messages line {number}: not JSON ({exc.msg})") from None
        if (
            not isinstance(item, dict)
            or set(item) - {"type", "body"}
            or "type" not in item
            or "body" not in item
        ):
            raise ClientUsageError(
                f"--messages line {number}: expected an object with exactly the keys "
                f'"type" and "body"'
            )
        type_name, body = item["type"], item["body"]
        if not isinstance(type_name, str) or not type_name or "\0" in type_name:
            raise ClientUsageError(
                f'--messages line {number}: "type" must be a non-empty string without NUL'
            )
        if not isinstance(body, dict):
            raise ClientUsageError(
                f'--messages line {number}: "body" must be a JSON object (an SMP message)'
            )
        message = OutgoingMessage.from_json(type_name, body)
        if len(message.body) > MAX_MESSAGE_BODY_BYTES:
            raise ClientUsageError(
                f"--messages line {number}: body of {len(message.body)} bytes is larger than "
                f"{MAX_MESSAGE_BODY_BYTES}"
            )
        messages.append(message)
    return messages


def settings_from_manifest(
    manifest, node_id: str, faults: frozenset[ClientFault], receipt_prefix: str
) -> ClientSettings:
    """CONNECT and SEND values from ``manifest`` with ``${NODE_ID}`` replaced
    (profile, manifest keys host, login, destination; a fault may keep the
    manifest's text, the point manifest-values)."""
    substituted = FaultPoints(FAULT_SPECS, faults).apply(
        "manifest-values", manifest.substituted(node_id), manifest=manifest
    )
    return ClientSettings(
        host=substituted.host,
        destination=substituted.destination,
        login=substituted.login,
        passcode=substituted.passcode,
        receipt_prefix=receipt_prefix,
    )


def variant_settings(settings: ClientSettings, variants: frozenset[str]) -> ClientSettings:
    """``settings`` as the conformant variants change them: other-heart-beats
    (CONNECT's heart-beat), one-send-at-a-time and connection-per-message (a
    window of one)."""
    if OTHER_HEART_BEATS in variants:
        settings = dataclasses.replace(settings, heart_beat=CLIENT_HEART_BEAT)
    if ONE_SEND_AT_A_TIME in variants or CONNECTION_PER_MESSAGE in variants:
        settings = dataclasses.replace(settings, window=1)
    return settings


def _read_text(path: str, what: str, limit: int) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise ClientUsageError(f"{what}: cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise ClientUsageError(f"{what}: {path} is larger than {limit} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ClientUsageError(f"{what}: {path} is not UTF-8 (byte {exc.start})") from None


async def client_command(args) -> int:
    """``python -m reference_impl.stomp client``: deliver the messages of
    ``--messages`` to a server of ``--manifest``. Prints ``DELIVERED=<n>`` (n:
    the message's position in the file, from 0) when message n is receipted,
    then ``DONE delivered=<count>``."""
    from .manifest import MAX_MANIFEST_BYTES, ManifestError, choose_server, parse_manifest

    faults = client_faults(args.fault)
    if faults:
        log.warning("fault injection active: %s", ", ".join(sorted(set(args.fault))))
    try:
        manifest = parse_manifest(
            _read_text(args.manifest, "--manifest", MAX_MANIFEST_BYTES).encode("utf-8")
        )
        receipt_prefix = new_receipt_prefix()
        settings = variant_settings(
            settings_from_manifest(manifest, args.node_id, faults, receipt_prefix),
            frozenset(args.variant),
        )
        messages = parse_messages(_read_text(args.messages, "--messages", MAX_MESSAGES_FILE_BYTES))
        context = tls_context(args.cert, args.key, args.ca, faults)
    except ManifestError as exc:
        raise ClientUsageError(f"--manifest: {exc}") from None
    except ValueError as exc:  # node id or header values that cannot be sent
        raise ClientUsageError(str(exc)) from None
    except (OSError, ssl.SSLError) as exc:
        raise ClientUsageError(f"TLS files (--cert/--key/--ca): {exc}") from None

    session = ClientSession(settings, messages, faults=faults, variants=frozenset(args.variant))
    rng = random.SystemRandom()

    def on_event(event: Event) -> None:
        if isinstance(event, Delivered):
            print(f"DELIVERED={event.index}", flush=True)
        elif isinstance(event, ServerError):
            log.warning("ERROR frame from the server: %s", event.message)
        elif isinstance(event, ProtocolViolation):
            log.warning("protocol violation by the server: %s %r", event.reason, event.data[:200])
        elif isinstance(event, Connected):
            log.info(
                "connected (server %s; heart-beats out every %d ms, in every %d ms)",
                event.server,
                event.send_every,
                event.expect_every,
            )

    status = EXIT_OK
    try:
        await run_client(
            session,
            lambda: choose_server(manifest, rng),
            context,
            timeout=args.timeout,
            on_event=on_event,
            shape=Shape.from_variants(set(args.variant), args.late_seconds),
        )
    except ClientFailure as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        status = EXIT_TIMEOUT if exc.kind == "timeout" else EXIT_FAILED
    print(f"DONE delivered={session.reported_delivered}", flush=True)
    return status


def add_client_parser(commands, parents=()) -> None:
    """The ``client`` subcommand, on the subparsers of ``__main__``."""
    from ..faults import add_fault_option, fault_help
    from ..node_cli import positive_float
    from ..variants import add_variant_option, variant_help
    from .faults import SPECS
    from .variants import SPECS as VARIANT_SPECS

    parser = commands.add_parser(
        "client",
        parents=list(parents),
        help="deliver SMP messages to a STOMP server named by a manifest",
        description="Read a stomp.toml manifest, connect over TLS 1.3 (client certificate, server chain "
        "verified against --ca, hostname not checked) to one of its servers chosen at random, send each "
        "message of --messages as a SEND (destination from the manifest, receipt, type, content-type "
        "application/json, persistent:true) and count it delivered when its RECEIPT (or a later one) "
        "arrives. After a dropped connection everything not receipted is sent again on a new one "
        f"(at most {MAX_FRUITLESS_ATTEMPTS} attempts in a row that deliver nothing). Prints "
        "'DELIVERED=<n>' when message n (its position in --messages, from 0) is receipted, then "
        "'DONE delivered=<count>'.",
        epilog=f"exit status: {EXIT_OK} every message receipted, {EXIT_FAILED} gave up (connection, TLS or "
        f"protocol errors), {EXIT_USAGE} bad arguments or files, {EXIT_TIMEOUT} --timeout ran out\n\n"
        + fault_help(tuple(spec for spec in SPECS if spec.role == "client"), {"client": "client"})
        + "\n\n"
        + variant_help(tuple(spec for spec in VARIANT_SPECS if "client" in spec.roles)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--manifest", required=True, metavar="FILE", help="the server node's stomp.toml"
    )
    parser.add_argument(
        "--node-id", required=True, metavar="ID", help="our node id, for ${NODE_ID}"
    )
    parser.add_argument("--cert", required=True, metavar="PEM", help="our certificate chain")
    parser.add_argument("--key", required=True, metavar="PEM", help="our private key")
    parser.add_argument(
        "--ca", required=True, metavar="PEM", help="the CA that server chains must lead to"
    )
    parser.add_argument(
        "--messages",
        required=True,
        metavar="FILE",
        help='JSON lines, one {"type": ..., "body": {...}} per message',
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=30.0,
        metavar="S",
        help="seconds to get everything receipted, reconnects included (default: %(default)g)",
    )
    add_fault_option(parser, SPECS, "client")
    add_variant_option(parser, VARIANT_SPECS, "client")
    parser.set_defaults(run=client_command)

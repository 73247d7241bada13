"""The reference STOMP server's connection, sans-I/O: bytes in, bytes and
"store this" requests out. No sockets, no clock, no files: the asyncio node
(node.py) moves the bytes, keeps the heart-beat clock and owns the store.

Receipt semantics (profile, "STOMP Connections" and footnote 2; STOMP 1.2
"RECEIPT"): a valid SEND becomes a :class:`StoreRequest`; the caller stores
it durably and calls :meth:`ServerConnection.stored`. Every frame the server
sends is queued behind the stores requested before it: a RECEIPT (for a SEND
or a DISCONNECT) and an ERROR leave only once every earlier SEND of the
connection is durable, so a RECEIPT confirms all preceding messages, and
nothing overtakes anything.

What the server refuses, with ERROR and then a close (STOMP 1.2: "If the
server cannot successfully process the SEND frame for any reason, the server
MUST send the client an ERROR frame and then close the connection"; "The
server can reject any connection attempt"; after an ERROR it "MUST then close
the connection"). It is strict where the texts put a MUST on the client, and
accepts whatever the texts allow:

- a frame that breaks the STOMP 1.2 grammar or a size bound (frame.py says
  which: undefined escape such as ``\\t`` or a lone backslash ending a
  header name or value, a CR not before LF, no colon, an
  empty header name, an unknown command, a bad ``content-length``, a body not
  followed by NUL, header or frame too large): ERROR ``malformed frame``.
- any frame but CONNECT/STOMP before the session is connected;
  CONNECT/STOMP again after it.
- CONNECT/STOMP: no ``accept-version`` (a STOMP 1.0 client) or one without
  ``1.2`` among its comma-separated versions, spaces kept (Protocol
  Negotiation: ERROR carrying ``version:1.2``); no
  ``host`` (STOMP 1.2 clients MUST set it); a ``heart-beat`` that is not two
  integers ``cx,cy``; a body (only SEND, MESSAGE and ERROR may have one).
  ``login`` and ``passcode`` are never required (profile SHOULD NOT) and
  never checked: the client certificate authenticates the peer.
- SEND: no ``destination`` or an empty one (STOMP 1.2 REQUIRED); a
  ``transaction`` header (transactions are OPTIONAL in the profile and this
  server has none, so it cannot process the frame); the profile's required
  headers missing: ``receipt``, ``type``, ``content-type``; ``persistent``
  missing or not exactly ``true``; a ``content-type`` other than
  ``application/json`` (parameters allowed; a charset, if given, must be
  UTF-8), the only format this server supports (profile: JSON MUST, others
  MAY); a ``type`` that is not an SMP 2.1 message type; a body that is not
  UTF-8 JSON or not a valid SMP message of that type (reference_impl/stomp/
  smp.py says which field). An empty ``receipt`` value is accepted: the
  header is present and STOMP allows any value.
- DISCONNECT with a body; SUBSCRIBE, UNSUBSCRIBE, BEGIN, COMMIT, ABORT, ACK,
  NACK (OPTIONAL in the profile, not implemented: STOMP 1.2 "Client Frames"
  lets the server answer with ERROR and close); server commands sent by a
  client.

Accepted without fuss: EOLs between frames (heart-beats, also before
CONNECT), CRLF line ends, repeated headers (the first counts), NULs in a
body with ``content-length`` (read as body octets, never as a frame end;
such a body is not JSON, so the SEND is then refused for its body),
user-defined SEND headers (kept in the store),
a ``receipt`` on CONNECT (ignored: STOMP gives CONNECT no receipt).

An ERROR carries ``message`` (short), ``content-type: text/plain``, the
``receipt-id`` of the frame it answers when that frame had a ``receipt``, and
a body explaining the refusal (with the start of the offending frame, except
for CONNECT frames, whose passcode must not be echoed).

Faults (``--fault``, reference_impl/stomp/faults.py) reach the connection as
``faults=...``; each changes a value at a named point
(:meth:`FaultPoints.apply`), so with none on the code below is the rule as
written.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..faults import FaultPoints
from .faults import SPECS as FAULT_SPECS
from .faults import Fault
from .frame import (
    ALL_COMMANDS,
    CLIENT_COMMANDS,
    HEARTBEAT,
    Frame,
    FrameError,
    FrameParser,
    encode_frame,
    heart_beat_interval,
    parse_heart_beat,
    unescape_header_value,
)
from . import smp
from .store import StoredMessage
from .variants import (
    BARE_ERRORS,
    CUMULATIVE_RECEIPTS,
    EXTRA_HEADERS,
    LENIENT_SENDS,
    MINIMAL_CONNECTED,
    VARIANT_HEADER,
    FrameStyle,
)

SERVER_NAME = "reference-stomp/1.0"
DEFAULT_HEART_BEAT = (1000, 10000)
"""(sx, sy) of CONNECTED: we can send a heart-beat every second, and we would
like one from the client every 10 seconds (so a vanished client is noticed
within about half a minute, never sooner than the grace allows)."""
MAX_ERROR_EXCERPT = 300
UNSUPPORTED_COMMANDS = frozenset(
    {"SUBSCRIBE", "UNSUBSCRIBE", "BEGIN", "COMMIT", "ABORT", "ACK", "NACK"}
)

BodyValidator = Callable[[str, bytes], list[str]]
"""(type header, body) -> problems, each naming the field at fault."""


def smp_problems(type_name: str, body: bytes) -> list[str]:
    """Problems of a SEND body carrying an SMP message of ``type_name``
    (empty: valid), through reference_impl/stomp/smp.py: UTF-8 JSON object,
    its ``type`` member equal to the header, every field rule."""
    return [str(problem) for problem in smp.validate_body(type_name, body)]


@dataclass(frozen=True)
class StoreRequest:
    """Store ``message`` durably, then call ``ServerConnection.stored(request_id)``."""

    request_id: int
    message: StoredMessage


class ProtocolRefusal(Exception):
    """Internal: a frame the server refuses; becomes an ERROR frame."""

    def __init__(
        self,
        message: str,
        detail: str,
        frame: Frame | None = None,
        *,
        extra_headers: tuple[tuple[str, str], ...] = (),
        kind: str = "refused",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail
        self.frame = frame
        self.extra_headers = extra_headers
        self.kind = kind
        """What is refused: "malformed" (the frame grammar or a bound),
        "profile" (a SEND header the profile requires of clients is missing
        or wrong), "body" (a SEND body that is not a valid SMP message) or
        "refused" (any other reason)."""


def _excerpt(data: bytes) -> str:
    shown = data[:MAX_ERROR_EXCERPT]
    more = (
        f"... ({len(data) - MAX_ERROR_EXCERPT} more bytes)" if len(data) > MAX_ERROR_EXCERPT else ""
    )
    return repr(shown) + more


def _json_content_type(value: str) -> str | None:
    """None when ``value`` names application/json (media types are
    case-insensitive; parameters are allowed, a charset must be UTF-8), else
    why not."""
    media, *params = value.split(";")
    if media.strip().lower() != "application/json":
        return (
            f"content-type {value!r}: this server supports only application/json (profile: JSON MUST be "
            "supported, other formats MAY)"
        )
    for param in params:
        name, _, param_value = param.partition("=")
        if name.strip().lower() == "charset" and param_value.strip().strip('"').lower() not in (
            "utf-8",
            "utf8",
        ):
            return f"content-type {value!r}: JSON bodies are UTF-8 (RFC 8259)"
    return None


class ServerConnection:
    """One client connection of the server.

    Feed it with :meth:`receive_data` (and :meth:`receive_eof`); store what
    it asks (:class:`StoreRequest`) and confirm with :meth:`stored` or
    :meth:`store_failed`; send what :meth:`data_to_send` gives; close the
    transport when :attr:`finished`. :attr:`heart_beats` says, once
    connected, how often the caller must send an EOL when idle and how long
    the client may stay silent.
    """

    def __init__(
        self,
        *,
        heart_beat: tuple[int, int] = DEFAULT_HEART_BEAT,
        faults: Iterable[Fault] = (),
        max_frame_bytes: int = 1 << 20,
        max_headers: int = 64,
        max_header_line: int = 8192,
        session_id: str | None = None,
        validate_body: BodyValidator = smp_problems,
        variants: Iterable[str] = (),
    ) -> None:
        self._points = FaultPoints(FAULT_SPECS, frozenset(faults))
        self.faults = self._points.active
        """The names of the faults on (none: the conformant server)."""
        self.variants = frozenset(variants)
        """Conformant variants (reference_impl/stomp/variants.py) that change
        the frames written: their style, header order, extra headers, bare ERRORs."""
        self.style = FrameStyle.from_variants(self.variants)
        self.heart_beat = heart_beat
        self.session_id = session_id
        self.validate_body = validate_body
        self.parser = FrameParser(
            max_frame_bytes=max_frame_bytes,
            max_headers=max_headers,
            max_header_line=max_header_line,
            commands=ALL_COMMANDS,
            unescape=self._points.apply("header-unescape", unescape_header_value),
        )
        self.connected = False
        self.closing = False
        """No more input is processed; close once :attr:`finished`."""
        self.ignore_input = False
        self.disconnected = False
        """The session ended with DISCONNECT (rather than an error or a cut)."""
        self.heart_beats = (0, 0)
        """(send_ms, expect_ms) once connected: send an EOL when nothing was
        sent for send_ms; the client promised data at least every expect_ms
        (0: no heart-beats that way)."""
        self.heart_beat_header_missing = False
        """The CONNECT had no heart-beat header (so heart-beat:0,0)."""
        self.error: str | None = None
        """The ``message`` of the ERROR the server sent, if any."""
        self.accepted = 0
        self._requested = 0  # store requests issued
        self._confirmed = 0  # stores confirmed, a prefix 1.._confirmed
        self._done: set[int] = set()
        self._failed_from: int | None = None
        self._queue: deque[tuple[int, bytes, bool]] = (
            deque()
        )  # (stores needed, bytes, is a SEND receipt)
        self._receipts: dict[
            int, str | None
        ] = {}  # receipt of each pending store, for an ERROR if it fails
        self._out = bytearray()
        self._held_receipt: bytes | None = (
            None  # variant cumulative-receipts: the last SEND RECEIPT released
        )

    # ------------------------------------------------------------------ input

    def receive_data(self, data: bytes) -> list[StoreRequest]:
        """Process bytes from the client; the messages to store, in order."""
        if self.closing or self.ignore_input:
            return []
        refused = self._points.apply("received-bytes-refusal", None, data=data)
        if refused is not None:
            self._refuse(ProtocolRefusal("malformed frame", refused, kind="malformed"))
            return []
        requests: list[StoreRequest] = []
        try:
            items = self._points.apply("received-items", self.parser.receive_data(data))
        except FrameError as exc:
            self._malformed(exc)
            return requests
        for item in items:
            if self.closing or self.ignore_input:
                break
            try:
                request = self._handle(item)
            except ProtocolRefusal as refusal:
                self._refuse(refusal)  # closes, unless a fault says otherwise
                continue
            if request is not None:
                requests.append(request)
        if not self.closing and not self.ignore_input and self.parser.failed is not None:
            # The parser hands over the whole frames before a bad one first.
            self._malformed(self.parser.failed)
        return requests

    def receive_eof(self) -> None:
        """The client closed its side: nothing more will come."""
        if not self.closing:
            self.closing = True

    def heart_beat_timeout(self) -> None:
        """The caller's clock says the client has been silent past the
        agreed heart-beat interval and its grace: the connection is dead."""
        if not self.closing:
            self._refuse(
                ProtocolRefusal(
                    "heart-beat timeout",
                    f"nothing received within the grace of the agreed {self.heart_beats[1]} ms heart-beat interval",
                )
            )

    # ------------------------------------------------------------------ store confirmations

    def stored(self, request_id: int) -> None:
        """``request_id``'s message is durable."""
        if self._failed_from is not None and request_id >= self._failed_from:
            return
        self._done.add(request_id)
        while self._confirmed + 1 in self._done:
            self._confirmed += 1
            self._done.discard(self._confirmed)
            self._receipts.pop(self._confirmed, None)
        self._release()

    def store_failed(self, request_id: int, reason: str) -> None:
        """``request_id``'s message could not be stored: ERROR (with its
        receipt-id) after the RECEIPTs of earlier stores, then close; the
        frames queued after it are dropped."""
        if self._failed_from is not None:
            return
        self._failed_from = request_id
        self._queue = deque(entry for entry in self._queue if entry[0] < request_id)
        receipt = self._receipts.get(request_id)
        headers = (("receipt-id", receipt),) if receipt is not None else ()
        self._queue_error(
            ProtocolRefusal(
                "cannot store the message", f"the store failed: {reason}", extra_headers=headers
            ),
            needs=request_id - 1,
        )
        self.closing = True
        self._release()

    @property
    def pending_stores(self) -> int:
        return self._requested - self._confirmed

    # ------------------------------------------------------------------ output

    def data_to_send(self) -> bytes:
        self._flush_held_receipt()
        out = bytes(self._out)
        self._out.clear()
        return out

    @property
    def finished(self) -> bool:
        """Closing, and everything that will ever be sent has been handed
        out: close the transport (after writing what data_to_send gave)."""
        return (
            self.closing
            and not self._queue
            and not self._out
            and self._held_receipt is None
            and (self._failed_from is not None or self.pending_stores == 0)
        )

    def _emit(self, frame: Frame, *, needs: int | None = None, receipt: bool = False) -> None:
        frame = self._points.apply("outgoing-frame", frame)
        self._queue.append(
            (self._requested if needs is None else needs, self.style.encode(frame), receipt)
        )
        self._release()

    def _release(self) -> None:
        stores_pending = self._failed_from is None and self._confirmed < self._requested
        if self._points.apply("release-held", False, stores_pending=stores_pending):
            return
        released: list[tuple[bytes, bool]] = []
        while self._queue and self._queue[0][0] <= self._confirmed:
            _, data, receipt = self._queue.popleft()
            released.append((data, receipt))
        for data, receipt in self._points.apply("released-frames", released):
            if receipt and CUMULATIVE_RECEIPTS in self.variants:
                # Variant cumulative-receipts: of the SEND RECEIPTs released
                # before the caller writes (the SENDs stored together), only
                # the last goes out; footnote 2 makes it confirm the others.
                self._held_receipt = data
                continue
            self._flush_held_receipt()
            self._out += data

    def _flush_held_receipt(self) -> None:
        if self._held_receipt is not None:
            self._out += self._held_receipt
            self._held_receipt = None

    # ------------------------------------------------------------------ errors

    def _malformed(self, exc: FrameError) -> None:
        self._refuse(
            ProtocolRefusal(
                "malformed frame", f"{exc.reason}\nframe: {_excerpt(exc.data)}", kind="malformed"
            )
        )

    def _refuse(self, refusal: ProtocolRefusal) -> None:
        """ERROR, then close."""
        send_error, then = self._points.apply("refusal-answer", (True, "close"), kind=refusal.kind)
        if send_error:
            self._queue_error(refusal)
        if then == "close":
            self.closing = True
        elif then == "ignore-input":
            self.ignore_input = True

    def _queue_error(self, refusal: ProtocolRefusal, needs: int | None = None) -> None:
        headers: list[tuple[str, str]] = [("message", refusal.message)]
        frame = refusal.frame
        if frame is not None and frame.command != "CONNECT" and frame.command != "STOMP":
            receipt = frame.get("receipt")
            if receipt is not None:
                headers.append(("receipt-id", receipt))
        headers += refusal.extra_headers
        self.error = refusal.message
        if BARE_ERRORS in self.variants:  # the headers only: the body MAY be empty
            self._emit(Frame("ERROR", self._arrange(headers)), needs=needs)
            return
        headers.append(("content-type", "text/plain"))
        body = refusal.detail
        if frame is not None and frame.command not in ("CONNECT", "STOMP"):
            shown = encode_frame(frame, content_length=False if b"\x00" not in frame.body else True)
            body += f"\nthe frame: {_excerpt(shown)}"
        self._emit(
            Frame("ERROR", self._arrange(headers), (body + "\n").encode("utf-8")), needs=needs
        )

    def _arrange(self, headers: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
        """The headers of a RECEIPT or ERROR as written: as given, or (variant
        extra-headers) reversed after a header of the variant's own."""
        if EXTRA_HEADERS in self.variants:
            return (VARIANT_HEADER, *reversed(headers))
        return tuple(headers)

    # ------------------------------------------------------------------ frames

    def _handle(self, item: Frame | object) -> StoreRequest | None:
        if item is HEARTBEAT:
            refused = self._points.apply("eol-refusal", None, connected=self.connected)
            if refused is not None:
                raise ProtocolRefusal(*refused)
            return None
        frame: Frame = item  # type: ignore[assignment]
        command = frame.command
        if command not in CLIENT_COMMANDS:
            raise ProtocolRefusal(
                "server frame from a client",
                f"{command} is a server frame; a client may not send it",
                frame,
            )
        if not self.connected:
            if command in ("CONNECT", "STOMP"):
                self._connect(frame)
                return None
            raise ProtocolRefusal(
                "not connected",
                f"{command} before CONNECT: the session starts with CONNECT or STOMP",
                frame,
            )
        if command in ("CONNECT", "STOMP"):
            raise ProtocolRefusal("already connected", f"{command} on a connected session", frame)
        if command == "SEND":
            return self._send(frame)
        if command == "DISCONNECT":
            self._disconnect(frame)
            return None
        raise ProtocolRefusal(
            "unsupported command",
            f"{command} is not supported by this server (subscriptions and transactions are "
            "OPTIONAL in the Swaptacular STOMP profile)",
            frame,
        )

    def _connect(self, frame: Frame) -> None:
        frame = self._points.apply("connect-frame", frame)
        accept = frame.get("accept-version")
        if accept is None:
            raise ProtocolRefusal(
                "unsupported protocol version",
                "no accept-version header: the client speaks only STOMP 1.0; "
                "supported protocol versions are 1.2",
                extra_headers=(("version", "1.2"),),
            )
        # The versions as sent: "MUST never trim or pad headers with spaces"
        # (Value Encoding) leaves " 1.2" a version this server does not speak.
        speaks_1_2 = "1.2" in accept.split(",")
        if not self._points.apply("version-accepted", speaks_1_2, accept=accept):
            raise ProtocolRefusal(
                "unsupported protocol version",
                f"accept-version {accept[:80]!r}: supported protocol versions are 1.2",
                extra_headers=(("version", "1.2"),),
            )
        if frame.get("host") is None:
            raise ProtocolRefusal(
                "missing host header", "STOMP 1.2 clients MUST set the host header"
            )
        # login and passcode are never required, nor checked (see above)
        refused = self._points.apply("connect-refusal", None, frame=frame)
        if refused is not None:
            raise ProtocolRefusal(*refused)
        cx, cy = 0, 0
        value = frame.get("heart-beat")
        if value is not None:
            try:
                cx, cy = parse_heart_beat(value)
            except ValueError as exc:
                raise ProtocolRefusal("bad heart-beat header", str(exc)) from None
        if frame.body:
            raise ProtocolRefusal("body on CONNECT", f"{frame.command} frames MUST NOT have a body")
        sx, sy = self.heart_beat
        self.heart_beats = (heart_beat_interval(sx, cy), heart_beat_interval(cx, sy))
        self.heart_beat_header_missing = value is None
        headers = [("version", "1.2"), ("heart-beat", f"{sx},{sy}")]
        if MINIMAL_CONNECTED not in self.variants:
            headers.append(("server", SERVER_NAME))
            if self.session_id is not None:
                headers.append(("session", self.session_id))
        if EXTRA_HEADERS in self.variants:  # session, server, heart-beat, version
            headers.reverse()
        self.connected = True
        self._emit(Frame("CONNECTED", tuple(headers)))

    def _disconnect(self, frame: Frame) -> None:
        if frame.body:
            raise ProtocolRefusal(
                "body on DISCONNECT", "DISCONNECT frames MUST NOT have a body", frame
            )
        receipt = self._points.apply("disconnect-receipt", frame.get("receipt"))
        self.disconnected = True
        if receipt is not None:
            self._emit(Frame("RECEIPT", self._arrange([("receipt-id", receipt)])))
        self.closing = True

    def _header(self, frame: Frame, name: str) -> str | None:
        values = frame.all(name)
        if not values:
            return None
        value = self._points.apply("header-choice", values[0], values=values)
        return self._points.apply("header-value", value)

    def _send(self, frame: Frame) -> StoreRequest | None:
        destination = self._header(frame, "destination")
        if not self._points.apply(
            "destination-accepted", bool(destination), destination=destination
        ):
            what = "no destination header" if destination is None else "an empty destination header"
            raise ProtocolRefusal(
                "missing destination", f"SEND with {what}: destination is REQUIRED", frame
            )
        if frame.has("transaction"):
            raise ProtocolRefusal(
                "transactions not supported",
                "SEND with a transaction header: this server has no transactions",
                frame,
            )
        receipt = self._header(frame, "receipt")
        if (
            LENIENT_SENDS in self.variants
        ):  # the profile's sender rules are not the server's to enforce
            return self._accept(
                frame,
                destination or "",
                self._header(frame, "type") or "",
                self._header(frame, "content-type") or "",
                receipt,
            )
        for name in ("receipt", "type", "content-type"):
            if not frame.has(name):
                raise ProtocolRefusal(
                    f"missing {name} header",
                    f"the Swaptacular STOMP profile requires every SEND to include {name}",
                    frame,
                    kind="profile",
                )
        persistent = self._header(frame, "persistent")
        if persistent != "true":
            shown = "missing" if persistent is None else repr(persistent)
            raise ProtocolRefusal(
                "persistent must be true",
                f"persistent header {shown}: the profile says it MUST have the value true",
                frame,
                kind="profile",
            )
        content_type = self._header(frame, "content-type") or ""
        problem = _json_content_type(content_type)
        if problem is not None:
            raise ProtocolRefusal("unsupported content-type", problem, frame)
        type_name = self._header(frame, "type") or ""
        if type_name not in smp.MESSAGE_TYPES:
            raise ProtocolRefusal(
                "unknown message type",
                f"type {type_name[:80]!r} is not an SMP 2.1 message type",
                frame,
            )
        problems = self.validate_body(type_name, frame.body)
        if problems:
            raise ProtocolRefusal(
                "invalid SMP message",
                f"the body is not a valid SMP 2.1 {type_name} message: " + "; ".join(problems[:10]),
                frame,
                kind="body",
            )
        return self._accept(frame, destination or "", type_name, content_type, receipt)

    def _accept(
        self, frame: Frame, destination: str, type_name: str, content_type: str, receipt: str | None
    ) -> StoreRequest:
        """A SEND the server processes: a store request, its RECEIPT queued behind it."""
        self._requested += 1
        request = StoreRequest(
            self._requested,
            StoredMessage(
                destination=destination,
                type=type_name,
                content_type=content_type,
                receipt=receipt,
                body=frame.body,
                headers=frame.headers,
            ),
        )
        self._receipts[request.request_id] = receipt
        self.accepted += 1
        if receipt is not None:
            receipt_id = self._points.apply("send-receipt-id", receipt)
            self._emit(
                Frame("RECEIPT", self._arrange([("receipt-id", receipt_id)])),
                needs=self._points.apply("receipt-needs", self._requested),
                receipt=True,
            )
        return request

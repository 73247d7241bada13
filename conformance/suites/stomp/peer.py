"""The harness's side of a STOMP connection, driven by the reference codec.

Cases use :class:`StompPeer` to speak STOMP 1.2 over TLS the way a correct
client would (CONNECT, SEND, DISCONNECT, heart-beats) and ``send_raw`` to
put broken frames on the wire. Every frame sent is noted in the wire trace
in decoded form beside its bytes, every frame received too; the trace holds
the plaintext (TLS is end to end). Frames from the target are read with
:class:`FrameParser` under bounds: a target cannot make the harness buffer
without end. A frame that breaks the grammar is a NodeGrammarViolation of
``stomp.frame.server.sends-well-formed-frames`` (core/node_grammar.py): that
case fails for it, with the bytes, and the case that read it is blocked by
it; a frame beyond the harness's bounds fails the case that read it.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from conformance.core import node_grammar
from conformance.core.target_errors import TargetError
from conformance.core.target_runtime import TargetRuntime
from conformance.core.transport import (
    Deadline,
    DeadlineExceeded,
    PeerClosed,
    ProtocolViolation,
    TcpConnection,
    short_hex,
)
from reference_impl.stomp.frame import (
    HEARTBEAT,
    SERVER_COMMANDS,
    Frame,
    FrameError,
    FrameLimitExceeded,
    FrameParser,
    encode_frame,
)

from .own_messages import OwnMessage, own_message
from .prerequisites import SERVER_GRAMMAR

MAX_FRAME_BYTES = 256 * 1024
"""Largest frame the harness accepts from a target. Its answers are
CONNECTED, RECEIPT and ERROR frames (an ERROR may quote the frame it
refuses, which the harness keeps small); 256 KiB leaves room for a verbose
ERROR body and fails a flooding target from the bytes, early."""
MAX_HEADERS = 64
MAX_HEADER_LINE = 8192
"""Bounds on a received frame's headers: STOMP 1.2 ("Size Limits") lets
either side set them; no answer of a server comes near."""
MAX_ARRIVALS = 10_000
"""Arrival times kept per connection (heart-beat judging needs the last few)."""

STOMP_VERSION = "1.2"
DEFAULT_HOST_HEADER = "/"
"""The ``host`` header when the target gives no ``stomp_host`` param: the
manifest example of the profile uses ``host = "/"``."""
DEFAULT_DESTINATION = "/exchange/smp"
"""As ``smp_destination`` in adapter.py: the destination of valid SENDs."""


def summary(frame: Frame) -> str:
    """A frame in one line for traces and failure messages: command, headers
    (values cut), body size and start."""
    headers = ", ".join(
        f"{name}:{value[:80]!r}" if len(value) > 80 else f"{name}:{value}"
        for name, value in frame.headers[:16]
    )
    if len(frame.headers) > 16:
        headers += f", ... (+{len(frame.headers) - 16} headers)"
    body = f" body {len(frame.body)} bytes {frame.body[:120]!r}" if frame.body else ""
    return f"{frame.command} [{headers}]{body}"


@dataclass(frozen=True)
class TlsFiles:
    """The harness's TLS material for one target: the CA its server chain
    is checked against, and the client certificate it presents. Paths only."""

    ca_file: str
    cert_file: str
    key_file: str


def tls_files(runtime: TargetRuntime) -> TlsFiles:
    """``ca_file`` from the params (the run's CA, put there by
    preflight.prepare, or the target's own); the client certificate and key
    from the credentials ``client_cert``/``client_key`` when the target gives
    them (a node the harness does not launch trusts its own CA, not the
    run's), else the run's (params ``client_cert_file``/``client_key_file``)."""

    def pick(name: str) -> str:
        if name in runtime.target.credentials:
            return runtime.credential_file(name)
        value = runtime.params.get(f"{name}_file")
        if not value:
            raise TargetError(
                f"target {runtime.target.name}: no {name}_file (a credential, or the run's own "
                "certificate for targets the harness launches)"
            )
        return str(value)

    ca = runtime.params.get("ca_file")
    if not ca:
        raise TargetError(
            f"target {runtime.target.name}: no params.ca_file (the CA the server's certificate "
            "chains to)"
        )
    return TlsFiles(str(ca), pick("client_cert"), pick("client_key"))


def client_context(
    ca_file: str,
    cert: tuple[str, str] | None,
    *,
    minimum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_3,
    maximum: ssl.TLSVersion | None = None,
) -> ssl.SSLContext:
    """The harness as a TLS client: verifies the server's chain against
    ``ca_file`` and never its hostname (the profile: "Clients SHOULD NOT
    perform hostname verification"; the run's certificates name *.invalid
    hosts); presents ``cert`` (certificate and key paths) or none."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_REQUIRED
    context.minimum_version = minimum
    if maximum is not None:
        context.maximum_version = maximum
    try:
        context.load_verify_locations(cafile=ca_file)
        if cert is not None:
            context.load_cert_chain(cert[0], cert[1])
    except (OSError, ssl.SSLError) as exc:
        # The paths only: never the contents of a key file.
        raise TargetError(
            f"cannot load the harness's TLS files (CA {ca_file}"
            f"{', certificate ' + cert[0] if cert else ''}): {exc}"
        ) from None
    return context


class StompPeer:
    """One TLS connection to the target's STOMP server."""

    def __init__(self, conn: TcpConnection) -> None:
        self.conn = conn
        self.parser = FrameParser(
            max_frame_bytes=MAX_FRAME_BYTES,
            max_headers=MAX_HEADERS,
            max_header_line=MAX_HEADER_LINE,
            commands=SERVER_COMMANDS,
        )
        self.pending: deque[Frame] = deque()
        self.heartbeats = 0
        """EOLs received between frames."""
        self.arrivals: deque[float] = deque(maxlen=MAX_ARRIVALS)
        """time.monotonic() of every chunk of bytes received."""
        self.connected: Frame | None = None
        self.closed = False
        self.fed = 0
        """Bytes handed to the parser (until it failed): where a frame that
        breaks the grammar starts, in the target's bytes on this connection."""

    def _feed(self, data: bytes) -> list:
        """The parser's frames and heart-beats of ``data``."""
        if self.parser.failed is None:
            self.fed += len(data)
        return self.parser.receive_data(data)

    def _unreadable(self, exc: FrameError, what: str) -> ProtocolViolation:
        """A frame beyond the harness's bounds fails the case that read it; one
        that breaks the grammar is the grammar case's (recorded for it)."""
        if isinstance(exc, FrameLimitExceeded):
            return ProtocolViolation(
                f"target sent a frame beyond the harness's bounds where {what} was due "
                f"({exc.reason})",
                exc.data,
            )
        return node_grammar.violation(
            SERVER_GRAMMAR,
            f"a frame that breaks the STOMP 1.2 frame grammar where {what} was due: {exc.reason}",
            exc.data,
            direction="server to harness",
            offset=self.fed - len(self.parser.buffered),
            connection=self.conn.label,
        )

    # -- sending
    async def send_frame(
        self,
        frame: Frame,
        note: str = "",
        *,
        content_length: bool | None = None,
        eol: bytes = b"\n",
    ) -> bytes:
        data = encode_frame(frame, content_length=content_length, eol=eol)
        await self.conn.send(data, (note + ": " if note else "") + summary(frame))
        return data

    async def send_raw(self, data: bytes, note: str) -> None:
        await self.conn.send(data, note)

    async def send_heartbeat(self) -> None:
        await self.conn.send(b"\n", "heart-beat (EOL)")

    # -- receiving
    async def _fill(self, what: str, deadline: Deadline) -> bool:
        """Read one chunk into the parser; False when the target closed."""
        data = await self.conn.receive_some(deadline)
        if not data:
            self.closed = True
            return False
        self.arrivals.append(time.monotonic())
        try:
            items = self._feed(data)
        except FrameError as exc:
            raise self._unreadable(exc, what) from None
        for item in items:
            if item is HEARTBEAT:
                self.heartbeats += 1
                continue
            self.conn.trace.event(f"decoded: {summary(item)}")
            self.pending.append(item)
        return True

    def closed_text(self) -> str:
        alert = f" with TLS alert {self.conn.tls_alert}" if self.conn.tls_alert else ""
        partial = self.parser.buffered
        return f"target closed the connection{alert}" + (
            f" in the middle of a frame: {short_hex(partial)}" if partial else ""
        )

    async def next_or_close(
        self, what: str, deadline: float | Deadline | None = None
    ) -> Frame | None:
        """The target's next frame (heart-beats are counted and skipped), or
        None when it closes the connection first. A deadline with neither
        fails the case."""
        window = (
            deadline
            if isinstance(deadline, Deadline)
            else Deadline(self.conn.deadline if deadline is None else deadline)
        )
        while not self.pending:
            if self.closed:
                return None
            try:
                if not await self._fill(what, window):
                    return None
            except DeadlineExceeded:
                partial = self.parser.buffered
                if partial:
                    raise DeadlineExceeded(
                        f"no {what}: the target sent {len(partial)} byte(s), no complete frame "
                        f"within {window.seconds:g} s: {short_hex(partial)}"
                    ) from None
                raise DeadlineExceeded(
                    f"no {what} within {window.seconds:g} s (the target sent no frame)"
                ) from None
        return self.pending.popleft()

    async def next_frame(self, what: str, deadline: float | Deadline | None = None) -> Frame:
        frame = await self.next_or_close(what, deadline)
        if frame is None:
            raise PeerClosed(f"{self.closed_text()} where {what} was due")
        return frame

    async def expect(
        self, command: str, what: str, deadline: float | Deadline | None = None
    ) -> Frame:
        """The next frame, which must be ``command``."""
        frame = await self.next_frame(what, deadline)
        if frame.command != command:
            raise AssertionError(
                f"{what} must be a {command} frame; the target sent {summary(frame)}"
                + _error_detail(frame)
            )
        return frame

    async def await_close(self, deadline: float | Deadline | None = None) -> tuple[bool, list[str]]:
        """Wait for the target to close. Returns ``(closed, what it sent
        meanwhile)``: frames (summarised) and other bytes; EOLs after a
        frame are allowed by the grammar and not counted."""
        sent = [summary(frame) for frame in self.pending]
        self.pending.clear()
        if self.closed:
            return True, sent
        closed, data = await self.conn.await_close(deadline)
        if data:
            self.arrivals.append(time.monotonic())
            try:
                items = self._feed(data)
            except FrameError as exc:
                raise self._unreadable(exc, "nothing but a close") from None
            for item in items:
                if item is not HEARTBEAT:
                    self.conn.trace.event(f"decoded: {summary(item)}")
                    sent.append(summary(item))
            if self.parser.failed is None and self.parser.buffered.strip(b"\r\n"):
                sent.append(f"an unfinished frame: {short_hex(self.parser.buffered)}")
        self.closed = closed
        return closed, sent

    async def await_error_then_close(
        self, what: str, deadline: float | Deadline | None = None
    ) -> Frame:
        """The rule of STOMP 1.2 "ERROR": the next frame is an ERROR, and the
        connection closes right after it. Anything else fails the case,
        naming ``what`` provoked it and showing the frames."""
        frame = await self.next_or_close(f"the ERROR frame for {what}", deadline)
        if frame is None:
            raise AssertionError(
                f"after {what} the {self.closed_text()} without sending an ERROR frame "
                "(STOMP 1.2: the server MUST send an ERROR frame and then close)"
            )
        if frame.command != "ERROR":
            raise AssertionError(
                f"{what} must get an ERROR frame and a closed connection; the target sent "
                f"{summary(frame)}"
            )
        await self.close_after_error(frame, what, deadline)
        return frame

    async def close_after_error(
        self, frame: Frame, what: str, deadline: float | Deadline | None = None
    ) -> None:
        """After the ERROR ``frame`` (for ``what``), the connection must close
        and nothing but EOLs come first (STOMP 1.2, ERROR)."""
        closed, more = await self.await_close(deadline)
        if more:
            raise AssertionError(
                f"after its ERROR frame for {what} the target sent more instead of closing "
                f"the connection: {'; '.join(more)[:600]}"
            )
        if not closed:
            seconds = (
                deadline.seconds
                if isinstance(deadline, Deadline)
                else (self.conn.deadline if deadline is None else deadline)
            )
            raise AssertionError(
                f"the target sent an ERROR frame for {what} but kept the connection open "
                f"{seconds:g} s after it (STOMP 1.2, ERROR: it MUST then close the connection "
                f"just after sending the ERROR frame); ERROR: {summary(frame)}"
            )

    # -- sessions
    async def connect(
        self,
        headers: tuple[tuple[str, str], ...],
        *,
        command: str = "CONNECT",
        eol: bytes = b"\n",
        note: str = "",
    ) -> Frame:
        """Send CONNECT (or STOMP) with ``headers``; the CONNECTED frame.
        Anything else fails the case with what the target sent."""
        await self.send_frame(Frame(command, headers), note or command, eol=eol)
        frame = await self.next_or_close(f"the CONNECTED frame answering {command}")
        if frame is None:
            raise PeerClosed(f"{self.closed_text()} instead of answering {command} with CONNECTED")
        if frame.command != "CONNECTED":
            raise AssertionError(
                f"{command} must get a CONNECTED frame; the target sent {summary(frame)}"
                + _error_detail(frame)
            )
        self.connected = frame
        return frame

    async def disconnect(self, receipt: str, what: str = "") -> Frame:
        """DISCONNECT receipt:... and its RECEIPT (the session still worked
        up to here)."""
        await self.send_frame(Frame("DISCONNECT", (("receipt", receipt),)), what or "DISCONNECT")
        frame = await self.next_or_close(f"the RECEIPT for DISCONNECT receipt:{receipt}")
        if frame is None:
            raise AssertionError(
                f"{self.closed_text()} instead of answering DISCONNECT receipt:{receipt} "
                "with a RECEIPT"
            )
        if frame.command != "RECEIPT" or frame.get("receipt-id") != receipt:
            raise AssertionError(
                f"DISCONNECT receipt:{receipt} must get RECEIPT receipt-id:{receipt}; the target "
                f"sent {summary(frame)}" + _error_detail(frame)
            )
        return frame

    def gaps(self, since: float, until: float) -> list[float]:
        """Seconds between consecutive arrivals of data in [since, until],
        counting from ``since`` and up to ``until``."""
        points = [since] + [t for t in self.arrivals if since < t <= until] + [until]
        return [b - a for a, b in zip(points, points[1:])]


def _error_detail(frame: Frame) -> str:
    if frame.command != "ERROR":
        return ""
    message = frame.get("message")
    return f" (ERROR message: {message!r})" if message else ""


@dataclass(frozen=True)
class Settings:
    """What the harness puts into its frames for one target, from its params
    (all public) and the ``passcode`` credential (a secret)."""

    host_header: str
    destination: str
    login: str | None
    has_passcode: bool
    node_id: str

    def connect_headers(
        self,
        runtime: TargetRuntime,
        *,
        login: bool = True,
        passcode: bool = True,
        heart_beat: tuple[int, int] | None = None,
        accept_version: str = STOMP_VERSION,
    ) -> tuple[tuple[str, str], ...]:
        headers = [("accept-version", accept_version), ("host", self.host_header)]
        if login and self.login is not None:
            headers.append(("login", self.login))
        if passcode and self.has_passcode:
            headers.append(
                ("passcode", runtime.credential("passcode").decode("utf-8").rstrip("\r\n"))
            )
        if heart_beat is not None:
            headers.append(("heart-beat", f"{heart_beat[0]},{heart_beat[1]}"))
        return tuple(headers)


def settings_of(runtime: TargetRuntime) -> Settings:
    params = runtime.params
    login = params.get("login")
    return Settings(
        host_header=str(params.get("stomp_host") or DEFAULT_HOST_HEADER),
        destination=str(params.get("destination") or DEFAULT_DESTINATION),
        login=None if login is None else str(login),
        has_passcode="passcode" in runtime.target.credentials,
        node_id=str(params.get("node_id") or ""),
    )


def manifest_path(runtime: TargetRuntime) -> Path | None:
    value = runtime.params.get("manifest_file")
    return Path(str(value)) if value else None


def heartbeat_sender(peer: StompPeer, every: float) -> asyncio.Task[None]:
    """A task sending an EOL every ``every`` seconds until cancelled (the
    harness's heart-beats; STOMP 1.2: "if the sender has no real STOMP frame
    to send, it MUST send an end-of-line")."""

    async def beat() -> None:
        try:
            while True:
                await asyncio.sleep(every)
                await peer.send_heartbeat()
        except (asyncio.CancelledError, AssertionError, ConnectionError, OSError):
            return

    return asyncio.ensure_future(beat())


def valid_send(destination: str, label: str = "m") -> tuple[OwnMessage, Frame]:
    """A SEND as the profile wants it (receipt, type, content-type
    application/json, persistent:true, a valid SMP body unique to this
    call), and the message it carries: the valid counterpart, or the base a
    case breaks one thing of."""
    message = own_message(destination, label)
    return message, Frame("SEND", message.headers(), message.body.encode("utf-8"))

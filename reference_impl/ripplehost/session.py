"""The Ripple host session, sans-I/O: bytes in, events and bytes out.

One :class:`RippleSession` per association (TCP connection), in the role of
the host that initiated it (``Role.INITIATOR``) or accepted it
(``Role.ACCEPTOR``). The text (sctp-binding.txt, "Host Messages", "Host
Identification") and the project's profile (docs/ripplehost-profile.md):

- Host-id: the initiator's first message is the MSG
  ``{"type":"host-id","hostname":H}`` (msgno 0 from the reference); the
  acceptor answers it with an RPY of the same msgno carrying its own
  ``{"type":"host-id","hostname":...}``. Until then the acceptor sends
  nothing else, and the initiator sends no other MSG (:meth:`send_message`
  raises :class:`SessionError`). An acceptor whose first complete MSG is not
  a host-id in a host frame answers ERR ``host-id-required`` and closes; a
  second host-id MSG later gets ERR ``host-id-repeated``. An initiator
  answered with ERR, or with an RPY that is not a host-id, closes.
- msgno: the initiator numbers its MSGs even, the acceptor odd. A msgno is
  unique among the sender's MSGs still awaiting a complete answer.
- A frame that fits neither format closes the association at once without an
  answer. So does (profile, after BEEP RFC 3080 2.2.1.1, "poorly formed"
  frames) a MSG whose msgno has the sender's wrong parity, a MSG reusing the
  msgno of one of the peer's MSGs we have completely received and not yet
  completely answered, an RPY or ERR whose msgno is not one of our
  outstanding MSGs, and an RPY and an ERR in progress for one msgno.
- A MSG of a version other than ours gets ERR ``unsupported-version``
  (without reaching the application); every other MSG is handed to the
  application (:class:`MessageReceived`), which answers it with
  :meth:`reply` (RPY, or ERR with ``error=True``).
- Answers to a node frame are node frames with the users swapped.
- ERR bodies are ``{"type":"error","error":CODE,"message":TEXT}`` (plus
  details).

Nothing is sent after the session closes; what was queued before the
offending frame (answers to earlier valid messages) stays queued, so the node
flushes it and then closes. ``faults`` (reference_impl/ripplehost/faults.py)
bend these rules on purpose: each is declared there by what it changes at the
session's named fault points (``self._points.apply(point, value)``); the code
below computes the correct value at each and holds no fault branch.

Usage (the node does exactly this)::

    session = RippleSession(Role.ACCEPTOR, "b.example")
    events = session.receive_data(data)     # HostIdentified, MessageReceived, AnswerReceived, Closed
    session.reply(event.message.msgno, {"type": "pong"})
    transport.write(session.data_to_send())
    if session.closed: transport.close()
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..faults import FaultPoints
from .faults import SPECS as FAULT_SPECS
from .faults import Fault
from .frame import (
    DEFAULT_MAX_HEADER_LINE,
    DEFAULT_MAX_IN_PROGRESS,
    DEFAULT_MAX_MESSAGE,
    DEFAULT_MAX_SIZE,
    MAX_MSGNO,
    VERSION,
    Frame,
    FrameError,
    FrameParser,
    Message,
    Reassembler,
    encode_frame,
    error_body,
    message_frames,
)

DEFAULT_CHUNK_SIZE = 16384
"""Content bytes per frame the reference writes; longer messages are chunked."""
MAX_HOSTNAME_LEN = 253
HOST_ID = "host-id"


class Role(str, Enum):
    INITIATOR = "initiator"
    ACCEPTOR = "acceptor"


class SessionError(RuntimeError):
    """A call the session cannot honour now (closed, host-id not exchanged,
    reply to a msgno not awaiting one)."""


@dataclass(frozen=True)
class HostIdentified:
    """The host-id exchange is complete; ``hostname`` is the peer's."""

    hostname: str


@dataclass(frozen=True)
class MessageReceived:
    """A MSG of the peer, for the application to answer with :meth:`RippleSession.reply`."""

    message: Message


@dataclass(frozen=True)
class AnswerReceived:
    """The complete RPY or ERR to one of our MSGs; ``request`` is the body we sent."""

    message: Message
    request: dict[str, Any]

    @property
    def is_error(self) -> bool:
        return self.message.type == "ERR"


@dataclass(frozen=True)
class Closed:
    """The association is over: ``reason`` says why; ``by_peer`` when the peer
    closed it (end of stream), else we close it for ``reason``."""

    reason: str
    by_peer: bool = False


Event = HostIdentified | MessageReceived | AnswerReceived | Closed


def valid_hostname(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_HOSTNAME_LEN


class RippleSession:
    """One association. See the module docstring for the rules.

    Attributes the application reads: ``role``, ``hostname``,
    ``peer_hostname`` (after :class:`HostIdentified`), ``identified``,
    ``closed``, ``close_reason``, ``outstanding`` (our msgno -> body of each
    MSG awaiting its complete answer), ``unanswered`` (the peer's msgnos we
    have to answer).
    """

    def __init__(
        self,
        role: Role,
        hostname: str,
        *,
        version: str = VERSION,
        faults: frozenset = frozenset(),
        max_header_line: int = DEFAULT_MAX_HEADER_LINE,
        max_size: int = DEFAULT_MAX_SIZE,
        max_message: int = DEFAULT_MAX_MESSAGE,
        max_in_progress: int = DEFAULT_MAX_IN_PROGRESS,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> None:
        if not valid_hostname(hostname):
            raise ValueError(f"hostname must be 1..{MAX_HOSTNAME_LEN} characters")
        self.role = Role(role)
        self.hostname = hostname
        self.version = version
        self._points = FaultPoints(FAULT_SPECS, frozenset(faults))
        self.faults = frozenset(Fault(name) for name in self._points.active)
        self.chunk_size = min(chunk_size, max_size)
        self._parser_options = self._points.apply(
            "parser-options", {"max_header_line": max_header_line, "max_size": max_size}
        )
        self.parser = FrameParser(**self._parser_options)
        self.reassembler = Reassembler(
            **self._points.apply(
                "reassembler-options",
                {"max_message": max_message, "max_in_progress": max_in_progress},
            )
        )
        self.peer_hostname: str | None = None
        self.identified = False
        self.closed = False
        self.close_reason: str | None = None
        self.outstanding: dict[int, dict[str, Any]] = {}
        self.unanswered: dict[int, Message] = {}
        self._out = bytearray()
        self._host_id_msgno: int | None = None
        self._started = False
        # "The host that initiated the association must use only even-numbered
        # msgnos and the host that received the association must use only
        # odd-numbered msgnos."
        initiator = self.role is Role.INITIATOR
        self._own_parity = self._points.apply("own-parity", 0 if initiator else 1)
        self._peer_parity = 1 if initiator else 0
        self._next_msgno = self._own_parity

    @property
    def fault_points(self) -> FaultPoints:
        """The session's fault points, which the node layer applies too."""
        return self._points

    @property
    def may_send(self) -> bool:
        """Whether :meth:`send_message` may be called now: once the host-id
        exchange is done."""
        return self._points.apply("may-send", self.identified, started=self._started)

    # ------------------------------------------------------------ output

    def data_to_send(self) -> bytes:
        data = bytes(self._out)
        self._out.clear()
        return data

    def _queue(self, frames: list[Frame], body: dict[str, Any] | bytes) -> int:
        """Queue the frames of one message; returns the msgno they carry."""
        frames = self._points.apply(
            "outgoing-frames", frames, identified=self.identified, body=body
        )
        self._out += self._points.apply(
            "outgoing-bytes",
            b"".join(encode_frame(frame) for frame in frames),
            frames=frames,
            identified=self.identified,
            body=body,
        )
        return frames[0].msgno

    def _queue_frames(self, frames: list[Frame]) -> None:
        for frame in frames:
            self._out += encode_frame(frame)

    def _allocate_msgno(self) -> int:
        for _ in range(len(self.outstanding) + 1):
            msgno = self._next_msgno
            self._next_msgno = msgno + 2 if msgno + 2 <= MAX_MSGNO else self._own_parity
            if msgno not in self.outstanding:
                return msgno
        raise SessionError("no free msgno")  # unreachable: at most len(outstanding) are taken

    # ------------------------------------------------------------ the application's calls

    def start(self) -> None:
        """Initiator: queue the host-id MSG (call once, after TLS if any).
        Acceptor: nothing to do; it waits for the initiator's host-id."""
        if self._started:
            return
        self._started = True
        if self.role is not Role.INITIATOR:
            return
        opening = self._points.apply(
            "initiator-opening", [{"type": HOST_ID, "hostname": self.hostname}]
        )
        for body in opening:
            msgno = self._allocate_msgno()
            self._host_id_msgno = msgno
            self.outstanding[msgno] = body
            self._queue(message_frames("MSG", msgno, body, version=self.version), body)
        # Identified once the host-id RPY comes (_on_answer); an opening
        # without a host-id MSG leaves nothing to wait for.
        self.identified = not opening

    def send_message(
        self,
        body: dict[str, Any] | bytes,
        *,
        to_user: str | None = None,
        from_user: str | None = None,
        chunk_size: int | None = None,
    ) -> int:
        """Queue a MSG (a node frame when ``to_user``/``from_user`` are given);
        returns its msgno. Needs the host-id exchange done."""
        if self.closed:
            raise SessionError("the association is closed")
        if not self.may_send:
            raise SessionError("the host-id exchange is not complete")
        msgno = self._allocate_msgno()
        self.outstanding[msgno] = body if isinstance(body, dict) else {}
        return self._queue(
            message_frames(
                "MSG",
                msgno,
                body,
                version=self.version,
                to_user=to_user,
                from_user=from_user,
                chunk_size=chunk_size or self.chunk_size,
            ),
            body,
        )

    def reply(
        self,
        msgno: int,
        body: dict[str, Any],
        *,
        error: bool = False,
        chunk_size: int | None = None,
    ) -> None:
        """Answer the peer's MSG ``msgno`` with an RPY (or ERR). A MSG in a node
        frame is answered in a node frame with the users swapped. Does nothing
        once closed (a late answer to a dead association is dropped)."""
        if self.closed:
            return
        request = self.unanswered.get(msgno)
        if request is None:
            raise SessionError(f"no MSG {msgno} awaits an answer")
        if self._points.apply("release-answered-msgno", True, msgno=msgno):
            del self.unanswered[msgno]
        self._queue(
            message_frames(
                "ERR" if error else "RPY",
                msgno,
                body,
                version=self.version,
                to_user=request.from_user,
                from_user=request.to_user,
                chunk_size=chunk_size or self.chunk_size,
            ),
            body,
        )

    def close(self, reason: str) -> list[Event]:
        """Close for ``reason`` (idempotent); the node then flushes and closes."""
        if self.closed:
            return []
        self.closed = True
        self.close_reason = reason
        return [Closed(reason)]

    def receive_eof(self) -> list[Event]:
        if self.closed:
            return []
        self.closed = True
        self.close_reason = "the peer closed the connection"
        return [Closed(self.close_reason, by_peer=True)]

    # ------------------------------------------------------------ input

    def receive_data(self, data: bytes) -> list[Event]:
        """Feed received bytes; the events they complete, in order. After a
        :class:`Closed` event nothing more is read."""
        if self.closed:
            return []
        events: list[Event] = []
        failure: FrameError | None = None
        try:
            frames = self.parser.receive_data(data)
        except FrameError as exc:
            # The frames the read completed before the bad one were valid:
            # they are handled (and answered) first, then the association closes.
            frames, failure = exc.frames, exc
        for frame in frames:
            events += self._on_frame(frame)
            if self.closed:
                return events
        if failure is not None:
            events += self._on_grammar_error(failure)
        return events

    def _on_grammar_error(self, error: FrameError) -> list[Event]:
        # A frame that fits neither format closes the association, without an answer.
        if not self._points.apply("close-on-grammar-error", True, error=error):
            self.parser = FrameParser(**self._parser_options)  # drop what was buffered, read on
            return []
        self._queue_frames(
            self._points.apply("grammar-error-answers", [], error=error, version=self.version)
        )
        return self.close(f"frame breaks the grammar: {error.reason}")

    def _on_frame(self, frame: Frame) -> list[Event]:
        if frame.type != "MSG":
            frame = frame._replace(
                msgno=self._points.apply("answer-msgno", frame.msgno, outstanding=self.outstanding)
            )
        if self._points.apply("frame-ignored", False, frame=frame, outstanding=self.outstanding):
            return []
        refusals = self._points.apply(
            "frame-refusals", self._refusals(frame), frame=frame, reassembler=self.reassembler
        )
        if refusals:
            _rule, reason = refusals[0]
            return self.close(reason)
        try:
            message = self.reassembler.add(frame)
        except FrameError as exc:
            return self._on_grammar_error(exc)
        if message is None:
            return []
        if message.type == "MSG":
            return self._on_msg(message)
        return self._on_answer(message)

    def _refusals(self, frame: Frame) -> list[tuple[str, str]]:
        """Why the association closes on ``frame`` (of valid grammar): (rule,
        reason) for each rule it breaks, in the order they are checked; empty
        when the frame is taken."""
        refusals = []
        if frame.type == "MSG":
            if frame.msgno % 2 != self._peer_parity:
                refusals.append(
                    (
                        "wrong-parity",
                        f"MSG msgno {frame.msgno} has the wrong parity for the "
                        f"{'initiator' if self.role is Role.ACCEPTOR else 'acceptor'}",
                    )
                )
            if frame.msgno in self.unanswered and not self.reassembler.in_progress(
                "MSG", frame.msgno
            ):
                refusals.append(
                    (
                        "reused-msgno",
                        f"MSG reuses msgno {frame.msgno}, whose MSG still awaits its answer",
                    )
                )
            return refusals
        if frame.msgno not in self.outstanding:
            refusals.append(
                (
                    "unknown-msgno",
                    f"{frame.type} for msgno {frame.msgno}, which is not an outstanding MSG",
                )
            )
        other = "ERR" if frame.type == "RPY" else "RPY"
        if self.reassembler.in_progress(other, frame.msgno):
            refusals.append(
                ("rpy-and-err", f"RPY and ERR both in progress for msgno {frame.msgno}")
            )
        return refusals

    def _on_msg(self, message: Message) -> list[Event]:
        body = message.body
        if not self.identified:
            if self.role is Role.INITIATOR:
                return self.close("the acceptor sent a MSG before answering the host-id")
            if (
                body["type"] != HOST_ID
                or message.is_node
                or not valid_hostname(body.get("hostname"))
            ):
                self.unanswered[message.msgno] = message
                if self._points.apply("serve-before-host-id", False, message=message):
                    return [MessageReceived(message)]
                self.reply(
                    message.msgno,
                    error_body(
                        "host-id-required",
                        "the initiator's first message must be a host-id MSG in a host frame "
                        "with a hostname",
                    ),
                    error=True,
                )
                return self.close("the initiator's first message is not a valid host-id")
            self.peer_hostname = body["hostname"]
            self.identified = True
            for early in self._points.apply("messages-before-host-id-reply", []):
                self.send_message(early)
            reply = self._points.apply(
                "host-id-reply", {"type": HOST_ID, "hostname": self.hostname}
            )
            if reply is not None:
                self.unanswered[message.msgno] = message
                self.reply(message.msgno, reply)
            return [HostIdentified(self.peer_hostname)]
        self.unanswered[message.msgno] = message
        if body["type"] == HOST_ID:
            self.reply(
                message.msgno,
                error_body("host-id-repeated", "the host-id exchange is already done"),
                error=True,
            )
            return []
        if not self._points.apply(
            "version-accepted", message.version == self.version, message=message
        ):
            self.reply(
                message.msgno,
                error_body(
                    "unsupported-version",
                    f"this host speaks version {self.version}",
                    supported=[self.version],
                ),
                error=True,
            )
            return []
        return [MessageReceived(message)]

    def _on_answer(self, message: Message) -> list[Event]:
        request = self.outstanding.pop(message.msgno)
        if message.msgno == self._host_id_msgno and not self.identified:
            self._host_id_msgno = None
            body = message.body
            if message.type == "ERR":
                return self.close(f"the acceptor refused our host-id: {body}")
            if body["type"] != HOST_ID or not valid_hostname(body.get("hostname")):
                return self.close(f"the host-id answer is not a host-id message: {body}")
            self.peer_hostname = body["hostname"]
            self.identified = True
            return [HostIdentified(self.peer_hostname)]
        return [AnswerReceived(message, request)]

"""One BTP connection, sans-I/O: authentication, request/response, balance.

:class:`BtpSession` is what a peer runs over one WebSocket, for either role.
It reads no sockets and no clock: hand it each binary WebSocket message with
:meth:`BtpSession.receive_message` (a text message with
:meth:`BtpSession.receive_text_message`), act on the events it returns, and
send every payload :meth:`BtpSession.messages_to_send` returns, each as one
binary WebSocket message.  Timeouts are the I/O layer's: it calls
:meth:`BtpSession.auth_timed_out` when authentication took too long.  The one
clock the session reads is ``now``, for the ``triggeredAt`` of the Errors it
sends (injectable, default ``datetime.now(UTC)``).

The rules, with the line of ``btp-2.0-rfc0023.md`` each comes from:

Authentication (section "Authentication").
  The client's first packet is a Message whose primary entry is ``auth``
  (content type 0, empty data) with a secondary ``auth_token`` entry
  (content type 1, UTF-8).  The server answers it with a Response, or with an
  Error and then closes ("If the server sent an Error, it subsequently closes
  the connection").  Error codes the server uses:

  =====  ==================  =============================================
  F00    NotAcceptedError    a packet other than a Message before auth, a
                             Message whose primary entry is not ``auth``,
                             a wrong token ("Data were semantically invalid")
  F01    InvalidFieldsError  ``auth`` entry with a content type other than 0
                             or non-empty data; ``auth_token`` missing or not
                             UTF-8; two entries with the same name
                             ("structurally invalid data")
  =====  ==================  =============================================

  The text names no code for a refused auth; with the variant
  ``auth-refusals-f00`` every refusal is F00, as the deployed servers answer.

  A Response or Error from the client before auth is also "any other packet
  sent before the auth data": Error F00 and close.  The Flow section's "no
  response to an unexpected packet" exists to stop feedback loops; closing
  right after the Error stops any loop just as well, and the Authentication
  section speaks to this case specifically.

  An *unreadable* payload before auth is not a packet at all: it is ignored
  like any unreadable packet (no bytes out) and the session keeps waiting for
  the auth Message until the I/O layer's auth timeout.  On that timeout the
  server closes without sending anything (the spec's informing Message is
  optional and has no defined sub-protocol).

  The ``auth_token`` content type is not checked beyond the codec (which
  already rejects content type 1 or 2 with non-UTF-8 data as unreadable): the
  spec asks for "a UTF-8 'auth_token' entry", so the server requires the data
  to be UTF-8 whatever the content type says.  An ``auth`` Message after a
  successful auth is answered with Error F00 ("already authenticated"); the
  connection stays open.

  The client closes when the server answers its auth with an Error, and when
  the I/O layer reports (``auth_timed_out``) that no answer came ("If the
  client did send an Auth packet, but got neither a Response nor an Error
  back from the server, the client closes the connection").

Flow (section "Flow").
  Outgoing request ids are random UInt32s, never one already in flight.
  A response whose request id is not in flight (never sent, or already
  answered) is *unexpected*: no bytes out, event :class:`UnexpectedPacket`.
  A payload the codec rejects is *unreadable*: no bytes out, event
  :class:`UnreadablePacket`, the connection goes on.

  Legacy types 3, 4, 5 (BTP 1 Prepare, Fulfill, Reject): the type table says
  "(not used)" and lists them as neither request nor response, so they are
  not requests that a Response or Error could answer.  A peer sending them
  speaks another protocol -- the very case the Flow section gives for
  silence ("If an application got onto a BTP connection and spoke the wrong
  protocol ...").  They are treated as unreadable: no bytes out, the event
  :class:`UnreadablePacket` (reason starts with ``"legacy BTP 1 type"``),
  before auth as after.  (btp-packet, the JavaScript codec, rejects these
  types as unrecognized too.)

  Two protocol data entries with the same name in a request: Error F01
  (section "Authentication": "any of the other protocol rules are violated
  (e.g. having two subprotos with the same name)").  After auth the
  connection stays open.  In a response the duplicate is not answered (a
  response is never answered) and the packet is delivered as it is.

Requests this session answers (``auto_respond=True``, the default; with
``False`` it emits :class:`RequestReceived` and the application answers with
:meth:`BtpSession.respond` / :meth:`BtpSession.respond_error`, except that
Transfers are always settled here so the balance rule cannot be broken):

  Transfer -- section "Transfer": "If a Response has been returned, balances
  MUST have been updated ... If an Error has been returned, the peer MUST NOT
  have updated their balance".  ``balance + amount`` above ``max_balance``
  is refused with Error F08 InsufficientBalanceError and the balance is
  unchanged; otherwise the balance is updated in the same step that queues
  the Response (see :meth:`BtpSession._settle_transfer`).

  Message, primary ``balance`` -- the adapter contract of
  ``docs/btp-adapter.md``: Response, primary entry ``balance``, content
  type 2, data ``{"balance":"<decimal>"}``.

  Message, primary ``echo`` -- a Response whose only entry is the request's
  primary entry, unchanged: lets a test tie a Response to its request by
  content as well as by request id.

  Message, primary ``auth`` after auth -- Error F00 (see above).

  Any other Message (``ilp`` included: this node is not an ILP connector) --
  an empty Response (no protocol data): "Response is returned if the peer
  acknowledges the Message".  A Message with no protocol data at all is
  acknowledged the same way.

Faults (:class:`Fault`) break one rule each on purpose, so tests can prove
that the harness notices.  faults.py declares each by what it changes at
the session's named fault points (``self._points.apply(point, value)``):
the code below computes the correct value at each and holds no fault branch.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import Union

from ..faults import FaultPoints
from .faults import SPECS as FAULT_SPECS
from .faults import Fault
from .variants import (
    AUTH_REFUSALS_F00,
    AUTH_TIMEOUT_MESSAGE,
    EXTRA_PROTOCOL_DATA,
    FIRST_SEQUENTIAL_ID,
    INFO_NAME,
    NOTICE_NAME,
    REFUSE_UNKNOWN_SUBPROTOCOLS,
    RFC30_TIMESTAMPS,
    SEQUENTIAL_REQUEST_IDS,
)
from .packet import (
    ERROR_CODES,
    MAX_AMOUNT,
    MAX_REQUEST_ID,
    BtpDecodeError,
    ContentType,
    Error,
    Fulfill,
    Message,
    Packet,
    Prepare,
    ProtocolDataEntry,
    Reject,
    Response,
    Transfer,
    decode_packet,
    encode_packet,
    generalized_time,
    primary,
)

__all__ = [
    "AUTH",
    "AUTH_TOKEN",
    "BALANCE",
    "ECHO",
    "Authenticated",
    "AuthFailed",
    "BalanceChanged",
    "BtpSession",
    "Close",
    "Fault",
    "Ledger",
    "RequestReceived",
    "ResponseReceived",
    "Role",
    "SessionEvent",
    "SessionState",
    "UnexpectedPacket",
    "UnreadablePacket",
    "balance_request_entry",
    "balance_response_entry",
    "parse_balance",
    "duplicate_names",
    "token_checker",
]

AUTH = "auth"
AUTH_TOKEN = "auth_token"
BALANCE = "balance"
"""Primary sub-protocol of the adapter's balance query (docs/btp-adapter.md)."""
ECHO = "echo"
"""Primary sub-protocol the reference node answers with the entry itself."""


class Role(str, Enum):
    CLIENT = "client"
    SERVER = "server"


class SessionState(str, Enum):
    AUTHENTICATING = "authenticating"
    OPEN = "open"
    CLOSED = "closed"


# --------------------------------------------------------------------------- events


@dataclass(frozen=True)
class Authenticated:
    """Auth succeeded: for the server, it accepted the client's auth Message
    ``request_id``; for the client, the server answered it with a Response."""

    request_id: int


@dataclass(frozen=True)
class AuthFailed:
    """Auth failed.  Server: it sent Error ``code`` (a :class:`Close` follows).
    Client: the server answered with Error ``code``, or (``code`` None) no
    answer came in time.  ``reason`` never contains the token."""

    reason: str
    code: str | None


@dataclass(frozen=True)
class RequestReceived:
    """The peer sent a request (Message or Transfer) that this session
    accepted for processing; with ``auto_respond`` it is already answered."""

    packet: Message | Transfer


@dataclass(frozen=True)
class ResponseReceived:
    """The answer (Response or Error) to our in-flight request ``request_id``."""

    request_id: int
    packet: Response | Error


@dataclass(frozen=True)
class UnexpectedPacket:
    """A readable packet that is not expected here (a response to no
    in-flight request); nothing was sent in reply."""

    reason: str
    packet: Packet


@dataclass(frozen=True)
class UnreadablePacket:
    """A payload that is not a readable BTP 2.0 packet; nothing was sent in
    reply and the connection goes on.  ``reason`` is the codec's fixed phrase
    (``BtpDecodeError.reason``) or ``"text message"`` / ``"legacy BTP 1 type N"``;
    ``detail`` says more."""

    reason: str
    detail: str = ""


@dataclass(frozen=True)
class BalanceChanged:
    """An accepted Transfer of ``amount`` made the balance ``balance``."""

    balance: int
    amount: int


@dataclass(frozen=True)
class Close:
    """The session is over; send what :meth:`BtpSession.messages_to_send`
    still returns, then close the WebSocket.  No more events follow."""

    reason: str


SessionEvent = Union[
    Authenticated,
    AuthFailed,
    RequestReceived,
    ResponseReceived,
    UnexpectedPacket,
    UnreadablePacket,
    BalanceChanged,
    Close,
]


# --------------------------------------------------------------------------- helpers


class Ledger:
    """The balance that incoming Transfers increase, bounded by ``max_balance``.

    Several sessions (reconnections of the same peer) may share one ledger.
    """

    def __init__(self, balance: int = 0, max_balance: int = MAX_AMOUNT) -> None:
        if not 0 <= balance <= max_balance:
            raise ValueError(f"balance {balance} must be in 0..max_balance ({max_balance})")
        self.balance = balance
        self.max_balance = max_balance

    def fits(self, amount: int) -> bool:
        return self.balance + amount <= self.max_balance


def token_checker(expected: bytes) -> Callable[[bytes], bool]:
    """A ``check_token`` comparing in constant time with ``expected``."""

    def check(token: bytes) -> bool:
        return hmac.compare_digest(token, expected)

    return check


def duplicate_names(packet: Packet) -> list[str]:
    """Protocol names that occur more than once in ``packet``, in order."""
    seen: set[str] = set()
    dups: list[str] = []
    for entry in packet.protocol_data:
        if entry.name in seen and entry.name not in dups:
            dups.append(entry.name)
        seen.add(entry.name)
    return dups


def balance_request_entry() -> ProtocolDataEntry:
    """The primary entry of the adapter's balance query (docs/btp-adapter.md)."""
    return ProtocolDataEntry(BALANCE, ContentType.APPLICATION_JSON, b"{}")


def balance_response_entry(balance: int) -> ProtocolDataEntry:
    """The primary entry of the answer: ``{"balance":"<decimal>"}``."""
    data = json.dumps({"balance": str(balance)}, separators=(",", ":")).encode("ascii")
    return ProtocolDataEntry(BALANCE, ContentType.APPLICATION_JSON, data)


def parse_balance(packet: Packet) -> int:
    """The balance a Response to the balance query carries.

    ValueError unless ``packet`` is a Response whose primary entry is
    ``balance``, content type 2, data a JSON object whose ``balance`` is a
    string of decimal digits (no sign, no leading zeros)."""
    if not isinstance(packet, Response):
        raise ValueError(f"expected a Response, got {type(packet).__name__}")
    entry = primary(packet)
    if entry is None or entry.name != BALANCE:
        raise ValueError(f"primary entry is {entry.name if entry else None!r}, not {BALANCE!r}")
    if entry.content_type != ContentType.APPLICATION_JSON:
        raise ValueError(f"content type {entry.content_type}, not 2 (application/json)")
    try:
        body = json.loads(entry.data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"data is not JSON: {exc}") from None
    if not isinstance(body, dict) or "balance" not in body:
        raise ValueError(f"data {entry.data[:100]!r} is not an object with a balance field")
    value = body["balance"]
    if (
        not isinstance(value, str)
        or not value.isascii()
        or not value.isdigit()
        or (len(value) > 1 and value[0] == "0")
    ):
        raise ValueError(f"balance {value!r} is not a decimal integer string")
    return int(value)


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


# --------------------------------------------------------------------------- the session


class BtpSession:
    """Authentication and request/response for one BTP connection.

    Build with :meth:`client` or :meth:`server`.  After auth both roles are
    identical ("At the BTP level, the client and server play identical
    roles"): either may send requests and both answer the other's.
    """

    def __init__(
        self,
        role: Role,
        *,
        auth_token: bytes | None = None,
        check_token: Callable[[bytes], bool] | None = None,
        ledger: Ledger | None = None,
        auto_respond: bool = True,
        faults: Iterable[Fault | str] = (),
        now: Callable[[], datetime] = _utc_now,
        random_id: Callable[[], int] | None = None,
        extra_auth_data: Sequence[ProtocolDataEntry] = (),
        variants: Iterable[str] = (),
    ) -> None:
        self._role = Role(role)
        # Conformant variants (reference_impl/btp/variants.py): other
        # behaviours the texts allow, for `conformance mutation --variants`.
        self._variants = frozenset(variants)
        self._errors_sent = 0
        if random_id is None and SEQUENTIAL_REQUEST_IDS in self._variants:
            counter = iter(range(FIRST_SEQUENTIAL_ID, 1 << 62))

            def random_id() -> int:  # masked to 32 bits by _new_id: ..., 2^32-1, 0, 1, ...
                return next(counter)

        self._ledger = ledger if ledger is not None else Ledger()
        self._auto_respond = auto_respond
        self._points = FaultPoints(FAULT_SPECS, tuple(faults))
        self._now = now
        self._random_id = random_id or (lambda: secrets.randbits(32))
        self._check_token = check_token
        self._state = SessionState.AUTHENTICATING
        self._outbox: list[bytes] = []
        self._in_flight: set[int] = set()
        # Requests of the peer we have not answered yet (auto_respond=False).
        self._unanswered: set[int] = set()
        self._auth_request_id: int | None = None
        self._close_reason: str | None = None
        if self._role is Role.CLIENT:
            if auth_token is None:
                raise ValueError("a client needs an auth_token (b'' when none is needed)")
            try:
                auth_token.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError("auth_token must be UTF-8") from None
            entries = self._points.apply(
                "auth-entries",
                (
                    ProtocolDataEntry(AUTH, ContentType.APPLICATION_OCTET_STREAM, b""),
                    *self._extra_entries(),  # variant: "among the secondary entries", not right after auth
                    ProtocolDataEntry(AUTH_TOKEN, ContentType.TEXT_PLAIN_UTF8, bytes(auth_token)),
                    *extra_auth_data,
                ),
            )
            for request in self._points.apply("requests-before-auth", [], new_id=self._new_id):
                self._send_request(request)
            self._auth_request_id = self._send_request(Message(self._new_id(), entries))
        elif check_token is None:
            raise ValueError("a server needs check_token")

    @classmethod
    def client(
        cls,
        auth_token: bytes,
        *,
        initial_balance: int = 0,
        max_balance: int = MAX_AMOUNT,
        ledger: Ledger | None = None,
        **options,
    ) -> BtpSession:
        """The connecting side; its first payload out is the auth Message."""
        return cls(
            Role.CLIENT,
            auth_token=auth_token,
            ledger=ledger or Ledger(initial_balance, max_balance),
            **options,
        )

    @classmethod
    def server(
        cls,
        check_token: Callable[[bytes], bool],
        initial_balance: int = 0,
        max_balance: int = MAX_AMOUNT,
        *,
        ledger: Ledger | None = None,
        **options,
    ) -> BtpSession:
        """The accepting side; ``check_token`` gets the auth_token's bytes."""
        return cls(
            Role.SERVER,
            check_token=check_token,
            ledger=ledger or Ledger(initial_balance, max_balance),
            **options,
        )

    # --- variants

    @property
    def variants(self) -> frozenset[str]:
        return self._variants

    def _extra_entries(self) -> tuple[ProtocolDataEntry, ...]:
        """Variant extra-protocol-data: an entry no peer knows, beside the known ones."""
        if EXTRA_PROTOCOL_DATA not in self._variants:
            return ()
        return (
            ProtocolDataEntry(INFO_NAME, ContentType.TEXT_PLAIN_UTF8, b"additional information"),
        )

    def _triggered_at(self) -> str:
        """The triggeredAt of the next Error: the fixed ``.mmmZ`` form, or
        with variant rfc30-timestamps RFC 30's canonical form at a precision
        of 0, 1, 2, 3 fraction digits in turn (trailing zeros left out)."""
        text = generalized_time(self._now())
        if RFC30_TIMESTAMPS not in self._variants:
            return text
        digits = self._errors_sent % 4
        self._errors_sent += 1
        fraction = text[15:18][:digits].rstrip("0")
        return text[:14] + (f".{fraction}" if fraction else "") + "Z"

    # --- state

    @property
    def role(self) -> Role:
        return self._role

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def authenticated(self) -> bool:
        return self._state is SessionState.OPEN

    @property
    def closed(self) -> bool:
        return self._state is SessionState.CLOSED

    @property
    def close_reason(self) -> str | None:
        return self._close_reason

    @property
    def balance(self) -> int:
        return self._ledger.balance

    @property
    def max_balance(self) -> int:
        return self._ledger.max_balance

    @property
    def ledger(self) -> Ledger:
        return self._ledger

    @property
    def faults(self) -> frozenset[Fault]:
        return frozenset(Fault(name) for name in self._points.active)

    @property
    def fault_points(self) -> FaultPoints:
        """The session's fault points, which the node layer applies too (its timings)."""
        return self._points

    @property
    def in_flight(self) -> frozenset[int]:
        """Request ids we sent and have had no response to yet."""
        return frozenset(self._in_flight)

    @property
    def auth_request_id(self) -> int | None:
        """Client: the request id of its auth Message.  Server: that of the
        client's, once received."""
        return self._auth_request_id

    # --- output

    def messages_to_send(self) -> list[bytes]:
        """The payloads to send, in order, each one binary WebSocket message; clears them."""
        out, self._outbox = self._outbox, []
        return out

    # --- sending requests

    def _new_id(self) -> int:
        for _ in range(1000):
            candidate = self._random_id() & MAX_REQUEST_ID
            if candidate not in self._in_flight:
                return candidate
        raise RuntimeError("could not find a request id that is not in flight")

    def _check_can_request(self) -> None:
        if self._state is SessionState.CLOSED:
            raise RuntimeError("the session is closed")
        if self._role is Role.SERVER and self._state is SessionState.AUTHENTICATING:
            raise RuntimeError("the client has not authenticated yet")

    def _request_id(self, request_id: int | None) -> int:
        if request_id is None:
            return self._points.apply(
                "request-id",
                self._new_id(),
                auth_request_id=self._auth_request_id,
                in_flight=frozenset(self._in_flight),
            )
        if request_id in self._in_flight:
            raise ValueError(f"request id {request_id} is already in flight")
        return request_id

    def _send_request(self, packet: Message | Transfer) -> int:
        payload = encode_packet(packet)
        self._in_flight.add(packet.request_id)
        self._outbox.append(payload)
        return packet.request_id

    def send_message(
        self, protocol_data: Sequence[ProtocolDataEntry], *, request_id: int | None = None
    ) -> int:
        """Send a Message request; returns its request id (unique in flight)."""
        self._check_can_request()
        return self._send_request(
            Message(self._request_id(request_id), tuple(protocol_data) + self._extra_entries())
        )

    def send_transfer(
        self,
        amount: int,
        protocol_data: Sequence[ProtocolDataEntry] = (),
        *,
        request_id: int | None = None,
    ) -> int:
        """Send a Transfer request; returns its request id."""
        self._check_can_request()
        return self._send_request(
            Transfer(
                self._request_id(request_id), amount, tuple(protocol_data) + self._extra_entries()
            )
        )

    def request_balance(self, *, request_id: int | None = None) -> int:
        """Ask the peer for its balance (docs/btp-adapter.md); returns the request id."""
        return self.send_message((balance_request_entry(),), request_id=request_id)

    # --- answering

    def _answer_id(self, request_id: int) -> int:
        return self._points.apply(
            "answer-id",
            request_id,
            authenticated=self._state is SessionState.OPEN,
            auth_request_id=self._auth_request_id,
        )

    def _error_packet(self, request_id: int, code: str, data: bytes | str = b"") -> Error:
        if isinstance(data, str):
            data = data.encode("utf-8")
        return self._points.apply(
            "error",
            Error(
                self._answer_id(request_id),
                code,
                ERROR_CODES[code],
                self._triggered_at(),
                data[:8192],
                self._extra_entries(),
            ),
        )

    def _responses(
        self, request_id: int, protocol_data: Sequence[ProtocolDataEntry] = (), *, rule: str
    ) -> list[bytes]:
        """The encoded Response to the peer's request ``request_id``; ``rule``
        names which of the session's answers it is (see faults.POINTS)."""
        response = Response(
            self._answer_id(request_id), tuple(protocol_data) + self._extra_entries()
        )
        return self._points.apply("responses", [encode_packet(response)], rule=rule)

    def _queue_response(
        self, request_id: int, protocol_data: Sequence[ProtocolDataEntry] = (), *, rule: str
    ) -> None:
        self._outbox.extend(self._responses(request_id, protocol_data, rule=rule))

    def _encode_error(self, error: Error) -> bytes:
        # An Error a fault changed breaks the codec's checks on purpose.
        return encode_packet(error, validate=not self._points.changes("error"))

    def _queue_error(self, request_id: int, code: str, data: bytes | str = b"") -> None:
        self._outbox.append(self._encode_error(self._error_packet(request_id, code, data)))

    def _take_unanswered(self, request_id: int) -> None:
        if self._state is SessionState.CLOSED:
            raise RuntimeError("the session is closed")
        if request_id not in self._unanswered:
            raise ValueError(f"no unanswered request {request_id} of the peer")
        self._unanswered.discard(request_id)

    def respond(self, request_id: int, protocol_data: Sequence[ProtocolDataEntry] = ()) -> None:
        """Answer the peer's Message ``request_id`` with a Response (``auto_respond=False``)."""
        self._take_unanswered(request_id)
        self._queue_response(request_id, protocol_data, rule="application")

    def respond_error(self, request_id: int, code: str, data: bytes | str = b"") -> None:
        """Answer the peer's Message ``request_id`` with an Error (``auto_respond=False``)."""
        if code not in ERROR_CODES:
            raise ValueError(f"unknown error code {code!r}")
        self._take_unanswered(request_id)
        self._queue_error(request_id, code, data)

    # --- closing

    def _close(self, reason: str) -> Close:
        self._state = SessionState.CLOSED
        self._close_reason = reason
        self._in_flight.clear()
        self._unanswered.clear()
        return Close(reason)

    def close(self, reason: str = "closed locally") -> list[SessionEvent]:
        """End the session (the I/O layer closes the WebSocket, or saw it closed)."""
        if self._state is SessionState.CLOSED:
            return []
        return [self._close(reason)]

    def auth_timed_out(self) -> list[SessionEvent]:
        """The I/O layer's auth deadline passed.  Still authenticating: the
        session closes (sending nothing).  Otherwise: no effect."""
        if self._state is not SessionState.AUTHENTICATING:
            return []
        if self._role is Role.SERVER:
            if AUTH_TIMEOUT_MESSAGE in self._variants:
                # The variant: the Message the text makes optional, then the close.
                self._outbox.append(
                    encode_packet(
                        Message(
                            self._new_id(),
                            (
                                ProtocolDataEntry(
                                    NOTICE_NAME,
                                    ContentType.TEXT_PLAIN_UTF8,
                                    b"authentication timed out",
                                ),
                            ),
                        )
                    )
                )
            return [self._close("the client did not authenticate in time")]
        return [
            AuthFailed("no answer to the auth Message in time", None),
            self._close("the server did not answer the auth Message in time"),
        ]

    # --- receiving

    def receive_text_message(self, text: str) -> list[SessionEvent]:
        """A text WebSocket message: BTP packets are binary messages, so it is unreadable."""
        if self._state is SessionState.CLOSED:
            return []
        return self._unreadable(
            "text message",
            f"{len(text)} characters in a text WebSocket message",
            text.encode("utf-8", "replace"),
        )

    def receive_message(self, payload: bytes) -> list[SessionEvent]:
        """One binary WebSocket message from the peer; returns what happened.

        Never raises on bad input.  Ignored once the session is closed."""
        if self._state is SessionState.CLOSED:
            return []
        reading: Packet | BtpDecodeError
        try:
            reading = decode_packet(bytes(payload))
        except BtpDecodeError as exc:
            reading = exc
        packet = self._points.apply("reading", reading, payload=payload)
        if isinstance(packet, BtpDecodeError):
            return self._unreadable(packet.reason, str(packet), payload)
        if isinstance(packet, (Prepare, Fulfill, Reject)):
            kind = payload[0]
            return self._unreadable(
                f"legacy BTP 1 type {kind}",
                f"{type(packet).__name__} (type {kind}) is not used in BTP 2.0",
                payload,
            )
        if self._state is SessionState.AUTHENTICATING:
            if self._role is Role.SERVER:
                return self._server_auth(packet)
            if isinstance(packet, (Response, Error)) and packet.request_id == self._auth_request_id:
                return self._client_auth_answer(packet)
        return self._dispatch(packet)

    def _unreadable(self, reason: str, detail: str, payload: bytes) -> list[SessionEvent]:
        # Flow: "no response to an unexpected packet" (an unreadable one included).
        for answer in self._points.apply(
            "answers-to-unreadable", [], payload=payload, reason=reason
        ):
            self._queue_error(*answer)
        return [UnreadablePacket(reason, detail)]

    def _dispatch(self, packet: Packet) -> list[SessionEvent]:
        if isinstance(packet, (Response, Error)):
            if packet.request_id in self._in_flight:
                self._in_flight.discard(packet.request_id)
                return [ResponseReceived(packet.request_id, packet)]
            for answer in self._points.apply("answers-to-unexpected", [], packet=packet):
                self._queue_error(*answer)
            return [
                UnexpectedPacket(
                    f"{type(packet).__name__} to request {packet.request_id}, which is not in flight",
                    packet,
                )
            ]
        return self._serve_request(packet)

    # --- server side of auth

    def _server_auth(self, packet: Packet) -> list[SessionEvent]:
        if self._points.apply("serve-before-auth", False, packet=packet):
            return self._dispatch(packet)
        problems = self._points.apply("auth-problems", self._auth_problems(packet), packet=packet)
        if problems:
            _rule, code, reason = problems[0]
            if AUTH_REFUSALS_F00 in self._variants:
                # The variant: the text names no code for a refused auth; F00 for every one.
                code = "F00"
            self._queue_error(packet.request_id, code, reason)
            events: list[SessionEvent] = [AuthFailed(reason, code)]
            # "If the server sent an Error, it subsequently closes the connection."
            if self._points.apply("close-after-auth-error", True):
                events.append(self._close(f"auth failed: {reason}"))
            return events
        self._auth_request_id = packet.request_id
        self._state = SessionState.OPEN
        self._queue_response(packet.request_id, rule="auth")
        return [Authenticated(packet.request_id)]

    def _auth_problems(self, packet: Packet) -> list[tuple[str, str, str]]:
        """Why ``packet`` is not an acceptable auth Message: (rule, code,
        reason) for each rule it breaks, in the order they are checked (the
        first is answered); empty when it is acceptable."""
        if not isinstance(packet, Message):
            return [
                (
                    "auth-first",
                    "F00",
                    f"the first packet must be the auth Message, got {type(packet).__name__}",
                )
            ]
        entry = primary(packet)
        if entry is None or entry.name != AUTH:
            name = entry.name if entry is not None else None
            return [
                (
                    "auth-primary",
                    "F00",
                    f"the primary protocol data entry of the first Message must be 'auth', got {name!r}",
                )
            ]
        problems = []
        if entry.content_type != ContentType.APPLICATION_OCTET_STREAM or entry.data:
            problems.append(
                (
                    "auth-entry",
                    "F01",
                    "the auth entry must have content type 0 (application/octet-stream) and empty "
                    f"data, got content type {entry.content_type} and {len(entry.data)} byte(s)",
                )
            )
        dups = duplicate_names(packet)
        if dups:
            problems.append(
                (
                    "duplicate-names",
                    "F01",
                    f"protocol data entries with the same name: {', '.join(dups)}",
                )
            )
        token_entry = next((e for e in packet.protocol_data[1:] if e.name == AUTH_TOKEN), None)
        if token_entry is None:
            problems.append(
                ("auth-token-missing", "F01", "the auth Message has no auth_token entry")
            )
            return problems
        try:
            token_entry.data.decode("utf-8")
        except UnicodeDecodeError:
            problems.append(("auth-token-utf8", "F01", "the auth_token is not UTF-8"))
            return problems
        assert self._check_token is not None
        try:
            accepted = bool(self._check_token(token_entry.data))
        except Exception:  # a broken checker rejects rather than crashes
            accepted = False
        if not accepted:
            problems.append(("auth-token-rejected", "F00", "the auth_token is not accepted"))
        return problems

    # --- client side of auth

    def _client_auth_answer(self, packet: Response | Error) -> list[SessionEvent]:
        self._in_flight.discard(packet.request_id)
        refusal = self._points.apply(
            "auth-refusal",
            None
            if isinstance(packet, Response)
            else f"the server refused the auth Message: {packet.code} {packet.name}",
            answer=packet,
        )
        if refusal is None:
            self._state = SessionState.OPEN
            return [Authenticated(packet.request_id)]
        return [AuthFailed(refusal, getattr(packet, "code", None)), self._close(refusal)]

    # --- serving the peer's requests

    def _serve_request(self, packet: Message | Transfer) -> list[SessionEvent]:
        events: list[SessionEvent] = [RequestReceived(packet)]
        dups = self._points.apply("duplicate-names", duplicate_names(packet), request=packet)
        if dups:
            # RFC 23, Authentication: "any of the other protocol rules are
            # violated (e.g. having two subprotos with the same name)".
            self._queue_error(
                packet.request_id,
                "F01",
                f"protocol data entries with the same name: {', '.join(dups)}",
            )
            if isinstance(packet, Transfer):
                events.extend(self._book(self._transfer_credit(packet, refused_with="F01")))
            return events
        if isinstance(packet, Transfer):
            events.extend(self._settle_transfer(packet))
            return events
        entry = primary(packet)
        name = entry.name if entry is not None else None
        if name == AUTH and self._state is SessionState.OPEN:
            self._queue_error(packet.request_id, "F00", "already authenticated")
        elif not self._auto_respond:
            self._unanswered.add(packet.request_id)
        elif name == BALANCE:
            self._queue_response(
                packet.request_id, (balance_response_entry(self._ledger.balance),), rule="balance"
            )
        elif name == ECHO:
            assert entry is not None
            self._queue_response(packet.request_id, (entry,), rule="echo")
        elif REFUSE_UNKNOWN_SUBPROTOCOLS in self._variants:
            # The variant: "Error is returned if the peer is not able to process the Message".
            self._queue_error(
                packet.request_id, "F00", f"sub-protocol {name!r} is not processed by this node"
            )
        else:
            self._queue_response(packet.request_id, rule="acknowledge")
        return events

    def _settle_transfer(self, packet: Transfer) -> list[SessionEvent]:
        """Accept or refuse a Transfer; the balance changes if and only if the
        Response is what goes out.

        Both outcomes are decided and encoded first; then, with nothing left
        that can fail, the balance is assigned and the payload queued in two
        adjacent statements (no await, no callback in between), so no one
        can ever see a Response without the new balance or the new balance
        without the Response.
        """
        ledger = self._ledger
        if ledger.fits(packet.amount):
            payloads = self._responses(packet.request_id, rule="transfer")
            credit = self._transfer_credit(packet, refused_with=None)
            self._outbox.extend(payloads)
            return self._book(credit)
        payload = self._encode_error(
            self._error_packet(
                packet.request_id,
                "F08",
                f"the transfer of {packet.amount} would take the balance over its maximum of {ledger.max_balance}",
            )
        )
        credit = self._transfer_credit(packet, refused_with="F08")
        self._outbox.append(payload)
        return self._book(credit)

    def _transfer_credit(self, packet: Transfer, *, refused_with: str | None) -> int | None:
        """What ``packet`` credits to the ledger: its amount when it is answered
        with a Response (``refused_with`` None), nothing (None) when it is
        refused with Error ``refused_with``."""
        return self._points.apply(
            "transfer-credit",
            packet.amount if refused_with is None else None,
            transfer=packet,
            balance=self._ledger.balance,
            refused_with=refused_with,
        )

    def _book(self, credit: int | None) -> list[SessionEvent]:
        """Add ``credit`` (None: nothing) to the balance."""
        if credit is None:
            return []
        self._ledger.balance += credit
        return [BalanceChanged(self._ledger.balance, credit)]

"""SSB RPC (muxrpc over packet-stream), sans-I/O.

Implements "RPC protocol" of scuttlebutt-protocol-guide.txt: the 9-byte
header (flags, u32 BE body length, i32 BE request number; img/rpc_header.png),
the goodbye, and the request/response rules of async, source and duplex
procedures, including who closes a stream and when.

Nothing here reads or writes sockets: :class:`RpcDecoder` and
:class:`RpcEndpoint` take received bytes and return messages or events, and
every method that sends returns the bytes to write.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Union

from ..faults import FaultPoints
from .faults import SPECS as FAULT_SPECS
from .faults import Fault
from .message import json_stringify, parse_json

FLAG_STREAM = 0x08
FLAG_END = 0x04
BODY_TYPE_MASK = 0x03
UNUSED_FLAG_BITS = 0xF0
HEADER_SIZE = 9
GOODBYE = b"\0" * HEADER_SIZE
DEFAULT_MAX_BODY = 1 << 20
"""Largest body the decoder buffers. The header allows 4 GiB; without a bound
a hostile length prefix would make us wait for, and buffer, all of it."""

MAX_REQUEST_NUMBER = 2**31 - 1
MIN_REQUEST_NUMBER = -(2**31)
MAX_BODY_LENGTH = 2**32 - 1

_HEADER = struct.Struct(">BIi")


class BodyType(IntEnum):
    BINARY = 0
    STRING = 1
    JSON = 2


class RpcError(Exception):
    """The byte stream cannot be decoded any further, a body is unreadable, or
    a call broke the protocol. ``reason`` is a fixed phrase tests can match;
    ``detail`` says more."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def encode_header(flags: int, length: int, req: int) -> bytes:
    """The 9 header bytes. Any flags byte is allowed so that tests can forge headers."""
    if not 0 <= flags <= 0xFF:
        raise ValueError(f"flags must fit one byte, got {flags}")
    if not 0 <= length <= MAX_BODY_LENGTH:
        raise ValueError(f"body length must fit a u32, got {length}")
    if not MIN_REQUEST_NUMBER <= req <= MAX_REQUEST_NUMBER:
        raise ValueError(f"request number must fit an i32, got {req}")
    return _HEADER.pack(flags, length, req)


def decode_header(header: bytes) -> tuple[int, int, int]:
    """``(flags, length, req)`` of 9 header bytes, without judging them."""
    if len(header) != HEADER_SIZE:
        raise ValueError(f"a header is {HEADER_SIZE} bytes, got {len(header)}")
    return _HEADER.unpack(header)


@dataclass(frozen=True)
class RpcMessage:
    """One packet: header fields and body. ``req`` is signed, as on the wire."""

    req: int
    stream: bool
    end: bool
    body_type: BodyType
    body: bytes

    def __post_init__(self) -> None:
        object.__setattr__(self, "body_type", BodyType(self.body_type))
        object.__setattr__(self, "body", bytes(self.body))
        if not MIN_REQUEST_NUMBER <= self.req <= MAX_REQUEST_NUMBER:
            raise ValueError(f"request number must fit an i32, got {self.req}")

    @property
    def flags(self) -> int:
        return (FLAG_STREAM if self.stream else 0) | (FLAG_END if self.end else 0) | self.body_type

    def encode(self) -> bytes:
        return encode_header(self.flags, len(self.body), self.req) + self.body

    def json(self) -> Any:
        """The body parsed as JSON (key order kept). RpcError unless it is a JSON body."""
        if self.body_type is not BodyType.JSON:
            raise RpcError("not a JSON body", f"body type is {self.body_type.name}")
        try:
            return parse_json(self.body.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are
            # ValueErrors; RecursionError is nesting deeper than the parser goes.
            raise RpcError("invalid JSON body", str(exc)) from None

    def text(self) -> str:
        """The body of a STRING packet. RpcError unless it is valid UTF-8 text."""
        if self.body_type is not BodyType.STRING:
            raise RpcError("not a STRING body", f"body type is {self.body_type.name}")
        try:
            return self.body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RpcError("invalid UTF-8 body", str(exc)) from None

    def value(self) -> Any:
        """The body as packet-stream-codec hands it to JS: bytes, str or a JSON value."""
        if self.body_type is BodyType.BINARY:
            return self.body
        if self.body_type is BodyType.STRING:
            return self.text()
        return self.json()

    @classmethod
    def from_json(
        cls, req: int, value: Any, *, stream: bool = False, end: bool = False
    ) -> RpcMessage:
        """A JSON packet; the body is compact, as JS's JSON.stringify(value) prints it."""
        return cls(req, stream, end, BodyType.JSON, json_stringify(value).encode("utf-8"))

    @classmethod
    def from_text(
        cls, req: int, text: str, *, stream: bool = False, end: bool = False
    ) -> RpcMessage:
        return cls(req, stream, end, BodyType.STRING, text.encode("utf-8"))

    @classmethod
    def from_bytes(
        cls, req: int, data: bytes, *, stream: bool = False, end: bool = False
    ) -> RpcMessage:
        return cls(req, stream, end, BodyType.BINARY, data)

    @classmethod
    def from_value(
        cls, req: int, value: Any, *, stream: bool = False, end: bool = False
    ) -> RpcMessage:
        """Body type chosen the way packet-stream-codec does: bytes are binary,
        str is a STRING body, anything else is JSON."""
        if isinstance(value, (bytes, bytearray, memoryview)):
            return cls.from_bytes(req, bytes(value), stream=stream, end=end)
        if isinstance(value, str):
            return cls.from_text(req, value, stream=stream, end=end)
        return cls.from_json(req, value, stream=stream, end=end)


class RpcDecoder:
    """Splits received bytes into packets, however the bytes were chunked.

    Errors are fatal: once framing is lost nothing after it can be trusted,
    so every later call raises the same RpcError. Reasons: "unknown body
    type" (type 3), "unknown flag bits" (the four bits the header figure
    marks unused), "body length exceeds limit", "data after goodbye", and
    "truncated packet" from :meth:`end_of_data`.

    Only the all-zero header is the goodbye, as the guide defines it; any
    other header with body length 0 is a packet with an empty body. (JS
    packet-stream-codec ends the session on every header with length 0, so
    a JS peer can neither send nor receive an empty body.)
    """

    def __init__(
        self, max_body: int = DEFAULT_MAX_BODY, *, faults: Iterable[Fault | str] = ()
    ) -> None:
        self.max_body = max_body
        # Rules broken on purpose (faults.py), applied at the fault points;
        # one call to receive_data is one box body.
        self._points = FaultPoints(FAULT_SPECS, frozenset(faults))
        self.ended = False
        self._buffer = bytearray()
        self._error: RpcError | None = None

    def receive_data(self, data: bytes) -> list[RpcMessage]:
        if self._error is not None:
            raise self._error
        if self.ended and data:
            self._fail("data after goodbye")
        self._buffer += data
        messages = []
        while len(self._buffer) >= HEADER_SIZE:
            header = bytes(self._buffer[:HEADER_SIZE])
            if header == GOODBYE:
                self.ended = True
                del self._buffer[:HEADER_SIZE]
                if self._buffer:
                    self._fail("data after goodbye")
                break
            flags, length, req = decode_header(header)
            # Checked on the header alone, before waiting for a body that
            # may never come or that we must not buffer.
            if flags & BODY_TYPE_MASK == 3:
                self._fail("unknown body type", f"flags 0x{flags:02x}")
            if flags & UNUSED_FLAG_BITS:
                self._fail("unknown flag bits", f"flags 0x{flags:02x}")
            if length > self.max_body:
                self._fail("body length exceeds limit", f"{length} > {self.max_body}")
            if len(self._buffer) < HEADER_SIZE + length:
                break
            body = bytes(self._buffer[HEADER_SIZE : HEADER_SIZE + length])
            del self._buffer[: HEADER_SIZE + length]
            messages.append(
                RpcMessage(
                    req=req,
                    stream=bool(flags & FLAG_STREAM),
                    end=bool(flags & FLAG_END),
                    body_type=BodyType(flags & BODY_TYPE_MASK),
                    body=body,
                )
            )
            self._buffer = self._points.apply("rpc-bytes-after-message", self._buffer)
        # RPC messages need not align with boxes: an unfinished one waits for the next box.
        self._buffer = self._points.apply("rpc-bytes-at-box-end", self._buffer)
        return messages

    def end_of_data(self) -> None:
        """The peer closed the connection: RpcError if it stopped mid-packet.

        Closing without a goodbye is not an error here; ``ended`` tells.
        """
        if self._error is not None:
            raise self._error
        if self._buffer:
            self._fail("truncated packet", f"{len(self._buffer)} byte(s) of an unfinished packet")

    def _fail(self, reason: str, detail: str = "") -> None:
        self._error = RpcError(reason, detail)
        raise self._error


# --- Endpoint events ------------------------------------------------------------
#
# ``req`` in an event is the request number as it appeared on the wire:
# positive for the peer's own requests (and what it sends on them), negative
# for replies to our requests. So StreamData(-1) is data answering our
# request 1 and StreamData(1) is duplex data on the peer's request 1.


@dataclass(frozen=True)
class Request:
    """The peer calls a procedure; ``type`` is async, source, sink or duplex."""

    req: int
    name: list[str]
    type: str
    args: list


@dataclass(frozen=True)
class Response:
    """The single successful reply to our async request ``-req``."""

    req: int
    body: RpcMessage


@dataclass(frozen=True)
class AsyncError:
    """Our async request ``-req`` failed; ``error`` is the body's value (usually
    {"name", "message", "stack"})."""

    req: int
    error: Any


@dataclass(frozen=True)
class StreamData:
    req: int
    msg: RpcMessage


@dataclass(frozen=True)
class StreamEnd:
    """The peer ended its side of stream ``req``; ``error`` is None for a normal
    end (body ``true``), else the error body's value."""

    req: int
    error: Any


@dataclass(frozen=True)
class Goodbye:
    pass


@dataclass(frozen=True)
class ProtocolViolation:
    """The peer sent ``msg`` against the rules; the packet is dropped and the
    connection can go on."""

    reason: str
    msg: RpcMessage


Event = Union[Request, Response, AsyncError, StreamData, StreamEnd, Goodbye, ProtocolViolation]

ASYNC_TYPES = frozenset({"async", "sync"})
STREAM_TYPES = frozenset({"source", "sink", "duplex"})
REQUEST_TYPES = ASYNC_TYPES | STREAM_TYPES

# Which side may send data on a stream, by the procedure's type.
_REQUESTER_SENDS = frozenset({"sink", "duplex"})
_RESPONDER_SENDS = frozenset({"source", "duplex"})


@dataclass
class _Call:
    """One request in progress. ``we_ended``/``peer_ended``: who has sent the
    end packet of a stream; a stream is closed when both have."""

    type: str
    we_ended: bool = False
    peer_ended: bool = False

    @property
    def is_stream(self) -> bool:
        return self.type in STREAM_TYPES


def _error_body(name: str, message: str) -> dict:
    return {"name": name, "message": message, "stack": ""}


class RpcEndpoint:
    """Both directions of muxrpc on one connection.

    As requester it numbers its requests 1, 2, 3, ...; as responder it keeps
    the peer's requests until answered or closed. Violations by the peer
    that leave framing intact become :class:`ProtocolViolation` events;
    decoding errors (RpcError from the decoder) end the connection and are
    raised. Misuse of the methods (answering twice, sending after our end)
    raises RpcError: to send forbidden packets on purpose, build them with
    :class:`RpcMessage` directly.

    Replies the protocol makes automatic (our end of a stream the peer has
    ended) are queued during :meth:`receive_data`; send them with
    :meth:`data_to_send`.
    """

    def __init__(
        self, max_body: int = DEFAULT_MAX_BODY, *, faults: Iterable[Fault | str] = ()
    ) -> None:
        faults = frozenset(faults)
        self._decoder = RpcDecoder(max_body, faults=faults)
        # Rules broken on purpose (faults.py), applied at the fault points.
        self._points = FaultPoints(FAULT_SPECS, faults)
        self._next_req = self._points.apply("first-request-number", 1)
        self._outgoing: dict[int, _Call] = {}  # our requests, by our number
        self._incoming: dict[int, _Call] = {}  # the peer's, by its number
        self._highest_incoming = 0
        self._pending = bytearray()
        self.goodbye_sent = False
        self.goodbye_received = False

    # --- introspection

    @property
    def open_outgoing(self) -> frozenset[int]:
        """Our requests still in progress (positive numbers)."""
        return frozenset(self._outgoing)

    @property
    def open_incoming(self) -> frozenset[int]:
        """The peer's requests still in progress (positive numbers)."""
        return frozenset(self._incoming)

    def data_to_send(self) -> bytes:
        """Automatic replies queued by :meth:`receive_data`; clears the queue."""
        data = bytes(self._pending)
        self._pending.clear()
        return data

    # --- requester side

    def request(self, name: list[str], args: list, type: str = "async") -> tuple[int, bytes]:
        """Call procedure ``name``; returns our request number and the bytes to send."""
        if type not in REQUEST_TYPES:
            raise ValueError(f"unknown procedure type {type!r}")
        if not name or not all(isinstance(part, str) for part in name):
            raise ValueError("name must be a non-empty list of strings")
        if not isinstance(args, (list, tuple)):
            raise ValueError("args must be a list")
        if self._next_req > MAX_REQUEST_NUMBER:
            raise RpcError("request numbers exhausted")
        req = self._next_req
        call = _Call(type)
        body = {"name": list(name), "type": type, "args": list(args)}
        message = RpcMessage.from_json(req, body, stream=call.is_stream)
        data = self._send(self._points.apply("request-message", message, body=body))
        self._next_req += 1
        self._outgoing[req] = call
        return req, data

    def duplex_send(self, req: int, value: Any) -> bytes:
        """Data from us, the requester, on our sink or duplex request ``req``."""
        call = self._open_stream(self._outgoing, req, "our request")
        if call.type not in _REQUESTER_SENDS:
            raise RpcError(f"the requester sends no data on a {call.type} stream")
        return self._send(RpcMessage.from_value(req, value, stream=True))

    def stream_close(self, req: int) -> bytes:
        """End our side of our stream request ``req`` (abort it, or answer the
        peer's end if done by hand)."""
        call = self._open_stream(self._outgoing, req, "our request")
        return self._end(self._outgoing, req, call, req, True)

    # --- responder side

    def respond(self, req: int, value: Any) -> bytes:
        """The one reply to the peer's async request ``req``."""
        call = self._incoming.get(req)
        if call is None or call.is_stream:
            raise RpcError(f"no async request {req} from the peer is waiting for a reply")
        del self._incoming[req]
        return self._send(RpcMessage.from_value(-req, value))

    def respond_error(self, req: int, name: str, message: str) -> bytes:
        """Fail the peer's request ``req`` (async, or a stream we have not ended)
        with body {"name": name, "message": message, "stack": ""}."""
        call = self._incoming.get(req)
        if call is None:
            raise RpcError(f"no request {req} from the peer is open")
        body = self._points.apply("error-body", _error_body(name, message))
        if call.is_stream:
            return self.stream_end(req, body)
        del self._incoming[req]
        return self._send(RpcMessage.from_json(-req, body, end=True))

    def stream_send(self, req: int, value: Any) -> bytes:
        """Data from us, the responder, on the peer's source or duplex request ``req``."""
        call = self._open_stream(self._incoming, req, "the peer's request")
        if call.type not in _RESPONDER_SENDS:
            raise RpcError(f"the responder sends no data on a {call.type} stream")
        message = RpcMessage.from_value(-req, value, stream=True)
        return self._send(
            self._points.apply(
                "stream-data-message", message, value=value, latest_request=self._highest_incoming
            )
        )

    def stream_end(self, req: int, error: Any = None) -> bytes:
        """End our side of the peer's stream request ``req``: body ``true``, or
        ``error`` (e.g. {"name","message","stack"}) to end it with an error."""
        call = self._open_stream(self._incoming, req, "the peer's request")
        if error is None:
            error = self._points.apply("stream-end-body", True)
        return self._end(self._incoming, req, call, -req, error)

    def goodbye(self) -> bytes:
        """The 9 zero bytes that end the RPC session; nothing may follow."""
        data = self._send_raw(GOODBYE)
        self.goodbye_sent = True
        return data

    # --- receiving

    def receive_data(self, data: bytes) -> list[Event]:
        events: list[Event] = []
        for msg in self._decoder.receive_data(data):
            self._dispatch(msg, events)
        if self._decoder.ended and not self.goodbye_received:
            self.goodbye_received = True
            events.append(Goodbye())
        return events

    def end_of_data(self) -> None:
        """The connection closed; RpcError if it was cut mid-packet."""
        self._decoder.end_of_data()

    def _dispatch(self, msg: RpcMessage, events: list[Event]) -> None:
        if msg.req > 0:
            self._from_requester(msg, events)
        elif msg.req < 0:
            self._from_responder(msg, events)
        else:
            # packet-stream's one-way "message" (req 0); muxrpc peers over
            # SSB never send it, and the guide has no place for it.
            events.append(ProtocolViolation("request number 0 outside the goodbye", msg))

    def _from_requester(self, msg: RpcMessage, events: list[Event]) -> None:
        """A packet on the peer's request ``msg.req``: a new request, or more
        of one of its streams."""
        req = msg.req
        call = self._incoming.get(req)
        if call is None:
            if req <= self._highest_incoming:
                events.append(
                    ProtocolViolation(f"packet on the peer's request {req}, which is closed", msg)
                )
            elif msg.end:
                events.append(
                    ProtocolViolation(
                        f"end on the peer's request {req}, which was never opened", msg
                    )
                )
            else:
                self._new_request(msg, events)
            return
        if not call.is_stream:
            events.append(
                ProtocolViolation(f"second packet on the peer's async request {req}", msg)
            )
            return
        if not msg.stream:
            events.append(
                ProtocolViolation(
                    f"packet without stream flag on the peer's {call.type} request {req}", msg
                )
            )
            return
        if msg.end:
            self._peer_ended(self._incoming, req, call, -req, msg, events)
        elif call.type not in _REQUESTER_SENDS:
            events.append(
                ProtocolViolation(f"data from the requester on its {call.type} request {req}", msg)
            )
        else:
            events.append(StreamData(req, msg))

    def _new_request(self, msg: RpcMessage, events: list[Event]) -> None:
        self._highest_incoming = msg.req
        try:
            body = msg.json()
        except RpcError as exc:
            events.append(ProtocolViolation(f"request {msg.req}: {exc}", msg))
            return
        problem = _request_body_problem(body, msg.stream)
        if problem:
            events.append(ProtocolViolation(f"request {msg.req}: {problem}", msg))
            return
        # JS muxrpc omits "type" from async requests (see _request_body_problem).
        type_ = body.get("type", "async")
        self._incoming[msg.req] = _Call(type_)
        events.append(Request(msg.req, body["name"], type_, body["args"]))

    def _from_responder(self, msg: RpcMessage, events: list[Event]) -> None:
        """A packet answering our request ``-msg.req``."""
        req = -msg.req
        call = self._outgoing.get(req)
        if call is None:
            state = "which is closed" if req < self._next_req else "which we never made"
            events.append(ProtocolViolation(f"reply to our request {req}, {state}", msg))
            return
        if not call.is_stream:
            if msg.stream:
                events.append(
                    ProtocolViolation(f"stream flag on the reply to our async request {req}", msg)
                )
                return
            del self._outgoing[req]
            if msg.end:
                events.append(AsyncError(msg.req, self._value_or_violation(msg, events)))
            else:
                events.append(Response(msg.req, msg))
            return
        if not msg.stream:
            events.append(
                ProtocolViolation(
                    f"reply without stream flag on our {call.type} request {req}", msg
                )
            )
        elif msg.end:
            self._peer_ended(self._outgoing, req, call, req, msg, events)
        elif call.type not in _RESPONDER_SENDS:
            events.append(
                ProtocolViolation(f"data from the responder on our {call.type} request {req}", msg)
            )
        else:
            # Also after our own end: the peer may have sent it before
            # seeing our end, and the guide has it close its side then.
            events.append(StreamData(msg.req, msg))

    def _peer_ended(
        self,
        table: dict[int, _Call],
        req: int,
        call: _Call,
        our_wire_req: int,
        msg: RpcMessage,
        events: list[Event],
    ) -> None:
        body = self._value_or_violation(msg, events)
        call.peer_ended = True
        events.append(StreamEnd(msg.req, None if body is True else body))
        if call.we_ended or self.goodbye_sent:
            # Closed now; after our goodbye nothing more may be sent anyway.
            del table[req]
        elif self._points.apply(
            "end-stream-the-peer-ended", True, our_request=table is self._outgoing
        ):
            # "source type requests must always be closed by both ends": the
            # peer ended, so we end our side too.
            self._pending += self._end(table, req, call, our_wire_req, True)

    def _value_or_violation(self, msg: RpcMessage, events: list[Event]) -> Any:
        """The body's value; an unreadable one is reported and read as None."""
        try:
            return msg.value()
        except RpcError as exc:
            events.append(ProtocolViolation(str(exc), msg))
            return None

    # --- sending helpers

    def _open_stream(self, table: dict[int, _Call], req: int, whose: str) -> _Call:
        call = table.get(req)
        if call is None or not call.is_stream:
            raise RpcError(f"{whose} {req} is not an open stream")
        if call.we_ended:
            raise RpcError(f"we already ended our side of {whose} {req}")
        return call

    def _end(
        self, table: dict[int, _Call], req: int, call: _Call, wire_req: int, body: Any
    ) -> bytes:
        data = self._send(RpcMessage.from_json(wire_req, body, stream=True, end=True))
        call.we_ended = True
        if call.peer_ended:
            del table[req]
        return data

    def _send(self, msg: RpcMessage) -> bytes:
        return self._send_raw(msg.encode())

    def _send_raw(self, data: bytes) -> bytes:
        if self.goodbye_sent:
            raise RpcError("nothing may be sent after the goodbye")
        return data


def _request_body_problem(body: Any, stream: bool) -> str | None:
    """Why ``body`` is not a valid request with this stream flag, or None.

    The guide's requests carry name, type and args; JS muxrpc sends async
    requests as {"name", "args"} only, so a missing type means async.
    """
    if not isinstance(body, dict):
        return "body is not a JSON object"
    name = body.get("name")
    if not isinstance(name, list) or not name or not all(isinstance(part, str) for part in name):
        return "name must be a non-empty list of strings"
    if not isinstance(body.get("args"), list):
        return "args must be a list"
    type_ = body.get("type", "async")
    if not isinstance(type_, str) or type_ not in REQUEST_TYPES:
        return f"unknown procedure type {type_!r}"
    if stream != (type_ in STREAM_TYPES):
        return (
            f"a {type_} request must {'' if type_ in STREAM_TYPES else 'not '}have the stream flag"
        )
    return None

"""BTP 2.0 packets: the codec, pure and sans-I/O.

Implements ``BilateralTransferProtocol.asn`` (the packet format of
``btp-2.0-rfc0023.md``) in CANONICAL-OER as ``oer-notes-rfc0030.md``
describes it::

    type        UInt8     1 Response, 2 Error, 6 Message, 7 Transfer
                          (3 Prepare, 4 Fulfill, 5 Reject: BTP 1, decoded for tests)
    requestId   UInt32    big-endian
    data        length determinant, then the type's SEQUENCE ("the envelope")

and inside the envelope the type's fields, ending with ``protocolData``: a
variable-length unsigned integer count, then per entry an IA5String name, a
UInt8 content type and an OCTET STRING.

Decisions where the texts leave room (the vectors in ``vectors/btp`` pin
each one down, with the reason):

Extra bytes.  RFC 30: "implementations MUST ignore extra bytes at the end of
the message ... [so] additional fields [can] be added in the future".  In BTP
the place a future field can go is the end of a type's SEQUENCE, i.e. inside
the length-prefixed envelope, after ``protocolData``; the envelope's length
prefix ("the combined length of the packet-specific data and protocol data
sections", RFC 23 Overview, item 3) is exactly what lets an old decoder skip
such fields.  So bytes left in the envelope after ``protocolData`` are
ignored, and decoding such a packet and encoding it again drops them.  Bytes
*after* the envelope are ignored too (erratum BTP-E3, docs/errata/btp.md):
the text's plain words ask to ignore "extra bytes at the end of the
message", and btp-packet (npm, the codec ilp-plugin-btp and
ilp-plugin-mini-accounts run on) reads the envelope and never looks at what
follows it, so a peer that rejected them would fall silent where the
deployed implementation answers.  The packet is what the envelope holds;
encoding it again drops the bytes after it.  :func:`envelope_end` says where
the envelope ends (the reference node's faults use it).

Content types.  ``ContentType ::= INTEGER {...} (0..255)``: any byte is a
valid content type -- the ASN.1 comment says it exists so "debug tools [can]
display the contents of the protocolData without understanding it" -- so
3..255 decode (``content_type`` stays a plain int) and encode.  What is
rejected as ``"bad content type"`` is an entry that declares text the
decoder cannot read as text: content type 1 (``text/plain; charset=utf-8``)
or 2 (``application/json``, which RFC 8259 section 8.1 requires to be UTF-8)
whose data is not well-formed UTF-8.  That is "contains illegal characters",
one of RFC 23's two examples of an unreadable packet.  JSON syntax is not
checked: that belongs to the sub-protocol.

Also: the protocol data count must be canonical (``01 00`` for zero, no
leading zero bytes) like every length; duplicate protocol names decode (the
session layer rejects them); the Error code is a fixed three-byte IA5String
with no length prefix; ``triggeredAt``/``expiresAt`` follow
:func:`reference_impl.btp.oer.check_generalized_time` (the RFC 30 canonical
forms and the fixed three-digit ``.mmmZ`` form are both accepted).

:func:`decode_packet` validates everything before it returns, so a caller
never sees a half-decoded packet, and raises only :class:`BtpDecodeError`.
It special-cases the short forms that typical packets use; the general
forms go through :mod:`reference_impl.btp.oer`.  When the C accelerator
(``_fastcodec.c``) is built, ``decode_packet`` and ``encode_packet`` are its
functions: they handle the typical packets and call
:func:`decode_packet_python` / :func:`encode_packet_python` for the rest.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Union

from .oer import (
    DECODE_REASONS,
    BtpDecodeError,
    check_generalized_time,
    check_ia5,
    decode_var_uint,
    encode_length,
    encode_var_uint,
    generalized_time,
    ia5_text,
    is_generalized_time,
    parse_generalized_time,
    read_long_length,
)

__all__ = [
    "ContentType",
    "PacketType",
    "ProtocolDataEntry",
    "ProtocolData",
    "Response",
    "Error",
    "Message",
    "Transfer",
    "Prepare",
    "Fulfill",
    "Reject",
    "Packet",
    "LEGACY_TYPES",
    "REQUEST_TYPES",
    "RESPONSE_TYPES",
    "ERROR_CODES",
    "MAX_ERROR_DATA",
    "MAX_REQUEST_ID",
    "MAX_AMOUNT",
    "BtpDecodeError",
    "DECODE_REASONS",
    "decode_packet",
    "envelope_end",
    "encode_packet",
    "decode_packet_python",
    "encode_packet_python",
    "CODEC",
    "packet_type",
    "primary",
    "find_entry",
    "is_request",
    "is_response",
    "generalized_time",
    "parse_generalized_time",
    "is_generalized_time",
    "packet_to_json",
    "packet_from_json",
]


class ContentType(IntEnum):
    APPLICATION_OCTET_STREAM = 0
    TEXT_PLAIN_UTF8 = 1
    APPLICATION_JSON = 2


class PacketType(IntEnum):
    RESPONSE = 1
    ERROR = 2
    PREPARE = 3
    FULFILL = 4
    REJECT = 5
    MESSAGE = 6
    TRANSFER = 7


LEGACY_TYPES = frozenset({3, 4, 5})
REQUEST_TYPES = frozenset({3, 4, 5, 6, 7})
"""The ASN.1: "Prepare, Fulfill, Reject, and Message are the request types";
RFC 23 Flow: "The request types are Message and Transfer"."""
RESPONSE_TYPES = frozenset({1, 2})

MAX_REQUEST_ID = 2**32 - 1
MAX_AMOUNT = 2**64 - 1
MAX_ERROR_DATA = 8192
"""``data OCTET STRING (SIZE (0..8192))`` of Error."""

ERROR_CODES: dict[str, str] = {
    "T00": "UnreachableError",
    "F00": "NotAcceptedError",
    "F01": "InvalidFieldsError",
    "F03": "TransferNotFoundError",
    "F04": "InvalidFulfillmentError",
    "F05": "DuplicateIdError",
    "F06": "AlreadyRolledBackError",
    "F07": "AlreadyFulfilledError",
    "F08": "InsufficientBalanceError",
}
"""RFC 23, Error Codes: code -> name. ``T`` codes are temporary, ``F`` final."""


@dataclass(frozen=True, slots=True)
class ProtocolDataEntry:
    """One ``protocolData`` entry. ``content_type`` is 0..255 on the wire;
    :class:`ContentType` names 0, 1 and 2."""

    name: str
    content_type: int
    data: bytes


ProtocolData = tuple[ProtocolDataEntry, ...]


@dataclass(frozen=True, slots=True)
class Response:
    request_id: int
    protocol_data: ProtocolData = ()


@dataclass(frozen=True, slots=True)
class Error:
    request_id: int
    code: str
    name: str
    triggered_at: str
    data: bytes = b""
    protocol_data: ProtocolData = ()


@dataclass(frozen=True, slots=True)
class Message:
    request_id: int
    protocol_data: ProtocolData = ()


@dataclass(frozen=True, slots=True)
class Transfer:
    request_id: int
    amount: int
    protocol_data: ProtocolData = ()


@dataclass(frozen=True, slots=True)
class Prepare:
    """BTP 1 (type 3), legacy: decoded so tests can see it, encoded so they can forge it."""

    request_id: int
    transfer_id: bytes
    amount: int
    execution_condition: bytes
    expires_at: str
    protocol_data: ProtocolData = ()


@dataclass(frozen=True, slots=True)
class Fulfill:
    """BTP 1 (type 4), legacy."""

    request_id: int
    transfer_id: bytes
    fulfillment: bytes
    protocol_data: ProtocolData = ()


@dataclass(frozen=True, slots=True)
class Reject:
    """BTP 1 (type 5), legacy."""

    request_id: int
    transfer_id: bytes
    protocol_data: ProtocolData = ()


Packet = Union[Response, Error, Message, Transfer, Prepare, Fulfill, Reject]

_TYPE_OF: dict[type, PacketType] = {
    Response: PacketType.RESPONSE,
    Error: PacketType.ERROR,
    Prepare: PacketType.PREPARE,
    Fulfill: PacketType.FULFILL,
    Reject: PacketType.REJECT,
    Message: PacketType.MESSAGE,
    Transfer: PacketType.TRANSFER,
}
_CLASS_OF: dict[int, type] = {int(value): cls for cls, value in _TYPE_OF.items()}


def packet_type(packet: Packet) -> PacketType:
    """The type byte of ``packet``."""
    try:
        return _TYPE_OF[type(packet)]
    except KeyError:
        raise TypeError(f"not a BTP packet: {packet!r}") from None


def is_request(packet: Packet) -> bool:
    return _TYPE_OF.get(type(packet)) in REQUEST_TYPES


def is_response(packet: Packet) -> bool:
    return _TYPE_OF.get(type(packet)) in RESPONSE_TYPES


def primary(packet: Packet) -> ProtocolDataEntry | None:
    """The first ("primary") protocol data entry, if any."""
    return packet.protocol_data[0] if packet.protocol_data else None


def find_entry(packet: Packet, name: str) -> ProtocolDataEntry | None:
    """The first entry called ``name``, if any."""
    for entry in packet.protocol_data:
        if entry.name == name:
            return entry
    return None


# =========================================================================== decoding

_HEADER = struct.Struct(">BIB")  # type, requestId, first byte of the envelope's length
_U64 = struct.Struct(">Q")
_new = object.__new__
_set_entry_name = ProtocolDataEntry.name.__set__  # type: ignore[attr-defined]
_set_entry_type = ProtocolDataEntry.content_type.__set__  # type: ignore[attr-defined]
_set_entry_data = ProtocolDataEntry.data.__set__  # type: ignore[attr-defined]
_set_message_id = Message.request_id.__set__  # type: ignore[attr-defined]
_set_message_pd = Message.protocol_data.__set__  # type: ignore[attr-defined]
_set_response_id = Response.request_id.__set__  # type: ignore[attr-defined]
_set_response_pd = Response.protocol_data.__set__  # type: ignore[attr-defined]
_set_transfer_id = Transfer.request_id.__set__  # type: ignore[attr-defined]
_set_transfer_amount = Transfer.amount.__set__  # type: ignore[attr-defined]
_set_transfer_pd = Transfer.protocol_data.__set__  # type: ignore[attr-defined]

# Sub-protocol names are a small vocabulary ("auth", "auth_token", "ilp",
# ...); caching their decoded text saves the IA5 check and the decode.  Only
# names that passed the check are cached, and the cache is bounded.
_NAME_CACHE: dict[bytes, str] = {}
_NAME_CACHE_LIMIT = 512
_NAME_CACHE_MAX_LENGTH = 64

_TYPE_NAMES = {
    1: "Response",
    2: "Error",
    3: "Prepare",
    4: "Fulfill",
    5: "Reject",
    6: "Message",
    7: "Transfer",
}


def _bad_text(data: bytes, start: int, content_type: int, name: str) -> BtpDecodeError:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        label = "text/plain;charset=utf-8" if content_type == 1 else "application/json"
        return BtpDecodeError(
            "bad content type",
            f"entry {name!r} is {label} (content type {content_type}) but its "
            f"data is not UTF-8: {exc.reason} at data byte {exc.start}",
            start + exc.start,
        )
    raise AssertionError("unreachable")  # pragma: no cover


def _read_protocol_data(data: bytes, pos: int, end: int) -> tuple[ProtocolData, int]:
    """``protocolData`` at ``pos`` of the envelope ending at ``end``."""
    if pos + 1 < end and data[pos] == 1:  # the canonical count of 0..255 entries: 01 nn
        count = data[pos + 1]
        pos += 2
    else:
        if pos >= end:
            raise BtpDecodeError("truncated", "protocol data count missing", pos)
        count, pos = decode_var_uint(data, pos, end)
    entries = []
    append = entries.append
    cache = _NAME_CACHE
    for _ in range(count):
        # protocolName IA5String
        if pos >= end:
            raise BtpDecodeError(
                "truncated", f"protocol data entry {len(entries)} of {count} missing", pos
            )
        length = data[pos]
        start = pos + 1
        if length >= 128:
            length, start = read_long_length(data, pos, end)
        stop = start + length
        if stop > end:
            raise BtpDecodeError(
                "length prefix beyond end",
                f"protocol name of {length} bytes, {end - start} left in the envelope",
                pos,
            )
        raw = data[start:stop]
        name = cache.get(raw)
        if name is None:
            name = ia5_text(raw, start, "protocol name")
            if len(cache) < _NAME_CACHE_LIMIT and length <= _NAME_CACHE_MAX_LENGTH:
                cache[raw] = name
        # contentType UInt8
        if stop >= end:
            raise BtpDecodeError("truncated", f"content type of entry {name!r} missing", stop)
        content_type = data[stop]
        # data OCTET STRING
        pos = stop + 1
        if pos >= end:
            raise BtpDecodeError("truncated", f"data length of entry {name!r} missing", pos)
        length = data[pos]
        start = pos + 1
        if length >= 128:
            length, start = read_long_length(data, pos, end)
        stop = start + length
        if stop > end:
            raise BtpDecodeError(
                "length prefix beyond end",
                f"data of entry {name!r}: {length} bytes, {end - start} left in the envelope",
                pos,
            )
        value = data[start:stop]
        if 0 < content_type < 3 and not value.isascii():
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                raise _bad_text(value, start, content_type, name) from None
        pos = stop
        entry = _new(ProtocolDataEntry)
        _set_entry_name(entry, name)
        _set_entry_type(entry, content_type)
        _set_entry_data(entry, value)
        append(entry)
    return tuple(entries), pos


def _read_var_ia5(data: bytes, pos: int, end: int, what: str) -> tuple[str, int]:
    if pos >= end:
        raise BtpDecodeError("truncated", f"{what} missing", pos)
    length = data[pos]
    start = pos + 1
    if length >= 128:
        length, start = read_long_length(data, pos, end)
    stop = start + length
    if stop > end:
        raise BtpDecodeError(
            "length prefix beyond end", f"{what} of {length} bytes, {end - start} left", pos
        )
    return ia5_text(data[start:stop], start, what), stop


def _read_time(data: bytes, pos: int, end: int, what: str) -> tuple[str, int]:
    text, stop = _read_var_ia5(data, pos, end, what)
    problem = check_generalized_time(text)
    if problem is not None:
        raise BtpDecodeError("bad GeneralizedTime", f"{what}: {problem}", pos)
    return text, stop


def _read_fixed(data: bytes, pos: int, end: int, size: int, what: str) -> tuple[bytes, int]:
    stop = pos + size
    if stop > end:
        raise BtpDecodeError("truncated", f"{what} needs {size} bytes, {end - pos} left", pos)
    return data[pos:stop], stop


def _read_amount(data: bytes, pos: int, end: int) -> int:
    if pos + 8 > end:
        raise BtpDecodeError("truncated", f"amount (UInt64) needs 8 bytes, {end - pos} left", pos)
    return _U64.unpack_from(data, pos)[0]


def _decode_error(
    request_id: int, data: bytes, pos: int, end: int, lenient_form: bool = False
) -> Error:
    if pos + 3 > end:
        raise BtpDecodeError(
            "bad error code length",
            f"the Error's data ends {end - pos} byte(s) into the "
            "fixed 3-character code (IA5String (SIZE (3)))",
            pos,
        )
    code = ia5_text(data[pos : pos + 3], pos, "error code")
    name, pos = _read_var_ia5(data, pos + 3, end, "error name")
    if lenient_form:
        triggered_at, pos = _read_var_ia5(data, pos, end, "triggeredAt")
    else:
        triggered_at, pos = _read_time(data, pos, end, "triggeredAt")
    if pos >= end:
        raise BtpDecodeError("truncated", "error data length missing", pos)
    length = data[pos]
    start = pos + 1
    if length >= 128:
        length, start = read_long_length(data, pos, end)
    stop = start + length
    if stop > end:
        raise BtpDecodeError(
            "length prefix beyond end", f"error data of {length} bytes, {end - start} left", pos
        )
    if length > MAX_ERROR_DATA and not lenient_form:
        raise BtpDecodeError(
            "error data too long",
            f"{length} bytes; Error data is OCTET STRING (SIZE (0..8192))",
            pos,
        )
    protocol_data, _ = _read_protocol_data(data, stop, end)
    return Error(request_id, code, name, triggered_at, data[start:stop], protocol_data)


def _decode_legacy(kind: int, request_id: int, data: bytes, pos: int, end: int) -> Packet:
    transfer_id, pos = _read_fixed(data, pos, end, 16, "transferId (UInt128)")
    if kind == 3:
        amount = _read_amount(data, pos, end)
        condition, pos = _read_fixed(data, pos + 8, end, 32, "executionCondition (UInt256)")
        expires_at, pos = _read_time(data, pos, end, "expiresAt")
        protocol_data, _ = _read_protocol_data(data, pos, end)
        return Prepare(request_id, transfer_id, amount, condition, expires_at, protocol_data)
    if kind == 4:
        fulfillment, pos = _read_fixed(data, pos, end, 32, "fulfillment (UInt256)")
        protocol_data, _ = _read_protocol_data(data, pos, end)
        return Fulfill(request_id, transfer_id, fulfillment, protocol_data)
    protocol_data, _ = _read_protocol_data(data, pos, end)
    return Reject(request_id, transfer_id, protocol_data)


def decode_packet(data: bytes, *, lenient_error_form: bool = False) -> Packet:
    """The packet in ``data`` (one whole WebSocket message), fully validated.

    Raises :class:`BtpDecodeError` -- and nothing else -- when ``data`` is
    not a readable BTP packet. Bytes after ``protocolData`` inside the
    envelope and bytes after the envelope are ignored (see the module
    docstring, "Extra bytes"). With
    ``lenient_error_form`` an Error's triggeredAt need only be IA5 text and
    its data may be longer than 8192 bytes (it still lies within the
    envelope): for a reader that judges those rules itself, as the harness
    does in their own cases, so that no other case fails for them."""
    if type(data) is not bytes:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"decode_packet needs bytes, got {type(data).__name__}")
        data = bytes(data)
    size = len(data)
    if size < 6:
        if size and not 0 < data[0] < 8:
            raise BtpDecodeError("unknown packet type", f"type {data[0]}", 0)
        raise BtpDecodeError(
            "truncated", f"{size} byte(s); the header (type, requestId, length) needs at least 6", 0
        )
    kind, request_id, length = _HEADER.unpack_from(data)
    if not 0 < kind < 8:
        raise BtpDecodeError(
            "unknown packet type", f"type {kind} (BTP 2.0 uses 1, 2, 6, 7; 3-5 are BTP 1)", 0
        )
    pos = 6
    if length >= 128:
        if length == 0x81 and size > 6 and data[6] >= 128:
            length = data[6]
            pos = 7
        elif length == 0x82 and size > 7 and data[6]:
            length = data[6] << 8 | data[7]
            pos = 8
        else:
            length, pos = read_long_length(data, 5, size)
    end = pos + length
    if end != size:
        if end > size:
            raise BtpDecodeError(
                "length prefix beyond end", f"envelope of {length} bytes, {size - pos} follow", 5
            )
        # Bytes after the envelope: ignored (erratum BTP-E3). The readers
        # below rely on ``data`` ending where the envelope ends.
        data = data[:end]
    if kind == 7:
        if pos + 8 > end:
            raise BtpDecodeError(
                "truncated", f"amount (UInt64) needs 8 bytes, {end - pos} left", pos
            )
        amount = _U64.unpack_from(data, pos)[0]
        pos += 8
    elif kind == 2:
        return _decode_error(request_id, data, pos, end, lenient_error_form)
    elif 2 < kind < 6:
        return _decode_legacy(kind, request_id, data, pos, end)
    # Message, Response, Transfer: the protocol data, fast path.  It handles
    # what typical packets use -- a count of 01 nn, names of < 128 bytes
    # already in the name cache, data lengths in short form or 0x81/0x82
    # long form, ASCII text -- and hands anything else, including every
    # error, to the general _read_protocol_data, which starts over at the
    # count; both accept exactly the same input (tests/btp/test_packet.py
    # checks them against a plain field-by-field decoder).  ``data`` ends
    # where the envelope ends, so an index past the end raises IndexError,
    # which also means "general path".  One entry, the commonest case (an
    # 'ilp' Message, a Transfer's claim), is unrolled.
    count_at = pos
    cache = _NAME_CACHE
    try:
        if data[pos] == 1:
            count = data[pos + 1]
            pos += 2
            if count == 1:
                length = data[pos]
                stop = pos + 1 + length
                name = cache.get(data[pos + 1 : stop])
                if name is None or length >= 128:
                    raise IndexError
                content_type = data[stop]
                pos = stop + 2
                length = data[stop + 1]
                if length >= 128:
                    if length == 0x81 and data[pos] >= 128:
                        length = data[pos]
                        pos += 1
                    elif length == 0x82 and data[pos]:
                        length = data[pos] << 8 | data[pos + 1]
                        pos += 2
                    else:
                        raise IndexError
                stop = pos + length
                value = data[pos:stop]
                if stop > end or (0 < content_type < 3 and not value.isascii()):
                    raise IndexError
                entry = _new(ProtocolDataEntry)
                _set_entry_name(entry, name)
                _set_entry_type(entry, content_type)
                _set_entry_data(entry, value)
                if kind == 6:
                    packet = _new(Message)
                    _set_message_id(packet, request_id)
                    _set_message_pd(packet, (entry,))
                    return packet
                if kind == 7:
                    packet = _new(Transfer)
                    _set_transfer_id(packet, request_id)
                    _set_transfer_amount(packet, amount)
                    _set_transfer_pd(packet, (entry,))
                    return packet
                return Response(request_id, (entry,))
            entries = []
            for _ in range(count):
                length = data[pos]
                stop = pos + 1 + length
                name = cache.get(data[pos + 1 : stop])
                if name is None or length >= 128:
                    break
                content_type = data[stop]
                pos = stop + 2
                length = data[stop + 1]
                if length >= 128:
                    if length == 0x81 and data[pos] >= 128:
                        length = data[pos]
                        pos += 1
                    elif length == 0x82 and data[pos]:
                        length = data[pos] << 8 | data[pos + 1]
                        pos += 2
                    else:
                        break
                stop = pos + length
                value = data[pos:stop]
                if stop > end or (0 < content_type < 3 and not value.isascii()):
                    break
                pos = stop
                entry = _new(ProtocolDataEntry)
                _set_entry_name(entry, name)
                _set_entry_type(entry, content_type)
                _set_entry_data(entry, value)
                entries.append(entry)
            else:
                if kind == 6:
                    packet = _new(Message)
                    _set_message_id(packet, request_id)
                    _set_message_pd(packet, tuple(entries))
                elif kind == 7:
                    packet = _new(Transfer)
                    _set_transfer_id(packet, request_id)
                    _set_transfer_amount(packet, amount)
                    _set_transfer_pd(packet, tuple(entries))
                else:
                    packet = _new(Response)
                    _set_response_id(packet, request_id)
                    _set_response_pd(packet, tuple(entries))
                return packet
    except IndexError:
        pass
    protocol_data, _ = _read_protocol_data(data, count_at, end)
    if kind == 7:
        return Transfer(request_id, amount, protocol_data)
    return Message(request_id, protocol_data) if kind == 6 else Response(request_id, protocol_data)


decode_packet_python = decode_packet
"""The decoder above, always in pure Python (tests compare the two)."""


def envelope_end(data: bytes) -> int:
    """The index in ``data`` just after the envelope, by the length prefix
    at byte 5 (what follows is not part of the packet: erratum BTP-E3).
    Meant for bytes that decode; raises :class:`BtpDecodeError` when the
    header or its long-form length cannot be read."""
    if len(data) < 6:
        raise BtpDecodeError("truncated", f"{len(data)} byte(s); the header needs at least 6", 0)
    if data[5] < 128:
        return 6 + data[5]
    length, pos = read_long_length(data, 5, len(data))
    return pos + length


# =========================================================================== encoding

_SHORT = [bytes((n,)) for n in range(256)]
_EMPTY_COUNT = encode_var_uint(0)
_NAME_BYTES: dict[str, bytes] = {}


def _check_int(value: Any, low: int, high: int, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{what} must be an integer in {low}..{high}, got {value!r}")
    return value


def _check_bytes(value: Any, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise ValueError(f"{what} must be bytes, got {type(value).__name__}")


def _text_bytes(text: Any, what: str, validate: bool) -> bytes:
    if not isinstance(text, str):
        raise ValueError(f"{what} must be a str, got {type(text).__name__}")
    if validate:
        return check_ia5(text, what)
    # Forging: characters up to U+00FF become one byte each, so "pr\xf6be"
    # gives the byte 0xf6; anything else is UTF-8.
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _encode_protocol_data(entries: Any, out: list, validate: bool) -> None:
    if not isinstance(entries, (tuple, list)):
        raise ValueError(
            f"protocol_data must be a tuple of ProtocolDataEntry, got {type(entries).__name__}"
        )
    count = len(entries)
    out.append(_SHORT_COUNTS[count] if count < 256 else encode_var_uint(count))
    for entry in entries:
        if type(entry) is not ProtocolDataEntry:
            raise ValueError(f"protocol data entries must be ProtocolDataEntry, got {entry!r}")
        name = entry.name
        raw = _NAME_BYTES.get(name) if validate else None
        if raw is None:
            raw = _text_bytes(name, "protocol name", validate)
            if (
                validate
                and len(_NAME_BYTES) < _NAME_CACHE_LIMIT
                and len(raw) <= _NAME_CACHE_MAX_LENGTH
            ):
                _NAME_BYTES[name] = raw
        content_type = entry.content_type
        if type(content_type) is not int and type(content_type) is not ContentType:
            _check_int(content_type, 0, 255, f"content type of entry {name!r}")
        if not 0 <= content_type <= 255:
            raise ValueError(f"content type of entry {name!r} must be 0..255, got {content_type}")
        value = entry.data
        if type(value) is not bytes:
            value = _check_bytes(value, f"data of entry {name!r}")
        if validate and 0 < content_type < 3 and not value.isascii():
            try:
                value.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(
                    f"bad content type: entry {name!r} declares content type {content_type} "
                    f"(UTF-8 text) but its data is not UTF-8 ({exc.reason})"
                ) from None
        length = len(raw)
        out.append(_SHORT[length] if length < 128 else encode_length(length))
        out.append(raw)
        out.append(_SHORT[content_type])
        length = len(value)
        out.append(_SHORT[length] if length < 128 else encode_length(length))
        out.append(value)


_SHORT_COUNTS = [encode_var_uint(n) for n in range(256)]


def _var(raw: bytes) -> bytes:
    length = len(raw)
    return (_SHORT[length] if length < 128 else encode_length(length)) + raw


def encode_packet(packet: Packet, *, validate: bool = True) -> bytes:
    """The canonical encoding of ``packet``.

    Raises ValueError for what cannot be encoded (request id outside UInt32,
    amount outside UInt64, content type outside 0..255, wrong-sized legacy
    fields) and, unless ``validate=False``, for what the decoder would reject:
    non-IA5 names or codes, a code that is not 3 characters, a bad
    GeneralizedTime, Error data over 8192 bytes, or non-UTF-8 data in a
    content type 1 or 2 entry.  ``validate=False`` exists to forge such
    packets; characters U+0080..U+00FF in its strings become single bytes.
    """
    cls = type(packet)
    kind = _TYPE_OF.get(cls)
    if kind is None:
        raise ValueError(f"not a BTP packet: {packet!r}")
    request_id = packet.request_id
    if type(request_id) is not int or not 0 <= request_id <= MAX_REQUEST_ID:
        _check_int(request_id, 0, MAX_REQUEST_ID, "request_id")
    out: list[bytes] = []
    if kind == 6 or kind == 1:
        pass
    elif kind == 7:
        out.append(_U64.pack(_check_int(packet.amount, 0, MAX_AMOUNT, "amount")))
    elif kind == 2:
        code = _text_bytes(packet.code, "error code", validate)
        if validate and len(code) != 3:
            raise ValueError(
                f"error code must be 3 characters (IA5String (SIZE (3))), got {packet.code!r}"
            )
        out.append(code)
        out.append(_var(_text_bytes(packet.name, "error name", validate)))
        out.append(_var(_time_bytes(packet.triggered_at, "triggered_at", validate)))
        data = _check_bytes(packet.data, "error data")
        if validate and len(data) > MAX_ERROR_DATA:
            raise ValueError(f"error data is at most {MAX_ERROR_DATA} bytes, got {len(data)}")
        out.append(_var(data))
    else:
        out.append(_fixed(packet.transfer_id, 16, "transfer_id"))
        if kind == 3:
            out.append(_U64.pack(_check_int(packet.amount, 0, MAX_AMOUNT, "amount")))
            out.append(_fixed(packet.execution_condition, 32, "execution_condition"))
            out.append(_var(_time_bytes(packet.expires_at, "expires_at", validate)))
        elif kind == 4:
            out.append(_fixed(packet.fulfillment, 32, "fulfillment"))
    _encode_protocol_data(packet.protocol_data, out, validate)
    body = b"".join(out)
    length = len(body)
    return b"".join(
        (
            _HEADER_PREFIX[kind],
            request_id.to_bytes(4, "big"),
            _SHORT[length] if length < 128 else encode_length(length),
            body,
        )
    )


_HEADER_PREFIX = {int(kind): bytes((kind,)) for kind in PacketType}


def _time_bytes(text: Any, what: str, validate: bool) -> bytes:
    raw = _text_bytes(text, what, validate)
    if validate:
        problem = check_generalized_time(text)
        if problem is not None:
            raise ValueError(f"{what} is not a UTC GeneralizedTime: {problem}")
    return raw


def _fixed(value: Any, size: int, what: str) -> bytes:
    value = _check_bytes(value, what)
    if len(value) != size:
        raise ValueError(f"{what} must be {size} bytes, got {len(value)}")
    return value


encode_packet_python = encode_packet
"""The encoder above, always in pure Python (tests compare the two)."""

CODEC = "pure Python"
"""Which :func:`decode_packet` and :func:`encode_packet` this process uses
(the benchmark prints it)."""

# The common cases in C (reference_impl/btp/_fastcodec.c, built by
# ``pip install``): typical Message, Response and Transfer packets are
# decoded and encoded there, and everything else -- malformed input, values
# the encoder rejects, forging with validate=False -- is handed to
# decode_packet_python / encode_packet_python, so results and errors are the
# same either way.  BTP_PURE_PYTHON=1 turns it off; without a C compiler it
# is simply absent.
if os.environ.get("BTP_PURE_PYTHON", "") in ("", "0"):
    try:
        from . import _fastcodec
    except ImportError:
        pass
    else:
        decode_packet, encode_packet = _fastcodec.make_codec(  # noqa: F811
            decode_packet_python,
            encode_packet_python,
            ProtocolDataEntry,
            Message,
            Response,
            Transfer,
            ContentType,
        )
        CODEC = "C accelerator (reference_impl/btp/_fastcodec.c)"


# =========================================================================== JSON form


def _entries_to_json(entries: ProtocolData) -> list[dict]:
    return [
        {"name": e.name, "content_type": int(e.content_type), "data_hex": e.data.hex()}
        for e in entries
    ]


def _entries_from_json(entries: list[dict]) -> ProtocolData:
    return tuple(
        ProtocolDataEntry(e["name"], e["content_type"], bytes.fromhex(e["data_hex"]))
        for e in entries
    )


def packet_to_json(packet: Packet) -> dict:
    """``packet`` as the JSON object the vectors use: ``type`` (class name),
    ``type_id``, ``request_id``, the type's fields in snake_case with bytes
    as lowercase hex (``*_hex``) and amounts as decimal strings (a UInt64
    does not survive a JavaScript number), and ``protocol_data``."""
    kind = packet_type(packet)
    out: dict[str, Any] = {
        "type": _TYPE_NAMES[kind],
        "type_id": int(kind),
        "request_id": packet.request_id,
    }
    if kind == PacketType.TRANSFER:
        out["amount"] = str(packet.amount)
    elif kind == PacketType.ERROR:
        out.update(
            code=packet.code,
            name=packet.name,
            triggered_at=packet.triggered_at,
            data_hex=packet.data.hex(),
        )
    elif kind == PacketType.PREPARE:
        out.update(
            transfer_id_hex=packet.transfer_id.hex(),
            amount=str(packet.amount),
            execution_condition_hex=packet.execution_condition.hex(),
            expires_at=packet.expires_at,
        )
    elif kind == PacketType.FULFILL:
        out.update(
            transfer_id_hex=packet.transfer_id.hex(), fulfillment_hex=packet.fulfillment.hex()
        )
    elif kind == PacketType.REJECT:
        out["transfer_id_hex"] = packet.transfer_id.hex()
    out["protocol_data"] = _entries_to_json(packet.protocol_data)
    return out


def packet_from_json(fields: dict) -> Packet:
    """The inverse of :func:`packet_to_json` (``type_id`` decides the class)."""
    kind = fields["type_id"]
    request_id = fields["request_id"]
    protocol_data = _entries_from_json(fields.get("protocol_data", []))
    if kind in (1, 6):
        return _CLASS_OF[kind](request_id, protocol_data)
    if kind == 7:
        return Transfer(request_id, int(fields["amount"]), protocol_data)
    if kind == 2:
        return Error(
            request_id,
            fields["code"],
            fields["name"],
            fields["triggered_at"],
            bytes.fromhex(fields["data_hex"]),
            protocol_data,
        )
    if kind == 3:
        return Prepare(
            request_id,
            bytes.fromhex(fields["transfer_id_hex"]),
            int(fields["amount"]),
            bytes.fromhex(fields["execution_condition_hex"]),
            fields["expires_at"],
            protocol_data,
        )
    if kind == 4:
        return Fulfill(
            request_id,
            bytes.fromhex(fields["transfer_id_hex"]),
            bytes.fromhex(fields["fulfillment_hex"]),
            protocol_data,
        )
    if kind == 5:
        return Reject(request_id, bytes.fromhex(fields["transfer_id_hex"]), protocol_data)
    raise ValueError(f"unknown type_id {kind!r}")

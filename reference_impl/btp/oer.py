"""The CANONICAL-OER primitives BTP uses, sans-I/O.

Implements the types of ``oer-notes-rfc0030.md`` that
``BilateralTransferProtocol.asn`` needs:

* fixed-size unsigned integers, big-endian (UInt8, UInt32, UInt64);
* the length determinant: short form (one byte ``0..127``) or long form
  (``0x80 | n`` then ``n`` bytes of big-endian length).  Canonical means
  minimal: a length below 128 MUST use the short form and the long form MUST
  NOT have leading zero bytes.  ``0x80`` (``n = 0``) is not a length at all.
  Anything else is rejected with reason ``"non-canonical length"``;
* the variable-length unsigned integer (the protocol data count): a length
  determinant, then that many bytes, at least one, without leading zeros
  (``"empty integer"``, ``"non-canonical integer"``).  Zero is ``01 00``;
* the variable-length octet string and IA5String (a length determinant, then
  the bytes; IA5 bytes are ``0..127``, anything else is
  ``"non-IA5 character"``);
* GeneralizedTime, an IA5String such as ``20171224161432.279Z`` (see
  :func:`check_generalized_time` for the exact grammar accepted).

Decoding goes through :class:`Reader`, a cursor over ``data[pos:end]``.
Every length read from the wire is compared with what is left before
anything is sliced, so an untrusted length never causes an allocation
(``"length prefix beyond end"``); a fixed-size field that does not fit is
``"truncated"``.  Errors are :class:`BtpDecodeError` with a fixed ``reason``
phrase, a ``detail`` and the byte ``offset`` (from the start of the buffer)
where the offending field starts.

The packet codec (:mod:`reference_impl.btp.packet`) inlines the common short
forms of these reads for speed but falls back to the functions here, so the
rules live in one place.
"""

from __future__ import annotations

import re
import struct
from datetime import datetime, timedelta, timezone

__all__ = [
    "BtpDecodeError",
    "DECODE_REASONS",
    "Reader",
    "encode_length",
    "decode_length",
    "read_long_length",
    "encode_var_uint",
    "decode_var_uint",
    "encode_uint",
    "decode_uint",
    "encode_var_octets",
    "decode_var_octets",
    "encode_ia5",
    "decode_ia5",
    "check_ia5",
    "check_generalized_time",
    "is_generalized_time",
    "generalized_time",
    "parse_generalized_time",
    "MAX_LENGTH_OF_LENGTH",
]

MAX_LENGTH_OF_LENGTH = 8
"""RFC 30: "Implementations MAY limit the length determinants they support to
a length-of-length of no more than eight bytes"; BTP packets never need more."""

DECODE_REASONS = frozenset(
    {
        "truncated",  # a fixed-size field (or the header) runs past the end of its container
        "length prefix beyond end",  # a length determinant claims more bytes than its container has left
        "non-canonical length",  # long form for a length < 128, leading zero length bytes, or 0x80
        "empty integer",  # a variable-length unsigned integer of zero bytes
        "non-canonical integer",  # a variable-length unsigned integer with a leading zero byte
        "unknown packet type",  # type byte not in 1..7
        "non-IA5 character",  # a byte >= 0x80 in an IA5String
        "bad error code length",  # the Error's data ends inside its fixed 3-byte code
        "bad GeneralizedTime",  # triggeredAt / expiresAt not a UTC GeneralizedTime
        "error data too long",  # Error data longer than 8192 bytes
        "bad content type",  # a UTF-8 text or JSON entry whose data is not UTF-8
    }
)


class BtpDecodeError(ValueError):
    """Bytes that are not a readable BTP packet.

    ``reason`` is one of :data:`DECODE_REASONS` (a fixed phrase tests can
    match), ``detail`` says more, ``offset`` is the index in the decoded
    buffer of the field at fault (``None`` when it is not one place)."""

    def __init__(self, reason: str, detail: str = "", offset: int | None = None) -> None:
        where = f" at byte {offset}" if offset is not None else ""
        super().__init__(f"{reason}{where}: {detail}" if detail else f"{reason}{where}")
        self.reason = reason
        self.detail = detail
        self.offset = offset


# --------------------------------------------------------------------------- lengths

_SHORT_LENGTHS = [bytes((n,)) for n in range(128)]


def encode_length(length: int) -> bytes:
    """The canonical length determinant of ``length``."""
    if length < 128:
        if length < 0:
            raise ValueError(f"a length cannot be negative, got {length}")
        return _SHORT_LENGTHS[length]
    size = (length.bit_length() + 7) >> 3
    if size > MAX_LENGTH_OF_LENGTH:
        raise ValueError(f"length {length} does not fit the 8-byte length-of-length limit")
    return bytes((0x80 | size,)) + length.to_bytes(size, "big")


def read_long_length(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """A long-form length determinant whose first byte (``>= 0x80``) is at
    ``pos``; returns ``(length, position after it)``.  Does not compare the
    length with what follows -- callers do."""
    size = data[pos] & 0x7F
    if size == 0:
        raise BtpDecodeError(
            "non-canonical length", "0x80 is not a length determinant (length-of-length 0)", pos
        )
    start = pos + 1
    stop = start + size
    if stop > end:
        raise BtpDecodeError(
            "truncated", f"long-form length needs {size} more byte(s), {end - start} left", pos
        )
    if data[start] == 0:
        raise BtpDecodeError(
            "non-canonical length",
            f"long-form length with a leading zero byte ({data[pos:stop].hex()})",
            pos,
        )
    if size > MAX_LENGTH_OF_LENGTH:
        # At least 2**64: more than any buffer; beyond the end by definition.
        raise BtpDecodeError(
            "length prefix beyond end", f"length-of-length {size} (more than 8 bytes)", pos
        )
    length = int.from_bytes(data[start:stop], "big")
    if length < 128:
        raise BtpDecodeError(
            "non-canonical length",
            f"length {length} in long form ({data[pos:stop].hex()}); "
            "lengths below 128 must use the short form",
            pos,
        )
    return length, stop


def decode_length(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """``(length, position after the determinant)`` of the determinant at ``pos``."""
    if pos >= end:
        raise BtpDecodeError("truncated", "length determinant missing", pos)
    first = data[pos]
    if first < 128:
        return first, pos + 1
    return read_long_length(data, pos, end)


# --------------------------------------------------------------------------- integers

_U8 = struct.Struct(">B")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_FIXED = {1: _U8, 4: _U32, 8: _U64}


def encode_uint(value: int, size: int) -> bytes:
    """``value`` as a ``size``-byte big-endian unsigned integer."""
    if not 0 <= value < 1 << (8 * size):
        raise ValueError(f"{value} does not fit an unsigned {8 * size}-bit integer")
    return value.to_bytes(size, "big")


def decode_uint(data: bytes, pos: int, end: int, size: int) -> tuple[int, int]:
    stop = pos + size
    if stop > end:
        raise BtpDecodeError(
            "truncated", f"UInt{8 * size} needs {size} bytes, {max(end - pos, 0)} left", pos
        )
    packer = _FIXED.get(size)
    if packer is not None:
        return packer.unpack_from(data, pos)[0], stop
    return int.from_bytes(data[pos:stop], "big"), stop


_VAR_UINT_SMALL = [b"\x01" + bytes((n,)) for n in range(256)]


def encode_var_uint(value: int) -> bytes:
    """The canonical variable-length unsigned integer: a length determinant,
    then the minimal big-endian bytes (at least one, so 0 is ``01 00``)."""
    if value < 256:
        if value < 0:
            raise ValueError(f"an unsigned integer cannot be negative, got {value}")
        return _VAR_UINT_SMALL[value]
    size = (value.bit_length() + 7) >> 3
    return encode_length(size) + value.to_bytes(size, "big")


def decode_var_uint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    size, start = decode_length(data, pos, end)
    if size == 0:
        raise BtpDecodeError("empty integer", "variable-length unsigned integer of zero bytes", pos)
    stop = start + size
    if stop > end:
        raise BtpDecodeError(
            "length prefix beyond end", f"integer of {size} bytes, {end - start} left", pos
        )
    if size > 1 and data[start] == 0:
        raise BtpDecodeError(
            "non-canonical integer", f"leading zero byte in {data[pos:stop].hex()}", pos
        )
    return int.from_bytes(data[start:stop], "big"), stop


# --------------------------------------------------------------------------- strings


def encode_var_octets(value: bytes) -> bytes:
    return encode_length(len(value)) + value


def decode_var_octets(data: bytes, pos: int, end: int) -> tuple[bytes, int]:
    """The octet string whose length determinant is at ``pos``."""
    if pos >= end:
        raise BtpDecodeError("truncated", "length determinant missing", pos)
    length = data[pos]
    start = pos + 1
    if length >= 128:
        length, start = read_long_length(data, pos, end)
    stop = start + length
    if stop > end:
        raise BtpDecodeError(
            "length prefix beyond end", f"length {length}, {end - start} byte(s) left", pos
        )
    return data[start:stop], stop


def check_ia5(text: str, what: str = "string") -> bytes:
    """``text`` as IA5 bytes; ValueError if a character is outside 0..127."""
    if not text.isascii():
        raise ValueError(f"{what} {text!r} has a character outside IA5 (0..127)")
    return text.encode("ascii")


def encode_ia5(text: str, what: str = "string") -> bytes:
    return encode_var_octets(check_ia5(text, what))


def ia5_text(raw: bytes, offset: int, what: str = "IA5String") -> str:
    """``raw`` (which started at ``offset``) as text, or BtpDecodeError."""
    if raw.isascii():
        return raw.decode("ascii")
    bad = next(i for i, byte in enumerate(raw) if byte >= 0x80)
    raise BtpDecodeError(
        "non-IA5 character", f"{what} has byte 0x{raw[bad]:02x} (IA5 is 0..127)", offset + bad
    )


def decode_ia5(data: bytes, pos: int, end: int, what: str = "IA5String") -> tuple[str, int]:
    raw, stop = decode_var_octets(data, pos, end)
    return ia5_text(raw, stop - len(raw), what), stop


# --------------------------------------------------------------------------- GeneralizedTime

_GENERALIZED_TIME = re.compile(r"(\d{4})(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)(?:\.(\d{1,3}))?Z", re.ASCII)
_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def check_generalized_time(text: str) -> str | None:
    """Why ``text`` is not an acceptable BTP GeneralizedTime, or ``None``.

    Accepted: ``YYYYMMDDHHMMSS`` then optionally ``.`` and one to three
    fraction digits, then ``Z`` -- UTC only, every field present, ranges
    checked (month 1-12, day within the month, leap years, hour 0-23, minute
    0-59, second 0-59, and 60 at 23:59 for a leap second: RFC 30 "MUST allow
    leap seconds").  Midnight is ``000000``, never ``240000``.

    The fraction: RFC 30 wants the canonical form, trailing zeros removed
    (``.2Z``, no fraction for ``.000``) and lists ``...0000.20Z`` as invalid.
    The specs README's example ``20171115140000.000Z`` and btp-packet, the
    JavaScript reference codec (it always writes, and only reads, three
    digits), use a fixed three-digit fraction instead.  Both are accepted:
    a fraction of three digits is taken as it is; a fraction of one or two
    digits must not end in ``0`` (RFC 30's "spurious trailing zero"), since no
    encoder following either convention writes that.
    """
    match = _GENERALIZED_TIME.fullmatch(text)
    if match is None:
        return f"{text!r} is not YYYYMMDDHHMMSS[.f{{1,3}}]Z"
    year, month, day, hour, minute, second = (int(group) for group in match.groups()[:6])
    fraction = match.group(7)
    if fraction is not None and len(fraction) < 3 and fraction.endswith("0"):
        return f"{text!r}: a fraction of fewer than three digits with a trailing zero"
    if not 1 <= month <= 12:
        return f"{text!r}: month {month:02d} out of range"
    days = _DAYS[month - 1]
    if month == 2 and year % 4 == 0 and (year % 100 != 0 or year % 400 == 0):
        days = 29
    if not 1 <= day <= days:
        return f"{text!r}: day {day:02d} out of range for month {month:02d}"
    if hour > 23:
        return f"{text!r}: hour {hour:02d} out of range (midnight is 000000 of the next day)"
    if minute > 59:
        return f"{text!r}: minute {minute:02d} out of range"
    if second > 59 and not (second == 60 and hour == 23 and minute == 59):
        return f"{text!r}: second {second:02d} out of range (60 only as a leap second at 23:59)"
    return None


def is_generalized_time(text: str) -> bool:
    return check_generalized_time(text) is None


def generalized_time(dt: datetime | None = None) -> str:
    """``dt`` (default: now) as ``YYYYMMDDHHMMSS.mmmZ`` in UTC, milliseconds
    rounded half up -- the fixed three-digit form the specs README shows and
    btp-packet reads.  A naive ``dt`` is taken to be UTC."""
    if dt is None:
        dt = datetime.now(timezone.utc)
    elif dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc)
    millis = (dt.microsecond + 500) // 1000
    dt = dt.replace(microsecond=0) + timedelta(milliseconds=millis)
    return (
        f"{dt.year:04d}{dt.month:02d}{dt.day:02d}{dt.hour:02d}{dt.minute:02d}{dt.second:02d}."
        f"{dt.microsecond // 1000:03d}Z"
    )


def parse_generalized_time(text: str) -> datetime:
    """An accepted GeneralizedTime as an aware UTC datetime; a leap second
    (``...235960.5Z``) becomes the first second of the next day, as
    JavaScript's ``Date`` treats it.  ValueError if not accepted."""
    problem = check_generalized_time(text)
    if problem is not None:
        raise ValueError(problem)
    fraction = text[15:-1] if len(text) > 15 else ""
    micro = int(fraction.ljust(3, "0")) * 1000 if fraction else 0
    base = datetime(
        int(text[0:4]),
        int(text[4:6]),
        int(text[6:8]),
        int(text[8:10]),
        int(text[10:12]),
        tzinfo=timezone.utc,
    )
    return base + timedelta(seconds=int(text[12:14]), microseconds=micro)


# --------------------------------------------------------------------------- reader


class Reader:
    """A cursor over ``data[pos:end]``; every read checks the bounds and
    raises :class:`BtpDecodeError` with the absolute offset."""

    __slots__ = ("data", "pos", "end")

    def __init__(self, data: bytes, pos: int = 0, end: int | None = None) -> None:
        self.data = bytes(data) if not isinstance(data, bytes) else data
        self.pos = pos
        self.end = len(self.data) if end is None else end
        if not 0 <= self.pos <= self.end <= len(self.data):
            raise ValueError(f"bad window [{pos}:{end}] of {len(self.data)} bytes")

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def at_end(self) -> bool:
        return self.pos >= self.end

    def read_uint(self, size: int) -> int:
        value, self.pos = decode_uint(self.data, self.pos, self.end, size)
        return value

    def read_uint8(self) -> int:
        return self.read_uint(1)

    def read_uint32(self) -> int:
        return self.read_uint(4)

    def read_uint64(self) -> int:
        return self.read_uint(8)

    def read_fixed(self, size: int, what: str = "field") -> bytes:
        stop = self.pos + size
        if stop > self.end:
            raise BtpDecodeError(
                "truncated", f"{what} needs {size} bytes, {self.end - self.pos} left", self.pos
            )
        value = self.data[self.pos : stop]
        self.pos = stop
        return value

    def read_length(self) -> int:
        length, self.pos = decode_length(self.data, self.pos, self.end)
        return length

    def read_var_uint(self) -> int:
        value, self.pos = decode_var_uint(self.data, self.pos, self.end)
        return value

    def read_var_octets(self) -> bytes:
        value, self.pos = decode_var_octets(self.data, self.pos, self.end)
        return value

    def read_ia5(self, what: str = "IA5String") -> str:
        value, self.pos = decode_ia5(self.data, self.pos, self.end, what)
        return value

    def read_fixed_ia5(self, size: int, what: str = "IA5String") -> str:
        start = self.pos
        return ia5_text(self.read_fixed(size, what), start, what)

    def read_generalized_time(self, what: str = "GeneralizedTime") -> str:
        start = self.pos
        text = self.read_ia5(what)
        problem = check_generalized_time(text)
        if problem is not None:
            raise BtpDecodeError("bad GeneralizedTime", f"{what}: {problem}", start)
        return text

    def sub_reader(self, length: int) -> "Reader":
        """A reader over the next ``length`` bytes (which this one skips)."""
        stop = self.pos + length
        if stop > self.end:
            raise BtpDecodeError(
                "length prefix beyond end", f"length {length}, {self.end - self.pos} left", self.pos
            )
        sub = Reader(self.data, self.pos, stop)
        self.pos = stop
        return sub

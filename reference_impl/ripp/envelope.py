"""RIPP envelopes: the codec and a stream reader, pure and sans-I/O.

Layout (``ripp-wire-protocol.txt``, "Message Envelope Format"; every integer
little-endian; ``docs/ripp-profile.md`` P1)::

    0   4   magic "RIPP"          23  32  schema fingerprint (zero-padded ASCII)
    4   1   version (1)           55   4  payload length N (int32)
    5   1   message type          59   N  payload (bin_prot)
    6   1   flags (0)             59+N 4  CRC-32C over bytes 0 .. 58+N
    7   8   sequence (int64)
    15  8   timestamp ns (int64)

Decoding checks, in this order, before any byte of the payload is parsed
(the issue and the profile fix the order; the first failure names the
refusal in :attr:`EnvelopeError.check`): ``length`` (size and the length
field's bounds), ``magic``, ``crc``, ``version``, ``type``, ``flags``.

CRC-32C comes from ``google-crc32c`` (C, SSE4.2 where the CPU has it): the
text's table loop is what the benchmark compares it against, not what runs.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from google_crc32c import value as _crc32c_value

from ..faults import FaultPoints

MAGIC = b"RIPP"
VERSION = 1
HEADER_SIZE = 59
CRC_SIZE = 4
OVERHEAD = HEADER_SIZE + CRC_SIZE  # 63, "Total overhead per message: 63 bytes"
FINGERPRINT_SIZE = 32
ZERO_FINGERPRINT = bytes(FINGERPRINT_SIZE)
# The profile's bound on the payload length (P1).  A receiver may lower it.
MAX_PAYLOAD = 1 << 20

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

# magic, version, type, flags, sequence, timestamp, fingerprint, length
_HEADER = struct.Struct("<4sBBBqq32si")
_unpack_header = _HEADER.unpack_from
_new_tuple = tuple.__new__
# CRC-32C of any message followed by its CRC-32C in little-endian order
_CRC_RESIDUE = 0x48674BC7
_LENGTH = struct.Struct("<i")
_CRC = struct.Struct("<I")
assert _HEADER.size == HEADER_SIZE


class MsgType(enum.IntEnum):
    """The text's "Message Types" table."""

    HANDSHAKE = 0
    DELTA = 1
    CHECKPOINT_REQUEST = 2
    CHECKPOINT_ACK = 3
    HEARTBEAT = 4
    SCHEMA_NEGOTIATION = 5


_KNOWN_TYPES = frozenset(int(t) for t in MsgType)

# The checks in the order decode_envelope runs them.
CHECKS = ("length", "magic", "crc", "version", "type", "flags")


class EnvelopeError(ValueError):
    """An envelope the receiver must refuse; ``check`` names the failed check."""

    def __init__(self, reason: str, check: str) -> None:
        super().__init__(f"{check}: {reason}")
        self.reason = reason
        self.check = check
        # EnvelopeReader: the sound envelopes that came before this one
        self.decoded: list[Envelope] = []


class Envelope(NamedTuple):
    # A NamedTuple, not a dataclass: building one is a single tuple
    # allocation, which matters at 500,000 decodes per second.
    version: int
    msg_type: int
    flags: int
    sequence: int
    timestamp_ns: int
    fingerprint: bytes
    payload: bytes


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``; ``crc32c(b"123456789") == 0xE3069283``."""
    return _crc32c_value(bytes(data))


def make_envelope(
    msg_type: int,
    payload: bytes,
    *,
    sequence: int,
    timestamp_ns: int,
    fingerprint: bytes = ZERO_FINGERPRINT,
    version: int = VERSION,
    flags: int = 0,
) -> Envelope:
    return Envelope(
        version, int(msg_type), flags, sequence, timestamp_ns, fingerprint, bytes(payload)
    )


def encode_envelope(env: Envelope) -> bytes:
    """The wire bytes of ``env`` with its CRC-32C.

    Only field widths are enforced, so tests can build envelopes a receiver
    must refuse (version 2, flags 1, type 9); a fingerprint shorter than 32
    bytes is zero-padded as the text says.
    """
    fp = bytes(env.fingerprint)
    if len(fp) > FINGERPRINT_SIZE:
        raise ValueError(f"fingerprint is {len(fp)} bytes, at most {FINGERPRINT_SIZE}")
    for name in ("version", "msg_type", "flags"):
        v = getattr(env, name)
        if not 0 <= v <= 0xFF:
            raise ValueError(f"{name} {v} does not fit a byte")
    for name in ("sequence", "timestamp_ns"):
        v = getattr(env, name)
        if not INT64_MIN <= v <= INT64_MAX:
            raise ValueError(f"{name} {v} does not fit an int64")
    payload = bytes(env.payload)
    if len(payload) > 0x7FFFFFFF:
        raise ValueError("payload does not fit the int32 length field")
    head = _HEADER.pack(
        MAGIC,
        env.version,
        env.msg_type,
        env.flags,
        env.sequence,
        env.timestamp_ns,
        fp.ljust(FINGERPRINT_SIZE, b"\0"),
        len(payload),
    )
    body = head + payload
    return body + _CRC.pack(_crc32c_value(body))


def _check_length_field(length: int, max_payload: int) -> None:
    if length < 0:
        raise EnvelopeError(f"payload length field is negative ({length})", "length")
    if length > max_payload:
        raise EnvelopeError(
            f"payload length field claims {length} bytes, above the bound of {max_payload}",
            "length",
        )


def decode_envelope_python(data: bytes, max_payload: int = MAX_PAYLOAD) -> Envelope:
    """Decode exactly one envelope, raising :class:`EnvelopeError` if refused.

    The payload is returned as bytes and never looked at: payload decoding
    is the caller's, after every envelope check passed.

    The sound case is one expression (the benchmark's 500,000 decodes/s
    leaves about 2 microseconds each); any failure goes to
    :func:`_refuse`, which runs the checks one by one in the profile's order
    to name the first that fails.
    """
    if type(data) is not bytes:
        data = bytes(data)
    n = len(data)
    if n >= HEADER_SIZE:
        magic, version, msg_type, flags, sequence, ts, fp, length = _unpack_header(data)
        if (
            0 <= length <= max_payload
            and n == OVERHEAD + length
            and magic == MAGIC
            # CRC-32C over a message followed by its own CRC (LE) is the
            # constant residue: one pass over the bytes, no slice copied.
            and _crc32c_value(data) == _CRC_RESIDUE
            and version == VERSION
            and msg_type in _KNOWN_TYPES
            and not flags
        ):
            return _new_tuple(
                Envelope,
                (version, msg_type, flags, sequence, ts, fp, data[HEADER_SIZE : n - CRC_SIZE]),
            )
    _refuse(data, max_payload)
    raise AssertionError("unreachable: _refuse always raises")  # pragma: no cover


def _refuse(data: bytes, max_payload: int) -> None:
    """Raise the EnvelopeError of the first check ``data`` fails, in order."""
    n = len(data)
    if n < HEADER_SIZE:
        raise EnvelopeError(f"{n} bytes, shorter than the {OVERHEAD}-byte minimum", "length")
    magic, version, msg_type, flags, _, _, _, length = _unpack_header(data)
    # the claim is refused on its own, however many bytes came with it
    _check_length_field(length, max_payload)
    if n != OVERHEAD + length:
        raise EnvelopeError(
            f"{n} bytes, but the length field ({length}) makes the envelope {OVERHEAD + length}",
            "length",
        )
    if magic != MAGIC:
        raise EnvelopeError(f"magic {magic.hex()} is not 52495050 (RIPP)", "magic")
    end = n - CRC_SIZE
    stored = _CRC.unpack_from(data, end)[0]
    computed = _crc32c_value(data[:end])
    if stored != computed:
        raise EnvelopeError(f"CRC-32C {stored:08x} stored, {computed:08x} computed", "crc")
    if version != VERSION:
        raise EnvelopeError(f"unsupported version {version}", "version")
    if msg_type not in _KNOWN_TYPES:
        raise EnvelopeError(f"unknown message type {msg_type}", "type")
    if flags:
        raise EnvelopeError(f"flags {flags:#04x}, reserved bits must be 0", "flags")


decode_envelope = decode_envelope_python
DECODER = "pure Python"
# The sound case in C when reference_impl/ripp/_fastenvelope.c is built
# (setup.py, optional like the BTP accelerator); any refusal still goes
# through decode_envelope_python, so behaviour is identical either way.
try:
    from . import _fastenvelope
except ImportError:  # pragma: no cover - no C compiler at install time
    pass
else:
    _fastenvelope.setup(Envelope, _crc32c_value, decode_envelope_python, MAX_PAYLOAD)
    decode_envelope = _fastenvelope.decode  # noqa: F811
    DECODER = "C accelerator (reference_impl/ripp/_fastenvelope.c)"


class EnvelopeReader:
    """Splits a TCP byte stream into envelopes.

    Memory is bounded by one envelope: the length field is checked against
    ``max_payload`` as soon as the 59 header bytes are in (with the magic,
    keeping the check order), so a header claiming 2 GiB is refused at once
    and nothing waits for, or buffers, the bytes it claims.  After the call
    returns, the buffer holds less than one complete envelope.

    A refused envelope raises :class:`EnvelopeError` and the reader is dead:
    RIPP has no resynchronisation point, so nothing after a bad envelope on
    that stream can be trusted (profile P1: close the connection).
    """

    def __init__(self, max_payload: int = MAX_PAYLOAD, points: FaultPoints | None = None) -> None:
        if not 0 <= max_payload <= MAX_PAYLOAD:
            raise ValueError(f"max_payload must be within 0..{MAX_PAYLOAD}")
        self.max_payload = max_payload
        self._points = points if points is not None else FaultPoints(())
        """The node's faults (reference_impl/ripp/faults.py): the receiver
        checks they switch off, at the points payload-bound, magic-accepted
        and received-envelope."""
        self._bound = self._points.apply("payload-bound", max_payload)
        self._buf = bytearray()
        self._error: EnvelopeError | None = None

    @property
    def failed(self) -> EnvelopeError | None:
        return self._error

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def receive_data(self, data: bytes) -> list[Envelope]:
        if self._error is not None:
            # a fresh exception: the first one's ``decoded`` was handed over already
            raise EnvelopeError(self._error.reason, self._error.check)
        buf = self._buf
        buf += data
        out: list[Envelope] = []
        pos = 0
        try:
            while len(buf) - pos >= HEADER_SIZE:
                length = _LENGTH.unpack_from(buf, pos + 55)[0]
                _check_length_field(length, self._bound)
                magic = bytes(buf[pos : pos + 4])
                if not self._points.apply("magic-accepted", magic == MAGIC, magic=magic):
                    raise EnvelopeError(f"magic {magic.hex()} is not 52495050 (RIPP)", "magic")
                total = OVERHEAD + length
                if len(buf) - pos < total:
                    break
                raw = self._points.apply("received-envelope", bytes(buf[pos : pos + total]))
                pos += total
                if raw is not None:
                    out.append(decode_envelope(raw, max_payload=self._bound))
        except EnvelopeError as exc:
            # The envelopes before the bad one were sound: hand them over on
            # the exception so the session can act on them before closing.
            exc.decoded = out
            self._error = exc
            self._buf = bytearray()
            raise
        finally:
            if pos and self._error is None:
                del buf[:pos]
        return out

    def eof(self) -> None:
        """The stream ended: bytes of an unfinished envelope are a ``length`` refusal."""
        if self._error is None and self._buf:
            self._error = EnvelopeError(
                f"stream ended inside an envelope ({len(self._buf)} bytes buffered)", "length"
            )
            self._buf = bytearray()
            raise self._error


def fingerprint_text(fp: bytes) -> str:
    """The ASCII text of a 32-byte zero-padded fingerprint field.

    Raises ValueError when a non-zero byte follows a zero byte or a byte is
    not printable ASCII (the text: "32-byte zero-padded string").
    """
    if len(fp) != FINGERPRINT_SIZE:
        raise ValueError(f"fingerprint field is {len(fp)} bytes, not 32")
    text = fp.rstrip(b"\0")
    if b"\0" in text:
        raise ValueError("fingerprint has a non-zero byte after its zero padding")
    if any(not 0x20 <= b < 0x7F for b in text):
        raise ValueError("fingerprint is not printable ASCII")
    return text.decode("ascii")

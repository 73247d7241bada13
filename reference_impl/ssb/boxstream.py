"""Box stream: SSB's bulk encryption after the handshake, sans-I/O.

Follows "Box stream" in scuttlebutt-protocol-guide. Each message is a 34-byte
header box (secret box 1, nonce ``n``) holding the body length (u16
big-endian) and the body's 16-byte authentication tag, followed by the body
ciphertext without its tag (secret box 2, nonce ``n + 1``). The next header
uses ``n + 2``. The stream ends with a header whose plaintext is 18 zero bytes.

Errors caused by the peer raise :class:`BoxStreamError`; using an encoder or
decoder in the wrong state (a caller bug) raises RuntimeError.
"""

from __future__ import annotations

from collections.abc import Iterable

import nacl.bindings
from nacl.exceptions import CryptoError

from ..faults import FaultPoints
from .faults import SPECS as FAULT_SPECS
from .faults import Fault

MAX_BODY = 4096
HEADER_SIZE = 34
KEY_SIZE = 32
NONCE_SIZE = 24

_TAG_SIZE = 16
_LENGTH_SIZE = 2
_GOODBYE_PLAINTEXT = bytes(_LENGTH_SIZE + _TAG_SIZE)
_NONCE_MODULUS = 1 << (8 * NONCE_SIZE)
_NONCE_MASK = _NONCE_MODULUS - 1
_secretbox = nacl.bindings.crypto_secretbox_easy
_secretbox_open = nacl.bindings.crypto_secretbox_open_easy
# The largest body a header can declare; seal_box allows up to this so that
# callers can forge headers that exceed MAX_BODY.
_MAX_DECLARABLE_BODY = (1 << (8 * _LENGTH_SIZE)) - 1


class BoxStreamError(Exception):
    """The peer sent box stream data that must be rejected.

    Attributes:
        reason: a short, stable description such as
            ``"header authentication failed"``.
        bodies: the bodies the failing ``receive_data`` call decoded, in
            order, before it met the bad data; they are authentic.
    """

    def __init__(self, reason: str, bodies: list[bytes] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.bodies = bodies if bodies is not None else []


def increment_nonce(nonce: bytes, by: int = 1) -> bytes:
    """Add ``by`` to a 24-byte big-endian nonce, wrapping modulo 2**192."""
    if len(nonce) != NONCE_SIZE:
        raise ValueError(f"nonce must be {NONCE_SIZE} bytes, got {len(nonce)}")
    value = (int.from_bytes(nonce, "big") + by) % _NONCE_MODULUS
    return value.to_bytes(NONCE_SIZE, "big")


def seal_box(key: bytes, nonce: bytes, body: bytes) -> tuple[bytes, bytes]:
    """Encrypt one message; return ``(header, body_ciphertext)``.

    ``nonce`` is the header's nonce; the body uses the next one. Bodies up to
    65535 bytes are accepted so that conformance suites can forge oversized
    boxes; a conforming sender never exceeds MAX_BODY.
    """
    if len(body) > _MAX_DECLARABLE_BODY:
        raise ValueError(f"a header cannot declare a {len(body)}-byte body")
    sealed_body = nacl.bindings.crypto_secretbox_easy(body, increment_nonce(nonce), key)
    tag, body_ciphertext = sealed_body[:_TAG_SIZE], sealed_body[_TAG_SIZE:]
    header_plaintext = len(body).to_bytes(_LENGTH_SIZE, "big") + tag
    header = nacl.bindings.crypto_secretbox_easy(header_plaintext, nonce, key)
    return header, body_ciphertext


def seal_goodbye(key: bytes, nonce: bytes) -> bytes:
    """The 34-byte goodbye header: 18 zero bytes boxed with ``nonce``."""
    return nacl.bindings.crypto_secretbox_easy(_GOODBYE_PLAINTEXT, nonce, key)


def _check_key_and_nonce(key: bytes, nonce: bytes) -> None:
    if len(key) != KEY_SIZE:
        raise ValueError(f"key must be {KEY_SIZE} bytes, got {len(key)}")
    if len(nonce) != NONCE_SIZE:
        raise ValueError(f"nonce must be {NONCE_SIZE} bytes, got {len(nonce)}")


class BoxStreamEncoder:
    """Turns plaintext into box stream bytes for one direction."""

    def __init__(self, key: bytes, nonce: bytes, *, faults: Iterable[Fault | str] = ()) -> None:
        _check_key_and_nonce(key, nonce)
        # Rules broken on purpose (faults.py), applied at the fault points.
        points = FaultPoints(FAULT_SPECS, frozenset(faults))
        self._max_body = points.apply("largest-box-body", MAX_BODY)
        self._key = bytes(key)
        # The nonce is kept as an integer: incrementing it is then one
        # addition, and only the nonces actually used are turned into bytes.
        self._counter = int.from_bytes(nonce, "big")
        self._ended = False

    @property
    def nonce(self) -> bytes:
        """The nonce the next header will use."""
        return self._counter.to_bytes(NONCE_SIZE, "big")

    @property
    def ended(self) -> bool:
        """Whether goodbye() has been called."""
        return self._ended

    def encode_box(self, body: bytes) -> bytes:
        """Exactly one box (header then body) for a 1..MAX_BODY-byte body."""
        if self._ended:
            raise RuntimeError("stream already ended with goodbye")
        # An empty body is legal on the wire but useless, and the guide's
        # figures give the range as 1 to 4096 bytes, so never send one.
        if not 0 < len(body) <= MAX_BODY:
            raise ValueError(f"a box body must be 1..{MAX_BODY} bytes, got {len(body)}")
        return self._seal(body)

    def _seal(self, body: bytes) -> bytes:
        # seal_box() inlined: this is the hot path of every connection.
        counter = self._counter
        key = self._key
        self._counter = (counter + 2) & _NONCE_MASK
        sealed_body = _secretbox(
            body, ((counter + 1) & _NONCE_MASK).to_bytes(NONCE_SIZE, "big"), key
        )
        header = _secretbox(
            len(body).to_bytes(_LENGTH_SIZE, "big") + sealed_body[:_TAG_SIZE],
            counter.to_bytes(NONCE_SIZE, "big"),
            key,
        )
        return b"".join((header, memoryview(sealed_body)[_TAG_SIZE:]))

    def encode(self, data: bytes) -> bytes:
        """Box ``data`` as consecutive boxes of at most MAX_BODY bytes (b"" for b"")."""
        size = len(data)
        if not size:
            return b""
        if self._ended:
            raise RuntimeError("stream already ended with goodbye")
        if type(data) is not bytes:
            data = bytes(data)
        box_size = self._max_body
        if size <= box_size:
            return self._seal(data)
        seal = self._seal
        return b"".join(
            [seal(data[start : start + box_size]) for start in range(0, size, box_size)]
        )

    def goodbye(self) -> bytes:
        """The goodbye header; the encoder accepts nothing afterwards."""
        if self._ended:
            raise RuntimeError("stream already ended with goodbye")
        self._ended = True
        header = seal_goodbye(self._key, self.nonce)
        self._counter = (self._counter + 1) & _NONCE_MASK
        return header


class BoxStreamDecoder:
    """Turns box stream bytes from one direction back into bodies.

    Accepts input in any chunking. ``max_body`` is the largest body length a
    header may declare; larger ones are rejected before the body is read.
    """

    def __init__(
        self,
        key: bytes,
        nonce: bytes,
        max_body: int = MAX_BODY,
        *,
        faults: Iterable[Fault | str] = (),
    ) -> None:
        _check_key_and_nonce(key, nonce)
        # Rules broken on purpose (faults.py); their points are met only when a tag fails.
        self._points = FaultPoints(FAULT_SPECS, frozenset(faults))
        self._key = bytes(key)
        self._counter = int.from_bytes(nonce, "big")
        self._max_body = max_body
        # Bytes received but not yet decoded: part of a header or of a body.
        self._buffer = bytearray()
        # (length, tag) from the last header while its body is still awaited.
        self._pending_body: tuple[int, bytes] | None = None
        self._ended = False
        self._failed = False

    @property
    def nonce(self) -> bytes:
        """The nonce the next header is expected to use."""
        return self._counter.to_bytes(NONCE_SIZE, "big")

    @property
    def ended(self) -> bool:
        """Whether the goodbye header has been received."""
        return self._ended

    @property
    def failed(self) -> bool:
        return self._failed

    @property
    def bytes_needed(self) -> int:
        """How many more bytes the header or body being read needs (0 if none)."""
        if self._ended or self._failed:
            return 0
        if self._pending_body is None:
            return HEADER_SIZE - len(self._buffer)
        length, _ = self._pending_body
        return length - len(self._buffer)

    def receive_data(self, data: bytes) -> list[bytes]:
        """Consume bytes from the peer; return the bodies completed by them.

        Raises BoxStreamError on bad data, after which the decoder is failed
        for good; the error's ``bodies`` holds what this call decoded first.
        """
        if self._failed:
            raise RuntimeError("box stream has failed")
        bodies: list[bytes] = []
        if self._ended:
            if data:
                self._failed = True
                raise BoxStreamError("data after goodbye", bodies)
            return bodies
        pending = self._pending_body
        needed = HEADER_SIZE if pending is None else pending[0]
        buffer = self._buffer
        # Decode from one bytes object, by offset: no per-box buffer copies.
        if buffer:
            buffer += data
            if len(buffer) < needed:
                return bodies
            source = bytes(buffer)
            buffer.clear()
        else:
            if len(data) < needed:
                buffer += data
                return bodies
            source = data if type(data) is bytes else bytes(data)
        try:
            position = self._decode(source, bodies)
        except BoxStreamError as error:
            self._failed = True
            error.bodies = bodies
            raise
        if position < len(source):
            buffer += memoryview(source)[position:]
        return bodies

    def _decode(self, source: bytes, bodies: list[bytes]) -> int:
        """Decode whole headers and bodies from ``source``, appending bodies;
        return the offset of the first byte not consumed."""
        key = self._key
        counter = self._counter
        pending = self._pending_body
        max_body = self._max_body
        end = len(source)
        position = 0
        try:
            while True:
                if pending is None:
                    if end - position < HEADER_SIZE:
                        break
                    header_box = source[position : position + HEADER_SIZE]
                    header_nonce = counter.to_bytes(NONCE_SIZE, "big")
                    try:
                        plaintext = _secretbox_open(header_box, header_nonce, key)
                    except CryptoError:
                        plaintext = self._points.apply(
                            "unauthentic-header", None, box=header_box, nonce=header_nonce, key=key
                        )
                        if plaintext is None:
                            raise BoxStreamError("header authentication failed") from None
                    position += HEADER_SIZE
                    if plaintext == _GOODBYE_PLAINTEXT:
                        self._ended = True
                        counter = (counter + 1) & _NONCE_MASK
                        if position < end:
                            raise BoxStreamError("data after goodbye")
                        break
                    length = (plaintext[0] << 8) | plaintext[1]
                    if length > max_body:
                        raise BoxStreamError(f"body length exceeds {max_body}")
                    pending = (length, plaintext[_LENGTH_SIZE:])
                length, tag = pending
                if end - position < length:
                    break
                body_box = b"".join((tag, memoryview(source)[position : position + length]))
                body_nonce = ((counter + 1) & _NONCE_MASK).to_bytes(NONCE_SIZE, "big")
                try:
                    body = _secretbox_open(body_box, body_nonce, key)
                except CryptoError:
                    body = self._points.apply(
                        "unauthentic-body", None, box=body_box, nonce=body_nonce, key=key
                    )
                    if body is None:
                        raise BoxStreamError("body authentication failed") from None
                position += length
                pending = None
                counter = (counter + 2) & _NONCE_MASK
                bodies.append(body)
        finally:
            self._counter = counter
            self._pending_body = pending
        return position

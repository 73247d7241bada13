"""Ripple host protocol frames, sans-I/O: bytes in, frames and messages out.

The text (shared/specs/ripple-host/sctp-binding.txt, "Host Messages" and
"Node Messages"; the trailer from the specs README)::

    host frame:  (type) (version) (msgno) (more) (size)CRLF <size bytes> END CRLF
    node frame:  (type) (version) (msgno) (more) (size) (to-user) (from-user)CRLF <size bytes> END CRLF
    type = MSG | RPY | ERR      msgno = 0..2147483647     more = . | *     size = (integer)

``size`` counts every byte between the header's CRLF and ``END``. The
project's profile (docs/ripplehost-profile.md) fixes what the text leaves
open; this module is its codec:

- The header is printable ASCII, fields separated by exactly one space, no
  leading or trailing space, ended by CRLF (a bare LF is an error). A line
  longer than ``max_header_line`` bytes is refused before its end is seen.
- ``version`` is 1..16 visible ASCII characters; ``to-user`` and
  ``from-user`` 1..128 visible ASCII characters each.
- ``msgno`` and ``size`` are decimal digits without sign and without
  leading zeros ("0" itself is fine): one spelling per number, so two hosts
  can never read one header differently. ``msgno`` is at most 2147483647,
  ``size`` at most ``max_size`` (a profile bound; larger messages are
  chunked with ``more``), which is checked from the header alone, before any
  content is buffered.
- The ``size`` bytes must be followed by exactly ``END`` CRLF.
- A message is the content of its frames in order, joined, keyed by
  (type, msgno): chunks of several messages may interleave. The joined
  content must be a UTF-8 JSON object (no duplicate members, no NaN or
  Infinity) with a ``type`` member, a string of 1..64 characters. Every
  chunk of a message has the same version and the same users (or none).
  Bounds: ``max_message`` bytes per message, ``max_in_progress`` messages
  being reassembled at once.

Any breach raises :class:`FrameError` naming the rule; the parser is dead
after it (the text: a frame that fits neither format closes the association).
Malformed input never makes the parser buffer more than one header line
plus ``max_size`` + 5 bytes, nor raise anything but FrameError.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

VERSION = "1.0"
"""The Ripple protocol version the reference speaks."""
MAX_MSGNO = 2147483647
TYPES = ("MSG", "RPY", "ERR")
TRAILER = b"END\r\n"

DEFAULT_MAX_HEADER_LINE = 512
"""Bytes of a header line with its CRLF: a node header with a 16-byte version,
10-digit numbers and two 128-byte users takes 306."""
DEFAULT_MAX_SIZE = 65536
"""Content bytes of one frame (profile bound)."""
DEFAULT_MAX_MESSAGE = 1 << 20
"""Bytes of one reassembled message (profile bound)."""
DEFAULT_MAX_IN_PROGRESS = 32
"""Chunked messages being reassembled at once (profile bound)."""
MAX_VERSION_LEN = 16
MAX_USER_LEN = 128
MAX_TYPE_LEN = 64

_VISIBLE = rb"[\x21-\x7e]"
_NUMBER = rb"(0|[1-9][0-9]{0,9})"
_HEADER = re.compile(
    rb"(MSG|RPY|ERR) ("
    + _VISIBLE
    + rb"{1,16}) "
    + _NUMBER
    + rb" ([.*]) "
    + _NUMBER
    + rb"(?: ("
    + _VISIBLE
    + rb"{1,128}) ("
    + _VISIBLE
    + rb"{1,128}))?"
)
_HEADER_CRLF = re.compile(_HEADER.pattern + rb"\r\n")
_DIGITS = re.compile(rb"[0-9]+")
_TYPES = {b"MSG": "MSG", b"RPY": "RPY", b"ERR": "ERR"}
_TEXT_CACHE: dict[bytes, str] = {}


def _text(value: bytes) -> str:
    """ASCII field -> str, memoised: versions and user names repeat on a
    stream (bounded: the cache is dropped when it grows large)."""
    text = _TEXT_CACHE.get(value)
    if text is None:
        if len(_TEXT_CACHE) > 4096:
            _TEXT_CACHE.clear()
        text = _TEXT_CACHE[value] = value.decode("ascii")
    return text


class FrameError(ValueError):
    """A frame or message that breaks the grammar or a bound. ``reason``
    names the rule (stable strings, used by vectors/ripplehost/malformed.json);
    ``data`` holds the offending bytes as far as they were read."""

    def __init__(self, reason: str, data: bytes = b"") -> None:
        super().__init__(reason)
        self.reason = reason
        self.data = bytes(data)
        self.frames: list[Frame] = []
        """Set by :meth:`FrameParser.receive_data`: the frames the same call
        completed before the bad one (they were valid and are handled first)."""


class Frame(NamedTuple):
    """One frame. ``more`` is True for ``*`` (more frames follow). Node frames
    have ``to_user`` and ``from_user``; host frames have None for both."""

    type: str
    version: str
    msgno: int
    more: bool
    payload: bytes
    to_user: str | None = None
    from_user: str | None = None

    @property
    def is_node(self) -> bool:
        return self.to_user is not None


class Message(NamedTuple):
    """A complete message: its frames' content joined and read as JSON."""

    type: str
    version: str
    msgno: int
    body: dict[str, Any]
    content: bytes
    to_user: str | None = None
    from_user: str | None = None
    frames: int = 1

    @property
    def is_node(self) -> bool:
        return self.to_user is not None


# ------------------------------------------------------------------ encoding


def encode_header(frame: Frame) -> bytes:
    more = "*" if frame.more else "."
    users = "" if frame.to_user is None else f" {frame.to_user} {frame.from_user}"
    return (
        f"{frame.type} {frame.version} {frame.msgno} {more} {len(frame.payload)}{users}\r\n".encode(
            "ascii"
        )
    )


def encode_frame(frame: Frame) -> bytes:
    """The bytes of ``frame``; ValueError for values the grammar cannot carry
    (the codec never writes what it would refuse to read)."""
    if frame.type not in TYPES:
        raise ValueError(f"type must be one of {TYPES}")
    if not 0 <= frame.msgno <= MAX_MSGNO:
        raise ValueError(f"msgno must be in 0..{MAX_MSGNO}")
    if (frame.to_user is None) != (frame.from_user is None):
        raise ValueError("a node frame has both to-user and from-user, a host frame neither")
    for name, value, limit in (
        ("version", frame.version, MAX_VERSION_LEN),
        ("to-user", frame.to_user, MAX_USER_LEN),
        ("from-user", frame.from_user, MAX_USER_LEN),
    ):
        if value is not None and not (
            0 < len(value) <= limit and all(0x21 <= ord(c) <= 0x7E for c in value)
        ):
            raise ValueError(f"{name} must be 1..{limit} visible ASCII characters, got {value!r}")
    return encode_header(frame) + frame.payload + TRAILER


def encode_body(body: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON, the form every reference node writes."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def message_frames(
    type_: str,
    msgno: int,
    body: dict[str, Any] | bytes,
    *,
    version: str = VERSION,
    to_user: str | None = None,
    from_user: str | None = None,
    chunk_size: int | None = None,
) -> list[Frame]:
    """The frames of one message: a single frame, or chunks of at most
    ``chunk_size`` content bytes (the last with more ``.``). ``body`` is a
    JSON object, or bytes sent as they are (for tests of bad content)."""
    content = body if isinstance(body, bytes) else encode_body(body)
    if chunk_size is None or len(content) <= chunk_size:
        return [Frame(type_, version, msgno, False, content, to_user, from_user)]
    if chunk_size < 1:
        raise ValueError("chunk_size must be >= 1")
    pieces = [content[at : at + chunk_size] for at in range(0, len(content), chunk_size)]
    return [
        Frame(type_, version, msgno, index < len(pieces) - 1, piece, to_user, from_user)
        for index, piece in enumerate(pieces)
    ]


def error_body(code: str, message: str, **details: Any) -> dict[str, Any]:
    """The profile's ERR body."""
    return {"type": "error", "error": code, "message": message, **details}


def encode_message(type_: str, msgno: int, body: dict[str, Any] | bytes, **options: Any) -> bytes:
    """The bytes of one message's frames in order (options as :func:`message_frames`)."""
    return b"".join(encode_frame(frame) for frame in message_frames(type_, msgno, body, **options))


# ------------------------------------------------------------------ header diagnosis


def _number_problem(name: str, text: bytes, limit: int, limit_reason: str) -> str | None:
    if not _DIGITS.fullmatch(text):
        return f"{name} is not a decimal number"
    if len(text) > 1 and text[0:1] == b"0":
        return f"{name} has a leading zero"
    if len(text) > 10 or int(text) > limit:
        return limit_reason
    return None


def header_problem(line: bytes, max_size: int = DEFAULT_MAX_SIZE) -> str | None:
    """Why ``line`` (a header without its CRLF) is not a valid header, or None.
    The slow path: the parser calls it only when the fast pattern does not
    match, or to check ``size`` against its bound."""
    # The checks run in the order of what a prefix of the line can decide
    # (type, then bytes), so a line fed in pieces fails with the same reason
    # as the whole line: see _partial_problem.
    if line[:3] not in (b"MSG", b"RPY", b"ERR"):
        return "unknown frame type"
    if any(byte < 0x20 or byte > 0x7E for byte in line):
        return "non-printable byte in header"
    if line.startswith(b" ") or line.endswith(b" ") or b"  " in line:
        return "fields not separated by single spaces"
    fields = line.split(b" ")
    if fields[0] not in (b"MSG", b"RPY", b"ERR"):
        return "unknown frame type"
    if len(fields) not in (5, 7):
        return "wrong number of header fields"
    if len(fields[1]) > MAX_VERSION_LEN:
        return "version too long"
    problem = _number_problem("msgno", fields[2], MAX_MSGNO, "msgno above 2147483647")
    if problem:
        return problem
    if fields[3] not in (b".", b"*"):
        return "more is neither . nor *"
    problem = _number_problem("size", fields[4], max_size, "size above bound")
    if problem:
        return problem
    if len(fields) == 7:
        if len(fields[5]) > MAX_USER_LEN:
            return "to-user too long"
        if len(fields[6]) > MAX_USER_LEN:
            return "from-user too long"
    return None


def _partial_problem(partial: bytes) -> str | None:
    """What already rules out a header line whose end has not arrived, so a
    peer sending garbage without a line feed is refused at once, not after
    ``max_header_line`` bytes."""
    head = partial[:3]
    if not any(kind.startswith(head) for kind in (b"MSG", b"RPY", b"ERR")) or not head:
        return "unknown frame type"
    body = partial[:-1] if partial.endswith(b"\r") else partial
    if any(byte < 0x20 or byte > 0x7E for byte in body):
        return "non-printable byte in header"
    return None


# ------------------------------------------------------------------ parsing


class FrameParser:
    """Incremental parser of a stream of frames: ``receive_data(bytes)`` gives
    the frames completed so far. After a :class:`FrameError` it is dead and
    raises again on any further call.

    ``lenient_trailer``, ``size_by_search``, ``lenient_spaces`` and
    ``line_trailer`` exist only for the reference node's faults
    (accept-missing-end and client-accept-missing-end, ignore-size and
    client-ignore-size, split-header-on-whitespace and
    client-split-header-on-whitespace, accept-bare-lf-trailer): the first
    takes any five bytes after the content as the trailer, the second ends
    the content at the first ``END`` CRLF whatever ``size`` says, the third
    reads a header line split on runs of spaces (a space before the CRLF, or
    two between fields, is taken), as a reader splitting the line on
    whitespace does, the fourth reads the trailer as a line, ``END`` ended by
    CRLF or a bare LF, ``lenient_numbers`` (fault int-parse-numbers and
    client-int-parse-numbers) reads msgno and size as a general integer
    parser does (``02``, ``+15``).
    """

    def __init__(
        self,
        *,
        max_header_line: int = DEFAULT_MAX_HEADER_LINE,
        max_size: int = DEFAULT_MAX_SIZE,
        lenient_trailer: bool = False,
        size_by_search: bool = False,
        lenient_spaces: bool = False,
        line_trailer: bool = False,
        lenient_numbers: bool = False,
    ) -> None:
        if max_size > MAX_MSGNO:
            raise ValueError("max_size above the protocol's 2147483647")
        self.max_header_line = max_header_line
        self.max_size = max_size
        self.lenient_trailer = lenient_trailer
        self.size_by_search = size_by_search
        self.lenient_spaces = lenient_spaces
        self.line_trailer = line_trailer
        self.lenient_numbers = lenient_numbers
        self._buffer = b""
        self._error: FrameError | None = None

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    @property
    def error(self) -> FrameError | None:
        return self._error

    def drain(self) -> bytes:
        """The bytes of an unfinished frame, handed back and forgotten: for a
        reader that goes on reading the stream another way (a frame begun
        before must be read whole, not from its middle)."""
        data, self._buffer = self._buffer, b""
        return data

    def _fail(self, reason: str, data: bytes) -> FrameError:
        self._error = FrameError(reason, data)
        self._buffer = b""
        return self._error

    def receive_data(self, data: bytes) -> list[Frame]:
        if self._error is not None:
            raise FrameError(self._error.reason, self._error.data)
        # One immutable copy per call: slicing and matching bytes at offsets
        # is the fast path (>= 200,000 frames/s, bench/ripplehost_bench.py).
        buf = self._buffer + data if self._buffer else bytes(data)
        frames: list[Frame] = []
        pos = 0
        end = len(buf)
        fast = _HEADER_CRLF.match
        max_line = self.max_header_line
        max_size = self.max_size
        check_trailer = not self.lenient_trailer
        append = frames.append
        try:
            while pos < end:
                match = fast(buf, pos)
                if match is None or match.end() - pos > max_line:
                    header = self._slow_header(buf, pos, end)
                    if header is None:
                        break  # the header line is not complete yet
                    fields, start = header
                else:
                    fields, start = match.groups(), match.end()
                kind, version, msgno_text, more, size_text, to_user, from_user = fields
                msgno = int(msgno_text)
                if msgno > MAX_MSGNO:
                    raise self._fail("msgno above 2147483647", buf[pos:start])
                size = int(size_text)
                if size > max_size:
                    raise self._fail("size above bound", buf[pos:start])
                if self.size_by_search:
                    found = buf.find(TRAILER, start, start + max_size + 5)
                    if found < 0:
                        if end - start >= max_size + 5:
                            raise self._fail("size above bound", buf[pos:start])
                        break
                    size = found - start
                stop = start + size
                trailer_end = stop + 5
                if self.line_trailer and buf.startswith(b"END\n", stop):
                    trailer_end = stop + 4
                elif end < stop + 5:
                    break
                elif check_trailer and not buf.startswith(TRAILER, stop):
                    raise self._fail("missing END trailer", buf[pos : stop + 5])
                append(
                    Frame(
                        _TYPES[kind],
                        _text(version),
                        msgno,
                        more == b"*",
                        buf[start:stop],
                        None if to_user is None else _text(to_user),
                        None if from_user is None else _text(from_user),
                    )
                )
                pos = trailer_end
        except FrameError as exc:
            exc.frames = frames
            raise
        finally:
            if self._error is None:
                self._buffer = buf[pos:] if pos < end else b""
        return frames

    def _slow_header(
        self, buf: bytes, pos: int, end: int
    ) -> tuple[tuple[bytes | None, ...], int] | None:
        """The header at ``pos`` when the fast pattern did not match it: its
        fields and the offset after its CRLF, None while its line is
        incomplete (and not yet refusable), or FrameError naming the rule it
        breaks."""
        max_line = self.max_header_line
        newline = buf.find(b"\n", pos, pos + max_line)
        if newline < 0:
            # An incomplete line may already be beyond repair: say so now, not at its end.
            partial = buf[pos : min(end, pos + max_line)]
            problem = _partial_problem(partial)
            if problem:
                raise self._fail(problem, partial)
            if end - pos >= max_line:
                raise self._fail("header line too long", partial)
            return None
        problem = _partial_problem(buf[pos:newline])
        if problem:
            raise self._fail(problem, buf[pos : newline + 1])
        if buf[newline - 1] != 0x0D:
            raise self._fail("header line not ended by CRLF", buf[pos : newline + 1])
        line = buf[pos : newline - 1]
        match = _HEADER_CRLF.match(buf, pos)
        if match is None and self.lenient_spaces:
            match = _HEADER_CRLF.fullmatch(b" ".join(line.split()) + b"\r\n")
            if match is not None:
                return match.groups(), newline + 1
        if match is None and self.lenient_numbers:
            fields = line.split(b" ")
            try:
                if len(fields) in (5, 7):
                    fields[2], fields[4] = (b"%d" % int(fields[2]), b"%d" % int(fields[4]))
                    match = _HEADER_CRLF.fullmatch(b" ".join(fields) + b"\r\n")
            except ValueError:
                match = None
            if match is not None:
                return match.groups(), newline + 1
        if match is None:
            raise self._fail(
                header_problem(line, self.max_size) or "malformed header", line + b"\r\n"
            )
        return match.groups(), match.end()


def decode_body(content: bytes, *, first_value: bool = False) -> dict[str, Any]:
    """A message's content as the profile reads it: a UTF-8 JSON object with a
    string ``type`` of 1..64 characters; FrameError otherwise.

    ``first_value`` exists only for the reference node's fault
    accept-trailing-content: the first JSON value of the content is read and
    the bytes after it are ignored, as a streaming decoder reading one value
    does."""
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        raise FrameError("message is not UTF-8", content) from None
    try:
        if first_value:
            decoder = json.JSONDecoder(
                object_pairs_hook=_no_duplicates, parse_constant=_no_constant
            )
            value, _ = decoder.raw_decode(text.lstrip())
        else:
            value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise FrameError("message is not JSON", content) from None
    if not isinstance(value, dict):
        raise FrameError("message is not a JSON object", content)
    kind = value.get("type")
    if not isinstance(kind, str) or not kind:
        raise FrameError("message has no type", content)
    if len(kind) > MAX_TYPE_LEN:
        raise FrameError("message type too long", content)
    return value


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("duplicate member")
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class Reassembler:
    """Joins chunked messages, keyed by (type, msgno), so chunks of several
    messages may interleave. ``add(frame)`` gives the Message a frame
    completes, or None while more frames are due."""

    def __init__(
        self,
        *,
        max_message: int = DEFAULT_MAX_MESSAGE,
        max_in_progress: int = DEFAULT_MAX_IN_PROGRESS,
        first_value: bool = False,
    ) -> None:
        self.max_message = max_message
        self.max_in_progress = max_in_progress
        self.first_value = first_value
        """Only for the fault accept-trailing-content (see :func:`decode_body`)."""
        self._parts: dict[tuple[str, int], tuple[Frame, list[bytes], int]] = {}

    def in_progress(self, type_: str, msgno: int) -> bool:
        return (type_, msgno) in self._parts

    @property
    def pending(self) -> int:
        return len(self._parts)

    def add(self, frame: Frame) -> Message | None:
        key = (frame.type, frame.msgno)
        started = self._parts.get(key)
        if started is None:
            if not frame.more:
                return self._complete(frame, frame.payload, 1)
            if len(self._parts) >= self.max_in_progress:
                raise FrameError("too many messages in progress", encode_header(frame))
            self._parts[key] = (frame, [frame.payload], len(frame.payload))
            return None
        first, chunks, total = started
        if frame.version != first.version:
            raise FrameError("chunk changes version", encode_header(frame))
        if (frame.to_user, frame.from_user) != (first.to_user, first.from_user):
            raise FrameError("chunk changes users", encode_header(frame))
        total += len(frame.payload)
        if total > self.max_message:
            raise FrameError("message above bound", encode_header(frame))
        chunks.append(frame.payload)
        if frame.more:
            self._parts[key] = (first, chunks, total)
            return None
        del self._parts[key]
        return self._complete(first, b"".join(chunks), len(chunks))

    def _complete(self, first: Frame, content: bytes, frames: int) -> Message:
        if len(content) > self.max_message:
            raise FrameError("message above bound", content[:64])
        return Message(
            first.type,
            first.version,
            first.msgno,
            decode_body(content, first_value=self.first_value),
            content,
            first.to_user,
            first.from_user,
            frames,
        )


class MessageReader:
    """Frames and reassembly together: ``receive_data(bytes)`` gives the
    complete messages (for callers that need no per-frame checks)."""

    def __init__(self, **bounds: int) -> None:
        parser_keys = {"max_header_line", "max_size"}
        self.parser = FrameParser(**{k: v for k, v in bounds.items() if k in parser_keys})
        self.reassembler = Reassembler(**{k: v for k, v in bounds.items() if k not in parser_keys})

    def receive_data(self, data: bytes) -> list[Message]:
        messages = []
        for frame in self.parser.receive_data(data):
            message = self.reassembler.add(frame)
            if message is not None:
                messages.append(message)
        return messages


def parse_frames(data: bytes, **bounds: int) -> list[Frame]:
    """Every frame of a complete byte string; FrameError if it breaks the
    grammar or ends in the middle of a frame."""
    parser = FrameParser(**bounds)
    frames = parser.receive_data(data)
    if parser.buffered:
        raise FrameError("stream ends inside a frame", data[len(data) - parser.buffered :])
    return frames


def frames_bytes(frames: Iterable[Frame]) -> bytes:
    return b"".join(encode_frame(frame) for frame in frames)

"""STOMP 1.2 frames, sans-I/O: bytes in, frames out; frames in, bytes out.

The grammar (STOMP 1.2, "Augmented BNF")::

    frame   = command EOL *( header EOL ) EOL *OCTET NULL *( EOL )
    EOL     = [CR] LF
    header  = header-name ":" header-value

What this module decides, and why:

- Header names and values are escaped (``\\r \\n \\c \\\\``) in every frame
  but CONNECT and CONNECTED ("Value Encoding"); an undefined escape such as
  ``\\t`` is a fatal error, as the text says it MUST be, and so is a lone
  backslash ending a name or value (octet 92, then the line's end: no
  escape of the four).
- A repeated header is kept in the frame in order; :meth:`Frame.get` gives
  the first, which is the one that counts ("Repeated Header Entries").
- With ``content-length`` the body is exactly that many octets, NULs
  included, and a NUL must follow; without it, the body ends at the first
  NUL ("Body", "Standard Headers").
- EOLs between frames are heart-beats and come out as :data:`HEARTBEAT`.
- Every size is bounded (frame, header line, header count, header block), so
  a hostile peer can make the parser refuse a frame, never make it buffer
  without end. After a :class:`FrameError` the parser is dead: STOMP has no
  way to find the next frame boundary in a stream that broke the grammar.
- A header line is split at its first colon. The grammar excludes colons
  from values, but deployed peers (RabbitMQ, stomp.py) send and accept them
  unescaped in CONNECT frames (``host:/node``): refusing them would fail
  nodes the network relies on, so the parser reads them.
"""

from __future__ import annotations

from typing import Callable, Iterable, NamedTuple

CLIENT_COMMANDS = frozenset(
    {
        "SEND",
        "SUBSCRIBE",
        "UNSUBSCRIBE",
        "BEGIN",
        "COMMIT",
        "ABORT",
        "ACK",
        "NACK",
        "DISCONNECT",
        "CONNECT",
        "STOMP",
    }
)
SERVER_COMMANDS = frozenset({"CONNECTED", "MESSAGE", "RECEIPT", "ERROR"})
ALL_COMMANDS = CLIENT_COMMANDS | SERVER_COMMANDS
UNESCAPED_COMMANDS = frozenset({"CONNECT", "CONNECTED"})
"""Frames whose headers are not escaped (STOMP 1.2, "Value Encoding"), for
compatibility with STOMP 1.0 peers."""

DEFAULT_MAX_FRAME_BYTES = 1 << 20
DEFAULT_MAX_HEADERS = 64
DEFAULT_MAX_HEADER_LINE = 8192

_ESCAPES = {ord("r"): "\r", ord("n"): "\n", ord("c"): ":", ord("\\"): "\\"}
_ESCAPE_TABLE = str.maketrans({"\\": "\\\\", "\r": "\\r", "\n": "\\n", ":": "\\c"})


class _Heartbeat:
    """One EOL received between frames: a heart-beat."""

    _instance: "_Heartbeat | None" = None

    def __new__(cls) -> "_Heartbeat":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "HEARTBEAT"


HEARTBEAT = _Heartbeat()


class FrameError(ValueError):
    """A frame that breaks the grammar or a bound. ``reason`` says which
    rule, ``data`` holds the bytes of the frame as far as they were read."""

    def __init__(self, reason: str, data: bytes = b"") -> None:
        super().__init__(reason)
        self.reason = reason
        self.data = bytes(data)


class FrameLimitExceeded(FrameError):
    """A frame beyond a bound the reader sets (its size, a header line's,
    the number of headers): STOMP 1.2 "Size Limits" lets each side set
    them, so the frame may be well formed; a reader refuses it all the same."""


class Frame(NamedTuple):
    """One frame: command, headers in wire order (repeats kept), body.
    A tuple: cheap to make, immutable, comparable."""

    command: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""

    def get(self, name: str, default: str | None = None) -> str | None:
        """The first value of header ``name`` (a repeated header's first
        entry is the one that counts)."""
        for key, value in self.headers:
            if key == name:
                return value
        return default

    def all(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]

    def has(self, name: str) -> bool:
        return any(key == name for key, _ in self.headers)

    def with_headers(self, *pairs: tuple[str, str], replace: bool = True) -> "Frame":
        """A copy with ``pairs`` set: replacing every entry of those names
        (``replace``), or added after the existing ones."""
        names = {name for name, _ in pairs}
        kept = tuple(h for h in self.headers if not (replace and h[0] in names))
        return Frame(self.command, kept + tuple(pairs), self.body)

    def without(self, *names: str) -> "Frame":
        return Frame(self.command, tuple(h for h in self.headers if h[0] not in names), self.body)

    def __repr__(self) -> str:
        shown = self.body[:64]
        more = f"...(+{len(self.body) - 64})" if len(self.body) > 64 else ""
        return f"Frame({self.command}, {list(self.headers)!r}, body={shown!r}{more})"


def escape_header_value(text: str) -> str:
    return text.translate(_ESCAPE_TABLE)


def unescape_header_value(text: str) -> str:
    """Undo the escaping; an undefined escape sequence (or a trailing lone
    backslash) raises ValueError, a fatal protocol error."""
    if "\\" not in text:
        return text
    out = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\":
            out.append(char)
            index += 1
            continue
        if index + 1 >= len(text):
            raise ValueError("a backslash ends the header without an escape sequence")
        replacement = _ESCAPES.get(ord(text[index + 1]))
        if replacement is None:
            raise ValueError(f"undefined escape sequence \\{text[index + 1]}")
        out.append(replacement)
        index += 2
    return "".join(out)


def encode_frame(frame: Frame, *, content_length: bool | None = None, eol: bytes = b"\n") -> bytes:
    """The bytes of ``frame``. ``content_length``: None adds the header when
    the body is not empty and the frame has none; False never adds it (the
    body must then hold no NUL); True always adds it. ``eol`` is b"\\n" or
    b"\\r\\n" for every line of the frame."""
    if eol not in (b"\n", b"\r\n"):
        raise ValueError("eol must be LF or CRLF")
    escape = frame.command not in UNESCAPED_COMMANDS
    headers = list(frame.headers)
    if content_length is True or (
        content_length is None and frame.body and not frame.has("content-length")
    ):
        headers.append(("content-length", str(len(frame.body))))
    if content_length is False and b"\x00" in frame.body:
        raise ValueError("a body holding NUL needs a content-length header")
    lines = [frame.command]
    for name, value in headers:
        if escape:
            lines.append(f"{escape_header_value(name)}:{escape_header_value(value)}")
        else:
            for part in (name, value):
                if "\r" in part or "\n" in part or (part is name and ":" in part):
                    raise ValueError(
                        f"{frame.command} headers are not escaped: {part!r} cannot be sent"
                    )
            lines.append(f"{name}:{value}")
    head = eol.join(line.encode("utf-8") for line in lines)
    return head + eol + eol + frame.body + b"\x00"


def parse_heart_beat(value: str) -> tuple[int, int]:
    """``cx,cy`` in milliseconds; ValueError when it is not two
    non-negative integers."""
    parts = value.split(",")
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() for p in parts):
        raise ValueError(f"heart-beat must be two non-negative integers 'cx,cy', got {value!r}")
    return int(parts[0]), int(parts[1])


def heart_beat_interval(sender_can: int, receiver_wants: int) -> int:
    """Milliseconds between the sender's heart-beats (0: none): the larger
    of what the sender can do and the receiver wants, when both are
    non-zero (STOMP 1.2, "Heart-beating")."""
    if sender_can == 0 or receiver_wants == 0:
        return 0
    return max(sender_can, receiver_wants)


class FrameParser:
    """Incremental parser of a stream of STOMP frames.

    ``commands``: the commands accepted (default: every STOMP 1.2 command);
    any other is a :class:`FrameError`. ``max_frame_bytes`` bounds a whole
    frame (headers and body), ``max_header_line`` one header line,
    ``max_headers`` their number. ``unescape`` decodes each header name and
    value of an escaped frame (every frame but CONNECT and CONNECTED); a
    ValueError it raises is a :class:`FrameError`.
    """

    def __init__(
        self,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_headers: int = DEFAULT_MAX_HEADERS,
        max_header_line: int = DEFAULT_MAX_HEADER_LINE,
        commands: Iterable[str] | None = ALL_COMMANDS,
        unescape: Callable[[str], str] = unescape_header_value,
    ) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.max_headers = max_headers
        self.max_header_line = max_header_line
        self.commands = frozenset(commands) if commands is not None else None
        self.unescape = unescape
        self._buffer = bytearray()
        self._error: FrameError | None = None

    @property
    def buffered(self) -> bytes:
        """Bytes received that do not make a whole frame yet."""
        return bytes(self._buffer)

    @property
    def failed(self) -> FrameError | None:
        return self._error

    def receive_data(self, data: bytes) -> list[Frame | _Heartbeat]:
        if self._error is not None:
            raise self._error
        self._buffer += data
        view = bytes(self._buffer)
        out: list[Frame | _Heartbeat] = []
        pos = 0
        try:
            while pos < len(view):
                item, pos_after = self._next(view, pos)
                if item is None:
                    break
                out.append(item)
                pos = pos_after
        except FrameError as exc:
            self._error = exc
            del self._buffer[:pos]
            if out:
                # The frames before the bad one were whole: hand them over
                # first; the error comes with the next call.
                return out
            raise
        del self._buffer[:pos]
        return out

    def _fail(
        self, reason: str, view: bytes, start: int, end: int | None = None, *, limit: bool = False
    ) -> FrameError:
        kind = FrameLimitExceeded if limit else FrameError
        return kind(reason, view[start : end if end is not None else start + 512])

    def _next(self, view: bytes, pos: int) -> tuple[Frame | _Heartbeat | None, int]:
        first = view[pos]
        if first == 0x0A:
            return HEARTBEAT, pos + 1
        if first == 0x0D:
            if len(view) < pos + 2:
                return None, pos
            if view[pos + 1] != 0x0A:
                raise self._fail("a CR outside a frame is not followed by LF", view, pos, pos + 2)
            return HEARTBEAT, pos + 2
        # The header block ends at the first empty line (LF LF or LF CR LF).
        limit = min(len(view), pos + self.max_frame_bytes + 2)
        lf = view.find(b"\n\n", pos, limit)
        # Only up to the LF LF found: past it the bytes are the body's.
        crlf = view.find(b"\n\r\n", pos, lf + 1 if lf != -1 else limit)
        if lf == -1 and crlf == -1:
            self._check_partial_header(view, pos)
            return None, pos
        if crlf != -1 and (lf == -1 or crlf < lf):
            end, body_start = crlf, crlf + 3
        else:
            end, body_start = lf, lf + 2
        command, headers = self._headers(view, pos, end, body_start)
        length_text = None
        for name, value in headers:
            if name == "content-length":
                length_text = value
                break
        if length_text is not None:
            if not length_text.isascii() or not length_text.isdigit():
                raise self._fail(
                    f"content-length {length_text!r} is not a non-negative integer",
                    view,
                    pos,
                    body_start,
                )
            length = int(length_text)
            if body_start - pos + length > self.max_frame_bytes:
                raise self._fail(
                    f"frame of {body_start - pos + length} bytes (content-length {length}) exceeds "
                    f"the limit of {self.max_frame_bytes} bytes",
                    view,
                    pos,
                    body_start,
                    limit=True,
                )
            if len(view) < body_start + length + 1:
                return None, pos
            if view[body_start + length] != 0:
                raise self._fail(
                    f"the octet after the {length}-byte body (content-length) is "
                    f"0x{view[body_start + length]:02x}, not the NUL that ends a frame",
                    view,
                    pos,
                    body_start + length + 1,
                )
            return Frame(
                command, headers, view[body_start : body_start + length]
            ), body_start + length + 1
        nul = view.find(b"\x00", body_start, pos + self.max_frame_bytes + 1)
        if nul == -1:
            if len(view) - pos > self.max_frame_bytes:
                raise self._fail(
                    f"no NUL within the limit of {self.max_frame_bytes} bytes a frame may have",
                    view,
                    pos,
                    limit=True,
                )
            return None, pos
        return Frame(command, headers, view[body_start:nul]), nul + 1

    def _check_partial_header(self, view: bytes, pos: int) -> None:
        """Bounds on a header block still arriving."""
        if len(view) - pos > self.max_frame_bytes:
            raise self._fail(
                f"no end of headers within the limit of {self.max_frame_bytes} bytes a frame may have",
                view,
                pos,
                limit=True,
            )
        last_newline = view.rfind(b"\n", pos)
        if len(view) - max(last_newline + 1, pos) > self.max_header_line + 1:
            raise self._fail(
                f"a header line longer than the limit of {self.max_header_line} bytes",
                view,
                pos,
                limit=True,
            )
        if view.count(b"\n", pos) > self.max_headers + 1:
            raise self._fail(
                f"more than the limit of {self.max_headers} headers", view, pos, limit=True
            )

    def _headers(
        self, view: bytes, pos: int, end: int, body_start: int
    ) -> tuple[str, tuple[tuple[str, str], ...]]:
        try:
            block = view[pos:end].decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail(
                "the command or a header is not UTF-8", view, pos, body_start
            ) from None
        lines = block.split("\n")
        if len(lines) - 1 > self.max_headers:
            raise self._fail(
                f"{len(lines) - 1} headers exceed the limit of {self.max_headers}",
                view,
                pos,
                body_start,
                limit=True,
            )
        if "\r" in block:
            lines = [line[:-1] if line.endswith("\r") else line for line in lines]
            if any("\r" in line for line in lines):
                raise self._fail(
                    "a CR inside a line (not part of a CRLF end of line)", view, pos, body_start
                )
        command = lines[0]
        if not command:
            raise self._fail("the frame starts with an empty command line", view, pos, body_start)
        if self.commands is not None and command not in self.commands:
            raise self._fail(f"unknown command {command[:40]!r}", view, pos, body_start)
        rest = lines[1:]
        if len(block) > self.max_header_line:
            for line in rest:
                if len(line) > self.max_header_line:
                    raise self._fail(
                        f"a header line of {len(line)} characters exceeds the limit of "
                        f"{self.max_header_line}",
                        view,
                        pos,
                        body_start,
                        limit=True,
                    )
        parts = [line.partition(":") for line in rest]
        # One pass builds the pairs and drops the malformed lines; a length
        # mismatch sends the rare bad frame to the slow path naming the line.
        pairs = [(name, value) for name, colon, value in parts if colon and name]
        if len(pairs) != len(parts):
            for name, colon, value in parts:
                if not colon or not name:
                    line = name + colon + value
                    problem = "has no colon" if not colon else "has an empty name"
                    raise self._fail(f"header line {line[:60]!r} {problem}", view, pos, body_start)
        if "\\" in block and command not in UNESCAPED_COMMANDS:
            unescape = self.unescape
            try:
                headers = tuple([(unescape(name), unescape(value)) for name, value in pairs])
            except ValueError as exc:
                raise self._fail(f"a header: {exc}", view, pos, body_start) from None
        else:
            headers = tuple(pairs)
        return command, headers

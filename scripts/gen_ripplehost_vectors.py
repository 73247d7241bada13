#!/usr/bin/env python3
"""Generate vectors/ripplehost/frames.json and vectors/ripplehost/malformed.json.

Every vector's bytes are written out by hand below, then checked against the
reference codec (reference_impl/ripplehost/frame.py) while generated: a valid
stream must parse to exactly the frames and messages listed with it, a
malformed one must raise FrameError with exactly the vector's ``reason``
after exactly ``frames_before_error`` good frames. Running this again
produces byte-identical files; tests/ripplehost/test_frame.py checks the
codec against them and that this script still reproduces them.

Usage: scripts/gen_ripplehost_vectors.py [--check]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from conformance.core.vector_files import write_or_check  # noqa: E402

from reference_impl.ripplehost.frame import (  # noqa: E402
    DEFAULT_MAX_HEADER_LINE,
    DEFAULT_MAX_IN_PROGRESS,
    DEFAULT_MAX_MESSAGE,
    DEFAULT_MAX_SIZE,
    FrameError,
    FrameParser,
    Reassembler,
)

VECTORS_DIR = REPO_ROOT / "vectors" / "ripplehost"
GENERATOR = "scripts/gen_ripplehost_vectors.py"
SPEC = "sctp-binding.txt (Ripple host protocol), shared/specs/README.md (END trailer); docs/ripplehost-profile.md"
LIMITS = {
    "max_header_line": DEFAULT_MAX_HEADER_LINE,
    "max_size": DEFAULT_MAX_SIZE,
    "max_message": DEFAULT_MAX_MESSAGE,
    "max_in_progress": DEFAULT_MAX_IN_PROGRESS,
}


def frame(
    type_: str,
    msgno: int,
    content: bytes,
    *,
    more: bool = False,
    version: str = "1.0",
    users: tuple[str, str] | None = None,
    size: int | None = None,
) -> bytes:
    """Header + content + END CRLF; ``size`` overrides the true length (for the wrong-size vectors)."""
    count = len(content) if size is None else size
    tail = f" {users[0]} {users[1]}" if users else ""
    return (
        f"{type_} {version} {msgno} {'*' if more else '.'} {count}{tail}\r\n".encode()
        + content
        + b"END\r\n"
    )


PING = b'{"type":"ping"}'
HOST_ID = b'{"type":"host-id","hostname":"a.example"}'
ECHO = b'{"type":"echo","text":"hello, ripple"}'

# (id, spec section, description, bytes)
VALID: list[tuple[str, str, str, bytes]] = [
    (
        "readme-example-1",
        "README: Ripple host protocol",
        "The README's first example: 15 content bytes, END right after.",
        b'MSG 1.0 0 . 15\r\n{"type":"ping"}END\r\n',
    ),
    (
        "readme-example-2",
        "README: Ripple host protocol",
        "The README's second example: a CRLF before END is content and counted (17 bytes).",
        b'MSG 1.0 0 . 17\r\n{"type":"ping"}\r\nEND\r\n',
    ),
    ("host-id", "Host Identification", "The initiator's host-id MSG.", frame("MSG", 0, HOST_ID)),
    (
        "host-id-reply",
        "Host Identification",
        "The acceptor's host-id RPY, same msgno.",
        frame("RPY", 0, b'{"type":"host-id","hostname":"b.example"}'),
    ),
    ("rpy", "Host Messages", "An RPY.", frame("RPY", 2, b'{"type":"pong"}')),
    (
        "err",
        "Host Messages",
        "An ERR with the profile's body.",
        frame("ERR", 3, b'{"type":"error","error":"unknown-type","message":"no"}'),
    ),
    (
        "msgno-max",
        "Host Messages: msgno = 0..2147483647",
        "The largest msgno.",
        frame("MSG", 2147483647, PING),
    ),
    ("msgno-odd", "Host Messages", "An acceptor's MSG (odd msgno).", frame("MSG", 1, PING)),
    (
        "other-version",
        "Host Messages: version = (string)",
        "A version other than 1.0 is still a valid frame.",
        frame("MSG", 4, PING, version="2.0-beta"),
    ),
    (
        "version-16",
        "profile 2",
        "A version of 16 characters (the bound).",
        frame("MSG", 4, PING, version="v" * 16),
    ),
    (
        "utf8-content",
        "profile 3",
        "Non-ASCII content; size counts bytes, not characters.",
        frame("MSG", 6, '{"type":"echo","text":"héllo ☃"}'.encode()),
    ),
    (
        "node-frame",
        "Node Messages",
        "A node frame: to-user and from-user after size.",
        frame("MSG", 8, PING, users=("alice", "bob")),
    ),
    (
        "node-frame-full-address",
        "Node Messages; profile 2",
        "Users written as user@host are accepted.",
        frame("RPY", 8, b'{"type":"pong"}', users=("bob@b.example", "alice@a.example")),
    ),
    (
        "node-user-128",
        "profile 2",
        "Users of 128 characters (the bound).",
        frame("MSG", 10, PING, users=("u" * 128, "f" * 128)),
    ),
    (
        "chunked",
        "Host Messages: more",
        "One message in three frames (more * * .).",
        frame("MSG", 12, ECHO[:10], more=True)
        + frame("MSG", 12, ECHO[10:25], more=True)
        + frame("MSG", 12, ECHO[25:]),
    ),
    (
        "chunked-empty-chunk",
        "Host Messages: more; RFC 3080 2.2.1.1 (empty payloads)",
        "A chunk with no content (size 0) in the middle of a message.",
        frame("MSG", 14, PING[:5], more=True)
        + frame("MSG", 14, b"", more=True)
        + frame("MSG", 14, PING[5:]),
    ),
    (
        "chunked-node",
        "Node Messages; more",
        "A chunked node message.",
        frame("MSG", 16, ECHO[:20], more=True, users=("alice", "bob"))
        + frame("MSG", 16, ECHO[20:], users=("alice", "bob")),
    ),
    (
        "interleaved",
        "Host Messages: more (interleave messages in the same stream)",
        "Chunks of two MSGs interleaved; each completes on its own final frame.",
        frame("MSG", 18, ECHO[:12], more=True)
        + frame("MSG", 20, PING[:4], more=True)
        + frame("MSG", 18, ECHO[12:])
        + frame("MSG", 20, PING[4:]),
    ),
    (
        "interleaved-msg-and-rpy-same-msgno",
        "profile 3: messages keyed by (type, msgno)",
        "A chunked MSG 22 of one host and a chunked RPY 22 of the other's MSG 22 interleave (different keys).",
        frame("MSG", 22, PING[:3], more=True)
        + frame("RPY", 22, b'{"type":', more=True)
        + frame("MSG", 22, PING[3:])
        + frame("RPY", 22, b'"pong"}'),
    ),
    (
        "pipelined",
        "Host Messages",
        "Three complete frames in one read.",
        frame("MSG", 24, PING) + frame("MSG", 26, PING) + frame("MSG", 28, ECHO),
    ),
    (
        "content-holds-end",
        "README: size counts every byte",
        "Content holding END and a CRLF (JSON whitespace) before its end: size decides, not a search for END.",
        frame("MSG", 30, b'{"type":"echo","t":"END"}\r\n'),
    ),
    (
        "size-max",
        "profile 2: size <= 65536",
        "A frame of exactly 65536 content bytes.",
        frame("MSG", 32, b'{"type":"echo","pad":"' + b"x" * (65536 - 24) + b'"}'),
    ),
]

# (id, reason, description, bytes)
MALFORMED: list[tuple[str, str, str, bytes]] = [
    (
        "unknown-type",
        "unknown frame type",
        "ANS is BEEP's, not Ripple's.",
        b"ANS 1.0 0 . 15\r\n" + PING + b"END\r\n",
    ),
    (
        "lowercase-type",
        "unknown frame type",
        "Types are upper case.",
        b"msg 1.0 0 . 15\r\n" + PING + b"END\r\n",
    ),
    (
        "garbage",
        "unknown frame type",
        "Bytes that are no header, without a line end (refused before one).",
        b"GET / HTTP/1.1",
    ),
    (
        "no-line-end-control",
        "non-printable byte in header",
        "A NUL in an incomplete header line.",
        b"MSG 1.0\x00",
    ),
    (
        "bare-lf",
        "header line not ended by CRLF",
        "The header ends with LF alone.",
        b"MSG 1.0 0 . 15\n" + PING + b"END\r\n",
    ),
    (
        "cr-inside",
        "non-printable byte in header",
        "A CR inside the header line.",
        b"MSG 1.0\r 0 . 15\r\n" + PING + b"END\r\n",
    ),
    (
        "tab-separator",
        "non-printable byte in header",
        "A tab between fields.",
        b"MSG\t1.0 0 . 15\r\n" + PING + b"END\r\n",
    ),
    (
        "double-space",
        "fields not separated by single spaces",
        "Two spaces between fields.",
        b"MSG 1.0  0 . 15\r\n" + PING + b"END\r\n",
    ),
    (
        "leading-space",
        "unknown frame type",
        "A space before the type: the line does not start with a type.",
        b" MSG 1.0 0 . 15\r\n" + PING + b"END\r\n",
    ),
    (
        "trailing-space",
        "fields not separated by single spaces",
        "A space before CRLF.",
        b"MSG 1.0 0 . 15 \r\n" + PING + b"END\r\n",
    ),
    ("too-few-fields", "wrong number of header fields", "No size.", b"MSG 1.0 0 .\r\n"),
    (
        "six-fields",
        "wrong number of header fields",
        "A to-user without a from-user.",
        b"MSG 1.0 0 . 15 alice\r\n" + PING + b"END\r\n",
    ),
    (
        "eight-fields",
        "wrong number of header fields",
        "A field too many.",
        b"MSG 1.0 0 . 15 alice bob carol\r\n" + PING + b"END\r\n",
    ),
    (
        "version-too-long",
        "version too long",
        "A version of 17 characters.",
        b"MSG " + b"v" * 17 + b" 0 . 15\r\n" + PING + b"END\r\n",
    ),
    (
        "msgno-negative",
        "msgno is not a decimal number",
        "A sign.",
        b"MSG 1.0 -2 . 15\r\n" + PING + b"END\r\n",
    ),
    (
        "msgno-plus",
        "msgno is not a decimal number",
        "A plus sign.",
        b"MSG 1.0 +2 . 15\r\n" + PING + b"END\r\n",
    ),
    (
        "msgno-hex",
        "msgno is not a decimal number",
        "Hex digits.",
        b"MSG 1.0 0x2 . 15\r\n" + PING + b"END\r\n",
    ),
    (
        "msgno-leading-zero",
        "msgno has a leading zero",
        "007 (profile: one spelling per number).",
        b"MSG 1.0 02 . 15\r\n" + PING + b"END\r\n",
    ),
    (
        "msgno-too-big",
        "msgno above 2147483647",
        "2147483648.",
        b"MSG 1.0 2147483648 . 15\r\n" + PING + b"END\r\n",
    ),
    (
        "msgno-eleven-digits",
        "msgno above 2147483647",
        "An 11-digit msgno.",
        b"MSG 1.0 10000000000 . 15\r\n" + PING + b"END\r\n",
    ),
    (
        "more-other",
        "more is neither . nor *",
        "more is '+'.",
        b"MSG 1.0 0 + 15\r\n" + PING + b"END\r\n",
    ),
    (
        "more-two-chars",
        "more is neither . nor *",
        "more is '**'.",
        b"MSG 1.0 0 ** 15\r\n" + PING + b"END\r\n",
    ),
    (
        "size-not-number",
        "size is not a decimal number",
        "size is 'fifteen'.",
        b"MSG 1.0 0 . fifteen\r\n" + PING + b"END\r\n",
    ),
    (
        "size-negative",
        "size is not a decimal number",
        "size is -1.",
        b"MSG 1.0 0 . -1\r\n" + PING + b"END\r\n",
    ),
    (
        "size-leading-zero",
        "size has a leading zero",
        "size is 015.",
        b"MSG 1.0 0 . 015\r\n" + PING + b"END\r\n",
    ),
    (
        "size-above-bound",
        "size above bound",
        "size 65537, refused from the header alone.",
        b"MSG 1.0 0 . 65537\r\n",
    ),
    (
        "size-huge",
        "size above bound",
        "size 2147483647: no content is awaited or buffered.",
        b"MSG 1.0 0 . 2147483647\r\n",
    ),
    ("size-eleven-digits", "size above bound", "An 11-digit size.", b"MSG 1.0 0 . 99999999999\r\n"),
    (
        "size-too-small",
        "missing END trailer",
        "size 14 for 15 bytes: END is not where size says.",
        frame("MSG", 0, PING, size=14),
    ),
    (
        "size-too-large",
        "missing END trailer",
        "size 16 for 15 bytes (followed by another frame).",
        frame("MSG", 0, PING, size=16) + frame("MSG", 2, PING),
    ),
    (
        "missing-end",
        "missing END trailer",
        "The seed's form: content then the next header, no END.",
        b"MSG 1.0 0 . 15\r\n" + PING + b"MSG 1.0 2 . 15\r\n" + PING + b"END\r\n",
    ),
    (
        "end-lowercase",
        "missing END trailer",
        "'end' CRLF.",
        b"MSG 1.0 0 . 15\r\n" + PING + b"end\r\n",
    ),
    (
        "end-bare-lf",
        "missing END trailer",
        "END LF (no CR).",
        b"MSG 1.0 0 . 15\r\n" + PING + b"END\nMSG",
    ),
    (
        "to-user-too-long",
        "to-user too long",
        "A to-user of 129 characters.",
        b"MSG 1.0 0 . 15 " + b"u" * 129 + b" bob\r\n" + PING + b"END\r\n",
    ),
    (
        "from-user-too-long",
        "from-user too long",
        "A from-user of 129 characters.",
        b"MSG 1.0 0 . 15 alice " + b"f" * 129 + b"\r\n" + PING + b"END\r\n",
    ),
    (
        "header-too-long",
        "header line too long",
        "513 header bytes without a line end.",
        b"MSG 1.0 0 . 15 alice " + b"b" * 492,
    ),
    (
        "non-ascii-user",
        "non-printable byte in header",
        "A UTF-8 user name.",
        "MSG 1.0 0 . 15 alïce bob\r\n".encode() + PING + b"END\r\n",
    ),
    (
        "after-good-frame",
        "missing END trailer",
        "A good frame, then a bad one: the good one is read first.",
        frame("MSG", 0, PING) + b"MSG 1.0 2 . 15\r\n" + PING + b"XYZ\r\n",
    ),
    # --- message layer (after reassembly)
    (
        "content-not-json",
        "message is not JSON",
        "Content that is not JSON.",
        frame("MSG", 0, b"ping"),
    ),
    (
        "content-not-utf8",
        "message is not UTF-8",
        "Content that is not UTF-8.",
        frame("MSG", 0, b'{"type":"\xff"}'),
    ),
    (
        "content-array",
        "message is not a JSON object",
        "A JSON array.",
        frame("MSG", 0, b'["ping"]'),
    ),
    (
        "content-no-type",
        "message has no type",
        "An object without type.",
        frame("MSG", 0, b'{"kind":"ping"}'),
    ),
    (
        "content-type-number",
        "message has no type",
        "type is a number.",
        frame("MSG", 0, b'{"type":1}'),
    ),
    (
        "content-type-empty",
        "message has no type",
        "type is empty.",
        frame("MSG", 0, b'{"type":""}'),
    ),
    (
        "content-type-too-long",
        "message type too long",
        "type of 65 characters.",
        frame("MSG", 0, b'{"type":"' + b"t" * 65 + b'"}'),
    ),
    (
        "content-duplicate-member",
        "message is not JSON",
        "Two type members.",
        frame("MSG", 0, b'{"type":"ping","type":"echo"}'),
    ),
    (
        "content-nan",
        "message is not JSON",
        "NaN is not JSON.",
        frame("MSG", 0, b'{"type":"echo","x":NaN}'),
    ),
    (
        "chunk-changes-version",
        "chunk changes version",
        "A message's chunks with two versions.",
        frame("MSG", 0, PING[:5], more=True) + frame("MSG", 0, PING[5:], version="1.1"),
    ),
    (
        "chunk-changes-users",
        "chunk changes users",
        "A node message whose second chunk names another user.",
        frame("MSG", 0, PING[:5], more=True, users=("alice", "bob"))
        + frame("MSG", 0, PING[5:], users=("carol", "bob")),
    ),
    (
        "chunk-host-then-node",
        "chunk changes users",
        "A host frame continued by a node frame.",
        frame("MSG", 0, PING[:5], more=True) + frame("MSG", 0, PING[5:], users=("alice", "bob")),
    ),
    (
        "too-many-in-progress",
        "too many messages in progress",
        "33 chunked messages started at once.",
        b"".join(frame("MSG", 2 * n, b"{", more=True) for n in range(33)),
    ),
]


def escaped(data: bytes) -> str:
    """Readable form: printable ASCII as is, CR/LF as \\r \\n, anything else \\xNN; long runs abbreviated."""
    out = []
    for byte in data:
        if byte == 0x0D:
            out.append("\\r")
        elif byte == 0x0A:
            out.append("\\n")
        elif byte == 0x5C:
            out.append("\\\\")
        elif 0x20 <= byte <= 0x7E:
            out.append(chr(byte))
        else:
            out.append(f"\\x{byte:02x}")
    text = "".join(out)
    return (
        text if len(text) <= 600 else text[:300] + f"...({len(text) - 600} more)..." + text[-300:]
    )


def _frame_json(item: Any) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "type": item.type,
        "version": item.version,
        "msgno": item.msgno,
        "more": "*" if item.more else ".",
        "size": len(item.payload),
    }
    if item.to_user is not None:
        shown["to_user"], shown["from_user"] = item.to_user, item.from_user
    if len(item.payload) <= 4096:
        shown["payload_hex"] = item.payload.hex()
    else:
        shown["payload_sha_prefix"] = item.payload[:32].hex()
    return shown


def _read(data: bytes) -> tuple[list[Any], list[Any], FrameError | None]:
    parser = FrameParser(max_header_line=LIMITS["max_header_line"], max_size=LIMITS["max_size"])
    reassembler = Reassembler(
        max_message=LIMITS["max_message"], max_in_progress=LIMITS["max_in_progress"]
    )
    frames: list[Any] = []
    messages: list[Any] = []
    try:
        try:
            got = parser.receive_data(data)
        except FrameError as exc:
            got = exc.frames
            error: FrameError | None = exc
        else:
            error = None
        for item in got:
            frames.append(item)
            message = reassembler.add(item)
            if message is not None:
                messages.append(message)
        if error is not None:
            raise error
        if parser.buffered:
            raise FrameError("stream ends inside a frame", b"")
    except FrameError as exc:
        return frames, messages, exc
    return frames, messages, None


def build_valid() -> dict[str, Any]:
    vectors = []
    for ident, section, description, data in VALID:
        frames, messages, error = _read(data)
        if error is not None:
            raise SystemExit(f"valid vector {ident} refused: {error.reason}")
        entry: dict[str, Any] = {"id": ident, "spec_section": section, "description": description}
        entry["hex"] = data.hex()
        entry["text"] = escaped(data)
        entry["frames"] = [_frame_json(item) for item in frames]
        entry["messages"] = [
            {
                "type": m.type,
                "msgno": m.msgno,
                "version": m.version,
                "frames": m.frames,
                "to_user": m.to_user,
                "from_user": m.from_user,
                "body": m.body,
            }
            for m in messages
        ]
        vectors.append(entry)
    return {
        "protocol": "ripplehost",
        "component": "frames",
        "spec": SPEC,
        "generator": GENERATOR,
        "description": "Byte streams a Ripple host must read, with the frames and the complete messages each holds.",
        "limits": LIMITS,
        "layout": {
            "hex": "the stream",
            "text": "the stream, escaped (\\r \\n \\\\ \\xNN)",
            "frames": "every frame in order: type, version, msgno, more, size, users, payload_hex",
            "messages": "the messages completed, in the order their final frames arrived",
        },
        "vectors": vectors,
    }


def build_malformed() -> dict[str, Any]:
    vectors = []
    reasons: set[str] = set()
    for ident, reason, description, data in MALFORMED:
        frames, _messages, error = _read(data)
        if error is None:
            raise SystemExit(f"malformed vector {ident} accepted")
        if error.reason != reason:
            raise SystemExit(f"malformed vector {ident}: expected {reason!r}, got {error.reason!r}")
        reasons.add(reason)
        vectors.append(
            {
                "id": ident,
                "reason": reason,
                "description": description,
                "hex": data.hex(),
                "text": escaped(data),
                "frames_before_error": len(frames),
            }
        )
    return {
        "protocol": "ripplehost",
        "component": "frames-malformed",
        "spec": SPEC,
        "generator": GENERATOR,
        "description": "Byte streams that fit neither the host nor the node message format (or break the profile's "
        "message format or bounds), each with the codec's reason. A host receiving one closes the "
        "association at once without answering (sctp-binding.txt, Node Messages, last paragraph; "
        "docs/ripplehost-profile.md 2-3). frames_before_error valid frames precede the bad one.",
        "limits": LIMITS,
        "reasons": sorted(reasons),
        "vectors": vectors,
    }


def outputs() -> dict[Path, str]:
    return {
        VECTORS_DIR / "frames.json": json.dumps(build_valid(), indent=1, ensure_ascii=False) + "\n",
        VECTORS_DIR / "malformed.json": json.dumps(build_malformed(), indent=1, ensure_ascii=False)
        + "\n",
    }


if __name__ == "__main__":
    sys.exit(write_or_check("Generate the Ripple host protocol frame vectors.", outputs))

#!/usr/bin/env python3
"""Generate vectors/stomp/frames.json and vectors/stomp/malformed.json.

Every vector is written out by hand below (bytes, and for valid streams the
frames they hold), then checked against the reference codec
(reference_impl/stomp/frame.py) while it is generated: a valid stream must
parse to exactly its items, a malformed one must raise FrameError whose
reason matches the vector's ``reason`` pattern. Running this again produces
byte-identical files. tests/stomp/test_frame_vectors.py checks the codec
against them, that this script still reproduces them, and cross-checks the
valid ones against two independent parsers (stomp.py, stompman), asserting
the divergences listed in ``divergences`` below: where those libraries read
a stream differently, the vector says how, and the test fails if they stop
doing so (so the note is never stale).

Usage: scripts/gen_stomp_vectors_frames.py [--check]
  --check   write nothing; exit 1 if the committed files differ from what
            this script generates
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from conformance.core.vector_files import write_or_check  # noqa: E402

from reference_impl.stomp.frame import HEARTBEAT, Frame, FrameError, FrameParser, encode_frame  # noqa: E402

VECTORS_DIR = REPO_ROOT / "vectors" / "stomp"
FRAMES_PATH = VECTORS_DIR / "frames.json"
MALFORMED_PATH = VECTORS_DIR / "malformed.json"
GENERATOR = "scripts/gen_stomp_vectors_frames.py"
SPEC = "stomp-specification-1.2.md (STOMP 1.2); swaptacular-stomp-transport.txt (the profile)"

# The parser bounds every vector is read with (the oversized vectors exceed
# them; every valid vector fits). STOMP 1.2, "Size Limits": servers MAY limit
# header count, header line length and body size; the numbers are ours.
LIMITS = {"max_frame_bytes": 4096, "max_headers": 16, "max_header_line": 256}

BINARY = bytes(range(256))


def send(headers: list[tuple[str, str]], body: bytes = b"") -> dict[str, Any]:
    return {"command": "SEND", "headers": headers, "body": body}


def frame_item(command: str, headers: list[tuple[str, str]], body: bytes = b"") -> dict[str, Any]:
    return {"command": command, "headers": headers, "body": body}


HB = "heartbeat"

# --- valid streams -------------------------------------------------------------------------
# (id, section of STOMP 1.2, description, bytes, items)
VALID: list[tuple[str, str, str, bytes, list[Any]]] = [
    (
        "send-minimal",
        "STOMP Frames; SEND",
        "A SEND with a destination and a text body, no content-length (the body ends at the first NUL).",
        b"SEND\ndestination:/exchange/1\n\nhello\x00",
        [send([("destination", "/exchange/1")], b"hello")],
    ),
    (
        "send-profile-headers",
        "SEND; profile, A Subset of the STOMP Protocol",
        "A SEND with every header the profile requires and a JSON body with content-length.",
        b"SEND\ndestination:/exchange/12345678\nreceipt:m-1\ntype:ConfigureAccount\ncontent-type:application/json\n"
        b'persistent:true\ncontent-length:13\n\n{"type":"x"}\n\x00',
        [
            send(
                [
                    ("destination", "/exchange/12345678"),
                    ("receipt", "m-1"),
                    ("type", "ConfigureAccount"),
                    ("content-type", "application/json"),
                    ("persistent", "true"),
                    ("content-length", "13"),
                ],
                b'{"type":"x"}\n',
            )
        ],
    ),
    (
        "send-escaped-values",
        "Value Encoding",
        "SEND header values using all four escapes: \\r \\n \\c \\\\ decode to CR, LF, colon and backslash.",
        b"SEND\ndestination:/q\nx-escapes:a\\rb\\nc\\cd\\\\e\n\n\x00",
        [send([("destination", "/q"), ("x-escapes", "a\rb\nc:d\\e")])],
    ),
    (
        "send-escaped-name",
        "Value Encoding",
        "Header names are escaped too: x\\cname is the name 'x:name'.",
        b"SEND\ndestination:/q\nx\\cname:v\n\n\x00",
        [send([("destination", "/q"), ("x:name", "v")])],
    ),
    (
        "send-escaped-backslash-then-c",
        "Value Encoding",
        "\\\\c is an escaped backslash followed by a plain 'c', not an escaped colon.",
        b"SEND\ndestination:/q\nx-a:\\\\c\n\n\x00",
        [send([("destination", "/q"), ("x-a", "\\c")])],
    ),
    (
        "connect-not-escaped",
        "Value Encoding",
        "CONNECT headers are not escaped: a backslash is itself (\\c stays two characters).",
        b"CONNECT\naccept-version:1.2\nhost:/a\\cb\\n\n\n\x00",
        [frame_item("CONNECT", [("accept-version", "1.2"), ("host", "/a\\cb\\n")])],
    ),
    (
        "connected-not-escaped",
        "Value Encoding",
        "CONNECTED headers are not escaped: server:x\\\\y keeps both backslashes.",
        b"CONNECTED\nversion:1.2\nserver:x\\\\y\n\n\x00",
        [frame_item("CONNECTED", [("version", "1.2"), ("server", "x\\\\y")])],
    ),
    (
        "connect-colon-in-value",
        "Value Encoding; Augmented BNF (decision)",
        "A CONNECT header value holding an unescaped colon. The grammar keeps colons out of values, but CONNECT "
        "cannot escape them and deployed peers send them (host:/vhost:1); the line is split at its first colon.",
        b"CONNECT\naccept-version:1.2\nhost:a:b\n\n\x00",
        [frame_item("CONNECT", [("accept-version", "1.2"), ("host", "a:b")])],
    ),
    (
        "stomp-command",
        "CONNECT or STOMP Frame",
        "The STOMP command, the CONNECT synonym, with login, passcode and heart-beat.",
        b"STOMP\naccept-version:1.2\nhost:/\nlogin:12345678\npasscode:p\nheart-beat:10000,10000\n\n\x00",
        [
            frame_item(
                "STOMP",
                [
                    ("accept-version", "1.2"),
                    ("host", "/"),
                    ("login", "12345678"),
                    ("passcode", "p"),
                    ("heart-beat", "10000,10000"),
                ],
            )
        ],
    ),
    (
        "content-length-nul-in-body",
        "Header content-length",
        "content-length 5 with NULs inside the body: exactly 5 octets are read, then the terminating NUL.",
        b"SEND\ndestination:/q\ncontent-length:5\n\na\x00b\x00c\x00",
        [send([("destination", "/q"), ("content-length", "5")], b"a\x00b\x00c")],
    ),
    (
        "content-length-zero",
        "Header content-length",
        "content-length 0: an empty body, then the NUL.",
        b"SEND\ndestination:/q\ncontent-length:0\n\n\x00",
        [send([("destination", "/q"), ("content-length", "0")])],
    ),
    (
        "binary-body",
        "Header content-length; Body",
        "A body of all 256 octet values (NUL, CR, LF among them) with content-length.",
        b"SEND\ndestination:/q\ncontent-type:application/octet-stream\ncontent-length:256\n\n"
        + BINARY
        + b"\x00",
        [
            send(
                [
                    ("destination", "/q"),
                    ("content-type", "application/octet-stream"),
                    ("content-length", "256"),
                ],
                BINARY,
            )
        ],
    ),
    (
        "body-with-line-ends",
        "Body",
        "A body holding LF and CRLF line ends and a blank line: the body is octets, not lines.",
        b"SEND\ndestination:/q\n\nline 1\r\nline 2\n\nline 4\x00",
        [send([("destination", "/q")], b"line 1\r\nline 2\n\nline 4")],
    ),
    (
        "crlf-line-ends",
        "STOMP Frames (EOL = [CR] LF)",
        "Every line, and the blank line that ends the headers, ends with CRLF.",
        b"SEND\r\ndestination:/q\r\nreceipt:r1\r\n\r\nbody\x00",
        [send([("destination", "/q"), ("receipt", "r1")], b"body")],
    ),
    (
        "mixed-line-ends",
        "STOMP Frames (EOL = [CR] LF)",
        "LF and CRLF mixed in one frame; the blank line is CRLF.",
        b"SEND\ndestination:/q\r\nreceipt:r1\n\r\nx\x00",
        [send([("destination", "/q"), ("receipt", "r1")], b"x")],
    ),
    (
        "repeated-header-first-wins",
        "Repeated Header Entries",
        "foo:World then foo:Hello: both are kept in order; the value of foo is World.",
        b"SEND\ndestination:/q\nfoo:World\nfoo:Hello\n\n\x00",
        [send([("destination", "/q"), ("foo", "World"), ("foo", "Hello")])],
    ),
    (
        "repeated-content-length-first-wins",
        "Repeated Header Entries; Header content-length",
        "Two content-length headers: the first (3) says how many octets the body has.",
        b"SEND\ndestination:/q\ncontent-length:3\ncontent-length:1\n\nabc\x00",
        [send([("destination", "/q"), ("content-length", "3"), ("content-length", "1")], b"abc")],
    ),
    (
        "empty-value",
        "STOMP Frames; Augmented BNF (header-value = *OCTET...)",
        "A header with an empty value.",
        b"SEND\ndestination:/q\nx-empty:\n\n\x00",
        [send([("destination", "/q"), ("x-empty", "")])],
    ),
    (
        "spaces-not-trimmed",
        "Value Encoding (never trim or pad)",
        "Spaces around a value belong to it: ' b ' stays ' b '; a space before the colon belongs to the name.",
        b"SEND\ndestination:/q\nx-a: b \nx-b :c\n\n\x00",
        [send([("destination", "/q"), ("x-a", " b "), ("x-b ", "c")])],
    ),
    (
        "utf8-values",
        "Value Encoding (UTF-8)",
        "Header names and values in UTF-8 beyond ASCII.",
        "SEND\ndestination:/q/\u00e9t\u00e9\nx-\u043a\u043b\u044e\u0447:\u2603\n\n\x00".encode(
            "utf-8"
        ),
        [send([("destination", "/q/\u00e9t\u00e9"), ("x-\u043a\u043b\u044e\u0447", "\u2603")])],
    ),
    (
        "empty-body-frames",
        "Body (only SEND, MESSAGE, ERROR may have a body)",
        "Frames without a body: RECEIPT and DISCONNECT.",
        b"RECEIPT\nreceipt-id:m-1\n\n\x00DISCONNECT\nreceipt:d-1\n\n\x00",
        [
            frame_item("RECEIPT", [("receipt-id", "m-1")]),
            frame_item("DISCONNECT", [("receipt", "d-1")]),
        ],
    ),
    (
        "error-with-body",
        "ERROR",
        "An ERROR with message, content-type, content-length and a text body.",
        b"ERROR\nmessage:malformed frame received\ncontent-type:text/plain\ncontent-length:11\n\nbad frame\r\n\x00",
        [
            frame_item(
                "ERROR",
                [
                    ("message", "malformed frame received"),
                    ("content-type", "text/plain"),
                    ("content-length", "11"),
                ],
                b"bad frame\r\n",
            )
        ],
    ),
    (
        "no-headers",
        "STOMP Frames (zero or more header entries)",
        "A frame with no headers at all.",
        b"DISCONNECT\n\n\x00",
        [frame_item("DISCONNECT", [])],
    ),
    (
        "heartbeats-between-frames",
        "Heart-beating; Augmented BNF (NULL *( EOL ))",
        "EOLs before, between and after frames, LF and CRLF: each EOL outside a frame is one heart-beat.",
        b"\n\r\nSEND\ndestination:/q\n\na\x00\n\nSEND\ndestination:/q\n\nb\x00\r\n",
        [
            HB,
            HB,
            send([("destination", "/q")], b"a"),
            HB,
            HB,
            send([("destination", "/q")], b"b"),
            HB,
        ],
    ),
    (
        "heartbeats-only",
        "Heart-beating",
        "A stream of heart-beats only.",
        b"\n\n\r\n\n",
        [HB, HB, HB, HB],
    ),
    (
        "pipelined-sends",
        "SEND; RECEIPT (one receipt confirms earlier frames)",
        "Three SENDs back to back in one chunk, as a client pipelines them.",
        b"SEND\ndestination:/q\nreceipt:1\n\n1\x00SEND\ndestination:/q\nreceipt:2\ncontent-length:1\n\n2\x00"
        b"SEND\ndestination:/q\nreceipt:3\n\n3\x00",
        [
            send([("destination", "/q"), ("receipt", "1")], b"1"),
            send([("destination", "/q"), ("receipt", "2"), ("content-length", "1")], b"2"),
            send([("destination", "/q"), ("receipt", "3")], b"3"),
        ],
    ),
    (
        "connected-heart-beat",
        "CONNECTED Frame; Heart-beating",
        "CONNECTED with version, heart-beat, session and server.",
        b"CONNECTED\nversion:1.2\nheart-beat:5000,10000\nsession:s-1\nserver:reference/1.0 a comment\n\n\x00",
        [
            frame_item(
                "CONNECTED",
                [
                    ("version", "1.2"),
                    ("heart-beat", "5000,10000"),
                    ("session", "s-1"),
                    ("server", "reference/1.0 a comment"),
                ],
            )
        ],
    ),
]

# Where the independent parsers the tests cross-check against read a valid
# stream differently: vector id -> library -> (what it reads: frames only,
# each header's first value, body hex; why). Written by hand from running
# them; tests/stomp/test_frame_vectors.py asserts each still reads exactly
# this, and reads every other vector as the reference does.
STOMPPY = "stomp.py"
STOMPMAN = "stompman"
DIVERGENCES: dict[str, dict[str, tuple[list[dict[str, Any]], str]]] = {
    "send-escaped-values": {
        STOMPMAN: (
            [
                {
                    "command": "SEND",
                    "headers": [["destination", "/q"], ["x-escapes", "ab\nc:d\\e"]],
                    "body_hex": "",
                }
            ],
            "stompman's unescape table lacks \\r (serde.HEADER_UNESCAPE_CHARS has n, c and backslash): "
            "the escape is dropped, 'a\\rb' reads as 'ab' instead of 'a<CR>b'.",
        ),
    },
    "connect-not-escaped": {
        STOMPPY: (
            [
                {
                    "command": "CONNECT",
                    "headers": [["accept-version", "1.2"], ["host", "/a:b\n"]],
                    "body_hex": "",
                }
            ],
            "stomp.py unescapes the headers of every frame, CONNECT included (utils.parse_headers).",
        ),
        STOMPMAN: (
            [
                {
                    "command": "CONNECT",
                    "headers": [["accept-version", "1.2"], ["host", "/a:b\n"]],
                    "body_hex": "",
                }
            ],
            "stompman unescapes the headers of every frame, CONNECT included (serde.parse_header).",
        ),
    },
    "connected-not-escaped": {
        STOMPPY: (
            [
                {
                    "command": "CONNECTED",
                    "headers": [["version", "1.2"], ["server", "x\\y"]],
                    "body_hex": "",
                }
            ],
            "stomp.py unescapes CONNECTED headers: 'x\\\\y' reads as 'x\\y'.",
        ),
        STOMPMAN: (
            [
                {
                    "command": "CONNECTED",
                    "headers": [["version", "1.2"], ["server", "x\\y"]],
                    "body_hex": "",
                }
            ],
            "stompman unescapes CONNECTED headers: 'x\\\\y' reads as 'x\\y'.",
        ),
    },
    "connect-colon-in-value": {
        STOMPMAN: (
            [{"command": "CONNECT", "headers": [["accept-version", "1.2"]], "body_hex": ""}],
            "stompman drops a header line holding a second colon (serde.parse_header returns None), so "
            "host:a:b disappears.",
        ),
    },
    "mixed-line-ends": {
        STOMPPY: (
            [
                {
                    "command": "SEND",
                    "headers": [["destination", "/q"], ["receipt", "r1"]],
                    "body_hex": "",
                }
            ],
            "stomp.py finds the end of the headers with LF LF or CRLF CRLF only (utils.PREAMBLE_END_RE); "
            "a LF-ended header line followed by a CRLF blank line is missed and the body 'x' is lost.",
        ),
    },
}


# --- malformed streams ---------------------------------------------------------------------
# Reason categories, each with the rule that refuses it. `reason_pattern` is
# a regular expression the reference parser's FrameError.reason matches.
REASONS: dict[str, tuple[str, str]] = {
    "undefined escape": (
        'Value Encoding: "Undefined escape sequences such as \\t (octet 92 and 116) MUST be '
        'treated as a fatal protocol error"',
        r"undefined escape|backslash ends",
    ),
    "no NUL after content-length body": (
        'Header content-length: "this number of octets MUST be read ... The '
        'frame still needs to be terminated with a NULL octet"',
        r"not the NUL that ends a frame",
    ),
    "bad content-length": (
        'Header content-length: "an octet count" (a non-negative decimal integer; values are '
        "never trimmed, Value Encoding)",
        r"content-length .* is not a non-negative integer",
    ),
    "header without colon": (
        'Augmented BNF: header = header-name ":" header-value',
        r"has no colon",
    ),
    "empty header name": (
        'Augmented BNF: header-name = 1*<any OCTET except CR or LF or ":">',
        r"empty name",
    ),
    "unknown command": (
        "Augmented BNF: command = client-command | server-command; commands are case sensitive "
        "(STOMP Frames)",
        r"unknown command",
    ),
    "bare CR": (
        "STOMP Frames / Augmented BNF: EOL = [CR] LF; a CR not followed by LF is no EOL, and header "
        "lines exclude CR",
        r"CR",
    ),
    "not UTF-8": ('Value Encoding: "The commands and headers are encoded in UTF-8"', r"not UTF-8"),
    "frame too large": (
        "Size Limits: servers MAY limit the size of a frame body; if exceeded they SHOULD send "
        "ERROR and close",
        r"exceeds the limit|within the limit of",
    ),
    "too many headers": (
        "Size Limits: servers MAY limit the number of frame headers",
        r"limit of \d+ headers|headers exceed the limit",
    ),
    "header line too long": (
        "Size Limits: servers MAY limit the length of header lines",
        r"header line (longer than|of \d+ characters exceeds)",
    ),
}

BIG_HEADER = "x" * (LIMITS["max_header_line"] + 10)

# (id, reason category, description, bytes, number of whole frames before the bad one)
MALFORMED: list[tuple[str, str, str, bytes, int]] = [
    (
        "undefined-escape-t",
        "undefined escape",
        "A SEND header value holding \\t.",
        b"SEND\ndestination:/q\nx-a:a\\tb\n\n\x00",
        0,
    ),
    (
        "undefined-escape-in-name",
        "undefined escape",
        "A SEND header name holding \\x.",
        b"SEND\ndestination:/q\nx\\x:v\n\n\x00",
        0,
    ),
    (
        "undefined-escape-uppercase",
        "undefined escape",
        "\\N is not \\n: escapes are case sensitive.",
        b"SEND\ndestination:/q\nx-a:\\N\n\n\x00",
        0,
    ),
    (
        "lone-backslash-at-end",
        "undefined escape",
        "A value ending in a single backslash: an escape sequence cut short.",
        b"SEND\ndestination:/q\nx-a:ab\\\n\n\x00",
        0,
    ),
    (
        "undefined-escape-in-receipt-frame",
        "undefined escape",
        "Escaping applies to every frame but CONNECT and CONNECTED: \\t in a RECEIPT is an error too.",
        b"RECEIPT\nreceipt-id:a\\tb\n\n\x00",
        0,
    ),
    (
        "content-length-longer-than-body",
        "no NUL after content-length body",
        "content-length 10 for a 3-octet body: the parser reads 10 octets (into the next frame) and finds no NUL "
        "after them.",
        b"SEND\ndestination:/q\ncontent-length:10\n\nabc\x00SEND\ndestination:/q\n\nx\x00",
        0,
    ),
    (
        "content-length-shorter-than-body",
        "no NUL after content-length body",
        "content-length 2 for a 5-octet body: the octet after the 2 counted is 'c', not NUL.",
        b"SEND\ndestination:/q\ncontent-length:2\n\nabcde\x00",
        0,
    ),
    (
        "content-length-negative",
        "bad content-length",
        "content-length -1.",
        b"SEND\ndestination:/q\ncontent-length:-1\n\n\x00",
        0,
    ),
    (
        "content-length-not-a-number",
        "bad content-length",
        "content-length abc.",
        b"SEND\ndestination:/q\ncontent-length:abc\n\nx\x00",
        0,
    ),
    (
        "content-length-padded",
        "bad content-length",
        "content-length ' 1': values are never trimmed, so this is not a number.",
        b"SEND\ndestination:/q\ncontent-length: 1\n\nx\x00",
        0,
    ),
    (
        "header-without-colon",
        "header without colon",
        "A header line with no colon.",
        b"SEND\ndestination:/q\nnocolon\n\n\x00",
        0,
    ),
    (
        "header-empty-name",
        "empty header name",
        "A header line starting with its colon.",
        b"SEND\ndestination:/q\n:value\n\n\x00",
        0,
    ),
    (
        "unknown-command",
        "unknown command",
        "A command STOMP 1.2 does not define.",
        b"PUBLISH\ndestination:/q\n\n\x00",
        0,
    ),
    (
        "lowercase-command",
        "unknown command",
        "send is not SEND: commands are case sensitive.",
        b"send\ndestination:/q\n\n\x00",
        0,
    ),
    (
        "http-request",
        "unknown command",
        "An HTTP request line where a STOMP command belongs.",
        b"GET / HTTP/1.1\r\nHost: example\r\n\r\n",
        0,
    ),
    (
        "bare-cr-between-frames",
        "bare CR",
        "A CR outside a frame not followed by LF.",
        b"\rSEND\ndestination:/q\n\n\x00",
        0,
    ),
    (
        "bare-cr-in-header",
        "bare CR",
        "A CR inside a header line, not as part of CRLF.",
        b"SEND\ndestination:/q\rx\n\n\x00",
        0,
    ),
    (
        "header-not-utf8",
        "not UTF-8",
        "A header value holding the octet 0xff.",
        b"SEND\ndestination:/q\xff\n\n\x00",
        0,
    ),
    (
        "content-length-over-limit",
        "frame too large",
        f"content-length 1000000 when frames are limited to {LIMITS['max_frame_bytes']} bytes: refused from the "
        "headers, before the body arrives.",
        b"SEND\ndestination:/q\ncontent-length:1000000\n\n",
        0,
    ),
    (
        "body-over-limit-no-nul",
        "frame too large",
        f"A body with no NUL running past the {LIMITS['max_frame_bytes']}-byte frame limit (the NUL is missing).",
        b"SEND\ndestination:/q\n\n" + b"a" * (LIMITS["max_frame_bytes"] + 10),
        0,
    ),
    (
        "too-many-headers",
        "too many headers",
        f"{LIMITS['max_headers'] + 1} headers when {LIMITS['max_headers']} are allowed.",
        b"SEND\n" + b"".join(b"x-%d:v\n" % i for i in range(LIMITS["max_headers"] + 1)) + b"\n\x00",
        0,
    ),
    (
        "header-line-too-long",
        "header line too long",
        f"A header line of {len(BIG_HEADER) + 4} characters when {LIMITS['max_header_line']} are allowed.",
        b"SEND\ndestination:/q\nx-a:" + BIG_HEADER.encode() + b"\n\n\x00",
        0,
    ),
    (
        "bad-frame-after-good-one",
        "undefined escape",
        "A whole valid frame, then one with an undefined escape: the first is delivered, then the error.",
        b"SEND\ndestination:/q\n\nok\x00SEND\ndestination:/q\nx-a:\\t\n\n\x00",
        1,
    ),
]


# --- encoding for JSON -----------------------------------------------------------------------


def escaped_text(data: bytes) -> str:
    """The bytes as readable text: printable ASCII as is, the rest as \\xNN
    (\\n, \\r, \\0 shown as such), for people reading the file."""
    out = []
    for byte in data:
        if byte == 0x0A:
            out.append("\\n")
        elif byte == 0x0D:
            out.append("\\r")
        elif byte == 0:
            out.append("\\0")
        elif byte == 0x5C:
            out.append("\\\\")
        elif 0x20 <= byte < 0x7F:
            out.append(chr(byte))
        else:
            out.append(f"\\x{byte:02x}")
    return "".join(out)


def item_json(item: Any) -> Any:
    if item == HB:
        return HB
    body: bytes = item["body"]
    shown: dict[str, Any] = {
        "command": item["command"],
        "headers": [list(pair) for pair in item["headers"]],
        "body_hex": body.hex(),
    }
    try:
        shown["body_text"] = body.decode("utf-8") if b"\x00" not in body else None
    except UnicodeDecodeError:
        shown["body_text"] = None
    if shown["body_text"] is None:
        del shown["body_text"]
    return shown


def parsed_json(items: list[Any]) -> list[Any]:
    out = []
    for item in items:
        if item is HEARTBEAT:
            out.append(HB)
        else:
            out.append(
                item_json({"command": item.command, "headers": item.headers, "body": item.body})
            )
    return out


def parse_all(data: bytes) -> list[Any]:
    return FrameParser(**LIMITS).receive_data(data)


def parse_bytewise(data: bytes) -> list[Any]:
    parser = FrameParser(**LIMITS)
    out: list[Any] = []
    for index in range(len(data)):
        out += parser.receive_data(data[index : index + 1])
    return out


def canonical_eol(items: list[Any], data: bytes) -> str | None:
    """ "LF" or "CRLF" when encode_frame of the frames with that line end (no
    content-length added unless a body holds NUL) gives the bytes back: such
    valid vectors double as encoder vectors. None otherwise."""
    if any(item == HB for item in items):
        return None
    for name, eol in (("LF", b"\n"), ("CRLF", b"\r\n")):
        encoded = b"".join(
            encode_frame(
                Frame(item["command"], tuple(item["headers"]), item["body"]),
                content_length=False if b"\x00" not in item["body"] else None,
                eol=eol,
            )
            for item in items
        )
        if encoded == data:
            return name
    return None


def build_valid() -> dict[str, Any]:
    vectors = []
    seen = set()
    for vector_id, section, description, data, items in VALID:
        assert vector_id not in seen, vector_id
        seen.add(vector_id)
        expected = [item_json(item) for item in items]
        for how, parsed in (("whole", parse_all(data)), ("byte by byte", parse_bytewise(data))):
            got = parsed_json(parsed)
            if got != expected:
                raise SystemExit(
                    f"{vector_id}: the reference parser ({how}) reads {got!r}, the vector says "
                    f"{expected!r}"
                )
        vector = {
            "id": vector_id,
            "spec_section": section,
            "description": description,
            "hex": data.hex(),
            "text": escaped_text(data),
            "items": expected,
            "canonical_eol": canonical_eol(items, data),
        }
        if vector_id in DIVERGENCES:
            vector["third_party"] = {
                library: {"reads": reads, "note": note}
                for library, (reads, note) in DIVERGENCES[vector_id].items()
            }
        vectors.append(vector)
    unknown = set(DIVERGENCES) - seen
    assert not unknown, f"divergences for no vector: {unknown}"
    return {
        "protocol": "stomp",
        "component": "frame",
        "spec": SPEC,
        "generator": GENERATOR,
        "description": "Valid STOMP 1.2 byte streams and the frames (and heart-beats) they hold: escaping in SEND "
        "and RECEIPT vs none in CONNECT/CONNECTED, content-length with NULs in the body, binary "
        "bodies, CRLF and mixed line ends, repeated headers (kept in order; the first counts), "
        "heart-beat EOLs between frames, empty bodies. Each stream parses to `items` whole and "
        "fed one byte at a time.",
        "limits": LIMITS,
        "layout": {
            "hex": "the bytes of the stream, lowercase hex",
            "text": "the same bytes for reading: printable ASCII, \\n \\r \\0 \\\\ and \\xNN",
            "items": 'what the stream holds, in order: "heartbeat" (one EOL outside a frame) or a frame '
            "{command, headers: [[name, value], ...] in wire order, unescaped, repeats kept, "
            "body_hex, body_text when the body is UTF-8 without NUL}",
            "canonical_eol": '"LF" or "CRLF" when encoding the frames with that line end gives `hex` back '
            "(content-length added only when a body holds NUL); null when no encoding does "
            "(heart-beats, mixed line ends)",
            "limits": "FrameParser bounds used; every valid vector fits within them",
            "third_party": "where an independent parser (stomp.py's transport + utils.parse_frame, stompman's "
            "serde.FrameParser) reads the stream differently: what it reads (frames only, the "
            "first value of each header, body_hex) and why; absent: it reads `items`",
        },
        "decisions": {
            "colon_in_connect_value": "A CONNECT/CONNECTED line is split at its first colon, the rest is the "
            "value (vector connect-colon-in-value). Neither frame can escape a colon, "
            "and RabbitMQ's host:/vhost form and stomp.py send them.",
            "eol_after_frame": "The grammar lets EOLs follow a frame's NUL (frame = ... NULL *( EOL )); they "
            "carry no data and are reported as heart-beats, the same thing they are "
            "between frames.",
            "repeated_content_length": "The first content-length counts, like any repeated header.",
        },
        "vectors": vectors,
    }


def build_malformed() -> dict[str, Any]:
    vectors = []
    seen = set()
    for vector_id, reason, description, data, good_before in MALFORMED:
        assert vector_id not in seen, vector_id
        seen.add(vector_id)
        rule, pattern = REASONS[reason]
        for how, feed in (
            ("whole", [data]),
            ("byte by byte", [data[i : i + 1] for i in range(len(data))]),
        ):
            parser = FrameParser(**LIMITS)
            frames = 0
            error: FrameError | None = None
            for chunk in feed:
                try:
                    frames += sum(1 for item in parser.receive_data(chunk) if item is not HEARTBEAT)
                except FrameError as exc:
                    error = exc
                    break
            if error is None and how == "whole":
                try:  # whole frames come first; the error with the next call
                    parser.receive_data(b"")
                except FrameError as exc:
                    error = exc
            if error is None:
                raise SystemExit(f"{vector_id}: the reference parser ({how}) accepts it")
            if not re.search(pattern, error.reason):
                raise SystemExit(
                    f"{vector_id}: reason {error.reason!r} ({how}) does not match {pattern!r}"
                )
            if frames != good_before:
                raise SystemExit(
                    f"{vector_id}: {frames} frames before the error ({how}), expected {good_before}"
                )
            if how == "whole":
                reference_reason = error.reason
        vectors.append(
            {
                "id": vector_id,
                "reason": reason,
                "description": description,
                "hex": data.hex(),
                "text": escaped_text(data),
                "frames_before_error": good_before,
                "reference_reason": reference_reason,
            }
        )
    return {
        "protocol": "stomp",
        "component": "frame-malformed",
        "spec": SPEC,
        "generator": GENERATOR,
        "description": "Byte streams a STOMP 1.2 peer must refuse, each with the rule that refuses it. A server "
        "answers them with ERROR and closes the connection (STOMP 1.2, ERROR; Size Limits); the "
        "parser reports FrameError and is dead after it. The size vectors hold only under "
        "`limits`, which are the parser bounds used (STOMP lets servers choose them).",
        "limits": LIMITS,
        "reasons": {
            name: {"rule": rule, "reason_pattern": pattern}
            for name, (rule, pattern) in REASONS.items()
        },
        "layout": {
            "hex": "the bytes of the stream, lowercase hex",
            "text": "the same bytes for reading",
            "reason": "the category in `reasons`",
            "frames_before_error": "whole valid frames the parser delivers before refusing the rest",
            "reference_reason": "the reference parser's FrameError.reason (matches the category's pattern)",
        },
        "vectors": vectors,
    }


def outputs() -> dict[Path, str]:
    return {
        path: json.dumps(document, indent=1, ensure_ascii=False) + "\n"
        for path, document in ((FRAMES_PATH, build_valid()), (MALFORMED_PATH, build_malformed()))
    }


if __name__ == "__main__":
    sys.exit(write_or_check(__doc__.splitlines()[0], outputs))

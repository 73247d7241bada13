"""Frames that fit neither the host nor the node format, and the citations of
the rules they break: shared by the cases of both roles (test_frame_server.py,
the target as acceptor; test_client.py, the target as initiator), which
check the same sentences (Ripple SCTP binding, "Host Messages", "Node
Messages"; the specs README on the END trailer; the profile,
docs/ripplehost-profile.md, section 2).

Every builder takes the msgno of the forged frame and of the valid ping sent
right after it in the same write. They must have the sender's parity (the
harness as initiator: even; as acceptor: odd), so that a frame breaks only the
rule it is built to break: a MSG of the wrong parity is closed on for its
msgno (profile section 5), and a target would pass for the wrong reason.
The ping gives a target that skips the bad frame something to serve, so that
skipping it shows.
"""

from __future__ import annotations

from reference_impl.ripplehost.frame import VERSION, Frame, encode_body, encode_frame

from .peer import probe_body

BINDING = "Ripple SCTP binding"
README = "Specs README, Ripple host protocol"
HOST_MESSAGES = f"{BINDING}, Host Messages"
NODE_MESSAGES = f"{BINDING}, Node Messages"
CLOSE_SENTENCE = (
    '"If a received frame does not meet either the host or node message format, the association '
    'must be immediately closed"'
)
CLOSE = f"{NODE_MESSAGES} ({CLOSE_SENTENCE})"
CLOSE_SILENTLY = (
    f"{NODE_MESSAGES} ({CLOSE_SENTENCE}; profile section 2: at once, with nothing sent in answer, as "
    "RFC 3080 2.2.1.1)"
)
SIZE = (
    f'{HOST_MESSAGES} ("size is the number of content bytes between, but not including, the CRLF at the end '
    'of the header line, and the END at the end of the frame")'
)
TRAILER = (
    f'{README} ("A frame is the header line, CRLF, exactly size content bytes, then END CRLF")'
)

FRAME_GRAMMAR = (
    f'{HOST_MESSAGES} ("Host messages are sent in BEEP-style frames as follows:" (type) (version) '
    "(msgno) (more) (size)(CRLF); (type) = MSG | RPY | ERR; (version) = (string); (msgno) = "
    '0..2147483647; (more) = . | *; (size) = (integer); "size is the number of content bytes '
    "between, but not including, the CRLF at the end of the header line, and the END at the end "
    f'of the frame"); {NODE_MESSAGES} ("Node messages are sent in frames of the following '
    'format:" (type) (version) (msgno) (more) (size) (to-user) (from-user)(CRLF)); '
    f"{TRAILER}"
)
"""The frame grammar every frame a host sends has (the grammar cases of
both roles, core/node_grammar.py). The text's grammar lines are given as it
has them but unquoted, as a figure: the coverage check reads a text's "|"
as a table's rule, so a quote holding one is never found."""
GRAMMAR_BASIS = (
    "wire-format: the host frame and the node frame of Host Messages and Node Messages (header "
    "fields separated by single spaces, CRLF, size content bytes, END CRLF; each field spelt and "
    "bounded as the profile's section 2 fixes it)"
)
"""The grammar cases' basis; each adds who sends the frames."""

# What binds the level of each close case (docs/levels.md). The text's own
# "must be immediately closed" binds the close itself (plain words, not an
# RFC 2119 key word); the silence, and the trailer the grammar lost, rest
# on the profile and on erratum RIPPLEHOST-E1.
PROFILE_DOC = "docs/ripplehost-profile.md"
SILENT_BASIS = (
    "profile: section 2, a frame that fits neither format closes the association at once, with "
    "nothing sent in answer (the text's immediately, read as RFC 3080 2.2.1.1 does), "
    f"{PROFILE_DOC}"
)
MISSING_END_BASIS = (
    "erratum: RIPPLEHOST-E1 the END trailer the page's grammar lost is part of the frame (the size "
    "sentence, the printed page, RFC 3080), so size bytes not followed by END CRLF fit neither "
    "format and the association must be closed (silently: profile section 2)"
)
WRONG_SIZE_BASIS = (
    "erratum: RIPPLEHOST-E1 the frame is exactly size content bytes then END CRLF (the size "
    "sentence, the printed page, RFC 3080), so a frame whose END is not where size puts it fits "
    "neither format and the association must be closed (silently: profile section 2)"
)


def ping_frame(msgno: int) -> bytes:
    return encode_frame(Frame("MSG", VERSION, msgno, False, encode_body({"type": "ping"})))


def malformed_headers(msgno: int, next_msgno: int) -> list[tuple[str, bytes]]:
    """Frames whose header fits neither format, each with the rule it breaks,
    then a valid ping."""
    content = encode_body({"type": "ping"})
    size = str(len(content)).encode()
    number = str(msgno).encode()
    tail = content + b"END\r\n" + ping_frame(next_msgno)
    return [
        ("a header without its size field (4 fields)", b"MSG 1.0 " + number + b" .\r\n" + tail),
        (
            "a header of 6 fields (a host header plus one user)",
            b"MSG 1.0 " + number + b" . " + size + b" alice\r\n" + tail,
        ),
        (
            "the frame type ANS (BEEP's, not one of MSG, RPY, ERR)",
            b"ANS 1.0 " + number + b" . " + size + b"\r\n" + tail,
        ),
        (
            "msgno 2147483648, above the range 0..2147483647",
            b"MSG 1.0 2147483648 . " + size + b"\r\n" + tail,
        ),
        (
            "more flag '+' (neither '.' nor '*')",
            b"MSG 1.0 " + number + b" + " + size + b"\r\n" + tail,
        ),
        (
            "a size that is not an integer (-15)",
            b"MSG 1.0 " + number + b" . -" + size + b"\r\n" + tail,
        ),
        (
            "a header ended by a bare LF instead of CRLF",
            b"MSG 1.0 " + number + b" . " + size + b"\n" + tail,
        ),
        # Two headers a reader splitting the line on whitespace takes: the
        # text's layout puts the CRLF right after the size, and one space
        # between fields.
        (
            "a space after the size, before the CRLF",
            b"MSG 1.0 " + number + b" . " + size + b" \r\n" + tail,
        ),
        (
            "two spaces between the msgno and the more flag",
            b"MSG 1.0 " + number + b"  . " + size + b"\r\n" + tail,
        ),
    ]


NUMBER = (
    f'{HOST_MESSAGES} ("(msgno) = 0..2147483647", "(size) = (integer)"; profile section 2: decimal '
    "digits, no sign, no leading zero, one spelling per number)"
)
NUMBER_BASIS = (
    "profile: section 2, msgno and size are decimal digits without sign and without leading zeros "
    "(one spelling per number, so two hosts never read one header differently), and a header that "
    f"breaks it fits neither format: the association is closed at once, {PROFILE_DOC}"
)


def non_canonical_numbers(msgno: int, next_msgno: int) -> list[tuple[str, bytes]]:
    """A ping MSG whose msgno or size is spelled other than the profile's one
    way, each with its spelling, then a valid ping. A general integer parser
    (int(), parseInt, strtol) takes every one of them, reading the same values
    as the canonical header would."""
    content = encode_body({"type": "ping"})
    size = str(len(content)).encode()
    number = str(msgno).encode()
    tail = content + b"END\r\n" + ping_frame(next_msgno)
    return [
        (
            f"msgno 0{msgno} (a leading zero)",
            b"MSG 1.0 0" + number + b" . " + size + b"\r\n" + tail,
        ),
        (
            f"size 0{len(content)} (a leading zero)",
            b"MSG 1.0 " + number + b" . 0" + size + b"\r\n" + tail,
        ),
        (f"size +{len(content)} (a sign)", b"MSG 1.0 " + number + b" . +" + size + b"\r\n" + tail),
    ]


def missing_end_frames(msgno: int, next_msgno: int) -> list[tuple[str, bytes]]:
    """An echo MSG of the right size whose trailer is not END CRLF, each with
    what stands in its place, then a valid ping."""
    content = encode_body(probe_body("missing-end"))
    header = f"MSG {VERSION} {msgno} . {len(content)}\r\n".encode()
    return [
        (rule, header + content + trailer + ping_frame(next_msgno))
        for rule, trailer in (
            ("the trailer EDN CRLF instead of END CRLF", b"EDN\r\n"),
            ("no trailer at all (the next frame follows the content)", b""),
            ("a bare CRLF where END CRLF is due", b"\r\n"),
            # A reader taking the trailer as a line takes this one.
            ("END ended by a bare LF instead of CRLF", b"END\n"),
        )
    ]


def content_not_json_object_frames(msgno: int, next_msgno: int) -> list[tuple[str, bytes]]:
    """A MSG of the right size and trailer whose content is not one JSON object
    with a type, each with what it holds, then a valid ping. The first is
    content a streaming decoder reading one JSON value takes: a valid echo
    followed by bytes it does not use."""
    echo = encode_body(probe_body("not-one-object"))
    return [
        (
            rule,
            encode_frame(Frame("MSG", VERSION, msgno, False, content)) + ping_frame(next_msgno),
        )
        for rule, content in (
            ("a JSON object followed by another ({})", echo + b"{}"),
            ("a JSON object followed by a byte that is no JSON (x)", echo + b"x"),
            ("no JSON at all (type=ping)", b"type=ping"),
        )
    ]


def wrong_size_frames(msgno: int, next_msgno: int) -> list[tuple[str, bytes]]:
    """An echo MSG followed by END CRLF whose size is 8 bytes short and 8 bytes
    long (END not where size puts it), each with its sizes, then a valid ping."""
    content = encode_body(probe_body("wrong-size-" + "x" * 24))
    return [
        (
            f"size {size} for {len(content)} content bytes",
            f"MSG {VERSION} {msgno} . {size}\r\n".encode()
            + content
            + b"END\r\n"
            + ping_frame(next_msgno),
        )
        for size in (len(content) - 8, len(content) + 8)
    ]

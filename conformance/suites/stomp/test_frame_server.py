"""Frames, target as server (STOMP 1.2 "STOMP Frames", "Value Encoding",
"Header content-length", "Repeated Header Entries", "Augmented BNF").

Every case starts from a valid SEND (the profile's headers, a valid SMP
body, see peer.valid_send) and changes one thing, so that a refusal is of
that thing: each depends on ``receipt-id-echoes-receipt``, where the same
SEND unchanged gets its RECEIPT. A SEND the server cannot process must get
"an ERROR frame and then close the connection" (STOMP 1.2, SEND), which is
what the malformed-frame cases want.
"""

from __future__ import annotations

import secrets

from conformance.core.node_grammar import exchange_cut_short
from conformance.core.requirements import blocked, requirement
from conformance.core.transport import DeadlineExceeded, TlsRefused
from reference_impl.stomp.frame import Frame, encode_frame, escape_header_value

from .peer import StompPeer, summary, valid_send
from .prerequisites import (
    ACCEPTS_BEATS,
    DISCONNECT_RECEIPT,
    MISSING_DESTINATION,
    RECEIPT_ECHO,
    SERVER_GRAMMAR,
    SESSION,
    TLS,
)

SEND_RULE = (
    'STOMP 1.2, SEND ("If the server cannot successfully process the SEND frame for any reason, the server '
    'MUST send the client an ERROR frame and then close the connection")'
)
BNF = 'STOMP 1.2, Augmented BNF (header = header-name ":" header-value)'
SESSION_AND_ECHO = [*SESSION, RECEIPT_ECHO]


async def receipt_for(peer: StompPeer, receipt: str, what: str) -> Frame:
    """The RECEIPT of ``what``, carrying ``receipt``; anything else fails
    the case, showing it."""
    frame = await peer.next_or_close(f"the RECEIPT for {what}")
    if frame is None:
        raise AssertionError(f"the {peer.closed_text()} instead of answering {what} with a RECEIPT")
    if frame.command != "RECEIPT":
        detail = f" (ERROR message: {frame.get('message')!r})" if frame.command == "ERROR" else ""
        raise AssertionError(
            f"{what} must be processed and get a RECEIPT; the target sent {summary(frame)}{detail}"
        )
    got = frame.get("receipt-id")
    assert got == receipt, (
        f"the RECEIPT for {what} carries receipt-id:{got!r}, not {receipt!r}: {summary(frame)}"
    )
    return frame


def with_header_lines(frame, lines: bytes) -> bytes:
    """The encoded frame with ``lines`` (each ending in LF) inserted right
    after its command line: a valid frame made malformed in one place."""
    head, _, rest = encode_frame(frame).partition(b"\n")
    return head + b"\n" + lines + rest


@requirement(
    "stomp.frame.server.error-then-close-on-malformed-frame",
    "SHOULD",
    f'{BNF}; {SEND_RULE}; STOMP 1.2, ERROR ("it MUST then close the connection just after sending the '
    'ERROR frame")',
    depends=SESSION_AND_ECHO,
    basis="inference: a header line without a colon is no header of the grammar, so the harness takes "
    "the SEND for one the server cannot successfully process, which SEND answers with ERROR then close; "
    "no sentence says a server cannot process it (ActiveMQ 5.17 reads the line as a header with an "
    "empty value)",
)
async def test_error_then_close_on_malformed_frame(connected_peer, stomp):
    """A valid SEND with one more header line that has no colon: not a
    header, so not a frame of the grammar."""
    peer = await connected_peer("SEND with a header line without a colon")
    message, frame = valid_send(stomp.destination, "malformed")
    broken = with_header_lines(frame, b"this-header-line-has-no-colon\n")
    await peer.send_raw(
        broken,
        f"SEND receipt:{message.receipt} with the header line "
        "'this-header-line-has-no-colon' (malformed)",
    )
    await peer.await_error_then_close("a SEND with a header line without a colon")


@requirement(
    "stomp.frame.server.error-on-undefined-escape",
    "MUST",
    'STOMP 1.2, Value Encoding ("Undefined escape sequences such as \\t (octet 92 and 116) MUST be treated '
    f'as a fatal protocol error"); {SEND_RULE}',
    depends=SESSION_AND_ECHO,
)
async def test_error_on_undefined_escape(connected_peer, stomp):
    """A valid SEND with a user-defined header whose value holds ``\\t``.
    It must not be processed (no RECEIPT) and must get an ERROR; whether the
    connection then closes is error-then-close-on-malformed-frame's rule."""
    peer = await connected_peer("SEND with an undefined escape")
    message, frame = valid_send(stomp.destination, "escape")
    broken = with_header_lines(frame, b"conformance-note:tab\\there\n")
    await peer.send_raw(
        broken,
        f"SEND receipt:{message.receipt} with header 'conformance-note:tab\\there' "
        "(\\t is no escape of STOMP 1.2)",
    )
    answer = await peer.next_or_close("the ERROR for an undefined escape sequence")
    if answer is None:
        raise AssertionError(
            f"the {peer.closed_text()} without an ERROR frame after a SEND with the undefined "
            "escape \\t (a SEND the server cannot process MUST get an ERROR frame)"
        )
    assert answer.command == "ERROR", (
        f"a SEND with the undefined escape \\t in a header is a fatal protocol error; the target answered "
        f"{summary(answer)}"
    )


@requirement(
    "stomp.frame.server.error-on-trailing-backslash",
    "MUST",
    'STOMP 1.2, Value Encoding ("Undefined escape sequences such as \\t (octet 92 and 116) MUST be treated '
    f'as a fatal protocol error"); {SEND_RULE}',
    depends=SESSION_AND_ECHO,
)
async def test_error_on_trailing_backslash(connected_peer, stomp):
    """A valid SEND with a user-defined header whose value ends in a lone
    backslash: octet 92, then the LF that ends the line (octets 92 and 10),
    none of the four escapes Value Encoding defines, so an undefined one.
    Another input than error-on-undefined-escape's ``\\t``: a decoder that
    replaces each backslash and the octet after it within the value finds no
    such pair here and may keep the backslash (swpt_stomp 0.1.0 does). A
    second user-defined header follows on the next line, so that a server
    reading the backslash as joining the two lines still has every header
    of the valid SEND: only taking the backslash for the fatal error it is
    makes the SEND go unprocessed. As in error-on-undefined-escape, it must
    not be processed (no RECEIPT) and must get an ERROR; the close is
    error-then-close-on-malformed-frame's rule."""
    peer = await connected_peer("SEND with a header value ending in a lone backslash")
    message, frame = valid_send(stomp.destination, "backslash")
    broken = with_header_lines(
        frame, b"conformance-note:ends-in-backslash\\\nconformance-next:plain\n"
    )
    await peer.send_raw(
        broken,
        f"SEND receipt:{message.receipt} with header 'conformance-note:ends-in-backslash\\' "
        "(a lone backslash, then the line's LF: octets 5c 0a, no escape of STOMP 1.2), then "
        "'conformance-next:plain'",
    )
    answer = await peer.next_or_close("the ERROR for a header value ending in a lone backslash")
    if answer is None:
        raise AssertionError(
            f"the {peer.closed_text()} without an ERROR frame after a SEND whose header value ends "
            "in a lone backslash (a SEND the server cannot process MUST get an ERROR frame)"
        )
    assert answer.command == "ERROR", (
        "a SEND whose header value ends in a lone backslash (octets 5c 0a: an escape sequence "
        "STOMP 1.2 does not define) is a fatal protocol error; the target answered "
        f"{summary(answer)}"
    )


@requirement(
    "stomp.frame.server.accepts-body-with-nul",
    "MUST",
    'STOMP 1.2, Header content-length ("If a content-length header is included, this number of octets '
    'MUST be read, regardless of whether or not there are NULL octets in the body")',
    depends=[
        *SESSION_AND_ECHO,
        DISCONNECT_RECEIPT,
        # A server may refuse the body as not JSON: the plain form of that answer
        # (ERROR then close, or a RECEIPT) is that case's rule, not this one's.
        "stomp.send.server.processes-or-refuses-non-json-body",
    ],
)
async def test_accepts_body_with_nul(connected_peer, stomp):
    """The body is a valid SMP message, a NUL, then the text of a whole
    DISCONNECT frame with a receipt of its own; content-length counts it
    all. A server reading content-length octets sees one SEND, whose body
    it may process (RECEIPT) or refuse as not JSON (ERROR, then close: the
    profile wants JSON bodies). A server that ends the body at the NUL
    processes the message and then takes the rest for a DISCONNECT and
    answers it: the smuggled receipt shows it. After a RECEIPT the harness
    sends a DISCONNECT receipt:... of its own, which must be the next thing
    answered."""
    peer = await connected_peer("SEND whose body holds a NUL")
    message, frame = valid_send(stomp.destination, "nul")
    smuggled = f"smuggled-{secrets.token_hex(4)}"
    body = message.body.encode("utf-8") + b"\x00" + f"DISCONNECT\nreceipt:{smuggled}\n\n".encode()
    await peer.send_frame(
        Frame("SEND", frame.headers, body),
        f"SEND with content-length {len(body)}, a NUL at octet {len(message.body)}",
        content_length=True,
    )

    def smuggling(answer: Frame) -> str | None:
        if answer.command == "RECEIPT" and answer.get("receipt-id") == smuggled:
            return (
                f"the target answered the DISCONNECT receipt:{smuggled} that was part of the SEND's body "
                f"after its NUL: it ended the body at the NUL instead of reading the content-length "
                f"({len(body)}) octets: {summary(answer)}"
            )
        return None

    answer = await peer.next_or_close("the answer to a SEND whose body holds a NUL")
    if answer is None:
        raise AssertionError(
            f"the {peer.closed_text()} without answering the SEND whose body holds a NUL "
            "(neither a RECEIPT nor an ERROR)"
        )
    problem = smuggling(answer)
    assert problem is None, problem
    if answer.command == "ERROR":
        closed, more = await peer.await_close()
        for text in more:
            assert smuggled not in text, (
                f"after its ERROR the target answered the DISCONNECT receipt:{smuggled} "
                f"that was part of the SEND's body: {text}"
            )
        return
    assert answer.command == "RECEIPT" and answer.get("receipt-id") == message.receipt, (
        f"a SEND receipt:{message.receipt} whose body holds a NUL must get its RECEIPT or an ERROR; the target "
        f"sent {summary(answer)}"
    )
    closing = f"closing-{secrets.token_hex(4)}"
    await peer.send_frame(
        Frame("DISCONNECT", (("receipt", closing),)), "DISCONNECT after the RECEIPT"
    )
    after = await peer.next_or_close(f"the RECEIPT for DISCONNECT receipt:{closing}")
    assert after is not None, (
        f"after the RECEIPT for the SEND the {peer.closed_text()} instead of answering "
        f"DISCONNECT receipt:{closing}"
    )
    problem = smuggling(after)
    assert problem is None, problem
    assert after.command == "RECEIPT" and after.get("receipt-id") == closing, (
        f"after the RECEIPT for the SEND whose body holds a NUL, DISCONNECT receipt:{closing} got "
        f"{summary(after)}: the rest of the body was read as frames"
    )


@requirement(
    "stomp.frame.server.accepts-crlf-line-ends",
    "MUST",
    'STOMP 1.2, STOMP Frames ("an end-of-line (EOL), which consists of an OPTIONAL carriage return (octet '
    '13) followed by a REQUIRED line feed") and Augmented BNF (EOL = [CR] LF)',
    # The case sends a CRLF heart-beat between the frames: an EOL refused as such is that case's rule.
    depends=[*SESSION_AND_ECHO, ACCEPTS_BEATS],
)
async def test_accepts_crlf_line_ends(open_peer, stomp, target):
    """CONNECT, a CRLF heart-beat, then a valid SEND, every line ended by
    CRLF: CONNECTED, then the RECEIPT."""
    peer = await open_peer("CRLF line ends")
    await peer.connect(
        stomp.connect_headers(target), eol=b"\r\n", note="CONNECT with CRLF line ends"
    )
    message, frame = valid_send(stomp.destination, "crlf")
    await peer.send_raw(b"\r\n", "an EOL written CR LF")
    await peer.send_frame(frame, "SEND with CRLF line ends", eol=b"\r\n")
    await receipt_for(
        peer, message.receipt, f"a SEND receipt:{message.receipt} with CRLF line ends"
    )


@requirement(
    "stomp.frame.server.repeated-header-first-wins",
    "SHOULD",
    'STOMP 1.2, Repeated Header Entries ("If a client or a server receives repeated frame header entries, '
    'only the first header entry SHOULD be used as the value of header entry")',
    depends=SESSION_AND_ECHO,
)
async def test_repeated_header_first_wins(connected_peer, stomp):
    """A valid SEND whose receipt header comes twice: the RECEIPT carries
    the first value."""
    peer = await connected_peer("SEND with receipt twice")
    message, frame = valid_send(stomp.destination, "first")
    second = f"second-{secrets.token_hex(4)}"
    await peer.send_frame(
        frame.with_headers(("receipt", second), replace=False),
        f"SEND with receipt:{message.receipt} then receipt:{second}",
    )
    answer = await peer.next_or_close("the RECEIPT for a SEND with two receipt headers")
    assert answer is not None, (
        f"the {peer.closed_text()} instead of answering a SEND with two receipt headers"
    )
    assert answer.command == "RECEIPT", (
        f"a SEND with two receipt headers (repeated headers are allowed; the "
        f"first counts) got {summary(answer)}"
    )
    got = answer.get("receipt-id")
    assert got == message.receipt, (
        f"the RECEIPT carries receipt-id:{got!r}: the server used "
        f"{'the second' if got == second else 'another'} receipt header, not the first "
        f"({message.receipt!r})"
    )


@requirement(
    "stomp.frame.server.keeps-header-spaces",
    "MUST",
    'STOMP 1.2, Value Encoding ("In STOMP 1.2, clients and servers MUST never trim or pad headers with '
    'spaces")',
    depends=SESSION_AND_ECHO,
)
async def test_keeps_header_spaces(connected_peer, stomp):
    """A valid SEND whose receipt value starts and ends with spaces: the
    RECEIPT's receipt-id keeps them."""
    peer = await connected_peer("SEND with spaces around the receipt value")
    message, frame = valid_send(stomp.destination, "spaces")
    value = f"  spaced {secrets.token_hex(3)}  "
    await peer.send_frame(frame.with_headers(("receipt", value)), f"SEND with receipt {value!r}")
    answer = await peer.next_or_close(
        "the RECEIPT for a SEND whose receipt value has spaces around it"
    )
    assert answer is not None, (
        f"the {peer.closed_text()} instead of answering a SEND receipt:{value!r}"
    )
    assert answer.command == "RECEIPT", f"a SEND with receipt {value!r} got {summary(answer)}"
    got = answer.get("receipt-id")
    assert got == value, (
        f"the RECEIPT carries receipt-id:{got!r} for receipt:{value!r}: the server trimmed or "
        "padded the header value"
    )


@requirement(
    "stomp.frame.server.unescapes-header-values",
    "MUST",
    'STOMP 1.2, Value Encoding ("When decoding frame headers, the following transformations MUST be '
    'applied ... Conversely when encoding frame headers, the reverse transformation MUST be applied")',
    depends=SESSION_AND_ECHO,
)
async def test_unescapes_header_values(connected_peer, stomp):
    """A valid SEND whose receipt value holds a colon, a backslash, a LF and
    a CR, escaped on the wire (\\c \\\\ \\n \\r). The RECEIPT's receipt-id,
    escaped again by the server, must decode to the same value. (A server
    that neither decodes nor encodes would echo the bytes unchanged; such a
    server also takes \\t for a value and fails error-on-undefined-escape.)"""
    peer = await connected_peer("SEND with escaped receipt")
    message, frame = valid_send(stomp.destination, "escaped")
    value = f"esc:{secrets.token_hex(3)}\\back\nline\rend"
    await peer.send_frame(
        frame.with_headers(("receipt", value)),
        f"SEND with receipt {value!r}, on the wire {escape_header_value(value)!r}",
    )
    answer = await peer.next_or_close("the RECEIPT for a SEND with an escaped receipt value")
    assert answer is not None, (
        f"the {peer.closed_text()} instead of answering a SEND whose receipt holds escaped octets"
    )
    assert answer.command == "RECEIPT", (
        f"a SEND whose receipt value holds escaped octets "
        f"({escape_header_value(value)!r}) got {summary(answer)}"
    )
    got = answer.get("receipt-id")
    assert got == value, (
        f"the RECEIPT's receipt-id decodes to {got!r}, not the receipt value {value!r} (on the "
        f"wire {escape_header_value(value)!r}): the server did not decode the escapes, or did not "
        "encode them again"
    )


@requirement(
    "stomp.frame.server.no-body-on-connected-or-receipt",
    "MUST",
    'STOMP 1.2, Body ("Only the SEND, MESSAGE, and ERROR frames MAY have a body. All other frames MUST NOT '
    'have a body")',
    depends=[*SESSION, DISCONNECT_RECEIPT],
)
async def test_no_body_on_connected_or_receipt(connected_peer):
    """The CONNECTED of a session and the RECEIPT of its DISCONNECT."""
    peer = await connected_peer("CONNECTED and RECEIPT bodies")
    assert peer.connected is not None
    assert not peer.connected.body, f"CONNECTED carries a body: {summary(peer.connected)}"
    receipt = await peer.disconnect(f"nobody-{secrets.token_hex(4)}")
    assert not receipt.body, f"RECEIPT carries a body: {summary(receipt)}"


async def error_for_missing_destination(connected_peer, stomp) -> tuple[str, Frame]:
    """The ERROR answering a SEND receipt:... without destination (the
    frame of error-on-missing-destination); a target that answers
    otherwise blocks the ERROR-header cases by that rule."""
    peer = await connected_peer("SEND without destination")
    message, frame = valid_send(stomp.destination, "errorheaders")
    await peer.send_frame(frame.without("destination"), "SEND without destination")
    answer = await peer.next_or_close("the ERROR for a SEND without destination")
    if answer is None or answer.command != "ERROR":
        got = "a close" if answer is None else summary(answer)
        blocked(
            MISSING_DESTINATION,
            "failed within this case",
            f"a SEND without destination got {got}, not an ERROR, so the ERROR's headers cannot be judged",
        )
    return message.receipt, answer


@requirement(
    "stomp.frame.server.error-has-message-header",
    "SHOULD",
    'STOMP 1.2, ERROR ("The ERROR frame SHOULD contain a message header with a short description of the '
    'error")',
    depends=SESSION_AND_ECHO,
)
async def test_error_has_message_header(connected_peer, stomp):
    _, error = await error_for_missing_destination(connected_peer, stomp)
    assert error.get("message"), (
        f"the ERROR carries no (or an empty) message header: {summary(error)}"
    )


@requirement(
    "stomp.frame.server.error-carries-receipt-id",
    "SHOULD",
    'STOMP 1.2, ERROR ("if the frame included a receipt header, the ERROR frame SHOULD set the receipt-id '
    'header to match the value of the receipt header of the frame which the error is related to")',
    depends=SESSION_AND_ECHO,
)
async def test_error_carries_receipt_id(connected_peer, stomp):
    receipt, error = await error_for_missing_destination(connected_peer, stomp)
    got = error.get("receipt-id")
    assert got == receipt, (
        f"the ERROR for the SEND receipt:{receipt} carries receipt-id:{got!r}: {summary(error)}"
    )


async def read_answers(peer: StompPeer, count: int, what: str) -> None:
    """Read up to ``count`` frames, judging only their grammar (the peer's
    decoder raises a violation of it): which frames a node answers with,
    and when, is the other cases' rules."""
    for _ in range(count):
        try:
            if await peer.next_or_close(what) is None:
                return
        except DeadlineExceeded:
            return


async def shown_frames(connected_peer, stomp) -> None:
    """Each kind of frame a server of the profile sends: CONNECTED, the
    RECEIPTs of a SEND and of a DISCONNECT, an ERROR (for a SEND without
    destination) and what comes before the close. A session the node ends
    early shows less; a refused handshake or CONNECT shows nothing, and the
    case is blocked by the rule that says so."""
    try:
        peer = await connected_peer("CONNECTED, RECEIPTs")
    except TlsRefused as exc:
        blocked(
            TLS, "failed within this case", f"the TLS handshake failed ({exc}), so no frame came"
        )
    message, frame = valid_send(stomp.destination, "grammar")
    with exchange_cut_short(peer.conn.trace):
        await peer.send_frame(frame, f"SEND receipt:{message.receipt}")
        await read_answers(peer, 1, f"the answer to SEND receipt:{message.receipt}")
        if not peer.closed:
            receipt = f"grammar-{secrets.token_hex(4)}"
            await peer.send_frame(Frame("DISCONNECT", (("receipt", receipt),)), "DISCONNECT")
            await read_answers(peer, 1, f"the answer to DISCONNECT receipt:{receipt}")
    peer = await connected_peer("an ERROR")
    message, frame = valid_send(stomp.destination, "grammar-error")
    with exchange_cut_short(peer.conn.trace):
        await peer.send_frame(frame.without("destination"), "SEND without destination")
        await read_answers(peer, 1, "the answer to a SEND without destination")
        await peer.await_close()


@requirement(
    SERVER_GRAMMAR,
    "MUST",
    'STOMP 1.2, STOMP Frames ("A frame consists of a command, a set of optional headers and an '
    'optional body."); STOMP 1.2, Augmented BNF (frame = command EOL *( header EOL ) EOL *OCTET NULL '
    '*( EOL ); server-command; header = header-name ":" header-value); STOMP 1.2, Value Encoding',
    basis="wire-format: the frame of STOMP 1.2's Augmented BNF (command, header lines name:value, "
    "an empty line, the body, NUL; escapes of Value Encoding) that every frame a server sends has",
    grammar=True,
)
async def test_sends_well_formed_frames(connected_peer, stomp, node_grammar):
    """Every frame the server sent in this run, in every case's traffic, is
    a frame of the grammar: the violations the other cases met (each of them
    blocked by this case) and those of its own exchange, which shows each
    frame a server of the profile sends: CONNECTED, the RECEIPTs of a SEND
    and of a DISCONNECT, and an ERROR (for a SEND without destination) and
    what comes before the close (shown_frames)."""
    with node_grammar.judging():
        await shown_frames(connected_peer, stomp)

"""The STOMP reference node's faults: ``python -m reference_impl.stomp serve
--fault NAME`` and ``client --fault NAME`` (repeatable). Each breaks one rule
of the Swaptacular STOMP profile or of STOMP 1.2 on purpose; ``cases`` are
the conformance cases that must catch it (see reference_impl/faults.py and
docs/mutation.md).

Each fault is declared as what it changes at the named points of
:data:`POINTS`: the server's sans-I/O core (``ServerConnection(faults=...)``,
server.py), its node layer (``StompServerNode(faults=...)``, node.py: the
TLS context, the store, timings), the client session
(``ClientSession(faults=...)``, client.py) and the client's settings and TLS
context compute the correct value there and pass it through
:class:`~reference_impl.faults.FaultPoints`, so the rules read without the
ways of breaking them.
"""

from __future__ import annotations

import dataclasses
import enum
import ssl
from collections import deque
from typing import Any, Callable, Optional

from ..faults import FaultSpec, fault_enum
from .frame import Frame, FrameError, FrameParser, escape_header_value

POINTS: dict[str, str] = {
    # --- the server's core (server.ServerConnection)
    "received-bytes-refusal": "why a chunk of received bytes is refused as malformed (None: it "
    "is not); context: data",
    "received-items": "the frames and EOLs (heart-beats) the parser made of the bytes received, "
    "in order; no context",
    "eol-refusal": "(message, detail) of an ERROR for an EOL received between frames (None: "
    "accepted); context: connected",
    "connect-refusal": "(message, detail) of an ERROR for a CONNECT or STOMP frame that passed the "
    "version and host checks (None: accepted); context: frame",
    "connect-frame": "a CONNECT or STOMP frame as the server reads it, before version "
    "negotiation; no context",
    "version-accepted": "whether CONNECT's accept-version names a version we speak (1.2); "
    "context: accept (the header)",
    "disconnect-receipt": "the receipt header of a DISCONNECT, answered with a RECEIPT (None: "
    "none); no context",
    "header-choice": "the value of a header that a SEND repeats (the first entry); context: "
    "values (every entry, in order)",
    "header-value": "a SEND header's value as the server reads it; no context",
    "header-unescape": "the function that decodes each header name and value of an escaped frame "
    "(frame.unescape_header_value: ValueError on an undefined escape, a lone backslash at the end "
    "included); no context",
    "destination-accepted": "whether a SEND's destination header is present and not empty; "
    "context: destination",
    "refusal-answer": '(send ERROR, then) for a refused frame: then is "close", "ignore-input" '
    '(stay open, read nothing more) or "continue" (go on with the next frame); (True, "close"); '
    'context: kind ("malformed", "profile": a header the profile requires of senders, "body": '
    'not JSON or not SMP, "refused": any other)',
    "outgoing-frame": "a frame the server sends (CONNECTED, RECEIPT, ERROR), before it is "
    "encoded; no context",
    "send-receipt-id": "the receipt-id of the RECEIPT for a SEND (its receipt header); no context",
    "receipt-needs": "how many stores a SEND's RECEIPT waits for (every store requested so far, "
    "its own included); no context",
    "release-held": "whether the frames ready to go are held back (False); context: "
    "stores_pending (stores requested and not yet durable, none failed)",
    "released-frames": "the frames released together, as (bytes, is a SEND's RECEIPT), in order; "
    "no context",
    # --- the server's node layer (node.StompServerNode)
    "server-tls-context": "the server's ssl.SSLContext (tls.server_context); no context",
    "store-wiped-on-start": "whether the store is emptied when the server starts (False); no "
    "context",
    "read-timeout": "seconds the server waits for data from a client (None: for ever); context: "
    "connected, heart_beat_header_missing (the CONNECT had no heart-beat header)",
    "heart-beat-send-interval": "ms between the EOLs the server sends an idle client (0: none); "
    "no context",
    "deferred-stores": "the store requests of one read that are confirmed at once and written "
    "to the store only FAULT_STORE_DELAY seconds later (none); context: requests (all of them)",
    "removed-after-cut": "the messages removed from the store when a connection ends (none); "
    "context: stored (the messages it stored), disconnected (it ended with DISCONNECT)",
    "manifest-text": "the stomp.toml text serve --manifest writes; no context",
    # --- the client (client.ClientSession, settings_from_manifest, tls_context)
    "messages-to-send": "the indexes of the messages the session sends, in order (all); no context",
    "connect-headers": "the CONNECT headers, before a variant reorders them; no context",
    "connect-frames": "the frames written when a connection starts ([CONNECT]); context: "
    "first_pending (the SEND of the first message to send, None if none)",
    "frames-after-connected": "frames the client sends right after CONNECTED, before its SENDs "
    "(none); context: destination",
    "disconnect-frames": "the frames written when the client disconnects ([DISCONNECT]); "
    "context: first_send (the SEND of the first message, None if none)",
    "send-headers": "a SEND's headers (destination, receipt, type, content-type, persistent), "
    "before a variant reorders them; no context",
    "send-body": "a SEND's body (the message's JSON text); no context",
    "send-bytes": "a SEND frame's bytes as written (after a variant's encoding); no context",
    "send-window": "how many SENDs may go out now (the window less the SENDs in flight); context: "
    "pending (messages waiting)",
    "disconnect-after-sends": "whether the client sends DISCONNECT right after its SENDs, before "
    "their RECEIPTs (False); context: in_flight (SENDs not receipted)",
    "counted-when-written": "whether a SEND counts as delivered once written (False: only once "
    "receipted); no context",
    "confirmed-by-receipt": "the SENDs in flight a RECEIPT confirms (every one up to the one it "
    "names); no context",
    "resent-after-drop": "the indexes of the messages sent on a lost connection and not "
    "receipted that are sent again (all); no context",
    "manifest-values": "the manifest whose host, login and destination the client sends "
    "(${NODE_ID} substituted); context: manifest (as written)",
    "client-certificate": "(cert_file, key_file) the client presents; no context",
    "client-tls-context": "the client's ssl.SSLContext (tls.client_context); no context",
}

FAULT_STORE_DELAY = 3.0
"""How late the deferred stores (receipt-before-store, pipelined-stored-late)
are written."""
FAULT_IDLE_DROP = 2.0
"""The read timeout of drop-idle-connections and missing-heart-beat-expects-beats."""


# --- what the server faults change -----------------------------------------------------------


def manifest_without_destination(text: str) -> str:
    return "".join(
        line for line in text.splitlines(keepends=True) if not line.startswith("destination")
    )


def tls_1_2_allowed(context: ssl.SSLContext) -> ssl.SSLContext:
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def client_certificate_optional(context: ssl.SSLContext) -> ssl.SSLContext:
    context.verify_mode = ssl.CERT_OPTIONAL
    return context


def client_certificate_unchecked(context: ssl.SSLContext) -> ssl.SSLContext:
    context.verify_mode = ssl.CERT_NONE
    return context


def untrusted_server_certificate(context: ssl.SSLContext) -> ssl.SSLContext:
    import trustme  # only this fault needs it: a CA nobody was given

    trustme.CA().issue_cert("stomp-server.invalid").configure_cert(context)
    return context


def connect_command_refused(refusal: Any, *, frame: Frame) -> Any:
    return ("CONNECT not supported", "use STOMP") if frame.command == "CONNECT" else refusal


def stomp_command_refused(refusal: Any, *, frame: Frame) -> Any:
    return ("STOMP not supported", "use CONNECT") if frame.command == "STOMP" else refusal


def login_required(refusal: Any, *, frame: Frame) -> Any:
    return ("login required", "no login header") if frame.get("login") is None else refusal


def passcode_required(refusal: Any, *, frame: Frame) -> Any:
    if frame.get("passcode") is None:
        return ("passcode required", "no passcode header")
    return refusal


def without_header(name: str, command: str):
    """A change of outgoing-frame: ``command`` frames lose every ``name`` header."""

    def change(frame: Frame) -> Frame:
        if frame.command != command:
            return frame
        return Frame(frame.command, tuple(h for h in frame.headers if h[0] != name), frame.body)

    change.__name__ = f"{command.lower()}_without_{name.replace('-', '_')}"
    return change


def any_version_accepted(accepted: bool, **_: Any) -> bool:
    return True


def connect_values_trimmed(frame: Frame) -> Frame:
    """CONNECT read as STOMP 1.0 servers read it, spaces around every header
    value dropped (ActiveMQ 5.17 parses CONNECT in 1.0 mode,
    StompWireFormat.parseHeaders)."""
    return Frame(
        frame.command, tuple((name, value.strip()) for name, value in frame.headers), frame.body
    )


def no_heart_beats(interval_ms: int) -> int:
    return 0


def idle_drop(timeout: Optional[float], **_: Any) -> float:
    return FAULT_IDLE_DROP


def missing_heart_beat_expects_beats(
    timeout: Optional[float], *, connected: bool, heart_beat_header_missing: bool
) -> Optional[float]:
    """As if a CONNECT without heart-beat promised the client's beats."""
    return FAULT_IDLE_DROP if connected and heart_beat_header_missing else timeout


def eol_refused(refusal: Any, *, connected: bool) -> Any:
    return ("unexpected EOL", "an EOL between frames") if connected else refusal


def no_receipt(receipt: Optional[str]) -> None:
    return None


def crlf_refused(reason: Optional[str], *, data: bytes) -> Optional[str]:
    return "CRLF line ends are not accepted" if b"\r\n" in data else reason


def body_ends_at_nul(items: list) -> list:
    """A frame's body ends at its first NUL, whatever content-length says;
    the rest is read as more frames (a rest that does not parse is dropped)."""
    out: list = []
    queue = deque(items)
    while queue:
        item = queue.popleft()
        if not isinstance(item, Frame) or b"\x00" not in item.body:
            out.append(item)
            continue
        body, _, rest = item.body.partition(b"\x00")
        out.append(
            Frame(item.command, tuple(h for h in item.headers if h[0] != "content-length"), body)
        )
        try:
            queue.extendleft(reversed(FrameParser().receive_data(rest + b"\x00")))
        except FrameError:
            pass
    return out


def receipt_with_body(frame: Frame) -> Frame:
    if frame.command != "RECEIPT":
        return frame
    return Frame(frame.command, frame.headers, b"receipted\n")


def trimmed(value: str) -> str:
    return value.strip(" ")


def last_entry(value: str, *, values: list[str]) -> str:
    return values[-1]


def escaped(value: str) -> str:
    return escape_header_value(value)


def trailing_backslash_kept(decode: Callable[[str], str]) -> Callable[[str], str]:
    """A header name or value ending in a lone backslash keeps it as a
    backslash (as swpt_stomp 0.1.0 does); every other escape, \\t included,
    is decoded by ``decode`` as before."""

    def decode_keeping_trailing_backslash(text: str) -> str:
        backslashes = len(text) - len(text.rstrip("\\"))
        if backslashes % 2:  # the last one is no escaped backslash's second half
            return decode(text[:-1]) + "\\"
        return decode(text)

    return decode_keeping_trailing_backslash


def missing_destination_accepted(accepted: bool, **_: Any) -> bool:
    return True


def silent_on_invalid_body(answer: tuple[bool, str], *, kind: str) -> tuple[bool, str]:
    return (False, "continue") if kind == "body" else answer


def open_after_profile_error(answer: tuple[bool, str], *, kind: str) -> tuple[bool, str]:
    return (answer[0], "ignore-input") if kind == "profile" else answer


def no_error_on_malformed(answer: tuple[bool, str], *, kind: str) -> tuple[bool, str]:
    return (False, answer[1]) if kind == "malformed" else answer


def open_after_malformed(answer: tuple[bool, str], *, kind: str) -> tuple[bool, str]:
    """The parser is dead: input is ignored, the connection never closed."""
    return (answer[0], "ignore-input") if kind == "malformed" and answer[0] else answer


def wrong_receipt_id(receipt: str) -> str:
    return receipt + "-x"


def receipt_at_once(needs: int) -> int:
    return 0


def held_until_all_stored(held: bool, *, stores_pending: bool) -> bool:
    """The node confirms stores one at a time: the frames wait until the
    whole pending batch is durable, so its RECEIPTs leave together."""
    return held or stores_pending


def receipts_reversed(released: list[tuple[bytes, bool]]) -> list[tuple[bytes, bool]]:
    receipts = [data for data, receipt in released if receipt][::-1]
    return [(receipts.pop(0), True) if receipt else (data, False) for data, receipt in released]


def line_without_colon(data: bytes, line: bytes) -> bytes:
    """The frame ``data`` with ``line`` right after its command: a header
    line without a colon, which the frame grammar has no place for."""
    end = data.index(b"\n")
    eol = b"\r\n" if data[end - 1 : end] == b"\r" else b"\n"
    return data[: end + 1] + line + eol + data[end + 1 :]


def receipt_line_without_colon(released: list[tuple[bytes, bool]]) -> list[tuple[bytes, bool]]:
    return [
        (line_without_colon(data, b"stored") if receipt else data, receipt)
        for data, receipt in released
    ]


def send_line_without_colon(data: bytes) -> bytes:
    return line_without_colon(data, b"persistent")


def all_deferred(deferred: list, *, requests: list) -> list:
    return list(requests)


def all_but_last_deferred(deferred: list, *, requests: list) -> list:
    return list(requests[:-1]) if len(requests) > 1 else deferred


def forgotten_after_cut(removed: list, *, stored: list, disconnected: bool) -> list:
    return removed if disconnected else [*removed, *stored]


def wiped(wipe: bool) -> bool:
    return True


# --- what the client faults change -----------------------------------------------------------


class ClientFault(str, enum.Enum):
    """The client faults as members, for ``ClientSession(faults=...)``. The
    names are the ``--fault`` names of the registry below (role "client")."""

    COUNT_BEFORE_RECEIPT = "count-before-receipt"
    NO_RESEND = "no-resend"
    OMIT_RECEIPT = "omit-receipt"
    OMIT_TYPE = "omit-type"
    OMIT_CONTENT_TYPE = "omit-content-type"
    PERSISTENT_FALSE = "persistent-false"
    SEND_SUBSCRIBE = "send-subscribe"
    SEND_LINE_WITHOUT_COLON = "send-line-without-colon"
    BODY_NOT_JSON = "body-not-json"
    LITERAL_NODE_ID_HOST = "literal-node-id-host"
    LITERAL_NODE_ID_LOGIN = "literal-node-id-login"
    LITERAL_NODE_ID_DESTINATION = "literal-node-id-destination"
    CHECK_HOSTNAME = "check-hostname"
    NO_VERIFY = "no-verify"
    ALLOW_TLS_1_2 = "allow-tls-1-2"
    NO_CLIENT_CERTIFICATE = "no-client-certificate"
    SEND_BEFORE_CONNECT = "send-before-connect"
    SKIP_FIRST_MESSAGE = "skip-first-message"
    SEND_AFTER_DISCONNECT = "send-after-disconnect"
    OMIT_ACCEPT_VERSION = "omit-accept-version"
    EXACT_RECEIPTS = "client-exact-receipts"


def counted_at_once(counted: bool) -> bool:
    return True


def receipt_confirms_its_send_only(confirmed: list) -> list:
    return confirmed[-1:]


def nothing_resent(indexes: list[int]) -> list[int]:
    return []


def without_headers(*names: str):
    """A change of connect-headers or send-headers: ``names`` left out."""

    def change(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return [header for header in headers if header[0] not in names]

    change.__name__ = "without_" + "_".join(name.replace("-", "_") for name in names)
    return change


def persistent_false(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [
        ("persistent", "false") if name == "persistent" else (name, value)
        for name, value in headers
    ]


def whole_window(room: int, *, pending: int) -> int:
    """Without receipts nothing limits what is in flight."""
    return pending


def disconnect_confirms_sends(disconnect: bool, *, in_flight: int) -> bool:
    """Without receipts on the SENDs only a receipted DISCONNECT can confirm
    them (a RECEIPT confirms everything before it)."""
    return disconnect or in_flight > 0


def subscribe_after_connected(frames: list[Frame], *, destination: str) -> list[Frame]:
    subscribe = Frame("SUBSCRIBE", (("id", "0"), ("destination", destination), ("ack", "auto")))
    return [*frames, subscribe]


def body_cut_short(body: bytes) -> bytes:
    """The JSON text one byte short: no JSON parser accepts it."""
    return body[:-1]


def literal(name: str):
    """A change of manifest-values: ``name`` as the manifest writes it."""

    def change(values: Any, *, manifest: Any) -> Any:
        return dataclasses.replace(values, **{name: getattr(manifest, name)})

    change.__name__ = f"literal_{name}"
    return change


def hostname_checked(context: ssl.SSLContext) -> ssl.SSLContext:
    context.check_hostname = True
    return context


def chain_unverified(context: ssl.SSLContext) -> ssl.SSLContext:
    context.verify_mode = ssl.CERT_NONE
    return context


def no_certificate(files: tuple[Optional[str], Optional[str]]) -> tuple[None, None]:
    return (None, None)


def send_before_connect(frames: list[Frame], *, first_pending: Optional[Frame]) -> list[Frame]:
    return frames if first_pending is None else [first_pending, *frames]


def first_message_skipped(indexes: list[int]) -> list[int]:
    return indexes[1:]


def send_after_disconnect(frames: list[Frame], *, first_send: Optional[Frame]) -> list[Frame]:
    return frames if first_send is None else [*frames, first_send]


TLS = "stomp.tls.server."
CONNECT = "stomp.connect.server."
FRAME = "stomp.frame.server."
SEND = "stomp.send.server."
RECEIPT = "stomp.receipt.server."
MANIFEST = "stomp.manifest.server."

SPECS: tuple[FaultSpec, ...] = (
    # --- the node's manifest (serve --manifest)
    FaultSpec(
        "manifest-without-destination",
        "server",
        "the stomp.toml written by --manifest has no destination key",
        (MANIFEST + "provides-valid-manifest",),
        changes={"manifest-text": manifest_without_destination},
    ),
    # --- TLS (the server's context)
    FaultSpec(
        "accept-tls-1-2",
        "server",
        "the server's TLS context allows TLS 1.2 (minimum_version TLSv1_2)",
        (TLS + "refuses-tls-1-2",),
        changes={"server-tls-context": tls_1_2_allowed},
    ),
    FaultSpec(
        "client-certificate-optional",
        "server",
        "the server asks for a client certificate but completes the handshake without one (CERT_OPTIONAL)",
        (TLS + "requires-client-certificate",),
        changes={"server-tls-context": client_certificate_optional},
    ),
    FaultSpec(
        "no-client-certificate-check",
        "server",
        "the server neither asks for nor verifies client certificates (CERT_NONE)",
        (TLS + "requires-client-certificate", TLS + "refuses-untrusted-client-certificate"),
        changes={"server-tls-context": client_certificate_unchecked},
    ),
    FaultSpec(
        "untrusted-server-certificate",
        "server",
        "the server presents a certificate from a CA of its own, made at start, that no client trusts",
        (TLS + "completes-mutual-handshake",),
        changes={"server-tls-context": untrusted_server_certificate},
    ),
    # --- CONNECT / CONNECTED
    FaultSpec(
        "refuse-connect-command",
        "server",
        "answer a CONNECT frame with ERROR (the STOMP frame still gets CONNECTED)",
        (CONNECT + "connect-gets-connected",),
        changes={"connect-refusal": connect_command_refused},
    ),
    FaultSpec(
        "refuse-stomp-command",
        "server",
        "answer a STOMP frame (the CONNECT synonym) with ERROR",
        (CONNECT + "stomp-command-gets-connected",),
        changes={"connect-refusal": stomp_command_refused},
    ),
    FaultSpec(
        "connected-without-version",
        "server",
        "CONNECTED frames carry no version header",
        (CONNECT + "connected-says-version-1-2",),
        changes={"outgoing-frame": without_header("version", "CONNECTED")},
    ),
    FaultSpec(
        "ignore-accept-version",
        "server",
        "a CONNECT whose accept-version has no version in common (no 1.2) gets CONNECTED version:1.2 anyway",
        (CONNECT + "error-on-no-common-version",),
        changes={"version-accepted": any_version_accepted},
    ),
    FaultSpec(
        "trim-connect-headers",
        "server",
        "CONNECT and STOMP header values lose their leading and trailing spaces before the server reads "
        "them (accept-version ' 1.2 ' counts as 1.2); other frames keep them",
        (CONNECT + "keeps-connect-header-spaces",),
        changes={"connect-frame": connect_values_trimmed},
    ),
    FaultSpec(
        "require-login",
        "server",
        "answer a CONNECT without a login header with ERROR",
        (CONNECT + "does-not-require-login",),
        changes={"connect-refusal": login_required},
    ),
    FaultSpec(
        "require-passcode",
        "server",
        "answer a CONNECT without a passcode header with ERROR",
        (CONNECT + "does-not-require-passcode",),
        changes={"connect-refusal": passcode_required},
    ),
    FaultSpec(
        "no-heart-beats",
        "server",
        "CONNECTED offers heart-beats but the server never sends any",
        (CONNECT + "sends-heart-beats",),
        changes={"heart-beat-send-interval": no_heart_beats},
    ),
    FaultSpec(
        "missing-heart-beat-expects-beats",
        "server",
        "a CONNECT without heart-beat header is taken to promise the client's heart-beats (the session is "
        "dropped after 2 seconds with nothing received) instead of meaning heart-beat:0,0",
        (CONNECT + "missing-heart-beat-means-none",),
        changes={"read-timeout": missing_heart_beat_expects_beats},
    ),
    FaultSpec(
        "refuse-heart-beats",
        "server",
        "an EOL (heart-beat) received after CONNECT is answered with ERROR and a close",
        (CONNECT + "accepts-heart-beats",),
        changes={"eol-refusal": eol_refused},
    ),
    FaultSpec(
        "drop-idle-connections",
        "server",
        "close any connection after 2 seconds with nothing received, whatever heart-beating was agreed",
        (CONNECT + "keeps-idle-connection", CONNECT + "missing-heart-beat-means-none"),
        changes={"read-timeout": idle_drop},
    ),
    FaultSpec(
        "no-disconnect-receipt",
        "server",
        "a DISCONNECT with a receipt header is answered by closing, without the RECEIPT",
        (CONNECT + "disconnect-gets-receipt",),
        changes={"disconnect-receipt": no_receipt},
    ),
    # --- frames
    FaultSpec(
        "no-error-on-malformed",
        "server",
        "a malformed frame makes the server close the connection without sending ERROR",
        (
            FRAME + "error-then-close-on-malformed-frame",
            FRAME + "error-on-undefined-escape",
            FRAME + "error-on-trailing-backslash",
        ),
        changes={"refusal-answer": no_error_on_malformed},
    ),
    FaultSpec(
        "open-after-error",
        "server",
        "after an ERROR for a malformed frame the connection stays open (input is ignored)",
        (FRAME + "error-then-close-on-malformed-frame",),
        changes={"refusal-answer": open_after_malformed},
    ),
    FaultSpec(
        "body-ends-at-nul",
        "server",
        "a SEND body ends at its first NUL even when content-length counts more; the rest is read as frames",
        (FRAME + "accepts-body-with-nul",),
        changes={"received-items": body_ends_at_nul},
    ),
    FaultSpec(
        "refuse-crlf",
        "server",
        "frames whose lines end with CRLF are treated as malformed (ERROR, close)",
        (FRAME + "accepts-crlf-line-ends",),
        changes={"received-bytes-refusal": crlf_refused},
    ),
    FaultSpec(
        "body-on-receipt",
        "server",
        "RECEIPT frames carry a body (only SEND, MESSAGE and ERROR may)",
        (FRAME + "no-body-on-connected-or-receipt",),
        changes={"outgoing-frame": receipt_with_body},
    ),
    FaultSpec(
        "receipt-line-without-colon",
        "server",
        "the RECEIPT of a SEND carries a line 'stored' after its command: a header line without a "
        "colon, in the middle of a session",
        (FRAME + "sends-well-formed-frames",),
        changes={"released-frames": receipt_line_without_colon},
    ),
    FaultSpec(
        "error-without-message",
        "server",
        "ERROR frames carry no message header",
        (FRAME + "error-has-message-header",),
        changes={"outgoing-frame": without_header("message", "ERROR")},
    ),
    FaultSpec(
        "error-without-receipt-id",
        "server",
        "an ERROR answering a frame with a receipt header carries no receipt-id",
        (FRAME + "error-carries-receipt-id",),
        changes={"outgoing-frame": without_header("receipt-id", "ERROR")},
    ),
    FaultSpec(
        "trim-header-values",
        "server",
        "header values are stripped of leading and trailing spaces",
        (FRAME + "keeps-header-spaces",),
        changes={"header-value": trimmed},
    ),
    FaultSpec(
        "last-header-wins",
        "server",
        "of repeated headers the last entry is used instead of the first",
        (FRAME + "repeated-header-first-wins",),
        changes={"header-choice": last_entry},
    ),
    FaultSpec(
        "no-header-unescape",
        "server",
        "header values are kept as escaped on the wire (\\c stays \\c) instead of being unescaped",
        (FRAME + "unescapes-header-values",),
        changes={"header-value": escaped},
    ),
    FaultSpec(
        "keep-trailing-backslash",
        "server",
        "a header value (or name) ending in a lone backslash keeps it as a backslash instead of being a "
        "fatal error (other undefined escapes, \\t, still are)",
        (FRAME + "error-on-trailing-backslash",),
        changes={"header-unescape": trailing_backslash_kept},
    ),
    # --- SEND
    FaultSpec(
        "accept-missing-destination",
        "server",
        "a SEND without a destination header is stored and receipted",
        (SEND + "error-on-missing-destination",),
        changes={"destination-accepted": missing_destination_accepted},
    ),
    FaultSpec(
        "silent-on-invalid-body",
        "server",
        "a SEND whose body is not JSON or not a valid SMP message gets neither RECEIPT nor ERROR (dropped)",
        (
            SEND + "processes-or-refuses-non-json-body",
            SEND + "processes-or-refuses-invalid-smp-body",
        ),
        changes={"refusal-answer": silent_on_invalid_body},
    ),
    FaultSpec(
        "open-after-profile-error",
        "server",
        "a SEND missing receipt, type or content-type, or with persistent not true, gets ERROR but the "
        "connection stays open (input is ignored)",
        (
            SEND + "processes-or-refuses-missing-type",
            SEND + "processes-or-refuses-missing-content-type",
            SEND + "processes-or-refuses-non-persistent",
            SEND + "processes-or-refuses-missing-receipt",
        ),
        changes={"refusal-answer": open_after_profile_error},
    ),
    # --- receipts and storage
    FaultSpec(
        "wrong-receipt-id",
        "server",
        "RECEIPTs for SENDs carry the receipt header's value with '-x' appended",
        (RECEIPT + "receipt-id-echoes-receipt",),
        changes={"send-receipt-id": wrong_receipt_id},
    ),
    FaultSpec(
        "receipts-out-of-order",
        "server",
        "RECEIPTs that become ready together are sent in reverse order",
        (RECEIPT + "receipts-in-order",),
        changes={"release-held": held_until_all_stored, "released-frames": receipts_reversed},
    ),
    FaultSpec(
        "receipt-before-store",
        "server",
        "a SEND is receipted at once and written to the store 3 seconds later",
        # Only this one fails: receipt-confirms-pipelined-sends, stored-after-connection-cut
        # and stored-after-restart depend on receipted-message-is-stored and are blocked by it.
        (RECEIPT + "receipted-message-is-stored",),
        changes={"receipt-needs": receipt_at_once, "deferred-stores": all_deferred},
    ),
    FaultSpec(
        "pipelined-stored-late",
        "server",
        "when several SENDs arrive together, all are receipted at once but only the last is stored "
        "then; the others are written 3 seconds later (a write-behind for bursts)",
        (RECEIPT + "receipt-confirms-pipelined-sends",),
        changes={"deferred-stores": all_but_last_deferred},
    ),
    FaultSpec(
        "forget-on-connection-cut",
        "server",
        "when a connection ends without DISCONNECT, the messages it stored are removed from the store",
        (RECEIPT + "stored-after-connection-cut",),
        changes={"removed-after-cut": forgotten_after_cut},
    ),
    FaultSpec(
        "store-lost-on-restart",
        "server",
        "the store is emptied when the server starts (as if messages were only kept in memory)",
        (RECEIPT + "stored-after-restart",),
        changes={"store-wiped-on-start": wiped},
    ),
    # --- client role (python -m reference_impl.stomp client --fault NAME; ClientFault above has
    # the same names)
    FaultSpec(
        "count-before-receipt",
        "client",
        "print DELIVERED=<n> as soon as the SEND is written, before its RECEIPT",
        ("stomp.receipt.client.delivered-only-after-receipt",),
        changes={"counted-when-written": counted_at_once},
    ),
    FaultSpec(
        "client-exact-receipts",
        "client",
        "a RECEIPT confirms only the SEND it names; the earlier SENDs of the connection stay in flight "
        "(footnote 2 ignored)",
        ("stomp.receipt.client.accepts-cumulative-receipt",),
        changes={"confirmed-by-receipt": receipt_confirms_its_send_only},
    ),
    FaultSpec(
        "no-resend",
        "client",
        "after a dropped connection, give up the messages sent on it and not receipted",
        ("stomp.receipt.client.resends-unreceipted-after-drop",),
        changes={"resent-after-drop": nothing_resent},
    ),
    FaultSpec(
        "omit-receipt",
        "client",
        "SENDs carry no receipt header (a receipted DISCONNECT confirms them instead)",
        ("stomp.send.client.includes-receipt",),
        changes={
            "send-headers": without_headers("receipt"),
            "send-window": whole_window,
            "disconnect-after-sends": disconnect_confirms_sends,
        },
    ),
    FaultSpec(
        "omit-type",
        "client",
        "SENDs carry no type header",
        ("stomp.send.client.includes-type",),
        changes={"send-headers": without_headers("type")},
    ),
    FaultSpec(
        "omit-content-type",
        "client",
        "SENDs carry no content-type header",
        ("stomp.send.client.includes-content-type",),
        changes={"send-headers": without_headers("content-type")},
    ),
    FaultSpec(
        "persistent-false",
        "client",
        "SENDs carry persistent:false",
        ("stomp.send.client.persistent-true",),
        changes={"send-headers": persistent_false},
    ),
    FaultSpec(
        "send-before-connect",
        "client",
        "on each connection, the first pending SEND goes out before CONNECT",
        ("stomp.connect.client.sends-connect-first",),
        changes={"connect-frames": send_before_connect},
    ),
    FaultSpec(
        "skip-first-message",
        "client",
        "the first message of the messages file is never sent",
        ("stomp.send.client.sends-each-message",),
        changes={"messages-to-send": first_message_skipped},
    ),
    FaultSpec(
        "send-after-disconnect",
        "client",
        "right after its DISCONNECT, send the first message's SEND again",
        ("stomp.connect.client.nothing-after-disconnect",),
        changes={"disconnect-frames": send_after_disconnect},
    ),
    FaultSpec(
        "send-line-without-colon",
        "client",
        "SEND frames carry a line 'persistent' after their command: a header line without a colon",
        ("stomp.frame.client.sends-well-formed-frames",),
        changes={"send-bytes": send_line_without_colon},
    ),
    FaultSpec(
        "send-subscribe",
        "client",
        "right after CONNECTED, send a SUBSCRIBE frame (a command outside the profile's subset)",
        ("stomp.send.client.only-subset-commands",),
        changes={"frames-after-connected": subscribe_after_connected},
    ),
    FaultSpec(
        "body-not-json",
        "client",
        "SEND bodies are the JSON text of the message cut one byte short (not JSON, so not SMP)",
        ("stomp.send.client.body-is-valid-smp",),
        changes={"send-body": body_cut_short},
    ),
    FaultSpec(
        "omit-accept-version",
        "client",
        "CONNECT carries no accept-version header (a STOMP 1.0 CONNECT)",
        ("stomp.connect.client.accept-version-includes-1-2",),
        changes={"connect-headers": without_headers("accept-version")},
    ),
    FaultSpec(
        "literal-node-id-host",
        "client",
        "the CONNECT host header is the manifest's value with ${NODE_ID} left in",
        ("stomp.connect.client.host-substitutes-node-id",),
        changes={"manifest-values": literal("host")},
    ),
    FaultSpec(
        "literal-node-id-login",
        "client",
        "the CONNECT login header is the manifest's value with ${NODE_ID} left in",
        ("stomp.connect.client.login-substitutes-node-id",),
        changes={"manifest-values": literal("login")},
    ),
    FaultSpec(
        "literal-node-id-destination",
        "client",
        "the SEND destination header is the manifest's value with ${NODE_ID} left in",
        ("stomp.send.client.destination-substitutes-node-id",),
        changes={"manifest-values": literal("destination")},
    ),
    FaultSpec(
        "check-hostname",
        "client",
        "TLS checks the server certificate's names against the host the client connects to",
        ("stomp.tls.client.skips-hostname-verification",),
        changes={"client-tls-context": hostname_checked},
    ),
    FaultSpec(
        "no-verify",
        "client",
        "TLS does not verify the server's certificate chain (CERT_NONE)",
        ("stomp.tls.client.verifies-server-chain",),
        changes={"client-tls-context": chain_unverified},
    ),
    FaultSpec(
        "allow-tls-1-2",
        "client",
        "the client's TLS context allows TLS 1.2 (minimum_version TLSv1_2)",
        ("stomp.tls.client.refuses-tls-1-2",),
        changes={"client-tls-context": tls_1_2_allowed},
    ),
    FaultSpec(
        "no-client-certificate",
        "client",
        "the client presents no certificate",
        ("stomp.tls.client.presents-certificate",),
        changes={"client-certificate": no_certificate},
    ),
)

Fault = fault_enum("Fault", SPECS)
"""One member per fault (``Fault.RECEIPT_BEFORE_STORE`` is ``"receipt-before-store"``)."""

REGISTRY: dict[str, FaultSpec] = {spec.name: spec for spec in SPECS}

NOT_ISOLABLE: dict[str, str] = {}
"""Cases whose rule cannot be broken alone, with the reason (none yet)."""

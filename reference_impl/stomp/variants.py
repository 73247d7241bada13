"""The STOMP reference node's conformant variants: ``python -m
reference_impl.stomp serve|client --variant NAME`` (repeatable), each a
behaviour STOMP 1.2 (``stomp-specification-1.2.md``) or the Swaptacular
profile (``swaptacular-stomp-transport.txt``) allows and the plain node
does not show (see reference_impl/variants.py). ``conformance mutation
--variants`` certifies each: the suite must find it CONFORMANT.

The sans-I/O cores take them as ``ServerConnection(variants=...)`` and
``ClientSession(variants=...)`` (what a frame looks like:
:class:`FrameStyle`); the asyncio layers (node.py, client.py) take the
write shape (:class:`reference_impl.variants.Shape`) and the timing ones
(unprompted EOLs, heart-beat rate, lingering). Nothing is global.

**Cumulative receipts, server side** (``cumulative-receipts``: a RECEIPT
only for the last of the SENDs stored together, as swpt_stomp does) is a
variant since erratum STOMP-E8 (docs/errata/stomp.md). Read alone, STOMP
1.2 has a receipt header "cause the server to acknowledge the processing of
the client frame with a RECEIPT frame", one per frame, and footnote 2 only
widens what one RECEIPT confirms. But Swaptacular's own server, the one the
network runs, sends one RECEIPT for the SENDs whose publications are
confirmed together (swpt_stomp ``rmq.py``, ``send_receipts``), and the
network reads footnote 2 as making that RECEIPT the confirmation of all of
them: clients MUST accept it (case
``stomp.receipt.client.accepts-cumulative-receipt``), and no server case
may ask for more than the RECEIPT of the SEND it cares about
(docs/stomp-adapter.md, "Which RECEIPTs the cases wait for"). Certifying
the variant holds the server cases to that: a case that waited for the
RECEIPT of every SEND of a burst would fail swpt_stomp, and fails the
variant first. What stays a fault is a RECEIPT going backwards
(``receipts-out-of-order``) or one sent before the messages it confirms
are stored (``pipelined-stored-late``, ``receipt-before-store``).

Left out, with the reason:

- **Cumulative receipts, client side** (a RECEIPT asked only for the last
  SEND of a batch, since footnote 2 makes "Every STOMP RECEIPT command
  confirms the delivery of all preceding messages"): not allowed. The
  profile, A Subset of the STOMP Protocol: "every SEND command MUST include
  the following headers: receipt". Footnote 2 says what a RECEIPT confirms,
  not that a SEND may go without asking for one (STOMP-E8 lets the server,
  not the client, leave receipts out).
- **SEND without content-length**: STOMP 1.2, Header content-length: "If a
  frame body is present, the SEND, MESSAGE and ERROR frames SHOULD include
  a content-length header". Leaving it out of a frame with a body breaks a
  SHOULD; ``bare-errors`` leaves it out where there is no body.
- **STOMP instead of CONNECT** (client): "STOMP 1.2 clients SHOULD continue
  to use the CONNECT command".
- **Heart-beats before CONNECTED, EOLs before the first frame**: the
  grammar's stream is ``1*frame`` and a frame starts with its command; EOLs
  may only follow a frame's NULL.
- **MESSAGE frames**: the node has no subscriptions, and the profile's peers
  "MUST NOT presume" that the other understands them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..variants import UNPROMPTED_TRAFFIC, VariantSpec, wire_variants
from .frame import Frame, encode_frame

OTHER_HEART_BEATS = "other-heart-beats"
EXTRA_HEADERS = "extra-headers"
CONTENT_LENGTH_ALWAYS = "content-length-always"
CRLF_LINE_ENDS = "crlf-line-ends"
EXTRA_EOLS = "extra-eols"
BARE_ERRORS = "bare-errors"
ONE_SEND_AT_A_TIME = "one-send-at-a-time"
LINGER = "linger"
JSON_CHARSET = "json-charset"
LENIENT_SENDS = "lenient-sends"
CONNECTION_PER_MESSAGE = "connection-per-message"
MINIMAL_CONNECTED = "minimal-connected"
CLOSE_WITHOUT_DISCONNECT = "close-without-disconnect"
CUMULATIVE_RECEIPTS = "cumulative-receipts"
PROBE_SERVER_CERTIFICATE = "probe-server-certificate"

UNPROMPTED_INTERVAL = 0.2
"""Seconds between the EOLs of ``unprompted-traffic``."""
SERVER_HEART_BEAT = (2000, 1000)
"""CONNECTED's heart-beat with ``other-heart-beats`` (the plain node says
1000,10000): slower beats out, and the client's wanted every second."""
CLIENT_HEART_BEAT = (1000, 2000)
"""CONNECT's heart-beat with ``other-heart-beats`` (the plain client says
10000,10000)."""
LINGER_SECONDS = 3.0
"""How long the client keeps its connection open after the last RECEIPT,
with ``linger``, before its DISCONNECT."""
EXTRA_EOLS_AFTER = b"\n\r\n\n"
"""What ``extra-eols`` writes after every frame's NULL (three EOLs, LF and
CR LF)."""
VARIANT_HEADER = ("x-reference-variant", "extra-headers")
"""The header ``extra-headers`` adds to RECEIPT, ERROR and SEND frames."""

SPECS: tuple[VariantSpec, ...] = (
    *wire_variants(
        "frame",
        "STOMP 1.2 and the profile set no time within which a CONNECTED or RECEIPT is due (a "
        'server replies "once a server has successfully processed" the frame)',
    ),
    VariantSpec(
        UNPROMPTED_TRAFFIC,
        ("server", "client"),
        f"an EOL every {UNPROMPTED_INTERVAL:g} s from the node's first frame on, whatever heart-beats were "
        "agreed (the server from its CONNECTED, the client from its CONNECT, before CONNECTED arrives)",
        'STOMP 1.2, STOMP Frames: "The NULL octet can be optionally followed by multiple EOLs" and '
        'Augmented BNF (frame = ... NULL *( EOL )); Heart-beating: the sender "MUST send new data ... at '
        'least every <n> milliseconds" (more often is within it)',
    ),
    VariantSpec(
        OTHER_HEART_BEATS,
        ("server", "client"),
        f"CONNECTED heart-beat:{SERVER_HEART_BEAT[0]},{SERVER_HEART_BEAT[1]} (plain 1000,10000) and an EOL "
        "only when nothing was sent for the whole agreed interval (plain: half of it); the client's CONNECT "
        f"heart-beat:{CLIENT_HEART_BEAT[0]},{CLIENT_HEART_BEAT[1]} (plain 10000,10000)",
        'STOMP 1.2, Heart-beating: the first number is "the smallest number of milliseconds between '
        'heart-beats that it can guarantee", the second "the desired number of milliseconds between '
        'heart-beats" (any values); "the sender MUST send new data over the network connection at least '
        'every <n> milliseconds"',
    ),
    VariantSpec(
        EXTRA_HEADERS,
        ("server", "client"),
        "headers in another order (CONNECTED: session, server, heart-beat, version; RECEIPT: receipt-id "
        f"last; CONNECT reversed; SEND: persistent first) and a header {VARIANT_HEADER[0]} on RECEIPT, ERROR "
        "and SEND",
        'STOMP 1.2, Frames and Headers: CONNECTED "OPTIONAL: session, server, heart-beat"; "the SEND and '
        'MESSAGE frames MAY include arbitrary user defined headers"; "the ERROR frame SHOULD include '
        'additional headers"; "STOMP servers MAY use additional headers to give access to features like '
        "persistency\" (no sentence orders headers, except that a repeated one's first entry counts)",
    ),
    VariantSpec(
        CONTENT_LENGTH_ALWAYS,
        ("server", "client"),
        "content-length on every frame, content-length:0 on those without a body (CONNECTED, RECEIPT; "
        "CONNECT, DISCONNECT)",
        'STOMP 1.2, Header content-length: "All frames MAY include a content-length header"',
    ),
    VariantSpec(
        CRLF_LINE_ENDS,
        ("server", "client"),
        "every EOL written CR LF: the lines of every frame and every heart-beat",
        'STOMP 1.2, STOMP Frames: "an end-of-line (EOL), which consists of an OPTIONAL carriage return '
        '(octet 13) followed by a REQUIRED line feed"; Augmented BNF (EOL = [CR] LF)',
    ),
    VariantSpec(
        EXTRA_EOLS,
        ("server", "client"),
        "every frame followed by three EOLs after its NULL (LF, CR LF, LF; with crlf-line-ends three "
        "CR LF)",
        'STOMP 1.2, STOMP Frames: "The NULL octet can be optionally followed by multiple EOLs"; Augmented '
        "BNF (frame = ... NULL *( EOL ))",
    ),
    VariantSpec(
        MINIMAL_CONNECTED,
        ("server",),
        "CONNECTED with version and heart-beat only (plain: server and session too)",
        'STOMP 1.2, CONNECTED Frame: "STOMP 1.2 servers MAY set the following headers: heart-beat, '
        'session, server" (only version MUST be set; heart-beat is kept, so that heart-beats are '
        "still agreed)",
    ),
    VariantSpec(
        BARE_ERRORS,
        ("server",),
        "ERROR frames with the message header (and receipt-id) only: no body, so no content-type and no "
        "content-length",
        'STOMP 1.2, ERROR: "the body MAY contain more detailed information (or MAY be empty)"; Header '
        'content-length and content-type: SHOULD "if a frame body is present"',
    ),
    VariantSpec(
        LENIENT_SENDS,
        ("server",),
        "SENDs that break the profile's rules for senders are processed (stored and receipted) instead of "
        "refused: no type, no content-type, persistent not true, a body that is not JSON or not a valid "
        "SMP message (a SEND without destination or with a transaction is still refused)",
        'Swaptacular STOMP profile, A Subset of the STOMP Protocol: "every SEND command MUST include the '
        'following headers" binds the node that sends, and no sentence of the profile, STOMP 1.2 or SMP '
        '2.1 tells a server to refuse such a SEND; STOMP 1.2, SEND: only a SEND the server "cannot '
        'successfully process" gets an ERROR',
    ),
    VariantSpec(
        CUMULATIVE_RECEIPTS,
        ("server",),
        "a RECEIPT only for the last of the SENDs stored together (those whose stores complete before the "
        "node next writes: a burst in one read, one group commit); the RECEIPTs of the SENDs before it are "
        "left out (plain: one RECEIPT per SEND)",
        'Swaptacular STOMP profile, STOMP Connections, footnote 2: "Every STOMP RECEIPT command confirms '
        "the delivery of all preceding messages\", as the network reads it: Swaptacular's own server, "
        "swpt_stomp, sends one RECEIPT for the SENDs confirmed together (rmq.py, send_receipts), which "
        "every client MUST accept (erratum STOMP-E8)",
    ),
    VariantSpec(
        ONE_SEND_AT_A_TIME,
        ("client",),
        "one SEND in flight: the next SEND only once the previous one is receipted (plain: up to 128 "
        "pipelined)",
        'Swaptacular STOMP profile, STOMP Connections: the client "issues a SEND command for each of the '
        'messages" (no sentence asks for pipelining)',
    ),
    VariantSpec(
        LINGER,
        ("client",),
        f"the connection kept open {LINGER_SECONDS:g} s after the last RECEIPT (heart-beats as agreed), "
        "then DISCONNECT",
        'Swaptacular STOMP profile, STOMP Connections: "The client MAY decide to keep the STOMP '
        'connection open for any length of time"',
    ),
    VariantSpec(
        CONNECTION_PER_MESSAGE,
        ("client",),
        "a connection of its own for each message: CONNECT, one SEND, its RECEIPT, DISCONNECT, then the "
        "next message on a new connection",
        'Swaptacular STOMP profile, STOMP Connections: "the sending node opens a client STOMP connection '
        "to one (or more) of the receiving node's servers, and issues a SEND command for each of the "
        'messages"; "The client MAY decide to keep the STOMP connection open for any length of time"; '
        'STOMP 1.2, Connection Lingering: "STOMP servers must be able to support clients which rapidly '
        'connect and disconnect"',
    ),
    VariantSpec(
        CLOSE_WITHOUT_DISCONNECT,
        ("client",),
        "once every message is receipted, the connection is closed (TLS close) without a DISCONNECT",
        'STOMP 1.2, DISCONNECT: "A client can disconnect from the server at anytime by closing the '
        'socket"; the graceful DISCONNECT is a SHOULD for a client that wants to be "assured that all '
        'previous frames have been received", which the RECEIPT of its last SEND already assures',
    ),
    VariantSpec(
        PROBE_SERVER_CERTIFICATE,
        ("client",),
        "before each connection, a TLS connection of its own that presents no certificate, takes the "
        "server's and is closed at once, no byte sent (stomp.py 8.0.1's check_ssl_certificate, "
        "ssl.get_server_certificate); then the connection, with the certificate",
        'Swaptacular STOMP profile, STOMP Connections: "Both the client and the server must present a '
        'certificate, which the other side verifies before proceeding with the connection": the rule is '
        'on "STOMP connections", and the probe proceeds with nothing (over TLS 1.3 its handshake is done '
        "on the client's side before the server refuses it)",
    ),
    VariantSpec(
        JSON_CHARSET,
        ("client",),
        "SEND content-type application/json;charset=utf-8 (plain: application/json)",
        'STOMP 1.2, Header content-type: "The ;charset=<encoding> SHOULD also get appended to any non '
        'text/ MIME types which can be interpreted as text"; the profile: content-type "Specifies the '
        'MIME type of the message body" (the parameter leaves it application/json)',
    ),
)


@dataclass(frozen=True)
class FrameStyle:
    """How a node writes its frames: the frame-level variants that are on."""

    crlf: bool = False
    extra_eols: bool = False
    content_length: bool = False

    @classmethod
    def from_variants(cls, variants: frozenset[str] | set[str]) -> FrameStyle:
        return cls(
            crlf=CRLF_LINE_ENDS in variants,
            extra_eols=EXTRA_EOLS in variants,
            content_length=CONTENT_LENGTH_ALWAYS in variants,
        )

    @property
    def eol(self) -> bytes:
        """One EOL, also a heart-beat."""
        return b"\r\n" if self.crlf else b"\n"

    def encode(self, frame: Frame) -> bytes:
        """``frame``'s bytes: encode_frame with this style (the plain style
        gives encode_frame's own bytes)."""
        data = encode_frame(
            frame, content_length=True if self.content_length else None, eol=self.eol
        )
        if self.extra_eols:
            data += self.eol * 3 if self.crlf else EXTRA_EOLS_AFTER
        return data

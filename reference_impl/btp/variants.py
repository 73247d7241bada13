"""The BTP reference node's conformant variants: ``python -m
reference_impl.btp serve|client --variant NAME`` (repeatable), each a
behaviour that BTP 2.0 (btp-2.0-rfc0023.md, the ASN.1 module), the OER
notes (RFC 30) or WebSocket (RFC 6455) allow and the plain node does not
show (see reference_impl/variants.py). ``conformance mutation --variants``
certifies each: the suite must find it CONFORMANT.

The sans-I/O session takes them as ``BtpSession(variants=...)`` (what goes
into the packets), the node layer as ``BtpNode(variants=..., shape=...)`` and
``run_client(variants=..., shape=...)`` (how and when they leave).
"""

from __future__ import annotations

from ..variants import ROLES, UNPROMPTED_TRAFFIC, VariantSpec, wire_variants

FRAGMENTED_MESSAGES = "fragmented-messages"
EXTRA_PROTOCOL_DATA = "extra-protocol-data"
SEQUENTIAL_REQUEST_IDS = "sequential-request-ids"
RFC30_TIMESTAMPS = "rfc30-timestamps"
AUTH_TIMEOUT_MESSAGE = "auth-timeout-message"
REFUSE_UNKNOWN_SUBPROTOCOLS = "refuse-unknown-subprotocols"
REORDERED_ANSWERS = "reordered-answers"
AUTH_REFUSALS_F00 = "auth-refusals-f00"

UNPROMPTED_INTERVAL = 0.5
"""Seconds between the node's own requests with ``unprompted-traffic``."""
UNPROMPTED_OUTSTANDING = 4
"""Own requests left unanswered before the node sends no more (a peer that
answers none of them gets no flood)."""
UNPROMPTED_NAME = "reference_note"
"""Sub-protocol of the node's own Messages (and of the entry its Transfers
carry): no peer knows it, none has to (a peer "not able to process the
Message" answers with an Error)."""
INFO_NAME = "reference_info"
"""Sub-protocol of the additional entries with ``extra-protocol-data``."""
NOTICE_NAME = "reference_notice"
"""Sub-protocol of the Message informing a client that its auth timed out."""
REORDER_WINDOW = 0.05
"""With ``reordered-answers``, answers are held this long after the first
of them and then leave together, last first."""
FIRST_SEQUENTIAL_ID = 0xFFFFFFFE
"""With ``sequential-request-ids`` the node's own requests are numbered
from here upwards, modulo 2^32: the third one is 0."""

SPECS: tuple[VariantSpec, ...] = (
    *wire_variants(
        "WebSocket frame",
        "BTP 2.0 sets no time within which a request must be answered (Flow: "
        '"The responder should always send back a response to a request with the same requestId")',
    ),
    VariantSpec(
        UNPROMPTED_TRAFFIC,
        ROLES,
        f"requests of the node's own once auth succeeded: a Message (sub-protocol {UNPROMPTED_NAME}, which the "
        f"peer need not know) right after the auth Response, then every {UNPROMPTED_INTERVAL:g} s a Message "
        "or a Transfer of 1 in turn; a kind the peer answers with an Error is not sent again, at most "
        f"{UNPROMPTED_OUTSTANDING} go unanswered",
        'BTP 2.0, Authentication: "If the server sent a Response, the BTP connection is open, until either one '
        'of the parties closes it. At the BTP level, the client and server play identical roles"; Flow: '
        '"The request types are Message and Transfer"; Message: "Error is returned if the peer is not able '
        'to process the Message"',
    ),
    VariantSpec(
        FRAGMENTED_MESSAGES,
        ROLES,
        "every BTP packet sent as a fragmented WebSocket message: a 1-byte first frame, a ping control frame, "
        "two continuation frames and an empty final one",
        'RFC 6455, section 5.4: "A fragmented message consists of a single frame with the FIN bit clear and an '
        "opcode other than 0, followed by zero or more frames with the FIN bit clear and the opcode set to 0, "
        'and terminated by a single frame with the FIN bit set and an opcode of 0"; "Control frames ... '
        'MAY be injected in the middle of a fragmented message"; BTP 2.0, Terminology: '
        'WebSockets "provide message framing", BTP adds no rule of its own on frames',
    ),
    VariantSpec(
        EXTRA_PROTOCOL_DATA,
        ROLES,
        f"protocol data entries no peer knows ({INFO_NAME}) beside the known ones: in the auth Response, in "
        "every Response (after its own entries) and Error, in the client's auth Message between auth and "
        "auth_token, and as a secondary entry of the node's own requests",
        "BTP 2.0, Authentication: \"among the secondary entries, there MUST be a UTF-8 'auth_token' entry. The "
        "further secondary protocol data entries of this Message request MAY also be used to send additional "
        'information to the server"; "Again, the protocolData field there MAY be used to send additional '
        'information to the client"; Message: "If the peer has data to send in reply ... it is carried in '
        'the protocol data"; Sub-protocols: secondary entries "provide additional contextual data which can '
        'be consumed in a readonly way"; Error has protocolData',
    ),
    VariantSpec(
        SEQUENTIAL_REQUEST_IDS,
        ROLES,
        f"the node's own request ids sequential from {FIRST_SEQUENTIAL_ID} (0xfffffffe) upwards, wrapping to "
        "0 (never one in flight)",
        'BTP 2.0, Overview, Request ID: "A random 4-byte value used to correlate requests and responses. This '
        "value MAY be sequential instead of random, but care must be taken so that duplicate IDs are never "
        'in-flight at the same time"',
    ),
    VariantSpec(
        RFC30_TIMESTAMPS,
        ROLES,
        "Error triggeredAt in RFC 30's canonical form at a precision of 0, 1, 2 and 3 fraction digits in turn, "
        "trailing zeros left out (20171224161432Z, 20171224161432.2Z, ...), instead of the fixed .mmmZ",
        'RFC 0030, Variable-length Timestamps, Encoding: "Timestamps MAY use up to millisecond precision ... '
        "If the millisecond part is zero, it MUST be left out. Trailing zeros in the millisecond part MUST be "
        'left out"',
    ),
    VariantSpec(
        AUTH_TIMEOUT_MESSAGE,
        ("server",),
        f'a client that does not authenticate in time gets a Message ({NOTICE_NAME}: "authentication timed '
        'out") before the server closes',
        'BTP 2.0, Authentication: "If the client does not send an Auth packet within a reasonable time, the '
        "server optionally sends a Message informing the client that the authentication timed out, and then "
        'closes the connection"',
    ),
    VariantSpec(
        REFUSE_UNKNOWN_SUBPROTOCOLS,
        ROLES,
        "a Message whose primary sub-protocol the node does not process (any but balance and echo, ilp "
        "included: it is no connector) gets Error F00 NotAcceptedError instead of an empty Response",
        'BTP 2.0, Message: "Error is returned if the peer is not able to process the Message"; ASN.1 '
        'module, ProtocolData: "Peers need to establish beforehand which protocols each understand"',
    ),
    VariantSpec(
        AUTH_REFUSALS_F00,
        ("server",),
        "every refused auth Message gets Error F00 NotAcceptedError, the structurally wrong ones too (a "
        "malformed auth entry, no auth_token or one that is not UTF-8, two entries of one name), as "
        "ilp-plugin-btp 1.5.0 and ilp-plugin-mini-accounts 4.2.0 answer every refusal (plain: F01 "
        "InvalidFieldsError for those)",
        'BTP 2.0, Authentication: "the server responds with an Error if:" (no code named); Error Codes: '
        'F00 NotAcceptedError "Data were symantically invalid", F01 InvalidFieldsError "At least one '
        'field contained structurally invalid data" (an auth entry of the wrong content type is a '
        "well-formed field that the auth Message does not accept: either reading holds)",
    ),
    VariantSpec(
        REORDERED_ANSWERS,
        ROLES,
        f"answers (Responses, Errors) held {REORDER_WINDOW * 1000:g} ms after the first of them and then sent "
        "together in reverse order: requests in flight at once are answered last first",
        "BTP 2.0, Motivation: \"WebSockets don't provide a mechanism for relating responses to requests. BTP "
        'adds this missing request/response layer"; Overview: the Request ID is "used to correlate requests '
        'and responses"; Flow: "a response-type BTP packet is sent in response with the same request ID" '
        "(responses are matched by id, not by order)",
    ),
)

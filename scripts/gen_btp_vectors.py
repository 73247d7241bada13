#!/usr/bin/env python3
"""Generate vectors/btp/packets.json and vectors/btp/malformed.json.

Every payload comes from fixed labels (SHAKE-256 for binary, fixed text
otherwise), so running this again produces byte-identical files.  Each
vector is checked against the reference codec while it is generated: a
valid vector must decode to its fields (and, when canonical, encode back to
its bytes); a malformed one must raise BtpDecodeError with its ``reason``.
The files are committed; tests/btp/test_vectors.py checks the codec against
them and that this script still reproduces them, and
interop/node/check-btp-vectors.js checks them against npm btp-packet.

Usage: scripts/gen_btp_vectors.py [--check]
  --check   write nothing; exit 1 if the committed files differ from what
            this script generates
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from conformance.core.vector_files import write_or_check  # noqa: E402

from reference_impl.btp.oer import DECODE_REASONS, encode_length  # noqa: E402
from reference_impl.btp.packet import (  # noqa: E402
    BtpDecodeError,
    ContentType,
    Error,
    Fulfill,
    Message,
    Packet,
    Prepare,
    ProtocolDataEntry,
    Reject,
    Response,
    Transfer,
    decode_packet,
    encode_packet,
    packet_to_json,
)

VECTORS_DIR = REPO_ROOT / "vectors" / "btp"
PACKETS_PATH = VECTORS_DIR / "packets.json"
MALFORMED_PATH = VECTORS_DIR / "malformed.json"
GENERATOR = "scripts/gen_btp_vectors.py"
SPEC = (
    "btp-2.0-rfc0023.md; BilateralTransferProtocol.asn and GenericTypes.asn (CANONICAL-OER); "
    "oer-notes-rfc0030.md; specs README, BTP section"
)

OCTETS = ContentType.APPLICATION_OCTET_STREAM
TEXT = ContentType.TEXT_PLAIN_UTF8
JSON = ContentType.APPLICATION_JSON

# What btp-packet 2.2.1 (npm; the codec of ilp-plugin-btp) does differently.
JS_LEGACY = (
    "btp-packet 2.x knows only types 1, 2, 6 and 7 and throws 'Unrecognized type' for the "
    "BTP 1 types 3, 4 and 5"
)
JS_TIME = (
    "btp-packet reads triggeredAt with the regex YYYYMMDDHHMMSS.dddZ (exactly three fraction digits) "
    "and otherwise passes the raw string to new Date(), which gives Invalid Date for this RFC 30 form"
)
JS_UTF8_DATA = (
    "btp-packet decodes Error data as a UTF-8 JavaScript string, so bytes that are not UTF-8 "
    "come back as U+FFFD and the data is not preserved"
)


def derive_bytes(label: str, size: int) -> bytes:
    """``size`` fixed bytes named by ``label``."""
    return hashlib.shake_256(b"btp-conformance-vectors/" + label.encode()).digest(size)


def text_bytes(size: int, seed: str = "btp") -> bytes:
    """``size`` bytes of readable ASCII (so btp-packet's UTF-8 views agree)."""
    alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789-_"
    raw = derive_bytes("text/" + seed, size)
    return bytes(alphabet[b % len(alphabet)] for b in raw)


def entry(name: str, content_type: int, data: bytes | str) -> ProtocolDataEntry:
    return ProtocolDataEntry(name, content_type, data.encode() if isinstance(data, str) else data)


AUTH = (entry("auth", OCTETS, b""), entry("auth_token", TEXT, "correct horse battery staple"))
ILP_PREPARE = derive_bytes("ilp-prepare", 139)
TIME = "20171115140000.000Z"


def header(kind: int, request_id: int, envelope: bytes) -> bytes:
    """A packet around a hand-made envelope (for forged vectors)."""
    return bytes((kind,)) + request_id.to_bytes(4, "big") + encode_length(len(envelope)) + envelope


def pd_bytes(*entries: tuple[bytes, int, bytes], count: bytes | None = None) -> bytes:
    """Hand-made protocol data: raw name bytes, content type, data."""
    out = count if count is not None else bytes((1, len(entries)))
    for name, content_type, data in entries:
        out += (
            encode_length(len(name))
            + name
            + bytes((content_type,))
            + encode_length(len(data))
            + data
        )
    return out


def error_envelope(
    code: bytes = b"F00",
    name: bytes = b"NotAcceptedError",
    time: bytes = TIME.encode(),
    data: bytes = b"",
    pd: bytes = b"\x01\x00",
) -> bytes:
    return (
        code
        + encode_length(len(name))
        + name
        + encode_length(len(time))
        + time
        + encode_length(len(data))
        + data
        + pd
    )


# =========================================================================== valid


class Valid:
    def __init__(self) -> None:
        self.vectors: list[dict] = []

    def add(
        self,
        vid: str,
        description: str,
        packet: Packet | None = None,
        wire: bytes | None = None,
        *,
        js_divergence: str | None = None,
    ) -> None:
        if wire is None:
            assert packet is not None
            wire = encode_packet(packet)
        decoded = decode_packet(wire)
        if packet is not None:
            assert decoded == packet, (vid, decoded, packet)
        canonical_wire = encode_packet(decoded)
        vector: dict[str, Any] = {
            "id": vid,
            "description": description,
            "hex": wire.hex(),
            "canonical": canonical_wire == wire,
        }
        if canonical_wire != wire:
            vector["canonical_hex"] = canonical_wire.hex()
        vector["packet"] = packet_to_json(decoded)
        if js_divergence:
            vector["js_divergence"] = js_divergence
        assert vid not in {v["id"] for v in self.vectors}, vid
        self.vectors.append(vector)


def sized_message(request_id: int, envelope_length: int) -> Message:
    """A Message with one entry 'big' whose envelope is exactly ``envelope_length`` bytes."""
    fixed = 2 + 1 + 3 + 1  # count 01 01, name length, "big", content type
    for length_size in (1, 2, 3, 4):
        data_length = envelope_length - fixed - length_size
        if len(encode_length(data_length)) == length_size:
            packet = Message(
                request_id,
                (entry("big", OCTETS, text_bytes(data_length, f"env{envelope_length}")),),
            )
            body = encode_packet(packet)
            assert body[5:].startswith(encode_length(envelope_length)), envelope_length
            return packet
    raise AssertionError(envelope_length)


def valid_vectors() -> list[dict]:
    v = Valid()
    # --- Response
    v.add(
        "response-empty",
        "Response with no protocol data: the count is the one-byte unsigned integer 0, "
        "encoded 01 00 (a length determinant of 1, then 00).",
        Response(1),
    )
    v.add(
        "response-ilp-fulfill",
        "Response carrying an ILP packet under protocol name 'ilp' as "
        "application/octet-stream (RFC 23, Message).",
        Response(2, (entry("ilp", OCTETS, derive_bytes("ilp-fulfill", 45)),)),
    )
    v.add(
        "response-auth-ok",
        "Response to the auth Message, as a server sends it (empty protocol data).",
        Response(0x7FFFFFFF),
    )
    # --- Error
    v.add(
        "error-f00-readme-time",
        "Error F00 NotAcceptedError with triggeredAt in the three-digit form of the "
        "specs README (20171115140000.000Z), empty data, no protocol data.",
        Error(3, "F00", "NotAcceptedError", TIME),
    )
    v.add(
        "error-t00-with-data-and-protocol-data",
        "Error T00 UnreachableError with text data and one protocol data entry.",
        Error(
            4,
            "T00",
            "UnreachableError",
            "20171224161432.279Z",
            b"connector busy, try again",
            (entry("reason", TEXT, "overloaded"),),
        ),
    )
    for code, name in (("F01", "InvalidFieldsError"), ("F08", "InsufficientBalanceError")):
        v.add(
            f"error-{code.lower()}",
            f"Error {code} {name} from the RFC 23 table.",
            Error(5, code, name, "20200101000000.000Z", b""),
        )
    v.add(
        "error-unlisted-code",
        "Error with a code outside the RFC 23 table: the codec decodes any 3-character "
        "IA5 code (whether a code is from the table is a protocol check, not a decoding one).",
        Error(6, "X42", "CustomError", TIME, b"", ()),
    )
    v.add(
        "error-data-8192",
        "Error data at its maximum, 8192 bytes (OCTET STRING (SIZE (0..8192))): the data "
        "length is 82 20 00 and the envelope length 82 20 2f.",
        Error(7, "F00", "NotAcceptedError", TIME, text_bytes(8192, "error-8192")),
    )
    v.add(
        "error-data-binary",
        "Error data that is not UTF-8 (bytes 00..ff): an OCTET STRING may hold anything.",
        Error(8, "F00", "NotAcceptedError", TIME, bytes(range(256))),
        js_divergence=JS_UTF8_DATA,
    )
    times = [
        ("20171224161432.279Z", "RFC 30 valid example: three fraction digits.", None),
        (
            "20171224161432.27Z",
            "RFC 30 valid example: two fraction digits (trailing zero removed).",
            JS_TIME,
        ),
        ("20171224161432.2Z", "RFC 30 valid example: one fraction digit.", JS_TIME),
        (
            "20171224161432Z",
            "RFC 30 valid example: no fraction (a whole second, canonical form).",
            JS_TIME,
        ),
        (
            "20161231235960.852Z",
            'RFC 30 valid example: a leap second ("Implementations MUST allow leap seconds").',
            "btp-packet turns the time into 2016-12-31T23:59:60.852Z, which new Date() rejects "
            "(Invalid Date): JavaScript dates have no leap seconds",
        ),
        ("20171225000000Z", "RFC 30 valid example: midnight as 000000 of the next day.", JS_TIME),
        ("20171225000000.000Z", "Midnight in the three-digit form.", None),
        ("99991224161432.279Z", "RFC 30 valid example: year 9999.", None),
        ("20160229120000.000Z", "29 February of a leap year.", None),
        (
            "20171224161432.270Z",
            "Three fraction digits with a trailing zero: the fixed .mmm form of the specs "
            "README and btp-packet is accepted although RFC 30's canonical form would be .27Z.",
            None,
        ),
    ]
    for index, (when, description, divergence) in enumerate(times):
        v.add(
            f"error-time-{index + 1}-{when.lower().replace('.', '-')}",
            f"Error whose triggeredAt is {when}. {description}",
            Error(100 + index, "T00", "UnreachableError", when),
            js_divergence=divergence,
        )
    v.add(
        "error-name-empty",
        "Error with an empty name (IA5String of length 0).",
        Error(9, "F00", "", TIME),
    )
    # --- Message
    v.add(
        "message-auth",
        "The auth Message of RFC 23, Authentication: primary 'auth' (octet stream, empty "
        "data), secondary 'auth_token' (UTF-8 text).",
        Message(0x01020304, AUTH),
    )
    v.add(
        "message-auth-empty-token",
        'Auth Message whose auth_token is the empty string ("can be set to the '
        'empty string, but it cannot be omitted").',
        Message(10, (entry("auth", OCTETS, b""), entry("auth_token", TEXT, b""))),
    )
    v.add(
        "message-auth-with-username",
        "Auth Message with auth_username and auth_token, as ilp-plugin-btp sends it.",
        Message(
            11,
            (
                entry("auth", OCTETS, b""),
                entry("auth_username", TEXT, "alice"),
                entry("auth_token", TEXT, "secret"),
            ),
        ),
    )
    v.add(
        "message-empty-protocol-data", "Message with no protocol data (count 01 00).", Message(12)
    )
    v.add(
        "message-ilp",
        "Message with one 'ilp' entry (an ILP Prepare, 139 bytes: entry length 81 8b).",
        Message(13, (entry("ilp", OCTETS, ILP_PREPARE),)),
    )
    v.add(
        "message-three-content-types",
        "Message with one entry of each named content type: octet stream, UTF-8 text, JSON.",
        Message(
            14,
            (
                entry("bin", OCTETS, derive_bytes("bin", 20)),
                entry("note", TEXT, "hello"),
                entry("info", JSON, '{"balance":"100","currency":"XRP"}'),
            ),
        ),
    )
    v.add(
        "message-utf8-text",
        "UTF-8 text (content type 1) and JSON (content type 2) with characters beyond "
        "ASCII: well-formed UTF-8 is accepted.",
        Message(15, (entry("greeting", TEXT, "grüße ✓ 🚀"), entry("meta", JSON, '{"name":"Zoë"}'))),
    )
    v.add(
        "message-octets-not-utf8",
        "Octet-stream entry (content type 0) whose data is not UTF-8: octet "
        "streams are not checked.",
        Message(16, (entry("blob", OCTETS, b"\xff\xfe\xc0\xaf\xed\xa0\x80"),)),
    )
    v.add(
        "message-content-type-3",
        "Content type 3, which the ASN.1 does not name: ContentType is "
        "INTEGER {...} (0..255), so any byte is valid and is kept as a number.",
        Message(17, (entry("custom", 3, b"\x00\x01"),)),
    )
    v.add(
        "message-content-type-255",
        "Content type 255, the top of the (0..255) range; its data is not "
        "checked (only 1 and 2 are text).",
        Message(18, (entry("custom", 255, b"\xff"),)),
    )
    v.add(
        "message-duplicate-names",
        "Two entries with the same name decode (RFC 23 forbids it at the "
        "protocol level -- the session answers with an Error -- not at the encoding level).",
        Message(19, (entry("dup", TEXT, "one"), entry("dup", TEXT, "two"))),
    )
    v.add(
        "message-empty-name",
        "An entry whose protocol name is empty (IA5String of length 0).",
        Message(20, (entry("", OCTETS, b"x"),)),
    )
    v.add(
        "message-ia5-control-characters",
        "IA5 is 0..127, control characters included: a name with a tab and a NUL is valid IA5.",
        Message(21, (entry("tab\there\x00", OCTETS, b""),)),
    )
    v.add(
        "message-name-128",
        "A 128-character protocol name: the name's length is long form 81 80.",
        Message(22, (entry("n" * 128, OCTETS, b"x"),)),
    )
    v.add(
        "message-entry-data-127",
        "Entry data of 127 bytes: the largest short-form length (7f).",
        Message(23, (entry("d", OCTETS, text_bytes(127, "d127")),)),
    )
    v.add(
        "message-entry-data-128",
        "Entry data of 128 bytes: the smallest long-form length (81 80).",
        Message(24, (entry("d", OCTETS, text_bytes(128, "d128")),)),
    )
    for length, form in (
        (127, "7f, the largest short form"),
        (128, "81 80, the smallest long form"),
        (255, "81 ff, the largest one-byte long form"),
        (256, "82 01 00"),
        (65535, "82 ff ff, the largest two-byte long form"),
        (65536, "83 01 00 00, the smallest three-byte long form"),
    ):
        v.add(
            f"message-envelope-{length}",
            f"Message whose envelope (the length-prefixed data) is exactly "
            f"{length} bytes: length prefix {form}.",
            sized_message(1000 + length, length),
        )
    many = tuple(
        entry(f"p{i}", (OCTETS, TEXT, JSON)[i % 3], ("", "t", "1")[i % 3]) for i in range(255)
    )
    v.add(
        "message-255-entries",
        "255 entries: the largest count with a one-byte integer (01 ff).",
        Message(25, many),
    )
    many = tuple(
        entry(f"p{i}", (OCTETS, TEXT, JSON)[i % 3], ("", "t", "1")[i % 3]) for i in range(256)
    )
    v.add(
        "message-256-entries",
        "256 entries: the count needs two bytes (02 01 00).",
        Message(26, many),
    )
    many = tuple(entry(f"sub{i:03d}", OCTETS, derive_bytes(f"many/{i}", i % 7)) for i in range(300))
    v.add(
        "message-300-entries",
        "300 entries (count 02 01 2c) in a 3-byte long-form envelope.",
        Message(27, many),
    )
    v.add("message-request-id-0", "Request id 0.", Message(0, (entry("ilp", OCTETS, b"\x0c"),)))
    v.add(
        "message-request-id-max",
        "Request id 2^32-1 (ff ff ff ff).",
        Message(0xFFFFFFFF, (entry("ilp", OCTETS, b"\x0c"),)),
    )
    inner = encode_packet(Message(28, (entry("ilp", OCTETS, b"\x0c"),)))
    envelope = inner[6:] + b"\x00\x01\x02"
    v.add(
        "message-extra-bytes-in-envelope",
        "Three bytes after the protocol data but inside the envelope (its "
        'length prefix counts them). RFC 30: "implementations MUST ignore extra bytes at the end of the '
        'message" so fields can be added later -- inside the envelope is where a later BTP would add them. '
        "Accepted and ignored; not canonical (encoding the decoded packet drops them).",
        wire=header(6, 28, envelope),
    )
    inner = encode_packet(Transfer(29, 5, ()))
    v.add(
        "transfer-extra-bytes-in-envelope",
        "A Transfer with one extra byte after its protocol data, inside "
        "the envelope: ignored, as for Message.",
        wire=header(7, 29, inner[6:] + b"\xff"),
    )
    # --- bytes after the envelope (erratum BTP-E3): ignored
    auth = encode_packet(Message(0x01020304, AUTH))
    v.add(
        "message-byte-after-envelope",
        "One byte after the envelope of a valid auth Message, the length prefix unchanged. "
        'RFC 30: "implementations MUST ignore extra bytes at the end of the message"; erratum BTP-E3: '
        "the packet is what the envelope holds, as btp-packet reads it. Not canonical (encoding the "
        "decoded packet drops the byte).",
        wire=auth + b"\x00",
    )
    v.add(
        "message-packet-after-envelope",
        "A second whole packet (a Response) after the first, in one WebSocket message: BTP has one "
        "packet per message, so the second is bytes after the envelope, ignored (erratum BTP-E3).",
        wire=auth + encode_packet(Response(1)),
    )
    v.add(
        "error-bytes-after-envelope",
        "16 bytes after the envelope of a valid Error: ignored (erratum BTP-E3).",
        wire=encode_packet(
            Error(5, "F00", "NotAcceptedError", TIME, b"data", (entry("x", TEXT, "y"),))
        )
        + derive_bytes("junk", 16),
    )
    # --- Transfer
    v.add("transfer-amount-0", "Transfer of amount 0 (UInt64 00 x8).", Transfer(30, 0))
    v.add(
        "transfer-amount-max", "Transfer of amount 2^64-1 (UInt64 ff x8).", Transfer(31, 2**64 - 1)
    )
    v.add(
        "transfer-paychan-claim",
        "Transfer with a JSON payment-channel claim entry.",
        Transfer(
            32,
            1000,
            (
                entry(
                    "paychan",
                    JSON,
                    '{"amount":"1000","signature":"' + derive_bytes("claim-sig", 32).hex() + '"}',
                ),
            ),
        ),
    )
    v.add(
        "transfer-big-endian",
        "Transfer of amount 0x0102030405060708: big-endian, most significant byte first.",
        Transfer(
            33, 0x0102030405060708, (entry("settlement", OCTETS, derive_bytes("settle", 64)),)
        ),
    )
    # --- legacy BTP 1 types
    v.add(
        "legacy-prepare",
        "BTP 1 Prepare (type 3): transferId UInt128, amount UInt64, executionCondition "
        "UInt256, expiresAt GeneralizedTime, protocol data. Not a BTP 2.0 type, decoded for tests.",
        Prepare(
            40,
            derive_bytes("transfer-id", 16),
            2**64 - 1,
            derive_bytes("condition", 32),
            "20171224161432.279Z",
            (entry("ilp", OCTETS, ILP_PREPARE[:20]),),
        ),
        js_divergence=JS_LEGACY,
    )
    v.add(
        "legacy-fulfill",
        "BTP 1 Fulfill (type 4): transferId UInt128, fulfillment UInt256, protocol data.",
        Fulfill(41, derive_bytes("transfer-id", 16), derive_bytes("fulfillment", 32)),
        js_divergence=JS_LEGACY,
    )
    v.add(
        "legacy-reject",
        "BTP 1 Reject (type 5): transferId UInt128, protocol data.",
        Reject(42, derive_bytes("transfer-id", 16), (entry("ilp", OCTETS, b"\x0e"),)),
        js_divergence=JS_LEGACY,
    )
    return v.vectors


# =========================================================================== malformed


class Malformed:
    def __init__(self) -> None:
        self.vectors: list[dict] = []

    def add(
        self,
        vid: str,
        description: str,
        wire: bytes,
        reason: str,
        *,
        js_divergence: str | None = None,
    ) -> None:
        assert reason in DECODE_REASONS, reason
        try:
            packet = decode_packet(wire)
        except BtpDecodeError as exc:
            assert exc.reason == reason, (vid, exc.reason, exc.detail, reason)
            offset = exc.offset
        else:
            raise AssertionError(f"{vid} decodes: {packet}")
        vector: dict[str, Any] = {
            "id": vid,
            "description": description,
            "hex": wire.hex(),
            "reason": reason,
            "offset": offset,
        }
        if js_divergence:
            vector["js_divergence"] = js_divergence
        assert vid not in {v["id"] for v in self.vectors}, vid
        self.vectors.append(vector)


def malformed_vectors() -> list[dict]:
    m = Malformed()
    transfer = encode_packet(Transfer(0x0A0B0C0D, 500, (entry("paychan", JSON, '{"claim":"c"}'),)))
    auth = encode_packet(Message(0x01020304, AUTH))
    error = encode_packet(
        Error(5, "F00", "NotAcceptedError", TIME, b"data", (entry("x", TEXT, "y"),))
    )
    # --- truncation
    m.add("empty", "Zero bytes.", b"", "truncated")
    for cut, where in (
        (1, "after the type"),
        (5, "after the request id, before the length prefix"),
    ):
        m.add(
            f"transfer-cut-{cut}",
            f"A Transfer cut to {cut} byte(s), {where}.",
            transfer[:cut],
            "truncated",
        )
    for cut, where in (
        (6, "right after the length prefix"),
        (10, "inside the amount"),
        (len(transfer) - 1, "one byte short"),
    ):
        m.add(
            f"transfer-cut-{cut}",
            f"A Transfer cut to {cut} bytes, {where}: the envelope's length prefix "
            'claims more than follows (RFC 23: "terminates before length prefixes dictate").',
            transfer[:cut],
            "length prefix beyond end",
        )
    m.add(
        "auth-cut-5-short",
        "The auth Message cut 5 bytes short (what the server suite sends).",
        auth[:-5],
        "length prefix beyond end",
    )
    m.add(
        "error-cut-in-time",
        "An Error cut inside triggeredAt.",
        error[:30],
        "length prefix beyond end",
    )
    # inside a consistent envelope
    m.add(
        "transfer-envelope-short-amount",
        "A Transfer whose envelope (length 5) ends inside the 8-byte amount.",
        header(7, 1, b"\x00" * 5),
        "truncated",
    )
    m.add(
        "message-envelope-empty",
        "A Message with an empty envelope: the protocol data count is missing.",
        header(6, 1, b""),
        "truncated",
    )
    m.add(
        "message-count-exceeds-entries",
        "The count says 2 but the envelope holds one entry.",
        header(6, 1, pd_bytes((b"ilp", 0, b"x"), count=b"\x01\x02")),
        "truncated",
    )
    m.add(
        "message-entry-missing-content-type",
        "The envelope ends right after an entry's name.",
        header(6, 1, b"\x01\x01\x03ilp"),
        "truncated",
    )
    m.add(
        "message-entry-missing-data-length",
        "The envelope ends right after an entry's content type.",
        header(6, 1, b"\x01\x01\x03ilp\x00"),
        "truncated",
    )
    m.add(
        "message-count-integer-cut",
        "The count's length determinant says 2 bytes, the envelope has 1.",
        header(6, 1, b"\x02\x01"),
        "length prefix beyond end",
    )
    # --- length prefixes beyond the end
    long = bytearray(auth)
    long[5] = min(long[5] + 40, 0x7F)
    m.add(
        "envelope-length-plus-40",
        "The auth Message with its envelope length raised by 40 (the server "
        "suite's forged packet).",
        bytes(long),
        "length prefix beyond end",
    )
    m.add(
        "envelope-long-form-beyond",
        "Envelope length 82 ff ff (65535) in front of a 10-byte envelope.",
        b"\x06\x00\x00\x00\x01\x82\xff\xff" + pd_bytes((b"ilp", 0, b"x")),
        "length prefix beyond end",
    )
    m.add(
        "envelope-length-of-length-9",
        "Envelope length determinant 89 with nine length bytes (at least "
        "2^64): longer than any message.",
        b"\x06\x00\x00\x00\x01\x89" + b"\x01" * 9 + b"\x01\x00",
        "length prefix beyond end",
    )
    m.add(
        "entry-name-beyond-envelope",
        "An entry name length of 100 in a 10-byte envelope.",
        header(6, 1, b"\x01\x01\x64ilp\x00\x01x"),
        "length prefix beyond end",
    )
    m.add(
        "entry-data-beyond-envelope",
        "An entry data length of 5 with 1 byte left in the envelope.",
        header(6, 1, b"\x01\x01\x03ilp\x00\x05x"),
        "length prefix beyond end",
    )
    m.add(
        "entry-data-long-form-beyond-envelope",
        "An entry data length 82 01 00 (256) with 2 bytes left.",
        header(6, 1, b"\x01\x01\x03ilp\x00\x82\x01\x00xy"),
        "length prefix beyond end",
    )
    m.add(
        "error-name-beyond-envelope",
        "An Error whose name length runs past the envelope.",
        header(2, 1, b"F00\x40NotAccepted"),
        "length prefix beyond end",
    )
    # --- content type
    js_text = (
        "btp-packet does not look at content types or check text: it returns the data bytes as they "
        "are"
    )
    for vid, content_type, data, what in (
        ("text-invalid-utf8-ff", TEXT, b"ok \xff", "a byte ff, which never occurs in UTF-8"),
        ("text-utf8-cut", TEXT, b"caf\xc3", "a two-byte sequence cut after its first byte"),
        ("text-utf8-surrogate", TEXT, b"\xed\xa0\x80", "an encoded UTF-16 surrogate (ed a0 80)"),
        ("json-overlong-utf8", JSON, b'{"a":"\xc0\xaf"}', "an overlong encoding of '/' (c0 af)"),
        ("auth-token-latin1", TEXT, "pässword".encode("latin-1"), "Latin-1 text (e4)"),
    ):
        name = b"auth_token" if vid.startswith("auth") else b"note"
        entries = (
            [(b"auth", 0, b""), (name, int(content_type), data)]
            if vid.startswith("auth")
            else [(name, int(content_type), data)]
        )
        m.add(
            vid,
            f"An entry declared {'text/plain; charset=utf-8' if content_type == TEXT else 'application/json'} "
            f'(content type {int(content_type)}) whose data has {what}: not UTF-8, so the packet "contains '
            'illegal characters" (RFC 23, Flow).',
            header(6, 1, pd_bytes(*entries)),
            "bad content type",
            js_divergence=js_text,
        )
    # --- IA5
    js_ascii = (
        "btp-packet decodes IA5 fields with Buffer.toString('ascii'), which clears the high bit "
        "instead of rejecting the byte"
    )
    m.add(
        "name-non-ia5",
        "A protocol name with the byte f6 ('probe' with o-umlaut in Latin-1; the server "
        "suite's forged packet).",
        header(6, 1, pd_bytes((b"pr\xf6be", 1, b"x"))),
        "non-IA5 character",
        js_divergence=js_ascii,
    )
    m.add(
        "name-utf8",
        "A protocol name in UTF-8 with a non-ASCII character (c3 a9): IA5 is 0..127.",
        header(6, 1, pd_bytes(("caf\u00e9".encode(), 0, b""))),
        "non-IA5 character",
        js_divergence=js_ascii,
    )
    m.add(
        "error-code-non-ia5",
        "An Error code with the byte c6.",
        header(2, 1, error_envelope(code=b"F\xc60")),
        "non-IA5 character",
        js_divergence=js_ascii,
    )
    m.add(
        "error-name-non-ia5",
        "An Error name with the byte 80.",
        header(2, 1, error_envelope(name=b"NotAccepted\x80")),
        "non-IA5 character",
        js_divergence=js_ascii,
    )
    m.add(
        "triggered-at-non-ia5",
        "A triggeredAt with the byte b0 in place of a digit.",
        header(2, 1, error_envelope(time=b"20171115140000.\xb000Z")),
        "non-IA5 character",
        js_divergence=(
            "btp-packet reads triggeredAt as UTF-8 (b0 becomes U+FFFD), gets Invalid Date, and "
            "decodes the packet anyway"
        ),
    )
    # --- canonical lengths and integers
    js_count = (
        "btp-packet reads the count's length byte and then that many bytes without checking for "
        "leading zeros, so it accepts this count"
    )
    m.add(
        "envelope-length-long-form-5",
        "Envelope length 5 written in long form (81 05): lengths below 128 "
        "MUST use the short form (RFC 30, Length determinant).",
        b"\x06\x00\x00\x00\x01\x81\x05" + pd_bytes((b"a", 0, b"")),
        "non-canonical length",
    )
    m.add(
        "envelope-length-leading-zero",
        'Envelope length 82 00 80 (128 with a leading zero byte): "This '
        'length MUST NOT contain leading zeros".',
        b"\x06\x00\x00\x00\x01\x82\x00\x80" + pd_bytes((b"d", 0, text_bytes(123, "lz"))),
        "non-canonical length",
    )
    m.add(
        "envelope-length-0x80",
        "Envelope length byte 80: a long form with zero length bytes (BER's "
        "indefinite form, which OER does not have).",
        b"\x06\x00\x00\x00\x01\x80\x01\x00",
        "non-canonical length",
    )
    m.add(
        "entry-name-length-long-form",
        "An entry name length written 81 03.",
        header(6, 1, b"\x01\x01\x81\x03ilp\x00\x00"),
        "non-canonical length",
    )
    m.add(
        "entry-data-length-long-form",
        "An entry data length written 81 01.",
        header(6, 1, b"\x01\x01\x03ilp\x00\x81\x01x"),
        "non-canonical length",
    )
    m.add(
        "entry-data-length-leading-zero",
        "An entry data length written 82 00 ff.",
        header(6, 1, b"\x01\x01\x03ilp\x00\x82\x00\xff" + text_bytes(255, "dz")),
        "non-canonical length",
    )
    m.add(
        "error-data-length-long-form",
        "An Error data length written 82 00 05.",
        header(2, 1, error_envelope()[:-3] + b"\x82\x00\x05hello\x01\x00"),
        "non-canonical length",
    )
    m.add(
        "count-leading-zero",
        "The protocol data count written 02 00 01 (one, with a leading zero byte): a "
        "variable-length unsigned integer MUST NOT have leading zeros.",
        header(6, 1, pd_bytes((b"ilp", 0, b"x"), count=b"\x02\x00\x01")),
        "non-canonical integer",
        js_divergence=js_count,
    )
    m.add(
        "count-zero-leading-zero",
        "No entries, the count written 02 00 00.",
        header(6, 1, b"\x02\x00\x00"),
        "non-canonical integer",
        js_divergence=js_count,
    )
    m.add(
        "count-empty",
        "The count written 00: an integer needs at least one byte (zero is 01 00).",
        header(6, 1, b"\x00"),
        "empty integer",
    )
    m.add(
        "count-length-long-form",
        "The count's length determinant written 81 01.",
        header(6, 1, b"\x81\x01\x00"),
        "non-canonical length",
    )
    # --- types
    message = pd_bytes((b"ilp", 0, b"x"))
    for kind in (0, 8, 255):
        m.add(
            f"type-{kind}",
            f"Packet type {kind}: not a BTP type (1..7), with an otherwise well-formed "
            "Message envelope.",
            header(kind, 1, message),
            "unknown packet type",
        )
    m.add(
        "garbage",
        "17 bytes of garbage starting ff (the server suite's garbage).",
        bytes.fromhex("ff00112233445566778899aabbccddeeff"),
        "unknown packet type",
    )
    m.add(
        "json-text",
        "A JSON text such as a confused client sends ('{' is 0x7b).",
        b'{"type":"message"}',
        "unknown packet type",
    )
    # --- Error fields
    m.add(
        "error-code-2-chars",
        "An Error whose envelope ends two bytes into the code: code is "
        "IA5String (SIZE (3)), three bytes with no length prefix.",
        header(2, 1, b"F0"),
        "bad error code length",
    )
    m.add(
        "error-code-empty",
        "An Error with an empty envelope (no code at all).",
        header(2, 1, b""),
        "bad error code length",
    )
    m.add(
        "error-code-length-prefixed",
        "An Error whose code was written with a length prefix (03 'F00'), a "
        "likely encoder mistake: the decoder reads code 03 'F0', then '0' (0x30 = 48) as the name length, "
        "which runs past the envelope.",
        header(2, 1, b"\x03" + error_envelope()),
        "length prefix beyond end",
        js_divergence=None,
    )
    js_bad_time = (
        "btp-packet does not validate triggeredAt: a string that does not match its regex, or a "
        "date that does not exist, becomes Invalid Date (or a rolled-over date) and the packet "
        "decodes"
    )
    bad_times = [
        ("20171224235312.431+0200", "not UTC (RFC 30 invalid example)"),
        ("20171224215312.4318Z", "too much precision (RFC 30 invalid example)"),
        ("20171224161432,279Z", "comma as decimal separator (RFC 30 invalid example)"),
        ("20171324161432.279Z", "month 13 (RFC 30 invalid example)"),
        (
            "20171224230000.20Z",
            "two fraction digits with a spurious trailing zero (RFC 30 invalid example)",
        ),
        ("20171224230000.Z", "spurious decimal point (RFC 30 invalid example)"),
        ("20171224240000Z", "24:00:00 instead of 000000 of the next day (RFC 30 invalid example)"),
        ("2017122421531Z", "a digit missing in the seconds (RFC 30 invalid example)"),
        ("201712242153Z", "no seconds (RFC 30 invalid example)"),
        ("2017122421Z", "no minutes and seconds (RFC 30 invalid example)"),
        ("20171115140000.000", "no Z"),
        ("20171115140000.000z", "lower-case z"),
        ("2017-11-15T14:00:00.000Z", "ISO 8601 extended format with separators"),
        ("20170230120000.000Z", "30 February"),
        ("20170229120000.000Z", "29 February of a common year"),
        (
            "20171231125960.000Z",
            "second 60 other than at 23:59 (leap seconds are inserted at 23:59:60 UTC)",
        ),
        ("", "the empty string"),
    ]
    for index, (when, what) in enumerate(bad_times):
        m.add(
            f"error-time-bad-{index + 1}",
            f"An Error whose triggeredAt is {json.dumps(when)}: {what}.",
            header(2, 1, error_envelope(time=when.encode())),
            "bad GeneralizedTime",
            js_divergence=js_bad_time,
        )
    m.add(
        "error-data-8193",
        "Error data of 8193 bytes, one more than OCTET STRING (SIZE (0..8192)) allows.",
        header(2, 1, error_envelope(data=text_bytes(8193, "error-8193"))),
        "error data too long",
        js_divergence="btp-packet does not limit the size of Error data",
    )
    # --- legacy types
    prepare = encode_packet(
        Prepare(
            40,
            derive_bytes("transfer-id", 16),
            7,
            derive_bytes("condition", 32),
            "20171224161432.279Z",
        )
    )
    m.add(
        "legacy-prepare-bad-expiry",
        "A BTP 1 Prepare whose expiresAt is 20171324161432.279Z (month 13).",
        prepare.replace(b"20171224161432.279Z", b"20171324161432.279Z"),
        "bad GeneralizedTime",
    )
    m.add(
        "legacy-prepare-short",
        "A BTP 1 Prepare whose envelope ends inside the executionCondition.",
        header(3, 40, prepare[6 : 6 + 40]),
        "truncated",
    )
    m.add(
        "legacy-fulfill-short",
        "A BTP 1 Fulfill whose envelope ends inside the transferId.",
        header(4, 41, derive_bytes("transfer-id", 16)[:10]),
        "truncated",
    )
    return m.vectors


# =========================================================================== documents

LAYOUT = {
    "hex": "the whole packet (one binary WebSocket message), lowercase hex",
    "canonical": "true when encoding the decoded packet gives hex back; otherwise canonical_hex is what the "
    "encoder writes (the only non-canonical valid vectors carry extra bytes inside or after the envelope)",
    "packet.type / type_id": "Response 1, Error 2, Prepare 3, Fulfill 4, Reject 5, Message 6, Transfer 7",
    "packet.request_id": "UInt32 as a JSON number",
    "packet.amount": "UInt64 as a decimal string (2^64-1 does not survive a JavaScript number)",
    "packet.code, name, triggered_at": "Error's IA5 strings, as text",
    "packet.data_hex": "Error data",
    "packet.transfer_id_hex, execution_condition_hex, fulfillment_hex, expires_at": "BTP 1 Prepare/Fulfill/Reject",
    "packet.protocol_data": "entries in order: name (IA5 text), content_type (0..255), data_hex",
    "js_divergence": "where npm btp-packet 2.2.1 decodes differently, and how; "
    "interop/node/check-btp-vectors.js reports these as 'diverges', not as failures",
}

DECISIONS = {
    "extra_bytes_inside_envelope": 'ACCEPTED and ignored. RFC 30 (Extensibility): "implementations MUST ignore '
    'extra bytes at the end of the message" so later versions can add fields. In BTP a later field can only '
    "go at the end of a type's SEQUENCE, inside the length-prefixed envelope, whose length prefix (RFC 23, "
    "Overview, item 3: the combined length of packet-specific and protocol data) is what lets an old decoder "
    "skip it. Vectors: message-extra-bytes-in-envelope, transfer-extra-bytes-in-envelope (canonical: false).",
    "bytes_after_envelope": "ACCEPTED and ignored (erratum BTP-E3, docs/errata/btp.md). RFC 30 (Extensibility): "
    '"implementations MUST ignore extra bytes at the end of the message", and a BTP message is the whole '
    "WebSocket message; btp-packet (the codec of ilp-plugin-btp and ilp-plugin-mini-accounts) reads the "
    "envelope and never looks at what follows it. The packet is what the envelope holds; encoding it again "
    "drops the bytes after it. Vectors: message-byte-after-envelope, message-packet-after-envelope, "
    "error-bytes-after-envelope (canonical: false).",
    "content_type": "Any byte 0..255 decodes and encodes (ContentType ::= INTEGER {...} (0..255); the ASN.1 "
    "comment: the byte is there so debug tools can display the data). 'bad content type' is an entry "
    "declaring text it does not hold: content type 1 (text/plain; charset=utf-8) or 2 (application/json, "
    'UTF-8 by RFC 8259 section 8.1) whose data is not well-formed UTF-8 -- it "contains illegal '
    "characters\" (RFC 23, Flow, unreadable packets). JSON syntax is the sub-protocol's business and is not "
    "checked. Vectors: message-content-type-3/-255 (valid), malformed.json text-*, json-*, auth-token-latin1.",
    "generalized_time": "UTC only, YYYYMMDDHHMMSS then optionally '.' and 1-3 digits, then 'Z'; ranges checked, "
    "leap second 60 only at 23:59, midnight 000000. RFC 30's canonical form (no trailing zeros, no '.000') and "
    "the fixed three-digit form of the specs README (20171115140000.000Z) and btp-packet are both accepted; "
    "a one- or two-digit fraction ending in 0 is rejected (RFC 30: spurious trailing zero). The encoder's "
    "generalized_time() writes the three-digit form, the only one btp-packet can read.",
    "count": "The protocol data count is a canonical variable-length unsigned integer: 01 00 for zero, no "
    "leading zeros, at least one byte.",
    "error_code": "IA5String (SIZE (3)) is three bytes without a length prefix; an envelope ending inside it is "
    "'bad error code length'. Codes outside the RFC 23 table decode.",
    "duplicate_names": "Decodable; RFC 23 makes them a protocol error the session answers, not an encoding error.",
}


def packets_document() -> dict:
    return {
        "protocol": "btp",
        "component": "packet",
        "spec": SPEC,
        "generator": GENERATOR,
        "description": "Valid BTP packets: every type including the BTP 1 types 3-5, length prefixes at the "
        "short/long and one/two/three-byte boundaries, amounts 0 and 2^64-1, empty, single and "
        "many protocol data entries in every content type, Error data of 0 and 8192 bytes, and "
        "the GeneralizedTime forms. Each decodes to `packet`; canonical ones encode back to `hex`. "
        "See `decisions` for the choices the specs leave open.",
        "layout": LAYOUT,
        "decisions": DECISIONS,
        "vectors": valid_vectors(),
    }


REASONS = {
    "truncated": "a fixed-size field or the 6-byte header runs past the end of its container",
    "length prefix beyond end": "a length determinant claims more bytes than its container (the message or the "
    'envelope) has left: "terminates before length prefixes dictate" (RFC 23)',
    "non-canonical length": "a length determinant that is not minimal: long form below 128, leading zero "
    "length bytes, or 80",
    "empty integer": "a variable-length unsigned integer of zero bytes",
    "non-canonical integer": "a variable-length unsigned integer with a leading zero byte",
    "unknown packet type": "a type byte outside 1..7",
    "non-IA5 character": "a byte >= 0x80 in an IA5String (protocol name, error code, error name, time)",
    "bad error code length": "the Error's envelope ends inside its fixed 3-byte code",
    "bad GeneralizedTime": "triggeredAt/expiresAt is not an accepted UTC GeneralizedTime",
    "error data too long": "Error data longer than 8192 bytes",
    "bad content type": "a content type 1 or 2 entry whose data is not UTF-8",
}


def malformed_document() -> dict:
    assert set(REASONS) == DECODE_REASONS
    vectors = malformed_vectors()
    assert {v["reason"] for v in vectors} == DECODE_REASONS, DECODE_REASONS - {
        v["reason"] for v in vectors
    }
    return {
        "protocol": "btp",
        "component": "packet-malformed",
        "spec": SPEC,
        "generator": GENERATOR,
        "description": 'Unreadable BTP packets. RFC 23, Flow: "If an unreadable BTP packet is received, no '
        "response should be sent\". Each must be rejected; `reason` is the reference codec's "
        "BtpDecodeError.reason and `offset` the byte it blames. js_divergence says where npm "
        "btp-packet 2.2.1 accepts the packet anyway.",
        "reasons": REASONS,
        "malformed": vectors,
    }


def render(document: dict) -> str:
    return json.dumps(document, indent=2) + "\n"


def main() -> int:
    return write_or_check(
        __doc__.splitlines()[0],
        lambda: {
            PACKETS_PATH: render(packets_document()),
            MALFORMED_PATH: render(malformed_document()),
        },
    )


if __name__ == "__main__":
    sys.exit(main())

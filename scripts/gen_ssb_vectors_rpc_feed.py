#!/usr/bin/env python3
"""Generate vectors/ssb/rpc.json and vectors/ssb/feed.json.

Keys and payloads come from fixed labels through SHA-256 / SHAKE-256 and
Ed25519 signatures are deterministic, so running this again produces
byte-identical files. The files are committed; tests check the reference
implementation against them and that this script still reproduces them.
vectors/ssb/README.md documents the layout.

Usage: scripts/gen_ssb_vectors_rpc_feed.py [--check]
  --check   write nothing; exit 1 if the committed files differ from what
            this script generates
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from conformance.core.vector_files import write_or_check  # noqa: E402

from reference_impl.ssb.feed import (  # noqa: E402
    canonical_json,
    create_message,
    encode_signature,
    json_stringify,
    message_id,
    signing_input,
)
from reference_impl.ssb.keys import Keypair  # noqa: E402
from reference_impl.ssb.rpc import (  # noqa: E402
    DEFAULT_MAX_BODY,
    FLAG_STREAM,
    GOODBYE,
    BodyType,
    RpcMessage,
    encode_header,
)

VECTORS_DIR = REPO_ROOT / "vectors" / "ssb"
RPC_PATH = VECTORS_DIR / "rpc.json"
FEED_PATH = VECTORS_DIR / "feed.json"

_LABEL_PREFIX = b"ssb-conformance-vectors/"


def derive(label: str) -> bytes:
    """32 fixed bytes named by ``label``."""
    return hashlib.sha256(_LABEL_PREFIX + label.encode()).digest()


def derive_bytes(label: str, size: int) -> bytes:
    """``size`` fixed bytes named by ``label`` (for payloads)."""
    return hashlib.shake_256(_LABEL_PREFIX + label.encode()).digest(size)


def fake_message_id(label: str) -> str:
    """A well-formed message id that names no message."""
    return "%" + base64.b64encode(derive(label)).decode("ascii") + ".sha256"


# --- The guide's own examples (RPC protocol, Feeds) ------------------------------

GUIDE_AUTHOR = "@FCX/tsDLpubCPKKfIrw4gc+SQkHcaD17s7GI6i/ziWY=.ed25519"
GUIDE_BLOB = "&WWw4tQJ6ZrM7o3gA8lOEAcO4zmyqXqb/3bmIKTLQepo=.sha256"
# The guide prints both signatures wrapped over two lines; joined here.
GUIDE_MESSAGE_1 = {
    "previous": None,
    "author": GUIDE_AUTHOR,
    "sequence": 1,
    "timestamp": 1514517067954,
    "hash": "sha256",
    "content": {"type": "post", "text": "This is the first post!"},
    "signature": "QYOR/zU9dxE1aKBaxc3C0DJ4gRyZtlMfPLt+CGJcY73sv5abKK"
    "Kxr1SqhOvnm8TY784VHE8kZHCD8RdzFl1tBA==.sig.ed25519",
}
GUIDE_MESSAGE_2 = {
    "previous": "%XphMUkWQtomKjXQvFGfsGYpt69sgEY7Y4Vou9cEuJho=.sha256",
    "author": GUIDE_AUTHOR,
    "sequence": 2,
    "timestamp": 1514517078157,
    "hash": "sha256",
    "content": {"type": "post", "text": "Second post!"},
    "signature": "z7W1ERg9UYZjNfE72ZwEuJF79khG+eOHWFp6iF+KLuSrw8Lqa6"
    "IousK4cCn9T5qFa8E14GVek4cAMmMbjqDnAg==.sig.ed25519",
}
GUIDE_MESSAGE_IDS = {
    1: "%XphMUkWQtomKjXQvFGfsGYpt69sgEY7Y4Vou9cEuJho=.sha256",
    2: "%R7lJEkz27lNijPhYNDzYoPjM0Fp+bFWzwX0SmNJB/ZE=.sha256",
}


# --- rpc.json --------------------------------------------------------------------


def rpc_vector(id_: str, description: str, msg: RpcMessage, **extra: Any) -> dict:
    vector = {
        "id": id_,
        "description": description,
        "req": msg.req,
        "stream": msg.stream,
        "end": msg.end,
        "body_type": msg.body_type.name.lower(),
        "body_hex": msg.body.hex(),
    }
    if msg.body_type is BodyType.JSON:
        vector["body_json"] = msg.json()
    vector["wire"] = msg.encode().hex()
    vector.update(extra)
    return vector


def rpc_document() -> dict:
    history_request = {
        "name": ["createHistoryStream"],
        "type": "source",
        "args": [{"id": GUIDE_AUTHOR}],
    }
    history_options_request = {
        "name": ["createHistoryStream"],
        "type": "source",
        "args": [
            {
                "id": GUIDE_AUTHOR,
                "sequence": 2,
                "limit": 1,
                "live": False,
                "old": True,
                "keys": True,
            }
        ],
    }
    blobs_has = {"name": ["blobs", "has"], "type": "async", "args": [GUIDE_BLOB]}
    error_body = {"name": "Error", "message": "invalid hash:this was a mistake", "stack": ""}
    vectors = [
        rpc_vector(
            "create-history-stream-request",
            "The guide's source example: createHistoryStream, our first request (1), stream flag set.",
            RpcMessage.from_json(1, history_request, stream=True),
        ),
        rpc_vector(
            "create-history-stream-request-options",
            "createHistoryStream with every option of the guide's createHistoryStream section.",
            RpcMessage.from_json(1, history_options_request, stream=True),
        ),
        rpc_vector(
            "create-history-stream-response-keys",
            "A stream response (req -1) with keys: true: {key, value, timestamp} holding the guide's first message.",
            RpcMessage.from_json(
                -1,
                {"key": GUIDE_MESSAGE_IDS[1], "value": GUIDE_MESSAGE_1, "timestamp": 1514517067956},
                stream=True,
            ),
        ),
        rpc_vector(
            "create-history-stream-response-no-keys",
            "A stream response with keys: false: the bare message.",
            RpcMessage.from_json(-2, GUIDE_MESSAGE_1, stream=True),
        ),
        rpc_vector(
            "source-end-by-responder",
            "The responder ends a source stream: stream and end flags, body true.",
            RpcMessage.from_json(-1, True, stream=True, end=True),
        ),
        rpc_vector(
            "source-end-by-requester",
            "The requester's own end of the same stream (its reply to the responder's end, or an early abort).",
            RpcMessage.from_json(1, True, stream=True, end=True),
        ),
        rpc_vector(
            "blobs-has-request",
            "The guide's async example: blobs.has as request 2, no stream flag.",
            RpcMessage.from_json(2, blobs_has),
        ),
        rpc_vector(
            "blobs-has-request-js-muxrpc",
            "The same call as JS muxrpc sends it: async requests carry only name and args, no type.",
            RpcMessage.from_json(2, {"name": ["blobs", "has"], "args": [GUIDE_BLOB]}),
        ),
        rpc_vector(
            "blobs-has-response",
            "The single async response true (req -2, no flags).",
            RpcMessage.from_json(-2, True),
        ),
        rpc_vector(
            "async-error-response",
            "The guide's error example: end/err flag on an async response, body {name, message, stack}.",
            RpcMessage.from_json(-3, error_body, end=True),
        ),
        rpc_vector(
            "stream-error-end",
            "A source stream ended with an error instead of true.",
            RpcMessage.from_json(
                -4, {"name": "Error", "message": "no such feed", "stack": ""}, stream=True, end=True
            ),
        ),
        rpc_vector(
            "binary-body",
            "A binary (type 0) stream packet, as blobs.get streams blob bytes.",
            RpcMessage.from_bytes(-5, derive_bytes("rpc/blob-chunk", 48), stream=True),
        ),
        rpc_vector(
            "string-body",
            "A UTF-8 string (type 1) body with non-ASCII text.",
            RpcMessage.from_text(-6, "h\u00e9llo \u2713 \U0001f30d"),
        ),
        rpc_vector(
            "empty-body",
            "A binary stream packet with an empty body: not a goodbye, because the flags and request "
            "number are not zero. packet-stream-codec takes ANY header with body length 0 for the "
            "goodbye, so it disagrees here (js_divergence).",
            RpcMessage.from_bytes(7, b"", stream=True),
            js_divergence="packet-stream-codec decodes any header with body length 0 as the goodbye",
        ),
        rpc_vector(
            "request-number-i32-max",
            "The highest request number a requester can use, 2^31-1.",
            RpcMessage.from_json(2**31 - 1, blobs_has),
        ),
        rpc_vector(
            "response-number-i32-max",
            "Its response, -(2^31-1).",
            RpcMessage.from_json(-(2**31 - 1), True),
        ),
        rpc_vector(
            "request-number-i32-min",
            "-2^31 decodes (the field is a signed 32-bit integer), but no request has number 2^31, "
            "so an endpoint treats it as a reply to an unknown request.",
            RpcMessage.from_json(-(2**31), True),
        ),
        {
            "id": "goodbye",
            "description": "The goodbye: a header of nine zero bytes, no body.",
            "goodbye": True,
            "req": 0,
            "stream": False,
            "end": False,
            "body_type": "binary",
            "body_hex": "",
            "wire": GOODBYE.hex(),
        },
    ]
    invalid = [
        {
            "id": "body-type-3",
            "description": "Flags 0x0b: stream flag and body type 3, which is not defined.",
            "wire": (encode_header(FLAG_STREAM | 3, 2, 1) + b"{}").hex(),
            "reason": "unknown body type",
        },
        {
            "id": "body-type-3-async",
            "description": "Flags 0x03: body type 3 on an async packet.",
            "wire": (encode_header(3, 4, -1) + b"true").hex(),
            "reason": "unknown body type",
        },
        {
            "id": "truncated-header",
            "description": "The connection closes after 5 of a header's 9 bytes.",
            "wire": RpcMessage.from_json(1, True).encode()[:5].hex(),
            "reason": "truncated packet",
        },
        {
            "id": "truncated-body",
            "description": "A header declaring a 10-byte body, and only 4 body bytes before the connection closes.",
            "wire": (encode_header(0x02, 10, 1) + b"[1,2").hex(),
            "reason": "truncated packet",
        },
        {
            "id": "body-length-over-bound",
            "description": f"A header declaring {DEFAULT_MAX_BODY + 1} body bytes, one over the decoder's bound "
            "(max_body); rejected on the header, without waiting for the body.",
            "wire": (encode_header(0x0A, DEFAULT_MAX_BODY + 1, 1) + b'{"name":').hex(),
            "reason": "body length exceeds limit",
        },
        {
            "id": "body-length-u32-max",
            "description": "A header declaring 2^32-1 body bytes.",
            "wire": encode_header(0x02, 2**32 - 1, 1).hex(),
            "reason": "body length exceeds limit",
        },
        {
            "id": "json-body-not-json",
            "description": "A JSON (type 2) body that does not parse. Framing is intact, so the decoder yields "
            "the packet; reading its body (RpcMessage.json) fails.",
            "wire": (encode_header(0x02, 9, -1) + b"{not json").hex(),
            "reason": "invalid JSON body",
        },
    ]
    return {
        "protocol": "ssb",
        "component": "rpc",
        "spec": "scuttlebutt-protocol-guide, RPC protocol; header layout img/rpc_header.png",
        "max_body": DEFAULT_MAX_BODY,
        "vectors": vectors,
        "invalid": invalid,
    }


# --- feed.json -------------------------------------------------------------------

BASE_TIMESTAMP = 1700000000000


def valid_vector(id_: str, description: str, msg: dict, seed: bytes | None, **extra: Any) -> dict:
    unsigned = {key: value for key, value in msg.items() if key != "signature"}
    vector = {"id": id_, "description": description}
    if seed is not None:
        vector["author_seed"] = seed.hex()
    vector.update(
        {
            "message": msg,
            "canonical": canonical_json(unsigned),
            "signed_canonical": canonical_json(msg),
            "message_id": message_id(msg),
        }
    )
    vector.update(extra)
    return vector


def invalid_vector(
    id_: str, description: str, msg: Any, previous: dict | None, reason: str
) -> dict:
    return {
        "id": id_,
        "description": description,
        "message": msg,
        "previous": previous,
        "reason": reason,
    }


def sign_fields(keypair: Keypair, fields: dict) -> dict:
    """``fields`` (any keys, any order) with a signature over their canonical JSON appended."""
    signed = dict(fields)
    signed["signature"] = encode_signature(keypair.sign(signing_input(fields)))
    return signed


def sign_text(keypair: Keypair, fields: dict, text: str) -> dict:
    """``fields`` signed over ``text`` instead of their canonical JSON."""
    signed = dict(fields)
    signed["signature"] = encode_signature(keypair.sign(text.encode("utf-8")))
    return signed


def flip_signature_bit(msg: dict) -> dict:
    raw = bytearray(base64.b64decode(msg["signature"].removesuffix(".sig.ed25519")))
    raw[0] ^= 0x01
    return {**msg, "signature": encode_signature(bytes(raw))}


def fields_of(msg: dict) -> dict:
    return {key: value for key, value in msg.items() if key != "signature"}


def feed_document() -> dict:
    seed_a = derive("feed/author-a")
    seed_b = derive("feed/author-b")
    alice = Keypair.from_seed(seed_a)
    bob = Keypair.from_seed(seed_b)

    chain: list[dict] = []

    def append(content: Any, timestamp: int | float) -> dict:
        previous_id = message_id(chain[-1]) if chain else None
        msg = create_message(alice, previous_id, len(chain) + 1, timestamp, content)
        chain.append(msg)
        return msg

    m1 = append({"type": "post", "text": "Hello, Scuttlebutt!"}, BASE_TIMESTAMP)
    m2 = append(
        {"type": "contact", "contact": bob.feed_id, "following": True}, BASE_TIMESTAMP + 1000
    )
    m3 = append(
        {
            "type": "post",
            "text": "A reply to my first post.",
            "root": message_id(m1),
            "mentions": [],
        },
        BASE_TIMESTAMP + 2000,
    )
    non_ascii_text = (
        "Gr\u00fc\u00dfe aus K\u00f6ln \u2014 \u4e16\u754c \U0001f30d line\u2028separator"
    )
    m4 = append(
        {"type": "post", "text": non_ascii_text, "channel": "\u00fcn\u00efc\u00f6de"},
        BASE_TIMESTAMP + 3000,
    )
    numbers_content = {
        "type": "test-numbers-and-escapes",
        "float_sum": 0.1 + 0.2,
        "one_point_zero": 1.0,
        "exponent_threshold": 1e21,
        "below_exponent_threshold": 1e20,
        "tiny": 1e-7,
        "small": 0.000001,
        "negative_zero": -0.0,
        "max_safe_integer": 2**53 - 1,
        "escapes": 'quote" backslash\\ slash/ \b\f\n\r\t nul\u0000 unit-separator\u001f del\u007f',
        "lone_surrogate": "\ud800",
        "nested": {
            "empty_object": {},
            "empty_list": [],
            "list": [1, "two", [3.5, None, True, False]],
        },
        "b": "integer-like keys come first in JS, ascending",
        "10": "ten",
        "2": "two",
    }
    m5 = append(numbers_content, BASE_TIMESTAMP + 4000.5)
    # Legacy order: sequence before author, allowed on receipt.
    m6 = sign_fields(
        alice,
        {
            "previous": message_id(m5),
            "sequence": 6,
            "author": alice.feed_id,
            "timestamp": BASE_TIMESTAMP + 5000,
            "hash": "sha256",
            "content": {"type": "post", "text": "Legacy field order."},
        },
    )
    chain.append(m6)
    box = base64.b64encode(derive_bytes("feed/private-box", 96)).decode("ascii") + ".box"
    m7 = append(box, BASE_TIMESTAMP + 6000)
    m8 = append({"type": "\U0001f30d\U0001f30d"}, BASE_TIMESTAMP + 7000)

    hashed_as_utf8 = (
        "%"
        + base64.b64encode(hashlib.sha256(canonical_json(m4).encode("utf-8")).digest()).decode(
            "ascii"
        )
        + ".sha256"
    )

    valid = [
        valid_vector(
            "guide-message-1",
            "The guide's first example message (signature lines joined); "
            "its id is the guide's %XphMUkWQ.... No seed: not our key.",
            GUIDE_MESSAGE_1,
            None,
        ),
        valid_vector(
            "guide-message-2",
            "The guide's second example message, whose id the guide gives as %R7lJEkz2....",
            GUIDE_MESSAGE_2,
            None,
        ),
        valid_vector(
            "chain-1-first", "First message of a feed: previous null, sequence 1.", m1, seed_a
        ),
        valid_vector("chain-2-contact", "Second message, previous = id of the first.", m2, seed_a),
        valid_vector("chain-3-reply", "Content with a message id and an empty list.", m3, seed_a),
        valid_vector(
            "chain-4-non-ascii",
            "Non-ASCII content (Latin-1, CJK, an emoji, U+2028). Signed over UTF-8, but the id "
            "hashes each UTF-16 code unit's low byte (ssb-keys' 'binary' encoding); "
            "message_id_hashing_utf8 is the wrong id an implementation hashing UTF-8 gets.",
            m4,
            seed_a,
            message_id_hashing_utf8=hashed_as_utf8,
        ),
        valid_vector(
            "chain-5-numbers-escapes",
            "Number formatting (0.1+0.2, 1.0 -> 1, 1e21 -> 1e+21, 1e-7, -0 -> 0), string escapes "
            "(short forms, \\u00XX, DEL literal, lone surrogate \\ud800), empty containers, "
            "integer-like keys reordered first as in JS, and a fractional timestamp.",
            m5,
            seed_a,
        ),
        valid_vector(
            "chain-6-legacy-field-order",
            "sequence before author: the legacy order the guide still allows.",
            m6,
            seed_a,
        ),
        valid_vector(
            "chain-7-encrypted-content",
            "Content is a <base64>.box string (a private message).",
            m7,
            seed_a,
        ),
        valid_vector(
            "chain-8-type-utf16",
            "content.type of 2 emoji: 2 code points but 4 UTF-16 code units, so within 3..52.",
            m8,
            seed_a,
        ),
    ]

    def resigned(base: dict, **changes: Any) -> dict:
        """``base`` with fields changed (order kept), correctly signed by Alice."""
        return sign_fields(alice, {**fields_of(base), **changes})

    without_timestamp = {key: value for key, value in fields_of(m2).items() if key != "timestamp"}
    hash_before_timestamp = {
        key: fields_of(m2)[key]
        for key in ("previous", "author", "sequence", "hash", "timestamp", "content")
    }
    signature_before_content = {
        key: m2[key]
        for key in ("previous", "author", "sequence", "timestamp", "hash", "signature", "content")
    }
    bob_first = create_message(
        bob, message_id(m1), 2, BASE_TIMESTAMP + 1000, {"type": "post", "text": "hi"}
    )
    sig_b64 = m2["signature"].removesuffix(".sig.ed25519")
    # 64 bytes end in one byte: two characters and "==". The second character
    # holds 2 bits of it and 4 padding bits, which canonical base64 leaves
    # zero; setting one gives the same bytes from a non-canonical text.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = alphabet.index(sig_b64[-3])
    non_canonical_signature = sig_b64[:-3] + alphabet[last | 0x01] + "==.sig.ed25519"
    oversized = create_message(
        alice, message_id(m1), 2, BASE_TIMESTAMP + 1000, {"type": "post", "text": "x" * 8200}
    )
    unsafe_integer = dict(fields_of(m2), content={"type": "post", "count": 2**53 + 1})
    # canonical_json prints 2^53+1 as JS does, rounded to 2^53; the careless
    # author signs the exact digits.
    unsafe_integer_text = canonical_json(unsafe_integer).replace(
        f'"count": {2**53}', f'"count": {2**53 + 1}'
    )

    invalid = [
        invalid_vector(
            "bad-signature",
            "chain-2 with one bit of its signature flipped.",
            flip_signature_bit(m2),
            m1,
            "signature",
        ),
        invalid_vector(
            "signed-by-another-key",
            "Alice's message signed with Bob's key.",
            sign_fields(bob, fields_of(m2)),
            m1,
            "signature",
        ),
        invalid_vector(
            "signature-not-canonical-base64",
            "Signature base64 with non-zero padding bits (same bytes, non-canonical text).",
            {**m2, "signature": non_canonical_signature},
            m1,
            "signature",
        ),
        invalid_vector(
            "wrong-previous",
            "Sequence 2 whose previous is not the id of message 1.",
            resigned(m2, previous=fake_message_id("feed/not-a-message")),
            m1,
            "previous",
        ),
        invalid_vector(
            "first-message-with-previous",
            "Sequence 1 with a non-null previous.",
            resigned(m1, previous=fake_message_id("feed/not-a-message")),
            None,
            "previous",
        ),
        invalid_vector(
            "wrong-sequence",
            "Sequence 3 straight after message 1.",
            resigned(m2, sequence=3),
            m1,
            "sequence",
        ),
        invalid_vector(
            "first-message-sequence-2",
            "A first message (previous null) with sequence 2.",
            resigned(m1, sequence=2),
            None,
            "sequence",
        ),
        invalid_vector(
            "sequence-not-integer", "Sequence 2.5.", resigned(m2, sequence=2.5), m1, "sequence"
        ),
        invalid_vector(
            "wrong-hash-name",
            "hash is sha512 instead of sha256.",
            resigned(m2, hash="sha512"),
            m1,
            "hash",
        ),
        invalid_vector(
            "extra-field",
            "An eighth field before the signature.",
            sign_fields(alice, {**fields_of(m2), "extra": 1}),
            m1,
            "fields",
        ),
        invalid_vector(
            "missing-field",
            "No timestamp field.",
            sign_fields(alice, without_timestamp),
            m1,
            "fields",
        ),
        invalid_vector(
            "misordered-fields",
            "hash before timestamp.",
            sign_fields(alice, hash_before_timestamp),
            m1,
            "fields",
        ),
        invalid_vector(
            "signature-not-last",
            "The signature field before content.",
            signature_before_content,
            m1,
            "fields",
        ),
        invalid_vector(
            "signed-with-4-space-indent",
            "Signed over JSON.stringify(msg, null, 4), which does not match the canonical form.",
            sign_text(alice, fields_of(m2), json_stringify(fields_of(m2), 4)),
            m1,
            "format",
        ),
        invalid_vector(
            "signed-compact-json",
            "Signed over compact JSON (as the message travels in RPC) instead of the canonical form.",
            sign_text(alice, fields_of(m2), json_stringify(fields_of(m2))),
            m1,
            "format",
        ),
        invalid_vector(
            "content-type-too-short",
            'content.type "ab" (2 code units).',
            resigned(m2, content={"type": "ab", "text": "short"}),
            m1,
            "content",
        ),
        invalid_vector(
            "content-type-too-long",
            "content.type of 53 code units.",
            resigned(m2, content={"type": "t" * 53}),
            m1,
            "content",
        ),
        invalid_vector(
            "content-type-utf16-too-long",
            "content.type of 27 emoji: 27 code points, but 54 UTF-16 code units.",
            resigned(m2, content={"type": "\U0001f30d" * 27}),
            m1,
            "content",
        ),
        invalid_vector(
            "content-type-missing",
            "content without type.",
            resigned(m2, content={"text": "untyped"}),
            m1,
            "content",
        ),
        invalid_vector(
            "content-not-object", "content is a number.", resigned(m2, content=42), m1, "content"
        ),
        invalid_vector(
            "content-string-not-box",
            "content is a plain string, not <base64>.box.",
            resigned(m2, content="hello"),
            m1,
            "content",
        ),
        invalid_vector(
            "invalid-author",
            "author is not @<base64 of 32 bytes>.ed25519.",
            resigned(m1, author="@not-a-key.ed25519"),
            None,
            "author",
        ),
        invalid_vector(
            "author-differs-from-previous",
            "Bob's message claiming to follow Alice's message 1.",
            bob_first,
            m1,
            "author",
        ),
        invalid_vector(
            "timestamp-not-number",
            "A first message whose timestamp is a string.",
            resigned(m1, timestamp="2023-11-14"),
            None,
            "timestamp",
        ),
        invalid_vector(
            "unsafe-integer",
            "content holds 2^53+1, signed over those exact digits; JSON.parse rounds it to 2^53, "
            "so no JS peer can check the signature.",
            sign_text(alice, unsafe_integer, unsafe_integer_text),
            m1,
            "format",
        ),
        invalid_vector(
            "oversized",
            "Canonical JSON over 8192 UTF-16 code units (ssb-validate's limit).",
            oversized,
            m1,
            "size",
        ),
        invalid_vector(
            "text-not-json",
            "Message text (a string) cut off in the middle.",
            json_stringify(m2)[:40],
            m1,
            "json",
        ),
        invalid_vector(
            "text-nan-timestamp",
            "Message text with NaN, which JSON does not have.",
            json_stringify(m2).replace(f'"timestamp":{m2["timestamp"]}', '"timestamp":NaN'),
            m1,
            "json",
        ),
    ]
    return {
        "protocol": "ssb",
        "component": "feed",
        "spec": "scuttlebutt-protocol-guide, Feeds, Message format, Signature, Message ID",
        "valid": valid,
        "invalid": invalid,
    }


def render(document: dict) -> str:
    # ensure_ascii: the lone surrogate in chain-5 cannot be written as UTF-8.
    return json.dumps(document, indent=2) + "\n"


def main() -> int:
    return write_or_check(
        __doc__.splitlines()[0],
        lambda: {RPC_PATH: render(rpc_document()), FEED_PATH: render(feed_document())},
    )


if __name__ == "__main__":
    sys.exit(main())

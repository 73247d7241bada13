"""Classic SSB feeds: canonical JSON, signed messages, message ids, chains.

Sans-I/O core of "Feeds", "Message format", "Signature" and "Message ID" in
scuttlebutt-protocol-guide.txt. A message is a dict whose key order matters,
exactly as it came off the wire (``json.loads`` keeps key order).

The canonical form is whatever ``JSON.stringify(value, null, 2)`` prints in
Node.js, because that is what ssb-keys signs and ssb-validate checks; where
the guide and Node disagree, Node decides (see :func:`json_stringify`).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import math
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from ..faults import FaultPoints
from .faults import SPECS as FAULT_SPECS
from .faults import Fault
from .keys import Keypair, feed_id_to_public, verify_signature

HASH_NAME = "sha256"
SIGNATURE_SUFFIX = ".sig.ed25519"
MESSAGE_ID_PREFIX = "%"
MESSAGE_ID_SUFFIX = ".sha256"

FIELD_ORDER = ("previous", "author", "sequence", "timestamp", "hash", "content", "signature")
# "author and sequence can be swapped for legacy reasons" (guide, Message format).
LEGACY_FIELD_ORDER = ("previous", "sequence", "author", "timestamp", "hash", "content", "signature")

CONTENT_TYPE_MIN = 3
CONTENT_TYPE_MAX = 52

MAX_MESSAGE_LENGTH = 8192
"""ssb-validate rejects a message whose canonical JSON (signature included) is
longer than this many UTF-16 code units. The guide does not state the limit,
but every JS peer enforces it, so a longer message never replicates."""

MAX_SAFE_INTEGER = 2**53 - 1

SIGNATURE_SIZE = 64

# Reasons a message is rejected, the values of FeedError.reason.
FEED_ERROR_REASONS = frozenset(
    {
        "fields",
        "author",
        "sequence",
        "previous",
        "timestamp",
        "hash",
        "content",
        "signature",
        "format",
        "size",
        "json",
    }
)

# Canonical (padding bits zero) base64 as ssb-ref's is-canonical-base64
# defines it: the only spelling of given bytes that JS peers accept.
_CANONICAL_BASE64 = (
    r"(?:[A-Za-z0-9/+]{4})*"
    r"(?:[A-Za-z0-9/+](?:[AQgw]==|[A-Za-z0-9/+][AEIMQUYcgkosw048]=))?"
)
# ssb-validate only anchors the start: ".box" may be followed by a version
# ("box2") and the like, which old peers must still carry.
_ENCRYPTED_CONTENT = re.compile(_CANONICAL_BASE64 + r"\.box", re.ASCII)


class FeedError(ValueError):
    """A message or chain that a peer must reject; ``reason`` says which rule."""

    def __init__(self, reason: str, detail: str) -> None:
        assert reason in FEED_ERROR_REASONS, reason
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


# --- JSON.stringify ------------------------------------------------------------

_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def _quote_json_string(text: str) -> str:
    """QuoteJSONString as Node 20 implements it (ES2019 well-formed stringify).

    Python strings hold code points while JS strings hold UTF-16 code units,
    so a surrogate pair may reach us either as one astral code point or as two
    surrogate code points; both are one character to JS and print literally.
    Only a surrogate without its partner is escaped.
    """
    out = ['"']
    index = 0
    length = len(text)
    while index < length:
        char = text[index]
        code = ord(char)
        if char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif code < 0x20:
            out.append(f"\\u{code:04x}")
        elif (
            0xD800 <= code <= 0xDBFF
            and index + 1 < length
            and 0xDC00 <= ord(text[index + 1]) <= 0xDFFF
        ):
            low = ord(text[index + 1])
            out.append(chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)))
            index += 1
        elif 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
        index += 1
    out.append('"')
    return "".join(out)


def number_to_string(value: float) -> str:
    """Number::toString(value) of ECMA-262, for finite ``value``.

    Python's repr and ECMA-262 both pick the shortest digit string that reads
    back as the same double, so only the layout (where the point goes, when
    to switch to exponent form) has to be redone here.
    """
    if value == 0:
        return "0"  # both +0 and -0
    if value < 0:
        return "-" + number_to_string(-value)
    _, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    # repr gives e.g. "100.0": digits (1,0,0,0) exponent -1; zeros stripped
    # above move into the exponent so that value = 0.digits * 10**point.
    point = exponent + len(digit_tuple)
    count = len(digits)
    if count <= point <= 21:
        return digits + "0" * (point - count)
    if 0 < point <= 21:
        return digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return "0." + "0" * -point + digits
    power = point - 1
    sign = "+" if power >= 0 else "-"
    mantissa = digits if count == 1 else digits[0] + "." + digits[1:]
    return f"{mantissa}e{sign}{abs(power)}"


def _json_number(value: int | float) -> str:
    # JS has only doubles: an int is whatever double JSON.parse would make of
    # its digits (float() rounds to nearest the same way), and a value too big
    # for a double becomes Infinity, which JSON.stringify prints as null.
    try:
        as_double = float(value)
    except OverflowError:
        return "null"
    if not math.isfinite(as_double):
        return "null"
    return number_to_string(as_double)


_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*", re.ASCII)


def _is_array_index(key: str) -> bool:
    return _ARRAY_INDEX.fullmatch(key) is not None and int(key) <= 2**32 - 2


def js_property_order(keys: list[str]) -> list[str]:
    """The order in which a JS object holds ``keys`` inserted in this order.

    JS objects list integer-like keys ("0", "7", "10", up to 2**32-2) first in
    ascending numeric order, then the other keys in insertion order. So after
    JSON.parse, {"b":1,"10":2,"2":3} stringifies as "2", "10", "b", and that
    is the order ssb-keys signs.
    """
    indices = sorted((key for key in keys if _is_array_index(key)), key=int)
    return indices + [key for key in keys if not _is_array_index(key)]


def json_stringify(value: Any, indent: int | None = None) -> str:
    """``JSON.stringify(value, null, indent)`` as Node 20 prints it.

    ``indent=None`` gives the compact form (no whitespace at all). Accepts
    what json.loads produces (dict with str keys, list, str, int, float,
    bool, None) plus tuples; anything else raises TypeError.
    """
    gap = "" if indent is None else " " * indent
    return _stringify(value, gap, "")


def _stringify(value: Any, gap: str, current_indent: str) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return _json_number(value)
    if isinstance(value, str):
        return _quote_json_string(value)
    inner_indent = current_indent + gap
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        items = [_stringify(item, gap, inner_indent) for item in value]
        return _wrap("[", "]", items, gap, current_indent, inner_indent)
    if isinstance(value, dict):
        if not value:
            return "{}"
        for key in value:
            if not isinstance(key, str):
                raise TypeError(f"JSON object keys must be strings, got {key!r}")
        separator = ": " if gap else ":"
        members = [
            _quote_json_string(key) + separator + _stringify(value[key], gap, inner_indent)
            for key in js_property_order(list(value))
        ]
        return _wrap("{", "}", members, gap, current_indent, inner_indent)
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _wrap(
    open_: str, close: str, parts: list[str], gap: str, current_indent: str, inner_indent: str
) -> str:
    if not gap:
        return open_ + ",".join(parts) + close
    return (
        open_
        + "\n"
        + inner_indent
        + (",\n" + inner_indent).join(parts)
        + "\n"
        + current_indent
        + close
    )


def canonical_json(value: Any) -> str:
    """The canonical SSB form: ``JSON.stringify(value, null, 2)``."""
    return json_stringify(value, 2)


def _reject_constant(name: str) -> Any:
    # Python's json accepts NaN and Infinity; JSON.parse does not.
    raise ValueError(f"{name} is not JSON")


def parse_json(text: str) -> Any:
    """``JSON.parse`` as far as it matters here: standard JSON only, key order kept."""
    return json.loads(text, parse_constant=_reject_constant)


def _find_unfaithful_value(value: Any, path: str = "$") -> str | None:
    """Where ``value`` holds something JSON.stringify would not print back as is.

    Such a message cannot have been signed as JS peers will check it: they
    see NaN/Infinity as null and integers beyond 2**53 rounded to a double.
    Returns a description of the first such place, or None.
    """
    if value is None or isinstance(value, (bool, str)):
        return None
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER and float(value) != value:
            return f"{path}: integer {value} is not exactly a double"
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{path}: {value} is not a JSON number"
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = _find_unfaithful_value(item, f"{path}[{index}]")
            if found:
                return found
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path}: key {key!r} is not a string"
            found = _find_unfaithful_value(item, f"{path}.{key}")
            if found:
                return found
        return None
    return f"{path}: {type(value).__name__} is not a JSON type"


# --- Messages ------------------------------------------------------------------


def _hash_input(canonical_text: str) -> bytes:
    """The bytes ssb-keys hashes for a message id.

    ssb-keys calls ``Buffer.from(json, "binary")``, which keeps only the low
    byte of every UTF-16 code unit (so "é" U+00E9 gives e9, "世" U+4E16 gives
    16, and an emoji's two surrogates give their low bytes). For ASCII this
    equals UTF-8; for anything else it is not, and every peer must reproduce
    the truncation or compute ids nobody else agrees with. The signature,
    in contrast, is over real UTF-8.
    """
    return canonical_text.encode("utf-16-le")[0::2]


def message_id(msg: dict) -> str:
    """``%<base64 sha256>.sha256`` of the message's canonical JSON."""
    digest = hashlib.sha256(_hash_input(canonical_json(msg))).digest()
    return MESSAGE_ID_PREFIX + base64.b64encode(digest).decode("ascii") + MESSAGE_ID_SUFFIX


def _unsigned(msg: dict) -> dict:
    return {key: value for key, value in msg.items() if key != "signature"}


def signing_input(msg: dict) -> bytes:
    """What the author signs: the canonical JSON of ``msg`` minus its signature, UTF-8."""
    return canonical_json(_unsigned(msg)).encode("utf-8")


def encode_signature(signature: bytes) -> str:
    return base64.b64encode(signature).decode("ascii") + SIGNATURE_SUFFIX


def create_message(
    keypair: Keypair,
    previous_id: str | None,
    sequence: int,
    timestamp: int | float,
    content: dict | str,
) -> dict:
    """A signed message with the fields in the order the guide requires.

    ``content`` is a dict (or an encrypted ``<base64>.box`` string); its key
    order is kept. Nothing is validated here, so tests can build bad messages
    on purpose; use :func:`verify_message` for that.
    """
    msg = {
        "previous": previous_id,
        "author": keypair.feed_id,
        "sequence": sequence,
        "timestamp": timestamp,
        "hash": HASH_NAME,
        "content": content,
    }
    msg["signature"] = encode_signature(keypair.sign(signing_input(msg)))
    return msg


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _check_content(content: Any, points: FaultPoints) -> None:
    if isinstance(content, str):
        if not _ENCRYPTED_CONTENT.match(content):
            raise FeedError("content", "string content must be <base64>.box (encrypted)")
        return
    if not isinstance(content, dict):
        raise FeedError(
            "content",
            f"content must be an object or encrypted string, got {type(content).__name__}",
        )
    content_type = content.get("type")
    if not isinstance(content_type, str):
        raise FeedError("content", "content.type must be a string")
    # The guide counts "code units": JS string length, i.e. UTF-16.
    length = _utf16_length(content_type)
    if not points.apply(
        "message-rule", CONTENT_TYPE_MIN <= length <= CONTENT_TYPE_MAX, rule="content-type-length"
    ):
        raise FeedError(
            "content",
            f"content.type must be {CONTENT_TYPE_MIN}..{CONTENT_TYPE_MAX} UTF-16 code units, got {length}",
        )


def _decode_signature(signature: Any) -> bytes:
    if not isinstance(signature, str) or not signature.endswith(SIGNATURE_SUFFIX):
        raise FeedError("signature", f"signature must be a string ending in {SIGNATURE_SUFFIX}")
    encoded = signature[: -len(SIGNATURE_SUFFIX)]
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise FeedError("signature", "signature is not base64") from None
    if len(raw) != SIGNATURE_SIZE or base64.b64encode(raw).decode("ascii") != encoded:
        raise FeedError("signature", "signature must be the canonical base64 of 64 bytes")
    return raw


def _common_misformattings(unsigned: dict) -> list[bytes]:
    """Serialisations implementations mistakenly sign instead of the canonical one."""
    return [
        json_stringify(unsigned).encode("utf-8"),  # compact, as sent over RPC
        json_stringify(unsigned, 4).encode("utf-8"),
        json.dumps(unsigned, indent=2).encode("utf-8"),  # Python: \u escapes, 1.0
    ]


def _as_integer(value: Any) -> int | None:
    # JSON cannot tell 2 from 2.0 and neither can JS, so both are sequence 2.
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


@functools.cache
def _fault_points(faults: frozenset) -> FaultPoints:
    """One FaultPoints per set of faults: verify_message runs once per message."""
    return FaultPoints(FAULT_SPECS, faults)


def verify_message(msg: dict, previous: dict | None, *, faults: Iterable[Fault | str] = ()) -> str:
    """Check ``msg`` as the successor of ``previous`` (None: first message).

    Returns the message id. Raises FeedError whose ``reason`` names the first
    broken rule, checked in this order: fields, author, sequence, previous,
    timestamp, hash, content, format, size, signature. ``previous`` is trusted
    (already verified); only its id, author and sequence are used.

    "format" means the message holds a value JSON.stringify would change
    (NaN, integers beyond 2**53, non-string keys), or that the signature is
    the author's but over a non-canonical serialisation (compact, 4-space
    indent, or Python's json.dumps): still invalid, but named precisely
    because it is a common implementation mistake.

    ``faults``: rules broken on purpose (faults.py), applied at the fault
    points "message-fields" and "message-rule".
    """
    points = _fault_points(frozenset(faults))
    if not isinstance(msg, dict):
        raise FeedError("fields", f"a message is a JSON object, got {type(msg).__name__}")
    keys = points.apply("message-fields", tuple(msg), order=FIELD_ORDER)
    if keys not in (FIELD_ORDER, LEGACY_FIELD_ORDER):
        raise FeedError(
            "fields",
            f"fields must be {', '.join(FIELD_ORDER)} in this order, got {', '.join(map(str, keys))}",
        )

    author = msg["author"]
    try:
        public = feed_id_to_public(author)
    except ValueError as exc:
        raise FeedError("author", str(exc)) from None
    if previous is not None and not points.apply(
        "message-rule", previous.get("author") == author, rule="author"
    ):
        raise FeedError(
            "author",
            f"author {author} differs from the previous message's {previous.get('author')}",
        )

    sequence = _as_integer(msg["sequence"])
    expected_sequence = 1 if previous is None else (_as_integer(previous.get("sequence")) or 0) + 1
    if not points.apply("message-rule", sequence == expected_sequence, rule="sequence"):
        raise FeedError(
            "sequence", f"sequence must be {expected_sequence}, got {msg['sequence']!r}"
        )

    expected_previous = None if previous is None else message_id(previous)
    if not points.apply("message-rule", msg["previous"] == expected_previous, rule="previous"):
        raise FeedError(
            "previous", f"previous must be {expected_previous!r}, got {msg['previous']!r}"
        )

    if not _is_number(msg["timestamp"]):
        raise FeedError("timestamp", f"timestamp must be a number, got {msg['timestamp']!r}")
    if not points.apply("message-rule", msg["hash"] == HASH_NAME, rule="hash"):
        raise FeedError("hash", f"hash must be {HASH_NAME!r}, got {msg['hash']!r}")
    _check_content(msg["content"], points)

    unfaithful = _find_unfaithful_value(msg)
    if unfaithful:
        raise FeedError("format", unfaithful)

    signed_text = canonical_json(msg)
    if _utf16_length(signed_text) > MAX_MESSAGE_LENGTH:
        raise FeedError(
            "size",
            f"canonical JSON is {_utf16_length(signed_text)} UTF-16 code units, over {MAX_MESSAGE_LENGTH}",
        )

    signature = _decode_signature(msg["signature"])
    signature_valid = points.apply(
        "message-rule",
        verify_signature(public, signing_input(msg), signature),
        rule="signature",
        msg=msg,
        public=public,
        signature=signature,
    )
    if not signature_valid:
        unsigned = _unsigned(msg)
        for misformatted in _common_misformattings(unsigned):
            if verify_signature(public, misformatted, signature):
                raise FeedError(
                    "format",
                    "signed over a non-canonical serialisation, not JSON.stringify(msg, null, 2)",
                )
        raise FeedError("signature", "signature does not verify over the canonical JSON")
    return message_id(msg)


def verify_message_text(text: str, previous: dict | None) -> str:
    """Parse a message received as JSON text (e.g. a createHistoryStream body) and verify it."""
    try:
        msg = parse_json(text)
    except ValueError as exc:  # JSONDecodeError and the NaN/Infinity rejection
        raise FeedError("json", f"not JSON: {exc}") from None
    if not isinstance(msg, dict):
        raise FeedError("json", f"a message is a JSON object, got {type(msg).__name__}")
    return verify_message(msg, previous)


def verify_feed(messages: list[dict]) -> list[str]:
    """Verify a whole feed from its first message; returns the message ids."""
    ids = []
    previous = None
    for msg in messages:
        ids.append(verify_message(msg, previous))
        previous = msg
    return ids


class Feed:
    """One author's append-only log.

    With a keypair it can :meth:`append` new messages; without one it holds a
    replica that grows by :meth:`add`, which verifies each received message.
    """

    def __init__(self, keypair: Keypair | None = None) -> None:
        self.keypair = keypair
        self._messages: list[dict] = []
        self._ids: list[str] = []

    @property
    def author(self) -> str | None:
        if self.keypair is not None:
            return self.keypair.feed_id
        return self._messages[0]["author"] if self._messages else None

    @property
    def messages(self) -> list[dict]:
        return list(self._messages)

    @property
    def ids(self) -> list[str]:
        return list(self._ids)

    @property
    def latest(self) -> dict | None:
        return self._messages[-1] if self._messages else None

    def __len__(self) -> int:
        return len(self._messages)

    def get(self, sequence: int) -> dict | None:
        """The message with this sequence number, or None."""
        if 1 <= sequence <= len(self._messages):
            return self._messages[sequence - 1]
        return None

    def append(self, content: dict | str, timestamp: int | float) -> dict:
        """Sign and append a new message; returns it."""
        if self.keypair is None:
            raise ValueError("this feed has no keypair to sign with")
        msg = create_message(
            self.keypair,
            self._ids[-1] if self._ids else None,
            len(self._messages) + 1,
            timestamp,
            content,
        )
        self.add(msg)
        return msg

    def add(self, msg: dict) -> str:
        """Verify ``msg`` as the next message and append it; returns its id."""
        if self.author is not None and msg.get("author") != self.author:
            raise FeedError("author", f"this is the feed of {self.author}, not {msg.get('author')}")
        msg_id = verify_message(msg, self.latest)
        self._messages.append(msg)
        self._ids.append(msg_id)
        return msg_id

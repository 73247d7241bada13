"""Classic SSB feeds: messages verified, one by one and as chains.

Sans-I/O core of "Feeds" and "Message format" in
scuttlebutt-protocol-guide.txt. Messages, their canonical JSON, ids and
signatures are message.py's; this module re-exports them, so that
``reference_impl.ssb.feed`` names everything a feed needs.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
import re
from collections.abc import Iterable
from typing import Any

from ..faults import FaultPoints
from .faults import SPECS as FAULT_SPECS
from .faults import Fault
from .keys import Keypair, feed_id_to_public, verify_signature
from .message import (
    HASH_NAME,
    MESSAGE_ID_PREFIX as MESSAGE_ID_PREFIX,
    MESSAGE_ID_SUFFIX as MESSAGE_ID_SUFFIX,
    SIGNATURE_SUFFIX,
    canonical_json,
    create_message,
    encode_signature as encode_signature,
    js_property_order as js_property_order,
    json_stringify,
    message_id,
    number_to_string as number_to_string,
    parse_json,
    signing_input,
    without_signature,
)

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
        unsigned = without_signature(msg)
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

"""Classic SSB messages as every peer computes them alike: the canonical JSON
(what Node.js's ``JSON.stringify`` prints), message ids and signatures.

Sans-I/O core of "Message format", "Signature" and "Message ID" in
scuttlebutt-protocol-guide.txt. A message is a dict whose key order matters,
exactly as it came off the wire (``json.loads`` keeps key order).

The canonical form is whatever ``JSON.stringify(value, null, 2)`` prints in
Node.js, because that is what ssb-keys signs and ssb-validate checks; where
the guide and Node disagree, Node decides (see :func:`json_stringify`).
feed.py verifies messages and chains with these (and re-exports them).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from decimal import Decimal
from typing import Any

from .keys import Keypair

HASH_NAME = "sha256"
SIGNATURE_SUFFIX = ".sig.ed25519"
MESSAGE_ID_PREFIX = "%"
MESSAGE_ID_SUFFIX = ".sha256"


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


def without_signature(msg: dict) -> dict:
    """The message without its signature: what its author signs."""
    return {key: value for key, value in msg.items() if key != "signature"}


def signing_input(msg: dict) -> bytes:
    """What the author signs: the canonical JSON of ``msg`` minus its signature, UTF-8."""
    return canonical_json(without_signature(msg)).encode("utf-8")


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

"""Classic feeds: canonical JSON as Node prints it, signing, ids, verification."""

from __future__ import annotations

import base64
import hashlib
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ..fuzz_budget import examples

from reference_impl.ssb.feed import (
    FEED_ERROR_REASONS,
    Feed,
    FeedError,
    canonical_json,
    create_message,
    json_stringify,
    message_id,
    number_to_string,
    verify_feed,
    verify_message,
    verify_message_text,
)
from reference_impl.ssb.keys import Keypair

ALICE = Keypair.from_seed(bytes(range(32)))
BOB = Keypair.from_seed(bytes(range(1, 33)))


# --- JSON.stringify ------------------------------------------------------------------


# Outputs of Node 20's JSON.stringify, known from ECMA-262's Number::toString
# and QuoteJSONString.
@pytest.mark.parametrize(
    "value, expected",
    [
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (123456789012345678901.0, "123456789012345680000"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1.0, "1"),
        (-0.0, "0"),
        (0.0, "0"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (1e-6, "0.000001"),
        (0.000123, "0.000123"),
        (-1.5, "-1.5"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (2.5e25, "2.5e+25"),
        (float("nan"), "null"),
        (float("inf"), "null"),
        (float("-inf"), "null"),
        (2**53 + 1, "9007199254740992"),  # JS has doubles only
        (10**400, "null"),  # Infinity as a double
        (True, "true"),
        (None, "null"),
        ("\u2028\u2029", '"\u2028\u2029"'),
        ("é世\U0001f30d", '"é世\U0001f30d"'),
        ("\ud83c\udf0d", '"\U0001f30d"'),  # a surrogate pair given as two code points
        ("\ud800", '"\\ud800"'),
        ("x\udfffy", '"x\\udfffy"'),
        ('"\\/', '"\\"\\\\/"'),
        ("\b\f\n\r\t", '"\\b\\f\\n\\r\\t"'),
        ("\x00\x01\x1f\x7f", '"\\u0000\\u0001\\u001f\x7f"'),
        ({}, "{}"),
        ([], "[]"),
    ],
)
def test_json_stringify_scalars(value, expected):
    assert canonical_json(value) == expected
    if isinstance(value, float) and math.isfinite(value):
        assert number_to_string(value) == expected


def test_indentation():
    value = {"a": [1, {}, []], "b": {"c": None}}
    assert canonical_json(value) == (
        '{\n  "a": [\n    1,\n    {},\n    []\n  ],\n  "b": {\n    "c": null\n  }\n}'
    )
    assert json_stringify(value) == '{"a":[1,{},[]],"b":{"c":null}}'
    assert json_stringify([1], 4) == "[\n    1\n]"


def test_integer_like_keys_come_first_as_in_js_objects():
    value = {"b": 1, "10": 2, "2": 3, "01": 4, "-1": 5, "4294967294": 6, "4294967295": 7, "a": 8}
    assert json_stringify(value) == (
        '{"2":3,"10":2,"4294967294":6,"b":1,"01":4,"-1":5,"4294967295":7,"a":8}'
    )


def test_rejects_what_json_cannot_hold():
    with pytest.raises(TypeError):
        canonical_json({1: "x"})
    with pytest.raises(TypeError):
        canonical_json(b"bytes")


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=examples(150))
@given(json_values)
def test_canonical_json_is_stable_under_a_parse_round_trip(value):
    text = canonical_json(value)
    assert canonical_json(json.loads(text)) == text
    assert json_stringify(json.loads(json_stringify(value))) == json_stringify(value)


# --- messages ----------------------------------------------------------------------


def chain(count: int = 3, keypair: Keypair = ALICE) -> list[dict]:
    feed = Feed(keypair)
    for index in range(count):
        feed.append({"type": "post", "text": f"message {index + 1}"}, 1700000000000 + index)
    return feed.messages


def test_create_message_layout_and_signature():
    msg = create_message(ALICE, None, 1, 1700000000000, {"type": "post", "text": "hi"})
    assert list(msg) == [
        "previous",
        "author",
        "sequence",
        "timestamp",
        "hash",
        "content",
        "signature",
    ]
    assert msg["author"] == ALICE.feed_id and msg["hash"] == "sha256"
    unsigned = canonical_json({key: value for key, value in msg.items() if key != "signature"})
    signature = base64.b64decode(msg["signature"].removesuffix(".sig.ed25519"))
    assert ALICE.sign(unsigned.encode()) == signature
    assert msg["signature"].endswith(".sig.ed25519")


def test_message_id_hashes_ascii_text():
    msg = chain(1)[0]
    digest = hashlib.sha256(canonical_json(msg).encode("ascii")).digest()
    assert message_id(msg) == "%" + base64.b64encode(digest).decode() + ".sha256"


def test_message_id_hashes_the_low_byte_of_each_utf16_code_unit():
    msg = create_message(ALICE, None, 1, 0, {"type": "post", "text": "é世\U0001f30d"})
    text = canonical_json(msg)
    start = text.index("é世\U0001f30d")
    # é = U+00E9 -> e9; 世 = U+4E16 -> 16; U+1F30D = D83C DF0D -> 3c 0d
    expected_bytes = (
        text[:start].encode("ascii") + b"\xe9\x16\x3c\x0d" + text[start + 3 :].encode("ascii")
    )
    digest = hashlib.sha256(expected_bytes).digest()
    assert message_id(msg) == "%" + base64.b64encode(digest).decode() + ".sha256"
    utf8_digest = hashlib.sha256(text.encode("utf-8")).digest()
    assert message_id(msg) != "%" + base64.b64encode(utf8_digest).decode() + ".sha256"
    assert verify_message(msg, None) == message_id(msg)


def test_verify_a_chain():
    messages = chain(3)
    ids = verify_feed(messages)
    assert ids == [message_id(msg) for msg in messages]
    assert messages[1]["previous"] == ids[0] and messages[2]["previous"] == ids[1]
    assert verify_message(messages[2], messages[1]) == ids[2]


def test_legacy_order_sequence_before_author_is_accepted():
    fields = {
        "previous": None,
        "sequence": 1,
        "author": ALICE.feed_id,
        "timestamp": 1,
        "hash": "sha256",
        "content": {"type": "post"},
    }
    msg = dict(
        fields,
        signature=base64.b64encode(ALICE.sign(canonical_json(fields).encode())).decode()
        + ".sig.ed25519",
    )
    assert verify_message(msg, None) == message_id(msg)


def test_integral_float_sequence_is_the_integer():
    msg = json.loads(json.dumps(chain(2)[1]).replace('"sequence": 2', '"sequence": 2.0'))
    assert isinstance(msg["sequence"], float)
    verify_message(msg, chain(1)[0])


def test_verify_message_text_of_compact_rpc_body():
    first, second = chain(2)
    text = json_stringify(second)  # as createHistoryStream sends it
    assert verify_message_text(text, first) == message_id(second)


@pytest.mark.parametrize("text", ["{", "[1]", '"msg"', '{"timestamp": NaN}', '{"a": Infinity}'])
def test_verify_message_text_rejects_non_json(text):
    with pytest.raises(FeedError) as raised:
        verify_message_text(text, None)
    assert raised.value.reason == "json"


def resign(msg: dict, keypair: Keypair = ALICE, **changes) -> dict:
    fields = {key: value for key, value in msg.items() if key != "signature"}
    fields.update(changes)
    signature = keypair.sign(canonical_json(fields).encode())
    return dict(fields, signature=base64.b64encode(signature).decode() + ".sig.ed25519")


def rejected(msg, previous) -> str:
    with pytest.raises(FeedError) as raised:
        verify_message(msg, previous)
    assert raised.value.reason in FEED_ERROR_REASONS
    return raised.value.reason


def test_each_rule_has_its_reason():
    first, second = chain(2)
    assert rejected([1], None) == "fields"
    assert rejected({**second, "extra": 1}, first) == "fields"
    assert rejected(resign(first, author="@abc.ed25519"), None) == "author"
    assert rejected(resign(second, keypair=BOB, author=BOB.feed_id), first) == "author"
    assert rejected(resign(second, sequence=3), first) == "sequence"
    assert rejected(resign(second, sequence=True), first) == "sequence"
    assert rejected(resign(second, previous=None), first) == "previous"
    assert rejected(resign(first, previous=message_id(first)), None) == "previous"
    assert rejected(resign(first, timestamp=None), None) == "timestamp"
    assert rejected(resign(first, timestamp=True), None) == "timestamp"
    assert rejected(resign(first, hash="blake2"), None) == "hash"
    assert rejected(resign(first, content={"type": "x" * 53}), None) == "content"
    assert rejected(resign(first, content={"type": 7}), None) == "content"
    assert rejected(resign(first, content=["type"]), None) == "content"
    assert rejected(resign(first, content="abc.box"), None) == "content"  # not canonical base64
    assert rejected(resign(first, content={"type": "post", "n": float("nan")}), None) == "format"
    assert rejected(resign(first, content={"type": "post", "n": 2**64 + 1}), None) == "format"
    assert rejected(resign(first, content={"type": "post", "t": "x" * 9000}), None) == "size"
    assert rejected({**first, "signature": "abc.sig.ed25519"}, None) == "signature"
    assert rejected({**first, "signature": second["signature"]}, None) == "signature"


def test_content_type_bounds_count_utf16_code_units():
    first = chain(1)[0]
    verify_message(resign(first, content={"type": "abc"}), None)
    verify_message(resign(first, content={"type": "x" * 52}), None)
    verify_message(resign(first, content={"type": "\U0001f30d\U0001f30d"}), None)
    assert rejected(resign(first, content={"type": "ab"}), None) == "content"
    assert rejected(resign(first, content={"type": "\U0001f30d" * 27}), None) == "content"


def test_encrypted_content():
    box = base64.b64encode(bytes(40)).decode() + ".box"
    verify_message(resign(chain(1)[0], content=box), None)
    verify_message(resign(chain(1)[0], content=box + "2"), None)  # newer box versions


@pytest.mark.parametrize(
    "serialise",
    [
        lambda fields: json_stringify(fields),
        lambda fields: json_stringify(fields, 4),
        lambda fields: json.dumps(fields, indent=2),
    ],
)
def test_signature_over_a_non_canonical_form_is_named_format(serialise):
    first = create_message(ALICE, None, 1, 1.0, {"type": "post", "text": "é"})
    fields = {key: value for key, value in first.items() if key != "signature"}
    bad = dict(
        fields,
        signature=base64.b64encode(ALICE.sign(serialise(fields).encode())).decode()
        + ".sig.ed25519",
    )
    assert rejected(bad, None) == "format"


def test_guide_example_messages():
    author = "@FCX/tsDLpubCPKKfIrw4gc+SQkHcaD17s7GI6i/ziWY=.ed25519"
    first = {
        "previous": None,
        "author": author,
        "sequence": 1,
        "timestamp": 1514517067954,
        "hash": "sha256",
        "content": {"type": "post", "text": "This is the first post!"},
        "signature": "QYOR/zU9dxE1aKBaxc3C0DJ4gRyZtlMfPLt+CGJcY73sv5abKKKxr1SqhOvnm8TY784VHE8kZHCD8RdzFl1tBA=="
        ".sig.ed25519",
    }
    assert verify_message(first, None) == "%XphMUkWQtomKjXQvFGfsGYpt69sgEY7Y4Vou9cEuJho=.sha256"


# --- Feed --------------------------------------------------------------------------


def test_feed_append_and_lookup():
    feed = Feed(ALICE)
    assert feed.latest is None and feed.author == ALICE.feed_id
    first = feed.append({"type": "post", "text": "one"}, 1)
    second = feed.append({"type": "post", "text": "two"}, 2)
    assert feed.messages == [first, second] and len(feed) == 2
    assert feed.latest is second
    assert feed.get(1) is first and feed.get(2) is second
    assert feed.get(0) is None and feed.get(3) is None
    assert feed.ids == [message_id(first), message_id(second)]
    assert second["previous"] == message_id(first) and second["sequence"] == 2


def test_replica_feed_verifies_what_it_adds():
    messages = chain(3)
    replica = Feed()
    with pytest.raises(ValueError):
        replica.append({"type": "post"}, 1)
    replica.add(messages[0])
    with pytest.raises(FeedError):
        replica.add(messages[2])
    replica.add(messages[1])
    with pytest.raises(FeedError) as raised:
        replica.add(chain(3, BOB)[2])
    assert raised.value.reason == "author"
    assert replica.ids == verify_feed(messages[:2])
    with pytest.raises(FeedError):
        Feed(BOB).add(messages[0])

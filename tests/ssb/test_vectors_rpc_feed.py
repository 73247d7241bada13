"""The reference implementation against vectors/ssb/rpc.json and feed.json."""

from __future__ import annotations

import base64
import importlib.util
import json
from pathlib import Path

import pytest

from reference_impl.ssb.feed import (
    FEED_ERROR_REASONS,
    FeedError,
    canonical_json,
    message_id,
    verify_message,
    verify_message_text,
)
from reference_impl.ssb.keys import Keypair
from reference_impl.ssb.rpc import GOODBYE, BodyType, RpcDecoder, RpcError, RpcMessage

REPO_ROOT = Path(__file__).resolve().parents[2]
VECTORS_DIR = REPO_ROOT / "vectors" / "ssb"
GENERATOR_PATH = REPO_ROOT / "scripts" / "gen_ssb_vectors_rpc_feed.py"

RPC = json.loads((VECTORS_DIR / "rpc.json").read_text(encoding="utf-8"))
FEED = json.loads((VECTORS_DIR / "feed.json").read_text(encoding="utf-8"))

PACKETS = [vector for vector in RPC["vectors"] if not vector.get("goodbye")]
[GOODBYE_VECTOR] = [vector for vector in RPC["vectors"] if vector.get("goodbye")]


def by_id(cases: list[dict]) -> dict:
    return {"argvalues": cases, "ids": [case["id"] for case in cases]}


def test_generator_reproduces_the_committed_files():
    spec = importlib.util.spec_from_file_location("gen_ssb_vectors_rpc_feed", GENERATOR_PATH)
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert generator.render(generator.rpc_document()) == (VECTORS_DIR / "rpc.json").read_text()
    assert generator.render(generator.feed_document()) == (VECTORS_DIR / "feed.json").read_text()


# --- rpc.json ----------------------------------------------------------------------


def test_rpc_file_header_and_coverage():
    assert (RPC["protocol"], RPC["component"]) == ("ssb", "rpc")
    reqs = {vector["req"] for vector in PACKETS}
    assert {1, -1, 2, -2, 2**31 - 1, -(2**31 - 1), -(2**31)} <= reqs
    assert {vector["body_type"] for vector in PACKETS} == {"binary", "string", "json"}
    assert any(vector["body_hex"] == "" for vector in PACKETS)
    assert any(vector["end"] and vector.get("body_json") is True for vector in PACKETS)
    assert {case["reason"] for case in RPC["invalid"]} == {
        "unknown body type",
        "truncated packet",
        "body length exceeds limit",
        "invalid JSON body",
    }


def message_of(vector: dict) -> RpcMessage:
    return RpcMessage(
        vector["req"],
        vector["stream"],
        vector["end"],
        BodyType[vector["body_type"].upper()],
        bytes.fromhex(vector["body_hex"]),
    )


@pytest.mark.parametrize("vector", **by_id(PACKETS))
def test_rpc_vector_encodes(vector):
    msg = message_of(vector)
    assert msg.encode().hex() == vector["wire"]
    if "body_json" in vector:
        assert msg.json() == vector["body_json"]
        rebuilt = RpcMessage.from_json(
            vector["req"], vector["body_json"], stream=vector["stream"], end=vector["end"]
        )
        assert rebuilt.encode().hex() == vector["wire"]


@pytest.mark.parametrize("vector", **by_id(PACKETS))
def test_rpc_vector_decodes_whole_and_byte_by_byte(vector):
    wire = bytes.fromhex(vector["wire"])
    assert RpcDecoder().receive_data(wire) == [message_of(vector)]
    decoder = RpcDecoder()
    decoded = [msg for byte in wire for msg in decoder.receive_data(bytes([byte]))]
    assert decoded == [message_of(vector)]
    decoder.end_of_data()
    assert not decoder.ended


def test_rpc_goodbye_vector():
    wire = bytes.fromhex(GOODBYE_VECTOR["wire"])
    assert wire == GOODBYE
    decoder = RpcDecoder()
    assert decoder.receive_data(wire) == []
    assert decoder.ended


def test_rpc_vectors_back_to_back():
    wire = b"".join(bytes.fromhex(vector["wire"]) for vector in PACKETS) + GOODBYE
    decoder = RpcDecoder()
    decoded = []
    for start in range(0, len(wire), 7):
        decoded += decoder.receive_data(wire[start : start + 7])
    assert decoded == [message_of(vector) for vector in PACKETS]
    assert decoder.ended


@pytest.mark.parametrize("case", **by_id(RPC["invalid"]))
def test_rpc_invalid(case):
    decoder = RpcDecoder(max_body=RPC["max_body"])
    with pytest.raises(RpcError) as raised:
        for msg in decoder.receive_data(bytes.fromhex(case["wire"])):
            msg.json()
        decoder.end_of_data()
    assert raised.value.reason == case["reason"]


# --- feed.json ----------------------------------------------------------------------


def test_feed_file_header_and_coverage():
    assert (FEED["protocol"], FEED["component"]) == ("ssb", "feed")
    seeded = [vector for vector in FEED["valid"] if "author_seed" in vector]
    assert len(seeded) >= 3
    assert {vector["message_id"] for vector in FEED["valid"]} >= {
        "%XphMUkWQtomKjXQvFGfsGYpt69sgEY7Y4Vou9cEuJho=.sha256",
        "%R7lJEkz27lNijPhYNDzYoPjM0Fp+bFWzwX0SmNJB/ZE=.sha256",
    }
    assert any(not canonical_json(vector["message"]).isascii() for vector in FEED["valid"])
    reasons = {case["reason"] for case in FEED["invalid"]}
    assert reasons <= FEED_ERROR_REASONS
    assert reasons >= {"signature", "previous", "sequence", "hash", "fields", "format", "content"}


def previous_valid_message(index: int) -> dict | None:
    """The message a valid vector follows: the one before it by the same author."""
    msg = FEED["valid"][index]["message"]
    if msg["sequence"] == 1:
        return None
    earlier = [
        vector["message"]
        for vector in FEED["valid"][:index]
        if vector["message"]["author"] == msg["author"]
    ]
    return earlier[-1]


@pytest.mark.parametrize("index", range(len(FEED["valid"])), ids=[v["id"] for v in FEED["valid"]])
def test_feed_valid(index):
    vector = FEED["valid"][index]
    msg = vector["message"]
    unsigned = {key: value for key, value in msg.items() if key != "signature"}
    assert canonical_json(unsigned) == vector["canonical"]
    assert canonical_json(msg) == vector["signed_canonical"]
    assert message_id(msg) == vector["message_id"]
    assert verify_message(msg, previous_valid_message(index)) == vector["message_id"]
    # Ed25519 is deterministic: the seed's key reproduces the signature.
    if "author_seed" in vector:
        keypair = Keypair.from_seed(bytes.fromhex(vector["author_seed"]))
        assert keypair.feed_id == msg["author"]
        signature = keypair.sign(vector["canonical"].encode("utf-8"))
        assert msg["signature"] == base64.b64encode(signature).decode() + ".sig.ed25519"
    if "message_id_hashing_utf8" in vector:
        assert vector["message_id_hashing_utf8"] != vector["message_id"]


@pytest.mark.parametrize("case", **by_id(FEED["invalid"]))
def test_feed_invalid(case):
    with pytest.raises(FeedError) as raised:
        if isinstance(case["message"], str):
            verify_message_text(case["message"], case["previous"])
        else:
            verify_message(case["message"], case["previous"])
    assert raised.value.reason == case["reason"]


@pytest.mark.parametrize(
    "case", **by_id([case for case in FEED["invalid"] if isinstance(case["message"], dict)])
)
def test_feed_invalid_as_received_text(case):
    # The same messages arriving as JSON text (a createHistoryStream body)
    # fail for the same reason. Python's json.dumps keeps big integers exact.
    text = json.dumps(case["message"], separators=(",", ":"))
    with pytest.raises(FeedError) as raised:
        verify_message_text(text, case["previous"])
    assert raised.value.reason == case["reason"]

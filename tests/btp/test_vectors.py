"""The reference codec against vectors/btp/packets.json and malformed.json,
both ways, and the generator still reproduces the committed files."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from reference_impl.btp.oer import DECODE_REASONS
from reference_impl.btp.packet import (
    BtpDecodeError,
    PacketType,
    decode_packet,
    encode_packet,
    envelope_end,
    packet_from_json,
    packet_to_json,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
VECTORS_DIR = REPO_ROOT / "vectors" / "btp"
GENERATOR_PATH = REPO_ROOT / "scripts" / "gen_btp_vectors.py"

PACKETS = json.loads((VECTORS_DIR / "packets.json").read_text(encoding="utf-8"))
MALFORMED = json.loads((VECTORS_DIR / "malformed.json").read_text(encoding="utf-8"))
VALID = PACKETS["vectors"]
INVALID = MALFORMED["malformed"]


def by_id(cases: list[dict]) -> dict:
    return {"argvalues": cases, "ids": [case["id"] for case in cases]}


def test_generator_reproduces_the_committed_files():
    spec = importlib.util.spec_from_file_location("gen_btp_vectors", GENERATOR_PATH)
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert (
        generator.render(generator.packets_document()) == (VECTORS_DIR / "packets.json").read_text()
    )
    assert (
        generator.render(generator.malformed_document())
        == (VECTORS_DIR / "malformed.json").read_text()
    )


# --------------------------------------------------------------------------- packets.json


@pytest.mark.parametrize("vector", **by_id(VALID))
def test_valid_vector_decodes_to_its_fields(vector):
    packet = decode_packet(bytes.fromhex(vector["hex"]))
    assert packet_to_json(packet) == vector["packet"]
    assert packet == packet_from_json(vector["packet"])


@pytest.mark.parametrize("vector", **by_id(VALID))
def test_valid_vector_fields_encode_to_its_bytes(vector):
    wire = encode_packet(packet_from_json(vector["packet"])).hex()
    if vector["canonical"]:
        assert wire == vector["hex"] and "canonical_hex" not in vector
    else:
        assert wire == vector["canonical_hex"] != vector["hex"]


def test_valid_vectors_cover_the_brief():
    packets = [v["packet"] for v in VALID]
    assert {p["type_id"] for p in packets} == set(PacketType)
    hexes = {v["id"]: bytes.fromhex(v["hex"]) for v in VALID}
    envelope_prefixes = {
        wire[5 : 5 + (1 if wire[5] < 128 else 1 + (wire[5] & 0x7F))].hex()
        for wire in hexes.values()
    }
    assert {"7f", "8180", "81ff", "820100", "82ffff", "83010000"} <= envelope_prefixes
    assert {"0", str(2**64 - 1)} <= {p["amount"] for p in packets if p["type_id"] == 7}
    assert {0, 2**32 - 1} <= {p["request_id"] for p in packets}
    counts = {len(p["protocol_data"]) for p in packets}
    assert {0, 1, 255, 256, 300} <= counts and max(counts) >= 300
    assert {e["content_type"] for p in packets for e in p["protocol_data"]} >= {0, 1, 2, 3, 255}
    error_data = {len(p["data_hex"]) // 2 for p in packets if p["type_id"] == 2}
    assert {0, 8192} <= error_data
    assert any(not v["canonical"] for v in VALID)
    assert len({v["id"] for v in VALID}) == len(VALID)


# --------------------------------------------------------------------------- malformed.json


@pytest.mark.parametrize("vector", **by_id(INVALID))
def test_malformed_vector_is_rejected_with_its_reason(vector):
    with pytest.raises(BtpDecodeError) as info:
        decode_packet(bytes.fromhex(vector["hex"]))
    assert (info.value.reason, info.value.offset) == (vector["reason"], vector["offset"])


def test_malformed_vectors_cover_every_reason():
    assert {v["reason"] for v in INVALID} == DECODE_REASONS == set(MALFORMED["reasons"])
    ids = {v["id"] for v in INVALID}
    assert len(ids) == len(INVALID)
    assert {"type-0", "type-8", "type-255", "empty"} <= ids
    assert sum(v["reason"] in ("truncated", "length prefix beyond end") for v in INVALID) >= 8


def test_bytes_after_the_envelope_are_valid_vectors():
    """Erratum BTP-E3: packets with bytes after the envelope are valid, not
    canonical, and decode to what their envelope holds."""
    after = [v for v in VALID if v["id"].endswith("-after-envelope")]
    assert len(after) == 3
    for vector in after:
        wire = bytes.fromhex(vector["hex"])
        assert vector["canonical"] is False and "js_divergence" not in vector
        assert envelope_end(wire) < len(wire)
        assert encode_packet(decode_packet(wire)) == wire[: envelope_end(wire)]
        assert vector["canonical_hex"] == wire[: envelope_end(wire)].hex()


def test_js_divergences_are_documented_in_words():
    for vector in VALID + INVALID:
        if "js_divergence" in vector:
            assert (
                isinstance(vector["js_divergence"], str) and "btp-packet" in vector["js_divergence"]
            )

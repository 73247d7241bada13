"""The reference RIPP codecs against vectors/ripp/*.json, both ways, and the
generator still reproduces the committed files."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from reference_impl.ripp import binprot as bp
from reference_impl.ripp.envelope import (
    EnvelopeError,
    EnvelopeReader,
    crc32c,
    decode_envelope,
    encode_envelope,
)
from reference_impl.ripp.payloads import (
    PayloadError,
    decode_delta,
    decode_payload,
    fingerprint,
    schema_from_json,
    type_by_name,
)
from reference_impl.ripp.schema import check_backward
from reference_impl.ripp.session import state_digest

REPO_ROOT = Path(__file__).resolve().parents[2]
VECTORS_DIR = REPO_ROOT / "vectors" / "ripp"
GENERATOR = REPO_ROOT / "scripts" / "gen_ripp_vectors.py"

ENVELOPES = json.loads((VECTORS_DIR / "envelopes.json").read_text())
BINPROT = json.loads((VECTORS_DIR / "binprot.json").read_text())
PAYLOADS = json.loads((VECTORS_DIR / "payloads.json").read_text())


def by_id(cases):
    return {"argvalues": cases, "ids": [c["id"] for c in cases]}


def test_generator_reproduces_the_committed_files():
    spec = importlib.util.spec_from_file_location("gen_ripp_vectors", GENERATOR)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.render(gen.envelopes_document()) == (VECTORS_DIR / "envelopes.json").read_text()
    assert gen.render(gen.binprot_document()) == (VECTORS_DIR / "binprot.json").read_text()
    assert gen.render(gen.payloads_document()) == (VECTORS_DIR / "payloads.json").read_text()


@pytest.mark.parametrize("case", **by_id(ENVELOPES["crc32c"]))
def test_crc32c(case):
    assert crc32c(bytes.fromhex(case["data_hex"])) == int(case["crc32c"], 16)


@pytest.mark.parametrize("case", **by_id(ENVELOPES["valid"]))
def test_valid_envelope(case):
    data = bytes.fromhex(case["hex"])
    env = decode_envelope(data)
    f = case["envelope"]
    assert (env.version, env.msg_type, env.flags, str(env.sequence), str(env.timestamp_ns)) == (
        f["version"],
        f["msg_type"],
        f["flags"],
        f["sequence"],
        f["timestamp_ns"],
    )
    assert env.fingerprint.hex() == f["fingerprint_hex"] and env.payload.hex() == f["payload_hex"]
    assert encode_envelope(env) == data
    assert data[-4:][::-1].hex() == case["crc32c"]
    if case["payload_type"]:
        decode_payload(env.msg_type, env.payload)


@pytest.mark.parametrize("case", **by_id(ENVELOPES["invalid"]))
def test_invalid_envelope(case):
    with pytest.raises(EnvelopeError) as info:
        decode_envelope(bytes.fromhex(case["hex"]))
    assert info.value.check == case["check"]


@pytest.mark.parametrize("case", **by_id(ENVELOPES["streams"]))
def test_stream(case):
    r = EnvelopeReader(case["max_payload"])
    got, failed = 0, None
    for chunk in case["chunks_hex"]:
        try:
            got += len(r.receive_data(bytes.fromhex(chunk)))
        except EnvelopeError as exc:
            got += len(exc.decoded)
            failed = exc.check
            break
    assert (got, failed) == (case["envelopes"], case["error_check"])


@pytest.mark.parametrize("case", **by_id(BINPROT["valid"]))
def test_binprot_valid(case):
    t = type_by_name(case["type"])
    data = bytes.fromhex(case["hex"])
    value = bp.decode(t, data)
    assert t.to_json(value) == case["value"]
    assert t.from_json(case["value"]) == value or case["type"] == "float"
    expected = case["hex"] if case["canonical"] else case["canonical_hex"]
    assert bp.encode(t, t.from_json(case["value"])).hex() == expected


@pytest.mark.parametrize("case", **by_id(BINPROT["invalid"]))
def test_binprot_invalid(case):
    with pytest.raises(bp.BinProtError) as info:
        bp.decode(type_by_name(case["type"]), bytes.fromhex(case["hex"]))
    assert (info.value.reason, info.value.offset) == (case["reason"], case["offset"])


@pytest.mark.parametrize("case", **by_id(PAYLOADS["messages"] + PAYLOADS["values"]))
def test_payload_valid(case):
    t = type_by_name(case["type"])
    data = bytes.fromhex(case["hex"])
    if "msg_type" in case:
        value = decode_payload(case["msg_type"], data)
    else:
        value = bp.decode(t, data)
    assert t.to_json(value) == case["value"]
    assert bp.encode(t, t.from_json(case["value"])) == data


@pytest.mark.parametrize("case", **by_id(PAYLOADS["invalid"]))
def test_payload_invalid(case):
    with pytest.raises(PayloadError):
        if "msg_type" in case:
            decode_payload(case["msg_type"], bytes.fromhex(case["hex"]))
        else:
            decode_delta(bytes.fromhex(case["hex"]))


@pytest.mark.parametrize("case", **by_id(PAYLOADS["schemas"]))
def test_schema_fingerprint(case):
    s = schema_from_json(case["schema"])
    assert bp.encode(type_by_name("Schema.t"), s).hex() == case["schema_hex"]
    assert fingerprint(s).decode() == case["fingerprint"]


@pytest.mark.parametrize("case", **by_id(PAYLOADS["check_backward"]))
def test_check_backward(case):
    assert (
        check_backward(schema_from_json(case["reader"]), schema_from_json(case["writer"]))
        == case["errors"]
    )


@pytest.mark.parametrize("case", **by_id(PAYLOADS["state_digests"]))
def test_state_digest(case):
    entries = {
        bytes.fromhex(k): {bytes.fromhex(f): bytes.fromhex(v) for f, v in fields}
        for k, fields in case["entries"]
    }
    assert state_digest(entries).hex() == case["digest"]

"""The bounded bin_prot reader/writer (reference_impl/ripp/binprot.py) against
the facts in the specs README and bin_prot's read.ml/write.ml behaviour."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ..fuzz_budget import examples

from reference_impl.ripp import binprot as bp
from reference_impl.ripp.payloads import (
    DELTA_T,
    PAYLOAD_TYPES,
    SCHEMA_T,
    FieldType,
    PayloadError,
    decode_payload,
    type_by_name,
)


@pytest.mark.parametrize(
    "value, hexstr",
    [
        (0, "00"),
        (0x7F, "7f"),
        (0x80, "fe8000"),
        (0x7FFF, "feff7f"),
        (0x8000, "fd00800000"),
        ((1 << 31) - 1, "fdffffff7f"),
        (1 << 31, "fc0000008000000000"),
        (bp.OCAML_INT_MAX, "fcffffffffffffff3f"),
        (-1, "ffff"),
        (-128, "ff80"),
        (-129, "fe7fff"),
        (-0x8000, "fe0080"),
        (-0x8001, "fdff7fffff"),
        (-(1 << 31), "fd00000080"),
        (-(1 << 31) - 1, "fcffffff7fffffffff"),
    ],
)
def test_int_classes(value, hexstr):
    assert bp.encode(bp.INT, value).hex() == hexstr
    assert bp.decode(bp.INT, bytes.fromhex(hexstr)) == value
    assert bp.decode(bp.INT64, bytes.fromhex(hexstr)) == value


@pytest.mark.parametrize(
    "value, hexstr",
    [
        (0, "00"),
        (0x7F, "7f"),
        (0x80, "fe8000"),
        (0xFFFF, "feffff"),
        (0x10000, "fd00000100"),
        (0xFFFFFFFF, "fdffffffff"),
        (1 << 32, "fc0000000001000000"),
    ],
)
def test_nat0_classes(value, hexstr):
    assert bp.encode(bp.NAT0, value).hex() == hexstr
    assert bp.decode(bp.NAT0, bytes.fromhex(hexstr)) == value


def test_int64_extremes_and_int_range():
    assert bp.encode(bp.INT64, bp.INT64_MAX).hex() == "fcffffffffffffff7f"
    assert bp.encode(bp.INT64, bp.INT64_MIN).hex() == "fc0000000000000080"
    with pytest.raises(bp.BinProtError) as info:
        bp.decode(bp.INT, bytes.fromhex("fcffffffffffffff7f"))
    assert info.value.reason == "Int_overflow"
    with pytest.raises(ValueError):
        bp.encode(bp.INT, 1 << 62)
    with pytest.raises(ValueError):
        bp.encode(bp.INT64, 1 << 63)


def test_strings_lists_options_floats_bools():
    assert bp.encode(bp.BYTES, b"").hex() == "00"
    assert bp.encode(bp.BYTES, b"y" * 128)[:3].hex() == "fe8000"
    assert bp.encode(bp.List(bp.INT), []).hex() == "00"
    assert bp.encode(bp.Option(bp.INT), None).hex() == "00"
    assert bp.encode(bp.Option(bp.INT), 0).hex() == "0100"
    assert bp.encode(bp.FLOAT, 1.0).hex() == "000000000000f03f"
    assert bp.encode(bp.BOOL, True).hex() == "01"
    assert bp.encode(bp.Tuple(bp.BYTES, bp.INT), (b"k", 300)).hex() == "016bfe2c01"
    assert math.isnan(bp.decode(bp.FLOAT, bytes.fromhex("000000000000f87f")))


@pytest.mark.parametrize(
    "type_name, hexstr, reason",
    [
        ("int", "ff05", "Neg_int8"),
        ("int", "80", "Int_code"),
        ("nat0", "ff", "Nat0_code"),
        ("nat0", "fc0000000000000040", "Nat0_overflow"),
        ("bool", "02", "Bool_code"),
        ("int option", "02", "Option_code"),
        ("string", "05616263", "Buffer_short"),
        ("string", "fcffffffffffffff3f", "String_too_long"),
        ("int list", "fcffffffffffffff3f", "Buffer_short"),
        ("int", "0000", "Trailing"),
        ("Delta.t", "03", "Sum_tag"),
    ],
)
def test_refusals(type_name, hexstr, reason):
    with pytest.raises(bp.BinProtError) as info:
        bp.decode(type_by_name(type_name), bytes.fromhex(hexstr))
    assert info.value.reason == reason


def test_non_minimal_forms_are_read_like_bin_prot():
    assert bp.decode(bp.INT, bytes.fromhex("fe0500")) == 5
    assert bp.decode(bp.NAT0, bytes.fromhex("fd05000000")) == 5


def test_recursive_variant_depth_is_bounded():
    ok = "05" * bp.MAX_DEPTH + "00"
    assert (
        str(bp.decode(type_by_name("Schema.field_type"), bytes.fromhex(ok))).count("option")
        == bp.MAX_DEPTH
    )
    with pytest.raises(bp.BinProtError) as info:
        bp.decode(
            type_by_name("Schema.field_type"), bytes.fromhex("05" * (bp.MAX_DEPTH + 1) + "00")
        )
    assert info.value.reason == "Nesting"
    # deeper than Python's own recursion limit: still a clean error
    with pytest.raises(bp.BinProtError):
        bp.decode(type_by_name("Schema.field_type"), b"\x05" * 100_000 + b"\x00")


def test_field_type_syntax_roundtrip():
    for text in ("int", "int64 option", "string list option", "bool list list"):
        assert str(FieldType.parse(text)) == text


# --- hypothesis -----------------------------------------------------------

FUZZ = settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

ints = st.integers(bp.OCAML_INT_MIN, bp.OCAML_INT_MAX)
int64s = st.integers(bp.INT64_MIN, bp.INT64_MAX)


@FUZZ
@given(
    st.lists(
        st.tuples(
            ints,
            int64s,
            st.binary(max_size=300),
            st.none() | ints,
            st.floats(allow_nan=False),
            st.booleans(),
        ),
        max_size=5,
    )
)
def test_roundtrip_generated_values(values):
    t = bp.List(bp.Tuple(bp.INT, bp.INT64, bp.BYTES, bp.Option(bp.INT), bp.FLOAT, bp.BOOL))
    data = bp.encode(t, values)
    assert bp.decode(t, data) == [tuple(v) for v in values]


@FUZZ
@given(st.sampled_from(sorted(PAYLOAD_TYPES)), st.binary(max_size=200))
def test_any_bytes_decode_cleanly_as_every_payload(msg_type, data):
    try:
        msg = decode_payload(msg_type, data)
    except PayloadError:
        return
    # whatever decodes re-encodes to a value that decodes the same
    t = PAYLOAD_TYPES[msg_type]
    assert bp.decode(t, bp.encode(t, msg)) == msg


@FUZZ
@given(st.binary(max_size=64))
def test_any_bytes_as_delta_and_schema(data):
    for t in (DELTA_T, SCHEMA_T):
        try:
            bp.decode(t, data)
        except bp.BinProtError:
            pass


@FUZZ
@given(
    st.integers(0, bp.OCAML_INT_MAX),
    st.sampled_from(["string", "int list", "string list", "Schema.t"]),
)
def test_claimed_lengths_never_allocate(claim, type_name):
    out = bytearray()
    bp.write_nat0(out, claim)
    try:
        bp.decode(type_by_name(type_name), bytes(out) + b"\x00" * 3)
    except bp.BinProtError:
        pass


def test_memory_is_bounded_whatever_a_length_claims():
    import tracemalloc

    claims = [bp.OCAML_INT_MAX, (1 << 57) - 9, 1 << 32, 0xFFFFFFFF, 0xFFFF]
    tracemalloc.start()
    try:
        for claim in claims:
            out = bytearray()
            bp.write_nat0(out, claim)
            for name in (
                "string",
                "int list",
                "string list list",
                "Handshake.t",
                "Checkpoint_ack.t",
            ):
                try:
                    bp.decode(type_by_name(name), bytes(out) + b"\x01" * 16)
                except bp.BinProtError:
                    pass
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, peak

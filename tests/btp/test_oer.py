"""The CANONICAL-OER primitives of reference_impl/btp/oer.py against the
examples and rules of oer-notes-rfc0030.md."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ..fuzz_budget import examples

from reference_impl.btp.oer import (
    BtpDecodeError,
    Reader,
    check_generalized_time,
    decode_ia5,
    decode_length,
    decode_uint,
    decode_var_octets,
    decode_var_uint,
    encode_ia5,
    encode_length,
    encode_uint,
    encode_var_octets,
    encode_var_uint,
    generalized_time,
    is_generalized_time,
    parse_generalized_time,
)


def reason_of(fn, *args) -> tuple[str, int | None]:
    with pytest.raises(BtpDecodeError) as info:
        fn(*args)
    return info.value.reason, info.value.offset


# --------------------------------------------------------------------------- length determinant

RFC30_LENGTHS = [
    ("07", 7),
    ("8182", 130),
    ("821234", 4660),
    ("83abcdef", 11259375),
    ("88ac01055a1debac1e", 12394193534107495454),
]


@pytest.mark.parametrize("encoded, value", RFC30_LENGTHS)
def test_length_determinant_examples_of_rfc30(encoded, value):
    assert encode_length(value) == bytes.fromhex(encoded)
    data = bytes.fromhex(encoded)
    assert decode_length(data, 0, len(data)) == (value, len(data))


@pytest.mark.parametrize(
    "value, encoded",
    [
        (0, "00"),
        (127, "7f"),
        (128, "8180"),
        (255, "81ff"),
        (256, "820100"),
        (65535, "82ffff"),
        (65536, "83010000"),
        (2**64 - 1, "88" + "ff" * 8),
    ],
)
def test_length_boundaries(value, encoded):
    assert encode_length(value).hex() == encoded


@pytest.mark.parametrize(
    "encoded, reason",
    [
        ("8105", "non-canonical length"),  # short form must be used below 128
        ("817f", "non-canonical length"),
        ("820080", "non-canonical length"),  # leading zero
        ("83000100", "non-canonical length"),
        ("80", "non-canonical length"),  # length-of-length 0
        ("82ff", "truncated"),  # the long form's bytes are missing
        ("", "truncated"),
        ("89010000000000000000", "length prefix beyond end"),  # >= 2**64
    ],
)
def test_length_determinant_rejections(encoded, reason):
    data = bytes.fromhex(encoded)
    assert reason_of(decode_length, data, 0, len(data)) == (reason, 0)


def test_length_encoder_limits():
    with pytest.raises(ValueError):
        encode_length(-1)
    with pytest.raises(ValueError):
        encode_length(2**64)


@given(st.integers(min_value=0, max_value=2**64 - 1))
@settings(max_examples=examples(200))
def test_length_round_trip_is_canonical(value):
    encoded = encode_length(value)
    assert decode_length(encoded + b"junk", 0, len(encoded)) == (value, len(encoded))
    assert (len(encoded) == 1) == (value < 128)
    if value >= 128:
        assert encoded[1] != 0 and len(encoded) - 1 == (value.bit_length() + 7) // 8


# --------------------------------------------------------------------------- integers


@pytest.mark.parametrize(
    "encoded, size, value",
    [
        ("00", 1, 0),
        ("1234", 2, 4660),
        ("abababab", 4, 2880154539),
        ("ac01055a1debac1e", 8, 12394193534107495454),
    ],
)
def test_fixed_uint_examples_of_rfc30(encoded, size, value):
    assert encode_uint(value, size).hex() == encoded
    data = bytes.fromhex(encoded)
    assert decode_uint(data, 0, len(data), size) == (value, size)


def test_fixed_uint_limits():
    with pytest.raises(ValueError):
        encode_uint(2**64, 8)
    with pytest.raises(ValueError):
        encode_uint(-1, 4)
    assert reason_of(decode_uint, b"\x00" * 7, 0, 7, 8) == ("truncated", 0)


@pytest.mark.parametrize(
    "value, encoded",
    [
        (0, "0100"),
        (1, "0101"),
        (255, "01ff"),
        (256, "020100"),
        (65535, "02ffff"),
        (65536, "03010000"),
        (2**64 - 1, "08" + "ff" * 8),
    ],
)
def test_var_uint_canonical_forms(value, encoded):
    assert encode_var_uint(value).hex() == encoded
    data = bytes.fromhex(encoded)
    assert decode_var_uint(data, 0, len(data)) == (value, len(data))


@pytest.mark.parametrize(
    "encoded, reason",
    [
        ("00", "empty integer"),
        ("020001", "non-canonical integer"),
        ("020000", "non-canonical integer"),
        ("0201", "length prefix beyond end"),
        ("8101ff", "non-canonical length"),
        ("", "truncated"),
    ],
)
def test_var_uint_rejections(encoded, reason):
    data = bytes.fromhex(encoded)
    assert reason_of(decode_var_uint, data, 0, len(data))[0] == reason


@given(st.integers(min_value=0, max_value=2**200))
def test_var_uint_round_trip(value):
    encoded = encode_var_uint(value)
    assert decode_var_uint(encoded, 0, len(encoded)) == (value, len(encoded))


# --------------------------------------------------------------------------- strings


def test_var_octets_and_bounds():
    assert encode_var_octets(b"abc") == b"\x03abc"
    assert decode_var_octets(b"\x03abcX", 0, 4) == (b"abc", 4)
    # The window's end, not the buffer's, bounds the length.
    assert reason_of(decode_var_octets, b"\x03abcX", 0, 3) == ("length prefix beyond end", 0)
    big = encode_length(200) + bytes(200)
    assert decode_var_octets(big, 0, len(big)) == (bytes(200), len(big))


def test_untrusted_length_is_not_allocated():
    # A length of 2**56 in front of 3 bytes is rejected before anything is sliced.
    data = b"\x87\x01" + b"\x00" * 6 + b"abc"
    assert reason_of(decode_var_octets, data, 0, len(data)) == ("length prefix beyond end", 0)


def test_ia5():
    assert encode_ia5("auth") == b"\x04auth"
    assert encode_ia5("tab\t\x00") == b"\x05tab\t\x00"  # IA5 is 0..127, controls included
    with pytest.raises(ValueError):
        encode_ia5("caf\u00e9")
    assert decode_ia5(b"\x04auth", 0, 5) == ("auth", 5)
    assert reason_of(decode_ia5, b"\x05pr\xf6be", 0, 6) == ("non-IA5 character", 3)


# --------------------------------------------------------------------------- GeneralizedTime

RFC30_VALID = [
    "20171224161432.279Z",
    "20171224161432.27Z",
    "20171224161432.2Z",
    "20171224161432Z",
    "20161231235960.852Z",
    "20171225000000Z",
    "99991224161432.279Z",
]
RFC30_INVALID = [
    "20171224235312.431+0200",
    "20171224215312.4318Z",
    "20171224161432,279Z",
    "20171324161432.279Z",
    "20171224230000.20Z",
    "20171224230000.Z",
    "20171224240000Z",
    "2017122421531Z",
    "201712242153Z",
    "2017122421Z",
]


@pytest.mark.parametrize("text", RFC30_VALID)
def test_generalized_time_rfc30_valid_examples(text):
    assert check_generalized_time(text) is None


@pytest.mark.parametrize("text", RFC30_INVALID)
def test_generalized_time_rfc30_invalid_examples(text):
    assert check_generalized_time(text) is not None


@pytest.mark.parametrize(
    "text",
    [
        "20171115140000.000Z",
        "20171224161432.270Z",
        "20171224161432.200Z",
        "20160229000000.000Z",
        "20001231235959.999Z",
        "00010101000000Z",
    ],
)
def test_generalized_time_three_digit_form_is_accepted(text):
    # The specs README's 20171115140000.000Z and btp-packet's fixed .mmm form.
    assert is_generalized_time(text)


@pytest.mark.parametrize(
    "text",
    [
        "20170229120000Z",
        "19000229120000Z",
        "20170431120000Z",
        "20170100120000Z",
        "20171231125960Z",
        "20171231236059Z",
        "20171231235961Z",
        "20171224160060Z",
        "20171224166000Z",
        "20171224161432.0Z",
        "20171224161432.00Z",
        "20171224161432.000",
        "20171224161432.000z",
        "2017-12-24T16:14:32.000Z",
        "",
        "Z",
        "\uff12\uff10171224161432Z",
        " 20171224161432Z",
        "20171224161432Z\n",
    ],
)
def test_generalized_time_other_rejections(text):
    assert not is_generalized_time(text)


@pytest.mark.parametrize(
    "encoded, text",
    [
        ("1332303137313232343136313433322e3237395a", "20171224161432.279Z"),
        ("1132303137313232343136313433322e325a", "20171224161432.2Z"),
        ("0f32303137313232353030303030305a", "20171225000000Z"),
    ],
)
def test_generalized_time_binary_examples_of_rfc30(encoded, text):
    reader = Reader(bytes.fromhex(encoded))
    assert reader.read_generalized_time() == text and reader.at_end()


def test_generalized_time_formatting():
    assert (
        generalized_time(datetime(2017, 11, 15, 14, 0, 0, tzinfo=timezone.utc))
        == "20171115140000.000Z"
    )
    assert (
        generalized_time(datetime(2017, 12, 24, 16, 14, 32, 279112)) == "20171224161432.279Z"
    )  # naive = UTC
    assert (
        generalized_time(datetime(2017, 12, 24, 16, 14, 32, 279500)) == "20171224161432.280Z"
    )  # half up
    assert (
        generalized_time(datetime(2017, 12, 31, 23, 59, 59, 999600, tzinfo=timezone.utc))
        == "20180101000000.000Z"
    )
    plus2 = timezone(timedelta(hours=2))
    assert (
        generalized_time(datetime(2017, 12, 24, 18, 14, 32, tzinfo=plus2)) == "20171224161432.000Z"
    )
    now = generalized_time()
    assert is_generalized_time(now) and len(now) == 19


def test_parse_generalized_time():
    assert parse_generalized_time("20171224161432.27Z") == datetime(
        2017, 12, 24, 16, 14, 32, 270000, timezone.utc
    )
    assert parse_generalized_time("20171224161432Z") == datetime(
        2017, 12, 24, 16, 14, 32, tzinfo=timezone.utc
    )
    assert parse_generalized_time("20161231235960.852Z") == datetime(
        2017, 1, 1, 0, 0, 0, 852000, timezone.utc
    )
    with pytest.raises(ValueError):
        parse_generalized_time("20171224240000Z")


@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 58)))
def test_formatted_times_are_accepted_and_parse_back(dt):
    text = generalized_time(dt)
    assert is_generalized_time(text)
    assert abs(parse_generalized_time(text) - dt.replace(tzinfo=timezone.utc)) <= timedelta(
        microseconds=500
    )


# --------------------------------------------------------------------------- reader


def test_reader_reads_in_sequence_and_reports_offsets():
    data = b"\x07" + (1000).to_bytes(8, "big") + b"\x03abc" + b"\x01\x02" + b"F00"
    reader = Reader(data)
    assert reader.read_uint8() == 7
    assert reader.read_uint64() == 1000
    assert reader.read_ia5() == "abc"
    assert reader.read_var_uint() == 2
    assert reader.read_fixed_ia5(3) == "F00"
    assert reader.at_end() and reader.remaining == 0
    with pytest.raises(BtpDecodeError) as info:
        reader.read_uint8()
    assert (info.value.reason, info.value.offset) == ("truncated", len(data))


def test_reader_window_and_sub_reader():
    data = b"\xff\x05hello\xff"
    outer = Reader(data, 1, 7)
    length = outer.read_length()
    inner = outer.sub_reader(length)
    assert inner.read_fixed(5) == b"hello" and inner.at_end() and outer.at_end()
    with pytest.raises(BtpDecodeError) as info:
        Reader(data, 1, 4).sub_reader(10)
    assert info.value.reason == "length prefix beyond end"
    with pytest.raises(ValueError):
        Reader(data, 5, 2)
    bad_time = Reader(b"\x0f20171224240000Z")
    with pytest.raises(BtpDecodeError) as info:
        bad_time.read_generalized_time()
    assert (info.value.reason, info.value.offset) == ("bad GeneralizedTime", 0)
    assert Reader(bytearray(b"\x01\x00")).read_var_uint() == 0


def test_decode_error_carries_reason_detail_offset():
    error = BtpDecodeError("truncated", "needs 8 bytes", 12)
    assert isinstance(error, ValueError)
    assert (error.reason, error.detail, error.offset) == ("truncated", "needs 8 bytes", 12)
    assert str(error) == "truncated at byte 12: needs 8 bytes"
    assert str(BtpDecodeError("truncated")) == "truncated"

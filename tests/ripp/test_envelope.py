"""The RIPP envelope codec and stream reader (profile P1): layout, CRC-32C,
the check order, and bounded memory whatever a header claims."""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ..fuzz_budget import examples

from reference_impl.ripp import envelope as envelope_module
from reference_impl.ripp.envelope import (
    MAX_PAYLOAD,
    OVERHEAD,
    ZERO_FINGERPRINT,
    Envelope,
    EnvelopeError,
    EnvelopeReader,
    MsgType,
    crc32c,
    encode_envelope,
    fingerprint_text,
    make_envelope,
)


# decode_envelope is the C accelerator when it is built; both must behave
# identically (the C one hands every refusal to the Python one).
DECODERS = [envelope_module.decode_envelope, envelope_module.decode_envelope_python]
DECODER_IDS = ["default", "python"]


@pytest.fixture(params=DECODERS, ids=DECODER_IDS)
def decode(request):
    return request.param


def test_accelerator_reported():
    assert envelope_module.DECODER in (
        "pure Python",
        "C accelerator (reference_impl/ripp/_fastenvelope.c)",
    )


def sample(payload: bytes = b"\x05hello", **kw) -> bytes:
    args = dict(sequence=7, timestamp_ns=1_700_000_000_000_000_000, fingerprint=b"vwap/v2")
    args.update(kw)
    return encode_envelope(make_envelope(MsgType.DELTA, payload, **args))


def refix_crc(b: bytearray) -> bytes:
    b[-4:] = struct.pack("<I", crc32c(bytes(b[:-4])))
    return bytes(b)


def test_rfc3720_check_value():
    assert crc32c(b"123456789") == 0xE3069283


def test_layout_offsets_match_the_text_table():
    data = sample()
    assert len(data) == OVERHEAD + 6
    assert data[0:4] == b"RIPP"
    assert data[4] == 1 and data[5] == MsgType.DELTA and data[6] == 0
    assert struct.unpack_from("<q", data, 7)[0] == 7
    assert struct.unpack_from("<q", data, 15)[0] == 1_700_000_000_000_000_000
    assert data[23:55] == b"vwap/v2".ljust(32, b"\0")
    assert struct.unpack_from("<i", data, 55)[0] == 6
    assert data[59:65] == b"\x05hello"
    assert struct.unpack_from("<I", data, 65)[0] == crc32c(data[:65])


def test_roundtrip(decode):
    env = make_envelope(MsgType.HEARTBEAT, b"abc", sequence=-(1 << 63), timestamp_ns=(1 << 63) - 1)
    got = decode(encode_envelope(env))
    assert got == env and type(got) is Envelope
    assert decode(bytearray(encode_envelope(env))) == env
    assert decode(encode_envelope(env), max_payload=3) == env


def test_encoder_refuses_what_does_not_fit():
    with pytest.raises(ValueError):
        encode_envelope(make_envelope(1, b"", sequence=1 << 63, timestamp_ns=0))
    with pytest.raises(ValueError):
        encode_envelope(make_envelope(1, b"", sequence=0, timestamp_ns=0, fingerprint=b"x" * 33))
    with pytest.raises(ValueError):
        encode_envelope(make_envelope(256, b"", sequence=0, timestamp_ns=0))


@pytest.mark.parametrize(
    "mutate, check",
    [
        (lambda b: b[:-1], "length"),
        (lambda b: b + b"\0", "length"),
        (lambda b: b[:62], "length"),
        (
            lambda b: refix_crc(bytearray(b[:55]) + struct.pack("<i", MAX_PAYLOAD + 1) + b[59:]),
            "length",
        ),
        (lambda b: refix_crc(bytearray(b"RIPQ" + b[4:])), "magic"),
        (lambda b: b"XXXX" + b[4:], "magic"),  # bad CRC too: magic comes first
        (lambda b: b[:-4] + bytes([b[-4] ^ 1]) + b[-3:], "crc"),
        (lambda b: bytes([*b[:4], 2, *b[5:]]), "crc"),  # version 2, CRC not fixed: CRC first
        (lambda b: refix_crc(bytearray([*b[:4], 2, *b[5:]])), "version"),
        (lambda b: refix_crc(bytearray([*b[:4], 2, 9, *b[6:]])), "version"),
        (lambda b: refix_crc(bytearray([*b[:5], 6, *b[6:]])), "type"),
        (lambda b: refix_crc(bytearray([*b[:6], 1, *b[7:]])), "flags"),
    ],
)
def test_check_order(decode, mutate, check):
    with pytest.raises(EnvelopeError) as info:
        decode(mutate(sample()))
    assert info.value.check == check


def test_every_single_bit_flip_is_refused(decode):
    data = sample()
    for i in range(len(data)):
        for bit in range(8):
            b = bytearray(data)
            b[i] ^= 1 << bit
            with pytest.raises(EnvelopeError) as info:
                decode(bytes(b))
            expected = "magic" if i < 4 else "length" if 55 <= i < 59 else "crc"
            assert info.value.check == expected, (i, bit)


def test_lower_receiver_bound(decode):
    with pytest.raises(EnvelopeError) as info:
        decode(sample(b"x" * 100), max_payload=99)
    assert info.value.check == "length"
    assert decode(sample(b"x" * 100), max_payload=100).payload == b"x" * 100


def test_bad_arguments_are_type_errors():
    with pytest.raises(TypeError):
        envelope_module.decode_envelope(sample(), 5, 6)
    with pytest.raises(TypeError):
        envelope_module.decode_envelope(sample(), max_len=5)


def test_reader_splits_and_joins_chunks():
    a, b = sample(b"one"), sample(b"two!", sequence=8)
    stream = a + b
    for cut in range(len(stream) + 1):
        r = EnvelopeReader()
        got = r.receive_data(stream[:cut]) + r.receive_data(stream[cut:])
        assert [e.payload for e in got] == [b"one", b"two!"]
        assert r.buffered == 0


def test_reader_refuses_oversized_claim_from_the_header_alone():
    head = bytearray(sample()[:59])
    head[55:59] = struct.pack("<i", 0x7FFFFFFF)
    r = EnvelopeReader()
    with pytest.raises(EnvelopeError) as info:
        r.receive_data(bytes(head))
    assert info.value.check == "length"
    assert r.buffered == 0
    with pytest.raises(EnvelopeError):  # dead for good
        r.receive_data(sample())


def test_reader_hands_over_the_good_envelopes_before_a_bad_one():
    bad = bytearray(sample(b"two"))
    bad[60] ^= 0x40
    r = EnvelopeReader()
    with pytest.raises(EnvelopeError) as info:
        r.receive_data(sample(b"one") + bytes(bad) + sample(b"three"))
    assert info.value.check == "crc"
    assert [e.payload for e in info.value.decoded] == [b"one"]
    with pytest.raises(EnvelopeError) as again:
        r.receive_data(b"")
    assert again.value.decoded == []


def test_reader_eof_inside_an_envelope():
    r = EnvelopeReader()
    r.receive_data(sample()[:30])
    with pytest.raises(EnvelopeError) as info:
        r.eof()
    assert info.value.check == "length"


def test_fingerprint_text():
    assert fingerprint_text(b"vwap/v2".ljust(32, b"\0")) == "vwap/v2"
    assert fingerprint_text(ZERO_FINGERPRINT) == ""
    with pytest.raises(ValueError):
        fingerprint_text(b"ab\0c".ljust(32, b"\0"))
    with pytest.raises(ValueError):
        fingerprint_text(b"\xff".ljust(32, b"\0"))


# --- hypothesis: any bytes in, a value or a clean error out ---------------

FUZZ = settings(
    max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _mutations():
    base = sample(b"payload-bytes" * 3)
    flips = st.tuples(st.integers(0, len(base) - 1), st.integers(1, 255)).map(
        lambda t: base[: t[0]] + bytes([base[t[0]] ^ t[1]]) + base[t[0] + 1 :]
    )
    lengths = st.integers(-(1 << 31), (1 << 31) - 1).map(
        lambda n: base[:55] + struct.pack("<i", n) + base[59:]
    )
    return st.one_of(
        st.binary(max_size=300), flips, lengths, st.binary(max_size=80).map(lambda x: base[:59] + x)
    )


@FUZZ
@given(_mutations())
def test_decode_any_bytes(data):
    outcomes = []
    for decode in DECODERS:
        try:
            env = decode(data)
        except EnvelopeError as exc:
            assert exc.check in ("length", "magic", "crc", "version", "type", "flags")
            outcomes.append(exc.check)
        else:
            assert type(env) is Envelope and encode_envelope(env) == data
            outcomes.append(env)
    assert outcomes[0] == outcomes[1]  # the accelerator decides exactly like the Python decoder


@FUZZ
@given(st.lists(_mutations(), max_size=6), st.integers(1, 97))
def test_reader_any_stream_bounded(chunks, split):
    stream = b"".join(chunks)
    r = EnvelopeReader(max_payload=4096)
    try:
        for i in range(0, len(stream), split):
            r.receive_data(stream[i : i + split])
            # never more than one envelope's worth is held
            assert r.buffered < OVERHEAD + 4096
    except EnvelopeError as exc:
        assert exc.check in ("length", "magic", "crc", "version", "type", "flags")


def test_reader_memory_is_bounded_whatever_the_claim():
    head = bytearray(sample()[:59])
    tracemalloc.start()
    try:
        for claim in (MAX_PAYLOAD, MAX_PAYLOAD + 1, 0x7FFFFFFF, -1):
            head[55:59] = struct.pack("<i", claim)
            r = EnvelopeReader()
            try:
                r.receive_data(bytes(head))
            except EnvelopeError:
                pass
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, peak

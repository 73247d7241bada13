"""The C accelerator of decode_packet and encode_packet
(reference_impl/btp/_fastcodec.c).

It must be invisible: for any input, the same packet or the same
BtpDecodeError (reason, offset, message) as the pure-Python decoder, the
same bytes or the same exception as the pure-Python encoder, and it must
actually do the work for the packets a link mostly carries instead of
quietly handing them to Python.  The property tests reuse the strategies and
the mutations of test_packet.py."""

from __future__ import annotations

import gc
import json
import os
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ..fuzz_budget import examples

from reference_impl.btp import packet as packet_module
from reference_impl.btp.packet import (
    BtpDecodeError,
    ContentType,
    Message,
    ProtocolDataEntry,
    Response,
    Transfer,
    Error,
    decode_packet_python,
    encode_packet,
    encode_packet_python,
)

from .test_packet import _mutate, packets

try:
    from reference_impl.btp import _fastcodec
except ImportError:  # pragma: no cover - the test below says why
    _fastcodec = None

REPO_ROOT = Path(__file__).resolve().parents[2]
VECTORS = json.loads((REPO_ROOT / "vectors" / "btp" / "packets.json").read_text(encoding="utf-8"))[
    "vectors"
]
MALFORMED = json.loads(
    (REPO_ROOT / "vectors" / "btp" / "malformed.json").read_text(encoding="utf-8")
)["malformed"]
PURE = os.environ.get("BTP_PURE_PYTHON", "") not in ("", "0")

needs_accelerator = pytest.mark.skipif(
    _fastcodec is None and PURE, reason="BTP_PURE_PYTHON is set and the accelerator is not built"
)


def test_accelerator_is_built_and_in_use():
    # scripts/setup.sh builds it (setup.py, gcc); a silent fall back to pure
    # Python would make the benchmark's figures describe another decoder.
    if PURE:
        assert packet_module.decode_packet is decode_packet_python
        assert packet_module.encode_packet is encode_packet_python
        assert packet_module.CODEC == "pure Python"
        return
    assert _fastcodec is not None, (
        "reference_impl/btp/_fastcodec.c was not built: rerun `pip install -e .` (scripts/setup.sh) with a C "
        "compiler, or set BTP_PURE_PYTHON=1 to use the pure-Python decoder knowingly"
    )
    assert packet_module.decode_packet is not decode_packet_python
    assert packet_module.encode_packet is not encode_packet_python
    assert packet_module.CODEC.startswith("C accelerator")


class Recorder:
    """A fallback that records what the C side handed over."""

    def __init__(self, function=decode_packet_python) -> None:
        self.function = function
        self.calls: list[tuple[tuple, dict]] = []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return self.function(*args, **kwargs)


def make_codec(decode_fallback=decode_packet_python, encode_fallback=encode_packet_python):
    return _fastcodec.make_codec(
        decode_fallback,
        encode_fallback,
        ProtocolDataEntry,
        Message,
        Response,
        Transfer,
        ContentType,
    )


def make(fallback=decode_packet_python):
    """A C decoder."""
    return make_codec(decode_fallback=fallback)[0]


def make_encoder(fallback=encode_packet_python):
    return make_codec(encode_fallback=fallback)[1]


# One decoder for the property tests, so its name cache fills up over many inputs.
SHARED = make() if _fastcodec is not None else None
SHARED_ENCODER = make_encoder() if _fastcodec is not None else None


def outcome(decode, data: bytes, **kwargs) -> object:
    try:
        return decode(data, **kwargs)
    except BtpDecodeError as exc:
        return ("error", exc.reason, exc.offset, str(exc))


def retained_bytes(function, inputs: list, expected_errors, rounds: int) -> int:
    """Memory still allocated after ``rounds`` passes of ``function`` over
    ``inputs`` (after a warm-up that fills caches and interns names)."""

    def run(count: int) -> None:
        for _ in range(count):
            for value in inputs:
                try:
                    function(value)
                except expected_errors:
                    pass

    run(200)
    gc.collect()
    tracemalloc.start()
    try:
        run(5)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        run(rounds)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


TYPICAL = [
    Message(
        0x12345678,
        (
            ProtocolDataEntry("auth", ContentType.APPLICATION_OCTET_STREAM, b""),
            ProtocolDataEntry("auth_token", ContentType.TEXT_PLAIN_UTF8, b"9b3c5e0f2a71d4e8"),
        ),
    ),
    Message(1, (ProtocolDataEntry("ilp", 0, bytes(range(256)) * 2),)),
    Message(2**32 - 1, ()),
    Response(7, ()),
    Response(
        8, (ProtocolDataEntry("ilp", 0, b"\x0d" * 40), ProtocolDataEntry("info", 2, b'{"a":1}'))
    ),
    Transfer(3, 0, ()),
    Transfer(4, 2**64 - 1, (ProtocolDataEntry("claim", 2, b'{"amount":"1"}' * 20),)),
    Transfer(5, 10, (ProtocolDataEntry("x" * 127, 255, bytes(65000)),)),
]


@needs_accelerator
@pytest.mark.parametrize("packet", TYPICAL, ids=lambda p: type(p).__name__)
def test_typical_packets_are_built_in_c(packet):
    recorder = Recorder()
    decode = make(recorder)
    wire = encode_packet(packet)
    decoded = decode(wire)
    assert decoded == packet and type(decoded) is type(packet)
    # Bytes after the envelope are ignored (erratum BTP-E3), in C too.
    assert decode(wire + b"\x00\x01") == packet
    assert recorder.calls == []
    # The decoded values are ordinary values: hashable, comparable, re-encodable.
    assert hash(decoded) == hash(packet) and encode_packet(decoded) == wire


@needs_accelerator
def test_everything_else_reaches_the_fallback_with_the_callers_arguments():
    recorder = Recorder()
    decode = make(recorder)
    utf8 = encode_packet(Message(1, (ProtocolDataEntry("t", 1, "é".encode()),)))
    for args, kwargs in [
        ((b"\x02\x00\x00\x00\x01\x00",), {}),  # an Error: never the C side's
        ((utf8,), {}),  # non-ASCII text: Python validates it
        ((bytearray(utf8),), {}),  # not exactly bytes
        ((utf8,), {"lenient_error_form": True}),  # any keyword argument
        ((encode_packet(Message(1))[:-1],), {}),  # the envelope runs past the end
    ]:
        recorder.calls.clear()
        assert outcome(decode, *args, **kwargs) == outcome(decode_packet_python, *args, **kwargs)
        assert recorder.calls == [(args, kwargs)]


WRONG_CALLS = {
    "decode": [((), {}), ((b"", b""), {}), ((b"\x06",), {"allow_trailing": True}), (("text",), {})],
    "encode": [
        ((), {}),
        ((Message(1), Message(1)), {}),
        ((Message(1),), {"valdate": True}),
        ((Message(1),), {"validate": True, "other": 1}),
        ((Message(1),), {"packet": Message(1)}),
    ],
}


@needs_accelerator
@pytest.mark.parametrize("which", ["decode", "encode"])
def test_wrong_arguments_get_the_python_functions_errors(which):
    c_function = make() if which == "decode" else make_encoder()
    python_function = decode_packet_python if which == "decode" else encode_packet_python
    for args, kwargs in WRONG_CALLS[which]:
        with pytest.raises(TypeError) as c_error:
            c_function(*args, **kwargs)
        with pytest.raises(TypeError) as py_error:
            python_function(*args, **kwargs)
        assert str(c_error.value) == str(py_error.value)


@needs_accelerator
@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_vectors_decode_the_same(vector):
    wire = bytes.fromhex(vector["hex"])
    assert outcome(make(), wire) == outcome(decode_packet_python, wire)


@needs_accelerator
@pytest.mark.parametrize("vector", MALFORMED, ids=[v["id"] for v in MALFORMED])
def test_malformed_vectors_fail_the_same(vector):
    wire = bytes.fromhex(vector["hex"])
    result = outcome(make(), wire)
    assert result == outcome(decode_packet_python, wire)
    assert result[:3] == ("error", vector["reason"], vector["offset"])


@needs_accelerator
@given(st.binary(max_size=300))
@settings(max_examples=examples(500), deadline=None)
def test_random_bytes_agree(data):
    assert outcome(SHARED, data) == outcome(decode_packet_python, data)


@needs_accelerator
@given(
    packets,
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 10**6), st.integers(0, 255)), max_size=3),
    st.binary(max_size=3),
)
@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_packets_and_their_mutations_agree(packet, mutations, after_envelope):
    wire = encode_packet(packet)
    for how, where, value in mutations:
        wire = _mutate(wire, how, where, value)
    wire += after_envelope
    assert outcome(SHARED, wire) == outcome(decode_packet_python, wire)


@needs_accelerator
def test_more_names_than_the_cache_keeps():
    decode = make()
    for i in range(200):
        packet = Message(
            i,
            (
                ProtocolDataEntry(f"name-{i}", 0, b""),
                ProtocolDataEntry("n" * (64 + i % 64), 1, b""),
            ),
        )
        assert decode(encode_packet(packet)) == packet


@needs_accelerator
def test_no_leak_on_success_fall_back_or_error():
    # Every path of the C code -- packet built, handed over part-way through
    # the entries, rejected by the fallback -- releases what it allocated.
    decode = make()
    inputs = [encode_packet(p) for p in TYPICAL]
    utf8_late = encode_packet(
        Message(1, (ProtocolDataEntry("a", 0, b"x"), ProtocolDataEntry("t", 1, "é".encode())))
    )
    inputs += [
        utf8_late,
        utf8_late[:-1],
        encode_packet(Message(1)) + b"\x00",
        b"\x06\x00\x00\x00\x01\x7f",
    ]

    # 5000 rounds of 12 decodes; a leak of even one small object per decode is > 1 MB.
    retained = retained_bytes(decode, inputs, BtpDecodeError, rounds=5000)
    assert retained < 64 * 1024, f"{retained} bytes retained"


# =========================================================================== encoder


def encoded(encode, *args, **kwargs) -> object:
    try:
        return encode(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the exception itself is what is compared
        return ("raised", type(exc), str(exc))


@needs_accelerator
@pytest.mark.parametrize("packet", TYPICAL, ids=lambda p: type(p).__name__)
def test_typical_packets_are_encoded_in_c(packet):
    recorder = Recorder(encode_packet_python)
    encode = make_encoder(recorder)
    wire = encode(packet)
    assert type(wire) is bytes and wire == encode_packet_python(packet)
    assert encode(packet, validate=True) == wire
    assert recorder.calls == []


class Name(str):
    pass


class RequestId(int):
    pass


def _missing_slots() -> Message:
    return object.__new__(Message)


def _late_bad_entry(entry: ProtocolDataEntry) -> Message:
    """A packet whose last entry is the one the C side cannot take."""
    return Message(1, (ProtocolDataEntry("a", 0, b"x"), ProtocolDataEntry("b", 2, b"{}"), entry))


# Every shape the C side hands over, the valid ones and the invalid ones:
# the fallback gets the caller's arguments and its result or exception is
# what the caller sees.
HANDED_OVER = [
    ((Message(1, (ProtocolDataEntry("pr\u00f6be", 1, b"x"),)),), {"validate": False}),  # forging
    ((Message(1),), {"validate": 1}),  # a true value that is not True
    ((Message(1),), {"validate": False}),
    ((Error(1, "F00", "NotAcceptedError", "20171224161432.279Z"),), {}),
    ((Message(1, [ProtocolDataEntry("a", 0, b"")]),), {}),  # a list, not a tuple
    ((Message(1, None),), {}),
    ((Message(1, tuple(ProtocolDataEntry("p", 0, b"") for _ in range(256))),), {}),
    ((_late_bad_entry(ProtocolDataEntry("a", 0, bytearray(b"x"))),), {}),
    ((_late_bad_entry(ProtocolDataEntry("a", 0, memoryview(b"x"))),), {}),
    ((_late_bad_entry(ProtocolDataEntry("a", 0, "text")),), {}),
    ((_late_bad_entry(ProtocolDataEntry("t", 1, "\u00e9".encode())),), {}),  # UTF-8 text, valid
    ((_late_bad_entry(ProtocolDataEntry("t", 2, b"\xff")),), {}),  # not UTF-8
    ((_late_bad_entry(ProtocolDataEntry("caf\u00e9", 0, b"")),), {}),
    ((_late_bad_entry(ProtocolDataEntry(Name("sub"), 0, b"")),), {}),
    ((_late_bad_entry(ProtocolDataEntry(b"bytes", 0, b"")),), {}),
    ((_late_bad_entry(ProtocolDataEntry("a", 256, b"")),), {}),
    ((_late_bad_entry(ProtocolDataEntry("a", -1, b"")),), {}),
    ((_late_bad_entry(ProtocolDataEntry("a", True, b"")),), {}),
    ((_late_bad_entry(ProtocolDataEntry("a", 1.0, b"")),), {}),
    ((_late_bad_entry(ProtocolDataEntry("a", 2**70, b"")),), {}),
    ((_late_bad_entry(object.__new__(ProtocolDataEntry)),), {}),
    ((Message(1, ("not an entry",)),), {}),
    ((Message(-1),), {}),
    ((Message(2**32),), {}),
    ((Message(2**100),), {}),
    ((Message(True),), {}),
    ((Message(RequestId(5)),), {}),
    ((Message("1"),), {}),
    ((Transfer(1, -1),), {}),
    ((Transfer(1, 2**64),), {}),
    ((Transfer(1, 1.5),), {}),
    ((Transfer(1, RequestId(5)),), {}),
    ((_missing_slots(),), {}),
    (("not a packet",), {}),
    ((), {"packet": Message(1)}),  # by keyword: valid, and Python's
]


@needs_accelerator
@pytest.mark.parametrize("args, kwargs", HANDED_OVER, ids=range(len(HANDED_OVER)))
def test_everything_else_reaches_the_encode_fallback_with_the_callers_arguments(args, kwargs):
    recorder = Recorder(encode_packet_python)
    encode = make_encoder(recorder)
    assert encoded(encode, *args, **kwargs) == encoded(encode_packet_python, *args, **kwargs)
    assert recorder.calls == [(args, kwargs)]


@needs_accelerator
@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_vectors_encode_the_same(vector):
    packet = decode_packet_python(bytes.fromhex(vector["hex"]))
    assert SHARED_ENCODER(packet) == encode_packet_python(packet)


@needs_accelerator
@given(packets)
@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_packets_encode_the_same(packet):
    assert SHARED_ENCODER(packet) == encode_packet_python(packet)


# Values around every limit the encoder checks, valid or not.
loose_entries = st.builds(
    ProtocolDataEntry,
    st.one_of(st.text(max_size=8), st.sampled_from(["auth", "x" * 127, "y" * 128, "z" * 300])),
    st.one_of(st.integers(-2, 258), st.sampled_from(list(ContentType)), st.booleans()),
    st.one_of(
        st.binary(max_size=20),
        st.binary(min_size=126, max_size=260),
        st.text(max_size=8).map(str.encode),
        st.binary(max_size=4).map(bytearray),
    ),
)
loose_packets = st.one_of(
    st.builds(Message, st.integers(-2, 2**33), st.lists(loose_entries, max_size=4).map(tuple)),
    st.builds(Response, st.integers(-2, 2**33), st.lists(loose_entries, max_size=4).map(tuple)),
    st.builds(
        Transfer,
        st.integers(0, 2**32),
        st.integers(-2, 2**65),
        st.lists(loose_entries, max_size=4).map(tuple),
    ),
)


@needs_accelerator
@given(loose_packets, st.sampled_from([{}, {"validate": True}, {"validate": False}]))
@settings(max_examples=examples(800), deadline=None)
def test_loose_values_encode_or_fail_the_same(packet, kwargs):
    assert encoded(SHARED_ENCODER, packet, **kwargs) == encoded(
        encode_packet_python, packet, **kwargs
    )


@needs_accelerator
def test_encoder_no_leak_on_success_fall_back_or_error():
    encode = make_encoder()
    inputs = list(TYPICAL) + [args[0] for args, kwargs in HANDED_OVER if not kwargs]

    # 2000 rounds of ~40 encodes; a leak of even one small object per call is > 1 MB.
    retained = retained_bytes(encode, inputs, (ValueError, AttributeError), rounds=2000)
    assert retained < 64 * 1024, f"{retained} bytes retained"


def _parts(packet) -> list:
    """The objects an encoder reads from ``packet``: none may gain a reference."""
    parts = [packet]
    for field in ("request_id", "amount", "protocol_data"):
        parts.append(getattr(packet, field, None))
    entries = getattr(packet, "protocol_data", None)
    if isinstance(entries, (tuple, list)):
        for entry in entries:
            parts.append(entry)
            parts.extend(getattr(entry, field, None) for field in ("name", "content_type", "data"))
    # Small ints, True, None, enum members, and the empty and one-character
    # str and bytes (CPython keeps one of each) are shared by all the
    # interpreter's code: their counts move for reasons of their own, at
    # once when another thread runs (a pytest-xdist worker's I/O thread).
    return [
        part
        for part in parts
        if not (
            part is None
            or isinstance(part, (bool, ContentType))
            or (type(part) is int and -5 <= part <= 256)
            or (type(part) in (str, bytes) and len(part) <= 1)
        )
    ]


@needs_accelerator
def test_encoder_gives_back_every_reference_it_takes():
    # tracemalloc cannot see a reference kept on an object that lives on
    # anyway (the packet's tuple, a name): count them.
    import sys

    encode = make_encoder()
    for packet in list(TYPICAL) + [args[0] for args, kwargs in HANDED_OVER if not kwargs]:
        parts = _parts(packet)
        # One encode first: the encoder keeps the first 32 distinct
        # protocol data names it meets (its name cache, by design, once);
        # what must not happen is a reference gained per encode.
        try:
            encode(packet)
        except (ValueError, AttributeError):
            pass
        before = [sys.getrefcount(part) for part in parts]
        for _ in range(50):
            try:
                encode(packet)
            except (ValueError, AttributeError):
                pass
        assert [sys.getrefcount(part) for part in parts] == before, packet

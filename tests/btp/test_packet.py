"""The BTP packet codec (reference_impl/btp/packet.py): encoding rules and
validation, the decisions of its docstring, and property tests -- round
trips, and decoding arbitrary or damaged bytes never raising anything but
BtpDecodeError.  A straightforward decoder written here on top of
oer.Reader serves as an oracle for the optimised one."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ..fuzz_budget import examples

from reference_impl.btp import packet as packet_module
from reference_impl.btp.oer import DECODE_REASONS, Reader, check_generalized_time
from reference_impl.btp.packet import (
    ERROR_CODES,
    LEGACY_TYPES,
    BtpDecodeError,
    ContentType,
    Error,
    Fulfill,
    Message,
    PacketType,
    Prepare,
    ProtocolDataEntry,
    Reject,
    Response,
    Transfer,
    decode_packet,
    encode_packet,
    envelope_end,
    find_entry,
    generalized_time,
    is_request,
    is_response,
    packet_from_json,
    packet_to_json,
    packet_type,
    primary,
)

TIME = "20171115140000.000Z"
AUTH = (
    ProtocolDataEntry("auth", ContentType.APPLICATION_OCTET_STREAM, b""),
    ProtocolDataEntry("auth_token", ContentType.TEXT_PLAIN_UTF8, b"token"),
)


def decode_reason(data: bytes, **kwargs) -> tuple[str, int | None]:
    with pytest.raises(BtpDecodeError) as info:
        decode_packet(data, **kwargs)
    return info.value.reason, info.value.offset


# =========================================================================== encoding by hand


def test_message_layout_by_hand():
    wire = encode_packet(Message(0x01020304, AUTH))
    assert wire == (
        b"\x06"
        + b"\x01\x02\x03\x04"
        + bytes((len(wire) - 6,))
        + b"\x01\x02"
        + b"\x04auth"
        + b"\x00"
        + b"\x00"
        + b"\x0aauth_token"
        + b"\x01"
        + b"\x05token"
    )


def test_transfer_and_error_layout_by_hand():
    assert encode_packet(Transfer(7, 1000)) == bytes.fromhex("07 00000007 0a 00000000000003e8 0100")
    wire = encode_packet(Error(1, "F00", "NotAcceptedError", TIME, b"x"))
    assert wire == (
        b"\x02\x00\x00\x00\x01"
        + bytes((len(wire) - 6,))
        + b"F00"
        + b"\x10NotAcceptedError"
        + b"\x13"
        + TIME.encode()
        + b"\x01x"
        + b"\x01\x00"
    )


def test_legacy_layouts_by_hand():
    tid, cond, ful = bytes(range(16)), bytes(range(32)), bytes(range(32, 64))
    assert encode_packet(Reject(1, tid)) == b"\x05\x00\x00\x00\x01\x12" + tid + b"\x01\x00"
    assert (
        encode_packet(Fulfill(1, tid, ful)) == b"\x04\x00\x00\x00\x01\x32" + tid + ful + b"\x01\x00"
    )
    wire = encode_packet(Prepare(1, tid, 5, cond, TIME))
    assert wire[6:] == tid + (5).to_bytes(8, "big") + cond + b"\x13" + TIME.encode() + b"\x01\x00"


def test_matches_btp_packet_bytes_for_the_auth_message():
    # btp-packet 2.2.1 serialize() of the same packet (see interop/node).
    packet = Message(
        12345,
        (
            ProtocolDataEntry("auth", 0, b""),
            ProtocolDataEntry("auth_token", 1, b"secret-token-abcdef"),
        ),
    )
    assert encode_packet(packet).hex() == (
        "0600003039290102046175746800000a617574685f746f6b656e0113736563"
        "7265742d746f6b656e2d616263646566"
    )


def test_helpers():
    message = Message(1, AUTH)
    assert primary(message) == AUTH[0] and primary(Message(1)) is None
    assert find_entry(message, "auth_token") == AUTH[1] and find_entry(message, "nope") is None
    assert [
        packet_type(p)
        for p in (
            Response(1),
            Error(1, "T00", "UnreachableError", TIME),
            Message(1),
            Transfer(1, 0),
        )
    ] == [1, 2, 6, 7]
    assert all(
        is_request(p) and not is_response(p)
        for p in (Message(1), Transfer(1, 1), Reject(1, bytes(16)))
    )
    assert all(
        is_response(p) and not is_request(p) for p in (Response(1), Error(1, "F00", "x", TIME))
    )
    assert LEGACY_TYPES == {PacketType.PREPARE, PacketType.FULFILL, PacketType.REJECT}
    with pytest.raises(TypeError):
        packet_type("not a packet")  # type: ignore[arg-type]


def test_error_code_table_is_rfc23s():
    assert ERROR_CODES == {
        "T00": "UnreachableError",
        "F00": "NotAcceptedError",
        "F01": "InvalidFieldsError",
        "F03": "TransferNotFoundError",
        "F04": "InvalidFulfillmentError",
        "F05": "DuplicateIdError",
        "F06": "AlreadyRolledBackError",
        "F07": "AlreadyFulfilledError",
        "F08": "InsufficientBalanceError",
    }


def test_packets_are_immutable_values():
    entry = ProtocolDataEntry("a", 0, b"")
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.name = "b"  # type: ignore[misc]
    decoded = decode_packet(encode_packet(Message(1, (entry,))))
    assert decoded == Message(1, (entry,)) and hash(decoded) == hash(Message(1, (entry,)))
    assert Message(1) != Response(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        decoded.request_id = 2  # type: ignore[misc]


# =========================================================================== encoder validation


@pytest.mark.parametrize(
    "packet, message",
    [
        (Message(-1), "request_id"),
        (Message(2**32), "request_id"),
        (Transfer(1, -1), "amount"),
        (Transfer(1, 2**64), "amount"),
        (Transfer(1, 1.5), "amount"),  # type: ignore[arg-type]
        (Message(1, (ProtocolDataEntry("a", 256, b""),)), "content type"),
        (Message(1, (ProtocolDataEntry("a", -1, b""),)), "content type"),
        (Message(1, (ProtocolDataEntry("a", True, b""),)), "content type"),  # type: ignore[arg-type]
        (Message(1, (ProtocolDataEntry("caf\u00e9", 0, b""),)), "IA5"),
        (Message(1, (ProtocolDataEntry("a", 0, "text"),)), "bytes"),  # type: ignore[arg-type]
        (Message(1, (ProtocolDataEntry("a", 1, b"\xff"),)), "not UTF-8"),
        (Message(1, (ProtocolDataEntry("a", 2, b"\xc0\xaf"),)), "not UTF-8"),
        (Message(1, ("not an entry",)), "ProtocolDataEntry"),  # type: ignore[arg-type]
        (Message(1, None), "protocol_data"),  # type: ignore[arg-type]
        (Error(1, "F0", "x", TIME), "3 characters"),
        (Error(1, "F000", "x", TIME), "3 characters"),
        (Error(1, "F\u00e90", "x", TIME), "IA5"),
        (Error(1, "F00", "n\u00e4me", TIME), "IA5"),
        (Error(1, "F00", "x", "20171224240000Z"), "GeneralizedTime"),
        (Error(1, "F00", "x", "2017-11-15T14:00:00Z"), "GeneralizedTime"),
        (Error(1, "F00", "x", TIME, bytes(8193)), "8192"),
        (Reject(1, bytes(15)), "16 bytes"),
        (Fulfill(1, bytes(16), bytes(31)), "32 bytes"),
        (Prepare(1, bytes(16), 1, bytes(32), "soon"), "GeneralizedTime"),
    ],
)
def test_encoder_rejects(packet, message):
    with pytest.raises(ValueError, match=message):
        encode_packet(packet)


def test_encoder_accepts_the_limits():
    for packet in (
        Message(0),
        Message(2**32 - 1),
        Transfer(1, 0),
        Transfer(1, 2**64 - 1),
        Message(1, (ProtocolDataEntry("a", 255, b"\xff"), ProtocolDataEntry("b", 0, b"\xff"))),
        Message(1, (ProtocolDataEntry("a", ContentType.APPLICATION_JSON, bytearray(b"{}")),)),
        Error(1, "F00", "", TIME, bytes(8192)),
    ):
        assert (
            decode_packet(encode_packet(packet)) == packet
        )  # bytearray data compares equal to bytes


def test_validate_false_forges_what_the_decoder_rejects():
    forged = encode_packet(Message(1, (ProtocolDataEntry("pr\u00f6be", 1, b"x"),)), validate=False)
    assert b"pr\xf6be" in forged and decode_reason(forged)[0] == "non-IA5 character"
    # A two-character code shifts every later field: the name length is read from "x".
    assert (
        decode_reason(encode_packet(Error(1, "F0", "x", TIME), validate=False))[0]
        == "length prefix beyond end"
    )
    assert (
        decode_reason(encode_packet(Error(1, "F00", "x", "yesterday"), validate=False))[0]
        == "bad GeneralizedTime"
    )
    assert (
        decode_reason(encode_packet(Error(1, "F00", "x", TIME, bytes(9000)), validate=False))[0]
        == "error data too long"
    )
    assert (
        decode_reason(
            encode_packet(Message(1, (ProtocolDataEntry("t", 1, b"\xff"),)), validate=False)
        )[0]
        == "bad content type"
    )
    with pytest.raises(ValueError):  # what cannot be represented at all is refused even then
        encode_packet(Message(2**32), validate=False)


# =========================================================================== decoder decisions


def test_extra_bytes_inside_the_envelope_are_ignored():
    wire = encode_packet(Message(1, AUTH))
    padded = wire[:5] + bytes((wire[5] + 3,)) + wire[6:] + b"\x00\x01\x02"
    assert decode_packet(padded) == Message(1, AUTH)
    assert encode_packet(decode_packet(padded)) == wire


def test_bytes_after_the_envelope_are_ignored():
    """Erratum BTP-E3: the packet is what the envelope holds."""
    wire = encode_packet(Message(1, AUTH))
    assert decode_packet(wire + b"\x00") == Message(1, AUTH)
    assert decode_packet(wire + b"\x00junk") == Message(1, AUTH)
    assert encode_packet(decode_packet(wire + b"\x00junk")) == wire
    assert envelope_end(wire + b"\x00junk") == len(wire)
    error = encode_packet(Error(1, "F00", "x", TIME))
    assert decode_packet(error + b"zz") == Error(1, "F00", "x", TIME)
    assert decode_packet(error + b"zz", lenient_error_form=True) == Error(1, "F00", "x", TIME)
    transfer = encode_packet(Transfer(1, 9))
    assert decode_packet(transfer + b"zz") == Transfer(1, 9)
    big = encode_packet(Message(1, (ProtocolDataEntry("x", 0, bytes(300)),)))
    assert big[5] == 0x82 and envelope_end(big + b"zz") == len(big)
    assert decode_packet(big + b"zz") == decode_packet(big)


def test_content_types():
    for content_type in (0, 3, 17, 255):
        packet = Message(1, (ProtocolDataEntry("x", content_type, b"\xff\x00"),))
        assert decode_packet(encode_packet(packet)).protocol_data[0].content_type == content_type
    for content_type in (1, 2):
        good = Message(1, (ProtocolDataEntry("x", content_type, "zoë ✓".encode()),))
        assert decode_packet(encode_packet(good)) == good
        bad = encode_packet(
            Message(1, (ProtocolDataEntry("x", content_type, b"ab\xffcd"),)), validate=False
        )
        assert decode_reason(bad) == ("bad content type", bad.index(b"\xff"))


def test_json_syntax_is_not_checked():
    packet = Message(1, (ProtocolDataEntry("j", ContentType.APPLICATION_JSON, b"{not json"),))
    assert decode_packet(encode_packet(packet)) == packet


def test_duplicate_names_decode():
    entry = ProtocolDataEntry("dup", 1, b"x")
    assert decode_packet(encode_packet(Message(1, (entry, entry)))).protocol_data == (entry, entry)


def test_decode_accepts_bytes_like_and_refuses_other_types():
    wire = encode_packet(Message(1, AUTH))
    assert decode_packet(bytearray(wire)) == decode_packet(memoryview(wire)) == Message(1, AUTH)
    with pytest.raises(TypeError):
        decode_packet(wire.hex())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        decode_packet(12)  # type: ignore[arg-type]


def test_unknown_type_is_reported_before_framing():
    assert decode_reason(b"\x00") == ("unknown packet type", 0)
    assert decode_reason(b"\x08\x00\x00\x00\x01\x7f") == ("unknown packet type", 0)
    assert decode_reason(b"\x06\x00") == ("truncated", 0)


def test_name_cache_does_not_change_results():
    names = [f"name{i}" for i in range(700)]  # more than the cache keeps
    for name in names:
        packet = Message(1, (ProtocolDataEntry(name, 0, b""),))
        assert decode_packet(encode_packet(packet)) == packet
    assert len(packet_module._NAME_CACHE) <= packet_module._NAME_CACHE_LIMIT
    long_name = "n" * 300
    packet = Message(1, (ProtocolDataEntry(long_name, 0, b""),))
    assert (
        decode_packet(encode_packet(packet)) == packet
        and long_name.encode() not in packet_module._NAME_CACHE
    )


def test_fast_path_long_forms():
    for size in (127, 128, 255, 256, 65535, 65536, 70000):
        for packet in (
            Message(1, (ProtocolDataEntry("ilp", 0, bytes(size)),)),
            Transfer(2, 3, (ProtocolDataEntry("c", 1, b"a" * size),)),
            Response(
                4, (ProtocolDataEntry("ilp", 0, b"x"), ProtocolDataEntry("d", 2, b"1" * size))
            ),
        ):
            assert decode_packet(encode_packet(packet)) == packet


def test_json_form_round_trip():
    for packet in (
        Response(1),
        Message(2, AUTH),
        Transfer(3, 2**64 - 1),
        Error(4, "F00", "x", TIME, b"\x00"),
        Prepare(5, bytes(16), 6, bytes(32), TIME),
        Fulfill(7, bytes(16), bytes(32)),
        Reject(8, bytes(16), AUTH),
    ):
        fields = packet_to_json(packet)
        assert packet_from_json(fields) == packet
        assert fields["type_id"] == packet_type(packet)
    assert packet_to_json(Transfer(1, 2**64 - 1))["amount"] == "18446744073709551615"
    with pytest.raises(ValueError):
        packet_from_json({"type_id": 9, "request_id": 1})


# =========================================================================== an oracle


def oracle_decode(data: bytes) -> object:
    """The packet format read field by field with oer.Reader, as the ASN.1
    reads -- no fast paths. Returns the packet or the decode error's reason."""
    try:
        if len(data) < 6:
            if data and not 0 < data[0] < 8:
                return "unknown packet type"
            return "truncated"
        reader = Reader(data)
        kind = reader.read_uint8()
        if not 0 < kind < 8:
            return "unknown packet type"
        request_id = reader.read_uint32()
        # What follows the envelope is not read (erratum BTP-E3).
        envelope = reader.sub_reader(reader.read_length())
        r = envelope
        if kind == 2:
            if r.remaining < 3:
                return "bad error code length"
            code = r.read_fixed_ia5(3)
            name = r.read_ia5()
            when = r.read_generalized_time()
            data_field = r.read_var_octets()
            if len(data_field) > 8192:
                return "error data too long"
            fields: tuple = (code, name, when, data_field)
        elif kind == 7:
            fields = (r.read_uint64(),)
        elif kind == 3:
            fields = (
                r.read_fixed(16),
                r.read_uint64(),
                r.read_fixed(32),
                r.read_generalized_time(),
            )
        elif kind == 4:
            fields = (r.read_fixed(16), r.read_fixed(32))
        elif kind == 5:
            fields = (r.read_fixed(16),)
        else:
            fields = ()
        entries = []
        for _ in range(r.read_var_uint()):
            name = r.read_ia5()
            content_type = r.read_uint8()
            value = r.read_var_octets()
            if content_type in (1, 2):
                try:
                    value.decode("utf-8")
                except UnicodeDecodeError:
                    return "bad content type"
            entries.append(ProtocolDataEntry(name, content_type, value))
        cls = {1: Response, 2: Error, 3: Prepare, 4: Fulfill, 5: Reject, 6: Message, 7: Transfer}[
            kind
        ]
        return cls(request_id, *fields, tuple(entries))
    except BtpDecodeError as exc:
        return exc.reason


def decode_or_reason(data: bytes) -> object:
    try:
        return decode_packet(data)
    except BtpDecodeError as exc:
        assert exc.reason in DECODE_REASONS, exc.reason
        assert exc.offset is None or 0 <= exc.offset <= len(data), (exc.offset, len(data))
        return exc.reason


# =========================================================================== properties

names = st.one_of(
    st.sampled_from(["auth", "auth_token", "ilp", "claim", "", "x" * 130]),
    st.text(alphabet=st.characters(max_codepoint=127), max_size=12),
)
entries = st.builds(
    ProtocolDataEntry,
    names,
    st.one_of(st.integers(0, 2), st.integers(0, 255)),
    st.one_of(
        st.binary(max_size=40),
        st.binary(min_size=120, max_size=300),
        st.text(max_size=30).map(str.encode),
    ),
).filter(lambda e: e.content_type not in (1, 2) or _is_utf8(e.data))
protocol_data = st.one_of(
    st.lists(entries, max_size=5).map(tuple),
    # counts around the one-/two-byte boundary, cheap to generate
    st.integers(250, 260).map(
        lambda n: tuple(ProtocolDataEntry(f"p{i}", i % 3, b"1" * (i % 4)) for i in range(n))
    ),
)
request_ids = st.integers(0, 2**32 - 1)
amounts = st.integers(0, 2**64 - 1)
ia5 = st.text(alphabet=st.characters(max_codepoint=127), max_size=20)
times = st.one_of(
    st.just(TIME),
    st.datetimes().map(generalized_time),
    st.sampled_from(["20171224161432.27Z", "20171224161432Z", "20161231235960.852Z"]),
)
packets = st.one_of(
    st.builds(Response, request_ids, protocol_data),
    st.builds(Message, request_ids, protocol_data),
    st.builds(Transfer, request_ids, amounts, protocol_data),
    st.builds(
        Error,
        request_ids,
        st.text(alphabet=st.characters(max_codepoint=127), min_size=3, max_size=3),
        ia5,
        times,
        st.binary(max_size=200) | st.just(bytes(8192)),
        protocol_data,
    ),
    st.builds(
        Prepare,
        request_ids,
        st.binary(min_size=16, max_size=16),
        amounts,
        st.binary(min_size=32, max_size=32),
        times,
        protocol_data,
    ),
    st.builds(
        Fulfill,
        request_ids,
        st.binary(min_size=16, max_size=16),
        st.binary(min_size=32, max_size=32),
        protocol_data,
    ),
    st.builds(Reject, request_ids, st.binary(min_size=16, max_size=16), protocol_data),
)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@given(packets)
@settings(max_examples=examples(250), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_round_trip(packet):
    wire = encode_packet(packet)
    decoded = decode_packet(wire)
    assert decoded == packet
    assert encode_packet(decoded) == wire
    assert oracle_decode(wire) == packet


@given(st.binary(max_size=300))
@settings(max_examples=examples(400), deadline=None)
def test_random_bytes_only_ever_raise_btp_decode_error(data):
    assert decode_or_reason(data) == oracle_decode(data)


def _mutate(wire: bytes, how: int, where: int, value: int) -> bytes:
    where %= len(wire) + 1
    if how == 0:  # change a byte
        if where == len(wire):
            return wire
        return wire[:where] + bytes((value,)) + wire[where + 1 :]
    if how == 1:  # insert a byte
        return wire[:where] + bytes((value,)) + wire[where:]
    if how == 2:  # delete a byte
        return wire[:where] + wire[where + 1 :]
    if how == 3:  # cut
        return wire[:where]
    return wire + bytes((value,)) * (1 + where % 3)  # append


@given(
    packets,
    st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 10**6), st.integers(0, 255)),
        min_size=1,
        max_size=3,
    ),
)
@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_packets_agree_with_the_oracle(packet, mutations):
    wire = encode_packet(packet)
    for how, where, value in mutations:
        wire = _mutate(wire, how, where, value)
    result = decode_or_reason(wire)
    assert result == oracle_decode(wire)
    if not isinstance(result, str):
        # Whatever decodes, encodes; and re-decoding that gives the same packet.
        assert decode_packet(encode_packet(result)) == result


CHEAP_BYTES = 64 * 1024
"""What decoding a hostile envelope of under 100 bytes may allocate at its
peak: a claimed length is never allocated before the bytes are there. (Not
a wall-clock bound, which flakes on a loaded machine; a decoder that looped
over a claimed count would not return at all, and the test's hang guard
would show it.)"""


def decode_peak_bytes(wire: bytes) -> int:
    """The peak of Python allocations while decoding ``wire`` (tracemalloc)."""
    import tracemalloc

    tracemalloc.start()
    try:
        decode_or_reason(wire)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@given(st.binary(min_size=1, max_size=64), st.integers(6, 10))
@settings(max_examples=examples(100), deadline=None)
def test_hostile_lengths_are_cheap(tail, length_of_length):
    # Enormous length claims fail at once instead of allocating or looping.
    for head in (
        b"\x06\x00\x00\x00\x01" + bytes((0x80 | length_of_length,)) + b"\xff" * length_of_length,
        b"\x06\x00\x00\x00\x01\x7f\x08" + b"\xff" * 8,  # count 2^64-1 entries
        b"\x02\x00\x00\x00\x01\x7fF00\x88" + b"\xff" * 8,
    ):  # error name of 2^64-1 bytes
        assert isinstance(decode_or_reason(head + tail), str)
        assert decode_peak_bytes(head + tail) < CHEAP_BYTES


def test_many_entries_claimed_but_absent_is_fast():
    # A count of 2^64-1 over a tiny envelope must fail at the first missing entry.
    wire = b"\x06\x00\x00\x00\x01\x0a\x08" + b"\xff" * 8 + b"\x00"
    assert decode_reason(wire)[0] in {"truncated", "length prefix beyond end"}
    assert decode_peak_bytes(wire) < CHEAP_BYTES


def test_check_generalized_time_is_what_decoder_uses():
    for text in ("20171224240000Z", "20171224161432.20Z", TIME):
        wire = encode_packet(Error(1, "F00", "x", text), validate=False)
        assert (decode_or_reason(wire) == "bad GeneralizedTime") == (
            check_generalized_time(text) is not None
        )

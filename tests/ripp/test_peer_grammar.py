"""The harness's reader of a RIPP target (conformance/suites/ripp/peer.py)
and the node grammar (core/node_grammar.py): an envelope of the target's
that breaks the envelope grammar (profile P1's checks length, magic, CRC,
version, type) is a NodeGrammarViolation of the grammar case of the
target's role, recorded once with the offset of the envelope in the
target's bytes and the bytes; what is no envelope grammar (the flags byte,
a payload that does not decode, a fingerprint) stays a plain
ProtocolViolation of the case that read it."""

from __future__ import annotations

import asyncio
import struct

import pytest

from conformance.core import node_grammar
from conformance.core.node_grammar import GrammarRecord, NodeGrammarViolation
from conformance.core.transport import ProtocolViolation
from conformance.suites.ripp.peer import RippPeer
from conformance.suites.ripp.prerequisites import CLIENT_GRAMMAR, SERVER_GRAMMAR
from reference_impl.ripp.envelope import CRC_SIZE, MAX_PAYLOAD, crc32c, encode_envelope
from reference_impl.ripp.envelope import MsgType, make_envelope
from reference_impl.ripp.payloads import Heartbeat, SchemaNegotiation, encode_payload

from ..scripted_writer import connection_to_writer

NEGOTIATION = encode_envelope(
    make_envelope(
        MsgType.SCHEMA_NEGOTIATION,
        encode_payload(SchemaNegotiation(True, [], 1, 500, "consumer")),
        sequence=1,
        timestamp_ns=1,
    )
)
HEARTBEAT = encode_envelope(
    make_envelope(
        MsgType.HEARTBEAT, encode_payload(Heartbeat("w", 1, 0.0)), sequence=2, timestamp_ns=2
    )
)


def with_crc(data: bytes | bytearray) -> bytes:
    return bytes(data[:-CRC_SIZE]) + struct.pack("<I", crc32c(bytes(data[:-CRC_SIZE])))


def changed(data: bytes, offset: int, value: bytes, *, crc: bool = True) -> bytes:
    out = bytearray(data)
    out[offset : offset + len(value)] = value
    return with_crc(out) if crc else bytes(out)


BAD_CRC = HEARTBEAT[:-1] + bytes([HEARTBEAT[-1] ^ 1])


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


@pytest.fixture
def records():
    """What the plugin's sink would record, for this test's one case."""
    kept: list[GrammarRecord] = []
    node_grammar.begin_case("ripp.test.server.reader", kept.append)
    yield kept
    node_grammar.begin_case("", None)


async def peer_reading(chunks: list[bytes], role: str = "server") -> tuple[RippPeer, object]:
    """A peer reading a target of ``role`` on a connection whose other end
    writes ``chunks``, each in a write of its own, then stays open."""
    conn, server = await connection_to_writer(chunks)
    return RippPeer(conn, role), server


@pytest.mark.parametrize(
    ("role", "grammar_case"), [("server", SERVER_GRAMMAR), ("client", CLIENT_GRAMMAR)]
)
def test_an_envelope_breaking_the_grammar_is_the_grammar_case_of_the_target_role(
    records, role, grammar_case
):
    async def main():
        # A valid envelope, then the bad one split across two writes: the
        # offset is where the bad envelope starts in all the target's bytes.
        peer, server = await peer_reading([NEGOTIATION + BAD_CRC[:10], BAD_CRC[10:]], role)
        async with server:
            got = await peer.next_envelope("the Schema_negotiation")
            assert isinstance(got.message, SchemaNegotiation)
            with pytest.raises(NodeGrammarViolation, match="check crc") as info:
                await peer.next_envelope("a Heartbeat")
            peer.conn.abort()
        violation = info.value
        assert violation.grammar_case == grammar_case
        assert violation.record.offset == len(NEGOTIATION)
        assert violation.record.direction == f"{role} to harness"
        assert violation.record.connection == "grammar test"
        assert BAD_CRC.startswith(violation.data) and violation.size == len(BAD_CRC)
        assert "a Heartbeat: the target's envelope breaks the envelope grammar" in str(violation)
        assert [record.grammar_case for record in records] == [grammar_case]
        assert records[0].data_hex.startswith(BAD_CRC[:8].hex())

    run(main())


@pytest.mark.parametrize(
    ("bad", "check"),
    [
        (changed(HEARTBEAT, 0, b"RIPQ"), "magic"),
        (changed(HEARTBEAT, 4, b"\x02"), "version"),
        (changed(HEARTBEAT, 5, b"\x09"), "type"),
        (BAD_CRC, "crc"),
    ],
)
def test_each_envelope_check_of_the_grammar_is_the_grammar_case(records, bad, check):
    async def main():
        peer, server = await peer_reading([bad])
        async with server:
            with pytest.raises(NodeGrammarViolation, match=f"check {check}") as info:
                await peer.next_envelope("an envelope")
            peer.conn.abort()
        assert info.value.record.offset == 0
        assert len(records) == 1

    run(main())


@pytest.mark.parametrize("length", [-1, MAX_PAYLOAD + 1])
def test_a_length_field_out_of_the_profile_bound_is_the_grammar_case(records, length):
    async def main():
        header = changed(HEARTBEAT, 55, struct.pack("<i", length), crc=False)[:59]
        peer, server = await peer_reading([header])
        async with server:
            with pytest.raises(NodeGrammarViolation, match=f"payload of {length} bytes"):
                await peer.next_envelope("an envelope")
            peer.conn.abort()
        assert [record.data_hex for record in records] == [header.hex()]

    run(main())


def test_an_envelope_read_after_the_break_raises_again_without_a_second_record(records):
    async def main():
        peer, server = await peer_reading([BAD_CRC + HEARTBEAT])
        async with server:
            with pytest.raises(NodeGrammarViolation):
                await peer.next_envelope("an envelope")
            with pytest.raises(NodeGrammarViolation) as again:
                await peer.next_envelope("another envelope")
            peer.conn.abort()
        assert again.value.grammar_case == SERVER_GRAMMAR
        assert len(records) == 1, records

    run(main())


def test_flags_payload_and_fingerprint_stay_the_reading_case(records):
    """Non-zero flags (read anyway, or refused with allow_flags=False), a
    payload that does not decode, and a control message's fingerprint are
    no envelope grammar: plain ProtocolViolations, nothing recorded."""

    async def main():
        flagged = changed(HEARTBEAT, 6, b"\x01")
        peer, server = await peer_reading([flagged + flagged])
        async with server:
            got = await peer.next_envelope("a Heartbeat with flags 1")
            assert got.envelope.flags == 1
            with pytest.raises(ProtocolViolation) as flags:
                await peer.next_envelope("a Heartbeat with flags 1", allow_flags=False)
            peer.conn.abort()
        assert not isinstance(flags.value, NodeGrammarViolation)
        undecodable = with_crc(HEARTBEAT[:59] + b"\xff" * (len(HEARTBEAT) - 63) + bytes(4))
        fingerprinted = changed(HEARTBEAT, 23, b"f" * 32)
        for bad in (undecodable, fingerprinted):
            peer, server = await peer_reading([bad])
            async with server:
                with pytest.raises(ProtocolViolation) as plain:
                    await peer.next_envelope("a Heartbeat")
                peer.conn.abort()
            assert not isinstance(plain.value, NodeGrammarViolation), plain.value
        assert records == []

    run(main())

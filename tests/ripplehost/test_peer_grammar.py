"""The harness's reader of a Ripple host target (conformance/suites/ripplehost/
peer.py) and the node grammar (core/node_grammar.py): a frame of the
target's that breaks the frame grammar is a NodeGrammarViolation of the
grammar case of the target's role, recorded once with the offset of the
frame in the target's bytes and the bytes; what is no frame grammar (a
message the profile cannot read, a flood of frames) stays a plain
ProtocolViolation of the case that read it."""

from __future__ import annotations

import asyncio

import pytest

from conformance.core import node_grammar
from conformance.core.node_grammar import GrammarRecord, NodeGrammarViolation
from conformance.core.transport import ProtocolViolation
from conformance.suites.ripplehost import peer as peer_module
from conformance.suites.ripplehost.peer import ACCEPTOR, INITIATOR, RipplePeer, describe_bytes
from conformance.suites.ripplehost.prerequisites import CLIENT_GRAMMAR, SERVER_GRAMMAR
from reference_impl.ripplehost.frame import Frame, encode_frame, encode_message

from ..scripted_writer import connection_to_writer

PONG = encode_message("RPY", 2, {"type": "pong"})
BAD_SIZE = b'RPY 1.0 4 . 14\r\n{"type":"pong"}END\r\n'
"""An RPY whose size says one content byte fewer than it carries."""


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


@pytest.fixture
def records():
    """What the plugin's sink would record, for this test's one case."""
    kept: list[GrammarRecord] = []
    node_grammar.begin_case("ripplehost.test.server.reader", kept.append)
    yield kept
    node_grammar.begin_case("", None)


async def peer_reading(chunks: list[bytes], role: str = INITIATOR) -> tuple[RipplePeer, object]:
    """A peer of ``role`` on a connection whose other end writes ``chunks``,
    each in a write of its own, then stays open."""
    conn, server = await connection_to_writer(chunks)
    return RipplePeer(conn, role), server


@pytest.mark.parametrize(
    ("role", "grammar_case", "direction"),
    [(INITIATOR, SERVER_GRAMMAR, "server"), (ACCEPTOR, CLIENT_GRAMMAR, "client")],
)
def test_a_frame_breaking_the_grammar_is_the_grammar_case_of_the_target_role(
    records, role, grammar_case, direction
):
    async def main():
        # A valid frame, then the bad one split across two reads: the offset
        # is where the bad frame starts in all the target's bytes.
        peer, server = await peer_reading([PONG + BAD_SIZE[:10], BAD_SIZE[10:]], role)
        async with server:
            frame = await peer.next_frame("the answer to a ping")
            assert (frame.type, frame.msgno) == ("RPY", 2)
            with pytest.raises(NodeGrammarViolation, match="missing END trailer") as info:
                await peer.next_frame("the answer to an echo")
            peer.conn.abort()
        violation = info.value
        assert violation.grammar_case == grammar_case
        assert violation.record.offset == len(PONG)
        assert violation.record.direction == f"{direction} to harness"
        assert violation.record.connection == "grammar test"
        assert violation.data.startswith(b"RPY 1.0 4 . 14\r\n")
        assert "Ripple host frame grammar where the answer to an echo was due" in str(violation)
        assert [record.grammar_case for record in records] == [grammar_case]
        assert records[0].data_hex.startswith(b"RPY 1.0 4".hex())

    run(main())


def test_valid_frames_read_with_the_bad_one_are_read_first(records):
    """A case whose answer came whole before the bad frame, in one read,
    gets it; the read after it raises the violation at once (no frame can
    follow a bad one), recorded once with the bad frame's offset."""

    async def main():
        peer, server = await peer_reading([PONG + BAD_SIZE])
        async with server:
            frame = await peer.next_frame("the answer to a ping")
            assert (frame.type, frame.msgno) == ("RPY", 2)
            assert len(records) == 1 and records[0].offset == len(PONG)
            with pytest.raises(NodeGrammarViolation, match="missing END trailer"):
                await peer.next_frame("the answer to an echo", deadline=20)
            peer.conn.abort()
        assert len(records) == 1

    run(main())


def test_a_frame_read_after_the_break_raises_again_without_a_second_record(records):
    async def main():
        peer, server = await peer_reading([BAD_SIZE])
        async with server:
            with pytest.raises(NodeGrammarViolation):
                await peer.next_frame("an answer")
            with pytest.raises(NodeGrammarViolation) as again:
                await peer.next_frame("another answer")
            peer.conn.abort()
        assert again.value.grammar_case == SERVER_GRAMMAR
        assert len(records) == 1, records

    run(main())


def test_a_size_over_the_profile_bound_is_a_grammar_break_not_a_bound_of_the_harness(records):
    """The profile's 65536 (section 2) is part of the frame format: checked
    from the header, before any content is read."""

    async def main():
        peer, server = await peer_reading([b"RPY 1.0 2 . 65537\r\n"])
        async with server:
            with pytest.raises(NodeGrammarViolation, match="size above bound"):
                await peer.next_frame("an answer")
            peer.conn.abort()

    run(main())


def test_a_header_line_over_512_bytes_is_a_grammar_break(records):
    async def main():
        peer, server = await peer_reading([b"RPY " + b"1" * 600])
        async with server:
            with pytest.raises(NodeGrammarViolation, match="header line too long"):
                await peer.next_frame("an answer")
            peer.conn.abort()

    run(main())


def test_a_message_the_profile_cannot_read_stays_the_reading_case_s(records):
    """Content that is no JSON object is the message format (profile
    section 3), not the frame grammar: every frame was read."""

    async def main():
        not_json = encode_frame(Frame("RPY", "1.0", 2, False, b"x"))
        peer, server = await peer_reading([not_json])
        async with server:
            with pytest.raises(ProtocolViolation, match="message is not JSON") as info:
                await peer.next_message("an answer")
            peer.conn.abort()
        assert not isinstance(info.value, NodeGrammarViolation)
        assert records == []

    run(main())


def test_a_flood_of_frames_stays_the_reading_case_s(records, monkeypatch):
    monkeypatch.setattr(peer_module, "MAX_FRAMES_WHILE_WAITING", 3)
    chunk = encode_message("RPY", 2, {"type": "pong"}, chunk_size=2)

    async def main():
        peer, server = await peer_reading([chunk])
        async with server:
            with pytest.raises(ProtocolViolation, match="over 3 frames") as info:
                await peer.next_message("an answer")
            peer.conn.abort()
        assert not isinstance(info.value, NodeGrammarViolation)
        assert records == []

    run(main())


def test_describe_bytes_still_shows_a_broken_frame_with_its_reason():
    """The helpers that re-read bytes for messages (after a forged frame)
    describe them as before: they judge no grammar."""
    assert describe_bytes(PONG + BAD_SIZE).startswith(
        "bytes that break the grammar (missing END trailer): "
    )

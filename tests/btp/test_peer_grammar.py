"""What the BTP suite's peer makes of the packets a node sends
(conformance/suites/btp/peer.py, core/node_grammar.py), over a real
WebSocket connection: each message that is no readable packet raises the
violation of its grammar case (the role's, or canonical-lengths for a
length in long form), recorded for the run; bytes after the envelope and
two entries of one name are recorded without raising, the packet read."""

from __future__ import annotations


import pytest
from websockets.asyncio.server import serve

from conformance.core.node_grammar import NodeGrammarViolation
from conformance.core.transport import WireTrace
from conformance.core.websocket import WebSocketConnection
from conformance.suites.btp.peer import BtpPeer
from conformance.suites.btp.prerequisites import CANONICAL, CLIENT_GRAMMAR, SERVER_GRAMMAR
from reference_impl.btp.packet import ContentType, ProtocolDataEntry, Response, encode_packet

NOTE = ProtocolDataEntry("note", ContentType.TEXT_PLAIN_UTF8, b"x")
SENT: list[bytes | str] = [
    encode_packet(Response(1)) + b"\x0a\x0b",  # bytes after the envelope: read, recorded
    encode_packet(Response(2, (NOTE, NOTE))),  # two entries of one name: read, recorded
    bytes.fromhex("010000000381020100"),  # the envelope's length in long form: canonical's
    bytes.fromhex("0100000004030100"),  # length prefix beyond end: the grammar's
    "a text message",
    encode_packet(Response(6)),  # a plain packet: nothing recorded
]


@pytest.mark.parametrize(
    ("role", "grammar_case"), [("server", SERVER_GRAMMAR), ("client", CLIENT_GRAMMAR)]
)
async def test_each_message_is_judged_by_its_grammar_case(grammar_records, role, grammar_case):
    async def sender(ws):
        for message in SENT:
            await ws.send(message)
        await ws.wait_closed()

    async with serve(sender, "127.0.0.1", 0, compression=None, ping_interval=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        conn = await WebSocketConnection.open(f"ws://127.0.0.1:{port}/", WireTrace(), deadline=2.0)
        peer = BtpPeer(conn, role=role)
        assert (await peer.next_packet("the first answer")).request_id == 1
        assert (await peer.next_packet("the second answer")).request_id == 2
        raised = []
        for what in ("the third answer", "the fourth answer", "the fifth answer"):
            with pytest.raises(NodeGrammarViolation) as caught:
                await peer.next_packet(what)
            raised.append(caught.value.grammar_case)
        assert (await peer.next_packet("the sixth answer")).request_id == 6
        await conn.close()
    # A non-canonical length is the canonical case's where the target is a
    # server (the client role has no case of that rule alone).
    canonical = CANONICAL if role == "server" else grammar_case
    assert raised == [canonical, grammar_case, grammar_case]
    assert [(r.grammar_case, r.case_id, r.direction) for r in grammar_records] == [
        (grammar_case, "a.case.id", f"{role} to harness"),
        (grammar_case, "a.case.id", f"{role} to harness"),
        (canonical, "a.case.id", f"{role} to harness"),
        (grammar_case, "a.case.id", f"{role} to harness"),
        (grammar_case, "a.case.id", f"{role} to harness"),
    ]
    rules = [r.rule for r in grammar_records]
    assert rules[0].startswith("2 byte(s) after the envelope of the packet where the first answer")
    assert grammar_records[0].data_hex == "01000000010201000a0b"
    assert "protocol data entries of one name ('note')" in rules[1]
    assert "not canonical OER" in rules[2] and "non-canonical length" in rules[2]
    assert grammar_records[2].data_hex == "010000000381020100"
    assert (
        "length prefix beyond end" in rules[3] and grammar_records[3].data_hex == "0100000004030100"
    )
    assert rules[4].startswith("a text WebSocket message where the fifth answer")

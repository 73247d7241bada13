"""The SSB suite's reading of the RPC messages a node sends
(conformance/suites/ssb/session.py TargetRpcDecoder, core/node_grammar.py):
every message is judged by the RPC message format as it is decoded; a
header the format refuses raises the violation of the role's grammar case,
recorded once (every later read raises it again, unrecorded); a body that
does not read as its type says is recorded at once and raised only when a
case reads that body; the harness's own bound on a body's length is no
grammar. Each violation is still an RpcError, as the suite's code catches."""

from __future__ import annotations

import pytest

from conformance.core.node_grammar import NodeGrammarViolation
from conformance.core.transport import ProtocolViolation
from conformance.suites.ssb.prerequisites import CLIENT_GRAMMAR, SERVER_GRAMMAR
from conformance.suites.ssb.session import TargetRpcDecoder
from reference_impl.ssb.rpc import RpcError, RpcMessage, encode_header


@pytest.mark.parametrize(
    ("grammar_case", "direction"),
    [(SERVER_GRAMMAR, "server to harness"), (CLIENT_GRAMMAR, "client to harness")],
)
def test_bodies_are_judged_as_decoded_and_raised_where_read(
    grammar_records, grammar_case, direction
):
    decoder = TargetRpcDecoder(1 << 20, grammar_case, direction, "connection 1")
    good = RpcMessage.from_json(-1, {"ok": True}, stream=True)
    bad_json = encode_header(0x0A, 5, -1) + b'{"ok"'  # stream, JSON
    bad_text = encode_header(0x09, 2, -1) + b"\xff\xfe"  # stream, string
    messages = decoder.receive_data(good.encode() + bad_json + bad_text)
    assert [m.req for m in messages] == [-1, -1, -1]
    assert messages[0].json() == {"ok": True}
    # Recorded as decoded, whether or not a case reads the body.
    assert [(r.grammar_case, r.case_id, r.direction, r.connection) for r in grammar_records] == [
        (grammar_case, "a.case.id", direction, "connection 1")
    ] * 2
    assert (
        "JSON body does not read as its body type says (invalid JSON body"
        in grammar_records[0].rule
    )
    assert grammar_records[0].data_hex == (bad_json).hex()
    assert (
        "STRING body does not read as its body type says (invalid UTF-8 body"
        in grammar_records[1].rule
    )
    for message, reader in ((messages[1], "json"), (messages[2], "text")):
        with pytest.raises(NodeGrammarViolation) as caught:
            getattr(message, reader)()
        assert isinstance(caught.value, RpcError) and caught.value.grammar_case == grammar_case
        with pytest.raises(NodeGrammarViolation):
            message.value()
    assert len(grammar_records) == 2  # raised again where read, not recorded again


def test_a_header_the_format_refuses_breaks_the_stream_once(grammar_records):
    decoder = TargetRpcDecoder(1 << 20, SERVER_GRAMMAR, "server to harness")
    with pytest.raises(NodeGrammarViolation) as caught:
        decoder.receive_data(encode_header(0x0B, 2, -1) + b"{}")  # body type 3
    assert isinstance(caught.value, RpcError) and caught.value.reason == "unknown body type"
    assert (
        "RPC bytes that break the RPC message format (unknown body type" in grammar_records[0].rule
    )
    with pytest.raises(NodeGrammarViolation):
        decoder.receive_data(RpcMessage.from_json(-1, True).encode())
    assert len(grammar_records) == 1


def test_a_body_over_the_harness_bound_is_no_grammar(grammar_records):
    decoder = TargetRpcDecoder(16, SERVER_GRAMMAR, "server to harness")
    with pytest.raises(ProtocolViolation) as caught:
        decoder.receive_data(encode_header(0x02, 17, -1))
    assert not isinstance(caught.value, NodeGrammarViolation)
    assert isinstance(caught.value, RpcError) and "body length exceeds limit" in str(caught.value)
    assert grammar_records == []

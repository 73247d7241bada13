"""RPC protocol, target as responder: body types and JSON on the wire
(SSB guide, "RPC protocol", "Header structure", "Source example")."""

from __future__ import annotations

import json

from conformance.core.node_grammar import exchange_cut_short
from conformance.core.requirements import requirement

from .prerequisites import HANDSHAKE, SERVER_GRAMMAR, reading_the_feed
from .session import describe

NUMBERING = "ssb.rpc.server.responses-use-negated-request-number"
STREAM_END = "ssb.rpc.server.ends-source-stream-with-true"
READS_STREAM = [
    "ssb.shs.server.completes-valid-handshake",
    NUMBERING,
    "ssb.rpc.server.source-responses-set-stream-flag",
    STREAM_END,
]


def compact(value) -> bytes:
    """``value`` as JSON.stringify writes it: no whitespace, key order kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@requirement(
    "ssb.rpc.server.json-bodies-have-json-type",
    "MUST",
    "SSB guide, RPC protocol, Header structure; Source example (the responses' body type is JSON)",
    depends=READS_STREAM,
    basis="wire-format: RPC header body type (rpc_header figure: 10 = JSON)",
)
async def test_json_bodies_declare_json_body_type(open_session, server_feed_id):
    """Every createHistoryStream response and the end are JSON; the low two
    flag bits must say so (2). A body of type JSON that does not parse
    breaks the RPC message format, the grammar case's rule (reading it
    raises that case's violation: this one is blocked by it)."""
    session = await open_session()
    req = await session.request(["createHistoryStream"], [{"id": server_feed_id, "keys": False}])
    with reading_the_feed():
        items, end = await session.collect_stream(req, "the feed")
    wrong = []
    for msg in items + [end]:
        if msg.body_type.name != "JSON":
            wrong.append(
                f"body type {msg.body_type.name} (flags 0x{msg.flags:02x}): {describe(msg)}"
            )
            continue
        msg.json()
    assert not wrong, "responses whose header does not declare their JSON body:\n" + "\n".join(
        wrong
    )


@requirement(
    "ssb.rpc.server.json-without-whitespace",
    "SHOULD",
    "SSB guide, RPC protocol, Source example (\"JSON messages don't have indentation or whitespace "
    'when sent over the wire")',
    depends=READS_STREAM,
    basis="inference: the guide says JSON 'don't have indentation or whitespace when sent over the wire' as a fact of the network, and indented JSON still parses",
)
async def test_json_bodies_have_no_whitespace(open_session, server_feed_id):
    """Compared with the compact form of the same value, key order kept.
    SHOULD: indented JSON still parses, so peers interoperate; the guide
    states the form the network uses."""
    session = await open_session()
    req = await session.request(["createHistoryStream"], [{"id": server_feed_id, "limit": 2}])
    items, end = await session.collect_stream(req, "two messages")
    loose = [
        describe(m)
        for m in items + [end]
        if m.body_type.name == "JSON" and m.body != compact(json.loads(m.body))
    ]
    assert not loose, "JSON bodies with indentation or whitespace outside strings:\n" + "\n".join(
        loose
    )


RPC_FORMAT = (
    "SSB guide, RPC protocol, Header structure (flags: stream, end/err and the body type, 0 binary, "
    "1 UTF-8 string, 2 JSON; a u32 body length; an i32 request number)"
)
RPC_FORMAT_BASIS = (
    "wire-format: the RPC header figure (img/rpc_header.png) fixes the header's fields and the body "
    "types; a body of type JSON is JSON, one of type string UTF-8 text, and only the zeroed header "
    "is the goodbye, after which nothing comes; a peer cannot read a message that breaks them"
)


@requirement(
    SERVER_GRAMMAR,
    "MUST",
    RPC_FORMAT,
    basis=RPC_FORMAT_BASIS,
    grammar=True,
)
async def test_sends_well_formed_messages(open_session, server_feed_id, wire_trace, node_grammar):
    """Every RPC message the server sent in this run, in every case's
    traffic, keeps the RPC message format (session.TargetRpcDecoder): the
    violations the other cases met (each of them blocked by this case) and
    those of its own exchange, which shows the kinds of message a server
    sends (a source stream's data and its end, the error answering an
    async request of an unknown procedure). A box that does not decrypt is
    the box stream's cases', a body over the harness's bound no grammar."""
    with node_grammar.judging():
        read = 0
        with exchange_cut_short(wire_trace):
            session = await open_session()
            req = await session.request(
                ["createHistoryStream"], [{"id": server_feed_id, "limit": 2}]
            )
            items, end = await session.collect_stream(req, "two messages of the server's feed")
            read += len(items) + 1
            req = await session.request(["conformance", "noSuchProcedure"], [], "async")
            await session.next_message(req, "the answer to an async request of no procedure")
            read += 1
        if not read:
            node_grammar.nothing_to_judge(
                (HANDSHAKE, NUMBERING),
                "the server answered none of the requests, so there was nothing to judge",
            )

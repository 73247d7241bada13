"""RPC protocol, target as responder: body types and JSON on the wire
(SSB guide, "RPC protocol", "Header structure", "Source example")."""

from __future__ import annotations

import json

from conformance.core.requirements import requirement

from .prerequisites import reading_the_feed
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
    flag bits must say so (2), and the body must then parse as JSON."""
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
        try:
            json.loads(msg.body)
        except ValueError as exc:
            wrong.append(f"body type JSON but the body does not parse ({exc}): {describe(msg)}")
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

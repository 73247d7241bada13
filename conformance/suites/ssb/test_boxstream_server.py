"""Box stream after the handshake, target as server (SSB guide, "Box stream", "RPC protocol")."""

from __future__ import annotations


from conformance.core.requirements import blocked, requirement

from reference_impl.ssb.boxstream import BoxStreamError
from reference_impl.ssb.rpc import RpcError

from .prerequisites import FEED_STATE, KEYS_FALSE, LIMIT_DEFAULT, NUMBERING, READS_STREAM, SESSION
from .session import MAX_BOX_BODY, describe, flip_byte

HEADER_BOX_SIZE = 34
SPLIT_ACROSS_BOXES = "ssb.boxstream.server.accepts-rpc-split-across-boxes"
"""The 6000-byte post reaches the target in a publish request split over boxes."""


def history_request(session, feed_id: str, **options):
    return session.request_message(["createHistoryStream"], [{"id": feed_id, **options}])


async def show_session_answers(session, feed_id: str, before: str) -> None:
    """The valid counterpart of a negative case, on the same connection and
    before the invalid step: a request in an intact box gets its first
    answer. A target that hangs up right after the handshake would otherwise
    pass every "ends on tampered ..." case."""
    request = history_request(session, feed_id, limit=1)
    await session.send_rpc_bytes(
        request.encode(), f"valid counterpart first: RPC request {request.req} in an intact box"
    )
    try:
        await session.next_message(
            request.req, f"the answer to a request in an intact box, before {before}"
        )
    except AssertionError as exc:  # no answer in time, a hang-up, or bytes that do not decrypt
        blocked(
            NUMBERING,
            "failed within this case",
            f"a valid request on this connection got no answer ({exc}), so what the target does "
            f"after {before} shows nothing",
        )


async def send_tampered_box_and_expect_close(
    session, feed_id: str, flip_at: int, what: str
) -> None:
    """A request in a box with one bit flipped: the target must not answer
    it and must end the connection."""
    await show_session_answers(session, feed_id, f"a box with a tampered {what}")
    request = history_request(session, feed_id, limit=1)
    box = session.encoder.encode(request.encode())
    await session.conn.send(flip_byte(box, flip_at), f"box with one bit of its {what} flipped")
    closed, data = await session.conn.await_close()
    answered = _answers_in(session, data, request.req)
    assert not answered, f"target answered a request carried in a tampered box: {answered}"
    assert closed, (
        f"target kept the connection open {session.conn.deadline} s after a tampered {what}"
    )


@requirement(
    "ssb.boxstream.server.ends-on-tampered-header",
    "MUST",
    'SSB guide, Box stream ("designed to protect messages from being ... modified"), Receiving',
    depends=SESSION,
    basis="profile: S2 a box that does not open ends the stream (a header that does not open: no answer to what it carries, close), docs/ssb-profile.md",
)
async def test_ends_connection_on_tampered_header(open_session, server_feed_id):
    """A box whose encrypted header was altered does not authenticate; the
    target must end the connection rather than read on."""
    await send_tampered_box_and_expect_close(await open_session(), server_feed_id, 5, "header")


@requirement(
    "ssb.boxstream.server.ends-on-tampered-body",
    "MUST",
    "SSB guide, Box stream, Receiving (the body's secret box must open)",
    depends=SESSION,
    basis="profile: S2 a box that does not open ends the stream (a body that does not open: no answer to what it carries, close), docs/ssb-profile.md",
)
async def test_ends_connection_on_tampered_body(open_session, server_feed_id):
    await send_tampered_box_and_expect_close(
        await open_session(), server_feed_id, HEADER_BOX_SIZE + 3, "body"
    )


def _answers_in(session, data: bytes, req: int) -> list[str]:
    """Answers to our request ``req`` in what the target sent before closing.
    The target's own requests to us (a peer may call us at any time) are not
    answers; undecodable bytes are not judged here -- the case is about closing."""
    try:
        bodies = session.decoder.receive_data(data)
        msgs = [m for b in bodies for m in session.rpc_decoder.receive_data(b)]
    except (BoxStreamError, RpcError):
        return []
    return [describe(m) for m in msgs if m.req == -req]


@requirement(
    "ssb.boxstream.server.closes-after-goodbye",
    "SHOULD",
    'SSB guide, Box stream, Goodbye ("they will know that the connection is finished")',
    depends=SESSION,
    basis="inference: after the goodbye a receiver 'will know that the connection is finished', so a peer that keeps it open holds a finished connection",
)
async def test_closes_after_goodbye(open_session, server_feed_id):
    """After the harness's RPC and box stream goodbyes, the target ends the
    connection; anything it sends first must still be a valid box stream.
    The session must first be seen working: closing a session that was
    never served shows nothing about goodbyes."""
    session = await open_session()
    await show_session_answers(session, server_feed_id, "the goodbyes")
    await session.goodbye()
    closed, data = await session.conn.await_close()
    if data:
        # What it sends on the way out must be authentic: at most its own goodbyes.
        session.decoder.receive_data(data)
    assert closed, (
        f"target kept the connection open {session.conn.deadline} s after the peer's goodbye"
    )


@requirement(
    "ssb.boxstream.server.accepts-rpc-split-across-boxes",
    "MUST",
    'SSB guide, RPC protocol ("a single RPC message may be split over several boxes")',
    depends=READS_STREAM,
    basis="wire-format: RPC messages over the box stream, RPC protocol (rpc_alignment figure): they are not aligned to boxes, so a reader of the format reassembles one split over several boxes",
)
async def test_accepts_rpc_message_split_across_boxes(open_session, server_feed_id):
    session = await open_session()
    msg = history_request(session, server_feed_id, limit=1)
    wire = msg.encode()
    # Header alone, then the body in two unequal pieces: three boxes.
    for piece, note in (
        (wire[:9], "box 1: the RPC header only"),
        (wire[9:20], "box 2: first 11 body bytes"),
        (wire[20:], "box 3: rest of the body"),
    ):
        await session.conn.send(session.encoder.encode_box(piece), note)
    items, end = await session.collect_stream(msg.req, "the answer to a request split over 3 boxes")
    assert items, f"target ended the stream without the feed's first message: {describe(end)}"


@requirement(
    "ssb.boxstream.server.accepts-several-rpc-per-box",
    "MUST",
    'SSB guide, RPC protocol ("Multiple RPC messages may be put inside one box")',
    depends=READS_STREAM,
    basis="wire-format: RPC messages over the box stream, RPC protocol (rpc_alignment figure): they are not aligned to boxes, so a reader of the format reads several from one box",
)
async def test_accepts_several_rpc_messages_in_one_box(open_session, server_feed_id):
    session = await open_session()
    first = history_request(session, server_feed_id, limit=1)
    second = history_request(session, server_feed_id, limit=1, keys=False)
    await session.conn.send(
        session.encoder.encode_box(first.encode() + second.encode()),
        f"one box holding requests {first.req} and {second.req}",
    )
    for msg in (first, second):
        items, end = await session.collect_stream(msg.req, f"the answer to request {msg.req}")
        assert items, f"request {msg.req} (shared a box) got no message: {describe(end)}"


@requirement(
    "ssb.boxstream.server.splits-large-messages",
    "MUST",
    "SSB guide, Box stream (bodies of at most 4096 bytes; README of the specs)",
    needs=("publish",),
    depends=[*READS_STREAM, KEYS_FALSE, LIMIT_DEFAULT, SPLIT_ACROSS_BOXES],
    shares=[FEED_STATE],
    basis="wire-format: box stream body length, 1 to 4096 bytes (box_stream_send figure)",
)
async def test_splits_rpc_messages_larger_than_a_box(open_session, publish, server_feed_id):
    """A message longer than one box body must reach us split over several
    boxes of at most 4096 bytes each (our decoder refuses longer bodies)."""
    text = "x" * 6000
    await publish(text)
    session = await open_session()
    req = await session.request(["createHistoryStream"], [{"id": server_feed_id, "keys": False}])
    items, end = await session.collect_stream(req, "the feed including a 6000-byte post")
    texts = [
        item.json().get("content", {}).get("text")
        for item in items
        if item.body_type.name == "JSON"
    ]
    assert text in texts, f"the 6000-byte post did not arrive intact; end: {describe(end)}"
    biggest = max(len(b) for b in session.box_bodies)
    assert biggest <= MAX_BOX_BODY, f"target sent a {biggest}-byte box body"
    assert len(session.box_bodies) >= 2, "a >4096-byte RPC message cannot fit one box"

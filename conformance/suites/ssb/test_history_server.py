"""createHistoryStream option semantics, target as responder
(SSB guide, "createHistoryStream")."""

from __future__ import annotations

from conformance.core.requirements import not_applicable, requirement

from .session import describe, error_body

CITE = "SSB guide, createHistoryStream"


async def history(session, options: dict, what: str):
    req = await session.request(["createHistoryStream"], [options])
    items, end = await session.collect_stream(req, what)
    return items, end


def values(items) -> list[dict]:
    """Message values of keys:true items (``value``) or keys:false items."""
    out = []
    for item in items:
        body = item.json()
        out.append(body["value"] if isinstance(body, dict) and "value" in body and "key" in body else body)
    return out


def sequences(items) -> list[int]:
    return [v.get("sequence") if isinstance(v, dict) else None for v in values(items)]


async def full_feed(open_session, feed_id: str) -> list[dict]:
    session = await open_session()
    items, end = await history(session, {"id": feed_id, "keys": False}, "the whole feed")
    assert end.body.strip() == b"true", f"serving the whole feed ended with an error: {describe(end)}"
    return values(items)


def need_messages(feed: list[dict], count: int) -> None:
    if len(feed) < count:
        not_applicable(f"the target's feed holds {len(feed)} message(s); this case needs {count}")


@requirement("ssb.history.server.serves-whole-feed-in-order", "MUST", f"{CITE} (id; sequence default: from the beginning)")
async def test_serves_whole_feed_in_order(open_session, server_feed_id):
    session = await open_session()
    items, end = await history(session, {"id": server_feed_id}, "the whole feed")
    seqs = sequences(items)
    assert seqs, f"the target's own feed came back empty: {describe(end)}"
    assert seqs == list(range(1, len(seqs) + 1)), f"expected sequences 1..{len(seqs)} in order, got {seqs}"


@requirement("ssb.history.server.keys-default-true", "MUST", f"{CITE} (keys ... Default: true)")
async def test_keys_default_true(open_session, server_feed_id):
    session = await open_session()
    items, _ = await history(session, {"id": server_feed_id, "limit": 1}, "the first message, keys not given")
    assert items, "no message served"
    body = items[0].json()
    assert isinstance(body, dict) and {"key", "value", "timestamp"} <= set(body), (
        f"without keys the items must be {{key, value, timestamp}} objects; got {describe(items[0])}")


@requirement("ssb.history.server.keys-false-sends-bare-messages", "MUST", f"{CITE} (keys: \"If false, just send the messages themselves\")")
async def test_keys_false_sends_messages_only(open_session, server_feed_id):
    session = await open_session()
    items, _ = await history(session, {"id": server_feed_id, "limit": 1, "keys": False}, "the first message, keys false")
    assert items, "no message served"
    body = items[0].json()
    assert isinstance(body, dict) and "author" in body and "signature" in body and "key" not in body, (
        f"with keys false an item must be the message itself; got {describe(items[0])}")


@requirement("ssb.history.server.sequence-is-exclusive", "MUST", f"{CITE} (sequence: \"Only return messages later than this sequence number\")")
async def test_sequence_returns_later_messages_only(open_session, server_feed_id):
    feed = await full_feed(open_session, server_feed_id)
    need_messages(feed, 3)
    session = await open_session()
    items, _ = await history(session, {"id": server_feed_id, "sequence": 2, "keys": False}, "messages after sequence 2")
    seqs = sequences(items)
    assert seqs == list(range(3, len(feed) + 1)), (
        f"sequence 2 must give the messages later than 2, i.e. {list(range(3, len(feed) + 1))}; got {seqs}"
        + (f"; first item {describe(items[0])}" if items else ""))


@requirement("ssb.history.server.accepts-seq-alias", "SHOULD", f"{CITE} (\"both sequence and seq should be accepted\")")
async def test_accepts_seq_as_legacy_name(open_session, server_feed_id):
    feed = await full_feed(open_session, server_feed_id)
    need_messages(feed, 3)
    session = await open_session()
    by_seq, _ = await history(session, {"id": server_feed_id, "seq": 2, "keys": False}, "messages, seq 2")
    by_sequence, _ = await history(session, {"id": server_feed_id, "sequence": 2, "keys": False}, "messages, sequence 2")
    assert sequences(by_seq) == sequences(by_sequence), (
        f"seq 2 gave {sequences(by_seq)}, sequence 2 gave {sequences(by_sequence)}: seq is not accepted as sequence")


@requirement("ssb.history.server.rejects-conflicting-seq-and-sequence", "MUST",
             f"{CITE} (\"both sequence and seq arguments with conflicting values must be considered an error\")")
async def test_rejects_conflicting_seq_and_sequence(open_session, server_feed_id):
    feed = await full_feed(open_session, server_feed_id)
    need_messages(feed, 3)
    session = await open_session()
    by_seq, _ = await history(session, {"id": server_feed_id, "seq": 2, "keys": False}, "messages, seq 2")
    by_sequence, _ = await history(session, {"id": server_feed_id, "sequence": 2, "keys": False}, "messages, sequence 2")
    if sequences(by_seq) != sequences(by_sequence):
        not_applicable("the target does not accept seq as sequence, and the rule applies only "
                       "\"if that behaviour is supported\"")
    req = await session.request(["createHistoryStream"], [{"id": server_feed_id, "sequence": 1, "seq": 3}])
    msg = await session.next_message(req, "the answer to conflicting sequence 1 / seq 3")
    assert msg.end and error_body(msg) is not True, (
        f"conflicting sequence and seq must end the stream with an error; first answer: {describe(msg)}")


@requirement("ssb.history.server.limit-caps-messages", "MUST", f"{CITE} (limit: \"only the earliest messages are returned\")")
async def test_limit_returns_earliest_messages(open_session, server_feed_id):
    feed = await full_feed(open_session, server_feed_id)
    need_messages(feed, 3)
    session = await open_session()
    items, _ = await history(session, {"id": server_feed_id, "limit": 2, "keys": False}, "two messages")
    assert sequences(items) == [1, 2], f"limit 2 must give sequences [1, 2]; got {sequences(items)}"


@requirement("ssb.history.server.missing-id-is-an-error", "SHOULD", f"{CITE} (id: \"Required\")")
async def test_missing_id_is_an_error(open_session):
    session = await open_session()
    req = await session.request(["createHistoryStream"], [{"limit": 1}])
    msg = await session.next_message(req, "the answer to createHistoryStream without id")
    assert msg.end and error_body(msg) is not True, f"a request without id should end with an error; got {describe(msg)}"


@requirement("ssb.history.server.live-sends-new-messages", "MUST", f"{CITE} (live: \"keep the stream alive and send new messages\")",
             needs=("publish",))
async def test_live_stream_delivers_new_messages(open_session, publish, server_feed_id, deadline):
    feed = await full_feed(open_session, server_feed_id)
    session = await open_session()
    req = await session.request(["createHistoryStream"],
                                [{"id": server_feed_id, "live": True, "sequence": len(feed), "keys": False}])
    quiet = await session.quiet_for(req, min(1.0, deadline / 2))
    assert not any(m.end for m in quiet), f"a live stream ended on its own: {[describe(m) for m in quiet]}"
    published = await publish("live message from the conformance harness")
    msg = await session.next_message(req, "the newly published message on the live stream")
    body = msg.json()
    assert not msg.end and isinstance(body, dict) and body.get("sequence") == len(feed) + 1, (
        f"expected the new message (sequence {len(feed) + 1}) on the live stream; got {describe(msg)}; "
        f"publish answered {published}")
    await session.end_stream(req, "RPC end: requester closes the live stream")


@requirement("ssb.history.server.live-old-false-skips-existing", "MUST", f"{CITE} (old: \"If false, don't send existing messages\")",
             needs=("publish",))
async def test_live_without_old_sends_only_new_messages(open_session, publish, server_feed_id, deadline):
    feed = await full_feed(open_session, server_feed_id)
    need_messages(feed, 1)
    session = await open_session()
    req = await session.request(["createHistoryStream"], [{"id": server_feed_id, "live": True, "old": False, "keys": False}])
    early = await session.quiet_for(req, min(1.0, deadline / 2))
    assert not early, f"with old false no existing message may be sent; got {[describe(m) for m in early]}"
    await publish("new message for an old:false live stream")
    msg = await session.next_message(req, "the newly published message")
    body = msg.json()
    assert isinstance(body, dict) and body.get("sequence") == len(feed) + 1, (
        f"expected only the new message (sequence {len(feed) + 1}); got {describe(msg)}")
    await session.end_stream(req, "RPC end: requester closes the live stream")

"""createHistoryStream option semantics, target as responder
(SSB guide, "createHistoryStream")."""

from __future__ import annotations

from conformance.core.requirements import blocked, not_applicable, requirement

from .prerequisites import (
    FEED_STATE,
    LIMIT_DEFAULT,
    READS_STREAM,
    SEQUENCE,
    SESSION,
    WHOLE_FEED,
    reading_the_feed,
)
from .session import describe, error_body

CITE = "SSB guide, createHistoryStream"


async def history(session, options: dict, what: str):
    req = await session.request(["createHistoryStream"], [options])
    with reading_the_feed():
        items, end = await session.collect_stream(req, what)
    return items, end


def values(items) -> list[dict]:
    """Message values of keys:true items (``value``) or keys:false items."""
    out = []
    for item in items:
        body = item.json()
        out.append(
            body["value"] if isinstance(body, dict) and "value" in body and "key" in body else body
        )
    return out


def sequences(items) -> list[int]:
    return [v.get("sequence") if isinstance(v, dict) else None for v in values(items)]


def latest_sequence(feed: list[dict]) -> int:
    """The highest sequence among the messages served: the next message is
    one more, whether or not the feed was served whole and in order (rules
    of their own, which the live cases do not rely on)."""
    return max(
        (
            v.get("sequence")
            for v in feed
            if isinstance(v, dict) and isinstance(v.get("sequence"), int)
        ),
        default=0,
    )


async def full_feed(open_session, feed_id: str) -> list[dict]:
    session = await open_session()
    items, end = await history(session, {"id": feed_id, "keys": False}, "the whole feed")
    assert end.body.strip() == b"true", (
        f"serving the whole feed ended with an error: {describe(end)}"
    )
    return values(items)


async def feed_of_at_least(request, open_session, feed_id: str, count: int) -> list[dict]:
    """The target's feed, with at least ``count`` messages. A shorter feed is
    first grown through the ``publish`` adapter when the target has it; only a
    target that has neither the messages nor a way to add them makes the case
    not applicable."""
    feed = await full_feed(open_session, feed_id)
    if len(feed) >= count:
        return feed
    target = request.getfixturevalue("target")
    if "publish" not in target.target.capabilities:
        not_applicable(
            f"the target's feed holds {len(feed)} message(s), this case needs {count}, and the "
            "target has no publish capability to add more"
        )
    publish = request.getfixturevalue("publish")
    for n in range(len(feed), count):
        await publish(
            f"message {n + 1}, published so that the case has {count} to tell options apart"
        )
    feed = await full_feed(open_session, feed_id)
    assert len(feed) >= count, (
        f"after publishing up to {count} messages, the feed served holds {len(feed)}: "
        f"{[v.get('sequence') if isinstance(v, dict) else v for v in feed]}"
    )
    return feed


async def shows_valid_sequence(session, feed_id: str, sequence: int, what: str):
    """The valid counterpart of the seq/sequence cases: ``sequence`` alone
    on a feed longer than it gives messages and a normal end (under either
    reading of the option). When it does not, those cases cannot tell their
    rule apart and are blocked by the sequence case."""
    items, end = await history(session, {"id": feed_id, "sequence": sequence, "keys": False}, what)
    if not items or end.body.strip() != b"true":
        blocked(
            SEQUENCE,
            "failed within this case",
            f"sequence {sequence} on a feed of more messages gave {len(items)} message(s) and the end "
            f"{describe(end)}",
        )
    return items


@requirement(
    "ssb.history.server.serves-whole-feed-in-order",
    "MUST",
    f'{CITE} (sequence: "If not specified then start from the very beginning of the feed"); '
    'Feeds, Structure ("Each message (except the first one) references the ID of the previous '
    'message"; paraphrase: every message, in sequence order, per erratum SSB-E3)',
    depends=READS_STREAM,
    errata=["SSB-E3"],
    basis="erratum: SSB-E3 the network's replication validates each served message against the one before it, so a feed served out of sequence order loses messages",
)
async def test_serves_whole_feed_in_order(open_session, server_feed_id):
    session = await open_session()
    items, end = await history(session, {"id": server_feed_id}, "the whole feed")
    seqs = sequences(items)
    assert seqs, f"the target's own feed came back empty: {describe(end)}"
    assert seqs == list(range(1, len(seqs) + 1)), (
        f"expected sequences 1..{len(seqs)} in order, got {seqs}"
    )


@requirement(
    "ssb.history.server.keys-default-true",
    "MUST",
    f"{CITE} (keys ... Default: true)",
    depends=READS_STREAM,
    basis="wire-format: the createHistoryStream item without keys given: {key, value, timestamp} (keys: 'Default: true'; the keys true response example)",
)
async def test_keys_default_true(open_session, server_feed_id):
    # limit only spares traffic: the first item is judged whatever limit does.
    session = await open_session()
    items, _ = await history(
        session, {"id": server_feed_id, "limit": 1}, "the first message, keys not given"
    )
    assert items, "no message served"
    body = items[0].json()
    assert isinstance(body, dict) and {"key", "value", "timestamp"} <= set(body), (
        f"without keys the items must be {{key, value, timestamp}} objects; got {describe(items[0])}"
    )


@requirement(
    "ssb.history.server.keys-false-sends-bare-messages",
    "MUST",
    f'{CITE} (keys: "If false, just send the messages themselves")',
    depends=READS_STREAM,
    basis="wire-format: the createHistoryStream item with keys false: the message itself (keys: 'If false, just send the messages themselves'; the keys false response example)",
)
async def test_keys_false_sends_messages_only(open_session, server_feed_id):
    # limit only spares traffic: the first item is judged whatever limit does.
    session = await open_session()
    items, _ = await history(
        session, {"id": server_feed_id, "limit": 1, "keys": False}, "the first message, keys false"
    )
    assert items, "no message served"
    body = items[0].json()
    assert (
        isinstance(body, dict) and "author" in body and "signature" in body and "key" not in body
    ), f"with keys false an item must be the message itself; got {describe(items[0])}"


@requirement(
    "ssb.history.server.sequence-starts-at-given-message",
    "MUST",
    f'{CITE} (sequence: the first message to return, read as "from" where the text says '
    '"later than")',
    depends=[*READS_STREAM, WHOLE_FEED],
    errata=["SSB-E1"],
    shares=[FEED_STATE],
    basis="erratum: SSB-E1 the network reads sequence as the first message wanted",
)
async def test_sequence_starts_at_the_given_message(request, open_session, server_feed_id):
    """The network's reading (erratum SSB-E1, docs/errata/ssb.md): legacy
    replication asks for ``last + 1`` and must get that message first, so
    a server that starts after it cannot be replicated by ssb-server."""
    feed = await feed_of_at_least(request, open_session, server_feed_id, 3)
    session = await open_session()
    items, _ = await history(
        session, {"id": server_feed_id, "sequence": 2, "keys": False}, "messages from sequence 2"
    )
    seqs = sequences(items)
    expected = list(range(2, len(feed) + 1))
    assert seqs == expected, (
        f"sequence 2 must give the messages from 2 on, {expected} (erratum SSB-E1: the network reads "
        f"sequence as the first message wanted; a replicating peer asks for its latest + 1); got {seqs}"
        + (f"; first item {describe(items[0])}" if items else "")
    )


@requirement(
    "ssb.history.server.accepts-seq-alias",
    "SHOULD",
    f'{CITE} ("both sequence and seq should be accepted")',
    depends=READS_STREAM,
    shares=[FEED_STATE],
    basis="plain-words",
)
async def test_accepts_seq_as_legacy_name(request, open_session, server_feed_id):
    await feed_of_at_least(request, open_session, server_feed_id, 3)
    session = await open_session()
    by_sequence = await shows_valid_sequence(session, server_feed_id, 2, "messages, sequence 2")
    by_seq, _ = await history(
        session, {"id": server_feed_id, "seq": 2, "keys": False}, "messages, seq 2"
    )
    assert sequences(by_seq) == sequences(by_sequence), (
        f"seq 2 gave {sequences(by_seq)}, sequence 2 gave {sequences(by_sequence)}: seq is not accepted as sequence"
    )


@requirement(
    "ssb.history.server.rejects-conflicting-seq-and-sequence",
    "MUST",
    f'{CITE} ("both sequence and seq arguments with conflicting values must be considered an error")',
    depends=READS_STREAM,
    shares=[FEED_STATE],
    basis="plain-words",
)
async def test_rejects_conflicting_seq_and_sequence(request, open_session, server_feed_id):
    """A negative case: it passes only once the target has served the same
    request without the conflict (sequence alone, seq alone) normally."""
    await feed_of_at_least(request, open_session, server_feed_id, 3)
    session = await open_session()
    by_sequence = await shows_valid_sequence(session, server_feed_id, 2, "messages, sequence 2")
    by_seq, _ = await history(
        session, {"id": server_feed_id, "seq": 2, "keys": False}, "messages, seq 2"
    )
    if sequences(by_seq) != sequences(by_sequence):
        not_applicable(
            "the target does not accept seq as sequence, and the rule applies only "
            '"if that behaviour is supported"'
        )
    req = await session.request(
        ["createHistoryStream"], [{"id": server_feed_id, "sequence": 1, "seq": 3}]
    )
    msg = await session.next_message(req, "the answer to conflicting sequence 1 / seq 3")
    assert msg.end and error_body(msg) is not True, (
        f"conflicting sequence and seq must end the stream with an error; first answer: {describe(msg)}"
    )


@requirement(
    "ssb.history.server.limit-caps-messages",
    "MUST",
    f'{CITE} (limit: "only the earliest messages are returned")',
    depends=[*READS_STREAM, WHOLE_FEED],
    errata=["SSB-E3"],
    shares=[FEED_STATE],
    basis="erratum: SSB-E3 a limited answer is the first messages of the feed in sequence order, none skipped",
)
async def test_limit_returns_earliest_messages(request, open_session, server_feed_id):
    await feed_of_at_least(request, open_session, server_feed_id, 3)
    session = await open_session()
    items, _ = await history(
        session, {"id": server_feed_id, "limit": 2, "keys": False}, "two messages"
    )
    assert sequences(items) == [1, 2], f"limit 2 must give sequences [1, 2]; got {sequences(items)}"


@requirement(
    "ssb.history.server.missing-id-is-an-error",
    "SHOULD",
    f'{CITE} (id: "Required")',
    depends=[*SESSION, WHOLE_FEED],
    basis="inference: id is 'Required.' of the requester, so a request without it names no feed to serve, and the Error example answers a mistaken request with an error",
)
async def test_missing_id_is_an_error(open_session):
    session = await open_session()
    req = await session.request(["createHistoryStream"], [{"limit": 1}])
    msg = await session.next_message(req, "the answer to createHistoryStream without id")
    assert msg.end and error_body(msg) is not True, (
        f"a request without id should end with an error; got {describe(msg)}"
    )


@requirement(
    "ssb.history.server.live-sends-new-messages",
    "MUST",
    f'{CITE} (live: "keep the stream alive and send new messages")',
    needs=("publish",),
    depends=[*READS_STREAM, LIMIT_DEFAULT],
    shares=[FEED_STATE],
    errata=["SSB-E3"],
    basis="erratum: SSB-E3 ssb-server's legacy replication asks with live: true and takes new "
    "messages only from that stream (ssb-replicate legacy.js 257-273)",
)
async def test_live_stream_delivers_new_messages(open_session, publish, server_feed_id, deadline):
    feed = await full_feed(open_session, server_feed_id)
    latest = latest_sequence(feed)
    session = await open_session()
    req = await session.request(
        ["createHistoryStream"],
        [{"id": server_feed_id, "live": True, "sequence": latest, "keys": False}],
    )
    quiet = await session.quiet_for(req, min(1.0, deadline / 2))
    assert not any(m.end for m in quiet), (
        f"a live stream ended on its own: {[describe(m) for m in quiet]}"
    )
    published = await publish("live message from the conformance harness")
    # The stream starts with the existing message(s) from `sequence` on; a
    # server may send them after the quiet window (it may answer late), so
    # they are passed over here, bounded: the live rule is about what follows.
    for _ in range(latest + 2):
        msg = await session.next_message(req, "the newly published message on the live stream")
        sequence = None if msg.end else sequences([msg])[0]
        if not isinstance(sequence, int) or sequence > latest:
            break
    assert not msg.end and sequences([msg]) == [latest + 1], (
        f"expected the new message (sequence {latest + 1}) on the live stream; got {describe(msg)}; "
        f"publish answered {published}"
    )
    await session.end_stream(req, "RPC end: requester closes the live stream")


@requirement(
    "ssb.history.server.live-old-false-skips-existing",
    "SHOULD",
    f'{CITE} (old: "If false, don\'t send existing messages")',
    needs=("publish",),
    depends=[*READS_STREAM, LIMIT_DEFAULT],
    shares=[FEED_STATE],
    basis="inference: the guide describes old false as sending only new messages; a requester that asked so already holds the existing ones",
)
async def test_live_without_old_sends_only_new_messages(
    request, open_session, publish, server_feed_id, deadline
):
    latest = latest_sequence(await feed_of_at_least(request, open_session, server_feed_id, 1))
    session = await open_session()
    req = await session.request(
        ["createHistoryStream"], [{"id": server_feed_id, "live": True, "old": False, "keys": False}]
    )
    early = await session.quiet_for(req, min(1.0, deadline / 2))
    assert not early, (
        f"with old false no existing message may be sent; got {[describe(m) for m in early]}"
    )
    await publish("new message for an old:false live stream")
    msg = await session.next_message(req, "the newly published message")
    assert sequences([msg]) == [latest + 1], (
        f"expected only the new message (sequence {latest + 1}); got {describe(msg)}"
    )
    await session.end_stream(req, "RPC end: requester closes the live stream")


LONG_FEED_BURST = 45
"""Messages the long-feed case publishes at once: more than two pages of 20
(the page of jitdb, ssb-db2's query engine: ``toPullStream`` reads a query 20
results at a time), so that a server serving its feed in pages meets at least
two page boundaries inside the burst, where many messages share a millisecond."""


@requirement(
    "ssb.history.server.serves-long-feed-whole",
    "MUST",
    f'{CITE} (sequence: "If not specified then start from the very beginning of the feed"); '
    'Feeds, Structure ("Each message (except the first one) references the ID of the previous '
    'message"; paraphrase: every message once, none repeated or skipped, in sequence order, '
    "per erratum SSB-E3, on a feed longer than a server's page whose messages share "
    'timestamps; Feeds, timestamp: "Time the message was created", which two messages may share)',
    needs=("publish",),
    depends=READS_STREAM,
    errata=["SSB-E3"],
    shares=[FEED_STATE],
    basis="erratum: SSB-E3 the network's replication validates each served message against the "
    "one before it, so a feed served with a message repeated or missing loses every message after it",
)
async def test_serves_long_feed_whole(open_session, publish_burst, server_feed_id):
    """A server that serves its feed in pages (ssb-db2 through jitdb, 20
    results a page, ordered by timestamp) must start each page where the last
    ended, also where the boundary falls among messages of one millisecond.
    The burst makes such a feed; the whole feed is then read once, and each
    sequence 1..N must come exactly once. One that comes once each but out of
    sequence order breaks serves-whole-feed-in-order's rule (the order of
    any feed), so the case is then blocked by that rule, not failed."""
    # The answers to publish carry the new messages: a box too long for the
    # box size rule there blocks the case as in its reading of the feed.
    with reading_the_feed():
        published = await publish_burst(
            [
                f"message {n} of a burst of {LONG_FEED_BURST}, for a feed longer than two pages"
                for n in range(1, LONG_FEED_BURST + 1)
            ]
        )
    latest = latest_sequence(
        [
            answer.get("value", answer) if isinstance(answer, dict) else answer
            for answer in published
        ]
    )
    session = await open_session()
    items, end = await history(session, {"id": server_feed_id, "keys": False}, "the whole feed")
    assert end.body.strip() == b"true", (
        f"serving the whole feed ended with an error: {describe(end)}"
    )
    served = values(items)
    seqs = sequences(items)
    timestamps = [v.get("timestamp") if isinstance(v, dict) else None for v in served]
    tied = len(timestamps) - len(set(timestamps))
    # The burst's last sequence, as the target answered it (else the highest served).
    expected = latest or max((s for s in seqs if isinstance(s, int)), default=0)
    repeated = sorted({s for s in seqs if seqs.count(s) > 1}, key=str)
    missing = [s for s in range(1, expected + 1) if s not in set(seqs)]
    strange = [s for s in seqs if not isinstance(s, int) or not 1 <= s <= expected]
    first = min((s for s in seqs if isinstance(s, int)), default=None)
    if (
        first is not None
        and first > 1
        and missing == list(range(1, first))
        and not (repeated or strange)
    ):
        # All from `first` on, once each, none before it: where the stream
        # starts is the rule of the whole feed (any feed), not of pages.
        blocked(
            WHOLE_FEED,
            "failed within this case",
            f"the feed of {expected} messages was served from sequence {first} on, each once; "
            f"missing before it: {missing}",
        )
    assert not (repeated or missing or strange), (
        f"a feed of {expected} messages ({tied} of them sharing a millisecond with another) must "
        f"be served with each message exactly once; repeated {repeated}, missing {missing}"
        + (f", not of the feed {strange}" if strange else "")
        + f"; served sequences {seqs}"
    )
    if seqs != list(range(1, expected + 1)):
        blocked(
            WHOLE_FEED,
            "failed within this case",
            f"each of the {expected} messages came exactly once, but not in sequence order "
            f"({tied} share a millisecond with another): {seqs}",
        )

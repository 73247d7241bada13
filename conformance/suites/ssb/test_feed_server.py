"""Everything the target serves verifies (SSB guide, "Feeds")."""

from __future__ import annotations

from conformance.core.requirements import requirement
from reference_impl.ssb.feed import FeedError, message_id, verify_message

from .prerequisites import KEYS_DEFAULT_TRUE, READS_STREAM, reading_the_feed
from .session import describe

FEED_READING = (*READS_STREAM, KEYS_DEFAULT_TRUE)
"""Every case reads the feed with keys, as {key, value, timestamp} items."""
SIGNATURES = "ssb.feed.server.signatures-verify"
"""A previous link is the id of the message before, signature included: a
served message with a broken signature breaks the next one's link too."""


async def served_feed(open_session, feed_id: str):
    session = await open_session()
    req = await session.request(["createHistoryStream"], [{"id": feed_id, "keys": True}])
    with reading_the_feed():
        items, end = await session.collect_stream(req, "the feed with keys")
    assert items, f"the target's own feed came back empty: {describe(end)}"
    return items


@requirement(
    "ssb.feed.server.signatures-verify",
    "MUST",
    "SSB guide, Feeds, Signature",
    depends=FEED_READING,
    basis="plain-words",
)
async def test_served_messages_have_valid_signatures(open_session, server_feed_id):
    items = await served_feed(open_session, server_feed_id)
    problems = []
    previous = None
    for item in items:
        value = item.json()["value"]
        try:
            verify_message(value, previous)
        except FeedError as exc:
            if exc.reason == "signature":
                problems.append(f"sequence {value.get('sequence')}: {exc} in {describe(item)}")
        previous = value
    assert not problems, "messages whose signature does not verify:\n" + "\n".join(problems)


@requirement(
    "ssb.feed.server.keys-are-message-ids",
    "MUST",
    "SSB guide, Feeds, Message ID; createHistoryStream (keys)",
    depends=FEED_READING,
    basis="plain-words",
)
async def test_served_keys_are_message_ids(open_session, server_feed_id):
    items = await served_feed(open_session, server_feed_id)
    wrong = []
    for item in items:
        body = item.json()
        expected = message_id(body["value"])
        if body.get("key") != expected:
            wrong.append(f"key {body.get('key')!r} but the message hashes to {expected!r}")
    assert not wrong, "served keys that are not the message ids:\n" + "\n".join(wrong)


@requirement(
    "ssb.feed.server.chain-links",
    "MUST",
    "SSB guide, Feeds, Structure; Message format (previous, author, sequence)",
    depends=[*FEED_READING, SIGNATURES],
    basis="plain-words",
)
async def test_served_feed_is_a_valid_chain(open_session, server_feed_id):
    items = await served_feed(open_session, server_feed_id)

    # The links are a property of the feed, not of the order it is served
    # in (that is serves-whole-feed-in-order's rule): each message is checked
    # against the one served with the sequence before it. A missing or
    # doubled sequence still breaks the chain, and so does a non-integer one
    # (sorted first, where it fails).
    def sequence(item):
        value = item.json()["value"].get("sequence")
        return value if isinstance(value, int) and not isinstance(value, bool) else -1

    previous = None
    for item in sorted(items, key=sequence):
        value = item.json()["value"]
        assert value.get("author") == server_feed_id, (
            f"message by {value.get('author')} in feed {server_feed_id}"
        )
        try:
            verify_message(value, previous)
        except FeedError as exc:
            if exc.reason != "signature":  # signatures are their own case
                raise AssertionError(
                    f"sequence {value.get('sequence')} breaks the chain: {exc}"
                ) from None
        previous = value

"""Message fields the guide defines beyond the chain, target as server
(SSB guide, "Message format")."""

from __future__ import annotations

import time

from conformance.core.requirements import requirement

from .prerequisites import FEED_STATE, reading_the_feed
from .session import describe

READS_STREAM = [
    "ssb.shs.server.completes-valid-handshake",
    "ssb.rpc.server.responses-use-negated-request-number",
    "ssb.rpc.server.source-responses-set-stream-flag",
    "ssb.rpc.server.ends-source-stream-with-true",
]
LIMIT_DEFAULT = "ssb.history.server.limit-default-unlimited"
"""The case finds the message it published by reading the feed without a limit."""
KEYS_FALSE = "ssb.history.server.keys-false-sends-bare-messages"
"""The case reads the feed with keys false and takes each item for the message itself."""
CLOCK_SLACK_MS = 120_000
"""The target runs on the same host (or a synchronised one); two minutes
covers slow start-ups without letting seconds pass for milliseconds."""


@requirement(
    "ssb.feed.server.timestamp-is-milliseconds",
    "MUST",
    'SSB guide, Feeds, Message format (timestamp: "Number of milliseconds since 1 January 1970 00:00 UTC")',
    needs=("publish",),
    depends=READS_STREAM + [LIMIT_DEFAULT, KEYS_FALSE],
    shares=[FEED_STATE],
    basis="wire-format: the message field timestamp, Message format: the number of milliseconds since 1 January 1970 00:00 UTC at the message's creation",
)
async def test_new_message_timestamp_is_milliseconds_since_epoch(
    open_session, publish, server_feed_id
):
    """A message published during the case carries the time it was created,
    in milliseconds: between the clock before and after the publish call."""
    before = int(time.time() * 1000)
    published = await publish("timestamp check from the conformance harness")
    after = int(time.time() * 1000)
    sequence = published.get("value", {}).get("sequence") if isinstance(published, dict) else None
    assert isinstance(sequence, int), (
        f"publish adapter did not return the new message: {published!r:.300}"
    )
    session = await open_session()
    req = await session.request(["createHistoryStream"], [{"id": server_feed_id, "keys": False}])
    with reading_the_feed():
        items, end = await session.collect_stream(req, "the whole feed")
    matching = [
        m for m in items if isinstance(m.json(), dict) and m.json().get("sequence") == sequence
    ]
    assert matching, (
        f"the published message (sequence {sequence}) is not served; end: {describe(end)}"
    )
    timestamp = matching[0].json().get("timestamp")
    assert isinstance(timestamp, (int, float)) and not isinstance(timestamp, bool), (
        f"timestamp is not a number: {describe(matching[0])}"
    )
    assert before - CLOCK_SLACK_MS <= timestamp <= after + CLOCK_SLACK_MS, (
        f"message {sequence} was created between {before} and {after} ms since the epoch, but its "
        f"timestamp is {timestamp}"
        + (" (seconds, not milliseconds?)" if timestamp < before / 100 else "")
    )

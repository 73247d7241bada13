"""createHistoryStream defaults the guide states, target as responder
(SSB guide, "createHistoryStream": limit, live and old)."""

from __future__ import annotations

from conformance.core.requirements import not_applicable, requirement

from .prerequisites import FEED_STATE, reading_the_feed
from .session import describe

CITE = "SSB guide, createHistoryStream"
READS_STREAM = [
    "ssb.shs.server.completes-valid-handshake",
    "ssb.rpc.server.responses-use-negated-request-number",
    "ssb.rpc.server.source-responses-set-stream-flag",
    "ssb.rpc.server.ends-source-stream-with-true",
]
STREAM_BASICS = [
    "ssb.shs.server.completes-valid-handshake",
    "ssb.rpc.server.responses-use-negated-request-number",
    "ssb.rpc.server.source-responses-set-stream-flag",
]
"""What reading a stream needs, short of the end the case itself judges."""
KEYS_FALSE = "ssb.history.server.keys-false-sends-bare-messages"
LIMIT = "ssb.history.server.limit-caps-messages"
ABORT = "ssb.rpc.server.closes-stream-on-requester-abort"
LARGE_LIMIT = 100_000
LIMIT_DEFAULT = "ssb.history.server.limit-default-unlimited"
"""Cases that read every existing message without a limit rely on it."""


def sequences(items) -> list:
    return [
        body.get("sequence") if isinstance(body, dict) else None
        for body in (i.json() for i in items)
    ]


@requirement(
    "ssb.history.server.limit-default-unlimited",
    "MUST",
    f'{CITE} (limit: "Default: unlimited")',
    depends=READS_STREAM + [KEYS_FALSE, LIMIT],
    errata=["SSB-E3"],
    shares=[FEED_STATE],
    basis="erratum: SSB-E3 ssb-server's replication asks without a limit and needs every message from the one it asked for",
)
async def test_no_limit_serves_as_much_as_a_large_limit(open_session, server_feed_id):
    """Without limit the target serves every message it serves when asked
    for up to 100000 (a hidden default cap would show as fewer)."""
    session = await open_session()
    req = await session.request(["createHistoryStream"], [{"id": server_feed_id, "keys": False}])
    unlimited, _ = await session.collect_stream(req, "the feed without limit")
    req = await session.request(
        ["createHistoryStream"], [{"id": server_feed_id, "keys": False, "limit": LARGE_LIMIT}]
    )
    capped, _ = await session.collect_stream(req, f"the feed with limit {LARGE_LIMIT}")
    assert sequences(unlimited) == sequences(capped), (
        f"without limit the target served sequences {sequences(unlimited)}, with limit {LARGE_LIMIT} "
        f"{sequences(capped)}: a default limit is applied"
    )


@requirement(
    "ssb.history.server.ends-stream-when-not-live",
    "SHOULD",
    f"{CITE} (live: \"If false, end the stream after messages are sent and don't wait for new ones. "
    'Default: false.")',
    depends=STREAM_BASICS,
    basis="inference: the guide describes live false, the default, as ending the stream after the existing messages; a stream that stays open leaves the requester waiting for an end that does not come",
)
async def test_stream_ends_when_live_is_false_or_absent(open_session, server_feed_id):
    """live false, and live not given: after the existing messages the
    target ends the stream itself (collect_stream waits only until the
    case's deadline)."""
    session = await open_session()
    for options, what in (
        ({"id": server_feed_id, "live": False}, "live false"),
        ({"id": server_feed_id}, "live not given"),
    ):
        req = await session.request(["createHistoryStream"], [options])
        try:
            with reading_the_feed():
                _, end = await session.collect_stream(req, f"the end of the stream ({what})")
        except AssertionError as exc:
            raise AssertionError(
                f"with {what} the stream must end after the existing messages: {exc}"
            ) from None
        assert end.end, f"with {what}: {describe(end)}"


@requirement(
    "ssb.history.server.live-old-default-sends-existing",
    "MUST",
    f'{CITE} (old: "If true, start by sending existing messages already posted by this feed" ... '
    '"Default: true")',
    depends=READS_STREAM + [KEYS_FALSE, ABORT, LIMIT_DEFAULT],
    shares=[FEED_STATE],
    errata=["SSB-E3"],
    basis="erratum: SSB-E3 ssb-server's legacy replication asks with live: true and no old, and "
    "needs the existing messages from its seq first (ssb-replicate legacy.js 257-273)",
)
async def test_live_stream_starts_with_existing_messages(open_session, server_feed_id, deadline):
    """live true, old not given: the existing messages come first, and the
    stream stays open afterwards."""
    session = await open_session()
    req = await session.request(["createHistoryStream"], [{"id": server_feed_id, "keys": False}])
    with reading_the_feed():
        existing, _ = await session.collect_stream(req, "the existing messages")
    if not existing:
        not_applicable("the target's feed is empty; the case needs existing messages")
    req = await session.request(
        ["createHistoryStream"], [{"id": server_feed_id, "keys": False, "live": True}]
    )
    got = []
    for _ in existing:
        with reading_the_feed():
            msg = await session.next_message(
                req, f"existing message {len(got) + 1} of {len(existing)} on a live stream"
            )
        assert not msg.end, (
            f"the live stream ended after {len(got)} of the {len(existing)} existing "
            f"messages: {describe(msg)}"
        )
        got.append(msg)
    assert sequences(got) == sequences(existing), (
        f"a live stream with old defaulting to true must start with the existing messages "
        f"{sequences(existing)}; got {sequences(got)}"
    )
    after = await session.quiet_for(req, min(1.0, deadline / 2))
    assert not any(m.end for m in after), (
        f"the live stream ended by itself: {[describe(m) for m in after]}"
    )
    await session.end_stream(req, "RPC end: requester closes the live stream")

"""What some SSB faults change at their points (reference_impl/ssb/faults.py),
without a network. That every fault changes declared points only and no
core holds a fault branch is tests/mutation/test_fault_points.py's, for
every protocol.

What each fault does end to end (the cases that catch it, and only those)
is the mutation run's (tests/mutation/test_mutation.py); here the points and
a few changes are checked without a network."""

from __future__ import annotations


import pytest

from reference_impl.faults import FaultPoints
from reference_impl.ssb import shs
from reference_impl.ssb.faults import FIXED_EPHEMERAL_SECRET, SPECS, Fault
from reference_impl.ssb.keys import Keypair
from reference_impl.ssb.node import parse_history_options

FEED = Keypair.from_seed(bytes([3]) * 32).feed_id


def test_no_fault_changes_nothing():
    points = FaultPoints(SPECS)
    assert points.apply("first-request-number", 1) == 1
    assert points.apply("history-refusal", "no", args=[]) == "no"


# --- createHistoryStream: the options as the faulty nodes read them -------------------------

HISTORY_OPTION_FAULTS = [
    # fault, the options asked, the attribute, its correct reading, the faulty one
    (Fault.IGNORE_LIMIT, {"limit": 2}, "limit", 2, None),
    (Fault.DEFAULT_SEQUENCE_SKIPS_FIRST, {}, "start", 1, 2),
    (Fault.EXCLUSIVE_SEQUENCE, {"sequence": 3}, "start", 3, 4),
    (Fault.IGNORE_SEQ_ALIAS, {"seq": 3}, "start", 3, 1),
    (Fault.KEYS_DEFAULT_FALSE, {}, "keys", True, False),
    (Fault.IGNORE_KEYS_FALSE, {"keys": False}, "keys", False, True),
    (Fault.IGNORE_LIVE, {"live": True}, "live", True, False),
    (Fault.LIVE_FALSE_KEEPS_STREAM_OPEN, {"live": False}, "live", False, True),
    (Fault.LIVE_OLD_DEFAULT_FALSE, {"live": True}, "old", True, False),
    (Fault.IGNORE_OLD_FALSE, {"old": False}, "old", False, True),
    (Fault.NO_END_FOR_UNKNOWN_FEED, {}, "live", False, True),
]


def _read(points: FaultPoints, options: dict):
    args = points.apply("history-request", [{"id": FEED, **options}])
    parsed = parse_history_options(args)
    return points.apply("history-options", parsed, requested=args[0], feed_held=False)


@pytest.mark.parametrize("fault,options,attribute,correct,faulty", HISTORY_OPTION_FAULTS)
def test_each_history_option_fault_misreads_its_option(fault, options, attribute, correct, faulty):
    assert getattr(_read(FaultPoints(SPECS), options), attribute) == correct
    assert getattr(_read(FaultPoints(SPECS, {fault}), options), attribute) == faulty


@pytest.mark.parametrize("fault,options,attribute,correct,faulty", HISTORY_OPTION_FAULTS)
def test_each_history_option_fault_leaves_the_plain_request_alone(
    fault, options, attribute, correct, faulty
):
    """A request that names no option the fault misreads is read correctly
    (a feed the node holds; no-end-for-unknown-feed is about the others)."""
    points = FaultPoints(SPECS, {fault})
    args = points.apply("history-request", [{"id": FEED, "sequence": 1, "keys": True}])
    parsed = parse_history_options(args)
    read = points.apply("history-options", parsed, requested=args[0], feed_held=True)
    expected = parse_history_options([{"id": FEED, "sequence": 1, "keys": True}])
    if fault is Fault.EXCLUSIVE_SEQUENCE:
        expected = parse_history_options([{"id": FEED, "sequence": 2, "keys": True}])
    assert read == expected


def test_conflicting_seq_is_followed_by_sequence_only_with_its_fault():
    conflicting = [{"id": FEED, "sequence": 1, "seq": 3}]
    with pytest.raises(ValueError, match="conflict"):
        parse_history_options(FaultPoints(SPECS).apply("history-request", conflicting))
    points = FaultPoints(SPECS, {Fault.ACCEPT_CONFLICTING_SEQ})
    assert parse_history_options(points.apply("history-request", conflicting)).start == 1


def test_missing_id_ends_the_stream_only_with_its_fault():
    refusal = "createHistoryStream: the id option is required"
    no_id = [{"limit": 1}]
    assert FaultPoints(SPECS).apply("history-refusal", refusal, args=no_id) == refusal
    points = FaultPoints(SPECS, {Fault.MISSING_ID_ENDS_NORMALLY})
    assert points.apply("history-refusal", refusal, args=no_id) is None
    # An id given as null is refused as before: only an absent one ends normally.
    assert points.apply("history-refusal", refusal, args=[{"id": None}]) == refusal


def _next_sequences(points: FaultPoints, timestamps: list[int]) -> list[int]:
    """The sequences a stream serves from 1 when each next one is what the
    point says (the node's _serve_history loop, without a network)."""
    messages = {n: {"sequence": n, "timestamp": t} for n, t in enumerate(timestamps, 1)}
    served, cursor = [], 1
    while cursor <= len(timestamps) and len(served) < 20 * len(timestamps):
        served.append(cursor)
        cursor = points.apply(
            "history-next-sequence",
            cursor + 1,
            sent=len(served),
            length=len(timestamps),
            message_of=messages.get,
        )
    return served


def test_pages_repeat_the_last_millisecond_only_with_their_fault():
    # 45 messages, three to a millisecond: items 19-21 and 40-42 share one.
    timestamps = [1000 + (n - 1) // 3 for n in range(1, 46)]
    assert _next_sequences(FaultPoints(SPECS), timestamps) == list(range(1, 46))
    faulty = _next_sequences(FaultPoints(SPECS, {Fault.PAGES_REPEAT_LAST_MILLISECOND}), timestamps)
    # Page 2 starts at 19 (20's millisecond), page 3 at 37 (38's): 19, 20 and 37, 38 twice.
    assert faulty == [*range(1, 21), *range(19, 39), *range(37, 46)]
    # A feed of one page, or a page ending on its own millisecond's last
    # message, still repeats that message: the fault shows on any long feed.
    assert _next_sequences(
        FaultPoints(SPECS, {Fault.PAGES_REPEAT_LAST_MILLISECOND}), [7] * 20
    ) == list(range(1, 21))
    apart = _next_sequences(
        FaultPoints(SPECS, {Fault.PAGES_REPEAT_LAST_MILLISECOND}), list(range(25))
    )
    assert apart == [*range(1, 21), *range(20, 26)]


def test_pages_of_one_millisecond_still_move_on_with_the_fault():
    """Each page starts at least one message after the last page's first, so
    a feed of one millisecond still ends."""
    served = _next_sequences(FaultPoints(SPECS, {Fault.PAGES_REPEAT_LAST_MILLISECOND}), [5] * 45)
    assert served[-1] == 45 and served[20] == 2
    assert len(served) == 26 * 20  # pages 1-20, 2-21, ..., 26-45


# --- the handshake ---------------------------------------------------------------------------


@pytest.mark.parametrize("fault", [Fault.REUSE_EPHEMERAL_KEY, Fault.CLIENT_REUSE_EPHEMERAL_KEY])
def test_reusing_the_ephemeral_key_is_one_key_for_every_handshake(fault):
    keys = Keypair.generate()
    fresh = {shs.ClientHandshake(bytes(32), keys, keys.public).data_to_send() for _ in range(2)}
    assert len(fresh) == 2
    reused = {
        shs.ClientHandshake(bytes(32), keys, keys.public, faults={fault}).data_to_send()
        for _ in range(2)
    }
    assert reused == {shs.hello(bytes(32), shs.ephemeral_public(FIXED_EPHEMERAL_SECRET))}

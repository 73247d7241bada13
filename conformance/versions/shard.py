"""``--shard K/N``: the share of a list of targets one machine certifies.

The partition depends on the list alone (names and protocols), never on
the machine, the clock or earlier runs, so that N machines given the same
list certify every target exactly once between them: the targets, heaviest
first (their suite's case count, a stand-in for their length that every
machine computes alike), then by name, each go to the shard with the least
weight so far (the lowest-numbered one on a tie). Shards end within one
target's weight of each other; N equal targets are dealt round-robin.
"""

from __future__ import annotations

import argparse
import re
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/5"`` -> ``(2, 5)``; K is 1-based."""
    match = _SHARD.match(text or "")
    if match is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not K/N (e.g. 2/5: the second of five shards)"
        )
    k, n = int(match.group(1)), int(match.group(2))
    if n < 1 or not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"{text!r}: K/N needs 1 <= K <= N")
    return k, n


def partition(
    items: Sequence[T], shards: int, name: Callable[[T], str], weight: Callable[[T], float]
) -> list[list[T]]:
    """Every item in exactly one of ``shards`` lists, each list in the
    order of ``items``."""
    order = sorted(range(len(items)), key=lambda i: (-weight(items[i]), name(items[i])))
    loads = [0.0] * shards
    owner: dict[int, int] = {}
    for index in order:
        shard = min(range(shards), key=lambda s: (loads[s], s))
        owner[index] = shard
        loads[shard] += weight(items[index])
    return [[items[i] for i in range(len(items)) if owner[i] == s] for s in range(shards)]


def shard_of(
    items: Sequence[T],
    shard: tuple[int, int],
    name: Callable[[T], str],
    weight: Callable[[T], float] = lambda _: 1.0,
) -> list[T]:
    k, n = shard
    return partition(items, n, name, weight)[k - 1]

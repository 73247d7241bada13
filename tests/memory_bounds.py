"""What the fuzz tests of several nodes share: the peak memory a sans-I/O
core takes while a hostile peer offers it far more bytes than any bound."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

OFFERED_CHUNK = b"a" * 65536
OFFERED_CHUNKS = 160
"""10 MiB offered after the hostile prefix, unless the core gives up first."""


def peak_while_offering(
    receive: Callable[[bytes], object], prefix: bytes, done: Callable[[], bool]
) -> int:
    """Feed ``prefix`` then up to 10 MiB to ``receive`` until ``done()``;
    return the peak bytes allocated meanwhile (tracemalloc)."""
    tracemalloc.start()
    try:
        receive(prefix)
        for _ in range(OFFERED_CHUNKS):
            receive(OFFERED_CHUNK)
            if done():
                break
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

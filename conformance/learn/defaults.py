"""The bounds of a learning run, apart from the modules that need AALpy:
``conformance learn --help`` shows them without importing it."""

from __future__ import annotations

DEFAULT_REPEATS = 3
"""Runs of a word whose answer disagrees with the cache (mapper.py)."""
DEFAULT_WALKS_PER_STATE = 8
"""Random walks from each hypothesis state, after one per input (learner.py)."""
DEFAULT_WALK_LENGTH = 3
"""Inputs per walk of the equivalence oracle."""
DEFAULT_SEED = 32
"""The oracle's seed: two runs on a deterministic target ask the same words."""
DEFAULT_REPLAYS = 10
"""Concrete runs per separating sequence: the issue asks every separating
sequence to replay to the same outputs 10 times of 10."""
REFERENCE_TARGET = "reference-{protocol}"
"""The built-in target whose model every target of a protocol is diffed against."""

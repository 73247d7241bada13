"""How many examples each Hypothesis property runs, by profile.

``HYPOTHESIS_PROFILE=ci`` (the default; tests/conftest.py registers the
profiles): each property runs the number it names, sized so that the whole
suite fits CI's budget (docs/testing.md). ``HYPOTHESIS_PROFILE=nightly``
(``tox -e nightly``, ``scripts/test.sh --tier nightly``): every property runs
``CONFORMANCE_FUZZ_EXAMPLES`` examples (default 10,000), or its own number if
that is larger. A property writes ``max_examples=examples(N)``; an explicit
``max_examples`` in ``@settings`` wins over any profile, so the number has
to come from here for the nightly to reach it.
"""

from __future__ import annotations

import os

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
NIGHTLY_EXAMPLES = int(os.environ.get("CONFORMANCE_FUZZ_EXAMPLES", "10000"))


def examples(ci: int) -> int:
    """The examples of a property whose CI number is ``ci``."""
    return max(ci, NIGHTLY_EXAMPLES) if PROFILE == "nightly" else ci

"""What the aggregation modules share: the user's error, the progress callback."""

from __future__ import annotations

from typing import Callable

Progress = Callable[[str], None]
"""Called with each progress line (the CLI prints them)."""


class IngestError(RuntimeError):
    """A problem the user can fix (no runs found, dataset locked, ...)."""

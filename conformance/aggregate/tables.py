"""What the matrices (:mod:`.matrix`) and their page (:mod:`.html`) share:
the window of runs, a computed matrix, and the verdicts a matrix counts.

A module of its own so that the page can be rendered from matrices without
importing the Spark job that computes them, and the job can import the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

CLEAN = "clean"
"""``network`` of a record that ran without impairment."""
DID_NOT_START = "did_not_start"
"""The verdict of an ``error`` record whose target (a role of it) did not
start (``start_failure``): it says nothing about the case's rule, so the
matrices count it apart from a rule's ``error``."""
DID_NOT_START_STATUS = "did not start"
"""A certification's status when a MUST case ended because the target did
not start and none failed for its own rule (the run's verdict NOT_STARTED,
conformance.core.results.summarize)."""
COUNTED = ("passed", "failed", "error", DID_NOT_START, "blocked", "not_applicable")
"""The verdicts each matrix counts, one column each."""
NOT_PASSED = ("failed", "error", DID_NOT_START, "blocked")
"""The verdicts that count against the pass rate (not applicable is no verdict)."""
VERDICT_TEXT = {DID_NOT_START: "did not start", "not_applicable": "not applicable"}
"""How the page names a verdict whose column name is not plain text."""
PAGE_VERSIONS = 2
"""Versions per implementation (the most recently tested) that the page's
requirements heatmap shows; the CSV has all."""


def verdict_text(verdict: str | None) -> str:
    return VERDICT_TEXT.get(verdict or "", verdict or "")


@dataclass(frozen=True)
class Window:
    since: date | None = None
    until: date | None = None
    last_runs: int | None = None

    def describe(self) -> dict[str, Any]:
        return {
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "last_runs_per_implementation": self.last_runs,
        }

    def text(self) -> str:
        parts = [
            f"since {self.since}" if self.since else "",
            f"until {self.until}" if self.until else "",
            f"last {self.last_runs} run(s) per implementation" if self.last_runs else "",
        ]
        return ", ".join(p for p in parts if p) or "all runs"


@dataclass
class Matrix:
    """One matrix: its ``columns``, the key it is sorted on, its row count
    and the rows the HTML page shows (collected).

    A small matrix is collected whole: ``lines`` holds each row as the CSV
    line and the JSON line Spark's CSV and JSON writers would write for it,
    in key order, and Python writes the files. The big one (requirements)
    is written by Spark from ``frame`` (exactly ``columns``, typed)."""

    name: str
    title: str
    description: str
    columns: list[str]
    key: list[str]
    rows: list[dict[str, Any]]
    count: int = 0
    lines: list[tuple[str, str]] | None = None
    frame: Any = None

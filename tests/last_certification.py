"""The last certification of each built-in target, as recorded in
docs/certified-today.json by scripts/certified_today.py from a real run
(never typed): the tests that certify a third-party target again compare
the new verdicts with it, and the findings' tables are checked against it
(tests/harness/test_findings_tables.py)."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "docs" / "certified-today.json"


def last_certification(target: str) -> dict:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    assert target in data["targets"], (
        f"docs/certified-today.json has no certification of {target}: "
        "scripts/certified_today.py RUN_DIR --write"
    )
    return data["targets"][target]


def known_not_passed(
    target: str, outcomes: tuple[str, ...] = ("failed", "error", "blocked")
) -> dict[str, tuple[str, str]]:
    """Case id -> (level, outcome) of every case of the target's last
    certification whose outcome is one of ``outcomes``."""
    return {
        case: (rec["level"], rec["outcome"])
        for case, rec in last_certification(target)["not_passed"].items()
        if rec["outcome"] in outcomes
    }

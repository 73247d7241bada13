"""Findings are checked, not typed: every findings file's generated
certification section is the rendering of docs/certified-today.json, and
every row of a hand-written table that names a target, a case and its
level (and outcome) says what the last certification recorded."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest

from ..last_certification import DATA, REPO

spec = importlib.util.spec_from_file_location(
    "certified_today", REPO / "scripts" / "certified_today.py"
)
certified_today = importlib.util.module_from_spec(spec)
spec.loader.exec_module(certified_today)

ROW = re.compile(
    r"^\| `?([a-z0-9-]+)`? \| `([a-z0-9.-]+)` \| (MUST|SHOULD|MAY)(?: \(([a-z-]+)\))? \|"
    r"(?: (failed|error|blocked) \|)?",
    re.MULTILINE,
)
DATA_FILE = json.loads(DATA.read_text(encoding="utf-8"))
FILES = certified_today.findings_targets(DATA_FILE)


@pytest.mark.parametrize("found", sorted(FILES), ids=lambda path: path.rsplit("/", 1)[-1])
def test_findings_file_has_the_generated_certification_section(found: str):
    text = (REPO / found).read_text(encoding="utf-8")
    assert certified_today.FINDINGS_START in text, (
        f"{found} has no generated certification section ({certified_today.FINDINGS_START} ... "
        f"{certified_today.FINDINGS_END}): counts typed by hand drift"
    )
    section = text.split(certified_today.FINDINGS_START, 1)[1].split(
        certified_today.FINDINGS_END, 1
    )[0]
    assert section == "\n" + certified_today.render_findings_block(DATA_FILE, FILES[found]), (
        "run scripts/certified_today.py --from-data"
    )


def typed_part(text: str) -> str:
    """The file without its generated section."""
    if certified_today.FINDINGS_START not in text:
        return text
    head, rest = text.split(certified_today.FINDINGS_START, 1)
    return head + rest.split(certified_today.FINDINGS_END, 1)[1]


@pytest.mark.parametrize("found", sorted(FILES), ids=lambda path: path.rsplit("/", 1)[-1])
def test_typed_tables_say_what_the_last_certification_recorded(found: str):
    text = (REPO / found).read_text(encoding="utf-8")
    typed = typed_part(text)
    wrong = []
    for target, case, level, word, outcome in ROW.findall(typed):
        if target not in FILES[found]:
            continue
        recorded = DATA_FILE["targets"][target].get("not_passed", {}).get(case)
        if recorded is None:
            wrong.append(f"{target} {case}: passed or not applicable in the last certification")
            continue
        recorded_word = recorded["basis"].split(":", 1)[0]
        if level != recorded["level"] or (word or "keyword") != recorded_word:
            shown = recorded["level"] + (
                f" ({recorded_word})" if recorded_word != "keyword" else ""
            )
            wrong.append(
                f"{target} {case}: typed {level}{f' ({word})' if word else ''}, recorded {shown}"
            )
        if outcome and outcome != recorded["outcome"]:
            wrong.append(f"{target} {case}: typed {outcome}, recorded {recorded['outcome']}")
    assert not wrong, f"{found}: " + "; ".join(wrong)

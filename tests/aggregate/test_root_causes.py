"""The matrices use the record's fields: a blocked cell names its root cause
(``blocked_by``) in the CSV, the JSON and the page, and a target that did
not start (``start_failure``) is "did not start", apart from a rule's error."""

from __future__ import annotations

import csv
import dataclasses
import json
import re
from html import unescape
from pathlib import Path

from conformance.aggregate.ingest import ingest
from conformance.aggregate.matrix import run as matrix

from .conftest import record, write_run

BLOCKING = "20260401T020000Z-aaaaaaaa"
NOT_STARTED = "20260402T020000Z-bbbbbbbb"
AUTH = "btp.auth.server.accepts-valid-auth"
FLOW = "btp.flow.server.response-numbering"
OTHER = "btp.flow.server.silent-on-garbage"
quiet = lambda line: None  # noqa: E731


def _csv(out: Path, name: str) -> list[dict[str, str]]:
    with open(out / f"{name}.csv", newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _runs(root: Path) -> None:
    write_run(
        root,
        BLOCKING,
        [
            record(BLOCKING, "2026-04-01T02:00:01.000Z", "node-a", "1.0", AUTH, "failed"),
            dataclasses.replace(
                record(BLOCKING, "2026-04-01T02:00:02.000Z", "node-a", "1.0", FLOW, "blocked"),
                message=f"blocked by {AUTH} (failed): no auth response",
                blocked_by=AUTH,
                depends=[AUTH],
            ),
            record(BLOCKING, "2026-04-01T02:00:03.000Z", "node-a", "1.0", OTHER, "passed"),
        ],
    )
    write_run(
        root,
        NOT_STARTED,
        [
            dataclasses.replace(
                record(NOT_STARTED, f"2026-04-02T02:00:0{i}.000Z", "node-b", "2.0", case, "error"),
                message="node-b did not start: it exited with status 1 before it was ready",
                start_failure=True,
            )
            for i, case in enumerate((AUTH, FLOW), 1)
        ],
    )


def test_blocked_cells_name_their_root_cause_and_did_not_start_is_no_error(spark, tmp_path):
    root, dataset, out = tmp_path / "runs", tmp_path / "dataset", tmp_path / "matrix"
    _runs(root)
    ingest(spark, [root], dataset, progress=quiet)
    matrix(spark, dataset, out, progress=quiet)

    requirements = {(r["implementation"], r["case_id"]): r for r in _csv(out, "requirements")}
    blocked = requirements[("node-a", FLOW)]
    assert (blocked["latest_outcome"], blocked["latest_blocked_by"]) == ("blocked", AUTH)
    assert requirements[("node-a", AUTH)]["latest_blocked_by"] == ""
    not_started = requirements[("node-b", AUTH)]
    assert (not_started["latest_outcome"], not_started["did_not_start"], not_started["error"]) == (
        "did_not_start",
        "1",
        "0",
    )
    assert not_started["pass_rate"] == "0.0000"
    rows = json.loads((out / "requirements.json").read_text())["rows"]
    assert {
        (r["case_id"], r["latest_blocked_by"]) for r in rows if r["latest_outcome"] == "blocked"
    } == {(FLOW, AUTH)}

    certification = {r["implementation"]: r for r in _csv(out, "certification")}
    a, b = certification["node-a"], certification["node-b"]
    assert (a["status"], a["failed_must"], a["blocked_must"], a["blocked_must_root_causes"]) == (
        "not certified",
        AUTH,
        FLOW,
        AUTH,
    )
    assert (b["status"], b["must_did_not_start"], b["must_error"], b["failed_must"]) == (
        "did not start",
        "2",
        "0",
        "",
    )
    assert b["did_not_start_must"] == f"{AUTH};{FLOW}"
    trends = {r["implementation"]: r for r in _csv(out, "trends")}
    assert (trends["node-b"]["did_not_start"], trends["node-b"]["error"]) == ("2", "0")

    page = (out / "index.html").read_text(encoding="utf-8")

    def visible(html: str) -> str:
        return unescape(re.sub(r"<[^>]+>", " ", re.sub(r'title="[^"]*"', "", html)))

    grid = page[page.index('id="certification"') : page.index('id="interop"')]
    assert f"1.0 NOT CONFORMANT blocked by {AUTH}" in " ".join(visible(grid).split())
    assert "2.0 NOT CERTIFIED (did not start)" in " ".join(visible(grid).split())
    heatmap = visible(page[page.index('id="requirements"') :])
    assert f"{FLOW} (node-a 1.0): blocked by {AUTH}" in heatmap
    assert f"{AUTH} (node-b 2.0): did not start" in heatmap
    # Every cell leads to its latest record (no hover needed): the blocked
    # cell to the entry naming its root cause, the root cause outlined and
    # listed first, with its message and the links to its run's files.
    heat = page[page.index('id="requirements"') :]
    entries = re.findall(r'<li id="(e-btp-\d+)">(.*?)</li>', heat, re.S)
    assert entries and all(f'href="#{anchor}"' in heat for anchor, _ in entries)
    first_anchor, first = entries[0]
    assert AUTH in first and "node-a" in first and "(root cause)" in first, first
    assert 'class="cell v-fail root"><a href="#' + first_anchor + '"' in heat
    assert f"{BLOCKING}/results.jsonl" in first and "allure-report/index.html" in first, first
    (blocked_entry,) = [text for _, text in entries if FLOW in text and "node-a" in text]
    assert f"blocked by {AUTH}" in unescape(blocked_entry), blocked_entry
    titles = [unescape(t) for t in re.findall(r'title="([^"]*)"', page)]
    assert any(f"{FLOW} (MUST)\nlatest: blocked by {AUTH}" in t for t in titles)
    assert any(f"{AUTH} (MUST)\nlatest: did not start" in t for t in titles)
    assert any("did not start: " + f"{AUTH}, {FLOW}" in t for t in titles)

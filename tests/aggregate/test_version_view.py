"""The version view (``conformance versions-view``, docs/versions-view.md):
releases in their registry's order, each rule's latest verdict per release,
the first failing and first fixed release, the verdict changes between
releases and between two nights of one release (a flaky node or a harness
change, by the harness version), and the page's strips.

One dataset for the module (one ingest, one view job on the session's
local Spark): generated records of an npm package (semver order,
pre-releases), a PyPI one (PEP 440) and versions that parse in neither."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from html import unescape
from pathlib import Path

import pytest

from conformance.aggregate.ingest import ingest
from conformance.aggregate.release_order import natural_key, ordered, semver_key
from conformance.aggregate.version_view import (
    OTHER_HARNESS,
    SAME_HARNESS,
    news_lines,
)
from conformance.aggregate.version_view import run as versions_view

from .conftest import REPO_ROOT, record, write_run

quiet = lambda line: None  # noqa: E731

NPM_IMPL = "ilp-plugin-btp"  # semver (its versions table: registry = "npm")
PYPI_IMPL = "stompman"  # PEP 440
RULE = "btp.flow.server.silent-on-garbage"
STEADY = "btp.auth.server.accepts-valid-auth"
FLAKY = "btp.flow.server.response-numbering"
# Given out of order on purpose: semver puts 1.2.0-beta.2 < 1.2.0-beta.11 <
# 1.2.0 and 1.3.0 < 1.10.0, where text order would not.
NPM_RELEASES = ["1.10.0", "1.2.0", "1.2.0-beta.11", "1.1.5", "1.3.0", "1.2.0-beta.2"]
NPM_ORDER = ["1.1.5", "1.2.0-beta.2", "1.2.0-beta.11", "1.2.0", "1.3.0", "1.10.0"]
# RULE across NPM_ORDER: passes, fails (first), blocked, passes again
# (first fixed), then regresses in 1.10.0 -- on its last night only.
RULE_VERDICTS = {
    "1.1.5": "passed",
    "1.2.0-beta.2": "passed",
    "1.2.0-beta.11": "failed",
    "1.2.0": "blocked",
    "1.3.0": "passed",
    "1.10.0": "failed",
}
PYPI_RELEASES = ["2.0.0.dev1", "1.0.0", "1.0.0rc1", "0.9", "1.0.0.post1", "1.0.0a2"]
PYPI_ORDER = ["0.9", "1.0.0a2", "1.0.0rc1", "1.0.0", "1.0.0.post1", "2.0.0.dev1"]
NIGHT_1, NIGHT_2 = "2026-12-06", "2026-12-07"


# ------------------------------------------------------------------ ordering


def test_semver_order_with_pre_releases():
    assert [r.version for r in ordered(NPM_IMPL, NPM_RELEASES)] == NPM_ORDER
    versions = ["1.0.0", "1.0.0-rc.1", "1.0.0-beta", "1.0.0-alpha.beta", "1.0.0-alpha.1"]
    versions += ["1.0.0-alpha", "1.0.0-beta.11", "1.0.0-beta.2"]
    # semver.org, section 11: the order it gives as its example.
    assert [r.version for r in ordered("stompit", versions)] == [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
    ]
    assert semver_key("1.0.0+build.5") == semver_key("1.0.0")
    assert semver_key("1.0") is None and semver_key("01.0.0") is None


def test_pep440_order_and_the_fallback():
    releases = ordered(PYPI_IMPL, PYPI_RELEASES + ["5.17.2-SNAPSHOT-x", "r10", "r9"])
    assert [r.version for r in releases] == PYPI_ORDER + ["5.17.2-SNAPSHOT-x", "r9", "r10"]
    assert [r.order for r in releases] == ["pep440"] * 6 + ["fallback"] * 3
    assert [r.ordinal for r in releases] == list(range(9))
    # An npm package's non-semver version falls back too, after the others.
    npm = ordered(NPM_IMPL, ["1.0", "0.9.0"])
    assert [(r.version, r.order) for r in npm] == [("0.9.0", "semver"), ("1.0", "fallback")]
    # Unknown implementations are ordered as PyPI: 1.10 after 1.9.
    assert [r.version for r in ordered("node-x", ["1.10", "1.9"])] == ["1.9", "1.10"]
    assert natural_key("r9") < natural_key("r10")


# ---------------------------------------------------------------- the view


def _records(run_id: str, night: str, impl: str, version: str, verdicts: dict, harness: str):
    out = []
    for i, (case, outcome) in enumerate(sorted(verdicts.items()), 1):
        rec = record(run_id, f"{night}T02:00:{i:02d}.000Z", impl, version, case, outcome)
        out.append(
            dataclasses.replace(
                rec,
                harness_version=harness,
                trace_file=f"traces/{case}.txt",
                blocked_by=STEADY if outcome == "blocked" else None,
            )
        )
    return out


def _write_runs(root: Path) -> None:
    n = 0
    for night in (NIGHT_1, NIGHT_2):
        for version in NPM_RELEASES:
            n += 1
            verdicts = {STEADY: "passed", RULE: RULE_VERDICTS[version]}
            harness = "0.1.0"
            if version == "1.10.0" and night == NIGHT_1:
                verdicts[RULE] = "passed"  # failed on the second night only
            if version == "1.3.0":
                # FLAKY failed the first night, passes on the second with a new harness.
                verdicts[FLAKY] = "failed" if night == NIGHT_1 else "passed"
                harness = "0.1.0" if night == NIGHT_1 else "0.2.0"
            run_id = f"{night.replace('-', '')}T02{n:04d}Z-{n:08x}"
            write_run(root, run_id, _records(run_id, night, NPM_IMPL, version, verdicts, harness))
        for version in PYPI_RELEASES:
            n += 1
            run_id = f"{night.replace('-', '')}T03{n:04d}Z-{n:08x}"
            records = _records(run_id, night, PYPI_IMPL, version, {STEADY: "passed"}, "0.1.0")
            write_run(root, run_id, [dataclasses.replace(r, protocol="stomp") for r in records])


@pytest.fixture(scope="module")
def view_out(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("view")
    _write_runs(tmp / "runs")
    ingest(spark, [tmp / "runs"], tmp / "dataset", progress=quiet)
    versions_view(spark, tmp / "dataset", tmp / "out", progress=quiet)
    return tmp / "out", tmp / "dataset"


def _rule(view: dict, impl: str, case: str) -> dict:
    (found,) = [
        r
        for i in view["implementations"]
        if i["implementation"] == impl
        for r in i["rules"]
        if r["case_id"] == case
    ]
    return found


def test_releases_come_in_their_registrys_order(view_out):
    out, _dataset = view_out
    view = json.loads((out / "versions.json").read_text())
    impls = {i["implementation"]: i for i in view["implementations"]}
    assert [r["version"] for r in impls[NPM_IMPL]["releases"]] == NPM_ORDER
    assert {r["order"] for r in impls[NPM_IMPL]["releases"]} == {"semver"}
    assert [r["version"] for r in impls[PYPI_IMPL]["releases"]] == PYPI_ORDER
    assert impls[PYPI_IMPL]["ecosystem"] == "pypi"
    steady = _rule(view, PYPI_IMPL, STEADY)
    assert [c["version"] for c in steady["cells"]] == PYPI_ORDER
    assert steady["first_failing"] is None and steady["changes"] == []


def test_first_failing_first_fixed_and_the_regression(view_out):
    out, _dataset = view_out
    view = json.loads((out / "versions.json").read_text())
    rule = _rule(view, NPM_IMPL, RULE)
    # The latest night's verdict of each release: 1.10.0 failed on its last night.
    assert [(c["version"], c["verdict"]) for c in rule["cells"]] == [
        (v, RULE_VERDICTS[v]) for v in NPM_ORDER
    ]
    assert (rule["first_failing"], rule["first_fixed"]) == ("1.2.0-beta.11", "1.3.0")
    # Blocked says nothing about the rule: 1.3.0 fixes what 1.2.0-beta.11 broke.
    assert rule["regressions"] == ["1.2.0-beta.11", "1.10.0"]
    assert rule["fixes"] == ["1.3.0"]
    blocked = rule["cells"][NPM_ORDER.index("1.2.0")]
    assert blocked["run_id"] and blocked["trace_file"] == f"traces/{RULE}.txt"


def test_every_release_where_the_verdict_changed(view_out):
    out, _dataset = view_out
    regressions = json.loads((out / "regressions.json").read_text())
    changes = [
        (c["implementation"], c["case_id"], c["from_version"], c["to_version"], c["kind"])
        for c in regressions["release_changes"]
    ]
    assert changes == [
        (NPM_IMPL, RULE, "1.2.0-beta.2", "1.2.0-beta.11", "regressed"),
        (NPM_IMPL, RULE, "1.2.0-beta.11", "1.2.0", "changed"),
        # Passed after a blocked release, failed before it: the fix.
        (NPM_IMPL, RULE, "1.2.0", "1.3.0", "fixed"),
        (NPM_IMPL, RULE, "1.3.0", "1.10.0", "regressed"),
        # FLAKY ran in 1.3.0 alone: no release before it to change from.
    ]
    assert _rule(json.loads((out / "versions.json").read_text()), NPM_IMPL, STEADY)["changes"] == []


def test_night_changes_tell_a_flaky_node_from_a_harness_change(view_out):
    out, _dataset = view_out
    regressions = json.loads((out / "regressions.json").read_text())
    nights = {
        (c["case_id"], c["version"]): (
            c["from"],
            c["to"],
            c["from_night"],
            c["to_night"],
            c["cause"],
        )
        for c in regressions["night_changes"]
    }
    assert nights == {
        (RULE, "1.10.0"): ("passed", "failed", NIGHT_1, NIGHT_2, SAME_HARNESS),
        (FLAKY, "1.3.0"): ("failed", "passed", NIGHT_1, NIGHT_2, OTHER_HARNESS),
    }
    lines = regressions["lines"]
    assert lines == news_lines(regressions)
    assert (
        f"REGRESSED between releases: {NPM_IMPL} {RULE}: passed in 1.3.0 -> failed in 1.10.0"
        in lines
    )
    assert (
        f"REGRESSED between nights: {NPM_IMPL} {RULE} 1.10.0: passed on {NIGHT_1} -> failed on "
        f"{NIGHT_2} (harness 0.1.0: {SAME_HARNESS})" in lines
    )
    assert (
        f"FIXED between nights: {NPM_IMPL} {FLAKY} 1.3.0: failed on {NIGHT_1} -> passed on "
        f"{NIGHT_2} (harness 0.1.0 -> 0.2.0: {OTHER_HARNESS})" in lines
    )


def test_the_strips_page(view_out):
    out, _dataset = view_out
    page = (out / "index.html").read_text(encoding="utf-8")
    strip = page[page.index(f'id="{NPM_IMPL}"') : page.index(f'id="{PYPI_IMPL}"')]
    (row,) = re.findall(rf"<tr><th class=row>{re.escape(RULE)} .*?</tr>", strip, re.S)
    cells = re.findall(r'<td class="cell ([^"]*)">(.*?)</td>', row, re.S)
    assert len(cells) == len(NPM_ORDER)
    # Colour class, letter (colour-blind readers) and the marks, release by release.
    shown = [(cls.split()[0], unescape(re.sub(r"<[^>]+>", "", inner))) for cls, inner in cells]
    assert shown == [
        ("v-pass", "P"),
        ("v-pass", "P"),
        ("v-fail", "▼F"),
        ("v-blk", "B"),
        ("v-pass", "▲P"),
        ("v-fail", "F"),
    ]
    assert "ff" in cells[2][0].split() and "fx" in cells[4][0].split()
    # Every cell links to its run's trace, beside the run's results.jsonl.
    hrefs = re.findall(r'<a href="([^"]+)"', row)
    assert len(hrefs) == len(NPM_ORDER)
    assert all(h.endswith(f"/traces/{RULE}.txt") and "T02" in h for h in hrefs), hrefs
    view = json.loads((out / "versions.json").read_text())
    run_ids = [c["run_id"] for c in _rule(view, NPM_IMPL, RULE)["cells"]]
    assert [h.split("/")[-3] for h in hrefs] == run_ids
    says = unescape(re.sub(r"<[^>]+>", " ", row))
    assert "first fails in 1.2.0-beta.11; passes again in 1.3.0" in says
    assert "regressed in 1.2.0-beta.11, 1.10.0" in says
    # The legend names every verdict in words, and the changes are listed in red.
    legend = unescape(re.sub(r"<[^>]+>", " ", page[page.index('class="legend"') :]))
    for words in ("P pass", "F fail", "B blocked", "N not applicable", "S not started", "not run"):
        assert words in " ".join(legend.split()), words
    news = page[page.index('class="news"') : page.index("</div>", page.index('class="news"'))]
    assert f"REGRESSED between releases: {NPM_IMPL} {RULE}" in unescape(news)
    assert ".news{color:#b00000" in page


def test_the_nightly_summary_says_the_changes(view_out, tmp_path):
    """The verdict step reads NIGHTLY_DIR/versions/regressions.json (the
    matrix step writes it) and lists every change, plainly in verdict.md
    and in red in verdict.html; the night's colour does not change."""
    out, _dataset = view_out
    night = tmp_path / "night"
    (night / "runs" / "certify").mkdir(parents=True)
    (night / "runs" / "certify" / "summary.json").write_text(
        json.dumps(
            {
                "targets": [
                    {
                        "target": "reference-btp",
                        "implementation": "reference-btp",
                        "implementation_version": "0.1.0",
                        "protocol": "btp",
                        "conformant": True,
                        "failed_must": [],
                        "blocked_must": [],
                    }
                ]
            }
        )
    )
    (night / "versions").mkdir()
    (night / "versions" / "regressions.json").write_bytes((out / "regressions.json").read_bytes())
    done = _nightly_verdict(night, tmp_path / "store", "reference-btp")
    assert done.returncode == 0, done.stdout + done.stderr
    text = (night / "verdict.md").read_text()
    assert "green" in text and "### Verdict changes (4 between releases, 2 between nights)" in text
    assert (
        f"- REGRESSED between releases: {NPM_IMPL} {RULE}: passed in 1.3.0 -> failed in 1.10.0"
        in text
    )
    assert f"(harness 0.1.0 -> 0.2.0: {OTHER_HARNESS})" in text
    assert f"(harness 0.1.0: {SAME_HARNESS})" in text
    verdict = json.loads((night / "verdict.json").read_text())
    assert verdict["red"] is False and len(verdict["verdict_changes"]) == 6
    html = (night / "verdict.html").read_text()
    red = re.findall(r'<li style="color:#b00000">(.*?)</li>', html)
    assert len(red) == 6 and any(f"{RULE} 1.10.0: passed on" in unescape(x) for x in red)


def test_no_regressions_file_no_section(tmp_path):
    """A night without the version view (an older store) says nothing of it."""
    night = tmp_path / "night"
    (night / "runs" / "certify").mkdir(parents=True)
    (night / "runs" / "certify" / "summary.json").write_text(json.dumps({"targets": []}))
    _nightly_verdict(night, tmp_path / "store", "none")
    assert "Verdict changes" not in (night / "verdict.md").read_text()
    assert json.loads((night / "verdict.json").read_text())["verdict_changes"] == []


def _nightly_verdict(night: Path, store: Path, targets: str) -> subprocess.CompletedProcess:
    """scripts/nightly.sh's verdict step alone, over the night folder given."""
    env = dict(
        os.environ,
        NIGHTLY_DIR=str(night),
        NIGHTLY_STORE=str(store),
        NIGHTLY_TARGETS=targets,
        NIGHTLY_IMPAIRMENTS="none",
        NIGHTLY_INTEROP_PROTOCOLS="none",
    )
    env.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run(
        [str(REPO_ROOT / "scripts" / "nightly.sh"), "verdict"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=REPO_ROOT,
    )


def test_the_cli_says_what_is_missing(tmp_path):
    """No dataset: a usage error (exit 2) before any JVM starts."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance.cli",
            "versions-view",
            "--dataset",
            str(tmp_path / "nothing"),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "conformance: error:" in done.stderr and not (tmp_path / "out").exists()


def test_one_implementation_and_an_unknown_one(spark, view_out):
    """``--implementation X`` reads X's records alone; a name with no record is
    a usage error (IngestError: exit 2 from the CLI)."""
    from conformance.aggregate.errors import IngestError
    from conformance.aggregate.version_view import build

    _, dataset = view_out
    view = build(spark, dataset, PYPI_IMPL, progress=quiet)
    assert [i["implementation"] for i in view["implementations"]] == [PYPI_IMPL]
    assert [r["version"] for r in view["implementations"][0]["releases"]] == PYPI_ORDER
    assert view["release_changes"] == [] and view["night_changes"] == []
    with pytest.raises(IngestError, match="no record of nobody"):
        build(spark, dataset, "nobody", progress=quiet)

"""A run that certifies two targets of one protocol (as the nightly does with
21) runs the same cases for each: every target's copy of a case must be a
case of its own in Allure, never a retry of the other's. Before, both copies
had one historyId and testCaseId, so the report kept one and filed the other
under Retries, and a target's MUST failure could show as "Passed".

Two targets of the Ripple host protocol, a few cases each: the reference
node, and the same node answering with the wrong msgno (it fails
ripplehost.msgno.server.reply-carries-msgno, which the reference passes).
Certified twice, so the ids can be compared across runs."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from conformance import report, runner
from tests.harness.cli_runner import WRONG_MSGNO_TARGET, run_cli

TARGETS = ("reference-ripplehost", "wrong-msgno")
FAILING = "ripplehost.msgno.server.reply-carries-msgno"
KEYWORD = "reply_carries_msgno"
"""The server and client cases of the msgno rule (the prerequisite, the
host-id exchange, is put back by the plugin)."""
STATUS = {
    "passed": "passed",
    "failed": "failed",
    "error": "broken",
    "not_applicable": "skipped",
    "blocked": "skipped",
}
"""results.jsonl outcome -> Allure status (docs/reports.md)."""


@dataclass
class Runs:
    first: Path
    second: Path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    base = tmp_path_factory.mktemp("two-targets")
    targets = base / "targets.toml"
    targets.write_text(WRONG_MSGNO_TARGET)
    dirs = []
    for name in ("1-first", "2-second"):
        run_dir = base / "runs" / name
        args = ["certify", "--run-dir", str(run_dir), "--targets-file", str(targets), "-k", KEYWORD]
        for target in TARGETS:
            args += ["--target", target]
        done = run_cli(*args, timeout=300)
        assert done.returncode == runner.EXIT_NOT_CONFORMANT, done.stdout + done.stderr
        dirs.append(run_dir)
    return Runs(*dirs)


def _records(run: Path) -> list[dict]:
    return [
        json.loads(line)
        for line in (run / "results.jsonl").read_text().splitlines()
        if line.strip()
    ]


def _allure_results(run: Path) -> dict[tuple[str, str], dict]:
    """(case id, target) -> its Allure result; each must be there once."""
    by_key: dict[tuple[str, str], dict] = {}
    for path in (run / "allure-results").glob("*-result.json"):
        data = json.loads(path.read_text())
        labels = {label["name"]: label["value"] for label in data["labels"]}
        key = (data["name"], labels["target"])
        assert key not in by_key, f"two Allure results for {key}"
        by_key[key] = data
    return by_key


def test_each_target_has_its_own_allure_ids_stable_across_runs(runs: Runs) -> None:
    first, second = _allure_results(runs.first), _allure_results(runs.second)
    records = _records(runs.first)
    assert {(r["case_id"], r["target"]) for r in records} == set(first), (
        "Allure results != results.jsonl"
    )
    assert Counter(target for _, target in first) == {
        target: len(records) // 2 for target in TARGETS
    }
    for field in ("historyId", "testCaseId"):
        ids = [data[field] for data in first.values()]
        assert None not in ids and len(set(ids)) == len(ids), (
            f"{field} shared between targets: {Counter(ids)}"
        )
        # The same target's case keeps its ids from run to run (Allure's
        # history and trends follow them).
        assert {key: data[field] for key, data in second.items()} == {
            key: data[field] for key, data in first.items()
        }, field
    # Each copy carries its own target's outcome: no pass that did not happen.
    for record in records:
        data = first[(record["case_id"], record["target"])]
        assert data["status"] == STATUS[record["outcome"]], (record, data["status"])
        labels = {label["name"]: label["value"] for label in data["labels"]}
        # In the tree: protocol -> target -> component and role.
        assert (labels["parentSuite"], labels["suite"]) == ("ripplehost", record["target"])
        assert labels["subSuite"] == f"{labels['component']}, target role: {record['role']}"
        assert {"name": "target", "value": repr(record["target"])} in data["parameters"]
    # The node's own output of the case beside its trace (the server's start
    # lines go to the first case that runs after it started).
    for target in TARGETS:
        logs = [
            attachment
            for (case, name), data in first.items()
            if name == target
            for attachment in data.get("attachments", [])
            if attachment["name"].startswith(f"log of {target} (server process, logs/{target}.")
        ]
        assert logs, f"no case of {target} carries its server's log"
        text = (runs.first / "allure-results" / logs[0]["source"]).read_text()
        assert text.strip(), logs[0]
    assert first[(FAILING, "wrong-msgno")]["status"] == "failed"
    assert first[(FAILING, "reference-ripplehost")]["status"] == "passed"
    # JUnit: one file per target, its suite named after the target.
    for target in TARGETS:
        suite = ET.parse(runs.first / f"junit-{target}.xml").getroot().find("testsuite")
        assert suite is not None and suite.get("name") == target


@pytest.mark.skipif(
    not (report.BUNDLED_ALLURE.is_file() and shutil.which("java")),
    reason="needs the Allure command line (scripts/install-report-deps.sh) and java",
)
def test_report_shows_every_target_copy_and_its_own_history(runs: Runs) -> None:
    for run in (runs.first, runs.second):
        assert report.build_report(run) == 0
    out = runs.second / "allure-report"
    records = _records(runs.second)
    summary = json.loads((out / "widgets" / "summary.json").read_text())["statistic"]
    assert summary["total"] == len(records), summary  # not half of them
    assert summary["failed"] == sum(r["outcome"] == "failed" for r in records) == 1, summary
    assert summary["passed"] == sum(r["outcome"] == "passed" for r in records), summary
    cases = [json.loads(path.read_text()) for path in (out / "data" / "test-cases").glob("*.json")]
    assert len(cases) == len(records)
    assert not [c["name"] for c in cases if c["retry"] or c["retriesCount"]], (
        "a target's copy filed as a retry"
    )

    def target_of(case: dict) -> str:
        return {label["name"]: label["value"] for label in case["labels"]}["target"]

    assert {target_of(c): c["status"] for c in cases if c["name"] == FAILING} == {
        "wrong-msgno": "failed",
        "reference-ripplehost": "passed",
    }
    # Each copy's History tab holds the first run's outcome of the same
    # target's copy, not the other target's.
    for case in cases:
        history = case["extra"]["history"]
        assert history["statistic"]["total"] == 2, (case["name"], target_of(case), history)
        assert [item["status"] for item in history["items"]] == [case["status"]], (
            case["name"],
            target_of(case),
        )
    # The verdict first: the report's name gives each target's, the failing one first.
    name = json.loads((out / "widgets" / "summary.json").read_text())["reportName"]
    assert name.startswith("wrong-msgno NOT CONFORMANT; reference-ripplehost CONFORMANT"), name
    # No Python: the harness's message once, no traceback, plain parameters, no asyncio tag.
    (failing,) = [c for c in cases if c["name"] == FAILING and target_of(c) == "wrong-msgno"]
    assert failing["statusMessage"].startswith(FAILING + " [MUST"), failing["statusMessage"]
    assert not failing.get("statusTrace"), failing.get("statusTrace")
    assert failing["parameters"] == [{"name": "target", "value": "wrong-msgno"}]
    assert {"name": "tag", "value": "asyncio"} not in failing["labels"]
    assert not failing.get("beforeStages") and not failing.get("afterStages")
    # The Suites tab: ripplehost -> both targets.
    tree = json.loads((out / "data" / "suites.json").read_text())
    (protocol,) = [node for node in tree["children"] if node["name"] == "ripplehost"]
    assert sorted(node["name"] for node in protocol["children"]) == sorted(TARGETS)

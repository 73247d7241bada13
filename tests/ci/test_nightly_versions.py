"""The nightly's `versions` step (scripts/nightly.sh, docs/nightly.md): the
shards of the versioned targets one after the other on a local run, their
runs gathered for the report; in the workflow (GITHUB_ACTIONS set) a shard
whose run was not downloaded fails the step, naming it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
NIGHTLY_SCRIPT = REPO_ROOT / "scripts" / "nightly.sh"


def run_step(night: Path, *steps: str, **env: str) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "NIGHTLY_DIR": str(night),
        "NIGHTLY_STORE": str(night / "store"),
        "NIGHTLY_JOBS": "1",
        "CONFORMANCE_VERSIONS_CACHE": str(night / "cache"),
        **env,
    }
    environment.pop("GITHUB_ACTIONS", None)
    environment.update(env)
    return subprocess.run(
        [str(NIGHTLY_SCRIPT), *steps],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO_ROOT,
        env=environment,
    )


def test_local_night_certifies_every_shard_of_the_plan(tmp_path):
    """Two releases that do not exist (their installs fail at once: no node
    is started), two shards: each shard's run holds its one target, not
    started with the installer's reason, and runs/versions gathers both.
    Needs PyPI's answer or its absence: either way the install fails."""
    night = tmp_path / "night"
    night.mkdir()
    (night / "versions-targets.txt").write_text("stomp-py@0.0.1\nstomp-py@0.0.2\n")
    done = run_step(night, "versions", NIGHTLY_SHARDS="2")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen = {}
    for k in (1, 2):
        records = [
            json.loads(line)
            for line in (night / f"runs/versions-{k}/results.jsonl").read_text().splitlines()
        ]
        (target,) = {r["target"] for r in records}
        # As for any target that did not start: its cases end in error
        # (start_failure), those needing them blocked, none failed.
        errors = [r for r in records if r["outcome"] == "error"]
        assert errors and all(r["start_failure"] for r in errors)
        assert all("could not be installed" in r["message"] for r in errors)
        assert not [r for r in records if r["outcome"] == "failed"]
        summary = json.loads((night / f"runs/versions-{k}/summary.json").read_text())
        assert summary["not_started"] == [target]
        seen[k] = target
    assert sorted(seen.values()) == ["stomp-py@0.0.1", "stomp-py@0.0.2"]
    gathered = (night / "runs/versions/results.jsonl").read_text().splitlines()
    assert len(gathered) == sum(
        len((night / f"runs/versions-{k}/results.jsonl").read_text().splitlines()) for k in (1, 2)
    )
    assert any((night / "runs/versions/allure-results").iterdir())
    assert "versions\tok\t" in (night / "steps.tsv").read_text()


def test_workflow_night_is_red_for_a_missing_shard(tmp_path):
    night = tmp_path / "night"
    shard = night / "runs/versions-1"
    (shard / "allure-results").mkdir(parents=True)
    (shard / "allure-results/x-result.json").write_text("{}")
    (shard / "results.jsonl").write_text('{"run_id": "r1"}\n')
    (night / "versions-targets.txt").write_text("stomp-py@0.0.1\nstomp-py@0.0.2\n")
    done = run_step(night, "versions", NIGHTLY_SHARDS="2", GITHUB_ACTIONS="true")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "versions: no runs from shard(s) 2/2" in (night / "notes.txt").read_text()
    assert (night / "runs/versions/allure-results/x-result.json").is_file()
    assert not (night / "runs/versions-2").exists()  # not certified here: the shard job's

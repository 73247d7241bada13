"""stompit 1.0 as a container client target (`container-stompit`,
conformance/node:dev, one container per launch,
conformance/targets/containers.toml): certified in containers it gets the
verdict of the process target `stompit`, exactly the failed cases
docs/findings/stompit-1.0.md lists in its table "Failed cases", and
no container of the run is left. About 40 s (a container start per client
case); the node image is rebuilt when interop/node changed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.containers.docker_support import (
    REPO_ROOT,
    build_images,
    container_tier,
    docker,
    docker_problem,
)

pytestmark, _require_docker = container_tier(docker_problem(), pytest.mark.slow)

CONTAINERS_TOML = REPO_ROOT / "conformance" / "targets" / "containers.toml"
FINDINGS = REPO_ROOT / "docs" / "findings" / "stompit-1.0.md"
ROW = re.compile(
    r"^\| stompit \| `([a-z0-9.-]+)` \| (MUST|SHOULD)(?: \([a-z-]+\))? \| (failed|error|blocked) \|",
    re.MULTILINE,
)


def test_stompit_container_gets_the_verdicts_of_the_process(tmp_path: Path):
    build_images("node")
    run_dir = tmp_path / "run"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance.cli",
            "certify",
            "--targets-file",
            str(CONTAINERS_TOML),
            "--target",
            "container-stompit",
            "--run-dir",
            str(run_dir),
            "--run-timeout",
            "400",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    known = {
        case: (level, outcome) for case, level, outcome in ROW.findall(FINDINGS.read_text("utf-8"))
    }
    assert run.returncode == (1 if any(level == "MUST" for level, _ in known.values()) else 0), (
        run.stdout[-4000:] + run.stderr[-2000:]
    )
    records = {}
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        records[record["case_id"]] = record
    judged = {
        case: (r["level"], r["outcome"])
        for case, r in records.items()
        if r["outcome"] in ("failed", "error", "blocked")
    }
    assert judged == known, run.stdout[-4000:]
    client_cases = [case for case in records if ".client." in case]
    assert len(client_cases) >= 15 and all(
        records[c]["outcome"] == "passed" or c in known for c in client_cases
    )
    summary = json.loads((run_dir / "summary.json").read_text())
    left = docker(
        "ps", "-aq", "--filter", f"label=org.conformance.run={summary['run_id']}"
    ).stdout.split()
    assert not left, f"containers of run {summary['run_id']} left behind: {left}"

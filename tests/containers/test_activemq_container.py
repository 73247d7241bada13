"""ActiveMQ 5.17 as a container target (`container-activemq`,
conformance/activemq:dev, conformance/targets/containers.toml): certified
in its container it gets the verdict of the process target `activemq`,
exactly the failed and blocked cases docs/findings/activemq-5.17.md lists
in its table "Failed cases", with the storage cases passing through the
adapter run by `docker exec` (the restart one after the container was
killed and started again), and no container of the run is left.

Needs the engine and scripts/install-activemq.sh's installation on the
host (the image copies it). About 55 s (the image unchanged: 10 s more).
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
FINDINGS = REPO_ROOT / "docs" / "findings" / "activemq-5.17.md"
ROW = re.compile(
    r"^\| activemq \| `([a-z0-9.-]+)` \| (MUST|SHOULD)(?: \([a-z-]+\))? \| (failed|error|blocked) \|",
    re.MULTILINE,
)


def test_activemq_container_gets_the_verdicts_of_the_process(tmp_path: Path):
    if not Path("/usr/share/activemq/bin/activemq.jar").exists():
        pytest.skip(
            "Debian's activemq is not installed on the host (scripts/install-activemq.sh): "
            "conformance/activemq:dev copies it"
        )
    build_images("activemq")
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
            "container-activemq",
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
    assert run.returncode == 1, run.stdout[-4000:] + run.stderr[-2000:]
    records = {}
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        records[record["case_id"]] = record
    judged = {
        case: (r["level"], r["outcome"])
        for case, r in records.items()
        if r["outcome"] in ("failed", "error", "blocked")
    }
    known = {
        case: (level, outcome) for case, level, outcome in ROW.findall(FINDINGS.read_text("utf-8"))
    }
    assert judged == known, run.stdout[-4000:]
    for case in (
        "stomp.tls.server.refuses-tls-1-2",
        "stomp.tls.server.requires-client-certificate",
        "stomp.receipt.server.receipted-message-is-stored",
        "stomp.receipt.server.stored-after-restart",
    ):
        assert records[case]["outcome"] == "passed", (case, records[case]["message"])
    summary = json.loads((run_dir / "summary.json").read_text())
    left = docker(
        "ps", "-aq", "--filter", f"label=org.conformance.run={summary['run_id']}"
    ).stdout.split()
    assert not left, f"containers of run {summary['run_id']} left behind: {left}"
    assert list((run_dir / "logs").glob("container-activemq.*.container.log")), (
        "no container log saved"
    )

"""A container target's work dir (its generated BTP auth token, mounted into
the container) is removed when the run is stopped by Ctrl-C or SIGTERM,
as a launched target's is (tests/harness/test_work_dirs.py).

Runs only where a Docker engine answers (scripts/docker-setup.sh); skipped
with the reason otherwise, failed instead with CONFORMANCE_REQUIRE_DOCKER=1.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .docker_support import REPO_ROOT, build_images, container_tier, docker_problem

CONTAINER_TARGETS = REPO_ROOT / "conformance" / "targets" / "containers.toml"

pytestmark, _require_docker = container_tier(docker_problem(), pytest.mark.slow)


@pytest.fixture(scope="module")
def reference_image() -> None:
    build_images("reference")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_a_stopped_container_run_removes_its_work_dir(
    reference_image: None, tmp_path: Path, how: str
) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    run_dir = tmp_path / "run"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "conformance.cli",
            "certify",
            "--run-dir",
            str(run_dir),
            "--targets-file",
            str(CONTAINER_TARGETS),
            "--target",
            "container-reference-btp",
            "--run-timeout",
            "60",
        ],
        cwd=REPO_ROOT,
        env=dict(os.environ, TMPDIR=str(tmpdir)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    results = run_dir / "results.jsonl"
    try:
        deadline = time.monotonic() + 60
        while not (results.is_file() and len(results.read_text().splitlines()) >= 2):
            assert process.poll() is None, (
                f"certify ended before it was stopped:\n{process.communicate()[0]}"
            )
            assert time.monotonic() < deadline, "no two results within 60 s"
            time.sleep(0.1)
        made = sorted(p.name for p in tmpdir.glob("conformance-container-reference-btp.*"))
        assert len(made) == 1, made
        if how == "ctrl-c":
            os.killpg(process.pid, signal.SIGINT)  # a terminal's Ctrl-C: the CLI and its session
        else:
            os.kill(process.pid, signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode in (130, 143), output
    assert sorted(p.name for p in tmpdir.glob("conformance-*")) == []

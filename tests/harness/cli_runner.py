"""Runs the `conformance` CLI as a user would, in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = [sys.executable, "-m", "conformance.cli"]


@dataclass
class CertifyRun:
    code: int
    output: str
    run_dir: Path
    seconds: float

    @property
    def records(self) -> list[dict]:
        path = self.run_dir / "results.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    @property
    def summary(self) -> dict:
        return json.loads((self.run_dir / "summary.json").read_text())

    def by_case(self, target: str) -> dict[str, dict]:
        return {r["case_id"]: r for r in self.records if r["target"] == target}


def certify(tmp_path: Path, *args: str, timeout: float = 300) -> CertifyRun:
    run_dir = tmp_path / "run"
    started = time.monotonic()
    completed = subprocess.run(CONFORMANCE + ["certify", "--run-dir", str(run_dir), *args],
                               capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT)
    return CertifyRun(completed.returncode, completed.stdout + completed.stderr, run_dir,
                      time.monotonic() - started)

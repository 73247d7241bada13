"""Certifying a hostile fake target through the real CLI, measuring the
harness: wall time, peak resident memory, outcomes, trace sizes.

Used by tests/hostile/test_hostile_targets.py and bench/hostile_bench.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .fake_targets import targets_toml

REPO_ROOT = Path(__file__).resolve().parents[2]

# The measuring parent: a fresh interpreter whose only children are the
# `conformance` CLI and, below it, the pytest session and the fake target.
# RUSAGE_CHILDREN's ru_maxrss is the peak resident set of the largest of
# them: an upper bound on the harness's peak.
_MEASURE = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[1:]).returncode\n"
    "sys.stdout.flush()\n"
    "print(f'PEAK_RSS_KB={resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}', flush=True)\n"
    "sys.exit(code)\n"
)


@dataclass
class HostileRun:
    protocol: str
    behaviour: str
    code: int
    output: str
    run_dir: Path
    seconds: float
    peak_rss_kb: int

    @property
    def target(self) -> str:
        return f"hostile-{self.protocol}-{self.behaviour}"

    @property
    def records(self) -> list[dict]:
        path = self.run_dir / "results.jsonl"
        if not path.is_file():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    @property
    def outcomes(self) -> Counter:
        return Counter(r["outcome"] for r in self.records)

    def trace_sizes(self) -> dict[str, int]:
        folder = self.run_dir / "traces" / self.target
        return {p.stem: p.stat().st_size for p in folder.glob("*.txt")} if folder.is_dir() else {}


def certify_hostile(
    protocol: str,
    behaviour: str,
    work: Path,
    deadline: float = 1.0,
    extra: tuple[str, ...] = (),
    timeout: float = 600,
) -> HostileRun:
    """`conformance certify --targets-file ... --target hostile-<protocol>-<behaviour>`
    in a fresh measuring subprocess."""
    work.mkdir(parents=True, exist_ok=True)
    targets = work / f"{protocol}-{behaviour}.toml"
    targets.write_text(targets_toml(protocol, [behaviour]))
    run_dir = work / f"run-{protocol}-{behaviour}"
    argv = [
        sys.executable,
        "-c",
        _MEASURE,
        sys.executable,
        "-m",
        "conformance.cli",
        "certify",
        "--run-dir",
        str(run_dir),
        "--targets-file",
        str(targets),
        "--target",
        f"hostile-{protocol}-{behaviour}",
        "--deadline",
        str(deadline),
        *extra,
    ]
    started = time.monotonic()
    # A session of its own, so that a harness that never ends (an old one,
    # against an endless stream) is stopped with everything below it.
    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO_ROOT,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        output += f"\n(killed after {timeout} s)"
    seconds = time.monotonic() - started
    peak = 0
    for line in output.splitlines():
        if line.startswith("PEAK_RSS_KB="):
            peak = int(line.split("=", 1)[1])
    return HostileRun(protocol, behaviour, process.returncode, output, run_dir, seconds, peak)

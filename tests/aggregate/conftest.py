"""Real Spark for the aggregation tests: one local[2] session for the whole
test session (starting a JVM costs seconds), and run directories written
the way the harness writes them (ResultWriter, write_summary)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from conformance.core.results import ResultRecord, ResultWriter, write_summary

REPO_ROOT = Path(__file__).resolve().parents[2]
SPARK_STANDALONE = REPO_ROOT / "scripts" / "spark-standalone.sh"


@pytest.fixture(scope="session")
def spark():
    from conformance.aggregate.spark import get_session

    # The tests' datasets are a few kB: the quick JIT, as `--jit auto` picks for them.
    session = get_session(master="local[2]", quick=True)
    yield session
    session.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class StandaloneCluster:
    """A master and a worker that scripts/spark-standalone.sh started, with
    their own state directory and port (so tests never meet a user's cluster)."""

    env: dict[str, str]
    master: str = ""

    def script(self, command: str, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(SPARK_STANDALONE), command],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
        )

    def status(self) -> int:
        """The script's status exit code: 0 both run, 1 not."""
        return self.script("status", 30).returncode

    def stop(self) -> subprocess.CompletedProcess:
        return self.script("stop", 60)


@pytest.fixture
def standalone_cluster(tmp_path):
    """A running cluster (its master URL in ``.master``). Tests stop it
    themselves to check that it stops; stopping again here is a no-op then,
    and cleans up after a test that failed first."""
    cluster = StandaloneCluster(
        dict(
            os.environ,
            SPARK_STANDALONE_DIR=str(tmp_path / "cluster"),
            SPARK_MASTER_PORT=str(free_port()),
        )
    )
    try:
        started = cluster.script("start", 180)
        assert started.returncode == 0, started.stdout + started.stderr
        cluster.master = [
            line.split("=", 1)[1]
            for line in started.stdout.splitlines()
            if line.startswith("SPARK_MASTER=")
        ][0]
        yield cluster
    finally:
        cluster.stop()


def record(
    run_id: str,
    time_: str,
    implementation: str,
    version: str,
    case_id: str,
    outcome: str,
    level: str = "MUST",
    protocol: str = "btp",
    role: str = "server",
    peer: str | None = None,
) -> ResultRecord:
    return ResultRecord(
        run_id=run_id,
        time=time_,
        harness_version="0.1.0",
        target=implementation,
        implementation=implementation,
        implementation_version=version,
        protocol=protocol,
        role=role,
        case_id=case_id,
        level=level,
        citation="BTP 2.0, Flow",
        outcome=outcome,
        duration_s=0.01,
        message="" if outcome == "passed" else f"{case_id}: it broke",
        peer_implementation=peer,
    )


def write_run(
    root: Path,
    run_id: str,
    records: list[ResultRecord],
    finished: bool = True,
    extra_lines: list[str] = (),
    torn: str = "",
) -> Path:
    """A run directory as `conformance certify` leaves it; ``finished=False``
    is a killed run (no summary.json), ``torn`` a half-written last line."""
    run_dir = root / run_id
    run_dir.mkdir(parents=True)
    writer = ResultWriter(run_dir)
    for rec in records:
        writer.append(rec)
    with open(run_dir / "results.jsonl", "a", encoding="utf-8") as out:
        for line in extra_lines:
            out.write(line + "\n")
        out.write(torn)
    if finished:
        write_summary(run_dir, run_id, time.monotonic() - 1, {})
    return run_dir


def generate_runs(
    root: Path, *, cases: int, nights: int, interop_cases: int, malformed: float, seed: int
) -> Path:
    """Synthetic nightly runs of 6 implementations, 15% of them killed
    part-way, written by bench/gen_results.py under ROOT/gen; returns the
    directory of the run directories (ROOT/gen/runs)."""
    gen = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "bench" / "gen_results.py"),
            "--out",
            str(root / "gen"),
            "--implementations",
            "6",
            "--cases",
            str(cases),
            "--nights",
            str(nights),
            "--interop-cases",
            str(interop_cases),
            "--unfinished",
            "0.15",
            "--malformed",
            str(malformed),
            "--jobs",
            "1",
            "--seed",
            str(seed),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert gen.returncode == 0, f"bench/gen_results.py failed:\n{gen.stdout}{gen.stderr}"
    return root / "gen" / "runs"


def jsonl_records(run_dirs: list[Path]) -> list[dict]:
    """Every well-formed record, read with plain Python: the independent
    computation the Spark results are checked against."""
    out = []
    for run_dir in run_dirs:
        for line in (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and "case_id" in rec:
                out.append(rec)
    return out


def dataset_records(spark, dataset: Path) -> list[dict]:
    from conformance.aggregate.dataset import read_results

    return [r.asDict() for r in read_results(spark, dataset).collect()]


def dataset_runs(spark, dataset: Path) -> dict[str, dict]:
    from conformance.aggregate.dataset import read_runs

    return {r["run_id"]: r.asDict() for r in read_runs(spark, dataset).collect()}


__all__ = [
    "record",
    "write_run",
    "generate_runs",
    "jsonl_records",
    "dataset_records",
    "dataset_runs",
    "asdict",
]

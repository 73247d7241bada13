#!/usr/bin/env python3
"""Nightly-scale benchmark of the aggregation (issue #15): what a nightly job
costs on a long history, and a full rebuild beside DuckDB, in ONE run, each
figure printed beside its target; exit status 1 if one is missed.

Data: ``bench/gen_results.py`` writes N+1 nights of synthetic runs (20
implementations x 400 cases per protocol, two versions a night, interop
runs, killed runs, malformed lines; about 18,400 rows a night); the last
night is held out as "tonight". Not timed. Then, every command run as a
user runs it (its own process and Spark driver, JVM start included):

(c) full rebuild: ``conformance ingest`` of the history into an empty
    dataset, then ``conformance matrix`` over all of it; beside it DuckDB
    (2 threads, 2 GB memory limit) doing the same work on the same files
    (read every results.jsonl with an explicit schema, drop malformed lines
    and duplicate keys, write Parquet by month and protocol; then the
    requirements, certification, interop, flaky and trends tables as CSV).
    Targets: Spark time at most 1.5x DuckDB's; driver peak memory at most
    1.6 GiB (1,638 MiB) in every Spark command of the run.
(a) tonight into an empty dataset, then tonight into the history's dataset
    (incremental ingest). Targets: under 20 s, and at most 1.25x the
    empty-dataset time (the cost does not grow with the history).
(b) ``conformance matrix --since`` the 30 nights ending tonight, on the
    history's dataset. Target: under 45 s. ``--last-runs 30`` is timed too
    (informational).

Memory: the peak, sampled every 0.1 s, of the proportional set size (PSS:
resident memory with shared pages split between the processes sharing
them) summed over the command's process tree -- the Python driver and its
Java child, which in local mode is the whole Spark driver, executors
included. (A plain RSS sum would count the JVM twice whenever Hadoop forks
a shell command from it.) The Java process's peak RSS (VmHWM) is printed too.

The time and memory targets are judged at 10 million rows (the default);
smaller runs (``--rows``, ``--quick``) print the same report with "info"
instead of a verdict.

``--floor`` adds lower bounds of the rebuild (``bench/spark_floor.py``,
informational): the JSON read alone; the read, shuffle and partitioned
Parquet write, without and with dropping duplicate keys; the two
aggregations every matrix derives from. If (dedupe + aggregations) /
DuckDB is above the target, no Spark job doing this work this way on these
files meets it here. Always judged: Spark and DuckDB count the same records.

    .venv/bin/python bench/spark_bench.py                 # 10M rows (~6 GB in /tmp)
    .venv/bin/python bench/spark_bench.py --quick         # ~11,000 rows, the report's shape (CI)
    .venv/bin/python bench/spark_bench.py --rows 1000000 --keep /tmp/sb   # keep data and outputs
    .venv/bin/python bench/spark_bench.py --floor         # also the least any Spark rebuild must do

Needs the `aggregate` and `bench` extras (pyspark, duckdb, numpy) and Java 17.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from datetime import date, timedelta
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TARGET_ROWS = 10_000_000
"""Time and memory targets are judged from 95% of this size up."""
NIGHT_SECONDS = 20.0
NIGHT_RATIO = 1.25
WINDOW_NIGHTS = 30
WINDOW_SECONDS = 45.0
REBUILD_RATIO = 1.5
PEAK_MIB = 1.6 * 1024
QUICK_GEN = ["--implementations", "6", "--cases", "25", "--interop-cases", "6", "--nights", "35"]
"""--quick: 35 nights of about 310 rows, so the 30-night window is not the whole history."""


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants, less children that still run in their
    parent's memory: Java starts a command (Hadoop's shell calls) with
    posix_spawn, whose child shares the parent's address space (vfork) until
    it execs, and /proc shows that memory, PSS and all, in both processes.
    Such a child has its parent's name, virtual size and resident size."""
    children: dict[int, list[int]] = {}
    memory: dict[int, tuple[str, str, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name, rest = (entry / "stat").read_text().rsplit(")", 1)
        except OSError:
            continue
        fields = (
            rest.split()
        )  # fields[0] is stat's 3rd field (state); vsize is the 23rd, rss the 24th
        memory[int(entry.name)] = (name.split("(", 1)[1], fields[20], fields[21])
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(c for c in children.get(p, []) if memory.get(c) != memory.get(p))
    return out


def _status(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pss_kib(pid: int) -> int:
    """Proportional set size: pages shared between processes (a JVM and a
    child it forks for a shell command share all of them, copy-on-write)
    are split between them, so the sum over a tree counts each page once."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


class Sampler(threading.Thread):
    """Peak memory of a process tree (sum of PSS over its processes,
    sampled) and the peak RSS (VmHWM) of its Java process."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.interval = interval
        self.peak_kib = 0
        self.peak_parts: dict[str, int] = {}
        """PSS (KiB) per process name at the peak: says what the peak was."""
        self.java_hwm_kib = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            pids = _tree(self.pid)
            parts: dict[str, int] = {}
            for p in pids:
                name = f"{_comm(p)}[{p}]"
                parts[name] = parts.get(name, 0) + _pss_kib(p)
            if sum(parts.values()) > self.peak_kib:
                self.peak_kib, self.peak_parts = sum(parts.values()), parts
            for p in pids:
                if _comm(p) == "java":
                    self.java_hwm_kib = max(self.java_hwm_kib, _status(p, "VmHWM"))
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def timed(argv: list[str], label: str, log: Path) -> dict:
    """Run ``argv``; wall time and peak memory. A failure stops the benchmark."""
    started = time.monotonic()
    with open(log, "w") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
        sampler = Sampler(process.pid)
        sampler.start()
        code = process.wait()
        sampler.stop()
    seconds = time.monotonic() - started
    if code != 0:
        sys.exit(
            f"spark_bench: {label} failed (exit {code}); its output:\n{log.read_text()[-3000:]}"
        )
    return step_figures(label, seconds, sampler)


def timed_in_process(call: Callable[[], int], label: str, log: Path) -> dict:
    """``--one-driver``: run one step in this process, whose Spark driver
    (one JVM, started by the first step) every step shares; wall time and
    the peak memory of this process and its JVM. The JVM's start is paid
    once, in the first step's time, not in every step's."""
    started = time.monotonic()
    sampler = Sampler(os.getpid())
    sampler.start()
    with open(log, "w") as out, redirect_stdout(out), redirect_stderr(out):
        try:
            code = call()
        except SystemExit as exc:  # argparse and the floor script exit on bad arguments
            code = exc.code if isinstance(exc.code, int) else 1
    sampler.stop()
    seconds = time.monotonic() - started
    if code != 0:
        sys.exit(
            f"spark_bench: {label} failed (exit {code}); its output:\n{log.read_text()[-3000:]}"
        )
    return step_figures(label, seconds, sampler)


def step_figures(label: str, seconds: float, sampler: Sampler) -> dict:
    """One step's figures, printed as a line of the report."""
    result = {
        "seconds": round(seconds, 2),
        "peak_rss_mib": round(sampler.peak_kib / 1024, 1),
        "java_hwm_mib": round(sampler.java_hwm_kib / 1024, 1),
    }
    result["peak_parts_mib"] = {
        k: round(v / 1024) for k, v in sampler.peak_parts.items() if v >= 1024
    }
    print(
        f"  {label}: {seconds:.1f} s, peak memory (PSS) {result['peak_rss_mib']:.0f} MiB"
        + (f" (java VmHWM {result['java_hwm_mib']:.0f} MiB)" if sampler.java_hwm_kib else ""),
        flush=True,
    )
    if len(result["peak_parts_mib"]) > 2:  # more than Python and its JVM: say what else counted
        print(
            "    at the peak: "
            + ", ".join(f"{k} {v} MiB" for k, v in result["peak_parts_mib"].items()),
            flush=True,
        )
    return result


DUCKDB_SCRIPT = r"""
import sys, time, json, duckdb
runs, out, mem, spill = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
# Spill files go to the benchmark's work dir (DuckDB's default, ./.tmp, would be the checkout).
con = duckdb.connect(config={"threads": 2, "memory_limit": mem, "preserve_insertion_order": False,
                             "temp_directory": spill})
columns = ("{run_id: 'VARCHAR', time: 'VARCHAR', harness_version: 'VARCHAR', target: 'VARCHAR', "
           "implementation: 'VARCHAR', implementation_version: 'VARCHAR', protocol: 'VARCHAR', role: 'VARCHAR', "
           "case_id: 'VARCHAR', level: 'VARCHAR', citation: 'VARCHAR', outcome: 'VARCHAR', duration_s: 'DOUBLE', "
           "message: 'VARCHAR', peer_implementation: 'VARCHAR', trace_file: 'VARCHAR', host: 'VARCHAR'}")
t = time.monotonic()
con.execute(f'''
COPY (
  SELECT *, strftime(date, '%Y-%m') AS month FROM (
    SELECT * EXCLUDE (time), TRY_CAST(time AS TIMESTAMP) AS time,
           COALESCE(TRY_CAST(strptime(substr(run_id, 1, 8), '%Y%m%d') AS DATE), TRY_CAST(time AS DATE)) AS date
    FROM read_json('{runs}/*/results.jsonl', format='newline_delimited', columns={columns},
                   ignore_errors=true, maximum_object_size=1048576)
    WHERE run_id <> '' AND case_id <> '' AND target <> '' AND implementation <> '' AND protocol <> ''
      AND outcome IN ('passed', 'failed', 'error', 'blocked', 'not_applicable') AND level IN ('MUST', 'SHOULD', 'MAY')
      AND role IN ('server', 'client')
  ) WHERE date IS NOT NULL
  QUALIFY row_number() OVER (PARTITION BY run_id, target, case_id, COALESCE(peer_implementation, '')
                             ORDER BY time DESC) = 1
) TO '{out}/dataset' (FORMAT parquet, PARTITION_BY (month, protocol), OVERWRITE_OR_IGNORE)
''')
ingest = time.monotonic() - t
t = time.monotonic()
con.execute(f"CREATE VIEW res AS SELECT * FROM read_parquet('{out}/dataset/*/*/*.parquet', hive_partitioning=true)")
rate = "ROUND(passed / NULLIF(passed + failed + error + blocked, 0), 4)"
counts = ("SUM((outcome = 'passed')::INT) AS passed, SUM((outcome = 'failed')::INT) AS failed, "
          "SUM((outcome = 'error')::INT) AS error, SUM((outcome = 'blocked')::INT) AS blocked, "
          "SUM((outcome = 'not_applicable')::INT) AS not_applicable")
queries = {
  "requirements": f'''SELECT implementation, implementation_version, protocol, case_id, max(level) AS level,
      arg_max(outcome, time) AS latest_outcome, {counts}, count(*) AS records, max(time) AS latest_time
      FROM res WHERE peer_implementation IS NULL GROUP BY ALL''',
  "certification": f'''WITH per_run AS (
        SELECT implementation, implementation_version, protocol, run_id, max(time) AS run_time,
               SUM((level = 'MUST' AND outcome = 'passed')::INT) AS must_passed,
               SUM((level = 'MUST' AND outcome IN ('failed', 'error', 'blocked'))::INT) AS must_not_passed
        FROM res WHERE peer_implementation IS NULL GROUP BY ALL)
      SELECT implementation, implementation_version, protocol, arg_max(run_id, run_time) AS run_id,
             arg_max(must_passed, run_time) AS must_passed, arg_max(must_not_passed, run_time) AS must_not_passed,
             count(*) AS runs FROM per_run GROUP BY ALL''',
  "interop": f'''SELECT protocol, CASE WHEN role = 'client' THEN implementation ELSE peer_implementation END AS client,
      CASE WHEN role = 'server' THEN implementation ELSE peer_implementation END AS server, {counts},
      count(DISTINCT run_id) AS runs FROM res WHERE peer_implementation IS NOT NULL GROUP BY ALL''',
  "flaky": f'''SELECT * FROM (SELECT implementation, implementation_version, protocol, case_id,
      COALESCE(peer_implementation, '') AS peer, {counts}, count(*) AS records FROM res GROUP BY ALL)
      WHERE passed > 0 AND failed + error > 0''',
  "trends": f'''SELECT date, implementation, {counts}, count(*) AS records, count(DISTINCT run_id) AS runs
      FROM res GROUP BY ALL''',
}
rows = {}
for name, sql in queries.items():
    con.execute(f"COPY ({sql}) TO '{out}/{name}.csv' (HEADER)")
    rows[name] = con.execute(f"SELECT count(*) FROM read_csv('{out}/{name}.csv')").fetchone()[0]
matrix = time.monotonic() - t
records = con.execute("SELECT count(*) FROM res").fetchone()[0]
print(json.dumps({"ingest": round(ingest, 2), "matrix": round(matrix, 2), "records": records, "rows": rows}))
"""


def generate(work: Path, rows: int | None, quick: bool, jobs: int) -> tuple[Path, Path, dict]:
    """History and tonight's run directories; the generator's manifest."""
    sys.path.insert(0, str(REPO_ROOT / "bench"))
    import gen_results

    gen = work / "gen"
    if quick:
        gen_args = QUICK_GEN
    else:
        per_night = gen_results.rows_per_night(gen_results.parse_args(["--out", str(gen)]))
        gen_args = ["--nights", str(math.ceil(rows / per_night) + 1)]
    done = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "bench" / "gen_results.py"),
            "--out",
            str(gen),
            *gen_args,
            "--jobs",
            str(jobs),
            "--clean",
        ],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode:
        sys.exit(f"spark_bench: bench/gen_results.py failed:\n{done.stderr[-3000:]}")
    history, tonight = gen / "runs", work / "tonight" / "runs"
    shutil.rmtree(tonight.parent, ignore_errors=True)
    tonight.mkdir(parents=True)
    # Run ids begin with the night's date (gen_results names them so).
    last = max(d.name[:8] for d in history.iterdir())
    for run_dir in [d for d in history.iterdir() if d.name.startswith(last)]:
        run_dir.rename(tonight / run_dir.name)
    return history, tonight, json.loads((gen / "manifest.json").read_text())


def _json_mb(runs: Path) -> float:
    return sum(p.stat().st_size for p in runs.glob("*/results.jsonl")) / 1e6


def _lines(runs: Path) -> int:
    n = 0
    for path in runs.glob("*/results.jsonl"):
        with open(path, "rb") as handle:
            n += sum(1 for line in handle if line.strip())
    return n


def run_bench(
    work: Path,
    rows: int | None,
    quick: bool,
    driver_memory: str | None,
    jobs: int,
    floor: bool = False,
    one_driver: bool = False,
) -> dict:
    t = time.monotonic()
    history, tonight, manifest = generate(work, rows, quick, jobs)
    night_dirs = sorted(d.name for d in tonight.iterdir())
    tonight_date = date(int(night_dirs[0][:4]), int(night_dirs[0][4:6]), int(night_dirs[0][6:8]))
    figures: dict = {
        "history_json_mb": round(_json_mb(history)),
        "tonight_runs": len(night_dirs),
        "tonight_lines": _lines(tonight),
        "nights": manifest["nights"] - 1,
    }
    print(
        f"  generated {manifest['nights'] - 1} nights of history ({figures['history_json_mb']:,} MB of JSON "
        f"lines) and tonight ({tonight_date}: {len(night_dirs)} runs, {figures['tonight_lines']:,} lines) in "
        f"{time.monotonic() - t:.0f} s (not timed)",
        flush=True,
    )

    conformance = [sys.executable, "-m", "conformance.cli"]
    memory = ["--driver-memory", driver_memory] if driver_memory else []
    dataset, empty = work / "dataset", work / "dataset-tonight-only"
    for old in (
        dataset,
        empty,
        work / "floor-dataset",
    ):  # a --keep dir of an earlier run: start empty
        shutil.rmtree(old, ignore_errors=True)

    def spark(label: str, *argv: str) -> dict:
        log = work / (label.replace(" ", "-") + ".log")
        if one_driver:
            from conformance.cli import main as conformance_main

            return timed_in_process(lambda: conformance_main(list(argv) + memory), label, log)
        return timed(conformance + list(argv) + memory, label, log)

    def floor_step(label: str, log: Path, *argv: str) -> dict:
        if one_driver:
            return timed_in_process(lambda: floor_module().main(list(argv)), label, log)
        return timed(script + list(argv), label, log)

    print("(c) full rebuild", flush=True)
    figures["ingest"] = spark(
        "spark ingest history", "ingest", str(history), "--dataset", str(dataset)
    )
    figures["matrix"] = spark(
        "spark matrix history",
        "matrix",
        "--dataset",
        str(dataset),
        "--out",
        str(work / "matrix-all"),
    )
    figures["spark_records"] = json.loads((work / "matrix-all" / "matrix-report.json").read_text())[
        "records"
    ]
    duck_out = (
        work / "duckdb-out"
    )  # not "duckdb": the job script beside it would import it as the module
    shutil.rmtree(duck_out, ignore_errors=True)
    duck_out.mkdir()
    script = (
        work / "duckdb-job" / "duckdb_job.py"
    )  # alone in its directory, which Python puts on sys.path
    script.parent.mkdir(exist_ok=True)
    script.write_text(DUCKDB_SCRIPT)
    log = work / "duckdb.log"
    duck = timed(
        [
            sys.executable,
            str(script),
            str(history),
            str(duck_out),
            "2GB",
            str(work / "duckdb.spill"),
        ],
        "duckdb ingest+matrix",
        log,
    )
    duck.update(json.loads(log.read_text().strip().splitlines()[-1]))
    figures["duckdb"] = duck
    print(
        f"  duckdb: ingest {duck['ingest']:.1f} s, matrix {duck['matrix']:.1f} s, {duck['records']:,} records "
        f"(spark: {figures['spark_records']:,})",
        flush=True,
    )

    if floor:
        print(
            "(f) floor: the least a Spark rebuild must do, each step in its own process (bench/spark_floor.py)",
            flush=True,
        )
        script = [sys.executable, str(REPO_ROOT / "bench" / "spark_floor.py")]
        floor_out = work / "floor-dataset"
        shutil.rmtree(floor_out, ignore_errors=True)
        figures["floor"] = {
            "read": floor_step(
                "spark floor: read the JSON lines only",
                work / "floor-read.log",
                "read",
                str(history),
            ),
            "write": floor_step(
                "spark floor: read, shuffle, write Parquet (no duplicates dropped)",
                work / "floor-write.log",
                "write",
                str(history),
                str(floor_out),
            ),
            "dedupe": floor_step(
                "spark floor: read, drop duplicate keys, shuffle, write Parquet",
                work / "floor-dedupe.log",
                "dedupe",
                str(history),
                str(floor_out),
            ),
            "aggregate": floor_step(
                "spark floor: per-case and per-run aggregations",
                work / "floor-aggregate.log",
                "aggregate",
                str(floor_out),
            ),
        }

    print("(a) tonight's runs, incremental ingest", flush=True)
    figures["night_empty"] = spark(
        "spark ingest tonight into an empty dataset",
        "ingest",
        str(tonight),
        "--dataset",
        str(empty),
    )
    figures["night_full"] = spark(
        "spark ingest tonight into the history", "ingest", str(tonight), "--dataset", str(dataset)
    )

    print(f"(b) matrices over the last {WINDOW_NIGHTS} nights", flush=True)
    since = tonight_date - timedelta(days=WINDOW_NIGHTS - 1)
    figures["window"] = spark(
        f"spark matrix since {since}",
        "matrix",
        "--dataset",
        str(dataset),
        "--since",
        since.isoformat(),
        "--out",
        str(work / "matrix-window"),
    )
    report = json.loads((work / "matrix-window" / "matrix-report.json").read_text())
    figures["window_records"] = report["records"]
    figures["last_runs"] = spark(
        f"spark matrix last-runs {WINDOW_NIGHTS}",
        "matrix",
        "--dataset",
        str(dataset),
        "--last-runs",
        str(WINDOW_NIGHTS),
        "--out",
        str(work / "matrix-last-runs"),
    )
    figures["rows"] = figures["duckdb"]["records"]
    return figures


def floor_module():
    """bench/spark_floor.py as a module, for --one-driver."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "spark_floor", REPO_ROOT / "bench" / "spark_floor.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def checks(figures: dict, judged: bool) -> list[tuple[str, str, str, bool | None]]:
    """(what, measured, target, verdict): verdict None = not judged at this size."""
    rebuild = figures["ingest"]["seconds"] + figures["matrix"]["seconds"]
    ratio = rebuild / figures["duckdb"]["seconds"]
    night, night_empty = figures["night_full"]["seconds"], figures["night_empty"]["seconds"]
    spark_steps = ("ingest", "matrix", "night_empty", "night_full", "window", "last_runs")
    peak = max(figures[k]["peak_rss_mib"] for k in spark_steps if k in figures)
    rows = f"{figures['rows']:,}-row"

    def judge(ok: bool) -> bool | None:
        return ok if judged else None

    floor_rows = []
    if "floor" in figures:
        f = {k: v["seconds"] for k, v in figures["floor"].items()}
        duck = figures["duckdb"]["seconds"]

        def floor_ratio(a: str, b: str) -> str:
            return f"{f[a] + f[b]:.1f}/{duck:.1f} = {(f[a] + f[b]) / duck:.2f}x"

        floor_rows = [
            ("floor: JSON read only", f"{f['read']:.1f} s", "(info)", None),
            ("floor: read + write, no dedupe", f"{f['write']:.1f} s", "(info)", None),
            ("floor: read + dedupe + write", f"{f['dedupe']:.1f} s", "(info)", None),
            ("floor: two aggregations", f"{f['aggregate']:.1f} s", "(info)", None),
            (
                "floor: (write + aggregations) / duckdb",
                floor_ratio("write", "aggregate"),
                "(info)",
                None,
            ),
            (
                "floor: (dedupe + aggregations) / duckdb",
                floor_ratio("dedupe", "aggregate"),
                f"(info; target {REBUILD_RATIO:.2f}x)",
                None,
            ),
        ]

    return [
        (
            f"tonight into the {rows} dataset",
            f"{night:.1f} s",
            f"< {NIGHT_SECONDS:.0f} s",
            judge(night < NIGHT_SECONDS),
        ),
        (
            "tonight: history / empty dataset",
            f"{night / night_empty:.2f}x",
            f"<= {NIGHT_RATIO:.2f}x",
            judge(night / night_empty <= NIGHT_RATIO),
        ),
        (
            f"matrices, last {WINDOW_NIGHTS} nights",
            f"{figures['window']['seconds']:.1f} s",
            f"< {WINDOW_SECONDS:.0f} s",
            judge(figures["window"]["seconds"] < WINDOW_SECONDS),
        ),
        (
            f"matrices, --last-runs {WINDOW_NIGHTS}",
            f"{figures['last_runs']['seconds']:.1f} s",
            "(info)",
            None,
        ),
        (
            "full rebuild: spark / duckdb",
            f"{rebuild:.1f}/{figures['duckdb']['seconds']:.1f} = {ratio:.2f}x",
            f"<= {REBUILD_RATIO:.2f}x",
            judge(ratio <= REBUILD_RATIO),
        ),
        *floor_rows,
        (
            "driver peak memory (every spark step)",
            f"{peak:,.0f} MiB",
            f"<= {PEAK_MIB:,.0f} MiB",
            judge(peak <= PEAK_MIB),
        ),
        (
            "records: spark = duckdb",
            f"{figures['spark_records']:,}",
            f"= {figures['duckdb']['records']:,}",
            figures["spark_records"] == figures["duckdb"]["records"],
        ),
    ]


def print_report(rows: list[tuple[str, str, str, bool | None]]) -> int:
    """The verdict table; the exit status (1 if a judged check failed)."""
    print(f"\n{'check':<40} {'measured':>24}  {'target':<16} verdict")
    for name, value, target, ok in rows:
        print(
            f"{name:<40} {value:>24}  {target:<16} {'info' if ok is None else 'PASS' if ok else 'FAIL'}"
        )
    return 0 if all(ok is not False for *_, ok in rows) else 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument(
        "--rows",
        type=int,
        default=TARGET_ROWS,
        help=f"result rows of history (default {TARGET_ROWS:,}; targets judged at this size)",
    )
    size.add_argument(
        "--quick", action="store_true", help="about 11,000 rows: the report's shape, no verdicts"
    )
    parser.add_argument(
        "--driver-memory",
        default=None,
        help="spark driver heap (default: the commands' own default)",
    )
    parser.add_argument(
        "--keep", type=Path, help="work directory to keep (default: a temporary one, removed)"
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="generator processes")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also time the least a Spark rebuild must do (bench/spark_floor.py; ~2.5 min at 10M)",
    )
    parser.add_argument(
        "--one-driver",
        action="store_true",
        help="run every Spark step in this process on one driver JVM (started once, in the first "
        "step's time) instead of one command process each as a user runs them: the report's shape "
        "for far less CPU (the test suite's --quick run); figures are not comparable to the targets",
    )
    args = parser.parse_args()
    if args.one_driver and not args.quick:
        parser.error(
            "--one-driver goes with --quick: the judged figures are per-command, as users run them"
        )
    import importlib.util

    from conformance.aggregate import ingest as ingest_module
    from conformance.aggregate.spark import DRIVER_MEMORY

    # The manifest moved from the ingest module to the versions module;
    # either says the ingest is incremental (older trees are benchmarked too).
    incremental = (
        hasattr(ingest_module, "read_manifest")
        or importlib.util.find_spec("conformance.aggregate.versions") is not None
    )
    work = args.keep or Path(tempfile.mkdtemp(prefix="spark-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(
        f"spark_bench: {'quick' if args.quick else f'{args.rows:,} rows'}; work dir {work}; driver memory "
        f"{args.driver_memory or DRIVER_MEMORY}{'; one driver JVM for every step' if args.one_driver else ''}; "
        f"{os.cpu_count()} CPU(s), load average {load[0]:.2f} "
        f"{load[1]:.2f} {load[2]:.2f}; ingest {'incremental (manifest)' if incremental else 'without manifest'}",
        flush=True,
    )
    try:
        figures = run_bench(
            work,
            None if args.quick else args.rows,
            args.quick,
            args.driver_memory,
            args.jobs,
            args.floor,
            args.one_driver,
        )
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    judged = not args.quick and figures["rows"] >= TARGET_ROWS * 0.95
    figures["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    rows = checks(figures, judged)
    status = print_report(rows)
    if not judged:
        print(f"(targets are judged at {TARGET_ROWS:,} rows; this run had {figures['rows']:,})")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in figures['load_average_end'])}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())

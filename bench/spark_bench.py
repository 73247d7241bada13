#!/usr/bin/env python3
"""Scale benchmark of the aggregation: `conformance ingest` and `conformance
matrix` on synthetic nightly results of 1 and 10 million rows, beside the
same work done by DuckDB on the same files, in the same run.

For each size:

1. ``bench/gen_results.py`` writes the run directories (20 implementations
   x 400 cases per protocol, two versions a night, interop runs, a few runs
   killed part-way, the odd malformed line); not timed.
2. ``conformance ingest`` and then ``conformance matrix`` run as the user
   runs them: each its own process, with its own Spark driver (local[*],
   the commands' default driver heap of 1536m unless ``--driver-memory``). Wall time includes the JVM start.
   Peak memory is sampled every 0.1 s from /proc: the proportional set size
   (PSS, resident memory with shared pages split between the processes
   sharing them) summed over the process tree -- the Python driver process
   and its Java child, which in local mode is the whole Spark driver,
   executors included, plus any short-lived process the JVM forks -- and
   reported as the peak of the sum; the Java process's own peak RSS
   (VmHWM) is printed too. (A plain RSS sum would count the JVM twice
   whenever Hadoop forks a shell command from it.)
3. DuckDB (in a subprocess, 2 threads, the same 2 GB memory limit) does the
   same work on the same files: reads every results.jsonl with an explicit
   schema (malformed lines ignored), drops duplicate (run, target, case,
   peer) keys keeping the newest, writes Parquet partitioned by month and
   protocol (the "ingest"); then, from that Parquet, computes the
   requirements, certification, interop, flaky and trends tables and writes
   them as CSV (the "matrix"). Its peak memory is sampled the same way.

Printed: one line per step as it finishes, then a table with PASS/FAIL
against the targets of issue #4: 10 million rows ingested and aggregated
(ingest + matrix wall time) in under 180 s, driver peak memory (PSS of the process tree) at most 2 GB
(2048 MiB); ratios Spark / DuckDB are informational. Exit status 0 only if
every target passes.

    .venv/bin/python bench/spark_bench.py                 # 1M and 10M rows (~10 min, ~7 GB of disk in /tmp)
    .venv/bin/python bench/spark_bench.py --rows 1000000  # one size
    .venv/bin/python bench/spark_bench.py --keep DIR      # keep the generated data and outputs in DIR

Needs the `aggregate` and `bench` extras (pyspark, duckdb, numpy) and Java 17.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 180.0
TARGET_RSS_MIB = 2048.0
TARGET_ROWS = 10_000_000


def _tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
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
        self.java_hwm_kib = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            pids = _tree(self.pid)
            self.peak_kib = max(self.peak_kib, sum(_pss_kib(p) for p in pids))
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
        sys.exit(f"spark_bench: {label} failed (exit {code}); its output:\n{log.read_text()[-3000:]}")
    result = {"seconds": round(seconds, 2), "peak_rss_mib": round(sampler.peak_kib / 1024, 1),
              "java_hwm_mib": round(sampler.java_hwm_kib / 1024, 1)}
    print(f"  {label}: {seconds:.1f} s, peak memory (PSS) {result['peak_rss_mib']:.0f} MiB"
          + (f" (java VmHWM {result['java_hwm_mib']:.0f} MiB)" if sampler.java_hwm_kib else ""), flush=True)
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
      AND outcome IN ('passed', 'failed', 'error', 'not_applicable') AND level IN ('MUST', 'SHOULD', 'MAY')
      AND role IN ('server', 'client')
  ) WHERE date IS NOT NULL
  QUALIFY row_number() OVER (PARTITION BY run_id, target, case_id, COALESCE(peer_implementation, '')
                             ORDER BY time DESC) = 1
) TO '{out}/dataset' (FORMAT parquet, PARTITION_BY (month, protocol), OVERWRITE_OR_IGNORE)
''')
ingest = time.monotonic() - t
t = time.monotonic()
con.execute(f"CREATE VIEW res AS SELECT * FROM read_parquet('{out}/dataset/*/*/*.parquet', hive_partitioning=true)")
rate = "ROUND(passed / NULLIF(passed + failed + error, 0), 4)"
counts = ("SUM((outcome = 'passed')::INT) AS passed, SUM((outcome = 'failed')::INT) AS failed, "
          "SUM((outcome = 'error')::INT) AS error, SUM((outcome = 'not_applicable')::INT) AS not_applicable")
queries = {
  "requirements": f'''SELECT implementation, implementation_version, protocol, case_id, max(level) AS level,
      arg_max(outcome, time) AS latest_outcome, {counts}, count(*) AS records, max(time) AS latest_time
      FROM res WHERE peer_implementation IS NULL GROUP BY ALL''',
  "certification": f'''WITH per_run AS (
        SELECT implementation, implementation_version, protocol, run_id, max(time) AS run_time,
               SUM((level = 'MUST' AND outcome = 'passed')::INT) AS must_passed,
               SUM((level = 'MUST' AND outcome IN ('failed', 'error'))::INT) AS must_not_passed
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


def bench_size(rows: int, work: Path, driver_memory: str, jobs: int) -> dict:
    print(f"\n== {rows:,} rows", flush=True)
    gen = work / f"gen-{rows}"
    t = time.monotonic()
    subprocess.run([sys.executable, str(REPO_ROOT / "bench" / "gen_results.py"), "--out", str(gen),
                    "--rows", str(rows), "--jobs", str(jobs), "--clean"], check=True, stdout=subprocess.DEVNULL)
    manifest = json.loads((gen / "manifest.json").read_text())
    size_mb = sum(p.stat().st_size for p in (gen / "runs").glob("*/results.jsonl")) / 1e6
    print(f"  generated {manifest['rows']:,} rows in {manifest['runs']:,} runs ({size_mb:,.0f} MB of JSON lines, "
          f"{manifest['malformed']} malformed lines, {manifest['unfinished']} unfinished runs) in "
          f"{time.monotonic() - t:.0f} s (not timed below)", flush=True)
    conformance = [sys.executable, "-m", "conformance.cli"]
    dataset, matrix_out = work / f"dataset-{rows}", work / f"matrix-{rows}"
    shutil.rmtree(dataset, ignore_errors=True)
    memory = ["--driver-memory", driver_memory] if driver_memory else []
    ingest = timed(conformance + ["ingest", str(gen / "runs"), "--dataset", str(dataset), *memory],
                   "spark ingest", work / f"ingest-{rows}.log")
    matrix = timed(conformance + ["matrix", "--dataset", str(dataset), "--out", str(matrix_out), *memory],
                   "spark matrix", work / f"matrix-{rows}.log")
    report = json.loads((matrix_out / "matrix-report.json").read_text())
    duck_out = work / f"duckdb-{rows}"
    shutil.rmtree(duck_out, ignore_errors=True)
    duck_out.mkdir()
    script = work / "duckdb_job.py"
    script.write_text(DUCKDB_SCRIPT)
    log = work / f"duckdb-{rows}.log"
    duck = timed([sys.executable, str(script), str(gen / "runs"), str(duck_out), "2GB",
                  str(work / f"duckdb-{rows}.spill")], "duckdb ingest+matrix", log)
    duck.update(json.loads(log.read_text().strip().splitlines()[-1]))
    print(f"  duckdb: ingest {duck['ingest']:.1f} s, matrix {duck['matrix']:.1f} s, {duck['records']:,} records "
          f"(spark: {report['records']:,})", flush=True)
    return {"rows": manifest["rows"], "json_mb": round(size_mb), "ingest": ingest, "matrix": matrix,
            "spark_records": report["records"], "duckdb": duck}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, action="append", help="result rows (repeatable; default 1M and 10M)")
    parser.add_argument("--driver-memory", default=None,
                        help="spark driver heap (default: the commands' own default, 1536m)")
    parser.add_argument("--keep", type=Path, help="work directory to keep (default: a temporary one, removed)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="generator processes")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args()
    sizes = args.rows or [1_000_000, 10_000_000]
    work = args.keep or Path(tempfile.mkdtemp(prefix="spark-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"spark_bench: sizes {', '.join(f'{n:,}' for n in sizes)}; work dir {work}; driver memory "
          f"{args.driver_memory or 'default (1536m)'}; {os.cpu_count()} CPU(s)", flush=True)
    results = []
    try:
        for rows in sizes:
            results.append(bench_size(rows, work, args.driver_memory, args.jobs))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\n{'rows':>12} {'ingest s':>9} {'matrix s':>9} {'total s':>8} {'peak MiB':>9} {'duckdb s':>9} "
          f"{'spark/duckdb':>13}")
    checks = []
    for r in results:
        total = r["ingest"]["seconds"] + r["matrix"]["seconds"]
        peak = max(r["ingest"]["peak_rss_mib"], r["matrix"]["peak_rss_mib"])
        duck_total = r["duckdb"]["seconds"]
        print(f"{r['rows']:>12,} {r['ingest']['seconds']:>9.1f} {r['matrix']['seconds']:>9.1f} {total:>8.1f} "
              f"{peak:>9.0f} {duck_total:>9.1f} {total / duck_total:>13.2f}")
        if r["rows"] >= TARGET_ROWS * 0.95:
            checks.append((f"{r['rows']:,} rows ingest + matrix", f"{total:.1f} s", f"< {TARGET_SECONDS:.0f} s",
                           total < TARGET_SECONDS))
        checks.append((f"{r['rows']:,} rows driver peak memory", f"{peak:.0f} MiB", f"<= {TARGET_RSS_MIB:.0f} MiB",
                       peak <= TARGET_RSS_MIB))
    print()
    for name, value, target, ok in checks:
        print(f"{name:<36} {value:>12}  target {target:<12} {'PASS' if ok else 'FAIL'}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(ok for *_, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())

"""``conformance ingest``: results.jsonl files of runs into a Parquet dataset.

Why this shape:

* **Idempotent.** A record is identified by (run_id, target, case_id,
  peer_implementation); ingesting a run again replaces its records with the
  freshly read ones and changes nothing else, so a nightly job can simply
  re-ingest everything it has (or a run that was unfinished last time).
* **Nothing already ingested is ever lost.** Every ingest builds a complete
  new *version* of the dataset next to the current one and then switches the
  ``current`` symlink atomically (``rename(2)``). Partitions the ingest does
  not touch are hard links to the previous version's files, so building a
  version costs only the partitions that change. If the job dies at any
  point before the switch, ``current`` still names the old, complete
  version; the next ingest removes the debris.
* **Unfinished runs are kept.** A run without ``summary.json`` is ingested
  like any other and marked ``complete = false`` in the runs table, so the
  matrices can ignore it for certification but still count its verdicts.
* **Malformed lines never stop an ingest.** Each line that is not a JSON
  object with a known outcome, level and role, a run id, case id, target,
  implementation and protocol is counted per run (a torn last line of a
  killed run included), reported on stdout and in the JSON ingest report,
  and left out of the dataset.
* **Fast on 2 cores.** Each line is parsed exactly once, in one Spark job:
  one scan over all files (one scan, not one per file group: the JVM runs
  a single generated scan class hot), a shuffle by month/protocol that also
  gives each partition exactly one file, a window over the record key that
  labels duplicates, and a write of every line, good, duplicate or
  malformed, into a staging area partitioned by kind/month/protocol.
  Counting works on that columnar copy. New partitions are moved into the
  new version as they are; only partitions that already existed (a
  re-ingest, a late run for an ingested month) go through a merge job.

Dataset layout (DATASET defaults to ``reports/dataset``)::

    DATASET/current -> versions/v000003         the version to read
    DATASET/versions/v000003/results/month=2026-11/protocol=ssb/part-*.parquet
    DATASET/versions/v000003/runs/part-*.parquet   one row per run
    DATASET/versions/v000003/version.json
    DATASET/ingest-reports/<ingest-id>.json      one per ingest
    DATASET/.staging/, DATASET/.lock             work area and lock of a running ingest
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import reduce
from pathlib import Path
from typing import Any, Callable, Iterable

from ..core.results import OUTCOMES, RESULTS_FILE, SUMMARY_FILE

LEVELS = ("MUST", "SHOULD", "MAY")
ROLES = ("server", "client")
KEY_COLUMNS = ("run_id", "target", "case_id", "peer_implementation")
PARTITION_COLUMNS = ("month", "protocol")
CURRENT = "current"
VERSIONS = "versions"
STAGING = ".staging"
REPORTS = "ingest-reports"
MAX_MALFORMED_SAMPLES = 20

# (name, Spark SQL type) of a results.jsonl record, as ResultRecord writes it.
RECORD_FIELDS = (
    ("run_id", "string"), ("time", "string"), ("harness_version", "string"), ("target", "string"),
    ("implementation", "string"), ("implementation_version", "string"), ("protocol", "string"),
    ("role", "string"), ("case_id", "string"), ("level", "string"), ("citation", "string"),
    ("outcome", "string"), ("duration_s", "double"), ("message", "string"),
    ("peer_implementation", "string"), ("trace_file", "string"), ("host", "string"),
)
# Columns of the dataset's data files, in order (month and protocol are the
# partition directories). ``time`` is a timestamp (UTC); ``date`` is the
# run's date (from the run id, else from the record time); ``source_uri``
# is the results.jsonl the record came from, as Spark names it.
RESULT_COLUMNS = (
    "run_id", "time", "date", "harness_version", "target", "implementation", "implementation_version",
    "role", "case_id", "level", "citation", "outcome", "duration_s", "message", "peer_implementation",
    "trace_file", "host", "source_uri",
)
RUNS_SCHEMA_DDL = (
    "run_id string, run_dir string, date date, complete boolean, records long, malformed_lines long, "
    "torn_last_line boolean, first_time timestamp, last_time timestamp, implementations array<string>, "
    "protocols array<string>, ingest_id string, ingested_at timestamp"
)

Progress = Callable[[str], None]


class IngestError(RuntimeError):
    """A problem the user can fix (no runs found, dataset locked, ...)."""


@dataclass(frozen=True)
class RunInput:
    """One run directory to ingest."""
    run_dir: Path
    results: Path
    complete: bool
    """summary.json exists: the run finished."""
    size: int
    torn: bool
    """The file does not end with a newline: its last line was cut off."""

    @property
    def uri(self) -> str:
        return self.results.as_uri()


# ---------------------------------------------------------------- discovery

def _run_input(run_dir: Path) -> RunInput:
    results = run_dir / RESULTS_FILE
    size = results.stat().st_size
    torn = False
    if size:
        with open(results, "rb") as handle:
            handle.seek(-1, os.SEEK_END)
            torn = handle.read(1) != b"\n"
    return RunInput(run_dir, results, (run_dir / SUMMARY_FILE).is_file(), size, torn)


def find_runs(paths: Iterable[str | os.PathLike]) -> list[RunInput]:
    """The runs named by ``paths``: a run directory (holds results.jsonl), a
    results.jsonl file, or a directory of run directories (such as
    ``reports/runs``, or ``reports`` itself). Sorted by directory name, which
    for harness run ids is start-time order."""
    found: dict[Path, RunInput] = {}
    missing = []
    for raw in paths:
        path = Path(raw).expanduser().resolve()
        candidates: list[Path] = []
        if path.is_file() and path.name == RESULTS_FILE:
            candidates = [path.parent]
        elif (path / RESULTS_FILE).is_file():
            candidates = [path]
        elif path.is_dir():
            candidates = sorted(p.parent for p in path.glob(f"*/{RESULTS_FILE}"))
            if not candidates:
                candidates = sorted(p.parent for p in path.glob(f"runs/*/{RESULTS_FILE}"))
            if not candidates:
                missing.append(f"{raw} (a directory without {RESULTS_FILE} in it or in its subdirectories)")
        else:
            missing.append(f"{raw} (does not exist)")
        for run_dir in candidates:
            found.setdefault(run_dir, _run_input(run_dir))
    if missing:
        raise IngestError("no runs found in " + "; ".join(missing)
                          + f": a run directory holds {RESULTS_FILE} (conformance certify writes reports/runs/<run-id>/)")
    if not found:
        raise IngestError("no runs given")
    return sorted(found.values(), key=lambda r: (r.run_dir.name, str(r.run_dir)))


# ------------------------------------------------------------------ layout

def current_version(dataset: Path) -> Path | None:
    """The directory of the current version, or None for an empty dataset."""
    link = Path(dataset) / CURRENT
    if not link.is_symlink() and not link.exists():
        return None
    target = link.resolve()
    if not target.is_dir():
        raise IngestError(f"{link} points at {target}, which is missing: the dataset is damaged")
    return target


def list_partitions(results_dir: Path) -> dict[tuple[str, str], Path]:
    """(month, protocol) -> directory, for a results directory."""
    out: dict[tuple[str, str], Path] = {}
    if not results_dir.is_dir():
        return out
    for month_dir in results_dir.glob("month=*"):
        for proto_dir in month_dir.glob("protocol=*"):
            if proto_dir.is_dir():
                out[(_unescape(month_dir.name.split("=", 1)[1]),
                     _unescape(proto_dir.name.split("=", 1)[1]))] = proto_dir
    return out


def _unescape(value: str) -> str:
    # Spark escapes partition values like Hive (%XX); none of ours need it,
    # but a protocol name might.
    return urllib.parse.unquote(value)


def _partition_path(root: Path, month: str, protocol: str) -> Path:
    return root / f"month={month}" / f"protocol={protocol}"


def _data_files(directory: Path) -> list[Path]:
    return [p for p in directory.iterdir() if p.is_file() and not p.name.startswith((".", "_"))]


# ------------------------------------------------------------------- spark

def _record_schema() -> Any:
    from pyspark.sql import types as T
    kinds = {"string": T.StringType(), "double": T.DoubleType()}
    return T.StructType([T.StructField(name, kinds[kind]) for name, kind in RECORD_FIELDS])


def parse_lines(spark: Any, runs: list[RunInput]) -> Any:
    """Every non-blank line of the runs as one row: the record's columns, a
    ``kind`` ('record' or 'malformed'), ``month`` and ``source_uri``.

    Lenient on purpose: the reader gives NULL for what it cannot read (a
    torn line, a value of the wrong type), and a row is 'record' only if
    every column the matrices rely on is usable."""
    from pyspark.sql import functions as F

    # Spark's JSON reader with a fixed schema: faster than from_json over
    # text lines, skips blank lines, and gives NULLs for what it cannot read.
    rows = (spark.read.schema(_record_schema()).option("mode", "PERMISSIVE")
            .json([r.uri for r in runs]).withColumn("source_uri", F.input_file_name()))
    # The run's date from a harness run id (20261122T074437Z-...), else from
    # the record's time. Integer parts and make_date: cheaper per row than a
    # date pattern, and NULL (not an error) for anything else.
    run_date = F.make_date(*(F.substring("run_id", a, b).cast("int") for a, b in ((1, 4), (5, 2), (7, 2))))
    ts = F.col("time").cast("timestamp")
    rows = rows.withColumn("time", ts).withColumn("date", F.coalesce(run_date, F.to_date("time")))

    def present(name: str) -> Any:
        return F.col(name).isNotNull() & (F.length(name) > 0)

    valid = (present("run_id") & present("case_id") & present("target") & present("implementation")
             & F.col("implementation_version").isNotNull() & present("protocol")
             & F.col("outcome").isin(*OUTCOMES) & F.col("level").isin(*LEVELS)
             & F.col("role").isin(*ROLES) & F.col("date").isNotNull())
    rows = rows.withColumn("_valid", valid)
    return rows.select(
        F.when(F.col("_valid"), F.lit("record")).otherwise(F.lit("malformed")).alias("kind"),
        *RESULT_COLUMNS,
        F.when(F.col("_valid"), F.substring(F.col("date").cast("string"), 1, 7)).alias("month"),
        F.when(F.col("_valid"), F.col("protocol")).alias("protocol"),
    )


def _key_cols() -> list[Any]:
    from pyspark.sql import functions as F
    return [F.col("run_id"), F.col("target"), F.col("case_id"),
            F.coalesce(F.col("peer_implementation"), F.lit("")).alias("peer_key")]


def _partition_filter(parts: set[tuple[str, str]]) -> Any:
    """A filter on (month, protocol) that Spark can prune partitions with."""
    from pyspark.sql import functions as F
    months = sorted({m for m, _ in parts})
    keys = sorted(f"{m}/{p}" for m, p in parts)
    return F.col("month").isin(*months) & F.concat_ws("/", "month", "protocol").isin(*keys)


def stage_frame(spark: Any, runs: list[RunInput]) -> Any:
    """The parsed lines, shuffled by (kind, month, protocol) and with every
    record that repeats an earlier one's key relabelled ``duplicate``.

    The window's partitioning is satisfied by the shuffle (its keys are a
    superset), so Spark sorts within each shuffle partition and shuffles
    nothing more; the sort also orders each partition's file by run.
    Of duplicates the newest by time is kept; every other column takes part
    in the order only to make the choice deterministic."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = parse_lines(spark, runs).repartition("kind", *PARTITION_COLUMNS)
    peer_key = F.coalesce(F.col("peer_implementation"), F.lit(""))
    tiebreak = [c for c in RESULT_COLUMNS if c not in ("run_id", "target", "case_id", "time", "peer_implementation")]
    window = Window.partitionBy("kind", *PARTITION_COLUMNS, "run_id", "target", "case_id", peer_key).orderBy(
        F.col("time").desc_nulls_last(), *(F.col(c).asc_nulls_last() for c in tiebreak))
    first = F.row_number().over(window) == 1
    kind = F.when((F.col("kind") == "record") & ~first, F.lit("duplicate")).otherwise(F.col("kind"))
    return rows.select(kind.alias("kind"), *RESULT_COLUMNS, *PARTITION_COLUMNS)


# ------------------------------------------------------------------ ingest

def _now() -> datetime:
    return datetime.now(timezone.utc)


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return str(value)


class _Lock:
    """One ingest at a time per dataset (two would both build version N+1)."""

    def __init__(self, dataset: Path) -> None:
        self.path = dataset / ".lock"
        self.handle = None

    def __enter__(self) -> "_Lock":
        self.handle = open(self.path, "a+")
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            self.handle.close()
            raise IngestError(f"another ingest is running on {self.path.parent} (lock {self.path})") from exc
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.handle is not None
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


def _cleanup_debris(dataset: Path, progress: Progress) -> None:
    """Remove what a dead ingest left: its staging dir and its unfinished
    version (never the current one, which it had not replaced)."""
    staging = dataset / STAGING
    if staging.exists():
        for child in staging.iterdir():
            progress(f"removing leftovers of an interrupted ingest: {child}")
            shutil.rmtree(child, ignore_errors=True)
    versions = dataset / VERSIONS
    if not versions.is_dir():
        return
    for child in versions.iterdir():
        if child.name.endswith(".tmp"):
            progress(f"removing an unfinished version: {child}")
            shutil.rmtree(child, ignore_errors=True)


def _prune_versions(dataset: Path, current: Path) -> None:
    """Keep the current version and the one before it (a reader that opened
    the previous version a moment ago can still finish)."""
    versions = sorted(p for p in (dataset / VERSIONS).iterdir()
                      if p.is_dir() and p.name.startswith("v") and not p.name.endswith(".tmp"))
    keep = {current.name}
    older = [p for p in versions if p.name < current.name]
    if older:
        keep.add(older[-1].name)
    for p in versions:
        if p.name not in keep:
            shutil.rmtree(p, ignore_errors=True)


def _next_version_name(dataset: Path) -> str:
    versions = dataset / VERSIONS
    numbers = [int(p.name[1:7]) for p in versions.glob("v[0-9]*") if p.name[1:7].isdigit()] \
        if versions.is_dir() else []
    return f"v{(max(numbers) + 1 if numbers else 1):06d}"


def _swap_current(dataset: Path, version_dir: Path) -> None:
    """Point DATASET/current at version_dir in one rename(2)."""
    link = dataset / CURRENT
    tmp = dataset / f".{CURRENT}.{uuid.uuid4().hex[:8]}"
    os.symlink(os.path.relpath(version_dir, dataset), tmp)
    os.replace(tmp, link)
    fd = os.open(dataset, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _malformed_samples(runs: list[RunInput], limit: int = 3) -> list[dict[str, Any]]:
    """Line numbers and starts of malformed lines, read back in Python for
    the report (Spark does not know line numbers)."""
    out = []
    for run in runs:
        bad = []
        with open(run.results, "rb") as handle:
            for number, raw in enumerate(handle, 1):
                line = raw.decode("utf-8", "replace").strip()
                if not line:
                    continue
                ok = False
                try:
                    rec = json.loads(line)
                    ok = (isinstance(rec, dict) and rec.get("outcome") in OUTCOMES
                          and rec.get("level") in LEVELS and rec.get("role") in ROLES
                          and all(rec.get(k) for k in ("run_id", "case_id", "target", "implementation",
                                                        "protocol")))
                except ValueError:
                    pass
                if not ok:
                    bad.append({"line": number, "start": line[:120]})
                    if len(bad) >= limit:
                        break
        out.append({"run_dir": str(run.run_dir), "samples": bad})
    return out


def ingest(spark: Any, paths: Iterable[str | os.PathLike], dataset: str | os.PathLike,
           progress: Progress = print) -> dict[str, Any]:
    """Ingest the runs under ``paths`` into ``dataset``; returns the report
    (also written to DATASET/ingest-reports/<id>.json)."""
    from pyspark.sql import functions as F

    started = time.monotonic()
    runs = find_runs(paths)
    dataset = Path(dataset).expanduser().resolve()
    dataset.mkdir(parents=True, exist_ok=True)
    ingest_id = _now().strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]
    complete = sum(r.complete for r in runs)
    total_bytes = sum(r.size for r in runs)
    progress(f"ingest {ingest_id}: {len(runs)} run(s) ({complete} finished, {len(runs) - complete} unfinished), "
             f"{total_bytes / 1e6:,.1f} MB of results -> {dataset}")

    with _Lock(dataset):
        previous = current_version(dataset)
        _cleanup_debris(dataset, progress)
        work = dataset / STAGING / ingest_id
        work.mkdir(parents=True)
        try:
            report = _ingest_locked(spark, runs, dataset, previous, work, ingest_id, progress, started, F)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            try:
                (dataset / STAGING).rmdir()
            except OSError:
                pass
    return report


def _ingest_locked(spark: Any, runs: list[RunInput], dataset: Path, previous: Path | None, work: Path,
                   ingest_id: str, progress: Progress, started: float, F: Any) -> dict[str, Any]:
    # 1. Parse every line once, into a columnar staging copy.
    t = time.monotonic()
    staged = work / "parsed"
    stage_frame(spark, runs).write.partitionBy("kind", *PARTITION_COLUMNS).parquet(str(staged))
    progress(f"  parsed {len(runs)} results file(s) into staging: {time.monotonic() - t:.1f} s")

    # 2. Count per run, from the staging copy (a few columns; numeric
    # aggregates only, so Spark can use its fast hash aggregation).
    t = time.monotonic()
    st = spark.read.option("basePath", str(staged)).parquet(str(staged))
    keep_run = F.col("kind") != "malformed"
    stats = (st.groupBy("source_uri", "kind", F.when(keep_run, F.col("run_id")).alias("run"),
                        F.when(keep_run, F.col("implementation")).alias("impl"), "protocol")
             .agg(F.count(F.lit(1)).alias("n"), F.min("time").alias("first"), F.max("time").alias("last"),
                  F.min("date").alias("date"))
             .collect())
    by_path = {str(r.results): r for r in runs}
    malformed: dict[Path, int] = {}
    duplicates: dict[str, int] = {}
    per_run: dict[str, dict[str, Any]] = {}
    for row in stats:
        run = _match_run(row.source_uri, by_path)
        if row.kind == "malformed":
            malformed[run.run_dir] = malformed.get(run.run_dir, 0) + row.n
            continue
        if row.kind == "duplicate":
            duplicates[row.run] = duplicates.get(row.run, 0) + row.n
            continue
        entry = per_run.setdefault(row.run, {
            "run_id": row.run, "run_dir": str(run.run_dir), "date": row.date, "complete": run.complete,
            "records": 0, "first_time": row.first, "last_time": row.last,
            "implementations": set(), "protocols": set(), "dirs": set()})
        entry["records"] += row.n
        entry["date"] = min(entry["date"], row.date)
        entry["first_time"] = min(entry["first_time"], row.first)
        entry["last_time"] = max(entry["last_time"], row.last)
        entry["implementations"].add(row.impl)
        entry["protocols"].add(row.protocol)
        entry["dirs"].add(run.run_dir)
        entry["complete"] = entry["complete"] or run.complete
    records = sum(e["records"] for e in per_run.values())
    bad_lines = sum(malformed.values())
    dup_count = sum(duplicates.values())
    torn = [r for r in runs if r.torn]
    shared = {k: v for k, v in per_run.items() if len(v["dirs"]) > 1}
    progress(f"  {records:,} record(s) in {len(per_run)} run(s); {bad_lines:,} malformed line(s) in "
             f"{len(malformed)} file(s) ({len(torn)} with a torn last line); {dup_count:,} duplicate record(s) "
             f"dropped: {time.monotonic() - t:.1f} s")
    for run_dir, n in sorted(malformed.items())[:10]:
        progress(f"    {n} malformed line(s) in {run_dir / RESULTS_FILE}")
    if len(malformed) > 10:
        progress(f"    ... and {len(malformed) - 10} more file(s); all are listed in the ingest report")
    for run_id, entry in sorted(shared.items()):
        progress(f"    run {run_id} appears in {len(entry['dirs'])} directories; its records are merged")

    # 3. Which partitions are new, which must be merged with what exists.
    new_parts = list_partitions(staged / "kind=record")
    old_parts = list_partitions(previous / "results") if previous else {}
    merge_parts = set(new_parts) & set(old_parts)
    fresh_parts = set(new_parts) - merge_parts
    old_runs = _read_runs(spark, previous)
    reingested = sorted(set(per_run) & set(old_runs))
    progress(f"  {len(new_parts)} partition(s) touched: {len(fresh_parts)} new, {len(merge_parts)} to merge "
             f"({len(reingested)} run(s) ingested before); "
             f"{len(set(old_parts) - set(new_parts))} kept as they are")

    # 4. Merge: existing records of those partitions whose key is not in
    # this batch, plus this batch's (already unique) records.
    merged_dir = work / "merged"
    if merge_parts:
        t = time.monotonic()
        cond = _partition_filter(merge_parts)
        new_m = st.where((F.col("kind") == "record") & cond).drop("kind")
        old = spark.read.option("basePath", str(previous / "results")).parquet(str(previous / "results"))
        keys = ["run_id", "target", "case_id", "peer_key"]
        old_kept = (old.where(cond).withColumn("peer_key", F.coalesce("peer_implementation", F.lit("")))
                    .join(new_m.select(*_key_cols()), keys, "left_anti").drop("peer_key"))
        (new_m.unionByName(old_kept.select(*new_m.columns)).repartition(*PARTITION_COLUMNS)
         .sortWithinPartitions(*PARTITION_COLUMNS, "run_id", "target", "case_id")
         .write.partitionBy(*PARTITION_COLUMNS).parquet(str(merged_dir)))
        progress(f"  merged {len(merge_parts)} partition(s): {time.monotonic() - t:.1f} s")

    # 5. Assemble the new version: links to untouched partitions, moved new ones.
    t = time.monotonic()
    name = _next_version_name(dataset)
    building = dataset / VERSIONS / f"{name}.tmp"
    results_dir = building / "results"
    results_dir.mkdir(parents=True)
    for part, src in old_parts.items():
        if part in new_parts:
            continue
        dst = _partition_path(results_dir, *part)
        dst.mkdir(parents=True)
        for file in _data_files(src):
            _link_or_copy(file, dst / file.name)
    for part in fresh_parts:
        dst = _partition_path(results_dir, *part)
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(new_parts[part], dst)
    if merge_parts:
        for part, src in list_partitions(merged_dir).items():
            dst = _partition_path(results_dir, *part)
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)

    # The runs table: previous rows, with this ingest's runs replacing theirs.
    now = _now()
    by_dir = {r.run_dir: r for r in runs}
    all_runs = dict(old_runs)
    for run_id, entry in per_run.items():
        all_runs[run_id] = {
            "run_id": run_id, "run_dir": entry["run_dir"], "date": entry["date"],
            "complete": entry["complete"], "records": entry["records"],
            "malformed_lines": sum(malformed.get(d, 0) for d in entry["dirs"]),
            "torn_last_line": any(by_dir[d].torn for d in entry["dirs"]),
            "first_time": entry["first_time"], "last_time": entry["last_time"],
            "implementations": sorted(entry["implementations"]), "protocols": sorted(entry["protocols"]),
            "ingest_id": ingest_id, "ingested_at": now}
    with_records = {d for e in per_run.values() for d in e["dirs"]}
    empty = [r for r in runs if r.run_dir not in with_records]
    for run in empty:
        # Kept too: the runs table says the run exists and holds nothing usable.
        progress(f"    no valid record in {run.results}")
        run_id = _summary_run_id(run) or run.run_dir.name
        all_runs[run_id] = {
            "run_id": run_id, "run_dir": str(run.run_dir), "date": None, "complete": run.complete,
            "records": 0, "malformed_lines": malformed.get(run.run_dir, 0), "torn_last_line": run.torn,
            "first_time": None, "last_time": None, "implementations": [], "protocols": [],
            "ingest_id": ingest_id, "ingested_at": now}
    _write_runs(spark, all_runs, building / "runs")

    report = {
        "ingest_id": ingest_id,
        "dataset": str(dataset),
        "version": name,
        "previous_version": previous.name if previous else None,
        "finished": _iso(now),
        "seconds": round(time.monotonic() - started, 2),
        "runs": {"given": len(runs), "finished": sum(r.complete for r in runs),
                 "unfinished": sum(not r.complete for r in runs),
                 "with_records": len(per_run), "without_valid_records": [str(r.run_dir) for r in empty],
                 "ingested_before": len(reingested), "in_several_directories": sorted(shared)},
        "records": records,
        "duplicate_records_in_input": dup_count,
        "malformed_lines": bad_lines,
        "torn_last_lines": len(torn),
        "malformed_by_run": [
            {"run_dir": str(d), "malformed_lines": n} for d, n in sorted(malformed.items())],
        "malformed_samples": _malformed_samples(
            [r for r in runs if r.run_dir in malformed][:MAX_MALFORMED_SAMPLES]),
        "partitions": {"new": len(fresh_parts), "merged": len(merge_parts),
                       "kept": len(set(old_parts) - set(new_parts))},
        "dataset_runs": len(all_runs),
        "dataset_records": sum(int(r["records"]) for r in all_runs.values()),
    }
    (building / "version.json").write_text(json.dumps(
        {"version": name, "ingest_id": ingest_id, "created": _iso(now),
         "previous": report["previous_version"], "runs": len(all_runs),
         "records": report["dataset_records"]}, indent=2) + "\n", encoding="utf-8")
    (building / "ingest-report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")

    # 6. Publish: rename the finished version into place, then switch `current`.
    final = dataset / VERSIONS / name
    os.replace(building, final)
    _swap_current(dataset, final)
    _prune_versions(dataset, final)
    reports = dataset / REPORTS
    reports.mkdir(exist_ok=True)
    (reports / f"{ingest_id}.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    progress(f"  published {name}: {report['dataset_records']:,} record(s) in {len(all_runs)} run(s) "
             f"({time.monotonic() - t:.1f} s); report {reports / (ingest_id + '.json')}")
    progress(f"ingest done in {report['seconds']:.1f} s")
    return report


def _match_run(uri: str, by_path: dict[str, RunInput]) -> RunInput:
    """The RunInput a row's source_uri names (Spark writes file:///a%20b/...)."""
    path = urllib.parse.unquote(urllib.parse.urlparse(uri).path)
    run = by_path.get(path)
    if run is None:
        raise IngestError(f"internal error: Spark read {uri}, which is none of the given runs")
    return run


def _summary_run_id(run: RunInput) -> str | None:
    try:
        value = json.loads((run.run_dir / SUMMARY_FILE).read_text(encoding="utf-8")).get("run_id")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


def _read_runs(spark: Any, version: Path | None) -> dict[str, dict[str, Any]]:
    if version is None or not (version / "runs").is_dir():
        return {}
    rows = spark.read.schema(RUNS_SCHEMA_DDL).parquet(str(version / "runs")).collect()
    return {r.run_id: r.asDict() for r in rows}


def _write_runs(spark: Any, runs: dict[str, dict[str, Any]], path: Path) -> None:
    from pyspark.sql import types as T
    schema = T._parse_datatype_string(RUNS_SCHEMA_DDL)  # noqa: SLF001 (public in effect)
    names = [f.name for f in schema.fields]
    rows = [tuple(r.get(n) for n in names) for _, r in sorted(runs.items())]
    spark.createDataFrame(rows, schema).coalesce(1).write.parquet(str(path))


def read_results(spark: Any, dataset: str | os.PathLike) -> Any:
    """The current version's records as a DataFrame (month and protocol
    included as columns). Raises IngestError for a missing or empty dataset."""
    version = require_dataset(dataset)
    path = version / "results"
    if not list_partitions(path):
        raise IngestError(f"the dataset {dataset} holds no records yet (version {version.name})")
    return spark.read.option("basePath", str(path)).parquet(str(path))


def read_runs(spark: Any, dataset: str | os.PathLike) -> Any:
    version = require_dataset(dataset)
    return spark.read.schema(RUNS_SCHEMA_DDL).parquet(str(version / "runs"))


def require_dataset(dataset: str | os.PathLike) -> Path:
    path = Path(dataset).expanduser()
    if not path.exists():
        raise IngestError(f"dataset {path} does not exist: run `conformance ingest RUN_DIR... "
                          f"--dataset {path}` first")
    version = current_version(path)
    if version is None:
        raise IngestError(f"{path} is not an ingested dataset (no {CURRENT} link): "
                          f"run `conformance ingest RUN_DIR... --dataset {path}` first")
    return version

"""``conformance ingest``: results.jsonl files of runs into a Parquet dataset.

Why this shape:

* **Idempotent.** A record is identified by (run_id, target, case_id,
  peer_implementation); ingesting a run again replaces its records with the
  freshly read ones and changes nothing else, so a nightly job can simply
  re-ingest everything it has (or a run that was unfinished last time).
* **Nothing already ingested is ever lost.** Every ingest builds a complete
  new *version* of the dataset next to the current one and then switches the
  ``current`` symlink atomically (``rename(2)``). Files the ingest does
  not rewrite are hard links to the previous version's, so building a
  version costs only the files that change. If the job dies at any
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
* **Cost follows the new data.** Each version carries a manifest of the
  results files it holds (path, size, mtime in ns, finished or not, the run
  ids they gave) and of its data files (the run ids and rows in each). A
  file whose size and mtime are unchanged is recognised and not read at
  all; new files are parsed (one Spark scan, one shuffle by
  kind/month/protocol, a window labelling duplicate keys) into *new* data
  files that are added to the partition directories. The new version is
  hard links to every file of the previous one plus those new files: no
  partition holding older runs is rewritten.
* **A grown run replaces its rows.** A results file whose size or mtime
  changed (a killed run resumed, a torn last line completed) is parsed
  again, with every other file that gave rows to the same run ids; the
  data files holding those run ids (the manifest says which) are rewritten
  without them, the others stay hard links. A run that only gained its
  summary.json is updated in the runs table without reading its results.
* **Compaction is its own step** (``conformance compact``, :func:`compact`):
  the small files the nightly ingests add to a partition are rewritten into
  one file per partition, sorted by run, in a new version with the same rows.

Dataset layout (DATASET defaults to ``reports/dataset``); the contract
readers rely on::

    DATASET/current -> versions/v000003         the version to read (switched by rename(2))
    DATASET/versions/v000003/results/month=2026-11/protocol=ssb/*.parquet
        any number of files per partition: one per ingest that added rows to
        it (until compacted), each a complete Parquet file of RESULT_COLUMNS;
        month is YYYY-MM of the run's date, so a date window prunes by month
    DATASET/versions/v000003/runs/part-*.parquet   one row per run (RUNS_SCHEMA_DDL), in one
                                                 file per ingest until compacted
    DATASET/versions/v000003/manifest.json       see below (absent in datasets made
                                                 before it existed: rebuilt on the next ingest)
    DATASET/versions/v000003/version.json
    DATASET/ingest-reports/<ingest-id>.json      one per ingest or compaction
    DATASET/.staging/, DATASET/.lock             work area and lock of a running ingest

A version directory never changes once ``current`` names it: files are only
ever added to a *new* version directory, so a reader that resolved
``current`` reads one consistent version (the one before it is kept until
the next ingest after that). ``manifest.json``::

    {"format": 1,
     "sources": {"/abs/run/results.jsonl": {"size": 123, "mtime_ns": 1, "complete": true,
                 "torn": false, "malformed_lines": 0, "run_ids": ["20261122T..."],
                 "uri": "file:///abs/run/results.jsonl", "ingest_id": "..."}},
     "files": {"results/month=2026-11/protocol=ssb/part-....parquet":
               {"run_ids": ["20261122T..."], "rows": 18400}},
     "runs_files": {"runs/part-....parquet": {"run_ids": ["20261122T..."]}}}

``read_results(spark, dataset)``, ``read_runs(spark, dataset)`` and
``read_manifest(dataset)`` read the current version.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
import urllib.parse
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from ..core.results import OUTCOMES
from ..core.run_folder import RESULTS_FILE, RunFolder

LEVELS = ("MUST", "SHOULD", "MAY")
ROLES = ("server", "client")
KEY_COLUMNS = ("run_id", "target", "case_id", "peer_implementation")
PARTITION_COLUMNS = ("month", "protocol")
CURRENT = "current"
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
VERSIONS = "versions"
STAGING = ".staging"
REPORTS = "ingest-reports"
MAX_MALFORMED_SAMPLES = 20

# (name, Spark SQL type) of a results.jsonl record, as ResultRecord writes it.
RECORD_FIELDS = (
    ("run_id", "string"),
    ("time", "string"),
    ("harness_version", "string"),
    ("target", "string"),
    ("implementation", "string"),
    ("implementation_version", "string"),
    ("protocol", "string"),
    ("role", "string"),
    ("case_id", "string"),
    ("level", "string"),
    ("citation", "string"),
    ("outcome", "string"),
    ("duration_s", "double"),
    ("message", "string"),
    ("peer_implementation", "string"),
    ("trace_file", "string"),
    ("host", "string"),
    ("impairment", "string"),
)
# Columns of the dataset's data files, in order (month and protocol are the
# partition directories). ``time`` is a timestamp (UTC); ``date`` is the
# run's date (from the run id, else from the record time); ``source_uri``
# is the results.jsonl the record came from, as Spark names it.
RESULT_COLUMNS = (
    "run_id",
    "time",
    "date",
    "harness_version",
    "target",
    "implementation",
    "implementation_version",
    "role",
    "case_id",
    "level",
    "citation",
    "outcome",
    "duration_s",
    "message",
    "peer_implementation",
    "trace_file",
    "host",
    "source_uri",
    "impairment",
)
RESULTS_SCHEMA_DDL = (
    "run_id string, time timestamp, date date, harness_version string, target string, implementation string, "
    "implementation_version string, role string, case_id string, level string, citation string, outcome string, "
    "duration_s double, message string, peer_implementation string, trace_file string, host string, "
    "source_uri string, impairment string, month string, protocol string"
)
"""The data files' columns (RESULT_COLUMNS and the partition columns), for
reading them: files written before a column existed (``impairment``, the
network impairment a record ran under, ``certify --impair``) read it as
NULL, whichever file Spark would have taken its schema from."""
RUNS_SCHEMA_DDL = (
    "run_id string, run_dir string, date date, complete boolean, records long, malformed_lines long, "
    "torn_last_line boolean, first_time timestamp, last_time timestamp, implementations array<string>, "
    "protocols array<string>, ingest_id string, ingested_at timestamp, partial boolean"
)
"""``partial``: the run's summary.json says a selection (``--case``, ``-k``)
left cases of a target's suite out; such a run certifies nothing (the
certification matrix passes it over). NULL in rows written before the
column existed, and for runs without a summary: not partial."""

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
    mtime_ns: int
    """With ``size``, how the manifest recognises a file already ingested."""
    partial: bool = False
    """summary.json marks the run partial (conformance.core.results.mark_partial)."""

    @property
    def uri(self) -> str:
        return self.results.as_uri()

    @property
    def key(self) -> str:
        """The manifest's name for this results file."""
        return str(self.results)

    @cached_property
    def torn(self) -> bool:
        """The file does not end with a newline: its last line was cut off.
        Read only for files that are parsed (a skipped file is not opened)."""
        if not self.size:
            return False
        with open(self.results, "rb") as handle:
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) != b"\n"


# ---------------------------------------------------------------- discovery


def _run_input(run_dir: Path) -> RunInput:
    results = RunFolder(run_dir).results
    stat = results.stat()
    complete = RunFolder(run_dir).is_finished()
    return RunInput(
        run_dir,
        results,
        complete,
        stat.st_size,
        stat.st_mtime_ns,
        complete and _summary_partial(run_dir),
    )


def _summary_partial(run_dir: Path) -> bool:
    """Whether the run's summary.json marks it partial (a selection left
    cases out); an unreadable summary does not."""
    try:
        summary = json.loads(RunFolder(run_dir).summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and summary.get("partial") is True


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
        elif RunFolder(path).is_run():
            candidates = [path]
        elif path.is_dir():
            candidates = sorted(p.parent for p in path.glob(f"*/{RESULTS_FILE}"))
            if not candidates:
                candidates = sorted(p.parent for p in path.glob(f"runs/*/{RESULTS_FILE}"))
            if not candidates:
                missing.append(
                    f"{raw} (a directory without {RESULTS_FILE} in it or in its subdirectories)"
                )
        else:
            missing.append(f"{raw} (does not exist)")
        for run_dir in candidates:
            found.setdefault(run_dir, _run_input(run_dir))
    if missing:
        raise IngestError(
            "no runs found in "
            + "; ".join(missing)
            + f": a run directory holds {RESULTS_FILE} (conformance certify writes reports/runs/<run-id>/)"
        )
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
                out[
                    (
                        _unescape(month_dir.name.split("=", 1)[1]),
                        _unescape(proto_dir.name.split("=", 1)[1]),
                    )
                ] = proto_dir
    return out


def _unescape(value: str) -> str:
    # Spark escapes partition values like Hive (%XX); none of ours need it,
    # but a protocol name might.
    return urllib.parse.unquote(value)


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
    rows = (
        spark.read.schema(_record_schema())
        .option("mode", "PERMISSIVE")
        .json([r.uri for r in runs])
        .withColumn("source_uri", F.input_file_name())
    )
    # The run's date from a harness run id (20261122T074437Z-...), else from
    # the record's time. Integer parts and make_date: cheaper per row than a
    # date pattern, and NULL (not an error) for anything else.
    run_date = F.make_date(
        *(F.substring("run_id", a, b).cast("int") for a, b in ((1, 4), (5, 2), (7, 2)))
    )
    ts = F.col("time").cast("timestamp")
    rows = rows.withColumn("time", ts).withColumn("date", F.coalesce(run_date, F.to_date("time")))

    def present(name: str) -> Any:
        return F.col(name).isNotNull() & (F.length(name) > 0)

    valid = (
        present("run_id")
        & present("case_id")
        & present("target")
        & present("implementation")
        & F.col("implementation_version").isNotNull()
        & present("protocol")
        & F.col("outcome").isin(*OUTCOMES)
        & F.col("level").isin(*LEVELS)
        & F.col("role").isin(*ROLES)
        & F.col("date").isNotNull()
    )
    rows = rows.withColumn("_valid", valid)
    return rows.select(
        F.when(F.col("_valid"), F.lit("record")).otherwise(F.lit("malformed")).alias("kind"),
        *RESULT_COLUMNS,
        F.when(F.col("_valid"), F.substring(F.col("date").cast("string"), 1, 7)).alias("month"),
        F.when(F.col("_valid"), F.col("protocol")).alias("protocol"),
    )


def _key_cols() -> list[Any]:
    from pyspark.sql import functions as F

    return [
        F.col("run_id"),
        F.col("target"),
        F.col("case_id"),
        F.coalesce(F.col("peer_implementation"), F.lit("")).alias("peer_key"),
    ]


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
    tiebreak = [
        c
        for c in RESULT_COLUMNS
        if c not in ("run_id", "target", "case_id", "time", "peer_implementation")
    ]
    window = Window.partitionBy(
        "kind", *PARTITION_COLUMNS, "run_id", "target", "case_id", peer_key
    ).orderBy(F.col("time").desc_nulls_last(), *(F.col(c).asc_nulls_last() for c in tiebreak))
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
        return (
            value.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        )
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
            raise IngestError(
                f"another ingest is running on {self.path.parent} (lock {self.path})"
            ) from exc
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


@contextmanager
def _staging(dataset: Path, job_id: str, progress: Progress) -> Iterator[Path]:
    """A fresh staging directory for one ingest or compaction (under the
    dataset's lock), made once what a killed one left is cleared; removed,
    with STAGING when that is empty, however the job ends."""
    _cleanup_debris(dataset, progress)
    work = dataset / STAGING / job_id
    work.mkdir(parents=True)
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)
        try:
            (dataset / STAGING).rmdir()
        except OSError:
            pass


def _prune_versions(dataset: Path, current: Path) -> None:
    """Keep the current version and the one before it (a reader that opened
    the previous version a moment ago can still finish)."""
    versions = sorted(
        p
        for p in (dataset / VERSIONS).iterdir()
        if p.is_dir() and p.name.startswith("v") and not p.name.endswith(".tmp")
    )
    keep = {current.name}
    older = [p for p in versions if p.name < current.name]
    if older:
        keep.add(older[-1].name)
    for p in versions:
        if p.name not in keep:
            shutil.rmtree(p, ignore_errors=True)


def _next_version_name(dataset: Path) -> str:
    versions = dataset / VERSIONS
    numbers = (
        [int(p.name[1:7]) for p in versions.glob("v[0-9]*") if p.name[1:7].isdigit()]
        if versions.is_dir()
        else []
    )
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
                    ok = (
                        isinstance(rec, dict)
                        and rec.get("outcome") in OUTCOMES
                        and rec.get("level") in LEVELS
                        and rec.get("role") in ROLES
                        and all(
                            rec.get(k)
                            for k in ("run_id", "case_id", "target", "implementation", "protocol")
                        )
                    )
                except ValueError:
                    pass
                if not ok:
                    bad.append({"line": number, "start": line[:120]})
                    if len(bad) >= limit:
                        break
        out.append({"run_dir": str(run.run_dir), "samples": bad})
    return out


def ingest(
    spark: Any,
    paths: Iterable[str | os.PathLike],
    dataset: str | os.PathLike,
    progress: Progress = print,
) -> dict[str, Any]:
    """Ingest the runs under ``paths`` into ``dataset``; returns the report
    (also written to DATASET/ingest-reports/<id>.json).

    ``spark`` is a SparkSession, or a function returning one: it is then
    called only when there is something to read or write, so a nightly
    ingest with nothing new starts no JVM.

    The report says what the ingest cost: ``report["runs"]`` counts the
    results files ``parsed``, ``skipped_unchanged`` (recognised by the
    manifest, not opened), ``new``, ``replaced`` (grown since their last
    ingest) and ``pulled_in`` (parsed again because they share a run id with
    a replaced one); ``report["files"]`` the data files ``linked`` from the
    previous version, ``added`` and ``rewritten``; ``report["phases"]`` the
    seconds of each phase (plan, parse, count, rewrite, publish)."""
    started = time.monotonic()
    runs = find_runs(paths)
    dataset = Path(dataset).expanduser().resolve()
    dataset.mkdir(parents=True, exist_ok=True)
    ingest_id = _now().strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]
    complete = sum(r.complete for r in runs)
    total_bytes = sum(r.size for r in runs)
    progress(
        f"ingest {ingest_id}: {len(runs)} run(s) ({complete} finished, {len(runs) - complete} unfinished), "
        f"{total_bytes / 1e6:,.1f} MB of results -> {dataset}"
    )

    with _Lock(dataset):
        previous = current_version(dataset)
        with _staging(dataset, ingest_id, progress) as work:
            get_spark = spark if callable(spark) else (lambda: spark)
            report = _ingest_locked(
                get_spark, runs, dataset, previous, work, ingest_id, progress, started
            )
    return report


# ---------------------------------------------------------------- manifest


def _empty_manifest() -> dict[str, Any]:
    return {"format": MANIFEST_FORMAT, "sources": {}, "files": {}, "runs_files": {}}


def _load_manifest_file(version: Path) -> dict[str, Any] | None:
    path = version / MANIFEST
    if not path.is_file():
        return None
    manifest = json.loads(path.read_text(encoding="utf-8"))
    if manifest.get("format") != MANIFEST_FORMAT:
        raise IngestError(
            f"{path} has format {manifest.get('format')!r}; this harness reads format "
            f"{MANIFEST_FORMAT}"
        )
    return manifest


def read_manifest(dataset: str | os.PathLike) -> dict[str, Any]:
    """The current version's manifest (see the module docstring)."""
    version = require_dataset(dataset)
    manifest = _load_manifest_file(version)
    if manifest is None:
        raise IngestError(
            f"{version} has no {MANIFEST} (it was made before manifests existed): "
            f"the next `conformance ingest` adds one"
        )
    return manifest


def _file_path(uri: str) -> str:
    """A local path from what Spark calls a file (file:/a%20b, file:///a%20b or /a b)."""
    return (
        urllib.parse.unquote(urllib.parse.urlparse(uri).path)
        if ":" in uri.split("/", 1)[0]
        else uri
    )


def _file_stats(spark: Any, root: Path) -> dict[str, dict[str, Any]]:
    """Parquet files under ``root`` (path relative to root) -> run ids and rows."""
    from pyspark.sql import functions as F

    out: dict[str, dict[str, Any]] = {}
    if not list_partitions(root):
        return out
    rows = (
        spark.read.option("basePath", str(root))
        .parquet(str(root))
        .groupBy(F.col("_metadata.file_path").alias("file"), "run_id")
        .count()
        .collect()
    )
    for row in rows:
        entry = out.setdefault(
            os.path.relpath(_file_path(row.file), root), {"run_ids": set(), "rows": 0}
        )
        entry["run_ids"].add(row.run_id)
        entry["rows"] += row["count"]
    return {k: {"run_ids": sorted(v["run_ids"]), "rows": v["rows"]} for k, v in out.items()}


def _manifest_from_data(spark: Any, version: Path, progress: Progress) -> dict[str, Any]:
    """A manifest for a version written before manifests existed, from one
    scan of its data. Its sources get no size, so each is parsed again the
    next time it is given and then replaces its rows."""
    from pyspark.sql import functions as F

    progress(f"  {version.name} has no {MANIFEST}: reading its data files once to make one")
    manifest = _empty_manifest()
    results = version / "results"
    rows = (
        spark.read.option("basePath", str(results))
        .parquet(str(results))
        .groupBy(F.col("_metadata.file_path").alias("file"), "run_id", "source_uri")
        .count()
        .collect()
        if list_partitions(results)
        else []
    )
    files: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = files.setdefault(
            "results/" + os.path.relpath(_file_path(row.file), results),
            {"run_ids": set(), "rows": 0},
        )
        entry["run_ids"].add(row.run_id)
        entry["rows"] += row["count"]
        source = manifest["sources"].setdefault(
            _file_path(row.source_uri),
            {
                "size": -1,
                "mtime_ns": -1,
                "complete": None,
                "torn": None,
                "malformed_lines": 0,
                "run_ids": [],
                "uri": row.source_uri,
                "ingest_id": None,
            },
        )
        if row.run_id not in source["run_ids"]:
            source["run_ids"].append(row.run_id)
    manifest["files"] = {
        k: {"run_ids": sorted(v["run_ids"]), "rows": v["rows"]} for k, v in files.items()
    }
    runs_files: dict[str, set[str]] = {}
    if (version / "runs").is_dir() and _data_files(version / "runs"):
        for row in (
            spark.read.schema(RUNS_SCHEMA_DDL)
            .parquet(str(version / "runs"))
            .select(F.col("_metadata.file_path").alias("file"), "run_id")
            .collect()
        ):
            runs_files.setdefault("runs/" + os.path.basename(_file_path(row.file)), set()).add(
                row.run_id
            )
    manifest["runs_files"] = {k: {"run_ids": sorted(v)} for k, v in runs_files.items()}
    return manifest


def _write_manifest(version: Path, manifest: dict[str, Any]) -> None:
    (version / MANIFEST).write_text(
        json.dumps(manifest, sort_keys=True, separators=(",", ":")) + "\n", encoding="utf-8"
    )


def _run_index(sources: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """run id -> the results files (manifest keys) that gave it rows."""
    index: dict[str, list[str]] = {}
    for key, source in sources.items():
        for run_id in source["run_ids"]:
            index.setdefault(run_id, []).append(key)
    return index


# ------------------------------------------------------------- versions


def _link_files(src_version: Path, dst_version: Path, rels: Iterable[str]) -> int:
    """Hard-link the files ``rels`` (relative paths) of one version into another."""
    made: set[Path] = set()
    count = 0
    for rel in rels:
        dst = dst_version / rel
        if dst.parent not in made:
            dst.parent.mkdir(parents=True, exist_ok=True)
            made.add(dst.parent)
        _link_or_copy(src_version / rel, dst)
        count += 1
    return count


def _move_written(written: Path, dst_results: Path) -> list[str]:
    """Move the Parquet files Spark wrote under ``written`` (month=/protocol=
    directories) into a version's results directory; their paths relative
    to the version."""
    moved = []
    made: set[Path] = set()
    for part_dir in list_partitions(written).values():
        for file in _data_files(part_dir):
            rel = os.path.relpath(file, written)
            dst = dst_results / rel
            if dst.parent not in made:
                dst.parent.mkdir(parents=True, exist_ok=True)
                made.add(dst.parent)
            os.replace(file, dst)
            moved.append("results/" + rel)
    return moved


def _publish(
    dataset: Path, building: Path, name: str, report: dict[str, Any], progress: Progress, t: float
) -> None:
    """Rename the finished version into place, switch ``current``, keep the report."""
    (building / "version.json").write_text(
        json.dumps(
            {
                "version": name,
                "ingest_id": report["ingest_id"],
                "created": report["finished"],
                "previous": report["previous_version"],
                "runs": report["dataset_runs"],
                "records": report["dataset_records"],
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    report["phases"]["publish"] = round(time.monotonic() - t, 2)
    report["seconds"] = round(time.monotonic() - report.pop("_started"), 2)
    (building / "ingest-report.json").write_text(
        json.dumps(report, indent=2) + "\n", encoding="utf-8"
    )
    final = dataset / VERSIONS / name
    os.replace(building, final)
    _swap_current(dataset, final)
    _prune_versions(dataset, final)
    _write_report(dataset, report)
    progress(
        f"  published {name}: {report['dataset_records']:,} record(s) in {report['dataset_runs']} run(s) "
        f"({report['phases']['publish']:.1f} s)"
    )


def _write_report(dataset: Path, report: dict[str, Any]) -> Path:
    reports = dataset / REPORTS
    reports.mkdir(exist_ok=True)
    path = reports / f"{report['ingest_id']}.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return path


# ---------------------------------------------------------------- ingest


def _ingest_locked(
    get_spark: Callable[[], Any],
    runs: list[RunInput],
    dataset: Path,
    previous: Path | None,
    work: Path,
    ingest_id: str,
    progress: Progress,
    started: float,
) -> dict[str, Any]:
    phases: dict[str, float] = {}
    # 1. Plan: which results files the manifest already holds unchanged.
    t = time.monotonic()
    if previous is None:
        old = _empty_manifest()
    else:
        old = _load_manifest_file(previous) or _manifest_from_data(get_spark(), previous, progress)
    sources = old["sources"]
    new, changed, unchanged, completion = [], [], [], []
    for run in runs:
        entry = sources.get(run.key)
        if entry is None:
            new.append(run)
        elif entry["size"] != run.size or entry["mtime_ns"] != run.mtime_ns:
            changed.append(run)
        else:
            unchanged.append(run)
            if entry["complete"] != run.complete or bool(entry.get("partial")) != run.partial:
                completion.append(run)
    to_parse = {r.key: r for r in new + changed}
    index = _run_index(sources)
    pulled = _pull_in(to_parse, {i for r in changed for i in sources[r.key]["run_ids"]}, index)
    phases["plan"] = round(time.monotonic() - t, 2)
    progress(
        f"  {len(new)} new results file(s), {len(changed)} grown or changed since their ingest, "
        f"{len(unchanged)} unchanged (skipped, not read), {len(completion)} of them finished since; "
        f"{len(pulled)} more parsed again for sharing a run id: {phases['plan']:.1f} s"
    )

    if not to_parse and not completion:
        report = _report(
            ingest_id,
            dataset,
            previous,
            previous,
            runs,
            new,
            changed,
            unchanged,
            completion,
            pulled,
            {},
            phases,
            started,
        )
        report["published"] = False
        report["seconds"] = round(time.monotonic() - report.pop("_started"), 2)
        path = _write_report(dataset, report)
        progress(
            f"  nothing new: {previous.name if previous else 'no version'} stays current; report {path}"
        )
        progress(f"ingest done in {report['seconds']:.1f} s")
        return report

    spark = get_spark()
    from pyspark.sql import functions as F

    # 2. Parse the new and grown files once, into a columnar staging copy.
    # Should they hold a run id that other, unparsed files of the dataset
    # also gave rows to, those are parsed with them (a run's duplicates are
    # resolved over all its files, as a full ingest does).
    attempt = 0
    while True:
        t = time.monotonic()
        staged = work / f"parsed{attempt}"
        batch = sorted(to_parse.values(), key=lambda r: (r.run_dir.name, r.key))
        if batch:
            stage_frame(spark, batch).write.partitionBy("kind", *PARTITION_COLUMNS).parquet(
                str(staged)
            )
        phases["parse"] = round(phases.get("parse", 0) + time.monotonic() - t, 2)
        progress(
            f"  parsed {len(batch)} results file(s) into staging: {time.monotonic() - t:.1f} s"
        )
        t = time.monotonic()
        counted = _count_staged(spark, staged, batch, F) if batch else _Counted()
        phases["count"] = round(phases.get("count", 0) + time.monotonic() - t, 2)
        more = _pull_in(to_parse, set(counted.per_run), index)
        if not more:
            break
        pulled += more
        attempt += 1
        progress(
            f"    run id(s) of this batch were also given by {len(more)} other file(s) of the dataset: "
            "parsing again with them"
        )
    _progress_counts(counted, batch, progress, phases["count"])

    # 3. Rewrite the data files that hold rows of the runs parsed again,
    # without those rows; every other file stays as it is.
    t = time.monotonic()
    replaced_ids = set(counted.per_run) | {
        i for k in to_parse if k in sources for i in sources[k]["run_ids"]
    }
    replaced_uris = sorted(
        {sources[k]["uri"] for k in to_parse if k in sources and sources[k].get("uri")}
    )
    affected = sorted(rel for rel, f in old["files"].items() if replaced_ids & set(f["run_ids"]))
    # Files of the dataset no longer on disk that gave rows to those runs:
    # their rows stay unless this batch has a record with the same key.
    orphans = sorted(
        k for k, s in sources.items() if k not in to_parse and replaced_ids & set(s["run_ids"])
    )
    rewritten_dir = work / "rewritten"
    if affected:
        assert previous is not None
        kept = read_data_files(spark, previous / "results", *(previous / rel for rel in affected))
        if replaced_uris:
            kept = kept.where(~F.col("source_uri").isin(*replaced_uris))
        if orphans:
            keys = ["run_id", "target", "case_id", "peer_key"]
            batch_keys = (
                spark.read.parquet(str(staged / "kind=record")).select(*_key_cols())
                if (staged / "kind=record").is_dir()
                else None
            )
            if batch_keys is not None:
                kept = (
                    kept.withColumn("peer_key", F.coalesce("peer_implementation", F.lit("")))
                    .join(batch_keys, keys, "left_anti")
                    .drop("peer_key")
                )
        (
            kept.repartition(*PARTITION_COLUMNS)
            .sortWithinPartitions(*PARTITION_COLUMNS, "run_id", "target", "case_id")
            .write.partitionBy(*PARTITION_COLUMNS)
            .parquet(str(rewritten_dir))
        )
        rewritten = _file_stats(spark, rewritten_dir)
        progress(
            f"  rewrote {len(affected)} data file(s) holding rows of {len(replaced_ids)} run(s) parsed again "
            f"({len(orphans)} of their results files no longer exist): {time.monotonic() - t:.1f} s"
        )
    else:
        rewritten = {}
    phases["rewrite"] = round(time.monotonic() - t, 2)

    # 4. Assemble the new version: links to every file not rewritten, the
    # batch's new files, the rewritten ones.
    t = time.monotonic()
    name = _next_version_name(dataset)
    building = dataset / VERSIONS / f"{name}.tmp"
    (building / "results").mkdir(parents=True)
    keep = [rel for rel in old["files"] if rel not in set(affected)]
    linked = _link_files(previous, building, keep) if previous else 0
    files = {rel: old["files"][rel] for rel in keep}
    record_root = staged / "kind=record"
    added = _move_written(record_root, building / "results") if record_root.is_dir() else []
    for rel in added:
        files[rel] = counted.files[rel]
    for rel in _move_written(rewritten_dir, building / "results") if affected else []:
        files[rel] = rewritten[os.path.relpath(rel, "results")]
    old_parts = {os.path.dirname(rel) for rel in old["files"]}
    parts = {
        "new": len({os.path.dirname(r) for r in added} - old_parts),
        "appended": len({os.path.dirname(r) for r in added} & old_parts),
        "rewritten": len({os.path.dirname(r) for r in affected}),
        "kept": len(
            old_parts - {os.path.dirname(r) for r in added} - {os.path.dirname(r) for r in affected}
        ),
    }

    # The manifest's sources: the parsed files' new entries, finished flags.
    now = _now()
    new_sources = dict(sources)
    for key, run in to_parse.items():
        ids = sorted(counted.ids_by_source.get(key, ())) or [
            _summary_run_id(run) or run.run_dir.name
        ]
        new_sources[key] = {
            "size": run.size,
            "mtime_ns": run.mtime_ns,
            "complete": run.complete,
            "partial": run.partial,
            "torn": run.torn,
            "malformed_lines": counted.malformed.get(run.run_dir, 0),
            "run_ids": ids,
            "uri": counted.uris.get(key),
            "ingest_id": ingest_id,
        }
    for run in completion:
        new_sources[run.key] = dict(
            new_sources[run.key], complete=run.complete, partial=run.partial
        )
    new_index = _run_index(new_sources)

    # The runs table, kept like the results: one new runs file holds the
    # rows of the runs parsed or updated now; a runs file holding an older
    # row of any of them is rewritten into it; the others are hard links.
    by_dir = {r.run_dir: r for r in to_parse.values()}
    fresh: dict[str, dict[str, Any]] = {}
    for run_id, entry in counted.per_run.items():
        fresh[run_id] = {
            "run_id": run_id,
            "run_dir": entry["run_dir"],
            "date": entry["date"],
            "complete": entry["complete"],
            "partial": entry["partial"],
            "records": entry["records"],
            "malformed_lines": sum(counted.malformed.get(d, 0) for d in entry["dirs"]),
            "torn_last_line": any(by_dir[d].torn for d in entry["dirs"]),
            "first_time": entry["first_time"],
            "last_time": entry["last_time"],
            "implementations": sorted(entry["implementations"]),
            "protocols": sorted(entry["protocols"]),
            "ingest_id": ingest_id,
            "ingested_at": now,
        }
    with_records = {d for e in counted.per_run.values() for d in e["dirs"]}
    empty = [r for r in batch if r.run_dir not in with_records]
    for run in empty:
        # Kept too: the runs table says the run exists and holds nothing usable.
        progress(f"    no valid record in {run.results}")
        run_id = new_sources[run.key]["run_ids"][0]
        fresh[run_id] = {
            "run_id": run_id,
            "run_dir": str(run.run_dir),
            "date": None,
            "complete": run.complete,
            "partial": run.partial,
            "records": 0,
            "malformed_lines": counted.malformed.get(run.run_dir, 0),
            "torn_last_line": run.torn,
            "first_time": None,
            "last_time": None,
            "implementations": [],
            "protocols": [],
            "ingest_id": ingest_id,
            "ingested_at": now,
        }
    finished_now = {i for r in completion for i in new_sources[r.key]["run_ids"]}
    touched = replaced_ids | set(fresh) | finished_now
    runs_files = dict(old["runs_files"])
    affected_runs = sorted(rel for rel, f in runs_files.items() if touched & set(f["run_ids"]))
    carried = _read_runs(spark, previous, affected_runs) if affected_runs else {}
    for rel in affected_runs:
        del runs_files[rel]
    # A run parsed again that no results file gives any more is gone; one
    # still held by a results file no longer on disk keeps its row.
    rows_out = {
        k: v
        for k, v in carried.items()
        if k not in fresh and (k not in replaced_ids or k in new_index)
    }
    rows_out.update(fresh)
    for run_id in finished_now | set(fresh):
        # A run is finished when any of its results files' directories holds a summary.
        if run_id in rows_out:
            rows_out[run_id] = dict(
                rows_out[run_id],
                complete=any(bool(new_sources[k]["complete"]) for k in new_index.get(run_id, ())),
                partial=any(bool(new_sources[k].get("partial")) for k in new_index.get(run_id, ())),
            )
    (building / "runs").mkdir()
    runs_linked = _link_files(previous, building, runs_files) if previous else 0
    if rows_out:
        _write_runs(spark, rows_out, work / "runs")
        for file in _data_files(work / "runs"):
            os.replace(file, building / "runs" / file.name)
            runs_files[f"runs/{file.name}"] = {"run_ids": sorted(rows_out)}
    _write_manifest(
        building,
        {
            "format": MANIFEST_FORMAT,
            "sources": new_sources,
            "files": files,
            "runs_files": runs_files,
        },
    )

    report = _report(
        ingest_id,
        dataset,
        previous,
        None,
        runs,
        new,
        changed,
        unchanged,
        completion,
        pulled,
        counted.summary(batch, empty),
        phases,
        started,
    )
    report.update(
        {
            "version": name,
            "finished": _iso(now),
            "partitions": parts,
            "files": {
                "linked": linked,
                "added": len(added),
                "rewritten": len(affected),
                "written_by_rewrite": len(rewritten),
                "total": len(files),
            },
            "runs_files": {
                "linked": runs_linked,
                "rewritten": len(affected_runs),
                "total": len(runs_files),
            },
            "dataset_runs": len({i for f in runs_files.values() for i in f["run_ids"]}),
            "dataset_records": sum(f["rows"] for f in files.values()),
            "published": True,
        }
    )
    progress(
        f"  version {name}: {linked} file(s) linked from {previous.name if previous else '(none)'}, "
        f"{len(added)} added, {len(affected)} rewritten into {len(rewritten)}"
    )
    _publish(dataset, building, name, report, progress, t)
    progress(f"ingest done in {report['seconds']:.1f} s")
    return report


def _pull_in(
    to_parse: dict[str, RunInput], run_ids: set[str], index: dict[str, list[str]]
) -> list[RunInput]:
    """Add to ``to_parse`` the dataset's results files, still on disk and not
    parsed yet, that gave rows to any of ``run_ids``; returns them."""
    added = []
    for run_id in sorted(run_ids):
        for key in index.get(run_id, ()):
            if key in to_parse:
                continue
            path = Path(key)
            if path.is_file():
                to_parse[key] = _run_input(path.parent)
                added.append(to_parse[key])
    return added


@dataclass
class _Counted:
    """What the count job found in a staging copy."""

    per_run: dict[str, dict[str, Any]] = field(default_factory=dict)
    malformed: dict[Path, int] = field(default_factory=dict)
    duplicates: dict[str, int] = field(default_factory=dict)
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    """staged record file (results/month=/protocol=/name) -> run ids and rows"""
    ids_by_source: dict[str, set[str]] = field(default_factory=dict)
    uris: dict[str, str] = field(default_factory=dict)
    """results file (manifest key) -> its name as Spark wrote it into source_uri"""

    def summary(self, batch: list[RunInput], empty: list[RunInput]) -> dict[str, Any]:
        shared = sorted(k for k, v in self.per_run.items() if len(v["dirs"]) > 1)
        return {
            "records": sum(e["records"] for e in self.per_run.values()),
            "duplicates": sum(self.duplicates.values()),
            "malformed": self.malformed,
            "torn": [r for r in batch if r.torn],
            "with_records": len(self.per_run),
            "empty": empty,
            "shared": shared,
            "batch": batch,
        }


def _count_staged(spark: Any, staged: Path, batch: list[RunInput], F: Any) -> _Counted:
    """Count per run and per staged file, from the staging copy (a few
    columns; numeric aggregates only, so Spark can use its fast hash
    aggregation)."""
    st = spark.read.option("basePath", str(staged)).parquet(str(staged))
    keep_run = F.col("kind") != "malformed"
    stats = (
        st.groupBy(
            "source_uri",
            F.col("_metadata.file_path").alias("file"),
            "kind",
            F.when(keep_run, F.col("run_id")).alias("run"),
            F.when(keep_run, F.col("implementation")).alias("impl"),
            "protocol",
        )
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.min("time").alias("first"),
            F.max("time").alias("last"),
            F.min("date").alias("date"),
        )
        .collect()
    )
    by_path = {r.key: r for r in batch}
    out = _Counted()
    record_root = staged / "kind=record"
    for row in stats:
        run = _match_run(row.source_uri, by_path)
        if row.kind == "malformed":
            out.malformed[run.run_dir] = out.malformed.get(run.run_dir, 0) + row.n
            continue
        out.uris[run.key] = row.source_uri
        out.ids_by_source.setdefault(run.key, set()).add(row.run)
        if row.kind == "duplicate":
            out.duplicates[row.run] = out.duplicates.get(row.run, 0) + row.n
            continue
        rel = "results/" + os.path.relpath(_file_path(row.file), record_root)
        file_entry = out.files.setdefault(rel, {"run_ids": [], "rows": 0})
        if row.run not in file_entry["run_ids"]:
            file_entry["run_ids"] = sorted(file_entry["run_ids"] + [row.run])
        file_entry["rows"] += row.n
        entry = out.per_run.setdefault(
            row.run,
            {
                "run_id": row.run,
                "run_dir": str(run.run_dir),
                "date": row.date,
                "complete": run.complete,
                "partial": run.partial,
                "records": 0,
                "first_time": row.first,
                "last_time": row.last,
                "implementations": set(),
                "protocols": set(),
                "dirs": set(),
            },
        )
        entry["records"] += row.n
        entry["date"] = min(entry["date"], row.date)
        entry["first_time"] = min(entry["first_time"], row.first)
        entry["last_time"] = max(entry["last_time"], row.last)
        entry["implementations"].add(row.impl)
        entry["protocols"].add(row.protocol)
        entry["dirs"].add(run.run_dir)
        entry["complete"] = entry["complete"] or run.complete
        entry["partial"] = entry["partial"] or run.partial
    return out


def _progress_counts(
    counted: _Counted, batch: list[RunInput], progress: Progress, seconds: float
) -> None:
    records = sum(e["records"] for e in counted.per_run.values())
    torn = sum(r.torn for r in batch)
    progress(
        f"  {records:,} record(s) in {len(counted.per_run)} run(s); {sum(counted.malformed.values()):,} "
        f"malformed line(s) in {len(counted.malformed)} file(s) ({torn} with a torn last line); "
        f"{sum(counted.duplicates.values()):,} duplicate record(s) dropped: {seconds:.1f} s"
    )
    for run_dir, n in sorted(counted.malformed.items())[:10]:
        progress(f"    {n} malformed line(s) in {RunFolder(run_dir).results}")
    if len(counted.malformed) > 10:
        progress(
            f"    ... and {len(counted.malformed) - 10} more file(s); all are listed in the ingest report"
        )
    for run_id, entry in sorted(counted.per_run.items()):
        if len(entry["dirs"]) > 1:
            progress(
                f"    run {run_id} appears in {len(entry['dirs'])} directories; its records are merged"
            )


def _report(
    ingest_id: str,
    dataset: Path,
    previous: Path | None,
    version: Path | None,
    runs: list[RunInput],
    new: list,
    changed: list,
    unchanged: list,
    completion: list,
    pulled: list,
    summary: dict[str, Any],
    phases: dict[str, float],
    started: float,
) -> dict[str, Any]:
    malformed = summary.get("malformed", {})
    parsed = len(new) + len(changed) + len(pulled)
    return {
        "ingest_id": ingest_id,
        "dataset": str(dataset),
        "version": version.name if version else None,
        "previous_version": previous.name if previous else None,
        "finished": _iso(_now()),
        "_started": started,
        "runs": {
            "given": len(runs),
            "finished": sum(r.complete for r in runs),
            "unfinished": sum(not r.complete for r in runs),
            "parsed": parsed,
            "new": len(new),
            "replaced": len(changed),
            "pulled_in": len(pulled),
            "skipped_unchanged": len(unchanged),
            "completion_updated": len(completion),
            "ingested_before": len(changed) + len(unchanged),
            "with_records": summary.get("with_records", 0),
            "without_valid_records": [str(r.run_dir) for r in summary.get("empty", [])],
            "in_several_directories": summary.get("shared", []),
        },
        "records": summary.get("records", 0),
        "duplicate_records_in_input": summary.get("duplicates", 0),
        "malformed_lines": sum(malformed.values()),
        "torn_last_lines": len(summary.get("torn", [])),
        "malformed_by_run": [
            {"run_dir": str(d), "malformed_lines": n} for d, n in sorted(malformed.items())
        ],
        "malformed_samples": _malformed_samples(
            [r for r in summary.get("batch", []) if r.run_dir in malformed][:MAX_MALFORMED_SAMPLES]
        ),
        "phases": phases,
    }


# ------------------------------------------------------------- compaction


def compact(
    spark: Any,
    dataset: str | os.PathLike,
    progress: Progress = print,
    min_files: int = 2,
    max_rows_per_file: int = 2_000_000,
) -> dict[str, Any]:
    """Rewrite every partition of the current version that holds at least
    ``min_files`` data files into one file (more above ``max_rows_per_file``
    rows), sorted by run, target and case, in a new version; other files are
    hard links. The rows are the same before and after (checked against the
    manifest's counts before publishing). Returns the report (also written
    to DATASET/ingest-reports/)."""
    started = time.monotonic()
    dataset = Path(dataset).expanduser().resolve()
    require_dataset(dataset)
    compact_id = _now().strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8] + "-compact"
    with _Lock(dataset):
        previous = require_dataset(dataset)
        with _staging(dataset, compact_id, progress) as work:
            report = _compact_locked(
                spark,
                dataset,
                previous,
                work,
                compact_id,
                progress,
                started,
                min_files,
                max_rows_per_file,
            )
    return report


def _compact_locked(
    spark: Any,
    dataset: Path,
    previous: Path,
    work: Path,
    compact_id: str,
    progress: Progress,
    started: float,
    min_files: int,
    max_rows_per_file: int,
) -> dict[str, Any]:
    t = time.monotonic()
    manifest = _load_manifest_file(previous) or _manifest_from_data(spark, previous, progress)
    by_part: dict[str, list[str]] = {}
    for rel in manifest["files"]:
        by_part.setdefault(os.path.dirname(rel), []).append(rel)
    chosen = {part: sorted(rels) for part, rels in by_part.items() if len(rels) >= min_files}
    replaced = [rel for rels in chosen.values() for rel in rels]
    rows_before = sum(manifest["files"][rel]["rows"] for rel in replaced)
    report = {
        "ingest_id": compact_id,
        "kind": "compaction",
        "dataset": str(dataset),
        "previous_version": previous.name,
        "version": previous.name,
        "_started": started,
        "partitions": {"compacted": len(chosen), "kept": len(by_part) - len(chosen)},
        "files": {"before": len(manifest["files"]), "replaced": len(replaced)},
        "rows_compacted": rows_before,
        "phases": {},
        "dataset_records": sum(f["rows"] for f in manifest["files"].values()),
    }
    progress(
        f"compact {previous.name}: {len(chosen)} of {len(by_part)} partition(s) hold {min_files} or more "
        f"files ({len(replaced)} files, {rows_before:,} rows)"
    )
    if not chosen and len(manifest["runs_files"]) < min_files:
        report["published"] = False
        report["finished"] = _iso(_now())
        report["seconds"] = round(time.monotonic() - report.pop("_started"), 2)
        progress(
            f"  nothing to compact: {previous.name} stays current; report {_write_report(dataset, report)}"
        )
        return report

    out = work / "compacted"
    if replaced:
        (
            read_data_files(spark, previous / "results", *(previous / rel for rel in replaced))
            .repartition(*PARTITION_COLUMNS)
            .sortWithinPartitions(*PARTITION_COLUMNS, "run_id", "target", "case_id")
            .write.option("maxRecordsPerFile", max_rows_per_file)
            .partitionBy(*PARTITION_COLUMNS)
            .parquet(str(out))
        )
    written = _file_stats(spark, out)
    rows_after = sum(f["rows"] for f in written.values())
    if rows_after != rows_before:
        raise IngestError(
            f"compaction wrote {rows_after:,} rows for {rows_before:,}: not published, "
            f"{previous.name} stays current"
        )
    report["phases"]["rewrite"] = round(time.monotonic() - t, 2)
    progress(
        f"  rewrote {len(replaced)} file(s) into {len(written)}: {report['phases']['rewrite']:.1f} s"
    )

    t = time.monotonic()
    name = _next_version_name(dataset)
    building = dataset / VERSIONS / f"{name}.tmp"
    (building / "results").mkdir(parents=True)
    keep = [rel for rel in manifest["files"] if os.path.dirname(rel) not in chosen]
    files = {rel: manifest["files"][rel] for rel in keep}
    linked = _link_files(previous, building, keep)
    for rel in _move_written(out, building / "results"):
        files[rel] = written[os.path.relpath(rel, "results")]
    # The runs table's files (one per ingest) become one too.
    runs_files = dict(manifest["runs_files"])
    (building / "runs").mkdir()
    if len(runs_files) >= min_files:
        (
            spark.read.schema(RUNS_SCHEMA_DDL)
            .parquet(*(str(previous / rel) for rel in sorted(runs_files)))
            .coalesce(1)
            .sortWithinPartitions("run_id")
            .write.parquet(str(work / "runs"))
        )
        ids = sorted({i for f in runs_files.values() for i in f["run_ids"]})
        runs_files = {}
        for file in _data_files(work / "runs"):
            os.replace(file, building / "runs" / file.name)
            runs_files[f"runs/{file.name}"] = {"run_ids": ids}
    else:
        linked += _link_files(previous, building, runs_files)
    _write_manifest(
        building,
        {
            "format": MANIFEST_FORMAT,
            "sources": manifest["sources"],
            "files": files,
            "runs_files": runs_files,
        },
    )
    report.update(
        {
            "version": name,
            "finished": _iso(_now()),
            "published": True,
            "dataset_runs": len({i for f in runs_files.values() for i in f["run_ids"]}),
            "files": dict(report["files"], written=len(written), linked=linked, after=len(files)),
            "runs_files": {"before": len(manifest["runs_files"]), "after": len(runs_files)},
        }
    )
    _publish(dataset, building, name, report, progress, t)
    progress(f"compaction done in {report['seconds']:.1f} s")
    return report


def _match_run(uri: str, by_path: dict[str, RunInput]) -> RunInput:
    """The RunInput a row's source_uri names (Spark writes file:///a%20b/...)."""
    run = by_path.get(_file_path(uri))
    if run is None:
        raise IngestError(f"internal error: Spark read {uri}, which is none of the given runs")
    return run


def _summary_run_id(run: RunInput) -> str | None:
    try:
        value = json.loads(RunFolder(run.run_dir).summary.read_text(encoding="utf-8")).get("run_id")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


def _read_runs(spark: Any, version: Path, rels: list[str]) -> dict[str, dict[str, Any]]:
    """The rows of some runs files of a version, by run id."""
    rows = (
        spark.read.schema(RUNS_SCHEMA_DDL).parquet(*(str(version / rel) for rel in rels)).collect()
    )
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
    return read_data_files(spark, path, path)


def read_data_files(spark: Any, root: str | os.PathLike, *paths: str | os.PathLike) -> Any:
    """Data files (or partition directories) under ``root``, with the
    dataset's columns (RESULTS_SCHEMA_DDL)."""
    return (
        spark.read.schema(RESULTS_SCHEMA_DDL)
        .option("basePath", str(root))
        .parquet(*(str(p) for p in paths))
    )


def read_runs(spark: Any, dataset: str | os.PathLike) -> Any:
    version = require_dataset(dataset)
    return spark.read.schema(RUNS_SCHEMA_DDL).parquet(str(version / "runs"))


def require_dataset(dataset: str | os.PathLike) -> Path:
    path = Path(dataset).expanduser()
    if not path.exists():
        raise IngestError(
            f"dataset {path} does not exist: run `conformance ingest RUN_DIR... "
            f"--dataset {path}` first"
        )
    version = current_version(path)
    if version is None:
        raise IngestError(
            f"{path} is not an ingested dataset (no {CURRENT} link): "
            f"run `conformance ingest RUN_DIR... --dataset {path}` first"
        )
    return version

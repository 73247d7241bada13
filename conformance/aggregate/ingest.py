"""``conformance ingest``: results.jsonl files of runs into a Parquet dataset.

Why this shape:

* **Idempotent.** A record is identified by (run_id, target, case_id,
  peer_implementation); ingesting a run again replaces its records with the
  freshly read ones and changes nothing else, so a nightly job can simply
  re-ingest everything it has (or a run that was unfinished last time).
* **Nothing already ingested is ever lost.** Every ingest builds a complete
  new *version* of the dataset next to the current one and then switches the
  ``current`` symlink atomically (:mod:`.versions`). Files the ingest does
  not rewrite are hard links to the previous version's, so building a
  version costs only the files that change.
* **Every field of a record is kept.** The data files' columns are derived
  from ResultRecord (:mod:`.schema`); data files written before a column
  existed read it as NULL.
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
* **Compaction is its own step** (``conformance compact``,
  :mod:`.compaction`).

An ingest runs these steps (:func:`_ingest_locked`): plan (which results
files the manifest holds unchanged), parse (the others, into a staging
copy), rewrite (the data files holding rows of runs parsed again), assemble
(the new version's data files and manifest sources), the runs table, then
publish.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ..core.results import OUTCOMES
from ..core.run_folder import RunFolder
from .dataset import file_stats, manifest_from_data, read_data_files, runs_rows, write_runs
from .errors import IngestError, Progress
from .runs import RunInput, find_runs, run_input, summary_run_id
from .schema import LEVELS, PARTITION_COLUMNS, RECORD_SCHEMA_DDL, RESULT_COLUMNS, ROLES
from .spark import JobSize, input_bytes
from .versions import (
    MANIFEST_FORMAT,
    RESULTS_DIR,
    DatasetLock,
    current_version,
    empty_manifest,
    file_path,
    iso,
    job_id,
    link_files,
    load_manifest_file,
    move_runs_files,
    move_written,
    new_version,
    now,
    publish,
    run_index,
    staging,
    write_manifest,
    write_report,
)

MAX_MALFORMED_SAMPLES = 20

# ------------------------------------------------------------------- spark


def parse_lines(spark: Any, runs: list[RunInput]) -> Any:
    """Every non-blank line of the runs as one row: the record's columns, a
    ``kind`` ('record' or 'malformed'), ``month`` and ``source_uri``.

    Lenient on purpose: the reader gives NULL for what it cannot read (a
    torn line, a value of the wrong type, a field a file written before it
    existed lacks), and a row is 'record' only if every column the matrices
    rely on is usable."""
    from pyspark.sql import functions as F

    # Spark's JSON reader with a fixed schema: faster than from_json over
    # text lines, skips blank lines, and gives NULLs for what it cannot read.
    rows = (
        spark.read.schema(RECORD_SCHEMA_DDL)
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

    ``spark`` is a SparkSession, or a function returning one given what
    the job reads at most (a JobSize, which picks its JIT): it is then called only when
    there is something to read or write, so a nightly ingest with nothing
    new starts no JVM.

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
    ingest_id = job_id()
    complete = sum(r.complete for r in runs)
    total_bytes = sum(r.size for r in runs)
    progress(
        f"ingest {ingest_id}: {len(runs)} run(s) ({complete} finished, {len(runs) - complete} unfinished), "
        f"{total_bytes / 1e6:,.1f} MB of results -> {dataset}"
    )

    with DatasetLock(dataset):
        previous = current_version(dataset)
        with staging(dataset, ingest_id, progress) as work:
            get_spark = spark if callable(spark) else (lambda _job: spark)
            report = _ingest_locked(
                get_spark, runs, dataset, previous, work, ingest_id, progress, started
            )
    return report


@dataclass
class _Plan:
    """Which results files an ingest parses, from the previous version's
    manifest (``old``)."""

    old: dict[str, Any]
    new: list[RunInput] = field(default_factory=list)
    changed: list[RunInput] = field(default_factory=list)
    """Grown or changed since their last ingest: their rows are replaced."""
    unchanged: list[RunInput] = field(default_factory=list)
    """Size and mtime as the manifest has them: not read."""
    completion: list[RunInput] = field(default_factory=list)
    """Unchanged, but finished (or marked partial) since their last ingest."""
    to_parse: dict[str, RunInput] = field(default_factory=dict)
    pulled: list[RunInput] = field(default_factory=list)
    """Parsed again for sharing a run id with a file parsed now."""
    index: dict[str, list[str]] = field(default_factory=dict)
    """run id -> the results files of the previous version that gave it rows."""

    @property
    def sources(self) -> dict[str, dict[str, Any]]:
        return self.old["sources"]

    @property
    def parsed(self) -> int:
        return len(self.new) + len(self.changed) + len(self.pulled)


@dataclass
class _Rewrite:
    """The data files rewritten without the rows of the runs parsed again."""

    replaced_ids: set[str]
    affected: list[str]
    """The previous version's data files (relative paths) that held such rows."""
    rewritten: dict[str, dict[str, Any]]
    """The files written instead (relative to the rewrite's directory) -> run ids and rows."""
    directory: Path


def _ingest_locked(
    get_spark: Callable[[JobSize], Any],
    runs: list[RunInput],
    dataset: Path,
    previous: Path | None,
    work: Path,
    ingest_id: str,
    progress: Progress,
    started: float,
) -> dict[str, Any]:
    phases: dict[str, float] = {}
    t = time.monotonic()
    if previous is None:
        old = empty_manifest()
    else:
        old = load_manifest_file(previous) or manifest_from_data(
            get_spark(JobSize(dataset_bytes=input_bytes(previous))), previous, progress
        )
    plan = _plan(runs, old)
    phases["plan"] = round(time.monotonic() - t, 2)
    progress(
        f"  {len(plan.new)} new results file(s), {len(plan.changed)} grown or changed since their ingest, "
        f"{len(plan.unchanged)} unchanged (skipped, not read), {len(plan.completion)} of them finished "
        f"since; {len(plan.pulled)} more parsed again for sharing a run id: {phases['plan']:.1f} s"
    )
    if not plan.to_parse and not plan.completion:
        return _nothing_new(ingest_id, dataset, previous, runs, plan, phases, started, progress)

    # What the job reads: the results files it parses, and the previous
    # version too when it rewrites the rows of replaced runs.
    rewritten = previous is not None and (plan.changed or plan.completion)
    spark = get_spark(
        JobSize(
            results_bytes=sum(r.size for r in plan.to_parse.values()),
            dataset_bytes=input_bytes(previous) if rewritten else 0,
        )
    )
    staged, batch, counted = _parse(spark, plan, work, phases, progress)
    _progress_counts(counted, batch, progress, phases["count"])

    t = time.monotonic()
    rewrite = _rewrite_replaced_runs(spark, previous, plan, counted, staged, work, progress, t)
    phases["rewrite"] = round(time.monotonic() - t, 2)

    t = time.monotonic()
    name, building = new_version(dataset)
    files, linked, added, parts = _assemble_results(
        previous, building, plan, staged, counted, rewrite
    )
    stamp = now()
    sources = _new_sources(plan, counted, ingest_id)
    fresh, empty = _fresh_runs_rows(batch, counted, sources, ingest_id, stamp, progress)
    runs_files, runs_linked, runs_rewritten = _write_runs_table(
        spark, previous, building, work, plan, sources, fresh, rewrite.replaced_ids
    )
    write_manifest(
        building,
        {
            "format": MANIFEST_FORMAT,
            "sources": sources,
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
        plan,
        counted.summary(batch, empty),
        phases,
        started,
    )
    report.update(
        {
            "version": name,
            "finished": iso(stamp),
            "partitions": parts,
            "files": {
                "linked": linked,
                "added": len(added),
                "rewritten": len(rewrite.affected),
                "written_by_rewrite": len(rewrite.rewritten),
                "total": len(files),
            },
            "runs_files": {
                "linked": runs_linked,
                "rewritten": runs_rewritten,
                "total": len(runs_files),
            },
            "dataset_runs": len({i for f in runs_files.values() for i in f["run_ids"]}),
            "dataset_records": sum(f["rows"] for f in files.values()),
            "published": True,
        }
    )
    progress(
        f"  version {name}: {linked} file(s) linked from {previous.name if previous else '(none)'}, "
        f"{len(added)} added, {len(rewrite.affected)} rewritten into {len(rewrite.rewritten)}"
    )
    publish(dataset, building, name, report, progress, t)
    progress(f"ingest done in {report['seconds']:.1f} s")
    return report


def _plan(runs: list[RunInput], old: dict[str, Any]) -> _Plan:
    """Step 1: which results files the manifest already holds unchanged."""
    plan = _Plan(old)
    for run in runs:
        entry = plan.sources.get(run.key)
        if entry is None:
            plan.new.append(run)
        elif entry["size"] != run.size or entry["mtime_ns"] != run.mtime_ns:
            plan.changed.append(run)
        else:
            plan.unchanged.append(run)
            if entry["complete"] != run.complete or bool(entry.get("partial")) != run.partial:
                plan.completion.append(run)
    plan.to_parse = {r.key: r for r in plan.new + plan.changed}
    plan.index = run_index(plan.sources)
    plan.pulled = _pull_in(
        plan.to_parse, {i for r in plan.changed for i in plan.sources[r.key]["run_ids"]}, plan.index
    )
    return plan


def _nothing_new(
    ingest_id: str,
    dataset: Path,
    previous: Path | None,
    runs: list[RunInput],
    plan: _Plan,
    phases: dict[str, float],
    started: float,
    progress: Progress,
) -> dict[str, Any]:
    """The report of an ingest that publishes no version (no Spark needed)."""
    report = _report(ingest_id, dataset, previous, previous, runs, plan, {}, phases, started)
    report["published"] = False
    report["seconds"] = round(time.monotonic() - report.pop("_started"), 2)
    path = write_report(dataset, report)
    progress(
        f"  nothing new: {previous.name if previous else 'no version'} stays current; report {path}"
    )
    progress(f"ingest done in {report['seconds']:.1f} s")
    return report


def _parse(
    spark: Any, plan: _Plan, work: Path, phases: dict[str, float], progress: Progress
) -> tuple[Path, list[RunInput], _Counted]:
    """Step 2: parse the new and grown files once, into a columnar staging
    copy, and count it. Should they hold a run id that other, unparsed files
    of the dataset also gave rows to, those are parsed with them (a run's
    duplicates are resolved over all its files, as a full ingest does)."""
    from pyspark.sql import functions as F

    attempt = 0
    while True:
        t = time.monotonic()
        staged = work / f"parsed{attempt}"
        batch = sorted(plan.to_parse.values(), key=lambda r: (r.run_dir.name, r.key))
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
        more = _pull_in(plan.to_parse, set(counted.per_run), plan.index)
        if not more:
            return staged, batch, counted
        plan.pulled += more
        attempt += 1
        progress(
            f"    run id(s) of this batch were also given by {len(more)} other file(s) of the dataset: "
            "parsing again with them"
        )


def _rewrite_replaced_runs(
    spark: Any,
    previous: Path | None,
    plan: _Plan,
    counted: _Counted,
    staged: Path,
    work: Path,
    progress: Progress,
    t: float,
) -> _Rewrite:
    """Step 3: rewrite the data files that hold rows of the runs parsed
    again, without those rows; every other file stays as it is."""
    from pyspark.sql import functions as F

    sources = plan.sources
    replaced_ids = set(counted.per_run) | {
        i for k in plan.to_parse if k in sources for i in sources[k]["run_ids"]
    }
    replaced_uris = sorted(
        {sources[k]["uri"] for k in plan.to_parse if k in sources and sources[k].get("uri")}
    )
    affected = sorted(
        rel for rel, f in plan.old["files"].items() if replaced_ids & set(f["run_ids"])
    )
    rewrite = _Rewrite(replaced_ids, affected, {}, work / "rewritten")
    if not affected:
        return rewrite
    assert previous is not None
    # Files of the dataset no longer on disk that gave rows to those runs:
    # their rows stay unless this batch has a record with the same key.
    orphans = sorted(
        k for k, s in sources.items() if k not in plan.to_parse and replaced_ids & set(s["run_ids"])
    )
    kept = read_data_files(spark, previous / RESULTS_DIR, *(previous / rel for rel in affected))
    if replaced_uris:
        kept = kept.where(~F.col("source_uri").isin(*replaced_uris))
    if orphans and (staged / "kind=record").is_dir():
        keys = ["run_id", "target", "case_id", "peer_key"]
        batch_keys = spark.read.parquet(str(staged / "kind=record")).select(*_key_cols())
        kept = (
            kept.withColumn("peer_key", F.coalesce("peer_implementation", F.lit("")))
            .join(batch_keys, keys, "left_anti")
            .drop("peer_key")
        )
    (
        kept.repartition(*PARTITION_COLUMNS)
        .sortWithinPartitions(*PARTITION_COLUMNS, "run_id", "target", "case_id")
        .write.partitionBy(*PARTITION_COLUMNS)
        .parquet(str(rewrite.directory))
    )
    rewrite.rewritten = file_stats(spark, rewrite.directory)
    progress(
        f"  rewrote {len(affected)} data file(s) holding rows of {len(replaced_ids)} run(s) parsed again "
        f"({len(orphans)} of their results files no longer exist): {time.monotonic() - t:.1f} s"
    )
    return rewrite


def _assemble_results(
    previous: Path | None,
    building: Path,
    plan: _Plan,
    staged: Path,
    counted: _Counted,
    rewrite: _Rewrite,
) -> tuple[dict[str, dict[str, Any]], int, list[str], dict[str, int]]:
    """Step 4: the new version's data files: links to every file not
    rewritten, the batch's new files, the rewritten ones. Returns the
    manifest's files, how many were linked, the files added and how many
    partitions were new, appended to, rewritten and kept."""
    old_files = plan.old["files"]
    affected = set(rewrite.affected)
    keep = [rel for rel in old_files if rel not in affected]
    linked = link_files(previous, building, keep) if previous else 0
    files = {rel: old_files[rel] for rel in keep}
    record_root = staged / "kind=record"
    added = move_written(record_root, building / RESULTS_DIR) if record_root.is_dir() else []
    for rel in added:
        files[rel] = counted.files[rel]
    for rel in move_written(rewrite.directory, building / RESULTS_DIR) if affected else []:
        files[rel] = rewrite.rewritten[os.path.relpath(rel, RESULTS_DIR)]
    old_parts = {os.path.dirname(rel) for rel in old_files}
    added_parts = {os.path.dirname(r) for r in added}
    rewritten_parts = {os.path.dirname(r) for r in affected}
    parts = {
        "new": len(added_parts - old_parts),
        "appended": len(added_parts & old_parts),
        "rewritten": len(rewritten_parts),
        "kept": len(old_parts - added_parts - rewritten_parts),
    }
    return files, linked, added, parts


def _new_sources(plan: _Plan, counted: _Counted, ingest_id: str) -> dict[str, dict[str, Any]]:
    """Step 5: the manifest's sources: the parsed files' new entries, and
    the finished (and partial) flags of the files that only finished."""
    sources = dict(plan.sources)
    for key, run in plan.to_parse.items():
        ids = sorted(counted.ids_by_source.get(key, ())) or [
            summary_run_id(run) or run.run_dir.name
        ]
        sources[key] = {
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
    for run in plan.completion:
        sources[run.key] = dict(sources[run.key], complete=run.complete, partial=run.partial)
    return sources


def _fresh_runs_rows(
    batch: list[RunInput],
    counted: _Counted,
    sources: dict[str, dict[str, Any]],
    ingest_id: str,
    stamp: Any,
    progress: Progress,
) -> tuple[dict[str, dict[str, Any]], list[RunInput]]:
    """Step 6a: the runs table's rows of the runs parsed now (by run id),
    and the parsed files that gave no valid record (kept too: the runs
    table says the run exists and holds nothing usable)."""
    by_dir = {r.run_dir: r for r in batch}
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
            "ingested_at": stamp,
        }
    with_records = {d for e in counted.per_run.values() for d in e["dirs"]}
    empty = [r for r in batch if r.run_dir not in with_records]
    for run in empty:
        progress(f"    no valid record in {run.results}")
        run_id = sources[run.key]["run_ids"][0]
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
            "ingested_at": stamp,
        }
    return fresh, empty


def _write_runs_table(
    spark: Any,
    previous: Path | None,
    building: Path,
    work: Path,
    plan: _Plan,
    sources: dict[str, dict[str, Any]],
    fresh: dict[str, dict[str, Any]],
    replaced_ids: set[str],
) -> tuple[dict[str, dict[str, Any]], int, int]:
    """Step 6b: the runs table, kept like the results: one new runs file
    holds the rows of the runs parsed or updated now; a runs file holding an
    older row of any of them is rewritten into it; the others are hard
    links. Returns the manifest's runs files, how many were linked and how
    many rewritten."""
    index = run_index(sources)
    finished_now = {i for r in plan.completion for i in sources[r.key]["run_ids"]}
    touched = replaced_ids | set(fresh) | finished_now
    runs_files = dict(plan.old["runs_files"])
    affected = sorted(rel for rel, f in runs_files.items() if touched & set(f["run_ids"]))
    carried = runs_rows(spark, previous, affected) if affected else {}
    for rel in affected:
        del runs_files[rel]
    # A run parsed again that no results file gives any more is gone; one
    # still held by a results file no longer on disk keeps its row.
    rows = {
        k: v for k, v in carried.items() if k not in fresh and (k not in replaced_ids or k in index)
    }
    rows.update(fresh)
    for run_id in finished_now | set(fresh):
        # A run is finished when any of its results files' directories holds a summary.
        if run_id in rows:
            rows[run_id] = dict(
                rows[run_id],
                complete=any(bool(sources[k]["complete"]) for k in index.get(run_id, ())),
                partial=any(bool(sources[k].get("partial")) for k in index.get(run_id, ())),
            )
    linked = link_files(previous, building, runs_files) if previous else 0
    if rows:
        write_runs(spark, rows, work / "runs")
        for rel in move_runs_files(work / "runs", building):
            runs_files[rel] = {"run_ids": sorted(rows)}
    return runs_files, linked, len(affected)


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
                to_parse[key] = run_input(path.parent)
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
        rel = f"{RESULTS_DIR}/" + os.path.relpath(file_path(row.file), record_root)
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


def _match_run(uri: str, by_path: dict[str, RunInput]) -> RunInput:
    """The RunInput a row's source_uri names (Spark writes file:///a%20b/...)."""
    run = by_path.get(file_path(uri))
    if run is None:
        raise IngestError(f"internal error: Spark read {uri}, which is none of the given runs")
    return run


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
    plan: _Plan,
    summary: dict[str, Any],
    phases: dict[str, float],
    started: float,
) -> dict[str, Any]:
    malformed = summary.get("malformed", {})
    return {
        "ingest_id": ingest_id,
        "dataset": str(dataset),
        "version": version.name if version else None,
        "previous_version": previous.name if previous else None,
        "finished": iso(now()),
        "_started": started,
        "runs": {
            "given": len(runs),
            "finished": sum(r.complete for r in runs),
            "unfinished": sum(not r.complete for r in runs),
            "parsed": plan.parsed,
            "new": len(plan.new),
            "replaced": len(plan.changed),
            "pulled_in": len(plan.pulled),
            "skipped_unchanged": len(plan.unchanged),
            "completion_updated": len(plan.completion),
            "ingested_before": len(plan.changed) + len(plan.unchanged),
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

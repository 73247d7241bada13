"""``conformance compact``: the small files nightly ingests add to a
partition rewritten into one file per partition, sorted by run, in a new
version with the same rows (checked against the manifest's counts before it
is published). Readers are never disturbed: the version is published like an
ingest's (:mod:`.versions`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from .dataset import file_stats, manifest_from_data, read_data_files
from .errors import IngestError, Progress
from .schema import PARTITION_COLUMNS, RUNS_SCHEMA_DDL
from .versions import (
    MANIFEST_FORMAT,
    RESULTS_DIR,
    DatasetLock,
    iso,
    job_id,
    link_files,
    load_manifest_file,
    move_runs_files,
    move_written,
    new_version,
    now,
    publish,
    require_dataset,
    staging,
    write_manifest,
    write_report,
)


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
    compact_id = job_id("-compact")
    with DatasetLock(dataset):
        previous = require_dataset(dataset)
        with staging(dataset, compact_id, progress) as work:
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
    manifest = load_manifest_file(previous) or manifest_from_data(spark, previous, progress)
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
        report["finished"] = iso(now())
        report["seconds"] = round(time.monotonic() - report.pop("_started"), 2)
        progress(
            f"  nothing to compact: {previous.name} stays current; report {write_report(dataset, report)}"
        )
        return report

    written = _rewrite_partitions(spark, previous, replaced, work / "compacted", max_rows_per_file)
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
    name, building = new_version(dataset)
    keep = [rel for rel in manifest["files"] if os.path.dirname(rel) not in chosen]
    files = {rel: manifest["files"][rel] for rel in keep}
    linked = link_files(previous, building, keep)
    for rel in move_written(work / "compacted", building / RESULTS_DIR):
        files[rel] = written[os.path.relpath(rel, RESULTS_DIR)]
    # The runs table's files (one per ingest) become one too.
    runs_files = dict(manifest["runs_files"])
    if len(runs_files) >= min_files:
        (
            spark.read.schema(RUNS_SCHEMA_DDL)
            .parquet(*(str(previous / rel) for rel in sorted(runs_files)))
            .coalesce(1)
            .sortWithinPartitions("run_id")
            .write.parquet(str(work / "runs"))
        )
        ids = sorted({i for f in runs_files.values() for i in f["run_ids"]})
        runs_files = {rel: {"run_ids": ids} for rel in move_runs_files(work / "runs", building)}
    else:
        linked += link_files(previous, building, runs_files)
    write_manifest(
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
            "finished": iso(now()),
            "published": True,
            "dataset_runs": len({i for f in runs_files.values() for i in f["run_ids"]}),
            "files": dict(report["files"], written=len(written), linked=linked, after=len(files)),
            "runs_files": {"before": len(manifest["runs_files"]), "after": len(runs_files)},
        }
    )
    publish(dataset, building, name, report, progress, t)
    progress(f"compaction done in {report['seconds']:.1f} s")
    return report


def _rewrite_partitions(
    spark: Any, previous: Path, replaced: list[str], out: Path, max_rows_per_file: int
) -> dict[str, dict[str, Any]]:
    """The data files ``replaced`` rewritten under ``out``, one file per
    partition (more above ``max_rows_per_file`` rows), sorted by run,
    target and case; the run ids and rows of each file written."""
    if replaced:
        (
            read_data_files(spark, previous / RESULTS_DIR, *(previous / rel for rel in replaced))
            .repartition(*PARTITION_COLUMNS)
            .sortWithinPartitions(*PARTITION_COLUMNS, "run_id", "target", "case_id")
            .write.option("maxRecordsPerFile", max_rows_per_file)
            .partitionBy(*PARTITION_COLUMNS)
            .parquet(str(out))
        )
    return file_stats(spark, out)

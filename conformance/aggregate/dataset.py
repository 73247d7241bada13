"""Reading (and the runs table's writing) of the dataset's Parquet files with
Spark, always with the schemas of :mod:`.schema`: a file written before a
column existed reads it as NULL.

``read_results(spark, dataset)`` and ``read_runs(spark, dataset)`` read the
current version (:mod:`.versions` says how versions are laid out).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .errors import IngestError, Progress
from .schema import RESULTS_SCHEMA_DDL, RUNS_SCHEMA_DDL
from .versions import (
    MANIFEST,
    RESULTS_DIR,
    RUNS_DIR,
    data_files,
    empty_manifest,
    file_path,
    list_partitions,
    require_dataset,
)


def read_results(spark: Any, dataset: str | os.PathLike) -> Any:
    """The current version's records as a DataFrame (month and protocol
    included as columns). Raises IngestError for a missing or empty dataset."""
    version = require_dataset(dataset)
    path = version / RESULTS_DIR
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
    """The current version's runs table as a DataFrame."""
    version = require_dataset(dataset)
    return spark.read.schema(RUNS_SCHEMA_DDL).parquet(str(version / RUNS_DIR))


def runs_rows(spark: Any, version: Path, rels: list[str]) -> dict[str, dict[str, Any]]:
    """The rows of some runs files of a version, by run id."""
    rows = (
        spark.read.schema(RUNS_SCHEMA_DDL).parquet(*(str(version / rel) for rel in rels)).collect()
    )
    return {r.run_id: r.asDict() for r in rows}


def write_runs(spark: Any, runs: dict[str, dict[str, Any]], path: Path) -> None:
    """Runs table rows (by run id) as one Parquet file under ``path``."""
    from pyspark.sql import types as T

    schema = T._parse_datatype_string(RUNS_SCHEMA_DDL)  # noqa: SLF001 (public in effect)
    names = [f.name for f in schema.fields]
    rows = [tuple(r.get(n) for n in names) for _, r in sorted(runs.items())]
    spark.createDataFrame(rows, schema).coalesce(1).write.parquet(str(path))


def file_stats(spark: Any, root: Path) -> dict[str, dict[str, Any]]:
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
            os.path.relpath(file_path(row.file), root), {"run_ids": set(), "rows": 0}
        )
        entry["run_ids"].add(row.run_id)
        entry["rows"] += row["count"]
    return {k: {"run_ids": sorted(v["run_ids"]), "rows": v["rows"]} for k, v in out.items()}


def manifest_from_data(spark: Any, version: Path, progress: Progress) -> dict[str, Any]:
    """A manifest for a version written before manifests existed, from one
    scan of its data. Its sources get no size, so each is parsed again the
    next time it is given and then replaces its rows."""
    from pyspark.sql import functions as F

    progress(f"  {version.name} has no {MANIFEST}: reading its data files once to make one")
    manifest = empty_manifest()
    results = version / RESULTS_DIR
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
            f"{RESULTS_DIR}/" + os.path.relpath(file_path(row.file), results),
            {"run_ids": set(), "rows": 0},
        )
        entry["run_ids"].add(row.run_id)
        entry["rows"] += row["count"]
        source = manifest["sources"].setdefault(
            file_path(row.source_uri),
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
    if (version / RUNS_DIR).is_dir() and data_files(version / RUNS_DIR):
        for row in (
            spark.read.schema(RUNS_SCHEMA_DDL)
            .parquet(str(version / RUNS_DIR))
            .select(F.col("_metadata.file_path").alias("file"), "run_id")
            .collect()
        ):
            runs_files.setdefault(
                f"{RUNS_DIR}/" + os.path.basename(file_path(row.file)), set()
            ).add(row.run_id)
    manifest["runs_files"] = {k: {"run_ids": sorted(v)} for k, v in runs_files.items()}
    return manifest

"""The dataset's versions on the file system: layout, lock, staging, the
``current`` switch, pruning and the manifest. No Spark here: ingest and
compaction (which write the Parquet files with Spark) build a version in a
directory of their own and hand it to :func:`publish`.

Dataset layout (DATASET defaults to ``reports/dataset``); the contract
readers rely on::

    DATASET/current -> versions/v000003         the version to read (switched by rename(2))
    DATASET/versions/v000003/results/month=2026-11/protocol=ssb/*.parquet
        any number of files per partition: one per ingest that added rows to
        it (until compacted), each a complete Parquet file of
        schema.RESULT_COLUMNS; month is YYYY-MM of the run's date, so a date
        window prunes by month
    DATASET/versions/v000003/runs/part-*.parquet   one row per run (schema.RUNS_SCHEMA_DDL),
                                                 in one file per ingest until compacted
    DATASET/versions/v000003/manifest.json       see below (absent in datasets made
                                                 before it existed: rebuilt on the next ingest)
    DATASET/versions/v000003/version.json
    DATASET/ingest-reports/<ingest-id>.json      one per ingest or compaction
    DATASET/.staging/, DATASET/.lock             work area and lock of a running ingest

A version directory never changes once ``current`` names it: files are only
ever added to a *new* version directory (hard links to the previous one's
files it keeps), so a reader that resolved ``current`` reads one consistent
version (the one before it is kept until the next ingest after that). If a
job dies at any point before the switch, ``current`` still names the old,
complete version; the next job removes the debris. ``manifest.json``::

    {"format": 1,
     "sources": {"/abs/run/results.jsonl": {"size": 123, "mtime_ns": 1, "complete": true,
                 "torn": false, "malformed_lines": 0, "run_ids": ["20261122T..."],
                 "uri": "file:///abs/run/results.jsonl", "ingest_id": "..."}},
     "files": {"results/month=2026-11/protocol=ssb/part-....parquet":
               {"run_ids": ["20261122T..."], "rows": 18400}},
     "runs_files": {"runs/part-....parquet": {"run_ids": ["20261122T..."]}}}
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
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

from .errors import IngestError, Progress

CURRENT = "current"
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
VERSIONS = "versions"
STAGING = ".staging"
REPORTS = "ingest-reports"
LOCK = ".lock"
RESULTS_DIR = "results"
RUNS_DIR = "runs"
VERSION_INFO = "version.json"
VERSION_REPORT = "ingest-report.json"


# ------------------------------------------------------------------- time


def now() -> datetime:
    return datetime.now(timezone.utc)


def iso(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return (
            value.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        )
    return str(value)


def job_id(suffix: str = "") -> str:
    """An ingest's or compaction's id: sortable by time, unique."""
    return now().strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8] + suffix


# ----------------------------------------------------------------- layout


def current_version(dataset: Path) -> Path | None:
    """The directory of the current version, or None for an empty dataset."""
    link = Path(dataset) / CURRENT
    if not link.is_symlink() and not link.exists():
        return None
    target = link.resolve()
    if not target.is_dir():
        raise IngestError(f"{link} points at {target}, which is missing: the dataset is damaged")
    return target


def require_dataset(dataset: str | os.PathLike) -> Path:
    """The current version's directory; an IngestError saying what to run
    when there is none."""
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


def data_files(directory: Path) -> list[Path]:
    """The data files in a directory (not Spark's hidden or marker files)."""
    return [p for p in directory.iterdir() if p.is_file() and not p.name.startswith((".", "_"))]


def file_path(uri: str) -> str:
    """A local path from what Spark calls a file (file:/a%20b, file:///a%20b or /a b)."""
    return (
        urllib.parse.unquote(urllib.parse.urlparse(uri).path)
        if ":" in uri.split("/", 1)[0]
        else uri
    )


# ------------------------------------------------------- lock and staging


class DatasetLock:
    """One ingest or compaction at a time per dataset (two would both build
    version N+1)."""

    def __init__(self, dataset: Path) -> None:
        self.path = dataset / LOCK
        self.handle = None

    def __enter__(self) -> "DatasetLock":
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


def cleanup_debris(dataset: Path, progress: Progress) -> None:
    """Remove what a dead job left: its staging dir and its unfinished
    version (never the current one, which it had not replaced)."""
    staging_dir = dataset / STAGING
    if staging_dir.exists():
        for child in staging_dir.iterdir():
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
def staging(dataset: Path, job: str, progress: Progress) -> Iterator[Path]:
    """A fresh staging directory for one ingest or compaction (under the
    dataset's lock), made once what a killed one left is cleared; removed,
    with STAGING when that is empty, however the job ends."""
    cleanup_debris(dataset, progress)
    work = dataset / STAGING / job
    work.mkdir(parents=True)
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)
        try:
            (dataset / STAGING).rmdir()
        except OSError:
            pass


# ------------------------------------------------------------- versions


def next_version_name(dataset: Path) -> str:
    versions = dataset / VERSIONS
    numbers = (
        [int(p.name[1:7]) for p in versions.glob("v[0-9]*") if p.name[1:7].isdigit()]
        if versions.is_dir()
        else []
    )
    return f"v{(max(numbers) + 1 if numbers else 1):06d}"


def new_version(dataset: Path) -> tuple[str, Path]:
    """The next version's name and the directory it is built in (renamed
    into place by :func:`publish`), with its results and runs directories."""
    name = next_version_name(dataset)
    building = dataset / VERSIONS / f"{name}.tmp"
    (building / RESULTS_DIR).mkdir(parents=True)
    (building / RUNS_DIR).mkdir()
    return name, building


def swap_current(dataset: Path, version_dir: Path) -> None:
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


def prune_versions(dataset: Path, current: Path) -> None:
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


def link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def link_files(src_version: Path, dst_version: Path, rels: Iterable[str]) -> int:
    """Hard-link the files ``rels`` (relative paths) of one version into another."""
    made: set[Path] = set()
    count = 0
    for rel in rels:
        dst = dst_version / rel
        if dst.parent not in made:
            dst.parent.mkdir(parents=True, exist_ok=True)
            made.add(dst.parent)
        link_or_copy(src_version / rel, dst)
        count += 1
    return count


def move_written(written: Path, dst_results: Path) -> list[str]:
    """Move the Parquet files Spark wrote under ``written`` (month=/protocol=
    directories) into a version's results directory; their paths relative
    to the version."""
    moved = []
    made: set[Path] = set()
    for part_dir in list_partitions(written).values():
        for file in data_files(part_dir):
            rel = os.path.relpath(file, written)
            dst = dst_results / rel
            if dst.parent not in made:
                dst.parent.mkdir(parents=True, exist_ok=True)
                made.add(dst.parent)
            os.replace(file, dst)
            moved.append(f"{RESULTS_DIR}/{rel}")
    return moved


def move_runs_files(written: Path, building: Path) -> list[str]:
    """Move the runs table's files Spark wrote under ``written`` into a
    version's runs directory; their paths relative to the version."""
    moved = []
    for file in data_files(written):
        os.replace(file, building / RUNS_DIR / file.name)
        moved.append(f"{RUNS_DIR}/{file.name}")
    return moved


def publish(
    dataset: Path, building: Path, name: str, report: dict[str, Any], progress: Progress, t: float
) -> None:
    """Rename the finished version into place, switch ``current``, keep the report."""
    (building / VERSION_INFO).write_text(
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
    (building / VERSION_REPORT).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    final = dataset / VERSIONS / name
    os.replace(building, final)
    swap_current(dataset, final)
    prune_versions(dataset, final)
    write_report(dataset, report)
    progress(
        f"  published {name}: {report['dataset_records']:,} record(s) in {report['dataset_runs']} run(s) "
        f"({report['phases']['publish']:.1f} s)"
    )


def write_report(dataset: Path, report: dict[str, Any]) -> Path:
    reports = dataset / REPORTS
    reports.mkdir(exist_ok=True)
    path = reports / f"{report['ingest_id']}.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return path


# ---------------------------------------------------------------- manifest


def empty_manifest() -> dict[str, Any]:
    return {"format": MANIFEST_FORMAT, "sources": {}, "files": {}, "runs_files": {}}


def load_manifest_file(version: Path) -> dict[str, Any] | None:
    """A version's manifest, or None for a version made before manifests existed."""
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
    manifest = load_manifest_file(version)
    if manifest is None:
        raise IngestError(
            f"{version} has no {MANIFEST} (it was made before manifests existed): "
            f"the next `conformance ingest` adds one"
        )
    return manifest


def write_manifest(version: Path, manifest: dict[str, Any]) -> None:
    (version / MANIFEST).write_text(
        json.dumps(manifest, sort_keys=True, separators=(",", ":")) + "\n", encoding="utf-8"
    )


def run_index(sources: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """run id -> the results files (manifest keys) that gave it rows."""
    index: dict[str, list[str]] = {}
    for key, source in sources.items():
        for run_id in source["run_ids"]:
            index.setdefault(run_id, []).append(key)
    return index

"""The dataset's schema is derived from ResultRecord (conformance/aggregate/schema.py):
every field of a record has its column and is stored, datasets written with
an older column set still read (the new columns as NULL), and the modules
that need no Spark import none."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from conformance.aggregate.dataset import read_results
from conformance.aggregate.ingest import ingest
from conformance.aggregate.schema import (
    PARTITION_COLUMNS,
    RECORD_FIELDS,
    RECORD_SCHEMA_DDL,
    RESULT_COLUMNS,
    RESULTS_SCHEMA_DDL,
    record_fields,
)
from conformance.aggregate.versions import read_manifest
from conformance.core.results import ResultRecord

from .conftest import record, write_run

REPO_ROOT = Path(__file__).resolve().parents[2]
AUTH = "btp.auth.server.accepts-valid-auth"
FLOW = "btp.flow.server.response-numbering"
OLD = "20260401T020000Z-aaaaaaaa"
NEW = "20260402T020000Z-bbbbbbbb"
OLD_COLUMNS = (
    "run_id time date harness_version target implementation implementation_version role case_id "
    "level citation outcome duration_s message peer_implementation trace_file host source_uri"
).split()
"""The data files' columns before the schema was derived from ResultRecord
(and before ``impairment``): what older datasets hold."""
NEW_FIELDS = (
    "depends",
    "errata",
    "blocked_by",
    "start_failure",
    "prerequisite_only",
    "impairment",
)
quiet = lambda line: None  # noqa: E731


def _ddl_names(ddl: str) -> list[str]:
    return [part.strip().split(" ", 1)[0] for part in ddl.split(",")]


def test_every_record_field_has_a_spark_column():
    fields = [f.name for f in dataclasses.fields(ResultRecord)]
    assert [name for name, _ in RECORD_FIELDS] == fields
    assert _ddl_names(RECORD_SCHEMA_DDL) == fields
    stored = set(_ddl_names(RESULTS_SCHEMA_DDL))
    missing = [name for name in fields if name not in stored]
    assert not missing, f"ResultRecord fields without a column in the dataset: {missing}"
    assert set(RESULT_COLUMNS) | set(PARTITION_COLUMNS) == stored
    types = dict(RECORD_FIELDS)
    assert (types["depends"], types["errata"]) == ("array<string>", "array<string>")
    assert (types["start_failure"], types["prerequisite_only"]) == ("boolean", "boolean")
    assert (types["blocked_by"], types["duration_s"]) == ("string", "double")
    assert "time timestamp" in RESULTS_SCHEMA_DDL and "date date" in RESULTS_SCHEMA_DDL


def test_a_field_without_a_spark_type_stops_the_derivation():
    @dataclasses.dataclass
    class WithAMapping:
        run_id: str
        labels: dict[str, str]

    with pytest.raises(TypeError, match="labels|dict"):
        record_fields(WithAMapping)


def test_versioning_needs_no_spark_and_the_page_no_matrix_job():
    """versions and runs import no pyspark (a nightly ingest with nothing
    new starts no JVM); html imports no matrix (no import circle)."""
    probe = (
        "import sys\n"
        "import conformance.aggregate.versions, conformance.aggregate.runs, "
        "conformance.aggregate.schema, conformance.aggregate.html\n"
        "print(sorted(m for m in sys.modules if m.startswith('pyspark') or m == "
        "'conformance.aggregate.matrix'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        check=True,
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def _every_field_set(run_id: str, time_: str, case_id: str) -> ResultRecord:
    return dataclasses.replace(
        record(run_id, time_, "node-a", "1.1", case_id, "blocked"),
        message=f"blocked by {AUTH} (failed): no auth response",
        peer_implementation=None,
        trace_file=f"traces/node-a/{case_id}.txt",
        depends=[AUTH, "btp.other"],
        errata=["E-1"],
        blocked_by=AUTH,
        start_failure=False,
        prerequisite_only=True,
        impairment="fragment seed=3",
    )


def test_every_field_of_a_record_is_stored(spark, tmp_path):
    rec = _every_field_set(NEW, "2026-04-02T02:00:01.000Z", FLOW)
    write_run(tmp_path / "runs", NEW, [rec])
    ingest(spark, [tmp_path / "runs"], tmp_path / "dataset", progress=quiet)
    (row,) = [r.asDict() for r in read_results(spark, tmp_path / "dataset").collect()]
    for name, value in dataclasses.asdict(rec).items():
        if name == "time":
            # PySpark gives a timestamp as a naive local time.
            stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
            assert row["time"] == stamp.astimezone().replace(tzinfo=None)
        else:
            assert row[name] == value, name


def _as_an_older_ingest_wrote_it(spark, dataset: Path, work: Path) -> None:
    """Rewrite the current version's data files with the old column set only."""
    results = (dataset / "current").resolve() / "results"
    old = work / "old-results"
    read_results(spark, dataset).select(*OLD_COLUMNS, *PARTITION_COLUMNS).write.partitionBy(
        *PARTITION_COLUMNS
    ).parquet(str(old))
    for part in results.rglob("*.parquet"):
        part.unlink()
    for part in old.rglob("part-*.parquet"):
        target = results / part.parent.relative_to(old) / part.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(part, target)
    manifest = dataset / "current" / "manifest.json"
    # The manifest names the files by path: the copies replace them one for one.
    data = json.loads(manifest.read_text())
    rows = sum(f["rows"] for f in data["files"].values())
    data["files"] = {
        str(p.relative_to(results.parent)): {"run_ids": [OLD], "rows": rows}
        for p in results.rglob("*.parquet")
    }
    manifest.write_text(json.dumps(data))


def test_a_dataset_with_the_old_columns_reads_them_as_null_beside_a_new_run(spark, tmp_path):
    from pyspark.sql import functions as F

    from conformance.aggregate.matrix import run as matrix

    dataset, out = tmp_path / "dataset", tmp_path / "matrix"
    old_records = [
        record(OLD, "2026-04-01T02:00:01.000Z", "node-a", "1.0", AUTH, "failed"),
        dataclasses.replace(
            record(OLD, "2026-04-01T02:00:02.000Z", "node-a", "1.0", FLOW, "blocked"),
            message=f"blocked by {AUTH} (failed): no auth response",
            blocked_by=AUTH,
            depends=[AUTH],
        ),
    ]
    write_run(tmp_path / "runs", OLD, old_records)
    ingest(spark, [tmp_path / "runs" / OLD], dataset, progress=quiet)
    _as_an_older_ingest_wrote_it(spark, dataset, tmp_path)
    current = (dataset / "current").resolve() / "results"
    (old_file,) = current.rglob("*.parquet")
    assert set(spark.read.parquet(str(old_file)).columns) == set(OLD_COLUMNS)

    write_run(tmp_path / "runs", NEW, [_every_field_set(NEW, "2026-04-02T02:00:01.000Z", FLOW)])
    report = ingest(spark, [tmp_path / "runs"], dataset, progress=quiet)
    assert report["runs"]["skipped_unchanged"] == 1 and report["files"]["linked"] == 1
    rows = {
        (r["run_id"], r["case_id"]): r.asDict()
        for r in read_results(spark, dataset).orderBy("run_id", "case_id").collect()
    }
    assert set(rows) == {(OLD, AUTH), (OLD, FLOW), (NEW, FLOW)}
    for key in ((OLD, AUTH), (OLD, FLOW)):
        assert [rows[key][name] for name in NEW_FIELDS] == [None] * len(NEW_FIELDS), key
    new = rows[(NEW, FLOW)]
    assert (new["depends"], new["errata"], new["blocked_by"]) == (
        [AUTH, "btp.other"],
        ["E-1"],
        AUTH,
    )
    assert (new["start_failure"], new["prerequisite_only"]) == (False, True)
    assert read_results(spark, dataset).where(F.col("blocked_by").isNull()).count() == 2
    assert read_manifest(dataset)["files"]

    # The matrices over both: the old blocked row's root cause comes from its message.
    matrix(spark, dataset, out, progress=quiet)
    requirements = {
        (r["implementation_version"], r["case_id"]): r
        for r in json.loads((out / "requirements.json").read_text())["rows"]
    }
    assert requirements[("1.0", FLOW)]["latest_blocked_by"] == AUTH
    assert requirements[("1.1", FLOW)]["latest_blocked_by"] == AUTH
    assert requirements[("1.0", AUTH)]["latest_blocked_by"] is None

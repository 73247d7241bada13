"""A partial run (``--case``, ``-k``: summary.json's ``partial``) reaches
the dataset's runs table and is never counted as a certification by the
matrices (issue 24, item 8): the certification matrix judges the latest
*whole* complete run, however well the partial one went."""

from __future__ import annotations

import csv
import shutil
import time
from pathlib import Path

from conformance.aggregate.dataset import read_runs
from conformance.aggregate.ingest import ingest
from conformance.aggregate.matrix import run as matrix
from conformance.core.results import write_summary

from .conftest import dataset_runs, record, write_run

FULL = "20260401T020000Z-aaaaaaaa"
PARTIAL = "20260402T020000Z-bbbbbbbb"
LATER_PARTIAL = "20260403T020000Z-cccccccc"
AUTH = "btp.auth.server.accepts-valid-auth"
FLOW = "btp.flow.server.silent-on-garbage"
SUITE = {"btp": [AUTH, FLOW]}


def _partial_summary(run_dir: Path, run_id: str) -> None:
    """summary.json as `certify --case btp.auth.*` writes it."""
    write_summary(run_dir, run_id, time.monotonic() - 1, {}, {"case": ["btp.auth.*"]}, SUITE)


def _certification(out: Path) -> dict[tuple[str, str], dict[str, str]]:
    with open(out / "certification.csv", newline="", encoding="utf-8") as handle:
        return {
            (r["implementation"], r["implementation_version"]): r for r in csv.DictReader(handle)
        }


def test_a_partial_run_is_no_certification(spark, tmp_path):
    root = tmp_path / "runs"
    # A whole run: the flow case failed, so node-a 1.0 is not certified.
    write_run(
        root,
        FULL,
        [
            record(FULL, "2026-04-01T02:00:01.000Z", "node-a", "1.0", AUTH, "passed"),
            record(FULL, "2026-04-01T02:00:02.000Z", "node-a", "1.0", FLOW, "failed"),
        ],
    )
    # Then only the auth case, which passes: a partial run, newer.
    partial = write_run(
        root,
        PARTIAL,
        [record(PARTIAL, "2026-04-02T02:00:01.000Z", "node-a", "1.0", AUTH, "passed")],
        finished=False,
    )
    _partial_summary(partial, PARTIAL)
    # node-b was only ever run in part: no certification at all.
    only = write_run(
        root,
        LATER_PARTIAL,
        [record(LATER_PARTIAL, "2026-04-03T02:00:01.000Z", "node-b", "2.0", AUTH, "passed")],
        finished=False,
    )
    dataset, out = tmp_path / "dataset", tmp_path / "matrix"
    ingest(spark, [root], dataset, progress=lambda line: None)
    runs = dataset_runs(spark, dataset)
    assert (runs[FULL]["partial"], runs[PARTIAL]["partial"]) == (False, True)
    assert runs[LATER_PARTIAL]["complete"] is False and not runs[LATER_PARTIAL]["partial"]

    # node-b's run finishes (its summary written after the first ingest): the
    # runs table learns it is partial without its results being read again.
    _partial_summary(only, LATER_PARTIAL)
    report = ingest(spark, [root], dataset, progress=lambda line: None)
    assert report["runs"]["completion_updated"] == 1 and report["runs"]["parsed"] == 0
    runs = dataset_runs(spark, dataset)
    assert runs[LATER_PARTIAL]["complete"] is True and runs[LATER_PARTIAL]["partial"] is True

    matrix(spark, dataset, out, progress=lambda line: None)
    rows = _certification(out)
    assert rows[("node-a", "1.0")]["status"] == "not certified", rows[("node-a", "1.0")]
    assert rows[("node-a", "1.0")]["run_id"] == FULL
    assert rows[("node-a", "1.0")]["failed_must"] == FLOW
    assert rows[("node-b", "2.0")]["status"] == "no complete run", rows[("node-b", "2.0")]


def test_runs_tables_written_before_the_partial_column_still_read(spark, tmp_path):
    root = tmp_path / "runs"
    write_run(
        root, FULL, [record(FULL, "2026-04-01T02:00:01.000Z", "node-a", "1.0", AUTH, "passed")]
    )
    dataset, out = tmp_path / "dataset", tmp_path / "matrix"
    ingest(spark, [root], dataset, progress=lambda line: None)
    # Rewrite the current runs table as an older ingest wrote it: no partial column.
    runs_dir = (dataset / "current").resolve() / "runs"
    old = tmp_path / "old-runs"
    read_runs(spark, dataset).drop("partial").coalesce(1).write.parquet(str(old))
    for file in runs_dir.iterdir():
        file.unlink()
    for file in old.glob("part-*.parquet"):
        shutil.copy(file, runs_dir / file.name)
    assert dataset_runs(spark, dataset)[FULL]["partial"] is None
    matrix(spark, dataset, out, progress=lambda line: None)
    assert _certification(out)[("node-a", "1.0")]["status"] == "certified"

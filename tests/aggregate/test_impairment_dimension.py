"""The network impairment a run went through (``certify --impair``: each
record's ``impairment``, e.g. ``fragment seed=123``) is a dimension of the
dataset and of every matrix (docs/impairment.md, docs/aggregation.md): a
node certified on clean loopback and failing under ``fragment`` shows as two
rows, nights with other seeds fall into one, and data files written before
the column existed read as clean."""

from __future__ import annotations

import csv
import dataclasses
import shutil
from pathlib import Path

from conformance.aggregate.dataset import read_results
from conformance.aggregate.ingest import ingest
from conformance.aggregate.matrix import run as matrix

from .conftest import record, write_run

CLEAN = "20260501T020000Z-aaaaaaaa"
FRAGMENT_1 = "20260502T020000Z-bbbbbbbb"
FRAGMENT_2 = "20260503T020000Z-cccccccc"
AUTH = "btp.auth.server.accepts-valid-auth"
FLOW = "btp.flow.server.silent-on-garbage"


def _impaired(rec, impairment: str | None):
    return dataclasses.replace(rec, impairment=impairment)


def _rows(out: Path, name: str) -> list[dict[str, str]]:
    with open(out / f"{name}.csv", newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _write_nights(root: Path) -> None:
    write_run(
        root,
        CLEAN,
        [
            record(CLEAN, "2026-05-01T02:00:01.000Z", "node-a", "1.0", AUTH, "passed"),
            record(CLEAN, "2026-05-01T02:00:02.000Z", "node-a", "1.0", FLOW, "passed"),
        ],
    )
    for run_id, day, seed, flow in (
        (FRAGMENT_1, "02", 11, "failed"),
        (FRAGMENT_2, "03", 12, "failed"),
    ):
        write_run(
            root,
            run_id,
            [
                _impaired(
                    record(run_id, f"2026-05-{day}T02:00:01.000Z", "node-a", "1.0", AUTH, "passed"),
                    f"fragment seed={seed}",
                ),
                _impaired(
                    record(run_id, f"2026-05-{day}T02:00:02.000Z", "node-a", "1.0", FLOW, flow),
                    f"fragment seed={seed}",
                ),
            ],
        )


def test_a_node_failing_only_under_fragment_has_a_row_of_each(spark, tmp_path):
    root, dataset, out = tmp_path / "runs", tmp_path / "dataset", tmp_path / "matrix"
    _write_nights(root)
    ingest(spark, [root], dataset, progress=lambda line: None)
    kept = {
        (r["run_id"], r["case_id"]): r["impairment"] for r in read_results(spark, dataset).collect()
    }
    assert kept[(CLEAN, FLOW)] is None and kept[(FRAGMENT_2, FLOW)] == "fragment seed=12"

    matrix(spark, dataset, out, progress=lambda line: None)
    certification = {(r["implementation"], r["network"]): r for r in _rows(out, "certification")}
    assert set(certification) == {("node-a", "clean"), ("node-a", "fragment")}
    assert certification[("node-a", "clean")]["status"] == "certified"
    fragment = certification[("node-a", "fragment")]
    assert (fragment["status"], fragment["failed_must"], fragment["runs"]) == (
        "not certified",
        FLOW,
        "2",
    )
    assert fragment["newest"] == "true" == certification[("node-a", "clean")]["newest"]

    requirements = {(r["network"], r["case_id"]): r for r in _rows(out, "requirements")}
    assert requirements[("clean", FLOW)]["latest_outcome"] == "passed"
    assert requirements[("fragment", FLOW)]["latest_outcome"] == "failed"
    assert requirements[("fragment", FLOW)]["failed"] == "2"  # both seeds: one network condition
    trends = {(r["date"], r["network"]) for r in _rows(out, "trends")}
    assert trends == {
        ("2026-05-01", "clean"),
        ("2026-05-02", "fragment"),
        ("2026-05-03", "fragment"),
    }
    assert not _rows(
        out, "flaky"
    )  # passed clean, failed under fragment: two conditions, not a flaky case
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "node-a [fragment]" in page


def test_data_files_written_before_the_impairment_column_read_as_clean(spark, tmp_path):
    root, dataset, out = tmp_path / "runs", tmp_path / "dataset", tmp_path / "matrix"
    write_run(
        root, CLEAN, [record(CLEAN, "2026-05-01T02:00:01.000Z", "node-a", "1.0", AUTH, "passed")]
    )
    ingest(spark, [root], dataset, progress=lambda line: None)
    # Rewrite the data files as an older ingest wrote them: no impairment column.
    results = (dataset / "current").resolve() / "results"
    old = tmp_path / "old-results"
    read_results(spark, dataset).drop("impairment").write.partitionBy("month", "protocol").parquet(
        str(old)
    )
    for part in results.rglob("*.parquet"):
        part.unlink()
    for part in old.rglob("part-*.parquet"):
        target = results / part.parent.relative_to(old) / part.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(part, target)
    assert [r["impairment"] for r in read_results(spark, dataset).collect()] == [None]
    matrix(spark, dataset, out, progress=lambda line: None)
    (row,) = _rows(out, "certification")
    assert (row["network"], row["status"]) == ("clean", "certified")

"""Incremental `conformance ingest` (issue #15) on real Spark: a night added to
a dataset gives exactly the rows of a full ingest, without reading the runs
already ingested or rewriting the files holding them; a run that grew replaces
its rows; readers only ever see a whole version; compaction keeps every row."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.aggregate.compaction import compact
from conformance.aggregate.ingest import ingest
from conformance.aggregate.versions import current_version, read_manifest

from .conftest import dataset_runs, generate_runs, record, write_run

REPO_ROOT = Path(__file__).resolve().parents[2]
LAST_NIGHT = "20260105"  # night index 4 of bench/gen_results.py (first night 2026-01-01)
quiet = lambda line: None  # noqa: E731


def rows(spark, dataset: Path) -> list[tuple]:
    """Every stored row, every column, as sorted tuples of strings: two
    datasets are equal when these lists are."""
    from conformance.aggregate.dataset import read_results

    frame = read_results(spark, dataset)
    return sorted(
        tuple("" if v is None else str(v) for v in r)
        for r in frame.select(*sorted(frame.columns)).collect()
    )


def runs_table(spark, dataset: Path) -> dict[str, dict]:
    """The runs table without the columns that name the ingest."""
    return {
        k: {c: v for c, v in r.items() if c not in ("ingest_id", "ingested_at")}
        for k, r in dataset_runs(spark, dataset).items()
    }


def data_files(dataset: Path) -> dict[str, int]:
    """relative path -> inode of the current version's data files."""
    results = current_version(dataset) / "results"
    return {str(p.relative_to(results)): p.stat().st_ino for p in results.rglob("*.parquet")}


@pytest.fixture(scope="module")
def nights(tmp_path_factory, spark):
    """Five synthetic nights (bench/gen_results.py, killed runs and malformed
    lines included), and two datasets made once for the tests to copy:
    ``base`` holds the first four nights (ingested while the last night's run
    directories were set aside), ``full`` all five, ingested in one go."""
    root = tmp_path_factory.mktemp("incremental")
    runs = generate_runs(root, cases=20, nights=5, interop_cases=5, malformed=0.003, seed=5)
    last = sorted(p.name for p in runs.iterdir() if p.name.startswith(LAST_NIGHT))
    assert last and len(last) < len(list(runs.iterdir()))
    hold = root / "hold"
    hold.mkdir()
    for name in last:  # rename(2) keeps each file's size and mtime
        os.replace(runs / name, hold / name)
    base = root / "base"
    first = ingest(spark, [runs], base, progress=quiet)
    assert (
        first["runs"]["parsed"] == len(list(runs.iterdir()))
        and first["runs"]["skipped_unchanged"] == 0
    )
    for name in last:
        os.replace(hold / name, runs / name)
    full = root / "full"
    ingest(spark, [runs], full, progress=quiet)
    return {
        "root": root,
        "runs": runs,
        "last": last,
        "base": base,
        "full": full,
        "full_rows": rows(spark, full),
        "full_runs": runs_table(spark, full),
    }


def copy_dataset(source: Path, to: Path) -> Path:
    """A copy of a dataset (its ``current`` link is relative, so it follows)."""
    shutil.copytree(source, to, symlinks=True)
    return to


def test_a_new_night_costs_its_own_runs_and_gives_the_rows_of_a_full_ingest(
    spark, nights, tmp_path
):
    runs, last = nights["runs"], nights["last"]
    incremental = copy_dataset(nights["base"], tmp_path / "incremental")
    before = len(list(runs.iterdir())) - len(last)
    files_before = data_files(incremental)

    night = ingest(spark, [runs], incremental, progress=quiet)
    # Only the new night's files were read; the rest were recognised.
    assert night["runs"]["parsed"] == night["runs"]["new"] == len(last)
    assert night["runs"]["skipped_unchanged"] == before and night["runs"]["replaced"] == 0
    # Nothing older was rewritten: every earlier data file is in the new
    # version as a hard link (same inode), and the night's rows came as new files.
    files_after = data_files(incremental)
    assert {k: files_after.get(k) for k in files_before} == files_before
    assert night["files"]["rewritten"] == 0 and night["files"]["linked"] == len(files_before)
    assert night["files"]["added"] == len(files_after) - len(files_before) > 0
    assert night["partitions"]["appended"] > 0, (
        "the night's month/protocol partitions existed already"
    )
    assert night["runs_files"] == {"linked": 1, "rewritten": 0, "total": 2}, (
        "the runs table grows by a file too"
    )

    assert rows(spark, incremental) == nights["full_rows"]
    assert runs_table(spark, incremental) == nights["full_runs"]
    manifest = read_manifest(incremental)
    assert set(manifest["files"]) == {"results/" + k for k in files_after}
    assert sum(f["rows"] for f in manifest["files"].values()) == night["dataset_records"]


def test_unchanged_runs_are_not_read_again(spark, nights, tmp_path):
    runs = nights["runs"]
    dataset = copy_dataset(nights["full"], tmp_path / "dataset")
    version = current_version(dataset).name
    # Change one byte of a results file but keep its size and mtime: an
    # ingest that read the file would store the changed outcome.
    results = sorted(runs.glob("*/results.jsonl"))[0]
    stat = results.stat()
    text = results.read_text(encoding="utf-8")
    assert '"outcome": "passed"' in text
    try:
        results.write_text(
            text.replace('"outcome": "passed"', '"outcome": "failed"', 1), encoding="utf-8"
        )
        os.utime(results, ns=(stat.st_atime_ns, stat.st_mtime_ns))

        def no_spark():
            pytest.fail("an ingest with nothing new asked for Spark")

        again = ingest(no_spark, [runs], dataset, progress=quiet)
    finally:
        results.write_text(text, encoding="utf-8")
        os.utime(results, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert again["runs"]["parsed"] == 0 and again["runs"]["skipped_unchanged"] == len(
        list(runs.iterdir())
    )
    assert again["published"] is False and current_version(dataset).name == version
    assert rows(spark, dataset) == nights["full_rows"]
    assert (dataset / "ingest-reports" / f"{again['ingest_id']}.json").is_file()


def test_a_grown_run_replaces_its_rows_and_only_its_files_are_rewritten(spark, tmp_path):
    root = tmp_path / "runs"
    killed = "20260301T030000Z-bbbbbbbb"
    other = "20260301T020000Z-aaaaaaaa"
    write_run(
        root, other, [record(other, "2026-03-01T02:00:01.000Z", "node-a", "1.0", "btp.a", "passed")]
    )
    run_dir = write_run(
        root,
        killed,
        [
            record(killed, "2026-03-01T03:00:01.000Z", "node-b", "2.0", "btp.a", "passed"),
            record(killed, "2026-03-01T03:00:02.000Z", "node-b", "2.0", "btp.b", "failed"),
        ],
        finished=False,
        torn='{"run_id": "' + killed + '", "case_id": "btp.c',
    )
    dataset = tmp_path / "dataset"
    first = ingest(spark, [root], dataset, progress=quiet)
    assert first["torn_last_lines"] == 1
    # The earlier run of the same partition is ingested in its own file so
    # that the file left alone can be told from the one rewritten.
    third = "20260302T020000Z-cccccccc"
    write_run(
        root, third, [record(third, "2026-03-02T02:00:01.000Z", "node-a", "1.0", "btp.a", "failed")]
    )
    ingest(spark, [root], dataset, progress=quiet)
    manifest = read_manifest(dataset)
    untouched = {rel for rel, f in manifest["files"].items() if killed not in f["run_ids"]}
    inodes = data_files(dataset)

    # The run resumes: the torn line is completed, more cases, then the summary.
    from conformance.core.results import ResultWriter, write_summary

    with open(run_dir / "results.jsonl", "a", encoding="utf-8") as out:
        out.write(
            '.x", "target": "node-b", "implementation": "node-b", "implementation_version": "2.0", '
            '"protocol": "btp", "role": "server", "level": "MUST", "outcome": "passed", '
            '"time": "2026-03-01T03:00:03.000Z"}\n'
        )
    ResultWriter(run_dir).append(
        record(killed, "2026-03-01T03:00:04.000Z", "node-b", "2.0", "btp.d", "error")
    )
    write_summary(run_dir, killed, 0.0, {})
    grown = ingest(spark, [root], dataset, progress=quiet)
    assert (
        grown["runs"]["replaced"] == grown["runs"]["parsed"] == 1
        and grown["runs"]["skipped_unchanged"] == 2
    )
    assert grown["files"]["rewritten"] == len(manifest["files"]) - len(untouched) == 1
    after = data_files(dataset)
    assert all(
        after["/".join(rel.split("/")[1:])] == inodes["/".join(rel.split("/")[1:])]
        for rel in untouched
    )

    full = tmp_path / "full"
    ingest(spark, [root], full, progress=quiet)
    assert rows(spark, dataset) == rows(spark, full)
    run_row = dataset_runs(spark, dataset)[killed]
    assert (
        run_row["complete"] is True
        and run_row["torn_last_line"] is False
        and run_row["records"] == 4
    )
    assert runs_table(spark, dataset) == runs_table(spark, full)


def test_a_run_that_only_finished_is_updated_without_reading_it(spark, tmp_path):
    root = tmp_path / "runs"
    run_id = "20260301T030000Z-bbbbbbbb"
    run_dir = write_run(
        root,
        run_id,
        [record(run_id, "2026-03-01T03:00:01.000Z", "node-b", "2.0", "btp.a", "passed")],
        finished=False,
    )
    dataset = tmp_path / "dataset"
    ingest(spark, [root], dataset, progress=quiet)
    assert dataset_runs(spark, dataset)[run_id]["complete"] is False
    from conformance.core.results import write_summary

    write_summary(run_dir, run_id, 0.0, {})
    report = ingest(spark, [root], dataset, progress=quiet)
    assert report["runs"]["parsed"] == 0 and report["runs"]["completion_updated"] == 1
    assert report["files"]["linked"] == report["files"]["total"] and report["files"]["added"] == 0
    assert dataset_runs(spark, dataset)[run_id]["complete"] is True


def test_a_run_in_two_directories_is_resolved_over_both(spark, tmp_path):
    """A copy of a run directory (same run id) elsewhere: when one copy grows,
    the other is read again with it, so duplicates resolve as in a full ingest."""
    run_id = "20260301T030000Z-bbbbbbbb"
    recs = [record(run_id, "2026-03-01T03:00:01.000Z", "node-b", "2.0", "btp.a", "passed")]
    first = write_run(tmp_path / "a", run_id, recs, finished=False)
    write_run(
        tmp_path / "b",
        run_id,
        recs + [record(run_id, "2026-03-01T03:00:02.000Z", "node-b", "2.0", "btp.b", "failed")],
    )
    dataset = tmp_path / "dataset"
    ingest(spark, [tmp_path / "a", tmp_path / "b"], dataset, progress=quiet)
    from conformance.core.results import ResultWriter

    ResultWriter(first).append(
        record(run_id, "2026-03-01T03:00:05.000Z", "node-b", "2.0", "btp.b", "passed")
    )
    report = ingest(spark, [tmp_path / "a"], dataset, progress=quiet)
    assert report["runs"]["replaced"] == 1 and report["runs"]["pulled_in"] == 1
    full = tmp_path / "full"
    ingest(spark, [tmp_path / "a", tmp_path / "b"], full, progress=quiet)
    assert rows(spark, dataset) == rows(spark, full)
    assert len(rows(spark, dataset)) == 2


def test_readers_see_the_old_or_the_new_version_only(spark, nights, tmp_path):
    """Read the dataset at every step of an ingest (each progress line): it is
    always exactly the rows before or exactly the rows after."""
    dataset = copy_dataset(nights["base"], tmp_path / "dataset")
    old = rows(spark, dataset)
    seen = []

    def read_now(line: str) -> None:
        seen.append((line, current_version(dataset).name, rows(spark, dataset)))

    ingest(spark, [nights["runs"]], dataset, progress=read_now)
    new = rows(spark, dataset)
    assert new == nights["full_rows"] != old and len(seen) >= 5
    assert all(r in (old, new) for _, _, r in seen), [
        line for line, _, r in seen if r not in (old, new)
    ]
    assert seen[0][2] == old and seen[-1][2] == new
    # The version a reader had open before the switch is still there.
    assert (dataset / "versions" / seen[0][1]).is_dir()


def test_compaction_keeps_every_row_and_later_ingests_still_replace(spark, nights, tmp_path):
    runs, last = nights["runs"], nights["last"]
    dataset = copy_dataset(nights["base"], tmp_path / "dataset")
    ingest(spark, [runs], dataset, progress=quiet)
    before = read_manifest(dataset)
    parts = {os.path.dirname(rel) for rel in before["files"]}
    assert len(before["files"]) > len(parts), "two ingests leave several files in a partition"

    report = compact(spark, dataset, progress=quiet)
    assert report["published"] is True and report["files"]["after"] == len(parts)
    assert (
        rows(spark, dataset) == nights["full_rows"]
        and runs_table(spark, dataset) == nights["full_runs"]
    )
    after = read_manifest(dataset)
    assert after["sources"] == before["sources"]
    assert {os.path.dirname(rel) for rel in after["files"]} == parts
    assert compact(spark, dataset, progress=quiet)["published"] is False, "nothing left to compact"

    # A run whose rows now sit in a compacted file grows: that file is
    # rewritten. (The shared runs directory is put back as it was after.)
    grown = runs / last[0] / "results.jsonl"
    stat, text = grown.stat(), grown.read_text(encoding="utf-8")
    line = json.loads(text.splitlines()[0])
    try:
        with open(grown, "a", encoding="utf-8") as out:
            if not text.endswith("\n"):
                out.write("\n")
            out.write(
                json.dumps(dict(line, case_id=line["case_id"] + "-late", outcome="failed")) + "\n"
            )
        report = ingest(spark, [runs], dataset, progress=quiet)
        assert report["runs"]["replaced"] == report["runs"]["parsed"] == 1
        assert report["files"]["rewritten"] == 1 and report["files"]["added"] == 1
        full = ingest(spark, [runs], tmp_path / "full", progress=quiet)
        assert rows(spark, dataset) == rows(spark, tmp_path / "full")
        assert len(rows(spark, dataset)) == len(nights["full_rows"]) + 1 == full["records"]
    finally:
        grown.write_text(text, encoding="utf-8")
        os.utime(grown, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def one_run_ingested(spark, tmp_path: Path) -> tuple[Path, str, Path]:
    """One finished run of one passed case, ingested: (the directory of run
    directories, the run's id, the dataset)."""
    root = tmp_path / "runs"
    run_id = "20260301T020000Z-aaaaaaaa"
    write_run(
        root,
        run_id,
        [record(run_id, "2026-03-01T02:00:01.000Z", "node-a", "1.0", "btp.a", "passed")],
    )
    dataset = tmp_path / "dataset"
    ingest(spark, [root], dataset, progress=quiet)
    return root, run_id, dataset


def test_a_dataset_from_before_manifests_gets_one(spark, tmp_path):
    root, run_id, dataset = one_run_ingested(spark, tmp_path)
    stored = rows(spark, dataset)
    (current_version(dataset) / "manifest.json").unlink()
    report = ingest(spark, [root], dataset, progress=quiet)
    assert report["runs"]["replaced"] == 1, "without sizes, a file given again is read again"
    assert rows(spark, dataset) == stored
    assert (
        read_manifest(dataset)["sources"][str((root / run_id / "results.jsonl").resolve())]["size"]
        > 0
    )
    assert ingest(spark, [root], dataset, progress=quiet)["runs"]["parsed"] == 0


def test_cli_ingest_with_nothing_new_starts_no_jvm_and_compact_needs_a_dataset(spark, tmp_path):
    root, _, dataset = one_run_ingested(spark, tmp_path)
    cli = [sys.executable, "-m", "conformance.cli"]
    again = subprocess.run(
        cli + ["ingest", str(root), "--dataset", str(dataset)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    # The session line ("spark 4.x on local[*] ... started in N s") is printed when a JVM starts.
    assert "nothing new" in again.stdout and "started in" not in again.stdout
    missing = subprocess.run(
        cli + ["compact", "--dataset", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    assert missing.returncode == 2 and "does not exist" in missing.stderr

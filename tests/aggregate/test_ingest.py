"""`conformance ingest` on real Spark: runs finished and killed, malformed and
torn lines, idempotent re-ingest, nothing lost when runs are added."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from conformance.aggregate.errors import IngestError
from conformance.aggregate.ingest import ingest

from .conftest import dataset_records, dataset_runs, jsonl_records, record, write_run

FINISHED = "20260301T020000Z-aaaaaaaa"
KILLED = "20260301T030000Z-bbbbbbbb"
INTEROP = "20260302T020000Z-cccccccc"
LATER = "20260303T020000Z-dddddddd"


@pytest.fixture
def runs(tmp_path):
    root = tmp_path / "runs"
    finished = write_run(
        root,
        FINISHED,
        [
            record(
                FINISHED,
                "2026-03-01T02:00:01.000Z",
                "node-a",
                "1.0",
                "btp.auth.server.accepts-valid-auth",
                "passed",
            ),
            record(
                FINISHED,
                "2026-03-01T02:00:02.000Z",
                "node-a",
                "1.0",
                "btp.flow.server.silent-on-garbage",
                "failed",
            ),
            record(
                FINISHED,
                "2026-03-01T02:00:03.000Z",
                "node-a",
                "1.0",
                "btp.transfer.server.x",
                "not_applicable",
            ),
        ],
    )
    # Killed mid-run: no summary.json, a malformed line, a record missing its
    # case id, and a last line cut off by the kill.
    killed = write_run(
        root,
        KILLED,
        [
            record(
                KILLED,
                "2026-03-01T03:00:01.000Z",
                "node-b",
                "2.0",
                "btp.auth.server.accepts-valid-auth",
                "passed",
            ),
        ],
        finished=False,
        extra_lines=["{not json", json.dumps({"run_id": KILLED, "outcome": "passed"})],
        torn='{"run_id": "' + KILLED + '", "case_id": "btp.fl',
    )
    interop = write_run(
        root,
        INTEROP,
        [
            record(
                INTEROP,
                "2026-03-02T02:00:01.000Z",
                "node-a",
                "1.0",
                "btp.interop.client.exchanges",
                "passed",
                role="client",
                peer="node-b",
            ),
            record(
                INTEROP,
                "2026-03-02T02:00:02.000Z",
                "node-b",
                "2.0",
                "btp.interop.client.exchanges",
                "failed",
                role="client",
                peer="node-a",
            ),
        ],
    )
    return root, [finished, killed, interop]


def test_ingest_keeps_finished_and_killed_runs_and_counts_bad_lines(spark, runs, tmp_path):
    root, run_dirs = runs
    dataset = tmp_path / "dataset"
    report = ingest(spark, [root], dataset, progress=lambda line: None)
    expected = jsonl_records(run_dirs)
    assert report["records"] == len(expected) == 6 + 0  # 3 + 1 + 2 well-formed records
    assert report["runs"]["given"] == 3 and report["runs"]["unfinished"] == 1
    # "{not json" and the record without a case id; the torn last line apart.
    assert report["malformed_lines"] >= 2 and report["torn_last_lines"] == 1
    assert report["malformed_samples"], "the report shows examples of what was malformed"
    stored = dataset_records(spark, dataset)
    assert sorted((r["run_id"], r["case_id"], r["outcome"]) for r in stored) == sorted(
        (r["run_id"], r["case_id"], r["outcome"]) for r in expected
    )
    by_run = dataset_runs(spark, dataset)
    assert by_run[FINISHED]["complete"] is True and by_run[KILLED]["complete"] is False
    assert by_run[KILLED]["torn_last_line"] is True
    # The report is also written into the dataset.
    assert (dataset / "ingest-reports" / f"{report['ingest_id']}.json").is_file()


def test_reingest_changes_nothing_and_new_runs_add_to_old(spark, runs, tmp_path):
    root, run_dirs = runs
    dataset = tmp_path / "dataset"
    quiet = lambda line: None  # noqa: E731
    ingest(spark, [root], dataset, progress=quiet)
    first = sorted(
        map(
            json.dumps,
            (
                dict(r, time=str(r["time"]), date=str(r["date"]))
                for r in dataset_records(spark, dataset)
            ),
        )
    )
    again = ingest(spark, [root, run_dirs[0]], dataset, progress=quiet)
    assert again["runs"]["ingested_before"] == 3
    second = sorted(
        map(
            json.dumps,
            (
                dict(r, time=str(r["time"]), date=str(r["date"]))
                for r in dataset_records(spark, dataset)
            ),
        )
    )
    assert second == first, "re-ingesting the same runs must not change the dataset"
    later = write_run(
        tmp_path / "more",
        LATER,
        [
            record(
                LATER,
                "2026-03-03T02:00:01.000Z",
                "node-a",
                "1.1",
                "btp.flow.server.silent-on-garbage",
                "passed",
            )
        ],
    )
    ingest(spark, [later], dataset, progress=quiet)
    stored = {(r["run_id"], r["target"], r["case_id"]) for r in dataset_records(spark, dataset)}
    assert len(stored) == 7 and (LATER, "node-a", "btp.flow.server.silent-on-garbage") in stored
    assert {r for r in stored if r[0] != LATER} == {
        (r["run_id"], r["target"], r["case_id"]) for r in jsonl_records(run_dirs)
    }


def test_a_run_that_grew_after_ingest_gets_its_new_records(spark, tmp_path):
    """A run ingested while still running (unfinished), then again once it
    finished: the new cases arrive, the old ones are not doubled."""
    root = tmp_path / "runs"
    run_dir = write_run(
        root,
        KILLED,
        [record(KILLED, "2026-03-01T03:00:01.000Z", "node-b", "2.0", "btp.a", "passed")],
        finished=False,
    )
    dataset = tmp_path / "dataset"
    ingest(spark, [root], dataset, progress=lambda line: None)
    from conformance.core.results import ResultWriter, write_summary

    ResultWriter(run_dir).append(
        record(KILLED, "2026-03-01T03:00:02.000Z", "node-b", "2.0", "btp.b", "failed")
    )
    write_summary(run_dir, KILLED, 0.0, {})
    ingest(spark, [root], dataset, progress=lambda line: None)
    assert sorted(r["case_id"] for r in dataset_records(spark, dataset)) == ["btp.a", "btp.b"]
    assert dataset_runs(spark, dataset)[KILLED]["complete"] is True


def test_no_runs_is_a_clear_error(spark, tmp_path):
    with pytest.raises(IngestError, match="no runs found"):
        ingest(spark, [tmp_path / "nowhere"], tmp_path / "dataset", progress=lambda line: None)


def test_blocked_records_and_files_from_before_blocked_existed_are_ingested(spark, tmp_path):
    root = tmp_path / "runs"
    blocked = record(
        LATER,
        "2026-03-03T02:00:02.000Z",
        "node-a",
        "1.1",
        "btp.flow.server.response-numbering",
        "blocked",
    )
    blocked.message = "blocked by btp.auth.server.accepts-valid-auth (failed): no auth response"
    blocked.blocked_by = "btp.auth.server.accepts-valid-auth"
    blocked.depends = ["btp.auth.server.accepts-valid-auth"]
    # A line as the harness wrote it before depends/errata/blocked_by existed.
    legacy = asdict(
        record(
            LATER, "2026-03-03T02:00:03.000Z", "node-a", "1.1", "btp.flow.server.legacy", "passed"
        )
    )
    for new_field in ("depends", "errata", "blocked_by"):
        del legacy[new_field]
    run_dir = write_run(
        root,
        LATER,
        [
            record(
                LATER,
                "2026-03-03T02:00:01.000Z",
                "node-a",
                "1.1",
                "btp.auth.server.accepts-valid-auth",
                "failed",
            ),
            blocked,
        ],
        extra_lines=[json.dumps(legacy)],
    )
    report = ingest(spark, [root], tmp_path / "dataset", progress=lambda line: None)
    assert report["records"] == 3 and report["malformed_lines"] == 0
    stored = {r["case_id"]: r for r in dataset_records(spark, tmp_path / "dataset")}
    assert stored["btp.flow.server.response-numbering"]["outcome"] == "blocked"
    assert stored["btp.flow.server.response-numbering"]["message"].startswith(
        "blocked by btp.auth.server.accepts-valid-auth (failed)"
    )
    assert stored["btp.flow.server.legacy"]["outcome"] == "passed"
    assert (
        json.loads((run_dir / "summary.json").read_text())["targets"][0]["levels"]["MUST"][
            "blocked"
        ]
        == 1
    )

"""`conformance matrix` on real Spark, checked against the same figures
computed in plain Python from the results.jsonl files; the standalone
cluster gives byte-identical output; the CLI's errors are clear."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import defaultdict
from datetime import date
from pathlib import Path

import pytest

from conformance.aggregate.ingest import ingest
from conformance.aggregate.matrix import Window, run

from .conftest import generate_runs, jsonl_records

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = [sys.executable, "-m", "conformance.cli"]


@pytest.fixture(scope="module")
def generated(tmp_path_factory, spark):
    """Synthetic nightly runs (bench/gen_results.py): 6 implementations x 3
    protocols' cases, 4 nights, interop runs, some runs killed part-way."""
    root = tmp_path_factory.mktemp("aggregate")
    runs = generate_runs(root, cases=25, nights=4, interop_cases=6, malformed=0.002, seed=11)
    run_dirs = sorted(runs.iterdir())
    dataset = root / "dataset"
    ingest(spark, [runs], dataset, progress=lambda line: None)
    out = root / "matrix"
    run(spark, dataset, out, progress=lambda line: None)
    return {
        "root": root,
        "runs": run_dirs,
        "dataset": dataset,
        "out": out,
        "complete": {d.name for d in run_dirs if (d / "summary.json").is_file()},
    }


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def rate(passed: int, failed: int, error: int, blocked: int = 0) -> str:
    """Blocked did not pass: it counts against the pass rate."""
    total = passed + failed + error + blocked
    return f"{passed / total:.4f}" if total else ""


def counts(records) -> dict[str, int]:
    out = {"passed": 0, "failed": 0, "error": 0, "blocked": 0, "not_applicable": 0}
    for r in records:
        out[r["outcome"]] += 1
    return out


def test_generated_data_has_blocked_cases_naming_their_root_cause(generated):
    blocked = [r for r in jsonl_records(generated["runs"]) if r["outcome"] == "blocked"]
    assert blocked, "bench/gen_results.py writes blocked cases"
    assert all(
        r["message"].startswith("blocked by ") and "(failed)" in r["message"] for r in blocked
    )


def test_requirements_matrix_matches_plain_python(generated):
    records = [r for r in jsonl_records(generated["runs"]) if not r.get("peer_implementation")]
    groups = defaultdict(list)
    for r in records:
        groups[
            (r["implementation"], r["implementation_version"], r["protocol"], r["case_id"])
        ].append(r)
    rows = {
        (r["implementation"], r["implementation_version"], r["protocol"], r["case_id"]): r
        for r in read_csv(generated["out"] / "requirements.csv")
    }
    assert set(rows) == set(groups)
    worse = {"passed": 0, "not_applicable": 1, "blocked": 2, "failed": 3, "error": 4}
    for key, recs in groups.items():
        c = counts(recs)
        row = rows[key]
        assert {k: int(row[k]) for k in c} == c, key
        assert row["pass_rate"] == rate(c["passed"], c["failed"], c["error"], c["blocked"]), key
        latest = max(recs, key=lambda r: (r["time"], worse[r["outcome"]]))
        assert row["latest_outcome"] == latest["outcome"], key
        # The level and the kind of its basis, as the latest record has them.
        assert (row["level"], row["basis"]) == (
            latest["level"],
            latest.get("basis", "keyword").split(":", 1)[0],
        ), key


def test_certification_matrix_matches_plain_python(generated):
    records = [r for r in jsonl_records(generated["runs"]) if not r.get("peer_implementation")]
    by_version_run = defaultdict(list)
    for r in records:
        by_version_run[
            (r["implementation"], r["implementation_version"], r["protocol"], r["run_id"])
        ].append(r)
    latest_complete: dict[tuple, tuple] = {}
    for (impl, version, protocol, run_id), recs in by_version_run.items():
        if run_id not in generated["complete"]:
            continue
        key = (impl, version, protocol)
        stamp = (max(r["time"] for r in recs), run_id)
        if key not in latest_complete or stamp > latest_complete[key][0]:
            latest_complete[key] = (stamp, recs)
    rows = {
        (r["implementation"], r["implementation_version"], r["protocol"]): r
        for r in read_csv(generated["out"] / "certification.csv")
    }
    assert set(latest_complete) <= set(rows)
    statuses = set()
    for key, (_, recs) in latest_complete.items():
        must = counts(r for r in recs if r["level"] == "MUST")
        certified = (
            must["failed"] == 0
            and must["error"] == 0
            and must["blocked"] == 0
            and must["passed"] > 0
        )
        expected = "certified" if certified else "not certified"
        failed_must = sorted(
            {
                r["case_id"]
                for r in recs
                if r["level"] == "MUST" and r["outcome"] in ("failed", "error")
            }
        )
        blocked_must = sorted(
            {r["case_id"] for r in recs if r["level"] == "MUST" and r["outcome"] == "blocked"}
        )
        assert rows[key]["status"] == expected, key
        assert rows[key]["failed_must"] == ";".join(failed_must), key
        assert rows[key]["blocked_must"] == ";".join(blocked_must), key
        assert int(rows[key]["must_blocked"]) == must["blocked"], key
        statuses.add(expected)
    assert statuses == {"certified", "not certified"}, "the generated data has both kinds"
    for key in set(rows) - set(latest_complete):
        assert rows[key]["status"] == "no complete run", key


def test_interop_matrix_matches_plain_python(generated):
    pairs = defaultdict(list)
    for r in jsonl_records(generated["runs"]):
        peer = r.get("peer_implementation")
        if peer:
            client, server = (
                (r["implementation"], peer)
                if r["role"] == "client"
                else (peer, r["implementation"])
            )
            pairs[(r["protocol"], client, server)].append(r)
    assert pairs, "the generated data has interop runs"
    rows = {
        (r["protocol"], r["client_implementation"], r["server_implementation"]): r
        for r in read_csv(generated["out"] / "interop.csv")
    }
    assert set(rows) == set(pairs)
    for key, recs in pairs.items():
        c = counts(recs)
        assert {k: int(rows[key][k]) for k in c} == c, key
        assert rows[key]["pass_rate"] == rate(c["passed"], c["failed"], c["error"], c["blocked"]), (
            key
        )


def test_flaky_and_trends_match_plain_python(generated):
    records = jsonl_records(generated["runs"])
    per_case = defaultdict(list)
    for r in records:
        per_case[
            (
                r["implementation"],
                r["implementation_version"],
                r["protocol"],
                r["case_id"],
                r.get("peer_implementation") or "",
            )
        ].append(r["outcome"])
    # Blocked is no failure of the case's own rule: passed + blocked is not flaky.
    flaky = {
        k
        for k, outcomes in per_case.items()
        if "passed" in outcomes and ({"failed", "error"} & set(outcomes))
    }
    assert any(
        "passed" in o and "blocked" in o and not {"failed", "error"} & set(o)
        for o in per_case.values()
    ), "the generated data has cases both passed and blocked"
    rows = read_csv(generated["out"] / "flaky.csv")
    assert (
        flaky
        and {
            (
                r["implementation"],
                r["implementation_version"],
                r["protocol"],
                r["case_id"],
                r["peer_implementation"],
            )
            for r in rows
        }
        == flaky
    )
    nights = defaultdict(list)
    for r in records:
        night = date(int(r["run_id"][:4]), int(r["run_id"][4:6]), int(r["run_id"][6:8])).isoformat()
        nights[(night, r["implementation"])].append(r)
    trends = {
        (r["date"], r["implementation"]): r for r in read_csv(generated["out"] / "trends.csv")
    }
    assert set(trends) == set(nights)
    for key, recs in nights.items():
        c = counts(recs)
        assert (
            int(trends[key]["passed"]) == c["passed"]
            and int(trends[key]["blocked"]) == c["blocked"]
        ), key
        assert trends[key]["pass_rate"] == rate(
            c["passed"], c["failed"], c["error"], c["blocked"]
        ), key
        assert int(trends[key]["runs"]) == len({r["run_id"] for r in recs}), key


def test_outputs_json_and_html_page(generated):
    out = generated["out"]
    for name in ("requirements", "certification", "interop", "flaky", "trends"):
        data = json.loads((out / f"{name}.json").read_text())
        rows = data["rows"] if isinstance(data, dict) else data
        assert len(rows) == len(read_csv(out / f"{name}.csv")), name
    page = (out / "index.html").read_text()
    for anchor in (
        'id="certification"',
        'id="interop"',
        'id="requirements"',
        'id="flaky"',
        'id="trends"',
    ):
        assert anchor in page
    # Heatmap cells carry the rate or verdict on hover.
    assert page.count("title=") > 50


def test_window_selects_runs_by_date(spark, generated, tmp_path):
    nights = sorted({d.name[:8] for d in generated["runs"]})
    last = date(int(nights[-1][:4]), int(nights[-1][4:6]), int(nights[-1][6:8]))
    out = tmp_path / "last-night"
    run(spark, generated["dataset"], out, Window(since=last), progress=lambda line: None)
    assert {r["date"] for r in read_csv(out / "trends.csv")} == {last.isoformat()}


def test_cli_reports_usage_errors_clearly(tmp_path):
    ingest_missing = subprocess.run(
        CONFORMANCE + ["ingest", str(tmp_path / "nowhere"), "--dataset", str(tmp_path / "ds")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    assert ingest_missing.returncode == 2 and "no runs found" in ingest_missing.stderr
    matrix_missing = subprocess.run(
        CONFORMANCE + ["matrix", "--dataset", str(tmp_path / "ds")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    assert matrix_missing.returncode == 2 and "ingest" in matrix_missing.stderr
    bad_date = subprocess.run(
        CONFORMANCE + ["matrix", "--since", "yesterday"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )
    assert bad_date.returncode == 2 and "YYYY-MM-DD" in bad_date.stderr


# The matrices on a standalone cluster are byte-identical to the local ones:
# step 5 of tests/aggregate/test_cluster_incremental.py checks it, after an
# ingest, incremental ingests and a compaction on the same cluster (one
# cluster started for both checks: each start is a master and a worker JVM).


# ------------------------------------------------------------ window pruning


@pytest.fixture(scope="module")
def months_dataset(tmp_path_factory, spark):
    """Runs over five months (2026-01 to 2026-05) of two protocols, and one
    run whose id carries no date and whose records straddle a month's end
    (2026-04-30 to 2026-05-01): its records' dates are their own times'."""
    from .conftest import record, write_run

    root = tmp_path_factory.mktemp("months")
    runs = []
    impls = {"alpha": "btp", "beta": "btp", "gamma": "stomp"}
    for month in (1, 2, 3, 4):
        for day in (5, 20):
            for impl, protocol in impls.items():
                run_id = f"2026{month:02d}{day:02d}T020000Z-{impl}"
                stamp = f"2026-{month:02d}-{day:02d}T02:00:0"
                recs = [
                    record(
                        run_id,
                        f"{stamp}{i}.000Z",
                        impl,
                        "1.0",
                        f"{protocol}.flow.server.rule-{i}",
                        ("passed", "failed")[(month + i) % 2],
                        protocol=protocol,
                    )
                    for i in range(3)
                ]
                runs.append(write_run(root / "runs", run_id, recs))
    interop = "20260320T030000Z-interop-btp"
    runs.append(
        write_run(
            root / "runs",
            interop,
            [
                record(
                    interop,
                    "2026-03-20T03:00:00.000Z",
                    "alpha",
                    "1.0",
                    "btp.flow.client.rule-9",
                    "passed",
                    role="client",
                    peer="beta",
                )
            ],
        )
    )
    straddling = "manual-alpha-late"
    runs.append(
        write_run(
            root / "runs",
            straddling,
            [
                record(
                    straddling,
                    "2026-04-30T23:59:58.000Z",
                    "alpha",
                    "1.1",
                    "btp.flow.server.rule-0",
                    "passed",
                ),
                record(
                    straddling,
                    "2026-05-01T00:00:02.000Z",
                    "alpha",
                    "1.1",
                    "btp.flow.server.rule-1",
                    "failed",
                ),
            ],
        )
    )
    dataset = root / "dataset"
    ingest(spark, [root / "runs"], dataset, progress=lambda line: None)
    return {"dataset": dataset, "runs": runs}


def _expected_window(records: list[dict], window: Window) -> set[tuple]:
    """The window's records by plain Python over every record: a run's date
    is its id's date, else its earliest record's; --last-runs keeps each
    implementation's N runs with the latest first record in the date range."""

    def day(r: dict) -> date:
        rid = r["run_id"]
        if rid[:8].isdigit():
            return date(int(rid[:4]), int(rid[4:6]), int(rid[6:8]))
        return date.fromisoformat(r["time"][:10])

    inside = [
        r
        for r in records
        if (not window.since or day(r) >= window.since)
        and (not window.until or day(r) <= window.until)
    ]
    if window.last_runs:
        runs: dict[str, dict] = {}
        for r in records:
            entry = runs.setdefault(
                r["run_id"], {"first": r["time"], "day": day(r), "impls": set()}
            )
            entry["first"] = min(entry["first"], r["time"])
            entry["day"] = min(entry["day"], day(r))
            entry["impls"].add(r["implementation"])
        ranked = defaultdict(list)
        for run_id, entry in runs.items():
            if (not window.since or entry["day"] >= window.since) and (
                not window.until or entry["day"] <= window.until
            ):
                for impl in entry["impls"]:
                    ranked[impl].append((entry["first"], run_id))
        keep = {
            (impl, rid)
            for impl, lst in ranked.items()
            for _, rid in sorted(lst, reverse=True)[: window.last_runs]
        }
        inside = [r for r in inside if (r["implementation"], r["run_id"]) in keep]
    return {(r["run_id"], r["implementation"], r["case_id"]) for r in inside}


def _months_read(frame) -> set[str]:
    months = set()
    for uri in frame.inputFiles():
        months |= {part.split("=", 1)[1] for part in uri.split("/") if part.startswith("month=")}
    return months


WINDOWS = {
    "since": (Window(since=date(2026, 3, 10)), {"2026-03", "2026-04", "2026-05"}),
    "until": (Window(until=date(2026, 2, 10)), {"2026-01", "2026-02"}),
    "since-until": (Window(since=date(2026, 2, 1), until=date(2026, 2, 28)), {"2026-02"}),
    # alpha's last run is the straddling one (2026-04-30, records into May),
    # beta's and gamma's are on 2026-04-20.
    "last-runs-1": (Window(last_runs=1), {"2026-04", "2026-05"}),
    "last-runs-3-until": (Window(until=date(2026, 3, 31), last_runs=3), {"2026-02", "2026-03"}),
}


@pytest.mark.parametrize("name", sorted(WINDOWS))
def test_window_reads_only_its_months_and_selects_the_same_records(spark, months_dataset, name):
    from conformance.aggregate.matrix import select_window

    window, months = WINDOWS[name]
    frame = select_window(spark, months_dataset["dataset"], window)
    assert _months_read(frame) == months, frame.inputFiles()
    got = {
        (r.run_id, r.implementation, r.case_id)
        for r in frame.select("run_id", "implementation", "case_id").collect()
    }
    expected = _expected_window(jsonl_records(months_dataset["runs"]), window)
    assert got == expected and expected


def test_whole_history_reads_every_month(spark, months_dataset):
    from conformance.aggregate.matrix import select_window

    frame = select_window(spark, months_dataset["dataset"], Window())
    assert _months_read(frame) == {"2026-01", "2026-02", "2026-03", "2026-04", "2026-05"}


def test_last_runs_matrix_counts_only_the_kept_runs(spark, months_dataset, tmp_path):
    run(spark, months_dataset["dataset"], tmp_path, Window(last_runs=1), progress=lambda line: None)
    trends = {
        (r["date"], r["implementation"]): int(r["runs"]) for r in read_csv(tmp_path / "trends.csv")
    }
    assert trends == {
        ("2026-04-20", "beta"): 1,
        ("2026-04-20", "gamma"): 1,
        ("2026-04-30", "alpha"): 1,
        ("2026-05-01", "alpha"): 1,
    }


TRICKY = [
    "plain",
    "a,b",
    'say "hi"',
    "two\nlines",
    "cr\rin",
    "crlf\r\nin",
    " padded ",
    "\ttab",
    "#hash",
    "é✓ ü",
    "",
    None,
    "semi;colon",
    "back\\slash",
    "\x01ctl",
]


def test_python_written_files_equal_spark_written_ones(spark, tmp_path):
    """The small matrices are written by Python from lines Spark's CSV and
    JSON generators made (to_csv/to_json); the big one by Spark's writers.
    Both must give the same bytes, also for values that need quoting,
    trimming or escaping, nulls and numbers Java formats its own way."""
    from pyspark.sql import functions as F

    from conformance.aggregate.matrix import Matrix, _collect_lines, _write_matrix

    rows = [
        (
            f"k{i:02d}",
            value,
            [value or "", "z"],
            i * 0.0001 if i % 3 else None,
            None if i % 4 == 0 else i % 2 == 0,
            i,
        )
        for i, value in enumerate(TRICKY)
    ]
    frame = spark.createDataFrame(
        rows, "key string, text string, items array<string>, rate double, flag boolean, n int"
    )
    columns, key = ["key", "text", "items", "rate", "flag", "n"], ["key"]
    spark_dir, python_dir = tmp_path / "spark", tmp_path / "python"
    spark_dir.mkdir()
    python_dir.mkdir()
    by_spark = Matrix(
        "tricky", "Tricky", "Values that need care.", columns, key, [], len(rows), frame=frame
    )
    _write_matrix(F, by_spark, spark_dir, Window())
    lines, parsed = _collect_lines(F, {"tricky": (frame, columns, key)})["tricky"]
    by_python = Matrix(
        "tricky", "Tricky", "Values that need care.", columns, key, parsed, len(lines), lines
    )
    _write_matrix(F, by_python, python_dir, Window())
    for name in ("tricky.csv", "tricky.json"):
        assert (python_dir / name).read_bytes() == (spark_dir / name).read_bytes(), name
    assert [r["text"] for r in parsed] == [
        v for v in TRICKY
    ]  # the page's values survive the round trip
    assert parsed[1]["rate"] == 0.0001 and parsed[0]["rate"] is None and parsed[0]["flag"] is None
    # The JSON file is what Spark wrote (Java's 1.0E-4, not Python's 0.0001).
    assert '"rate":1.0E-4' in (python_dir / "tricky.json").read_text(encoding="utf-8")
    assert sorted(p.name for p in python_dir.iterdir()) == ["tricky.csv", "tricky.json"]


def test_run_leaves_no_cache_or_checkpoint_behind(spark, generated, tmp_path):
    from conformance.aggregate.matrix import persisted

    before = persisted(spark)
    run(spark, generated["dataset"], tmp_path, progress=lambda line: None)
    assert persisted(spark) <= before
    for name in ("requirements", "certification", "interop", "flaky", "trends"):
        assert (tmp_path / f"{name}.csv").read_bytes() == (
            generated["out"] / f"{name}.csv"
        ).read_bytes(), name

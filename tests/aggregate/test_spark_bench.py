"""bench/spark_bench.py: its verdicts (from given figures, no Spark) and one
real run of its small mode, whose printed report must keep its shape."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH = REPO_ROOT / "bench" / "spark_bench.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("spark_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def figures(
    night=12.0,
    night_empty=11.0,
    window=30.0,
    ingest=60.0,
    matrix=30.0,
    duckdb=70.0,
    peak=1500.0,
    spark_records=10_000_000,
    duck_records=10_000_000,
) -> dict:
    def step(seconds: float) -> dict:
        return {"seconds": seconds, "peak_rss_mib": peak, "java_hwm_mib": peak - 50}

    return {
        "rows": duck_records,
        "spark_records": spark_records,
        "ingest": step(ingest),
        "matrix": step(matrix),
        "duckdb": {**step(duckdb), "records": duck_records},
        "night_empty": step(night_empty),
        "night_full": step(night),
        "window": step(window),
        "last_runs": step(window),
    }


def verdicts(bench, data: dict, judged: bool = True) -> dict[str, bool | None]:
    return {name: ok for name, _, _, ok in bench.checks(data, judged)}


def test_every_target_met_passes(bench, capsys):
    rows = bench.checks(figures(), judged=True)
    assert [ok for *_, ok in rows] == [True, True, True, None, True, True, True]
    assert bench.print_report(rows) == 0
    assert "FAIL" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "change, failing",
    [
        ({"night": 21.0, "night_empty": 20.0}, "tonight into the 10,000,000-row dataset"),
        ({"night": 14.0, "night_empty": 11.0}, "tonight: history / empty dataset"),  # 1.27x
        ({"window": 45.0}, "matrices, last 30 nights"),
        ({"ingest": 80.0, "matrix": 26.0}, "full rebuild: spark / duckdb"),  # 106 / 70 = 1.51x
        ({"peak": 1639.0}, "driver peak memory (every spark step)"),
        ({"spark_records": 9_999_999}, "records: spark = duckdb"),
    ],
)
def test_a_missed_target_fails_the_run(bench, capsys, change, failing):
    rows = bench.checks(figures(**change), judged=True)
    assert {name for name, *_, ok in rows if ok is False} == {failing}
    assert bench.print_report(rows) == 1
    assert re.search(re.escape(failing) + r".*FAIL$", capsys.readouterr().out, re.M)


def test_floor_figures_are_information_only(bench, capsys):
    data = figures(ingest=80.0, matrix=40.0)  # rebuild 120 / 70: FAIL, whatever the floor says
    data["floor"] = {
        "read": {"seconds": 30.0},
        "write": {"seconds": 75.0},
        "dedupe": {"seconds": 90.0},
        "aggregate": {"seconds": 20.0},
    }
    rows = bench.checks(data, judged=True)
    floor = {name: (value, ok) for name, value, _, ok in rows if name.startswith("floor:")}
    assert floor["floor: (write + aggregations) / duckdb"] == ("95.0/70.0 = 1.36x", None)
    assert floor["floor: (dedupe + aggregations) / duckdb"] == ("110.0/70.0 = 1.57x", None)
    assert {ok for _, ok in floor.values()} == {None}
    assert {name for name, *_, ok in rows if ok is False} == {"full rebuild: spark / duckdb"}
    assert bench.print_report(rows) == 1


def test_small_runs_judge_only_the_record_count(bench):
    small = verdicts(bench, figures(night=30.0, window=60.0, peak=4000.0), judged=False)
    assert set(small.values()) == {None, True}
    assert (
        verdicts(bench, figures(spark_records=1), judged=False)["records: spark = duckdb"] is False
    )


@pytest.mark.timeout(900)
def test_quick_mode_prints_every_figure_beside_its_target(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--quick",
            "--keep",
            str(tmp_path / "work"),
            "--jobs",
            "1",
            "--json",
            str(tmp_path / "figures.json"),
            "--floor",
            # Every step on one driver JVM: the report's shape for far less
            # CPU than eleven JVM starts (the per-command path is the same
            # report code; only how a step is started differs).
            "--one-driver",
        ],
        capture_output=True,
        text=True,
        timeout=850,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    for step in (
        "spark ingest history",
        "spark matrix history",
        "duckdb ingest+matrix",
        "spark ingest tonight into an empty dataset",
        "spark ingest tonight into the history",
        "spark matrix since",
        "spark matrix last-runs 30",
        "spark floor: read the JSON lines only",
        "spark floor: read, shuffle, write Parquet (no duplicates dropped)",
        "spark floor: read, drop duplicate keys, shuffle, write Parquet",
        "spark floor: per-case and per-run aggregations",
    ):
        assert re.search(
            rf"^  {re.escape(step)}.*: [\d.]+ s, peak memory \(PSS\) \d+ MiB", out, re.M
        ), step
    table = out[out.index("\ncheck ") :]
    expected = [
        (r"tonight into the [\d,]+-row dataset", r"[\d.]+ s", r"< 20 s"),
        (r"tonight: history / empty dataset", r"[\d.]+x", r"<= 1\.25x"),
        (r"matrices, last 30 nights", r"[\d.]+ s", r"< 45 s"),
        (r"matrices, --last-runs 30", r"[\d.]+ s", r"\(info\)"),
        (r"full rebuild: spark / duckdb", r"[\d.]+/[\d.]+ = [\d.]+x", r"<= 1\.50x"),
        (r"floor: JSON read only", r"[\d.]+ s", r"\(info\)"),
        (r"floor: read \+ write, no dedupe", r"[\d.]+ s", r"\(info\)"),
        (r"floor: read \+ dedupe \+ write", r"[\d.]+ s", r"\(info\)"),
        (r"floor: two aggregations", r"[\d.]+ s", r"\(info\)"),
        (r"floor: \(write \+ aggregations\) / duckdb", r"[\d.]+/[\d.]+ = [\d.]+x", r"\(info\)"),
        (
            r"floor: \(dedupe \+ aggregations\) / duckdb",
            r"[\d.]+/[\d.]+ = [\d.]+x",
            r"\(info; target 1\.50x\)",
        ),
        (r"driver peak memory \(every spark step\)", r"[\d,]+ MiB", r"<= 1,638 MiB"),
        (r"records: spark = duckdb", r"[\d,]+", r"= [\d,]+"),
    ]
    for name, value, target in expected:
        assert re.search(rf"^{name}\s+{value}\s+{target}\s+(info|PASS)$", table, re.M), (
            name,
            table,
        )
    assert re.search(r"^records: spark = duckdb .*PASS$", table, re.M)
    assert "targets are judged at 10,000,000 rows" in out
    assert "one driver JVM for every step" in out.splitlines()[0]
    assert (tmp_path / "figures.json").is_file()

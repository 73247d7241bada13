"""bench/version_view_bench.py --quick: one real run, in the tests' Spark
session; its printed figures and its JSON must keep their shape."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH = REPO_ROOT / "bench" / "version_view_bench.py"


def test_quick_run_prints_both_figures_and_their_ratio(spark, tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("version_view_bench", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    doc = tmp_path / "doc.md"
    doc.write_text(f"before\n{bench.DOC_START}\nold\n{bench.DOC_END}\nafter\n")
    code = bench.main(
        [
            "--quick",
            "--turns",
            "1",
            "--jobs",
            "1",
            # The session the tests run (one per JVM): the bench reuses it.
            "--master",
            spark.sparkContext.master,
            "--json",
            str(tmp_path / "figures.json"),
            "--doc",
            str(doc),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    figures = json.loads((tmp_path / "figures.json").read_text())
    today, every = figures["today"], figures["all_releases"]
    assert (today["targets_per_night"], every["targets_per_night"]) == (20, 280)
    assert every["records"] == 14 * today["records"] > 0
    assert every["releases"] > today["releases"] == 20
    assert today["view_s"] > 0 and every["view_s"] > 0
    assert figures["ratio"] == round(every["view_s"] / today["view_s"], 2)
    assert re.search(r"Ratio \(all releases / today\): \*\*\d+\.\d\dx\*\*", printed), printed
    assert "| all releases | 280 | 3 | " in printed
    text = doc.read_text()
    assert text.startswith("before\n") and text.endswith("after\n") and "old" not in text
    assert "| today | 20 | 3 | " in text

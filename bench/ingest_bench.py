#!/usr/bin/env python3
"""Incremental ingest benchmark (issue #15): what one new night costs.

The nightly scenario of the issue, with ``bench/gen_results.py`` (20
implementations, 400 cases per protocol, two versions a night, interop runs,
killed runs, malformed lines): NIGHTS + 1 nights are generated, the last
night's run directories set aside, and then, each step a ``conformance``
command run as a user runs it (its own process and Spark driver, JVM start
included in the wall time):

1. ``ingest RUNS`` of the first NIGHTS nights into an empty dataset;
2. ``ingest RUNS`` again, nothing new (every results file recognised by the
   manifest, none read);
3. the last night's directories moved into RUNS, ``ingest RUNS``: the nightly
   job, whose cost should follow the new night, not the history;
4. the same night alone into an empty dataset (the baseline of step 3);
   steps 3 and 4 take turns ``--repeats`` times (step 3 each time on a
   hard-link copy of the dataset as step 2 left it), so both see the same
   machine load, and the medians are compared;
5. ``compact`` of the dataset of step 3 (files per partition -> one).

Printed: each step's wall time, the phases and counters of its ingest report
(runs parsed / skipped, files linked / added / rewritten), then the ratio of
step 3 to step 4 beside the issue's 1.25 (at this size; the issue's
10-million-row figure is measured by bench/spark_bench.py). Exit status 0
when that ratio holds.

    .venv/bin/python bench/ingest_bench.py                  # 30 nights + 1 (~550,000 rows), ~3 min
    .venv/bin/python bench/ingest_bench.py --nights 10 --keep /tmp/ib
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
FIRST_NIGHT = datetime(2026, 1, 1, tzinfo=timezone.utc)  # bench/gen_results.py's first night
TARGET_RATIO = 1.25


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f} on {os.cpu_count()} CPU(s)"


def step(label: str, argv: list[str], dataset: Path | None, log: Path) -> dict:
    """Run one conformance command; its wall time and, for an ingest or a
    compaction, the report it wrote last."""
    before = (
        set((dataset / "ingest-reports").glob("*.json"))
        if dataset and (dataset / "ingest-reports").is_dir()
        else set()
    )
    started = time.monotonic()
    with open(log, "w") as out:
        code = subprocess.run(
            [sys.executable, "-m", "conformance.cli", *argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
            timeout=3600,
        ).returncode
    seconds = time.monotonic() - started
    if code != 0:
        sys.exit(f"ingest_bench: {label} failed (exit {code}):\n{log.read_text()[-3000:]}")
    report = {}
    if dataset is not None:
        new = sorted(set((dataset / "ingest-reports").glob("*.json")) - before)
        report = json.loads(new[-1].read_text()) if new else {}
    runs, files = report.get("runs", {}), report.get("files", {})
    phases = " ".join(f"{k} {v:.1f}" for k, v in report.get("phases", {}).items())
    print(f"{label:<44} {seconds:6.1f} s  ({load()})", flush=True)
    if runs:
        print(
            f"{'':<6}runs parsed {runs['parsed']}, skipped unchanged {runs['skipped_unchanged']}, "
            f"replaced {runs['replaced']}; records {report['records']:,}; files linked {files.get('linked', 0)}, "
            f"added {files.get('added', 0)}, rewritten {files.get('rewritten', 0)}; phases (s) {phases}",
            flush=True,
        )
    elif files:
        print(
            f"{'':<6}files {files.get('before')} -> {files.get('after')}; rows {report.get('rows_compacted', 0):,};"
            f" phases (s) {phases}",
            flush=True,
        )
    return {"seconds": round(seconds, 2), "report": report}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--nights", type=int, default=30, help="nights already in the dataset (default 30)"
    )
    parser.add_argument("--implementations", type=int, default=20)
    parser.add_argument("--cases", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3, help="turns of steps 3 and 4 (default 3)")
    parser.add_argument(
        "--keep", type=Path, help="work directory to keep (default: a temporary one, removed)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="ingest-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        return run(args, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, work: Path) -> int:
    gen = work / "gen"
    t = time.monotonic()
    subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "bench" / "gen_results.py"),
            "--out",
            str(gen),
            "--nights",
            str(args.nights + 1),
            "--implementations",
            str(args.implementations),
            "--cases",
            str(args.cases),
            "--clean",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=3600,
    )
    manifest = json.loads((gen / "manifest.json").read_text())
    runs = gen / "runs"
    last_night = (FIRST_NIGHT + timedelta(days=args.nights)).strftime("%Y%m%d")
    night = work / "night"
    shutil.rmtree(night, ignore_errors=True)
    night.mkdir()
    for run_dir in sorted(runs.glob(f"{last_night}T*")):
        os.replace(run_dir, night / run_dir.name)  # rename(2): sizes and mtimes stay
    night_runs = len(list(night.iterdir()))
    print(
        f"ingest_bench: {manifest['rows']:,} rows in {manifest['runs']:,} runs ({args.nights} nights + 1 of "
        f"{night_runs} runs) generated in {time.monotonic() - t:.0f} s (not timed); work dir {work}",
        flush=True,
    )

    dataset = work / "dataset"
    shutil.rmtree(dataset, ignore_errors=True)
    logs = work / "logs"
    logs.mkdir(exist_ok=True)
    figures = {
        "history": step(
            f"1. {args.nights} nights into an empty dataset",
            ["ingest", str(runs), "--dataset", str(dataset)],
            dataset,
            logs / "1.log",
        ),
        "nothing_new": step(
            "2. the same again, nothing new",
            ["ingest", str(runs), "--dataset", str(dataset)],
            dataset,
            logs / "2.log",
        ),
    }
    for run_dir in sorted(night.iterdir()):
        os.replace(run_dir, runs / run_dir.name)
    single = work / "night-only"
    shutil.rmtree(single, ignore_errors=True)
    single.mkdir()
    for run_dir in sorted(runs.glob(f"{last_night}T*")):
        shutil.copytree(run_dir, single / run_dir.name)
    into_history, into_empty = [], []
    for turn in range(1, args.repeats + 1):
        # An ingest never changes a file it did not write, so a hard-link
        # copy of the dataset is as good as the original and costs nothing.
        copy = work / f"dataset-{turn}"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(dataset, copy, symlinks=True, copy_function=os.link)
        into_history.append(
            step(
                f"3. one new night, ingest of all {manifest['runs']:,} runs (turn {turn})",
                ["ingest", str(runs), "--dataset", str(copy)],
                copy,
                logs / f"3-{turn}.log",
            )
        )
        empty = work / f"dataset-night-alone-{turn}"
        shutil.rmtree(empty, ignore_errors=True)
        into_empty.append(
            step(
                f"4. the same night into an empty dataset (turn {turn})",
                ["ingest", str(single), "--dataset", str(empty)],
                empty,
                logs / f"4-{turn}.log",
            )
        )
    figures["night_into_history"] = sorted(into_history, key=lambda f: f["seconds"])[
        len(into_history) // 2
    ]
    figures["night_alone"] = sorted(into_empty, key=lambda f: f["seconds"])[len(into_empty) // 2]
    figures["compact"] = step(
        "5. compact", ["compact", "--dataset", str(copy)], copy, logs / "5.log"
    )

    ratio = figures["night_into_history"]["seconds"] / figures["night_alone"]["seconds"]
    ok = ratio <= TARGET_RATIO
    print(
        f"\nmedian of {args.repeats}: one night into {args.nights} nights "
        f"{figures['night_into_history']['seconds']:.1f} s, into an empty dataset "
        f"{figures['night_alone']['seconds']:.1f} s; ratio {ratio:.2f} (target <= {TARGET_RATIO}) "
        f"{'PASS' if ok else 'FAIL'}"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "rows": manifest["rows"],
                    "runs": manifest["runs"],
                    "ratio": ratio,
                    **{
                        k: {
                            "seconds": v["seconds"],
                            "phases": v["report"].get("phases"),
                            "runs": v["report"].get("runs"),
                            "files": v["report"].get("files"),
                        }
                        for k, v in figures.items()
                    },
                },
                indent=2,
            )
            + "\n"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The version view's Spark job (``conformance versions-view``) over every
release, against the same job over today's targets (issue #34, "Measured").

Data, from ``bench/gen_results.py`` (the generator ``bench/spark_bench.py``
uses; not timed): 20 implementations certified every night for NIGHTS
nights, with CASES cases per protocol and no interop runs, twice:

* **all releases**: each implementation's 14 most recent releases every
  night (``--versions 14``): 20 x 14 = 280 targets a night, as issue #34's
  nightly certifying every release would make;
* **today**: one release each (``--versions 1``): the 20 targets of today.

Each is ingested into a dataset of its own (``conformance ingest``'s job,
in this process; not timed apart), then the version view's job runs over
it: read, the per-night aggregation, both windows, the collect, and the
writing of versions.json, regressions.json and index.html
(``version_view.run``). Its wall time is printed for both, with their
ratio: ``--turns`` turns each (default 2), alternating, the fastest
counted, so that the JVM's warm-up falls on neither; Spark's start-up is
paid once, before, and is in neither. The
generator moves every implementation to a new release every 5 to 15
nights, so over a year each one has far more than 14 distinct releases in
the dataset (printed).

    .venv/bin/python bench/version_view_bench.py                  # 365 nights x 50 cases
    .venv/bin/python bench/version_view_bench.py --nights 60 --cases 20
    .venv/bin/python bench/version_view_bench.py --quick          # 3 nights x 6 cases (tests)
    .venv/bin/python bench/version_view_bench.py --keep /tmp/vv --reuse   # time again, same data
    .venv/bin/python bench/version_view_bench.py --doc docs/versions-view.md   # also write the figures there

Needs the ``aggregate`` and ``bench`` extras (pyspark, numpy) and Java 17.
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
from datetime import datetime, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

IMPLEMENTATIONS = 20
RELEASES_PER_NIGHT = 14
"""20 implementations x 14 releases = 280 targets a night (issue #34)."""
FULL = {"nights": 365, "cases": 50}
QUICK = {"nights": 3, "cases": 6}
DOC_START, DOC_END = "<!-- version-view-bench:start -->", "<!-- version-view-bench:end -->"

quiet = lambda line: None  # noqa: E731


def generate(out: Path, nights: int, cases: int, versions: int, jobs: int) -> dict:
    done = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "bench" / "gen_results.py"),
            "--out",
            str(out),
            "--implementations",
            str(IMPLEMENTATIONS),
            "--versions",
            str(versions),
            "--nights",
            str(nights),
            "--cases",
            str(cases),
            "--interop",
            "0",
            "--unfinished",
            "0",
            "--malformed",
            "0",
            "--jobs",
            str(jobs),
            "--clean",
        ],
        capture_output=True,
        text=True,
        timeout=7200,
    )
    if done.returncode:
        sys.exit(f"version_view_bench: bench/gen_results.py failed:\n{done.stderr[-3000:]}")
    return json.loads((out / "manifest.json").read_text())


def prepare(
    spark, work: Path, label: str, nights: int, cases: int, versions: int, jobs: int, reuse: bool
):
    """Generate and ingest one dataset (or, with ``reuse``, take the one an
    earlier run left in ``work`` at the same size); its figures so far and
    its path."""
    from conformance.aggregate.ingest import ingest

    place = work / label.replace(" ", "-")
    kept = place / "figures.json"
    if reuse and kept.is_file():
        figures = json.loads(kept.read_text())
        if (figures["nights"], figures["cases_per_protocol"]) == (nights, cases):
            print(f"  {label}: the dataset of an earlier run ({place}), not made again", flush=True)
            return {**figures, "view_turns_s": []}, place
    shutil.rmtree(place / "dataset", ignore_errors=True)
    t = time.monotonic()
    manifest = generate(place / "gen", nights, cases, versions, jobs)
    generated = time.monotonic() - t
    t = time.monotonic()
    report = ingest(spark, [place / "gen" / "runs"], place / "dataset", progress=quiet)
    if report["dataset_records"] != manifest["rows"]:
        # Two releases of one night under one target name would collapse
        # (the record key is run, target, case): the figure would lie.
        sys.exit(
            f"version_view_bench: {label}: generated {manifest['rows']:,} records, the dataset "
            f"holds {report['dataset_records']:,}"
        )
    figures = {
        "label": label,
        "targets_per_night": IMPLEMENTATIONS * versions,
        "nights": nights,
        "cases_per_protocol": cases,
        "records": report["dataset_records"],
        "generate_s": round(generated, 1),
        "ingest_s": round(time.monotonic() - t, 1),
        "view_turns_s": [],
    }
    kept.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return figures, place


def time_view(spark, place: Path, figures: dict) -> None:
    """One turn of the version view's job over the dataset, timed."""
    from conformance.aggregate.version_view import run

    t = time.monotonic()
    report = run(spark, place / "dataset", place / "view", progress=quiet)
    figures["view_turns_s"].append(round(time.monotonic() - t, 2))
    view = report["view"]
    figures.update(
        releases=sum(len(i["releases"]) for i in view["implementations"]),
        release_rule_rows=sum(len(r["cells"]) for i in view["implementations"] for r in i["rules"]),
        release_changes=len(view["release_changes"]),
        night_changes=len(view["night_changes"]),
        view_s=min(figures["view_turns_s"]),
    )
    print(
        f"  {figures['label']}: {figures['targets_per_night']} targets x {figures['nights']} "
        f"nights x {figures['cases_per_protocol']} cases: {figures['records']:,} records, "
        f"{figures['releases']} distinct releases, {figures['release_rule_rows']:,} release x rule "
        f"rows; versions-view {figures['view_turns_s'][-1]:.2f} s "
        f"(generated in {figures['generate_s']:.0f} s, ingested in {figures['ingest_s']:.0f} s)",
        flush=True,
    )


def report_text(result: dict) -> str:
    today, every = result["today"], result["all_releases"]
    return (
        f"Measured {result['when']} on {result['machine']} (`{result['command']}`):\n\n"
        "| dataset | targets a night | nights | records | distinct releases | "
        "release x rule rows | versions-view job |\n|---|---|---|---|---|---|---|\n"
        + "".join(
            f"| {f['label']} | {f['targets_per_night']} | {f['nights']} | {f['records']:,} | "
            f"{f['releases']} | {f['release_rule_rows']:,} | {f['view_s']:.2f} s "
            f"(turns: {', '.join(f'{x:.2f}' for x in f['view_turns_s'])}) |\n"
            for f in (today, every)
        )
        + f"\nRatio (all releases / today): **{result['ratio']:.2f}x** the time for "
        f"{every['records'] / max(1, today['records']):.1f}x the records.\n"
    )


def write_doc(doc: Path, text: str) -> None:
    body = doc.read_text(encoding="utf-8")
    if DOC_START not in body or DOC_END not in body:
        sys.exit(f"version_view_bench: {doc} has no {DOC_START} ... {DOC_END} section")
    head, rest = body.split(DOC_START, 1)
    _, tail = rest.split(DOC_END, 1)
    doc.write_text(f"{head}{DOC_START}\n{text}{DOC_END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="3 nights x 6 cases (tests)")
    parser.add_argument("--nights", type=int, default=None, help=f"default {FULL['nights']}")
    parser.add_argument("--cases", type=int, default=None, help=f"default {FULL['cases']}")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="generator processes")
    parser.add_argument(
        "--turns", type=int, default=2, help="timed turns of each job, alternating (default 2)"
    )
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument(
        "--keep", type=Path, help="work here and keep the data (default: a temp dir)"
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="with --keep: time the datasets an earlier run left there (same size)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    parser.add_argument("--doc", type=Path, help="also write them into this file's bench section")
    args = parser.parse_args(argv)
    size = QUICK if args.quick else FULL
    nights = args.nights or size["nights"]
    cases = args.cases or size["cases"]

    from conformance.aggregate.spark import get_session

    work = args.keep or Path(tempfile.mkdtemp(prefix="version-view-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        t = time.monotonic()
        spark = get_session(args.master)
        print(
            f"version_view_bench: spark {spark.version} on {spark.sparkContext.master}, "
            f"started in {time.monotonic() - t:.1f} s (not counted)",
            flush=True,
        )
        today, today_at = prepare(spark, work, "today", nights, cases, 1, args.jobs, args.reuse)
        every, every_at = prepare(
            spark, work, "all releases", nights, cases, RELEASES_PER_NIGHT, args.jobs, args.reuse
        )
        # Turns alternate, so that the JVM's warm-up and the machine's load
        # fall on both; each dataset's figure is its fastest turn.
        for _ in range(args.turns):
            time_view(spark, today_at, today)
            time_view(spark, every_at, every)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    result = {
        "when": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end",
        "command": "bench/version_view_bench.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "today": today,
        "all_releases": every,
        "ratio": round(every["view_s"] / max(today["view_s"], 1e-9), 2),
    }
    text = report_text(result)
    print(text, end="", flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.doc:
        write_doc(args.doc, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

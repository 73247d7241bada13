"""``conformance ingest`` and ``conformance matrix``.

    conformance ingest reports/runs                      # every run under reports/runs
    conformance ingest RUN_DIR... --dataset reports/dataset
    conformance compact [--dataset reports/dataset]      # one file per partition, same rows
    conformance matrix                                   # all runs -> reports/matrix/
    conformance matrix --since 2026-11-01 --last-runs 7 --out reports/matrix
    conformance matrix --master spark://127.0.0.1:7077   # on a standalone cluster
    conformance versions-view --out reports/versions    # every rule across the releases

``register(subparsers)`` adds them to the ``conformance`` command line.
PySpark is imported only when one of them runs, so the harness works
without it. Exit status: 0 done, 2 a usage problem (no runs found, no
dataset, bad date), 3 Spark could not run (pyspark or Java missing, job
failed).
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Callable

from ..argtypes import positive_int
from .spark import DRIVER_MEMORY, JIT_CHOICES, JobSize, input_bytes

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_SPARK = 3


def _date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from exc


def _dataset_and_out(parser: argparse.ArgumentParser, out: str) -> None:
    """The dataset a command reads and the folder it writes."""
    parser.add_argument(
        "--dataset", default="reports/dataset", help="dataset directory (default reports/dataset)"
    )
    parser.add_argument("--out", default=out, help=f"output directory (default {out})")


def _spark_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--master",
        default=None,
        help="Spark master: local[*] (default) or spark://HOST:PORT of a standalone cluster "
        "(scripts/spark-standalone.sh start prints one)",
    )
    parser.add_argument(
        "--driver-memory",
        default=DRIVER_MEMORY,
        help=f"Spark driver heap (default {DRIVER_MEMORY}: with the JVM's own memory, the "
        "driver process stays within 1.6 GiB)",
    )
    parser.add_argument(
        "--jit",
        choices=JIT_CHOICES,
        default="auto",
        help="the JVMs' compiler: quick (C1 only: less CPU for small jobs), full (C1 then the "
        "optimising C2), auto (default: quick for a job reading under 128 MiB of results or "
        "16 MiB of the dataset)",
    )


def register(subparsers: Any) -> None:
    """Add the ``ingest``, ``compact`` and ``matrix`` subcommands."""
    ingest = subparsers.add_parser(
        "ingest",
        help="load runs' results.jsonl into the Parquet dataset (PySpark)",
        description="Load the results.jsonl of runs (finished or not) into a Parquet dataset partitioned "
        "by month and protocol. Runs already ingested are recognised by the results file's "
        "size and mtime and not read again; a run whose file grew replaces its rows; new rows "
        "are added as new files (see `conformance compact`). Malformed lines are counted and "
        "reported, never fatal.",
    )
    ingest.add_argument(
        "run_dirs",
        nargs="+",
        metavar="RUN_DIR",
        help="a run directory, or a directory of them such as reports/runs",
    )
    ingest.add_argument(
        "--dataset", default="reports/dataset", help="dataset directory (default reports/dataset)"
    )
    _spark_args(ingest)
    ingest.set_defaults(func=cmd_ingest)

    compact = subparsers.add_parser(
        "compact",
        help="rewrite the dataset's small files into one file per partition (same rows)",
        description="Each ingest adds its rows as new files in the month/protocol partitions it touches. "
        "Compaction rewrites every partition holding --min-files files or more into one file "
        "(sorted by run), as a new version with the same rows; readers are never disturbed.",
    )
    compact.add_argument(
        "--dataset", default="reports/dataset", help="dataset directory (default reports/dataset)"
    )
    compact.add_argument(
        "--min-files",
        type=positive_int,
        default=2,
        metavar="N",
        help="compact partitions holding at least N files (default 2)",
    )
    _spark_args(compact)
    compact.set_defaults(func=cmd_compact)

    matrix = subparsers.add_parser(
        "matrix",
        help="compatibility matrices (CSV, JSON, HTML) from the dataset",
        description="Compute requirement, certification, interop, flaky and trend matrices over a window "
        "of ingested runs; write NAME.csv and NAME.json per matrix and index.html.",
    )
    _dataset_and_out(matrix, "reports/matrix")
    matrix.add_argument(
        "--since", type=_date, default=None, help="first run date, YYYY-MM-DD (inclusive)"
    )
    matrix.add_argument(
        "--until", type=_date, default=None, help="last run date, YYYY-MM-DD (inclusive)"
    )
    matrix.add_argument(
        "--last-runs",
        type=positive_int,
        default=None,
        metavar="N",
        help="only the N most recent runs of each implementation (within --since/--until); "
        "picked from the runs table, then only their months are read",
    )
    _spark_args(matrix)
    matrix.set_defaults(func=cmd_matrix)

    view = subparsers.add_parser(
        "versions-view",
        help="every rule across each implementation's releases (JSON, HTML) from the dataset",
        description="Per implementation and rule, over its releases in version order (PEP 440 for "
        "PyPI packages, semver for npm ones; docs/versions-view.md): the latest verdict per "
        "release, the first release that fails the rule and the first later one that passes it "
        "again, every release where the verdict changed, and the changes between a release's "
        "last two nights. Writes versions.json, regressions.json and index.html.",
    )
    _dataset_and_out(view, "reports/versions")
    view.add_argument(
        "--implementation", default=None, help="only this implementation (default: every one)"
    )
    _spark_args(view)
    view.set_defaults(func=cmd_versions_view)


def _error(message: str) -> None:
    print(f"conformance: error: {message}", file=sys.stderr)


def _session(args: argparse.Namespace, job: JobSize | None) -> Any:
    """The job's SparkSession; ``job``: what it reads at most (None:
    unknown), which picks the JIT under ``--jit auto``."""
    from .spark import get_session, quick_jit

    started = time.monotonic()
    quick = quick_jit(args.jit, job)
    spark = get_session(args.master, args.driver_memory, quick=quick)
    read = "" if job is None else f", {job} to read"
    print(
        f"spark {spark.version} on {spark.sparkContext.master} "
        f"(driver memory {args.driver_memory}, {'quick' if quick else 'full'} JIT{read}): "
        f"started in {time.monotonic() - started:.1f} s",
        flush=True,
    )
    return spark


def _progress(line: str) -> None:
    print(line, flush=True)


def _spark_job(failed: str, job: Callable[[], Any]) -> tuple[int, Any]:
    """(exit status, what ``job`` returned): an IngestError (no runs, no
    dataset) is a usage problem, SparkUnavailable or a failed Spark job
    exit 3; each printed as one error line, a failed job as ``failed`` and
    the first line of the exception."""
    from .errors import IngestError
    from .spark import SparkUnavailable

    try:
        return EXIT_OK, job()
    except IngestError as exc:
        _error(str(exc))
        return EXIT_USAGE, None
    except SparkUnavailable as exc:
        _error(str(exc))
        return EXIT_SPARK, None
    except Exception as exc:  # a failed Spark job: keep the first line, not the JVM trace
        _error(
            f"{failed}: {type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:500]}"
        )
        return EXIT_SPARK, None


def cmd_ingest(args: argparse.Namespace) -> int:
    from .ingest import ingest
    from .runs import find_runs

    def job() -> dict[str, Any]:
        find_runs(args.run_dirs)  # fail on bad paths before paying for a JVM
        # The JVM starts only if the manifest shows something to read or write.
        return ingest(
            lambda job: _session(args, job),
            args.run_dirs,
            args.dataset,
            progress=_progress,
        )

    code, report = _spark_job("ingest failed, the dataset is unchanged", job)
    if code != EXIT_OK:
        return code
    if report["malformed_lines"]:
        print(
            f"note: {report['malformed_lines']} malformed line(s) skipped "
            f"({report['torn_last_lines']} run(s) end with a torn line); see the ingest report",
            flush=True,
        )
    return EXIT_OK


def cmd_compact(args: argparse.Namespace) -> int:
    from .compaction import compact
    from .versions import require_dataset

    def job() -> None:
        version = require_dataset(args.dataset)  # before starting a JVM
        spark = _session(args, JobSize(dataset_bytes=input_bytes(version)))
        compact(spark, args.dataset, progress=_progress, min_files=args.min_files)

    code, _ = _spark_job("compaction failed, the dataset is unchanged", job)
    return code


def cmd_matrix(args: argparse.Namespace) -> int:
    from .matrix import Window, run
    from .versions import require_dataset

    if args.since and args.until and args.since > args.until:
        _error(f"--since {args.since} is after --until {args.until}")
        return EXIT_USAGE
    window = Window(args.since, args.until, args.last_runs)

    def job() -> dict[str, Any]:
        version = require_dataset(args.dataset)  # before starting a JVM
        spark = _session(args, JobSize(dataset_bytes=input_bytes(version)))
        meta = {"generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
        return run(spark, args.dataset, args.out, window, progress=_progress, meta=meta)

    code, report = _spark_job("matrix failed", job)
    if code != EXIT_OK:
        return code
    return _wrote(Path(args.out), report["files"])


def _wrote(out: Path, files: list[str], more: str = "") -> int:
    """The closing lines of a command that wrote pages: which, and the one to open."""
    print(
        f"wrote {len(files)} file(s) to {out}: " + ", ".join(Path(p).name for p in files) + more,
        flush=True,
    )
    print(f"open {out / 'index.html'}", flush=True)
    return EXIT_OK


def cmd_versions_view(args: argparse.Namespace) -> int:
    from .version_view import run
    from .versions import require_dataset

    def job() -> dict[str, Any]:
        version = require_dataset(args.dataset)  # before starting a JVM
        spark = _session(args, JobSize(dataset_bytes=input_bytes(version)))
        return run(spark, args.dataset, args.out, args.implementation, _progress)

    code, report = _spark_job("versions-view failed", job)
    if code != EXIT_OK:
        return code
    return _wrote(Path(args.out), report["files"], f"; {report['changes']} verdict change(s)")

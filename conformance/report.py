"""``conformance report RUN_DIR``: the Allure HTML report of a run.

    conformance report reports/runs/RUN_ID
    conformance report RUN_DIR --out /srv/www/latest --history-from OTHER_RUN_DIR

Builds ``RUN_DIR/allure-report/`` (or ``--out``) from ``RUN_DIR/allure-results``
with the Allure command line (npm package ``allure-commandline``, installed by
``scripts/install-report-deps.sh`` into ``interop/report``; it runs on Java).

History: Allure draws its trend charts and each case's earlier outcomes from a
``history/`` folder that the previous report wrote.  Before generating, the
``history/`` of the previous report is copied into ``allure-results/history``:
by default that of the newest *earlier* run of the same series beside
RUN_DIR (same parent folder) that has an ``allure-report/history``;
``--history-from`` names another run or report folder, ``--no-history``
starts afresh.  A series is the targets a run certified and the impairment
profile it ran under (:func:`run_series`): a STOMP run beside a BTP run, or
a run of one target beside the nightly's run of all, never lends it its
trend.  So building each night's report in turn, each report carries the
trend of the nights before it, and only theirs.

Also written into ``allure-results``: ``executor.json`` (the run id as the
build name, numbered after the previous report) and
``environment.properties`` (harness version, run id, and per target its
implementation, version and protocol; never addresses or credentials).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

from . import __version__
from .allure_presentation import link_root_causes, present_results
from .core.results import partial_scope, read_results, summarize
from .core.run_folder import ALLURE_REPORT_DIR, RunFolder

REPO_ROOT = Path(__file__).resolve().parents[1]
INSTALL_SCRIPT = "scripts/install-report-deps.sh"
BUNDLED_ALLURE = REPO_ROOT / "interop" / "report" / "node_modules" / ".bin" / "allure"
ALLURE_ENV = "CONFORMANCE_ALLURE"
"""Environment variable naming the ``allure`` executable to use instead."""
HISTORY_DIR = "history"

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_HARNESS_ERROR = 3


class ReportError(Exception):
    def __init__(self, message: str, code: int = EXIT_HARNESS_ERROR) -> None:
        super().__init__(message)
        self.code = code


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "report",
        help="build the Allure HTML report of a run, with history from earlier runs",
        description="Build the Allure HTML report of a run from RUN_DIR/allure-results, carrying "
        "the history (trends, earlier outcomes of each case) of the previous report over. "
        f"Needs the Allure command line: run {INSTALL_SCRIPT} once.",
    )
    parser.add_argument(
        "run_dir", metavar="RUN_DIR", help="a run directory written by `conformance certify`"
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        default=None,
        help=f"where to write the report (default RUN_DIR/{ALLURE_REPORT_DIR}); it is replaced",
    )
    history = parser.add_mutually_exclusive_group()
    history.add_argument(
        "--history-from",
        metavar="DIR",
        default=None,
        help="take history from this report (DIR/history) or run (DIR/allure-report/history); "
        "default: the newest earlier run beside RUN_DIR that has a report",
    )
    history.add_argument("--no-history", action="store_true", help="start the history afresh")
    parser.set_defaults(func=cmd_report)
    return parser


def cmd_report(args: argparse.Namespace) -> int:
    try:
        return build_report(
            Path(args.run_dir),
            Path(args.out) if args.out else None,
            Path(args.history_from) if args.history_from else None,
            no_history=args.no_history,
        )
    except ReportError as exc:
        print(f"conformance report: error: {exc}", file=sys.stderr)
        return exc.code


def find_allure() -> Path:
    """The ``allure`` executable: $CONFORMANCE_ALLURE, the one installed in
    interop/report, or one on PATH.  Java must be there too."""
    override = os.environ.get(ALLURE_ENV)
    if override:
        path = Path(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ReportError(
                f"{ALLURE_ENV}={override} is not an executable file; unset it to use the "
                f"Allure command line that {INSTALL_SCRIPT} installs"
            )
    elif BUNDLED_ALLURE.is_file() and os.access(BUNDLED_ALLURE, os.X_OK):
        path = BUNDLED_ALLURE
    elif shutil.which("allure"):
        path = Path(shutil.which("allure"))
    else:
        raise ReportError(
            f"the Allure command line is not installed (looked for {BUNDLED_ALLURE} and "
            f"`allure` on PATH): run {INSTALL_SCRIPT} (from the repository root) to install it"
        )
    java_home = os.environ.get("JAVA_HOME")
    if not shutil.which("java") and not (java_home and (Path(java_home) / "bin" / "java").exists()):
        raise ReportError(
            "Allure needs Java, and there is no `java` on PATH nor JAVA_HOME "
            "(on Debian: apt-get install default-jre-headless)"
        )
    return path


def run_time(run_dir: Path) -> float:
    """When a run ended, as a POSIX timestamp: summary.json's `finished`, or
    for an unfinished run the time of its last result, or file times."""
    try:
        finished = json.loads((RunFolder(run_dir).summary).read_text(encoding="utf-8")).get(
            "finished"
        )
        if finished:
            return datetime.fromisoformat(finished.replace("Z", "+00:00")).timestamp()
    except (OSError, ValueError, AttributeError):
        pass
    times = [r.get("time") for r in read_results(RunFolder(run_dir).results) if r.get("time")]
    for value in reversed(times):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            continue
    for candidate in (RunFolder(run_dir).results, RunFolder(run_dir).allure_results, run_dir):
        if candidate.exists():
            return candidate.stat().st_mtime
    return 0.0


def run_series(run_dir: Path) -> tuple[tuple[str, ...], str | None]:
    """What makes runs one series, whose reports share a trend: the targets
    certified (sorted) and the impairment profile (None: clean loopback).
    From summary.json, or for a run that did not finish, its results.jsonl."""
    try:
        summary = json.loads(RunFolder(run_dir).summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        summary = None
    if isinstance(summary, dict):
        targets = summary.get("targets_requested") or [
            entry.get("target") for entry in summary.get("targets") or [] if isinstance(entry, dict)
        ]
        # "fragment seed=123": the profile is the series, the seed may change nightly.
        impairment = summary.get("impairment")
        profile = str(impairment).rpartition(" seed=")[0] or str(impairment) if impairment else None
        return tuple(sorted({str(t) for t in targets if t})), profile
    records = read_results(RunFolder(run_dir).results)
    return tuple(sorted({str(r["target"]) for r in records if r.get("target")})), None


def previous_history(run_dir: Path) -> Path | None:
    """``allure-report/history`` of the newest run of the same series
    (:func:`run_series`) beside run_dir that ended before it; runs without a
    report are passed over."""
    this = run_time(run_dir)
    series = run_series(run_dir)
    best: tuple[float, Path] | None = None
    try:
        siblings = list(run_dir.parent.iterdir())
    except OSError:
        return None
    for other in siblings:
        history = RunFolder(other).allure_report / HISTORY_DIR
        if other == run_dir or not other.is_dir() or not (history / "history.json").is_file():
            continue
        when = run_time(other)
        if when < this and (best is None or when > best[0]) and run_series(other) == series:
            best = (when, history)
    return best[1] if best else None


def history_source(given: Path) -> Path:
    given = given.resolve()
    for candidate in (given / HISTORY_DIR, RunFolder(given).allure_report / HISTORY_DIR, given):
        if (candidate / "history.json").is_file() or (candidate / "history-trend.json").is_file():
            return candidate
    raise ReportError(
        f"--history-from {given}: no Allure history there (looked for history/, "
        f"{ALLURE_REPORT_DIR}/history/ and the folder itself)",
        EXIT_USAGE,
    )


def previous_build_order(history: Path | None) -> int:
    """The build number of the newest entry in a history trend, or 0."""
    if history is None:
        return 0
    try:
        trend = json.loads((history / "history-trend.json").read_text(encoding="utf-8"))
        orders = [int(e["buildOrder"]) for e in trend if isinstance(e, dict) and "buildOrder" in e]
        return max(orders) if orders else len(trend)
    except (OSError, ValueError, TypeError, KeyError):
        return 0


def run_facts(run_dir: Path) -> dict:
    """Run id, completeness and targets, from summary.json or, for a run that
    did not finish, from its results.jsonl."""
    try:
        summary = json.loads((RunFolder(run_dir).summary).read_text(encoding="utf-8"))
        complete = True
    except (OSError, ValueError):
        records = list(read_results(RunFolder(run_dir).results))
        summary = summarize(records)
        summary["run_id"] = records[0]["run_id"] if records else run_dir.name
        summary["harness_version"] = records[0].get("harness_version") if records else None
        complete = False
    return {
        "summary": summary,
        "complete": complete,
        "run_id": summary.get("run_id") or run_dir.name,
    }


def target_verdict(group: dict) -> str:
    """A target's verdict in the CLI's words, with its scope."""
    verdict = group.get("verdict") or (
        "CONFORMANT" if group.get("conformant") else "NOT CONFORMANT"
    )
    return verdict + partial_scope(group)


def report_title(facts: dict) -> str:
    """The report's name, the first thing its overview shows: each target's
    verdict (the CLI's word; the scope of a partial run said once), the
    failing targets first, then the run id."""
    groups = [g for g in facts["summary"].get("targets", []) if g.get("target")]
    verdicts = sorted(
        (
            (
                g.get("verdict") or ("CONFORMANT" if g.get("conformant") else "NOT CONFORMANT"),
                g["target"],
            )
            for g in groups
        ),
        key=lambda pair: (pair[0] == "CONFORMANT", pair[1]),
    )
    shown = "; ".join(f"{target} {verdict}" for verdict, target in verdicts[:6])
    if len(verdicts) > 6:
        shown += f"; and {len(verdicts) - 6} more targets"
    partial = " (partial run)" if any(g.get("partial") for g in groups) else ""
    return f"{shown or 'no target'}{partial} (run {facts['run_id']})"


def _property_value(value: object) -> str:
    text = str(value)
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def _property_key(value: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in value)


def write_environment(results: Path, facts: dict) -> None:
    summary = facts["summary"]
    props = {
        "harness.version": summary.get("harness_version") or __version__,
        "report.built.by": f"conformance {__version__}",
        "run.id": facts["run_id"],
        "run.complete": "yes"
        if facts["complete"]
        else "no (the run did not finish; results so far)",
    }
    if summary.get("finished"):
        props["run.finished"] = summary["finished"]
    if "conformant" in summary:
        props["run.conformant"] = "yes" if summary["conformant"] else "no"
    if summary.get("preflight_error"):
        props["run.preflight.error"] = summary["preflight_error"]
    verdicts: dict[str, str] = {}
    for group in summary.get("targets", []):
        key = _property_key(group["target"])
        must = group.get("levels", {}).get("MUST", {})
        counts = ", ".join(
            f"{must.get(o, 0)} {o}" for o in ("failed", "error", "blocked") if must.get(o)
        )
        verdicts[f"target.{key}"] = (
            target_verdict(group)
            + (f" (MUST: {counts})" if counts else "")
            + f": {group['implementation']} {group['implementation_version']} ({group['protocol']})"
        )
        causes = [c["case_id"] for c in group.get("root_causes", []) if c.get("case_id")]
        if causes:
            verdicts[f"target.{key}.root_causes"] = ", ".join(
                f"{c['case_id']} (blocked {len(c['blocked'])})" if c["blocked"] else c["case_id"]
                for c in group["root_causes"]
                if c.get("case_id")
            )
    # The verdicts first: the overview's Environment widget shows its first
    # entries and hides the rest behind "Show all".
    lines = [f"{key}={_property_value(value)}" for key, value in {**verdicts, **props}.items()]
    (results / "environment.properties").write_text("\n".join(lines) + "\n", encoding="utf-8")


CATEGORIES = [
    {
        "name": "Blocked by a prerequisite (see the root cause it names)",
        "matchedStatuses": ["unknown", "skipped"],
        "messageRegex": "(?s)(Skipped: )?blocked by .*",
    },
    {
        "name": "Not applicable to the target",
        "matchedStatuses": ["skipped"],
        "messageRegex": "(?s)(Skipped: )?not applicable: .*",
    },
    {
        "name": "Run deadline exceeded (case not run)",
        "matchedStatuses": ["broken"],
        "messageRegex": "(?s).*run deadline of .* exceeded.*",
    },
    {
        "name": "Interrupted (SIGTERM or Ctrl-C stopped the run during the case: no verdict)",
        "matchedStatuses": ["broken"],
        "messageRegex": "(?s).*interrupted: no verdict.*",
    },
    {"name": "Requirement failed (the target broke the rule)", "matchedStatuses": ["failed"]},
    {"name": "No verdict (error)", "matchedStatuses": ["broken"]},
]
"""Allure's categories: a blocked case is Allure's 'unknown' in the report
(allure_presentation) and 'skipped' in the raw results, as a not applicable
one is; these tell them apart on the report's Categories tab. The first
category whose status and message match a case takes it."""


def write_categories(results: Path) -> None:
    (results / "categories.json").write_text(
        json.dumps(CATEGORIES, indent=2) + "\n", encoding="utf-8"
    )


def write_executor(results: Path, facts: dict, build_order: int) -> None:
    executor = {
        "name": f"conformance {__version__}",
        "type": "conformance-harness",
        "buildOrder": build_order,
        "buildName": f"run {facts['run_id']}",
        "reportName": f"Conformance run {facts['run_id']}",
    }
    (results / "executor.json").write_text(json.dumps(executor, indent=2) + "\n", encoding="utf-8")


def check_out_dir(out: Path, run_dir: Path) -> None:
    """`allure generate --clean` deletes --out first: refuse anything that is
    not an earlier Allure report or an empty or new folder."""
    if (
        out in (run_dir, RunFolder(run_dir).allure_results)
        or out in run_dir.parents
        or (RunFolder(run_dir).allure_results) in out.parents
    ):
        raise ReportError(
            f"--out {out} would overwrite the run's own files; choose another folder", EXIT_USAGE
        )
    if out.exists():
        if not out.is_dir():
            raise ReportError(f"--out {out} exists and is not a folder", EXIT_USAGE)
        if any(out.iterdir()) and not ((out / "index.html").is_file() and (out / "data").is_dir()):
            raise ReportError(
                f"--out {out} is a non-empty folder that is not an Allure report; "
                "it would be deleted, so it is left alone: choose another folder",
                EXIT_USAGE,
            )


def build_report(
    run_dir: Path,
    out: Path | None = None,
    history_from: Path | None = None,
    no_history: bool = False,
) -> int:
    run_dir = run_dir.resolve()
    results = RunFolder(run_dir).allure_results
    if not run_dir.is_dir():
        raise ReportError(
            f"{run_dir} is not a folder (give a run directory written by `conformance certify`)",
            EXIT_USAGE,
        )
    if not results.is_dir() or not any(results.glob("*-result.json")):
        raise ReportError(
            f"{results} holds no Allure results (*-result.json): is {run_dir} a run "
            "directory written by `conformance certify`, and did any case run?",
            EXIT_USAGE,
        )
    out = (out or RunFolder(run_dir).allure_report).resolve()
    check_out_dir(out, run_dir)
    if no_history:
        source = None
    elif history_from is not None:
        source = history_source(history_from)
    else:
        source = previous_history(run_dir)
    allure = find_allure()

    target_history = results / HISTORY_DIR
    staged = None
    if source is not None:
        # Copy via a staging folder: source may be inside `out`, which
        # `--clean` deletes, or even be target_history itself.
        staged = results / ".history-incoming"
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(source, staged)
    shutil.rmtree(target_history, ignore_errors=True)
    if staged is not None:
        staged.replace(target_history)

    facts = run_facts(run_dir)
    build_order = previous_build_order(target_history if source is not None else None) + 1
    write_environment(results, facts)
    write_executor(results, facts, build_order)
    write_categories(results)

    with tempfile.TemporaryDirectory(prefix="conformance-report-") as scratch:
        # The report reads a presented copy; the run's results stay as written.
        presented = Path(scratch) / "allure-results"
        shutil.copytree(results, presented)
        present_results(presented)
        argv = [
            str(allure),
            "generate",
            "--clean",
            "--name",
            report_title(facts),
            "-o",
            str(out),
            str(presented),
        ]
        try:
            completed = subprocess.run(
                argv, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired as exc:
            raise ReportError(f"`allure generate` did not finish in {exc.timeout:.0f} s") from exc
        except OSError as exc:
            raise ReportError(f"cannot run {allure}: {exc} (run {INSTALL_SCRIPT})") from exc
    if completed.returncode != 0 or not (out / "index.html").is_file():
        output = (completed.stdout + completed.stderr).strip()
        raise ReportError(
            f"`allure generate` failed (exit {completed.returncode}):\n{output}\n"
            f"(if Allure or Java is broken, rerun {INSTALL_SCRIPT} --force)"
        )

    link_root_causes(out)
    trend = []
    try:
        trend = json.loads((out / HISTORY_DIR / "history-trend.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    print(f"report: {out}")
    print(
        f"  run {facts['run_id']}"
        + ("" if facts["complete"] else " (incomplete: the run did not finish)")
        + f", build #{build_order}"
    )
    if source is not None:
        targets, profile = run_series(run_dir)
        print(
            f"  history: from {source} ({len(trend)} runs in the trend; series: "
            f"{', '.join(targets) or 'no target'}{', impaired: ' + profile if profile else ''})"
        )
    else:
        print(
            "  history: none carried over ("
            + (
                "--no-history"
                if no_history
                else "no earlier run of the same targets with a report beside this one"
            )
            + ")"
        )
    print("open it with:")
    print(f"  {allure} open {out}")
    print(
        f"  or any static web server, e.g.: python3 -m http.server --bind 127.0.0.1 --directory {out} 8000"
        "  then http://127.0.0.1:8000/"
    )
    print("  (opening index.html as a file:// page shows no data: browsers block its loads)")
    return EXIT_OK

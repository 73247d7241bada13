"""``certify``: every chosen target's suite, up to ``jobs`` targets at once,
then the run's summary.json and its exit status. The lines it prints while
the sessions run go through the Console it is given."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..core.results import (
    NOT_STARTED,
    mark_partial,
    partial_scope,
    read_results,
    summarize,
    write_summary,
)
from ..core.run_folder import RunFolder
from ..core.targets import Target
from ..jobs import (
    SUMMARY_SECONDS_KEY,
    ChildOutput,
    Console,
    Session,
    exclusive_resources,
    last_durations,
    longest_first,
    run_sessions,
)
from .impairment import impairment_extra
from .options import (
    EXIT_CONFORMANT,
    EXIT_NOT_CONFORMANT,
    EXIT_NOT_STARTED,
    EXIT_USAGE,
    RunOptions,
)
from .plan import case_ids, nothing_selected, suite_case_counts
from .session import (
    exit_code_line,
    outcome_counts,
    preflight_error,
    run_deadline_line,
    run_suite,
)


@dataclass
class CertifyRun:
    """What a certify run came to; its console output is the caller's."""

    exit_code: int
    codes: dict[str, int]
    """pytest's exit code of each target's session."""
    summary: dict | None = None
    """summary.json as written (None when a preflight stopped the run)."""
    preflight_failures: list[tuple[str, str]] = field(default_factory=list)
    """(target, error) of each target its preflight stopped: the run stopped."""
    not_run: list[str] = field(default_factory=list)
    """Targets not started because a preflight stopped the run."""
    unselected: list[str] = field(default_factory=list)
    """Usage errors: a target whose suite the selection left no case of."""
    missing: list[str] = field(default_factory=list)
    """Targets whose session recorded no case result."""


def certify_jobs(
    chosen: list[Target], run_dir: Path, run_id: str, options: RunOptions, console: Console
) -> tuple[dict[str, int], list[tuple[str, str]], dict[str, float]]:
    """Every target of ``certify``: up to ``options.jobs`` at once, each its
    own pytest session (conformance/jobs.py). Under --jobs N it prints a line
    when a target starts and one when it ends (verdict, counts, seconds),
    and progress lines come prefixed with the target's name; one at a time,
    a heading per target and the progress lines as they are. A preflight
    error stops new targets from starting; the running ones finish. Returns
    the exit codes, the preflight errors (target, error) and each session's
    seconds. Under --jobs N the longest targets start first (their time in
    the last run under the same runs dir, else their case count)."""
    serial = options.jobs <= 1
    if not serial:
        chosen = longest_first(
            chosen, last_durations(run_dir.parent, [t.name for t in chosen]), suite_case_counts()
        )
    seconds_of: dict[str, float] = {}
    output = ChildOutput(console, prefixed=not serial)
    by_name = {t.name: t for t in chosen}
    failures: list[tuple[str, str]] = []

    def started(session: Session) -> None:
        target = by_name[session.label]
        about = f"{target.implementation} {target.version}, {target.protocol}, roles {', '.join(target.roles)}"
        console.line(
            f"\n== {target.name}: {about}" if serial else f"== start {target.name}: {about}"
        )

    def ended(session: Session, code: int, seconds: float) -> bool:
        target = by_name[session.label]
        seconds_of[target.name] = round(seconds, 3)
        error = preflight_error(run_dir, target)
        if error:
            failures.append((target.name, error))
            if not serial:
                console.line(
                    f"== end {target.name}: stopped by its preflight after {seconds:.1f} s "
                    "(no further target is started; running ones finish)"
                )
            return False
        if not serial:
            mine = [
                r
                for r in read_results(RunFolder(run_dir).results)
                if r["target"] == target.name and r.get("peer_implementation") is None
            ]
            summary = summarize(mine)
            mark_partial(
                summary, mine, options.selection, {target.protocol: case_ids(target.protocol)}
            )
            verdict = summary["verdict"] + "".join(
                partial_scope(group) for group in summary["targets"]
            )
            console.line(
                f"== end {target.name}: {verdict}, {len(mine)} case(s): {outcome_counts(mine)}; "
                f"{seconds:.1f} s"
            )
        notes = [
            run_deadline_line(run_dir, target, code, options.run_timeout),
            exit_code_line(run_dir, target, code),
        ]
        console.error(*(note for note in notes if note))
        return True

    sessions = [
        Session(
            t.name,
            functools.partial(run_suite, t, run_dir, run_id, options, output=output),
            frozenset(exclusive_resources(t)),
        )
        for t in chosen
    ]
    codes = run_sessions(sessions, options.jobs, output, started, ended)
    return codes, failures, seconds_of


def certify(
    chosen: list[Target], run_dir: Path, run_id: str, options: RunOptions, console: Console
) -> CertifyRun:
    """Certify ``chosen`` into ``run_dir``: the sessions, then summary.json
    (also when a preflight stopped the run: it then has preflight_error).
    The exit status: EXIT_USAGE for a stopping preflight or a selection that
    left a target no case, else the verdict's."""
    started = time.monotonic()
    codes, failures, seconds_of = certify_jobs(chosen, run_dir, run_id, options, console)
    folder = RunFolder(run_dir)
    folder.results.touch()
    if failures:
        return stop_for_preflight(run_dir, run_id, started, chosen, codes, failures)
    extra = {
        "targets_requested": [t.name for t in chosen],
        "pytest_exit_codes": codes,
        SUMMARY_SECONDS_KEY: seconds_of,
        **impairment_extra(options.impairment),
    }
    if options.run_timeout is not None:
        extra["run_timeout_s"] = options.run_timeout
    summary = write_summary(
        run_dir,
        run_id,
        started,
        extra,
        options.selection,
        {t.protocol: case_ids(t.protocol) for t in chosen},
    )
    # A target whose session recorded nothing cannot be conformant.
    recorded = {g["target"] for g in summary["targets"]}
    missing = [t.name for t in chosen if t.name not in recorded]
    unselected = [
        error
        for t in chosen
        if t.name in missing
        for error in [nothing_selected(options, t, codes.get(t.name, 0), [])]
        if error
    ]
    if unselected:
        code = EXIT_USAGE
    elif missing or summary["verdict"] not in ("CONFORMANT", NOT_STARTED):
        code = EXIT_NOT_CONFORMANT
    elif summary["verdict"] == NOT_STARTED:
        code = EXIT_NOT_STARTED
    else:
        code = EXIT_CONFORMANT
    return CertifyRun(code, codes, summary, unselected=unselected, missing=missing)


def stop_for_preflight(
    run_dir: Path,
    run_id: str,
    started: float,
    chosen: list[Target],
    codes: dict[str, int],
    failures: list[tuple[str, str]],
) -> CertifyRun:
    """A misconfigured or unreachable target: no per-case records of it, and
    the run stops (exit 2, as for a usage error) with its summary.json
    naming the error. Under --jobs the targets already running were let
    finish (their records count in summary.json); the rest were not started."""
    not_run = [t.name for t in chosen if t.name not in codes]
    first_target, first_error = failures[0]
    extra = {
        "targets_requested": [t.name for t in chosen],
        "pytest_exit_codes": codes,
        "preflight_error": first_error,
        "preflight_target": first_target,
        "targets_not_run": not_run,
    }
    if len(failures) > 1:
        extra["preflight_errors"] = dict(failures)
    write_summary(run_dir, run_id, started, extra)
    return CertifyRun(EXIT_USAGE, codes, preflight_failures=failures, not_run=not_run)

"""``conformance``: certify nodes, list targets.

    conformance certify                       # the built-in reference nodes
    conformance certify --target ssb-server   # a predefined or your own target
    conformance certify --targets-file my.toml --target my-node
    conformance certify --jobs 2              # two targets at once (docs/jobs.md)
    conformance targets                       # what can be certified

A run writes into ``reports/runs/<run-id>/``: ``results.jsonl`` (one line per
case, written as each case ends), ``summary.json``, ``allure-results/``,
``junit-<target>.xml``, ``traces/`` (wire traces as hex dumps) and ``logs/``
(output of the nodes the harness started). The exit status of ``certify``:
0 every certified target passed every applicable MUST case; 1 one did not
(a MUST case failed for its own rule, errored or was blocked); 2 a usage
error, or a preflight stopped the run (a target misconfigured or
unreachable); 3 a harness error; 4 no target is proven not conformant, but
one did not start (its process or container exited before it was ready or
before its client connected, was not ready in time, or an adapter failed
printing nothing): "NOT CERTIFIED: the target did not start".
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import __version__
from .core.run_folder import RunFolder, session_label
from .core.results import (
    BLOCKED,
    CONSOLE_WIDTH,
    ERROR,
    FAILED,
    NOT_APPLICABLE,
    NOT_STARTED,
    OUTCOMES,
    PASSED,
    ResultRecord,
    ResultWriter,
    console_text,
    mark_partial,
    new_run_id,
    partial_scope,
    read_results,
    summarize,
    utc_now,
    write_summary,
)
from .core.selection import hint, no_match_message, select, suggest, unmatched
from .core.targets import KNOWN_PROTOCOLS, Target, TargetError, load_targets
from .jobs import (
    KILLED_SESSIONS,
    SUMMARY_SECONDS_KEY,
    ChildOutput,
    Console,
    Session,
    exclusive_resources,
    last_durations,
    longest_first,
    run_sessions,
)

SUITES_DIR = Path(__file__).resolve().parent / "suites"
INTEROP_DIR = Path(__file__).resolve().parent / "interop"
EXIT_CONFORMANT = 0
EXIT_NOT_CONFORMANT = 1
EXIT_USAGE = 2
EXIT_HARNESS_ERROR = 3
EXIT_NOT_STARTED = 4
"""certify: a target did not start (results.NOT_STARTED) and none is NOT
CONFORMANT; the run says nothing about the rules."""
RUN_TIMEOUT_GRACE = 10.0
"""Seconds (plus twice the read deadline) a pytest session may outlive
--run-timeout, time for the running case to reach its read deadline and the
nodes to stop, before the CLI kills it."""
KILLED_AFTER_RUN_TIMEOUT = -9


def available_protocols() -> list[str]:
    return sorted(
        p.name
        for p in SUITES_DIR.iterdir()
        if p.is_dir() and p.name in KNOWN_PROTOCOLS and any(p.glob("test_*.py"))
    )


def choose_targets(
    targets: dict[str, Target], names: list[str], protocols: list[str]
) -> list[Target]:
    suites = available_protocols()
    for protocol in protocols:
        if protocol not in KNOWN_PROTOCOLS:
            raise TargetError(f"unknown protocol {protocol!r}; known: {', '.join(KNOWN_PROTOCOLS)}")
        if protocol not in suites:
            raise TargetError(
                f"no suite for protocol {protocol!r} yet; suites: {', '.join(suites)}"
            )
    if names:
        chosen = []
        for name in names:
            if name not in targets:
                raise TargetError(
                    f"unknown target {name!r}; known: {', '.join(sorted(targets))} "
                    "(define your own with --targets-file)"
                )
            target = targets[name]
            if protocols and target.protocol not in protocols:
                raise TargetError(
                    f"target {name} speaks {target.protocol}, not {', '.join(protocols)}"
                )
            if target.protocol not in suites:
                raise TargetError(f"target {name}: no suite for protocol {target.protocol} yet")
            chosen.append(target)
        return chosen
    wanted = protocols or suites
    chosen = [targets[f"reference-{p}"] for p in wanted if f"reference-{p}" in targets]
    if not chosen:
        raise TargetError(f"no built-in reference target for {', '.join(wanted)}")
    return chosen


def run_suite(
    target: Target,
    run_dir: Path,
    run_id: str,
    args: argparse.Namespace,
    suite_dir: Path | None = None,
    peer: Target | None = None,
    output: ChildOutput | None = None,
) -> int:
    """One pytest session per target, in a child process so that each run
    starts clean; its output goes to a log, progress lines to our stderr
    (through ``output``, prefixed with the session's name, under --jobs)."""
    suite = suite_dir or SUITES_DIR / target.protocol
    argv = [
        sys.executable,
        "-m",
        "pytest",
        str(suite),
        "-p",
        "pytest_asyncio.plugin",
        "-p",
        "allure_pytest.plugin",
        "-p",
        "conformance.plugin",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "-o",
        "console_output_style=classic",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(suite.parent),
        "-c",
        os.devnull,
        "--target",
        target.name,
        "--run-dir",
        str(run_dir),
        "--run-id",
        run_id,
        "--deadline",
        str(args.deadline),
        "--progress",
        "-q",
        "--tb=short",
        "--alluredir",
        str(RunFolder(run_dir).allure_results),
        # Per session: interop --all runs one client against several servers.
        "--junitxml",
        str(RunFolder(run_dir).junit(target.name, peer.name if peer else None)),
        # Every target's file holds the same test names: its suite says whose.
        "-o",
        f"junit_suite_name={target.name}{'+' + peer.name if peer else ''}",
    ]
    run_timeout = getattr(args, "run_timeout", None)
    if run_timeout is not None:
        argv += ["--run-timeout", str(run_timeout)]
    case_jobs = getattr(args, "case_jobs", 1)
    if case_jobs > 1:
        # pytest-xdist workers; the plugin groups the cases that must stay
        # serial (prerequisites, shared state: docs/concurrency.md).
        argv += ["-p", "xdist.plugin", "-n", str(case_jobs), "--dist", "loadgroup"]
    for file in args.targets_file:
        argv += ["--targets-file", str(Path(file).resolve())]
    if peer is not None:
        argv += ["--peer", peer.name]
    for pattern in getattr(args, "case", None) or []:
        argv += ["--case", pattern]
    impairment = getattr(args, "impairment", None)
    if impairment is not None:
        argv += ["--impair", impairment.profile.text(), "--impair-seed", str(impairment.seed)]
    if args.keyword:
        argv += ["-k", args.keyword]
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    log = RunFolder(run_dir).pytest_log(target.name, peer.name if peer else None)

    # A reused --run-dir: only this session's preflight may stop the run.
    RunFolder(run_dir).preflight(target.name, peer.name if peer else None).unlink(missing_ok=True)
    with open(log, "wb") as out:
        try:
            if output is None:
                process = subprocess.Popen(argv, stdout=out, stderr=None, env=env)
            else:
                process = output.popen(
                    session_label(target.name, peer.name if peer else None),
                    argv,
                    stdout=out,
                    env=env,
                )
            if run_timeout is None:
                return process.wait()
            try:
                return process.wait(run_timeout + RUN_TIMEOUT_GRACE + 2 * args.deadline)
            except subprocess.TimeoutExpired:
                # Backstop: the session outlived its run deadline (a case
                # stuck outside any read deadline, a node that will not
                # start). Its finished cases are in results.jsonl already;
                # the rest are recorded from its plan.
                process.terminate()
                try:
                    process.wait(5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                record_unfinished(
                    run_dir,
                    run_id,
                    target,
                    peer,
                    f"run deadline of {run_timeout:g} s exceeded (--run-timeout): the harness "
                    f"stopped the session {RUN_TIMEOUT_GRACE + 2 * args.deadline:g} s after it; "
                    "case not finished",
                    impairment=impairment.describe() if impairment is not None else None,
                )
                return KILLED_AFTER_RUN_TIMEOUT
        except KeyboardInterrupt:
            # The session stops its nodes and removes its work dirs on
            # SIGTERM; one that takes too long is killed (the next run
            # removes what it left: docs/targets.md, "Work dirs").
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                KILLED_SESSIONS.append(target.name)
            raise


def record_unfinished(
    run_dir: Path,
    run_id: str,
    target: Target,
    peer: Target | None,
    message: str,
    impairment: str | None = None,
) -> int:
    """Record as ``error`` every case of a killed session's plan that has no
    result line yet; returns how many."""

    plan_file = RunFolder(run_dir).plan(target.name, peer.name if peer else None)
    try:
        planned = [
            json.loads(line)
            for line in plan_file.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
    except (OSError, ValueError):
        return 0  # killed before it collected: nothing is known to be missing
    peer_impl = peer.implementation if peer else None
    done: dict[str, int] = {}
    for rec in read_results(RunFolder(run_dir).results):
        if rec.get("target") == target.name and rec.get("peer_implementation") == peer_impl:
            done[rec["case_id"]] = done.get(rec["case_id"], 0) + 1
    writer = ResultWriter(run_dir)
    missing = 0
    for case in planned:
        if done.get(case["case_id"], 0) > 0:
            done[case["case_id"]] -= 1
            continue
        writer.append(
            ResultRecord(
                run_id=run_id,
                time=utc_now(),
                harness_version=__version__,
                target=target.name,
                implementation=target.implementation,
                implementation_version=target.version,
                protocol=case["protocol"],
                role=case["role"],
                case_id=case["case_id"],
                level=case["level"],
                citation=case["citation"],
                outcome=ERROR,
                duration_s=0.0,
                message=message,
                peer_implementation=peer_impl,
                depends=case.get("depends", []),
                errata=case.get("errata", []),
                impairment=impairment,
            )
        )
        missing += 1
    return missing


def preflight_error(run_dir: Path, target: Target, peer: Target | None = None) -> str | None:
    """The error with which the session's preflight stopped it, if it did."""

    path = RunFolder(run_dir).preflight(target.name, peer.name if peer else None)
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["error"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def report_run_deadline(
    run_dir: Path, target: Target, code: int, run_timeout: float | None, peer: Target | None = None
) -> None:
    if run_timeout is None:
        return
    # The session's own records: one client runs against several servers.
    peer_impl = peer.implementation if peer else None
    hit = [
        r
        for r in read_results(RunFolder(run_dir).results)
        if r["target"] == target.name
        and r.get("peer_implementation") == peer_impl
        and r["outcome"] == ERROR
        and "run deadline of" in (r.get("message") or "")
    ]
    if hit or code == KILLED_AFTER_RUN_TIMEOUT:
        how = (
            " (the session outlived it and was stopped)" if code == KILLED_AFTER_RUN_TIMEOUT else ""
        )
        print(
            f"   run deadline of {run_timeout:g} s exceeded for {target.name}{how}: "
            f"{len(hit)} case(s) not run, recorded as error",
            file=sys.stderr,
            flush=True,
        )


def print_summary(summary: dict, run_dir: Path, records_file: Path | None = None) -> None:
    """Root causes first (the cases that failed or errored for their own rule,
    each with the cases it blocked), then the counts, then the verdicts."""
    print()
    for group in summary["targets"]:
        if group.get("start_failures"):
            # Once per target: every such case met the same start failure.
            print(
                f"{group['target']}: the target did not start ({len(group['start_failures'])} case(s) could "
                "not run, recorded as error):"
            )
            for line in (group.get("start_failure") or "").splitlines()[:40]:
                print(f"  {line}")
            print()
    # The cases that met a start failure are listed above, not one by one.
    causes = [
        (group, cause)
        for group in summary["targets"]
        for cause in group.get("root_causes", [])
        if not cause.get("start_failure") or cause["blocked"]
    ]
    if causes:
        # The whole messages, for what the node did (the summary keeps a shortened one).
        messages = {
            (rec["target"], rec["case_id"]): rec.get("message") or ""
            for rec in read_results(records_file or RunFolder(run_dir).results)
        }
        print(
            "root causes (failed or errored for their own rule; the cases they blocked did not run):"
        )
        for group, cause in causes:
            print(
                f"  {cause['outcome'] or '?':<6} {cause['level'] or '?':<6} {group['target']}: "
                f"{cause['case_id'] or '(unknown case)'}"
            )
            full = messages.get((group["target"], cause["case_id"]))
            text = (
                console_text(full, cause["case_id"])
                if full
                else (cause.get("message") or "")[:CONSOLE_WIDTH]
            )
            if text:
                print(f"         {text}")
            if cause["blocked"]:
                print(
                    f"         {len(cause['blocked'])} case(s) blocked by it: {', '.join(cause['blocked'])}"
                )
            if cause.get("trace_file"):
                print(f"         trace: {run_dir / cause['trace_file']}")
        print()
    print(
        f"{'target':<22} {'protocol':<9} {'level':<7} {'passed':>6} {'failed':>6} {'error':>6} "
        f"{'blocked':>7} {'n/a':>5}"
    )
    for group in summary["targets"]:
        for level in ("MUST", "SHOULD", "MAY"):
            counts = group["levels"][level]
            if not any(counts.values()):
                continue
            print(
                f"{group['target']:<22} {group['protocol']:<9} {level:<7} {counts['passed']:>6} "
                f"{counts['failed']:>6} {counts['error']:>6} {counts.get('blocked', 0):>7} "
                f"{counts['not_applicable']:>5}"
            )
    print()
    for group in summary["targets"]:
        verdict = group.get("verdict") or (
            "CONFORMANT" if group["conformant"] else "NOT CONFORMANT"
        )
        failed = group["failed_must"]
        blocked = group.get("blocked_must", [])
        if group["conformant"]:
            extra = ""
        elif verdict == NOT_STARTED:
            extra = (
                f" ({len(group['start_failures'])} case(s) could not run"
                + (f", {len(blocked)} MUST case(s) blocked by them" if blocked else "")
                + "; the start failure is shown above)"
            )
        elif failed or blocked:
            parts = [f"{len(failed)} MUST case(s) failed or errored"] if failed else []
            if blocked:
                parts.append(f"{len(blocked)} MUST case(s) blocked by them")
            if group.get("start_failures"):
                parts.append(
                    f"{len(group['start_failures'])} case(s) could not run: the target did not start"
                )
            extra = f" ({', '.join(parts)}; root causes listed above)"
        else:
            extra = " (no applicable MUST case passed)"
        print(
            f"{group['target']} [{group['implementation']} {group['implementation_version']}, "
            f"{group['protocol']}]: {verdict}{partial_scope(group)}{extra}"
        )
    if summary.get("partial"):
        print(
            "partial run: the verdict holds for the selected cases only, and counts as no certification "
            "(matrices, interop's cross-check)"
        )
    print(
        f"\nresults: {run_dir}  (summary.json, results.jsonl, allure-results/, junit-*.xml, traces/)"
    )


def report_exit_code(run_dir: Path, target: Target, code: int) -> None:
    if code not in (0, 1, KILLED_AFTER_RUN_TIMEOUT):
        print(
            f"   pytest exited with code {code} (5: no case ran); "
            f"see {RunFolder(run_dir).pytest_log(target.name)}",
            file=sys.stderr,
        )


def stop_for_preflight(
    run_dir: Path,
    run_id: str,
    started: float,
    chosen: list[Target],
    codes: dict[str, int],
    failures: list[tuple[str, str]],
) -> int:
    """A misconfigured or unreachable target: one clear error (per such
    target), no per-case records of it, and the run stops (exit 2, as for a
    usage error). Under --jobs the targets already running were let finish
    (their records count in summary.json); the rest were not started."""
    (RunFolder(run_dir).results).touch()
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
    for _, error in failures:
        print(f"conformance: error: preflight: {error}", file=sys.stderr)
    if not_run:
        print(f"conformance: not run: {', '.join(not_run)}", file=sys.stderr)
    print(f"results: {run_dir} (summary.json has preflight_error)", file=sys.stderr)
    return EXIT_USAGE


def outcome_counts(records: list[dict]) -> str:
    counts = {outcome: 0 for outcome in OUTCOMES}
    for rec in records:
        counts[rec["outcome"]] += 1
    return (
        f"passed {counts[PASSED]}, failed {counts[FAILED]}, error {counts[ERROR]}, "
        f"blocked {counts[BLOCKED]}, n/a {counts[NOT_APPLICABLE]}"
    )


def suite_case_counts() -> dict[str, int]:
    """How many cases each protocol's suite declares: the estimate of a
    target's length when no run timed it."""
    from .mutation import suite_case_ids  # mutation imports this module for run_suite

    return {protocol: len(suite_case_ids(protocol)) for protocol in KNOWN_PROTOCOLS}


def certify_jobs(
    chosen: list[Target], run_dir: Path, run_id: str, args: argparse.Namespace
) -> tuple[dict[str, int], list[tuple[str, str]], dict[str, float]]:
    """Every target of ``certify``: up to ``args.jobs`` at once, each its own
    pytest session (conformance/jobs.py). Under --jobs N it prints a line
    when a target starts and one when it ends (verdict, counts, seconds),
    and progress lines come prefixed with the target's name; one at a time,
    a heading per target and the progress lines as they are. A preflight
    error stops new targets from starting; the running ones finish. Returns
    the exit codes, the preflight errors (target, error) and each session's
    seconds. Under --jobs N the longest targets start first (their time in
    the last run under the same runs dir, else their case count)."""
    serial = args.jobs <= 1
    if not serial:
        chosen = longest_first(
            chosen, last_durations(run_dir.parent, [t.name for t in chosen]), suite_case_counts()
        )
    seconds_of: dict[str, float] = {}
    console = Console()
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
                summary, mine, selection_of(args), {target.protocol: case_ids(target.protocol)}
            )
            verdict = summary["verdict"] + "".join(
                partial_scope(group) for group in summary["targets"]
            )
            console.line(
                f"== end {target.name}: {verdict}, {len(mine)} case(s): {outcome_counts(mine)}; "
                f"{seconds:.1f} s"
            )
        with console.lock:
            report_run_deadline(run_dir, target, code, args.run_timeout)
            report_exit_code(run_dir, target, code)
        return True

    sessions = [
        Session(
            t.name,
            functools.partial(run_suite, t, run_dir, run_id, args, output=output),
            frozenset(exclusive_resources(t)),
        )
        for t in chosen
    ]
    codes = run_sessions(sessions, args.jobs, output, started, ended)
    return codes, failures, seconds_of


def case_ids(protocol: str, interop: bool = False) -> list[str]:
    """Every case id of a protocol's suite (interop: its interop cases)."""
    from .mutation import suite_case_ids  # mutation imports this module for run_suite

    return suite_case_ids(protocol, INTEROP_DIR if interop else SUITES_DIR)


def narrow_to_cases(
    chosen: list[Target], patterns: list[str], explicit: bool, interop: bool = False
) -> list[Target]:
    """The targets whose suite has a case ``--case`` selects. Every pattern
    must match some case of the chosen targets' suites, and a target named
    with --target must get at least one case (TargetError, a usage error,
    otherwise); the default targets without a selected case are left out."""
    ids = {t.protocol: case_ids(t.protocol, interop) for t in chosen}
    protocols = sorted(ids)
    kind = "interop " if interop else ""
    every = [case for cases in ids.values() for case in cases]
    missing = unmatched(patterns, every)
    if missing:
        text, near = no_match_message(missing, every)
        raise TargetError(
            f"{text} of the {kind}suite of {', '.join(protocols)}"
            + (f"; {near}" if near else "")
            + f" ({hint(protocols, interop)})"
        )
    keep = [t for t in chosen if select(ids[t.protocol], patterns)]
    left_out = [t for t in chosen if t not in keep]
    if explicit and left_out:
        raise TargetError(
            f"--case {' '.join(patterns)} selects no case of the {kind}suite of "
            + ", ".join(f"{t.name} ({t.protocol})" for t in left_out)
            + f" ({hint({t.protocol for t in left_out}, interop)})"
        )
    return keep


def selection_of(args: argparse.Namespace) -> dict | None:
    """The run's selection, for summary.json, or None for a whole run."""
    selection = {}
    if getattr(args, "case", None):
        selection["case"] = list(args.case)
    if getattr(args, "keyword", None):
        selection["keyword"] = args.keyword
    return selection or None


def nothing_selected(
    args: argparse.Namespace, target: Target, code: int, records: list[dict], interop: bool = False
) -> str | None:
    """The usage error for a session that ran no case because the selection
    left none (pytest's exit 5), or None."""
    if code != 5 or records or not selection_of(args):
        return None
    ids = case_ids(target.protocol, interop)
    example = next(
        iter(suggest(args.keyword or "", ids) + ids), f"{target.protocol}.COMPONENT.ROLE.RULE"
    )
    what = " ".join(
        ([f"-k {args.keyword!r}"] if args.keyword else [])
        + [f"--case {p}" for p in args.case or []]
    )
    why = (
        f": -k matches pytest function names (test_...), not case ids; to select by case id use --case, "
        f"e.g. --case '{example}'"
        if args.keyword
        else ""
    )
    return (
        f"{what} selected no case of {target.name}'s suite ({target.protocol}){why} "
        f"({hint([target.protocol], interop)})"
    )


def resolve_impairment(args: argparse.Namespace, chosen: list[Target]) -> None:
    """``--impair PROFILE [--impair-seed N]``: the run's impairment into
    ``args.impairment`` (the seed drawn when not given), refused (TargetError,
    a usage error) when it would break an answer time of a chosen target's
    protocol or of the harness (core/impair.py, docs/impairment.md)."""
    from .core import impair

    args.impairment = None
    text = getattr(args, "impair", None)
    if not text:
        if getattr(args, "impair_seed", None) is not None:
            raise TargetError("--impair-seed goes with --impair")
        return
    try:
        profile = impair.parse_profile(text)
    except impair.ImpairmentError as exc:
        raise TargetError(str(exc)) from None
    for target in chosen:
        refused = impair.refusal(profile, target.protocol, args.deadline, target.params)
        if refused:
            raise TargetError(
                f'{refused} (target {target.name}; docs/impairment.md, "Refused profiles")'
            )
    seed = args.impair_seed if args.impair_seed is not None else impair.new_seed()
    args.impairment = impair.Impairment(profile, seed)


def impairment_extra(args: argparse.Namespace) -> dict:
    """summary.json's ``impairment`` (``fragment seed=123``), or null on clean loopback."""
    impairment = getattr(args, "impairment", None)
    return {"impairment": impairment.describe() if impairment is not None else None}


def impairment_line(args: argparse.Namespace) -> str | None:
    impairment = getattr(args, "impairment", None)
    if impairment is None:
        return None
    return (
        f"impairment: {impairment.describe()}: every connection with a target goes through the relay "
        f"(replay: --impair {impairment.profile.text()} --impair-seed {impairment.seed})"
    )


def cmd_certify(args: argparse.Namespace) -> int:
    try:
        targets = load_targets(args.targets_file)
        chosen = choose_targets(targets, args.target, args.protocol)
        if args.case:
            chosen = narrow_to_cases(chosen, args.case, explicit=bool(args.target))
        resolve_impairment(args, chosen)
    except TargetError as exc:
        print(f"conformance: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    run_id = new_run_id()
    run_dir = Path(args.run_dir or Path(args.reports_dir) / "runs" / run_id).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    args.run_dir_made = run_dir  # for the lines an interrupt prints
    started = time.monotonic()
    print(
        f"conformance {__version__}: run {run_id}, certifying "
        f"{', '.join(t.name + ' (' + t.protocol + ')' for t in chosen)}",
        flush=True,
    )
    if impairment_line(args):
        print(impairment_line(args), flush=True)
    codes, failures, seconds_of = certify_jobs(chosen, run_dir, run_id, args)
    if failures:
        return stop_for_preflight(run_dir, run_id, started, chosen, codes, failures)
    records_file = RunFolder(run_dir).results
    records_file.touch()
    extra = {
        "targets_requested": [t.name for t in chosen],
        "pytest_exit_codes": codes,
        SUMMARY_SECONDS_KEY: seconds_of,
        **impairment_extra(args),
    }
    if args.run_timeout is not None:
        extra["run_timeout_s"] = args.run_timeout
    summary = write_summary(
        run_dir,
        run_id,
        started,
        extra,
        selection_of(args),
        {t.protocol: case_ids(t.protocol) for t in chosen},
    )
    # A target whose session recorded nothing cannot be conformant.
    recorded = {g["target"] for g in summary["targets"]}
    missing = [t.name for t in chosen if t.name not in recorded]
    unselected = [
        error
        for t in chosen
        if t.name in missing
        for error in [nothing_selected(args, t, codes.get(t.name, 0), [])]
        if error
    ]
    if unselected:
        for error in unselected:
            print(f"conformance: error: {error}", file=sys.stderr)
        print(f"results: {run_dir}", file=sys.stderr)
        return EXIT_USAGE
    print_summary(summary, run_dir, records_file)
    for name in missing:
        print(
            f"{name}: NOT CONFORMANT (no case result recorded; see {RunFolder(run_dir).pytest_log(name)})"
        )
    print(f"wall time {summary['duration_s']:.1f} s")
    if missing or summary["verdict"] not in ("CONFORMANT", NOT_STARTED):
        return EXIT_NOT_CONFORMANT
    if summary["verdict"] == NOT_STARTED:
        return EXIT_NOT_STARTED
    return EXIT_CONFORMANT


def cmd_interop(args: argparse.Namespace) -> int:
    """Each client target against each server target, through a recording relay."""
    from .interop.pairs import Pair

    if args.all:
        if args.client or args.server:
            print(
                "conformance: error: --all runs every pair; leave out --client and --server",
                file=sys.stderr,
            )
            return EXIT_USAGE
        return cmd_interop_all(args)
    if not args.client or not args.server:
        print("conformance: error: give --client and --server (or --all)", file=sys.stderr)
        return EXIT_USAGE
    if args.protocol or args.jobs > 1:
        print(
            f"conformance: error: {'--protocol' if args.protocol else '--jobs'} goes with --all",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        targets = load_targets(args.targets_file)
        clients = [targets[n] for n in args.client]
        servers = [targets[n] for n in args.server]
    except KeyError as exc:
        print(f"conformance: error: unknown target {exc}", file=sys.stderr)
        return EXIT_USAGE
    except TargetError as exc:
        print(f"conformance: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    pairs = [(c, s) for c in clients for s in servers if c.protocol == s.protocol]
    problems = [
        f"{c.name} has no launch.client command" for c in clients if not c.can_launch("client")
    ]
    problems += [
        f"{s.name} does not play the server role" for s in servers if "server" not in s.roles
    ]
    if problems or not pairs:
        print(
            "conformance: error: "
            + ("; ".join(problems) or "no client/server pair speaks the same protocol"),
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        resolve_impairment(args, clients + servers)
    except TargetError as exc:
        print(f"conformance: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.case:
        try:
            narrow_to_cases([c for c, _ in pairs], args.case, explicit=True, interop=True)
        except TargetError as exc:
            print(f"conformance: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
    run_id = new_run_id()
    run_dir = Path(args.run_dir or Path(args.reports_dir) / "runs" / run_id).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    args.run_dir_made = run_dir  # for the lines an interrupt prints
    started = time.monotonic()
    to_run = [Pair(client.name, server.name, client.protocol) for client, server in pairs]
    if impairment_line(args):
        print(impairment_line(args), flush=True)
    codes = interop_jobs(to_run, targets, run_dir, run_id, args, stop_at_preflight=True)
    stopped = next((pair for pair in to_run if pair.error), None)
    if stopped is not None:
        (RunFolder(run_dir).results).touch()
        write_summary(
            run_dir,
            run_id,
            started,
            {
                "kind": "interop",
                "pytest_exit_codes": codes,
                "preflight_error": stopped.error,
                "preflight_target": f"{stopped.client}->{stopped.server}",
            },
        )
        print(f"conformance: error: preflight: {stopped.error}", file=sys.stderr)
        print(f"results: {run_dir} (summary.json has preflight_error)", file=sys.stderr)
        return EXIT_USAGE
    (RunFolder(run_dir).results).touch()
    extra = {"kind": "interop", "pytest_exit_codes": codes, **impairment_extra(args)}
    if args.run_timeout is not None:
        extra["run_timeout_s"] = args.run_timeout
    summary = write_summary(
        run_dir,
        run_id,
        started,
        extra,
        selection_of(args),
        {pair.protocol: case_ids(pair.protocol, True) for pair in to_run},
    )
    records = [
        json.loads(line)
        for line in (RunFolder(run_dir).results).read_text().splitlines()
        if line.strip()
    ]
    print()
    ok = bool(records)
    for rec in records:
        print(
            f"  {rec['outcome']:<7} {rec['implementation']} (client) -> {rec.get('peer_implementation')} "
            f"(server): {rec['case_id']}"
        )
        if rec["outcome"] != PASSED and rec.get("message"):
            print(f"          {console_text(rec['message'], rec['case_id'])}")
        ok = ok and rec["outcome"] == "passed"
    from .interop.crosscheck import cross_check

    gaps = cross_check(run_dir, to_run, targets, args.certified_in)
    if gaps:
        print("\n" + gaps)
    partial = [pair for pair in to_run if pair.partial]
    if partial:
        print(
            f"\npartial run (--case): {', '.join(f'{p.client} -> {p.server}' for p in partial)} ran only the "
            "selected interop cases"
        )
    print(f"\nresults: {run_dir}\nwall time {summary['duration_s']:.1f} s")
    return EXIT_CONFORMANT if ok else EXIT_NOT_CONFORMANT


def pair_records(results: Path, client: Target, server: Target) -> list[dict]:
    """The records of every session of this client against this server's
    implementation: (target, peer_implementation) is what tells an interop
    session's records apart (the key Spark ingest uses too). Sessions with
    one key never run at once (interop_jobs), so the records added while
    one runs are its own."""
    return [
        r
        for r in read_results(results)
        if r["target"] == client.name and r.get("peer_implementation") == server.implementation
    ]


def interop_jobs(
    to_run: list,
    targets: dict[str, Target],
    run_dir: Path,
    run_id: str,
    args: argparse.Namespace,
    stop_at_preflight: bool = False,
) -> dict[str, int]:
    """Every interop pair of a run (``interop --client/--server`` and
    ``interop --all [--jobs N]``): up to ``args.jobs`` pairs at once
    (conformance/jobs.py). Under --jobs N there is a start and an end line
    per pair and progress lines are prefixed with client+server; one at a
    time, a heading per pair and the progress lines as they are. A pair
    stopped by its preflight is "not run" (``pair.error``) and the others go
    on, or, with ``stop_at_preflight``, none is started after it. Fills each
    pair's counts; returns exit codes."""
    from .interop.pairs import tally

    serial = args.jobs <= 1
    console = Console()
    output = ChildOutput(console, prefixed=not serial)
    results = RunFolder(run_dir).results
    by_label: dict[str, tuple] = {}
    before: dict[str, int] = {}
    sessions = []
    for pair in to_run:
        client, server = targets[pair.client], targets[pair.server]
        label = f"{client.name}+{server.name}"
        by_label[label] = (pair, client, server)
        resources = exclusive_resources(client, server) | {
            ("interop", client.name, server.implementation)
        }
        sessions.append(
            Session(
                label,
                functools.partial(
                    run_suite,
                    client,
                    run_dir,
                    run_id,
                    args,
                    INTEROP_DIR / client.protocol,
                    server,
                    output=output,
                ),
                frozenset(resources),
            )
        )

    def started(session: Session) -> None:
        pair, client, server = by_label[session.label]
        before[session.label] = len(pair_records(results, client, server))
        if serial:
            console.line(
                f"\n== {client.name} (client) -> {server.name} (server), {client.protocol}"
            )
        else:
            console.line(
                f"== start {session.label}: {client.name} (client) -> {server.name} (server), "
                f"{client.protocol}"
            )

    def ended(session: Session, code: int, seconds: float) -> bool:
        pair, client, server = by_label[session.label]
        mine = pair_records(results, client, server)[before[session.label] :]
        tally(pair, mine)
        pair.partial = bool(selection_of(args)) and not (
            set(case_ids(pair.protocol, interop=True)) <= {r["case_id"] for r in mine}
        )
        pair.error = preflight_error(run_dir, client, server)
        if not serial:
            how = (
                f"not run: preflight: {pair.error.splitlines()[0]}"
                if pair.error
                else f"{pair.verdict}, {len(mine)} case(s): {outcome_counts(mine)}"
            )
            console.line(f"== end {session.label}: {how}; {seconds:.1f} s")
        if pair.error and stop_at_preflight:
            return False  # the caller says why the run stopped
        if pair.error and serial:
            console.line(f"   not run: preflight: {pair.error}", sys.stderr)
        with console.lock:
            report_run_deadline(run_dir, client, code, args.run_timeout, server)
        return True

    codes = run_sessions(sessions, args.jobs, output, started, ended)
    return {
        f"{by_label[label][1].name}->{by_label[label][2].name}": code
        for label, code in codes.items()
    }


def cmd_interop_all(args: argparse.Namespace) -> int:
    """Every client-role target against every server-role target of the same
    protocol (conformance/interop/pairs.py), in one run dir with per-pair
    files, then the client x server table (also interop-summary.json)."""
    from .interop.pairs import interop_protocols, plan_pairs, table, write_summary as write_pairs

    try:
        targets = load_targets(args.targets_file)
    except TargetError as exc:
        print(f"conformance: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    have = interop_protocols()
    unknown = [p for p in args.protocol if p not in have]
    if unknown:
        print(
            f"conformance: error: no interop cases for {', '.join(unknown)}; protocols with interop cases: "
            f"{', '.join(have)}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    protocols = args.protocol or have
    if args.case:
        # Only the protocols with a selected interop case take part.
        ids = {p: case_ids(p, interop=True) for p in protocols}
        every = [case for cases in ids.values() for case in cases]
        missing = unmatched(args.case, every)
        if missing:
            text, near = no_match_message(missing, every)
            print(
                f"conformance: error: {text} of the interop suite of {', '.join(protocols)}"
                + (f"; {near}" if near else "")
                + f" ({hint(protocols, interop=True)})",
                file=sys.stderr,
            )
            return EXIT_USAGE
        protocols = [p for p in protocols if select(ids[p], args.case)]
    pairs = plan_pairs(targets, protocols)
    if not pairs:
        print("conformance: error: no client/server pair to run", file=sys.stderr)
        return EXIT_USAGE
    try:
        resolve_impairment(
            args, [targets[name] for pair in pairs for name in (pair.client, pair.server)]
        )
    except TargetError as exc:
        print(f"conformance: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    run_id = new_run_id()
    run_dir = Path(args.run_dir or Path(args.reports_dir) / "runs" / run_id).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    args.run_dir_made = run_dir  # for the lines an interrupt prints
    (RunFolder(run_dir).results).touch()
    started = time.monotonic()
    to_run = [p for p in pairs if not p.skipped]
    print(
        f"conformance {__version__}: run {run_id}, {len(to_run)} interop pair(s) of {len(pairs)}",
        flush=True,
    )
    if impairment_line(args):
        print(impairment_line(args), flush=True)
    for pair in pairs:
        if pair.skipped:
            print(
                f"\n== skipped {pair.client} (client) -> {pair.server} (server): {pair.skipped}",
                flush=True,
            )
    codes = interop_jobs(to_run, targets, run_dir, run_id, args)
    extra = {"kind": "interop", "pytest_exit_codes": codes, **impairment_extra(args)}
    if args.run_timeout is not None:
        extra["run_timeout_s"] = args.run_timeout
    summary = write_summary(
        run_dir,
        run_id,
        started,
        extra,
        selection_of(args),
        {p: case_ids(p, interop=True) for p in protocols},
    )
    path = write_pairs(run_dir, run_id, pairs, time.monotonic() - started)
    print("\n" + table(pairs))
    from .interop.crosscheck import cross_check

    gaps = cross_check(run_dir, to_run, targets, args.certified_in)
    if gaps:
        print("\n" + gaps)
    print(
        f"\nresults: {run_dir}  (results.jsonl, {path.name}, coverage-gaps.json, traces/<client>+<server>/)\n"
        f"wall time {summary['duration_s']:.1f} s"
    )
    ran = [p for p in pairs if not p.skipped]
    return (
        EXIT_CONFORMANT
        if ran and all(p.verdict == "interoperable" for p in ran)
        else EXIT_NOT_CONFORMANT
    )


def cmd_targets(args: argparse.Namespace) -> int:
    try:
        targets = load_targets(args.targets_file)
    except TargetError as exc:
        print(f"conformance: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps([t.describe() for t in targets.values()], indent=2))
        return 0
    for target in targets.values():
        d = target.describe()
        default = "  (default)" if target.name.startswith("reference-") else ""
        print(
            f"{target.name}{default}\n  {target.implementation} {target.version}, {target.protocol}, "
            f"roles: {', '.join(target.roles)}; capabilities: {', '.join(target.capabilities) or 'none'}\n"
            f"  address: {d['address']}; launched by the harness: {'yes' if d['launched_by_harness'] else 'no'}"
            + (f"\n  credentials: {', '.join(d['credentials'])}" if d["credentials"] else "")
            + (f"\n  {target.description}" if target.description else "")
            + f"\n  defined in: {d['source']}"
        )
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {text}")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def add_impair_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--impair",
        default=None,
        metavar="PROFILE",
        help="every connection between the harness and a target through a loopback relay that "
        "impairs the TCP byte stream, both ways: fragment, coalesce, delay, throttle, stall, "
        "with parameters as NAME:KEY=VALUE,... (e.g. delay:ms=200,jitter=50); a profile "
        "breaking an answer time is refused (docs/impairment.md)",
    )
    parser.add_argument(
        "--impair-seed",
        type=_seed,
        default=None,
        metavar="N",
        help="with --impair: the seed of its draws, to replay a run (default: drawn, printed and "
        "recorded)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="conformance", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"conformance {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    certify = sub.add_parser("certify", help="run the suites against targets and print the verdict")
    certify.add_argument(
        "--target",
        action="append",
        default=[],
        help="target to certify (repeatable); default: the built-in reference nodes",
    )
    certify.add_argument(
        "--protocol",
        action="append",
        default=[],
        choices=KNOWN_PROTOCOLS,
        help="only this protocol (repeatable)",
    )
    certify.add_argument(
        "--targets-file", action="append", default=[], help="TOML targets file (repeatable)"
    )
    certify.add_argument(
        "--reports-dir", default="reports", help="where runs are written (default: reports)"
    )
    certify.add_argument(
        "--run-dir", default=None, help="exact run directory (default REPORTS_DIR/runs/RUN_ID)"
    )
    certify.add_argument(
        "--deadline",
        type=float,
        default=3.0,
        help="seconds to wait for bytes a target must send (default 3)",
    )
    certify.add_argument(
        "--case",
        action="append",
        default=[],
        metavar="PATTERN",
        help="only the cases whose id matches: a case id or a shell-style glob, e.g. 'ssb.shs.*' "
        "(repeatable; `conformance cases --protocol P` lists the ids); their prerequisites "
        "run too. A partial run: the verdict says so and counts as no certification",
    )
    certify.add_argument(
        "-k",
        dest="keyword",
        default=None,
        help="only cases whose pytest test function matches this -k expression (function "
        "names, not case ids: see --case)",
    )
    certify.add_argument(
        "--run-timeout",
        type=_positive_seconds,
        default=None,
        metavar="SECONDS",
        help="deadline of each target's whole run: cases not started when it passes are "
        "recorded as error (default: none)",
    )
    certify.add_argument(
        "--case-jobs",
        type=_positive_int,
        default=1,
        metavar="N",
        help="run the cases of one target in N pytest-xdist workers; cases that share state "
        "or prerequisites stay serial, a launched target is started once per worker "
        "(default 1: one session, no xdist)",
    )
    certify.add_argument(
        "--jobs",
        type=_positive_int,
        default=1,
        metavar="N",
        help="certify up to N targets at once, each its own pytest session; progress lines "
        "are prefixed with the target (default 1: one after the other)",
    )
    add_impair_options(certify)
    certify.set_defaults(func=cmd_certify)

    interop = sub.add_parser(
        "interop", help="run implementations against each other (client x server)"
    )
    interop.add_argument(
        "--client", action="append", default=[], help="target playing the client (repeatable)"
    )
    interop.add_argument(
        "--server", action="append", default=[], help="target playing the server (repeatable)"
    )
    interop.add_argument(
        "--all",
        action="store_true",
        help="every client-role target against every server-role target of its protocol "
        "(pairs whose tools are not installed are skipped, with the reason)",
    )
    interop.add_argument(
        "--protocol",
        action="append",
        default=[],
        choices=KNOWN_PROTOCOLS,
        help="with --all: only this protocol (repeatable)",
    )
    interop.add_argument(
        "--targets-file", action="append", default=[], help="TOML targets file (repeatable)"
    )
    interop.add_argument(
        "--reports-dir", default="reports", help="where runs are written (default: reports)"
    )
    interop.add_argument("--run-dir", default=None, help="exact run directory")
    interop.add_argument(
        "--certified-in",
        action="append",
        default=[],
        metavar="DIR",
        help="run dirs (or a directory of them) holding the targets' certifications, for the "
        "cross-check: a failing pair of two CONFORMANT targets is a coverage gap, listed "
        "in coverage-gaps.json (repeatable; default: the run dirs beside this run's)",
    )
    interop.add_argument(
        "--deadline", type=float, default=3.0, help="read deadline in seconds (default 3)"
    )
    interop.add_argument(
        "--run-timeout",
        type=_positive_seconds,
        default=None,
        metavar="SECONDS",
        help="deadline of each client x server run (default: none)",
    )
    interop.add_argument(
        "--jobs",
        type=_positive_int,
        default=1,
        metavar="N",
        help="with --all: run up to N client x server pairs at once (default 1)",
    )
    interop.add_argument(
        "--case",
        action="append",
        default=[],
        metavar="PATTERN",
        help="only the interop cases whose id matches (a case id or a shell-style glob; "
        "repeatable; `conformance cases --interop` lists them); prerequisites run too",
    )
    add_impair_options(interop)
    interop.set_defaults(func=cmd_interop, keyword=None)

    targets = sub.add_parser("targets", help="list known targets")
    targets.add_argument(
        "--targets-file", action="append", default=[], help="TOML targets file (repeatable)"
    )
    targets.add_argument("--json", action="store_true", help="machine-readable output")
    targets.set_defaults(func=cmd_targets)
    from .cases import register as register_cases

    register_cases(sub)
    from .report import register as register_report

    register_report(sub)
    from .aggregate.cli import register as register_aggregate

    register_aggregate(sub)
    from .mutation import register as register_mutation

    register_mutation(sub)
    from .coverage.tool import register as register_coverage

    register_coverage(sub)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM (a CI job cancelled, ``kill``, a container stopped): stopped
    the way Ctrl-C stops a run, so every path that stops child sessions and
    keeps the results on Ctrl-C does the same here."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


def print_interrupted(args: argparse.Namespace, how: str) -> None:
    """Two lines: that the run was interrupted (and what became of its
    nodes), and what was kept where."""
    nodes = (
        "the nodes it started were stopped and their work dirs removed"
        if not KILLED_SESSIONS
        else f"{len(KILLED_SESSIONS)} session(s) did not stop in time and were killed: the next run removes "
        "their work dirs"
    )
    print(f"\nconformance: {how}: the run did not finish; {nodes}", file=sys.stderr)
    run_dir = getattr(args, "run_dir_made", None)
    if run_dir is None:
        print("conformance: no result was written", file=sys.stderr)
        return
    results = RunFolder(run_dir).results
    if results.is_file():
        kept = sum(1 for _ in read_results(results))
        print(
            f"conformance: {kept} finished case(s) kept in {run_dir} (results.jsonl, traces/, allure-results/; "
            "no summary.json: the verdict needs a whole run)",
            file=sys.stderr,
        )
    else:
        print(f"conformance: results so far kept in {run_dir}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    else:  # called from a thread (tests): signals are the main thread's
        previous = None
    try:
        return args.func(args)
    except Terminated:
        print_interrupted(args, "terminated (SIGTERM)")
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print_interrupted(args, "interrupted (Ctrl-C)")
        return 130
    except Exception:
        # A bug of the harness, not a verdict: exit 3, never 1 (NOT CONFORMANT).
        import traceback

        traceback.print_exc()
        print(
            f"conformance: harness error (exit {EXIT_HARNESS_ERROR}): the traceback above is a bug of the "
            "harness, not a verdict on any target; results written so far are kept",
            file=sys.stderr,
        )
        return EXIT_HARNESS_ERROR
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())

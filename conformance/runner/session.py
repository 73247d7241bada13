"""One pytest session: a suite against one target (or, for interop, a
client against a peer), in a child process, and what is read back from it
afterwards (its preflight, its unfinished cases, its run deadline)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .. import __version__
from ..core.results import (
    BLOCKED,
    ERROR,
    FAILED,
    NOT_APPLICABLE,
    OUTCOMES,
    PASSED,
    ResultRecord,
    ResultWriter,
    read_results,
    utc_now,
)
from ..core.run_folder import RunFolder, session_label
from ..core.targets import Target
from ..jobs import KILLED_SESSIONS, ChildOutput
from ..core.forkserver import start_session
from .options import SUITES_DIR, RunOptions

RUN_TIMEOUT_GRACE = 10.0
"""Seconds (plus twice the read deadline) a pytest session may outlive
--run-timeout, time for the running case to reach its read deadline and the
nodes to stop, before the runner kills it."""
KILLED_AFTER_RUN_TIMEOUT = -9


PYTEST_PLUGIN_ARGS = (
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
)
"""The plugins and options a suite's pytest runs with: the runner's, and the
harness tests' fake suites', so that both run a suite the same way."""


def run_suite(
    target: Target,
    run_dir: Path,
    run_id: str,
    options: RunOptions,
    suite_dir: Path | None = None,
    peer: Target | None = None,
    output: ChildOutput | None = None,
) -> int:
    """One pytest session per target, in a child process so that each run
    starts clean; its output goes to a log, progress lines to our stderr
    (through ``output``, prefixed with the session's name, under --jobs).
    Returns pytest's exit code (KILLED_AFTER_RUN_TIMEOUT when the runner
    had to stop it)."""
    suite = suite_dir or SUITES_DIR / target.protocol
    folder = RunFolder(run_dir)
    peer_name = peer.name if peer else None
    argv = [
        sys.executable,
        "-m",
        "pytest",
        str(suite),
        *PYTEST_PLUGIN_ARGS,
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
        str(options.deadline),
        "--progress",
        "-q",
        "--tb=short",
        "--alluredir",
        str(folder.allure_results),
        # Per session: interop --all runs one client against several servers.
        "--junitxml",
        str(folder.junit(target.name, peer_name)),
        # Every target's file holds the same test names: its suite says whose.
        "-o",
        f"junit_suite_name={target.name}{'+' + peer.name if peer else ''}",
    ]
    run_timeout = options.run_timeout
    if run_timeout is not None:
        argv += ["--run-timeout", str(run_timeout)]
    if options.case_jobs > 1:
        # pytest-xdist workers; the plugin groups the cases that must stay
        # serial (prerequisites, shared state: docs/concurrency.md).
        argv += ["-p", "xdist.plugin", "-n", str(options.case_jobs), "--dist", "loadgroup"]
    for file in options.targets_file:
        argv += ["--targets-file", str(Path(file).resolve())]
    if peer is not None:
        argv += ["--peer", peer.name]
    for pattern in options.case or []:
        argv += ["--case", pattern]
    impairment = options.impairment
    if impairment is not None:
        argv += ["--impair", impairment.profile.text(), "--impair-seed", str(impairment.seed)]
    if options.keyword:
        argv += ["-k", options.keyword]
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    log = folder.pytest_log(target.name, peer_name)

    # A reused --run-dir: only this session's preflight may stop the run.
    folder.preflight(target.name, peer_name).unlink(missing_ok=True)
    with open(log, "wb") as out:
        try:
            if output is None:
                process = start_session(argv, stdout=out, env=env)
            else:
                process = output.popen(
                    session_label(target.name, peer_name),
                    argv,
                    start=start_session,
                    stdout=out,
                    env=env,
                )
            if run_timeout is None:
                return process.wait()
            try:
                return process.wait(run_timeout + RUN_TIMEOUT_GRACE + 2 * options.deadline)
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
                    f"stopped the session {RUN_TIMEOUT_GRACE + 2 * options.deadline:g} s after it; "
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
                basis=case.get("basis", "keyword"),
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


def run_deadline_line(
    run_dir: Path, target: Target, code: int, run_timeout: float | None, peer: Target | None = None
) -> str | None:
    """What to say of a session that met its run deadline, or None."""
    if run_timeout is None:
        return None
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
    if not hit and code != KILLED_AFTER_RUN_TIMEOUT:
        return None
    how = " (the session outlived it and was stopped)" if code == KILLED_AFTER_RUN_TIMEOUT else ""
    return (
        f"   run deadline of {run_timeout:g} s exceeded for {target.name}{how}: "
        f"{len(hit)} case(s) not run, recorded as error"
    )


def exit_code_line(run_dir: Path, target: Target, code: int) -> str | None:
    """What to say of a session whose pytest exit code is not a verdict's, or None."""
    if code in (0, 1, KILLED_AFTER_RUN_TIMEOUT):
        return None
    return (
        f"   pytest exited with code {code} (5: no case ran); "
        f"see {RunFolder(run_dir).pytest_log(target.name)}"
    )


def outcome_counts(records: list[dict]) -> str:
    counts = {outcome: 0 for outcome in OUTCOMES}
    for rec in records:
        counts[rec["outcome"]] += 1
    return (
        f"passed {counts[PASSED]}, failed {counts[FAILED]}, error {counts[ERROR]}, "
        f"blocked {counts[BLOCKED]}, n/a {counts[NOT_APPLICABLE]}"
    )

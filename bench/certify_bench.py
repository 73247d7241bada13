#!/usr/bin/env python3
"""Certification at nightly scale: serial against ``--jobs N``, in one run.

Certifies every target ``conformance targets`` lists whose tools are
installed here (the reference nodes and the third-party ones; a target whose
tools are missing is skipped with the reason, as ``interop --all`` does),
first with ``conformance certify --jobs 1``, then with ``--jobs N`` for each
N of ``--jobs-list`` (default 2: this machine has 2 cores), each as a
subprocess into its own run directory. Prints a table: wall time per mode
and its speed-up over serial, and per target the seconds of its session in
each mode; writes the figures as JSON with ``--json``.

The same targets must get the same verdicts and the same case outcomes in
every mode (results.jsonl compared as sets of (target, case_id, outcome));
any difference is printed and the exit status is 1.

The machine may be shared: the load average (``os.getloadavg``) before and
after each mode is printed and kept in the JSON.

Usage: bench/certify_bench.py [--jobs-list 2,4] [--target NAME ...] [-k EXPR]
                              [--targets-file FILE ...] [--json FILE] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from conformance.core.results import read_results  # noqa: E402
from conformance.core.run_folder import RunFolder  # noqa: E402
from conformance.core.targets import Target, load_targets  # noqa: E402
from conformance.interop.pairs import missing_tools  # noqa: E402

CONFORMANCE = [sys.executable, "-m", "conformance.cli"]
MODE_DEADLINE = 3600.0
"""Seconds one certify run may take before the benchmark gives up on it."""
DOCKER_PROBE_SECONDS = 15.0
VERDICT = {True: "CONFORMANT", False: "NOT CONFORMANT", None: "no result"}


def docker_reachable() -> str | None:
    """Why container targets cannot run here, or None."""
    if shutil.which("docker") is None:
        return "docker is not installed"
    try:
        probe = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=DOCKER_PROBE_SECONDS,
        )
    except subprocess.TimeoutExpired:
        return f"docker info did not answer within {DOCKER_PROBE_SECONDS:g} s"
    return None if probe.returncode == 0 else "no Docker engine is reachable"


def why_skipped(target: Target, docker_problem: str | None) -> str | None:
    if getattr(target, "container", None) is not None:
        return docker_problem
    reasons = [
        f"{role}: {why}"
        for role in ("server", "client")
        if role in target.roles
        for why in [missing_tools(target, role)]
        if why
    ]
    return "; ".join(reasons) or None


def run_mode(
    jobs: int, names: list[str], run_dir: Path, keyword: str | None, targets_files: list[str]
) -> dict:
    """One ``conformance certify --jobs N`` run, its output streamed with
    timestamps so that each target's session time can be told in serial mode
    too (from its "== name:" header to the next)."""
    argv = CONFORMANCE + ["certify", "--jobs", str(jobs), "--run-dir", str(run_dir)]
    for name in names:
        argv += ["--target", name]
    if keyword:
        argv += ["-k", keyword]
    for file in targets_files:
        argv += ["--targets-file", file]
    load_before = os.getloadavg()
    started = time.monotonic()
    process = subprocess.Popen(
        argv, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    timer = threading.Timer(MODE_DEADLINE, process.kill)
    timer.start()
    lines: list[tuple[float, str]] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append((time.monotonic() - started, line.rstrip("\n")))
        code = process.wait()
    finally:
        timer.cancel()
    wall = time.monotonic() - started
    log = run_dir.parent / f"jobs-{jobs}.out"
    log.write_text("\n".join(text for _, text in lines) + "\n", encoding="utf-8")
    session_s: dict[str, float] = {}
    if jobs == 1:
        headers = [
            (at, m.group(1)) for at, text in lines for m in [re.match(r"== (\S+): ", text)] if m
        ]
        summary_at = next(
            (at for at, text in lines if text.startswith("target ") and "protocol" in text), wall
        )
        for (at, name), (next_at, _) in zip(headers, headers[1:] + [(summary_at, "")]):
            session_s[name] = round(next_at - at, 2)
    else:
        for _, text in lines:
            m = re.match(r"== end (\S+): .*; (\d+\.\d) s$", text) or re.match(
                r"== end (\S+): stopped by its preflight after (\d+\.\d) s", text
            )
            if m:
                session_s[m.group(1)] = float(m.group(2))
    try:
        summary = json.loads(RunFolder(run_dir).summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        summary = {}
    return {
        "jobs": jobs,
        "exit_code": code,
        "wall_s": round(wall, 2),
        "harness_wall_s": summary.get("duration_s"),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "verdicts": {g["target"]: g["conformant"] for g in summary.get("targets", [])},
        "preflight_error": summary.get("preflight_error"),
        "cases": summary.get("cases", 0),
        "session_s": session_s,
        "output": str(log),
        "outcomes": sorted(
            {
                (r["target"], r["case_id"], r["outcome"])
                for r in read_results(RunFolder(run_dir).results)
            }
        ),
    }


def compare(serial: dict, other: dict) -> list[str]:
    """Every difference, one line each: verdicts, then case outcomes."""
    problems = []
    for name in sorted(set(serial["verdicts"]) | set(other["verdicts"])):
        a, b = serial["verdicts"].get(name), other["verdicts"].get(name)
        if a != b:
            problems.append(
                f"verdict of {name}: {VERDICT[a]} with --jobs 1, {VERDICT[b]} with --jobs {other['jobs']}"
            )
    mine, theirs = set(map(tuple, serial["outcomes"])), set(map(tuple, other["outcomes"]))
    for target, case_id, outcome in sorted(mine - theirs):
        problems.append(f"--jobs 1 only: {target} {case_id} {outcome}")
    for target, case_id, outcome in sorted(theirs - mine):
        problems.append(f"--jobs {other['jobs']} only: {target} {case_id} {outcome}")
    return problems


def print_differences(jobs: int, found: list[str], shown: int = 12) -> None:
    print(f"\n--jobs {jobs} does not match --jobs 1 ({len(found)} difference(s); all in the JSON):")
    for line in found[:shown]:
        print(f"  {line}")
    if len(found) > shown:
        print(f"  ... {len(found) - shown} more")


def print_table(modes: list[dict], names: list[str]) -> None:
    serial = modes[0]
    print(
        f"\n{'mode':<10} {'wall s':>8} {'speed-up':>9} {'cases':>6} {'exit':>5}  load (1/5/15 min) before -> after"
    )
    for mode in modes:
        speed = serial["wall_s"] / mode["wall_s"] if mode["wall_s"] else 0.0
        print(
            f"--jobs {mode['jobs']:<3} {mode['wall_s']:>8.1f} {speed:>8.2f}x {mode['cases']:>6} "
            f"{mode['exit_code']:>5}  {'/'.join(f'{x:.1f}' for x in mode['load_before'])} -> "
            f"{'/'.join(f'{x:.1f}' for x in mode['load_after'])}"
        )
    width = max([len("target")] + [len(n) for n in names])
    print(
        f"\n{'target':<{width}}  {'verdict':<15}"
        + "".join(f" {'jobs ' + str(m['jobs']) + ' s':>10}" for m in modes)
    )
    for name in names:
        label = VERDICT[serial["verdicts"].get(name)]
        cells = "".join(f" {m['session_s'].get(name, float('nan')):>10.1f}" for m in modes)
        print(f"{name:<{width}}  {label:<15}{cells}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--jobs-list", default="2", help="comma-separated N to compare with --jobs 1 (default 2)"
    )
    parser.add_argument(
        "--target",
        action="append",
        default=[],
        help="only these targets (repeatable; default: every installed target)",
    )
    parser.add_argument(
        "-k", dest="keyword", default=None, help="pytest -k expression passed to certify"
    )
    parser.add_argument(
        "--targets-file",
        action="append",
        default=[],
        help="TOML targets file (repeatable), e.g. conformance/targets/containers.toml "
        "for the container targets (they need a Docker engine)",
    )
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument(
        "--keep", default=None, help="keep the run directories here (default: a temp dir)"
    )
    args = parser.parse_args(argv)
    try:
        jobs_list = [int(x) for x in args.jobs_list.split(",") if x.strip()]
    except ValueError:
        parser.error(f"--jobs-list must be integers separated by commas, got {args.jobs_list!r}")
    if not jobs_list or any(n < 2 for n in jobs_list):
        parser.error("--jobs-list needs numbers of at least 2 (--jobs 1 always runs)")

    targets_files = [str(Path(f).resolve()) for f in args.targets_file]
    targets = load_targets(targets_files)
    docker_problem = (
        docker_reachable() if any(getattr(t, "container", None) for t in targets.values()) else None
    )
    names, skipped = [], {}
    for name, target in targets.items():
        if args.target and name not in args.target:
            continue
        reason = why_skipped(target, docker_problem)
        if reason:
            skipped[name] = reason
            print(f"skipped {name}: {reason}", flush=True)
        else:
            names.append(name)
    unknown = sorted(set(args.target) - set(targets))
    if unknown:
        parser.error(f"unknown target(s): {', '.join(unknown)}")
    if not names:
        print("no target to certify", file=sys.stderr)
        return 1

    base = (
        Path(args.keep).resolve() if args.keep else Path(tempfile.mkdtemp(prefix="certify-bench."))
    )
    base.mkdir(parents=True, exist_ok=True)
    print(
        f"certifying {len(names)} target(s): {', '.join(names)}\n"
        f"{os.cpu_count()} CPU(s); runs in {base}",
        flush=True,
    )
    modes = []
    for jobs in [1] + jobs_list:
        print(f"\n-- conformance certify --jobs {jobs} ...", flush=True)
        mode = run_mode(jobs, names, base / f"jobs-{jobs}", args.keyword, targets_files)
        print(
            f"   {mode['wall_s']:.1f} s, exit {mode['exit_code']}, {mode['cases']} case(s); output: {mode['output']}",
            flush=True,
        )
        modes.append(mode)
    print_table(modes, names)
    problems = {m["jobs"]: compare(modes[0], m) for m in modes[1:]}
    for jobs, found in problems.items():
        if found:
            print_differences(jobs, found)
    # A target without results in a mode (its session could not run) leaves
    # nothing to compare: the run proves nothing about it.
    no_result = [n for n in names if any(n not in m["verdicts"] for m in modes)]
    if no_result:
        print(f"\nno result in some mode (see the mode's output file): {', '.join(no_result)}")
    same = (
        not any(problems.values())
        and not no_result
        and all(m["exit_code"] in (0, 1) for m in modes)
    )
    print(f"\nsame verdicts and case outcomes in every mode: {'yes' if same else 'NO'}")
    if args.json:
        data = {
            "cpus": os.cpu_count(),
            "targets": names,
            "skipped": skipped,
            "keyword": args.keyword,
            "no_result": no_result,
            "modes": [{k: v for k, v in m.items() if k != "outcomes"} for m in modes],
            "differences": {str(k): v for k, v in problems.items()},
            "same": same,
        }
        Path(args.json).write_text(
            json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        print(f"figures: {args.json}")
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

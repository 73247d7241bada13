#!/usr/bin/env python3
"""One shard of versioned targets, measured (issue #34, docs/versions.md):
install time (first, into an empty cache, and cached), certification time,
records, how many releases did not start and why; then how long a night of
about 280 versioned targets takes on N runners of this machine's size.

The shard: the newest releases of stomp.py (PyPI), stompit and
ilp-plugin-btp (npm), ``--per-implementation`` of each (default 10: about
30 targets). Every command runs as a user runs it:

1. ``conformance versions list IMPL --every-release --names`` (the registries);
2. each release installed into an empty cache (CONFORMANCE_VERSIONS_CACHE
   set to a temporary directory), ``--jobs`` at a time, timed one by one;
   then the same again, now cached;
3. ``conformance versions certify --from-file LIST --jobs J`` (the
   installs cached: the certification alone), timed;
4. the run's summary.json and results.jsonl: records, verdicts, releases
   not started and their reasons; the CPU seconds of every child process.

The night, computed: the shard's certification wall time per target, times
the targets a runner gets (ceil(280 / N)), plus each of those targets'
first install (the mean measured here), plus ``--runner-setup`` seconds per
runner (checkout, setup.sh, the venv: not measured here; the default is
an assumption, stated in the output). The targets of the shard are the
STOMP client and BTP kinds; ssb-server releases (15 of the 280) take longer
to install and certify, which the figure leaves out (said in the output).

Usage: bench/versions_bench.py [--per-implementation 10] [--jobs 2]
       [--targets 280] [--runners 1,2,4,8,16] [--runner-setup 300]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from conformance.core.package_install import CACHE_ENV, ensure_installed  # noqa: E402
from conformance.core.targets import load_targets  # noqa: E402
from conformance.core.versioned_targets import resolve_versioned  # noqa: E402

IMPLEMENTATIONS = ("stomp-py", "stompit", "ilp-plugin-btp")


def conformance(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "conformance.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-implementation", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--targets", type=int, default=280, help="targets of a whole night")
    parser.add_argument("--runners", default="1,2,4,8,16")
    parser.add_argument(
        "--runner-setup",
        type=float,
        default=300.0,
        help="seconds each runner spends before certifying (assumed, not measured here)",
    )
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cache = Path(tempfile.mkdtemp(prefix="versions-bench-cache-"))
    env[CACHE_ENV] = str(cache)
    os.environ[CACHE_ENV] = str(cache)

    names: list[str] = []
    started = time.monotonic()
    for implementation in IMPLEMENTATIONS:
        listed = conformance(
            "versions", "list", implementation, "--every-release", "--names", env=env
        )
        if listed.returncode != 0:
            print(f"versions list {implementation}: {listed.stderr.strip()}", file=sys.stderr)
            return 2
        names += listed.stdout.split()[-args.per_implementation :]
    list_seconds = time.monotonic() - started
    print(f"shard: {len(names)} releases ({', '.join(names)})")
    print(f"registry listing: {list_seconds:.1f} s for {len(IMPLEMENTATIONS)} implementations")

    targets = load_targets()
    resolve_versioned(targets, names)
    chosen = [targets[name] for name in names]

    def install_round() -> tuple[float, dict[str, object]]:
        began = time.monotonic()
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = dict(
                zip(
                    names,
                    pool.map(lambda t: ensure_installed(t.package, retry_failed=True), chosen),
                )
            )
        return time.monotonic() - began, results

    first_wall, first = install_round()
    cached_wall, cached = install_round()
    ok_first = [r.seconds for r in first.values() if r.ok]
    print(
        f"install, first (empty cache, {args.jobs} at a time): {first_wall:.1f} s wall; per release "
        f"mean {sum(ok_first) / max(len(ok_first), 1):.1f} s, max {max(ok_first, default=0):.1f} s; "
        f"{len(ok_first)} ok, {len(names) - len(ok_first)} failed"
    )
    print(
        f"install, cached: {cached_wall:.2f} s wall for {len(names)} releases "
        f"({sum(r.cached for r in cached.values())} from the cache)"
    )

    listing = cache / "targets.txt"
    listing.write_text("\n".join(names) + "\n", encoding="utf-8")
    run_dir = Path(tempfile.mkdtemp(prefix="versions-bench-run-"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    run = conformance(
        "versions", "certify", "--from-file", str(listing), "--jobs", str(args.jobs),
        "--run-dir", str(run_dir), env=env,
    )  # fmt: skip
    certify_wall = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    records = [
        json.loads(line)
        for line in (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    versions_seen = {(r["implementation"], r["implementation_version"]) for r in records}
    verdicts = Counter(group["verdict"] for group in summary["targets"])
    print(
        f"certify (--jobs {args.jobs}, installs cached): {certify_wall:.1f} s wall, "
        f"{certify_wall / len(names):.1f} s per release; exit {run.returncode}; "
        f"CPU {cpu:.0f} s ({cpu / certify_wall:.2f} cores busy on average)"
    )
    print(
        f"records: {len(records)} ({len(versions_seen)} implementation versions); verdicts: "
        + ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items()))
    )
    not_started = [g for g in summary["targets"] if g["target"] in summary.get("not_started", [])]
    print(f"not started: {len(not_started)}")
    for group in not_started:
        reason = (group.get("start_failure") or "").splitlines()[0][:200]
        print(f"  {group['target']}: {reason}")

    per_target = certify_wall / len(names)
    install_mean = sum(ok_first) / max(len(ok_first), 1)
    print(
        f"\na night of {args.targets} versioned targets on N runners of this machine's size "
        f"(--jobs {args.jobs} each; {per_target:.1f} s certification and {install_mean:.1f} s first "
        f"install per target as measured above; {args.runner_setup:.0f} s setup per runner, assumed):"
    )
    for runners in [int(n) for n in args.runners.split(",")]:
        share = math.ceil(args.targets / runners)
        seconds = args.runner_setup + share * (per_target + install_mean / args.jobs)
        print(f"  N={runners:>2}: {share:>3} targets per runner, {seconds / 60:.0f} min")
    print(
        "  (the shard holds STOMP client and BTP releases; ssb-server's 15 releases install native "
        "modules for minutes and certify longer, not in this figure)"
    )
    print(f"\nrun: {run_dir}; cache: {cache}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

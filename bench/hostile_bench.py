"""The hostile-target zoo, measured: per fake target (tests/hostile/fake_targets.py),
`conformance certify` through the real CLI in a fresh measuring subprocess, and
print wall time, peak resident memory of the harness (ru_maxrss of the
children: the CLI, its pytest session and the fake; the largest of them),
the outcome counts, and the largest trace file.

    .venv/bin/python bench/hostile_bench.py                    # the whole zoo, --deadline 1
    .venv/bin/python bench/hostile_bench.py --protocol ssb --deadline 3
    .venv/bin/python bench/hostile_bench.py --repo /path/to/other/checkout   # e.g. an older harness

``--repo`` runs another checkout's harness against the same zoo (its
``conformance`` package is imported from there), for before/after figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.hostile import zoo  # noqa: E402
from tests.hostile.fake_targets import BTP_BEHAVIOURS, SSB_BEHAVIOURS  # noqa: E402

OUTCOMES = ("passed", "failed", "error", "blocked", "not_applicable")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--protocol",
        choices=["ssb", "btp"],
        action="append",
        help="only this protocol's zoo (repeatable; default both)",
    )
    parser.add_argument("--behaviour", action="append", help="only this behaviour (repeatable)")
    parser.add_argument(
        "--deadline", type=float, default=1.0, help="--deadline given to certify (default 1)"
    )
    parser.add_argument(
        "--repo",
        type=Path,
        default=REPO,
        help="checkout whose harness is measured (default: this one)",
    )
    parser.add_argument("--keep", type=Path, help="keep the run directories here")
    parser.add_argument(
        "--timeout",
        type=float,
        default=300,
        help="seconds after which a run is killed and reported as such (default 300)",
    )
    args = parser.parse_args(argv)

    repo = args.repo.resolve()
    if repo != REPO:
        # The zoo's fake targets come from this checkout; the harness from --repo.
        target = repo / "tests" / "hostile"
        if not (target / "fake_targets.py").is_file():
            target.mkdir(parents=True, exist_ok=True)
            for name in ("__init__.py", "fake_targets.py", "zoo.py"):
                shutil.copy(REPO / "tests" / "hostile" / name, target / name)
    zoo.REPO_ROOT = repo

    work = args.keep or Path(tempfile.mkdtemp(prefix="hostile-bench-"))
    plan = [
        (p, b)
        for p in (args.protocol or ["ssb", "btp"])
        for b in (SSB_BEHAVIOURS if p == "ssb" else BTP_BEHAVIOURS)
        if not args.behaviour or b in args.behaviour
    ]
    print(f"harness: {repo}  --deadline {args.deadline}  ({os.cpu_count()} CPUs)")
    header = (
        f"{'target':<30} {'exit':>4} {'wall s':>7} {'peak MB':>8} "
        + " ".join(f"{o[:7]:>7}" for o in OUTCOMES)
        + f" {'trace KB':>9}"
    )
    print(header)
    print("-" * len(header))
    worst_rss = 0
    for protocol, behaviour in plan:
        run = zoo.certify_hostile(
            protocol, behaviour, work, deadline=args.deadline, timeout=args.timeout
        )
        counts = run.outcomes
        sizes = run.trace_sizes()
        worst_rss = max(worst_rss, run.peak_rss_kb)
        killed = "(killed after" in run.output
        peak = "killed" if killed else f"{run.peak_rss_kb / 1024:.0f}"
        print(
            f"{run.target:<30} {run.code:>4} {run.seconds:>7.1f} {peak:>8} "
            + " ".join(f"{counts.get(o, 0):>7}" for o in OUTCOMES)
            + f" {max(sizes.values(), default=0) / 1024:>9.0f}",
            flush=True,
        )
    print(f"\nlargest peak RSS: {worst_rss / 1024:.0f} MB; run directories: {work}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

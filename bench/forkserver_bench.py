#!/usr/bin/env python3
"""What forking sessions and nodes from a warm interpreter saves, in CPU.

A process that runs many certifications (``certify`` of several targets,
``conformance mutation``, the project's tests) forks its pytest sessions,
and those sessions their reference nodes, from a fork server that holds
the modules imported (conformance/core/forkserver.py). This benchmark
certifies one faulty reference node N times in one process, once with
every session and node started as a new interpreter
(``CONFORMANCE_FORKSERVER=0``), once forked, for two workloads:

* ``server``: the RIPP server-role cases against the consumer with the
  ``accept-bad-crc`` fault (one node per certification);
* ``client``: the RIPP client-role cases against the producer with the
  ``client-nonzero-flags`` fault (one node per case: 13 per certification).

and times ``conformance --help`` (the command line's start-up, paid by
every call). CPU is every process's: each mode runs in a child process,
whose descendants are all waited for (the fork server reaps what it forks
and is reaped at exit), so ``RUSAGE_CHILDREN`` counts them all.

Both modes must give every case the same outcome; a difference is printed
and the exit status is 1. The machine may be shared: the load average is
printed beside each figure.

Usage: bench/forkserver_bench.py [--certifications N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

WORKLOADS = {
    "server": ("accept-bad-crc", "ripp.*.server.*"),
    "client": ("client-nonzero-flags", "ripp.*.client.*"),
}
LOOP = """
import json, sys
from pathlib import Path
from conformance.mutation import run_mutation
fault, cases, count, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
outcomes = []
for i in range(count):
    run = run_mutation(["ripp"], [fault], jobs=1, work_dir=work / str(i),
                       progress=lambda line: None, reference=False, cases=[cases])
    (result,) = run.faults
    records = result.certification.records if result.certification else {}
    outcomes.append({case: r["outcome"] for case, r in sorted(records.items())})
print(json.dumps(outcomes))
"""
MODE_DEADLINE = 900.0


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(argv: list[str], forked: bool) -> tuple[float, float, str]:
    """(CPU-s of every process, wall seconds, stdout) of one child run."""
    env = dict(os.environ, CONFORMANCE_FORKSERVER="1" if forked else "0")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as scripts/test.sh runs
    cpu, wall = children_cpu(), time.monotonic()
    done = subprocess.run(
        argv,
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=MODE_DEADLINE,
    )
    if done.returncode != 0:
        sys.exit(f"forkserver_bench: {' '.join(argv[:4])} failed:\n{done.stderr[-3000:]}")
    return children_cpu() - cpu, time.monotonic() - wall, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--certifications", type=int, default=6, help="per workload and mode (default 6)"
    )
    parser.add_argument("--quick", action="store_true", help="2 certifications, 3 CLI calls")
    args = parser.parse_args()
    count = 2 if args.quick else args.certifications
    calls = 3 if args.quick else 10
    if count < 2:
        parser.error("--certifications: at least 2 (the first session is never forked)")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    differences = 0
    print(f"{'workload':<10} {'mode':<18} {'CPU-s':>8} {'per cert.':>10} {'wall s':>8}")
    for workload, (fault, cases) in WORKLOADS.items():
        outcomes = {}
        figures = {}
        for forked in (False, True):
            with tempfile.TemporaryDirectory(prefix="forkserver-bench-") as work:
                cpu, wall, out = measure(
                    [sys.executable, "-c", LOOP, fault, cases, str(count), work], forked
                )
            mode = "forked" if forked else "new interpreters"
            outcomes[mode] = json.loads(out.strip().splitlines()[-1])
            figures[mode] = cpu
            print(f"{workload:<10} {mode:<18} {cpu:8.1f} {cpu / count:10.2f} {wall:8.1f}")
        saved = 1 - figures["forked"] / figures["new interpreters"]
        print(f"{workload:<10} {'saved':<18} {saved:8.0%}")
        if outcomes["forked"] != outcomes["new interpreters"]:
            differences += 1
            print(f"DIFFERENT OUTCOMES ({workload}): {json.dumps(outcomes, indent=1)}")
    cpu, wall, _ = measure(
        [
            "bash",
            "-c",
            f"for i in $(seq {calls}); do {sys.executable} -m conformance.cli --help >/dev/null; done",
        ],
        False,
    )
    print(f"{'cli':<10} {'--help':<18} {cpu:8.1f} {cpu / calls:10.2f} {wall:8.1f}  ({calls} calls)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())

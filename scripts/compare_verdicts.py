#!/usr/bin/env python3
"""Compares the outcome of every case of two certify runs.

A change that is meant to alter no verdict (faster tests, shorter waits,
another scheduling) is checked by certifying the same targets before and
after it and comparing the runs case by case:

    conformance certify --target ... --run-dir /tmp/before
    (the change)
    conformance certify --target ... --run-dir /tmp/after
    scripts/compare_verdicts.py /tmp/before /tmp/after

For every (target, peer, case id) of either run it compares the outcome
(passed, failed, error, blocked, not_applicable) and, for a blocked case,
the case that blocked it; the messages are not compared (they carry
ports, keys and times). Prints one line per target with its counts, then
every difference. Exit 0 when the runs agree on every case and cover the
same cases, 1 when they do not, 2 on a run dir that cannot be read.

Usage: scripts/compare_verdicts.py BEFORE_RUN_DIR AFTER_RUN_DIR
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from conformance.core.run_folder import RunFolder  # noqa: E402 (after the sys.path line)

Key = tuple[str, str, str]  # target, peer implementation ("" if none), case id


def outcomes(run_dir: Path) -> dict[Key, tuple[str, str]]:
    path = RunFolder(run_dir).results
    if not path.is_file():
        raise SystemExit(f"compare_verdicts: {path}: no such file (not a run dir?)")
    found: dict[Key, tuple[str, str]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            print(f"compare_verdicts: {path}:{number}: not a JSON line ({exc})", file=sys.stderr)
            raise SystemExit(2) from None
        key = (record["target"], record.get("peer_implementation") or "", record["case_id"])
        found[key] = (record["outcome"], record.get("blocked_by") or "")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        before, after = (outcomes(Path(arg)) for arg in argv)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            return 2
        raise
    targets = sorted({key[:2] for key in before} | {key[:2] for key in after})
    differences = []
    for target, peer in targets:
        keys = sorted(k for k in before.keys() | after.keys() if k[:2] == (target, peer))
        counts = Counter(before.get(k, ("missing",))[0] for k in keys)
        same = sum(1 for k in keys if before.get(k) == after.get(k))
        name = target + (f" with {peer}" if peer else "")
        print(
            f"{name}: {len(keys)} cases, {same} the same "
            f"({', '.join(f'{o} {n}' for o, n in sorted(counts.items()))} before)"
        )
        for key in keys:
            if before.get(key) != after.get(key):
                differences.append((name, key[2], before.get(key), after.get(key)))

    def show(v):
        return "missing" if v is None else v[0] + (f" (by {v[1]})" if v[1] else "")

    for name, case, was, now in differences:
        print(f"DIFFERENT {name} {case}: before {show(was)}, after {show(now)}")
    print(f"{len(differences)} difference(s) over {len(before.keys() | after.keys())} case results")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Turns the phase times of a test run into the tables of docs/testing.md.

Input: the JSON lines written by tests/times_plugin.py
(``scripts/test.sh --times FILE`` or ``CONFORMANCE_TEST_TIMES=FILE pytest``).

Output (Markdown on stdout):
- per directory of tests/: tests, summed wall time, and that time split
  by kind: CPU of the pytest process, CPU of the child processes it waited
  for, start and stop of what fixtures bring up (setup and teardown time
  not spent on CPU: processes, brokers, JVMs, containers, builds), and
  waiting in the test itself (call time not spent on CPU: deadlines,
  silence windows, a target's answer, a subprocess's own waits);
- the fixture start/stop time by what was started;
- the slowest tests.

Summed wall time is the time one worker would take; with N workers the
run's wall time is what ``--wall`` reports (pytest's own figure).

With ``--write-durations PATH`` it also writes each test's wall time
(setup + call + teardown, for the tests taking at least ``--min-seconds``)
as JSON: tests/durations.json, from which tests/conftest.py starts the
longest tests first.

Usage: scripts/test_times.py FILE [--top N] [--wall SECONDS] [--write-durations PATH [--min-seconds S]]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

# What a fixture starts, recognised by the words in its name or the test's
# markers; the first match wins. Order: the most specific first.
START_KINDS = (
    ("container", ("docker", "container", "image", "compose")),
    ("JVM (Spark)", ("spark", "cluster", "dataset", "matrix", "ingest")),
    ("broker (RabbitMQ)", ("rabbit", "amqp", "broker")),
    ("OCaml build", ("ocaml",)),
    ("Node.js process", ("node_interop", "ssb_server", "ilp", "npm", "shs1")),
    ("Chromium / Allure", ("report_ui", "allure", "chromium", "browser")),
)


def start_kind(fixtures: list[str], markers: list[str]) -> str:
    words = " ".join(fixtures + markers).lower()
    for kind, keys in START_KINDS:
        if any(key in words for key in keys):
            return kind
    return "Python process / server"


def directory(nodeid: str) -> str:
    parts = nodeid.split("::", 1)[0].split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def load(path: Path) -> dict[str, dict]:
    tests: dict[str, dict] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{path}:{number}: not a JSON line ({exc})") from None
        test = tests.setdefault(
            record["nodeid"],
            {
                "setup": 0.0,
                "call": 0.0,
                "teardown": 0.0,
                "cpu": 0.0,
                "children_cpu": 0.0,
                "fixture_cpu": 0.0,
                "fixtures": record.get("fixtures", []),
                "markers": record.get("markers", []),
            },
        )
        phase = record["phase"]
        test[phase] += record["wall"]
        test["cpu"] += record["cpu"]
        test["children_cpu"] += record["children_cpu"]
        if phase != "call":
            test["fixture_cpu"] += record["cpu"] + record["children_cpu"]
        else:
            test["call_cpu"] = record["cpu"] + record["children_cpu"]
    return tests


def split(test: dict) -> dict[str, float]:
    fixture_wall = test["setup"] + test["teardown"]
    call_cpu = test.get("call_cpu", 0.0)
    return {
        "wall": fixture_wall + test["call"],
        "cpu": test["cpu"],
        "children_cpu": test["children_cpu"],
        "start": max(0.0, fixture_wall - test["fixture_cpu"]),
        "wait": max(0.0, test["call"] - call_cpu),
    }


def fmt(seconds: float) -> str:
    return f"{seconds:,.0f}" if seconds >= 10 else f"{seconds:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--top", type=int, default=25, help="slowest tests to list (default 25)")
    parser.add_argument(
        "--wall",
        type=float,
        default=None,
        help="the run's wall time in seconds, printed beside the sums",
    )
    parser.add_argument(
        "--write-durations",
        type=Path,
        default=None,
        metavar="PATH",
        help="also write {node id: seconds} of the tests taking at least --min-seconds",
    )
    parser.add_argument("--min-seconds", type=float, default=2.0)
    args = parser.parse_args(argv)
    if not args.file.is_file():
        print(f"test_times: {args.file}: no such file", file=sys.stderr)
        return 2
    tests = load(args.file)
    if not tests:
        print(f"test_times: {args.file}: no test phases recorded", file=sys.stderr)
        return 2

    rows: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    starts: dict[str, float] = defaultdict(float)
    for nodeid, test in tests.items():
        parts = split(test)
        row = rows[directory(nodeid)]
        row["tests"] += 1
        for key, value in parts.items():
            row[key] += value
        starts[start_kind(test["fixtures"], test["markers"])] += parts["start"]

    total: dict[str, float] = defaultdict(float)
    for row in rows.values():
        for key, value in row.items():
            total[key] += value

    out = []
    if args.wall is not None:
        out.append(
            f"Run wall time: {fmt(args.wall)} s for {int(total['tests'])} tests "
            f"({fmt(total['wall'])} s summed over tests).\n"
        )
    out.append(
        "| directory | tests | wall (s) | CPU, pytest (s) | CPU, children (s) "
        "| fixture start/stop wait (s) | waiting in test (s) |"
    )
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    for name, row in sorted(rows.items(), key=lambda item: -item[1]["wall"]):
        out.append(
            f"| {name} | {int(row['tests'])} | {fmt(row['wall'])} | {fmt(row['cpu'])} "
            f"| {fmt(row['children_cpu'])} | {fmt(row['start'])} | {fmt(row['wait'])} |"
        )
    out.append(
        f"| **all** | {int(total['tests'])} | {fmt(total['wall'])} | {fmt(total['cpu'])} "
        f"| {fmt(total['children_cpu'])} | {fmt(total['start'])} | {fmt(total['wait'])} |"
    )
    out.append("")
    out.append("| fixture start/stop, by what was started | wait (s) |")
    out.append("|---|---:|")
    for kind, seconds in sorted(starts.items(), key=lambda item: -item[1]):
        out.append(f"| {kind} | {fmt(seconds)} |")
    out.append("")
    out.append(f"Slowest {args.top} tests (setup + call + teardown):\n")
    out.append("| test | wall (s) | CPU (s) | waiting (s) |")
    out.append("|---|---:|---:|---:|")
    ranked = sorted(tests.items(), key=lambda item: -split(item[1])["wall"])
    for nodeid, test in ranked[: args.top]:
        parts = split(test)
        out.append(
            f"| `{nodeid}` | {parts['wall']:.1f} | {parts['cpu'] + parts['children_cpu']:.1f} "
            f"| {parts['start'] + parts['wait']:.1f} |"
        )
    print("\n".join(out))
    if args.write_durations is not None:
        durations = {
            nodeid: round(split(test)["wall"], 1)
            for nodeid, test in sorted(tests.items())
            if split(test)["wall"] >= args.min_seconds
        }
        args.write_durations.write_text(
            json.dumps(durations, indent=1, sort_keys=True) + "\n", encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

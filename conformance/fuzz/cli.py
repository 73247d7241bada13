"""``conformance fuzz`` and ``conformance replay`` (docs/fuzz.md).

    conformance fuzz --target reference-stomp --budget 60s
    conformance fuzz --target my-node --targets-file my.toml --examples 200 --seed 7
    conformance replay reports/runs/<id>/fuzz/replay-<target>-<case>.json [--target OTHER]

Exit status of ``fuzz``: 0 no rule broken within the budget; 1 a rule broke
(shrunk, saved as a replay file, recorded as a failed result of the rule's
case); 2 a usage error; 3 a harness error; 4 the target did not start.
Of ``replay``: 0 the failure does not reproduce; 1 it does (the same
case's rule breaks again); 2, 3, 4 as for fuzz.
"""

from __future__ import annotations

import argparse
import re
import secrets
import sys
from pathlib import Path

from ..argtypes import positive_int
from ..core.run_folder import RunFolder
from ..core.targets import TargetError, TargetNotStarted, load_targets
from ..runner import EXIT_NOT_CONFORMANT, EXIT_NOT_STARTED, EXIT_USAGE, new_run_dir
from .machines import DEFAULT_STEPS, MACHINES, machine_for

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h)?$")


def duration(text: str) -> float:
    """``90``, ``90s``, ``10m``, ``1h``: seconds."""
    match = _DURATION.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"not a duration (60s, 10m, 1h): {text!r}")
    value = float(match.group(1)) * {"s": 1, "m": 60, "h": 3600, None: 1}[match.group(2)]
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _usage(text: str) -> int:
    print(f"conformance: error: {text}", file=sys.stderr)
    return EXIT_USAGE


def cmd_fuzz(args: argparse.Namespace) -> int:
    from .engine import FuzzOptions, fuzz, save_failure, start_target, write_summary

    try:
        targets = load_targets(args.targets_file)
    except TargetError as exc:
        return _usage(str(exc))
    if args.target not in targets:
        return _usage(f"unknown target {args.target!r}; known: {', '.join(sorted(targets))}")
    target = targets[args.target]
    protocol = args.protocol or target.protocol
    if protocol != target.protocol:
        return _usage(f"target {target.name} speaks {target.protocol}, not {protocol}")
    role = args.role or "server"
    if role not in target.roles:
        return _usage(f"target {target.name} has no {role} role (roles: {', '.join(target.roles)})")
    try:
        machine = machine_for(protocol, role)
    except KeyError as exc:
        return _usage(str(exc.args[0]))
    seed = args.seed if args.seed is not None else secrets.randbits(32)
    options = FuzzOptions(
        budget_s=args.budget if args.examples is None else None,
        examples=args.examples,
        seed=seed,
        deadline=args.deadline,
        steps=args.steps,
        shrink_seconds=args.shrink_budget,
    )
    run_id, run_dir = new_run_dir(args.run_dir, args.reports_dir)
    folder = RunFolder(run_dir)
    print(
        f"fuzz {target.name} ({protocol} {role}), seed {seed}, "
        + (f"{args.examples} examples" if args.examples else f"budget {options.budget_s:g} s")
        + f"; run folder {run_dir}",
        flush=True,
    )
    try:
        runtime = start_target(target, folder, run_id)
    except TargetNotStarted as exc:
        print(f"{target.name}: the target did not start: {exc}", file=sys.stderr)
        return EXIT_NOT_STARTED
    except TargetError as exc:
        return _usage(f"target {target.name} could not be started: {exc}")
    try:
        result = fuzz(runtime, machine, options, progress=lambda line: print(line, flush=True))
        if result.failure is not None:
            save_failure(result, runtime, folder, run_id)
    finally:
        runtime.stop()
    write_summary(folder, run_id, [result])
    for note in result.health:
        print(f"restarted between examples: {note}")
    print(
        f"{result.examples} examples in {result.seconds:.1f} s ({result.examples_per_second:.1f}/s)"
    )
    if result.failure is None:
        print(f"{target.name}: no rule broken (seed {seed})")
        print(f"results: {run_dir}")
        return 0
    failure = result.failure.failure
    print(
        f"{target.name}: FAILED {failure.case_id}{' (flaky)' if result.flaky else ''}\n"
        f"  {failure.message}\n"
        f"  expected: {failure.expected}\n  observed: {failure.observed}\n"
        f"  found after {result.examples_before_failure} examples, "
        f"{result.seconds_to_failure:.1f} s; shrunk to {len(result.failure.actions)} action(s)\n"
        f"  replay: conformance replay {result.replay_file}"
    )
    print(f"results: {run_dir}")
    return EXIT_NOT_CONFORMANT


def cmd_replay(args: argparse.Namespace) -> int:
    from .engine import load_replay, replay, start_target

    try:
        document = load_replay(Path(args.file))
    except (OSError, ValueError) as exc:
        return _usage(str(exc))
    try:
        targets = load_targets(args.targets_file)
    except TargetError as exc:
        return _usage(str(exc))
    name = args.target or document["target"]
    if name not in targets:
        return _usage(
            f"unknown target {name!r} (the file's is {document['target']!r}; give --target and "
            "--targets-file)"
        )
    target = targets[name]
    if target.protocol != document["protocol"]:
        return _usage(f"target {name} speaks {target.protocol}, the file {document['protocol']}")
    run_id, run_dir = new_run_dir(args.run_dir, args.reports_dir)
    folder = RunFolder(run_dir)
    try:
        runtime = start_target(target, folder, run_id)
    except TargetNotStarted as exc:
        print(f"{name}: the target did not start: {exc}", file=sys.stderr)
        return EXIT_NOT_STARTED
    except TargetError as exc:
        return _usage(f"target {name} could not be started: {exc}")
    reproduced = 0
    try:
        for attempt in range(1, args.times + 1):
            outcome = replay(document, runtime, args.deadline)
            reproduced += outcome.reproduced
            if outcome.failure is None:
                what = "no rule broken"
            else:
                what = f"{outcome.failure.case_id}: {outcome.failure.message}"
            print(f"replay {attempt}/{args.times} against {name}: {what}", flush=True)
            trace = folder.traces(name) / f"replay-{attempt}.txt"
            trace.parent.mkdir(parents=True, exist_ok=True)
            trace.write_text(outcome.trace, encoding="utf-8")
    finally:
        runtime.stop()
    verdict = "REPRODUCED" if reproduced else "NOT REPRODUCED"
    print(
        f"{name}: {verdict} {document['case_id']} ({reproduced} of {args.times}); traces in "
        f"{folder.traces(name)}"
    )
    return EXIT_NOT_CONFORMANT if reproduced else 0


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "fuzz",
        help="explore a target with stateful Hypothesis runs; a broken rule is shrunk to a replay file",
    )
    parser.add_argument("--target", required=True, help="the target to fuzz")
    parser.add_argument(
        "--protocol",
        default=None,
        choices=sorted({p for p, _ in MACHINES}),
        help="the protocol (default: the target's)",
    )
    parser.add_argument(
        "--role",
        default=None,
        choices=sorted({r for _, r in MACHINES}),
        help="the role of the target to fuzz (default: server)",
    )
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument(
        "--budget",
        type=duration,
        default=60.0,
        help="time to explore, e.g. 60s or 10m (default 60s); shrinking a failure comes on top",
    )
    budget.add_argument(
        "--examples", type=positive_int, default=None, help="examples to run instead"
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="seed of the run (default: random, printed)"
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=2.0,
        help="seconds to wait for an answer the reference gives, or a close (default 2)",
    )
    parser.add_argument(
        "--steps",
        type=positive_int,
        default=DEFAULT_STEPS,
        help=f"rules per example after the first (default {DEFAULT_STEPS})",
    )
    parser.add_argument(
        "--shrink-budget",
        type=duration,
        default=60.0,
        help="time shrinking a failure may take at most (default 60s)",
    )
    parser.add_argument(
        "--targets-file", action="append", default=[], help="TOML targets file (repeatable)"
    )
    parser.add_argument(
        "--reports-dir", default="reports", help="where runs are written (default: reports)"
    )
    parser.add_argument(
        "--run-dir", default=None, help="exact run directory (default REPORTS_DIR/runs/RUN_ID)"
    )
    parser.set_defaults(func=cmd_fuzz)

    again = sub.add_parser(
        "replay",
        help="replay a fuzz failure's file against a target: does it break the rule again?",
    )
    again.add_argument("file", help="a replay file (RUN_DIR/fuzz/replay-*.json)")
    again.add_argument("--target", default=None, help="the target (default: the file's)")
    again.add_argument(
        "--targets-file", action="append", default=[], help="TOML targets file (repeatable)"
    )
    again.add_argument(
        "--times", type=positive_int, default=1, help="replay this many times (default 1)"
    )
    again.add_argument("--deadline", type=float, default=2.0, help="read deadline (default 2)")
    again.add_argument(
        "--reports-dir", default="reports", help="where runs are written (default: reports)"
    )
    again.add_argument("--run-dir", default=None, help="exact run directory")
    again.set_defaults(func=cmd_replay)

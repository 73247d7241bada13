"""``conformance learn``: learn a target's state machine, draw it, and diff
it against the reference node's (docs/learn.md).

    conformance learn --target reference-ripplehost
    conformance learn --target mutant-ripplehost-even-msgnos --targets-file mutants.toml
    conformance learn --target my-node --replay reports/runs/X/learn/my-node/replays/01-....json

Exit status: 0 the model equals the reference's, 1 it differs (or the
target answers some word in more than one way: learning stopped), 2 usage,
4 the target did not start. With --replay: 0 the file's outputs were seen
again every time, 1 not.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..argtypes import positive_int, positive_seconds
from ..core.run_folder import RunFolder
from ..core.targets import TargetError, TargetNotStarted, load_targets
from ..runner import (
    EXIT_CONFORMANT,
    EXIT_NOT_CONFORMANT,
    EXIT_NOT_STARTED,
    EXIT_USAGE,
    new_run_dir,
)
from ..runner import EXIT_HARNESS_ERROR
from .alphabet import alphabet_for, learnable
from .defaults import (
    DEFAULT_REPEATS,
    DEFAULT_REPLAYS,
    DEFAULT_SEED,
    DEFAULT_WALK_LENGTH,
    DEFAULT_WALKS_PER_STATE,
    REFERENCE_TARGET,
)
from .model import MealyModel


def _usage(text: str) -> int:
    print(f"conformance learn: {text}", file=sys.stderr)
    return EXIT_USAGE


def cmd_learn(args: argparse.Namespace) -> int:
    # AALpy is imported here, not when the CLI starts: every other command
    # works on an install that lacks it.
    try:
        import aalpy  # noqa: F401
    except ImportError:
        print(
            "conformance learn: AALpy is not installed (a dependency since issue 32): "
            "scripts/setup.sh installs it",
            file=sys.stderr,
        )
        return EXIT_HARNESS_ERROR
    from .learner import LearnOptions

    try:
        targets = load_targets(args.targets_file)
    except TargetError as exc:
        return _usage(str(exc))
    target = targets.get(args.target)
    if target is None:
        return _usage(f"unknown target {args.target!r} (conformance targets lists them)")
    protocol = args.protocol or target.protocol
    if protocol != target.protocol:
        return _usage(f"target {target.name} speaks {target.protocol}, not {protocol}")
    role = args.role or ("server" if "server" in target.roles else target.roles[0])
    if role not in target.roles:
        return _usage(f"target {target.name} does not play the {role} role")
    try:
        alphabet = alphabet_for(protocol, role)
    except KeyError as exc:
        known = "; ".join(f"{p}: {', '.join(r)}" for p, r in learnable().items())
        return _usage(f"{exc.args[0]} (alphabets: {known})")
    options = LearnOptions(
        read_window=args.read_window,
        repeats=args.repeats,
        walks_per_state=args.walks_per_state,
        walk_length=args.walk_length,
        seed=args.seed,
    )
    run_id, run_dir = new_run_dir(args.run_dir, args.reports_dir)
    if args.replay:
        return _replay(args, target, alphabet, run_dir, run_id)
    from .mapper import NondeterministicTarget, TargetUnreachable
    from .session import learn_target

    reference = targets.get(REFERENCE_TARGET.format(protocol=protocol))
    reference_model = MealyModel.load(Path(args.reference_model)) if args.reference_model else None
    try:
        run = learn_target(
            target,
            reference,
            alphabet,
            run_dir,
            run_id,
            options,
            reference_model=reference_model,
            replays=args.replays,
            say=lambda line: print(line, flush=True),
        )
    except TargetNotStarted as exc:
        print(f"{target.name}: did not start: {exc}", file=sys.stderr)
        return EXIT_NOT_STARTED
    except TargetError as exc:
        print(f"{target.name}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (NondeterministicTarget, TargetUnreachable) as exc:
        print(f"{target.name}: learning stopped: {exc}", file=sys.stderr)
        return EXIT_NOT_CONFORMANT
    if run.reference_result is not None:
        _print_figures(run.reference_result)
    _print_figures(run.result)
    for item in run.result.disagreements:
        print(
            f"  disagreement resolved by {item.repeats} repeats: {' · '.join(item.word)}: "
            f"once {' · '.join(item.seen)}, else {' · '.join(item.cached)}"
        )
    files = RunFolder(run_dir)
    made = ", ".join(
        path.suffix for key, path in run.files.items() if key in ("json", "dot", "svg")
    )
    print(f"model: {files.learned_model(target.name, '.json').with_suffix('')}{{{made}}}")
    if not run.separations:
        print(f"diff against {run.reference_name}: none, the models are equal")
        print(f"results: {files.learn_dir(target.name)}")
        return EXIT_CONFORMANT
    print(
        f"diff against {run.reference_name}: {len(run.separations)} separating sequence(s), "
        "shortest first (red in the picture)"
    )
    for index, separation in enumerate(run.separations, 1):
        print(f"  {index}. {' · '.join(separation.word)}")
        print(f"     target:    {' · '.join(separation.target_outputs)}")
        print(f"     reference: {' · '.join(separation.reference_outputs)}")
        if run.replays:
            replay = run.replays[index - 1]
            named = (
                "cases " + ", ".join(replay.cases)
                if replay.cases
                else "COVERAGE GAP: no case checks this input"
            )
            print(
                f"     {named}; replayed {replay.reproduced}/{len(replay.runs)}: "
                f"{run.files[f'replay-{index}']}"
            )
    print(f"results: {files.learn_dir(target.name)}")
    return EXIT_NOT_CONFORMANT


def _print_figures(result) -> None:  # noqa: ANN001 - LearnResult
    figures = result.figures()
    print(
        f"{figures['target']} ({figures['protocol']} {figures['role']}): {figures['states']} states, "
        f"{figures['transitions']} transitions over {figures['inputs']} inputs; "
        f"{figures['membership_queries']} membership queries, {figures['hypotheses']} "
        f"equivalence queries ({figures['equivalence_queries']} test words; "
        f"{figures['concrete_queries']} connections, "
        f"{figures['cache_hits']} cache hits), {figures['unprompted_dropped']} unprompted "
        f"message(s) dropped; read window {figures['read_window_s']:g} s; "
        f"wall time {figures['seconds']:.1f} s"
    )


def _replay(args, target, alphabet, run_dir, run_id) -> int:  # noqa: ANN001
    from .learner import running_target
    from .mapper import TargetUnreachable
    from .replay import replay_file

    try:
        with running_target(target, run_dir, run_id) as runtime:
            replayed = replay_file(
                Path(args.replay), runtime, alphabet, max(1, args.replays), args.read_window
            )
    except TargetNotStarted as exc:
        print(f"{target.name}: did not start: {exc}", file=sys.stderr)
        return EXIT_NOT_STARTED
    except TargetUnreachable as exc:
        print(f"{target.name}: {exc}", file=sys.stderr)
        return EXIT_NOT_CONFORMANT
    print(f"replay {' · '.join(replayed.word)} on {target.name}:")
    print(f"  saved target outputs: {' · '.join(replayed.expected)}")
    print(f"  reference outputs:    {' · '.join(replayed.reference)}")
    for outputs in replayed.seen:
        print(f"  seen:                 {' · '.join(outputs)}")
    print("reproduced" if replayed.reproduced else "NOT reproduced")
    return EXIT_CONFORMANT if replayed.reproduced else EXIT_NOT_CONFORMANT


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "learn",
        help="learn a target's state machine (AALpy), draw it, diff it against the reference's",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--target", required=True, help="the target (as for certify)")
    parser.add_argument("--protocol", default=None, help="default: the target's")
    parser.add_argument("--role", default=None, help="the target's role (default: server)")
    parser.add_argument(
        "--targets-file", action="append", default=[], help="TOML targets file (repeatable)"
    )
    parser.add_argument("--run-dir", default=None, help="exact run directory")
    parser.add_argument("--reports-dir", default="reports", help="default run dir's parent")
    parser.add_argument(
        "--read-window",
        type=positive_seconds,
        default=None,
        metavar="S",
        help="seconds read after each input (default: the protocol alphabet's)",
    )
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=DEFAULT_REPEATS,
        help=f"runs of a word whose answer disagrees with the cache (default {DEFAULT_REPEATS})",
    )
    parser.add_argument(
        "--walks-per-state",
        type=positive_int,
        default=DEFAULT_WALKS_PER_STATE,
        help=f"equivalence oracle: random walks from each state (default {DEFAULT_WALKS_PER_STATE})",
    )
    parser.add_argument(
        "--walk-length",
        type=positive_int,
        default=DEFAULT_WALK_LENGTH,
        help=f"equivalence oracle: inputs per walk (default {DEFAULT_WALK_LENGTH})",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="the oracle's random seed")
    parser.add_argument(
        "--replays",
        type=int,
        default=DEFAULT_REPLAYS,
        help=f"concrete runs of each separating sequence (default {DEFAULT_REPLAYS}; 0: none)",
    )
    parser.add_argument(
        "--reference-model",
        default=None,
        metavar="JSON",
        help="the reference's learned model (model.json of an earlier run) instead of learning it",
    )
    parser.add_argument(
        "--replay",
        default=None,
        metavar="FILE",
        help="run a replay file's word on the target (--replays times) instead of learning",
    )
    parser.set_defaults(func=cmd_learn)

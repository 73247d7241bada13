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
import json
import signal
import sys
import threading
from pathlib import Path

from . import __version__
from .argtypes import positive_int, positive_seconds
from .core.requirements import level_with_basis
from .core.results import (
    CONSOLE_WIDTH,
    NOT_STARTED,
    PASSED,
    console_text,
    partial_scope,
    read_results,
)
from .core.run_folder import RunFolder
from .core.selection import hint, no_match_message, select, unmatched
from .core.targets import KNOWN_PROTOCOLS, TargetError, load_targets
from .core.versioned_targets import resolve_versioned
from .versions.cli import install_versioned
from .versions.shard import parse_shard, shard_of
from .jobs import KILLED_SESSIONS, Console
from .runner import (
    EXIT_CONFORMANT,
    EXIT_HARNESS_ERROR,
    EXIT_NOT_CONFORMANT,
    EXIT_NOT_STARTED,
    EXIT_USAGE,
    RunOptions,
    add_impair_options,
    case_ids,
    certify,
    choose_targets,
    impairment_line,
    interop_all,
    interop_pairs,
    narrow_to_cases,
    new_run_dir,
    resolve_impairment,
    suite_case_counts,
)

# The exit statuses are the runner's; certify's are this command's too (README's table).
__all__ = [
    "EXIT_CONFORMANT",
    "EXIT_HARNESS_ERROR",
    "EXIT_NOT_CONFORMANT",
    "EXIT_NOT_STARTED",
    "EXIT_USAGE",
    "build_parser",
    "main",
]


def run_options(args: argparse.Namespace, impairment=None) -> RunOptions:
    """The runner's options of a parsed ``certify`` or ``interop`` command line."""
    return RunOptions(
        targets_file=list(args.targets_file),
        deadline=args.deadline,
        run_timeout=args.run_timeout,
        case_jobs=getattr(args, "case_jobs", 1),
        jobs=args.jobs,
        case=list(args.case or []),
        keyword=args.keyword,
        impairment=impairment,
    )


def usage_error(text: str) -> int:
    print(f"conformance: error: {text}", file=sys.stderr)
    return EXIT_USAGE


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
                f"  {cause['outcome'] or '?':<6} "
                f"{level_with_basis(cause['level'] or '?', cause.get('basis')):<6} {group['target']}: "
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
        f"\nresults: {run_dir}  (summary.json, results.jsonl, allure-results/, junit-*.xml, traces/, and the targets' "
        "own output in logs/)"
    )


def cmd_certify(args: argparse.Namespace) -> int:
    try:
        targets = load_targets(args.targets_file)
        chosen = choose_targets(targets, args.target, args.protocol)
        if args.case:
            chosen = narrow_to_cases(chosen, args.case, explicit=bool(args.target))
        impairment = resolve_impairment(args.impair, args.impair_seed, args.deadline, chosen)
    except TargetError as exc:
        return usage_error(str(exc))
    if args.shard:
        counts = suite_case_counts()
        every = len(chosen)
        chosen = shard_of(chosen, args.shard, lambda t: t.name, lambda t: counts.get(t.protocol, 1))
        print(
            f"shard {args.shard[0]}/{args.shard[1]}: {len(chosen)} of {every} target(s)", flush=True
        )
        if not chosen:
            return EXIT_CONFORMANT
    options = run_options(args, impairment)
    run_id, run_dir = new_run_dir(args.run_dir, args.reports_dir)
    args.run_dir_made = run_dir  # for the lines an interrupt prints
    print(
        f"conformance {__version__}: run {run_id}, certifying "
        f"{', '.join(t.name + ' (' + t.protocol + ')' for t in chosen)}",
        flush=True,
    )
    if impairment_line(impairment):
        print(impairment_line(impairment), flush=True)
    install_versioned(chosen, options.jobs, Console())
    run = certify(chosen, run_dir, run_id, options, Console())
    if run.preflight_failures:
        # One clear error per target its preflight stopped; no per-case records of it.
        for _, error in run.preflight_failures:
            print(f"conformance: error: preflight: {error}", file=sys.stderr)
        if run.not_run:
            print(f"conformance: not run: {', '.join(run.not_run)}", file=sys.stderr)
        print(f"results: {run_dir} (summary.json has preflight_error)", file=sys.stderr)
        return run.exit_code
    if run.unselected:
        for error in run.unselected:
            print(f"conformance: error: {error}", file=sys.stderr)
        print(f"results: {run_dir}", file=sys.stderr)
        return run.exit_code
    print_summary(run.summary, run_dir, RunFolder(run_dir).results)
    for name in run.missing:
        print(
            f"{name}: NOT CONFORMANT (no case result recorded; see {RunFolder(run_dir).pytest_log(name)})"
        )
    print(f"wall time {run.summary['duration_s']:.1f} s")
    return run.exit_code


def cmd_interop(args: argparse.Namespace) -> int:
    """Each client target against each server target, through a recording relay."""
    from .interop.crosscheck import cross_check
    from .interop.pairs import Pair

    if args.all:
        if args.client or args.server:
            return usage_error("--all runs every pair; leave out --client and --server")
        return cmd_interop_all(args)
    if not args.client or not args.server:
        return usage_error("give --client and --server (or --all)")
    if args.protocol or args.jobs > 1:
        return usage_error(f"{'--protocol' if args.protocol else '--jobs'} goes with --all")
    try:
        targets = load_targets(args.targets_file)
        resolve_versioned(targets, [*args.client, *args.server])
        clients = [targets[n] for n in args.client]
        servers = [targets[n] for n in args.server]
    except KeyError as exc:
        return usage_error(f"unknown target {exc}")
    except TargetError as exc:
        return usage_error(str(exc))
    pairs = [(c, s) for c in clients for s in servers if c.protocol == s.protocol]
    problems = [
        f"{c.name} has no launch.client command" for c in clients if not c.can_launch("client")
    ]
    problems += [
        f"{s.name} does not play the server role" for s in servers if "server" not in s.roles
    ]
    if problems or not pairs:
        return usage_error("; ".join(problems) or "no client/server pair speaks the same protocol")
    try:
        impairment = resolve_impairment(
            args.impair, args.impair_seed, args.deadline, clients + servers
        )
    except TargetError as exc:
        return usage_error(str(exc))
    if args.case:
        try:
            narrow_to_cases([c for c, _ in pairs], args.case, explicit=True, interop=True)
        except TargetError as exc:
            return usage_error(str(exc))
    run_id, run_dir = new_run_dir(args.run_dir, args.reports_dir)
    args.run_dir_made = run_dir  # for the lines an interrupt prints
    to_run = [Pair(client.name, server.name, client.protocol) for client, server in pairs]
    install_versioned(clients + servers, 1, Console())
    if impairment_line(impairment):
        print(impairment_line(impairment), flush=True)
    run = interop_pairs(to_run, targets, run_dir, run_id, run_options(args, impairment), Console())
    if run.stopped is not None:
        print(f"conformance: error: preflight: {run.stopped.error}", file=sys.stderr)
        print(f"results: {run_dir} (summary.json has preflight_error)", file=sys.stderr)
        return run.exit_code
    print()
    for rec in run.records:
        print(
            f"  {rec['outcome']:<7} {rec['implementation']} (client) -> {rec.get('peer_implementation')} "
            f"(server): {rec['case_id']}"
        )
        if rec["outcome"] != PASSED and rec.get("message"):
            print(f"          {console_text(rec['message'], rec['case_id'])}")
    gaps = cross_check(run_dir, to_run, targets, args.certified_in)
    if gaps:
        print("\n" + gaps)
    partial = [pair for pair in to_run if pair.partial]
    if partial:
        print(
            f"\npartial run (--case): {', '.join(f'{p.client} -> {p.server}' for p in partial)} ran only the "
            "selected interop cases"
        )
    print(f"\nresults: {run_dir}\nwall time {run.summary['duration_s']:.1f} s")
    return run.exit_code


def cmd_interop_all(args: argparse.Namespace) -> int:
    """Every client-role target against every server-role target of the same
    protocol (conformance/interop/pairs.py), in one run dir with per-pair
    files, then the client x server table (also interop-summary.json)."""
    from .interop.crosscheck import cross_check
    from .interop.pairs import interop_protocols, plan_pairs, table

    try:
        targets = load_targets(args.targets_file)
    except TargetError as exc:
        return usage_error(str(exc))
    have = interop_protocols()
    unknown = [p for p in args.protocol if p not in have]
    if unknown:
        return usage_error(
            f"no interop cases for {', '.join(unknown)}; protocols with interop cases: "
            f"{', '.join(have)}"
        )
    protocols = args.protocol or have
    if args.case:
        # Only the protocols with a selected interop case take part.
        ids = {p: case_ids(p, interop=True) for p in protocols}
        every = [case for cases in ids.values() for case in cases]
        missing = unmatched(args.case, every)
        if missing:
            text, near = no_match_message(missing, every)
            return usage_error(
                f"{text} of the interop suite of {', '.join(protocols)}"
                + (f"; {near}" if near else "")
                + f" ({hint(protocols, interop=True)})"
            )
        protocols = [p for p in protocols if select(ids[p], args.case)]
    pairs = plan_pairs(targets, protocols)
    if not pairs:
        return usage_error("no client/server pair to run")
    try:
        impairment = resolve_impairment(
            args.impair,
            args.impair_seed,
            args.deadline,
            [targets[name] for pair in pairs for name in (pair.client, pair.server)],
        )
    except TargetError as exc:
        return usage_error(str(exc))
    run_id, run_dir = new_run_dir(args.run_dir, args.reports_dir)
    args.run_dir_made = run_dir  # for the lines an interrupt prints
    to_run = [p for p in pairs if not p.skipped]
    print(
        f"conformance {__version__}: run {run_id}, {len(to_run)} interop pair(s) of {len(pairs)}",
        flush=True,
    )
    if impairment_line(impairment):
        print(impairment_line(impairment), flush=True)
    for pair in pairs:
        if pair.skipped:
            print(
                f"\n== skipped {pair.client} (client) -> {pair.server} (server): {pair.skipped}",
                flush=True,
            )
    run = interop_all(
        pairs, protocols, targets, run_dir, run_id, run_options(args, impairment), Console()
    )
    print("\n" + table(pairs))
    gaps = cross_check(run_dir, to_run, targets, args.certified_in)
    if gaps:
        print("\n" + gaps)
    print(
        f"\nresults: {run_dir}  (results.jsonl, {run.pairs_file.name}, coverage-gaps.json, traces/<client>+<server>/)\n"
        f"wall time {run.summary['duration_s']:.1f} s"
    )
    return run.exit_code


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
        type=positive_seconds,
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
        type=positive_seconds,
        default=None,
        metavar="SECONDS",
        help="deadline of each target's whole run: cases not started when it passes are "
        "recorded as error (default: none)",
    )
    certify.add_argument(
        "--case-jobs",
        type=positive_int,
        default=1,
        metavar="N",
        help="run the cases of one target in N pytest-xdist workers; cases that share state "
        "or prerequisites stay serial, a launched target is started once per worker "
        "(default 1: one session, no xdist)",
    )
    certify.add_argument(
        "--jobs",
        type=positive_int,
        default=1,
        metavar="N",
        help="certify up to N targets at once, each its own pytest session; progress lines "
        "are prefixed with the target (default 1: one after the other)",
    )
    certify.add_argument(
        "--shard",
        type=parse_shard,
        default=None,
        metavar="K/N",
        help="only the K-th of N shares of the chosen targets (1-based; the same share on every "
        "machine: docs/versions.md, Sharding)",
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
        "--deadline",
        type=positive_seconds,
        default=3.0,
        help="read deadline in seconds (default 3)",
    )
    interop.add_argument(
        "--run-timeout",
        type=positive_seconds,
        default=None,
        metavar="SECONDS",
        help="deadline of each client x server run (default: none)",
    )
    interop.add_argument(
        "--jobs",
        type=positive_int,
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
    from .learn.cli import register as register_learn

    register_learn(sub)
    from .fuzz.cli import register as register_fuzz

    register_fuzz(sub)
    from .versions.cli import register as register_versions

    register_versions(sub, print_summary)
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

#!/usr/bin/env python3
"""``conformance learn`` measured (issue 32; docs/learn.md): per target the
learned model's states and transitions, the queries and the wall time; over
the reference node's faults, how many the model diff alone separates from
the reference (and whether the cases it names include the fault's own);
over its conformant variants, how many the diff wrongly flags.

    bench/learn_bench.py                               # ripplehost and stomp, every server fault and variant
    bench/learn_bench.py --protocol ripplehost --fault even-msgnos --variant late-answers
    bench/learn_bench.py --no-faults                   # the variants only
    bench/learn_bench.py --json figures.json --markdown table.md

The targets are the ones ``conformance mutation`` certifies: the reference
target's table with ``--fault NAME`` (conformance/mutation.py mutant_table)
or ``--variant NAME`` (variant_table; ``late-answers`` as late as half the
read window, as mutation makes it half the read deadline). The reference is
learnt once per protocol; each target is learnt and diffed against it, and
each separating sequence replayed ``--replays`` times. Exit 0 when every
fault is separated and no variant flagged, else 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from conformance.core.targets import load_targets  # noqa: E402
from conformance.learn.alphabet import alphabet_for  # noqa: E402
from conformance.learn.learner import LearnOptions, learn, running_target  # noqa: E402
from conformance.learn.mapper import NondeterministicTarget, TargetUnreachable  # noqa: E402
from conformance.learn.session import learn_target, reference_name, write_model  # noqa: E402
from conformance.mutation import (  # noqa: E402
    builtin_tables,
    late_seconds,
    mutant_name,
    mutant_table,
    registry,
    targets_toml,
    variant_name,
    variant_specs,
    variant_table,
)

ROLE = "server"


def plan(protocol: str, args: argparse.Namespace, window: float) -> list[tuple[str, str, dict]]:
    """(kind, name, table) of every target to learn besides the reference."""
    tables = builtin_tables()
    reference = tables[reference_name(protocol)]
    rows = []
    if not args.no_faults:
        for spec in registry(protocol).SPECS:
            if spec.role != ROLE or (args.fault and spec.name not in args.fault):
                continue
            rows.append(("fault", spec.name, mutant_table(reference, spec.name, ROLE)))
    if not args.no_variants:
        for spec in variant_specs(protocol):
            if ROLE not in spec.roles or (args.variant and spec.name not in args.variant):
                continue
            table = variant_table(
                reference,
                spec,
                late_seconds(protocol, alphabet_for(protocol, ROLE).late_window(window)),
            )
            rows.append(("variant", spec.name, table))
    return rows


def bench_protocol(protocol: str, args: argparse.Namespace, out: Path) -> dict:
    alphabet = alphabet_for(protocol, ROLE)
    window = args.read_window or alphabet.read_window
    options = LearnOptions(read_window=window)
    rows = plan(protocol, args, window)
    names = {
        (kind, name): (mutant_name if kind == "fault" else variant_name)(protocol, name)
        for kind, name, _ in rows
    }
    targets_file = out / f"{protocol}-targets.toml"
    targets_file.write_text(
        targets_toml({names[(kind, name)]: table for kind, name, table in rows}) or "",
        encoding="utf-8",
    )
    targets = load_targets([str(targets_file)] if rows else [])
    reference = targets[reference_name(protocol)]
    run_dir = out / protocol
    with running_target(reference, run_dir, "bench") as runtime:
        ref = learn(runtime, alphabet, options)
    write_model(run_dir_folder(run_dir), reference.name, ref.model, f"{reference.name}")
    figures = [{"kind": "reference", "name": reference.name, **ref.figures()}]
    print(_line("reference", reference.name, figures[-1]), flush=True)
    expected = {spec.name: set(spec.cases) for spec in registry(protocol).SPECS}
    for kind, name, _ in rows:
        target = targets[names[(kind, name)]]
        started = time.monotonic()
        row = {"kind": kind, "name": name}
        try:
            run = learn_target(
                target,
                None,
                alphabet,
                run_dir,
                "bench",
                options,
                reference_model=ref.model,
                replays=args.replays,
            )
        except (NondeterministicTarget, TargetUnreachable) as exc:
            row.update(
                {
                    "target": target.name,
                    "stopped": str(exc),
                    "separations": None,
                    "seconds": round(time.monotonic() - started, 2),
                }
            )
        else:
            named = sorted({case for replay in run.replays for case in replay.cases})
            row.update(run.result.figures())
            row.update(
                {
                    "separations": len(run.separations),
                    "shortest": list(run.separations[0].word) if run.separations else None,
                    "cases_named": named,
                    "own_case_named": bool(expected.get(name, set()) & set(named)),
                    "coverage_gaps": sum(replay.coverage_gap for replay in run.replays),
                    "replays_reproduced": [
                        f"{replay.reproduced}/{len(replay.runs)}" for replay in run.replays
                    ],
                }
            )
        row["flagged"] = row["separations"] is None or row["separations"] > 0
        figures.append(row)
        print(_line(kind, name, row), flush=True)
    return {"protocol": protocol, "read_window_s": window, "rows": figures, **totals(figures)}


def totals(rows: list[dict]) -> dict:
    """The counts of the issue's figures: faults the model diff separates
    (learning that stopped is counted apart: the target refused the
    harness's connection, or answered a word in several ways), faults whose
    own case is named, variants flagged (a difference, or learning stopped)."""
    faults = [row for row in rows if row["kind"] == "fault"]
    variants = [row for row in rows if row["kind"] == "variant"]
    return {
        "faults": len(faults),
        "faults_separated": sum(bool(row.get("separations")) for row in faults),
        "faults_stopped": sum(bool(_stopped(row)) for row in faults),
        "faults_own_case_named": sum(bool(row.get("own_case_named")) for row in faults),
        "variants": len(variants),
        "variants_flagged": sum(bool(row.get("separations") or _stopped(row)) for row in variants),
    }


def run_dir_folder(run_dir: Path):  # noqa: ANN201 - RunFolder
    from conformance.core.run_folder import RunFolder

    return RunFolder(run_dir)


def _stopped(row: dict) -> str | None:
    """Why learning stopped (the target answered a word in several ways, or
    stopped accepting connections); ``nondeterministic`` in older files."""
    return row.get("stopped") or row.get("nondeterministic")


def _line(kind: str, name: str, row: dict) -> str:
    if _stopped(row):
        return f"{kind:9} {name:32} LEARNING STOPPED after {row['seconds']:.1f} s: {_stopped(row)}"
    text = (
        f"{kind:9} {name:32} {row['states']:3} states {row['transitions']:4} transitions "
        f"{row['membership_queries']:4} MQ {row['equivalence_queries']:4} EQ "
        f"{row['seconds']:6.1f} s"
    )
    if kind != "reference":
        text += f"  separations {row['separations']}"
        if row["separations"]:
            text += f" (shortest {' · '.join(row['shortest'])}; cases {', '.join(row['cases_named']) or 'none: coverage gap'})"
    return text


def markdown(results: list[dict]) -> str:
    lines = []
    for result in results:
        protocol = result["protocol"]
        result = {**result, **totals(result["rows"])}
        lines += [
            f"### {protocol} ({ROLE} role, read window {result['read_window_s']:g} s)",
            "",
            f"Faults separated by the model diff alone: **{result['faults_separated']} of "
            f"{result['faults']}** ({result['faults_own_case_named']} with the fault's own case "
            f"named; learning stopped on {result['faults_stopped']}); conformant variants "
            f"flagged: **{result['variants_flagged']} of {result['variants']}**.",
            "",
            "| kind | name | states | transitions | MQ | EQ test words | time (s) | separating sequences | shortest | fault's own case named |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for row in result["rows"]:
            if _stopped(row):
                lines.append(
                    f"| {row['kind']} | {row['name']} | - | - | - | - | {row['seconds']} | "
                    f"learning stopped: {_stopped(row)[:160]} | - | - |"
                )
                continue
            shortest = " · ".join(row.get("shortest") or []) or "-"
            if row["kind"] != "fault" or not row.get("separations"):
                cases = "-"
            elif row.get("own_case_named"):
                cases = "yes"
            else:
                cases = "no: " + (", ".join(row.get("cases_named") or []) or "coverage gap")
            lines.append(
                f"| {row['kind']} | {row['name']} | {row['states']} | {row['transitions']} | "
                f"{row['membership_queries']} | {row['equivalence_queries']} | {row['seconds']} | "
                f"{row.get('separations', '-') if row['kind'] != 'reference' else '-'} | {shortest} | {cases} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--protocol", action="append", default=[], help="default: ripplehost, stomp"
    )
    parser.add_argument("--fault", action="append", default=[], help="only these faults")
    parser.add_argument("--variant", action="append", default=[], help="only these variants")
    parser.add_argument("--no-faults", action="store_true")
    parser.add_argument("--no-variants", action="store_true")
    parser.add_argument("--read-window", type=float, default=None)
    parser.add_argument("--replays", type=int, default=10)
    parser.add_argument("--out", default=None, help="folder for the run (default: a temporary one)")
    parser.add_argument("--json", default=None, help="write the figures as JSON")
    parser.add_argument("--markdown", default=None, help="write the tables as Markdown")
    parser.add_argument(
        "--render",
        default=None,
        metavar="JSON",
        help="print the Markdown of a --json file and stop",
    )
    args = parser.parse_args(argv)
    if args.render:
        print(markdown(json.loads(Path(args.render).read_text(encoding="utf-8"))))
        return 0
    protocols = args.protocol or ["ripplehost", "stomp"]
    out = Path(args.out or tempfile.mkdtemp(prefix="learn-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"runs in {out}")
    started = time.monotonic()
    results = []
    for protocol in protocols:
        results.append(bench_protocol(protocol, args, out))
        # Written after each protocol, so that a long run keeps what it measured.
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    for result in results:
        print(
            f"{result['protocol']}: faults separated {result['faults_separated']}/{result['faults']} "
            f"(own case named {result['faults_own_case_named']}, learning stopped "
            f"{result['faults_stopped']}), variants flagged "
            f"{result['variants_flagged']}/{result['variants']}"
        )
    print(f"wall time {time.monotonic() - started:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    if args.markdown:
        Path(args.markdown).write_text(markdown(results), encoding="utf-8")
    ok = all(r["faults_separated"] == r["faults"] and r["variants_flagged"] == 0 for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

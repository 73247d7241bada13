#!/usr/bin/env python3
"""The protocol x profile table of docs/impairment-results.md (issue 25):
under each impairment profile that must change no verdict, every reference
node is certified, every fault of its registry must still be caught by its
own case, and every conformant variant must stay CONFORMANT. This is
``conformance mutation --impair PROFILE`` and ``conformance mutation
--variants --impair PROFILE`` run for every protocol and profile, with the
outcome written as a table (and JSON beside it), not typed by hand.

    .venv/bin/python scripts/impairment_matrix.py                    # every profile, ~45 min
    .venv/bin/python scripts/impairment_matrix.py --profile fragment --protocol ripp
    .venv/bin/python scripts/impairment_matrix.py --seed 1234        # replay the seeds of a table

Each (profile, protocol) certification set runs with ``--jobs``
certifications at a time; the late-answers variants, whose runs are long
waits, with ``--case-jobs`` cases at a time, as the variants' own test does.
The seeds are recorded in the table: ``--impair PROFILE --impair-seed N``
replays any one certification. Exit status 0 when every cell holds, 1 when
any verdict changed (the table lists each difference), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import traceback
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from conformance.core import impair  # noqa: E402 (after the sys.path line)
from conformance.core.run_folder import RunFolder  # noqa: E402 (after the sys.path line)
from conformance.core.results import read_results  # noqa: E402 (after the sys.path line)
from conformance.core.targets import TargetError, load_targets  # noqa: E402 (after the sys.path line)
from conformance.jobs import Console  # noqa: E402 (after the sys.path line)
from conformance.mutation import FAULT_REGISTRIES, run_mutation, variant_specs  # noqa: E402 (after the sys.path line)
from conformance.runner import (  # noqa: E402 (after the sys.path line)
    EXIT_HARNESS_ERROR,
    EXIT_USAGE,
    RunOptions,
    certify,
    choose_targets,
    new_run_dir,
    resolve_impairment,
)
from reference_impl.variants import LATE_ANSWERS  # noqa: E402 (after the sys.path line)

MUST_HOLD = ("fragment", "coalesce", "delay", "throttle")
"""The profiles under which no verdict may change (issue 25, item 3);
``stall`` is a profile of its own, certified by hand."""

DEFAULT_OUTPUT = REPO / "docs" / "impairment-results.md"
WHY_NOT_CAUGHT = {
    (
        "ssb",
        "number-replies-by-latest-request",
    ): "two requests are in flight at the node only when both reach it before it answers the first: the "
    "case writes its two request boxes in one write, and a network that delivers that write in pieces "
    "(fragment, throttle) lets the node answer the first before the second arrives, so replies numbered "
    "by the latest request are numbered right. The node is still NOT CONFORMANT: "
    "ssb.boxstream.server.accepts-several-rpc-per-box, whose two requests share one box, fails. Making "
    "the root case of every SSB answer depend on that rule (or on live streams) to force the overlap "
    "would blame the wrong rule for nodes that break those; left as it is, and listed here.",
}
"""Faults that a profile hides from their own case, with the reason (the
table's Differences section; tests/harness/test_impair.py holds the list)."""
THIRD_PARTY = ("ssb-server", "ilp-plugin-btp", "rabbitmq", "ocaml-ripp")
"""Certified clean and under every profile with --third-party (issue 25,
item 5): a verdict that differs is a finding about the node or a harness
bug, each written up under the table."""
LATE_CASE_JOBS = 4
PARAMS = {"stomp": {"idle_seconds": 4}}
"""As in the project's own mutation tests: STOMP's idle-connection cases
watch 4 s of silence instead of the default 10 (the rule is the same)."""


def _one(
    protocol: str,
    profile: impair.Profile,
    seed: int,
    jobs: int,
    case_jobs: int,
    work: Path,
    deadline: float,
) -> dict:
    """Reference, faults and variants of one protocol under one profile."""
    impairment = impair.Impairment(profile, seed)
    refused = impair.refusal(profile, protocol, deadline)
    row: dict = {"protocol": protocol, "profile": profile.text(), "seed": seed, "refused": refused}
    if refused:
        return row
    started = time.monotonic()
    params = PARAMS.get(protocol)
    faults = run_mutation(
        [protocol],
        [],
        jobs,
        work / "faults",
        deadline=deadline,
        progress=lambda line: None,
        impairment=impairment,
        params=params,
    )
    plain = run_mutation(
        [protocol],
        [],
        jobs,
        work / "variants",
        deadline=deadline,
        progress=lambda line: None,
        reference=False,
        faults=False,
        impairment=impairment,
        params=params,
        variants=[name for name in _variant_names(protocol) if name != LATE_ANSWERS],
    )
    late = run_mutation(
        [protocol],
        [],
        1,
        work / "late",
        deadline=deadline,
        progress=lambda line: None,
        reference=False,
        faults=False,
        impairment=impairment,
        variants=[LATE_ANSWERS],
        case_jobs=case_jobs,
        params=params,
    )
    variants = [*plain.variants, *late.variants]
    row.update(
        {
            "reference_conformant": faults.conformant_ok(protocol),
            "reference_not_passed": sorted(
                faults.conformant[protocol].with_outcome("failed", "error", "blocked")
            )
            if protocol in faults.conformant
            else ["not certified"],
            "faults": len(faults.faults),
            "caught": faults.caught,
            "not_caught": [
                {"fault": r.name, "missed": r.missed, "failed elsewhere": r.wrongly_blamed}
                for r in faults.faults
                if not r.caught
            ],
            "variants": len(variants),
            "variants_conformant": sum(v.conformant for v in variants),
            "variants_not_conformant": [
                {"variant": v.name, "not passed": v.not_passed, "hidden": v.hidden}
                for v in variants
                if not v.conformant
            ],
            "seconds": round(time.monotonic() - started, 1),
        }
    )
    return row


def _variant_names(protocol: str) -> list[str]:
    return [spec.name for spec in variant_specs(protocol)]


CERTIFY_TIMEOUT = 1800.0
"""Seconds one certification's session may run (its --run-timeout): a node
that hangs is recorded as such, and the table goes on."""


class _Quiet(Console):
    """The sessions' own lines go nowhere: the matrix prints a line per
    certification itself."""

    def lines(self, texts: list[str], stream=None) -> None:
        pass


def _certify(
    target: str, run_dir: Path, impairment: impair.Impairment | None, deadline: float
) -> dict:
    """One certification of a built-in target, as `conformance certify
    --target TARGET` runs it (conformance/runner): {case: outcome} and where
    the run is."""
    started = time.monotonic()
    try:
        chosen = choose_targets(load_targets([]), [target], [])
        # As the command does: a profile that would break an answer time is refused.
        resolved = resolve_impairment(
            impairment.profile.text() if impairment is not None else None,
            impairment.seed if impairment is not None else None,
            deadline,
            chosen,
        )
        run_id, run_dir = new_run_dir(str(run_dir), "")
        options = RunOptions(deadline=deadline, run_timeout=CERTIFY_TIMEOUT, impairment=resolved)
        code = certify(chosen, run_dir, run_id, options, _Quiet()).exit_code
    except TargetError as exc:
        print(f"impairment_matrix: {target}: {exc}", file=sys.stderr, flush=True)
        code = EXIT_USAGE
    except Exception:
        # A harness bug: this certification has no verdict, the table goes on.
        traceback.print_exc()
        code = EXIT_HARNESS_ERROR
    records = list(read_results(RunFolder(run_dir).results)) if RunFolder(run_dir).is_run() else []
    outcomes = {record["case_id"]: record["outcome"] for record in records}
    messages = {record["case_id"]: record.get("message") or "" for record in records}
    summary = RunFolder(run_dir).summary
    verdict = (
        json.loads(summary.read_text(encoding="utf-8"))["verdict"]
        if summary.is_file()
        else f"no verdict (exit {code})"
    )
    return {
        "outcomes": outcomes,
        "messages": messages,
        "exit": code,
        "verdict": verdict,
        "run_dir": str(run_dir),
        "seconds": round(time.monotonic() - started, 1),
    }


def third_party(
    targets: list[str],
    profiles: list[str],
    seed: int | None,
    work: Path,
    deadline: float,
    output: Path,
) -> list[dict]:
    # The rows of other targets already in the table stay (a rerun of one
    # target replaces its own rows only).
    earlier = output.with_suffix(".json")
    rows: list[dict] = [
        row
        for row in (json.loads(earlier.read_text(encoding="utf-8")) if earlier.is_file() else [])
        if row["target"] not in targets
    ]

    def write() -> None:
        # After every run: an interrupted run keeps what it made.
        output.write_text(
            "# Third-party nodes under impairment\n\n<!-- generated by scripts/impairment_matrix.py "
            "--third-party -->\n" + render_third_party(rows),
            encoding="utf-8",
        )
        output.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")

    for target in targets:
        print(f"impairment_matrix: {target} on clean loopback ...", flush=True)
        clean = _certify(target, work / target / "clean", None, deadline)
        rows.append(
            {"target": target, "profile": "clean", "seed": None, **_brief(clean), "differs": []}
        )
        for name in profiles:
            profile = impair.parse_profile(name)
            this_seed = seed if seed is not None else impair.new_seed()
            print(f"impairment_matrix: {target} under {name} seed={this_seed} ...", flush=True)
            run = _certify(
                target, work / target / name, impair.Impairment(profile, this_seed), deadline
            )
            comparable = (
                "did not start" not in clean["verdict"] and "did not start" not in run["verdict"]
            )
            differs = (
                []
                if not comparable
                else [
                    {
                        "case": case,
                        "clean": clean["outcomes"].get(case, "not run"),
                        "impaired": outcome,
                        "message": run["messages"][case][:400],
                    }
                    for case, outcome in sorted(run["outcomes"].items())
                    if outcome != clean["outcomes"].get(case, "not run")
                ]
            )
            rows.append(
                {
                    "target": target,
                    "profile": profile.text(),
                    "seed": this_seed,
                    **_brief(run),
                    "differs": differs,
                }
            )
            print(
                f"impairment_matrix: {target} under {name}: {run['verdict']}; {len(differs)} case(s) differ",
                flush=True,
            )
            write()
    return rows


def _brief(run: dict) -> dict:
    counts: dict[str, int] = {}
    for outcome in run["outcomes"].values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return {
        "verdict": run["verdict"],
        "counts": counts,
        "run_dir": run["run_dir"],
        "seconds": run["seconds"],
    }


def render_third_party(rows: list[dict]) -> str:
    lines = [
        "",
        "## Third-party nodes under each profile",
        "",
        "Each node certified on clean loopback and under each profile (stall included);",
        "a case whose outcome differs from the clean run is listed under the table, and",
        "explained below it: a finding about the node, or a harness bug fixed.",
        "",
        "| target | profile | seed | verdict | passed / failed / blocked / n/a / error | cases that differ | wall time |",
        "|---|---|---:|---|---|---:|---:|",
    ]
    for row in rows:
        c = row["counts"]
        counts = " / ".join(
            str(c.get(k, 0)) for k in ("passed", "failed", "blocked", "not_applicable", "error")
        )
        # Rows of earlier runs hold the console's line ("target [impl, protocol]: VERDICT (...; root causes
        # listed above)"); newer ones summary.json's verdict.
        verdict = row["verdict"].split("]: ", 1)[-1].replace("; root causes listed above", "")
        lines.append(
            f"| {row['target']} | {row['profile']} | {row['seed'] or ''} | {verdict} | {counts} "
            f"| {len(row['differs']) if row['profile'] != 'clean' else ''} | {row['seconds']:.0f} s |"
        )
    for row in rows:
        if "did not start" in row["verdict"]:
            lines.append(
                f"- {row['target']} {'on clean loopback' if row['profile'] == 'clean' else 'under ' + row['profile']}: "
                f"the target did not start ({row['run_dir']}): no verdict to compare"
            )
        for d in row["differs"]:
            lines.append(
                f"- {row['target']} under {row['profile']}: `{d['case']}` {d['clean']} -> {d['impaired']}: "
                f"{d['message'][:300]}"
            )
    return "\n".join(lines) + "\n"


def holds(row: dict) -> bool:
    return (
        not row["refused"]
        and row["reference_conformant"]
        and row["caught"] == row["faults"]
        and row["variants_conformant"] == row["variants"]
    )


def render(rows: list[dict], command: str, started: str) -> str:
    lines = [
        "# Verdicts under impairment: protocol x profile",
        "",
        "<!-- generated by scripts/impairment_matrix.py; do not edit by hand -->",
        "",
        f"Made by `{command}` (started {started}; docs/impairment.md has the profiles).",
        "Under each profile every connection between the harness and the node goes",
        "through the relay. A cell holds when the reference node is CONFORMANT with",
        "every case passed, every fault of the registry is caught by its own case",
        "(docs/mutation.md, the clean run), and every conformant variant is",
        "CONFORMANT. `--impair PROFILE --impair-seed SEED` replays a row.",
        "",
        "| protocol | profile | seed | reference | faults caught by their own case | variants CONFORMANT | wall time |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    for row in rows:
        if row["refused"]:
            lines.append(
                f"| {row['protocol']} | {row['profile']} | {row['seed']} | refused: {row['refused']} "
                "| | | |"
            )
            continue
        reference = (
            "CONFORMANT"
            if row["reference_conformant"]
            else "NOT PASSING: " + ", ".join(row["reference_not_passed"])
        )
        lines.append(
            f"| {row['protocol']} | {row['profile']} | {row['seed']} | {reference} "
            f"| {row['caught']}/{row['faults']} | {row['variants_conformant']}/{row['variants']} "
            f"| {row['seconds']:.0f} s |"
        )
    differences = [row for row in rows if not row["refused"] and not holds(row)]
    lines += ["", "## Differences from the clean run", ""]
    if not differences:
        lines.append("None: every verdict is the clean run's.")
    for row in differences:
        lines.append(f"- {row['protocol']} under {row['profile']} (seed {row['seed']}):")
        if not row["reference_conformant"]:
            lines.append(f"  - reference not passing: {', '.join(row['reference_not_passed'])}")
        for fault in row["not_caught"]:
            lines.append(
                f"  - fault {fault['fault']} not caught: missed {fault['missed']}, "
                f"failed elsewhere {fault['failed elsewhere']}"
            )
            why = WHY_NOT_CAUGHT.get((row["protocol"], fault["fault"]))
            if why:
                lines.append(f"    Why: {why}")
        for variant in row["variants_not_conformant"]:
            lines.append(
                f"  - variant {variant['variant']}: not passed {variant['not passed']}, "
                f"hidden {variant['hidden']}"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--profile",
        action="append",
        choices=sorted(impair.PROFILES),
        help=f"repeatable; default: {', '.join(MUST_HOLD)}",
    )
    parser.add_argument(
        "--protocol",
        action="append",
        choices=sorted(FAULT_REGISTRIES),
        help="repeatable; default: all",
    )
    parser.add_argument(
        "--seed", type=int, help="the seed of every profile (default: one drawn per profile)"
    )
    parser.add_argument(
        "--jobs", type=int, default=6, help="certifications at a time (default 6: they wait)"
    )
    parser.add_argument(
        "--case-jobs",
        type=int,
        default=LATE_CASE_JOBS,
        help=f"cases at a time in the late-answers variants (default {LATE_CASE_JOBS})",
    )
    parser.add_argument("--deadline", type=float, default=3.0)
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/impairment-matrix"))
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        help="the markdown table (default %(default)s)",
    )
    parser.add_argument(
        "--third-party",
        nargs="*",
        metavar="TARGET",
        help="instead: certify these built-in targets (default: "
        f"{', '.join(THIRD_PARTY)}) clean and under each profile (default: all five), "
        "and write their table to --output (default docs/impairment-third-party.md)",
    )
    parser.add_argument(
        "--from-json",
        nargs="+",
        type=Path,
        metavar="JSON",
        help="only render --output from the JSON rows of earlier runs (e.g. one run per "
        "profile, side by side)",
    )
    args = parser.parse_args(argv)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    if args.from_json:
        rows = [
            row for path in args.from_json for row in json.loads(path.read_text(encoding="utf-8"))
        ]
        order = {name: i for i, name in enumerate(impair.PROFILES)}
        rows.sort(
            key=lambda row: (
                sorted(FAULT_REGISTRIES).index(row["protocol"]),
                order.get(row["profile"].split(":")[0], 99),
            )
        )
        args.output.write_text(
            render(
                rows,
                "scripts/impairment_matrix.py, one run per profile: "
                + "; ".join(sorted({f"--profile {r['profile']} --seed {r['seed']}" for r in rows})),
                datetime.now(UTC).strftime("%Y-%m-%d"),
            ),
            encoding="utf-8",
        )
        args.output.with_suffix(".json").write_text(
            json.dumps(rows, indent=1) + "\n", encoding="utf-8"
        )
        bad = [row for row in rows if not row["refused"] and not holds(row)]
        print(
            f"impairment_matrix: {len(rows) - len(bad)}/{len(rows)} cells hold; table: {args.output}"
        )
        return 1 if bad else 0
    if args.jobs < 1 or args.case_jobs < 1:
        parser.error("--jobs and --case-jobs take a positive number")
    if args.third_party is not None:
        targets = args.third_party or list(THIRD_PARTY)
        output = (
            args.output
            if args.output != DEFAULT_OUTPUT
            else DEFAULT_OUTPUT.with_name("impairment-third-party.md")
        )
        rows = third_party(
            targets,
            args.profile or list(impair.PROFILES),
            args.seed,
            args.work_dir / "third-party",
            args.deadline,
            output,
        )
        changed = sum(bool(row["differs"]) for row in rows if row["target"] in targets)
        print(
            f"impairment_matrix: {changed} of {len(args.profile or impair.PROFILES) * len(targets)} "
            "impaired runs differ from clean; "
            f"table: {output}"
        )
        return 1 if changed else 0
    profiles = args.profile or list(MUST_HOLD)
    protocols = args.protocol or sorted(FAULT_REGISTRIES)
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = "scripts/impairment_matrix.py " + " ".join(argv if argv is not None else sys.argv[1:])
    rows = []
    for name in profiles:
        profile = impair.parse_profile(name)
        seed = args.seed if args.seed is not None else impair.new_seed()
        for protocol in protocols:
            print(f"impairment_matrix: {protocol} under {name} seed={seed} ...", flush=True)
            row = _one(
                protocol,
                profile,
                seed,
                args.jobs,
                args.case_jobs,
                args.work_dir / name / protocol,
                args.deadline,
            )
            rows.append(row)
            verdict = (
                f"refused: {row['refused']}"
                if row["refused"]
                else (
                    f"reference {'CONFORMANT' if row['reference_conformant'] else 'NOT PASSING'}, "
                    f"faults {row['caught']}/{row['faults']}, variants {row['variants_conformant']}/{row['variants']}, "
                    f"{row['seconds']:.0f} s"
                )
            )
            print(f"impairment_matrix: {protocol} under {name}: {verdict}", flush=True)
            # Written after every row: an interrupted run keeps what it made.
            args.output.write_text(render(rows, command.strip(), started), encoding="utf-8")
            args.output.with_suffix(".json").write_text(
                json.dumps(rows, indent=1) + "\n", encoding="utf-8"
            )
    bad = [row for row in rows if not row["refused"] and not holds(row)]
    print(f"impairment_matrix: {len(rows) - len(bad)}/{len(rows)} cells hold; table: {args.output}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

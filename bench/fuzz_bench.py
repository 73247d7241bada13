"""What fuzzing alone finds: ``conformance fuzz`` against the reference
nodes, their faults and their conformant variants (docs/fuzz.md).

    python bench/fuzz_bench.py                          # STOMP and Ripple host servers
    python bench/fuzz_bench.py --protocol ripplehost --budget 20 --shrink-budget 10
    python bench/fuzz_bench.py --fault wrong-receipt-id --fault reply-wrong-msgno
    python bench/fuzz_bench.py --no-variants --json out.json

For each protocol with a machine (conformance/fuzz/engine.py MACHINES):

1. examples per second against the plain reference node over
   ``--reference-seconds`` (which must break no rule);
2. each server fault of the registry (reference_impl/<protocol>/faults.py),
   on a target ``conformance mutation`` would build (mutant_table), fuzzed
   for ``--budget`` seconds: caught or not, the case id blamed and whether
   it is one the fault's registry entry expects, the time and examples to
   the first failure, the length of the shrunk sequence, and whether its
   replay file reproduces the failure (``--replays`` times);
3. each conformant server variant (variant_table), fuzzed for the same
   budget: none may fail.

Every run uses one seed (``--seed``), so the table is reproducible as far
as a live target's timing allows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from conformance.core.run_folder import RunFolder  # noqa: E402
from conformance.core.targets import load_targets  # noqa: E402
from conformance.fuzz.engine import (  # noqa: E402
    MACHINES,
    FuzzOptions,
    fuzz,
    load_replay,
    machine_for,
    replay,
    save_failure,
    start_target,
)
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


@dataclass
class Row:
    kind: str
    """reference, fault or variant."""
    protocol: str
    name: str
    target: str
    examples: int = 0
    seconds: float = 0.0
    failed: bool = False
    case_id: str | None = None
    expected_cases: list[str] = field(default_factory=list)
    seconds_to_failure: float | None = None
    examples_to_failure: int | None = None
    shrunk_actions: int | None = None
    shrunk_messages: int | None = None
    flaky: bool = False
    replays: str = ""
    message: str = ""

    @property
    def right_case(self) -> bool:
        return self.case_id in self.expected_cases


def run_one(row: Row, targets_file: Path, options: FuzzOptions, work: Path, replays: int) -> Row:
    target = load_targets([str(targets_file)])[row.target]
    folder = RunFolder(work / row.target)
    runtime = start_target(target, folder, row.target)
    try:
        result = fuzz(runtime, machine_for(target.protocol, "server"), options)
        row.examples, row.seconds = result.examples, result.seconds
        if result.failure is not None:
            row.failed = True
            row.case_id = result.failure.failure.case_id
            row.message = result.failure.failure.message[:160]
            row.seconds_to_failure = result.seconds_to_failure
            row.examples_to_failure = result.examples_before_failure
            row.shrunk_actions = len(result.failure.actions)
            row.shrunk_messages = sum(
                len(a.get("messages", ())) for a in result.failure.actions if a["do"] == "send"
            )
            row.flaky = result.flaky
            path = save_failure(result, runtime, folder, row.target)
            if replays:
                document = load_replay(path)
                again = sum(
                    replay(document, runtime, options.deadline).reproduced for _ in range(replays)
                )
                row.replays = f"{again}/{replays}"
    finally:
        runtime.stop()
    return row


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    protocols = sorted({p for p, _ in MACHINES})
    parser.add_argument("--protocol", action="append", choices=protocols, default=[])
    parser.add_argument("--fault", action="append", default=[], help="only these faults")
    parser.add_argument("--budget", type=float, default=20.0, help="seconds per fault and variant")
    parser.add_argument("--reference-seconds", type=float, default=20.0)
    parser.add_argument("--shrink-budget", type=float, default=15.0)
    parser.add_argument("--deadline", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--replays", type=int, default=3, help="replays of each saved failure")
    parser.add_argument("--no-variants", action="store_true")
    parser.add_argument("--no-faults", action="store_true")
    parser.add_argument("--json", default=None, help="also write the rows here")
    args = parser.parse_args(argv)

    tables = builtin_tables()
    rows: list[Row] = []
    generated: dict[str, dict] = {}
    for protocol in args.protocol or protocols:
        reference = f"reference-{protocol}"
        generated[reference] = tables[reference]
        rows.append(Row("reference", protocol, reference, reference))
        if not args.no_faults:
            for spec in registry(protocol).SPECS:
                if spec.role != "server" or (args.fault and spec.name not in args.fault):
                    continue
                name = mutant_name(protocol, spec.name)
                generated[name] = mutant_table(tables[reference], spec.name, "server")
                rows.append(
                    Row("fault", protocol, spec.name, name, expected_cases=list(spec.cases))
                )
        if not args.no_variants and not args.fault:
            late = late_seconds(protocol, args.deadline)
            for spec in variant_specs(protocol):
                if "server" not in spec.roles:
                    continue
                name = variant_name(protocol, spec.name)
                generated[name] = variant_table(tables[reference], spec, late)
                rows.append(Row("variant", protocol, spec.name, name))

    work = Path(tempfile.mkdtemp(prefix="fuzz-bench-"))
    targets_file = work / "targets.toml"
    targets_file.write_text(targets_toml(generated), encoding="utf-8")
    started = time.monotonic()
    for number, row in enumerate(rows, 1):
        budget = args.reference_seconds if row.kind == "reference" else args.budget
        options = FuzzOptions(
            budget_s=budget,
            seed=args.seed,
            deadline=args.deadline,
            shrink_seconds=args.shrink_budget,
        )
        run_one(row, targets_file, options, work, args.replays)
        verdict = (
            f"FAILED {row.case_id} after {row.seconds_to_failure:.1f} s "
            f"({row.examples_to_failure} examples), shrunk to {row.shrunk_actions} actions"
            + (f", replays {row.replays}" if row.replays else "")
            if row.failed
            else "no rule broken"
        )
        print(
            f"[{number}/{len(rows)} {time.monotonic() - started:.0f} s] {row.kind} {row.protocol} "
            f"{row.name}: {row.examples} examples in {row.seconds:.1f} s "
            f"({row.examples / row.seconds if row.seconds else 0:.1f}/s): {verdict}",
            flush=True,
        )

    print("\n## Examples per second against the reference nodes\n")
    print("| node | examples | seconds | examples/s | broke a rule |")
    print("|---|---|---|---|---|")
    for row in rows:
        if row.kind == "reference":
            rate = row.examples / row.seconds if row.seconds else 0
            print(
                f"| {row.target} | {row.examples} | {row.seconds:.1f} | {rate:.1f} | "
                f"{row.case_id or 'no'} |"
            )
    faults = [row for row in rows if row.kind == "fault"]
    if faults:
        print(f"\n## Faults (budget {args.budget:g} s each, seed {args.seed})\n")
        print(
            "| protocol | fault | caught | case blamed | expected case | s to failure | shrunk actions | replays |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for row in faults:
            print(
                f"| {row.protocol} | {row.name} | {'yes' if row.failed else 'no'} | "
                f"{row.case_id or ''} | {'yes' if row.right_case else ('no' if row.failed else '')} | "
                f"{'' if row.seconds_to_failure is None else f'{row.seconds_to_failure:.1f}'} | "
                f"{row.shrunk_actions or ''} | {row.replays} |"
            )
        caught = [row for row in faults if row.failed]
        right = [row for row in caught if row.right_case]
        times = [row.seconds_to_failure for row in caught if row.seconds_to_failure is not None]
        lengths = [row.shrunk_actions for row in caught if row.shrunk_actions]
        print(
            f"\ncaught {len(caught)} of {len(faults)} faults ({100 * len(caught) / len(faults):.0f} %), "
            f"{len(right)} under a case the registry expects; median time to the first failure "
            f"{median(times) or 0:.1f} s; shrunk sequences (actions): median "
            f"{median(lengths) or 0:g}, maximum {max(lengths, default=0)}"
        )
        for protocol in sorted({row.protocol for row in faults}):
            of = [row for row in faults if row.protocol == protocol]
            print(f"  {protocol}: caught {sum(r.failed for r in of)} of {len(of)}")
    variants = [row for row in rows if row.kind == "variant"]
    if variants:
        print(f"\n## Conformant variants (budget {args.budget:g} s each)\n")
        print("| protocol | variant | examples | broke a rule |")
        print("|---|---|---|---|")
        for row in variants:
            print(
                f"| {row.protocol} | {row.name} | {row.examples} | "
                f"{row.case_id + ': ' + row.message if row.failed else 'no'} |"
            )
        print(f"\nvariants failed: {sum(row.failed for row in variants)} of {len(variants)}")
    if args.json:
        Path(args.json).write_text(
            json.dumps([asdict(row) for row in rows], indent=2) + "\n", encoding="utf-8"
        )
    references_failed = any(row.failed for row in rows if row.kind in ("reference", "variant"))
    return 1 if references_failed else 0


if __name__ == "__main__":
    sys.exit(main())

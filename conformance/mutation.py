"""``conformance mutation``: the mutation score of the suites.

Each reference node can break one rule on purpose (``--fault NAME``; the
registries are ``reference_impl/<protocol>/faults.py``). The command
certifies the conformant reference node once, then once per fault, with the
ordinary certify machinery (:func:`conformance.runner.run_suite`) on a
generated targets file whose targets copy the reference target with
``--fault NAME`` appended to the launch command of the role the fault
affects. A fault is *caught* when every case the registry expects failed
(outcome ``failed``) and no other case failed or ended in ``error``; cases
``blocked`` by a failed prerequisite are not failures of their own rule.
The score is caught / faults, and must be 100 %.

    conformance mutation                         # both protocols, every fault
    conformance mutation --protocol btp --jobs 2
    conformance mutation --fault ignore-limit    # one fault (and the conformant run)
    conformance mutation --format markdown       # the table of docs/mutation.md
    conformance mutation --variants              # the conformant variants instead of the faults

With ``--variants`` the command certifies the reference node once per
*conformant variant* instead (``--variant NAME``; the registries are
``reference_impl/<protocol>/variants.py``): behaviours the texts allow and
the plain node does not show (split or coalesced writes, late answers,
traffic of the node's own). Each must be CONFORMANT with no case failed,
errored or blocked, and no case not applicable that the plain node passes.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import shutil
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

from .core.run_folder import RunFolder
from .core.results import (
    BLOCKED,
    ERROR,
    FAILED,
    NOT_APPLICABLE,
    PASSED,
    new_run_id,
    read_results,
    summarize,
)
from .core.selection import hint, no_match_message, select, unmatched
from .core.targets import TargetError, load_targets
from .runner import (
    RunOptions,
    add_impair_options,
    impairment_line,
    resolve_impairment,
    run_suite,
    suite_case_ids,
)

FAULT_REGISTRIES = {
    "ssb": "reference_impl.ssb.faults",
    "btp": "reference_impl.btp.faults",
    "stomp": "reference_impl.stomp.faults",
    "ripp": "reference_impl.ripp.faults",
    "ripplehost": "reference_impl.ripplehost.faults",
}
"""Protocol -> the module holding SPECS, REGISTRY and NOT_ISOLABLE."""
VARIANT_REGISTRIES = {
    protocol: f"reference_impl.{protocol}.variants" for protocol in FAULT_REGISTRIES
}
"""Protocol -> the module holding its conformant variants' SPECS."""
NOT_OWN_RULE = (FAILED, ERROR)
"""Outcomes that, outside a fault's expected cases, mean a case blamed the
wrong rule (or could not judge)."""


def registry(protocol: str) -> ModuleType:
    return importlib.import_module(FAULT_REGISTRIES[protocol])


def variant_specs(protocol: str) -> tuple[Any, ...]:
    """The protocol's conformant variants (none when it has no registry)."""
    try:
        module = importlib.import_module(VARIANT_REGISTRIES[protocol])
    except ModuleNotFoundError:
        return ()
    return tuple(module.SPECS)


def late_seconds(protocol: str, deadline: float) -> float:
    """How late ``late-answers`` writes: half the read deadline, or less
    where the protocol's own timing allows less (``LATE_SECONDS_MAX`` of
    its variants module, e.g. RIPP's liveness window)."""
    module = importlib.import_module(VARIANT_REGISTRIES[protocol])
    return min(deadline / 2, getattr(module, "LATE_SECONDS_MAX", deadline / 2))


def registry_problems(protocol: str) -> list[str]:
    """What is wrong between the registry and the suite: a fault expecting a
    case that does not exist or of the other role, a case no fault breaks and
    no reason excuses, a reason for a case that has a fault."""
    module = registry(protocol)
    cases = set(suite_case_ids(protocol))
    covered: set[str] = set()
    problems = []
    for spec in module.SPECS:
        for case in spec.cases:
            if case not in cases:
                problems.append(
                    f"fault {spec.name}: no case {case} in conformance/suites/{protocol}"
                )
            elif case.split(".")[2] != spec.role:
                problems.append(
                    f"fault {spec.name} ({spec.role}) expects {case}, a case of the other role"
                )
            covered.add(case)
    for case in sorted(cases - covered - set(module.NOT_ISOLABLE)):
        problems.append(f"case {case} has no fault and no reason in NOT_ISOLABLE")
    for case in sorted(set(module.NOT_ISOLABLE) & covered):
        problems.append(f"case {case} has a fault, yet NOT_ISOLABLE gives a reason why it cannot")
    for case in sorted(set(module.NOT_ISOLABLE) - cases):
        problems.append(f"NOT_ISOLABLE names {case}, which is not a case")
    return problems


# --- targets ------------------------------------------------------------------------


def builtin_tables() -> dict[str, dict[str, Any]]:
    text = (
        resources.files("conformance.targets").joinpath("builtin.toml").read_text(encoding="utf-8")
    )
    return tomllib.loads(text)["targets"]


def mutant_name(protocol: str, fault: str) -> str:
    return f"mutant-{protocol}-{fault}"


def mutant_table(reference: dict[str, Any], fault: str, role: str) -> dict[str, Any]:
    """The reference target's table with ``--fault NAME`` on the launch
    command of ``role`` (the other role's command is kept as it is).

    A server fault's target plays the server role only: the client cases
    launch the client command, which the fault leaves unchanged, so their
    outcomes are the conformant run's, and running them again would only
    cost time (about half of each certification). A client fault keeps both
    roles: the server cases are cheap, and the client cases read what the
    server launch writes (its identity)."""
    table = copy.deepcopy(reference)
    command = table["launch"][role]
    table["launch"][role] = (
        command + ["--fault", fault] if isinstance(command, list) else f"{command} --fault {fault}"
    )
    if role == "server":
        table["roles"] = ["server"]
        table["launch"].pop("client", None)
    table["description"] = f"{reference.get('description', '')}; fault {fault} (mutation testing)"
    return table


def variant_name(protocol: str, variant: str) -> str:
    return f"variant-{protocol}-{variant}"


def variant_table(reference: dict[str, Any], spec: Any, late_seconds: float) -> dict[str, Any]:
    """The reference target's table with ``--variant NAME`` on the launch
    command of every role the variant changes (``--late-seconds`` too for
    late answers: half the run's read deadline)."""
    table = copy.deepcopy(reference)
    extra = ["--variant", spec.name]
    if spec.name == "late-answers":
        extra += ["--late-seconds", f"{late_seconds:g}"]
    for role in spec.roles:
        command = table["launch"].get(role)
        if command is None:
            continue
        table["launch"][role] = (
            command + extra if isinstance(command, list) else f"{command} {' '.join(extra)}"
        )
    table["description"] = f"{reference.get('description', '')}; conformant variant {spec.name}"
    return table


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
        )
    raise TypeError(f"cannot write {value!r} as TOML")


def targets_toml(tables: dict[str, dict[str, Any]]) -> str:
    """A targets file holding ``tables`` (target name -> table)."""
    lines = [
        "# Generated by `conformance mutation`: the reference targets with one fault each.",
        "",
    ]
    for name, table in tables.items():
        lines.append(f"[targets.{json.dumps(name)}]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in table.items()]
        lines.append("")
    return "\n".join(lines)


# --- runs ---------------------------------------------------------------------------


@dataclass
class Certification:
    target: str
    fault: str | None
    records: dict[str, dict[str, Any]]
    exit_code: int
    run_dir: Path
    seconds: float

    def with_outcome(self, *outcomes: str) -> set[str]:
        return {case for case, rec in self.records.items() if rec["outcome"] in outcomes}


@dataclass
class FaultResult:
    protocol: str
    name: str
    role: str
    description: str
    expected: tuple[str, ...]
    certification: Certification | None = None
    missed: list[str] = field(default_factory=list)
    """Expected cases that did not fail (with their outcome)."""
    wrongly_blamed: list[str] = field(default_factory=list)
    """Other cases that failed or ended in error."""

    @property
    def failed(self) -> list[str]:
        return sorted(self.certification.with_outcome(FAILED)) if self.certification else []

    @property
    def blocked(self) -> list[str]:
        return sorted(self.certification.with_outcome(BLOCKED)) if self.certification else []

    @property
    def caught(self) -> bool:
        return self.certification is not None and not self.missed and not self.wrongly_blamed


def judge(result: FaultResult) -> FaultResult:
    records = result.certification.records if result.certification else {}
    result.missed = [
        f"{case} ({records[case]['outcome'] if case in records else 'not run'})"
        for case in result.expected
        if records.get(case, {}).get("outcome") != FAILED
    ]
    result.wrongly_blamed = [
        f"{case} ({rec['outcome']})"
        for case, rec in sorted(records.items())
        if case not in result.expected and rec["outcome"] in NOT_OWN_RULE
    ]
    return result


def certify_one(
    target_name: str,
    fault: str | None,
    targets_file: Path,
    work_dir: Path,
    deadline: float,
    resume: bool = False,
    case_jobs: int = 1,
    cases: list[str] | None = None,
    impairment: Any = None,
) -> Certification:
    """One certification of ``target_name`` through runner.run_suite (one
    pytest session in a child process), in its own run directory. With
    ``resume``, a run directory that already holds a finished run (its
    summary.json) is read instead of certified again."""

    target = load_targets([str(targets_file)])[target_name]
    run_id = new_run_id()
    run_dir = work_dir / target_name
    started = time.monotonic()
    if resume and RunFolder(run_dir).summary.is_file():
        code = json.loads(RunFolder(run_dir).summary.read_text(encoding="utf-8")).get(
            "exit_code", 0
        )
    else:
        if run_dir.exists():
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True)
        options = RunOptions(
            targets_file=[str(targets_file)],
            deadline=deadline,
            case_jobs=case_jobs,
            case=list(cases or []),
            impairment=impairment,
        )
        code = run_suite(target, run_dir, run_id, options)
        records = list(read_results(RunFolder(run_dir).results))
        RunFolder(run_dir).summary.write_text(
            json.dumps({"exit_code": code, **summarize(records)}), encoding="utf-8"
        )
    records = {
        rec["case_id"]: rec
        for rec in read_results(RunFolder(run_dir).results)
        if rec["target"] == target_name
    }
    return Certification(target_name, fault, records, code, run_dir, time.monotonic() - started)


@dataclass
class VariantResult:
    protocol: str
    name: str
    roles: tuple[str, ...]
    description: str
    allowed_by: str
    certification: Certification | None = None
    hidden: list[str] = field(default_factory=list)
    """Cases not applicable to the variant that the plain node passes: a
    check the variant made the suite skip."""

    @property
    def not_passed(self) -> list[str]:
        """Cases failed, errored or blocked, with their outcome and level."""
        if self.certification is None:
            return ["not certified"]
        return [
            f"{case} ({rec['outcome']}, {rec.get('level', '?')})"
            for case, rec in sorted(self.certification.records.items())
            if rec["outcome"] in (FAILED, ERROR, BLOCKED)
        ]

    @property
    def conformant(self) -> bool:
        return (
            self.certification is not None
            and bool(self.certification.records)
            and not self.not_passed
            and not self.hidden
        )


@dataclass
class MutationRun:
    conformant: dict[str, Certification]
    faults: list[FaultResult]
    not_isolable: dict[str, dict[str, str]]
    seconds: float
    variants: list[VariantResult] = field(default_factory=list)

    @property
    def caught(self) -> int:
        return sum(result.caught for result in self.faults)

    def conformant_ok(self, protocol: str) -> bool:
        cert = self.conformant.get(protocol)
        if cert is None or not cert.records:
            return False
        return summarize(list(cert.records.values()))["conformant"] and not cert.with_outcome(
            FAILED, ERROR, BLOCKED
        )

    @property
    def ok(self) -> bool:
        if not all(self.conformant_ok(p) for p in self.conformant):
            return False
        if self.variants and not all(result.conformant for result in self.variants):
            return False
        return bool(self.faults or self.variants) and self.caught == len(self.faults)


def run_mutation(
    protocols: list[str],
    fault_names: list[str],
    jobs: int,
    work_dir: Path,
    deadline: float = 3.0,
    progress=print,
    resume: bool = False,
    reference: bool = True,
    faults: bool = True,
    params: dict[str, Any] | None = None,
    variants: list[str] | None = None,
    case_jobs: int = 1,
    cases: list[str] | None = None,
    impairment: Any = None,
) -> MutationRun:
    """Certify each protocol's reference node without a fault (unless
    ``reference`` is False) and once per fault of its registry (only the
    ``fault_names`` given, when any; none when ``faults`` is False),
    ``jobs`` certifications at a time. ``params`` are set on every target
    certified (e.g. a shorter ``idle_seconds`` for the project's own tests).
    ``variants``: the conformant variants to certify too (an empty list: all
    of each protocol's; None: none). ``case_jobs``: cases of one
    certification run at once (``certify --case-jobs``), for the variants
    whose runs are long waits (late answers). ``cases``: ``--case``
    patterns: every certification runs only the selected cases (and their
    prerequisites), a fault is judged on its expected cases that are
    selected, and a fault none of whose expected cases is selected is left
    out; a case outside the selection that a fault wrongly fails cannot be
    seen. ``impairment``: every certification through the impairment relay
    (core/impair.Impairment, ``--impair``), whose verdicts must be the
    clean run's (docs/impairment.md)."""
    started = time.monotonic()
    references = builtin_tables()
    tables: dict[str, dict[str, Any]] = {}
    plans: list[tuple[str, str | None, FaultResult | None]] = []  # (target, fault, result)
    results: list[FaultResult] = []
    variant_results: list[VariantResult] = []
    for protocol in protocols:
        reference_name = f"reference-{protocol}"
        if reference:
            tables[reference_name] = references[reference_name]
            plans.append((reference_name, None, None))
        for spec in registry(protocol).SPECS if faults else ():
            if fault_names and spec.name not in fault_names:
                continue
            expected = tuple(select(spec.cases, cases)) if cases else spec.cases
            if not expected:
                continue  # --case selects none of the cases this fault breaks
            name = mutant_name(protocol, spec.name)
            tables[name] = mutant_table(references[reference_name], spec.name, spec.role)
            result = FaultResult(protocol, spec.name, spec.role, spec.description, expected)
            results.append(result)
            plans.append((name, spec.name, result))
        for vspec in variant_specs(protocol) if variants is not None else ():
            if variants and vspec.name not in variants:
                continue
            name = variant_name(protocol, vspec.name)
            tables[name] = variant_table(
                references[reference_name], vspec, late_seconds(protocol, deadline)
            )
            variant_results.append(
                VariantResult(
                    protocol, vspec.name, vspec.roles, vspec.description, vspec.allowed_by
                )
            )
            plans.append((name, None, variant_results[-1]))
    for table in tables.values():
        table["params"] = {**table.get("params", {}), **(params or {})}
    work_dir.mkdir(parents=True, exist_ok=True)
    targets_file = work_dir / "mutants.toml"
    targets_file.write_text(targets_toml(tables), encoding="utf-8")
    conformant: dict[str, Certification] = {}

    def run(plan: tuple[str, str | None, FaultResult | None]) -> None:
        target, fault, result = plan
        cert = certify_one(
            target, fault, targets_file, work_dir, deadline, resume, case_jobs, cases, impairment
        )
        if result is None:
            conformant[target.removeprefix("reference-")] = cert
            failed = sorted(cert.with_outcome(FAILED, ERROR, BLOCKED))
            progress(
                f"== {target} (no fault): {len(cert.records)} cases, "
                f"{'not passed: ' + ', '.join(failed) if failed else 'no case failed'} "
                f"({cert.seconds:.0f} s)"
            )
            return
        result.certification = cert
        if isinstance(result, VariantResult):
            problems = result.not_passed
            progress(
                f"== {target}: {'CONFORMANT' if not problems else 'NOT PASSING: ' + ', '.join(problems)} "
                f"({cert.seconds:.0f} s)"
            )
            return
        judge(result)
        progress(
            f"== {target}: {'caught' if result.caught else 'NOT CAUGHT'} "
            f"(failed: {', '.join(result.failed) or 'none'}) ({cert.seconds:.0f} s)"
        )

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for future in [pool.submit(run, plan) for plan in plans]:
            future.result()
    for variant in variant_results:  # a check the variant made the suite skip hides a verdict
        plain = conformant.get(variant.protocol)
        if plain is not None and variant.certification is not None:
            variant.hidden = sorted(
                case
                for case in variant.certification.with_outcome(NOT_APPLICABLE)
                if plain.records.get(case, {}).get("outcome") == PASSED
            )
    not_isolable = {p: dict(registry(p).NOT_ISOLABLE) for p in protocols}
    return MutationRun(
        conformant, results, not_isolable, time.monotonic() - started, variant_results
    )


# --- output -------------------------------------------------------------------------


def render_text(run: MutationRun) -> str:
    lines = []
    for protocol, cert in run.conformant.items():
        verdict = (
            "CONFORMANT, no case failed"
            if run.conformant_ok(protocol)
            else ("NOT PASSING: " + ", ".join(sorted(cert.with_outcome(FAILED, ERROR, BLOCKED))))
        )
        lines.append(f"reference-{protocol} (no fault): {verdict}")
    lines.append("")
    for result in run.faults:
        lines.append(
            f"{result.protocol} {result.name} [{result.role}]: {'caught' if result.caught else 'NOT CAUGHT'}"
        )
        lines.append(f"    expected: {', '.join(result.expected)}")
        lines.append(f"    failed:   {', '.join(result.failed) or 'none'}")
        if result.blocked:
            lines.append(f"    blocked:  {', '.join(result.blocked)}")
        if result.missed:
            lines.append(f"    expected but not failed: {', '.join(result.missed)}")
        if result.wrongly_blamed:
            lines.append(
                f"    failed outside the expected cases: {', '.join(result.wrongly_blamed)}"
            )
    for variant in run.variants:
        lines.append(
            f"{variant.protocol} variant {variant.name} [{'/'.join(variant.roles)}]: "
            f"{'CONFORMANT' if variant.conformant else 'NOT CONFORMANT'}"
        )
        if variant.not_passed:
            lines.append(f"    not passed: {', '.join(variant.not_passed)}")
        if variant.hidden:
            lines.append(
                f"    not applicable, although the plain node passes them: {', '.join(variant.hidden)}"
            )
    if run.variants:
        good = sum(variant.conformant for variant in run.variants)
        lines.append(f"variants: {good}/{len(run.variants)} certified CONFORMANT")
    lines.append("")
    total = len(run.faults)
    if not total:
        lines.append(f"wall time {run.seconds:.0f} s")
        return "\n".join(lines)
    lines.append(
        f"mutation score: {run.caught}/{total} faults caught"
        + (f" ({100 * run.caught / total:.0f} %)" if total else "")
    )
    lines.append(f"wall time {run.seconds:.0f} s")
    return "\n".join(lines)


def render_markdown(run: MutationRun) -> str:
    """The table of docs/mutation.md (tests/mutation checks it against the registries)."""
    lines = []
    for protocol in run.conformant:
        lines.append(f"### {protocol.upper()}")
        lines.append("")
        ok = run.conformant_ok(protocol)
        lines.append(
            f"Conformant reference node (`reference-{protocol}`, no fault): "
            f"{'CONFORMANT, no case failed' if ok else 'NOT PASSING'}."
        )
        lines.append("")
        lines.append("| fault | role | breaks | expected cases | cases that failed | caught |")
        lines.append("|---|---|---|---|---|---|")
        for result in (r for r in run.faults if r.protocol == protocol):
            lines.append(
                f"| `{result.name}` | {result.role} | {result.description} | "
                f"{'<br>'.join('`' + c + '`' for c in result.expected)} | "
                f"{'<br>'.join('`' + c + '`' for c in result.failed) or 'none'} | "
                f"{'yes' if result.caught else '**no**'} |"
            )
        lines.append("")
        reasons = run.not_isolable.get(protocol, {})
        if reasons:
            lines.append("Cases without a fault, and why their rule cannot be broken alone:")
            lines.append("")
            lines += [f"- `{case}`: {reason}" for case, reason in sorted(reasons.items())]
            lines.append("")
    if run.variants:
        lines.append(render_variants_markdown(run))
    total = len(run.faults)
    if not total:
        return "\n".join(lines) + "\n"
    lines.append(
        f"**Mutation score: {run.caught}/{total} faults caught"
        + (f" ({100 * run.caught / total:.0f} %)**" if total else "**")
    )
    return "\n".join(lines) + "\n"


def render_variants_markdown(run: MutationRun) -> str:
    """The conformant variants' table of docs/mutation.md."""
    lines = [
        "| protocol | variant | roles | behaviour | allowed by | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for variant in run.variants:
        verdict = (
            "CONFORMANT"
            if variant.conformant
            else (
                "**NOT CONFORMANT**: "
                + ", ".join(variant.not_passed + [f"{c} (not applicable)" for c in variant.hidden])
            )
        )
        lines.append(
            f"| {variant.protocol} | `{variant.name}` | {'/'.join(variant.roles)} | {variant.description} | "
            f"{variant.allowed_by} | {verdict} |"
        )
    good = sum(variant.conformant for variant in run.variants)
    lines += ["", f"**Variants certified CONFORMANT: {good}/{len(run.variants)}**", ""]
    return "\n".join(lines)


def cmd_mutation(args: argparse.Namespace) -> int:
    protocols = args.protocol or sorted(FAULT_REGISTRIES)
    known = {spec.name for p in protocols for spec in registry(p).SPECS}
    unknown = [name for name in args.fault if name not in known]
    if unknown:
        print(
            f"conformance: error: unknown fault(s) {', '.join(unknown)} for {', '.join(protocols)}",
            file=sys.stderr,
        )
        return 2
    problems = [p for protocol in protocols for p in registry_problems(protocol)]
    for problem in problems:
        print(f"registry: {problem}", file=sys.stderr)
    if args.fault:
        protocols = [p for p in protocols if any(s.name in args.fault for s in registry(p).SPECS)]
    work_dir = Path(args.run_dir or Path(args.reports_dir) / "mutation" / new_run_id()).resolve()
    args.run_dir_made = work_dir  # for the lines an interrupt prints
    if args.variants or args.variant:
        known_variants = {spec.name for p in protocols for spec in variant_specs(p)}
        unknown = [name for name in args.variant if name not in known_variants]
        if unknown:
            print(
                f"conformance: error: unknown variant(s) {', '.join(unknown)} for {', '.join(protocols)}",
                file=sys.stderr,
            )
            return 2
        protocols = [
            p
            for p in protocols
            if variant_specs(p)
            and (not args.variant or any(s.name in args.variant for s in variant_specs(p)))
        ]
    if args.case:
        every = [case for p in protocols for case in suite_case_ids(p)]
        missing = unmatched(args.case, every)
        if missing:
            text, near = no_match_message(missing, every)
            print(
                f"conformance: error: {text} of the suite of {', '.join(protocols)}"
                + (f"; {near}" if near else "")
                + f" ({hint(protocols)})",
                file=sys.stderr,
            )
            return 2
        protocols = [p for p in protocols if select(suite_case_ids(p), args.case)]
    try:
        references = load_targets([])
        impairment = resolve_impairment(
            args.impair,
            args.impair_seed,
            args.deadline,
            [references[f"reference-{p}"] for p in protocols],
        )
    except TargetError as exc:
        print(f"conformance: error: {exc}", file=sys.stderr)
        return 2
    if impairment_line(impairment):
        print(impairment_line(impairment), file=sys.stderr, flush=True)
    run = run_mutation(
        protocols,
        args.fault,
        args.jobs,
        work_dir,
        args.deadline,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
        resume=args.resume,
        faults=not (args.variants or args.variant),
        case_jobs=args.case_jobs,
        variants=list(args.variant) if (args.variants or args.variant) else None,
        cases=args.case,
        impairment=impairment,
    )
    print(render_markdown(run) if args.format == "markdown" else render_text(run))
    if args.case:
        print(
            f"partial run (--case {' '.join(args.case)}): each certification ran the selected cases and their "
            "prerequisites only; faults are judged on their selected expected cases, those breaking none of "
            "them were left out, and a case outside the selection that a fault fails is not seen",
            file=sys.stderr,
        )
    print(f"runs: {work_dir}", file=sys.stderr)
    return 0 if run.ok and not problems else 1


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "mutation",
        help="certify the reference nodes with each fault: the mutation score",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument(
        "--protocol",
        action="append",
        default=[],
        choices=sorted(FAULT_REGISTRIES),
        help="only this protocol (repeatable); default: every protocol with a fault registry",
    )
    parser.add_argument("--fault", action="append", default=[], help="only this fault (repeatable)")
    parser.add_argument(
        "--variants",
        action="store_true",
        help="certify the conformant variants (each must be CONFORMANT) instead of the faults",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="only this conformant variant (repeatable; implies --variants)",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="certifications run at once (default 1)"
    )
    parser.add_argument(
        "--format", choices=["text", "markdown"], default="text", help="table format"
    )
    parser.add_argument(
        "--reports-dir", default="reports", help="where runs are written (default: reports)"
    )
    parser.add_argument("--run-dir", default=None, help="exact directory for the runs")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="with --run-dir: reuse the certifications a previous run there finished "
        "(delete a target's directory to certify it again)",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=3.0,
        help="seconds to wait for bytes a target must send (default 3)",
    )
    parser.add_argument(
        "--case-jobs",
        type=int,
        default=1,
        metavar="N",
        help="cases of one certification run at once (certify --case-jobs; default 1)",
    )
    parser.add_argument(
        "--case",
        action="append",
        default=[],
        metavar="PATTERN",
        help="only the cases whose id matches (id or shell-style glob; repeatable): a partial "
        "score, judged on the selected cases; faults breaking none of them are left out",
    )
    add_impair_options(parser)
    parser.set_defaults(func=cmd_mutation)

"""Interop as a cross-check of the suites.

Two nodes that each pass every MUST of their suite should work together. When
a client and a server that were both certified CONFORMANT fail an interop
case, one of them breaks a rule no case checks (or the texts leave a gap the
two read differently): a *coverage gap*, with the two certifications and the
failing exchange as evidence. ``conformance interop`` reports them after the
pair table and writes them to ``coverage-gaps.json`` in its run dir; the
nightly lists them in its verdict. Each one found is to get the case that
would have caught it, or an erratum (docs/mutation.md, "Interop as a
cross-check").

The certifications are read from run dirs (``--certified-in DIR``,
repeatable; by default the run dirs beside the interop run's): for each
target, the newest run whose records cover every case of its suite for each
role it plays and whose summary.json does not mark it ``partial`` (a
partial run, ``-k`` or ``--case``, is no certification).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core.run_folder import RunFolder
from ..core.results import FAILED, PASSED, console_text, read_results
from ..runner.plan import suite_case_ids

LOOKBACK = 200
"""Run dirs read per directory, newest first."""


@dataclass
class Certification:
    target: str
    run_dir: str
    conformant: bool
    cases: int
    must_failed: list[str] = field(default_factory=list)


@dataclass
class CoverageGap:
    client: str
    server: str
    protocol: str
    client_certification: Certification
    server_certification: Certification
    failing: list[dict[str, Any]]
    """The interop cases of the pair that did not pass: case id, outcome,
    message, trace file."""


def _role_of(case_id: str) -> str:
    parts = case_id.split(".")
    return parts[2] if len(parts) > 3 else ""


def suite_cases_by_role(protocol: str) -> dict[str, set[str]]:
    by_role: dict[str, set[str]] = {}
    for case in suite_case_ids(protocol):
        by_role.setdefault(_role_of(case), set()).add(case)
    return by_role


def latest_certifications(
    dirs: list[Path], wanted: dict[str, tuple[str, tuple[str, ...]]]
) -> dict[str, Certification]:
    """For each target in ``wanted`` (name -> (protocol, roles)), its newest
    complete certification under ``dirs`` (run dirs, or directories of run
    dirs). A run's records for a target count when they cover every suite
    case of each of its roles; interop records (with a peer) never do."""
    runs: list[Path] = []
    for base in dirs:
        if RunFolder(base).is_run():
            runs.append(base)
        else:
            try:
                runs += [path.parent for path in base.glob("*/results.jsonl")]
            except OSError:
                continue
    runs.sort(key=lambda run: RunFolder(run).results.stat().st_mtime, reverse=True)
    suites: dict[str, dict[str, set[str]]] = {}
    found: dict[str, Certification] = {}
    for run in runs[: LOOKBACK * max(1, len(dirs))]:
        if len(found) == len(wanted):
            break
        partial = partial_targets(run)
        by_target: dict[str, dict[str, dict]] = {}
        try:
            for record in read_results(RunFolder(run).results):
                if record.get("peer_implementation") is None and record["target"] in wanted:
                    by_target.setdefault(record["target"], {})[record["case_id"]] = record
        except (OSError, ValueError, KeyError):
            continue
        for name, records in by_target.items():
            if name in found or name in partial or "*" in partial:
                continue  # a partial run certifies nothing, whatever it recorded
            protocol, roles = wanted[name]
            suite = suites.setdefault(protocol, suite_cases_by_role(protocol))
            needed = set().union(*(suite.get(role, set()) for role in roles))
            if not needed or not needed <= set(records):
                continue  # a partial run certifies nothing
            must_failed = sorted(
                case
                for case, rec in records.items()
                if rec["outcome"] == FAILED and rec.get("level") == "MUST"
            )
            # The harness's verdict: no MUST failed, and no case left in error or unjudged.
            conformant = not must_failed and all(
                rec["outcome"] in (PASSED, FAILED, "not_applicable") for rec in records.values()
            )
            found[name] = Certification(name, str(run), conformant, len(records), must_failed)
    return found


def partial_targets(run: Path) -> set[str]:
    """The targets a run's summary.json marks ``partial`` (a selection left
    cases of their suite out); ``{"*"}`` when it marks the run partial
    without saying which. A run without a readable summary marks none."""
    try:
        summary = json.loads(RunFolder(run).summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    if not isinstance(summary, dict):
        return set()
    marked = {
        str(group.get("target"))
        for group in summary.get("targets") or []
        if isinstance(group, dict) and group.get("partial")
    }
    return marked or ({"*"} if summary.get("partial") else set())


def coverage_gaps(
    pairs: list[Any],
    interop_records: list[dict[str, Any]],
    certifications: dict[str, Certification],
    implementations: dict[str, str],
) -> list[CoverageGap]:
    """The pairs that are not interoperable although both targets are
    certified CONFORMANT. ``pairs`` have ``client``, ``server``,
    ``protocol`` and ``verdict``; ``implementations``: target name -> its
    implementation (what an interop record names its peer by)."""
    gaps = []
    for pair in pairs:
        if pair.verdict != "NOT interoperable":
            continue
        client, server = certifications.get(pair.client), certifications.get(pair.server)
        if client is None or server is None or not (client.conformant and server.conformant):
            continue
        failing = [
            {
                "case_id": rec["case_id"],
                "outcome": rec["outcome"],
                "level": rec.get("level"),
                "message": rec.get("message", ""),
                "trace_file": rec.get("trace_file"),
            }
            for rec in interop_records
            if rec["target"] == pair.client
            and rec.get("peer_implementation") == implementations.get(pair.server)
            and rec["outcome"] not in (PASSED, "not_applicable")
        ]
        gaps.append(CoverageGap(pair.client, pair.server, pair.protocol, client, server, failing))
    return gaps


def write_gaps(run_dir: Path, gaps: list[CoverageGap], searched: list[Path]) -> Path:
    path = RunFolder(run_dir).coverage_gaps
    path.write_text(
        json.dumps(
            {"searched": [str(d) for d in searched], "gaps": [asdict(g) for g in gaps]}, indent=2
        )
        + "\n",
        encoding="utf-8",
    )
    return path


def render(gaps: list[CoverageGap]) -> str:
    if not gaps:
        return ""
    lines = [
        f"coverage gaps: {len(gaps)} pair(s) of CONFORMANT targets that do not interoperate "
        "(a rule no case checks, or a gap in the texts):"
    ]
    for gap in gaps:
        lines.append(
            f"  {gap.client} (client, CONFORMANT in {gap.client_certification.run_dir}) -> "
            f"{gap.server} (server, CONFORMANT in {gap.server_certification.run_dir})"
        )
        for failing in gap.failing:
            # Past the record's "<case id> [<level>, <citation>]: " prefix: what happened.
            first = console_text(failing["message"] or "", failing["case_id"])
            lines.append(f"    {failing['outcome']} {failing['case_id']}: {first}")
            if failing.get("trace_file"):
                lines.append(f"      trace: {failing['trace_file']}")
    return "\n".join(lines)


def cross_check(
    run_dir: Path, pairs: list[Any], targets: dict[str, Any], certified_in: list[str]
) -> str:
    """Find, write and render the coverage gaps of an interop run."""
    searched = [Path(d).resolve() for d in certified_in] or [run_dir.parent]
    wanted = {}
    for pair in pairs:
        for name in (pair.client, pair.server):
            target = targets[name]
            wanted[name] = (target.protocol, tuple(target.roles))
    certifications = latest_certifications([d for d in searched if d != run_dir], wanted)
    records = list(read_results(RunFolder(run_dir).results))
    gaps = coverage_gaps(
        pairs, records, certifications, {name: targets[name].implementation for name in wanted}
    )
    write_gaps(run_dir, gaps, searched)
    return render(gaps)

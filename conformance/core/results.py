"""Result records, written one JSON line per case as soon as the case ends.

Each line is flushed and fsync'd before the next case starts, so a run that
is killed keeps every case it finished; a reader skips a torn last line.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from enum import StrEnum
from pathlib import Path
from typing import Any, Iterator

from .. import __version__ as HARNESS_VERSION
from .run_folder import RunFolder


class Outcome(StrEnum):
    """A case's outcome; its value is what results.jsonl records."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_APPLICABLE = "not_applicable"
    ERROR = "error"
    """The case could not give a verdict (harness problem, target not
    started); counts as not passed."""
    BLOCKED = "blocked"
    """A prerequisite case (``depends``) did not pass in the same run, so
    this case could not tell its own rule apart: not passed, but not a
    failure of its own rule either. The message names the prerequisite, the
    root cause."""


# The values as plain strings, as records and summaries hold them (and as
# pytest-xdist can send them between processes: it sends no str subclass).
PASSED = Outcome.PASSED.value
FAILED = Outcome.FAILED.value
NOT_APPLICABLE = Outcome.NOT_APPLICABLE.value
ERROR = Outcome.ERROR.value
BLOCKED = Outcome.BLOCKED.value
OUTCOMES = tuple(outcome.value for outcome in Outcome)

CONFORMANT = "CONFORMANT"
NOT_CONFORMANT = "NOT CONFORMANT"
NOT_STARTED = "NOT CERTIFIED: the target did not start"
"""The verdicts (summarize): every applicable MUST case passed; some MUST
case failed for its own rule (or errored, or was blocked, with the target
started); the target (a role of it) did not start and no MUST case failed
for its own rule, so the run says nothing about the rules."""


def new_run_id() -> str:
    """Sortable by time, unique across machines."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class ResultRecord:
    run_id: str
    time: str
    harness_version: str
    target: str
    implementation: str
    implementation_version: str
    protocol: str
    role: str
    case_id: str
    level: str
    citation: str
    outcome: str
    duration_s: float
    message: str = ""
    peer_implementation: str | None = None
    """The implementation on the other side when the harness drives one
    implementation against another (interop runs); None when the harness
    itself is the peer."""
    trace_file: str | None = None
    host: str = field(default_factory=socket.gethostname)
    depends: list[str] = field(default_factory=list)
    """Case ids of the prerequisites the case declares (``depends``)."""
    errata: list[str] = field(default_factory=list)
    """Errata ids the case follows; ``citation`` names them too."""
    blocked_by: str | None = None
    """For a ``blocked`` case: the root cause, the case that failed (or
    errored) for its own rule. Files written before these three fields
    existed lack them; readers treat them as empty."""
    start_failure: bool = False
    """For an ``error`` case: it ended because the target (a role of it)
    did not start (targets.TargetNotStarted: it exited before it was ready
    or before its client connected, was not ready in time, could not be
    run, or an adapter failed printing nothing), not because of any rule.
    Files written before this field existed lack it: false."""
    prerequisite_only: bool = False
    """The case was not selected (``--case``, ``-k``, ``--deselect``) but
    ran because a selected case depends on it (conformance.core.selection).
    Files written before this field existed lack it: false."""
    basis: str = "keyword"
    """What binds ``level`` (requirements.BasisKind): ``keyword`` (the cited
    sentence's RFC 2119 keyword), ``plain-words``, ``wire-format``,
    ``profile``, ``erratum`` or ``inference``, with its note after a colon
    (``inference: <argument>``). Files written before this field existed
    lack it: keyword."""
    impairment: str | None = None
    """The network impairment the case ran under (``certify --impair``):
    its profile and seed, e.g. ``fragment seed=123``; None on clean
    loopback (and in files written before this field existed)."""
    pcap_file: str | None = None
    """The case's wire trace as a pcapng capture, beside ``trace_file``
    (relative to the run folder, like it; docs/reports.md, "Captures");
    None when the case has no trace (and in files written before this
    field existed)."""

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {self.outcome!r}")


class ResultWriter:
    """Appends records to ``<run_dir>/results.jsonl`` durably."""

    def __init__(self, run_dir: Path) -> None:
        self.path = RunFolder(run_dir).results
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, record: ResultRecord) -> None:
        line = json.dumps(asdict(record), sort_keys=True, ensure_ascii=False) + "\n"
        # O_APPEND makes each line one write even if several sessions append.
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)


def read_results(path: Path) -> Iterator[dict[str, Any]]:
    """Records of a results file; a torn or malformed line (killed run) is skipped."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("outcome") in OUTCOMES:
            yield record


def blocked_by(record: dict[str, Any]) -> str | None:
    """The root cause a blocked record names: its ``blocked_by`` field, or
    for a record written without it, the case id its message starts with."""
    if record.get("outcome") != BLOCKED:
        return None
    if record.get("blocked_by"):
        return str(record["blocked_by"])
    message = record.get("message") or ""
    if message.startswith("blocked by "):
        return message[len("blocked by ") :].split(" ", 1)[0] or None
    return None


CONSOLE_WIDTH = 400
"""Characters of a case's message the console shows (progress lines, root
causes): enough for what was expected, what came and the bytes; the whole
message is in results.jsonl and the trace file."""
ROOT_CAUSE_WIDTH = 1000
"""Characters of a root cause's message kept in summary.json."""


def own_text(
    message: str, case_id: str = "", level: str | None = None, citation: str | None = None
) -> str:
    """A case's message without the ``<case id> [<level>, <citation>]: ``
    prefix every failure message starts with: what the node did."""
    if case_id and level and citation is not None:
        prefix = f"{case_id} [{level}, {citation}]: "
        if message.startswith(prefix):
            return message[len(prefix) :]
    if case_id and message.startswith(case_id + " ["):
        end = message.find("]: ")
        if end != -1:
            return message[end + 3 :]
    return message


def _join(lines: list[str]) -> str:
    out = ""
    for line in lines:
        # A line ending in a colon introduces the next one ("its output:").
        out += ("" if not out else " " if out.endswith(":") else " | ") + line
    return out


def console_text(
    message: str,
    case_id: str = "",
    width: int = CONSOLE_WIDTH,
    level: str | None = None,
    citation: str | None = None,
) -> str:
    """One line for the console: the message after its prefix, its lines
    joined (`` | `` between them, a space after a line ending in a colon),
    at most ``width`` characters. When that is too long and the message
    quotes a program's output (a line ending in ``output:``), the output's
    last lines are kept, since they say how it ended (``error: ...``), and
    the ones before them are left out (``...``)."""
    lines = [
        line.strip()
        for line in own_text(message or "", case_id, level, citation).splitlines()
        if line.strip()
    ]
    joined = _join(lines)
    if len(joined) <= width:
        return joined
    cut = next((n for n, line in enumerate(lines) if line.lower().endswith("output:")), None)
    if cut is not None and cut + 1 < len(lines):
        head = _join(lines[: cut + 1])
        room = width - len(head) - len(" ... | ")
        if room > 40:
            kept: list[str] = []
            for line in reversed(lines[cut + 1 :]):
                if len(" | ".join([line, *kept])) > room:
                    break
                kept.insert(0, line)
            if not kept:
                return f"{head} ...{lines[-1][-(room - 3) :]}"
            skipped = len(lines) - cut - 1 - len(kept)
            return head + (" ... | " if skipped else " ") + " | ".join(kept)
    return joined[: width - 3] + "..."


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per target and protocol: counts by level and outcome, the root causes
    and the verdict.

    Conformant means every applicable MUST case passed, and at least one did
    (a run with nothing applicable proves nothing); a blocked MUST case did
    not pass, so it is not conformant either. ``failed_must`` lists the MUST
    cases that failed or errored for their own rule; ``root_causes`` lists
    every failed or errored case (any level) with the cases it blocked.

    ``verdict`` is CONFORMANT, NOT_CONFORMANT, or NOT_STARTED when cases
    ended because the target did not start (``start_failure``) and no MUST
    case failed for its own rule: a breach seen on the wire outranks a role
    that did not start. ``start_failures`` lists those cases,
    ``start_failure`` gives the first one's whole message."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for rec in records:
        key = (rec["target"], rec["protocol"])
        group = groups.setdefault(
            key,
            {
                "target": rec["target"],
                "implementation": rec["implementation"],
                "implementation_version": rec["implementation_version"],
                "protocol": rec["protocol"],
                "levels": {lvl: {o: 0 for o in OUTCOMES} for lvl in ("MUST", "SHOULD", "MAY")},
                "failed_must": [],
                "root_causes": [],
                "blocked_must": [],
                "start_failures": [],
                "start_failure": None,
            },
        )
        group["levels"][rec["level"]][rec["outcome"]] += 1
        if rec["level"] == "MUST" and rec["outcome"] in (FAILED, ERROR):
            group["failed_must"].append(rec["case_id"])
        if rec["level"] == "MUST" and rec["outcome"] == BLOCKED:
            group["blocked_must"].append(rec["case_id"])
        did_not_start = rec["outcome"] == ERROR and bool(rec.get("start_failure"))
        if did_not_start:
            group["start_failures"].append(rec["case_id"])
            if group["start_failure"] is None:
                group["start_failure"] = rec.get("message") or ""
        if rec["outcome"] in (FAILED, ERROR):
            # What the node did, not the case id and citation again.
            text = console_text(
                rec.get("message") or "",
                rec["case_id"],
                ROOT_CAUSE_WIDTH,
                rec["level"],
                rec.get("citation"),
            )
            group["root_causes"].append(
                {
                    "case_id": rec["case_id"],
                    "level": rec["level"],
                    "basis": rec.get("basis") or "keyword",
                    "outcome": rec["outcome"],
                    "message": text,
                    "trace_file": rec.get("trace_file"),
                    "blocked": [],
                    "start_failure": did_not_start,
                }
            )
    out = []
    for key, group in groups.items():
        causes = {cause["case_id"]: cause for cause in group["root_causes"]}
        mine = [rec for rec in records if (rec["target"], rec["protocol"]) == key]
        recorded = {rec["case_id"]: rec for rec in mine}
        for rec in mine:
            if rec["outcome"] != BLOCKED:
                continue
            root = blocked_by(rec)
            if root not in causes:
                # The root did not fail as a case of its own: its valid step
                # failed within the blocked case (the root passed earlier, or
                # was not run), or the file is partial. Still listed, so no
                # blocked case goes unseen.
                known = recorded.get(root) if root else None
                causes[root] = {
                    "case_id": root,
                    "level": known["level"] if known else None,
                    "basis": (known.get("basis") or "keyword") if known else None,
                    "outcome": known["outcome"] if known else None,
                    "message": (
                        "its valid step failed within the blocked case(s)"
                        if known
                        else "root cause not recorded in this run"
                    ),
                    "trace_file": None,
                    "blocked": [],
                }
                group["root_causes"].append(causes[root])
            causes[root]["blocked"].append(rec["case_id"])
        # MUST root causes first: they decide the verdict.
        rank = {"MUST": 0, "SHOULD": 1, "MAY": 2, None: 3}
        group["root_causes"].sort(key=lambda cause: rank.get(cause["level"], 3))
        must = group["levels"]["MUST"]
        group["conformant"] = (
            must[FAILED] == 0 and must[ERROR] == 0 and must[BLOCKED] == 0 and must[PASSED] > 0
        )
        group["verdict"] = (
            CONFORMANT
            if group["conformant"]
            else NOT_STARTED
            if group["start_failures"] and must[FAILED] == 0
            else NOT_CONFORMANT
        )
        out.append(group)
    verdicts = {g["verdict"] for g in out}
    return {
        "targets": sorted(out, key=lambda g: (g["target"], g["protocol"])),
        "conformant": bool(out) and all(g["conformant"] for g in out),
        "verdict": (
            CONFORMANT
            if out and verdicts == {CONFORMANT}
            else NOT_CONFORMANT
            if not out or NOT_CONFORMANT in verdicts
            else NOT_STARTED
        ),
        "not_started": sorted({g["target"] for g in out if g["verdict"] == NOT_STARTED}),
        "cases": len(records),
    }


def mark_partial(
    summary: dict[str, Any],
    records: list[dict[str, Any]],
    selection: dict[str, Any] | None,
    suite_cases: dict[str, list[str]],
) -> None:
    """Say per target whether its run covered its whole suite: a selection
    (``--case``, ``-k``) that left cases out makes a *partial* run, whose
    verdict holds for the selected cases only and which certifies nothing
    (the certification matrix and interop's cross-check pass it over).
    ``suite_cases``: protocol -> every case id of the suite the run used.
    Per target: ``partial``, ``suite_cases`` (how many the suite has),
    ``selected_cases`` and ``prerequisite_cases`` (run only as prerequisites
    of selected ones); at the top, ``partial`` (any target's) and the
    ``selection``."""
    for group in summary["targets"]:
        mine = [
            r
            for r in records
            if (r["target"], r["protocol"]) == (group["target"], group["protocol"])
        ]
        ran = {r["case_id"] for r in mine}
        prerequisites = {r["case_id"] for r in mine if r.get("prerequisite_only")}
        suite = set(suite_cases.get(group["protocol"], ()))
        group["suite_cases"] = len(suite)
        group["selected_cases"] = len(ran - prerequisites)
        group["prerequisite_cases"] = len(prerequisites)
        group["partial"] = bool(selection) and not suite <= ran
    summary["partial"] = any(group["partial"] for group in summary["targets"])
    if selection:
        summary["selection"] = selection


def partial_scope(group: dict[str, Any]) -> str:
    """`` on the 13 selected cases of 73 (partial run)`` for a partial
    target's verdict, else ``""``."""
    if not group.get("partial"):
        return ""
    prerequisites = group.get("prerequisite_cases") or 0
    return (
        f" on the {group.get('selected_cases', 0)} selected case(s)"
        + (f" (and {prerequisites} prerequisite(s))" if prerequisites else "")
        + f" of {group.get('suite_cases', '?')} (partial run)"
    )


def write_summary(
    run_dir: Path,
    run_id: str,
    started: float,
    extra: dict[str, Any],
    selection: dict[str, Any] | None = None,
    suite_cases: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """summary.json: :func:`summarize` of the run's records, ``extra``, and
    with ``suite_cases`` (protocol -> the suite's case ids) whether each
    target's run was partial (:func:`mark_partial`)."""
    folder = RunFolder(run_dir)
    records = list(read_results(folder.results))
    summary = summarize(records)
    if suite_cases is not None:
        mark_partial(summary, records, selection, suite_cases)
    summary.update(
        run_id=run_id,
        harness_version=HARNESS_VERSION,
        duration_s=round(time.monotonic() - started, 3),
        finished=utc_now(),
        **extra,
    )
    tmp = folder.summary.with_name(folder.summary.name + ".tmp")
    tmp.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(folder.summary)
    return summary

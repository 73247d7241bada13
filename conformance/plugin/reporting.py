"""What a run leaves behind and shows: the plan, each case's record in
results.jsonl (written from its typed outcome), its wire trace, its Allure
labels and attachments, and the progress lines on the console."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from .. import __version__
from ..core.case_outcome import BLOCKED_PREFIX, BlockedBy, CaseOutcome
from ..core.requirements import Requirement, level_with_basis, requirement_of
from ..core.results import (
    BLOCKED,
    ERROR,
    FAILED,
    NOT_APPLICABLE,
    PASSED,
    Outcome,
    ResultRecord,
    console_text,
    utc_now,
)
from ..core.run_folder import RunFolder, session_label
from .outcomes import (
    CASE_OUTCOME,
    INTERRUPTED,
    PHASES_DONE,
    RECORDED,
    outcome_of_phase,
)
from .signals import SessionTerminated, stopped_by_signal
from .state import NOTE, TRACE, RunState, state_of

try:
    import allure
    import allure_commons
    from allure_commons.types import AttachmentType
    from allure_commons.utils import md5 as allure_md5
    from allure_pytest.utils import get_history_id
except ImportError:  # allure-pytest is a dependency, but keep the core usable without it
    allure = None

try:
    from ..core import pcap
except ImportError as exc:  # dpkt is a dependency; an environment installed before it lacks it
    pcap = None  # type: ignore[assignment]
    _NO_CAPTURES = (
        f"conformance: no pcapng captures in this run ({exc}: reinstall the harness, "
        "pip install -e .)\n"
    )

_TOLD: set[str] = set()
"""Notes written once per process."""

DURATION = pytest.StashKey[float]()
"""The case's time so far, over its phases."""
RENDERED = pytest.StashKey[str]()
"""The case's wire trace as a hex dump, for its trace file."""
CAPTURE = pytest.StashKey[bytes]()
"""The case's wire trace as a pcapng capture (core/pcap.py), for the file beside it."""


# ------------------------------------------------------------------ hooks


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    report: pytest.TestReport = yield
    req = requirement_of(item)
    if req is None:
        return report
    state = state_of(item.config)
    if (
        report.when == "call"
        and item.stash.get(INTERRUPTED, None) is None
        and stopped_by_signal(item.session)
    ):
        # The call ended after a SIGTERM stopped the targets: no verdict.
        # outcomes.pytest_runtest_protocol reports the call interrupted.
        raise SessionTerminated()
    if item.stash.get(INTERRUPTED, None) is not None:
        # The report outcomes._report_interrupted makes for the phase an
        # interrupt cut short: labelled, with the trace so far, never recorded.
        report.conformance_interrupted = True  # type: ignore[attr-defined]
        if report.when == "setup":
            label_for_allure(item, req, state)
        elif report.when == "call":
            attach_trace(item)
        return report
    item.stash[DURATION] = item.stash.get(DURATION, 0.0) + report.duration
    if report.when == "setup":
        label_for_allure(item, req, state)
    decided = outcome_of_phase(report, call, item.stash.get(CASE_OUTCOME, None))
    if decided is not None:
        item.stash[CASE_OUTCOME] = decided
        if report.skipped:
            # For pytest_report_teststatus, here or (under --case-jobs) in
            # the controller, which gets the report's attributes.
            report.conformance_outcome = decided.outcome.value  # type: ignore[attr-defined]
            if decided.blocked_by is not None:
                label_blocked(decided.blocked_by)
    if report.when == "call":
        attach_trace(item)
        attach_container_log(state)
        attach_process_logs(state)
    elif report.when == "teardown":
        recorded = record(item, req, state)
        if state.worker_id is not None:
            # For the controller's progress line (xdist sends the report's
            # attributes along).
            report.conformance_case = {  # type: ignore[attr-defined]
                "case_id": req.case_id,
                "level": req.level.value,
                "basis": str(req.basis),
                "outcome": recorded.outcome.value,
                "duration": item.stash[DURATION],
                "message": recorded.message,
                "blocked_by": recorded.blocked_by.case_id if recorded.blocked_by else None,
                "total": state.total,
                "readded": state.readded,
                "prerequisite_only": item.nodeid in state.readded,
            }
    item.stash.setdefault(PHASES_DONE, {})[report.when] = report.outcome
    return report


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    """Show not-applicable cases as 'N/A' and blocked ones as 'BLOCKED'
    rather than as skipped, and a case an interrupt cut short as
    'INTERRUPTED' rather than failed."""
    if getattr(report, "conformance_interrupted", False):
        return "interrupted", "!", "INTERRUPTED"
    if report.skipped and report.when in ("setup", "call"):
        outcome = getattr(report, "conformance_outcome", None)
        if outcome == NOT_APPLICABLE:
            return "not_applicable", "n", "N/A"
        if outcome == BLOCKED:
            return "blocked", "b", "BLOCKED"
    return None


# ------------------------------------------------------------------ files


def write_atomically(path: Path, text: str) -> None:
    """Write a file whole or not at all (a reader, or another worker writing
    the same file, never sees half of it)."""
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    part.write_text(text, encoding="utf-8")
    os.replace(part, path)


def write_plan(state: RunState, name: str, cases: list[pytest.Item]) -> None:
    """The cases the session is to run, for the runner: it records the ones
    a killed session never reached."""
    target = state.targets.get(name)
    lines = []
    for item in cases:
        req = requirement_of(item)
        assert req is not None
        lines.append(
            json.dumps(
                {
                    "target": name,
                    "implementation": target.implementation if target else "?",
                    "implementation_version": target.version if target else "?",
                    "peer": state.peer_name,
                    "protocol": req.protocol,
                    "role": req.role,
                    "case_id": req.case_id,
                    "level": req.level.value,
                    "basis": str(req.basis),
                    "citation": req.full_citation,
                    "depends": list(req.depends),
                    "errata": list(req.errata),
                },
                sort_keys=True,
            )
        )
    state.run_dir.mkdir(parents=True, exist_ok=True)
    write_atomically(
        # For the runner: it records the cases a killed session never reached.
        RunFolder(state.run_dir).plan(name, state.peer_name),
        "\n".join(lines) + "\n",
    )


def print_readded(readded: list[str]) -> None:
    sys.stderr.write(
        f"  prerequisites run although --case/-k/--deselect left them out: {len(readded)} "
        f"({', '.join(readded[:5])}{', ...' if len(readded) > 5 else ''})\n"
    )


# ------------------------------------------------------------------ Allure


def label_blocked(root: BlockedBy) -> None:
    """Allure shows a blocked case as skipped (its status detail is the
    ``blocked by ...`` message); the tag and label say it was blocked and by
    which case, so a report can be filtered down to root causes."""
    if allure is None:
        return
    allure.dynamic.tag("blocked")
    allure.dynamic.label("blocked_by", root.case_id)


def label_for_allure(item: pytest.Item, req: Requirement, state: RunState) -> None:
    if allure is None:
        return
    name = state.target_for(req.protocol)
    target = state.targets.get(name)
    allure.dynamic.label("protocol", req.protocol)
    allure.dynamic.label("component", req.component)
    allure.dynamic.label("requirement", req.case_id)
    allure.dynamic.label("level", req.level.value)
    allure.dynamic.label("basis", req.basis.kind.value)
    allure.dynamic.label("role", req.role)
    # A run certifies several targets of one protocol (the nightly: 21), each
    # running the same cases: the target (and interop peer) is a parameter,
    # so that allure-pytest's historyId differs per target and stays the same
    # across runs of one target (the report would otherwise keep one copy
    # and file the others under Retries), and it is the suite in the tree.
    allure.dynamic.parameter("target", name)
    if state.peer_name is not None:
        allure.dynamic.parameter("peer", state.peer_name)
    allure.dynamic.parent_suite(req.protocol)
    allure.dynamic.suite(session_label(name, state.peer_name))
    allure.dynamic.sub_suite(f"{req.component}, target role: {req.role}")
    allure.dynamic.severity(req.level.allure_severity)
    allure.dynamic.tag(req.level.value)
    allure.dynamic.title(req.case_id)
    allure.dynamic.description(
        f"{req.level_shown}: {req.full_citation}\n\n"
        + (f"The level's basis: {req.basis}.\n\n" if req.basis.word else "")
        + (item.obj.__doc__ or "").strip()
        if hasattr(item, "obj")
        else req.full_citation
    )
    for erratum in req.errata:
        allure.dynamic.label("erratum", erratum)
    for dep in req.depends:
        allure.dynamic.label("depends", dep)
    for shared in req.shares:
        allure.dynamic.label("shares", shared)
    if target is not None:
        allure.dynamic.label("target", target.name)
        allure.dynamic.label("implementation", f"{target.implementation} {target.version}")


_ALLURE_ID_PARAMETERS = ("target", "peer")
"""The parameters (set by label_for_allure) that tell one target's copy of a
case from another's in the Allure ids."""


class _AllureResultIds:
    """An allure-commons plugin (``allure_commons.plugin_manager``, the hook
    allure-pytest's file writer implements) that sees each case's result
    just before it is written:

    - ``testCaseId``: allure-pytest makes it from the test's full name alone,
      which every target's copy of a case shares; here it also covers the
      target and peer parameters, so it differs per target and stays the same
      across runs of one target. (``historyId`` already covers them:
      allure-pytest computes it from the full name and the parameters.)
    - ``historyId`` of a case an interrupt cut short: allure-pytest computes
      it at the case's teardown, which such a case never reaches; it is
      computed here the same way (``allure_pytest.utils.get_history_id``)."""

    @staticmethod
    def _is_case(result: Any) -> bool:
        return any(label.name == "requirement" for label in result.labels)

    @allure_commons.hookimpl(tryfirst=True) if allure is not None else (lambda f: f)
    def report_result(self, result: Any) -> None:
        if not self._is_case(result):
            return
        ids = [
            f"{p.name}={p.value}"
            for p in sorted(result.parameters, key=lambda p: p.name)
            if p.name in _ALLURE_ID_PARAMETERS
        ]
        if result.fullName and ids:
            result.testCaseId = allure_md5(result.fullName, *ids)
        if result.historyId is None and result.fullName:
            result.historyId = get_history_id(
                result.fullName, result.parameters, original_values={}
            )


_ALLURE_RESULT_IDS = _AllureResultIds()


def register_allure_ids() -> None:
    if allure is not None and not allure_commons.plugin_manager.is_registered(_ALLURE_RESULT_IDS):
        allure_commons.plugin_manager.register(_ALLURE_RESULT_IDS)


def unregister_allure_ids() -> None:
    if allure is not None and allure_commons.plugin_manager.is_registered(_ALLURE_RESULT_IDS):
        allure_commons.plugin_manager.unregister(_ALLURE_RESULT_IDS)


def attach_trace(item: pytest.Item) -> None:
    """The case's wire trace, as text and as a pcapng capture, to its Allure
    result (and to the stash, for the files record() writes)."""
    trace = item.stash.get(TRACE, None)
    if trace is None:
        return
    text = trace.render()
    req = requirement_of(item)
    state = state_of(item.config)
    session = session_label(
        state.target_for(req.protocol) if req else (state.target_name or "?"), state.peer_name
    )
    capture: bytes | None = None
    if pcap is None:
        # Said once per process: the cases run and are judged all the same.
        if _NO_CAPTURES not in _TOLD:
            _TOLD.add(_NO_CAPTURES)
            sys.stderr.write(_NO_CAPTURES)
    else:
        try:
            capture = pcap.pcapng(trace, f"{req.case_id if req else item.nodeid} ({session})")
        except Exception as exc:  # noqa: BLE001 - the report must not cost the case its verdict
            sys.stderr.write(f"conformance: no pcapng capture of {item.nodeid}: {exc!r}\n")
    if allure is not None:
        allure.attach(
            text, name="wire trace (hex dump, both directions)", attachment_type=AttachmentType.TEXT
        )
        if capture is not None and pcap is not None:
            allure.attach(
                capture,
                name="wire trace as a capture (pcapng: open in Wireshark)",
                attachment_type=pcap.MEDIA_TYPE,
                extension=pcap.EXTENSION,
            )
    item.stash[RENDERED] = text
    if capture is not None:
        item.stash[CAPTURE] = capture


def _attach_log(text: str, log_name: str, title: str) -> None:
    """A node's log lines in a case's Allure result, the oldest left out
    past ALLURE_LOG_LIMIT (the whole log is logs/LOG_NAME)."""
    from ..core.containers import ALLURE_LOG_LIMIT

    if len(text) > ALLURE_LOG_LIMIT:
        text = (
            f"(first {len(text) - ALLURE_LOG_LIMIT} characters left out; the whole log: logs/"
            f"{log_name})\n" + text[-ALLURE_LOG_LIMIT:]
        )
    allure.attach(text, name=title, attachment_type=AttachmentType.TEXT)


def attach_container_log(state: RunState) -> None:
    """A container target's log lines written since the previous case (the
    first case also gets the start-up lines) go to this case's Allure
    result: what the node said while the case ran, beside its wire trace.
    The whole log goes to logs/ when the container is removed."""
    if allure is None:
        return
    for runtime in (state.runtime, state.peer_runtime):
        server = runtime.container if runtime is not None else None
        if server is None or server.container is None:
            continue
        text = state.redactor.text(server.new_log())
        if text:
            _attach_log(
                text,
                server.log_path.name,
                f"container log of {runtime.target.name} ({server.spec.image}) during this case",
            )


def attach_process_logs(state: RunState) -> None:
    """What a process target (server, and each client launched for the case)
    wrote while the case ran goes to the case's Allure result, secrets
    redacted: the node's own account of a start failure, a reset or a close,
    beside the wire trace. The whole logs stay in the run's logs/."""
    if allure is None:
        return
    for runtime in (state.runtime, state.peer_runtime):
        if runtime is None:
            continue
        for role, path, raw in runtime.new_process_logs():
            _attach_log(
                state.redactor.text(raw),
                path.name,
                f"log of {runtime.target.name} ({role} process, logs/{path.name}) during this case",
            )


# ------------------------------------------------------------------ records


def record(item: pytest.Item, req: Requirement, state: RunState) -> CaseOutcome:
    """Write the case's line in results.jsonl (and its trace file) from the
    outcome its phases decided; returns it as recorded (the message as the
    line has it), which the cases depending on it are judged by."""
    decided = item.stash.get(CASE_OUTCOME, None) or CaseOutcome(
        Outcome.ERROR, "case produced no outcome"
    )
    outcome = decided.outcome.value
    message = decided.message
    note = item.stash.get(NOTE, None)
    if note:
        message = (message + "\n" if message else "") + note
    message = state.redactor.text(message)
    target = (
        state.runtime.target if state.runtime else state.targets.get(state.target_for(req.protocol))
    )
    duration = item.stash.get(DURATION, 0.0)
    trace_file = pcap_file = None
    rendered = item.stash.get(RENDERED, None)
    if rendered is not None:
        session = (
            req.case_id,
            target.name if target else (state.target_name or "unknown"),
            state.peer_runtime.target.name if state.peer_runtime else None,
        )
        folder = RunFolder(state.run_dir)
        path = folder.case_trace(*session)
        path.parent.mkdir(parents=True, exist_ok=True)
        capture = item.stash.get(CAPTURE, None)
        if capture is not None:
            # Beside the text trace, under the same name (RunFolder.capture_beside).
            capture_path = folder.case_capture(*session)
            capture_path.write_bytes(capture)
            pcap_file = str(capture_path.relative_to(state.run_dir))
        header = (
            f"{req.case_id} [{req.level_shown}, {req.full_citation}]\noutcome: {outcome}\n"
            + (f"impairment: {state.impairment.describe()}\n" if state.impairment else "")
            + (f"level's basis: {req.basis}\n" if req.basis.word else "")
            + f"{message}\n\n"
        )
        path.write_text(header + rendered, encoding="utf-8")
        trace_file = str(path.relative_to(state.run_dir))
    state.result_writer().append(
        ResultRecord(
            run_id=state.run_id,
            time=utc_now(),
            harness_version=__version__,
            target=target.name if target else (state.target_name or "?"),
            implementation=target.implementation if target else "?",
            implementation_version=target.version if target else "?",
            protocol=req.protocol,
            role=req.role,
            case_id=req.case_id,
            level=req.level.value,
            citation=req.full_citation,
            outcome=outcome,
            duration_s=round(duration, 4),
            message=message,
            trace_file=trace_file,
            peer_implementation=(
                state.peer_runtime.target.implementation if state.peer_runtime else None
            ),
            depends=list(req.depends),
            errata=list(req.errata),
            basis=str(req.basis),
            blocked_by=(
                decided.blocked_by.case_id
                if decided.outcome is Outcome.BLOCKED and decided.blocked_by
                else None
            ),
            start_failure=decided.outcome is Outcome.ERROR and decided.start_failure,
            prerequisite_only=item.nodeid in state.readded,
            impairment=state.impairment.describe() if state.impairment else None,
            pcap_file=pcap_file,
        )
    )
    item.stash[RECORDED] = True
    recorded = replace(decided, message=message)
    state.case_results.setdefault(req.case_id, []).append(recorded)
    if state.config.getoption("--progress") and state.worker_id is None:
        print_progress(
            state,
            req.case_id,
            req.level.value,
            outcome,
            duration,
            message,
            item.nodeid in state.readded,
            recorded.blocked_by.case_id if recorded.blocked_by else None,
            str(req.basis),
        )
    return recorded


# ------------------------------------------------------------------ progress lines


_OUTCOME_LABEL = {
    PASSED: "pass",
    FAILED: "FAIL",
    NOT_APPLICABLE: "n/a ",
    ERROR: "ERR ",
    BLOCKED: "blk ",
}


def print_progress(
    state: RunState,
    case_id: str,
    level: str,
    outcome: str,
    duration: float,
    message: str,
    prerequisite_only: bool = False,
    blocked_by: str | None = None,
    basis: str = "keyword",
) -> None:
    """One line per finished case, and under it what the node did (the
    message after its ``<case id> [<level>, <citation>]: `` prefix, its
    lines joined: results.console_text). Consecutive cases blocked by one
    root cause are held back and printed as one line when the run of them
    ends (``11 cases blocked by X (failed): <reason>``); ``blocked_by`` is
    a blocked case's root cause."""
    state.done += 1
    if outcome == BLOCKED:
        pending = state.blocked_run
        if pending is not None and pending["root"] == blocked_by:
            pending["last"] = state.done
            pending["cases"].append((case_id, level))
            return
        flush_blocked(state)
        state.blocked_run = {
            "root": blocked_by,
            "first": state.done,
            "last": state.done,
            "cases": [(case_id, level)],
            "message": message,
            "duration": duration,
        }
        return
    flush_blocked(state)
    text = console_text(message, case_id) if message and outcome != PASSED else ""
    line = (
        f"  [{state.done:>3}/{state.total}] {_OUTCOME_LABEL[outcome]} "
        f"{level_with_basis(level, basis):<6} {case_id} ({duration:.2f}s)"
        + (" (prerequisite of the selection)" if prerequisite_only else "")
    )
    _write_progress(line + (f"\n        {text}" if text else ""))


def flush_blocked(state: RunState) -> None:
    """Print the held-back run of cases blocked by one root cause: one line
    for one case as for any other, one line for the whole run otherwise."""
    pending, state.blocked_run = state.blocked_run, None
    if pending is None:
        return
    cases = pending["cases"]
    first, last = pending["first"], pending["last"]
    if len(cases) == 1:
        case_id, level = cases[0]
        _write_progress(
            f"  [{first:>3}/{state.total}] {_OUTCOME_LABEL[BLOCKED]} {level:<6} {case_id} "
            f"({pending['duration']:.2f}s)\n        {console_text(pending['message'])}"
        )
        return
    levels = {}
    for _, level in cases:
        levels[level] = levels.get(level, 0) + 1
    counts = ", ".join(
        f"{n} {level}" for level, n in sorted(levels.items(), key=lambda i: _LEVEL_ORDER[i[0]])
    )
    reason = (
        console_text(pending["message"].splitlines()[0])
        .removeprefix(BLOCKED_PREFIX + pending["root"])
        .lstrip()
    )
    _write_progress(
        f"  [{first:>3}-{last}/{state.total}] {_OUTCOME_LABEL[BLOCKED]} {len(cases)} cases ({counts}) "
        f"blocked by {pending['root']} {reason}"
    )


_LEVEL_ORDER = {"MUST": 0, "SHOULD": 1, "MAY": 2}


def _write_progress(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()

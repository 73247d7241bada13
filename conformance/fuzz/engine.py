"""Running a machine against a live target under a budget, and replaying.

The target is started as certify starts it (the protocol suite's
``prepare``, then :meth:`TargetRuntime.start_server`): no second launcher.
Hypothesis runs the machine in rounds of a few examples, each round seeded
from ``--seed`` and its number, until the time budget or the number of
examples is spent or a rule breaks. A failure is shrunk by Hypothesis to the
shortest sequence of actions that still breaks a rule, then:

- written as a replay file (``RunFolder.fuzz_replay``): the actions with
  their message bytes, the rule's case id, what the reference expected and
  what came, the seed;
- recorded as a result (``results.jsonl``: the rule's case id, ``failed``,
  the wire trace), and as an Allure result, so that it reaches the reports
  and matrices like a case of the suite.

Between examples a launched target that exited, or stopped answering, is
started again; the exit and its log tail are kept in the run's fuzz
summary. Shrinking is bounded in time too (``shrink_seconds``).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from hypothesis import HealthCheck, Phase, Verbosity, seed, settings
from hypothesis.errors import Flaky
from hypothesis.internal.conjecture import engine as conjecture_engine
from hypothesis.stateful import get_state_machine_test

from .. import __version__ as HARNESS_VERSION
from ..core.allure_result import Attachment, write_allure_result
from ..core.results import FAILED, ResultRecord, ResultWriter, utc_now
from ..core.run_folder import RunFolder
from ..core.target_runtime import TargetRuntime
from ..core.target_spec import Target
from ..core.work_dirs import make_work_dir
from ..plugin.protocol_hooks import prepare_runtime
from .machines import DEFAULT_STEPS, MACHINES, machine_for  # noqa: F401 - re-exported
from .machine import FailedExample, FuzzFailure, FuzzMachine, FuzzSession, bind

REPLAY_FORMAT = "conformance-fuzz-replay/1"
ROUND_EXAMPLES = 10
"""Examples per Hypothesis run: the budget is checked, and a progress line
printed, between rounds."""


@dataclass
class FuzzOptions:
    budget_s: float | None = None
    examples: int | None = None
    seed: int = 0
    deadline: float = 2.0
    steps: int = DEFAULT_STEPS
    shrink_seconds: float = 60.0


@dataclass
class FuzzResult:
    target: str
    protocol: str
    role: str
    seed: int
    examples: int
    """Examples run (shrinking runs included)."""
    seconds: float
    rounds: int
    failure: FailedExample | None = None
    round_seed: int | None = None
    flaky: bool = False
    """The shrunk failure did not fail again when Hypothesis replayed it."""
    examples_before_failure: int | None = None
    seconds_to_failure: float | None = None
    replay_file: Path | None = None
    health: list[str] = field(default_factory=list)

    @property
    def examples_per_second(self) -> float:
        return self.examples / self.seconds if self.seconds else 0.0

    def summary(self) -> dict[str, Any]:
        failure = self.failure
        return {
            "target": self.target,
            "protocol": self.protocol,
            "role": self.role,
            "seed": self.seed,
            "round_seed": self.round_seed,
            "examples": self.examples,
            "seconds": round(self.seconds, 3),
            "examples_per_second": round(self.examples_per_second, 2),
            "failure": None
            if failure is None
            else {
                "case_id": failure.failure.case_id,
                "message": failure.failure.message,
                "actions": len(failure.actions),
                "flaky": self.flaky,
                "replay_file": str(self.replay_file) if self.replay_file else None,
            },
            "examples_before_failure": self.examples_before_failure,
            "seconds_to_failure": self.seconds_to_failure,
            "restarts": self.health,
        }


def round_seed(base: int, number: int) -> int:
    """The seed of round ``number`` of a run seeded ``base``: reproducible,
    and different per round."""
    digest = hashlib.sha256(f"{base}:{number}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def start_target(target: Target, folder: RunFolder, run_id: str) -> TargetRuntime:
    """Start ``target``'s server role as certify does (the suite's prepare,
    the launch or container)."""
    folder.logs.mkdir(parents=True, exist_ok=True)
    runtime = TargetRuntime(target, make_work_dir(target.name), folder.logs, run_id=run_id)
    try:
        prepare_runtime(runtime)
        runtime.start_server()
    except BaseException:
        runtime.stop()
        raise
    return runtime


def _failure_in(exc: BaseException) -> bool:
    if isinstance(exc, FuzzFailure):
        return True
    return any(_failure_in(inner) for inner in getattr(exc, "exceptions", ()))


def fuzz(
    runtime: TargetRuntime,
    machine: type[FuzzMachine],
    options: FuzzOptions,
    progress: Callable[[str], None] = lambda line: None,
) -> FuzzResult:
    """Run ``machine`` against ``runtime`` until the budget is spent or a
    rule breaks (then shrunk)."""
    session = FuzzSession(runtime, options.deadline)
    bound = bind(machine, session)
    result = FuzzResult(
        runtime.target.name, machine.protocol, machine.role, options.seed, 0, 0.0, 0
    )
    started = time.monotonic()
    shrink_bound = conjecture_engine.MAX_SHRINKING_SECONDS
    # Hypothesis's own bound on shrinking (5 minutes) is long for a live
    # target; the run's bound replaces it while this run lasts.
    conjecture_engine.MAX_SHRINKING_SECONDS = int(options.shrink_seconds)
    try:
        while True:
            elapsed = time.monotonic() - started
            if options.budget_s is not None and elapsed >= options.budget_s:
                break
            if options.examples is not None and session.examples >= options.examples:
                break
            count = ROUND_EXAMPLES
            if options.examples is not None:
                count = min(count, options.examples - session.examples)
            this_seed = round_seed(options.seed, result.rounds)
            test = get_state_machine_test(
                bound,
                settings=settings(
                    max_examples=count,
                    deadline=None,
                    database=None,
                    stateful_step_count=options.steps,
                    suppress_health_check=list(HealthCheck),
                    report_multiple_bugs=False,
                    print_blob=False,
                    verbosity=Verbosity.quiet,
                    phases=(Phase.generate, Phase.shrink),
                ),
            )
            try:
                seed(this_seed)(test)()
            except (FuzzFailure, Flaky, ExceptionGroup) as exc:
                if not _failure_in(exc) or session.last_failure is None:
                    raise
                result.round_seed = this_seed
                result.failure = session.last_failure
                result.flaky = not isinstance(exc, FuzzFailure)
                break
            finally:
                result.rounds += 1
            result.examples = session.examples
            progress(
                f"fuzz {runtime.target.name} ({machine.protocol} {machine.role}): "
                f"{session.examples} examples in {time.monotonic() - started:.0f} s, no rule broken"
            )
    finally:
        conjecture_engine.MAX_SHRINKING_SECONDS = shrink_bound
    result.examples = session.examples
    result.seconds = time.monotonic() - started
    result.examples_before_failure = session.examples_before_failure
    result.seconds_to_failure = session.first_failure_at
    result.health = list(session.health)
    return result


# --- what a failure leaves in the run folder ----------------------------------------------------


def replay_document(result: FuzzResult, runtime: TargetRuntime) -> dict[str, Any]:
    assert result.failure is not None
    failure = result.failure.failure
    return {
        "format": REPLAY_FORMAT,
        "target": result.target,
        "implementation": runtime.target.implementation,
        "implementation_version": runtime.target.version,
        "protocol": result.protocol,
        "role": result.role,
        "harness_version": HARNESS_VERSION,
        "seed": result.seed,
        "round_seed": result.round_seed,
        "case_id": failure.case_id,
        "message": failure.message,
        "expected": failure.expected,
        "observed": failure.observed,
        "flaky": result.flaky,
        "examples_before_failure": result.examples_before_failure,
        "seconds_to_failure": result.seconds_to_failure,
        "placeholders": "message bytes are hex; @@R@@ is a nonce unique to each run of the "
        "actions, @@HOST@@ @@DEST@@ @@LOGIN@@ @@PASSCODE@@ the target's settings (a header "
        "line whose value the target does not have is left out)",
        "actions": result.failure.actions,
    }


def save_failure(
    result: FuzzResult, runtime: TargetRuntime, folder: RunFolder, run_id: str
) -> Path:
    """The replay file, the trace, the result record and the Allure result
    of a failure; returns the replay file's path."""
    assert result.failure is not None
    failure = result.failure.failure
    path = folder.fuzz_replay(result.target, failure.case_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(replay_document(result, runtime), indent=2) + "\n", encoding="utf-8")
    result.replay_file = path
    trace = folder.case_trace(failure.case_id, result.target)
    trace.parent.mkdir(parents=True, exist_ok=True)
    trace.write_text(result.failure.trace, encoding="utf-8")
    level, citation, basis, depends = _case_facts(result.protocol, failure.case_id)
    message = (
        f"fuzzing ({result.examples_before_failure} examples, seed {result.seed}"
        f"{', flaky' if result.flaky else ''}): {failure.message}; shrunk to "
        f"{len(result.failure.actions)} action(s), replay: {path.relative_to(folder.path)}"
    )
    record = ResultRecord(
        run_id=run_id,
        time=utc_now(),
        harness_version=HARNESS_VERSION,
        target=result.target,
        implementation=runtime.target.implementation,
        implementation_version=runtime.target.version,
        protocol=result.protocol,
        role=result.role,
        case_id=failure.case_id,
        level=level,
        citation=citation,
        outcome=FAILED,
        duration_s=round(result.seconds, 3),
        message=message,
        trace_file=str(trace.relative_to(folder.path)),
        depends=depends,
        basis=basis,
    )
    ResultWriter(folder.path).append(record)
    _allure_result(folder, record, result.failure.trace)
    return path


def _case_facts(protocol: str, case_id: str) -> tuple[str, str, str, list[str]]:
    """Level, citation, basis and prerequisites of a suite case (collected
    from the suite, as ``conformance cases`` does)."""
    from ..cases import SUITES_DIR, collect

    for req in collect(SUITES_DIR / protocol):
        if req.case_id == case_id:
            return req.level.value, req.full_citation, str(req.basis), list(req.depends)
    return "MUST", "(no such case in the suite)", "keyword", []


def _allure_result(folder: RunFolder, record: ResultRecord, trace: str) -> None:
    """An Allure result of the failure, beside those certify's pytest session
    writes (the same labels the report groups by)."""
    write_allure_result(
        folder,
        target=record.target,
        protocol=record.protocol,
        kind="fuzz",
        name=record.case_id,
        status="failed",
        message=record.message,
        seconds=record.duration_s,
        tags=(record.level,),
        attachments=(Attachment("wire trace", trace, "text/plain", "txt"),),
    )


def write_summary(folder: RunFolder, run_id: str, results: list[FuzzResult]) -> None:
    folder.fuzz_summary.parent.mkdir(parents=True, exist_ok=True)
    folder.fuzz_summary.write_text(
        json.dumps(
            {
                "run_id": run_id,
                "harness_version": HARNESS_VERSION,
                "time": utc_now(),
                "targets": [r.summary() for r in results],
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )


# --- replay --------------------------------------------------------------------------------------


@dataclass
class ReplayOutcome:
    reproduced: bool
    failure: FuzzFailure | None
    trace: str

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["failure"] = (
            None
            if self.failure is None
            else {"case_id": self.failure.case_id, "message": self.failure.message}
        )
        return data


def load_replay(path: Path) -> dict[str, Any]:
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    if document.get("format") != REPLAY_FORMAT:
        raise ValueError(f"{path}: not a fuzz replay file (format {document.get('format')!r})")
    return document


def replay(document: dict[str, Any], runtime: TargetRuntime, deadline: float) -> ReplayOutcome:
    """Perform the saved actions against ``runtime`` in order (no
    Hypothesis): whether a rule breaks again, and which."""
    machine_class = machine_for(document["protocol"], document["role"])
    session = FuzzSession(runtime, deadline)
    machine = bind(machine_class, session)()
    failure: FuzzFailure | None = None
    try:
        for action in document["actions"]:
            machine.perform(json.loads(json.dumps(action)))
    except FuzzFailure as exc:
        failure = exc
    finally:
        try:
            machine.teardown()
        except FuzzFailure as exc:
            failure = failure or exc
    return ReplayOutcome(
        reproduced=failure is not None and failure.case_id == document["case_id"],
        failure=failure,
        trace=machine.trace.render(),
    )

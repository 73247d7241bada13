"""How a case ends, decided where it happens and kept as a typed value
(:class:`~conformance.core.case_outcome.CaseOutcome`, in the item's stash)
until its record is written: the prerequisites it waits for, the run
deadline, the verdict of its call, a target that did not start, and an
interrupt that leaves it without one."""

from __future__ import annotations

import ast
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from ..core import impair, node_grammar
from ..core.case_outcome import BlockedBy, CaseOutcome, ended_with
from ..core.requirements import Requirement, blocked, not_applicable, requirement_of
from ..core.results import Outcome
from ..core.run_folder import RunFolder
from ..core.targets import TargetNotStarted
from ..core.transport import DeadlineExceeded
from .signals import SessionTerminated, ignore_sigterm_now
from .state import TRACE, RunState, state_of

SILENT_CASES_BEFORE_UNRESPONSIVE = 3
"""After this many consecutive cases in which the target sent not one byte
while a case waited for bytes it must send, the target is declared
unresponsive and the remaining cases end at once with outcome ``error``
(they are recorded, never skipped), so a run against a dead node ends in
seconds with a clear verdict instead of waiting out every deadline."""


# The plugin's exceptions keep the name they had when the plugin was one
# module: Allure and JUnit show it with each failure (conformance.plugin.
# ConformanceFailure: ...), and conformance.plugin exports them.


class ConformanceFailure(AssertionError):
    """A case's failure, prefixed with the requirement it checks."""

    __module__ = "conformance.plugin"


class CaseInterrupted(Exception):
    """The outcome of a case an interrupt (SIGTERM, Ctrl-C) cut short: no
    verdict. Reported for the phase that was running (see
    pytest_runtest_protocol) so that Allure and JUnit show the case broken
    rather than passed; results.jsonl gets no line for it."""

    __module__ = "conformance.plugin"


INTERRUPTED_PREFIX = "interrupted: no verdict"


class RunDeadlineExceeded(Exception):
    """The run's deadline (``--run-timeout``) passed before the case started."""

    __module__ = "conformance.plugin"


CASE_OUTCOME = pytest.StashKey[CaseOutcome]()
"""How the case ended, once a phase decided it (outcome_of_phase); its
record is written from it."""
PHASES_DONE = pytest.StashKey[dict[str, str]]()
"""The phases of a case that reported, with their outcome."""
INTERRUPTED = pytest.StashKey[str]()
"""The phase an interrupt cut short (see pytest_runtest_protocol)."""
RECORDED = pytest.StashKey[bool]()
"""Set as soon as the case's line is in results.jsonl: an interrupt after
that (the rest of its teardown report, say) leaves its reports alone."""


GRAMMAR_BLOCKED_OUTCOME = "failed within this case"
"""How a case blocked by a grammar violation it met names its root: the
grammar case's rule failed on bytes of this case's traffic."""


def _blocked_by_grammar(req: Requirement, violation: node_grammar.NodeGrammarViolation) -> None:
    """The node's bytes broke the frame grammar: its grammar case judges them
    (they are recorded for it), and this case, which cannot judge its own
    rule on them, is blocked by it. The grammar case fails for them."""
    if violation.grammar_case != req.case_id:
        blocked(violation.grammar_case, GRAMMAR_BLOCKED_OUTCOME, violation.record.text())


def grammar_records_file(state: RunState, req: Requirement) -> Path:
    """The run folder's file of the session's grammar violations
    (core/node_grammar.py)."""
    return RunFolder(state.run_dir).grammar_violations(
        state.target_for(req.protocol), state.peer_name
    )


def run_deadline_message(run_timeout: float) -> str:
    return f"run deadline of {run_timeout:g} s exceeded (--run-timeout); case not run"


def check_prerequisites(state: RunState, req: Requirement) -> None:
    """End the case before it runs when a prerequisite did not pass in this
    run: not applicable when the prerequisite was (with its reason),
    otherwise blocked by the root cause (the case that failed or errored
    for its own rule; a blocked prerequisite passes its root on)."""
    results = [
        (dep, result) for dep in req.depends for result in state.case_results.get(dep) or [None]
    ]
    for dep, result in results:
        if result is not None and result.outcome is Outcome.NOT_APPLICABLE:
            not_applicable(f"{result.message} (as for its prerequisite {dep})")
    for dep, result in results:
        if result is None:
            root = BlockedBy(dep, "not run", "the prerequisite has no result in this run")
        elif result.outcome is Outcome.PASSED:
            continue
        elif result.blocked_by is not None:
            if result.blocked_by.case_id == req.case_id:
                # The prerequisite met a breach of this very case's rule (an
                # oversized box while reading a feed, say): a case is never
                # blocked by itself. It runs and judges its own rule, on
                # bytes of its own trace.
                continue
            root = replace(result.blocked_by, via=(dep, *result.blocked_by.via))
        else:
            root = BlockedBy(dep, result.outcome.value, _own_text(dep, result.message))
        blocked(root.case_id, root.outcome, root.message, root.via)


def _own_text(case_id: str, message: str) -> str:
    """A failure message without the ``case-id [LEVEL, citation]: `` prefix
    (a blocked message names the case already)."""
    if message.startswith(case_id + " ["):
        end = message.find("]: ")
        if end != -1:
            return message[end + 3 :]
    return message


def outcome_of_phase(
    report: pytest.TestReport, call: pytest.CallInfo[None], decided: CaseOutcome | None
) -> CaseOutcome | None:
    """The case's outcome once ``report`` (one phase's) is in, given the one
    decided before it; None while none is. A skip carries its outcome
    (core.case_outcome.end_case); a failed setup is an error, a failed call
    a failure when an assertion (the rule) failed and an error otherwise; a
    failed teardown turns a pass into an error."""
    if report.skipped:
        ended = ended_with(call.excinfo.value if call.excinfo is not None else None)
        if ended is not None:
            return ended
        # Conformance cases are never skipped: any other skip is a harness bug.
        return CaseOutcome(
            Outcome.ERROR, f"case skipped, which conformance cases never are: {_skip_text(report)}"
        )
    if report.when == "setup" and report.failed:
        return CaseOutcome(Outcome.ERROR, _failure_text(call), start_failure=_did_not_start(call))
    if report.when == "call":
        if report.passed:
            return CaseOutcome(Outcome.PASSED)
        if report.failed:
            is_failure = call.excinfo is not None and call.excinfo.errisinstance(AssertionError)
            return CaseOutcome(
                Outcome.FAILED if is_failure else Outcome.ERROR,
                _failure_text(call),
                start_failure=_did_not_start(call),
            )
    if (
        report.when == "teardown"
        and report.failed
        and (decided is None or decided.outcome is Outcome.PASSED)
    ):
        return CaseOutcome(Outcome.ERROR, "teardown failed: " + _failure_text(call))
    return decided


def _did_not_start(call: pytest.CallInfo[None]) -> bool:
    """Whether the case ended because the target (a role of it) did not
    start (TargetNotStarted): an error that is no rule's failure, which the
    verdict tells apart (results.summarize)."""
    return call.excinfo is not None and call.excinfo.errisinstance(TargetNotStarted)


def _skip_text(report: pytest.TestReport) -> str:
    """The reason pytest gives for a skip that carries no outcome, quoted in
    the error it is recorded as."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        reason = str(longrepr[2])
        return reason[len("Skipped: ") :] if reason.startswith("Skipped: ") else reason
    return str(longrepr)


def _failure_text(call: pytest.CallInfo[None]) -> str:
    if call.excinfo is None:
        return ""
    exc = call.excinfo.value
    name = (
        "" if isinstance(exc, (AssertionError, RunDeadlineExceeded)) else f"{type(exc).__name__}: "
    )
    return (name + str(exc)).strip()


def assertion_message(exc: AssertionError) -> str:
    """The message a failed ``assert`` was given, without the lines pytest's
    assertion rewriting appends to it (``assert 44 == 42``, ``+ where 44 =
    <... object at 0x7f...>.msgno``, diffs); for an assert without a message,
    its source text (``assert reply.msgno == 42``). Any other AssertionError
    (raised by a helper, DeadlineExceeded, an assert pytest did not rewrite)
    keeps its text as it is.

    Rewriting joins the message and the introspection as ``MESSAGE\\nassert
    EXPLANATION...``: message lines after the first are indented by two
    spaces, the ``assert`` line is not, so the first unindented line
    starting with ``assert `` after line 0 begins the introspection."""
    text = str(exc)
    if type(exc) is not AssertionError:
        return text
    statement = _failed_assert(exc)
    if statement is None:
        return text
    lines = text.split("\n")
    if statement.msg is None:
        if not lines[0].startswith("assert "):
            return text  # not rewritten (plain asserts carry no text)
        return "assert " + ast.unparse(statement.test)
    glue = next((n for n, line in enumerate(lines) if n and line.startswith("assert ")), None)
    if glue is None:
        return text  # not rewritten: the message as given
    own = [lines[0]] + [line[2:] if line.startswith("  ") else line for line in lines[1:glue]]
    return "\n".join(own).rstrip()


def _failed_assert(exc: BaseException) -> ast.Assert | None:
    """The ``assert`` statement that raised ``exc``, or None when it came
    from anything else (or its source cannot be read)."""
    try:
        from _pytest._code import ExceptionInfo

        source = str(ExceptionInfo.from_exception(exc).traceback[-1].statement)
        tree = ast.parse(textwrap.dedent(source))
    except Exception:  # no source, a statement that does not parse alone
        return None
    node = tree.body[0] if len(tree.body) == 1 else None
    return node if isinstance(node, ast.Assert) else None


# ------------------------------------------------------------------ hooks


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before the case's fixtures: the run deadline, and the prerequisites of
    a case that does not use the ``target`` fixture (which checks them)."""
    req = requirement_of(item)
    if req is None:
        return
    state = state_of(item.config)
    impair.begin_case(req.case_id)
    records = grammar_records_file(state, req)
    node_grammar.begin_case(
        req.case_id,
        lambda record: node_grammar.append_record(records, replace(record, run_id=state.run_id)),
    )
    if state.run_timeout is not None and time.monotonic() - state.started > state.run_timeout:
        raise RunDeadlineExceeded(run_deadline_message(state.run_timeout))
    if "target" not in getattr(item, "fixturenames", ()):
        check_prerequisites(state, req)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    req = requirement_of(item)
    if req is None:
        return (yield)
    try:
        try:
            return (yield)
        except pytest.skip.Exception as skip:
            # A case is never blocked by itself: when the rule a helper
            # blames (``blocked()`` raised in the body, e.g. by
            # reading_the_feed) is the case's own, the case fails with it.
            ended = ended_with(skip)
            root = ended.blocked_by if ended is not None else None
            violation = node_grammar.grammar_violation_in(skip.__context__)
            if root is not None and violation is not None:
                # Blocked while handling a grammar violation (a refused
                # CONNECT that was an unreadable frame): the grammar is
                # the root.
                _blocked_by_grammar(req, violation)
            if root is None or root.case_id != req.case_id:
                raise
            raise AssertionError(root.first_line) from None
    except AssertionError as exc:
        violation = node_grammar.grammar_violation_in(exc)
        if violation is not None:
            _blocked_by_grammar(req, violation)
        state = state_of(item.config)
        trace = item.stash.get(TRACE, None)
        silent = (
            isinstance(exc, DeadlineExceeded)
            and trace is not None
            and not trace.bytes_in("received")
        )
        state.silent_cases = state.silent_cases + 1 if silent else 0
        if state.silent_cases >= SILENT_CASES_BEFORE_UNRESPONSIVE and not state.unresponsive:
            state.unresponsive = (
                f"target unresponsive: it sent no byte in {state.silent_cases} consecutive "
                f"cases that waited {state.deadline} s for an answer it must send; "
                "remaining cases not run"
            )
        # Assertion messages may quote what the target sent, secrets
        # included; mask them before pytest, JUnit or Allure see the text.
        # The harness's own words only: pytest's introspection of a
        # rewritten assert (``assert 44 == 42 / + where ... at 0x7f...``)
        # is no part of the finding.
        text = state.redactor.text(assertion_message(exc))
        exc.args = (text,)
        raise ConformanceFailure(
            f"{req.case_id} [{req.level_shown}, {req.full_citation}]: {text}"
        ) from exc
    else:
        state_of(item.config).silent_cases = 0


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """An interrupt (SIGTERM, Ctrl-C) in the middle of a case reaches pytest
    as a KeyboardInterrupt that ends the protocol of the case without a
    report of the phase it cut short. allure-pytest would then write the
    case with the status of its last report, passed after a passed setup,
    and JUnit would write a nameless passed testcase; results.jsonl rightly
    has no line for it. So the cut phase gets a report of its own, broken
    (``CaseInterrupted``), before the interrupt goes on; inside
    allure-pytest's wrapper, which writes the result after this."""
    if requirement_of(item) is None:
        return (yield)
    try:
        return (yield)
    except KeyboardInterrupt as exc:
        _report_interrupted(item, exc)
        raise


def _report_interrupted(item: pytest.Item, exc: KeyboardInterrupt) -> None:
    # A SIGTERM now (the CLI sends one to every session after a Ctrl-C)
    # must not cut this short (pytest_keyboard_interrupt ignores it too).
    ignore_sigterm_now()
    if item.stash.get(RECORDED, False):
        return  # its line is in results.jsonl: the interrupt came after it
    done = item.stash.get(PHASES_DONE, {})
    if "setup" not in done:
        phase = "setup"
    elif "call" not in done and done["setup"] == "passed":
        phase = "call"
    else:
        phase = "teardown"
    how = "SIGTERM" if isinstance(exc, SessionTerminated) else "Ctrl-C (SIGINT)"
    message = (
        f"{INTERRUPTED_PREFIX}: {how} stopped the run during the case's {phase}; "
        "it has no result in results.jsonl"
    )
    item.stash[INTERRUPTED] = phase

    def interrupted() -> None:
        raise CaseInterrupted(message)

    call = pytest.CallInfo.from_call(interrupted, when=phase)  # type: ignore[arg-type]
    report = item.ihook.pytest_runtest_makereport(item=item, call=call)
    item.ihook.pytest_runtest_logreport(report=report)

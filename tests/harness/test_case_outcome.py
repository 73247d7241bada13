"""A case's outcome travels as a typed value (core/case_outcome.py): the skip
that ends a case early carries it, the plugin judges dependents by it, and
nothing reads the skip's text back. The records these make are checked end
to end in test_blocked.py, test_never_blocked_by_itself.py and
test_not_started.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conformance.core.case_outcome import BlockedBy, CaseOutcome, ended_with
from conformance.core.requirements import Level, Requirement, blocked, not_applicable
from conformance.core.results import OUTCOMES, Outcome
from conformance.plugin.outcomes import check_prerequisites


def test_the_outcome_values_are_the_recorded_strings():
    assert [outcome.value for outcome in Outcome] == list(OUTCOMES)
    assert OUTCOMES == ("passed", "failed", "not_applicable", "error", "blocked")
    assert all(type(value) is str for value in OUTCOMES)  # pytest-xdist sends no str subclass


def test_not_applicable_is_a_skip_carrying_its_outcome():
    with pytest.raises(pytest.skip.Exception) as info:
        not_applicable("target x lacks the 'hold' capability")
    assert info.value.msg == "not applicable: target x lacks the 'hold' capability"
    assert ended_with(info.value) == CaseOutcome(
        Outcome.NOT_APPLICABLE, "target x lacks the 'hold' capability"
    )


def test_blocked_is_a_skip_carrying_its_root_cause_and_chain():
    with pytest.raises(pytest.skip.Exception) as info:
        blocked("p.c.server.root", "failed", "it broke\nsecond line", via=["p.c.server.mid"])
    text = (
        "blocked by p.c.server.root (failed): it broke\n"
        "through the blocked prerequisite(s) p.c.server.mid"
    )
    assert info.value.msg == text
    outcome = ended_with(info.value)
    assert outcome == CaseOutcome(
        Outcome.BLOCKED,
        text,
        blocked_by=BlockedBy(
            "p.c.server.root", "failed", "it broke\nsecond line", ("p.c.server.mid",)
        ),
    )
    assert outcome.blocked_by.first_line == "it broke"


def test_a_plain_skip_carries_no_outcome():
    with pytest.raises(pytest.skip.Exception) as info:
        pytest.skip("blocked by p.c.server.root (failed): looks like one")
    assert ended_with(info.value) is None


CASE = "p.c.server.case"
PREREQUISITE = "p.c.server.prerequisite"


def judged(*results: CaseOutcome | None) -> CaseOutcome | None:
    """The outcome check_prerequisites ends CASE with when its prerequisite's
    items ended with ``results`` (None: no result in this run), or None when
    the case may run."""
    state = SimpleNamespace(
        case_results={PREREQUISITE: [r for r in results if r is not None]} if any(results) else {}
    )
    req = Requirement(CASE, Level.MUST, "the spec", depends=(PREREQUISITE,))
    try:
        check_prerequisites(state, req)  # type: ignore[arg-type]
    except pytest.skip.Exception as skip:
        return ended_with(skip)
    return None


def test_a_passed_prerequisite_lets_the_case_run():
    assert judged(CaseOutcome(Outcome.PASSED)) is None


def test_a_failed_prerequisite_blocks_with_its_own_text():
    failed = CaseOutcome(Outcome.FAILED, f"{PREREQUISITE} [MUST, the spec]: no reply\nmore")
    outcome = judged(failed)
    assert outcome.outcome is Outcome.BLOCKED
    assert outcome.blocked_by == BlockedBy(PREREQUISITE, "failed", "no reply\nmore")
    assert outcome.message == f"blocked by {PREREQUISITE} (failed): no reply"


def test_a_blocked_prerequisite_passes_its_root_on():
    root = BlockedBy("p.c.server.root", "error", "RuntimeError: boom", ("p.c.server.first",))
    outcome = judged(CaseOutcome.blocked(root))
    assert outcome.blocked_by == BlockedBy(
        "p.c.server.root", "error", "RuntimeError: boom", (PREREQUISITE, "p.c.server.first")
    )
    assert outcome.message == (
        "blocked by p.c.server.root (error): RuntimeError: boom\n"
        f"through the blocked prerequisite(s) {PREREQUISITE} <- p.c.server.first"
    )


def test_a_case_is_never_blocked_by_itself():
    assert judged(CaseOutcome.blocked(BlockedBy(CASE, "failed within this case", "x"))) is None


def test_a_not_applicable_prerequisite_makes_the_case_not_applicable():
    outcome = judged(CaseOutcome(Outcome.NOT_APPLICABLE, "no client role"))
    assert outcome == CaseOutcome(
        Outcome.NOT_APPLICABLE, f"no client role (as for its prerequisite {PREREQUISITE})"
    )


def test_a_prerequisite_without_a_result_blocks_as_not_run():
    outcome = judged(None)
    assert outcome.blocked_by == BlockedBy(
        PREREQUISITE, "not run", "the prerequisite has no result in this run"
    )

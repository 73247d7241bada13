"""A case's outcome as a typed value, from where it is decided to its record.

A case that ends before its verdict (not applicable, blocked by a
prerequisite) ends as a pytest skip, so that pytest, JUnit and Allure show it
as one, with a reason for people to read. The skip carries a
:class:`CaseOutcome`; the harness's plugin records that value and never reads
the reason text back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

from .results import Outcome

NOT_APPLICABLE_PREFIX = "not applicable: "
BLOCKED_PREFIX = "blocked by "


@dataclass(frozen=True)
class BlockedBy:
    """The root cause of a blocked case: the case that did not pass for its
    own rule (a blocked prerequisite passes its root on), how it ended and
    why, and the chain of blocked prerequisites in between, nearest first."""

    case_id: str
    outcome: str
    """``failed``, ``error``, or words of a case's own (``not run``, ``failed
    within this case``)."""
    message: str
    via: tuple[str, ...] = ()

    @property
    def first_line(self) -> str:
        """The root's message as a blocked case quotes it."""
        return (self.message.strip().splitlines() or [""])[0]

    def text(self) -> str:
        """``blocked by <case id> (<outcome>): <first line>``, and the chain."""
        text = f"{BLOCKED_PREFIX}{self.case_id} ({self.outcome}): {self.first_line}"
        if self.via:
            text += f"\nthrough the blocked prerequisite(s) {' <- '.join(self.via)}"
        return text


@dataclass(frozen=True)
class CaseOutcome:
    """How a case ended, as its record says: the outcome, the message, the
    root cause of a blocked case, and whether an error was the target (a role
    of it) not starting, which is no rule's failure (results.summarize)."""

    outcome: Outcome
    message: str = ""
    blocked_by: BlockedBy | None = None
    start_failure: bool = False

    @classmethod
    def not_applicable(cls, reason: str) -> CaseOutcome:
        return cls(Outcome.NOT_APPLICABLE, reason)

    @classmethod
    def blocked(cls, by: BlockedBy) -> CaseOutcome:
        return cls(Outcome.BLOCKED, by.text(), blocked_by=by)

    def shown(self) -> str:
        """The skip reason pytest, JUnit and Allure show for it."""
        if self.outcome is Outcome.NOT_APPLICABLE:
            return NOT_APPLICABLE_PREFIX + self.message
        return self.message


def end_case(outcome: CaseOutcome) -> NoReturn:
    """End the running case with ``outcome``: a pytest skip (reason
    :meth:`CaseOutcome.shown`) that carries it to the plugin."""
    __tracebackhide__ = True  # pytest places the skip where its caller called
    import pytest  # here: the command line reads outcomes without pytest loaded

    skip = pytest.skip.Exception(outcome.shown())
    skip.case_outcome = outcome  # type: ignore[attr-defined]
    raise skip


def ended_with(exc: BaseException | None) -> CaseOutcome | None:
    """The outcome ``exc`` carries, when :func:`end_case` raised it."""
    outcome = getattr(exc, "case_outcome", None)
    return outcome if isinstance(outcome, CaseOutcome) else None

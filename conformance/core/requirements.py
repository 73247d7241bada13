"""Requirement levels and the ``requirement`` marker every case carries.

A conformance case checks exactly one rule of a spec. Its marker gives the
rule a stable id (``<protocol>.<component>.<role>.<rule>``), the level the
spec states it at (RFC 2119 MUST / SHOULD / MAY) and where the spec says so,
so that a failure can name the rule it broke and a report can be read like
the spec's list of rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, NoReturn, Sequence

if TYPE_CHECKING:
    # Imported where a marker is made: the command line (its parser, the
    # coverage and levels commands) reads requirements without pytest.
    import pytest

from .case_outcome import (  # noqa: F401 (the prefixes: imported from here too)
    BLOCKED_PREFIX,
    NOT_APPLICABLE_PREFIX,
    BlockedBy,
    CaseOutcome,
    end_case,
)

CASE_ID_PATTERN = re.compile(r"^[a-z0-9]+(\.[a-z0-9][a-z0-9-]*){3,}$")
ROLES = ("server", "client")
ERRATUM_ID_PATTERN = re.compile(r"^[A-Z]+-E[0-9]+$")
SHARED_STATE_PATTERN = re.compile(r"^[a-z][a-z0-9-]*$")
NODE_STATE = "node"
"""The shared state of a case that stops, restarts or reconfigures the
target's server: every connection to it is affected, so the case is grouped
with every server-role case."""


class BasisKind(str, Enum):
    """What binds a case's level (docs/levels.md). A maintainer whose node
    fails a case reads the sentence it cites: the basis says whether that
    sentence's own word sets the level, or what else does."""

    KEYWORD = "keyword"
    """An upper-case RFC 2119 keyword (MUST, SHOULD, MAY, ...) in the sentence
    the case checks, at or above the case's level."""
    PLAIN_WORDS = "plain-words"
    """A lower-case "must", "should" or "may" in the sentence: the text's own
    imperative in a text that does not use RFC 2119 key words (the SSB guide,
    RFC 23's prose, the Ripple host binding)."""
    WIRE_FORMAT = "wire-format"
    """The layout or grammar a text defines, stated without a keyword: a peer
    whose bytes deviate from it cannot be read."""
    PROFILE = "profile"
    """A rule of the project's profile of a text (docs/*-profile.md), where
    the text leaves the choice open and interoperability needs one."""
    ERRATUM = "erratum"
    """An erratum (docs/errata/<protocol>.md) with its evidence: what the
    implementations the network runs on do where the text says otherwise or
    nothing."""
    INFERENCE = "inference"
    """The harness's inference from the text, argued in one sentence: never
    the text's own keyword."""

    @property
    def from_the_text(self) -> bool:
        """Whether the level is the cited sentence's own word."""
        return self in (BasisKind.KEYWORD, BasisKind.PLAIN_WORDS)


@dataclass(frozen=True)
class Basis:
    """``kind`` and, for every kind but keyword and plain words, the one
    sentence that names what binds the level: the format element, the
    profile rule, the erratum id, or the inference's argument. Written in a
    requirement as ``"keyword"`` or ``"inference: <argument>"``."""

    kind: BasisKind
    note: str = ""

    @classmethod
    def parse(cls, text: str, where: str = "") -> "Basis":
        head, _, note = text.partition(":")
        try:
            kind = BasisKind(head.strip())
        except ValueError:
            raise ValueError(
                f"{where}basis {text!r} must start with one of "
                f"{', '.join(k.value for k in BasisKind)}"
            ) from None
        note = note.strip()
        if kind.from_the_text and note:
            raise ValueError(f"{where}basis {kind.value} takes no note (the citation is its text)")
        if not kind.from_the_text and not note:
            raise ValueError(
                f"{where}basis {kind.value} needs its note after a colon: "
                + {
                    BasisKind.WIRE_FORMAT: "the format element the text defines",
                    BasisKind.PROFILE: "the profile rule and its document",
                    BasisKind.ERRATUM: "the erratum id",
                    BasisKind.INFERENCE: "the argument, in one sentence",
                }[kind]
            )
        return cls(kind, note)

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.note}" if self.note else self.kind.value

    @property
    def word(self) -> str:
        """The word shown beside a level, empty when the level is the
        keyword of the sentence cited: "MUST (inference)"."""
        return "" if self.kind is BasisKind.KEYWORD else self.kind.value


KEYWORD_BASIS = Basis(BasisKind.KEYWORD)


def level_with_basis(level: str, basis: str | Basis | None) -> str:
    """``MUST`` or ``MUST (inference)``: the level as reports show it."""
    if basis is None or basis == "":
        return level
    # A record's basis ("inference: <argument>") or its kind alone, as the
    # matrices keep it ("inference"): the word is the kind's.
    kind = basis.kind if isinstance(basis, Basis) else BasisKind(basis.split(":", 1)[0].strip())
    return level if kind is BasisKind.KEYWORD else f"{level} ({kind.value})"


class Level(str, Enum):
    MUST = "MUST"
    SHOULD = "SHOULD"
    MAY = "MAY"

    @property
    def allure_severity(self) -> str:
        """Allure severity names for the level: a broken MUST blocks certification."""
        return {"MUST": "blocker", "SHOULD": "normal", "MAY": "minor"}[self.value]


@dataclass(frozen=True)
class Requirement:
    """What one case checks. ``role`` is the role the *target* plays;
    ``needs`` are target capabilities (adapter features, credentials) without
    which the case is not applicable."""

    case_id: str
    level: Level
    citation: str
    role: str = "server"
    needs: tuple[str, ...] = field(default_factory=tuple)
    depends: tuple[str, ...] = field(default_factory=tuple)
    """Case ids of the prerequisites: rules this case relies on to tell its
    own rule apart. When one of them did not pass in the same run, this case
    is reported ``blocked`` by it instead of failing for a rule not its own."""
    errata: tuple[str, ...] = field(default_factory=tuple)
    """Ids of the errata (``docs/errata/<protocol>.md``) the case follows
    where the spec's text and the deployed implementations disagree."""
    shares: tuple[str, ...] = field(default_factory=tuple)
    """Names of the target's state the case changes, or that its assertions
    depend on while another case may change it (``balance``, ``feed``,
    ``node`` for a restart, ...). With ``certify --case-jobs N`` the cases
    naming one state run one after another in one worker, in file order
    (see docs/concurrency.md); ``node`` puts the case with every case that
    talks to the target's server."""
    basis: Basis = KEYWORD_BASIS
    """What binds ``level`` (BasisKind); ``conformance coverage --check``
    holds it against the texts."""
    grammar: bool = False
    """The case judges the frame grammar of everything the node sends in
    its role (core/node_grammar.py): it runs after every other case of its
    protocol and role, in their worker under ``--case-jobs``, and the cases
    that meet a violation are blocked by it."""

    @property
    def level_shown(self) -> str:
        """The level with its basis's word: ``MUST`` or ``MUST (inference)``."""
        return level_with_basis(self.level.value, self.basis)

    @property
    def full_citation(self) -> str:
        """The citation with the errata the case follows, as shown in
        failure messages and reports."""
        if not self.errata:
            return self.citation
        return f"{self.citation}; as amended by erratum {', '.join(self.errata)}"

    @property
    def protocol(self) -> str:
        return self.case_id.split(".", 1)[0]

    @property
    def component(self) -> str:
        return self.case_id.split(".")[1]

    def __post_init__(self) -> None:
        if not CASE_ID_PATTERN.match(self.case_id):
            raise ValueError(
                f"case id {self.case_id!r} must look like protocol.component.role.rule "
                "(lower case, digits and dashes)"
            )
        if self.role not in ROLES:
            raise ValueError(f"case {self.case_id}: role must be one of {ROLES}, got {self.role!r}")
        if not self.citation.strip():
            raise ValueError(f"case {self.case_id}: a citation of the spec section is required")
        for dep in self.depends:
            if not CASE_ID_PATTERN.match(dep) or dep == self.case_id:
                raise ValueError(
                    f"case {self.case_id}: prerequisite {dep!r} is not another case id"
                )
        for erratum in self.errata:
            if not ERRATUM_ID_PATTERN.match(erratum):
                raise ValueError(
                    f"case {self.case_id}: erratum id {erratum!r} must look like SSB-E1"
                )
        if self.basis.kind is BasisKind.ERRATUM and self.basis.note.split()[0] not in self.errata:
            raise ValueError(
                f"case {self.case_id}: basis erratum {self.basis.note.split()[0]!r} is not one "
                f"of the errata the case follows ({', '.join(self.errata) or 'none'})"
            )
        for state in self.shares:
            if not SHARED_STATE_PATTERN.match(state):
                raise ValueError(
                    f"case {self.case_id}: shared state {state!r} must be a lower-case name "
                    "like balance or peer-state"
                )


def requirement(
    case_id: str,
    level: str | Level,
    citation: str,
    *,
    role: str = "server",
    needs: tuple[str, ...] | list[str] = (),
    depends: tuple[str, ...] | list[str] = (),
    errata: tuple[str, ...] | list[str] = (),
    shares: tuple[str, ...] | list[str] = (),
    basis: str = "keyword",
    grammar: bool = False,
) -> pytest.MarkDecorator:
    """The marker for a case: ``@requirement("ssb.shs.server.rejects-wrong-network-key",
    "MUST", "guide §Secret handshake, step 1", role="server",
    depends=["ssb.shs.server.completes-valid-handshake"])``; a case that
    changes state other cases read adds e.g. ``shares=["balance"]``.

    ``basis`` is what binds the level (BasisKind): ``"keyword"`` when the
    cited sentence's RFC 2119 keyword does, else ``"plain-words"``,
    ``"wire-format: <element>"``, ``"profile: <rule>"``, ``"erratum: <id>"``
    or ``"inference: <argument>"`` (docs/levels.md).

    ``grammar=True`` makes the case the judge of the frame grammar of what
    the node sends in its role (core/node_grammar.py).

    Validates the arguments at import time so that a typo in a suite is an
    error when the suite loads, not a silently mislabelled result."""
    spec = Requirement(
        case_id,
        Level(level),
        citation,
        role,
        tuple(needs),
        tuple(depends),
        tuple(errata),
        tuple(shares),
        Basis.parse(basis, f"case {case_id}: "),
        bool(grammar),
    )
    import pytest

    return pytest.mark.requirement(
        spec.case_id,
        spec.level.value,
        spec.citation,
        role=spec.role,
        needs=spec.needs,
        depends=spec.depends,
        errata=spec.errata,
        shares=spec.shares,
        basis=str(spec.basis),
        grammar=spec.grammar,
    )


def requirement_of(item: pytest.Item) -> Requirement | None:
    """The Requirement of a collected case, or None for an ordinary test."""
    marker = item.get_closest_marker("requirement")
    if marker is None:
        return None
    case_id, level, citation = marker.args
    return Requirement(
        case_id,
        Level(level),
        citation,
        marker.kwargs.get("role", "server"),
        tuple(marker.kwargs.get("needs", ())),
        tuple(marker.kwargs.get("depends", ())),
        tuple(marker.kwargs.get("errata", ())),
        tuple(marker.kwargs.get("shares", ())),
        Basis.parse(marker.kwargs.get("basis", "keyword")),
        bool(marker.kwargs.get("grammar", False)),
    )


def not_applicable(reason: str) -> NoReturn:
    """End the case as not applicable: the target lacks a role, capability or
    precondition the case needs. Reported with the reason, never as passed."""
    end_case(CaseOutcome.not_applicable(reason))


def blocked(
    root_case_id: str, root_outcome: str, root_message: str, via: Sequence[str] = ()
) -> NoReturn:
    """End the case as blocked: a prerequisite (``depends``) did not pass, so
    the case cannot tell its own rule apart. ``root_*`` name the case that
    did not pass for its own rule (a blocked prerequisite passes its root on),
    ``via`` the chain of blocked prerequisites in between. Reported with the
    root cause, never as passed and never as a failure of this case's rule."""
    end_case(CaseOutcome.blocked(BlockedBy(root_case_id, root_outcome, root_message, tuple(via))))

"""What a run covers: the targets chosen, the case ids of their suites, and
which of them a ``--case`` / ``-k`` selection leaves."""

from __future__ import annotations

import re
from pathlib import Path

from ..core.selection import hint, no_match_message, select, suggest, unmatched
from ..core.targets import KNOWN_PROTOCOLS, Target, TargetError
from ..core.versioned_targets import resolve_versioned
from .options import INTEROP_DIR, SUITES_DIR, RunOptions

_CASE_ID = re.compile(r"@requirement\(\s*\"([^\"]+)\"")
_CASE_ID_CONSTANT = re.compile(r"@requirement\(\s*([A-Z_][A-Z0-9_]*)\s*,")
_STRING_CONSTANT = re.compile(r"^([A-Z_][A-Z0-9_]*) = \"([^\"]+)\"$", re.MULTILINE)


def suite_case_ids(protocol: str, suites_dir: Path = SUITES_DIR) -> list[str]:
    """The case ids the protocol's suite declares, from its sources (every
    ``@requirement("id", ...)`` in conformance/suites/<protocol>/; the
    interop cases with ``suites_dir`` conformance/interop)."""
    ids: list[str] = []
    texts = [
        path.read_text(encoding="utf-8") for path in sorted((suites_dir / protocol).glob("*.py"))
    ]
    # @requirement(NAME, ...) with NAME = "case.id" a constant of the suite: of the module, or imported
    # from a sibling (the STOMP suite keeps prerequisite ids in prerequisites.py); the module's own wins.
    shared = {name: value for text in texts for name, value in _STRING_CONSTANT.findall(text)}
    for text in texts:
        ids += _CASE_ID.findall(text)
        constants = {**shared, **dict(_STRING_CONSTANT.findall(text))}
        ids += [constants[name] for name in _CASE_ID_CONSTANT.findall(text) if name in constants]
    return ids


def case_ids(protocol: str, interop: bool = False) -> list[str]:
    """Every case id of a protocol's suite (interop: its interop cases)."""
    return suite_case_ids(protocol, INTEROP_DIR if interop else SUITES_DIR)


def suite_case_counts() -> dict[str, int]:
    """How many cases each protocol's suite declares: the estimate of a
    target's length when no run timed it."""
    return {protocol: len(suite_case_ids(protocol)) for protocol in KNOWN_PROTOCOLS}


def available_protocols() -> list[str]:
    return sorted(
        p.name
        for p in SUITES_DIR.iterdir()
        if p.is_dir() and p.name in KNOWN_PROTOCOLS and any(p.glob("test_*.py"))
    )


def choose_targets(
    targets: dict[str, Target], names: list[str], protocols: list[str]
) -> list[Target]:
    """The targets to certify: those named, else the built-in reference
    node of each protocol asked for (of every protocol with a suite)."""
    suites = available_protocols()
    for protocol in protocols:
        if protocol not in KNOWN_PROTOCOLS:
            raise TargetError(f"unknown protocol {protocol!r}; known: {', '.join(KNOWN_PROTOCOLS)}")
        if protocol not in suites:
            raise TargetError(
                f"no suite for protocol {protocol!r} yet; suites: {', '.join(suites)}"
            )
    if names:
        # NAME@VERSION: NAME at another release (docs/versions.md).
        resolve_versioned(targets, list(names))
        chosen = []
        for name in names:
            if name not in targets:
                raise TargetError(
                    f"unknown target {name!r}; known: {', '.join(sorted(targets))} "
                    "(define your own with --targets-file)"
                )
            target = targets[name]
            if protocols and target.protocol not in protocols:
                raise TargetError(
                    f"target {name} speaks {target.protocol}, not {', '.join(protocols)}"
                )
            if target.protocol not in suites:
                raise TargetError(f"target {name}: no suite for protocol {target.protocol} yet")
            chosen.append(target)
        return chosen
    wanted = protocols or suites
    chosen = [targets[f"reference-{p}"] for p in wanted if f"reference-{p}" in targets]
    if not chosen:
        raise TargetError(f"no built-in reference target for {', '.join(wanted)}")
    return chosen


def narrow_to_cases(
    chosen: list[Target], patterns: list[str], explicit: bool, interop: bool = False
) -> list[Target]:
    """The targets whose suite has a case ``--case`` selects. Every pattern
    must match some case of the chosen targets' suites, and a target named
    with --target must get at least one case (TargetError, a usage error,
    otherwise); the default targets without a selected case are left out."""
    ids = {t.protocol: case_ids(t.protocol, interop) for t in chosen}
    protocols = sorted(ids)
    kind = "interop " if interop else ""
    every = [case for cases in ids.values() for case in cases]
    missing = unmatched(patterns, every)
    if missing:
        text, near = no_match_message(missing, every)
        raise TargetError(
            f"{text} of the {kind}suite of {', '.join(protocols)}"
            + (f"; {near}" if near else "")
            + f" ({hint(protocols, interop)})"
        )
    keep = [t for t in chosen if select(ids[t.protocol], patterns)]
    left_out = [t for t in chosen if t not in keep]
    if explicit and left_out:
        raise TargetError(
            f"--case {' '.join(patterns)} selects no case of the {kind}suite of "
            + ", ".join(f"{t.name} ({t.protocol})" for t in left_out)
            + f" ({hint({t.protocol for t in left_out}, interop)})"
        )
    return keep


def nothing_selected(
    options: RunOptions, target: Target, code: int, records: list[dict], interop: bool = False
) -> str | None:
    """The usage error for a session that ran no case because the selection
    left none (pytest's exit 5), or None."""
    if code != 5 or records or not options.selection:
        return None
    ids = case_ids(target.protocol, interop)
    example = next(
        iter(suggest(options.keyword or "", ids) + ids), f"{target.protocol}.COMPONENT.ROLE.RULE"
    )
    what = " ".join(
        ([f"-k {options.keyword!r}"] if options.keyword else [])
        + [f"--case {p}" for p in options.case or []]
    )
    why = (
        f": -k matches pytest function names (test_...), not case ids; to select by case id use --case, "
        f"e.g. --case '{example}'"
        if options.keyword
        else ""
    )
    return (
        f"{what} selected no case of {target.name}'s suite ({target.protocol}){why} "
        f"({hint([target.protocol], interop)})"
    )

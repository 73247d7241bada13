"""Selecting cases by their ids: ``--case PATTERN`` (``certify``,
``interop``, ``mutation`` and the plugin).

A pattern is a case id (``ssb.shs.server.completes-valid-handshake``) or a
shell-style glob over case ids (``ssb.shs.*``, ``*.client.*``,
``btp.auth.server.rejects-*``), matched with :func:`fnmatch.fnmatchcase`
(``*``, ``?``, ``[...]``; case-sensitive). A case is selected when any
pattern matches it. ``conformance cases --protocol P`` lists the ids.

A selected case's prerequisites (``depends``) run too, whether selected or
not: a dependent cannot be judged without them. Those not selected are
recorded with ``prerequisite_only`` (docs/reports.md, "Selecting cases").
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Iterable

CASES_HINT = "conformance cases --protocol {protocol}"
"""How to see the case ids of a protocol's suite (``--interop`` for the interop cases)."""


def selected(case_id: str, patterns: Iterable[str]) -> bool:
    return any(fnmatchcase(case_id, pattern) for pattern in patterns)


def select(case_ids: Iterable[str], patterns: Iterable[str]) -> list[str]:
    patterns = list(patterns)
    return [case for case in case_ids if selected(case, patterns)]


def unmatched(patterns: Iterable[str], case_ids: Iterable[str]) -> list[str]:
    """The patterns that match none of ``case_ids``."""
    ids = list(case_ids)
    return [pattern for pattern in patterns if not any(fnmatchcase(case, pattern) for case in ids)]


def hint(protocols: Iterable[str], interop: bool = False) -> str:
    """Where the ids are listed, for an error message."""
    protocols = sorted(set(protocols))
    flag = " --interop" if interop else ""
    if len(protocols) == 1:
        return f"the case ids: `{CASES_HINT.format(protocol=protocols[0])}{flag}`"
    return (
        f"the case ids: `conformance cases{flag}`, or `{CASES_HINT.format(protocol='P')}{flag}` for one of "
        + ", ".join(protocols)
    )


def suggest(pattern: str, case_ids: Iterable[str], limit: int = 3) -> list[str]:
    """Case ids a pattern that matched nothing may have meant: those holding
    it (a pattern matches whole ids: ``sends-valid-hello`` is
    ``*sends-valid-hello``), or holding it with ``-`` for ``_`` (a pytest
    function name)."""
    words = {pattern.strip("*"), pattern.strip("*").removeprefix("test_").replace("_", "-")}
    found = [case for case in case_ids if any(word and word in case for word in words)]
    return found[:limit]


def no_match_message(patterns: list[str], case_ids: list[str]) -> tuple[str, str]:
    """``--case X`` matches no case; with suggestions when some id holds X."""
    text = f"--case {' '.join(patterns)} matches no case"
    near = [case for pattern in patterns for case in suggest(pattern, case_ids)]
    return text, (
        f"did you mean {', '.join(near)}? (a pattern matches whole case ids: a glob such as "
        f"'*{patterns[0].strip('*')}*' matches part of one)"
        if near
        else ""
    )

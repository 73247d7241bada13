"""The order of an implementation's releases: PEP 440 for PyPI packages,
semver for npm packages, a stated fallback for the rest.

Why a table: a version string does not say which registry it came from,
and the two orders disagree where it matters (semver's ``1.0.0-rc.1`` is a
pre-release of 1.0.0; PEP 440 reads ``1.0.0-rc.1`` the same way but also
takes ``1.0.0.post1`` and ``1!2.0``, and semver compares pre-release
identifiers part by part, ``beta.11`` after ``beta.2``, where a plain
string sort would not). So :func:`ecosystems` names, per implementation,
the registry its releases come from (the ``registry`` of its target's
versions table, conformance/targets/*.toml, or UNVERSIONED_ECOSYSTEMS). An
implementation in neither is ordered as PyPI (PEP 440, which also reads plain ``X.Y.Z``): the
reference nodes are this project's own Python packages.

Versions that parse in neither (``5.17.2-SNAPSHOT`` in a PEP 440 table,
``r1234``) come after every version that parses, among themselves in
natural order: the text split into runs of digits (compared as numbers)
and of other characters (compared as text). :func:`ordered` says for each
version which order placed it (``pep440``, ``semver`` or ``fallback``).

No Spark here: the version view computes the ordinals of the (few)
distinct releases in Python and hands them to Spark as a small table; the
README's "certified today" range uses the same order.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from functools import cmp_to_key
from typing import Any, Iterable

PYPI = "pypi"
NPM = "npm"

UNVERSIONED_ECOSYSTEMS: dict[str, str] = {
    # npm packages certified at their pinned release only (no versions table)
    "ssb-db2": NPM,
    "secret-handshake": NPM,
    "ilp-plugin-mini-accounts": NPM,
    # PyPI packages likewise
    "coilmq": PYPI,
    "swpt_stomp": PYPI,
}
"""The registry of implementations whose targets declare no
``[targets.NAME.versions]`` table; the others' is the one that table names
(:func:`ecosystems`), so that a release is ordered by the registry it was
installed from. Any other implementation: PyPI."""


@functools.cache
def ecosystems() -> dict[str, str]:
    """Implementation -> the registry whose version order applies: the
    built-in targets' versions tables, then UNVERSIONED_ECOSYSTEMS."""
    from ..core.targets import load_targets

    declared = {
        target.implementation: target.versions.registry
        for target in load_targets([]).values()
        if target.versions is not None
    }
    return {**UNVERSIONED_ECOSYSTEMS, **declared}


SEMVER = re.compile(
    r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)
"""Semantic Versioning 2.0.0 (semver.org's grammar; a leading ``v`` as npm allows)."""


def ecosystem(implementation: str) -> str:
    return ecosystems().get(implementation, PYPI)


def semver_key(version: str) -> tuple[Any, ...] | None:
    """A sort key in semver precedence, or None if ``version`` is no semver
    (build metadata is ignored)."""
    match = SEMVER.match(version.strip())
    if not match:
        return None
    major, minor, patch, pre, _build = match.groups()
    return semver_precedence(int(major), int(minor), int(patch), pre.split(".") if pre else ())


def semver_precedence(
    major: int, minor: int, patch: int, prerelease: Iterable[str]
) -> tuple[Any, ...]:
    """Semver 2.0.0 precedence (semver.org item 11): a release sorts after
    its pre-releases; pre-release identifiers compare one by one, numbers
    as numbers and below any text, a shorter list first when all before are
    equal. The one definition of the order (the versions command's ranges
    use it too)."""
    parts = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in prerelease)
    return (major, minor, patch, (0, parts) if parts else (1,))


def pep440_key(version: str) -> Any:
    """packaging's Version (PEP 440 order), or None if it does not parse."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version)
    except InvalidVersion:
        return None


def natural_key(version: str) -> tuple[Any, ...]:
    """Runs of digits as numbers, the rest as text: ``r9`` before ``r10``."""
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part)
        for part in re.findall(r"\d+|\D+", version)
    )


@dataclass(frozen=True)
class Release:
    version: str
    ordinal: int
    """0 for the oldest release, counting up."""
    order: str
    """Which order placed it: ``pep440``, ``semver`` or ``fallback``."""


def ordered(implementation: str, versions: Iterable[str]) -> list[Release]:
    """The distinct versions of one implementation, oldest first, each with
    its ordinal and the order that placed it. Two spellings of one PEP 440
    version (``1.0`` and ``1.0.0``) keep both, the shorter text first."""
    scheme = ecosystem(implementation)
    parsed: list[tuple[str, Any]] = []
    fallback: list[str] = []
    for version in sorted(set(v for v in versions if v is not None)):
        key = semver_key(version) if scheme == NPM else pep440_key(version)
        if key is None:
            fallback.append(version)
        else:
            parsed.append((version, key))

    def compare(a: tuple[str, Any], b: tuple[str, Any]) -> int:
        if a[1] != b[1]:
            return -1 if a[1] < b[1] else 1
        return (len(a[0]), a[0]) < (len(b[0]), b[0]) and -1 or 1

    parsed.sort(key=cmp_to_key(compare))
    name = "semver" if scheme == NPM else "pep440"
    out = [Release(v, i, name) for i, (v, _) in enumerate(parsed)]
    out += [
        Release(v, len(parsed) + i, "fallback")
        for i, v in enumerate(sorted(fallback, key=lambda v: (natural_key(v), v)))
    ]
    return out

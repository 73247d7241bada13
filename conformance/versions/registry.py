"""The releases of a package, as its registry lists them, in release order.

PyPI: the JSON API (https://pypi.org/pypi/<package>/json); a release with
no file, or whose files are all yanked, is left out; order and ranges are
``packaging``'s (PEP 440). npm: ``npm view <package> versions --json``;
order and ranges are semver's (SemVer below: numeric major, minor, patch; a
pre-release sorts before its release, its dot-separated identifiers compared
numerically when both are numbers, else as text, a number before a text,
fewer before more; build metadata ignored). Pre-releases are left out
unless asked for.

A range is a comma-separated list of comparators, ``>=8,<9``: PEP 440
specifiers for PyPI; for npm ``>=``, ``>``, ``<=``, ``<``, ``==`` (or ``=``)
with a version that may leave out its minor and patch (``<2`` is ``<2.0.0``).
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ..aggregate.release_order import semver_precedence

PYPI_URL = "https://pypi.org/pypi/{package}/json"
REGISTRY_TIMEOUT = 60.0


class RegistryError(Exception):
    """The registry could not be asked, or does not know the package."""


class RangeError(ValueError):
    """A --range that is not one."""


# -- the registries --------------------------------------------------------------


def pypi_releases(package: str) -> list[str]:
    url = PYPI_URL.format(package=package)
    try:
        with urllib.request.urlopen(url, timeout=REGISTRY_TIMEOUT) as response:
            data = json.load(response)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise RegistryError(f"PyPI has no package {package!r} ({url}: 404)") from None
        raise RegistryError(f"PyPI answered {exc.code} for {url}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise RegistryError(f"registry unreachable: PyPI ({url}): {exc}") from None
    releases = []
    for version, files in data.get("releases", {}).items():
        if files and not all(f.get("yanked") for f in files):
            releases.append(version)
    return releases


def npm_releases(package: str) -> list[str]:
    argv = ["npm", "view", package, "versions", "--json"]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=REGISTRY_TIMEOUT, stdin=subprocess.DEVNULL
        )
    except FileNotFoundError:
        raise RegistryError("npm is not installed: it lists an npm package's releases") from None
    except subprocess.TimeoutExpired:
        raise RegistryError(f"registry unreachable: `{' '.join(argv)}` ran past 60 s") from None
    if done.returncode != 0:
        text = (done.stderr or done.stdout).strip()
        if "E404" in text:
            raise RegistryError(f"npm has no package {package!r}")
        last = " | ".join(line for line in text.splitlines() if "ERR!" in line)[:500] or text[-500:]
        raise RegistryError(f"registry unreachable: `{' '.join(argv)}` failed: {last}")
    try:
        data = json.loads(done.stdout or "[]")
    except ValueError:
        raise RegistryError(f"`{' '.join(argv)}` printed no JSON") from None
    return [data] if isinstance(data, str) else [str(v) for v in data]


def releases(registry: str, package: str) -> list[str]:
    """Every release the registry lists, unsorted."""
    if registry == "pypi":
        return pypi_releases(package)
    if registry == "npm":
        return npm_releases(package)
    raise RegistryError(f"unknown registry {registry!r}")


# -- semver (npm) ------------------------------------------------------------------

_SEMVER = re.compile(
    r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z.-]+)?$"
)


@dataclass(frozen=True)
@functools.total_ordering
class SemVer:
    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str, partial: bool = False) -> SemVer:
        match = _SEMVER.match(text.strip())
        if match is None and partial:
            parts = text.strip().lstrip("v").split(".")
            if 1 <= len(parts) <= 2 and all(p.isdigit() for p in parts):
                numbers = [int(p) for p in parts] + [0] * (3 - len(parts))
                return cls(*numbers)
        if match is None:
            raise ValueError(f"{text!r} is not a semver version")
        pre = tuple(match.group(4).split(".")) if match.group(4) else ()
        return cls(int(match.group(1)), int(match.group(2)), int(match.group(3)), pre)

    @property
    def is_prerelease(self) -> bool:
        return bool(self.pre)

    def _key(self) -> tuple:
        return semver_precedence(self.major, self.minor, self.patch, self.pre)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, SemVer):
            return NotImplemented
        return self._key() < other._key()


_NPM_COMPARATOR = re.compile(r"^(>=|<=|>|<|==|=)?\s*(\S+)$")


def npm_range(text: str) -> list[tuple[str, SemVer]]:
    clauses = []
    for part in re.split(r"[,\s]+(?=[<>=])|,", text.strip()):
        part = part.strip()
        if not part:
            continue
        match = _NPM_COMPARATOR.match(part)
        if match is None:
            raise RangeError(f"{part!r} is not a comparator (>=, >, <=, <, == VERSION)")
        try:
            version = SemVer.parse(match.group(2), partial=True)
        except ValueError as exc:
            raise RangeError(str(exc)) from None
        clauses.append((match.group(1) or "==", version))
    if not clauses:
        raise RangeError(f"{text!r} is an empty range")
    return clauses


def _npm_matches(version: SemVer, clauses: list[tuple[str, SemVer]]) -> bool:
    checks = {
        ">=": lambda a, b: a >= b,
        ">": lambda a, b: a > b,
        "<=": lambda a, b: a <= b,
        "<": lambda a, b: a < b,
        "==": lambda a, b: a == b,
        "=": lambda a, b: a == b,
    }
    return all(checks[op](version, bound) for op, bound in clauses)


# -- order and selection -------------------------------------------------------------


def sort_key(registry: str):
    return Version if registry == "pypi" else SemVer.parse


def select(
    registry: str, versions: list[str], range_text: str | None = None, pre: bool = False
) -> list[str]:
    """The versions a range (None: every release) selects, oldest first;
    pre-releases only with ``pre`` (or when the range names one exactly)."""
    parsed = []
    for text in versions:
        try:
            parsed.append((sort_key(registry)(text), text))
        except (InvalidVersion, ValueError):
            continue  # not a release number of this registry's scheme
    parsed.sort(key=lambda item: item[0])
    if registry == "pypi":
        try:
            spec = SpecifierSet(range_text or "", prereleases=True)
        except InvalidSpecifier as exc:
            raise RangeError(f"--range {range_text!r}: {exc}") from None
        exact = {s.version for s in spec if s.operator in ("==", "===")}
        return [
            text
            for version, text in parsed
            if version in spec and (pre or not version.is_prerelease or text in exact)
        ]
    clauses = npm_range(range_text) if range_text else []
    exact = {bound for op, bound in clauses if op in ("==", "=")}
    return [
        text
        for version, text in parsed
        if _npm_matches(version, clauses) and (pre or not version.is_prerelease or version in exact)
    ]

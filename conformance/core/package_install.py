"""One release of a package, installed once into a cache of its own, for a
versioned target (``IMPL@VERSION``, docs/versions.md).

A target that can be certified at other releases declares where its package
comes from in its ``[targets.NAME.versions]`` table (PackageSource): the
registry (``pypi``: ``pip install --target``; ``npm``: ``npm install
--prefix``), the package's name there, and the environment variables that
hand the installed path to the target's launch command (``{package_dir}``
in their values). Nothing here knows one implementation from another.

The cache: ``<root>/<implementation>/<version>/`` holds ``pkg/`` (what was
installed), ``install.log`` (the installer's output) and ``install.json``
(ok or the reason it failed, the seconds it took). ``<version>.lock`` beside
it keeps two processes from installing the same release at once: the second
waits and finds it done. A failed install is remembered, so that every case
of a run reads the same reason without installing again; the command that
starts a run retries it (``retry_failed``).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .target_errors import TargetError, TargetNotStarted

REGISTRIES = ("pypi", "npm")

CACHE_ENV = "CONFORMANCE_VERSIONS_CACHE"
"""Environment variable naming the cache root (default: .cache/versions in
the checkout)."""

INSTALL_TIMEOUT = 900.0
"""Seconds one install may take (ssb-server's native modules build for minutes)."""

PACKAGE_DIR_PLACEHOLDER = "{package_dir}"

_VERSION_TEXT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+_-]*$")
"""What a version may look like: it becomes a directory name and a pin."""


CHECKOUT = Path(__file__).resolve().parents[2]
"""The checkout (target_spec.REPO_ROOT, which imports this module)."""


def default_cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or CHECKOUT / ".cache" / "versions")


@dataclass(frozen=True)
class PackageSource:
    """A ``[targets.NAME.versions]`` table: where other releases come from."""

    registry: str
    package: str
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment variables of the launch (and adapters), ``{package_dir}``
    standing for the installed path (pip's --target dir, npm's --prefix)."""
    overrides: Mapping[str, str] = field(default_factory=dict)
    """npm only: package.json ``overrides`` for the install, the pins a
    project keeps for dependencies whose newer releases broke old ones
    (interop/node/package.json pins ssb-friends 4.1.4 for ssb-server)."""


def parse_package_source(table: Any, where: str) -> PackageSource:
    if not isinstance(table, Mapping):
        raise TargetError(f"{where} [versions]: must be a table (registry, package, env)")
    unknown = set(table) - {"registry", "package", "env", "overrides"}
    if unknown:
        raise TargetError(
            f"{where} [versions]: unknown field(s) {sorted(unknown)}; known: env, overrides, "
            "package, registry"
        )
    registry = table.get("registry")
    if registry not in REGISTRIES:
        raise TargetError(f"{where} [versions]: registry must be one of {REGISTRIES}")
    package = table.get("package")
    if not isinstance(package, str) or not package.strip():
        raise TargetError(f"{where} [versions]: package must be the package's name")
    env = table.get("env", {})
    if not isinstance(env, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise TargetError(f'{where} [versions]: env must be a table of NAME = "value"')
    if not any(PACKAGE_DIR_PLACEHOLDER in value for value in env.values()):
        raise TargetError(
            f"{where} [versions]: env must hand the installed path to the launch: a variable "
            f'whose value holds {PACKAGE_DIR_PLACEHOLDER} (e.g. PYTHONPATH = "{{package_dir}}")'
        )
    overrides = table.get("overrides", {})
    if not isinstance(overrides, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in overrides.items()
    ):
        raise TargetError(f'{where} [versions]: overrides must be a table of package = "version"')
    if overrides and registry != "npm":
        raise TargetError(f"{where} [versions]: overrides are npm's (package.json overrides)")
    return PackageSource(registry, package, dict(env), dict(overrides))


def check_version_text(version: str) -> None:
    if not _VERSION_TEXT.match(version) or ".." in version:
        raise TargetError(
            f"version {version!r} is not a release number (letters, digits, '.', '+', '-', '_')"
        )


@dataclass(frozen=True)
class PackageInstall:
    """One release of a PackageSource and where it is (to be) installed."""

    source: PackageSource
    implementation: str
    version: str
    directory: Path

    @property
    def package_dir(self) -> Path:
        return self.directory / "pkg"

    @property
    def log_path(self) -> Path:
        return self.directory / "install.log"

    @property
    def status_path(self) -> Path:
        return self.directory / "install.json"

    @property
    def lock_path(self) -> Path:
        return self.directory.parent / f"{self.version}.lock"

    @property
    def spec(self) -> str:
        """The pin the installer is given."""
        if self.source.registry == "pypi":
            return f"{self.source.package}=={self.version}"
        return f"{self.source.package}@{self.version}"

    def launch_env(self) -> dict[str, str]:
        return {
            name: value.replace(PACKAGE_DIR_PLACEHOLDER, str(self.package_dir))
            for name, value in self.source.env.items()
        }

    def status(self) -> dict | None:
        try:
            return json.loads(self.status_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def command(self) -> list[str]:
        if self.source.registry == "pypi":
            return [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--no-input",
                "--disable-pip-version-check",
                "--no-warn-script-location",
                "--target",
                str(self.package_dir),
                self.spec,
            ]
        return [
            "npm",
            "install",
            "--prefix",
            str(self.package_dir),
            "--no-audit",
            "--no-fund",
            "--no-save",
            "--no-package-lock",
            "--loglevel=warn",
            self.spec,
        ]


def package_install(
    source: PackageSource, implementation: str, version: str, cache_root: Path | None = None
) -> PackageInstall:
    check_version_text(version)
    root = cache_root or default_cache_root()
    safe_impl = re.sub(r"[^A-Za-z0-9._-]", "_", implementation)
    return PackageInstall(source, implementation, version, root / safe_impl / version)


@dataclass(frozen=True)
class InstallResult:
    ok: bool
    cached: bool
    seconds: float
    reason: str = ""


def failure_reason(log_text: str, code: int | None) -> str:
    """The installer's own words for why it failed: its ERROR lines (pip's
    "No matching distribution", npm's "ERR! notarget"), else its last line."""
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    errors = [
        line
        for line in lines
        if line.startswith("ERROR:") or "ERR!" in line or line.startswith("error:")
    ]
    # The last ERROR lines are the verdict (pip first lists what it ignored).
    picked = errors[-2:] if errors else lines[-3:]
    how = "timed out" if code is None else f"exited with code {code}"
    return f"the installer {how}: " + " | ".join(picked)[:1500]


def ensure_installed(install: PackageInstall, retry_failed: bool = False) -> InstallResult:
    """Install the release unless the cache has it; under a lock, so that
    concurrent runs install it once. A failure is remembered (install.json)
    and returned again unless ``retry_failed``."""
    install.directory.parent.mkdir(parents=True, exist_ok=True)
    with open(install.lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        status = install.status()
        if status is not None and status.get("overrides", {}) != dict(install.source.overrides):
            status = None  # installed with other pins: not this install
        if status is not None and (status.get("ok") or not retry_failed):
            return InstallResult(
                bool(status.get("ok")),
                True,
                float(status.get("seconds", 0.0)),
                str(status.get("reason", "")),
            )
        if install.package_dir.exists():
            shutil.rmtree(install.package_dir)
        install.package_dir.mkdir(parents=True)
        if install.source.overrides:
            manifest = {"private": True, "overrides": dict(install.source.overrides)}
            (install.package_dir / "package.json").write_text(json.dumps(manifest) + "\n")
        argv = install.command()
        started = time.monotonic()
        code: int | None
        with open(install.log_path, "w", encoding="utf-8") as log:
            log.write(f"$ {' '.join(argv)}\n")
            log.flush()
            try:
                code = subprocess.run(
                    argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    timeout=INSTALL_TIMEOUT,
                    cwd=install.directory,
                ).returncode
            except subprocess.TimeoutExpired:
                code = None
            except OSError as exc:
                log.write(f"error: could not run {argv[0]}: {exc}\n")
                code = 127
        seconds = round(time.monotonic() - started, 3)
        ok = code == 0
        reason = "" if ok else failure_reason(install.log_path.read_text("utf-8", "replace"), code)
        record = {
            "ok": ok,
            "implementation": install.implementation,
            "version": install.version,
            "spec": install.spec,
            "registry": install.source.registry,
            "overrides": dict(install.source.overrides),
            "seconds": seconds,
            "reason": reason,
            "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        partial = install.status_path.with_suffix(".json.part")
        partial.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        partial.replace(install.status_path)
        return InstallResult(ok, False, seconds, reason)


def require_installed(install: PackageInstall) -> None:
    """Before a versioned target's process starts: the release is installed,
    or TargetNotStarted says why not (no rule's failure)."""
    result = ensure_installed(install)
    if not result.ok:
        raise TargetNotStarted(
            f"{install.implementation} {install.version} could not be installed ({install.spec} "
            f"from {install.source.registry}): {result.reason}; log: {install.log_path}"
        )

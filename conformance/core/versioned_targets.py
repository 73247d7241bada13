"""Versioned targets: ``NAME@VERSION`` is the target NAME (its launch,
adapters, protocol, roles, capabilities, params, credentials) at another
release of its package, installed into a cache of its own
(package_install.py) and handed to the launch through the environment the
target's ``[targets.NAME.versions]`` table declares. Every record of it
carries the release as ``implementation_version`` (docs/versions.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import MutableMapping

from .package_install import check_version_text, package_install
from .target_errors import TargetError
from .target_spec import LaunchSpec, Target

SEPARATOR = "@"


def split_versioned_name(name: str) -> tuple[str, str] | None:
    """``("stomp-py", "8.1.0")`` for ``stomp-py@8.1.0``; None for a plain
    name. A name with an empty side, or a version no release can have, is a
    TargetError."""
    if SEPARATOR not in name:
        return None
    base, _, version = name.partition(SEPARATOR)
    if not base or not version:
        raise TargetError(
            f"target {name!r}: a versioned target is NAME@VERSION, e.g. stomp-py@8.1.0"
        )
    check_version_text(version)
    return base, version


def versionable(targets: dict[str, Target]) -> dict[str, Target]:
    """The targets that declare where other releases come from."""
    return {name: t for name, t in targets.items() if t.versions is not None}


def derive_target(base: Target, version: str, cache_root: Path | None = None) -> Target:
    """``base`` at ``version``: same everything, the release installed into
    its own cache and put on the launch's environment."""
    if base.versions is None:
        raise TargetError(f"target {base.name!r} has no [targets.{base.name}.versions] table")
    check_version_text(version)
    if base.launch is None:
        raise TargetError(
            f"target {base.name!r} is not launched by the harness: no release of it can be installed"
        )
    install = package_install(base.versions, base.implementation, version, cache_root)
    launch: LaunchSpec = dataclasses.replace(
        base.launch, env={**base.launch.env, **install.launch_env()}
    )
    label = base.versions.package
    return dataclasses.replace(
        base,
        name=f"{base.name}{SEPARATOR}{version}",
        version=version,
        launch=launch,
        package=install,
        description=f"{label} {version} from {base.versions.registry}, as {base.name} "
        f"(cached in {install.directory})",
    )


def resolve_versioned(
    targets: MutableMapping[str, Target], names: list[str | None], cache_root: Path | None = None
) -> None:
    """Add to ``targets`` every ``NAME@VERSION`` of ``names`` (the others
    are left to the caller's own unknown-target error)."""
    for name in names:
        if name is None or name in targets:
            continue
        parts = split_versioned_name(name)
        if parts is None:
            continue
        base_name, version = parts
        base = targets.get(base_name)
        if base is None or base.versions is None:
            known = ", ".join(sorted(versionable(dict(targets)))) or "none"
            what = "unknown target" if base is None else "no releases declared for target"
            raise TargetError(
                f"{name!r}: {what} {base_name!r}; targets with releases ({'[versions]'} "
                f"table): {known} (docs/versions.md)"
            )
        targets[name] = derive_target(base, version, cache_root)

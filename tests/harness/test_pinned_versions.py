"""Every third-party target is installed at the version its target
declares and its findings were made with: a new release is a new target,
never a silent change under an old verdict (docs/findings/, the README's
"Certified today")."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from conformance.core.target_spec import builtin_targets

REPO = Path(__file__).resolve().parents[2]
NPM_MANIFESTS = (
    REPO / "interop" / "node" / "package.json",
    REPO / "interop" / "node" / "mini-accounts" / "package.json",
    REPO / "interop" / "node" / "ssb-db2" / "package.json",
)


def pyproject_pins() -> dict[str, str]:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    pins = {}
    for requirement in (r for group in extras.values() for r in group):
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==([0-9][^,;\s]*)", requirement)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def npm_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for manifest in NPM_MANIFESTS:
        pins.update(json.loads(manifest.read_text())["dependencies"])
    return pins


def debian_pin(script: str, variable: str) -> str:
    match = re.search(
        rf'^want="\$\{{{variable}:-([0-9.]+)\}}"$',
        (REPO / "scripts" / script).read_text(),
        re.MULTILINE,
    )
    assert match, f"scripts/{script} pins no upstream version ({variable})"
    return match.group(1)


def swpt_stomp_commit() -> str:
    match = re.search(
        r"^commit=([0-9a-f]{40})$", (REPO / "scripts" / "install-swpt-stomp.sh").read_text(), re.M
    )
    assert match
    return match.group(1)


def installed_pin(implementation: str) -> str:
    """Where and at what version the project's scripts install it."""
    if implementation == "activemq":
        return debian_pin("install-activemq.sh", "ACTIVEMQ_VERSION")
    if implementation == "rabbitmq":
        return debian_pin("install-rabbitmq.sh", "RABBITMQ_VERSION")
    python, npm = pyproject_pins(), npm_pins()
    if implementation.lower() in python:
        return python[implementation.lower()]
    if implementation in npm:
        return npm[implementation]
    raise LookupError(implementation)


THIRD_PARTY = {
    name: target
    for name, target in builtin_targets().items()
    if not name.startswith("reference-")
    # Built from sources of our own (interop/ocaml) or a commit archive: below.
    and target.implementation not in ("ocaml-ripp", "swpt_stomp")
}


@pytest.mark.parametrize("name", sorted(THIRD_PARTY))
def test_target_version_is_the_one_installed(name: str):
    target = THIRD_PARTY[name]
    assert installed_pin(target.implementation) == target.version, (
        f"target {name} says {target.implementation} {target.version}; "
        f"the project installs {installed_pin(target.implementation)}"
    )


def test_swpt_stomp_is_installed_from_the_commit_its_targets_name():
    commit = swpt_stomp_commit()
    for name in ("swpt-server", "swpt-client"):
        text = (REPO / "conformance" / "targets" / "builtin.toml").read_text()
        block = text.split(f"[targets.{name}]", 1)[1].split("\n[targets.", 1)[0]
        assert f"commit {commit[:12]}" in block, name


def test_the_pins_are_exact():
    """No range: `stomp.py>=8.1` installed 9.0.0 today and may install 10 tomorrow."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for package in ("stomp.py", "stompman", "coilmq", "aiostomp"):
        # The fast tier's extra holds them; the test extra holds that one.
        (spec,) = [r for r in extras["test-fast"] if r.lower().startswith(package)]
        assert re.fullmatch(rf"{re.escape(package)}==[0-9.]+", spec), spec
    for name, version in npm_pins().items():
        assert re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", version), (name, version)

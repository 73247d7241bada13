"""The targets the learn tests learn: the protocol's reference node, one of
its faults and some of its conformant variants (late-answers as late as half
the alphabet's read window shared among the writes of one answer, as `conformance mutation` makes it half the read
deadline), written as a targets file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conformance.core.targets import load_targets
from conformance.learn.alphabet import ProtocolAlphabet, alphabet_for
from conformance.learn.learner import LearnOptions, learn, running_target
from conformance.mutation import (
    builtin_tables,
    late_seconds,
    mutant_name,
    mutant_table,
    targets_toml,
    variant_name,
    variant_specs,
    variant_table,
)


def write_learn_targets(
    folder: Path, protocol: str, fault: str, variants: tuple[str, ...], alphabet: ProtocolAlphabet
) -> Path:
    """``folder``/targets.toml: the mutant of ``fault`` (server role) and the
    ``variants``, beside the built-in reference target."""
    reference = builtin_tables()[f"reference-{protocol}"]
    tables = {mutant_name(protocol, fault): mutant_table(reference, fault, "server")}
    specs = {spec.name: spec for spec in variant_specs(protocol)}
    late = late_seconds(protocol, alphabet.late_window())
    for name in variants:
        tables[variant_name(protocol, name)] = variant_table(reference, specs[name], late)
    path = folder / "targets.toml"
    path.write_text(targets_toml(tables), encoding="utf-8")
    return path


def learn_module_fixtures(protocol: str, fault: str, variants: tuple[str, ...]) -> tuple[Any, Any]:
    """The module fixtures of a protocol's learn tests, to assign in the
    module (``targets, reference = learn_module_fixtures(...)``): ``targets``,
    the targets of :func:`write_learn_targets` loaded; ``reference``, the
    reference node's server model, learnt once for the module."""
    alphabet = alphabet_for(protocol, "server")

    @pytest.fixture(scope="module")
    def targets(tmp_path_factory: pytest.TempPathFactory) -> dict:
        path = write_learn_targets(
            tmp_path_factory.mktemp("learn"), protocol, fault, variants, alphabet
        )
        return load_targets([str(path)])

    @pytest.fixture(scope="module")
    def reference(targets: dict, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN202
        reference_target = targets[f"reference-{protocol}"]
        with running_target(reference_target, tmp_path_factory.mktemp("ref"), "t") as runtime:
            return learn(runtime, alphabet, LearnOptions())

    return targets, reference

"""The targets the learn tests learn: the protocol's reference node, one of
its faults and some of its conformant variants (late-answers as late as half
the alphabet's read window shared among the writes of one answer, as `conformance mutation` makes it half the read
deadline), written as a targets file."""

from __future__ import annotations

from pathlib import Path

from conformance.learn.alphabet import ProtocolAlphabet
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

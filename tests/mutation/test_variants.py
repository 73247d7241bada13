"""The conformant variants: every behaviour the texts allow that the
reference nodes can switch on (``--variant NAME``, registries in
``reference_impl/<protocol>/variants.py``) is certified CONFORMANT with every
case passed, and docs/mutation.md lists them as they are.

A case that fails a variant leans on what our own node happens to do (answer
at once, write one frame per write, never speak unprompted): a harness bug,
to be fixed in the case, never by dropping the variant."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conformance.runner import suite_case_ids
from conformance.mutation import (
    FAULT_REGISTRIES,
    builtin_tables,
    late_seconds,
    run_mutation,
    targets_toml,
    variant_name,
    variant_specs,
    variant_table,
)
from conformance.core.targets import load_targets_file
from reference_impl.variants import LATE_ANSWERS

from .test_mutation import TEST_PARAMS

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "mutation.md"
PROTOCOLS = sorted(FAULT_REGISTRIES)
VARIANTS = [
    pytest.param(
        protocol,
        spec.name,
        id=f"{protocol}-{spec.name}",
        # A late-answers run waits 1.5 s per write: SSB's took
        # 288 s of the default 300 s test timeout in a loaded
        # full tier. The test's own limit, not a case's deadline.
        marks=[pytest.mark.timeout(900)] if spec.name == LATE_ANSWERS else [],
    )
    for protocol in PROTOCOLS
    for spec in variant_specs(protocol)
]
LATE_CASE_JOBS = 2
"""A late-answers certification is mostly waiting (every write leaves
seconds late): its server cases and its client cases run side by side so
that it costs minutes, not quarters of an hour. Two workers, because each
suite's server cases are one group and its client cases another
(docs/concurrency.md: a group runs in one worker); a third or fourth worker
got no group and only started, collected and launched a node of its own.
Concurrency changes no verdict (docs/concurrency.md)."""


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_protocol_has_variants_citing_their_text(protocol):
    specs = variant_specs(protocol)
    names = [spec.name for spec in specs]
    assert len(names) == len(set(names)), names
    assert {"split-writes", "coalesce-writes", "late-answers"} <= set(names), names
    for spec in specs:
        assert spec.allowed_by.strip() and spec.description.strip(), spec.name
        assert set(spec.roles) <= {"server", "client"}, spec.name


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_variant_targets_copy_the_reference_with_the_flag_on_their_roles(protocol, tmp_path):
    reference = builtin_tables()[f"reference-{protocol}"]
    specs = variant_specs(protocol)
    late = late_seconds(protocol, 3.0)
    path = tmp_path / "variants.toml"
    path.write_text(
        targets_toml(
            {
                variant_name(protocol, spec.name): variant_table(reference, spec, late)
                for spec in specs
            }
        )
    )
    targets = load_targets_file(path)
    base = load_targets_file("<ref>", targets_toml({"ref": reference}))["ref"]
    for spec in specs:
        target = targets[variant_name(protocol, spec.name)]
        flags = ("--variant", spec.name) + (
            ("--late-seconds", f"{late:g}") if spec.name == LATE_ANSWERS else ()
        )
        for role in ("server", "client"):
            plain = getattr(base.launch, role)
            if plain:
                assert getattr(target.launch, role) == (
                    plain + flags if role in spec.roles else plain
                ), (spec.name, role)
        assert (target.roles, target.capabilities) == (base.roles, base.capabilities)


@pytest.mark.parametrize(("protocol", "variant"), VARIANTS)
def test_variant_is_certified_conformant(protocol, variant, tmp_path):
    """Certifies the reference node with this one variant: every case of the
    roles it changes is recorded and passed (none failed, in error, blocked,
    or not applicable: the plain node passes them all), exit status 0."""
    # Only the cases of the roles the variant changes (and their
    # prerequisites): the other role runs the reference's own launch,
    # unchanged, whose cases the baseline certifies
    # (test_mutation.test_reference_node_without_a_fault_passes_every_case),
    # as the fault tests do. `conformance mutation` still runs whole suites.
    (spec,) = [spec for spec in variant_specs(protocol) if spec.name == variant]
    suite = set(suite_case_ids(protocol))
    every_role = {case.split(".")[2] for case in suite}
    changed = set(spec.roles) & every_role
    run = run_mutation(
        [protocol],
        [],
        jobs=1,
        work_dir=tmp_path,
        progress=lambda line: None,
        reference=False,
        faults=False,
        variants=[variant],
        params=TEST_PARAMS.get(protocol),
        case_jobs=LATE_CASE_JOBS if variant == LATE_ANSWERS else 1,
        cases=None if changed == every_role else [f"{protocol}.*.{role}.*" for role in changed],
    )
    (result,) = run.variants
    cert = result.certification
    records = cert.records
    role_cases = {case for case in suite if case.split(".")[2] in changed}
    assert role_cases <= set(records) <= suite, sorted(role_cases ^ set(records))
    assert all(records[case]["prerequisite_only"] for case in set(records) - role_cases), sorted(
        set(records) - role_cases
    )
    not_passed = {
        case: (record["outcome"], record["message"][:400])
        for case, record in records.items()
        if record["outcome"] != "passed"
    }
    assert not not_passed, not_passed
    assert result.conformant and cert.exit_code == 0


def _doc_variant_rows() -> dict[tuple[str, str], list[str]]:
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\| ([a-z]+) \| `([a-z0-9-]+)` \| (.*) \|$", line)
        if match and match.group(1) in PROTOCOLS:
            rows[(match.group(1), match.group(2))] = [
                cell.strip() for cell in match.group(3).split(" | ")
            ]
    return rows


def test_doc_lists_every_variant_as_conformant():
    """docs/mutation.md's variants table is `conformance mutation --variants
    --format markdown`: every variant of the registries, as they define it,
    CONFORMANT."""
    rows = _doc_variant_rows()
    specs = {
        (protocol, spec.name): spec for protocol in PROTOCOLS for spec in variant_specs(protocol)
    }
    assert sorted(rows) == sorted(specs), "regenerate the variants table of docs/mutation.md"
    for key, spec in specs.items():
        roles, description, allowed_by, verdict = rows[key]
        assert (roles, description, allowed_by) == (
            "/".join(spec.roles),
            spec.description,
            spec.allowed_by,
        ), key
        assert verdict == "CONFORMANT", key
    text = DOC.read_text(encoding="utf-8")
    assert f"**Variants certified CONFORMANT: {len(specs)}/{len(specs)}**" in text

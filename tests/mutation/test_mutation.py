"""The mutation score: every fault of the reference nodes is caught by
exactly its own cases, the conformant nodes pass, and docs/mutation.md shows
the registries as they are."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conformance.core.requirements import level_with_basis
from conformance.core.results import summarize
from conformance.core.targets import load_targets_file
from conformance.runner import suite_case_ids
from conformance.mutation import (
    FAULT_REGISTRIES,
    builtin_tables,
    mutant_name,
    mutant_table,
    registry,
    registry_problems,
    run_mutation,
    targets_toml,
)

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "mutation.md"
PROTOCOLS = sorted(FAULT_REGISTRIES)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_registry_covers_every_case_of_the_suite(protocol):
    """Every case has a fault (or a written reason why its rule cannot be
    broken alone); every fault names existing cases of its own role."""
    assert suite_case_ids(protocol)
    assert registry_problems(protocol) == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_mutant_targets_copy_the_reference_with_the_fault_on_one_role(protocol, tmp_path):
    reference = builtin_tables()[f"reference-{protocol}"]
    tables = {
        mutant_name(protocol, spec.name): mutant_table(reference, spec.name, spec.role)
        for spec in registry(protocol).SPECS
    }
    path = tmp_path / "mutants.toml"
    path.write_text(targets_toml(tables))
    targets = load_targets_file(path)
    base = load_targets_file("<ref>", targets_toml({"ref": reference}))["ref"]
    for spec in registry(protocol).SPECS:
        target = targets[mutant_name(protocol, spec.name)]
        assert getattr(target.launch, spec.role) == getattr(base.launch, spec.role) + (
            "--fault",
            spec.name,
        )
        if (
            spec.role == "server"
        ):  # the client cases would run the unchanged client command: not run again
            assert target.roles == ("server",) and not target.launch.client
        else:
            assert target.roles == base.roles and target.launch.server == base.launch.server
        assert (target.protocol, target.capabilities) == (base.protocol, base.capabilities)


def _doc_rows() -> dict[str, list[str]]:
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\| `([a-z0-9-]+)` \| (.*) \|$", line)
        if match:
            rows[match.group(1)] = [cell.strip() for cell in match.group(2).split(" | ")]
    return rows


def test_doc_table_matches_the_registries():
    """docs/mutation.md is `conformance mutation --format markdown`; it must
    list every fault as the registries define it, each caught."""
    rows = _doc_rows()
    specs = [spec for protocol in PROTOCOLS for spec in registry(protocol).SPECS]
    assert sorted(rows) == sorted(spec.name for spec in specs), "regenerate docs/mutation.md"
    for spec in specs:
        role, description, expected, failed, caught = rows[spec.name]
        assert (role, description) == (spec.role, spec.description), spec.name
        assert expected == "<br>".join(f"`{case}`" for case in spec.cases), spec.name
        assert sorted(failed.split("<br>")) == sorted(expected.split("<br>")) and caught == "yes", (
            spec.name
        )
    text = DOC.read_text(encoding="utf-8")
    assert f"**Mutation score: {len(specs)}/{len(specs)} faults caught (100 %)**" in text
    for protocol in PROTOCOLS:
        for case in registry(protocol).NOT_ISOLABLE:
            assert f"- `{case}`: " in text, case


# The shortest waits the rules allow, for the project's own tests (certify
# keeps the defaults): the idle STOMP session lasts 4 s instead of 12, still
# twice as long as the drop-idle-connections fault lets a session sit idle.
TEST_PARAMS = {"stomp": {"idle_seconds": 4}}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_reference_node_without_a_fault_passes_every_case(protocol, tmp_path):
    """The mutation score's baseline, and the reference node's own
    certification in the fast tier: every case of the suite is recorded
    and passed, and the session ends with exit status 0."""
    run = run_mutation(
        [protocol],
        [],
        jobs=1,
        work_dir=tmp_path,
        progress=lambda line: None,
        faults=False,
        params=TEST_PARAMS.get(protocol),
    )
    assert run.faults == []
    cert = run.conformant[protocol]
    assert run.conformant_ok(protocol), sorted(cert.with_outcome("failed", "error", "blocked"))
    assert set(cert.records) == set(suite_case_ids(protocol)), sorted(
        set(cert.records) ^ set(suite_case_ids(protocol))
    )
    not_passed = {
        case: (r["outcome"], r["message"][:300])
        for case, r in cert.records.items()
        if r["outcome"] != "passed"
    }
    assert not not_passed, not_passed
    assert cert.exit_code == 0


NEVER_NOT_APPLICABLE = {"ripplehost"}
"""Suites none of whose cases depends on a behaviour the text leaves
optional: a fault never makes one of them not applicable. (Elsewhere a
fault may: ssb's ignore-goodbye leaves nothing for ends-stream-with-goodbye
to check, ignore-seq-alias nothing for rejects-conflicting-seq-and-sequence,
which applies only "if that behaviour is supported".)"""


# One test per fault, so that the 195 certifications spread over the test
# workers (scripts/test.sh -n N) instead of running two at a time in one
# test per protocol; each fault's verdict is its own test result.
LEVEL_RANK = {"MAY": 1, "SHOULD": 2, "MUST": 3}

FAULTS = [
    pytest.param(protocol, spec.name, id=f"{protocol}-{spec.name}")
    for protocol in PROTOCOLS
    for spec in registry(protocol).SPECS
]


@pytest.mark.parametrize(("protocol", "fault"), FAULTS)
def test_fault_is_caught_by_exactly_its_own_cases(protocol, fault, tmp_path):
    """Certifies the reference node with this one fault: every case of the
    suite is recorded; the cases the registry names fail, each with a
    message that starts with its id and level; every other case passes, is
    blocked by one of them or is not applicable (never failed or in error);
    and only a failed MUST case costs the verdict."""
    # Only the cases of the role the fault is in (and their prerequisites):
    # the mutant's other role is the reference's own launch, unchanged, and
    # its cases are the baseline's (test_reference_node_without_a_fault_...);
    # running them again for each of the 214 faults was 45 % of this test's
    # time in the full tier. `conformance mutation` still runs whole suites.
    role = next(spec.role for spec in registry(protocol).SPECS if spec.name == fault)
    run = run_mutation(
        [protocol],
        [fault],
        jobs=1,
        work_dir=tmp_path,
        progress=lambda line: None,
        reference=False,
        params=TEST_PARAMS.get(protocol),
        cases=[f"{protocol}.*.{role}.*"],
    )
    assert [result.name for result in run.faults] == [fault]
    (result,) = run.faults
    assert result.caught, {"missed": result.missed, "failed elsewhere": result.wrongly_blamed}
    cert = result.certification
    records = cert.records
    role_cases = {case for case in suite_case_ids(protocol) if f".{role}." in case}
    assert role_cases <= set(records) <= set(suite_case_ids(protocol)), sorted(
        role_cases ^ set(records)
    )
    assert all(records[case]["prerequisite_only"] for case in set(records) - role_cases), sorted(
        records
    )
    for case in result.failed:
        record = records[case]
        # names its rule, with its level as reports show it ("MUST (erratum)")
        shown = level_with_basis(record["level"], record.get("basis"))
        assert record["message"].startswith(f"{case} [{shown}, "), record["message"]
    expected = set(result.expected)
    for case, record in records.items():
        if case in expected or record["outcome"] == "passed":
            continue
        if record["outcome"] == "blocked":
            assert record["blocked_by"] in expected, (
                case,
                record["blocked_by"],
                record["message"][:300],
            )
            # A case is never blocked by one of a lower level: a MUST case
            # blocked by a SHOULD failure would cost the verdict for a rule
            # the text does not bind at MUST (docs/levels.md).
            root = records[record["blocked_by"]]
            assert LEVEL_RANK[root["level"]] >= LEVEL_RANK[record["level"]], (
                f"{case} ({record['level']}) is blocked by {record['blocked_by']} ({root['level']})"
            )
            continue
        assert record["outcome"] == "not_applicable", (
            case,
            record["outcome"],
            record["message"][:300],
        )
        if protocol in NEVER_NOT_APPLICABLE:
            # Only where the mutant does not play the role (a server
            # fault's target is certified as a server only).
            assert f".{result.role}." not in case, (case, record["message"][:300])
    summary = summarize(list(records.values()))["targets"]
    must_failed = any(records[case]["level"] == "MUST" for case in expected)
    assert [group["conformant"] for group in summary] == [not must_failed], summary

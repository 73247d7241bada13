"""The STOMP client-role cases end to end: the reference client passes every
one of them; the reference client broken in one rule (reference_impl/stomp/
faults.py, role "client") fails exactly that rule's case, the cases relying
on it are blocked, and no other case fails."""

from __future__ import annotations

import textwrap

import pytest

from reference_impl.stomp.faults import SPECS

from ..harness.cli_runner import certify

CLIENT = ("{python} -m reference_impl.stomp client --manifest {manifest_file} --node-id {node_id} "
          "--cert {client_cert_file} --key {client_key_file} --ca {ca_file} --messages {messages_file} "
          "--timeout {client_timeout}")

CLIENT_CASES = {
    "stomp.tls.client.presents-certificate", "stomp.tls.client.verifies-server-chain",
    "stomp.tls.client.skips-hostname-verification", "stomp.tls.client.refuses-tls-1-2",
    "stomp.connect.client.sends-connect-first", "stomp.connect.client.host-substitutes-node-id",
    "stomp.connect.client.login-substitutes-node-id", "stomp.send.client.sends-each-message",
    "stomp.send.client.destination-substitutes-node-id", "stomp.send.client.includes-receipt",
    "stomp.send.client.includes-type", "stomp.send.client.includes-content-type",
    "stomp.send.client.persistent-true", "stomp.send.client.body-is-valid-smp",
    "stomp.send.client.only-subset-commands", "stomp.receipt.client.delivered-only-after-receipt",
    "stomp.receipt.client.resends-unreceipted-after-drop",
}

CLIENT_FAULTS = {spec.name: spec.cases for spec in SPECS if spec.role == "client"}


def client_target(name: str, fault: str | None = None) -> str:
    """A client-only reference-stomp target (no server started), optionally
    with one ``--fault``."""
    command = CLIENT + (f" --fault {fault}" if fault else "")
    return textwrap.dedent(f"""
        [targets.{name}]
        implementation = "reference-stomp{'-' + fault if fault else ''}"
        version = "test"
        protocol = "stomp"
        roles = ["client"]
        [targets.{name}.launch]
        client = "{command}"
        cwd = "{{repo}}"
    """)


def client_records(run, target: str) -> dict[str, dict]:
    return {case: record for case, record in run.by_case(target).items() if case in CLIENT_CASES}


def test_every_client_case_is_in_the_suite_and_every_client_fault_names_one():
    for fault, cases in CLIENT_FAULTS.items():
        assert cases and set(cases) <= CLIENT_CASES, (fault, cases)
    caught = {case for cases in CLIENT_FAULTS.values() for case in cases}
    # Every client case has a fault of the reference client that breaks it
    # (send-before-connect and skip-first-message break the two
    # prerequisites, sends-connect-first and sends-each-message).
    assert CLIENT_CASES - caught == set()


@pytest.mark.slow
def test_reference_client_passes_every_client_case(tmp_path):
    targets = tmp_path / "targets.toml"
    targets.write_text(client_target("client-under-test"))
    run = certify(tmp_path, "--targets-file", str(targets), "--target", "client-under-test", "-k", "test_client",
                  timeout=600)
    records = client_records(run, "client-under-test")
    assert set(records) == CLIENT_CASES, (sorted(CLIENT_CASES - set(records)), run.output[-3000:])
    not_passed = {case: (r["outcome"], r["message"][:300]) for case, r in records.items() if r["outcome"] != "passed"}
    assert not not_passed, not_passed


@pytest.mark.slow
def test_each_client_fault_fails_exactly_its_own_case(tmp_path):
    names = {fault: f"fault-{fault}" for fault in CLIENT_FAULTS}
    targets = tmp_path / "targets.toml"
    targets.write_text("".join(client_target(name, fault) for fault, name in names.items()))
    run = certify(tmp_path, "--targets-file", str(targets), *[f"--target={name}" for name in names.values()],
                  "-k", "test_client", timeout=1500)
    problems = []
    for fault, name in names.items():
        records = client_records(run, name)
        if set(records) != CLIENT_CASES:
            problems.append(f"{fault}: cases missing: {sorted(CLIENT_CASES - set(records))}")
            continue
        expected = set(CLIENT_FAULTS[fault])
        failed = {case for case, r in records.items() if r["outcome"] in ("failed", "error")}
        if failed != expected:
            problems.append(f"{fault}: failed/error {sorted(failed)}, expected {sorted(expected)}: "
                            + "; ".join(f"{c}: {records[c]['message'][:200]}" for c in sorted(failed ^ expected)))
        for case, record in records.items():
            if record["outcome"] == "blocked" and record.get("blocked_by") not in expected:
                problems.append(f"{fault}: {case} blocked by {record.get('blocked_by')}, not by the fault's case")
    assert not problems, "\n".join(problems)

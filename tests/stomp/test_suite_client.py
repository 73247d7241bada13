"""The STOMP client-role cases and the client faults of the reference node
(reference_impl/stomp/faults.py, role "client"): every client case has a
fault that breaks it.

That the reference client passes every client case, and that each client
fault fails exactly its own cases with the cases relying on them blocked
and no other case failed, is tests/mutation/test_mutation.py's."""

from __future__ import annotations

from conformance.runner import suite_case_ids
from reference_impl.stomp.faults import SPECS

CLIENT_CASES = {
    "stomp.tls.client.presents-certificate",
    "stomp.tls.client.verifies-server-chain",
    "stomp.tls.client.skips-hostname-verification",
    "stomp.tls.client.refuses-tls-1-2",
    "stomp.connect.client.sends-connect-first",
    "stomp.connect.client.host-substitutes-node-id",
    "stomp.connect.client.login-substitutes-node-id",
    "stomp.send.client.sends-each-message",
    "stomp.send.client.destination-substitutes-node-id",
    "stomp.send.client.includes-receipt",
    "stomp.send.client.includes-type",
    "stomp.send.client.includes-content-type",
    "stomp.send.client.persistent-true",
    "stomp.send.client.body-is-valid-smp",
    "stomp.send.client.only-subset-commands",
    "stomp.receipt.client.delivered-only-after-receipt",
    "stomp.receipt.client.resends-unreceipted-after-drop",
    "stomp.receipt.client.accepts-cumulative-receipt",
    "stomp.connect.client.accept-version-includes-1-2",
    "stomp.connect.client.nothing-after-disconnect",
    "stomp.frame.client.sends-well-formed-frames",
}

CLIENT_FAULTS = {spec.name: spec.cases for spec in SPECS if spec.role == "client"}


def test_every_client_case_is_in_the_suite_and_every_client_fault_names_one():
    assert CLIENT_CASES == {case for case in suite_case_ids("stomp") if ".client." in case}
    for fault, cases in CLIENT_FAULTS.items():
        assert cases and set(cases) <= CLIENT_CASES, (fault, cases)
    caught = {case for cases in CLIENT_FAULTS.values() for case in cases}
    # Every client case has a fault of the reference client that breaks it
    # (send-before-connect and skip-first-message break the two
    # prerequisites, sends-connect-first and sends-each-message).
    assert CLIENT_CASES - caught == set()

"""The grammar cases of the RIPP suite end to end (conformance/suites/ripp,
core/node_grammar.py): against the reference node both pass; each grammar
fault of the reference node (reference_impl/ripp/faults.py), an envelope
breaking the envelope grammar in the middle of a session, fails the grammar
case of its role alone, listing the envelope with its rule and bytes, and
the case that read it is blocked by the grammar case. (Every fault against
every case is tests/mutation's.)"""

from __future__ import annotations

import pytest

from conformance.suites.ripp.prerequisites import CHECKPOINT, CLIENT_ENVELOPES
from conformance.suites.ripp.prerequisites import CLIENT_GRAMMAR, SERVER_GRAMMAR

from ..harness.cli_runner import certify_grammar_fault, certify_reference_grammar_cases

REGISTRY = "{repo}/conformance/suites/ripp/registry.json"
GRAMMAR_TARGET = """
[targets.grammar-fault]
implementation = "reference-ripp-{fault}"
version = "test"
protocol = "ripp"
roles = ["{role}"]
host = "127.0.0.1"
port = 0
[targets.grammar-fault.launch]
{launch}
ready = "RIPP_READY"
outputs = {{ port = "port" }}
cwd = "{{repo}}"
"""
GRAMMAR_LAUNCH = {
    "server": 'server = "{{python}} -m reference_impl.ripp consume --schemas '
    + REGISTRY.replace("{", "{{").replace("}", "}}")
    + ' --host {{host}} --port 0 --heartbeat-interval 0.5 --fault {fault}"',
    "client": 'client = "{{python}} -m reference_impl.ripp produce --schemas '
    + REGISTRY.replace("{", "{{").replace("}", "}}")
    + " --peer-host {{peer_host}} --peer-port {{peer_port}} --source-id {{source_id}} "
    '--count {{count}} --stay {{client_stay}} --timeout {{client_timeout}} --fault {fault}"',
}
"""The launch command of the faulty role (a target lists only the roles it
launches), as reference-ripp's in conformance/targets/builtin.toml."""


@pytest.mark.slow
def test_the_reference_node_passes_both_grammar_cases(tmp_path):
    certify_reference_grammar_cases(tmp_path, "reference-ripp", SERVER_GRAMMAR, CLIENT_GRAMMAR)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("role", "fault", "grammar_case", "reader", "head"),
    [
        ("server", "checkpoint-ack-crc-big-endian", SERVER_GRAMMAR, CHECKPOINT, b"RIPP\x01\x03"),
        (
            "client",
            "client-delta-crc-without-payload",
            CLIENT_GRAMMAR,
            CLIENT_ENVELOPES,
            b"RIPP\x01\x01",
        ),
    ],
)
def test_a_node_breaking_the_grammar_fails_the_grammar_case_alone(
    tmp_path, role, fault, grammar_case, reader, head
):
    """A grammar fault of the reference node mid-session: the grammar case
    of the role fails listing the envelope with its rule and bytes (the
    reading case's among them), and the case that read it is blocked by the
    grammar case, not failed for its own rule."""
    launch = GRAMMAR_LAUNCH[role].format(fault=fault)
    certify_grammar_fault(
        tmp_path,
        GRAMMAR_TARGET.format(fault=fault, role=role, launch=launch),
        "grammar-fault",
        reader,
        grammar_case,
        ("check crc", head.hex()),
    )

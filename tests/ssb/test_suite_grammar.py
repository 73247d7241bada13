"""The RPC grammar cases of the SSB suite end to end (conformance/suites/ssb,
core/node_grammar.py): against the reference node they pass; each grammar
fault of the reference node (reference_impl/ssb/faults.py), a JSON body cut
short by its last byte, fails the grammar case of its role alone, listing
the message with its rule and bytes, and the case that read it is blocked
by that case. (Every fault against every case is tests/mutation's.)"""

from __future__ import annotations

import pytest

from conformance.suites.ssb.prerequisites import (
    CLIENT_GRAMMAR,
    CLIENT_HISTORY_REQUEST,
    NUMBERING,
    SERVER_GRAMMAR,
)

from ..harness.cli_runner import certify_grammar_fault, certify_reference_grammar_cases

GRAMMAR_TARGET = """
[targets.grammar-fault]
implementation = "reference-ssb-{fault}"
version = "test"
protocol = "ssb"
roles = ["{role}"]
capabilities = ["publish"]
host = "127.0.0.1"
port = 0
[targets.grammar-fault.credentials]
secret_key_file = "{{workdir}}/server-secret"
[targets.grammar-fault.launch]
{launch}
ready = "SSB_READY"
ready_timeout = 30
outputs = {{ public_key = "id", port = "port" }}
cwd = "{{repo}}"
"""
GRAMMAR_LAUNCH = {
    "server": 'server = "{{python}} -m reference_impl.ssb serve --key-file {{workdir}}/server-secret '
    '--create-key --host {{host}} --port 0 --seed-messages 5 --fault {fault}"',
    "client": 'client = "{{python}} -m reference_impl.ssb replicate --key-file {{workdir}}/client-secret '
    "--create-key --peer-host {{peer_host}} --peer-port {{peer_port}} --peer-public-key "
    '{{peer_public_key}} --feed {{feed}} --timeout {{client_timeout}} --fault {fault}"',
}
"""The launch command of the faulty role, as reference-ssb's in
conformance/targets/builtin.toml."""


@pytest.mark.slow
def test_the_reference_node_passes_both_grammar_cases(tmp_path):
    certify_reference_grammar_cases(tmp_path, "reference-ssb", SERVER_GRAMMAR, CLIENT_GRAMMAR)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("role", "fault", "grammar_case", "reader"),
    [
        ("server", "stream-data-json-cut-short", SERVER_GRAMMAR, NUMBERING),
        ("client", "client-request-json-cut-short", CLIENT_GRAMMAR, CLIENT_HISTORY_REQUEST),
    ],
)
def test_a_node_breaking_the_grammar_fails_the_grammar_case_alone(
    tmp_path, role, fault, grammar_case, reader
):
    """A JSON body cut short mid-session: the grammar case of the role
    fails listing the message with its rule and bytes (the reading case's
    among them), and the case that read it is blocked by the grammar case,
    not failed for its own rule."""
    launch = GRAMMAR_LAUNCH[role].format(fault=fault)
    certify_grammar_fault(
        tmp_path,
        GRAMMAR_TARGET.format(fault=fault, role=role, launch=launch),
        "grammar-fault",
        reader,
        grammar_case,
        ("JSON body does not read as its body type says (invalid JSON body", "; bytes: "),
    )

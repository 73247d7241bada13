"""The grammar cases of the BTP suite end to end (conformance/suites/btp,
core/node_grammar.py): against the reference node they pass; each grammar
fault of the reference node (reference_impl/btp/faults.py), an answer to a
probe that breaks the packet grammar or its canonical lengths, fails the
grammar case of its rule alone, listing the packet with its rule and bytes,
and the case that read it is blocked by that case. (Every fault against
every case is tests/mutation's.)"""

from __future__ import annotations

import pytest

from conformance.suites.btp.prerequisites import (
    CANONICAL,
    CLIENT_GRAMMAR,
    CLIENT_REQUEST_ID,
    REQUEST_ID,
    SERVER_GRAMMAR,
)

from ..harness.cli_runner import certify_grammar_fault, certify_reference_grammar_cases

GRAMMAR_TARGET = """
[targets.grammar-fault]
implementation = "reference-btp-{fault}"
version = "test"
protocol = "btp"
roles = ["{role}"]
host = "127.0.0.1"
port = 0
[targets.grammar-fault.credentials]
auth_token_generate = "hex16"
[targets.grammar-fault.launch]
{launch}
ready = "BTP_READY"
outputs = {{ url = "url", port = "port" }}
cwd = "{{repo}}"
"""
GRAMMAR_LAUNCH = {
    "server": 'server = "{{python}} -m reference_impl.btp serve --host {{host}} --port 0 '
    '--auth-token-file {{auth_token_file}} --auth-timeout 2 --fault {fault}"',
    "client": 'client = "{{python}} -m reference_impl.btp client --url {{peer_url}} '
    "--auth-token-file {{auth_token_file}} --stay {{client_stay}} --send-message {{send_message}} "
    '--fault {fault}"',
}
"""The launch command of the faulty role (a target lists only the roles it
launches), as reference-btp's in conformance/targets/builtin.toml."""


@pytest.mark.slow
def test_the_reference_node_passes_the_grammar_cases(tmp_path):
    certify_reference_grammar_cases(
        tmp_path, "reference-btp", SERVER_GRAMMAR, CANONICAL, CLIENT_GRAMMAR
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("role", "fault", "grammar_case", "reader", "shown"),
    [
        (
            "server",
            "ack-length-beyond-end",
            SERVER_GRAMMAR,
            REQUEST_ID,
            ("length prefix beyond end", "01deadbeef030100"),
        ),
        (
            "server",
            "ack-length-long-form",
            CANONICAL,
            REQUEST_ID,
            ("non-canonical length", "01deadbeef81020100"),
        ),
        (
            "client",
            "client-ack-length-beyond-end",
            CLIENT_GRAMMAR,
            CLIENT_REQUEST_ID,
            ("length prefix beyond end", "030100"),
        ),
    ],
)
def test_a_node_breaking_the_grammar_fails_the_grammar_case_alone(
    tmp_path, role, fault, grammar_case, reader, shown
):
    """A grammar fault of the reference node after auth: the grammar case of
    the rule fails listing the packet with its rule and bytes (the reading
    case's among them), and the case that read it is blocked by the grammar
    case, not failed for its own rule (the request id it checks)."""
    launch = GRAMMAR_LAUNCH[role].format(fault=fault)
    certify_grammar_fault(
        tmp_path,
        GRAMMAR_TARGET.format(fault=fault, role=role, launch=launch),
        "grammar-fault",
        reader,
        grammar_case,
        shown,
    )

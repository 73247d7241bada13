"""The Ripple host suite end to end, through the CLI: every fault of the
catalogue names cases of the suite, the reference node is conformant over
TLS in both roles, and an acceptor refusing everything passes no case.

That the reference node is conformant and that each fault
(reference_impl/ripplehost/faults.py) fails exactly the cases it names,
with the cases relying on them blocked by one of those and no other case
failed, is tests/mutation/test_mutation.py's, for every protocol."""

from __future__ import annotations

import pytest

from conformance.coverage.cases import collect_cases
from conformance.suites.ripplehost.prerequisites import CLIENT_GRAMMAR, SERVER_GRAMMAR
from reference_impl.ripplehost.faults import SPECS

from ..harness.cli_runner import REPO_ROOT, certify, certify_grammar_fault


def suite_cases() -> set[str]:
    cases, problems = collect_cases(REPO_ROOT)
    assert not [p for p in problems if "/ripplehost/" in p], problems
    # The suite's cases: interop cases (conformance/interop/ripplehost) run only in `conformance interop`.
    return {
        case_id
        for case_id, case in cases.items()
        if case.protocol == "ripplehost" and case.source.startswith("conformance/suites/")
    }


def test_every_fault_names_cases_of_the_suite():
    cases = suite_cases()
    for spec in SPECS:
        assert set(spec.cases) <= cases, (spec.name, sorted(set(spec.cases) - cases))
        assert all(f".{spec.role}." in case for case in spec.cases), (
            spec.name,
            spec.role,
            spec.cases,
        )


TLS_TARGET = """
[targets.ripple-tls]
implementation = "reference-ripplehost"
version = "tls"
protocol = "ripplehost"
roles = ["server", "client"]
capabilities = ["hold", "ping-me"]
host = "127.0.0.1"
port = 0
[targets.ripple-tls.params]
tls = true
[targets.ripple-tls.launch]
server = "{python} -m reference_impl.ripplehost serve --host {host} --port 0 --hostname reference.ripple.test --tls-cert {server_cert_file} --tls-key {server_key_file}"
client = "{python} -m reference_impl.ripplehost connect --peer-host {peer_host} --peer-port {peer_port} --hostname client.ripple.test --send {messages_file} --timeout {client_timeout} --tls --tls-ca {ca_file}"
ready = "RIPPLE_READY"
outputs = { port = "port" }
cwd = "{repo}"
"""


@pytest.mark.slow
def test_reference_node_over_tls_is_conformant_in_both_roles(tmp_path):
    targets = tmp_path / "targets.toml"
    targets.write_text(TLS_TARGET)
    run = certify(tmp_path, "--targets-file", str(targets), "--target", "ripple-tls", timeout=300)
    records = run.by_case("ripple-tls")
    assert set(records) == suite_cases(), run.output[-3000:]
    not_passed = {
        case: (r["outcome"], r["message"][:300])
        for case, r in records.items()
        if r["outcome"] != "passed"
    }
    assert not not_passed, not_passed
    trace = (
        run.run_dir / "traces" / "ripple-tls" / "ripplehost.hostid.server.replies-with-host-id.txt"
    ).read_text()
    assert "with TLSv1." in trace, trace[:2000]


def test_tls_target_without_ca_file_stops_in_preflight(tmp_path):
    targets = tmp_path / "targets.toml"
    targets.write_text(
        '[targets.remote-tls]\nimplementation = "x"\nprotocol = "ripplehost"\nroles = ["server"]\n'
        'host = "127.0.0.1"\nport = 9\n[targets.remote-tls.params]\ntls = true\n'
    )
    run = certify(tmp_path, "--targets-file", str(targets), "--target", "remote-tls", timeout=120)
    assert run.code == 2, run.output[-2000:]
    assert "params.ca_file is missing" in run.output, run.output[-2000:]


RIPPLE_REFUSER = """
import socket, sys, threading, time
mode = sys.argv[1]
server = socket.create_server(("127.0.0.1", 0))

def refuse(conn):
    try:
        if mode == "read-then-close":
            conn.settimeout(2)
            conn.recv(4096)       # whatever the harness sends first, then no
        elif mode == "silent":
            conn.settimeout(60)
            while conn.recv(4096):  # reads everything, answers nothing, never closes first
                pass
    except OSError:
        pass
    conn.close()

print(f"RIPPLE_READY port={server.getsockname()[1]}", flush=True)
while True:
    conn, _ = server.accept()
    threading.Thread(target=refuse, args=(conn,), daemon=True).start()
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["close-at-once", "read-then-close", "silent"])
def test_acceptor_that_refuses_everything_passes_no_case(tmp_path, mode):
    """The negative cases (closes-on-..., refuses-...) want the target to
    close; a node that closes on everything, or never answers, must not pass
    them: they run only after the host-id exchange succeeded."""
    script = tmp_path / "refuser.py"
    script.write_text(RIPPLE_REFUSER)
    targets = tmp_path / "targets.toml"
    targets.write_text(
        f'[targets.refuser]\nimplementation = "refuser-{mode}"\nprotocol = "ripplehost"\n'
        'roles = ["server"]\ncapabilities = ["hold", "ping-me"]\nhost = "127.0.0.1"\nport = 0\n'
        f'[targets.refuser.launch]\nserver = "{{python}} {script} {mode}"\nready = "RIPPLE_READY"\n'
        'outputs = { port = "port" }\n'
    )
    run = certify(tmp_path, "--targets-file", str(targets), "--target", "refuser", timeout=300)
    records = run.by_case("refuser")
    server_cases = {case for case in suite_cases() if ".server." in case}
    assert set(records) >= server_cases, run.output[-3000:]
    passed = sorted(case for case, r in records.items() if r["outcome"] == "passed")
    assert not passed, f"a target that refuses everything passed {passed}"
    root = records["ripplehost.hostid.server.replies-with-host-id"]
    assert root["outcome"] in ("failed", "error"), root
    assert run.code == 1 and "NOT CONFORMANT" in run.output, run.output[-2000:]


GRAMMAR_TARGET = """
[targets.grammar-fault]
implementation = "reference-ripplehost-{fault}"
version = "test"
protocol = "ripplehost"
roles = ["{role}"]
[targets.grammar-fault.launch]
{launch}
ready = "RIPPLE_READY"
outputs = {{ port = "port" }}
cwd = "{{repo}}"
"""
GRAMMAR_LAUNCH = {
    "server": 'server = "{{python}} -m reference_impl.ripplehost serve --host {{host}} --port 0 '
    '--hostname reference.ripple.test --fault {fault}"',
    "client": 'client = "{{python}} -m reference_impl.ripplehost connect --peer-host {{peer_host}} '
    "--peer-port {{peer_port}} --hostname client.ripple.test --send {{messages_file}} --timeout "
    '{{client_timeout}} --fault {fault}"',
}
"""The launch command of the faulty role (a target lists only the roles it launches)."""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("role", "fault", "grammar_case", "reader", "rule", "head"),
    [
        (
            "server",
            "echo-rpy-size-one-short",
            SERVER_GRAMMAR,
            "ripplehost.msgno.server.reply-carries-msgno",
            "missing END trailer",
            b"RPY 1.0 ",
        ),
        (
            "client",
            "client-msg-header-trailing-space",
            CLIENT_GRAMMAR,
            "ripplehost.msgno.client.uses-even-msgnos",
            "fields not separated by single spaces",
            b"MSG 1.0 ",
        ),
    ],
)
def test_a_node_breaking_the_grammar_fails_the_grammar_case_alone(
    tmp_path, role, fault, grammar_case, reader, rule, head
):
    """A grammar fault of the reference node mid-session: the grammar case
    of the role fails listing the frame with its rule and bytes (the
    reading case's among them), and the case that read it first is blocked
    by the grammar case, not failed for its own rule."""
    launch = GRAMMAR_LAUNCH[role].format(fault=fault)
    certify_grammar_fault(
        tmp_path,
        GRAMMAR_TARGET.format(fault=fault, role=role, launch=launch),
        "grammar-fault",
        reader,
        grammar_case,
        (rule, head.hex()),
    )

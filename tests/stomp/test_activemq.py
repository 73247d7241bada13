"""The ActiveMQ STOMP target (issue 23): scripts/activemq.sh starts a private
ActiveMQ 5.17 (Debian's activemq on Java 17) with a stomp+ssl connector
that requires client certificates and TLS 1.3, and stops it cleanly;
`conformance certify --target activemq` gives the verdict with exactly the
failed and blocked cases docs/findings/activemq-5.17.md lists in its table
"Failed cases" (the storage cases passing through the browsing `accepted`
adapter, the restart one too); and the clients that fit deliver to it
(`conformance interop`; stompit's row also needs the npm packages).

Skipped, with the reason, when Debian's activemq is not installed
(scripts/install-activemq.sh, or scripts/setup.sh --activemq). About 30 s
for the certification, 30 s for the interop pairs, 10 s for the script.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest

from conformance.core.pki import make_pki
from tests.harness.cli_runner import CONFORMANCE, REPO_ROOT, certify

SCRIPT = REPO_ROOT / "scripts" / "activemq.sh"
FINDINGS = REPO_ROOT / "docs" / "findings" / "activemq-5.17.md"
READY = re.compile(r"ACTIVEMQ_READY=1 port=(\d+) adapter_port=(\d+) queue=(\S+) data_dir=(\S+)")
ROW = re.compile(
    r"^\| activemq \| `([a-z0-9.-]+)` \| (MUST|SHOULD)(?: \([a-z-]+\))? \| (failed|error|blocked) \|",
    re.MULTILINE,
)

pytestmark = pytest.mark.skipif(
    not Path("/usr/share/activemq/bin/activemq.jar").exists(),
    reason="Debian's activemq is not installed (scripts/install-activemq.sh needs apt-get and root)",
)


def known_failures() -> dict[str, tuple[str, str]]:
    """The findings file's table "Failed cases": case id -> (level, outcome)."""
    return {
        case: (level, outcome) for case, level, outcome in ROW.findall(FINDINGS.read_text("utf-8"))
    }


def test_findings_file_lists_cases_in_its_table():
    rows = known_failures()
    assert rows, f"{FINDINGS} has no row in its 'Failed cases' table"
    assert all(case.startswith("stomp.") for case in rows)


def test_harness_certifies_activemq_with_the_known_findings(tmp_path):
    run = certify(tmp_path, "--target", "activemq", timeout=600)
    records = run.by_case("activemq")
    assert len(records) >= 50, run.output
    judged = {
        case: (r["level"], r["outcome"])
        for case, r in records.items()
        if r["outcome"] in ("failed", "error", "blocked")
    }
    assert judged == known_failures(), run.output
    for case, record in records.items():
        if record["outcome"] == "blocked":
            assert known_failures().get(record["blocked_by"], ("", ""))[1] == "failed", (
                case,
                record["blocked_by"],
            )
    na = {case for case, r in records.items() if r["outcome"] == "not_applicable"}
    assert all(
        ".client." in case or case == "stomp.manifest.server.provides-valid-manifest" for case in na
    ), (
        "only client-role cases (activemq is a server target) and the manifest (a broker publishes none)"
    )
    # TLS 1.3 only, client certificates required, and the storage cases
    # through the adapter (the restart one after SIGKILL).
    for case in (
        "stomp.tls.server.refuses-tls-1-2",
        "stomp.tls.server.requires-client-certificate",
        "stomp.tls.server.refuses-untrusted-client-certificate",
        "stomp.receipt.server.receipted-message-is-stored",
        "stomp.receipt.server.stored-after-restart",
        "stomp.receipt.server.stored-after-connection-cut",
        "stomp.receipt.server.receipt-confirms-pipelined-sends",
    ):
        assert records[case]["outcome"] == "passed", (case, records[case]["message"])
    assert run.code == 1 and "activemq [activemq 5.17.2, stomp]: NOT CONFORMANT" in run.output


def interop(tmp_path, *args, timeout=400):
    run_dir = tmp_path / "run"
    completed = subprocess.run(
        CONFORMANCE + ["interop", "--run-dir", str(run_dir), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
    )
    records = [
        json.loads(line)
        for line in (run_dir / "results.jsonl").read_text().splitlines()
        if line.strip()
    ]
    return completed, records


def test_clients_deliver_to_activemq(tmp_path):
    # The Python clients and the reference client; the findings file's
    # "Interop" section (stompit's row is the next test).
    completed, records = interop(
        tmp_path,
        "--client",
        "reference-stomp",
        "--client",
        "stomp-py",
        "--client",
        "stompman",
        "--server",
        "activemq",
    )
    outcomes = {(r["implementation"], r["case_id"]): r["outcome"] for r in records}
    assert len(outcomes) == 9 and set(outcomes.values()) == {"passed"}, (
        completed.stdout + completed.stderr
    )
    assert completed.returncode == 0


@pytest.mark.skipif(
    not (REPO_ROOT / "interop" / "node" / "node_modules" / "stompit" / "package.json").exists(),
    reason="the npm package stompit is not installed (scripts/install-node-deps.sh)",
)
def test_stompit_delivers_to_activemq(tmp_path):
    # Its SMP ids are 64-bit: the launcher once rounded them (stompit-1.0.md).
    completed, records = interop(tmp_path, "--client", "stompit", "--server", "activemq")
    assert {r["case_id"]: r["outcome"] for r in records} == {
        "stomp.interop.client.delivers-every-message": "passed",
        "stomp.interop.client.delivered-messages-are-stored": "passed",
        "stomp.interop.client.no-duplicate-without-reconnect": "passed",
    }, completed.stdout + completed.stderr


def test_script_runs_tls_1_3_with_client_certificates_and_stops_cleanly(tmp_path):
    pki = make_pki(tmp_path / "pki")
    log = tmp_path / "activemq.out"
    with open(log, "wb") as handle:
        process = subprocess.Popen(
            [
                str(SCRIPT),
                "--cert",
                str(pki.server_cert_file),
                "--key",
                str(pki.server_key_file),
                "--ca",
                str(pki.ca_file),
            ],
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "TMPDIR": str(tmp_path)},
        )
    try:
        deadline = time.monotonic() + 120
        while not (match := READY.search(log.read_text(errors="replace"))):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text(
                errors="replace"
            )[-3000:]
            time.sleep(0.2)
        port, data_dir = int(match.group(1)), Path(match.group(4))
        assert data_dir.is_dir() and data_dir.parent == tmp_path

        def handshake(maximum: ssl.TLSVersion, cert: bool) -> str:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.maximum_version = maximum
            context.load_verify_locations(str(pki.ca_file))
            if cert:
                context.load_cert_chain(str(pki.client_cert_file), str(pki.client_key_file))
            with socket.create_connection(("127.0.0.1", port), timeout=20) as raw:
                with context.wrap_socket(raw) as tls:
                    tls.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")
                    reply = tls.recv(4096)
                    if not reply:
                        raise ConnectionError("closed without a reply")
                    command = reply.split(b"\n", 1)[0].decode()
                    return f"{tls.version()} {command}"

        assert handshake(ssl.TLSVersion.TLSv1_3, cert=True) == "TLSv1.3 CONNECTED"
        with pytest.raises((ssl.SSLError, ConnectionError)):
            handshake(ssl.TLSVersion.TLSv1_2, cert=True)
        with pytest.raises((ssl.SSLError, ConnectionError)):
            handshake(ssl.TLSVersion.TLSv1_3, cert=False)

        # SIGTERM: the broker stops, the JVM with it, the temporary data dir goes.
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) is not None
        deadline = time.monotonic() + 10
        while True:
            try:
                os.killpg(process.pid, 0)
            except ProcessLookupError:
                break
            assert time.monotonic() < deadline, "the JVM outlived scripts/activemq.sh"
            time.sleep(0.1)
        assert not data_dir.exists()
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(10)

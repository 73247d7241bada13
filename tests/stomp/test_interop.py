"""`conformance interop` for STOMP (conformance/interop/stomp/): a client
target delivers SMP messages to a server target through a recording relay;
judged by the client's DELIVERED lines and the server's `accepted` adapter.
The reference pair passes; a server that receipts before it stores fails
the storage rule and only it (measured: about 5 s; the RabbitMQ pair adds
about 13 s and is skipped where Debian's rabbitmq-server is missing)."""

import importlib.util
import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.harness.cli_runner import CONFORMANCE, REPO_ROOT

DELIVERS = "stomp.interop.client.delivers-every-message"
STORED = "stomp.interop.client.delivered-messages-are-stored"
NO_DUP = "stomp.interop.client.no-duplicate-without-reconnect"

LATE_STORE = """
[targets.late-store]
implementation = "reference-stomp-late-store"
version = "test"
protocol = "stomp"
roles = ["server"]
capabilities = ["accepted"]
[targets.late-store.params]
destination = "/exchange/smp"
[targets.late-store.launch]
server = "{python} -m reference_impl.stomp serve --host {host} --port 0 --cert {server_cert_file} --key {server_key_file} --ca {ca_file} --store {workdir}/store --manifest {workdir}/stomp.toml --fault receipt-before-store"
ready = "STOMP_READY"
outputs = { port = "port", manifest_file = "manifest" }
cwd = "{repo}"
[targets.late-store.adapters]
accepted = "{python} -m reference_impl.stomp accepted --store {workdir}/store"
"""


REFUSE_CONNECT = LATE_STORE.replace("late-store", "refuse-connect").replace(
    "--fault receipt-before-store", "--fault refuse-connect-command"
)
"""The reference server answering CONNECT with ERROR, as RabbitMQ answers
stompman's CONNECT carrying an empty login ("Access refused for user ''")."""


def interop(tmp_path, *args, timeout=240):
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
    return completed, {r["case_id"]: r for r in records}, run_dir


def test_reference_client_delivers_to_reference_server(tmp_path):
    completed, records, run_dir = interop(
        tmp_path, "--client", "reference-stomp", "--server", "reference-stomp"
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert {c: r["outcome"] for c, r in records.items()} == {
        DELIVERS: "passed",
        STORED: "passed",
        NO_DUP: "passed",
    }
    record = records[STORED]
    assert record["implementation"] == record["peer_implementation"] == "reference-stomp"
    assert record["level"] == "MUST" and "STOMP Connections" in record["citation"]
    trace = (run_dir / record["trace_file"]).read_text()
    # TLS end to end: the relay saw a ClientHello (16 03 01), not STOMP text.
    assert "client -> server (relayed)" in trace and "16 03 01" in trace


def test_server_receipting_before_storing_fails_the_storage_rule(tmp_path):
    targets = tmp_path / "targets.toml"
    targets.write_text(LATE_STORE)
    completed, records, _ = interop(
        tmp_path,
        "--targets-file",
        str(targets),
        "--client",
        "reference-stomp",
        "--server",
        "late-store",
    )
    assert completed.returncode == 1, completed.stdout + completed.stderr
    assert records[DELIVERS]["outcome"] == "passed"
    stored = records[STORED]
    assert (
        stored["outcome"] == "failed"
        and stored["peer_implementation"] == "reference-stomp-late-store"
    )
    assert "was reported delivered by reference-stomp but is not among the" in stored["message"]


@pytest.mark.skipif(
    not Path("/usr/lib/rabbitmq/bin/rabbitmq-server").exists(),
    reason="Debian's rabbitmq-server is not installed (scripts/install-rabbitmq.sh)",
)
def test_reference_client_delivers_to_rabbitmq(tmp_path):
    completed, records, _ = interop(
        tmp_path, "--client", "reference-stomp", "--server", "rabbitmq", timeout=400
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert {c: r["outcome"] for c, r in records.items()} == {
        DELIVERS: "passed",
        STORED: "passed",
        NO_DUP: "passed",
    }
    assert records[STORED]["peer_implementation"] == "rabbitmq"


@pytest.mark.skipif(
    importlib.util.find_spec("stompman") is None, reason="stompman is not installed (.[test])"
)
def test_the_servers_error_frame_leads_the_failure_and_blocked_cases_cost_nothing(tmp_path):
    """Issue 24, item 12: the cause (the server's ERROR) was only in the
    client's log, and each blocked case ran the pair again (30 s each)."""
    targets = tmp_path / "targets.toml"
    targets.write_text(REFUSE_CONNECT)
    started = time.monotonic()
    completed, records, _ = interop(
        tmp_path,
        "--targets-file",
        str(targets),
        "--client",
        "stompman",
        "--server",
        "refuse-connect",
    )
    seconds = time.monotonic() - started
    output = completed.stdout + completed.stderr
    assert completed.returncode == 1, output
    failed = records[DELIVERS]
    assert failed["outcome"] == "failed"
    # What the server answered, at the head of the message (and of the console line).
    own = failed["message"].split("]: ", 1)[1]
    assert own.startswith(
        "stompman did not get every message receipted by refuse-connect: refuse-connect sent "
        "ERROR message:"
    ), own
    assert "refuse-connect sent ERROR message:" in output
    # The cases needing a delivered message are blocked by it at once, without running the pair again.
    for case in (STORED, NO_DUP):
        assert records[case]["outcome"] == "blocked" and records[case]["blocked_by"] == DELIVERS, (
            records[case]
        )
        assert records[case]["duration_s"] < 2, records[case]
        assert (
            "not run again" in records[case]["message"]
            and "sent ERROR message:" in records[case]["message"]
        )
    assert seconds < 2 * 30, f"took {seconds:.0f} s: the pair ran more than once"

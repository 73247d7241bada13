"""`conformance interop`: one implementation's client against another's server."""

import json
import subprocess

from .cli_runner import CONFORMANCE, REPO_ROOT
from .test_certify import REFERENCE_SERVER, reference_variant

REPLICATION = "ssb.interop.client.replicates-peer-feed"


def run_interop(tmp_path, *args):
    run_dir = tmp_path / "run"
    completed = subprocess.run(
        CONFORMANCE + ["interop", "--run-dir", str(run_dir), *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO_ROOT,
    )
    records = [
        json.loads(line)
        for line in (run_dir / "results.jsonl").read_text().splitlines()
        if line.strip()
    ]
    return completed, records, run_dir


def test_reference_client_replicates_from_reference_server(tmp_path):
    completed, records, run_dir = run_interop(
        tmp_path, "--client", "reference-ssb", "--server", "reference-ssb"
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    [record] = [r for r in records if r["case_id"] == REPLICATION]
    assert record["outcome"] == "passed" and record["role"] == "client"
    assert (
        record["implementation"] == "reference-ssb"
        and record["peer_implementation"] == "reference-ssb"
    )
    trace = (run_dir / record["trace_file"]).read_text()
    assert "client -> server (relayed)  64 bytes" in trace  # msg1 went through the recording relay


def test_broken_server_fails_the_pair_with_the_bytes(tmp_path):
    targets = tmp_path / "targets.toml"
    targets.write_text(reference_variant("bad-sig", REFERENCE_SERVER + " --fault bad-signature"))
    completed, records, run_dir = run_interop(
        tmp_path, "--targets-file", str(targets), "--client", "reference-ssb", "--server", "bad-sig"
    )
    assert completed.returncode == 1
    [record] = [r for r in records if r["case_id"] == REPLICATION]
    assert (
        record["outcome"] == "failed" and record["peer_implementation"] == "reference-ssb-bad-sig"
    )
    assert "did not replicate" in record["message"]


def test_client_without_launch_command_is_a_usage_error(tmp_path):
    completed = subprocess.run(
        CONFORMANCE
        + [
            "interop",
            "--client",
            "ssb-server",
            "--server",
            "reference-ssb",
            "--run-dir",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )
    assert (
        completed.returncode == 2 and "ssb-server has no launch.client command" in completed.stderr
    )


def test_btp_reference_pair_through_the_websocket_relay(tmp_path):
    completed, records, run_dir = run_interop(
        tmp_path, "--client", "reference-btp", "--server", "reference-btp"
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert {r["case_id"]: r["outcome"] for r in records} == {
        "btp.interop.client.authenticates-and-exchanges-messages": "passed",
        "btp.interop.client.wrong-token-is-refused": "passed",
    }
    record = records[0]
    assert record["peer_implementation"] == "reference-btp"
    assert record["trace_file"].startswith("traces/reference-btp+reference-btp/")
    trace = (run_dir / record["trace_file"]).read_text()
    # Relayed messages are shown unmasked by WebSocket, the token by "**".
    assert "client -> server (relayed)" in trace and "auth_token" in trace and "** **" in trace


def test_btp_server_accepting_any_token_fails_the_pair(tmp_path):
    from .test_btp_certify import SERVER, btp_target

    targets = tmp_path / "targets.toml"
    targets.write_text(
        btp_target(
            "any-token",
            'auth_token_generate = "hex16"',
            server=SERVER + " --fault accept-wrong-token",
            client=None,
        )
    )
    completed, records, run_dir = run_interop(
        tmp_path,
        "--targets-file",
        str(targets),
        "--client",
        "reference-btp",
        "--server",
        "any-token",
    )
    assert completed.returncode == 1
    outcomes = {r["case_id"]: r for r in records}
    assert (
        outcomes["btp.interop.client.authenticates-and-exchanges-messages"]["outcome"] == "passed"
    )
    refused = outcomes["btp.interop.client.wrong-token-is-refused"]
    assert (
        refused["outcome"] == "failed"
        and "reported success with a wrong token" in refused["message"]
    )

"""Preflight: a misconfigured or unreachable target stops `conformance certify`
before any case, with one clear error and exit status 2, instead of one
error per case."""

from __future__ import annotations

import json
import textwrap

import pytest

from reference_impl.ssb.keys import Keypair

from .cli_runner import certify, run_cli
from .fake_suite import ClosedPort, Listener


def ssb_target(port: int, public_key: str, extra: str = "") -> str:
    return textwrap.dedent(f"""
        [targets.node]
        implementation = "some-ssb"
        protocol = "ssb"
        roles = ["server"]
        host = "127.0.0.1"
        port = {port}
        [targets.node.params]
        public_key = "{public_key}"
    """) + textwrap.dedent(extra)


def assert_stopped_by_preflight(run, *expected: str) -> str:
    assert run.code == 2, run.output
    errors = [
        line
        for line in run.output.splitlines()
        if line.startswith("conformance: error: preflight:")
    ]
    assert len(errors) == 1, run.output
    summary = run.summary
    error = summary["preflight_error"]
    assert errors[0] == "conformance: error: preflight: " + error.splitlines()[0]
    for text in expected:
        assert text in error, error
    assert not (run.run_dir / "results.jsonl").read_text().strip(), "no per-case records"
    assert summary["cases"] == 0 and not summary["conformant"]
    return error


@pytest.fixture
def listener():
    with Listener() as server:
        yield server


def test_malformed_public_key_stops_the_run_once(tmp_path, listener):
    targets = tmp_path / "targets.toml"
    targets.write_text(ssb_target(listener.port, "@not-a-key.ed25519"))
    run = certify(tmp_path, "--targets-file", str(targets), "--target", "node", timeout=120)
    assert_stopped_by_preflight(
        run,
        "target node is misconfigured",
        "params.public_key '@not-a-key.ed25519'",
        "@<base64 of 32 bytes>.ed25519",
    )
    assert run.seconds < 30


def test_unreachable_port_stops_the_run_once(tmp_path):
    targets = tmp_path / "targets.toml"
    with ClosedPort() as closed:
        port = closed.port
        targets.write_text(ssb_target(port, Keypair.generate().feed_id))
        run = certify(tmp_path, "--targets-file", str(targets), "--target", "node", timeout=120)
    assert_stopped_by_preflight(run, "target node is unreachable", f"127.0.0.1:{port}")


def test_bad_network_key_and_missing_secret_file_are_named(tmp_path, listener):
    key_file = tmp_path / "caps.hex"
    key_file.write_text("00" * 31)
    targets = tmp_path / "targets.toml"
    targets.write_text(
        ssb_target(
            listener.port,
            Keypair.generate().feed_id,
            f"""
        [targets.node.credentials]
        network_key_file = "{key_file}"
        secret_key_file = "{tmp_path / "no-such-secret"}"
    """,
        )
    )
    run = certify(tmp_path, "--targets-file", str(targets), "--target", "node", timeout=120)
    error = assert_stopped_by_preflight(run, f"file {tmp_path / 'no-such-secret'} does not exist")
    targets.write_text(
        ssb_target(
            listener.port,
            Keypair.generate().feed_id,
            f"""
        [targets.node.credentials]
        network_key_file = "{key_file}"
    """,
        )
    )
    run = certify(tmp_path, "--targets-file", str(targets), "--target", "node", timeout=120)
    error = assert_stopped_by_preflight(run, "network_key holds 31 byte(s); it must hold 32")
    assert "00" * 31 not in error, "a credential's value is never shown"


def test_btp_url_must_be_a_websocket_url(tmp_path, listener):
    targets = tmp_path / "targets.toml"
    targets.write_text(
        textwrap.dedent(f"""
        [targets.node]
        implementation = "some-btp"
        protocol = "btp"
        roles = ["server"]
        url = "http://127.0.0.1:{listener.port}/"
        [targets.node.credentials]
        auth_token_env = "PATH"
    """)
    )
    run = certify(tmp_path, "--targets-file", str(targets), "--target", "node", timeout=120)
    assert_stopped_by_preflight(run, "must be ws://HOST[:PORT]/... or wss://")


def test_node_whose_output_lacks_an_outputs_key_stops_the_run_once(tmp_path):
    """A node that started but does not print what its definition reads
    (outputs) is misdefined: a preflight error. A node that does not start
    is not (tests/harness/test_not_started.py)."""
    targets = tmp_path / "targets.toml"
    targets.write_text(
        textwrap.dedent("""
        [targets.node]
        implementation = "silent-ssb"
        protocol = "ssb"
        roles = ["server"]
        [targets.node.launch]
        server = "{python} -c 'import time; print(\\"NODE_READY\\", flush=True); time.sleep(60)'"
        ready = "NODE_READY"
        outputs = { public_key = "id" }
    """)
    )
    run = certify(tmp_path, "--targets-file", str(targets), "--target", "node", timeout=120)
    assert_stopped_by_preflight(
        run,
        "target node could not be started",
        "its output has no id=... (needed for public_key)",
        "NODE_READY",
    )
    assert json.loads((run.run_dir / "preflight-node.json").read_text())["target"] == "node"


def test_interop_with_an_unreachable_server_stops_once(tmp_path):
    targets = tmp_path / "targets.toml"
    run_dir = tmp_path / "run"
    with ClosedPort() as closed:
        port = closed.port
        targets.write_text(ssb_target(port, Keypair.generate().feed_id))
        completed = run_cli(
            "interop",
            "--run-dir",
            str(run_dir),
            "--targets-file",
            str(targets),
            "--client",
            "reference-ssb",
            "--server",
            "node",
            timeout=120,
        )
    assert completed.returncode == 2, completed.stdout + completed.stderr
    errors = [
        line
        for line in completed.stderr.splitlines()
        if line.startswith("conformance: error: preflight:")
    ]
    assert (
        len(errors) == 1
        and "target node is unreachable" in errors[0]
        and f"127.0.0.1:{port}" in errors[0]
    )
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["preflight_error"] and summary["cases"] == 0


def test_client_only_target_passes_the_preflight(tmp_path):
    """No server role, no address: nothing to reach; its client cases run."""
    targets = tmp_path / "targets.toml"
    targets.write_text(
        textwrap.dedent("""
        [targets.client-only]
        implementation = "reference-ssb-client"
        protocol = "ssb"
        roles = ["client"]
        [targets.client-only.launch]
        client = "{python} -m reference_impl.ssb replicate --key-file {workdir}/client-secret --create-key --peer-host {peer_host} --peer-port {peer_port} --peer-public-key {peer_public_key} --feed {feed} --timeout {client_timeout}"
        cwd = "{repo}"
    """)
    )
    run = certify(
        tmp_path,
        "--targets-file",
        str(targets),
        "--target",
        "client-only",
        "-k",
        "test_client",
        timeout=180,
    )
    assert "preflight" not in run.output, run.output
    records = run.records
    assert records and {r["role"] for r in records if r["outcome"] == "passed"} == {"client"}

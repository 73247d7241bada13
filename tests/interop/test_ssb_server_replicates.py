"""ssb-server 16 (npm) as the client replicates a feed from the reference
node: the interop scenario of erratum SSB-E1 (docs/errata/ssb.md).

- `conformance interop --client ssb-server-client --server reference-ssb`:
  ssb-server follows the node's feed, connects, asks with its legacy
  replication (createHistoryStream `seq: 1`) and ends up holding every
  message, verified; the case passes.
- The same against a reference node started with the guide's literal
  reading (`--fault exclusive-sequence`: `sequence` N starts after N): the
  node answers `seq: 1` with message 2 first, ssb-server appends nothing,
  and the case fails naming itself and the erratum.
- scripts/ssb-server.sh replicate on its own, with its output contract.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .node_env import REPO_ROOT, requires_node_modules

pytestmark = [pytest.mark.node_interop, requires_node_modules]

CASE = "ssb.interop.client.legacy-replicates-every-message"
REFERENCE_SERVER = (
    "{python} -m reference_impl.ssb serve --key-file {workdir}/server-secret --create-key "
    "--host {host} --port 0 --seed-messages 5"
)


def interop(tmp_path, client: str, server: str, *extra: str) -> tuple[int, str, dict[str, dict]]:
    run_dir = tmp_path / f"interop-{server}"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance.cli",
            "interop",
            "--client",
            client,
            "--server",
            server,
            "--run-dir",
            str(run_dir),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO_ROOT,
    )
    records = [
        json.loads(line)
        for line in (run_dir / "results.jsonl").read_text().splitlines()
        if line.strip()
    ]
    return (
        completed.returncode,
        completed.stdout + completed.stderr,
        {r["case_id"]: r for r in records},
    )


def reference_server_variant(name: str, server: str) -> str:
    return f"""
[targets.{name}]
implementation = "reference-ssb-{name}"
version = "test"
protocol = "ssb"
roles = ["server"]
host = "127.0.0.1"
port = 0
[targets.{name}.launch]
server = "{server}"
ready = "SSB_READY"
outputs = {{ public_key = "id", port = "port" }}
cwd = "{{repo}}"
"""


def test_ssb_server_replicates_every_message_from_the_reference_node(tmp_path):
    code, output, records = interop(tmp_path, "ssb-server-client", "reference-ssb")
    record = records[CASE]
    assert record["outcome"] == "passed", output
    assert (record["implementation"], record["peer_implementation"]) == (
        "ssb-server",
        "reference-ssb",
    )
    assert "SSB-E1" in record["citation"]
    # The pre-existing replication case passes with ssb-server as the client too.
    assert records["ssb.interop.client.replicates-peer-feed"]["outcome"] == "passed", output


def test_reference_node_with_the_exclusive_reading_fails_the_scenario(tmp_path):
    targets = tmp_path / "targets.toml"
    targets.write_text(
        reference_server_variant("exclusive-ssb", REFERENCE_SERVER + " --fault exclusive-sequence")
    )
    code, output, records = interop(
        tmp_path, "ssb-server-client", "exclusive-ssb", "--targets-file", str(targets)
    )
    record = records[CASE]
    assert code == 1, output
    assert record["outcome"] == "failed", output
    message = record["message"]
    # Names the case, the erratum, and what ssb-server ended up with.
    assert message.startswith(CASE) and "SSB-E1" in message, message
    assert "ssb-server holds 0 message(s)" in message, message
    # The harness fetched the feed without `sequence` and got all of it:
    # the node serves its feed, only its reading of `sequence` differs.
    assert records["ssb.interop.client.replicates-peer-feed"]["outcome"] == "failed", output


def test_script_prints_every_verified_message(tmp_path):
    """scripts/ssb-server.sh replicate against a reference node it did not
    start: one SSB_MSG line per message, then SSB_REPLICATED."""
    ready = tmp_path / "ready.json"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reference_impl.ssb",
            "serve",
            "--key-file",
            str(tmp_path / "key"),
            "--create-key",
            "--port",
            "0",
            "--seed-messages",
            "3",
            "--ready-file",
            str(ready),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = server.stdout.readline()
        assert line.startswith("SSB_READY"), line
        facts = json.loads(ready.read_text())
        completed = subprocess.run(
            [
                str(REPO_ROOT / "scripts" / "ssb-server.sh"),
                "replicate",
                "--peer-host",
                facts["host"],
                "--peer-port",
                str(facts["port"]),
                "--peer-public-key",
                facts["id"],
                "--timeout",
                "60",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        server.terminate()
        server.wait(10)
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert [line.split()[1] for line in lines[:3]] == ["seq=1", "seq=2", "seq=3"], lines
    assert all(
        line.startswith("SSB_MSG ") and line.endswith(" verified=true") for line in lines[:3]
    )
    assert lines[3:] == [f"SSB_REPLICATED feed={facts['id']} count=3 latest_sequence=3"]

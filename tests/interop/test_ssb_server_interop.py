"""ssb-server 16 (npm) against the harness and the reference node.

- The harness certifies ssb-server. Its verdict is pinned to the findings
  written up in docs/findings/ssb-server-16.md: if ssb-server or the
  harness changes behaviour, this test says so.
- The reference node replicates ssb-server's feed (reference as client,
  ssb-server as server) and verifies every message.
"""

import json
import subprocess
import sys

import pytest

from ..last_certification import known_not_passed

from reference_impl.ssb.keys import Keypair

from ..harness.cli_runner import certify
from .node_env import REPO_ROOT, requires_node_modules
from .test_ssb_server_script import running_server  # noqa: F401  (fixture)

pytestmark = [pytest.mark.node_interop, requires_node_modules]

# Real findings against ssb-server 16.0.1, each shown with its bytes in
# docs/findings/ssb-server-16.md.
# Its reading of createHistoryStream `sequence` ("from") is the network's,
# erratum SSB-E1 in docs/errata/ssb.md, which the harness applies.
# docs/findings/ssb-server-16.md, findings 2, 3 and 4.
KNOWN_FINDINGS = {case: outcome for case, (_, outcome) in known_not_passed("ssb-server").items()}
"""The cases its last certification did not pass (docs/certified-today.json)."""


def test_harness_certifies_ssb_server(tmp_path):
    run = certify(tmp_path, "--target", "ssb-server", timeout=400)
    records = run.by_case("ssb-server")
    assert len(records) >= 40, run.output
    not_passed = {
        case: r["outcome"]
        for case, r in records.items()
        if r["outcome"] not in ("passed", "not_applicable")
    }
    assert not_passed == KNOWN_FINDINGS, run.output
    na = {case for case, r in records.items() if r["outcome"] == "not_applicable"}
    assert na and all(".client." in case for case in na), (
        "only client-role cases (ssb-server has no launch.client)"
    )
    assert run.code == 1 and "ssb-server [ssb-server 16.0.1, ssb]: NOT CONFORMANT" in run.output


def test_reference_node_replicates_from_ssb_server(running_server, tmp_path):  # noqa: F811
    _, facts = running_server
    out = tmp_path / "feed.json"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "reference_impl.ssb",
            "replicate",
            "--network-key",
            facts["SSB_NETWORK_KEY"],
            "--peer-host",
            facts["SSB_HOST"],
            "--peer-port",
            facts["SSB_PORT"],
            "--peer-public-key",
            facts["SSB_ID"],
            "--out",
            str(out),
            "--timeout",
            "30",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )
    assert completed.returncode == 0, completed.stderr
    assert (
        f"SSB_REPLICATED feed={facts['SSB_ID']} count={facts['SSB_SEQUENCE']}" in completed.stdout
    )
    messages = json.loads(out.read_text())
    assert [m["sequence"] for m in messages] == list(range(1, int(facts["SSB_SEQUENCE"]) + 1))
    assert all(m["author"] == facts["SSB_ID"] for m in messages)
    assert Keypair.load(facts["SSB_SECRET"]).feed_id == facts["SSB_ID"]


def test_interop_command_pairs_reference_client_with_ssb_server(tmp_path):
    run_dir = tmp_path / "interop"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance.cli",
            "interop",
            "--client",
            "reference-ssb",
            "--server",
            "ssb-server",
            "--run-dir",
            str(run_dir),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    records = {
        r["case_id"]: r
        for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())
    }
    # Replication both ways of reading `sequence` (erratum SSB-E1) and the
    # MITM relay's cases, each one pair with its own verdict.
    assert {
        "ssb.interop.client.replicates-peer-feed",
        "ssb.interop.client.legacy-replicates-every-message",
        "ssb.mitm.server.aborts-on-replayed-client-handshake",
    } <= set(records)
    for record in records.values():
        assert (record["implementation"], record["peer_implementation"], record["outcome"]) == (
            "reference-ssb",
            "ssb-server",
            "passed",
        ), record

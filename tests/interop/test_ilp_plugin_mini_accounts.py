"""ilp-plugin-mini-accounts 4.2.0 (npm, interop/node/mini-accounts,
scripts/ilp-plugin-mini-accounts.sh) against the harness.

The verdict is pinned to docs/findings/ilp-plugin-mini-accounts-4.2.md: if
the plugin or the harness changes behaviour, these tests say so. The last
test shows the server doing its job over ILP with ilp-plugin-btp as a
connector's client.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from ..last_certification import known_not_passed

from ..harness.cli_runner import certify, run_cli
from .node_env import NODE_DIR, REPO_ROOT, node_executable, requires_node_modules

MINI_ACCOUNTS_DIR = NODE_DIR / "mini-accounts"

pytestmark = [
    pytest.mark.node_interop,
    requires_node_modules,
    pytest.mark.skipif(
        not (MINI_ACCOUNTS_DIR / "node_modules").is_dir(),
        reason="interop/node/mini-accounts/node_modules is missing: run scripts/install-node-deps.sh",
    ),
]

FINDINGS = (REPO_ROOT / "docs" / "findings" / "ilp-plugin-mini-accounts-4.2.md").read_text(
    encoding="utf-8"
)

KNOWN_FINDINGS = set(known_not_passed("ilp-plugin-mini-accounts", ("failed",)))
"""The failed cases of its last certification (docs/certified-today.json):
section 1, unreadable packets close the connection (the silent-on-* cases);
section 2, a non-IA5 name is read; section 3, two auth_token entries
accepted; section 4, no auth timeout; section 5, the auth entry checked by its
name only."""
NOT_APPLICABLE_SERVER = {
    "btp.auth.server.rejects-wrong-token",  # params.accepts_any_token
    "btp.subprotocol.server.rejects-duplicate-names",  # every non-ILP Message gets an Error
    "btp.transfer.server.response-means-balance-updated",  # no balance capability
    "btp.transfer.server.error-means-balance-unchanged",
}


def test_findings_list_the_pinned_cases():
    for case in KNOWN_FINDINGS | NOT_APPLICABLE_SERVER:
        assert f"`{case}`" in FINDINGS, case


@pytest.mark.timeout(300)
def test_harness_certifies_ilp_plugin_mini_accounts(tmp_path):
    run = certify(
        tmp_path, "--protocol", "btp", "--target", "ilp-plugin-mini-accounts", timeout=280
    )
    records = run.by_case("ilp-plugin-mini-accounts")
    assert len(records) >= 40, run.output
    failed = {case for case, r in records.items() if r["outcome"] == "failed"}
    assert failed == KNOWN_FINDINGS, run.output
    assert all(r["outcome"] in ("passed", "failed", "not_applicable") for r in records.values()), (
        run.output
    )
    na = {case for case, r in records.items() if r["outcome"] == "not_applicable"}
    assert {case for case in na if ".server." in case} == NOT_APPLICABLE_SERVER, na
    assert all(records[case]["role"] == "client" for case in na - NOT_APPLICABLE_SERVER), na
    assert "params.accepts_any_token" in records["btp.auth.server.rejects-wrong-token"]["message"]
    assert (
        run.code == 1
        and "ilp-plugin-mini-accounts [ilp-plugin-mini-accounts 4.2.0, btp]: NOT CONFORMANT"
        in run.output
    )


@pytest.mark.timeout(200)
def test_interop_rows_with_reference_btp_and_ilp_plugin_btp(tmp_path):
    """Auth works both ways; the contract's Message, which is no ILP packet,
    is refused with mini-accounts' own Error F00 (findings, "Interop")."""
    run_dir = tmp_path / "run"
    completed = run_cli(
        "interop",
        "--run-dir",
        str(run_dir),
        "--client",
        "reference-btp",
        "--client",
        "ilp-plugin-btp",
        "--server",
        "ilp-plugin-mini-accounts",
        timeout=180,
    )
    records = [
        json.loads(line)
        for line in (run_dir / "results.jsonl").read_text().splitlines()
        if line.strip()
    ]
    rows = {(r["implementation"], r["case_id"]): r for r in records}
    output = completed.stdout + completed.stderr
    for client, refusal in (
        ("reference-btp", '"code":"F00","name":"NotAcceptedError"'),
        ("ilp-plugin-btp", "Packet has invalid type"),
    ):
        exchange = rows[(client, "btp.interop.client.authenticates-and-exchanges-messages")]
        assert exchange["outcome"] == "failed" and "(exit 6)" in exchange["message"], output
        assert refusal in exchange["message"], exchange["message"]
        wrong = rows[(client, "btp.interop.client.wrong-token-is-refused")]
        assert wrong["outcome"] == "not_applicable" and "accepts_any_token" in wrong["message"], (
            wrong
        )
    assert completed.returncode == 1, output


ILP_CLIENT = r"""
const BtpPlugin = require('ilp-plugin-btp')
const ILDCP = require('ilp-protocol-ildcp')
const IlpPacket = require('ilp-packet')
;(async () => {
  const plugin = new BtpPlugin({ server: 'btp+ws://:some-secret@127.0.0.1:' + process.argv[1] + '/' })
  await plugin.connect()
  const info = await ILDCP.fetch(plugin.sendData.bind(plugin))
  const reply = IlpPacket.deserializeIlpPacket(await plugin.sendData(IlpPacket.serializeIlpPrepare({
    amount: '10', executionCondition: Buffer.alloc(32, 1), expiresAt: new Date(Date.now() + 10000),
    destination: 'test.conformance.elsewhere', data: Buffer.alloc(0) })))
  console.log(JSON.stringify({ clientAddress: info.clientAddress, reply: reply.typeString, code: reply.data.code }))
  await plugin.disconnect()
  process.exit(0)
})().catch((err) => { console.error(err); process.exit(1) })
"""


@pytest.mark.timeout(60)
def test_ilp_plugin_btp_client_gets_its_address_and_a_reject_over_ilp():
    server = subprocess.Popen(
        [str(REPO_ROOT / "scripts" / "ilp-plugin-mini-accounts.sh"), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = server.stdout.readline()
        port = re.search(r"BTP_READY url=ws://127\.0\.0\.1:(\d+)/ port=\d+", line)
        assert port, line
        completed = subprocess.run(
            [node_executable(), "-e", ILP_CLIENT, port.group(1)],
            capture_output=True,
            text=True,
            timeout=30,
            cwd=MINI_ACCOUNTS_DIR,
        )
        assert completed.returncode == 0, completed.stderr
        result = json.loads(completed.stdout.strip().splitlines()[-1])
        # The account is base64url(sha256(token)) (src/index.ts lines 19-21).
        assert result == {
            "clientAddress": "test.conformance.pvLz8JWhOQPGOPYDaQ_Rx4njDMAeGWIoF85PWDOJSec",
            "reply": "ilp_reject",
            "code": "F02",
        }, result
    finally:
        server.terminate()
        server.wait(timeout=10)

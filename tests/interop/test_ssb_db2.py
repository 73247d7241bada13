"""The modern JS SSB stack (ssb-db2 8 + ssb-ebt 9 + ssb-conn 6 on
secret-stack 6.4, interop/node/ssb-db2, scripts/ssb-db2.sh) against the
harness.

The verdicts are pinned to docs/findings/ssb-db2-8.md: if the stack or the
harness changes behaviour, these tests say so.
"""

from __future__ import annotations

import json

import pytest

from ..harness.cli_runner import certify, run_cli
from .node_env import NODE_DIR, REPO_ROOT, requires_node_modules

pytestmark = [
    pytest.mark.node_interop,
    requires_node_modules,
    pytest.mark.skipif(
        not (NODE_DIR / "ssb-db2" / "node_modules").is_dir(),
        reason="interop/node/ssb-db2/node_modules is missing: run scripts/install-node-deps.sh",
    ),
]

FINDINGS = (REPO_ROOT / "docs" / "findings" / "ssb-db2-8.md").read_text(encoding="utf-8")

OUT_OF_ORDER = "ssb.history.server.serves-whole-feed-in-order"
"""Section 1: the seed messages published within one millisecond come back
in any order (24 of 30 certifications here)."""
LIMIT = "ssb.history.server.limit-caps-messages"
"""Section 4: when the whole feed comes in order by chance, the limited
query meets the disorder (the other 6 of 30)."""
CONFLICTING = "ssb.history.server.rejects-conflicting-seq-and-sequence"
"""Section 2."""
OLD_FALSE = "ssb.history.server.live-old-false-skips-existing"
"""Section 3 (blocked by section 1 when that fails)."""
BLOCKED_BY_ORDER = {
    "ssb.history.server.limit-caps-messages",
    "ssb.history.server.limit-default-unlimited",
    "ssb.boxstream.server.splits-large-messages",
    "ssb.feed.server.timestamp-is-milliseconds",
    "ssb.history.server.live-old-default-sends-existing",
    "ssb.history.server.sequence-starts-at-given-message",
    "ssb.history.server.missing-id-is-an-error",
    "ssb.history.server.live-sends-new-messages",
    OLD_FALSE,
}

LONG_FEED = "ssb.history.server.serves-long-feed-whole"
"""Section 5: a burst of 45 published at once, read back in pages of 20:
each message exactly once (never repeated or skipped at a page boundary),
but the messages of one millisecond in any order, so the case is blocked by
the order rule within itself (or passes, when the burst came in order)."""


def long_feed_settled(records: dict, output: str) -> dict:
    """The outcomes without section 5's case, once it is checked: every
    message came exactly once, whether or not in order."""
    record = records[LONG_FEED]
    assert record["outcome"] in ("passed", "blocked"), output
    if record["outcome"] == "blocked":
        assert OUT_OF_ORDER in record["message"], output
        assert "came exactly once, but not in sequence order" in record["message"], output
    return {case: r for case, r in records.items() if case != LONG_FEED}


SPACED_TARGET = """
[targets.ssb-db2-spaced]
implementation = "ssb-db2"
version = "8.1.0"
protocol = "ssb"
roles = ["server"]
capabilities = ["publish"]
host = "127.0.0.1"
port = 0
[targets.ssb-db2-spaced.credentials]
secret_key_file = "{secret_file}"
[targets.ssb-db2-spaced.launch]
server = "{repo}/scripts/ssb-db2.sh serve --host {host} --port {port} --messages 5 --publish-interval 5"
ready = "SSB_READY=1"
ready_timeout = 60
outputs = { public_key = "SSB_ID", secret_file = "SSB_SECRET" }
"""
"""The same node with its seed messages 5 ms apart, so that no two share a
millisecond: what the cases blocked by section 1 show (findings, "Server
role")."""


def test_findings_name_the_pinned_cases():
    for case in (OUT_OF_ORDER, CONFLICTING, OLD_FALSE, LONG_FEED, *BLOCKED_BY_ORDER):
        assert f"`{case}`" in FINDINGS or f"`{case.rsplit('.', 1)[-1]}`" in FINDINGS, case


@pytest.mark.timeout(300)
def test_harness_certifies_ssb_db2_server(tmp_path):
    run = certify(tmp_path, "--target", "ssb-db2", timeout=280)
    records = run.by_case("ssb-db2")
    assert len(records) >= 70, run.output
    records = long_feed_settled(records, run.output)
    not_passed = {
        case: r["outcome"]
        for case, r in records.items()
        if r["outcome"] not in ("passed", "not_applicable")
    }
    if records[OUT_OF_ORDER]["outcome"] == "failed":
        assert not_passed == {
            OUT_OF_ORDER: "failed",
            CONFLICTING: "failed",
            **{case: "blocked" for case in BLOCKED_BY_ORDER},
        }, run.output
        assert "expected sequences 1..5 in order" in records[OUT_OF_ORDER]["message"]
    elif records[LIMIT]["outcome"] == "failed":
        # Section 4: the cases that read the feed through the limit rule
        # are blocked by it, naming it.
        assert "limit 2 must give sequences [1, 2]" in records[LIMIT]["message"]
        assert {case for case, outcome in not_passed.items() if outcome == "failed"} == {
            LIMIT,
            CONFLICTING,
        }, run.output
        blocked = {case for case, outcome in not_passed.items() if outcome == "blocked"}
        assert blocked and blocked <= BLOCKED_BY_ORDER, run.output
        assert all(LIMIT in records[case]["message"] for case in blocked), run.output
    else:
        # No two seed messages shared a millisecond this time (findings,
        # "Server role": then section 3 shows).
        assert not_passed == {CONFLICTING: "failed", OLD_FALSE: "failed"}, run.output
    assert records["ssb.feed.server.chain-links"]["outcome"] == "passed", run.output
    assert records["ssb.boxstream.server.ends-stream-with-goodbye"]["outcome"] == "passed", (
        run.output
    )
    na = {case for case, r in records.items() if r["outcome"] == "not_applicable"}
    # The client-role cases, and the numbering of the node's own requests
    # when it made none within the case's window (it calls the peer only
    # now and then).
    assert na and all(
        ".client." in case or case == "ssb.rpc.server.numbers-own-requests-from-1" for case in na
    ), na
    assert run.code == 1 and "ssb-db2 [ssb-db2 8.1.0, ssb]: NOT CONFORMANT" in run.output


@pytest.mark.timeout(300)
def test_harness_certifies_ssb_db2_server_with_seed_messages_apart(tmp_path):
    targets = tmp_path / "targets.toml"
    targets.write_text(SPACED_TARGET)
    run = certify(
        tmp_path, "--targets-file", str(targets), "--target", "ssb-db2-spaced", timeout=280
    )
    records = long_feed_settled(run.by_case("ssb-db2-spaced"), run.output)
    not_passed = {
        case: r["outcome"]
        for case, r in records.items()
        if r["outcome"] not in ("passed", "not_applicable")
    }
    assert not_passed == {CONFLICTING: "failed", OLD_FALSE: "failed"}, run.output
    assert "with old false no existing message may be sent" in records[OLD_FALSE]["message"]
    assert run.code == 1


@pytest.mark.timeout(300)
def test_harness_certifies_ssb_db2_client_ebt_only(tmp_path):
    run = certify(tmp_path, "--target", "ssb-db2-client", timeout=280)
    records = run.by_case("ssb-db2-client")
    client = {case: r for case, r in records.items() if ".client." in case}
    passed = {case for case, r in client.items() if r["outcome"] == "passed"}
    na = {case: r["message"] for case, r in client.items() if r["outcome"] == "not_applicable"}
    assert passed == {
        "ssb.shs.client.sends-valid-hello",
        "ssb.shs.client.completes-valid-handshake",
        "ssb.shs.client.rejects-wrong-network-key",
        "ssb.shs.client.rejects-forged-server-accept",
        "ssb.shs.client.uses-fresh-ephemeral-keys",
        "ssb.shs.client.rejects-truncated-msg2",
        "ssb.shs.client.rejects-msg4-with-bad-signature",
        "ssb.shs.client.rejects-replayed-server-hello-and-accept",
        "ssb.rpc.client.first-request-is-number-1",
        # Its EBT request and what came before it keep the RPC message format.
        "ssb.rpc.client.sends-well-formed-messages",
    }, run.output
    assert set(client) == passed | set(na), run.output
    assert len(na) == 16, na  # 15 MUST, and the SHOULD ssb.rpc.client.json-without-whitespace
    for message in na.values():
        assert 'the client replicates by EBT only: it asked ["ebt", "replicate"]' in message, (
            message
        )
    assert run.code == 0 and "ssb-db2-client [ssb-db2 8.1.0, ssb]: CONFORMANT" in run.output


@pytest.mark.timeout(280)
def test_ssb_db2_client_replicates_ssb_server_by_ebt(tmp_path):
    """The pair whose both sides speak EBT interoperates (findings, "Interop")."""
    run_dir = tmp_path / "run"
    completed = run_cli(
        "interop",
        "--run-dir",
        str(run_dir),
        "--client",
        "ssb-db2-client",
        "--server",
        "ssb-server",
        timeout=260,
    )
    output = completed.stdout + completed.stderr
    records = [
        json.loads(line)
        for line in (run_dir / "results.jsonl").read_text().splitlines()
        if line.strip()
    ]
    outcomes = {r["case_id"]: r["outcome"] for r in records}
    assert outcomes["ssb.interop.client.replicates-peer-feed"] == "passed", output
    assert set(outcomes.values()) == {"passed"}, output
    assert completed.returncode == 0, output

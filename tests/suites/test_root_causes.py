"""One bug, one failure: the reference SSB node broken in one rule fails that
rule's case, and the cases that relied on the rule are blocked by it, not
failed for rules of their own (a `limit` bug is no numbering failure, a
numbering bug does not fail every case that reads an answer, an unsplit
large message does not fail every case that reads the feed)."""

from __future__ import annotations

import textwrap

from ..harness.cli_runner import certify

SERVER = (
    "{python} -m reference_impl.ssb serve --key-file {workdir}/server-secret --create-key "
    "--host {host} --port 0 --seed-messages 5 --fault "
)


def faulty_node(fault: str) -> str:
    return textwrap.dedent(f"""
        [targets.{fault}]
        implementation = "reference-ssb-{fault}"
        version = "test"
        protocol = "ssb"
        roles = ["server"]
        capabilities = ["publish"]
        [targets.{fault}.credentials]
        secret_key_file = "{{workdir}}/server-secret"
        [targets.{fault}.launch]
        server = "{SERVER}{fault}"
        ready = "SSB_READY"
        outputs = {{ public_key = "id", port = "port" }}
        cwd = "{{repo}}"
    """)


NUMBERING = "ssb.rpc.server.responses-use-negated-request-number"
LIMIT = "ssb.history.server.limit-caps-messages"
BOX_SIZE = "ssb.boxstream.server.splits-large-messages"


def test_each_fault_fails_its_own_case_and_blocks_the_cases_relying_on_it(tmp_path):
    faults = ("ignore-limit", "number-replies-by-latest-request", "no-box-split")
    targets = tmp_path / "targets.toml"
    targets.write_text("".join(faulty_node(fault) for fault in faults))
    run = certify(
        tmp_path,
        "--targets-file",
        str(targets),
        *[f"--target={fault}" for fault in faults],
        timeout=400,
    )
    assert run.code == 1, run.output

    limit = run.by_case("ignore-limit")
    assert limit[LIMIT]["outcome"] == "failed", limit[LIMIT]
    assert limit[NUMBERING]["outcome"] == "passed", limit[NUMBERING]["message"]

    numbering = run.by_case("number-replies-by-latest-request")
    assert numbering[NUMBERING]["outcome"] == "failed", numbering[NUMBERING]
    assert "came on -2" in numbering[NUMBERING]["message"], numbering[NUMBERING]["message"]
    for case_id in (
        "ssb.rpc.server.source-responses-set-stream-flag",
        "ssb.rpc.server.ends-source-stream-with-true",
        "ssb.boxstream.server.accepts-several-rpc-per-box",
        LIMIT,
    ):
        record = numbering[case_id]
        assert record["outcome"] == "blocked" and record["blocked_by"] == NUMBERING, record
    assert [c for c, r in numbering.items() if r["outcome"] in ("failed", "error")] == [NUMBERING]

    unsplit = run.by_case("no-box-split")
    assert unsplit[BOX_SIZE]["outcome"] == "failed", unsplit[BOX_SIZE]
    for case_id in (
        "ssb.feed.server.signatures-verify",
        "ssb.feed.server.keys-are-message-ids",
        "ssb.history.server.serves-whole-feed-in-order",
        "ssb.history.server.limit-caps-messages",
    ):
        record = unsplit[case_id]
        # Blocked once the 4097+ byte message is in the feed; passed if the
        # case read the feed before the box-size case published it.
        assert record["outcome"] in ("blocked", "passed"), record
        if record["outcome"] == "blocked":
            assert record["message"].startswith(f"blocked by {BOX_SIZE}"), record["message"]

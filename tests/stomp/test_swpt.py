"""swpt_stomp 0.1.0, Swaptacular's own STOMP server and client, as the
targets swpt-server and swpt-client (interop/stomp/swpt_node.py):
`conformance certify` gives each the verdict with exactly the failed cases
docs/findings/swpt_stomp-0.1.0.md lists, and our SMP vectors disagree with
swpt_stomp's own SMP validation only where the vectors say so
(scripts/swpt_smp_crosscheck.py).

Skipped, with the reason, when swpt_stomp is not installed
(scripts/install-swpt-stomp.sh, or scripts/setup.sh --swpt) or, for the
certifications, when Debian's rabbitmq-server is not (its broker).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SWPT_BIN = REPO_ROOT / ".tools" / "swpt-stomp" / "venv" / "bin"
FINDINGS = REPO_ROOT / "docs" / "findings" / "swpt_stomp-0.1.0.md"
CROSSCHECK = REPO_ROOT / "scripts" / "swpt_smp_crosscheck.py"

needs_swpt = pytest.mark.skipif(
    not (SWPT_BIN / "swpt-server").exists(),
    reason="swpt_stomp is not installed (scripts/install-swpt-stomp.sh, or scripts/setup.sh --swpt)",
)
needs_rabbitmq = pytest.mark.skipif(
    not Path("/usr/lib/rabbitmq/bin/rabbitmq-server").exists(),
    reason="Debian's rabbitmq-server, swpt_stomp's broker, is not installed (scripts/install-rabbitmq.sh)",
)

ROW = re.compile(
    r"^\| (swpt-server|swpt-client) \| `([a-z0-9.-]+)` \| (MUST|SHOULD)(?: \([a-z-]+\))? \|",
    re.MULTILINE,
)


def known_failures(target: str) -> dict[str, str]:
    """The failed cases the findings file lists for ``target`` (its table
    "Failed cases"): case id -> level."""
    return {
        case: level
        for name, case, level in ROW.findall(FINDINGS.read_text("utf-8"))
        if name == target
    }


def test_findings_file_lists_cases_in_its_table():
    # The table the certifications are checked against parses (and names only real cases).
    rows = ROW.findall(FINDINGS.read_text("utf-8"))
    assert rows, "docs/findings/swpt_stomp-0.1.0.md has no row in its 'Failed cases' table"
    assert all(case.startswith("stomp.") for _, case, _ in rows)


# The hang guard is the certification's own deadline (certify's timeout=900).
# swpt-client's 20 client launches share one RabbitMQ (--shared-broker):
# 25 s in all on a quiet machine; one broker per launch took 140 s, and past
# 300 s under the CI's load.
@needs_swpt
@needs_rabbitmq
@pytest.mark.timeout(900)
@pytest.mark.parametrize("target", ["swpt-server", "swpt-client"])
def test_harness_certifies_swpt_stomp_with_the_known_findings(tmp_path, target):
    from ..harness.cli_runner import certify

    run = certify(tmp_path, "--target", target, timeout=900)
    records = run.by_case(target)
    assert len(records) >= 50, run.output
    failed = {
        case: r["level"]
        for case, r in records.items()
        if r["outcome"] in ("failed", "error", "blocked")
    }
    assert failed == known_failures(target), run.output
    role = "server" if target == "swpt-server" else "client"
    ran = {case for case, r in records.items() if r["outcome"] != "not_applicable"}
    assert ran and all(f".{role}." in case for case in ran), "every case of its role ran, no other"
    na = {case for case, r in records.items() if r["outcome"] == "not_applicable"}
    assert all(f".{role}." not in case for case in na), sorted(c for c in na if f".{role}." in c)
    if role == "server":
        # The storage cases ran through the AMQP adapter, the restart one too.
        for case in (
            "stomp.receipt.server.receipted-message-is-stored",
            "stomp.receipt.server.stored-after-restart",
            "stomp.receipt.server.stored-after-connection-cut",
            "stomp.receipt.server.receipt-confirms-pipelined-sends",
        ):
            assert records[case]["outcome"] == "passed", records[case]["message"]
    must_failed = [case for case, level in known_failures(target).items() if level == "MUST"]
    verdict = "NOT CONFORMANT" if must_failed else "CONFORMANT"
    assert f"{target} [swpt_stomp 0.1.0, stomp]: {verdict}" in run.output, run.output
    assert run.code == (1 if must_failed else 0), run.output


@needs_swpt
def test_smp_vectors_agree_with_swpt_stomp_except_where_they_say():
    done = subprocess.run(
        [sys.executable, str(CROSSCHECK), "--json"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)
    assert report["unexplained"] == [], "\n".join(report["unexplained"])
    assert report["counts"]["valid"] >= 60 and report["counts"]["invalid"] >= 500
    # Every valid vector passes swpt_stomp; the disagreements are the ones
    # docs/findings/swpt_stomp-0.1.0.md ("SMP validation") writes up.
    explained = sum(len(ids) for ids in report["explained"].values())
    text = FINDINGS.read_text("utf-8")
    assert f"{explained} of the {report['counts']['invalid']} invalid vectors" in text, explained


@needs_swpt
@needs_rabbitmq
def test_swpt_stomp_interoperates_with_the_reference_node_both_ways(tmp_path):
    # swpt-client -> reference-stomp, swpt-client -> swpt-server, reference-stomp -> swpt-server
    # (and the reference pair): every pair delivers, stores and sends nothing twice
    # (docs/findings/swpt_stomp-0.1.0.md, "Interop").
    from .test_interop import DELIVERS, NO_DUP, STORED, interop

    completed, records, _ = interop(
        tmp_path,
        "--client",
        "swpt-client",
        "--client",
        "reference-stomp",
        "--server",
        "swpt-server",
        "--server",
        "reference-stomp",
        timeout=900,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    results = [
        json.loads(line)
        for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()
        if line.strip()
    ]
    pairs = {(r["implementation"], r["peer_implementation"]) for r in results}
    assert pairs == {
        ("swpt_stomp", "swpt_stomp"),
        ("swpt_stomp", "reference-stomp"),
        ("reference-stomp", "swpt_stomp"),
        ("reference-stomp", "reference-stomp"),
    }, pairs
    assert {r["case_id"] for r in results} == {DELIVERS, STORED, NO_DUP}
    assert all(r["outcome"] == "passed" for r in results), [
        (r["implementation"], r["peer_implementation"], r["case_id"], r["message"])
        for r in results
        if r["outcome"] != "passed"
    ]


@needs_swpt
@needs_rabbitmq
@pytest.mark.timeout(300)
def test_client_launches_of_a_run_share_one_broker_that_ends_with_the_run(tmp_path):
    """swpt_node.py's --shared-broker: the first launch starts the broker's
    keeper, a later one finds it, and the keeper stops the broker once the
    run's work dir is removed (no RabbitMQ outlives its run)."""
    import os
    import select

    sys.path.insert(0, str(REPO_ROOT / "interop" / "stomp"))
    try:
        import swpt_node
    finally:
        sys.path.remove(str(REPO_ROOT / "interop" / "stomp"))
    from conformance.core.work_dirs import make_work_dir, remove_work_dir

    owner = make_work_dir("swpt-shared-broker-test")
    try:
        port = swpt_node.attach_shared_broker(owner, 120)
        assert swpt_node.attach_shared_broker(owner, 120) == port
        state = json.loads((owner / swpt_node.SHARED_BROKER_DIR / "broker.json").read_text())
        assert state["amqp_port"] == port
        keeper = os.pidfd_open(state["pid"])
    finally:
        remove_work_dir(owner)
    try:
        # The pidfd becomes readable when the keeper exits: an event, no polling here.
        readable, _, _ = select.select([keeper], [], [], 60)
        assert readable, (
            f"the broker's keeper (pid {state['pid']}) still runs 60 s after its run's work dir went"
        )
    finally:
        os.close(keeper)

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


FAKE_RABBITMQ_SH = """#!/bin/bash
# Stands in for scripts/rabbitmq.sh: each start is counted in DATA_DIR/starts;
# the starts listed in DATA_DIR/lose-port log what RabbitMQ logs when another
# process took its distribution port, those in DATA_DIR/fail fail without it,
# and exit before ready; any other prints the ready line and stays up.
while [ $# -gt 0 ]; do [ "$1" = --data-dir ] && dir="$2"; shift; done
mkdir -p "$dir/log"
n=$(( $(cat "$dir/starts" 2>/dev/null || echo 0) + 1 )); echo "$n" > "$dir/starts"
if grep -qx "$n" "$dir/lose-port" 2>/dev/null; then
    echo 'Application rabbitmq_prelaunch exited with reason: {{shutdown,{failed_to_start_child,prelaunch,{dist_port_already_used,46809,not_erlang,"localhost"}}}}' >> "$dir/log/server.out"
    exit 1
fi
grep -qx "$n" "$dir/fail" 2>/dev/null && { echo "plugins broken" >> "$dir/log/server.out"; exit 1; }
echo "RABBITMQ_READY=1 port=0 amqp_port=$((40000 + n)) exchange=x queue=y data_dir=$dir"
exec sleep 60
"""


@pytest.mark.parametrize(
    "lose_port, fail, starts, ready",
    [
        ("1\n", "", 2, True),  # a port lost once: started again, on other ports
        ("1\n2\n3\n", "", 3, False),  # lost every time: gives up after PORT_RACE_ATTEMPTS
        ("", "1\n", 1, False),  # another failure: not retried
    ],
)
def test_a_broker_that_lost_a_port_to_another_process_starts_again(
    tmp_path, monkeypatch, lose_port, fail, starts, ready
):
    """swpt_node.py's Broker: rabbitmq.sh picks free ports, RabbitMQ binds
    them seconds later, and another process on the host's network may take
    one in between (a container client launch failed so in a full tier).
    The launcher starts the broker again when its log says so, and only
    then; the stand-in script is the only thing not real here."""
    sys.path.insert(0, str(REPO_ROOT / "interop" / "stomp"))
    try:
        import swpt_node
    finally:
        sys.path.remove(str(REPO_ROOT / "interop" / "stomp"))
    fake_repo = tmp_path / "repo"
    script = fake_repo / "scripts" / "rabbitmq.sh"
    script.parent.mkdir(parents=True)
    script.write_text(FAKE_RABBITMQ_SH)
    script.chmod(0o755)
    data = tmp_path / "data"
    data.mkdir()
    (data / "lose-port").write_text(lose_port)
    (data / "fail").write_text(fail)
    monkeypatch.setattr(swpt_node, "REPO", fake_repo)
    if ready:
        broker = swpt_node.Broker(data, "x", "y", 10)
        try:
            assert broker.amqp_port == 40000 + starts
        finally:
            broker.stop()
    else:
        with pytest.raises(SystemExit, match="RabbitMQ did not start"):
            swpt_node.Broker(data, "x", "y", 10)
    assert int((data / "starts").read_text()) == starts

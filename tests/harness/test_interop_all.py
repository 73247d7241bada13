"""`conformance interop --all`: every client-role target against every
server-role target of a protocol, pairs whose tools are missing skipped
with the reason, the client x server table printed and written as JSON,
results.jsonl records carrying both implementations (measured: about 6 s)."""

import json

from conformance.core.targets import load_targets_file
from conformance.interop.pairs import Pair, missing_tools, plan_pairs, table, tally

from .cli_runner import WRONG_MSGNO_TARGET, run_cli

TARGETS = (
    WRONG_MSGNO_TARGET
    + """
[targets.ghost]
implementation = "ghost-initiator"
version = "test"
protocol = "ripplehost"
roles = ["client"]
[targets.ghost.launch]
client = "{repo}/scripts/no-such-initiator.sh --peer-port {peer_port}"
"""
)


def test_all_runs_every_pair_and_prints_the_table(tmp_path):
    targets = tmp_path / "targets.toml"
    targets.write_text(TARGETS)
    run_dir = tmp_path / "run"
    completed = run_cli(
        "interop",
        "--all",
        "--protocol",
        "ripplehost",
        "--targets-file",
        str(targets),
        "--run-dir",
        str(run_dir),
        timeout=240,
    )
    out = completed.stdout + completed.stderr
    # One pair fails its ping/echo case: the run is not all interoperable.
    assert completed.returncode == 1, out
    lines = {
        tuple(line.split()[:2]): line for line in completed.stdout.splitlines() if line.strip()
    }
    ref = lines[("reference-ripplehost", "reference-ripplehost")]
    assert ref.split()[3:5] == ["2", "0"] and ref.endswith("interoperable"), ref
    bad = lines[("reference-ripplehost", "wrong-msgno")]
    assert bad.split()[3:7] == ["1", "1", "0", "0"] and "NOT interoperable" in bad, bad
    for server in ("reference-ripplehost", "wrong-msgno"):
        skipped = lines[("ghost", server)]
        assert "skipped: client ghost: scripts/no-such-initiator.sh is missing" in skipped, skipped
    summary = json.loads((run_dir / "interop-summary.json").read_text())
    verdicts = {(p["client"], p["server"]): p["verdict"] for p in summary["pairs"]}
    assert verdicts == {
        ("reference-ripplehost", "reference-ripplehost"): "interoperable",
        ("reference-ripplehost", "wrong-msgno"): "NOT interoperable",
        ("ghost", "reference-ripplehost"): "skipped",
        ("ghost", "wrong-msgno"): "skipped",
    }
    assert (
        summary["interoperable"] == 1
        and summary["not_interoperable"] == 1
        and summary["skipped"] == 2
    )
    records = [
        json.loads(line)
        for line in (run_dir / "results.jsonl").read_text().splitlines()
        if line.strip()
    ]
    pairs = {
        (r["implementation"], r["peer_implementation"], r["case_id"]): r["outcome"] for r in records
    }
    assert (
        pairs[
            (
                "reference-ripplehost",
                "reference-ripplehost-wrong-msgno",
                "ripplehost.interop.client.ping-echo-round-trip",
            )
        ]
        == "failed"
    )
    assert (
        pairs[
            (
                "reference-ripplehost",
                "reference-ripplehost",
                "ripplehost.interop.client.ping-echo-round-trip",
            )
        ]
        == "passed"
    )
    assert (run_dir / "traces" / "reference-ripplehost+wrong-msgno").is_dir()


def test_all_refuses_client_or_server_and_unknown_protocols(tmp_path):
    for extra, words in (
        (["--client", "reference-ssb"], "leave out --client"),
        (["--protocol", "ssb", "--protocol", "nope"], "invalid choice"),
    ):
        completed = run_cli(
            "interop", "--all", *extra, "--run-dir", str(tmp_path / "r"), timeout=60
        )
        assert completed.returncode == 2 and words in completed.stderr, completed.stderr
    completed = run_cli(
        "interop", "--client", "reference-ssb", "--run-dir", str(tmp_path / "r"), timeout=60
    )
    assert completed.returncode == 2 and "give --client and --server (or --all)" in completed.stderr


def test_plan_skips_with_the_reason_and_tallies(tmp_path):
    targets = load_targets_file(tmp_path / "t.toml", TARGETS)
    ghost = targets["ghost"]
    assert missing_tools(ghost, "client") == "scripts/no-such-initiator.sh is missing"
    assert missing_tools(targets["wrong-msgno"], "server") is None  # {python} -m ...: always there
    plan = plan_pairs(targets, ["ripplehost"])
    assert [(p.client, p.server) for p in plan] == [
        ("ghost", "wrong-msgno")
    ]  # no client target but ghost here
    pair = Pair("a", "b", "stomp")
    tally(
        pair,
        [
            {"outcome": "passed", "level": "MUST", "case_id": "x"},
            {"outcome": "blocked", "level": "MUST", "case_id": "y"},
            {"outcome": "failed", "level": "SHOULD", "case_id": "z"},
        ],
    )
    assert pair.counts["passed"] == 1 and pair.counts["blocked"] == 1 and pair.counts["failed"] == 1
    assert pair.verdict == "NOT interoperable" and pair.must_not_passed == ["y (blocked)"]
    assert "NOT interoperable" in table([pair])

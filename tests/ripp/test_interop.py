"""`conformance interop` for RIPP (conformance/interop/ripp/): a producer
target (client role) against a consumer target (server role) through the
envelope-aware relay, which replays Deltas (the consumer receives 1, 2, 2,
1, 3) and asks the consumer for a Checkpoint_ack on the producer's
connection. Reference x reference passes; a consumer applying duplicates
and a producer sending no Heartbeats each fail their own rule; the OCaml
peer (real bin_prot) pairs with the reference node both ways (measured:
about 20 s in all, most of it the 2 s heartbeat stays)."""

import json
import subprocess

from tests.harness.cli_runner import CONFORMANCE, REPO_ROOT

from .ocaml_env import ocaml_peer  # noqa: F401  (fixture)

NEGOTIATES = "ripp.interop.client.negotiates-schemas"
ONCE = "ripp.interop.client.applies-each-delta-once"
HEARTBEATS = "ripp.interop.client.heartbeats-keep-session"
REGISTRY = "{repo}/conformance/suites/ripp/registry.json"


def variant(name: str, role: str, fault: str) -> str:
    if role == "server":
        command = (
            f"{{python}} -m reference_impl.ripp consume --schemas {REGISTRY} --host {{host}} --port 0 "
            f"--heartbeat-interval 0.5 --fault {fault}"
        )
    else:
        command = (
            f"{{python}} -m reference_impl.ripp produce --schemas {REGISTRY} --peer-host {{peer_host}} "
            "--peer-port {peer_port} --source-id {source_id} --count {count} --stay {client_stay} "
            f"--timeout {{client_timeout}} --fault {fault}"
        )
    return f"""
[targets.{name}]
implementation = "reference-ripp-{fault}"
version = "test"
protocol = "ripp"
roles = ["{role}"]
[targets.{name}.launch]
{role} = "{command}"
ready = "RIPP_READY"
outputs = {{ port = "port" }}
cwd = "{{repo}}"
"""


def interop(tmp_path, *args):
    run_dir = tmp_path / "run"
    completed = subprocess.run(
        CONFORMANCE + ["interop", "--run-dir", str(run_dir), *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO_ROOT,
    )
    records = [
        json.loads(line)
        for line in (run_dir / "results.jsonl").read_text().splitlines()
        if line.strip()
    ]
    return completed, {r["case_id"]: r for r in records}, run_dir


def test_reference_pair_applies_each_delta_once(tmp_path):
    completed, records, run_dir = interop(
        tmp_path, "--client", "reference-ripp", "--server", "reference-ripp"
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert {c: r["outcome"] for c, r in records.items()} == {
        NEGOTIATES: "passed",
        ONCE: "passed",
        HEARTBEATS: "passed",
    }
    assert records[ONCE]["peer_implementation"] == "reference-ripp"
    trace = (run_dir / records[ONCE]["trace_file"]).read_text()
    assert trace.count("injected by the harness: DeltaMsg") == 2  # 1, 2, [2, 1], 3
    assert "injected by the harness: CheckpointRequest" in trace and "CheckpointAck" in trace


def test_consumer_applying_duplicates_fails_the_once_rule(tmp_path):
    targets = tmp_path / "targets.toml"
    targets.write_text(variant("dup-consumer", "server", "apply-duplicates"))
    completed, records, _ = interop(
        tmp_path,
        "--targets-file",
        str(targets),
        "--client",
        "reference-ripp",
        "--server",
        "dup-consumer",
    )
    assert completed.returncode == 1
    assert records[NEGOTIATES]["outcome"] == "passed" and records[HEARTBEATS]["outcome"] == "passed"
    once = records[ONCE]
    assert once["outcome"] == "failed", once
    assert "applied_count 5" in once["message"] and "expected 3, 3" in once["message"], once[
        "message"
    ]


def test_producer_without_heartbeats_fails_the_heartbeat_rule(tmp_path):
    targets = tmp_path / "targets.toml"
    targets.write_text(variant("silent-producer", "client", "no-heartbeats"))
    completed, records, _ = interop(
        tmp_path,
        "--targets-file",
        str(targets),
        "--client",
        "silent-producer",
        "--server",
        "reference-ripp",
    )
    assert completed.returncode == 1
    assert records[NEGOTIATES]["outcome"] == "passed" and records[ONCE]["outcome"] == "passed"
    beats = records[HEARTBEATS]
    assert beats["outcome"] == "failed" and beats["level"] == "SHOULD"
    assert "closed the session before" in beats["message"], beats["message"]


def test_ocaml_peer_pairs_with_the_reference_node_both_ways(tmp_path, ocaml_peer):  # noqa: F811
    for client, server in (("reference-ripp", "ocaml-ripp"), ("ocaml-ripp", "reference-ripp")):
        completed, records, _ = interop(tmp_path / client, "--client", client, "--server", server)
        assert completed.returncode == 0, completed.stdout + completed.stderr
        assert {r["outcome"] for r in records.values()} == {"passed"} and len(records) == 3
        assert (
            records[ONCE]["implementation"] == client
            and records[ONCE]["peer_implementation"] == server
        )

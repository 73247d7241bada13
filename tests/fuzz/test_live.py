"""``conformance fuzz`` and ``conformance replay`` against live reference
nodes: the plain node breaks no rule, a fault is found, shrunk, saved,
recorded and replayed (and the replay passes against the plain node), a
conformant variant passes. Each starts nodes and runs Hypothesis for real:
seconds each, so they are in the full tier (tests/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.cli import main
from conformance.core.results import FAILED, read_results
from conformance.core.run_folder import RunFolder
from conformance.core.targets import load_targets
from conformance.fuzz.engine import FuzzOptions, fuzz, machine_for, start_target
from conformance.mutation import (
    builtin_tables,
    mutant_name,
    mutant_table,
    targets_toml,
    variant_name,
    variant_specs,
    variant_table,
)

FAULTS = [
    # (protocol, fault, the case it breaks, sends left after shrinking)
    ("ripplehost", "reply-wrong-msgno", "ripplehost.msgno.server.reply-carries-msgno", 2),
    ("stomp", "connected-without-version", "stomp.connect.server.connected-says-version-1-2", 1),
]


def write_targets(path: Path) -> Path:
    tables = builtin_tables()
    generated = {
        mutant_name(protocol, fault): mutant_table(tables[f"reference-{protocol}"], fault, "server")
        for protocol, fault, _, _ in FAULTS
    }
    for protocol, variant in (
        ("ripplehost", "unprompted-traffic"),
        ("stomp", "cumulative-receipts"),
    ):
        [spec] = [s for s in variant_specs(protocol) if s.name == variant]
        generated[variant_name(protocol, variant)] = variant_table(
            tables[f"reference-{protocol}"], spec, 1.0
        )
    path.write_text(targets_toml(generated), encoding="utf-8")
    return path


def fuzz_examples(name: str, tmp_path: Path, examples: int, targets_file: Path | None = None):
    targets = load_targets([str(targets_file)] if targets_file else [])
    target = targets[name]
    runtime = start_target(target, RunFolder(tmp_path / name), "test")
    try:
        return fuzz(
            runtime,
            machine_for(target.protocol, "server"),
            FuzzOptions(examples=examples, seed=20261207, deadline=3.0),
        )
    finally:
        runtime.stop()


@pytest.mark.parametrize("name, examples", [("reference-stomp", 12), ("reference-ripplehost", 40)])
def test_fuzzing_the_reference_node_breaks_no_rule(name, examples, tmp_path):
    result = fuzz_examples(name, tmp_path, examples)
    assert result.failure is None, (
        result.failure.failure if result.failure else None,
        result.failure.trace[-2000:] if result.failure else "",
    )
    assert result.examples >= examples
    assert not result.health, "the reference node exited or hung during the run"


@pytest.mark.parametrize("protocol, fault, case, sends", FAULTS)
def test_a_fault_is_found_shrunk_saved_recorded_and_replayed(
    protocol, fault, case, sends, tmp_path, capsys
):
    targets_file = write_targets(tmp_path / "targets.toml")
    name = mutant_name(protocol, fault)
    run_dir = tmp_path / "run"
    code = main(
        [
            "fuzz", "--target", name, "--targets-file", str(targets_file), "--examples", "60",
            "--seed", "3", "--run-dir", str(run_dir), "--shrink-budget", "20s",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1, out
    folder = RunFolder(run_dir)
    replay_file = folder.fuzz_replay(name, case)
    document = json.loads(replay_file.read_text())
    assert document["case_id"] == case and document["target"] == name
    assert document["protocol"] == protocol and document["seed"] == 3
    sent = [a for a in document["actions"] if a["do"] == "send"]
    # Shrunk to what shows the fault: the opening (and for Ripple host one
    # MSG whose answer carries the wrong msgno).
    assert len(sent) == sends, document["actions"]
    assert all(bytes.fromhex(m["hex"]) for a in sent for m in a["messages"])
    assert document["expected"] != document["observed"]
    [record] = list(read_results(folder.results))
    assert (record["case_id"], record["outcome"], record["target"]) == (case, FAILED, name)
    assert (run_dir / record["trace_file"]).read_text().count("harness -> target") >= sends
    assert list(folder.allure_results.glob("*-result.json"))

    code = main(
        ["replay", str(replay_file), "--targets-file", str(targets_file), "--times", "3",
         "--run-dir", str(tmp_path / "replay")]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1 and "REPRODUCED" in out and "(3 of 3)" in out, out
    code = main(
        ["replay", str(replay_file), "--target", f"reference-{protocol}",
         "--run-dir", str(tmp_path / "replay-reference")]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "NOT REPRODUCED" in out, out


@pytest.mark.parametrize(
    "protocol, variant, examples",
    [("ripplehost", "unprompted-traffic", 40), ("stomp", "cumulative-receipts", 12)],
)
def test_a_conformant_variant_breaks_no_rule(protocol, variant, examples, tmp_path):
    targets_file = write_targets(tmp_path / "targets.toml")
    result = fuzz_examples(variant_name(protocol, variant), tmp_path, examples, targets_file)
    assert result.failure is None, (
        result.failure.failure if result.failure else None,
        result.failure.trace[-2000:] if result.failure else "",
    )
    assert result.examples >= examples


def test_a_target_that_exits_is_restarted_between_examples_and_its_exit_kept(tmp_path):
    import os
    import signal

    from conformance.fuzz.machine import FuzzSession

    target = load_targets([])["reference-ripplehost"]
    runtime = start_target(target, RunFolder(tmp_path), "test")
    try:
        session = FuzzSession(runtime, 2.0)
        first = runtime.server
        os.killpg(first.process.pid, signal.SIGKILL)
        first.wait(10)
        session.begin_example()
        assert runtime.server is not first and runtime.server.running()
        [note] = session.health
        assert "exited (code -9)" in note and "RIPPLE_READY" in note, note
        # And it serves: an example against the restarted node breaks no rule.
        result = fuzz(runtime, machine_for("ripplehost", "server"), FuzzOptions(examples=5, seed=1))
        assert result.failure is None
    finally:
        runtime.stop()

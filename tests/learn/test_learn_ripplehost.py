"""``conformance learn`` end to end on the Ripple host reference acceptor,
one of its faults and two of its conformant variants (about 2 minutes:
the full tier). The targets are the ones ``conformance mutation`` makes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.cli import main
from conformance.core.run_folder import RunFolder
from conformance.core.targets import load_targets
from conformance.learn.alphabet import alphabet_for
from conformance.learn.diff import separations
from conformance.learn.learner import LearnOptions, learn, running_target
from conformance.learn.replay import replay_file
from conformance.mutation import (
    mutant_name,
    variant_name,
)
from .targets import write_learn_targets
from conformance.runner import EXIT_NOT_CONFORMANT

PROTOCOL = "ripplehost"
FAULT = "accept-reused-msgno"
"""Takes a MSG reusing the msgno of one still awaiting its answer."""
VARIANTS = ("unprompted-traffic", "late-answers")
ALPHABET = alphabet_for(PROTOCOL, "server")


@pytest.fixture(scope="module")
def targets_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_learn_targets(
        tmp_path_factory.mktemp("learn"), PROTOCOL, FAULT, VARIANTS, ALPHABET
    )


def learned(name: str, targets_file: Path, run_dir: Path):  # noqa: ANN201
    target = load_targets([str(targets_file)])[name]
    with running_target(target, run_dir, "test") as runtime:
        return learn(runtime, ALPHABET, LearnOptions())


@pytest.fixture(scope="module")
def reference_runs(targets_file: Path, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    run_dir = tmp_path_factory.mktemp("reference")
    return [learned(f"reference-{PROTOCOL}", targets_file, run_dir) for _ in range(2)]


def test_the_reference_model_is_deterministic_and_the_same_twice(reference_runs) -> None:
    first, second = reference_runs
    model = first.model
    # Deterministic and complete: one transition per state and input, to a state of the model.
    assert set(model.transitions) == {(s, i) for s in model.states for i in model.inputs}
    assert {t for t, _ in model.transitions.values()} <= set(model.states)
    assert set(model.access()) == set(model.states)
    assert second.model.to_json() == model.to_json()
    assert not first.disagreements and not second.disagreements
    # What the reference does, read off the model.
    assert model.run(("host-id", "ping")) == ("RPY(host-id)", "RPY(pong)")
    assert model.run(("ping",)) == ("ERR(host-id-required)+close",)
    assert model.run(("host-id", "reused-outstanding-msgno", "ping")) == (
        "RPY(host-id)",
        "close",
        "closed",
    )
    # The bound: one target learnt in under 5 minutes.
    assert first.seconds < 300


def test_a_fault_is_separated_and_its_replay_file_reproduces_it(
    targets_file: Path, reference_runs, tmp_path: Path, capsys
) -> None:
    reference_json = tmp_path / "reference-model.json"
    reference_json.write_text(json.dumps(reference_runs[0].model.to_json()), encoding="utf-8")
    name = mutant_name(PROTOCOL, FAULT)
    run_dir = tmp_path / "run"
    code = main(
        [
            "learn",
            "--target",
            name,
            "--targets-file",
            str(targets_file),
            "--run-dir",
            str(run_dir),
            "--reference-model",
            str(reference_json),
            "--replays",
            "10",
        ]
    )
    out = capsys.readouterr().out
    assert code == EXIT_NOT_CONFORMANT, out
    folder = RunFolder(run_dir)
    summary = json.loads(folder.learn_summary(name).read_text(encoding="utf-8"))
    first = summary["separations"][0]
    assert first["word"] == ["host-id", "reused-outstanding-msgno"]
    assert first["target_outputs"][-1] != "close" and first["reference_outputs"][-1] == "close"
    assert "ripplehost.msgno.server.closes-on-reused-msgno" in first["cases"]
    assert first["reproduced"] == "10/10"
    replay = Path(first["replay_file"])
    assert replay.parent == folder.learn_replays(name)
    assert replay.name.endswith("ripplehost.msgno.server.closes-on-reused-msgno.json")
    for suffix in (".json", ".dot"):
        assert folder.learned_model(name, suffix).is_file()
    assert "color=red" in folder.learned_model(name, ".dot").read_text(encoding="utf-8")
    assert "separating sequence" in out and "replayed 10/10" in out
    # The model in the run's Allure results: failed, the separations in its
    # message, the picture (with Graphviz) and the model attached.
    (result,) = [
        json.loads(path.read_text(encoding="utf-8"))
        for path in folder.allure_results.glob("*-result.json")
    ]
    assert result["status"] == "failed" and result["name"] == "learned model (server role)"
    assert "host-id · reused-outstanding-msgno" in result["statusDetails"]["message"]
    assert {"parentSuite": name, "suite": PROTOCOL, "subSuite": "learn"} == {
        label["name"]: label["value"]
        for label in result["labels"]
        if label["name"] in ("parentSuite", "suite", "subSuite")
    }
    attached = {item["name"]: item for item in result["attachments"]}
    assert {"model (JSON)", "model (DOT)", "summary"} <= set(attached)
    if folder.learned_model(name, ".svg").is_file():
        assert attached["model"]["type"] == "image/svg+xml"
    for item in attached.values():
        assert (folder.allure_results / item["source"]).is_file()

    targets = load_targets([str(targets_file)])
    with running_target(targets[name], tmp_path / "again", "test") as runtime:
        again = replay_file(replay, runtime, ALPHABET, times=3)
    assert again.reproduced, again.seen
    # The reference does not: it closes, as its model says.
    with running_target(targets[f"reference-{PROTOCOL}"], tmp_path / "ref", "test") as runtime:
        on_reference = replay_file(replay, runtime, ALPHABET, times=2)
    assert not on_reference.reproduced
    assert all(seen == on_reference.reference for seen in on_reference.seen)


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_conformant_variant_learns_to_the_reference_model(
    variant: str, targets_file: Path, reference_runs, tmp_path: Path
) -> None:
    result = learned(variant_name(PROTOCOL, variant), targets_file, tmp_path)
    differences = separations(result.model, reference_runs[0].model)
    assert not differences, (differences, result.disagreements)
    assert result.model.to_json() == reference_runs[0].model.to_json()
    if variant == "unprompted-traffic":
        # Its pings came, and were abstracted away rather than learnt.
        assert result.unprompted_dropped > 0

"""``conformance learn`` on the RIPP reference consumer, one of its faults
and a conformant variant (about a minute: the full tier)."""

from __future__ import annotations

from pathlib import Path

from conformance.learn.alphabet import alphabet_for
from conformance.learn.diff import separations
from conformance.learn.learner import LearnOptions, learn, running_target
from conformance.learn.replay import replay_separation
from conformance.mutation import (
    mutant_name,
    variant_name,
)
from .targets import learn_module_fixtures

PROTOCOL = "ripp"
FAULT = "apply-duplicates"
"""Applies a Delta whose sequence number it has already seen."""
VARIANT = "split-writes"
ALPHABET = alphabet_for(PROTOCOL, "server")


targets, reference = learn_module_fixtures(PROTOCOL, FAULT, (VARIANT,))


def test_the_reference_consumer_model(reference) -> None:
    model = reference.model
    word = ("handshake", "delta", "delta-duplicate", "delta-gap", "delta-late-fill", "checkpoint")
    assert model.run(word) == ("NEGOTIATION(ok)", "ACK", "ACK", "ACK", "ACK", "ACK")
    assert model.run(("checkpoint",)) == ("close",)
    assert model.run(("handshake-incompatible",)) == ("NEGOTIATION(refused)+close",)


def test_applying_duplicates_is_separated_through_the_checkpoint(
    targets: dict, reference, tmp_path: Path
) -> None:
    with running_target(targets[mutant_name(PROTOCOL, FAULT)], tmp_path, "t") as runtime:
        result = learn(runtime, ALPHABET, LearnOptions())
        found = separations(result.model, reference.model)
        assert found, "the fault's model equals the reference's"
        first = found[0]
        assert first.word == ("handshake", "delta-duplicate")
        assert first.target_outputs[-1].startswith("ACK(")
        assert first.reference_outputs[-1] == "ACK"
        replay = replay_separation(
            runtime, ALPHABET, first, times=5, read_window=result.read_window
        )
    assert replay.reproduced == 5
    assert "ripp.delta.server.applies-in-order" in replay.cases


def test_a_conformant_variant_learns_to_the_reference_model(
    targets: dict, reference, tmp_path: Path
) -> None:
    with running_target(targets[variant_name(PROTOCOL, VARIANT)], tmp_path, "t") as runtime:
        result = learn(runtime, ALPHABET, LearnOptions())
    assert not separations(result.model, reference.model), result.disagreements
    assert result.model.to_json() == reference.model.to_json()

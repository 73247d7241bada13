"""``conformance learn`` on the STOMP reference server (TLS, client
certificate), one of its faults and two of its conformant variants (about
a minute and a half: the full tier)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.learn.alphabet import alphabet_for
from conformance.learn.diff import separations
from conformance.learn.learner import LearnOptions, learn, running_target
from conformance.learn.replay import replay_separation
from conformance.mutation import (
    mutant_name,
    variant_name,
)
from .targets import learn_module_fixtures

PROTOCOL = "stomp"
FAULT = "accept-missing-destination"
VARIANTS = ("unprompted-traffic", "extra-headers")
ALPHABET = alphabet_for(PROTOCOL, "server")


targets, reference = learn_module_fixtures(PROTOCOL, FAULT, VARIANTS)


def test_the_reference_server_model(reference) -> None:
    model = reference.model
    assert model.run(("CONNECT", "SEND", "DISCONNECT")) == ("CONNECTED", "RECEIPT", "RECEIPT+close")
    assert model.run(("SEND",)) == ("ERROR+close",)
    assert model.run(("CONNECT", "SEND-no-destination")) == ("CONNECTED", "ERROR+close")
    assert reference.seconds < 300


def test_a_missing_destination_accepted_is_separated_and_replays(
    targets: dict, reference, tmp_path: Path
) -> None:
    with running_target(targets[mutant_name(PROTOCOL, FAULT)], tmp_path, "t") as runtime:
        result = learn(runtime, ALPHABET, LearnOptions())
        found = separations(result.model, reference.model)
        assert found, "the fault's model equals the reference's"
        first = found[0]
        assert first.word == ("CONNECT", "SEND-no-destination")
        assert first.reference_outputs[-1] == "ERROR+close"
        replay = replay_separation(
            runtime, ALPHABET, first, times=5, read_window=result.read_window
        )
    assert replay.reproduced == 5
    assert "stomp.send.server.error-on-missing-destination" in replay.cases


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_conformant_variant_learns_to_the_reference_model(
    variant: str, targets: dict, reference, tmp_path: Path
) -> None:
    with running_target(targets[variant_name(PROTOCOL, variant)], tmp_path, "t") as runtime:
        result = learn(runtime, ALPHABET, LearnOptions())
    differences = separations(result.model, reference.model)
    assert not differences, (differences, result.disagreements)
    assert result.model.to_json() == reference.model.to_json()
    if variant == "unprompted-traffic":
        assert result.unprompted_dropped > 0

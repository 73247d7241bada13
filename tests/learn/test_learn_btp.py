"""``conformance learn`` on the BTP reference server, one of its faults and
the conformant variants its alphabet's abstraction is made for (over
WebSocket: the mapper's connection is the protocol's; the full tier)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.learn.alphabet import alphabet_for
from conformance.learn.diff import separations
from conformance.learn.learner import LearnOptions, learn, running_target
from conformance.learn.replay import replay_separation
from conformance.mutation import mutant_name, variant_name

from .targets import learn_module_fixtures

PROTOCOL = "btp"
FAULT = "accept-wrong-token"
"""Answers an auth Message with a wrong token with a Response."""
VARIANTS = ("refuse-unknown-subprotocols", "unprompted-traffic")
"""An Error for the probe Message instead of a Response; requests of the
server's own once auth succeeded."""
ALPHABET = alphabet_for(PROTOCOL, "server")


targets, reference = learn_module_fixtures(PROTOCOL, FAULT, VARIANTS)


def test_the_reference_server_model(reference) -> None:
    model = reference.model
    assert model.run(("auth", "message", "transfer", "garbage", "text", "response-unknown")) == (
        "RESPONSE",
        "ANSWER",
        "RESPONSE",
        "silence",
        "silence",
        "silence",
    )
    # Before auth: a wrong token is refused and the connection closed; so is
    # any first packet but auth; unreadable messages are ignored.
    assert model.run(("auth-wrong-token", "auth")) == ("ERROR+close", "closed")
    assert model.run(("transfer",)) == ("ERROR+close",)
    assert model.run(("garbage", "truncated", "auth")) == ("silence", "silence", "RESPONSE")
    # On an open connection an auth Message is a Message like any other: answered.
    assert model.run(("auth", "auth", "auth-wrong-token")) == ("RESPONSE", "ANSWER", "ANSWER")


def test_inputs_a_target_declares_not_applicable_are_left_out() -> None:
    """No auth-wrong-token for a target that declares every token valid,
    no transfer for one without a balance, as their cases do not apply."""
    from types import SimpleNamespace

    def names(capabilities: tuple[str, ...], params: dict) -> set[str]:
        runtime = SimpleNamespace(target=SimpleNamespace(capabilities=capabilities), params=params)
        return {item.name for item in ALPHABET.inputs_for(runtime)}

    every = {item.name for item in ALPHABET.inputs}
    assert names(("balance",), {}) == every
    assert names((), {}) == every - {"transfer"}
    assert names(("balance",), {"accepts_any_token": True}) == every - {"auth-wrong-token"}


def test_accepting_a_wrong_token_is_separated_and_replays(
    targets: dict, reference, tmp_path: Path
) -> None:
    with running_target(targets[mutant_name(PROTOCOL, FAULT)], tmp_path, "t") as runtime:
        result = learn(runtime, ALPHABET, LearnOptions())
        found = separations(result.model, reference.model)
        assert found, "the fault's model equals the reference's"
        first = found[0]
        assert first.word == ("auth-wrong-token",)
        assert (first.target_outputs, first.reference_outputs) == (("RESPONSE",), ("ERROR+close",))
        replay = replay_separation(
            runtime, ALPHABET, first, times=5, read_window=result.read_window
        )
        token = runtime.credential("auth_token").rstrip(b"\r\n")
    assert replay.reproduced == 5
    assert "btp.auth.server.rejects-wrong-token" in replay.cases
    # The bytes a replay file keeps mask the target's token (a secret).
    saved = json.dumps(replay.to_json())
    assert token and token.hex() not in saved and (b"*" * len(token)).hex() in saved


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_conformant_variant_learns_to_the_reference_model(
    targets: dict, reference, tmp_path: Path, variant: str
) -> None:
    with running_target(targets[variant_name(PROTOCOL, variant)], tmp_path, "t") as runtime:
        result = learn(runtime, ALPHABET, LearnOptions())
    assert not separations(result.model, reference.model), result.disagreements
    assert result.model.to_json() == reference.model.to_json()
    if variant == "unprompted-traffic":
        assert result.unprompted_dropped > 0, "the variant's own requests were dropped"


@pytest.mark.parametrize(
    "code, name, triggered_at, data, word",
    [
        ("F00", "NotAcceptedError", None, b"", "ERROR"),
        ("F99", "NotAcceptedError", None, b"", "ERROR(code-not-in-table)"),
        ("F00", "InvalidFieldsError", None, b"", "ERROR(name-not-the-code's)"),
        ("F00", "NotAcceptedError", "20171115140000.000", b"", "ERROR(bad-time)"),
        ("F00", "NotAcceptedError", None, b"x" * 8193, "ERROR(data-too-long)"),
        # Four bytes of code: the Error reads only with them, the code's rule.
        ("F000", "NotAcceptedError", None, b"", "ERROR(bad-code)"),
    ],
)
def test_an_errors_word_names_the_field_that_breaks_its_rule(
    code: str, name: str, triggered_at: str | None, data: bytes, word: str
) -> None:
    """No network: the words the BTP mapper makes of a target's Errors to
    the harness's auth Message, as the error cases judge each field."""
    from types import SimpleNamespace

    from conformance.suites.btp.learn_alphabet import ServerConnection
    from reference_impl.btp.packet import Error, encode_packet, generalized_time

    runtime = SimpleNamespace(
        target=SimpleNamespace(credentials={"auth_token": "file"}, name="node"),
        params={},
        credential=lambda name: b"token\n",
    )
    connection = ServerConnection(runtime)
    request_id = int.from_bytes(connection.concrete("auth")[1:5], "big")
    error = Error(request_id, code, name, triggered_at or generalized_time(), data)
    assert connection.received([encode_packet(error, validate=False)]).words == [word]
    assert (
        ALPHABET.cases_for("auth", word)[0]
        == {
            "ERROR": "btp.auth.server.accepts-valid-auth",
            "ERROR(code-not-in-table)": "btp.error.server.code-from-table",
            "ERROR(name-not-the-code's)": "btp.error.server.name-matches-code",
            "ERROR(bad-time)": "btp.error.server.triggered-at-is-utc",
            "ERROR(data-too-long)": "btp.error.server.data-at-most-8192-bytes",
            "ERROR(bad-code)": "btp.error.server.code-has-three-characters",
        }[word]
    )

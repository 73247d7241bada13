"""``conformance learn``'s usage errors (no target is started)."""

from __future__ import annotations

from conformance.cli import main
from conformance.runner import EXIT_USAGE


def test_an_unknown_target_is_a_usage_error(capsys, tmp_path) -> None:
    assert main(["learn", "--target", "no-such-node", "--run-dir", str(tmp_path)]) == EXIT_USAGE
    assert "unknown target 'no-such-node'" in capsys.readouterr().err


def test_a_protocol_without_an_alphabet_says_which_exist(capsys, tmp_path) -> None:
    code = main(["learn", "--target", "reference-ssb", "--run-dir", str(tmp_path)])
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "no learning alphabet for protocol 'ssb'" in err
    assert "ripplehost: server" in err and "stomp: server" in err and "btp: server" in err


def test_a_protocol_the_target_does_not_speak_is_a_usage_error(capsys, tmp_path) -> None:
    code = main(
        [
            "learn",
            "--target",
            "reference-ripplehost",
            "--protocol",
            "stomp",
            "--run-dir",
            str(tmp_path),
        ]
    )
    assert code == EXIT_USAGE
    assert "speaks ripplehost, not stomp" in capsys.readouterr().err

"""The command line refuses a number it cannot use before any run starts:
a read deadline of 0 s used to start a run whose every read ended at once."""

from __future__ import annotations

import subprocess
import sys

import pytest

CONFORMANCE = [sys.executable, "-m", "conformance.cli"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["certify", "--deadline", "0"], "argument --deadline: must be positive, got 0"),
        (["interop", "--deadline", "-1"], "argument --deadline: must be positive, got -1"),
        (["certify", "--jobs", "0"], "argument --jobs: must be 1 or more, got 0"),
        (["certify", "--deadline", "soon"], "argument --deadline: not a number of seconds: 'soon'"),
    ],
)
def test_an_unusable_number_is_a_usage_error(argv, said, tmp_path):
    done = subprocess.run(
        [*CONFORMANCE, *argv, "--run-dir", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in done.stderr
    assert not (tmp_path / "run").exists(), "no run may start"

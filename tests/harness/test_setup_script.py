"""scripts/setup.sh, certify.sh and test.sh (issue 24): every flag setup.sh
takes is in its usage line and its --help; the main job installs only the
base (no test extra); every test tier installs the test extra."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "scripts" / "setup.sh"
CASE_PATTERN = re.compile(r"^\s*((?:-[-a-z]+\|)*-[-a-z]+)\)", re.MULTILINE)


def taken_flags() -> set[str]:
    """The options of setup.sh's case patterns (both of its loops)."""
    flags = set()
    for pattern in CASE_PATTERN.findall(SETUP.read_text(encoding="utf-8")):
        flags.update(pattern.split("|"))
    return flags - {"-h", "--help"}


def test_the_script_takes_the_flags_the_project_uses():
    assert {"--test", "--aggregate", "--node", "--rabbitmq", "--ocaml"} <= taken_flags()


def test_every_flag_is_in_the_usage_line_and_the_help():
    text = SETUP.read_text(encoding="utf-8")
    usage = re.search(r"^# Usage: scripts/setup\.sh (.*)$", text, re.MULTILINE).group(1)
    done = subprocess.run(
        ["bash", str(SETUP), "--help"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: scripts/setup.sh ")
    for flag in sorted(taken_flags()):
        assert f"[{flag}]" in usage, f"{flag} is missing from the usage line: {usage}"
        assert re.search(rf"^\s+{re.escape(flag)}\s", done.stdout, re.MULTILINE), (
            f"{flag} is not explained in `scripts/setup.sh --help`:\n{done.stdout}"
        )
    # And the usage lists nothing the script does not take.
    assert set(re.findall(r"\[(--[a-z-]+)\]", usage)) == taken_flags()


def test_an_unknown_option_stops_before_anything_is_installed():
    done = subprocess.run(
        ["bash", str(SETUP), "--node", "--ocmal"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2
    assert done.stderr.startswith("setup: ERROR: unknown option --ocmal\nUsage: scripts/setup.sh ")
    assert "installing" not in done.stdout + done.stderr


def setup_calls(script: str) -> list[list[str]]:
    text = (REPO / "scripts" / script).read_text(encoding="utf-8")
    return [
        line.split("#")[0].replace(";;", "").split()[1:]
        for line in text.splitlines()
        if line.strip().startswith("scripts/setup.sh")
    ]


def test_the_main_job_installs_no_extra():
    calls = setup_calls("certify.sh")
    assert calls == [[]], calls


def test_every_test_tier_installs_the_test_extra_and_the_fast_one_its_own():
    """The fast tier installs the test-fast extra (no PySpark: no test of
    that tier needs a JVM); the others the test extra, which holds it."""
    text = (REPO / "scripts" / "test.sh").read_text(encoding="utf-8")
    tiers = dict(re.findall(r"^\s+([a-z|]+)\)\n\s+scripts/setup\.sh ([^\n;]*)", text, re.MULTILINE))
    assert set(tiers) == {"fast", "containers", "nightly", "full"}, tiers
    assert tiers["fast"].split() == ["--test-fast"], tiers
    for tier in ("containers", "nightly", "full"):
        assert "--test" in tiers[tier].split(), tiers
    with open(REPO / "pyproject.toml", "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert "conformance-harness[test-fast]" in extras["test"]
    assert not [
        dep
        for dep in extras["test-fast"]
        if dep.split(">")[0] in {"pyspark", "duckdb", "numpy", "selenium"}
    ]

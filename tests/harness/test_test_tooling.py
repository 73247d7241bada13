"""The machinery of the test suite itself (docs/testing.md): the tiers of
tests/conftest.py, xdist groups through the harness's own scheduler, the
time table (scripts/test_times.py) and the verdict comparison
(scripts/compare_verdicts.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .cli_runner import REPO_ROOT

PROTOCOLS = ("btp", "ripp", "ripplehost", "ssb", "stomp")


def _collect(*args: str, path: str = "tests") -> list[str]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            path,
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_fast_tier_leaves_out_what_needs_more_than_the_venv_and_keeps_a_certification_per_protocol():
    fast = _collect("--tier", "fast")
    every = _collect()
    assert 0 < len(fast) < len(every)
    needing = (
        "tests/aggregate/",
        "tests/containers/",
        "tests/interop/",
        "tests/report/",
        "tests/ci/",
        "tests/stomp/test_rabbitmq.py",
        "tests/ripp/test_ocaml_",
        "tests/ripp/test_interop.py",
        "tests/mutation/test_mutation.py::test_fault_is_caught",
    )
    assert not [nodeid for nodeid in fast if nodeid.startswith(needing)]
    for protocol in PROTOCOLS:
        assert (
            f"tests/mutation/test_mutation.py::test_reference_node_without_a_fault_passes_every_case[{protocol}]"
            in fast
        ), protocol
    # The codecs, vectors and cores of every protocol are in it.
    for folder in PROTOCOLS + ("harness", "coverage"):
        assert any(nodeid.startswith(f"tests/{folder}/") for nodeid in fast), folder


def test_container_tier_is_the_container_tests():
    containers = _collect("--tier", "containers")
    assert containers and all(nodeid.startswith("tests/containers/") for nodeid in containers)


def test_the_fresh_machine_setup_runs_in_the_container_tier_not_the_full_one():
    """CI runs the full tier: the minutes of installs in a fresh container
    belong to the containers tier and the fresh-machine workflow."""
    fresh = "tests/containers/test_fresh_machine.py::test_the_full_tier_sets_itself_up_on_a_fresh_machine"
    # Collecting tests/containers alone: the tiers are decided per test, and
    # two collections of the whole suite would cost a minute of the fast tier.
    full = _collect("--tier", "full", path="tests/containers")
    assert fresh in _collect("--tier", "containers", path="tests/containers") and fresh not in full
    assert (
        "tests/containers/test_fresh_machine.py::test_a_missing_archive_is_named_with_the_way_to_give_it"
        in full
    )


GROUPED = textwrap.dedent("""
    import os
    import pytest

    def _note(name):
        with open(os.environ["GROUP_PROBE"], "a") as f:
            f.write(f"{name} {os.environ['PYTEST_XDIST_WORKER']}\\n")

    @pytest.mark.xdist_group("shared")
    @pytest.mark.parametrize("n", range(6))
    def test_grouped(n):
        _note(f"grouped-{n}")

    @pytest.mark.parametrize("n", range(6))
    def test_free(n):
        _note(f"free-{n}")
""")


def test_xdist_groups_hold_with_the_harness_plugin_loaded(tmp_path):
    """The harness's pytest plugin brings its own xdist scheduler (for
    certify --case-jobs); the project's tests under -n N --dist loadgroup
    keep each xdist_group on one worker through it, and it writes no run
    directory for a session without conformance cases."""
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    probe = tmp_path / "probe.txt"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "test_grouped.py",
            "-n",
            "3",
            "--dist",
            "loadgroup",
            "-p",
            "no:cacheprovider",
            "-q",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={**os.environ, "GROUP_PROBE": str(probe)},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = dict(line.split() for line in probe.read_text().splitlines())
    assert len(lines) == 12
    assert len({lines[f"grouped-{n}"] for n in range(6)}) == 1, lines
    assert not (tmp_path / "reports").exists()


TIMES = [
    {
        "nodeid": "tests/btp/test_a.py::test_x",
        "phase": "setup",
        "wall": 2.0,
        "cpu": 0.5,
        "children_cpu": 0.0,
        "fixtures": ["spark"],
        "markers": [],
    },
    {
        "nodeid": "tests/btp/test_a.py::test_x",
        "phase": "call",
        "wall": 10.0,
        "cpu": 1.0,
        "children_cpu": 3.0,
        "fixtures": ["spark"],
        "markers": [],
    },
    {
        "nodeid": "tests/btp/test_a.py::test_x",
        "phase": "teardown",
        "wall": 1.0,
        "cpu": 0.5,
        "children_cpu": 0.0,
        "fixtures": ["spark"],
        "markers": [],
    },
    {
        "nodeid": "tests/ssb/test_b.py::test_y",
        "phase": "call",
        "wall": 1.0,
        "cpu": 1.0,
        "children_cpu": 0.0,
        "fixtures": [],
        "markers": [],
    },
]


def test_time_table_splits_wall_time_by_kind(tmp_path):
    path = tmp_path / "times.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in TIMES))
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "test_times.py"), str(path), "--wall", "9"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    rows = {
        line.split(" | ")[0].lstrip("| "): line
        for line in done.stdout.splitlines()
        if line.startswith("| ")
    }
    # 13 s of wall: 2 s CPU of pytest, 3 s of children, 2 s start/stop
    # (3 s of setup and teardown less their 1 s of CPU), 6 s waiting in the
    # test (10 s less its 4 s of CPU).
    assert rows["tests/btp"] == "| tests/btp | 1 | 13 | 2.0 | 3.0 | 2.0 | 6.0 |"
    assert rows["JVM (Spark)"] == "| JVM (Spark) | 2.0 |"
    assert "Run wall time: 9.0 s for 2 tests" in done.stdout


def test_time_table_refuses_a_missing_or_empty_file(tmp_path):
    script = str(REPO_ROOT / "scripts" / "test_times.py")
    missing = subprocess.run(
        [sys.executable, script, str(tmp_path / "none")], capture_output=True, text=True
    )
    assert missing.returncode == 2 and "no such file" in missing.stderr
    (tmp_path / "empty").write_text("")
    empty = subprocess.run(
        [sys.executable, script, str(tmp_path / "empty")], capture_output=True, text=True
    )
    assert empty.returncode == 2 and "no test phases" in empty.stderr


def _run(path: Path, records: list[tuple[str, str, str, str | None]]) -> Path:
    path.mkdir()
    (path / "results.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "target": target,
                    "case_id": case,
                    "outcome": outcome,
                    "blocked_by": by,
                    "peer_implementation": None,
                    "message": "differs every run",
                }
            )
            + "\n"
            for target, case, outcome, by in records
        )
    )
    return path


@pytest.mark.parametrize(
    ("after", "code", "shown"),
    [
        ([("t", "a", "passed", None), ("t", "b", "blocked", "a")], 0, "0 difference(s)"),
        (
            [("t", "a", "passed", None), ("t", "b", "failed", None)],
            1,
            "DIFFERENT t b: before blocked (by a), after failed",
        ),
        ([("t", "a", "passed", None)], 1, "DIFFERENT t b: before blocked (by a), after missing"),
    ],
)
def test_verdict_comparison(tmp_path, after, code, shown):
    before = _run(tmp_path / "before", [("t", "a", "passed", None), ("t", "b", "blocked", "a")])
    later = _run(tmp_path / "after", after)
    done = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "scripts" / "compare_verdicts.py"),
            str(before),
            str(later),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == code, done.stdout + done.stderr
    assert shown in done.stdout


def test_verdict_comparison_of_a_missing_run_dir_is_a_usage_error(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "scripts" / "compare_verdicts.py"),
            str(tmp_path / "x"),
            str(tmp_path / "y"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "no such file" in done.stderr

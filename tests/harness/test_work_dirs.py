"""The targets' work dirs (conformance/core/work_dirs.py make_work_dir) hold
their credentials (a BTP auth token, keys) and node state; every way a run
ends removes them: Ctrl-C, SIGTERM, --jobs, --case-jobs, the --run-timeout
backstop. A run killed by SIGKILL cannot clean up; the next run removes its
dirs, and never the dir of a run that is still alive (docs/targets.md,
"Work dirs").

Each run here gets its own TMPDIR, so that the work dirs of other runs on
the machine are neither counted nor touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conformance.core.targets import (
    WORK_DIR_OWNER_LOCK,
    make_work_dir,
    remove_abandoned_work_dirs,
    remove_work_dir,
)

from .cli_runner import CONFORMANCE, REPO_ROOT, STUCK_TARGET


def _work_dirs(tmpdir: Path) -> list[str]:
    return sorted(p.name for p in tmpdir.glob("conformance-*"))


def _start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], Path, Path]:
    """`conformance certify ARGS` in its own process group (as a terminal or a
    CI runner starts it) with its own TMPDIR."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    run_dir = tmp_path / "run"
    process = subprocess.Popen(
        CONFORMANCE + ["certify", "--run-dir", str(run_dir), *args],
        cwd=REPO_ROOT,
        env=dict(os.environ, TMPDIR=str(tmpdir)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    return process, run_dir, tmpdir


def _wait_for_results(
    process: subprocess.Popen[str], run_dir: Path, tmpdir: Path, count: int, targets: int = 1
) -> None:
    """Until ``count`` cases of each of ``targets`` sessions have a result,
    so that the sessions are mid-run with their work dirs made."""
    results = run_dir / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        lines = results.read_text().splitlines() if results.is_file() else []
        if len(lines) >= count * targets and len(_work_dirs(tmpdir)) >= targets:
            return
        if process.poll() is not None:
            pytest.fail(
                f"certify ended before it could be stopped:\n{process.communicate()[0][-3000:]}"
            )
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    pytest.fail(f"no {count} results per session within 60 s")


def _wait_until_every_process_ended(process: subprocess.Popen[str]) -> None:
    """The CLI may end before what it started (--case-jobs workers clean up
    after their controller ended): judge the work dirs once the whole
    process group of the run is gone."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    pytest.fail("processes of the stopped run still there 20 s after it was stopped")


def _stop(process: subprocess.Popen[str], how: str) -> str:
    if how == "sigterm":
        os.kill(process.pid, signal.SIGTERM)
    elif how == "ctrl-c":
        # A terminal sends SIGINT to the whole foreground group: the CLI and
        # its sessions; the CLI then sends SIGTERM to sessions still running.
        os.killpg(process.pid, signal.SIGINT)
    else:
        os.kill(process.pid, signal.SIGINT)
    try:
        output, _ = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    _wait_until_every_process_ended(process)
    return output


@pytest.mark.parametrize("how", ["sigterm", "ctrl-c", "sigint-to-the-cli"])
def test_a_stopped_run_under_jobs_removes_every_work_dir(tmp_path, how):
    process, run_dir, tmpdir = _start(
        tmp_path, "--jobs", "2", "--target", "reference-btp", "--target", "reference-ripplehost"
    )
    _wait_for_results(process, run_dir, tmpdir, 2, targets=2)
    made = _work_dirs(tmpdir)
    assert any(name.startswith("conformance-reference-btp.") for name in made), made
    output = _stop(process, how)
    assert process.returncode in (130, 143), output
    assert _work_dirs(tmpdir) == [], f"left behind after {how}: {_work_dirs(tmpdir)} (made: {made})"


def test_a_stopped_run_under_case_jobs_removes_the_workers_work_dirs(tmp_path):
    process, run_dir, tmpdir = _start(tmp_path, "--case-jobs", "2", "--target", "reference-btp")
    _wait_for_results(process, run_dir, tmpdir, 2)
    output = _stop(process, "sigterm")
    assert process.returncode == 143, output
    assert _work_dirs(tmpdir) == []


def test_a_session_stopped_by_the_run_deadline_backstop_removes_its_work_dir(tmp_path):
    targets = tmp_path / "targets.toml"
    targets.write_text(STUCK_TARGET)
    process, run_dir, tmpdir = _start(
        tmp_path,
        "--targets-file",
        str(targets),
        "--target",
        "stuck",
        "--deadline",
        "1",
        "--run-timeout",
        "1",
    )
    output, _ = process.communicate(timeout=60)
    _wait_until_every_process_ended(process)
    assert "the session outlived it and was stopped" in output, output
    assert _work_dirs(tmpdir) == []


def test_the_work_dir_of_a_killed_run_is_removed_by_the_next_run(tmp_path, monkeypatch):
    process, run_dir, tmpdir = _start(tmp_path, "--target", "reference-btp")
    _wait_for_results(process, run_dir, tmpdir, 2)
    os.killpg(process.pid, signal.SIGKILL)  # the CLI, its session and the node: no handler runs
    process.communicate(timeout=30)
    # The session may outlive the CLI by a moment (both got SIGKILL): until
    # it is gone, its owner lock is held and the dir is rightly left alone.
    _wait_until_every_process_ended(process)
    [killed] = _work_dirs(tmpdir)
    assert (tmpdir / killed / WORK_DIR_OWNER_LOCK).is_file()
    # The next run, as it makes its own work dir:
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
    fresh = make_work_dir("reference-btp")
    try:
        assert _work_dirs(tmpdir) == [fresh.name]
    finally:
        remove_work_dir(fresh)
    assert _work_dirs(tmpdir) == []


def test_the_work_dir_of_a_live_run_is_never_removed(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    # A live run: a process that made its work dir and holds on to it.
    live = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from conformance.core.targets import make_work_dir; "
            "print(make_work_dir('live'), flush=True); sys.stdin.read()",
        ],
        cwd=REPO_ROOT,
        env=dict(os.environ, TMPDIR=str(tmpdir)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        live_dir = Path(live.stdout.readline().strip())
        assert live_dir.parent == tmpdir and live_dir.is_dir()
        # Not ours to judge: no owner lock (another tool's dir, or one made
        # before work dirs had it), and a symlink to an abandoned work dir.
        foreign = tmpdir / "conformance-foreign.x"
        foreign.mkdir()
        (foreign / "keep").write_text("")
        abandoned = tmp_path / "elsewhere"
        abandoned.mkdir()
        (abandoned / WORK_DIR_OWNER_LOCK).write_text("")
        (tmpdir / "conformance-link.x").symlink_to(abandoned)
        assert remove_abandoned_work_dirs(tmpdir) == []
        assert live_dir.is_dir() and (foreign / "keep").is_file() and abandoned.is_dir()
    finally:
        live.communicate("", timeout=10)  # stdin closed: it ends normally
    assert live.returncode == 0
    assert not live_dir.exists(), "a run that ends normally removes its work dir"

"""A new machine runs the README's test command: the full tier's setup
(`scripts/test.sh --tier full --setup-only`) succeeds in a new container of
the project's own base image, on a fresh clone, with only the prerequisites
the README names installed first; a second run only checks; then the
harness certifies a reference node there (scripts/fresh-machine-check.sh).

The machine the tests run on has everything installed already, so a missing
install step would pass every other test and fail a new user: this one
fails instead. It reaches the package registries (Debian's, PyPI, npm) from
the host's network, as a new user's setup does.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from .docker_support import REPO_ROOT, container_tier, docker_problem, say

pytestmark, _require_docker = container_tier(docker_problem())

SCRIPT = REPO_ROOT / "scripts" / "fresh-machine-check.sh"


@pytest.mark.timeout(1500)
def test_the_full_tier_sets_itself_up_on_a_fresh_machine(tmp_path, capsys):
    log = tmp_path / "container.log"
    run = subprocess.run(
        [str(SCRIPT), "--tier", "full", "--log", str(log)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=1400,
        check=False,
    )
    assert run.returncode == 0, (
        f"the full tier's setup failed on a fresh machine (exit {run.returncode}):\n"
        f"{run.stderr[-4000:]}"
    )
    steps = re.findall(r"step (.+) done in (\d+) s", run.stderr)
    names = [name for name, _ in steps]
    assert names[1:] == [
        "setup of the full tier",
        "second setup (checks only)",
        "certify of the Ripple host reference node",
    ], run.stderr
    # Every install step ran in the container: each script says so on its
    # first run, and on the second only that it is already there.
    text = log.read_text(encoding="utf-8", errors="replace")
    for installed in (
        "install-rabbitmq.sh: installed rabbitmq-server",
        "install-activemq.sh: installed activemq",
        "install-ocaml.sh: installed",
        "install-swpt-stomp.sh: installed swpt_stomp",
        "install-report-deps: ready",
    ):
        assert installed in text, f"{installed!r} not in the container's log:\n{text[-3000:]}"
    for checked in (
        "install-rabbitmq.sh: rabbitmq-server",
        "already installed",
    ):
        assert checked in text.split("step setup of the full tier done")[1], text[-3000:]
    say(capsys, "fresh machine, full tier: " + ", ".join(f"{n} {s} s" for n, s in steps))


def test_a_missing_archive_is_named_with_the_way_to_give_it(tmp_path):
    """Without swpt_stomp's snapshot the check stops before starting a
    container, naming SWPT_STOMP_ARCHIVE."""
    run = subprocess.run(
        [str(SCRIPT), "--tier", "full"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "SWPT_STOMP_ARCHIVE": str(tmp_path / "absent.tar.gz"),
            "TMPDIR": str(tmp_path),
        },
    )
    assert run.returncode == 2, run.stderr
    assert "SWPT_STOMP_ARCHIVE=PATH" in run.stderr and "absent.tar.gz" in run.stderr

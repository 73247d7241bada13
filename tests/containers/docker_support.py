"""What the container-tier test modules share: whether a Docker engine
answers, the skip-or-fail marking that follows from it, the docker CLI,
the project's image build, names for what a test starts, and the lines a
test prints past pytest's capture.

A module that needs the engine starts with

    pytestmark, _require_docker = container_tier(docker_problem(), *other_marks)

and is then skipped with the reason where no engine answers, or, with
CONFORMANCE_REQUIRE_DOCKER=1 (a CI that sets the engine up), failed.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "scripts" / "docker-build-images.sh"
SETUP_SCRIPT = REPO_ROOT / "scripts" / "docker-setup.sh"


@functools.cache
def docker_problem() -> str | None:
    """Why containers cannot run here, or None when an engine answers
    (asked once per test session: every module wants the same answer)."""
    docker = shutil.which("docker")
    if docker is None:
        return f"no docker client on PATH (run {SETUP_SCRIPT})"
    try:
        probe = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except subprocess.TimeoutExpired:
        return "`docker info` did not answer within 20 s"
    if probe.returncode != 0:
        first = (probe.stderr.strip().splitlines() or ["no output"])[0]
        return f"no Docker engine answers `docker info` ({first}); run {SETUP_SCRIPT}"
    return None


def container_tier(
    problem: str | None, *marks: pytest.MarkDecorator
) -> tuple[list[pytest.MarkDecorator], Callable[..., Any]]:
    """A container-tier module's ``pytestmark`` (the ``containers`` mark,
    then ``marks``) and an autouse fixture, to be bound in the module under
    any name. Where ``problem`` says containers cannot run, the tests are
    skipped with it as the reason, unless CONFORMANCE_REQUIRE_DOCKER=1
    asked for the container tier: then the fixture fails each test."""
    required = problem is not None and os.environ.get("CONFORMANCE_REQUIRE_DOCKER") == "1"

    @pytest.fixture(autouse=True)
    def require_docker() -> None:
        if required:
            # Asked for the container tier: an absent engine is a failure, not a skip.
            pytest.fail(f"CONFORMANCE_REQUIRE_DOCKER=1 but {problem}")

    if required:
        return [pytest.mark.containers, *marks], require_docker
    return [
        pytest.mark.containers,
        *marks,
        pytest.mark.skipif(problem is not None, reason=problem or ""),
    ], require_docker


def docker(*args: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=check
    )


def labelled(label: str) -> list[str]:
    """Names of the containers (running or not) with ``label`` (KEY=VALUE)."""
    out = docker("ps", "-a", "--filter", f"label={label}", "--format", "{{.Names}}", check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def remove_labelled(label: str) -> None:
    for name in labelled(label):
        docker("rm", "-f", name, check=False)


def build_images(*images: str) -> float:
    """Builds (or finds unchanged) the named images and the base image under
    them through the project's script; returns the seconds it took."""
    started = time.monotonic()
    build = subprocess.run(
        [str(BUILD_SCRIPT), *images], cwd=REPO_ROOT, capture_output=True, text=True, timeout=540
    )
    seconds = time.monotonic() - started
    assert build.returncode == 0, (
        f"{BUILD_SCRIPT} {' '.join(images)} failed:\n{build.stderr[-3000:]}"
    )
    return seconds


def unique_name() -> str:
    """A name for a container or compose project of one test: no two runs
    (or machines sharing an engine) collide, and `docker ps` shows whose it is."""
    return f"conformance-test-{uuid.uuid4().hex[:12]}"


def say(capsys: pytest.CaptureFixture[str], text: str) -> None:
    """A line of figures in the test output, past pytest's capture."""
    with capsys.disabled():
        print(f"\n[containers] {text}", flush=True)

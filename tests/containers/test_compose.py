"""docker-compose.yml end to end: `docker-compose up --abort-on-container-exit
--exit-code-from harness` brings up the init service, every reference node
and the harness service, which certifies each node over the compose network
and writes its run into the reports bind mount; exit 0 because all are
conformant. Then `down -v` leaves no container, volume or network of the
project. The run's secrets (made by the init service into the secrets
volume) appear in no log line and no report file, and the reports belong to
the user given by CONFORMANCE_UID/GID.

Runs only where a Docker engine and a Compose client answer (scripts/
docker-setup.sh installs both); skipped with the reason otherwise, failed
with CONFORMANCE_REQUIRE_DOCKER=1, as tests/containers/test_images.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from .docker_support import (
    REPO_ROOT,
    SETUP_SCRIPT,
    build_images,
    container_tier,
    docker,
    docker_problem,
    say,
    unique_name,
)

COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
HARNESS_IMAGE = "conformance/harness:dev"
EXPECTED_TARGETS = {
    "compose-reference-ssb": "ssb",
    "compose-reference-btp": "btp",
    "compose-reference-stomp": "stomp",
    "compose-reference-ripp": "ripp",
    "compose-reference-ripplehost": "ripplehost",
}
# Server-role cases that cannot apply to a node in a compose service: the
# harness cannot kill and restart another service (no `restart` capability).
NOT_APPLICABLE_IN_COMPOSE = {"stomp.receipt.server.stored-after-restart"}
# The stack takes about 60 s here (docs/containers.md); the harness's own
# --run-timeout (300 s per target) ends a hung run before this does.
UP_TIMEOUT = 600
# A user that is not the one running the test when that is root, so the
# test sees the reports handed to CONFORMANCE_UID/GID and not merely left
# as root's.
NOBODY = 65534


def _compose_command() -> list[str] | None:
    """Compose v1 (Debian's docker-compose 1.29) or the v2 plugin."""
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker"):
        probe = subprocess.run(
            ["docker", "compose", "version"], capture_output=True, text=True, timeout=20
        )
        if probe.returncode == 0:
            return ["docker", "compose"]
    return None


def _problem() -> str | None:
    """Why the stack cannot run here, or None."""
    problem = docker_problem()
    if problem is None and _compose_command() is None:
        return f"neither docker-compose nor `docker compose` is available (run {SETUP_SCRIPT})"
    return problem


pytestmark, _require_docker = container_tier(_problem())


def _leftovers(project: str) -> dict[str, list[str]]:
    """Containers, volumes and networks still labelled with the project."""
    label = f"label=com.docker.compose.project={project}"
    found = {
        kind: docker(*argv, "--filter", label, "-q").stdout.split()
        for kind, argv in (
            ("containers", ("ps", "-a")),
            ("volumes", ("volume", "ls")),
            ("networks", ("network", "ls")),
        )
    }
    return {kind: ids for kind, ids in found.items() if ids}


def _run_secrets(project: str) -> list[str]:
    """The secrets the init service made, read from the project's secrets
    volume (only to look for them in logs and reports; never printed)."""
    read = docker(
        "run",
        "--rm",
        "--network",
        "none",
        "-v",
        f"{project}_secrets:/s:ro",
        "--entrypoint",
        "python3",
        HARNESS_IMAGE,
        "-c",
        "import json, pathlib; s = pathlib.Path('/s'); print(json.dumps({"
        "'btp': (s / 'btp-token').read_text(), 'passcode': (s / 'stomp/passcode').read_text(),"
        "'ssb': json.loads(''.join(l for l in (s / 'ssb/secret').read_text().splitlines()"
        " if not l.startswith('#')))['private'],"
        "'keys': [(s / 'stomp' / n).read_text() for n in ('server.key', 'client.key')]}))",
        timeout=120,
    )
    found = json.loads(read.stdout)
    values = [found["btp"].strip(), found["passcode"].strip(), found["ssb"].split(".")[0]]
    for pem in found["keys"]:
        # Each base64 line of the PEM body: a key is leaked if any of it is.
        values += [line for line in pem.splitlines() if line and not line.startswith("-----")]
    assert all(len(value) >= 16 for value in values), (
        "a secret read back from the volume is suspiciously short"
    )
    return values


@pytest.mark.slow
# Building the images happens inside (seconds when unchanged; the base image
# by debootstrap on a fresh machine, about 90 s).
@pytest.mark.timeout(1200)
def test_compose_stack_certifies_every_reference_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], record_property
) -> None:
    build_s = build_images("harness", "reference")

    compose = _compose_command()
    assert compose is not None
    project = unique_name()
    reports = tmp_path / "reports"
    uid, gid = (os.getuid(), os.getgid()) if os.getuid() != 0 else (NOBODY, NOBODY)
    env = dict(
        os.environ,
        CONFORMANCE_COMPOSE_REPORTS=str(reports),
        CONFORMANCE_UID=str(uid),
        CONFORMANCE_GID=str(gid),
    )
    base = [*compose, "-p", project, "-f", str(COMPOSE_FILE)]
    log_path = tmp_path / "compose-up.log"
    secrets: list[str] = []
    try:
        started = time.monotonic()
        with log_path.open("w") as log:
            up = subprocess.run(
                [*base, "up", "--abort-on-container-exit", "--exit-code-from", "harness"],
                cwd=REPO_ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=UP_TIMEOUT,
            )
        up_s = time.monotonic() - started
        output = log_path.read_text(errors="replace")
        # Guarded: `docker run -v NAME:...` would create a missing volume,
        # unlabelled, which `down -v` would then leave behind.
        if docker("volume", "inspect", f"{project}_secrets", check=False).returncode == 0:
            secrets = _run_secrets(project)
    finally:
        started = time.monotonic()
        down = subprocess.run(
            [*base, "down", "-v", "--remove-orphans", "-t", "5"],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        down_s = time.monotonic() - started
    assert down.returncode == 0, down.stderr[-2000:]
    assert not _leftovers(project), f"`down -v` left {_leftovers(project)}"

    assert up.returncode == 0, f"compose up exited {up.returncode}:\n{output[-5000:]}"
    assert secrets, "the secrets volume was gone before the test could read it"
    for target, protocol in EXPECTED_TARGETS.items():
        assert re.search(
            rf"{target} \[reference-{protocol} 0\.1\.0, {protocol}\]: CONFORMANT", output
        ), output[-3000:]

    (run_dir,) = (reports / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["conformant"] is True, summary
    assert {t["target"]: t["protocol"] for t in summary["targets"]} == EXPECTED_TARGETS
    assert all(
        t["conformant"] and not t["failed_must"] and not t["blocked_must"]
        for t in summary["targets"]
    ), summary["targets"]

    records = [
        json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line
    ]
    for target in EXPECTED_TARGETS:
        mine = [r for r in records if r["target"] == target]
        server = [r for r in mine if ".server." in r["case_id"]]
        # Every server-role case ran against the node in its service and
        # passed, but for the restart case compose cannot serve.
        assert len(server) >= 10, f"{target}: only {len(server)} server-role cases"
        wrong = [
            (r["case_id"], r["outcome"], r["message"][:200])
            for r in server
            if r["outcome"]
            != ("not_applicable" if r["case_id"] in NOT_APPLICABLE_IN_COMPOSE else "passed")
        ]
        assert not wrong, f"{target}: {wrong}"
        # The services play the server role only.
        assert all(
            r["outcome"] == "not_applicable" for r in mine if ".server." not in r["case_id"]
        ), target

    # The reports belong to CONFORMANCE_UID/GID, not to root.
    owners = {(p.stat().st_uid, p.stat().st_gid) for p in [reports, *reports.rglob("*")]}
    assert owners == {(uid, gid)}, f"report files owned by {owners}, expected {(uid, gid)}"

    # No secret of the run in the services' output or in any report file.
    texts = {"compose up output": output}
    texts.update(
        {
            str(p.relative_to(reports)): p.read_text(errors="replace")
            for p in reports.rglob("*")
            if p.is_file()
        }
    )
    leaks = sorted(
        name for name, text in texts.items() if any(secret in text for secret in secrets)
    )
    assert not leaks, f"a secret of the run appears in: {leaks[:10]}"

    figures = {
        "images_build_s": build_s,
        "compose_up_s": up_s,
        "compose_down_s": down_s,
        "harness_wall_s": summary["duration_s"],
    }
    for key, value in figures.items():
        record_property(key, round(value, 2))
    say(
        capsys,
        "compose: "
        + ", ".join(f"{k} {v:.1f}" for k, v in figures.items())
        + f"; {sum(r['outcome'] == 'passed' for r in records)} cases passed, {len(texts)} files checked "
        f"for {len(secrets)} secrets",
    )

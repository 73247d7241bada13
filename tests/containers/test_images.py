"""The container tier's foundation, end to end: the project's images build
(or are found) from the local base image; each reference node (BTP, SSB,
RIPP, the Ripple host protocol) runs in a container on a loopback-published
port, and `conformance certify` certifies it as a plain targets-file target
at that address, conformant; with the container gone the same certify stops
at the preflight, so the verdict came from the container. ssb-server in its
image gives the outcomes it gives as a host process, and the harness image
certifies on its own, writing its run to a mounted reports directory.

Runs only where a Docker engine answers (scripts/docker-setup.sh installs
and starts one); otherwise skipped with the reason. With
CONFORMANCE_REQUIRE_DOCKER=1 (for a CI that sets up the engine) a missing
engine fails the tests instead. Timings go to the test output and to the
junit properties (docs/containers.md keeps the figures).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
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

REFERENCE_IMAGE = "conformance/reference:dev"
SSB_SERVER_IMAGE = "conformance/ssb-server:dev"
NODE_MODULES = REPO_ROOT / "interop" / "node" / "node_modules"
TEST_LABEL = "org.conformance.test"
# How long a started node may take to print its readiness line.
READY_TIMEOUT = 30.0
# Bounds for the harness runs (a certify of either reference node takes
# about 10 s here; the CLI's own --run-timeout ends a hung run first).
CERTIFY_RUN_TIMEOUT = 120
CERTIFY_PROCESS_TIMEOUT = 200


pytestmark, _require_docker = container_tier(docker_problem())


@pytest.fixture(scope="module")
def reference_image() -> dict[str, float]:
    """Builds (or finds unchanged) the base and reference images through the
    project's script; returns the build's timings."""
    seconds = build_images("reference")
    docker("image", "inspect", REFERENCE_IMAGE)
    # A second setup run with everything present: the "quick when the image
    # exists" promise, measured.
    started = time.monotonic()
    setup = subprocess.run(
        [str(SETUP_SCRIPT)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert setup.returncode == 0, setup.stderr
    return {"build_s": seconds, "setup_again_s": time.monotonic() - started}


class Container:
    """One detached container of the test, removed however the test ends."""

    def __init__(
        self,
        image: str,
        container_port: int,
        args: list[str],
        volumes: dict[Path, str],
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = unique_name()
        argv = [
            "run",
            "-d",
            "--rm",
            "--name",
            self.name,
            "--label",
            f"{TEST_LABEL}=test_images",
            # Published on loopback only, on a port the engine picks.
            "-p",
            f"127.0.0.1::{container_port}",
        ]
        for host_path, inside in volumes.items():
            argv += ["-v", f"{host_path}:{inside}"]
        for key, value in (env or {}).items():
            argv += ["-e", f"{key}={value}"]
        docker(*argv, image, *args)
        self.container_port = container_port

    def logs(self) -> str:
        out = docker("logs", self.name, check=False, timeout=20)
        return out.stdout + out.stderr

    def wait_ready(self, pattern: str) -> re.Match[str]:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            match = re.search(pattern, self.logs())
            if match:
                return match
            running = docker(
                "inspect", "-f", "{{.State.Running}}", self.name, check=False, timeout=20
            )
            if running.stdout.strip() != "true":
                pytest.fail(
                    f"container {self.name} stopped before printing {pattern!r}:\n{self.logs()}"
                )
            time.sleep(0.2)
        pytest.fail(
            f"container {self.name} printed no {pattern!r} within {READY_TIMEOUT:g} s:\n{self.logs()}"
        )

    def host_port(self) -> int:
        out = docker("port", self.name, f"{self.container_port}/tcp").stdout.strip().splitlines()
        # e.g. "127.0.0.1:32768"; only the loopback binding was asked for.
        assert out and out[0].startswith("127.0.0.1:"), f"unexpected published address {out}"
        return int(out[0].rsplit(":", 1)[1])

    def remove(self) -> None:
        docker("rm", "-f", self.name, check=False, timeout=60)


def _certify(
    targets_file: Path | None, target: str, reports: Path
) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable,
        "-m",
        "conformance.cli",
        "certify",
        "--target",
        target,
        "--reports-dir",
        str(reports),
        "--run-timeout",
        str(CERTIFY_RUN_TIMEOUT),
    ]
    if targets_file is not None:
        argv += ["--targets-file", str(targets_file)]
    return subprocess.run(
        argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=CERTIFY_PROCESS_TIMEOUT
    )


def _outcomes(reports: Path) -> dict[str, str]:
    (run_dir,) = (reports / "runs").iterdir()
    return {
        record["case_id"]: record["outcome"]
        for record in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())
    }


def _start_btp(tmp_path: Path) -> tuple[Container, str]:
    token = tmp_path / "secrets" / "btp-token"
    token.parent.mkdir()
    token.write_text(secrets.token_hex(16))
    token.chmod(0o600)
    # The token reaches the container as a mounted file, not through the image.
    container = Container(
        REFERENCE_IMAGE,
        7768,
        [
            "btp",
            "serve",
            "--host",
            "0.0.0.0",
            "--port",
            "7768",
            "--auth-token-file",
            "/run/secrets/btp-token",
            "--auth-timeout",
            "2",
            "--initial-balance",
            "0",
            "--max-balance",
            "1000000",
        ],
        {token: "/run/secrets/btp-token:ro"},
    )
    try:
        container.wait_ready(r"BTP_READY url=\S+ port=7768")
        port = container.host_port()
    except BaseException:
        container.remove()
        raise
    targets = f"""
[targets.container-btp]
implementation = "reference-btp"
version = "0.1.0"
protocol = "btp"
roles = ["server"]
capabilities = ["balance"]
url = "ws://127.0.0.1:{port}/"

[targets.container-btp.params]
auth_timeout = 2

[targets.container-btp.credentials]
auth_token_file = "{token}"
"""
    return container, targets


def _start_ssb(tmp_path: Path) -> tuple[Container, str]:
    keys = tmp_path / "keys"
    keys.mkdir()
    # The node writes its new identity into the mounted directory; the
    # harness reads the secret from there for the `publish` capability.
    container = Container(
        REFERENCE_IMAGE,
        8008,
        [
            "ssb",
            "serve",
            "--key-file",
            "/keys/server-secret",
            "--create-key",
            "--host",
            "0.0.0.0",
            "--port",
            "8008",
            "--seed-messages",
            "5",
        ],
        {keys: "/keys"},
    )
    try:
        public_key = container.wait_ready(r"SSB_READY .*id=(@\S+\.ed25519)").group(1)
        port = container.host_port()
    except BaseException:
        container.remove()
        raise
    targets = f"""
[targets.container-ssb]
implementation = "reference-ssb"
version = "0.1.0"
protocol = "ssb"
roles = ["server"]
capabilities = ["publish"]
host = "127.0.0.1"
port = {port}

[targets.container-ssb.params]
public_key = "{public_key}"

[targets.container-ssb.credentials]
secret_key_file = "{keys / "server-secret"}"
"""
    return container, targets


def _start_ripplehost(tmp_path: Path) -> tuple[Container, str]:
    container = Container(
        REFERENCE_IMAGE,
        7000,
        [
            "ripplehost",
            "serve",
            "--host",
            "0.0.0.0",
            "--port",
            "7000",
            "--hostname",
            "reference.ripple.test",
            "--host-id-timeout",
            "5",
        ],
        {},
    )
    try:
        # The hostname it announces is no param: no Ripple host case reads one,
        # and an unknown param is refused as a typo (conformance/core/target_spec.py).
        container.wait_ready(r"RIPPLE_READY .*hostname=(\S+)")
        port = container.host_port()
    except BaseException:
        container.remove()
        raise
    targets = f"""
[targets.container-ripplehost]
implementation = "reference-ripplehost"
version = "0.1.0"
protocol = "ripplehost"
roles = ["server"]
capabilities = ["hold", "ping-me"]
host = "127.0.0.1"
port = {port}
"""
    return container, targets


def _start_ripp(tmp_path: Path) -> tuple[Container, str]:
    # The schema registry the suite negotiates with ships in the package
    # (package data), so inside the image it is under site-packages.
    registry = "/opt/conformance/lib/python3.11/site-packages/conformance/suites/ripp/registry.json"
    container = Container(
        REFERENCE_IMAGE,
        7001,
        [
            "ripp",
            "consume",
            "--schemas",
            registry,
            "--host",
            "0.0.0.0",
            "--port",
            "7001",
            "--heartbeat-interval",
            "0.5",
        ],
        {},
    )
    try:
        container.wait_ready(r"RIPP_READY port=7001")
        port = container.host_port()
    except BaseException:
        container.remove()
        raise
    targets = f"""
[targets.container-ripp]
implementation = "reference-ripp"
version = "0.1.0"
protocol = "ripp"
roles = ["server"]
host = "127.0.0.1"
port = {port}
"""
    return container, targets


STARTERS = {
    "btp": _start_btp,
    "ssb": _start_ssb,
    "ripplehost": _start_ripplehost,
    "ripp": _start_ripp,
}


@pytest.mark.slow
# The first run on a machine builds the base image by debootstrap (about
# 90 s here) and the images (about 30 s) inside the module fixture, which
# counts against this test's time; the project-wide 300 s is for tests that
# build nothing.
@pytest.mark.timeout(900)
@pytest.mark.parametrize("protocol", sorted(STARTERS))
def test_reference_node_in_container_is_certified(
    protocol: str,
    reference_image: dict[str, float],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    record_property,
) -> None:
    started = time.monotonic()
    container, targets_text = STARTERS[protocol](tmp_path)
    ready_s = time.monotonic() - started
    target = f"container-{protocol}"
    targets_file = tmp_path / "targets.toml"
    targets_file.write_text(targets_text)
    reports = tmp_path / "reports"
    try:
        started = time.monotonic()
        run = _certify(targets_file, target, reports)
        certify_s = time.monotonic() - started
        output = run.stdout + run.stderr
        assert run.returncode == 0, (
            f"certify of the containerized node exited {run.returncode}:\n{output[-4000:]}"
            f"\n--- container logs ---\n{container.logs()[-2000:]}"
        )
        assert f"{target} [reference-{protocol} 0.1.0, {protocol}]: CONFORMANT" in output, output[
            -3000:
        ]
        (run_dir,) = (reports / "runs").iterdir()
        records = [
            json.loads(line)
            for line in (run_dir / "results.jsonl").read_text().splitlines()
            if line
        ]
        passed = [r for r in records if r["outcome"] == "passed"]
        # The target plays the server role only, with every capability the
        # reference node has: each server-role case passed against the
        # container, and the only cases that did not are the client-role
        # ones, not applicable.
        server_cases = [r for r in records if ".server." in r["case_id"]]
        assert len(server_cases) >= 10, f"only {len(server_cases)} server-role cases ran"
        assert all(r["outcome"] == "passed" for r in server_cases), [
            (r["case_id"], r["outcome"], r["message"][:200])
            for r in server_cases
            if r["outcome"] != "passed"
        ]
        assert all(
            r["outcome"] == "not_applicable" for r in records if ".server." not in r["case_id"]
        ), [(r["case_id"], r["outcome"]) for r in records if ".server." not in r["case_id"]]
        assert {r["target"] for r in records} == {target}
    finally:
        container.remove()

    # The negative control: the same targets file with the container gone
    # stops at the preflight (exit 2, target unreachable), so the conformant
    # verdict above came from the node in the container.
    started = time.monotonic()
    gone = _certify(targets_file, target, tmp_path / "reports-gone")
    gone_s = time.monotonic() - started
    assert gone.returncode == 2, (
        f"certify without the container exited {gone.returncode}:\n{gone.stdout[-2000:]}"
    )

    figures = {
        "images_build_s": reference_image["build_s"],
        "setup_again_s": reference_image["setup_again_s"],
        "container_ready_s": ready_s,
        "certify_s": certify_s,
        "certify_gone_s": gone_s,
    }
    for key, value in figures.items():
        record_property(key, round(value, 2))
    say(
        capsys,
        f"{protocol}: "
        + ", ".join(f"{k} {v:.1f}" for k, v in figures.items())
        + f"; {len(passed)} cases passed",
    )


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(
    not NODE_MODULES.is_dir() and not os.environ.get("CI"),
    reason=f"{NODE_MODULES} is missing: run scripts/install-node-deps.sh (the image copies it)",
)
def test_ssb_server_image_gives_the_verdicts_of_the_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], record_property
) -> None:
    """ssb-server 16 in its image, published on loopback, gets case for case
    the outcomes the same ssb-server gets as a process on the host (built-in
    target `ssb-server`): the image changes nothing about the node. Not a
    conformant node (docs/findings/), so the comparison is the check."""
    build_s = build_images("ssb-server")
    out = tmp_path / "out"
    out.mkdir()
    started = time.monotonic()
    # The temporary home (secret included) is made under the mounted /out, so
    # the harness reads the node's secret for `publish` from the host side.
    # No arguments: the image's CMD (listen on 0.0.0.0:8008, 5 seed messages).
    container = Container(SSB_SERVER_IMAGE, 8008, [], {out: "/out"}, env={"TMPDIR": "/out"})
    try:
        container.wait_ready(r"SSB_READY=1")
        ready_s = time.monotonic() - started
        facts = dict(
            line.split("=", 1)
            for line in container.logs().splitlines()
            if re.fullmatch(r"SSB_[A-Z_]+=\S*", line)
        )
        secret = out / Path(facts["SSB_SECRET"]).relative_to("/out")
        targets_file = tmp_path / "targets.toml"
        targets_file.write_text(f"""
[targets.container-ssb-server]
implementation = "ssb-server"
version = "16.0.1"
protocol = "ssb"
roles = ["server"]
capabilities = ["publish"]
host = "127.0.0.1"
port = {container.host_port()}

[targets.container-ssb-server.params]
public_key = "{facts["SSB_ID"]}"

[targets.container-ssb-server.credentials]
secret_key_file = "{secret}"
""")
        started = time.monotonic()
        in_container = _certify(
            targets_file, "container-ssb-server", tmp_path / "reports-container"
        )
        certify_s = time.monotonic() - started
    finally:
        container.remove()
    as_process = _certify(None, "ssb-server", tmp_path / "reports-process")
    # 0 (conformant) or 1 (not): both reached verdicts; 2 would be a preflight stop.
    assert in_container.returncode in (0, 1), (
        in_container.stdout[-3000:] + in_container.stderr[-2000:]
    )
    assert as_process.returncode in (0, 1), as_process.stdout[-3000:] + as_process.stderr[-2000:]
    container_outcomes = _outcomes(tmp_path / "reports-container")
    process_outcomes = _outcomes(tmp_path / "reports-process")
    differ = {
        case: (container_outcomes.get(case), process_outcomes.get(case))
        for case in container_outcomes.keys() | process_outcomes.keys()
        if container_outcomes.get(case) != process_outcomes.get(case)
    }
    assert not differ, f"case outcomes (container, process) differ: {differ}"
    assert sum(outcome == "passed" for outcome in container_outcomes.values()) >= 20
    for key, value in {
        "image_build_s": build_s,
        "container_ready_s": ready_s,
        "certify_s": certify_s,
    }.items():
        record_property(key, round(value, 2))
    say(
        capsys,
        f"ssb-server image: build {build_s:.1f} s, ready {ready_s:.1f} s, certify {certify_s:.1f} s; "
        f"{len(container_outcomes)} cases, same outcomes as the process",
    )


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_harness_image_certifies_and_writes_reports_to_the_volume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], record_property
) -> None:
    """The harness image on its own: `conformance certify --protocol btp`
    inside it launches the built-in reference BTP node (installed in the
    same image) and writes the run to /work/reports, a mounted directory the
    host reads afterwards."""
    build_s = build_images("harness")
    reports = tmp_path / "reports"
    reports.mkdir()
    name = unique_name()
    started = time.monotonic()
    try:
        run = docker(
            "run",
            "--rm",
            "--name",
            name,
            "--label",
            f"{TEST_LABEL}=test_images",
            "--network",
            "none",
            "-v",
            f"{reports}:/work/reports",
            "conformance/harness:dev",
            "certify",
            "--protocol",
            "btp",
            "--run-timeout",
            str(CERTIFY_RUN_TIMEOUT),
            check=False,
            timeout=CERTIFY_PROCESS_TIMEOUT,
        )
    finally:
        docker("rm", "-f", name, check=False)
    certify_s = time.monotonic() - started
    output = run.stdout + run.stderr
    assert run.returncode == 0, (
        f"certify in the harness image exited {run.returncode}:\n{output[-4000:]}"
    )
    assert "reference-btp [reference-btp 0.1.0, btp]: CONFORMANT" in output, output[-3000:]
    (run_dir,) = (reports / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["conformant"] is True, summary
    outcomes = _outcomes(reports)
    assert outcomes and all(outcome == "passed" for outcome in outcomes.values()), outcomes
    for key, value in {"image_build_s": build_s, "certify_s": certify_s}.items():
        record_property(key, round(value, 2))
    say(
        capsys,
        f"harness image: build {build_s:.1f} s, certify --protocol btp {certify_s:.1f} s "
        f"({len(outcomes)} cases passed, --network none)",
    )

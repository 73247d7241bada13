"""The client role of container targets ([targets.NAME.container.client],
conformance/core/containers.py ContainerClient): one container per launch
on the host's network, pointed at the harness's server on 127.0.0.1.

- the client-role verdicts of container-reference-ripp and
  container-reference-ripplehost are, case for case, those of the launched
  processes reference-ripp and reference-ripplehost;
- a client container that never connects fails its case after the
  suite's connect wait, with a message saying so, and is removed;
- Ctrl-C while a client container runs leaves no container of the run;
- the handle the suites get (output, wait, returncode, stop) on a container
  that prints and exits, and its removal.

Runs only where a Docker engine answers (scripts/docker-setup.sh); skipped
with the reason otherwise, failed instead with CONFORMANCE_REQUIRE_DOCKER=1.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.core.container_spec import ContainerClientSpec
from conformance.core.containers import ROLE_LABEL, ContainerClient
from conformance.core.targets import TargetRuntime, load_targets_file, make_work_dir

from .docker_support import (
    REPO_ROOT,
    build_images,
    container_tier,
    docker,
    docker_problem,
    labelled,
    remove_labelled,
    say,
)

CONTAINER_TARGETS = REPO_ROOT / "conformance" / "targets" / "containers.toml"
RUN_LABEL = "org.conformance.run"
REAP_WITHIN = 10.0

pytestmark, _require_docker = container_tier(docker_problem(), pytest.mark.slow)


@pytest.fixture(scope="module")
def reference_image() -> None:
    build_images("reference")


def _run_id(output: str) -> str:
    match = re.search(r"^conformance \S+: run (\S+),", output, re.M)
    assert match, f"no run id in the output:\n{output[-2000:]}"
    return match.group(1)


def _certify(
    tmp_path: Path, name: str, targets: list[str], *extra: str
) -> tuple[subprocess.CompletedProcess[str], list[dict], float]:
    run_dir = tmp_path / name
    argv = [
        sys.executable,
        "-m",
        "conformance.cli",
        "certify",
        "--run-dir",
        str(run_dir),
        "--run-timeout",
        "120",
        *extra,
    ]
    for target in targets:
        argv += ["--target", target]
    started = time.monotonic()
    run = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - started
    records = [
        json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line
    ]
    return run, records, seconds


@pytest.mark.timeout(400)
def test_client_role_verdicts_match_the_launched_processes(
    reference_image: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], record_property
) -> None:
    """-k client of RIPP and the Ripple host protocol, as containers and as
    processes: the same cases with the same outcomes, every client case
    served by a container of its own, none left after the run."""
    containers, records_c, seconds_c = _certify(
        tmp_path,
        "containers",
        ["container-reference-ripp", "container-reference-ripplehost"],
        "--targets-file",
        str(CONTAINER_TARGETS),
        "-k",
        "client",
    )
    run_id = _run_id(containers.stdout)
    try:
        assert containers.returncode == 0, containers.stdout[-3000:] + containers.stderr[-3000:]
        processes, records_p, seconds_p = _certify(
            tmp_path, "processes", ["reference-ripp", "reference-ripplehost"], "-k", "client"
        )
        assert processes.returncode == 0, processes.stdout[-3000:] + processes.stderr[-3000:]
        outcome_c = {r["case_id"]: r["outcome"] for r in records_c}
        outcome_p = {r["case_id"]: r["outcome"] for r in records_p}
        assert outcome_c == outcome_p
        client_cases = [r for r in records_c if r["role"] == "client"]
        assert len(client_cases) >= 14 and all(r["outcome"] == "passed" for r in client_cases), (
            client_cases
        )
        client_logs = sorted((tmp_path / "containers" / "logs").glob("*.client.*.container.log"))
        assert len(client_logs) >= len(client_cases), client_logs
        assert labelled(f"{RUN_LABEL}={run_id}") == [], "containers of the run left behind"
    finally:
        remove_labelled(f"{RUN_LABEL}={run_id}")
    record_property("client_cases_containers_s", round(seconds_c, 1))
    record_property("client_cases_processes_s", round(seconds_p, 1))
    say(
        capsys,
        f"{len(client_cases)} client-role cases, identical outcomes; certify -k client: containers "
        f"{seconds_c:.1f} s ({len(client_logs)} client containers), processes {seconds_p:.1f} s",
    )


NEVER_CONNECTS = """
[targets.silent-producer]
implementation = "silent"
protocol = "ripp"
roles = ["server", "client"]

[targets.silent-producer.container]
image = "conformance/reference:dev"
command = "ripp consume --schemas /etc/ripp/registry.json --host 0.0.0.0 --port 7001 --heartbeat-interval 0.5"
ports = [7001]
mounts = { "/etc/ripp/registry.json" = "{repo}/conformance/suites/ripp/registry.json" }
ready = "RIPP_READY"

[targets.silent-producer.container.client]
# A client that starts and never connects.
entrypoint = ["sleep"]
command = "600"
"""


@pytest.mark.timeout(300)
def test_a_client_container_that_never_connects_fails_the_case_and_is_removed(
    reference_image: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    targets_file = tmp_path / "silent.toml"
    targets_file.write_text(NEVER_CONNECTS)
    run, records, seconds = _certify(
        tmp_path,
        "silent",
        ["silent-producer"],
        "--targets-file",
        str(targets_file),
        "-k",
        "test_client_sends_valid_envelopes",
    )
    run_id = _run_id(run.stdout)
    try:
        assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
        (record,) = [
            r for r in records if r["case_id"] == "ripp.envelope.client.sends-valid-envelopes"
        ]
        assert record["outcome"] == "failed", record
        assert "target producer did not connect" in record["message"], record["message"]
        assert labelled(f"{RUN_LABEL}={run_id}") == [], "containers of the run left behind"
    finally:
        remove_labelled(f"{RUN_LABEL}={run_id}")
    say(capsys, f"a client container that never connects: case failed, run {seconds:.1f} s")


@pytest.mark.timeout(300)
def test_ctrl_c_while_a_client_container_runs_leaves_no_container(
    reference_image: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    targets_file = tmp_path / "silent.toml"
    targets_file.write_text(NEVER_CONNECTS)
    out = tmp_path / "certify.out"
    argv = [
        sys.executable,
        "-m",
        "conformance.cli",
        "certify",
        "--run-dir",
        str(tmp_path / "run"),
        "--targets-file",
        str(targets_file),
        "--target",
        "silent-producer",
        "-k",
        "test_client_sends_valid_envelopes",
    ]
    with open(out, "wb") as sink:
        process = subprocess.Popen(
            argv, cwd=REPO_ROOT, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    run_id = ""
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = out.read_text(errors="replace")
            if not run_id and re.search(r"^conformance \S+: run (\S+),", text, re.M):
                run_id = _run_id(text)
            if run_id and set(labelled(f"{ROLE_LABEL}=client")) & set(
                labelled(f"{RUN_LABEL}={run_id}")
            ):
                break
            assert process.poll() is None, f"certify ended first:\n{text[-3000:]}"
            time.sleep(0.2)
        else:
            pytest.fail(
                f"no client container within 60 s:\n{out.read_text(errors='replace')[-3000:]}"
            )
        os.killpg(process.pid, signal.SIGINT)
        assert process.wait(60) != 0
        started = time.monotonic()
        while labelled(f"{RUN_LABEL}={run_id}") and time.monotonic() - started < REAP_WITHIN:
            time.sleep(0.2)
        assert labelled(f"{RUN_LABEL}={run_id}") == [], (
            f"containers left {REAP_WITHIN:g} s after Ctrl-C"
        )
        gone_s = time.monotonic() - started
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        if run_id:
            remove_labelled(f"{RUN_LABEL}={run_id}")
    say(
        capsys,
        f"Ctrl-C during a client case: no container left {gone_s:.1f} s after the harness ended",
    )


@pytest.mark.timeout(120)
def test_the_client_handle_waits_reads_and_removes(
    reference_image: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], record_property
) -> None:
    """What the suites use of a launched client, on a container: the exit
    code within a deadline, the output with credentials masked, the log
    saved to logs/, and the container gone after stop()."""
    target = load_targets_file(CONTAINER_TARGETS)["container-reference-btp"]
    runtime = TargetRuntime(
        target, make_work_dir(target.name), tmp_path / "logs", run_id=f"test-{os.getpid()}"
    )
    runtime.log_dir.mkdir()
    token = runtime.credential("auth_token").decode()
    spec = ContainerClientSpec(
        image="conformance/reference:dev",
        entrypoint=("sh", "-c"),
        command=("echo hello {peer_port}; cat {auth_token_file}; sleep 0.5; exit 3",),
    )
    try:
        client = ContainerClient(runtime, spec, {"peer_port": 4242}, 1)
        runtime.client_containers.append(client)
        client.start()
        assert client.wait(0) is None or client.returncode == 3
        assert client.wait(30) == 3 and client.returncode == 3 and not client.running()
        output = client.output()
        assert "hello 4242" in output and token not in output, output
        assert client.tail(1) == output.splitlines()[-1] and client.tail(5) == "\n".join(
            output.splitlines()[-5:]
        )
        assert client.stop() == 3
        assert "hello 4242" in client.log_path.read_text()
        assert (
            docker(
                "ps", "-a", "--filter", f"name={client.name}", "--format", "{{.Names}}"
            ).stdout.strip()
            == ""
        )
        # A client still running when its case ends is stopped and removed too.
        sleeper = ContainerClient(
            runtime,
            ContainerClientSpec(
                image="conformance/reference:dev", entrypoint=("sleep",), command=("600",)
            ),
            {},
            2,
        )
        runtime.client_containers.append(sleeper)
        sleeper.start()
        assert sleeper.running() and sleeper.wait(0.3) is None
        stopped = time.monotonic()
        runtime.stop()
        stop_s = time.monotonic() - stopped
        assert not labelled(f"{RUN_LABEL}={runtime.run_id}")
    finally:
        remove_labelled(f"{RUN_LABEL}={runtime.run_id}")
    record_property("client_container_start_s", round(client.start_seconds, 2))
    say(
        capsys,
        f"client container start {client.start_seconds:.2f} s / {sleeper.start_seconds:.2f} s; "
        f"stop + remove of a running one {stop_s:.2f} s",
    )


def test_a_client_service_runs_from_the_first_launch_to_the_end_of_the_run(
    reference_image: None, tmp_path: Path
) -> None:
    """[container.client.service]: one container, started before the first
    launch and ready by its output, which the launches share through the
    work dir; removed with the run, its output in logs/. A service that
    exits before it is ready is a target that did not start, its output in
    the message, nothing left running."""
    import dataclasses

    from conformance.core.container_spec import ContainerServiceSpec
    from conformance.core.targets import TargetNotStarted

    base = load_targets_file(CONTAINER_TARGETS)["container-reference-btp"]

    def runtime_with(service: ContainerServiceSpec, name: str) -> TargetRuntime:
        client = ContainerClientSpec(
            image="conformance/reference:dev",
            entrypoint=("sh", "-c"),
            command=("echo launch sees $(cat {workdir}/service-port)",),
            service=service,
        )
        target = dataclasses.replace(
            base, container=dataclasses.replace(base.container, client=client)
        )
        runtime = TargetRuntime(
            target, make_work_dir(target.name), tmp_path / name, run_id=f"test-{name}-{os.getpid()}"
        )
        runtime.log_dir.mkdir()
        return runtime

    serving = runtime_with(
        ContainerServiceSpec(
            command=("echo 4711 > {workdir}/service-port; echo SERVICE_READY; exec sleep 600",),
            ready="SERVICE_READY",
        ),
        "serving",
    )
    try:
        launches = [serving.launch_client({}) for _ in range(2)]
        for launch in launches:
            assert launch.wait(30) == 0 and "launch sees 4711" in launch.output(), launch.output()
        services = labelled(f"{ROLE_LABEL}=service")
        assert len(set(services) & set(labelled(f"{RUN_LABEL}={serving.run_id}"))) == 1
        assert serving.client_service is not None and serving.client_service.running()
        serving.stop()
        assert not labelled(f"{RUN_LABEL}={serving.run_id}")
        (saved,) = serving.log_dir.glob("container-reference-btp.*.client-service.container.log")
        assert "SERVICE_READY" in saved.read_text()
    finally:
        remove_labelled(f"{RUN_LABEL}={serving.run_id}")

    broken = runtime_with(
        ContainerServiceSpec(command=("echo the broker is broken; exit 4",), ready="SERVICE_READY"),
        "broken",
    )
    try:
        with pytest.raises(TargetNotStarted, match="(?s)service.*the broker is broken"):
            broken.launch_client({})
        assert broken.client_service is None and broken.client_containers == []
        assert not labelled(f"{RUN_LABEL}={broken.run_id}")
    finally:
        broken.stop()
        remove_labelled(f"{RUN_LABEL}={broken.run_id}")

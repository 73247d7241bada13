"""Container targets end to end (conformance/core/containers.py,
conformance/targets/containers.toml): the harness itself starts each
reference node in a container with testcontainers, certifies it, keeps its
log in logs/ and in the Allure results, and removes it; killing the harness
(SIGKILL of its whole process tree, or Ctrl-C) leaves no container behind;
a container that exits before it is ready is a clear error naming the image
and the end of its log.

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

from .docker_support import (
    REPO_ROOT,
    build_images,
    container_tier,
    docker_problem,
    labelled,
    remove_labelled,
    say,
)

CONTAINER_TARGETS = REPO_ROOT / "conformance" / "targets" / "containers.toml"
REFERENCE_TARGETS = [
    f"container-reference-{p}" for p in ("btp", "ripp", "ripplehost", "ssb", "stomp")
]
RUN_LABEL = "org.conformance.run"
# Bounds of the harness runs: all five reference nodes take about 50 s here.
CERTIFY_RUN_TIMEOUT = 150
CERTIFY_PROCESS_TIMEOUT = 400
# How long the containers of a killed harness may outlive it.
REAP_WITHIN = 10.0


pytestmark, _require_docker = container_tier(docker_problem(), pytest.mark.slow)


def _labelled(run_id: str) -> list[str]:
    """Names of the containers (running or not) labelled with the run."""
    return labelled(f"{RUN_LABEL}={run_id}")


def _remove_labelled(run_id: str) -> None:
    remove_labelled(f"{RUN_LABEL}={run_id}")


@pytest.fixture(scope="module")
def reference_image() -> None:
    """The reference image, built (or found unchanged) by the project's script."""
    build_images("reference")


def _certify_argv(targets: list[str], reports: Path, *extra: str) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "conformance.cli",
        "certify",
        "--targets-file",
        str(CONTAINER_TARGETS),
        "--reports-dir",
        str(reports),
        "--run-timeout",
        str(CERTIFY_RUN_TIMEOUT),
        *extra,
    ]
    for target in targets:
        argv += ["--target", target]
    return argv


def _run_id(output: str) -> str:
    match = re.search(r"^conformance \S+: run (\S+),", output, re.M)
    assert match, f"no run id in the output:\n{output[-2000:]}"
    return match.group(1)


@pytest.mark.timeout(900)
def test_every_reference_node_is_certified_as_a_container_target(
    reference_image: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], record_property
) -> None:
    """One certify of the five container-reference-* targets: the harness
    starts each node in its container, each is conformant (every case
    passed: the server role in one container per target, each client-role
    case with a client container of its own), STOMP's crash case passed
    through a container restart, each container's log is in logs/ and
    attached in allure-results, and no container labelled with the run is
    left."""
    reports = tmp_path / "reports"
    started = time.monotonic()
    run = subprocess.run(
        _certify_argv(REFERENCE_TARGETS, reports),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=CERTIFY_PROCESS_TIMEOUT,
    )
    certify_s = time.monotonic() - started
    output = run.stdout + run.stderr
    run_id = _run_id(run.stdout)
    try:
        assert run.returncode == 0, f"certify exited {run.returncode}:\n{output[-5000:]}"
        for target in REFERENCE_TARGETS:
            protocol = target.rsplit("-", 1)[1]
            assert f"{target} [reference-{protocol} 0.1.0, {protocol}]: CONFORMANT" in output, (
                output[-3000:]
            )
        (run_dir,) = (reports / "runs").iterdir()
        records = [
            json.loads(line)
            for line in (run_dir / "results.jsonl").read_text().splitlines()
            if line
        ]
        assert {r["target"] for r in records} == set(REFERENCE_TARGETS)
        server_cases = [r for r in records if ".server." in r["case_id"]]
        assert len(server_cases) >= 100, f"only {len(server_cases)} server-role cases ran"
        assert all(r["outcome"] == "passed" for r in server_cases), [
            (r["target"], r["case_id"], r["outcome"], r["message"][:200])
            for r in server_cases
            if r["outcome"] != "passed"
        ]
        client_cases = [r for r in records if r["role"] == "client"]
        assert len(client_cases) >= 60, f"only {len(client_cases)} client-role cases ran"
        assert all(r["outcome"] == "passed" for r in records), [
            (r["target"], r["case_id"], r["outcome"], r["message"][:200])
            for r in records
            if r["outcome"] != "passed"
        ]
        # restart_server on a container target: SIGKILL, then the same
        # container started again, its store kept.
        restart = [
            r for r in records if r["case_id"] == "stomp.receipt.server.stored-after-restart"
        ]
        assert [r["outcome"] for r in restart] == ["passed"], restart

        logs = {
            path.name: path.read_text()
            for path in (run_dir / "logs").glob("*.container.log")
            if ".client." not in path.name
        }
        client_logs = list((run_dir / "logs").glob("*.client.*.container.log"))
        assert {path.name.split(".")[0] for path in client_logs} == set(REFERENCE_TARGETS), (
            client_logs
        )
        ready_lines = {
            "btp": "BTP_READY",
            "ripp": "RIPP_READY",
            "ripplehost": "RIPPLE_READY",
            "ssb": "SSB_READY",
            "stomp": "STOMP_READY",
        }
        for target in REFERENCE_TARGETS:
            mine = [text for name, text in logs.items() if name.startswith(target + ".")]
            assert len(mine) == 1, f"{target}: container logs in logs/: {sorted(logs)}"
            assert ready_lines[target.rsplit("-", 1)[1]] in mine[0], mine[0][:500]
        # The STOMP node was started twice (the restart case): two ready lines.
        stomp_log = next(
            text for name, text in logs.items() if name.startswith("container-reference-stomp.")
        )
        assert stomp_log.count("STOMP_READY") == 2, stomp_log[:1000]

        attached: dict[str, list[str]] = {}
        allure_dir = run_dir / "allure-results"
        for result_file in allure_dir.glob("*-result.json"):
            result = json.loads(result_file.read_text())
            for attachment in result.get("attachments", []):
                if attachment["name"].startswith("container log of "):
                    target = attachment["name"].split()[3]
                    attached.setdefault(target, []).append(
                        (allure_dir / attachment["source"]).read_text()
                    )
        assert set(attached) == set(REFERENCE_TARGETS), sorted(attached)
        for target, texts in attached.items():
            assert ready_lines[target.rsplit("-", 1)[1]] in "".join(texts), (
                f"{target}: no start-up lines attached"
            )
        assert _labelled(run_id) == [], "containers of the run left behind"
    finally:
        _remove_labelled(run_id)
    record_property("certify_five_container_targets_s", round(certify_s, 1))
    say(
        capsys,
        f"five reference nodes as container targets: certify {certify_s:.1f} s, "
        f"{len(server_cases)} server-role and {len(client_cases)} client-role cases passed "
        f"({len(client_logs)} client containers)",
    )


def _process_tree(root: int) -> list[int]:
    """``root`` and every process descending from it (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces: the fields after its ')' count.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def _start_and_wait_for_container(tmp_path: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    """A certify of container-reference-btp (about 13 s of cases), started
    in its own process group as a terminal or CI runner starts it; returns
    once its container runs and a first case has a result."""
    reports = tmp_path / "reports"
    out = tmp_path / "certify.out"
    with open(out, "wb") as sink:
        process = subprocess.Popen(
            _certify_argv(["container-reference-btp"], reports),
            cwd=REPO_ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 60
    run_id = ""
    while time.monotonic() < deadline:
        text = out.read_text(errors="replace")
        if not run_id and re.search(r"^conformance \S+: run (\S+),", text, re.M):
            run_id = _run_id(text)
        if run_id and _labelled(run_id) and "[  1/" in text:
            return process, run_id, out
        assert process.poll() is None, (
            f"certify ended before the test could interrupt it:\n{text[-3000:]}"
        )
        time.sleep(0.2)
    process.kill()
    pytest.fail(
        f"no running container target within 60 s:\n{out.read_text(errors='replace')[-3000:]}"
    )


def _assert_reaped(run_id: str, how: str) -> float:
    started = time.monotonic()
    while time.monotonic() - started < REAP_WITHIN:
        if not _labelled(run_id):
            return time.monotonic() - started
        time.sleep(0.2)
    left = _labelled(run_id)
    _remove_labelled(run_id)
    pytest.fail(
        f"after {how}, containers of run {run_id} still there {REAP_WITHIN:g} s later: {left}"
    )


@pytest.mark.timeout(300)
def test_sigkill_of_the_whole_harness_tree_leaves_no_container(
    reference_image: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], record_property
) -> None:
    """SIGKILL to every process of the certify CLI's tree at once (the CLI,
    its pytest session, the nodes it started), as a CI runner cancelling a
    job does: no handler runs, and the reaper, outside that tree, removes
    the container."""
    process, run_id, out = _start_and_wait_for_container(tmp_path)
    try:
        tree = _process_tree(process.pid)
        assert len(tree) >= 2, f"expected the CLI and its pytest session, found {tree}"
        for pid in tree:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        process.wait(10)
        assert _labelled(run_id), "the container went away with the harness before any reaper ran?"
        reaped_s = _assert_reaped(run_id, "SIGKILL of the harness's process tree")
    finally:
        if process.poll() is None:
            process.kill()
        _remove_labelled(run_id)
    record_property("reaped_after_sigkill_s", round(reaped_s, 2))
    say(
        capsys,
        f"SIGKILL of {len(tree)} harness processes: container removed {reaped_s:.1f} s later",
    )


@pytest.mark.timeout(300)
def test_ctrl_c_leaves_no_container(
    reference_image: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], record_property
) -> None:
    """SIGINT to the CLI's process group, as Ctrl-C in a terminal: the run
    stops and its container is gone within seconds."""
    process, run_id, out = _start_and_wait_for_container(tmp_path)
    try:
        os.killpg(process.pid, signal.SIGINT)
        code = process.wait(60)
        assert code != 0, (
            f"an interrupted certify exited 0:\n{out.read_text(errors='replace')[-2000:]}"
        )
        reaped_s = _assert_reaped(run_id, "Ctrl-C (SIGINT to the CLI's process group)")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        _remove_labelled(run_id)
    record_property("reaped_after_sigint_s", round(reaped_s, 2))
    say(capsys, f"Ctrl-C: no container left {reaped_s:.1f} s after the harness ended")


BROKEN_TARGETS = """
[targets.exits-early]
implementation = "broken"
protocol = "btp"
roles = ["server"]

[targets.exits-early.container]
image = "conformance/reference:dev"
command = "btp serve --host 0.0.0.0 --port 7768 --no-such-option"
ports = [7768]
url = "ws://{host}:{port}/"
ready = "BTP_READY"

[targets.never-ready]
implementation = "broken"
protocol = "ripplehost"
roles = ["server"]

[targets.never-ready.container]
image = "conformance/reference:dev"
command = "ripplehost serve --host 0.0.0.0 --port 7000 --hostname reference.ripple.test"
ports = [7000]
ready = "NEVER_PRINTED"
ready_timeout = 3
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "target, expected",
    [
        (
            "exits-early",
            r"exited with code 2 before it was ready; last lines of its log:\n(.|\n)*"
            r"reference_impl.btp serve: error: ",
        ),
        (
            "never-ready",
            r"was not ready within 3 s \(waiting for 'NEVER_PRINTED' in its log\); last lines of its "
            r"log:\n(.|\n)*RIPPLE_READY",
        ),
    ],
)
def test_a_container_that_is_not_ready_did_not_start(
    reference_image: None, tmp_path: Path, target: str, expected: str
) -> None:
    """No rule failed: the cases end in error naming the target, the image
    and the end of the container's log (start_failure), the verdict is NOT
    CERTIFIED: the target did not start, exit 4; the container is removed."""
    targets_file = tmp_path / "broken.toml"
    targets_file.write_text(BROKEN_TARGETS)
    argv = [
        sys.executable,
        "-m",
        "conformance.cli",
        "certify",
        "--targets-file",
        str(targets_file),
        "--target",
        target,
        "--reports-dir",
        str(tmp_path / "reports"),
        "--run-timeout",
        "60",
    ]
    run = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    run_id = _run_id(run.stdout)
    try:
        assert run.returncode == 4, (
            f"exit {run.returncode}:\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
        )
        assert "]: NOT CERTIFIED: the target did not start" in run.stdout, run.stdout
        (run_dir,) = (tmp_path / "reports" / "runs").iterdir()
        summary = json.loads((run_dir / "summary.json").read_text())
        assert (
            summary["verdict"] == "NOT CERTIFIED: the target did not start"
            and "preflight_error" not in summary
        )
        records = [
            json.loads(line)
            for line in (run_dir / "results.jsonl").read_text().splitlines()
            if line
        ]
        errored = [r for r in records if r["outcome"] == "error"]
        assert errored and not [r for r in records if r["outcome"] == "failed"], records
        for record in errored:
            assert record["start_failure"], record
            assert f"target '{target}' (container conformance-{target}-" in record["message"], (
                record
            )
            assert "image conformance/reference:dev)" in record["message"], record
            assert re.search(expected, record["message"]), record
        assert _labelled(run_id) == []
    finally:
        _remove_labelled(run_id)

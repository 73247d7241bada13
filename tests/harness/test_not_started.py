"""A target that does not start is not a rule's failure (issue 22, item 3).

A launched server that exits before it is ready, or is never ready, and a
launched client that exits before it connects: the case that met it ends
in ``error`` naming the start failure (exit code, the end of its output, or
the readiness deadline), marked ``start_failure``; its dependents are
blocked by it; `conformance certify` says "NOT CERTIFIED: the target did
not start" and exits 4. A client that runs and never connects is still a
failure (exit 1)."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from conformance.core.readiness import accept_launched_client
from conformance.core.results import NOT_STARTED
from conformance.core.targets import (
    ProcessHandle,
    TargetError,
    TargetNotStarted,
    TargetRuntime,
    load_targets_file,
)
from conformance.core.transport import DeadlineExceeded, TcpServer, WireTrace
from conformance.runner import EXIT_NOT_CONFORMANT, EXIT_NOT_STARTED

from .cli_runner import certify

VERDICT = "NOT CERTIFIED: the target did not start"


def assert_not_certified(run, target: str) -> list[dict]:
    """Exit 4, the verdict on the console and in summary.json, no failed
    case, no preflight stop; returns the records that met the start failure."""
    assert run.code == EXIT_NOT_STARTED == 4, run.output
    assert f"]: {VERDICT}" in run.output, run.output
    assert "preflight" not in run.output, run.output
    summary = run.summary
    assert summary["verdict"] == VERDICT == NOT_STARTED and summary["not_started"] == [target]
    assert "preflight_error" not in summary and not summary["conformant"]
    records = run.by_case(target)
    assert records and not [r for r in records.values() if r["outcome"] == "failed"], records
    errored = [r for r in records.values() if r["outcome"] == "error"]
    assert errored and all(r["start_failure"] for r in errored), errored
    (group,) = summary["targets"]
    assert group["verdict"] == VERDICT and sorted(group["start_failures"]) == sorted(
        r["case_id"] for r in errored
    )
    # Its dependents are blocked by a case that met the start failure.
    for record in records.values():
        if record["outcome"] == "blocked":
            assert records[record["blocked_by"]]["start_failure"], record
    return errored


def test_a_server_that_exits_at_once_is_an_error_naming_its_exit_code_and_output(tmp_path):
    targets = tmp_path / "targets.toml"
    targets.write_text(
        textwrap.dedent("""
        [targets.boom]
        implementation = "boom-ssb"
        protocol = "ssb"
        roles = ["server"]
        [targets.boom.launch]
        server = "sh -c 'echo boom >&2; exit 7'"
        ready = "SSB_READY"
    """)
    )
    run = certify(tmp_path, "--targets-file", str(targets), "--target", "boom", timeout=120)
    errored = assert_not_certified(run, "boom")
    assert [r for r in run.records if r["outcome"] == "blocked"], (
        "the SSB cases depending on a handshake"
    )
    for record in errored:
        assert "exited with code 7 before it was ready" in record["message"], record
        assert "boom" in record["message"].splitlines()[1:], record
    # The start failure is shown once, with the node's output.
    assert "boom: the target did not start" in run.output and "\n  boom\n" in run.output, run.output
    assert run.seconds < 60


def test_a_server_that_is_never_ready_is_an_error_naming_the_readiness_deadline(tmp_path):
    targets = tmp_path / "targets.toml"
    targets.write_text(
        textwrap.dedent("""
        [targets.sleepy]
        implementation = "sleepy-ripp"
        protocol = "ripp"
        roles = ["server"]
        [targets.sleepy.launch]
        server = "{python} -c 'import time; print(\\"warming up\\", flush=True); time.sleep(120)'"
        ready = "RIPP_READY"
        ready_timeout = 2
    """)
    )
    run = certify(tmp_path, "--targets-file", str(targets), "--target", "sleepy", timeout=120)
    for record in assert_not_certified(run, "sleepy"):
        assert (
            "was not ready within 2 s (waiting for 'RIPP_READY' in its output)" in record["message"]
            and "warming up" in record["message"]
        ), record


def builtin_table(name: str) -> dict:
    text = (
        resources.files("conformance.targets").joinpath("builtin.toml").read_text(encoding="utf-8")
    )
    return tomllib.loads(text)["targets"][name]


def toml_table(prefix: str, table: dict) -> str:
    """A TOML text of ``table`` (strings, numbers, lists and tables of them)."""

    def value(item: object) -> str:
        if isinstance(item, dict):
            return "{ " + ", ".join(f"{json.dumps(k)} = {value(v)}" for k, v in item.items()) + " }"
        if isinstance(item, list):
            return "[" + ", ".join(value(v) for v in item) + "]"
        return json.dumps(item)

    plain = {
        k: v
        for k, v in table.items()
        if not (isinstance(v, dict) and k in ("launch", "params", "credentials", "adapters"))
    }
    lines = [f"[{prefix}]"] + [f"{key} = {value(item)}" for key, item in plain.items()]
    for key, item in table.items():
        if key not in plain:
            lines += [f"[{prefix}.{key}]"] + [f"{k} = {value(v)}" for k, v in item.items()]
    return "\n".join(lines) + "\n"


def reference_with_client(
    tmp_path: Path, protocol: str, client: str, ready_timeout: int = 30
) -> Path:
    """The reference node of ``protocol`` (its server as built in) whose
    client command is ``client``."""
    table = builtin_table(f"reference-{protocol}")
    table["launch"] = dict(table["launch"], client=client, ready_timeout=ready_timeout)
    path = tmp_path / "targets.toml"
    path.write_text(toml_table("targets.node", table))
    return path


@pytest.mark.parametrize("protocol", ["ssb", "btp", "stomp", "ripp", "ripplehost"])
def test_a_client_that_exits_at_once_is_an_error_not_a_failure(tmp_path, protocol):
    """Every suite's wait for a launched client: exiting before it connects
    is the start failure, seen as soon as the client exits (not after the
    30 s connection wait)."""
    targets = reference_with_client(tmp_path, protocol, "sh -c 'echo client-boom >&2; exit 9'")
    run = certify(
        tmp_path, "--targets-file", str(targets), "--target", "node", "-k", "client", timeout=240
    )
    errored = assert_not_certified(run, "node")
    for record in errored:
        assert record["role"] == "client", record
        assert "exited with code 9 before it connected to the harness" in record["message"], record
        assert "client-boom" in record["message"], record
        assert record["duration_s"] < 10, record


def test_a_client_that_runs_and_never_connects_is_still_a_failure(tmp_path):
    targets = reference_with_client(
        tmp_path, "ripp", "{python} -c 'import time; time.sleep(120)'", ready_timeout=2
    )
    run = certify(
        tmp_path, "--targets-file", str(targets), "--target", "node", "-k", "client", timeout=240
    )
    assert run.code == EXIT_NOT_CONFORMANT, run.output
    summary = run.summary
    assert summary["verdict"] == "NOT CONFORMANT" and summary["not_started"] == []
    root = run.by_case("node")["ripp.envelope.client.sends-valid-envelopes"]
    assert root["outcome"] == "failed" and not root["start_failure"], root
    assert "did not connect" in root["message"], root


# --- the pieces, in-process -------------------------------------------------------------


def runtime(tmp_path: Path, launch: str = "", adapters: str = "", port: int = 9) -> TargetRuntime:
    path = tmp_path / "targets.toml"
    path.write_text(
        textwrap.dedent(f"""
        [targets.node]
        implementation = "x"
        protocol = "ripp"
        roles = ["server", "client"]
        host = "127.0.0.1"
        port = {port}
        [targets.node.launch]
        {launch}
        [targets.node.adapters]
        {adapters}
    """)
    )
    return TargetRuntime(load_targets_file(path)["node"], tmp_path, tmp_path)


async def test_accepting_a_launched_client_tells_exit_from_silence(tmp_path):
    node = runtime(
        tmp_path, f"""client = ["{sys.executable}", "-c", "{{code}}", "{{peer_port}}"]"""
    )
    connect = (
        "import socket, sys; s = socket.create_connection(('127.0.0.1', int(sys.argv[1]))); "
        "s.sendall(b'x'); s.close()"
    )
    async with TcpServer(WireTrace(), 5.0) as server:
        # Exits before connecting: TargetNotStarted with its code and output.
        process = node.launch_client(
            {"code": "import sys; print('no peer for me'); sys.exit(5)", "peer_port": server.port}
        )
        with pytest.raises(TargetNotStarted) as info:
            await accept_launched_client(
                server.accept, process, 30, "the client", f"127.0.0.1:{server.port}"
            )
        assert "the client exited with code 5 before it connected to the harness" in str(info.value)
        assert str(info.value).endswith("no peer for me")
        # Connects, then exits at once: its connection is taken, not a start failure.
        process = node.launch_client({"code": connect, "peer_port": server.port})
        assert process.wait(30) == 0
        conn = await accept_launched_client(server.accept, process, 30, "the client", "here")
        assert await conn.receive_exactly(1, "the byte") == b"x"
        # Runs and never connects: the accept's own deadline, a failure.
        process = node.launch_client(
            {"code": "import time; time.sleep(60)", "peer_port": server.port}
        )
        try:
            with pytest.raises(DeadlineExceeded):
                await accept_launched_client(server.accept, process, 0.5, "the client", "here")
        finally:
            process.stop()


def test_an_adapter_that_fails_printing_nothing_did_not_start(tmp_path):
    node = runtime(
        tmp_path,
        adapters="""
        silent = "sh -c 'echo cannot start >&2; exit 3'"
        talking = "sh -c 'echo half a line; exit 3'"
        missing = "/nonexistent/adapter"
    """,
    )
    with pytest.raises(
        TargetNotStarted,
        match=r"adapter 'silent' exited with code 3 printing nothing on stdout; "
        r"its stderr:\ncannot start",
    ):
        node.run_adapter("silent")
    with pytest.raises(TargetNotStarted, match="adapter 'missing' could not start"):
        node.run_adapter("missing")
    # It ran and printed: a broken contract, an ordinary error.
    with pytest.raises(TargetError) as info:
        node.run_adapter("talking")
    assert not isinstance(info.value, TargetNotStarted)


def test_a_command_that_cannot_be_run_did_not_start(tmp_path):
    with pytest.raises(TargetNotStarted, match="could not start '/nonexistent/node'"):
        ProcessHandle(["/nonexistent/node"], tmp_path / "log", {}, str(tmp_path))


def test_a_server_that_dies_and_does_not_come_back_is_an_ordinary_error(tmp_path):
    """It started for this run: the cases after it judge a dead node, and
    the run's verdict is not "did not start"."""
    flag = tmp_path / "started-once"
    node = runtime(
        tmp_path,
        f"""server = "sh -c 'test -e {flag} && exit 4; touch {flag}; echo UP; exec sleep 60'"
        ready = "UP"
    """,
    )
    node.start_server()
    try:
        node.server.stop()
        with pytest.raises(TargetError) as info:
            node.ensure_server()
        assert not isinstance(info.value, TargetNotStarted)
        assert "did not start again" in str(info.value) and "exited with code 4" in str(info.value)
    finally:
        node.stop()


def test_the_restart_of_a_started_server_is_an_ordinary_error_too(tmp_path):
    flag = tmp_path / "started-once"
    node = runtime(
        tmp_path,
        f"""server = "sh -c 'test -e {flag} && exit 4; touch {flag}; echo UP; exec sleep 60'"
        ready = "UP"
    """,
    )
    node.start_server()
    try:
        with pytest.raises(TargetError) as info:
            node.restart_server(kill=True)
        assert not isinstance(info.value, TargetNotStarted)
        assert "did not start again after a restart" in str(info.value)
    finally:
        node.stop()


def test_asyncio_is_left_clean_by_a_cancelled_wait(tmp_path):
    """accept_launched_client cancels its accept when it gives up: no task
    is left pending on the loop."""
    node = runtime(tmp_path, f"""client = ["{sys.executable}", "-c", "import sys; sys.exit(2)"]""")

    async def main() -> set:
        async with TcpServer(WireTrace(), 5.0) as server:
            process = node.launch_client({})
            with pytest.raises(TargetNotStarted):
                await accept_launched_client(server.accept, process, 30, "the client", "here")
        return {task for task in asyncio.all_tasks() if task is not asyncio.current_task()}

    assert asyncio.run(main()) == set()


# --- a port taken between picking and binding is started again ------------------------------

FLAKY_SERVER = """
import socket, sys, pathlib
marker = pathlib.Path(sys.argv[2])
if not marker.exists():
    marker.write_text("once")
    print("listen_error: {acceptor,{127,0,0,1},44631},eaddrinuse", flush=True)
    sys.exit(1)
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
print("READY", flush=True)
import time; time.sleep(30)
"""


def _server_node(tmp_path: Path, code: str) -> TargetRuntime:
    """A launched server on a free-picked port (port 0: {port} is chosen at start)."""
    script = tmp_path / "server.py"
    script.write_text(code)
    marker = tmp_path / "marker"
    return runtime(
        tmp_path,
        port=0,
        launch=(
            f'server = ["{sys.executable}", "{script}", "{{port}}", "{marker}"]\n'
            'ready = "READY"\nready_timeout = 20'
        ),
    )


def test_a_server_whose_port_was_taken_is_started_again_on_a_fresh_one(tmp_path):
    # Seen with RabbitMQ while 20 certifications ran at once: its AMQP port,
    # picked free, was an outgoing connection's by the time it bound.
    node = _server_node(tmp_path, FLAKY_SERVER)
    try:
        node.start_server()
        assert node.server is not None and node.server.running()
        logs = sorted(p.name for p in tmp_path.glob("node.*.server.*.log"))
        assert len(logs) == 2, logs  # the failed start's log is kept
        assert "eaddrinuse" in (tmp_path / logs[0]).read_text()
    finally:
        node.stop()


def test_a_server_failing_for_another_reason_is_not_started_again(tmp_path):
    node = _server_node(tmp_path, "import sys; print('config error: bad key'); sys.exit(3)")
    with pytest.raises(TargetNotStarted, match="config error: bad key"):
        node.start_server()
    assert len(list(tmp_path.glob("node.*.server.*.log"))) == 1

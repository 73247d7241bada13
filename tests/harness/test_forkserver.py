"""Pytest sessions forked from a warm interpreter (conformance/runner/
forkserver.py): from a process's second session on, a session is forked by
its fork server, and it is the same session as a started one: command line,
environment, working directory, streams, exit status, signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conformance.core import forkserver

SUITE = textwrap.dedent("""
    import os
    import signal
    import sys
    import time
    from pathlib import Path


    def test_reports_where_it_runs():
        print("CWD", os.getcwd())
        # A new interpreter's dispositions: a write to a closed socket
        # raises (SIGPIPE ignored), Ctrl-C raises KeyboardInterrupt.
        print("SIGPIPE ignored", signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN)
        print("SIGINT raises", signal.getsignal(signal.SIGINT) is signal.default_int_handler)
        print("SIGTERM default", signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
        print("MARK", os.environ.get("FORKSERVER_TEST_MARK"))
        print("PID", os.getpid())
        print("PPID", os.getppid())
        print("PGID", os.getpgrp())
        sys.stderr.write("ON STDERR\\n")
        sys.stderr.flush()
        Path(os.environ["FORKSERVER_TEST_STARTED"]).write_text("started")
        time.sleep(float(os.environ.get("FORKSERVER_TEST_HOLD", "0")))
        assert os.environ.get("FORKSERVER_TEST_FAIL") != "1", "asked to fail"
""")


@pytest.fixture
def fresh_server(monkeypatch: pytest.MonkeyPatch):
    """This module's own fork server state: no server yet, no session
    started (other tests in this worker may have started one)."""
    monkeypatch.setattr(forkserver, "_server", None)
    monkeypatch.setattr(forkserver, "_server_failed", False)
    monkeypatch.setattr(forkserver, "_sessions_started", 0)
    monkeypatch.setattr(forkserver, "_remote", None)
    monkeypatch.setattr(forkserver, "_remote_failed", False)
    monkeypatch.delenv(forkserver.ENV_SWITCH, raising=False)
    # Not the worker's shared server (tests/conftest.py): this module's own.
    monkeypatch.setenv(forkserver.SHARE_ENV, "")
    monkeypatch.delenv(forkserver.SHARE_ENV)
    yield
    forkserver._stop_server()


def _session(tmp_path: Path, name: str, env: dict[str, str], stderr=None):
    suite = tmp_path / "test_where.py"
    suite.write_text(SUITE)
    log = tmp_path / f"{name}.log"
    argv = [sys.executable, "-m", "pytest", str(suite), "-q", "-s", "-p", "no:cacheprovider"]
    full_env = dict(
        os.environ,
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
        FORKSERVER_TEST_STARTED=str(tmp_path / f"{name}.started"),
        **env,
    )
    with open(log, "wb") as out:
        process = forkserver.start_session(argv, stdout=out, env=full_env, stderr=stderr)
    return process, log


def _wait_started(tmp_path: Path, name: str, process) -> None:
    """Until the session wrote its marker (or ended): each turn waits on the
    session itself, bounded, 60 s in all."""
    marker = tmp_path / f"{name}.started"
    for _ in range(600):
        if marker.exists():
            return
        try:
            process.wait(0.1)
            return
        except subprocess.TimeoutExpired:
            continue


def test_second_session_is_forked_and_is_the_same_session(tmp_path, fresh_server, monkeypatch):
    first, first_log = _session(tmp_path, "first", {"FORKSERVER_TEST_MARK": "one"})
    assert isinstance(first, subprocess.Popen)
    assert first.wait(120) == 0
    work = tmp_path / "elsewhere"
    work.mkdir()
    monkeypatch.chdir(work)
    second, second_log = _session(tmp_path, "second", {"FORKSERVER_TEST_MARK": "two"})
    assert isinstance(second, forkserver.ForkedProcess)
    assert second.wait(120) == 0
    text = second_log.read_text()
    assert f"CWD {work}" in text and "MARK two" in text and "1 passed" in text, text
    for disposition in ("SIGPIPE ignored", "SIGINT raises", "SIGTERM default"):
        assert f"{disposition} True" in text and f"{disposition} True" in first_log.read_text()
    assert f"PID {second.pid}" in text
    # A failing session's exit status is pytest's, as a started one's.
    third, third_log = _session(tmp_path, "third", {"FORKSERVER_TEST_FAIL": "1"})
    assert isinstance(third, forkserver.ForkedProcess)
    assert third.wait(120) == 1, third_log.read_text()
    assert "asked to fail" in third_log.read_text()


def test_a_forked_session_is_waited_for_signalled_and_piped(tmp_path, fresh_server):
    _session(tmp_path, "warm-up", {})[0].wait(120)
    held, _ = _session(tmp_path, "held", {"FORKSERVER_TEST_HOLD": "60"}, stderr=subprocess.PIPE)
    assert isinstance(held, forkserver.ForkedProcess)
    _wait_started(tmp_path, "held", held)
    with pytest.raises(subprocess.TimeoutExpired):
        held.wait(0.2)
    assert held.poll() is None
    held.terminate()
    assert held.wait(30) == -signal.SIGTERM
    assert b"ON STDERR" in held.stderr.read()
    # Once its status is read, signalling it does nothing (the pid may be
    # another process's by now).
    held.kill()
    assert held.returncode == -signal.SIGTERM


def test_a_session_waited_for_in_one_thread_is_signalled_from_another(tmp_path, fresh_server):
    """What a run does on Ctrl-C: each session's worker thread waits for it
    to end while the main thread polls and signals every session. Neither
    may wait for the other (a full tier's SIGINT test hung on it)."""
    import threading

    _session(tmp_path, "warm-up", {})[0].wait(120)
    held, _ = _session(tmp_path, "held", {"FORKSERVER_TEST_HOLD": "60"})
    assert isinstance(held, forkserver.ForkedProcess)
    _wait_started(tmp_path, "held", held)
    codes: list[int] = []
    worker = threading.Thread(target=lambda: codes.append(held.wait()), daemon=True)
    worker.start()
    worker.join(0.2)  # the worker is in wait() now, or about to be
    assert worker.is_alive() and held.poll() is None
    held.terminate()
    worker.join(30)
    assert codes == [-signal.SIGTERM]


def test_sessions_start_as_new_processes_when_switched_off_or_the_server_is_gone(
    tmp_path, fresh_server, monkeypatch, capfd
):
    monkeypatch.setenv(forkserver.ENV_SWITCH, "0")
    for name in ("off-1", "off-2"):
        process, _ = _session(tmp_path, name, {})
        assert isinstance(process, subprocess.Popen) and process.wait(120) == 0
    monkeypatch.delenv(forkserver.ENV_SWITCH)
    forked, _ = _session(tmp_path, "on", {})
    assert isinstance(forked, forkserver.ForkedProcess) and forked.wait(120) == 0
    forkserver._server.process.kill()
    forkserver._server.process.wait()
    after, _ = _session(tmp_path, "after", {})
    assert isinstance(after, subprocess.Popen) and after.wait(120) == 0


COMMAND = textwrap.dedent("""
    # A process the sharing one starts (as a test starts `conformance`):
    # two sessions through forkserver.start_session, as the runner starts them.
    import json
    import os
    import sys

    from conformance.core import forkserver

    out = []
    for name in ("one", "two"):
        with open(os.path.join(sys.argv[1], name + ".log"), "wb") as log:
            process = forkserver.start_session(
                sys.argv[2:], stdout=log, env=dict(os.environ, FORKSERVER_TEST_MARK=name,
                FORKSERVER_TEST_STARTED=os.path.join(sys.argv[1], name + ".started"))
            )
        out.append({"forked": isinstance(process, forkserver.ForkedProcess),
                    "pid": process.pid, "code": process.wait(120)})
    print(json.dumps({"sessions": out, "pgid": os.getpgrp(), "pid": os.getpid()}))
""")


def _command(tmp_path: Path, **popen) -> dict:
    """COMMAND run as a process of its own; what it saw of its sessions."""
    suite = tmp_path / "test_where.py"
    suite.write_text(SUITE)
    script = tmp_path / "command.py"
    script.write_text(COMMAND)
    argv = [sys.executable, "-m", "pytest", str(suite), "-q", "-s", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"),
        **popen,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def test_a_process_started_by_a_sharing_one_has_every_session_forked_there(tmp_path, fresh_server):
    """share_with_children: a command this process starts (the test
    workers run hundreds) has its sessions forked by this process's
    server from the first on, each in the command's own process group, as
    a session it started would be; they are the same sessions."""
    assert forkserver.share_with_children()
    server = forkserver._server.process.pid
    try:
        seen = _command(tmp_path)
    finally:
        os.environ.pop(forkserver.SHARE_ENV, None)
    assert [s["forked"] for s in seen["sessions"]] == [True, True]
    assert [s["code"] for s in seen["sessions"]] == [0, 0]
    for name, session in zip(("one", "two"), seen["sessions"]):
        text = (tmp_path / f"{name}.log").read_text()
        assert f"MARK {name}" in text and f"PID {session['pid']}" in text and "1 passed" in text
        # The shared server's child, in the command's process group.
        assert f"PPID {server}\n" in text and f"PGID {seen['pgid']}\n" in text, text


def test_a_process_in_another_terminal_session_starts_its_own_sessions(tmp_path, fresh_server):
    """A command in a session of its own (a test that stops a whole
    process group, as a terminal does): its sessions could not join its
    group from the shared server, so the server refuses, and the command
    runs them as it would without one: the first as a new interpreter,
    the second forked by a server of its own."""
    assert forkserver.share_with_children()
    try:
        seen = _command(tmp_path, start_new_session=True)
    finally:
        os.environ.pop(forkserver.SHARE_ENV, None)
    assert [s["forked"] for s in seen["sessions"]] == [False, True]
    assert [s["code"] for s in seen["sessions"]] == [0, 0]
    first = (tmp_path / "one.log").read_text()
    assert f"PPID {seen['pid']}\n" in first and f"PGID {seen['pgid']}\n" in first, first


NODE_SUITE = textwrap.dedent("""
    import os
    import signal
    import sys
    from pathlib import Path

    from conformance.core.target_runtime import ProcessHandle
    from conformance.core.forkserver import ForkedProcess

    OUT = Path(os.environ["FORKSERVER_TEST_OUT"])


    def consumer(tmp_path, name):
        # The RIPP reference consumer, which serves until stopped.
        return ProcessHandle(
            [sys.executable, "-m", "reference_impl.ripp", "consume", "--schemas",
             os.environ["FORKSERVER_TEST_SCHEMAS"], "--host", "127.0.0.1", "--port", "0"],
            tmp_path / f"{name}.log",
            dict(os.environ),
            str(tmp_path),
        )


    def test_reference_nodes_are_forked_and_run_as_started_ones(tmp_path):
        helped = ProcessHandle(
            [sys.executable, "-m", "reference_impl.ripp", "--help"],
            tmp_path / "help.log",
            dict(os.environ),
            str(tmp_path),
        )
        code = helped.wait(30)
        (OUT / "help.log").write_text(helped.output())
        (OUT / "help.code").write_text(f"{code} {isinstance(helped.process, ForkedProcess)}")
        # A node that runs until stopped: its own process group, stopped
        # by the group's SIGTERM; a failing one exits with its status.
        serving = consumer(tmp_path, "serve")
        for _ in range(600):
            if "RIPP_READY" in serving.output() or not serving.running():
                break
            serving.wait(0.05)
        pid = serving.process.pid
        (OUT / "serve.group").write_text(f"{os.getpgid(pid) == pid} {isinstance(serving.process, ForkedProcess)}")
        (OUT / "serve.code").write_text(str(serving.stop()))
        bad = ProcessHandle(
            [sys.executable, "-m", "reference_impl.ripp", "no-such-command"],
            tmp_path / "bad.log",
            dict(os.environ),
            str(tmp_path),
        )
        (OUT / "bad.code").write_text(str(bad.wait(30)))
        # Another program, or an environment read at import: started as declared.
        other = ProcessHandle(
            [sys.executable, "-m", "reference_impl.ripp", "--help"],
            tmp_path / "other.log",
            dict(os.environ, PYTHONHASHSEED="7"),
            str(tmp_path),
        )
        other.wait(30)
        (OUT / "other.kind").write_text(str(isinstance(other.process, ForkedProcess)))
        # A node still running when its session dies goes with it.
        orphan = consumer(tmp_path, "orphan")
        (OUT / "orphan.pid").write_text(str(orphan.process.pid))
        os.kill(os.getpid(), signal.SIGKILL)
""")


def test_reference_nodes_of_a_forked_session_are_forked_and_behave_as_started_ones(
    tmp_path, fresh_server
):
    import time

    out = tmp_path / "out"
    out.mkdir()
    suite = tmp_path / "test_nodes.py"
    suite.write_text(NODE_SUITE)
    argv = [sys.executable, "-m", "pytest", str(suite), "-q", "-s", "-p", "no:cacheprovider"]
    env = dict(
        os.environ,
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
        FORKSERVER_TEST_OUT=str(out),
        FORKSERVER_TEST_SCHEMAS=str(
            Path(__file__).resolve().parents[2] / "conformance/suites/ripp/registry.json"
        ),
    )
    env.pop("PYTHONHASHSEED", None)
    _session(tmp_path, "warm-up", {})[0].wait(120)
    with open(tmp_path / "session.log", "wb") as log:
        session = forkserver.start_session(argv, stdout=log, env=env)
    assert isinstance(session, forkserver.ForkedProcess)
    assert session.wait(120) == -signal.SIGKILL, (tmp_path / "session.log").read_text()
    assert (out / "help.code").read_text() == "0 True"
    assert "usage: python -m reference_impl.ripp" in (out / "help.log").read_text()
    assert (out / "serve.group").read_text() == "True True"
    # SIGTERM: it stops cleanly, as a started one does.
    assert (out / "serve.code").read_text() == "0"
    assert (out / "bad.code").read_text() == "2"  # argparse's status for a bad command
    assert (out / "other.kind").read_text() == "False"
    orphan = int((out / "orphan.pid").read_text())
    for _ in range(300):  # the server stops it once it sees the session gone
        try:
            os.kill(orphan, 0)
        except ProcessLookupError:
            break
        if open(f"/proc/{orphan}/stat").read().split()[2] == "Z":
            break  # exited, the server about to reap it
        time.sleep(0.1)
    else:
        os.killpg(orphan, signal.SIGKILL)
        pytest.fail("the node of a session that died was left running")


def test_a_forked_process_labels_its_containers_as_its_own():
    """Container targets are labelled with the harness process's session id,
    which its reaper removes when the process ends: a forked session draws
    its own (conformance/core/containers.py), or the first session to end
    would remove the containers of every other session forked alike."""
    from conformance.core import containers

    parent = containers.session_id()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its id and leave at once
        os.close(read)
        os.write(write, containers.session_id().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 100).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert child and child != parent and containers.session_id() == parent

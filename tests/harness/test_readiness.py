"""conformance/core/readiness.py with fakes for the log, the state and the
port: the one wait that launched and container servers share (fast, no
process, no docker)."""

from __future__ import annotations

import socket
import time

import pytest

from conformance.core.readiness import (
    LOG_TAIL_LINES,
    Exited,
    ReadyWhen,
    StartingServer,
    port_accepts,
    read_outputs,
    wait_until_ready,
)
from conformance.core.targets import TargetError


class ScriptedServer:
    """A server whose log, state and port change with each look at it:
    ``lines[i]`` is appended at the i-th read of the log, ``states[i]`` is
    the state at the i-th look (the last one stays), the port answers from
    the ``port_from``-th check on."""

    def __init__(
        self, lines: list[str], states: list[bool | Exited], port_from: int | None = None
    ) -> None:
        self.lines, self.states, self.port_from = lines, states, port_from
        self.log_reads = self.state_reads = self.port_checks = 0
        self.ports_asked: list[int] = []
        self.log = ""

    def read_log(self) -> str:
        if self.log_reads < len(self.lines):
            self.log += self.lines[self.log_reads]
        self.log_reads += 1
        return self.log

    def state(self) -> bool | Exited:
        state = self.states[min(self.state_reads, len(self.states) - 1)]
        self.state_reads += 1
        return state

    def port_answers(self, port: int) -> bool:
        self.ports_asked.append(port)
        self.port_checks += 1
        return self.port_from is not None and self.port_checks >= self.port_from

    def starting(self, log_name: str = "log") -> StartingServer:
        return StartingServer(
            "target 'node' (image x)", log_name, self.read_log, self.state, self.port_answers
        )


def test_ready_when_a_line_matches_the_regex():
    fake = ScriptedServer(
        ["booting\n", "loading\n", "ID=@k.ed25519 READY on 7000\n", "later\n"], [True]
    )
    text = wait_until_ready(fake.starting(), ReadyWhen(pattern=r"READY on \d+"), poll_interval=0)
    assert text == "booting\nloading\nID=@k.ed25519 READY on 7000\n"
    assert fake.log_reads == 3 and fake.port_checks == 0


def test_ready_when_the_port_answers():
    fake = ScriptedServer(["booting\n"], [True], port_from=4)
    wait_until_ready(fake.starting(), ReadyWhen(port=7000), poll_interval=0)
    assert fake.port_checks == 4 and set(fake.ports_asked) == {7000}


def test_regex_and_port_both_needed():
    fake = ScriptedServer(["READY\n"], [True], port_from=3)
    wait_until_ready(fake.starting(), ReadyWhen(pattern="READY", port=7000), poll_interval=0)
    assert fake.port_checks == 3 and fake.log_reads == 3


def test_not_running_yet_is_not_ready_even_with_the_line():
    # A container still "created": its log may hold a line of a former start.
    fake = ScriptedServer(["READY\n"], [False, False, True])
    wait_until_ready(fake.starting(), ReadyWhen(pattern="READY"), poll_interval=0)
    assert fake.state_reads == 3


def test_exit_before_ready_is_an_error_with_the_log_tail():
    lines = [f"line {n}\n" for n in range(40)] + ["Traceback: no config\n"]
    fake = ScriptedServer(lines, [True] * 40 + [Exited(3, "OCI runtime error")])
    with pytest.raises(TargetError) as info:
        wait_until_ready(fake.starting(), ReadyWhen(pattern="READY"), poll_interval=0)
    message = str(info.value)
    assert message.startswith(
        "target 'node' (image x) exited with code 3 before it was ready "
        "(OCI runtime error); last lines of its log:\n"
    )
    tail = message.split(":\n", 1)[1].splitlines()
    assert (
        len(tail) == LOG_TAIL_LINES and tail[-1] == "Traceback: no config" and "line 9" not in tail
    )


def test_ready_line_then_exit_is_not_ready():
    fake = ScriptedServer(["READY\n", "crashed\n"], [Exited(1)])
    with pytest.raises(
        TargetError,
        match=r"exited with code 1 before it was ready; last lines of its output:\n"
        r"READY\ncrashed$",
    ):
        wait_until_ready(fake.starting("output"), ReadyWhen(pattern="READY"), poll_interval=0)


def test_deadline_is_an_error_naming_what_it_waited_for():
    fake = ScriptedServer(["starting\n", "still starting\n"], [True])
    started = time.monotonic()
    with pytest.raises(TargetError) as info:
        wait_until_ready(
            fake.starting(), ReadyWhen(pattern="NEVER", port=7000, timeout=0.3), poll_interval=0.01
        )
    waited = time.monotonic() - started
    assert str(info.value) == (
        "target 'node' (image x) was not ready within 0.3 s (waiting for 'NEVER' in its log "
        "and port 7000 to accept TCP); last lines of its log:\nstarting\nstill starting"
    )
    assert 0.3 <= waited < 2.0


def test_deadline_with_an_empty_log_says_so():
    fake = ScriptedServer([], [True])
    with pytest.raises(
        TargetError,
        match=r"\(waiting for port 1 to accept TCP\); last lines of its log:\n"
        r"\(no output\)$",
    ):
        wait_until_ready(fake.starting(), ReadyWhen(port=1, timeout=0.05), poll_interval=0.01)


def test_outputs_are_read_from_key_value_words():
    text = "ID=@old.ed25519\nlistening PORT=4321 ID=@new.ed25519\nnot=a=pair? x\n"
    assert read_outputs(text, {"public_key": "ID", "port": "PORT"}, "target 'node'", "output") == {
        "public_key": "@new.ed25519",
        "port": "4321",
    }
    assert read_outputs(text, {}, "target 'node'", "output") == {}


def test_a_missing_output_is_an_error_naming_the_key_and_param():
    with pytest.raises(TargetError) as info:
        read_outputs(
            "PORT=1\nready\n", {"port": "PORT", "public_key": "ID"}, "target 'node'", "log"
        )
    assert str(info.value) == (
        "target 'node': its log has no ID=... (needed for public_key); last lines of its "
        "log:\nPORT=1\nready"
    )


def test_port_accepts_a_listening_port_only():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert port_accepts("127.0.0.1", port, timeout=0.5)
    assert not port_accepts("127.0.0.1", port, timeout=0.5)  # closed now: refused

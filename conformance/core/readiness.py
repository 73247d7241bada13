"""Waiting for a server the harness started, and reading what it printed.

A launched process (``[targets.NAME.launch]``, target_runtime.TargetRuntime) and a
container (``[targets.NAME.container]``, containers.ContainerServer) are
ready by the same rule: a line of their log matches the ``ready`` regex
and/or their port accepts TCP, before a deadline, while they run. Both may
print ``KEY=VALUE`` words the target's ``outputs`` turn into params (a node's
public key, the port it chose). This module holds that rule and that
parser once; the callers pass how to read their log, their state and their
port.

A launched client (``launch.client``, ``[container.client]``) has started
once it connects to the harness: :func:`accept_launched_client` tells a
client that exited before connecting (it did not start) from one that runs
and does not connect (a rule's failure).
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Mapping, Protocol, TypeVar

from .target_errors import TargetError, TargetNotStarted, not_started_message

LOG_TAIL_LINES = 30
"""Lines of a server's log an error shows: enough for a stack trace."""

OUTPUT_PAIR = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\S+)")
"""One ``KEY=VALUE`` word of a server's log (``outputs``)."""


@dataclass(frozen=True)
class Exited:
    """A server process or container that has ended."""

    code: int | None
    reason: str = ""
    """What the engine says went wrong (a container's State.Error), if anything."""


@dataclass(frozen=True)
class ReadyWhen:
    """What "ready" means for one server; both conditions, when given."""

    pattern: str = ""
    """A regex some line of the log must match ("" for none)."""
    port: int | None = None
    """A port that must accept TCP (None: no port check)."""
    timeout: float = 30.0
    """Seconds from the start of the wait."""


@dataclass(frozen=True)
class StartingServer:
    """How to look at a server while it starts, and how errors name it."""

    what: str
    """Names the target (and container and image) at the start of an error."""
    log_name: str
    """What its log is called in errors: "log", "output"."""
    read_log: Callable[[], str]
    """Its log so far (since this start)."""
    state: Callable[[], bool | Exited]
    """True while it runs, False while it has not started running yet,
    an Exited once it has ended."""
    port_answers: Callable[[int], bool]
    """Whether the port accepts a TCP connection now (a short deadline)."""


def port_accepts(host: str, port: int, timeout: float) -> bool:
    """Whether ``host:port`` accepts a TCP connection within ``timeout`` s."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def log_tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.splitlines()[-lines:]) or "(no output)"


def wait_until_ready(server: StartingServer, when: ReadyWhen, poll_interval: float = 0.1) -> str:
    """Poll until the server is ready by ``when``; return its log read then
    (the outputs are in it). A server that ends first, or is not ready by
    the deadline, is a TargetError naming it and showing the end of its log.
    A server that printed the ready line and then ended is not ready: the
    cases would meet a dead node. Both errors are TargetNotStarted: the
    server did not start, which is no rule's failure."""
    pattern = re.compile(when.pattern) if when.pattern else None
    deadline = time.monotonic() + when.timeout
    while True:
        text = server.read_log()
        state = server.state()
        if (
            state is True
            and (pattern is None or pattern.search(text) is not None)
            and (when.port is None or server.port_answers(when.port))
        ):
            return text
        if isinstance(state, Exited):
            reason = f" ({state.reason})" if state.reason else ""
            # Read again: the last lines it wrote as it ended are the useful ones.
            text = server.read_log()
            raise TargetNotStarted(
                not_started_message(
                    f"{server.what} exited with code {state.code} before it was ready{reason}; "
                    f"last lines of its {server.log_name}:\n{log_tail(text)}",
                    text,
                )
            )
        if time.monotonic() > deadline:
            waiting = " and ".join(
                ([f"{when.pattern!r} in its {server.log_name}"] if when.pattern else [])
                + ([f"port {when.port} to accept TCP"] if when.port is not None else [])
            )
            raise TargetNotStarted(
                f"{server.what} was not ready within {when.timeout:g} s (waiting for "
                f"{waiting or 'it to run'}); last lines of its {server.log_name}:\n"
                f"{log_tail(server.read_log())}"
            )
        time.sleep(poll_interval)


def read_outputs(text: str, wanted: Mapping[str, str], what: str, log_name: str) -> dict[str, str]:
    """The value of each ``param = "KEY"`` of ``wanted`` from the KEY=VALUE
    words of ``text`` (where a key appears twice, the later one). A missing
    key is a TargetError."""
    found = dict(OUTPUT_PAIR.findall(text))
    values: dict[str, str] = {}
    for param, key in wanted.items():
        if key not in found:
            raise TargetError(
                f"{what}: its {log_name} has no {key}=... (needed for {param}); last lines of its "
                f"{log_name}:\n{log_tail(text)}"
            )
        values[param] = found[key]
    return values


CLIENT_POLL_SECONDS = 0.1
"""How often :func:`accept_launched_client` looks whether the client still runs."""
CLIENT_EXIT_GRACE = 0.5
"""Seconds a connection made by a client that has exited gets to reach the
harness's accept queue (the event loop accepts it after the client ended)."""

Accepted = TypeVar("Accepted")


class LaunchedClient(Protocol):
    """What a launched client offers (target_runtime.ProcessHandle,
    containers.ContainerClient)."""

    def running(self) -> bool: ...

    @property
    def returncode(self) -> int | None: ...

    def tail(self, lines: int = 20) -> str: ...


async def accept_launched_client(
    accept: Callable[[float], Awaitable[Accepted]],
    client: LaunchedClient,
    wait: float,
    what: str,
    where: str,
    connected: Callable[[], bool] = lambda: False,
) -> Accepted:
    """The first connection of a client the harness launched, taken by
    ``accept(seconds)`` (``TcpServer.accept``, ``WebSocketServer.accept``)
    within ``wait`` seconds.

    A client that exits before it connected did not start: TargetNotStarted
    naming ``what``, its exit code and the end of its output (no rule's
    failure: given the wrong arguments, say, it never reached the wire). A
    client that runs and does not connect within ``wait`` gets what
    ``accept`` raises at its deadline (DeadlineExceeded, an AssertionError:
    a failure), as does one that reached the harness without a connection
    being queued (``connected()``: e.g. its TLS handshake failed) and then
    exited."""
    task = asyncio.ensure_future(accept(wait))
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=CLIENT_POLL_SECONDS)
            if task in done:
                return task.result()
            if client.running():
                continue
            done, _ = await asyncio.wait({task}, timeout=CLIENT_EXIT_GRACE)
            if task in done:
                return task.result()
            if connected():
                return await task
            tail = client.tail(LOG_TAIL_LINES)
            raise TargetNotStarted(
                not_started_message(
                    f"{what} exited with code {client.returncode} before it connected to the harness at "
                    f"{where}; last lines of its output:\n{log_tail(tail)}",
                    tail,
                )
            )
    finally:
        if not task.done():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass

"""Fixtures of the Ripple host suites: associations with the target's
acceptor, identified ones (host-ids exchanged), and launched initiators."""

from __future__ import annotations

import json
import os
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import pytest

from conformance.core.pki import harness_server_context, run_pki
from conformance.core.readiness import accept_launched_client
from conformance.core.requirements import blocked
from conformance.core.targets import ProcessHandle, TargetRuntime
from conformance.core.transport import TcpConnection, TcpServer, WireTrace

from .peer import ACCEPTOR, HOST_ID_TYPE, INITIATOR, RipplePeer, hostname_problem, summary
from .preflight import client_context, tls_enabled
from .prerequisites import HOST_ID

CLIENT_TIMEOUT = 30
"""The launched initiator's ``--timeout``: it gives up (and exits) after this
long; the harness stops it when the case ends anyway."""


@pytest.fixture
async def open_peer(target: TargetRuntime, wire_trace: WireTrace, deadline: float):
    """``await open_peer(label)``: a TCP connection (TLS with ``params.tls``)
    to the target's acceptor, the harness as initiator. Every connection is
    aborted when the case ends."""
    opened: list[TcpConnection] = []
    context = client_context(target) if tls_enabled(target) else None

    async def opener(label: str = "") -> RipplePeer:
        conn = await TcpConnection.open(
            target.host, target.port, wire_trace, deadline, label, ssl=context
        )
        opened.append(conn)
        return RipplePeer(conn, INITIATOR)

    yield opener
    for conn in opened:
        conn.abort()


def identified(answer) -> str | None:
    """Why the acceptor's answer to the host-id MSG is not the profile's
    (an RPY carrying ``{"type":"host-id","hostname":...}``), or None."""
    if answer.type != "RPY":
        return f"the answer is an {answer.type}, not an RPY: {summary(answer)}"
    body = answer.body
    if body.get("type") != HOST_ID_TYPE:
        return f"the RPY is not a host-id message (type {body.get('type')!r}): {summary(answer)}"
    hostname = body.get("hostname")
    if not isinstance(hostname, str) or not hostname:
        return f"the host-id carries no hostname string: {summary(answer)}"
    problem = hostname_problem(hostname)
    if problem:
        return f"{problem}: {summary(answer)}"
    if answer.is_node:
        return f"the host-id came in a node frame, not a host frame: {summary(answer)}"
    return None


@pytest.fixture
def identified_peer(open_peer):
    """``await identified_peer(label)``: an association whose host-ids are
    exchanged. A target that does not answer the host-id breaks the rule of
    ``replies-with-host-id``, which every such case depends on: the case is
    blocked by it, not failed."""

    async def opener(label: str = "") -> RipplePeer:
        peer = await open_peer(label)
        try:
            answer = await peer.exchange_host_ids()
            problem = identified(answer)
        except AssertionError as exc:
            problem = str(exc)
        if problem:
            blocked(
                HOST_ID,
                "failed within this case",
                f"the host-id exchange did not complete ({problem}), so the step after it shows nothing",
            )
        peer.peer_hostname = answer.body["hostname"]
        return peer

    return opener


class LaunchedClient:
    """The target's initiator, launched at the harness's listener."""

    def __init__(
        self, server: TcpServer, process: ProcessHandle, messages: list[dict[str, Any]], wait: float
    ) -> None:
        self.server = server
        self.process = process
        self.messages = messages
        self.wait = wait

    async def accept(self) -> RipplePeer:
        try:
            # Exiting before it connects: it did not start (an error); a
            # failed TLS handshake was a connection, judged by the cases.
            conn = await accept_launched_client(
                self.server.accept,
                self.process,
                self.wait,
                "the target's initiator",
                f"{self.server.host}:{self.server.port}",
                connected=lambda: bool(self.server.tls_failures),
            )
        except AssertionError:
            raise AssertionError(
                f"the target's initiator did not connect within {self.wait} s; its output:\n"
                f"{self.process.tail()}"
            ) from None
        return RipplePeer(conn, ACCEPTOR)

    def output_tail(self) -> str:
        return self.process.tail()


DEFAULT_CLIENT_MESSAGES = (
    {"type": "ping"},
    {"type": "echo", "data": "conformance"},
    {"type": "ping"},
)
"""What a launched initiator is given to send after the host-id: three MSGs,
so that its msgno numbering (parity, uniqueness among outstanding MSGs) shows."""


@pytest.fixture
def launched_client(target: TargetRuntime, wire_trace: WireTrace, deadline: float):
    """``async with launched_client(messages=[...]) as client``: a listener on
    loopback, a messages file (a JSON array of message bodies), and the
    target's client command launched at it with the placeholders
    ``{peer_host}``, ``{peer_port}``, ``{messages_file}`` and
    ``{client_timeout}`` (with ``params.tls``, the listener speaks TLS with a
    certificate for 127.0.0.1 from the run's CA, ``{ca_file}``). The case calls ``await client.accept()`` and plays
    the acceptor; an initiator may close once its MSGs are answered, so a
    case withholds those answers until it has seen what it judges. The
    client is stopped when the case ends."""
    processes: list[ProcessHandle] = []
    launches = [0]

    @asynccontextmanager
    async def launch(
        messages: tuple[dict[str, Any], ...] | list[dict[str, Any]] = DEFAULT_CLIENT_MESSAGES,
    ) -> AsyncIterator[LaunchedClient]:
        # The initiator presents no certificate: the profile (section 1) asks for none.
        context = (
            harness_server_context(run_pki(), cert="loopback-server", require_client_cert=False)
            if tls_enabled(target)
            else None
        )
        async with TcpServer(wire_trace, deadline, ssl=context) as server:
            launches[0] += 1
            messages_file = target.work_dir / f"ripplehost-client-{launches[0]}.json"
            fd = os.open(messages_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(list(messages), handle)
            wire_trace.event(
                f"initiator launched with {len(messages)} message(s) to send: "
                + ", ".join(json.dumps(m) for m in messages)
            )
            process = target.launch_client(
                {
                    "peer_host": server.host,
                    "peer_port": server.port,
                    "messages_file": messages_file,
                    "client_timeout": CLIENT_TIMEOUT,
                }
            )
            processes.append(process)
            wait = target.target.client_connect_timeout
            yield LaunchedClient(server, process, list(messages), wait)

    yield launch
    for process in processes:
        process.stop()

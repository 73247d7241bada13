"""One STOMP client target delivering to one STOMP server target.

The harness starts the server target (``--peer``), puts a recording TCP
relay in front of it, writes a ``stomp.toml`` naming the relay (the server's
own manifest when it publishes one, as a Swaptacular client would read it;
else one made from the server's params) and a messages file, and launches
the client target's client command with the placeholders of the client-role
suite (docs/stomp-adapter.md, "Client targets"): ``{manifest_file}``,
``{node_id}``, ``{messages_file}``, ``{client_timeout}`` and the run's TLS
files. Both targets get their certificates from the same run CA
(conformance/core/pki.py, one per process), so each trusts the other.

TLS is end to end: the relay sees ciphertext only (kept in the trace, so a
failed handshake still shows its alert bytes). The cases judge by outcomes:
what the client reports (``DELIVERED=<n>``, its exit status), what the
server reports through its ``accepted`` adapter, and how many connections
the client opened through the relay.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.core.targets import TargetError, TargetRuntime
from conformance.core.transport import TcpRelay, WireTrace
from conformance.suites.stomp.adapter import AcceptedMessage, read_accepted
from conformance.suites.stomp.client_server import (
    DELIVERED_LINE,
    MESSAGE_TYPES,
    new_node_id,
    substitute,
)
from conformance.suites.stomp.peer import manifest_path, settings_of
from reference_impl.stomp.manifest import ManifestError, load_manifest, render_manifest
from reference_impl.stomp.smp import example_message, validate_message

ERROR_FRAME_PREFIX = "ERROR_FRAME "
"""A client adapter's report of an ERROR frame (client_contract.error_frame)."""

CLIENT_TIMEOUT = 30
"""The client's ``--timeout``: it gives up after this long."""

WAIT_GRACE = 10.0
"""Seconds past CLIENT_TIMEOUT the harness waits for the client to exit
before stopping it (a client ignoring its own timeout)."""

RESERVED_CREDITOR_IDS = 1 << 32
MAX_INT64 = (1 << 63) - 1


def unique_messages() -> list[dict[str, Any]]:
    """One valid SMP message of each of MESSAGE_TYPES, each with a creditor
    id drawn at random above the reserved range: no two messages of this or
    any other run share a body, so the server's records are matched to them
    by body alone (a broker keeps no receipt id)."""
    messages = []
    for type_name in MESSAGE_TYPES:
        body = example_message(type_name)
        creditor_id = RESERVED_CREDITOR_IDS + secrets.randbelow(MAX_INT64 - RESERVED_CREDITOR_IDS)
        body["creditor_id"] = creditor_id
        if body.get("coordinator_type") == "direct":
            # SMP: a "direct" coordinator is the creditor itself.
            body["coordinator_id"] = creditor_id
        problems = validate_message(type_name, body)
        if problems:
            raise TargetError(f"harness bug: the {type_name} example is not valid SMP: {problems}")
        messages.append({"type": type_name, "body": body})
    return messages


def pair_manifest(server: TargetRuntime, relay_host: str, relay_port: int) -> tuple[str, str]:
    """(manifest text naming the relay, where its values came from). The
    server's own manifest (param ``manifest_file``, e.g. from the reference
    node's ready line) is used with its ``servers`` replaced; otherwise the
    values are the server's params, as the server-role suite uses them."""
    address = f"{relay_host}:{relay_port}"
    path = manifest_path(server)
    if path is not None:
        try:
            own = load_manifest(path)
        except (OSError, ManifestError) as exc:
            raise TargetError(
                f"server {server.target.name}: its manifest {path} is unusable: {exc}"
            ) from None
        return (
            render_manifest(
                [address],
                own.host,
                own.destination,
                login=own.login,
                passcode=own.passcode,
                accepted_content_types=list(own.accepted_content_types) or None,
            ),
            f"{server.target.name}'s own manifest {path}, servers pointed at the relay",
        )
    settings = settings_of(server)
    passcode = server.credential("passcode").decode().strip() if settings.has_passcode else None
    return (
        render_manifest(
            [address],
            settings.host_header,
            settings.destination,
            login=settings.login,
            passcode=passcode,
        ),
        f"{server.target.name}'s params (stomp_host, destination, login, passcode)",
    )


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


@dataclass
class PairRun:
    """What one delivery run showed."""

    client: str
    server: str
    node_id: str
    destination: str
    """The manifest's destination with the node id put in."""
    messages: list[dict[str, Any]]
    exit_code: int | None
    output: str
    connections: int
    """Client connections the relay accepted."""
    relayed: dict[str, int] = field(default_factory=dict)
    """Bytes relayed per direction."""

    @property
    def delivered(self) -> list[int]:
        """Message positions the client reported delivered, in report order
        (a position may repeat: a client reporting twice)."""
        return [int(n) for n in DELIVERED_LINE.findall(self.output)]

    @property
    def error_frames(self) -> list[dict[str, Any]]:
        """The ERROR frames the server sent, as the client reported them
        (``ERROR_FRAME {"headers": ..., "body": ...}``, interop/stomp/
        client_contract.py): TLS is end to end, so the relay sees none."""
        frames = []
        for line in self.output.splitlines():
            if line.startswith(ERROR_FRAME_PREFIX):
                frame = _json(line[len(ERROR_FRAME_PREFIX) :])
                if isinstance(frame, dict) and isinstance(frame.get("headers"), dict):
                    frames.append(
                        {"headers": frame["headers"], "body": str(frame.get("body") or "")}
                    )
        return frames

    def server_errors(self) -> str:
        """What the server answered with ERROR, for the head of a failure
        message: ``rabbitmq sent ERROR message:"Access refused for user ''"
        (body: '...'), 6 times``; empty when it sent none."""
        frames = self.error_frames
        if not frames:
            return ""
        shown: list[str] = []
        counts: dict[str, int] = {}
        for frame in frames:
            headers, body = frame["headers"], frame["body"].strip()
            text = f"ERROR message:{headers.get('message', '')!r}" + (
                f" (body: {body[:300]!r})" if body and body != headers.get("message") else ""
            )
            if text not in counts:
                shown.append(text)
            counts[text] = counts.get(text, 0) + 1
        return f"{self.server} sent " + "; ".join(
            text + (f", {counts[text]} times" if counts[text] > 1 else "") for text in shown[:3]
        )

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self.output.splitlines()[-lines:]) or "(no output)"

    def describe(self) -> str:
        return (
            f"{self.client} -> {self.server}: client exit {self.exit_code}, {self.connections} connection(s) "
            f"through the relay, {self.relayed.get('client->server', 0)} byte(s) client->server and "
            f"{self.relayed.get('server->client', 0)} server->client (TLS records, see the trace); "
            f"DELIVERED reported: {self.delivered}"
        )


async def deliver(client: TargetRuntime, server: TargetRuntime, trace: WireTrace) -> PairRun:
    """Launch the client at the server through the relay, wait for it to
    exit (at most CLIENT_TIMEOUT + WAIT_GRACE s) and collect its report."""
    where = client.work_dir / f"stomp-interop-{secrets.token_hex(4)}"
    where.mkdir(mode=0o700, parents=True)
    node_id = new_node_id(random.Random())
    messages = unique_messages()
    async with TcpRelay(server.host, server.port, trace) as relay:
        text, source = pair_manifest(server, relay.host, relay.port)
        manifest_file, messages_file = where / "stomp.toml", where / "messages.jsonl"
        _write(manifest_file, text)
        _write(messages_file, "".join(json.dumps(m, sort_keys=True) + "\n" for m in messages))
        destination = substitute(load_manifest(manifest_file).destination, node_id)
        trace.event(
            f"client {client.target.name} launched with node id {node_id}, manifest from {source}: "
            f"{text!r}; {len(messages)} messages ({', '.join(m['type'] for m in messages)})"
        )
        process = client.launch_client(
            {
                "manifest_file": manifest_file,
                "node_id": node_id,
                "messages_file": messages_file,
                "client_timeout": CLIENT_TIMEOUT,
            }
        )
        try:
            code = await asyncio.to_thread(process.wait, CLIENT_TIMEOUT + WAIT_GRACE)
        finally:
            process.stop()
        connections = relay.connections
    relayed = {d: len(trace.bytes_in(d)) for d in ("client->server", "server->client")}
    return PairRun(
        client.target.name,
        server.target.name,
        node_id,
        destination,
        messages,
        code,
        process.output(),
        connections,
        relayed,
    )


@dataclass
class Found:
    """The server's records matched to the messages of a run, by body."""

    copies: dict[int, list[AcceptedMessage]]
    """message position -> the records whose body is that message."""
    total: int


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


async def find_messages(server: TargetRuntime, run: PairRun, when: str) -> Found:
    """Read the server's ``accepted`` adapter and find the run's messages.
    A body is compared as JSON (the client chooses the serialization: key
    order and spacing are its own), so a record matches a message when its
    body parses to the same value."""
    records = await read_accepted(server, when)
    copies: dict[int, list[AcceptedMessage]] = {n: [] for n in range(len(run.messages))}
    for record in records:
        value = _json(record.body)
        for n, message in enumerate(run.messages):
            if value == message["body"]:
                copies[n].append(record)
    return Found(copies, len(records))


def header_problems(run: PairRun, n: int, record: AcceptedMessage) -> list[str]:
    """What a stored copy of message ``n`` carries other than what the
    client was told to send (the manifest's destination with the node id,
    the SMP type, application/json)."""
    want = {
        "destination": run.destination,
        "type": run.messages[n]["type"],
        "content-type": "application/json",
    }
    got = {
        "destination": record.destination,
        "type": record.type,
        "content-type": record.content_type,
    }
    return [
        f"{key} {got[key]!r} instead of {value!r}"
        for key, value in want.items()
        if got[key] != value
    ]

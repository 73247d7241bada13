"""The harness as the STOMP server of a launched client (client-role cases).

A client-role case starts a TLS listener on loopback, writes a
``stomp.toml`` naming it and a messages file, launches the target's client
command with them, and then plays the server: it answers CONNECT with
CONNECTED, sends or withholds RECEIPTs, drops the connection. What the
client does on the wire is in the case's trace (TLS is end to end, the
trace holds the plaintext); what it believes it delivered comes from its
output, one ``DELIVERED=<n>`` line per message (docs/stomp-adapter.md,
"Client targets").

The launch placeholders a client command may use (docs/targets.md):
``{manifest_file}``, ``{node_id}``, ``{messages_file}``,
``{client_timeout}``, and the PKI paths the STOMP preflight puts into the
target's params (``{ca_file}``, ``{client_cert_file}``,
``{client_key_file}``).
"""

from __future__ import annotations

import json
import os
import random
import re
import ssl
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

import pytest

from conformance.core import node_grammar
from conformance.core.pki import harness_server_context, run_pki
from conformance.core.readiness import CLIENT_EXIT_GRACE
from conformance.core.target_errors import not_started_message
from conformance.core.targets import ProcessHandle, TargetError, TargetNotStarted, TargetRuntime
from conformance.core.transport import (
    Deadline,
    DeadlineExceeded,
    TcpConnection,
    TcpServer,
    WireTrace,
    target_bytes,
)
from reference_impl.stomp.frame import (
    HEARTBEAT,
    Frame,
    FrameError,
    FrameLimitExceeded,
    FrameParser,
    encode_frame,
)
from reference_impl.stomp.smp import example_message

from .prerequisites import CLIENT_GRAMMAR

SUBSET_CLIENT_COMMANDS = frozenset({"CONNECT", "STOMP", "SEND", "DISCONNECT"})
"""What a client may send (profile, "A Subset of the STOMP Protocol": peers
need not understand SUBSCRIBE, UNSUBSCRIBE, ACK, NACK, BEGIN, COMMIT, ABORT)."""

MESSAGE_TYPES = ("ConfigureAccount", "PrepareTransfer", "FinalizeTransfer")
"""The SMP messages a launched client is given (valid examples of each):
three, so that pipelining, cumulative receipts and resending show."""

CLIENT_TIMEOUT = 30
"""The client's ``--timeout``: it gives up (and exits) after this long. The
harness stops it when the case ends anyway; the bound is for a client
left alone (a case waiting for it to reconnect or to exit)."""

QUIET_AFTER_LAST_MESSAGE = 1.0
"""Seconds the harness listens on after every message was receipted, for a
client that keeps its connection open (the profile allows it): what it
sends then is part of the session too."""

RECONNECT_WINDOW = 15.0
"""Seconds a client has to connect again after the harness dropped its
connection. Reconnecting at once is not required; backing off a few
seconds is usual (stomp.py starts at 0.1 s, the reference client at
0.05 s doubling)."""

DELIVERED_LINE = re.compile(r"^DELIVERED=(\d{1,9})\s*$", re.MULTILINE)
"""The client's report that message ``n`` (its position in the messages
file, from 0) is delivered (docs/stomp-adapter.md, "Client targets")."""

MAX_FRAME_BYTES = 1 << 20
"""Largest frame accepted from a client: an SMP message is a few hundred
bytes; a megabyte leaves room for any sane client and bounds a broken one."""


def substitute(value: str, node_id: str) -> str:
    """Every ``${NODE_ID}`` replaced (the profile's manifest keys)."""
    return value.replace("${NODE_ID}", node_id)


MANIFEST_VALUES = {
    # Two placeholders in each value: a client replacing only the first one
    # does not follow "substitute all occurrences".
    "host": "/${NODE_ID}/vhost-${NODE_ID}",
    "login": "node-${NODE_ID}-${NODE_ID}",
    "destination": "/exchange/smp.${NODE_ID}.in-${NODE_ID}",
}


def manifest_text(host: str, port: int, values: dict[str, str] = MANIFEST_VALUES) -> str:
    lines = [f'servers = ["{host}:{port}"]']
    lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
    # An undescribed key: manifests MAY carry them, clients must not choke.
    lines.append('conformance-note = "written by the conformance harness"')
    return "\n".join(lines) + "\n"


def parse_json_body(body: bytes) -> tuple[Any, str | None]:
    """The JSON value of a SEND body, or (None, why not)."""
    try:
        return json.loads(body.decode("utf-8")), None
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 ({exc})"
    except ValueError as exc:
        return None, f"not JSON ({exc})"


def show_frame(frame: Frame) -> str:
    """A frame as the bytes a failure message shows (bounded; a passcode
    masked: the harness gives none, but a client may send its own)."""
    if frame.has("passcode"):
        frame = Frame(
            frame.command,
            tuple((k, "***" if k == "passcode" else v) for k, v in frame.headers),
            frame.body,
        )
    try:
        data = encode_frame(frame, content_length=False if b"\x00" not in frame.body else None)
    except ValueError:  # a header the encoder will not write (it was read, so it is shown as read)
        return repr(frame)[:400]
    text = data[:400].decode("utf-8", errors="replace").replace("\x00", "^@")
    return repr(text) + (f"...(+{len(data) - 400} bytes)" if len(data) > 400 else "")


class ClientConnection:
    """One connection of the launched client, as its server sees it."""

    def __init__(self, conn: TcpConnection, index: int) -> None:
        self.conn = conn
        self.index = index
        self.parser = FrameParser(max_frame_bytes=MAX_FRAME_BYTES, commands=None)
        self.frames: list[Frame] = []
        """Every frame the client sent on this connection, in order."""
        self._queue: list[Frame] = []
        self.closed = False
        self.connected = False
        self.fed = 0
        """Bytes handed to the parser (until it failed): where a frame that
        breaks the grammar starts, in the client's bytes on this connection."""

    @property
    def tls_version(self) -> str | None:
        return self.conn.tls.version() if self.conn.tls is not None else None

    def peer_certificate(self) -> dict | None:
        return self.conn.tls.getpeercert() if self.conn.tls is not None else None

    async def next_frame(self, what: str, deadline: float | Deadline | None = None) -> Frame | None:
        """The client's next frame (heart-beats skipped), None when it closed
        the connection. DeadlineExceeded when nothing whole comes in time."""
        end = (
            deadline if isinstance(deadline, Deadline) else Deadline(deadline or self.conn.deadline)
        )
        while not self._queue:
            if self.closed:
                return None
            try:
                data = await self.conn.receive_some(end)
            except DeadlineExceeded:
                raise DeadlineExceeded(
                    f"no {what} within {end.seconds:g} s"
                    + (
                        f" (partial frame: {self.parser.buffered[:200]!r})"
                        if self.parser.buffered
                        else ""
                    )
                ) from None
            if not data:
                self.closed = True
                continue
            if self.parser.failed is None:
                self.fed += len(data)
            try:
                with target_bytes(f"the client's frames ({what})", data, FrameLimitExceeded):
                    items = self.parser.receive_data(data)
            except FrameError as exc:
                # Not a bound of the harness's: the grammar case's rule
                # (core/node_grammar.py), recorded for it.
                raise node_grammar.violation(
                    CLIENT_GRAMMAR,
                    f"a frame that breaks the STOMP 1.2 frame grammar where {what} was due: "
                    f"{exc.reason}",
                    exc.data,
                    direction="client to harness",
                    offset=self.fed - len(self.parser.buffered),
                    connection=self.conn.label,
                ) from None
            for item in items:
                if item is not HEARTBEAT:
                    self.frames.append(item)
                    self._queue.append(item)
        return self._queue.pop(0)

    async def send_frame(self, frame: Frame, note: str) -> None:
        await self.conn.send(encode_frame(frame), note)

    async def answer_connect(self, frame: Frame) -> None:
        await self.send_frame(
            Frame(
                "CONNECTED",
                (("version", "1.2"), ("heart-beat", "0,0"), ("server", "conformance-harness")),
            ),
            "CONNECTED (version 1.2, no heart-beats)",
        )
        self.connected = True

    async def receipt(self, receipt: str, note: str = "") -> None:
        await self.send_frame(
            Frame("RECEIPT", (("receipt-id", receipt),)), note or f"RECEIPT for {receipt!r}"
        )

    def drop(self, note: str) -> None:
        """Cut the connection at once (no RECEIPT, no ERROR, no TLS close)."""
        self.conn.trace.event(note)
        self.conn.abort()
        self.closed = True

    async def close(self) -> None:
        await self.conn.close()


@dataclass
class Session:
    """What one connection carried when the harness played a full server."""

    connection: ClientConnection
    frames: list[Frame] = field(default_factory=list)
    sends: list[Frame] = field(default_factory=list)
    connect: Frame | None = None
    first: Frame | None = None
    ended: str = ""
    after_disconnect: list[Frame] = field(default_factory=list)
    """Frames the client sent after its DISCONNECT (read until it closed)."""
    bytes_after_disconnect: bytes = b""
    """What came after those, until the close, unparsed (EOLs are heart-beats)."""


NO_CERTIFICATE_FAILURE = "PEER_DID_NOT_RETURN_A_CERTIFICATE"
"""The TLS library's reason when a client that was asked for a certificate
sent none. Over TLS 1.3 the client's side of the handshake is done before
the server can refuse it (its Finished goes first), so a client that only
fetches the server's certificate (``ssl.get_server_certificate``) and
closes sees no failure, and sends no byte of STOMP."""
MAX_CERTIFICATE_PROBES = 3
"""Connections without a certificate and without a byte the handshake passes
over before it reports the next one as the client's failure."""


def is_certificate_probe(failure: str) -> bool:
    """Whether a failed handshake is one where the client presented no
    certificate (NO_CERTIFICATE_FAILURE)."""
    return failure.startswith(NO_CERTIFICATE_FAILURE)


@dataclass
class LaunchedClient:
    """A launched client and what it was given."""

    server: TcpServer
    process: ProcessHandle
    node_id: str
    messages: list[dict[str, Any]]
    manifest_values: dict[str, str]
    deadline: float
    wait: float
    connections: list[ClientConnection] = field(default_factory=list)
    probes: list[str] = field(default_factory=list)
    """The TLS failure (NO_CERTIFICATE_FAILURE) of each connection the
    handshake passed over as a certificate probe, in order."""

    def expected(self, key: str) -> str:
        return substitute(self.manifest_values[key], self.node_id)

    async def accept(
        self, what: str = "the client's connection", wait: float | None = None
    ) -> ClientConnection:
        """The client's next connection with its TLS handshake done. A client
        that never connects, or whose handshake fails, is an AssertionError
        showing why (and its output)."""
        connection, failure = await self.handshake(what, wait)
        if connection is None:
            probes = (
                f" (before it, connections that presented no certificate: {'; '.join(self.probes)})"
                if self.probes
                else ""
            )
            raise AssertionError(
                f"{what}: the TLS handshake failed: {failure}{probes}; the client's output:\n"
                f"{self.output_tail()}"
            )
        return connection

    async def handshake(
        self, what: str, wait: float | None = None
    ) -> tuple[ClientConnection | None, str | None]:
        """The client's next connection: ``(connection, None)`` when its TLS
        handshake completed, ``(None, reason)`` when it failed (the reason as
        the TLS library gives it). Up to MAX_CERTIFICATE_PROBES connections
        that presented no certificate are passed over as probes (they carry
        no STOMP; kept in ``probes``). A client that runs and never connects
        is an AssertionError showing its output; one that exits without ever
        having reached the harness did not start (TargetNotStarted)."""
        failures = len(self.server.tls_failures)
        wait = self.wait if wait is None else wait
        end = Deadline(wait)
        exited: Deadline | None = None
        earlier_probes = len(self.probes)
        while True:
            while len(self.server.tls_failures) > failures:
                failure = self.server.tls_failures[failures]
                failures += 1
                probes = len(self.probes) - earlier_probes
                if not is_certificate_probe(failure) or probes >= MAX_CERTIFICATE_PROBES:
                    return None, failure
                # A TLS connection that presented no certificate, on which
                # the client could send nothing (the handshake failed on our
                # side first): not a STOMP connection it proceeded with
                # (stomp.py 8.0.1 checks the server's certificate that way
                # before it connects); passed over, bounded, and shown.
                self.probes.append(failure)
            if len(self.probes) > earlier_probes and (
                end.expired or (exited is not None and exited.expired)
            ):
                # Only probes came: the last one is what the client did.
                return None, self.probes[-1]
            if exited is None and not self.process.running():
                # A connection it made before it exited may still be on its
                # way to the queue: a short grace, then nothing more can come.
                exited = Deadline(CLIENT_EXIT_GRACE)
            if exited is not None and exited.expired and self.server._accepted.empty():
                if not self.connections and not self.server.tls_failures:
                    # It never reached the harness: it did not start, which
                    # is no rule's failure (an error naming why).
                    output = self.output_tail()
                    raise TargetNotStarted(
                        not_started_message(
                            f"{what}: the client exited with code {self.process.returncode} before it "
                            f"connected to the harness at {self.server.host}:{self.server.port}; its "
                            f"output:\n{output}",
                            output,
                        )
                    )
                raise AssertionError(
                    f"{what}: the client exited (code {self.process.returncode}) without "
                    f"a connection the harness could accept; its output:\n{self.output_tail()}"
                )
            if end.expired:
                raise AssertionError(
                    f"{what}: the client did not connect to {self.server.host}:{self.server.port} "
                    f"within {wait:g} s; its output:\n{self.output_tail()}"
                )
            try:
                # Short slices: a failed handshake is a list entry, not an
                # accepted connection, so the wait must look at both.
                conn = await self.server.accept(min(0.1, max(end.remaining(), 0.01)))
            except DeadlineExceeded:
                continue
            connection = ClientConnection(conn, len(self.connections) + 1)
            self.connections.append(connection)
            return connection, None

    def output(self) -> str:
        return self.process.output()

    def output_tail(self, lines: int = 15) -> str:
        return self.process.tail(lines) or "(no output)"

    def delivered(self) -> list[int]:
        """The message positions (from 0) the client reported delivered so far."""
        return [int(n) for n in DELIVERED_LINE.findall(self.output())]

    def message_index(self, frame: Frame) -> int | None:
        """The position (from 0) of the message a SEND carries (its JSON body
        equal to one given), or None."""
        value, _ = parse_json_body(frame.body)
        for index, message in enumerate(self.messages):
            if value is not None and value == message["body"]:
                return index
        return None

    async def serve(
        self,
        connection: ClientConnection,
        *,
        receipts: bool = True,
        window: float | None = None,
        until_end: bool = False,
    ) -> Session:
        """Play a conformant server on ``connection`` until the client is
        done: CONNECTED for its CONNECT, a RECEIPT for every frame asking
        for one (``receipts``), until it closes, sends DISCONNECT, or every
        message was receipted and it stayed quiet (not with ``until_end``:
        then only the close or DISCONNECT ends it); at most ``window``
        seconds."""
        session = Session(connection)
        end = Deadline(window if window is not None else max(4 * self.deadline, 10.0))
        receipted: set[int] = set()
        quiet_from: float | None = None
        while not end.expired:
            read_for: float | Deadline = end
            if quiet_from is not None:
                read_for = min(
                    end.remaining(),
                    max(0.0, quiet_from + QUIET_AFTER_LAST_MESSAGE - time.monotonic()),
                )
                if read_for <= 0:
                    session.ended = "every message receipted; the client stayed quiet"
                    break
            try:
                frame = await connection.next_frame("a frame from the client", read_for)
            except DeadlineExceeded:
                if quiet_from is not None:
                    session.ended = "every message receipted; the client stayed quiet"
                    break
                session.ended = f"window of {end.seconds:g} s over"
                break
            if frame is None:
                session.ended = "the client closed the connection"
                break
            session.frames.append(frame)
            if session.first is None:
                session.first = frame
            if frame.command in ("CONNECT", "STOMP") and session.connect is None:
                session.connect = frame
                await connection.answer_connect(frame)
                continue
            if frame.command == "SEND":
                session.sends.append(frame)
                index = self.message_index(frame)
                if index is not None:
                    receipted.add(index)
            receipt = frame.get("receipt")
            if receipts and receipt is not None:
                await connection.receipt(receipt)
            if frame.command == "DISCONNECT":
                session.after_disconnect = list(connection._queue)
                closed, session.bytes_after_disconnect = await connection.conn.await_close(
                    min(end.remaining(), 2.0)
                )
                session.ended = "DISCONNECT" + (" and close" if closed else "")
                break
            if (
                receipts
                and len(receipted) == len(self.messages)
                and quiet_from is None
                and not until_end
            ):
                quiet_from = time.monotonic()
        else:
            session.ended = f"window of {end.seconds:g} s over"
        return session

    async def full_session(self, what: str = "the client's session") -> Session:
        """Accept the client's connection and serve it to the end."""
        connection = await self.accept(what)
        return await self.serve(connection)


def make_messages() -> list[dict[str, Any]]:
    """Valid SMP messages, one of each of MESSAGE_TYPES (distinct bodies, so
    a message sent again can be told from another one)."""
    return [{"type": type_name, "body": example_message(type_name)} for type_name in MESSAGE_TYPES]


def new_node_id(rng: random.Random) -> str:
    # SMP node IDs are decimal (the profile's example: 12345678).
    return str(rng.randrange(10**8, 10**9))


ServerCert = str
"""Which certificate the harness's server presents: "loopback-server" (the
run's CA, naming 127.0.0.1, ::1 and localhost: any conformant client accepts
it, whether it checks hostnames or not), "server" (the run's CA, naming only
stomp-server.invalid), "untrusted-server" (a CA the client was not given)."""


def server_context(
    cert: ServerCert = "loopback-server",
    *,
    maximum: ssl.TLSVersion | None = None,
    require_client_cert: bool = True,
) -> ssl.SSLContext:
    """The harness server's TLS context. ``require_client_cert``: True as a
    profile server (a trusted chain or no handshake); False asks for one
    without demanding it, so that presents-certificate can tell a client
    without a certificate from a handshake failing for another reason."""
    return harness_server_context(
        run_pki(), cert=cert, maximum=maximum, require_client_cert=require_client_cert
    )


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


@pytest.fixture
def launched_client(target: TargetRuntime, wire_trace: WireTrace, deadline: float):
    """``async with launched_client(cert=..., maximum=...) as client``: a TLS
    listener on loopback, a manifest and messages file for it, the target's
    client launched at it. The case then calls ``client.accept()`` and
    plays the server. The client is stopped when the case ends."""
    processes: list[ProcessHandle] = []
    launches = [0]

    @asynccontextmanager
    async def launch(
        cert: ServerCert = "loopback-server",
        *,
        maximum: ssl.TLSVersion | None = None,
        require_client_cert: bool = True,
    ) -> AsyncIterator[LaunchedClient]:
        rng = random.Random()
        context = server_context(cert, maximum=maximum, require_client_cert=require_client_cert)
        async with TcpServer(wire_trace, deadline, ssl=context) as server:
            launches[0] += 1
            where = target.work_dir / f"stomp-client-{launches[0]}"
            where.mkdir(mode=0o700, exist_ok=True)
            node_id = new_node_id(rng)
            messages = make_messages()
            manifest_file = where / "stomp.toml"
            messages_file = where / "messages.jsonl"
            _write(manifest_file, manifest_text(server.host, server.port))
            _write(messages_file, "".join(json.dumps(m, sort_keys=True) + "\n" for m in messages))
            wire_trace.event(
                f"client launched with node id {node_id}, manifest {manifest_text(server.host, server.port)!r}"
                f" and {len(messages)} messages ({', '.join(m['type'] for m in messages)})"
            )
            process = target.launch_client(
                {
                    "manifest_file": manifest_file,
                    "node_id": node_id,
                    "messages_file": messages_file,
                    "client_timeout": CLIENT_TIMEOUT,
                }
            )
            processes.append(process)
            wait = target.target.client_connect_timeout
            client = LaunchedClient(
                server, process, node_id, messages, dict(MANIFEST_VALUES), deadline, wait
            )
            try:
                yield client
            finally:
                for connection in client.connections:
                    if not connection.closed:
                        await connection.close()

    yield launch
    for process in processes:
        process.stop()


def reconnect_window(client: LaunchedClient) -> float:
    return max(RECONNECT_WINDOW, 3 * client.deadline)


def require_delivered_contract(client: LaunchedClient, numbers: list[int], receipted: int) -> None:
    """The client reported a message it was sent a RECEIPT for; otherwise the
    harness cannot read its deliveries at all (an adapter contract breach,
    an ``error``, never a verdict on the protocol)."""
    if not numbers:
        raise TargetError(
            f"the client printed no DELIVERED=<n> line although {receipted} message(s) were receipted: it does "
            f'not follow the client output contract (docs/stomp-adapter.md, "Client targets"); its output:\n'
            f"{client.output_tail()}"
        )
    bad = [n for n in numbers if not 0 <= n < len(client.messages)]
    if bad:
        raise TargetError(
            f"the client printed DELIVERED={bad[0]}, which names no message of the messages file "
            f'(0..{len(client.messages) - 1}, from 0; docs/stomp-adapter.md, "Client targets")'
        )

"""An active man-in-the-middle on the secret handshake, between two real nodes.

The SSB guide ("Handshake") says what the handshake must withstand: "A
man-in-the-middle could swap out the ephemeral keys in Messages 1 and 2 for
their own keys", yet msg3 is boxed so "that only the real server can read
and not a man-in-the-middle", msg4 "that only the real client can read", and
"Past handshakes cannot be replayed". :class:`ShsMitm` sits between a real
client (launched, pointed at the relay, told the real server's key) and a
real server, and attacks the handshake the four ways those sentences rule
out (:class:`Scenario`). It knows the network key (the main network's is
public) and has a long-term identity of its own; it lacks the secret keys of
both endpoints, which is the point.

In every scenario the relay also tries to win: it tries to open each box an
endpoint sends it (msg3, msg4, box stream) with every key it can derive, and
sends each endpoint a forged box (a msg4 or msg3 and a box stream frame
with a request in it) made with those keys. An :class:`EndpointReport` says,
per endpoint, what it wrote after its last legitimate handshake message,
whether it hung up in time, what the relay could open (it must be nothing)
and what it tried. Where a secret is missing the relay uses its own in its
place (its ephemeral key for the endpoint's, its identity for an unknown
long-term key): the only thing an attacker can compute.

Every byte goes through the case's :class:`WireTrace` with leg-specific
directions ("client -> relay", "relay -> server", ...); every read has a
deadline (:class:`TcpConnection`), and the box stream kept from an honest
session for replay is bounded.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Protocol

from conformance.core.targets import TargetError
from conformance.core.transport import (
    DeadlineExceeded,
    TcpConnection,
    TcpServer,
    WireTrace,
    short_hex,
)
from reference_impl.ssb import shs
from reference_impl.ssb.boxstream import BoxStreamDecoder, BoxStreamError, seal_box
from reference_impl.ssb.keys import Keypair
from reference_impl.ssb.rpc import RpcMessage

RECORDED_STREAM_LIMIT = 16 * 1024
"""Box stream bytes kept per direction from the honest session, for replay:
the first boxes (requests and answers) are what a replayer would send."""

CLIENT_EXIT_WAIT = 10.0
"""Seconds a client that the relay cut off gets to exit on its own."""

HELLO = shs.HELLO_SIZE
CLIENT_AUTH = shs.CLIENT_AUTH_SIZE
SERVER_ACCEPT = shs.SERVER_ACCEPT_SIZE


class Scenario(str, Enum):
    SUBSTITUTED_EPHEMERAL = "substituted-ephemeral-keys"
    """msg1 and msg2 carry the relay's ephemeral keys; msg3 is relayed."""
    IMPOSTOR_KEY = "impostor-long-term-key"
    """The relay answers the client as a server with its own long-term key,
    and tells the server, over the client's ephemeral key, that it is the
    client (a msg3 with the relay's identity)."""
    REPLAYED_CLIENT_HANDSHAKE = "replayed-client-handshake"
    """An honest session is recorded; its msg1, msg3 and first boxes are
    replayed to the server on a new connection."""
    REPLAYED_SERVER_HANDSHAKE = "replayed-server-handshake"
    """An honest session is recorded; its msg2, msg4 and first boxes are
    replayed to a new connection of the client."""


class ClientProcess(Protocol):
    def wait(self, timeout: float) -> int | None: ...
    def stop(self, grace: float = 3.0) -> int | None: ...
    def tail(self, lines: int = 20) -> str: ...


ClientLauncher = Callable[[str, int], ClientProcess]
"""Starts the real client pointed at (host, port), telling it the real
server's key; the client's contract (docs/targets.md) is to exit 0 only
after it replicated and verified the server's feed."""


@dataclass
class EndpointReport:
    """What one real endpoint did while the relay attacked it."""

    endpoint: str
    """"client" or "server"."""
    last_message: str
    """The last handshake message the endpoint may send in this scenario
    (the client msg3, the server msg2): after it, only hanging up is right."""
    provocation: str = ""
    """What the relay had just sent it."""
    wrote: bytes = b""
    """Bytes the endpoint wrote after ``last_message``."""
    closed: bool = False
    """Whether it hung up within the deadline."""
    opened: list[str] = field(default_factory=list)
    """Boxes the relay could open: must stay empty."""
    attempts: list[str] = field(default_factory=list)
    """What the relay tried to open or forge, and how it failed."""
    exit_code: int | None = None
    """The client's exit status (client only; None if it had to be stopped)."""
    output: str = ""

    def problems(self, deadline: float) -> list[str]:
        """How the endpoint failed to abort as the handshake requires ([] if
        it did), each phrased to follow "the client" / "the server"."""
        found = [f"let the relay open {what}" for what in self.opened]
        if self.wrote:
            found.append(
                f"wrote {len(self.wrote)} byte(s) past {self.last_message} instead of hanging up: "
                f"{short_hex(self.wrote, 96)}"
            )
        if not self.closed:
            found.append(f"kept the connection open for {deadline:g} s without closing it")
        if self.endpoint == "client" and self.exit_code == 0:
            found.append("exited 0, i.e. reported a verified replication, through the relay")
        return found

    def verdict(self, deadline: float) -> str | None:
        """The failure message for these problems, or None when it aborted."""
        problems = self.problems(deadline)
        if not problems:
            return None
        return (
            f"after {self.provocation}, the {self.endpoint} "
            + "; and ".join(problems)
            + "\nwhat the relay recorded:\n"
            + self.summary()
            + (f"\nclient output:\n{self.output}" if self.output else "")
        )

    def summary(self) -> str:
        lines = [
            f"{self.endpoint}: wrote {len(self.wrote)} byte(s) past {self.last_message}, "
            f"{'hung up' if self.closed else 'did not hang up'}"
            + (f", exit status {self.exit_code}" if self.endpoint == "client" else "")
        ]
        lines += [f"  relay could not: {what}" for what in self.attempts]
        lines += [f"  relay OPENED: {what}" for what in self.opened]
        return "\n".join(lines)


@dataclass
class MitmOutcome:
    scenario: Scenario
    client: EndpointReport | None = None
    server: EndpointReport | None = None


@dataclass
class Recording:
    """An honest session the relay passed through unchanged."""

    msg1: bytes
    msg2: bytes
    msg3: bytes
    msg4: bytes
    client_boxes: bytes
    """The client's first box stream bytes (at most RECORDED_STREAM_LIMIT)."""
    server_boxes: bytes


class _LegTrace:
    """The case's trace as one leg's connection sees it: "sent" and
    "received" become "relay -> server", "server -> relay" and so on, and
    events say which leg they happened on."""

    def __init__(self, trace: WireTrace, endpoint: str) -> None:
        self._trace = trace
        self._endpoint = endpoint
        self._directions = {"sent": f"relay -> {endpoint}", "received": f"{endpoint} -> relay"}

    def record(
        self, direction: str, data: bytes | bytearray | memoryview, note: str = "", **on: Any
    ) -> None:
        # ``on``: the connection the entry is of (TraceEntry's connection, framed).
        self._trace.record(self._directions.get(direction, direction), data, note, **on)

    def event(self, note: str, **on: Any) -> None:
        self._trace.event(f"[{self._endpoint} leg] {note}", **on)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._trace, name)


@dataclass
class _Client:
    conn: TcpConnection
    process: ClientProcess
    listener: TcpServer | None = None
    """Still listening (honest sessions only): for the client's further connections."""


@dataclass
class _Keys:
    """The shared secrets of one handshake as far as the relay can compute
    them; ``unknown`` names the ones it had to substitute."""

    ab: bytes
    aB: bytes
    Ab: bytes
    unknown: list[str]

    def why(self) -> str:
        return "; ".join(self.unknown) or "every secret known"


def _forged_request() -> bytes:
    """The body of the forged box: an RPC request for the peer's history."""
    return RpcMessage.from_json(
        1,
        {"name": ["createHistoryStream"], "args": [{"id": "@forged"}], "type": "source"},
        stream=True,
    ).encode()


def _forged_box(params: shs.BoxStreamParams) -> bytes:
    header, body = seal_box(params.encrypt_key, params.encrypt_nonce, _forged_request())
    return header + body


def _open_box_stream(data: bytes, params: shs.BoxStreamParams) -> list[bytes] | None:
    """The bodies ``data`` opens to under the relay's receive keys, or None."""
    if len(data) < 34:
        return None
    try:
        return BoxStreamDecoder(params.decrypt_key, params.decrypt_nonce).receive_data(data) or None
    except BoxStreamError:
        return None


class ShsMitm:
    """The relay. ``run(scenario)`` attacks one client session (and one
    server connection) and reports what each real endpoint did."""

    def __init__(
        self,
        *,
        trace: WireTrace,
        network_key: bytes,
        server_host: str,
        server_port: int,
        server_public: bytes,
        launch_client: ClientLauncher,
        deadline: float,
        connect_wait: float = 30.0,
        session_limit: float = 40.0,
    ) -> None:
        self.trace = trace
        self.network_key = network_key
        self.server_host = server_host
        self.server_port = server_port
        self.server_public = server_public
        self.launch_client = launch_client
        self.deadline = deadline
        self.connect_wait = connect_wait
        self.session_limit = session_limit
        self.identity = Keypair.generate()
        """The relay's own long-term key (M): presented in the impostor scenario."""
        self._client_trace = _LegTrace(trace, "client")
        self._server_trace = _LegTrace(trace, "server")
        self._open: list[TcpConnection] = []

    async def run(self, scenario: Scenario) -> MitmOutcome:
        self.trace.event(
            f"MITM scenario {scenario.value}: relay identity {self.identity.feed_id}; it knows the "
            "network key and the server's public key, no endpoint's secret key"
        )
        try:
            if scenario is Scenario.SUBSTITUTED_EPHEMERAL:
                outcome = await self._substituted_ephemeral()
            elif scenario is Scenario.IMPOSTOR_KEY:
                outcome = await self._impostor_key()
            elif scenario is Scenario.REPLAYED_CLIENT_HANDSHAKE:
                outcome = await self._replayed_client_handshake(await self._record())
            else:
                outcome = await self._replayed_server_handshake(await self._record())
            for report in (outcome.client, outcome.server):
                if report is not None:
                    self.trace.event("relay record: " + report.summary().replace("\n", "\n    "))
            return outcome
        finally:
            for conn in self._open:
                conn.abort()
            self._open.clear()

    # -- connections

    async def _start_client(self, purpose: str, keep_listening: bool = False) -> _Client:
        """Launch the client against the relay and accept its first
        connection: the one attacked. Unless ``keep_listening``, the relay
        then stops listening, so a client's retries are refused."""
        listener = TcpServer(self._client_trace, self.deadline)
        await listener.__aenter__()
        try:
            self.trace.event(f"launching the client against the relay ({purpose})")
            process = self.launch_client(listener.host, listener.port)
            try:
                conn = await listener.accept(self.connect_wait)
            except DeadlineExceeded:
                process.stop()
                raise TargetError(
                    f"the client did not connect to the relay within {self.connect_wait:g} s; "
                    f"its output:\n{process.tail()}"
                ) from None
        except BaseException:
            await listener.__aexit__(None, None, None)
            raise
        if not keep_listening:
            await listener.__aexit__(None, None, None)
        self._open.append(conn)
        return _Client(conn, process, listener if keep_listening else None)

    async def _relay_further_connections(self, client: _Client, end: float) -> None:
        """Honest session: a client command may open more connections than
        one (ssb-server's asks the peer's latest sequence first); relay
        each unchanged until the client exits or the session limit passes."""
        assert client.listener is not None
        while time.monotonic() < end and await asyncio.to_thread(client.process.wait, 0) is None:
            try:
                conn = await client.listener.accept(0.2)
            except DeadlineExceeded:
                continue
            self._open.append(conn)
            self.trace.event(
                "the client opened a further connection; relayed unchanged, not recorded"
            )
            server = await self._connect_server()
            await self._relay_boxes(conn, server)
            conn.abort()
            server.abort()

    async def _connect_server(self) -> TcpConnection:
        try:
            conn = await TcpConnection.open(
                self.server_host,
                self.server_port,
                self._server_trace,
                self.deadline,
                "the real server",
            )
        except (ConnectionError, DeadlineExceeded) as exc:
            raise TargetError(f"the relay could not reach the server: {exc}") from None
        self._open.append(conn)
        return conn

    async def _finish_client(self, client: _Client, report: EndpointReport | None) -> int | None:
        """Close the client's connection, then give it time to exit."""
        client.conn.abort()
        if client.listener is not None:
            await client.listener.__aexit__(None, None, None)
            client.listener = None
        code = await asyncio.to_thread(client.process.wait, CLIENT_EXIT_WAIT)
        if code is None:
            self.trace.event(
                f"the client was still running {CLIENT_EXIT_WAIT:g} s after the relay hung up; stopped"
            )
            client.process.stop()
        else:
            last = (client.process.tail(1).strip() or "(no output)")[:300]
            self.trace.event(f"the client exited with status {code}; its last output line: {last}")
        if report is not None:
            report.exit_code = code
            report.output = client.process.tail(10)
        return code

    def _hello_key(self, msg: bytes, step: str, sender: str) -> bytes:
        try:
            return shs.open_hello(self.network_key, msg, step=step)
        except shs.HandshakeError as exc:
            # The honest endpoint must get this right; without it there is
            # no session to attack.
            raise TargetError(
                f"the {sender}'s {step} does not verify under the network key ({exc}): "
                f"{short_hex(msg)}"
            ) from None

    async def _observe(
        self, conn: TcpConnection, report: EndpointReport, sent: bytes, note: str
    ) -> None:
        """Send the relay's last word, then watch the endpoint hang up."""
        report.provocation = note
        await conn.send_quietly(sent, note)
        report.closed, report.wrote = await conn.await_close(self.deadline)
        self.trace.event(
            f"{report.endpoint}: {'hung up' if report.closed else 'still open'} "
            f"after {len(report.wrote)} more byte(s)"
        )

    def _note(self, report: EndpointReport, text: str) -> None:
        report.attempts.append(text)
        self.trace.event(f"relay: {text}")

    def _note_dropped(self, report: EndpointReport, what: str) -> None:
        if not report.wrote and report.closed:
            self._note(
                report, f"have {what} acted on: the {report.endpoint} hung up without a word"
            )

    def _opened(self, report: EndpointReport, text: str) -> None:
        report.opened.append(text)
        self.trace.event(f"relay OPENED {text}")

    def _try_msg3(
        self, report: EndpointReport, msg3: bytes, keys: _Keys, server_public: bytes
    ) -> None:
        try:
            _, client_public = shs.open_client_auth(
                network_key=self.network_key,
                server_public=server_public,
                shared_secret_ab=keys.ab,
                shared_secret_aB=keys.aB,
                msg3=msg3,
            )
            self._opened(report, f"the client's msg3 (client key {client_public.hex()})")
        except shs.HandshakeError as exc:
            if exc.reason == "secretbox open failed":
                self._note(report, f"open the client's msg3 ({exc.reason}: {keys.why()})")
            else:
                self._opened(report, f"the client's msg3 box (then: {exc.reason})")

    def _try_written(self, report: EndpointReport, params: shs.BoxStreamParams, why: str) -> None:
        """Try to open what the endpoint wrote past its last message with
        the receive keys the relay derived."""
        data = report.wrote
        if not data:
            return
        for offset in sorted({0, SERVER_ACCEPT} if report.endpoint == "server" else {0}):
            bodies = _open_box_stream(data[offset:], params)
            if bodies:
                self._opened(
                    report,
                    f"box stream from the {report.endpoint} at offset {offset}: "
                    f"{short_hex(b''.join(bodies))}",
                )
                return
        self._note(
            report,
            f"open the {len(data)} byte(s) the {report.endpoint} wrote as box stream ({why})",
        )

    # -- the honest session, recorded

    async def _record(self) -> Recording:
        """Pass one honest session through unchanged and keep its bytes. The
        client must complete it (exit 0): a replay is only a test if the
        original was accepted."""
        self.trace.event("recording: the relay passes an honest session through unchanged")
        client = await self._start_client("honest session, to record", keep_listening=True)
        code: int | None = None
        try:
            server = await self._connect_server()
            try:
                msg1 = await client.conn.receive_exactly(HELLO, "msg1 (client hello)")
                await server.send(msg1, "msg1 relayed unchanged")
                msg2 = await server.receive_exactly(HELLO, "msg2 (server hello)")
                await client.conn.send(msg2, "msg2 relayed unchanged")
                msg3 = await client.conn.receive_exactly(CLIENT_AUTH, "msg3 (client authenticate)")
                await server.send(msg3, "msg3 relayed unchanged")
                msg4 = await server.receive_exactly(SERVER_ACCEPT, "msg4 (server accept)")
                await client.conn.send(msg4, "msg4 relayed unchanged")
                client_boxes, server_boxes = await self._relay_boxes(client.conn, server)
                await self._relay_further_connections(client, time.monotonic() + self.session_limit)
            except AssertionError as exc:
                raise TargetError(f"the honest session to record failed: {exc}") from None
            finally:
                server.abort()
        finally:
            code = await self._finish_client(client, None)
        if code != 0:
            raise TargetError(
                f"the honest session to record failed: the client exited with status {code}; "
                f"its output:\n{client.process.tail()}"
            )
        self.trace.event(
            f"recorded: {len(client_boxes)} box stream byte(s) from the client, "
            f"{len(server_boxes)} from the server"
        )
        return Recording(msg1, msg2, msg3, msg4, client_boxes, server_boxes)

    async def _relay_boxes(
        self, client: TcpConnection, server: TcpConnection
    ) -> tuple[bytes, bytes]:
        """Relay the box streams both ways until one side hangs up (then the
        other gets one deadline to follow) or the session limit passes."""
        end = time.monotonic() + self.session_limit
        kept = {"client": bytearray(), "server": bytearray()}
        pumps = [
            asyncio.ensure_future(self._pump(client, server, end, kept["client"])),
            asyncio.ensure_future(self._pump(server, client, end, kept["server"])),
        ]
        try:
            _, pending = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            if pending:
                await asyncio.wait(pending, timeout=self.deadline)
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
        return bytes(kept["client"]), bytes(kept["server"])

    async def _pump(
        self, source: TcpConnection, sink: TcpConnection, end: float, kept: bytearray
    ) -> None:
        while (remaining := end - time.monotonic()) > 0:
            try:
                data = await source.receive_some(remaining)
            except DeadlineExceeded:
                return
            if not data:
                sink.finish_sending("relay half-closes: the other side hung up")
                return
            if len(kept) < RECORDED_STREAM_LIMIT:
                kept += data[: RECORDED_STREAM_LIMIT - len(kept)]
            if not await sink.send_quietly(data, "relayed unchanged"):
                return

    # -- (a) substituted ephemeral keys

    async def _substituted_ephemeral(self) -> MitmOutcome:
        client_report = EndpointReport("client", "msg3")
        server_report = EndpointReport("server", "msg2")
        to_client = shs.generate_ephemeral_secret()
        to_server = shs.generate_ephemeral_secret()
        client = await self._start_client("substituted ephemeral keys")
        try:
            server = await self._connect_server()
            msg1 = await client.conn.receive_exactly(HELLO, "msg1 (client hello)")
            a_pub = self._hello_key(msg1, "msg1", "client")
            await server.send(
                shs.hello(self.network_key, shs.ephemeral_public(to_server)),
                "msg1 substituted: the relay's ephemeral key in place of the client's",
            )
            msg2 = await server.receive_exactly(HELLO, "msg2 (server hello)")
            b_pub = self._hello_key(msg2, "msg2", "server")
            await client.conn.send(
                shs.hello(self.network_key, shs.ephemeral_public(to_client)),
                "msg2 substituted: the relay's ephemeral key in place of the server's",
            )
            msg3 = await client.conn.receive_exactly(CLIENT_AUTH, "msg3 (client authenticate)")

            # Client leg: the relay holds a·b' (its b' and the client's a),
            # not a·B: that needs a or the server's long-term secret.
            client_keys = _Keys(
                shs.shared_secret_ab(to_client, a_pub),
                shs.client_shared_secret_aB(to_client, self.server_public),
                shs.server_shared_secret_Ab(to_client, self.identity.public),
                [
                    "a·B needs the client's ephemeral secret or the server's secret key",
                    "A·b' needs the client's key, which is inside the unopened msg3",
                ],
            )
            self._try_msg3(client_report, msg3, client_keys, self.server_public)

            # Server leg: with its own a' the relay knows a'·b and a'·B, but
            # the client's msg3 is boxed for a·b' and a·B: it can only relay it.
            server_keys = _Keys(
                shs.shared_secret_ab(to_server, b_pub),
                shs.client_shared_secret_aB(to_server, self.server_public),
                shs.client_shared_secret_Ab(self.identity, b_pub),
                ["A·b needs the client's secret key (the relay uses its own identity)"],
            )
            server_params = self._client_view_params(server_keys, to_server, b_pub)
            await self._observe(
                server,
                server_report,
                msg3 + _forged_box(server_params),
                "the client's msg3 relayed over the substituted ephemeral key, then a box "
                "stream frame forged with the keys the relay derived",
            )
            self._note(
                server_report,
                "re-box the client's msg3 for the server's session (it could not open it)",
            )
            self._note_dropped(server_report, "a forged box stream frame")
            self._try_written(
                server_report,
                self._client_view_params(server_keys, to_server, b_pub),
                server_keys.why(),
            )

            # Client leg: no msg4 comes from the server; the relay forges one.
            await self._forge_accept(client, client_report, client_keys, to_client, a_pub)
        finally:
            await self._finish_client(client, client_report)
        return MitmOutcome(Scenario.SUBSTITUTED_EPHEMERAL, client_report, server_report)

    def _client_view_params(
        self, keys: _Keys, ephemeral: bytes, b_pub: bytes
    ) -> shs.BoxStreamParams:
        """Box stream keys the relay would use as the client (identity M)."""
        return shs.box_stream_params(
            network_key=self.network_key,
            shared_secret_ab=keys.ab,
            shared_secret_aB=keys.aB,
            shared_secret_Ab=keys.Ab,
            local_public=self.identity.public,
            peer_public=self.server_public,
            local_ephemeral_public=shs.ephemeral_public(ephemeral),
            peer_ephemeral_public=b_pub,
        )

    async def _forge_accept(
        self, client: _Client, report: EndpointReport, keys: _Keys, ephemeral: bytes, a_pub: bytes
    ) -> None:
        """Send the client a msg4 and a box stream frame forged with the
        relay's keys (signed with its own identity), then watch it."""
        msg4 = shs.server_accept(
            network_key=self.network_key,
            server_keypair=self.identity,
            detached_signature_A=bytes(64),
            client_public=self.identity.public,
            shared_secret_ab=keys.ab,
            shared_secret_aB=keys.aB,
            shared_secret_Ab=keys.Ab,
        )
        params = shs.box_stream_params(
            network_key=self.network_key,
            shared_secret_ab=keys.ab,
            shared_secret_aB=keys.aB,
            shared_secret_Ab=keys.Ab,
            local_public=self.identity.public,
            peer_public=self.identity.public,
            local_ephemeral_public=shs.ephemeral_public(ephemeral),
            peer_ephemeral_public=a_pub,
        )
        await self._observe(
            client.conn,
            report,
            msg4 + _forged_box(params),
            "a msg4 forged with the keys the relay derived (signed by the relay's own key), "
            "then a forged box stream frame",
        )
        self._note(report, f"forge a msg4 the client accepts ({keys.why()})")
        self._note_dropped(report, "a forged box stream frame")
        self._try_written(report, params, keys.why())

    # -- (b) the relay's own long-term key

    async def _impostor_key(self) -> MitmOutcome:
        client_report = EndpointReport("client", "msg3")
        server_report = EndpointReport("server", "msg2")
        to_client = shs.generate_ephemeral_secret()
        impostor = shs.ServerHandshake(self.network_key, self.identity, to_client)
        client = await self._start_client("impostor long-term key")
        try:
            server = await self._connect_server()
            msg1 = await client.conn.receive_exactly(HELLO, "msg1 (client hello)")
            a_pub = self._hello_key(msg1, "msg1", "client")
            await server.send(
                msg1, "msg1 relayed unchanged (the relay will claim this ephemeral key)"
            )
            msg2 = await server.receive_exactly(HELLO, "msg2 (server hello)")
            b_pub = self._hello_key(msg2, "msg2", "server")
            await client.conn.send(
                impostor.receive_data(msg1),
                "msg2 of the relay, which plays the server with its own long-term key",
            )
            msg3 = await client.conn.receive_exactly(CLIENT_AUTH, "msg3 (client authenticate)")
            try:
                impostor.receive_data(msg3)
                self._opened(
                    client_report, "the client's msg3 as a server with the relay's own key"
                )
            except shs.HandshakeError as exc:
                self._note(
                    client_report,
                    f"open the client's msg3 as a server with the relay's own key "
                    f"({exc.reason}: the client boxed it with a·B for the key it dialled)",
                )

            # Server leg: a msg3 with the relay's identity, over the client's
            # ephemeral key: a·b and a·B both need the client's ephemeral secret.
            server_keys = _Keys(
                shs.shared_secret_ab(to_client, b_pub),
                shs.client_shared_secret_aB(to_client, self.server_public),
                shs.client_shared_secret_Ab(self.identity, b_pub),
                ["a·b and a·B need the client's ephemeral secret (the relay uses its own)"],
            )
            forged_msg3 = shs.client_auth(
                network_key=self.network_key,
                client_keypair=self.identity,
                server_public=self.server_public,
                shared_secret_ab=server_keys.ab,
                shared_secret_aB=server_keys.aB,
            )
            server_params = shs.box_stream_params(
                network_key=self.network_key,
                shared_secret_ab=server_keys.ab,
                shared_secret_aB=server_keys.aB,
                shared_secret_Ab=server_keys.Ab,
                local_public=self.identity.public,
                peer_public=self.server_public,
                local_ephemeral_public=a_pub,
                peer_ephemeral_public=b_pub,
            )
            await self._observe(
                server,
                server_report,
                forged_msg3 + _forged_box(server_params),
                "a msg3 claiming the relay's identity over the client's ephemeral key, then a "
                "forged box stream frame",
            )
            self._note(server_report, f"forge a msg3 the server accepts ({server_keys.why()})")
            self._note_dropped(server_report, "a forged box stream frame")
            self._try_written(server_report, server_params, server_keys.why())

            client_keys = _Keys(
                shs.shared_secret_ab(to_client, a_pub),
                shs.server_shared_secret_aB(self.identity, a_pub),
                shs.server_shared_secret_Ab(to_client, self.identity.public),
                [
                    "a·B needs the server's secret key (the relay has only its own)",
                    "A·b needs the client's key, inside the unopened msg3",
                ],
            )
            await self._forge_accept(client, client_report, client_keys, to_client, a_pub)
        finally:
            await self._finish_client(client, client_report)
        return MitmOutcome(Scenario.IMPOSTOR_KEY, client_report, server_report)

    # -- (c) replays

    async def _replayed_client_handshake(self, recording: Recording) -> MitmOutcome:
        report = EndpointReport("server", "msg2")
        self.trace.event("replay: the recorded client side, to the server on a new connection")
        server = await self._connect_server()
        await server.send(recording.msg1, "msg1 replayed from the recorded session")
        msg2 = await server.receive_exactly(HELLO, "msg2 (server hello)")
        b_pub = self._hello_key(msg2, "msg2", "server")
        if msg2 == recording.msg2:
            self.trace.event(
                "the server answered with the recorded session's msg2: it reused its ephemeral key"
            )
        await self._observe(
            server,
            report,
            recording.msg3 + recording.client_boxes,
            f"the recorded msg3 and the client's first {len(recording.client_boxes)} recorded "
            "box stream byte(s)",
        )
        # The relay's best guess: its own ephemeral and identity in place of
        # the recorded client's, whose secrets never crossed the wire.
        guess = shs.generate_ephemeral_secret()
        keys = _Keys(
            shs.shared_secret_ab(guess, b_pub),
            shs.client_shared_secret_aB(guess, self.server_public),
            shs.client_shared_secret_Ab(self.identity, b_pub),
            [
                "a·b and a·B need the recorded client's ephemeral secret (not on the wire) or the "
                "server's fresh one",
                "A·b needs the client's secret key",
            ],
        )
        self._note(report, f"derive this session's keys ({keys.why()})")
        self._note_dropped(report, "the recorded boxes")
        self._try_written(report, self._client_view_params(keys, guess, b_pub), keys.why())
        return MitmOutcome(Scenario.REPLAYED_CLIENT_HANDSHAKE, server=report)

    async def _replayed_server_handshake(self, recording: Recording) -> MitmOutcome:
        report = EndpointReport("client", "msg3")
        self.trace.event("replay: the recorded server side, to a new connection of the client")
        client = await self._start_client("replayed server handshake")
        try:
            msg1 = await client.conn.receive_exactly(HELLO, "msg1 (client hello)")
            a_pub = self._hello_key(msg1, "msg1", "client")
            if msg1 == recording.msg1:
                self.trace.event(
                    "the client sent the recorded session's msg1: it reused its ephemeral key"
                )
            await client.conn.send(recording.msg2, "msg2 replayed from the recorded session")
            msg3 = await client.conn.receive_exactly(CLIENT_AUTH, "msg3 (client authenticate)")
            # The relay's best guess: its own ephemeral secret for the
            # recorded server's, its own identity for the server's.
            guess = shs.generate_ephemeral_secret()
            keys = _Keys(
                shs.shared_secret_ab(guess, a_pub),
                shs.server_shared_secret_aB(self.identity, a_pub),
                shs.server_shared_secret_Ab(guess, self.identity.public),
                [
                    "a·b needs the recorded server's ephemeral secret, which never crossed the wire",
                    "a·B needs the server's secret key",
                    "A·b needs the client's key, inside msg3",
                ],
            )
            self._try_msg3(report, msg3, keys, self.server_public)
            params = shs.box_stream_params(
                network_key=self.network_key,
                shared_secret_ab=keys.ab,
                shared_secret_aB=keys.aB,
                shared_secret_Ab=keys.Ab,
                local_public=self.server_public,
                peer_public=self.identity.public,
                local_ephemeral_public=shs.ephemeral_public(guess),
                peer_ephemeral_public=a_pub,
            )
            await self._observe(
                client.conn,
                report,
                recording.msg4 + recording.server_boxes,
                f"the recorded msg4 and the server's first {len(recording.server_boxes)} "
                "recorded box stream byte(s)",
            )
            self._note_dropped(report, "the recorded msg4 and boxes")
            self._try_written(report, params, keys.why())
        finally:
            await self._finish_client(client, report)
        return MitmOutcome(Scenario.REPLAYED_SERVER_HANDSHAKE, client=report)


def network_key_of(runtime: Any, default: bytes) -> bytes:
    """A target's network key: its ``network_key`` credential (hex), else ``default``."""
    if (
        not runtime.has_credential("network_key")
        and "network_key" not in runtime.target.credentials
    ):
        return default
    raw = runtime.credential("network_key").strip()
    try:
        key = bytes.fromhex(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise TargetError(
            f"target {runtime.target.name}: network_key credential is not hex"
        ) from None
    if len(key) != shs.NETWORK_KEY_SIZE:
        raise TargetError(
            f"target {runtime.target.name}: network_key must be 32 bytes, got {len(key)}"
        )
    return key

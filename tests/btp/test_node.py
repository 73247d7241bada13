"""Tests of reference_impl.btp.node and its CLI (python -m reference_impl.btp).

Nodes run in-process on 127.0.0.1 port 0, or as subprocesses through the CLI.
Test clients are raw ``websockets`` connections speaking packets built with
the codec.  Every network read has a timeout: READ_TIMEOUT where an answer is
expected, SILENCE where the test checks that nothing comes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

from reference_impl.btp.node import (
    MAX_MESSAGE_SIZE,
    BtpError,
    BtpNode,
    RequestSpec,
    format_event,
    format_result,
    run_client,
)
from reference_impl.btp.packet import (
    ContentType,
    Error,
    Message,
    ProtocolDataEntry,
    Response,
    Transfer,
    decode_packet,
    encode_packet,
)
from reference_impl.btp.session import (
    Authenticated,
    BalanceChanged,
    Fault,
    RequestReceived,
    UnreadablePacket,
    balance_request_entry,
    parse_balance,
)

TOKEN = b"node-test-token"
READ_TIMEOUT = 5.0
SILENCE = 0.3
REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(60)


# --------------------------------------------------------------------------- helpers


def auth_packet(request_id: int = 1, token: bytes = TOKEN) -> Message:
    return Message(
        request_id, (ProtocolDataEntry("auth", 0, b""), ProtocolDataEntry("auth_token", 1, token))
    )


class Raw:
    """A test client speaking raw packets over a WebSocket."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    async def send(self, packet_or_bytes) -> None:
        if isinstance(packet_or_bytes, (bytes, str)):
            await self.ws.send(packet_or_bytes)
        else:
            await self.ws.send(encode_packet(packet_or_bytes, validate=False))

    async def recv(self, timeout: float = READ_TIMEOUT):
        message = await asyncio.wait_for(self.ws.recv(), timeout)
        assert isinstance(message, bytes), f"text message from the node: {message!r}"
        return decode_packet(message)

    async def silence(self, timeout: float = SILENCE) -> None:
        """Nothing arrives for ``timeout`` seconds and the connection stays open."""
        with pytest.raises(TimeoutError):
            message = await asyncio.wait_for(self.ws.recv(), timeout)
            pytest.fail(f"unexpected message {message!r}")

    async def closed(self, timeout: float = READ_TIMEOUT) -> int | None:
        """Wait for the node to close the WebSocket (any further messages fail the test)."""
        with pytest.raises(ConnectionClosed) as info:
            message = await asyncio.wait_for(self.ws.recv(), timeout)
            pytest.fail(f"expected a close, got {message!r}")
        return info.value.rcvd.code if info.value.rcvd else None

    async def auth(self, token: bytes = TOKEN, request_id: int = 1) -> None:
        await self.send(auth_packet(request_id, token))
        assert await self.recv() == Response(request_id)

    async def call(self, packet):
        await self.send(packet)
        return await self.recv()


@asynccontextmanager
async def running_node(**options) -> AsyncIterator[BtpNode]:
    node = BtpNode(TOKEN, **options)
    await node.start("127.0.0.1", 0)
    try:
        yield node
    finally:
        await node.close()


@asynccontextmanager
async def raw_client(node: BtpNode, **options) -> AsyncIterator[Raw]:
    async with connect(
        node.url,
        proxy=None,
        compression=None,
        open_timeout=READ_TIMEOUT,
        close_timeout=1,
        **options,
    ) as ws:
        yield Raw(ws)


def balance_message(request_id: int) -> Message:
    return Message(request_id, (balance_request_entry(),))


# --------------------------------------------------------------------------- the node, in-process


async def test_node_serves_auth_messages_transfers_and_balance():
    async with running_node(initial_balance=5, max_balance=100) as node:
        async with raw_client(node) as peer:
            await peer.auth(request_id=77)
            assert await peer.call(Message(2, (ProtocolDataEntry("ilp", 0, b"\x0c"),))) == Response(
                2
            )
            echo = ProtocolDataEntry("echo", 1, b"hi")
            assert await peer.call(Message(3, (echo,))) == Response(3, (echo,))
            assert await peer.call(Transfer(4, 50)) == Response(4)
            assert parse_balance(await peer.call(balance_message(5))) == 55
            refused = await peer.call(Transfer(6, 46))
            assert isinstance(refused, Error) and refused.code == "F08"
            assert parse_balance(await peer.call(balance_message(7))) == 55
        assert node.balance == 55


async def test_balance_persists_across_connections():
    async with running_node() as node:
        for expected in (10, 20):
            async with raw_client(node) as peer:
                await peer.auth()
                assert await peer.call(Transfer(2, 10)) == Response(2)
                assert parse_balance(await peer.call(balance_message(3))) == expected


async def test_wrong_token_gets_error_and_close():
    async with running_node() as node:
        async with raw_client(node) as peer:
            await peer.send(auth_packet(9, b"wrong"))
            error = await peer.recv()
            assert isinstance(error, Error) and error.code == "F00" and error.request_id == 9
            assert await peer.closed() == 1008


async def test_transfer_before_auth_gets_error_and_close():
    async with running_node() as node:
        async with raw_client(node) as peer:
            await peer.send(Transfer(3, 10))
            error = await peer.recv()
            assert isinstance(error, Error) and error.code == "F00" and error.request_id == 3
            await peer.closed()
        assert node.balance == 0


async def test_auth_timeout_closes_without_a_packet():
    async with running_node(auth_timeout=0.3) as node:
        async with raw_client(node) as peer:
            await peer.closed(timeout=READ_TIMEOUT)


async def test_unreadable_binary_and_text_messages_are_ignored():
    async with running_node() as node:
        async with raw_client(node) as peer:
            await peer.auth()
            for garbage in (
                b"",
                b"\x06\x00",
                b"\xff" * 20,
                bytes.fromhex("0600000001030100"),  # the envelope runs past the end
                "text!",
            ):
                await peer.send(garbage)
                await peer.silence()
            assert await peer.call(Message(4, (ProtocolDataEntry("ping", 0, b""),))) == Response(4)


async def test_bytes_after_the_envelope_are_ignored():
    """Erratum BTP-E3: the request is the envelope's; what follows is not read."""
    async with running_node() as node:
        async with raw_client(node) as peer:
            await peer.auth()
            ping = encode_packet(Message(5, (ProtocolDataEntry("ping", 0, b""),)))
            await peer.send(ping + b"\x0a\x0b\x0c\x0d")
            assert await peer.recv() == Response(5)


async def test_unreadable_before_auth_is_ignored_then_auth_works():
    async with running_node() as node:
        async with raw_client(node) as peer:
            await peer.send(b"\x01\x02\x03")
            await peer.silence()
            await peer.auth()


async def test_unexpected_response_is_ignored():
    async with running_node() as node:
        async with raw_client(node) as peer:
            await peer.auth()
            await peer.send(Response(12345))
            await peer.send(Error(12346, "F00", "NotAcceptedError", "20171115140000.000Z"))
            await peer.silence()
            assert await peer.call(Message(4, ())) == Response(4)


async def test_legacy_packet_is_ignored():
    from reference_impl.btp.packet import Fulfill

    async with running_node() as node:
        async with raw_client(node) as peer:
            await peer.auth()
            await peer.send(Fulfill(5, b"\x00" * 16, b"\x01" * 32))
            await peer.silence()


async def test_duplicate_names_get_f01_and_connection_stays():
    async with running_node() as node:
        async with raw_client(node) as peer:
            await peer.auth()
            error = await peer.call(
                Message(4, (ProtocolDataEntry("a", 0, b""), ProtocolDataEntry("a", 0, b"")))
            )
            assert isinstance(error, Error) and error.code == "F01"
            assert await peer.call(Message(5, ())) == Response(5)


async def test_oversized_message_closes_with_1009():
    async with running_node() as node:
        async with raw_client(node, max_size=None) as peer:
            await peer.auth()
            big = Message(4, (ProtocolDataEntry("ilp", 0, b"\x00" * MAX_MESSAGE_SIZE),))
            await peer.send(big)
            assert await peer.closed() == 1009


async def test_message_just_under_the_limit_is_served():
    async with running_node() as node:
        async with raw_client(node) as peer:
            await peer.auth()
            data = b"\x00" * (64 * 1024)
            assert await peer.call(Message(4, (ProtocolDataEntry("ilp", 0, data),))) == Response(4)


async def test_node_close_ends_connections():
    node = BtpNode(TOKEN)
    await node.start()
    async with raw_client(node) as peer:
        await peer.auth()
        await node.close()
        await peer.closed()


# --------------------------------------------------------------------------- run_client


async def test_run_client_against_node_both_directions():
    events: list = []
    async with running_node(
        requests=[
            RequestSpec.transfer(4),
            RequestSpec.message("echo", "back"),
            RequestSpec.balance(),
        ],
        on_event=lambda peer, event: events.append(event),
    ) as node:
        run = await run_client(
            node.url,
            TOKEN,
            [RequestSpec.transfer(7), RequestSpec.balance(), RequestSpec.message("echo", "x")],
            stay=0.5,
            timeout=READ_TIMEOUT,
        )
        assert [result.ok for result in run.results] == [True, True, True]
        assert parse_balance(run.results[1].packet) == 7
        assert run.results[2].packet.protocol_data == (ProtocolDataEntry("echo", 1, b"x"),)
        # the node's requests to the client, served by it during --stay
        for _ in range(50):
            if len(node.results) == 3:
                break
            await asyncio.sleep(0.05)
        assert [result.ok for result in node.results] == [True, True, True]
        assert parse_balance(node.results[2].packet) == 4
        assert run.balance == 4
    assert any(isinstance(event, Authenticated) for event in events)
    assert BalanceChanged(7, 7) in events


async def test_run_client_error_answer_is_a_result():
    async with running_node(max_balance=3) as node:
        run = await run_client(node.url, TOKEN, [RequestSpec.transfer(4)], timeout=READ_TIMEOUT)
        [result] = run.results
        assert not result.ok and result.packet.code == "F08"


async def test_run_client_wrong_token():
    async with running_node() as node:
        with pytest.raises(BtpError) as info:
            await run_client(node.url, b"wrong", timeout=READ_TIMEOUT)
        assert info.value.kind == "auth"


async def test_run_client_connect_refused():
    async with running_node() as node:
        url = node.url
    with pytest.raises(BtpError) as info:
        await run_client(url, TOKEN, timeout=2)
    assert info.value.kind == "connect"


async def test_run_client_silent_server_times_out():
    async def mute(ws):
        try:
            async for _ in ws:
                pass
        except ConnectionClosed:
            pass

    async with serve(mute, "127.0.0.1", 0) as server:
        port = list(server.sockets)[0].getsockname()[1]
        with pytest.raises(BtpError) as info:
            await run_client(f"ws://127.0.0.1:{port}/", TOKEN, timeout=0.5)
        assert info.value.kind == "timeout"


async def test_run_client_ignores_garbage_from_server():
    """A server that sends unreadable data, then answers properly."""

    async def noisy(ws):
        auth = decode_packet(await ws.recv())
        await ws.send(b"\xde\xad")
        await ws.send("text")
        await ws.send(encode_packet(Response(12345)))  # unexpected
        await ws.send(encode_packet(Response(auth.request_id)))
        request = decode_packet(await ws.recv())
        await ws.send(encode_packet(Response(request.request_id)))
        await asyncio.sleep(0.5)

    events: list = []
    async with serve(noisy, "127.0.0.1", 0) as server:
        port = list(server.sockets)[0].getsockname()[1]
        run = await run_client(
            f"ws://127.0.0.1:{port}/",
            TOKEN,
            [RequestSpec.message("ping", "")],
            timeout=READ_TIMEOUT,
            on_event=events.append,
        )
    assert [result.ok for result in run.results] == [True]
    assert sum(isinstance(event, UnreadablePacket) for event in events) == 2


# --------------------------------------------------------------------------- faults, each against a correct node


async def _probe(fault: Fault | None) -> dict:
    """Run one probe per fault against a node with ``fault`` (None: correct);
    returns what each probe observed."""
    seen: dict = {}
    async with running_node(max_balance=10, faults=[fault] if fault else []) as node:
        async with raw_client(node) as peer:  # before auth
            await peer.send(Transfer(3, 1))
            answer = await peer.recv()
            seen["no-auth-required"] = type(answer).__name__
        async with raw_client(node) as peer:
            await peer.send(auth_packet(1, b"not the token"))
            seen["accept-wrong-token"] = type(await peer.recv()).__name__
        async with raw_client(node) as peer:
            await peer.auth()
            await peer.send(Response(4242))
            try:
                seen["reply-to-unexpected"] = type(await peer.recv(SILENCE)).__name__
            except TimeoutError:
                seen["reply-to-unexpected"] = None
            await peer.send(b"\x06\x00\x00\x00\x07\x7f")
            try:
                seen["reply-to-unreadable"] = type(await peer.recv(SILENCE)).__name__
            except TimeoutError:
                seen["reply-to-unreadable"] = None
            answer = await peer.call(Message(500, ()))
            seen["wrong-request-id"] = answer.request_id
            before = parse_balance(await peer.call(balance_message(600)))
            refused = await peer.call(Transfer(601, 1000))
            assert isinstance(refused, Error) and refused.code == "F08"
            after = parse_balance(await peer.call(balance_message(602)))
            seen["balance-on-error"] = after - before
    return seen


CORRECT = {
    "no-auth-required": "Error",
    "accept-wrong-token": "Error",
    "reply-to-unexpected": None,
    "reply-to-unreadable": None,
    "wrong-request-id": 500,
    "balance-on-error": 0,
}


async def test_correct_node_passes_every_probe():
    seen = await _probe(None)
    # no-auth-required probe's Transfer before auth was refused: balance unchanged
    assert seen == CORRECT


# The faults this probe table observes; every fault (these too) is checked
# end to end by its conformance cases in tests/mutation/.
@pytest.mark.parametrize("fault", [Fault(name) for name in CORRECT], ids=list(CORRECT))
async def test_each_fault_changes_exactly_its_behaviour(fault):
    seen = await _probe(fault)
    changed = {name for name in CORRECT if seen[name] != CORRECT[name]}
    assert changed == {fault.value}, seen


# --------------------------------------------------------------------------- output formatting


def test_format_event_redacts_tokens():
    packet = Message(
        1, (ProtocolDataEntry("auth", 0, b""), ProtocolDataEntry("auth_token", 1, b"topsecret"))
    )
    line = format_event(RequestReceived(packet))
    assert line.startswith("BTP_RECEIVED ") and "topsecret" not in line
    assert "746f70736563726574" not in line  # nor its hex


def test_format_result_balance():
    from reference_impl.btp.node import RequestResult
    from reference_impl.btp.session import balance_response_entry

    line = format_result(
        RequestResult(RequestSpec.balance(), 5, Response(5, (balance_response_entry(9),)))
    )
    body = json.loads(line.split(" ", 1)[1])
    assert body["request"] == "balance" and body["balance"] == "9" and body["type"] == "Response"


def test_request_spec_validation():
    with pytest.raises(ValueError):
        RequestSpec.transfer(-1)
    with pytest.raises(ValueError):
        RequestSpec.transfer(2**64)
    assert (
        RequestSpec.message("ilp", b"\x00", ContentType.APPLICATION_OCTET_STREAM).label
        == "message:ilp"
    )


# --------------------------------------------------------------------------- the CLI


def _cli(*args: str, env: dict | None = None, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "reference_impl.btp", *args],
        cwd=REPO_ROOT,
        text=True,
        capture_output=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_bytes(TOKEN + b"\n")  # one trailing newline is dropped
    return path


class ServeProcess:
    def __init__(self, proc: subprocess.Popen, url: str, port: int, first_line: str) -> None:
        self.proc, self.url, self.port, self.first_line = proc, url, port, first_line

    def stop(self) -> tuple[str, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=10)
        return out, err


@pytest.fixture
def serve_cli(token_file: Path):
    started: list[ServeProcess] = []

    def start(*extra: str) -> ServeProcess:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "reference_impl.btp",
                "serve",
                "--port",
                "0",
                "--auth-token-file",
                str(token_file),
                *extra,
            ],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = _readline(proc, READ_TIMEOUT * 2)
        fields = dict(part.split("=", 1) for part in line.split()[1:])
        server = ServeProcess(proc, fields["url"], int(fields["port"]), line)
        started.append(server)
        return server

    yield start
    for server in started:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(timeout=10)


def _readline(proc: subprocess.Popen, timeout: float) -> str:
    """One stdout line of ``proc``, with a deadline."""
    import selectors

    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    if not selector.select(timeout):
        proc.kill()
        pytest.fail(f"no output line within {timeout} s; stderr: {proc.stderr.read()}")
    return proc.stdout.readline().rstrip("\n")


def test_cli_serve_and_client(serve_cli, token_file: Path, tmp_path: Path):
    ready = tmp_path / "ready.json"
    server = serve_cli("--max-balance", "100", "--ready-file", str(ready))
    assert server.first_line == f"BTP_READY url=ws://127.0.0.1:{server.port}/ port={server.port}"
    assert json.loads(ready.read_text())["port"] == server.port
    done = _cli(
        "client",
        "--url",
        server.url,
        "--auth-token-env",
        "BTP_TEST_TOKEN",
        "--send-transfer",
        "60",
        "--send-balance",
        "--send-message",
        "echo:hello",
        "--send-data",
        "ilp:0c01",
        env={"BTP_TEST_TOKEN": TOKEN.decode()},
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("BTP_AUTHENTICATED ")
    responses = [
        json.loads(line.split(" ", 1)[1]) for line in lines if line.startswith("BTP_RESPONSE ")
    ]
    assert [r["request"] for r in responses] == [
        "transfer:60",
        "balance",
        "message:echo",
        "message:ilp",
    ]
    assert all(r["type"] == "Response" for r in responses)
    assert responses[1]["balance"] == "60"
    assert responses[2]["protocol_data"][0]["data_text"] == "hello"
    # refused transfer: exit 6, one error line
    refused = _cli(
        "client", "--url", server.url, "--auth-token-file", str(token_file), "--send-transfer", "41"
    )
    assert refused.returncode == 6
    assert refused.stderr.strip().count("\n") == 0 and "F08" in refused.stderr
    # wrong token: exit 3
    wrong = _cli("client", "--url", server.url, "--auth-token-env", "T", env={"T": "wr0ng-s3cret"})
    assert wrong.returncode == 3 and wrong.stderr.startswith("error: ")
    out, err = server.stop()
    assert server.proc.returncode == 0
    assert out.count("BTP_READY") == 0  # only the first line, already read
    assert "BTP_BALANCE" in out and "BTP_AUTH_FAILED" in out
    for text in (out, err, done.stdout, done.stderr, wrong.stdout, wrong.stderr):
        assert TOKEN.decode() not in text and "wr0ng-s3cret" not in text


def test_cli_serve_sends_requests_to_clients(serve_cli, token_file: Path):
    server = serve_cli("--send-transfer", "5", "--send-balance")
    done = _cli("client", "--url", server.url, "--auth-token-file", str(token_file), "--stay", "1")
    assert done.returncode == 0, done.stderr
    assert any(
        line.startswith("BTP_BALANCE ") and '"balance":"5"' in line
        for line in done.stdout.splitlines()
    )
    out, _ = server.stop()
    responses = [
        json.loads(line.split(" ", 1)[1])
        for line in out.splitlines()
        if line.startswith("BTP_RESPONSE ")
    ]
    assert [r["request"] for r in responses] == ["transfer:5", "balance"]
    assert responses[1]["balance"] == "5"


def test_cli_serve_fault(serve_cli):
    server = serve_cli("--fault", "accept-wrong-token")
    done = _cli(
        "client",
        "--url",
        server.url,
        "--auth-token-env",
        "T",
        "--send-message",
        "x:y",
        env={"T": "whatever"},
    )
    assert done.returncode == 0, done.stderr
    server.stop()


def test_cli_client_errors(tmp_path: Path):
    missing_env = _cli(
        "client", "--url", "ws://127.0.0.1:9/", "--auth-token-env", "NO_SUCH_VARIABLE_X"
    )
    assert missing_env.returncode == 2 and missing_env.stderr.startswith("error: ")
    missing_file = _cli(
        "client", "--url", "ws://127.0.0.1:9/", "--auth-token-file", str(tmp_path / "nope")
    )
    assert missing_file.returncode == 2
    bad = tmp_path / "bad"
    bad.write_bytes(b"\xff\xfe")
    assert (
        _cli("client", "--url", "ws://127.0.0.1:9/", "--auth-token-file", str(bad)).returncode == 2
    )
    refused = _cli(
        "client",
        "--url",
        "ws://127.0.0.1:9/",
        "--auth-token-env",
        "T",
        "--timeout",
        "2",
        env={"T": "x"},
    )
    assert refused.returncode == 1 and refused.stderr.startswith("error: cannot connect")
    assert len(refused.stderr.strip().splitlines()) == 1
    usage = _cli("client", "--url", "ws://x/", "--auth-token-env", "T", "--send-transfer", "-3")
    assert usage.returncode == 2

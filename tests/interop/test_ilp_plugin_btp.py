"""Interop of the reference BTP node with ilp-plugin-btp (npm, pinned in
interop/node/package.json), run through scripts/ilp-plugin-btp.sh.

Both directions: the reference client against the plugin's server mode, and
the plugin's client mode against the reference node; each side
authenticates, sends Messages (the plugin's sendData: primary ``ilp``,
octet-stream) and Transfers (sendMoney) and serves the other's, and both ask
the other for its balance (docs/btp-adapter.md).

The ``test_plugin_*`` tests at the end pin down how ilp-plugin-btp 1.5.0
treats packets the spec has rules for, including where it deviates from
RFC 23 (docs/btp-adapter.md, "ilp-plugin-btp 1.5.0"): if an upgrade changes
that behaviour, these tests say so.  Every read has a timeout.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from ..last_certification import known_not_passed
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from reference_impl.btp.node import BtpError, BtpNode, RequestSpec, run_client
from reference_impl.btp.packet import (
    ContentType,
    Error,
    Fulfill,
    Message,
    ProtocolDataEntry,
    Response,
    Transfer,
    decode_packet,
    encode_packet,
)
from reference_impl.btp.session import BalanceChanged, RequestReceived, parse_balance

from .node_env import REPO_ROOT, requires_node_modules

pytestmark = [pytest.mark.node_interop, requires_node_modules, pytest.mark.timeout(120)]

SCRIPT = REPO_ROOT / "scripts" / "ilp-plugin-btp.sh"
TOKEN = "interop-token-1"
READ_TIMEOUT = 10.0
SILENCE = 0.5


# --------------------------------------------------------------------------- helpers


class PluginProcess:
    """scripts/ilp-plugin-btp.sh running as a subprocess; its stdout lines parsed."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self.url = ""

    async def readline(self, timeout: float = READ_TIMEOUT) -> str:
        assert self.proc.stdout is not None
        raw = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not raw:
            raise EOFError("ilp-plugin-btp.sh closed its stdout")
        line = raw.decode().rstrip("\n")
        self.lines.append(line)
        return line

    async def wait_for(self, tag: str, timeout: float = READ_TIMEOUT) -> str:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            line = await self.readline(max(0.01, deadline - loop.time()))
            if line.startswith(tag):
                return line

    async def finish(self, timeout: float = READ_TIMEOUT) -> tuple[int, list[str], str]:
        """Wait for exit (killing it after ``timeout``); returns (code, all stdout lines, stderr)."""
        try:
            out, err = await asyncio.wait_for(self.proc.communicate(), timeout)
        except TimeoutError:
            self.proc.kill()
            out, err = await self.proc.communicate()
        self.lines.extend(out.decode().splitlines())
        return self.proc.returncode, self.lines, err.decode()

    def records(self, tag: str) -> list[dict]:
        return [
            json.loads(line.split(" ", 1)[1]) for line in self.lines if line.startswith(tag + " ")
        ]


async def start_plugin(*args: str) -> PluginProcess:
    proc = await asyncio.create_subprocess_exec(
        str(SCRIPT),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "BTP_INTEROP_TOKEN": TOKEN},
    )
    return PluginProcess(proc)


@asynccontextmanager
async def plugin_server(*args: str) -> AsyncIterator[PluginProcess]:
    plugin = await start_plugin(
        "server", "--port", "0", "--host", "127.0.0.1", "--token-env", "BTP_INTEROP_TOKEN", *args
    )
    try:
        ready = await plugin.wait_for("BTP_READY ", timeout=30)
        fields = dict(part.split("=", 1) for part in ready.split()[1:])
        plugin.url = fields["url"]
        assert plugin.url == f"ws://127.0.0.1:{fields['port']}/"
        yield plugin
    finally:
        if plugin.proc.returncode is None:
            plugin.proc.terminate()
            try:
                await asyncio.wait_for(plugin.proc.wait(), 10)
            except TimeoutError:
                plugin.proc.kill()
                await plugin.proc.wait()


def auth_packet(request_id: int, token: str = TOKEN) -> Message:
    return Message(
        request_id,
        (ProtocolDataEntry("auth", 0, b""), ProtocolDataEntry("auth_token", 1, token.encode())),
    )


@asynccontextmanager
async def raw(url: str) -> AsyncIterator[ClientConnection]:
    async with connect(
        url, proxy=None, compression=None, open_timeout=READ_TIMEOUT, close_timeout=1
    ) as ws:
        yield ws


async def recv_packet(ws: ClientConnection, timeout: float = READ_TIMEOUT):
    message = await asyncio.wait_for(ws.recv(), timeout)
    assert isinstance(message, bytes)
    return decode_packet(message)


async def authenticate(ws: ClientConnection, request_id: int = 1) -> None:
    await ws.send(encode_packet(auth_packet(request_id)))
    assert await recv_packet(ws) == Response(request_id)


async def expect_close(ws: ClientConnection, timeout: float = READ_TIMEOUT) -> None:
    with pytest.raises(ConnectionClosed):
        message = await asyncio.wait_for(ws.recv(), timeout)
        pytest.fail(f"expected the plugin to close, got {message!r}")


async def expect_silence_open(ws: ClientConnection, timeout: float = SILENCE) -> None:
    with pytest.raises(TimeoutError):
        message = await asyncio.wait_for(ws.recv(), timeout)
        pytest.fail(f"expected silence, got {message!r}")


# --------------------------------------------------------------------------- reference client -> plugin server


async def test_reference_client_with_plugin_server():
    async with plugin_server(
        "--send-message", "from-plugin", "--send-money", "7", "--send-balance", "--stay", "3"
    ) as plugin:
        events: list = []
        run = await run_client(
            plugin.url,
            TOKEN.encode(),
            [
                RequestSpec.message("ilp", b"\x0c\x01hello", ContentType.APPLICATION_OCTET_STREAM),
                RequestSpec.transfer(25),
                RequestSpec.transfer(5),
                RequestSpec.balance(),
            ],
            stay=1.5,
            timeout=READ_TIMEOUT,
            on_event=events.append,
        )
        code, lines, err = await plugin.finish()

    # our requests, answered by ilp-plugin-btp
    ilp, transfer, transfer2, balance = run.results
    assert all(result.ok for result in run.results), run.results
    assert ilp.packet.protocol_data == (ProtocolDataEntry("ilp", 0, b"echo:\x0c\x01hello"),)
    assert transfer.packet == Response(transfer.request_id)
    assert transfer2.packet == Response(transfer2.request_id)
    assert parse_balance(balance.packet) == 30
    # its requests, served by us
    requests = [event.packet for event in events if isinstance(event, RequestReceived)]
    assert requests[0] == Message(
        requests[0].request_id, (ProtocolDataEntry("ilp", 0, b"from-plugin"),)
    )
    assert requests[1] == Transfer(requests[1].request_id, 7)
    assert requests[2].protocol_data == (ProtocolDataEntry("balance", 2, b"{}"),)
    assert BalanceChanged(7, 7) in events and run.balance == 7
    # and what the plugin saw
    assert code == 0, err
    assert plugin.records("BTP_DATA") == [
        {"data_hex": "0c0168656c6c6f", "data_text": "\x0c\x01hello"}
    ]
    assert [r["amount"] for r in plugin.records("BTP_MONEY")] == ["25", "5"]
    responses = plugin.records("BTP_RESPONSE")
    assert [r["request"] for r in responses] == ["message", "money:7", "balance"]
    assert all(r["ok"] for r in responses)
    assert responses[0]["ilp_hex"] == ""  # the reference node answers ilp with an empty Response
    assert responses[2]["balance"] == "7"
    assert TOKEN not in "\n".join(lines) + err


async def test_reference_client_with_wrong_token_is_refused_by_plugin():
    async with plugin_server() as plugin:
        with pytest.raises(BtpError) as info:
            await run_client(plugin.url, b"not-the-token", timeout=READ_TIMEOUT)
        assert info.value.kind == "auth" and "F00" in str(info.value)


async def test_reference_client_cli_with_plugin_server():
    async with plugin_server("--stay", "2") as plugin:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "reference_impl.btp",
            "client",
            "--url",
            plugin.url,
            "--auth-token-env",
            "BTP_INTEROP_TOKEN",
            "--send-data",
            "ilp:0c00",
            "--send-transfer",
            "3",
            "--send-balance",
            cwd=REPO_ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "BTP_INTEROP_TOKEN": TOKEN},
        )
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    responses = [
        json.loads(line.split(" ", 1)[1])
        for line in out.decode().splitlines()
        if line.startswith("BTP_RESPONSE ")
    ]
    assert [r["request"] for r in responses] == ["message:ilp", "transfer:3", "balance"]
    assert responses[0]["protocol_data"][0]["data_hex"] == b"echo:\x0c\x00".hex()
    assert responses[2]["balance"] == "3"


# --------------------------------------------------------------------------- plugin client -> reference server


async def test_plugin_client_with_reference_server():
    events: list = []
    async with BtpNode(
        TOKEN.encode(),
        requests=[
            RequestSpec.message("ilp", b"from-node", ContentType.APPLICATION_OCTET_STREAM),
            RequestSpec.transfer(9),
            RequestSpec.balance(),
        ],
        on_event=lambda peer, event: events.append(event),
    ) as node:
        plugin = await start_plugin(
            "client",
            "--url",
            node.url,
            "--token-env",
            "BTP_INTEROP_TOKEN",
            "--send-message",
            "hello",
            "--send-money",
            "4",
            "--send-money",
            "6",
            "--send-balance",
            "--stay",
            "1.5",
        )
        code, lines, err = await plugin.finish(timeout=30)
        node_results = list(node.results)
        node_balance = node.balance

    assert code == 0, err
    assert "BTP_CONNECTED" in "\n".join(lines)
    responses = plugin.records("BTP_RESPONSE")
    assert [r["request"] for r in responses] == ["message", "money:4", "money:6", "balance"]
    assert all(r["ok"] for r in responses)
    assert responses[3]["balance"] == "10"
    assert plugin.records("BTP_DATA") == [
        {"data_hex": b"from-node".hex(), "data_text": "from-node"}
    ]
    assert [r["amount"] for r in plugin.records("BTP_MONEY")] == ["9"]
    # what the reference node saw and got back
    requests = [event.packet for event in events if isinstance(event, RequestReceived)]
    assert requests[0].protocol_data == (ProtocolDataEntry("ilp", 0, b"hello"),)
    assert [p.amount for p in requests if isinstance(p, Transfer)] == [4, 6]
    assert node_balance == 10
    ilp, money, balance = node_results
    assert ilp.packet.protocol_data == (ProtocolDataEntry("ilp", 0, b"echo:from-node"),)
    assert money.packet == Response(money.request_id)
    assert parse_balance(balance.packet) == 9


async def test_plugin_client_auth_message_is_conformant():
    """The plugin's auth Message: primary auth (type 0, empty), auth_username
    and auth_token (text/plain); accepted by the reference node."""
    events: list = []
    async with BtpNode(TOKEN.encode(), on_event=lambda peer, event: events.append(event)) as node:
        plugin = await start_plugin("client", "--url", node.url, "--token-env", "BTP_INTEROP_TOKEN")
        code, _, err = await plugin.finish(timeout=30)
    assert code == 0, err
    assert any(type(event).__name__ == "Authenticated" for event in events)


async def test_plugin_client_with_wrong_token_is_refused_by_reference_server():
    async with BtpNode(b"another-token") as node:
        plugin = await start_plugin(
            "client", "--url", node.url, "--token-env", "BTP_INTEROP_TOKEN", "--timeout", "5"
        )
        code, _, err = await plugin.finish(timeout=30)
    assert code == 3, err


# --------------------------------------------------------------------------- how the plugin treats the rules


async def test_plugin_ignores_unexpected_response():
    async with plugin_server() as plugin, raw(plugin.url) as ws:
        await authenticate(ws)
        await ws.send(encode_packet(Response(0x4D)))
        await expect_silence_open(ws)
        await ws.send(encode_packet(Message(2, ())))
        assert await recv_packet(ws) == Response(2)


async def test_plugin_refuses_transfer_before_auth_and_closes():
    async with plugin_server() as plugin, raw(plugin.url) as ws:
        await ws.send(encode_packet(Transfer(4, 5)))
        error = await recv_packet(ws)
        assert isinstance(error, Error) and error.code == "F00" and error.name == "NotAcceptedError"
        assert error.request_id == 4
        await expect_close(ws)


async def test_plugin_refuses_wrong_token_and_closes():
    async with plugin_server() as plugin, raw(plugin.url) as ws:
        await ws.send(encode_packet(auth_packet(3, "nope")))
        error = await recv_packet(ws)
        assert isinstance(error, Error) and error.code == "F00" and error.request_id == 3
        await expect_close(ws)


@pytest.mark.parametrize(
    "payload",
    [
        bytes.fromhex("06000000"),  # truncated header
        "hello",  # a text message
        encode_packet(Fulfill(5, b"\x00" * 16, b"\x01" * 32)),  # legacy BTP 1 type 4
    ],
    ids=["truncated", "text", "legacy-type"],
)
async def test_plugin_deviation_closes_on_unreadable_packet(payload):
    """RFC 23 Flow: an unreadable packet gets no response and the connection
    goes on.  ilp-plugin-btp sends nothing but closes the WebSocket."""
    async with plugin_server() as plugin, raw(plugin.url) as ws:
        await authenticate(ws)
        await ws.send(payload)
        await expect_close(ws)


async def test_plugin_deviation_accepts_duplicate_protocol_names():
    """RFC 23 Authentication: two sub-protocols with the same name violate the
    protocol (Error).  ilp-plugin-btp answers with a Response built from the
    last of them."""
    async with plugin_server() as plugin, raw(plugin.url) as ws:
        await authenticate(ws)
        request = Message(9, (ProtocolDataEntry("ilp", 0, b"a"), ProtocolDataEntry("ilp", 0, b"b")))
        await ws.send(encode_packet(request))
        assert await recv_packet(ws) == Response(9, (ProtocolDataEntry("ilp", 0, b"echo:b"),))


async def test_plugin_deviation_accepts_malformed_auth_entry_and_duplicate_token():
    """The auth entry MUST be content type 0 with empty data; ilp-plugin-btp
    accepts content type 2 with data, and a second auth_token entry."""
    async with plugin_server() as plugin, raw(plugin.url) as ws:
        auth = Message(
            3,
            (
                ProtocolDataEntry("auth", 2, b"{}"),
                ProtocolDataEntry("auth_token", 1, TOKEN.encode()),
                ProtocolDataEntry("auth_token", 1, b"other"),
            ),
        )
        await ws.send(encode_packet(auth))
        assert await recv_packet(ws) == Response(3)


async def test_plugin_deviation_has_no_auth_timeout():
    """RFC 23: the server answers with an Error (or informs and closes) if
    auth takes too long.  ilp-plugin-btp waits without limit."""
    async with plugin_server() as plugin, raw(plugin.url) as ws:
        await expect_silence_open(ws, timeout=1.5)
        await authenticate(ws, 5)


async def test_plugin_deviation_error_name_does_not_match_code():
    """The Error codes table pairs F00 with NotAcceptedError; ilp-plugin-btp
    sends the JavaScript exception's name (here SyntaxError, for a JSON
    entry that is not JSON) with code F00."""
    async with plugin_server() as plugin, raw(plugin.url) as ws:
        await authenticate(ws)
        await ws.send(encode_packet(Message(10, (ProtocolDataEntry("foo", 2, b"{x"),))))
        error = await recv_packet(ws)
        assert isinstance(error, Error) and error.request_id == 10
        assert (error.code, error.name) == ("F00", "SyntaxError")
        assert json.loads(error.data)["message"]
        await expect_silence_open(ws)  # the connection stays open


# Real findings of the harness against ilp-plugin-btp 1.5.0, each shown with
# its bytes in docs/findings/ilp-plugin-btp-1.5.md.
KNOWN_FINDINGS = set(known_not_passed("ilp-plugin-btp", ("failed",)))
"""The failed cases of its last certification (docs/certified-today.json)."""


@pytest.mark.timeout(420)
def test_harness_certifies_ilp_plugin_btp(tmp_path):
    from ..harness.cli_runner import certify

    run = certify(tmp_path, "--protocol", "btp", "--target", "ilp-plugin-btp", timeout=400)
    records = run.by_case("ilp-plugin-btp")
    assert len(records) >= 30, run.output
    failed = {case for case, r in records.items() if r["outcome"] == "failed"}
    assert failed == KNOWN_FINDINGS, run.output
    assert all(r["outcome"] in ("passed", "failed", "not_applicable") for r in records.values()), (
        run.output
    )
    na = {case for case, r in records.items() if r["outcome"] == "not_applicable"}
    assert na == {
        "btp.transfer.server.response-means-balance-updated",
        "btp.transfer.server.error-means-balance-unchanged",
    }, na
    assert {records[c]["role"] for c in records} == {"server", "client"}
    assert (
        run.code == 1 and "ilp-plugin-btp [ilp-plugin-btp 1.5.0, btp]: NOT CONFORMANT" in run.output
    )


@pytest.mark.timeout(300)
def test_interop_command_pairs_reference_and_ilp_plugin_btp_both_ways(tmp_path):
    from ..harness.test_interop_command import run_interop

    completed, records, _ = run_interop(
        tmp_path,
        "--client",
        "reference-btp",
        "--client",
        "ilp-plugin-btp",
        "--server",
        "reference-btp",
        "--server",
        "ilp-plugin-btp",
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    pairs = {(r["implementation"], r["peer_implementation"]) for r in records}
    assert pairs == {
        (c, s)
        for c in ("reference-btp", "ilp-plugin-btp")
        for s in ("reference-btp", "ilp-plugin-btp")
    }
    assert len(records) == 8 and all(r["outcome"] == "passed" for r in records)

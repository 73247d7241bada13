"""The reference STOMP server under hostile input and crashes.

- hypothesis-made byte streams (valid sessions mutated: bytes flipped,
  inserted, deleted, cut; random bytes; huge headers), fed in random chunks
  to the sans-I/O connection: no exception, output that is well-formed
  frames with at most one ERROR and nothing after it, RECEIPTs only for
  stored messages and in their order, bounded buffering;
- a few of them over real TLS to the asyncio node, which must keep serving;
- SIGKILL in the middle of a pipelined stream, then a restart on the same
  store: every message the client saw receipted is there.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ..fuzz_budget import examples

from conformance.core.pki import TestPki, make_pki
from conformance.fuzz.strategies import STOMP_CONNECT as CONNECT
from conformance.fuzz.strategies import pieces, stomp_streams as streams
from conformance.fuzz.strategies import stomp_mutated_streams as mutated_streams
from conformance.fuzz.strategies import stomp_send_frame as send_frame
from reference_impl.stomp.frame import HEARTBEAT, FrameError, FrameParser
from reference_impl.stomp.node import StompServerNode
from reference_impl.stomp.server import ServerConnection
from tests.memory_bounds import peak_while_offering

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 10.0
MAX_FRAME = 16384


def drive(data: bytes, cuts: list[int]) -> tuple[ServerConnection, bytes, list[str | None]]:
    """Feed ``data`` like the node does: every store confirmed in order
    before the output is taken."""
    conn = ServerConnection(max_frame_bytes=MAX_FRAME, max_headers=32, max_header_line=2048)
    out = bytearray()
    stored_receipts: list[str | None] = []
    for chunk in pieces(data, cuts):
        for request in conn.receive_data(chunk):
            stored_receipts.append(request.message.receipt)
            conn.stored(request.request_id)
        out += conn.data_to_send()
        assert len(conn.parser.buffered) <= MAX_FRAME + 2, "the parser buffered past its bound"
        if conn.finished:
            break
    return conn, bytes(out), stored_receipts


def check_output(conn: ServerConnection, out: bytes, stored_receipts: list[str | None]) -> None:
    try:
        items = FrameParser().receive_data(out)
    except FrameError as exc:  # the server's own output must always parse
        raise AssertionError(
            f"server sent a malformed frame: {exc.reason}: {out[:300]!r}"
        ) from None
    frames = [item for item in items if item is not HEARTBEAT]
    commands = [frame.command for frame in frames]
    assert set(commands) <= {"CONNECTED", "RECEIPT", "ERROR"}
    assert commands.count("CONNECTED") <= 1 and (
        not commands or commands[0] in ("CONNECTED", "ERROR")
    )
    if "ERROR" in commands:
        assert commands.index("ERROR") == len(commands) - 1, "a frame after ERROR"
        assert conn.closing, "ERROR without closing"
        assert frames[-1].get("message")
    receipts = [frame.get("receipt-id") for frame in frames if frame.command == "RECEIPT"]
    if conn.disconnected and len(receipts) > len(stored_receipts):
        receipts.pop()  # the DISCONNECT's own, always last
    # Every stored SEND carries a receipt (the server refuses one without),
    # each gets its RECEIPT, in the order stored, and no RECEIPT is for
    # anything not stored.
    assert receipts == stored_receipts


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams, st.lists(st.integers(0, 5000), max_size=12))
def test_hostile_streams_never_crash_and_keep_the_rules(data, cuts):
    conn, out, stored = drive(data, cuts)
    check_output(conn, out, stored)


def test_huge_header_and_body_are_refused_with_bounded_memory():
    for prefix in (
        b"SEND\ndestination:",
        b"SEND\n",
        b"SEND\ndestination:/q\n\n",
        b"SEND\ncontent-length:999999999\n\n",
    ):
        conn = ServerConnection(max_frame_bytes=1 << 20)
        conn.receive_data(CONNECT)
        conn.data_to_send()
        peak = peak_while_offering(conn.receive_data, prefix, lambda conn=conn: conn.closing)
        [error] = [f for f in FrameParser().receive_data(conn.data_to_send()) if f is not HEARTBEAT]
        assert error.command == "ERROR" and conn.finished, prefix
        assert peak < 12 << 20, f"{peak} bytes for {prefix!r}"


def test_many_headers_refused():
    conn = ServerConnection()
    conn.receive_data(CONNECT + b"SEND\n" + b"x:1\n" * 100000)
    assert conn.closing and conn.error == "malformed frame"


# ---------------------------------------------------------------- over TLS


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> TestPki:
    return make_pki(tmp_path_factory.mktemp("stomp-fuzz-pki"))


def client_context(pki: TestPki) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.load_verify_locations(pki.ca_file)
    context.load_cert_chain(str(pki.client_cert_file), str(pki.client_key_file))
    return context


async def _read_until_close(reader: asyncio.StreamReader, limit: float) -> bytes:
    data = bytearray()
    loop = asyncio.get_running_loop()
    end = loop.time() + limit
    while loop.time() < end:
        try:
            chunk = await asyncio.wait_for(reader.read(65536), end - loop.time())
        except (ConnectionError, ssl.SSLError, TimeoutError):
            break  # a stream still valid so far leaves the session open: fine
        if not chunk:
            break
        data += chunk
    return bytes(data)


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=mutated_streams())
def test_hostile_streams_over_tls_leave_the_node_serving(pki, tmp_path, data):
    async def run() -> None:
        node = StompServerNode(
            cert_file=str(pki.server_cert_file),
            key_file=str(pki.server_key_file),
            ca_file=str(pki.ca_file),
            store_dir=tmp_path / "store",
            connect_timeout=1.0,
        )
        _, port = await node.start("127.0.0.1", 0)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, ssl=client_context(pki)), DEADLINE
            )
            writer.write(data)
            out = await _read_until_close(reader, 1.0)
            FrameParser().receive_data(out)  # well-formed whatever came in
            writer.transport.abort()
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, ssl=client_context(pki)), DEADLINE
            )
            writer.write(CONNECT)
            answer = await asyncio.wait_for(reader.read(65536), DEADLINE)
            assert answer.startswith(b"CONNECTED\n")
            writer.transport.abort()
        finally:
            await node.close()

    asyncio.run(run())


# ---------------------------------------------------------------- SIGKILL


def _serve(pki: TestPki, store: Path) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reference_impl.stomp",
            "serve",
            "--cert",
            str(pki.server_cert_file),
            "--key",
            str(pki.server_key_file),
            "--ca",
            str(pki.ca_file),
            "--store",
            str(store),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    line = process.stdout.readline()
    assert line.startswith("STOMP_READY port="), line
    return process, int(line.split("=")[1])


async def _pump_until_killed(
    pki: TestPki, port: int, process: subprocess.Popen, round_: int, kill_after: float
) -> list[str]:
    """Pipeline SENDs in bursts, collect RECEIPTs, SIGKILL the server after
    ``kill_after`` seconds; the receipt ids seen before the connection died."""
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port, ssl=client_context(pki)), DEADLINE
    )
    writer.write(CONNECT)
    parser = FrameParser()
    receipted: list[str] = []

    async def sender() -> None:
        n = 0
        try:
            while True:
                writer.write(
                    b"".join(
                        send_frame(f"k{round_}-{n + i}", 4294967296 + round_ * 100000 + n + i)
                        for i in range(20)
                    )
                )
                n += 20
                await writer.drain()
                await asyncio.sleep(0.005)
        except (ConnectionError, ssl.SSLError, OSError):
            pass

    async def killer() -> None:
        await asyncio.sleep(kill_after)
        os.killpg(process.pid, signal.SIGKILL)

    sending = asyncio.create_task(sender())
    killing = asyncio.create_task(killer())
    try:
        while True:
            try:
                data = await asyncio.wait_for(reader.read(65536), DEADLINE)
            except (ConnectionError, ssl.SSLError, OSError):
                break
            if not data:
                break
            for item in parser.receive_data(data):
                if item is not HEARTBEAT and item.command == "RECEIPT":
                    receipted.append(item.get("receipt-id"))
    finally:
        sending.cancel()
        await killing
        writer.transport.abort()
    return receipted


def test_sigkill_loses_no_receipted_message(pki, tmp_path):
    store = tmp_path / "store"
    everything: list[str] = []
    for round_, kill_after in enumerate((0.3, 0.7, 1.1)):
        process, port = _serve(pki, store)
        try:
            receipted = asyncio.run(_pump_until_killed(pki, port, process, round_, kill_after))
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
            process.stdout.close()
        assert receipted, "no RECEIPT before the kill: the test shows nothing"
        everything += receipted
        out = subprocess.run(
            [sys.executable, "-m", "reference_impl.stomp", "accepted", "--store", str(store)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        held = [json.loads(line)["receipt"] for line in out.stdout.splitlines()]
        missing = set(everything) - set(held)
        assert not missing, f"receipted but lost after SIGKILL: {sorted(missing)[:10]}"
        assert len(held) == len(set(held)), "a message stored twice"
    # The store still opens for a server after the last kill.
    process, _ = _serve(pki, store)
    os.killpg(process.pid, signal.SIGTERM)
    assert process.wait(10) == 0
    process.stdout.close()

"""reference_impl/stomp/node.py and ``python -m reference_impl.stomp serve|accepted``:
the reference server over real TLS on loopback, with this run's certificates
(conformance/core/pki.py). Every read has a deadline."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.core.pki import TestPki, make_pki
from reference_impl.stomp.faults import Fault
from reference_impl.stomp.frame import HEARTBEAT, Frame, FrameParser, encode_frame
from reference_impl.stomp.node import StompServerNode, grace_seconds
from reference_impl.stomp.smp import encode_message, example_message
from reference_impl.stomp.store import read_messages

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 10.0
CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> TestPki:
    return make_pki(tmp_path_factory.mktemp("stomp-server-pki"))


def message_body(creditor_id: int) -> bytes:
    message = example_message("ConfigureAccount")
    message["creditor_id"] = creditor_id
    return encode_message(message)


def send_frame(receipt: str, creditor_id: int = 4294967299) -> bytes:
    return encode_frame(
        Frame(
            "SEND",
            (
                ("destination", "/exchange/smp"),
                ("receipt", receipt),
                ("type", "ConfigureAccount"),
                ("content-type", "application/json"),
                ("persistent", "true"),
            ),
            message_body(creditor_id),
        )
    )


def client_context(
    pki: TestPki,
    *,
    cert: str | None = "client",
    maximum: ssl.TLSVersion | None = None,
    minimum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_3,
) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.minimum_version = minimum
    if maximum is not None:
        context.maximum_version = maximum
    context.load_verify_locations(pki.ca_file)
    if cert is not None:
        context.load_cert_chain(*map(str, pki.cert_pair(cert)))
    return context


class Peer:
    """A test client: frames in, with deadlines."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.parser = FrameParser()
        self.items: list = []
        self.closed = False

    @classmethod
    async def open(cls, port: int, context: ssl.SSLContext) -> "Peer":
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, ssl=context), DEADLINE
        )
        return cls(reader, writer)

    async def _fill(self, timeout: float) -> bool:
        try:
            data = await asyncio.wait_for(self.reader.read(65536), timeout)
        except (ConnectionError, ssl.SSLError):
            data = b""
        if not data:
            self.closed = True
            return False
        self.items += self.parser.receive_data(data)
        return True

    async def frame(self, timeout: float = DEADLINE) -> Frame:
        end = time.monotonic() + timeout
        while True:
            while self.items:
                item = self.items.pop(0)
                if item is not HEARTBEAT:
                    return item
            if not await self._fill(max(0.01, end - time.monotonic())):
                raise ConnectionError("closed before a frame")

    async def closes(self, timeout: float = DEADLINE) -> bool:
        """True when the server closes within ``timeout`` (frames and
        heart-beats before the close are skipped)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if not await self._fill(max(0.01, end - time.monotonic())):
                    return True
            except TimeoutError:
                return False
        return False

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    def abort(self) -> None:
        self.writer.transport.abort()


async def started(pki: TestPki, store: Path, **kwargs) -> tuple[StompServerNode, int]:
    node = StompServerNode(
        cert_file=str(pki.server_cert_file),
        key_file=str(pki.server_key_file),
        ca_file=str(pki.ca_file),
        store_dir=store,
        **kwargs,
    )
    _, port = await node.start("127.0.0.1", 0)
    return node, port


async def test_connect_send_receipt_disconnect(pki, tmp_path):
    node, port = await started(pki, tmp_path / "store")
    try:
        peer = await Peer.open(port, client_context(pki))
        peer.send(CONNECT)
        connected = await peer.frame()
        assert connected.command == "CONNECTED" and connected.get("version") == "1.2"
        peer.send(send_frame("m-1") + b"DISCONNECT\nreceipt:bye\n\n\x00")
        assert (await peer.frame()).get("receipt-id") == "m-1"
        assert (await peer.frame()).get("receipt-id") == "bye"
        assert await peer.closes()
        [stored] = read_messages(tmp_path / "store")
        assert stored.receipt == "m-1" and stored.body == message_body(4294967299)
    finally:
        await node.close()


async def test_pipelined_receipts_in_order_and_all_durable_first(pki, tmp_path):
    node, port = await started(pki, tmp_path / "store")
    try:
        peer = await Peer.open(port, client_context(pki))
        peer.send(CONNECT)
        await peer.frame()
        peer.send(b"".join(send_frame(f"m-{i}", 4294967300 + i) for i in range(200)))
        first = await peer.frame()
        # The first RECEIPT is out only once its message is durable.
        assert first.get("receipt-id") == "m-0" and len(read_messages(tmp_path / "store")) >= 1
        receipts = [first.get("receipt-id")] + [
            (await peer.frame()).get("receipt-id") for _ in range(199)
        ]
        assert receipts == [f"m-{i}" for i in range(200)]
        assert [m.receipt for m in read_messages(tmp_path / "store")] == receipts
    finally:
        await node.close()


async def test_tls_refusals(pki, tmp_path):
    node, port = await started(pki, tmp_path / "store")
    try:
        for context in (
            client_context(pki, minimum=ssl.TLSVersion.TLSv1_2, maximum=ssl.TLSVersion.TLSv1_2),
            client_context(pki, cert=None),
            client_context(pki, cert="untrusted-client"),
        ):
            with pytest.raises((ssl.SSLError, ConnectionError)):
                # TLS 1.3: a refused client certificate shows on the first read.
                peer = await Peer.open(port, context)
                peer.send(CONNECT)
                await peer.frame()
        peer = await Peer.open(port, client_context(pki))  # the server still serves
        peer.send(CONNECT)
        assert (await peer.frame()).command == "CONNECTED"
    finally:
        await node.close()


@pytest.mark.parametrize(
    "fault, context_options",
    [
        (
            Fault.ACCEPT_TLS_1_2,
            {"minimum": ssl.TLSVersion.TLSv1_2, "maximum": ssl.TLSVersion.TLSv1_2},
        ),
        (Fault.CLIENT_CERTIFICATE_OPTIONAL, {"cert": None}),
        (Fault.NO_CLIENT_CERTIFICATE_CHECK, {"cert": "untrusted-client"}),
    ],
)
async def test_tls_faults_let_the_refused_clients_in(pki, tmp_path, fault, context_options):
    node, port = await started(pki, tmp_path / "store", faults=frozenset({fault}))
    try:
        peer = await Peer.open(port, client_context(pki, **context_options))
        peer.send(CONNECT)
        assert (await peer.frame()).command == "CONNECTED"
    finally:
        await node.close()


async def test_fault_untrusted_server_certificate(pki, tmp_path):
    node, port = await started(
        pki, tmp_path / "store", faults=frozenset({Fault.UNTRUSTED_SERVER_CERTIFICATE})
    )
    try:
        with pytest.raises(ssl.SSLCertVerificationError):
            await Peer.open(port, client_context(pki))
    finally:
        await node.close()


async def test_heart_beats_sent_on_time(pki, tmp_path):
    node, port = await started(pki, tmp_path / "store", heart_beat=(100, 0))
    try:
        peer = await Peer.open(port, client_context(pki))
        peer.send(b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:0,300\n\n\x00")
        assert (await peer.frame()).get("heart-beat") == "100,0"
        last, gaps, end = time.monotonic(), [], time.monotonic() + 1.5
        while time.monotonic() < end:
            assert await peer._fill(1.0)
            now = time.monotonic()
            gaps.append(now - last)
            last = now
            assert all(item is HEARTBEAT for item in peer.items)
            peer.items.clear()
        assert len(gaps) >= 4 and max(gaps) < 0.3, gaps
    finally:
        await node.close()


async def test_silent_client_dropped_only_past_the_grace(pki, tmp_path):
    # The client promises a heart-beat every 200 ms and sends none.
    node, port = await started(pki, tmp_path / "store", heart_beat=(0, 200), grace_margin=0.5)
    assert grace_seconds(200, 0.5) == 0.7
    try:
        peer = await Peer.open(port, client_context(pki))
        peer.send(b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:200,0\n\n\x00")
        await peer.frame()
        start = time.monotonic()
        error = await peer.frame(5.0)
        assert error.command == "ERROR" and error.get("message") == "heart-beat timeout"
        assert time.monotonic() - start >= 0.6
        assert await peer.closes()
        # One that keeps beating stays.
        peer = await Peer.open(port, client_context(pki))
        peer.send(b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:200,0\n\n\x00")
        await peer.frame()
        for _ in range(10):
            peer.send(b"\n")
            await asyncio.sleep(0.2)
        peer.send(b"DISCONNECT\nreceipt:still-here\n\n\x00")
        assert (await peer.frame()).get("receipt-id") == "still-here"
    finally:
        await node.close()


async def test_idle_connection_without_heart_beats_kept(pki, tmp_path):
    node, port = await started(pki, tmp_path / "store", grace_margin=0.1)
    try:
        peer = await Peer.open(port, client_context(pki))
        peer.send(CONNECT)
        await peer.frame()
        assert not await peer.closes(1.5)
        peer.send(send_frame("late"))
        assert (await peer.frame()).get("receipt-id") == "late"
    finally:
        await node.close()


async def test_no_connect_in_time_is_dropped(pki, tmp_path):
    node, port = await started(pki, tmp_path / "store", connect_timeout=0.3)
    try:
        peer = await Peer.open(port, client_context(pki))
        assert await peer.closes(3.0)
    finally:
        await node.close()


async def test_malformed_frame_error_then_close(pki, tmp_path):
    node, port = await started(pki, tmp_path / "store")
    try:
        peer = await Peer.open(port, client_context(pki))
        peer.send(CONNECT + b"SEND\ndestination:/a\\tb\nreceipt:1\n\n\x00")
        await peer.frame()
        error = await peer.frame()
        assert error.command == "ERROR" and error.get("message") == "malformed frame"
        assert await peer.closes()
    finally:
        await node.close()


async def test_fault_forget_on_connection_cut(pki, tmp_path):
    node, port = await started(
        pki, tmp_path / "store", faults=frozenset({Fault.FORGET_ON_CONNECTION_CUT})
    )
    try:
        peer = await Peer.open(port, client_context(pki))
        peer.send(CONNECT + send_frame("cut"))
        await peer.frame()
        assert (await peer.frame()).get("receipt-id") == "cut"
        assert len(read_messages(tmp_path / "store")) == 1
        peer.abort()
        for _ in range(100):
            if not read_messages(tmp_path / "store"):
                break
            await asyncio.sleep(0.05)
        assert read_messages(tmp_path / "store") == []
    finally:
        await node.close()


async def test_fault_receipt_before_store(pki, tmp_path, monkeypatch):
    monkeypatch.setattr("reference_impl.stomp.node.FAULT_STORE_DELAY", 0.5)
    node, port = await started(
        pki, tmp_path / "store", faults=frozenset({Fault.RECEIPT_BEFORE_STORE})
    )
    try:
        peer = await Peer.open(port, client_context(pki))
        peer.send(CONNECT + send_frame("early"))
        await peer.frame()
        assert (await peer.frame()).get("receipt-id") == "early"
        assert read_messages(tmp_path / "store") == []
        await asyncio.sleep(1.0)
        assert len(read_messages(tmp_path / "store")) == 1
    finally:
        await node.close()


def _serve(pki: TestPki, store: Path, *extra: str) -> tuple[subprocess.Popen, int]:
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
            *extra,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    line = process.stdout.readline()
    assert line.startswith("STOMP_READY port="), (
        line,
        process.stderr.read() if process.poll() is not None else "",
    )
    return process, int(line.split("=")[1])


def accepted(store: Path) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "reference_impl.stomp", "accepted", "--store", str(store)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines() if line]


async def test_cli_serve_and_accepted(pki, tmp_path):
    store = tmp_path / "store"
    process, port = _serve(pki, store)
    try:
        peer = await Peer.open(port, client_context(pki))
        peer.send(CONNECT + send_frame("cli-1", 4294967311) + b"DISCONNECT\nreceipt:bye\n\n\x00")
        await peer.frame()
        assert (await peer.frame()).get("receipt-id") == "cli-1"
        assert (await peer.frame()).get("receipt-id") == "bye"
        [line] = accepted(store)
        assert line == {
            "destination": "/exchange/smp",
            "type": "ConfigureAccount",
            "content-type": "application/json",
            "receipt": "cli-1",
            "body": message_body(4294967311).decode(),
        }
        # A second server on the same store is refused (one writer).
        second = subprocess.run(
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
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert second.returncode == 2 and "another process" in second.stderr
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        assert process.wait(10) == 0
        process.stdout.close()
        process.stderr.close()
    assert accepted(tmp_path / "empty") == []


async def test_trickled_connect_is_dropped_at_the_deadline(pki, tmp_path):
    node, port = await started(pki, tmp_path / "store", connect_timeout=1.0)
    try:
        peer = await Peer.open(port, client_context(pki))
        start = time.monotonic()
        for byte in b"CONNECT\naccept-version:1.2\nhost:/":
            peer.send(bytes([byte]))
            await asyncio.sleep(0.1)
            if peer.writer.transport.is_closing() or time.monotonic() - start > 2.5:
                break
        assert await peer.closes(3.0)
        assert time.monotonic() - start < 4.0
    finally:
        await node.close()


def test_stomp_py_client_delivers_to_the_server(pki, tmp_path):
    """A third-party client (stomp.py, a test extra) against the reference
    server: CONNECT with heart-beats, SENDs with receipts, DISCONNECT. It
    checks hostnames, so the server shows the certificate naming 127.0.0.1."""
    stomp = pytest.importorskip("stomp")
    store = tmp_path / "store"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reference_impl.stomp",
            "serve",
            "--cert",
            str(pki.loopback_server_cert_file),
            "--key",
            str(pki.loopback_server_key_file),
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
    try:
        port = int(process.stdout.readline().split("=")[1])
        receipts: list[str] = []
        errors: list[str] = []

        class Listener(stomp.ConnectionListener):
            def on_receipt(self, frame):
                receipts.append(frame.headers.get("receipt-id"))

            def on_error(self, frame):
                errors.append(frame.headers.get("message"))

        conn = stomp.Connection12(
            [("127.0.0.1", port)], heartbeats=(500, 500), timeout=DEADLINE, reconnect_attempts_max=1
        )
        conn.set_ssl(
            for_hosts=[("127.0.0.1", port)],
            key_file=str(pki.client_key_file),
            cert_file=str(pki.client_cert_file),
            ca_certs=str(pki.ca_file),
        )
        conn.set_listener("test", Listener())
        conn.connect(wait=True, headers={"host": "/"})
        for i in range(3):
            conn.send(
                "/exchange/smp",
                message_body(4294967400 + i).decode(),
                content_type="application/json",
                headers={"receipt": f"sp-{i}", "type": "ConfigureAccount", "persistent": "true"},
            )
        end = time.monotonic() + DEADLINE
        while len(receipts) < 3 and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(1.2)  # a few heart-beat intervals both ways, connection kept
        assert conn.is_connected()
        conn.disconnect()
        assert receipts[:3] == ["sp-0", "sp-1", "sp-2"] and not errors
        assert [line["receipt"] for line in accepted(store)] == ["sp-0", "sp-1", "sp-2"]
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(10)
        process.stdout.close()

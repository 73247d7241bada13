"""The OCaml RIPP peer (real bin_prot) against the Python reference node over
loopback TCP, both ways: the same generated deltas must leave the same
applied state on either consumer, seen in-band through the Checkpoint_ack
(docs/ripp-profile.md P7); incompatible schemas are refused (P5) and a
corrupted envelope closes the connection with nothing sent (P1)."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ..fuzz_budget import examples

from reference_impl.ripp.envelope import MsgType, encode_envelope, make_envelope
from reference_impl.ripp.payloads import Handshake, encode_payload, schema_from_json

from .ocaml_env import REPO_ROOT, ocaml_peer  # noqa: F401  (fixture)

REGISTRY = REPO_ROOT / "conformance" / "suites" / "ripp" / "registry.json"
PYTHON_NODE = [sys.executable, "-m", "reference_impl.ripp"]
READY_TIMEOUT = 30.0
RUN_TIMEOUT = 30.0


class Consumer:
    """A consumer process (either implementation) on a free loopback port."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv
            + ["consume", "--schemas", str(REGISTRY), "--port", "0", "--heartbeat-interval", "0.2"],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            # select first: a node that hangs before its ready line must not hang the test
            ready, _, _ = select.select(
                [self.proc.stdout], [], [], max(0.0, deadline - time.monotonic())
            )
            if not ready:
                break
            line = self.proc.stdout.readline()
            if not line:
                break
            m = re.match(r"RIPP_READY port=(\d+)", line)
            if m:
                self.port = int(m[1])
                return
        out = self.stop()
        pytest.fail(f"consumer {argv} never printed RIPP_READY within {READY_TIMEOUT} s: {out}")

    def stop(self) -> str:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            out, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            out, err = self.proc.communicate()
        self.stderr = err
        return out


def events(text: str, name: str) -> list[dict]:
    return [
        json.loads(line.split(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(f"RIPP_{name} ")
    ]


def produce(
    argv: list[str], port: int, *extra: str, schemas: Path = REGISTRY
) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv
        + [
            "produce",
            "--schemas",
            str(schemas),
            "--peer-host",
            "127.0.0.1",
            "--peer-port",
            str(port),
            "--source-id",
            "interop-producer",
            *extra,
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )


@pytest.fixture
def ocaml(ocaml_peer) -> list[str]:  # noqa: F811
    return [str(ocaml_peer)]


@pytest.mark.parametrize(
    "direction", ["python-producer-to-ocaml-consumer", "ocaml-producer-to-python-consumer"]
)
def test_same_deltas_same_applied_state(ocaml, direction):
    producer, consumer = (
        (PYTHON_NODE, ocaml) if direction.startswith("python") else (ocaml, PYTHON_NODE)
    )
    node = Consumer(consumer)
    try:
        run = produce(producer, node.port, "--count", "23", "--checkpoint", "--stay", "0.5")
    finally:
        consumer_out = node.stop()
    assert run.returncode == 0, f"producer failed ({run.returncode}): {run.stdout}\n{run.stderr}"
    producer_acks = events(run.stdout, "CHECKPOINT")
    consumer_acks = events(consumer_out, "CHECKPOINT")
    assert len(producer_acks) == 1 and len(consumer_acks) == 1, (run.stdout, consumer_out)
    assert producer_acks[0]["sources"] == consumer_acks[0]["sources"]
    vwap = {s["output"]: s for s in producer_acks[0]["sources"]}["vwap"]
    assert (vwap["last_sequence_no"], vwap["applied_count"]) == (23, 23)
    done = events(run.stdout, "DONE")
    assert done and done[0]["sent"] == 23 and done[0]["heartbeats"] >= 1, run.stdout


def test_both_consumers_compute_the_same_digest(ocaml):
    """The OCaml and Python consumers, fed the same generated deltas, report
    byte-identical source states (digest of the applied state, P7)."""
    digests = []
    for consumer in (ocaml, PYTHON_NODE):
        node = Consumer(consumer)
        try:
            run = produce(PYTHON_NODE, node.port, "--count", "40", "--checkpoint")
        finally:
            node.stop()
        assert run.returncode == 0, run.stderr
        digests.append(events(run.stdout, "CHECKPOINT")[0]["sources"])
    assert digests[0] == digests[1]


def test_ocaml_producer_stops_on_incompatible_schema(ocaml, tmp_path):
    """A writer schema missing a reader field without default (P5): the
    Python consumer answers ok=false; the OCaml producer exits 6."""
    registry = json.loads(REGISTRY.read_text())
    registry["vwap"]["fields"] = [f for f in registry["vwap"]["fields"] if f["name"] != "price"]
    schemas = tmp_path / "writer.json"
    schemas.write_text(json.dumps(registry))
    node = Consumer(PYTHON_NODE)
    try:
        run = produce(ocaml, node.port, "--count", "3", schemas=schemas)
    finally:
        node.stop()
    assert run.returncode == 6, (run.returncode, run.stdout, run.stderr)
    negotiated = events(run.stdout, "NEGOTIATED")
    assert negotiated and negotiated[0]["ok"] is False
    assert "vwap: missing field price" in negotiated[0]["errors"]


def test_ocaml_consumer_closes_silently_on_a_flipped_bit(ocaml):
    """P1: a Handshake whose CRC no longer matches is refused before any
    payload parsing: the connection closes and nothing is sent."""
    registry = json.loads(REGISTRY.read_text())
    hs = Handshake("flip", [(name, schema_from_json(s)) for name, s in registry.items()])
    data = bytearray(
        encode_envelope(
            make_envelope(
                MsgType.HANDSHAKE, encode_payload(hs), sequence=1, timestamp_ns=time.time_ns()
            )
        )
    )
    data[70] ^= 0x10  # inside the payload: only the CRC can notice
    node = Consumer(ocaml)
    try:
        with socket.create_connection(("127.0.0.1", node.port), timeout=5) as sock:
            sock.sendall(bytes(data))
            sock.settimeout(5)
            received = b""
            while True:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                received += chunk
    finally:
        out = node.stop()
    assert received == b"", f"the consumer answered a corrupted envelope: {received.hex()}"
    closed = events(out, "CLOSED")
    assert closed and closed[0]["kind"] == "envelope" and closed[0]["check"] == "crc", out


def _header(length: int) -> bytes:
    data = bytearray(b"RIPP" + bytes(55))
    data[4] = 1
    data[55:59] = length.to_bytes(4, "little", signed=True)
    return bytes(data)


def _valid_handshake() -> bytes:
    registry = json.loads(REGISTRY.read_text())
    hs = Handshake("fuzz", [(name, schema_from_json(s)) for name, s in registry.items()])
    return encode_envelope(
        make_envelope(MsgType.HANDSHAKE, encode_payload(hs), sequence=1, timestamp_ns=1)
    )


@st.composite
def _mutated_handshake(draw) -> bytes:
    data = bytearray(_valid_handshake())
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data) - 1))
        data[at] = draw(st.integers(0, 255))
    return bytes(data) + draw(st.binary(max_size=64))


GARBAGE = st.one_of(
    st.binary(max_size=300),
    st.builds(
        lambda n, tail: _header(n) + tail,
        st.integers(-(1 << 31), (1 << 31) - 1),
        st.binary(max_size=64),
    ),
    _mutated_handshake(),
    st.builds(lambda tail: _valid_handshake() + tail, st.binary(max_size=120)),
)
REPLY_WINDOW = 3.0


def _probe(port: int, data: bytes) -> tuple[bool, bytes]:
    """Send, half-close, read until the node closes (True) or the window ends."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        end = time.monotonic() + REPLY_WINDOW
        while time.monotonic() < end:
            sock.settimeout(max(0.01, end - time.monotonic()))
            try:
                chunk = sock.recv(4096)
            except socket.timeout:
                break
            except ConnectionResetError:
                return True, received
            if not chunk:
                return True, received
            received += chunk
        return False, received


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def test_ocaml_consumer_survives_malformed_input(ocaml):
    """Hypothesis-generated garbage, headers claiming any length, mutated
    Handshakes: the OCaml consumer closes every connection (no hang), never
    answers with more than one Schema_negotiation, keeps serving and keeps
    its memory bounded (no buffering of claimed lengths)."""
    node = Consumer(ocaml)
    try:

        @settings(
            max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow]
        )
        @given(GARBAGE)
        def check(data):
            closed, received = _probe(node.port, data)
            assert closed, (
                f"the consumer did not close within {REPLY_WINDOW} s after {data[:80].hex()}"
            )
            assert len(received) < 63 + 4096, received.hex()
            assert node.proc.poll() is None, "the consumer process died"

        check()
        closed, _ = _probe(node.port, b"")
        assert closed and node.proc.poll() is None
        assert _rss_kib(node.proc.pid) < 64 * 1024, (
            f"consumer RSS {_rss_kib(node.proc.pid)} KiB after the fuzzing"
        )
    finally:
        node.stop()

"""The RIPP reference node over TCP: consumer and producer started with
their command lines, each other's peers, and refusals seen from a socket."""

from __future__ import annotations

import asyncio
import json
import struct
import subprocess
import sys
from pathlib import Path


from reference_impl.ripp.envelope import HEADER_SIZE, MAX_PAYLOAD
from reference_impl.ripp.node import (
    ConsumerNode,
    generated_deltas,
    load_registry_file,
    run_producer,
)
from reference_impl.ripp.payloads import fingerprint
from reference_impl.ripp.session import SourceTrack

REPO = Path(__file__).resolve().parents[2]
REGISTRY = REPO / "conformance" / "suites" / "ripp" / "registry.json"
PYTHON = sys.executable


def expected_digest(outputs, count: int) -> bytes:
    """The digest a consumer holds after the generated deltas, by the sans-I/O core."""
    name, schema = outputs[0]
    track = SourceTrack(schema, fingerprint(schema))
    for spec in generated_deltas(outputs, count):
        track.apply(spec.key, spec.delta)
    return track.digest()


async def _consumer(**kw):
    registry = load_registry_file(str(REGISTRY))
    events = []
    node = ConsumerNode("c", registry, on_event=lambda peer, e: events.append(e), **kw)
    host, port = await node.start("127.0.0.1", 0)
    return node, port, events, registry


def test_producer_and_consumer_agree_on_the_applied_state():
    async def main():
        node, port, events, registry = await _consumer(heartbeat_interval_ms=100)
        try:
            outputs = list(registry.items())
            run = await run_producer(
                "127.0.0.1",
                port,
                "p",
                outputs,
                generated_deltas(outputs, 12),
                timeout=5,
                stay=0.35,
                checkpoint=True,
            )
        finally:
            await node.close()
        return run, outputs

    run, outputs = asyncio.run(main())
    assert run.negotiation.ok and run.sent == 12
    state = {s.source_output: s for s in run.acks[0].sources}[outputs[0][0]]
    assert (state.last_sequence_no, state.applied_count) == (12, 12)
    assert state.state_digest == expected_digest(outputs, 12)
    assert run.heartbeats >= 2, "100 ms interval, 0.35 s stay"


def test_consumer_refuses_oversized_header_without_waiting():
    async def main():
        node, port, events, registry = await _consumer()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            header = bytearray(b"RIPP" + bytes(HEADER_SIZE - 4))
            header[4] = 1
            header[55:59] = struct.pack("<i", MAX_PAYLOAD + 1)
            writer.write(bytes(header))
            await writer.drain()
            data = await asyncio.wait_for(reader.read(100), 2)
            writer.close()
            return data
        finally:
            await node.close()

    assert asyncio.run(main()) == b"", "closed at once, nothing sent"


def test_command_lines_run_a_session(tmp_path):
    consumer = subprocess.Popen(
        [
            PYTHON,
            "-m",
            "reference_impl.ripp",
            "consume",
            "--schemas",
            str(REGISTRY),
            "--port",
            "0",
            "--heartbeat-interval",
            "0.2",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        ready = consumer.stdout.readline()
        assert ready.startswith("RIPP_READY port=")
        port = ready.strip().split("=")[1]
        deltas = tmp_path / "deltas.json"
        deltas.write_text(
            json.dumps(
                [
                    {"output": "vwap", "key": "AAPL", "op": "set", "fields": {"volume": "05"}},
                    {
                        "output": "vwap",
                        "key": "AAPL",
                        "op": "patch",
                        "fields": {"volume": "06"},
                        "sequence_no": 2,
                    },
                    {"output": "vwap", "key": "AAPL", "op": "remove", "sequence_no": 2},
                ]
            )
        )
        out = subprocess.run(
            [
                PYTHON,
                "-m",
                "reference_impl.ripp",
                "produce",
                "--schemas",
                str(REGISTRY),
                "--peer-host",
                "127.0.0.1",
                "--peer-port",
                port,
                "--source-id",
                "cli",
                "--deltas",
                str(deltas),
                "--checkpoint",
                "--timeout",
                "5",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.returncode == 0, out.stderr
        checkpoint = [
            json.loads(line.split(" ", 1)[1])
            for line in out.stdout.splitlines()
            if line.startswith("RIPP_CHECKPOINT")
        ][0]
        vwap = [s for s in checkpoint["sources"] if s["output"] == "vwap"][0]
        # the Remove repeats sequence 2: a duplicate, discarded
        assert (vwap["last_sequence_no"], vwap["applied_count"]) == (2, 2)
    finally:
        consumer.terminate()
        consumer.wait(10)


def test_producer_exits_6_when_schemas_are_refused(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(
        json.dumps(
            {
                "vwap": {
                    "schema_name": "vwap",
                    "version": 3,
                    "fields": [{"name": "symbol", "type": "string", "default": None}],
                }
            }
        )
    )
    consumer = subprocess.Popen(
        [PYTHON, "-m", "reference_impl.ripp", "consume", "--schemas", str(REGISTRY), "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = consumer.stdout.readline().strip().split("=")[1]
        out = subprocess.run(
            [
                PYTHON,
                "-m",
                "reference_impl.ripp",
                "produce",
                "--schemas",
                str(other),
                "--peer-host",
                "127.0.0.1",
                "--peer-port",
                port,
                "--source-id",
                "x",
                "--count",
                "1",
                "--timeout",
                "5",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.returncode == 6, out.stderr
        assert "missing field price" in out.stdout + out.stderr
    finally:
        consumer.terminate()
        consumer.wait(10)

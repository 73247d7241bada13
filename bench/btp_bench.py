#!/usr/bin/env python3
"""Benchmark of the reference BTP codec against btp-packet (npm), in one run.

Measures encode and decode packets per second for typical packets -- an
auth-like Message, an ILP-like Message, a Transfer with a payment-channel
claim -- with reference_impl.btp.packet in this CPython, and the same bytes
with btp-packet under Node.js (interop/node/btp-bench.js, run as a
subprocess that takes turns with the Python timings, so both see the same
machine load), and prints the ratio Python/JS.  Each figure is the best of
--repeats runs of --seconds.

Targets, each printed as PASS or FAIL:
  * decode >= 100,000 packets/s for every packet (CPython);
  * decode and encode ratios Python/JS >= 1 for every packet (issue #3:
    "a ratio of 1 or better").
Exits 1 if any target fails (or btp-packet cannot be run, unless --no-node).

Usage: bench/btp_bench.py [--seconds S] [--repeats R] [--no-node] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from reference_impl.btp.packet import (  # noqa: E402
    CODEC,
    ContentType,
    Message,
    Packet,
    ProtocolDataEntry,
    Transfer,
    decode_packet,
    encode_packet,
    packet_to_json,
)

NODE_DIR = REPO_ROOT / "interop" / "node"
NODE_SCRIPT = NODE_DIR / "btp-bench.js"
DECODE_TARGET = 100_000
RATIO_TARGET = 1.0


def _filler(label: str, size: int) -> bytes:
    return hashlib.shake_256(label.encode()).digest(size)


def typical_packets() -> dict[str, Packet]:
    """What a BTP link mostly carries."""
    claim = json.dumps(
        {
            "amount": "1000000",
            "channel": _filler("channel", 32).hex().upper(),
            "signature": _filler("signature", 64).hex().upper(),
        },
        separators=(",", ":"),
    )
    return {
        # RFC 23 Authentication: primary 'auth' (empty), secondary 'auth_token'.
        "message-auth": Message(
            0x12345678,
            (
                ProtocolDataEntry("auth", ContentType.APPLICATION_OCTET_STREAM, b""),
                ProtocolDataEntry(
                    "auth_token", ContentType.TEXT_PLAIN_UTF8, b"9b3c5e0f2a71d4e8b6c0f1a2"
                ),
            ),
        ),
        # An ILPv4 Prepare (about 180 bytes with STREAM data) under 'ilp'.
        "message-ilp": Message(
            0x9ABCDEF0,
            (
                ProtocolDataEntry(
                    "ilp", ContentType.APPLICATION_OCTET_STREAM, _filler("ilp-prepare", 180)
                ),
            ),
        ),
        # A settlement: amount plus a JSON payment-channel claim.
        "transfer-claim": Transfer(
            0x0BADCAFE,
            1_000_000,
            (ProtocolDataEntry("claim", ContentType.APPLICATION_JSON, claim.encode()),),
        ),
    }


def batch_for(fn: Callable[[], object]) -> int:
    """A batch of calls that takes about 10 ms."""
    batch = 1
    while True:
        start = time.perf_counter()
        for _ in range(batch):
            fn()
        if time.perf_counter() - start > 0.01:
            return batch
        batch *= 2


def rate(fn: Callable[[], object], batch: int, seconds: float) -> float:
    """Calls per second over about ``seconds``."""
    count = 0
    start = time.perf_counter()
    elapsed = 0.0
    while elapsed < seconds:
        for _ in range(batch):
            fn()
        count += batch
        elapsed = time.perf_counter() - start
    return count / elapsed


class NodeBench:
    """interop/node/btp-bench.js, taking turns with the Python timings."""

    def __init__(self, packets: dict[str, Packet]) -> None:
        node = shutil.which("node")
        if node is None:
            raise RuntimeError("node is not on PATH")
        if not (NODE_DIR / "node_modules" / "btp-packet").is_dir():
            raise RuntimeError(
                f"{NODE_DIR}/node_modules/btp-packet is missing: run scripts/install-node-deps.sh"
            )
        self.process = subprocess.Popen(
            [node, str(NODE_SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=NODE_DIR,
        )
        hello = self.ask(
            {
                "packets": [
                    {
                        "id": name,
                        "hex": encode_packet(packet).hex(),
                        "packet": packet_to_json(packet),
                    }
                    for name, packet in packets.items()
                ]
            }
        )
        self.label = f"{hello['tool']} on Node.js {hello['node']}"

    def ask(self, request: dict) -> dict:
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(timeout=10)
            stderr = self.process.stderr.read() if self.process.stderr else ""
            raise RuntimeError(
                f"{NODE_SCRIPT.name} exited {self.process.returncode}: {stderr.strip()}"
            )
        return json.loads(line)

    def rate(self, name: str, op: str, seconds: float) -> float:
        return float(self.ask({"id": name, "op": op, "seconds": seconds})["rate"])

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def measure(
    packets: dict[str, Packet], node: NodeBench | None, seconds: float, repeats: int
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]] | None]:
    """Best-of-``repeats`` rates; Python and Node.js take turns on each run
    so that both see the same machine load."""
    py: dict[str, dict[str, float]] = {}
    js: dict[str, dict[str, float]] | None = {} if node else None
    for name, packet in packets.items():
        wire = encode_packet(packet)
        assert decode_packet(wire) == packet
        calls = {
            "decode": lambda wire=wire: decode_packet(wire),
            "encode": lambda packet=packet: encode_packet(packet),
        }
        py[name] = {}
        if js is not None:
            js[name] = {}
        for op, fn in calls.items():
            batch = batch_for(fn)
            rate(fn, batch, 0.1)  # warm-up
            best_py = best_js = 0.0
            for _ in range(repeats):
                best_py = max(best_py, rate(fn, batch, seconds))
                if node is not None:
                    best_js = max(best_js, node.rate(name, op, seconds))
            py[name][f"{op}_per_s"] = best_py
            if js is not None:
                js[name][f"{op}_per_s"] = best_js
    return py, js


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seconds", type=float, default=0.3, help="length of one timed run (default 0.3)"
    )
    parser.add_argument(
        "--repeats", type=int, default=5, help="timed runs per figure, best kept (default 5)"
    )
    parser.add_argument(
        "--no-node", action="store_true", help="skip btp-packet (and the ratio target)"
    )
    parser.add_argument(
        "--json", action="store_true", help="also print the figures as one JSON line"
    )
    args = parser.parse_args()

    packets = typical_packets()
    node: NodeBench | None = None
    js_label = "not run (--no-node)"
    node_error = None
    if not args.no_node:
        try:
            node = NodeBench(packets)
            js_label = node.label
        except (RuntimeError, OSError, ValueError) as exc:
            node_error = str(exc)
            js_label = f"FAILED: {exc}"
    try:
        py, js = measure(packets, node, args.seconds, args.repeats)
    except (RuntimeError, OSError, ValueError) as exc:
        node_error = str(exc)
        js_label = f"FAILED: {exc}"
        py, js = measure(packets, None, args.seconds, args.repeats)
    finally:
        if node is not None:
            node.close()

    print(
        f"BTP codec: reference_impl.btp.packet on CPython {platform.python_version()} vs {js_label}"
    )
    print(f"codec: {CODEC} (BTP_PURE_PYTHON=1 measures the pure-Python one)")
    header = (
        f"{'packet':<16}{'bytes':>6}  {'py decode/s':>12}{'js decode/s':>12}{'ratio':>7}"
        f"  {'py encode/s':>12}{'js encode/s':>12}{'ratio':>7}"
    )
    print(header)
    print("-" * len(header))
    verdicts: list[tuple[bool, str]] = []
    for name, packet in packets.items():
        size = len(encode_packet(packet))
        p = py[name]
        j = js[name] if js else None
        dec_ratio = p["decode_per_s"] / j["decode_per_s"] if j else None
        enc_ratio = p["encode_per_s"] / j["encode_per_s"] if j else None
        print(
            f"{name:<16}{size:>6}  {p['decode_per_s']:>12,.0f}"
            f"{(format(j['decode_per_s'], ',.0f') if j else '-'):>12}"
            f"{(format(dec_ratio, '.2f') if j else '-'):>7}"
            f"  {p['encode_per_s']:>12,.0f}"
            f"{(format(j['encode_per_s'], ',.0f') if j else '-'):>12}"
            f"{(format(enc_ratio, '.2f') if j else '-'):>7}"
        )
        verdicts.append(
            (
                p["decode_per_s"] >= DECODE_TARGET,
                f"{name}: Python decodes {p['decode_per_s']:,.0f}/s (target >= {DECODE_TARGET:,}/s)",
            )
        )
        if j:
            verdicts.append(
                (
                    dec_ratio >= RATIO_TARGET,
                    f"{name}: decode ratio Python/JS {dec_ratio:.2f} (target >= {RATIO_TARGET:g})",
                )
            )
            verdicts.append(
                (
                    enc_ratio >= RATIO_TARGET,
                    f"{name}: encode ratio Python/JS {enc_ratio:.2f} (target >= {RATIO_TARGET:g})",
                )
            )
        elif not args.no_node:
            verdicts.append((False, f"{name}: ratios not measured ({node_error})"))
    print()
    for ok, text in verdicts:
        print(("PASS " if ok else "FAIL ") + text)
    if args.json:
        print(json.dumps({"python": py, "js": js, "js_tool": js_label}))
    return 0 if all(ok for ok, _ in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())

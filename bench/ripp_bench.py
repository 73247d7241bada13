#!/usr/bin/env python3
"""Benchmark of the RIPP envelope codec and of CRC-32C, in one run.

Figures (each the best of --repeats runs of about --seconds):
  * envelope decodes/s: ``decode_envelope`` of one 319-byte envelope (a
    256-byte payload), every check included (length bounds, magic, CRC-32C,
    version, type, flags).  Target >= 500,000/s (issue #13).
  * the same with the pure-Python decoder (what runs when the optional C
    accelerator is not built), envelope encodes/s, and EnvelopeReader
    envelopes/s on a stream of them (informational).
  * CRC-32C GB/s with google-crc32c (C, SSE4.2 when the CPU has it) on 1 MiB
    buffers, beside the text's lookup-table loop in pure Python on 64 KiB
    buffers, measured in the same run, and their ratio (informational).
Ripple host frames/s is measured by the Ripple host benchmark (see
bench/README.md), not here.

Every rate is printed per wall-clock second and per CPU-second of this
process (the machine is shared, see bench/README.md); the target is checked
on the wall-clock figure.  Exits 1 when the decode target is missed.

Usage: bench/ripp_bench.py [--seconds S] [--repeats R] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Callable

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import google_crc32c  # noqa: E402

from reference_impl.ripp.envelope import (  # noqa: E402
    DECODER,
    EnvelopeReader,
    decode_envelope_python,
    MsgType,
    crc32c,
    decode_envelope,
    encode_envelope,
    make_envelope,
)

DECODE_TARGET = 500_000
PAYLOAD_SIZE = 256


def _table() -> list[int]:
    # Castagnoli, reflected: 0x1EDC6F41 bit-reversed is 0x82F63B78
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _table()


def crc32c_table(data: bytes) -> int:
    """The text's compute_string, transcribed: one table lookup per byte."""
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = (crc >> 8) ^ table[(crc ^ byte) & 0xFF]
    return crc ^ 0xFFFFFFFF


def best_rate(
    fn: Callable[[int], None], batch: int, seconds: float, repeats: int
) -> tuple[float, float]:
    """(operations per CPU-second, per wall-second): best of ``repeats`` runs.

    The target is checked on the wall-clock figure.  The CPU figure (divided
    by this process's time.process_time) is printed beside it because on a
    shared machine the wall figure also measures how often the scheduler ran
    us; best-of for the same reason."""
    best_cpu = best_wall = 0.0
    for _ in range(repeats):
        done = 0
        start, cpu0 = time.perf_counter(), time.process_time()
        elapsed = 0.0
        while elapsed < seconds:
            fn(batch)
            done += batch
            elapsed = time.perf_counter() - start
        cpu = max(time.process_time() - cpu0, 1e-9)
        best_cpu = max(best_cpu, done / cpu)
        best_wall = max(best_wall, done / elapsed)
    return best_cpu, best_wall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    args = ap.parse_args(argv)

    assert crc32c(b"123456789") == 0xE3069283 == crc32c_table(b"123456789")
    env = make_envelope(
        MsgType.DELTA,
        bytes(i & 0xFF for i in range(PAYLOAD_SIZE)),
        sequence=1,
        timestamp_ns=1_700_000_000_000_000_000,
        fingerprint=b"62eef1e2688faa262479694ba7c8f2da",
    )
    data = encode_envelope(env)
    assert decode_envelope(data) == env

    def decode(n: int) -> None:
        d = decode_envelope
        for _ in range(n):
            d(data)

    def encode(n: int) -> None:
        e = encode_envelope
        for _ in range(n):
            e(env)

    stream = data * 1000

    def read_stream(n: int) -> None:
        for _ in range(n // 1000):
            EnvelopeReader().receive_data(stream)

    big = bytes(i * 7 & 0xFF for i in range(1 << 20))
    small = big[: 64 << 10]
    assert crc32c(small) == crc32c_table(small)

    def crc_c(n: int) -> None:
        v = google_crc32c.value
        for _ in range(n):
            v(big)

    def crc_py(n: int) -> None:
        for _ in range(n):
            crc32c_table(small)

    s, r = args.seconds, args.repeats
    figures: dict[str, float] = {}

    def record(name: str, rates: tuple[float, float]) -> None:
        figures[f"{name} (CPU)"], figures[f"{name} (wall)"] = rates
        print(
            f"{name}: {rates[0]:,.0f} per CPU-second, {rates[1]:,.0f} per wall-second", flush=True
        )

    record("envelope decodes/s", best_rate(decode, 10_000, s, r))

    def decode_python(n: int) -> None:
        d = decode_envelope_python
        for _ in range(n):
            d(data)

    record("envelope decodes/s, pure-Python decoder", best_rate(decode_python, 10_000, s, r))
    record("envelope encodes/s", best_rate(encode, 10_000, s, r))
    record("EnvelopeReader envelopes/s", best_rate(read_stream, 10_000, s, r))
    # interleave the two CRC measurements so both see the same machine load
    c_rates, py_rates = [], []
    for _ in range(r):
        c_rates.append(best_rate(crc_c, 64, s / 2, 1)[0] * len(big) / 1e9)
        py_rates.append(best_rate(crc_py, 1, s / 2, 1)[0] * len(small) / 1e9)
    figures["CRC-32C GB/s, google-crc32c (CPU)"] = max(c_rates)
    figures["CRC-32C GB/s, pure-Python table (CPU)"] = max(py_rates)
    figures["CRC-32C speedup, C / pure Python"] = max(c_rates) / max(py_rates)
    print(
        f"CRC-32C google-crc32c ({google_crc32c.implementation}): {max(c_rates):.2f} GB/s; "
        f"pure-Python table: {max(py_rates) * 1000:.2f} MB/s",
        flush=True,
    )

    checked = "envelope decodes/s (wall)"
    ok = figures[checked] >= DECODE_TARGET
    print()
    print(f"{'figure':48} {'value':>14}  target")
    for name, value in figures.items():
        target = f">= {DECODE_TARGET:,}  {'PASS' if ok else 'FAIL'}" if name == checked else "-"
        shown = f"{value:,.0f}" if value >= 1000 else f"{value:,.3f}"
        print(f"{name:48} {shown:>14}  {target}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {load:.2f}; google-crc32c implementation: {google_crc32c.implementation}; "
        f"decode_envelope: {DECODER}"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "figures": figures,
                    "decode_target": DECODE_TARGET,
                    "checked": checked,
                    "pass": ok,
                },
                indent=2,
            )
            + "\n"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

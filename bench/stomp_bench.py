#!/usr/bin/env python3
"""Benchmark of the STOMP reference implementation (issue #12).

Two figures, each against a fixed target, printed as PASS or FAIL:

  * frames/s parsed by reference_impl.stomp.frame.FrameParser: a stream of
    small SEND frames (the profile's headers, a ~170-byte SMP
    ConfigureAccount body, content-length) fed in 64 KiB chunks, as a
    socket hands them over. Target: >= 200,000 frames/s.
  * receipted SENDs/s over TLS 1.3 on loopback, one connection, a window of
    --window SENDs in flight, every SEND with its own receipt, against the
    reference server (`python -m reference_impl.stomp serve`, store fsynced
    before each RECEIPT) and against RabbitMQ 3.10 (scripts/rabbitmq.sh,
    durable queue, persistent messages, RECEIPT after the publisher
    confirm) in the same run, the two taking turns so that both see the
    same machine load. Target: ours / RabbitMQ's >= 1.

The same client (this file: pre-encoded SENDs, FrameParser for the
replies) drives both servers; a RECEIPT whose receipt-id is not the next
one expected, an ERROR, or a silent server past --deadline fails the run.
Every figure is the best of --repeats runs. Exits 1 when a target is missed
or a figure could not be measured (RabbitMQ not installed, unless
--no-rabbitmq, which then leaves the ratio unmeasured and exits 1 all the
same: a target that was not measured is not met).

Usage: bench/stomp_bench.py [--frames N] [--sends N] [--window W]
                            [--repeats R] [--quick] [--no-rabbitmq] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from conformance.core.pki import make_pki  # noqa: E402
from reference_impl.stomp.frame import HEARTBEAT, Frame, FrameParser, encode_frame  # noqa: E402
from reference_impl.stomp.smp import encode_message, example_message  # noqa: E402
from reference_impl.stomp.tls import client_context  # noqa: E402

PARSE_TARGET = 200_000
RATIO_TARGET = 1.0
CHUNK = 64 * 1024
READY_TIMEOUT = 180.0


def smp_body(n: int) -> bytes:
    """A valid SMP ConfigureAccount with a creditor_id of its own, so that no
    two SENDs of a run carry the same body."""
    message = dict(example_message("ConfigureAccount"))
    message["creditor_id"] = (1 << 40) + n
    return encode_message(message)


def send_frame(n: int, destination: str) -> bytes:
    return encode_frame(
        Frame(
            "SEND",
            (
                ("destination", destination),
                ("receipt", f"b-{n}"),
                ("type", "ConfigureAccount"),
                ("content-type", "application/json"),
                ("persistent", "true"),
            ),
            smp_body(n),
        )
    )


# -- figure 1: the codec


def parse_rate(frames: int, repeats: int) -> tuple[float, int]:
    """Best frames/s over ``repeats`` parses of ``frames`` SEND frames."""
    one = send_frame(1, "/exchange/smp/12345678")
    stream = one * frames
    chunks = [stream[i : i + CHUNK] for i in range(0, len(stream), CHUNK)]
    best = 0.0
    for _ in range(repeats):
        parser = FrameParser()
        count = 0
        start = time.perf_counter()
        for chunk in chunks:
            count += len(parser.receive_data(chunk))
        elapsed = time.perf_counter() - start
        if count != frames or parser.buffered:
            raise SystemExit(
                f"stomp_bench: the parser returned {count} frames of {frames} "
                f"({len(parser.buffered)} bytes left over)"
            )
        best = max(best, frames / elapsed)
    # One frame decoded in full, so the figure is of real parsing.
    check = FrameParser().receive_data(one)[0]
    assert check.command == "SEND" and check.get("receipt") == "b-1" and check.body == smp_body(1)
    return best, len(one)


# -- figure 2: receipted SENDs over TLS


class BenchError(Exception):
    pass


@dataclass
class Server:
    name: str
    process: subprocess.Popen
    port: int
    destination: str
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                return
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)


def _start(
    name: str, argv: list[str], ready: re.Pattern[str], log: Path, destination: str
) -> Server:
    handle = open(log, "wb")
    process = subprocess.Popen(
        argv,
        stdout=handle,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=REPO_ROOT,
        start_new_session=True,
    )
    handle.close()
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        text = log.read_text(errors="replace")
        match = ready.search(text)
        if match:
            return Server(name, process, int(match.group(1)), destination, log)
        if process.poll() is not None or time.monotonic() > deadline:
            server = Server(name, process, 0, destination, log)
            server.stop()
            tail = "\n".join(text.splitlines()[-15:])
            raise BenchError(
                f"{name} did not become ready (exit {process.poll()}); last output:\n{tail}"
            )
        time.sleep(0.1)


async def receipted_sends(
    port: int,
    context: ssl.SSLContext,
    destination: str,
    sends: int,
    window: int,
    first: int,
    deadline: float,
) -> float:
    """SENDs/s from the first SEND to the last RECEIPT on one connection."""
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=None), deadline
    )
    parser = FrameParser()
    queue: list[Frame] = []

    async def frame() -> Frame:
        while not queue:
            data = await asyncio.wait_for(reader.read(65536), deadline)
            if not data:
                raise BenchError("the server closed the connection")
            queue.extend(item for item in parser.receive_data(data) if item is not HEARTBEAT)
        return queue.pop(0)

    try:
        writer.write(
            encode_frame(
                Frame("CONNECT", (("accept-version", "1.2"), ("host", "/"), ("heart-beat", "0,0")))
            )
        )
        connected = await frame()
        if connected.command != "CONNECTED":
            raise BenchError(
                f"CONNECT answered with {connected.command}: {connected.get('message')}"
            )
        frames = [send_frame(first + i, destination) for i in range(sends)]
        sent = received = 0
        start = time.perf_counter()
        while received < sends:
            if sent < sends and sent - received < window:
                burst = min(window - (sent - received), sends - sent)
                writer.write(b"".join(frames[sent : sent + burst]))
                sent += burst
                continue
            reply = await frame()
            if reply.command != "RECEIPT":
                raise BenchError(
                    f"{reply.command} instead of a RECEIPT: {reply.get('message')} {reply.body[:200]!r}"
                )
            expected = f"b-{first + received}"
            if reply.get("receipt-id") != expected:
                raise BenchError(f"RECEIPT for {reply.get('receipt-id')!r}, expected {expected!r}")
            received += 1
        elapsed = time.perf_counter() - start
        writer.write(encode_frame(Frame("DISCONNECT", (("receipt", "bye"),))))
        await writer.drain()
        return sends / elapsed
    finally:
        writer.close()
        try:
            await asyncio.wait_for(writer.wait_closed(), 5)
        except (OSError, asyncio.TimeoutError, ssl.SSLError):
            pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=200_000, help="SEND frames per parse run")
    ap.add_argument("--sends", type=int, default=2000, help="receipted SENDs per run and server")
    ap.add_argument("--window", type=int, default=32, help="SENDs in flight without their RECEIPT")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--deadline", type=float, default=30.0, help="seconds any single read may take")
    ap.add_argument("--quick", action="store_true", help="--frames 50000 --sends 500 --repeats 2")
    ap.add_argument(
        "--no-rabbitmq",
        action="store_true",
        help="do not start RabbitMQ (the ratio is then unmeasured)",
    )
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = ap.parse_args(argv)
    if args.quick:
        args.frames, args.sends, args.repeats = 50_000, 500, 2
    if min(args.frames, args.sends, args.window, args.repeats) < 1:
        ap.error("--frames, --sends, --window and --repeats must be positive")

    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpu(s), "
        f"load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    figures: dict[str, float | None] = {}
    rate, size = parse_rate(args.frames, args.repeats)
    figures["parse_frames_per_s"] = rate
    print(
        f"parse: {rate:,.0f} SEND frames/s ({size}-byte frames, {args.frames} per run, best of {args.repeats})",
        flush=True,
    )

    work = Path(tempfile.mkdtemp(prefix="stomp-bench."))
    servers: list[Server] = []
    problems: list[str] = []
    try:
        pki = make_pki(work / "pki")
        context = client_context(pki.client_cert_file, pki.client_key_file, pki.ca_file)
        tls = [
            "--cert",
            str(pki.server_cert_file),
            "--key",
            str(pki.server_key_file),
            "--ca",
            str(pki.ca_file),
        ]
        servers.append(
            _start(
                "reference",
                [
                    sys.executable,
                    "-m",
                    "reference_impl.stomp",
                    "serve",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    *tls,
                    "--store",
                    str(work / "store"),
                ],
                re.compile(r"STOMP_READY port=(\d+)"),
                work / "reference.log",
                "/exchange/smp/12345678",
            )
        )
        if not args.no_rabbitmq:
            if not Path("/usr/lib/rabbitmq/bin/rabbitmq-server").exists():
                problems.append(
                    "RabbitMQ is not installed (scripts/install-rabbitmq.sh): ratio not measured"
                )
            else:
                servers.append(
                    _start(
                        "rabbitmq",
                        [
                            str(REPO_ROOT / "scripts" / "rabbitmq.sh"),
                            *tls,
                            "--python",
                            sys.executable,
                        ],
                        re.compile(r"RABBITMQ_READY=1 port=(\d+)"),
                        work / "rabbitmq.log",
                        "/exchange/smp/12345678",
                    )
                )
        best: dict[str, float] = {}
        counter = 0
        for round_ in range(args.repeats):
            for server in servers:
                rate = asyncio.run(
                    receipted_sends(
                        server.port,
                        context,
                        server.destination,
                        args.sends,
                        args.window,
                        counter,
                        args.deadline,
                    )
                )
                counter += args.sends
                best[server.name] = max(best.get(server.name, 0.0), rate)
                print(
                    f"receipted SENDs/s, {server.name}, run {round_ + 1}: {rate:,.0f}", flush=True
                )
    except (BenchError, OSError, ssl.SSLError, asyncio.TimeoutError) as exc:
        problems.append(f"receipted SENDs: {type(exc).__name__}: {exc}")
        best = locals().get("best", {})
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)

    ours = best.get("reference")
    theirs = best.get("rabbitmq")
    figures["reference_receipted_sends_per_s"] = ours
    figures["rabbitmq_receipted_sends_per_s"] = theirs
    ratio = ours / theirs if ours and theirs else None
    figures["ratio_reference_over_rabbitmq"] = ratio

    rows = [
        (
            "parse SEND frames/s",
            f"{figures['parse_frames_per_s']:,.0f}",
            f">= {PARSE_TARGET:,}",
            figures["parse_frames_per_s"] >= PARSE_TARGET,
        ),
        (
            "receipted SENDs/s, reference (TLS)",
            f"{ours:,.0f}" if ours else "not measured",
            "",
            None,
        ),
        (
            "receipted SENDs/s, RabbitMQ 3.10 (TLS)",
            f"{theirs:,.0f}" if theirs else "not measured",
            "",
            None,
        ),
        (
            "ratio reference / RabbitMQ",
            f"{ratio:.2f}" if ratio else "not measured",
            f">= {RATIO_TARGET:g}",
            ratio is not None and ratio >= RATIO_TARGET,
        ),
    ]
    print()
    print(f"{'figure':<42} {'value':>14} {'target':>12}  result")
    for name, value, target, ok in rows:
        verdict = "" if ok is None else ("PASS" if ok else "FAIL")
        print(f"{name:<42} {value:>14} {target:>12}  {verdict}")
    for problem in problems:
        print(f"problem: {problem}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "figures": figures,
                    "problems": problems,
                    "sends": args.sends,
                    "window": args.window,
                    "frames": args.frames,
                    "repeats": args.repeats,
                },
                indent=2,
            )
            + "\n"
        )
    failed = [name for name, _, _, ok in rows if ok is False] or problems
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

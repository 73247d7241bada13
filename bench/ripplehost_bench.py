#!/usr/bin/env python3
"""Benchmark of the Ripple host frame codec (issue #13).

Figure: frames/s parsed by reference_impl.ripplehost.frame.FrameParser from
a stream of typical frames (host MSGs of ~40-byte JSON pings and echoes,
node frames with users, and chunked messages interleaved: a mix the
harness's suites send), fed in 64 KiB pieces as a socket hands them over,
every frame fully checked (header grammar, size, END trailer). Target:
>= 200,000 frames/s. Printed beside it, for information: messages/s through
the parser plus reassembly and JSON decoding (MessageReader), with no
target.

Every figure is the best of --repeats runs; the run is checked (the parsed
frames' count and the decoded messages' count must be the stream's). Exits
1 when the target is missed.

Usage: bench/ripplehost_bench.py [--frames N] [--repeats R] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from reference_impl.ripplehost.frame import FrameParser, MessageReader, encode_frame, message_frames  # noqa: E402

PARSE_TARGET = 200_000
CHUNK = 64 * 1024


def make_stream(count: int) -> tuple[bytes, int, int]:
    """About ``count`` frames: the stream, its frame count, its message count."""
    frames = []
    messages = 0
    msgno = 0
    while len(frames) < count:
        msgno = (msgno + 2) % 2_000_000
        kind = msgno % 10
        if kind < 6:
            frames += message_frames("MSG", msgno, {"type": "ping"})
        elif kind < 8:
            frames += message_frames(
                "RPY",
                msgno + 1,
                {"type": "echo", "text": "hello, ripple"},
                to_user="alice",
                from_user="bob",
            )
        else:
            # two chunked messages interleaved, 3 frames each
            first = message_frames("MSG", msgno, {"type": "echo", "text": "x" * 40}, chunk_size=20)
            second = message_frames(
                "MSG", msgno + 100_000_000, {"type": "echo", "text": "y" * 40}, chunk_size=20
            )
            frames += [f for pair in zip(first, second) for f in pair]
            messages += 1
        messages += 1
    data = b"".join(encode_frame(frame) for frame in frames)
    return data, len(frames), messages


def run_parse(data: bytes) -> tuple[float, int]:
    parser = FrameParser()
    total = 0
    start = time.perf_counter()
    for at in range(0, len(data), CHUNK):
        total += len(parser.receive_data(data[at : at + CHUNK]))
    return time.perf_counter() - start, total


def run_messages(data: bytes) -> tuple[float, int]:
    reader = MessageReader()
    total = 0
    start = time.perf_counter()
    for at in range(0, len(data), CHUNK):
        total += len(reader.receive_data(data[at : at + CHUNK]))
    return time.perf_counter() - start, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    data, frame_count, message_count = make_stream(args.frames)
    best_parse = best_messages = float("inf")
    for _ in range(args.repeats):
        elapsed, got = run_parse(data)
        if got != frame_count:
            print(f"FAIL: parsed {got} frames, the stream holds {frame_count}")
            return 1
        best_parse = min(best_parse, elapsed)
        elapsed, got = run_messages(data)
        if got != message_count:
            print(f"FAIL: decoded {got} messages, the stream holds {message_count}")
            return 1
        best_messages = min(best_messages, elapsed)
    frames_per_s = frame_count / best_parse
    messages_per_s = message_count / best_messages
    ok = frames_per_s >= PARSE_TARGET
    print(
        f"Ripple frames parsed: {frames_per_s:,.0f} frames/s ({frame_count} frames, {len(data):,} bytes, "
        f"best of {args.repeats}) target >= {PARSE_TARGET:,}: {'PASS' if ok else 'FAIL'}"
    )
    print(
        f"Ripple messages (parse + reassembly + JSON): {messages_per_s:,.0f} messages/s (no target)"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "frames_per_second": round(frames_per_s),
                    "frames_target": PARSE_TARGET,
                    "messages_per_second": round(messages_per_s),
                    "frames": frame_count,
                    "bytes": len(data),
                    "python": platform.python_version(),
                    "passed": ok,
                },
                indent=1,
            )
            + "\n",
            encoding="utf-8",
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""What the command lines of the reference nodes share: serving until
SIGTERM/SIGINT with a ready line (and optional ready file) the harness
waits for, and argument types."""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger("reference_impl")


class ServingNode(Protocol):
    async def start(self, host: str, port: int) -> tuple[str, int]: ...
    async def close(self) -> None: ...


def write_ready_file(path: str, info: dict[str, Any]) -> None:
    """Atomically, so a harness polling for the file never reads half of it."""
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as ready_file:
        json.dump(info, ready_file)
        ready_file.write("\n")
    os.replace(temporary, path)


async def serve_until_stopped(
    node: ServingNode,
    host: str,
    port: int,
    ready_file: str | None,
    ready: Callable[[str, int], tuple[str, dict[str, Any]]],
    cli_error: Callable[[str], Exception],
) -> None:
    """Start ``node``; once listening write the ready file (first: whoever
    sees the stdout line may look for it) and print the ready line that
    ``ready(host, port)`` gives; serve until SIGTERM or SIGINT; close."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        host, port = await node.start(host, port)
    except OSError as exc:
        raise cli_error(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    try:
        line, info = ready(host, port)
        if ready_file:
            write_ready_file(ready_file, info)
        print(line, flush=True)
        await stop.wait()
        log.info("shutting down")
    finally:
        await node.close()


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def port_number(text: str) -> int:
    """A TCP port, 0 (choose one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0..65535, got {text}")
    return value


def run_command(
    args: argparse.Namespace,
    cli_error: type[Exception] | tuple[type[Exception], ...],
    exit_usage: int,
    exit_ok: int = 0,
) -> int:
    """Run the subcommand a reference node's parser chose (``args.run``, a
    coroutine function or a plain one) with logging to stderr at
    ``args.log_level``. A ``cli_error`` is a usage problem: its text on
    stderr and ``exit_usage``; Ctrl-C ends quietly with ``exit_ok``."""
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        if inspect.iscoroutinefunction(args.run):
            return asyncio.run(args.run(args))
        return args.run(args)
    except cli_error as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return exit_usage
    except KeyboardInterrupt:
        return exit_ok

"""Command line of the reference RIPP node: ``python -m reference_impl.ripp``.

``consume`` listens for producers (the consumer side; the suites' "server"
role): it answers each Handshake with a Schema_negotiation against its
registry, applies Deltas per source, answers Checkpoint_requests.
``produce`` connects to a consumer (the "client" role): Handshake, Deltas
from a file or generated, Heartbeats at the interval the consumer states,
optionally a checkpoint, then closes.

Output (stdout, one line each, flushed): ``RIPP_READY port=N`` (consume,
once listening), then ``RIPP_<WHAT> {json}`` lines: ``RIPP_NEGOTIATED``,
``RIPP_APPLIED``, ``RIPP_DUPLICATE``, ``RIPP_GAP``, ``RIPP_CHECKPOINT``,
``RIPP_CLOSED``. Logs go to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from ..faults import add_fault_option, fault_help, parse_faults
from ..variants import Shape, add_variant_option, variant_help
from .variants import SPECS as VARIANT_SPECS
from ..node_cli import (
    non_negative_float,
    port_number,
    positive_float,
    run_command,
    serve_until_stopped,
)
from .faults import SPECS as FAULT_SPECS, Fault
from .node import (
    ConsumerNode,
    RippError,
    format_event,
    generated_deltas,
    load_deltas_file,
    load_registry_file,
    run_producer,
)
from .payloads import DEFAULT_HEARTBEAT_MS, HEARTBEAT_MAX_MS, HEARTBEAT_MIN_MS

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_TIMEOUT, EXIT_REJECTED = 0, 1, 2, 5, 6
_EXIT_BY_KIND = {"timeout": EXIT_TIMEOUT, "rejected": EXIT_REJECTED}


class CliError(Exception):
    pass


def _print(line: str | None) -> None:
    if line is not None:
        print(line, flush=True)


def _registry(path: str):
    try:
        return load_registry_file(path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CliError(f"--schemas {path}: {exc}") from None


def _interval_ms(seconds: float) -> int:
    ms = round(seconds * 1000)
    if not HEARTBEAT_MIN_MS <= ms <= HEARTBEAT_MAX_MS:
        raise CliError(
            f"--heartbeat-interval must be within {HEARTBEAT_MIN_MS / 1000}..{HEARTBEAT_MAX_MS / 1000} s"
        )
    return ms


async def _consume(args: argparse.Namespace) -> int:
    node = ConsumerNode(
        args.worker_id,
        _registry(args.schemas),
        heartbeat_interval_ms=_interval_ms(args.heartbeat_interval),
        faults=parse_faults(Fault, args.fault),
        on_event=lambda peer, event: _print(format_event(event, peer)),
        shape=Shape.from_variants(set(args.variant), args.late_seconds),
    )
    if args.fault:
        logging.getLogger("reference_impl.ripp").warning(
            "fault injection active: %s", ", ".join(args.fault)
        )
    await serve_until_stopped(
        node,
        args.host,
        args.port,
        args.ready_file,
        lambda host, port: (f"RIPP_READY port={port}", {"host": host, "port": port}),
        CliError,
    )
    return EXIT_OK


async def _produce(args: argparse.Namespace) -> int:
    outputs = list(_registry(args.schemas).items())
    try:
        deltas = (
            load_deltas_file(args.deltas) if args.deltas else generated_deltas(outputs, args.count)
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CliError(f"--deltas {args.deltas}: {exc}") from None
    try:
        run = await run_producer(
            args.peer_host,
            args.peer_port,
            args.source_id,
            outputs,
            deltas,
            timeout=args.timeout,
            stay=args.stay,
            checkpoint=args.checkpoint,
            faults=parse_faults(Fault, args.fault),
            on_event=lambda event: _print(format_event(event)),
            variants=args.variant,
            shape=Shape.from_variants(set(args.variant), args.late_seconds),
        )
    except RippError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return _EXIT_BY_KIND.get(exc.kind, EXIT_ERROR)
    _print("RIPP_DONE " + json.dumps({"sent": run.sent, "heartbeats": run.heartbeats}))
    return EXIT_OK


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a count: {text!r}") from None
    if not 0 <= value <= 1_000_000:
        raise argparse.ArgumentTypeError("count must be 0..1000000")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m reference_impl.ripp",
        description="Reference RIPP node of the conformance harness (docs/ripp-profile.md).",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    common.add_argument(
        "--schemas",
        "--schema",
        dest="schemas",
        required=True,
        metavar="FILE",
        help='registry JSON: {"<output>": {"schema_name", "version", "fields": [...]}}; the '
        "consumer's reader schemas, or the producer's declared outputs (in file order)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    roles = {"server": "consume", "client": "produce"}

    consume = commands.add_parser(
        "consume",
        parents=[common],
        help="accept producers (consumer side)",
        epilog=fault_help(FAULT_SPECS, roles) + "\n\n" + variant_help(VARIANT_SPECS),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    consume.add_argument("--host", default="127.0.0.1")
    consume.add_argument(
        "--port", type=port_number, default=0, help="0 picks a free port (default)"
    )
    consume.add_argument("--worker-id", default="reference-consumer")
    consume.add_argument(
        "--heartbeat-interval",
        type=positive_float,
        default=DEFAULT_HEARTBEAT_MS / 1000,
        metavar="S",
        help="interval asked of producers in Schema_negotiation (default: %(default)g)",
    )
    consume.add_argument("--ready-file", metavar="PATH")
    add_fault_option(consume, FAULT_SPECS, "server")
    add_variant_option(consume, VARIANT_SPECS, "server")
    consume.set_defaults(run=_consume)

    produce = commands.add_parser(
        "produce",
        parents=[common],
        help="connect to a consumer (producer side)",
        epilog=f"exit status: {EXIT_OK} done, {EXIT_ERROR} connection or protocol error, "
        f"{EXIT_USAGE} bad arguments, {EXIT_TIMEOUT} timeout, {EXIT_REJECTED} schemas refused",
    )
    produce.add_argument("--peer-host", required=True)
    produce.add_argument("--peer-port", type=port_number, required=True)
    produce.add_argument("--source-id", required=True, help="source_worker_id of the Handshake")
    what = produce.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--deltas",
        metavar="FILE",
        help='JSON list of {"output", "key", "op", "fields", "sequence_no"?}',
    )
    what.add_argument(
        "--count", type=_count, metavar="N", help="N generated deltas for the first output"
    )
    produce.add_argument(
        "--checkpoint",
        action="store_true",
        help="after the deltas, request a checkpoint and print it",
    )
    produce.add_argument(
        "--stay",
        type=non_negative_float,
        default=0.0,
        metavar="S",
        help="keep the connection (heartbeating) S seconds after the deltas",
    )
    produce.add_argument(
        "--timeout",
        type=positive_float,
        default=10.0,
        metavar="S",
        help="deadline to connect, for the Schema_negotiation and for a Checkpoint_ack",
    )
    add_fault_option(produce, FAULT_SPECS, "client")
    add_variant_option(produce, VARIANT_SPECS, "client")
    produce.set_defaults(run=_produce)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser().parse_args(argv), CliError, EXIT_USAGE, EXIT_OK)


if __name__ == "__main__":
    sys.exit(main())

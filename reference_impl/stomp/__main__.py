"""Command line of the reference STOMP node: ``python -m reference_impl.stomp``.

``serve`` runs the STOMP 1.2 server of the Swaptacular profile over TLS with
a durable store; ``accepted`` prints what that store holds (the adapter of
docs/stomp-adapter.md); ``client`` delivers SMP messages to a server named by
a manifest (client.py). Run any with ``--help``.

stdout carries only the lines a harness reads: ``STOMP_READY port=N``
(serve, once listening), the adapter's JSON lines (accepted), the client's
``DELIVERED=`` lines. Logs go to stderr; keys and passcodes are never
printed.
"""

from __future__ import annotations

import argparse
import logging
import sys

from ..faults import FaultPoints, add_fault_option, fault_help
from ..node_cli import port_number, positive_float, run_command, serve_until_stopped
from ..variants import Shape, add_variant_option, variant_help
from .faults import SPECS as FAULT_SPECS
from .faults import Fault
from .store import StoreError, iter_adapter_lines
from .variants import SPECS as VARIANT_SPECS

log = logging.getLogger("reference_impl.stomp")

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


class CliError(Exception):
    """A problem with the command line or its files: one line to stderr, exit 2."""


def _heart_beat(text: str) -> tuple[int, int]:
    from .frame import parse_heart_beat

    try:
        return parse_heart_beat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


async def _serve(args: argparse.Namespace) -> int:
    import ssl

    from .node import StompServerNode

    faults = frozenset(Fault(name) for name in args.fault)
    if faults:
        log.warning("fault injection active: %s", ", ".join(sorted(args.fault)))
    try:
        node = StompServerNode(
            cert_file=args.cert,
            key_file=args.key,
            ca_file=args.ca,
            store_dir=args.store,
            faults=faults,
            heart_beat=args.heart_beat,
            connect_timeout=args.connect_timeout,
            max_connections=args.max_connections,
            variants=frozenset(args.variant),
            shape=Shape.from_variants(set(args.variant), args.late_seconds),
        )
    except (OSError, ssl.SSLError) as exc:
        raise CliError(f"TLS files (--cert/--key/--ca): {exc}") from None
    except StoreError as exc:
        raise CliError(f"--store: {exc}") from None

    def ready(host: str, port: int) -> tuple[str, dict]:
        line = f"STOMP_READY port={port}"
        if args.manifest:
            # The node's own stomp.toml (profile: every node MUST publish one),
            # naming the address it listens on; written before the ready line.
            from .manifest import render_manifest

            address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            text = FaultPoints(FAULT_SPECS, faults).apply(
                "manifest-text", render_manifest([address], "/", args.manifest_destination)
            )
            with open(args.manifest, "w", encoding="utf-8") as handle:
                handle.write(text)
            line += f" manifest={args.manifest}"
        return line, {"host": host, "port": port}

    await serve_until_stopped(node, args.host, args.port, args.ready_file, ready, CliError)
    return EXIT_OK


def _accepted(args: argparse.Namespace) -> int:
    try:
        for line in iter_adapter_lines(args.store):
            sys.stdout.write(line + "\n")
    except StoreError as exc:
        print(f"error: --store: {exc}", file=sys.stderr, flush=True)
        return EXIT_ERROR
    except OSError as exc:
        print(f"error: --store: {exc.strerror or exc}", file=sys.stderr, flush=True)
        return EXIT_ERROR
    sys.stdout.flush()
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m reference_impl.stomp",
        description="Reference node of the Swaptacular STOMP profile (STOMP 1.2 subset over TLS 1.3, "
        "SMP 2.1 bodies) for the conformance harness.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging threshold; logs go to stderr (default: %(default)s)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        parents=[common],
        help="run the STOMP server",
        description="Listen for STOMP clients over TLS 1.3 with client certificates required; answer "
        "CONNECT/STOMP with CONNECTED (version 1.2, heart-beats), store every valid SEND durably (fsync) "
        "before its RECEIPT, refuse invalid frames with ERROR and close. Prints 'STOMP_READY port=N' when "
        "listening. SIGTERM or SIGINT stops it (exit 0). See reference_impl/stomp/server.py for what "
        "is refused.",
        epilog=fault_help(
            tuple(spec for spec in FAULT_SPECS if spec.role == "server"), {"server": "serve"}
        )
        + "\n\n"
        + variant_help(tuple(spec for spec in VARIANT_SPECS if "server" in spec.roles)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    serve.add_argument(
        "--port", type=port_number, default=0, help="TCP port; 0 picks a free one (default)"
    )
    serve.add_argument(
        "--cert", required=True, metavar="PEM", help="the server's certificate chain"
    )
    serve.add_argument("--key", required=True, metavar="PEM", help="the server's private key")
    serve.add_argument(
        "--ca", required=True, metavar="PEM", help="the CA client certificates must chain to"
    )
    serve.add_argument(
        "--store", required=True, metavar="DIR", help="the message store directory (created)"
    )
    serve.add_argument(
        "--heart-beat",
        type=_heart_beat,
        default=(1000, 10000),
        metavar="SX,SY",
        help="CONNECTED's heart-beat: ms between our heart-beats we can do, ms we would like "
        "between the client's (default: 1000,10000; --variant other-heart-beats replaces it)",
    )
    serve.add_argument(
        "--connect-timeout",
        type=positive_float,
        default=30.0,
        metavar="S",
        help="seconds a client gets to send CONNECT (default: %(default)g)",
    )
    serve.add_argument(
        "--max-connections",
        type=int,
        default=256,
        metavar="N",
        help="connections served at once (default: %(default)s)",
    )
    serve.add_argument(
        "--ready-file",
        metavar="PATH",
        help='also write {"host", "port"} as JSON to PATH once listening',
    )
    serve.add_argument(
        "--manifest",
        metavar="PATH",
        help="once listening, write the node's stomp.toml (servers = the address listened on) to PATH "
        "and add manifest=PATH to the ready line",
    )
    serve.add_argument(
        "--manifest-destination",
        default="/exchange/smp",
        metavar="DEST",
        help="the manifest's destination (default: %(default)s)",
    )
    add_fault_option(serve, FAULT_SPECS, "server")
    add_variant_option(serve, VARIANT_SPECS, "server")
    serve.set_defaults(run=_serve)

    accepted = commands.add_parser(
        "accepted",
        parents=[common],
        help="print the messages the server's store holds",
        description="Print one JSON object per message in the store, in acceptance order: destination, "
        "type, content-type, receipt, body (docs/stomp-adapter.md). Read-only: safe while the server runs.",
    )
    accepted.add_argument(
        "--store", required=True, metavar="DIR", help="the server's --store directory"
    )
    accepted.set_defaults(run=_accepted)

    try:
        from .client import add_client_parser
    except ImportError as exc:  # the client is another module; serve and accepted work without it
        log.debug("no client command: %s", exc)
    else:
        add_client_parser(commands, parents=[common])
    return parser


def main(argv: list[str] | None = None) -> int:
    usage_errors: tuple[type[Exception], ...] = (CliError,)
    try:
        # client.py's usage errors (ClientUsageError, a ValueError) end with one line, exit 2.
        from .client import ClientUsageError

        usage_errors += (ClientUsageError,)
    except ImportError:
        pass
    return run_command(build_parser().parse_args(argv), usage_errors, EXIT_USAGE, EXIT_OK)


if __name__ == "__main__":
    sys.exit(main())

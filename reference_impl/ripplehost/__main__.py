"""Command line of the reference Ripple host node: ``python -m reference_impl.ripplehost``.

``serve`` accepts associations (the acceptor) and answers MSGs with the
reference message service (ping, echo, hold, ping-me; see node.py);
``connect`` opens one association (the initiator), exchanges host-ids,
sends the messages of a file, prints their answers and closes. Run either
with ``--help`` for the details.

Output (stdout, one line each, flushed): ``RIPPLE_READY port=N host=H
hostname=NAME`` (serve, once listening), then ``RIPPLE_HOST_ID``,
``RIPPLE_MSG``, ``RIPPLE_ANSWER``, ``RIPPLE_CLOSED`` lines, each with a JSON
object. Logs go to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from ..faults import add_fault_option, fault_help, parse_faults
from ..variants import Shape, add_variant_option, variant_help
from ..node_cli import (
    non_negative_float,
    port_number,
    positive_float,
    run_command,
    serve_until_stopped,
)
from .faults import SPECS as FAULT_SPECS
from .faults import Fault
from .variants import SPECS as VARIANT_SPECS
from .node import (
    DEFAULT_HOST_ID_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    ConnectError,
    Outgoing,
    RippleNode,
    client_tls_context,
    parse_outgoing,
    run_initiator,
    server_tls_context,
)
from .session import MAX_HOSTNAME_LEN

log = logging.getLogger("reference_impl.ripplehost")

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 5
EXIT_REJECTED = 6


class CliError(Exception):
    """A problem with the command line or its files: one line to stderr, exit 2."""


def _hostname(text: str) -> str:
    if not 0 < len(text) <= MAX_HOSTNAME_LEN:
        raise argparse.ArgumentTypeError(f"hostname must be 1..{MAX_HOSTNAME_LEN} characters")
    return text


def _load_messages(path: str | None) -> list[Outgoing]:
    if path is None:
        return []
    try:
        items = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise CliError(f"--send: cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CliError(f"--send: {path} is not JSON: {exc}") from None
    try:
        return parse_outgoing(items)
    except ValueError as exc:
        raise CliError(f"--send: {path}: {exc}") from None


async def _serve(args: argparse.Namespace) -> int:
    if (args.tls_cert is None) != (args.tls_key is None):
        raise CliError("--tls-cert and --tls-key go together")
    try:
        context = server_tls_context(args.tls_cert, args.tls_key) if args.tls_cert else None
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot load the TLS certificate or key: {exc}") from None
    faults = parse_faults(Fault, args.fault)
    if faults:
        log.warning("fault injection active: %s", ", ".join(sorted(f.value for f in faults)))
    node = RippleNode(
        args.hostname,
        ssl_context=context,
        faults=faults,
        messages=_load_messages(args.send),
        host_id_timeout=args.host_id_timeout,
        idle_timeout=args.idle_timeout,
        variants=frozenset(args.variant),
        shape=Shape.from_variants(set(args.variant), args.late_seconds),
    )
    await serve_until_stopped(
        node,
        args.host,
        args.port,
        args.ready_file,
        lambda host, port: (
            f"RIPPLE_READY port={port} host={host} hostname={args.hostname}",
            {"host": host, "port": port, "hostname": args.hostname, "tls": context is not None},
        ),
        CliError,
    )
    return EXIT_OK


async def _connect(args: argparse.Namespace) -> int:
    messages = _load_messages(args.send)
    try:
        context = client_tls_context(args.tls_ca) if args.tls else None
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot load --tls-ca: {exc}") from None
    try:
        result = await run_initiator(
            args.peer_host,
            args.peer_port,
            args.hostname,
            messages,
            timeout=args.timeout,
            stay=args.stay,
            ssl_context=context,
            faults=parse_faults(Fault, args.fault),
            variants=frozenset(args.variant),
            shape=Shape.from_variants(set(args.variant), args.late_seconds),
        )
    except ConnectError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return EXIT_ERROR
    if result.timed_out:
        print(
            f"error: timeout after {args.timeout:g}s ({len(result.answers)} of {len(messages)} answered)",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_TIMEOUT
    if result.close_reason != "done":
        print(f"error: association closed: {result.close_reason}", file=sys.stderr, flush=True)
        return EXIT_ERROR
    errors = [answer for answer in result.answers if answer.is_error]
    if errors:
        print(
            f"error: {len(errors)} message(s) answered with ERR, first: {errors[0].message.body}",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_REJECTED
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m reference_impl.ripplehost",
        description="Reference Ripple host protocol node of the conformance harness (BEEP-style frames over TCP).",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging threshold; logs go to stderr (default: %(default)s)",
    )
    common.add_argument(
        "--hostname",
        type=_hostname,
        required=True,
        help="this host's name, sent in its host-id message",
    )
    common.add_argument(
        "--send",
        metavar="FILE",
        help="JSON array of messages to send once host-ids are exchanged (a message object, "
        'or {"body", "to_user", "from_user", "chunk_size"}); see node.parse_outgoing',
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    epilog = (
        fault_help(FAULT_SPECS, {"server": "serve", "client": "connect"})
        + "\n\n"
        + variant_help(VARIANT_SPECS)
    )

    serve = commands.add_parser(
        "serve",
        parents=[common],
        help="accept associations (the acceptor)",
        description="Listen; answer each initiator's host-id with this host's, then its MSGs (ping -> pong, "
        "echo, hold, ping-me; unknown types get ERR). Prints 'RIPPLE_READY port=N host=H hostname=NAME' once "
        "listening. SIGTERM or SIGINT stops it (exit 0).",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    serve.add_argument(
        "--port", type=port_number, default=0, help="TCP port; 0 picks a free one (default)"
    )
    serve.add_argument("--tls-cert", metavar="PEM", help="serve TLS with this certificate (chain)")
    serve.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    serve.add_argument(
        "--host-id-timeout",
        type=positive_float,
        default=DEFAULT_HOST_ID_TIMEOUT,
        metavar="S",
        help="close an association whose host-id MSG has not arrived within S seconds "
        "(default: %(default)g)",
    )
    serve.add_argument(
        "--idle-timeout",
        type=positive_float,
        default=DEFAULT_IDLE_TIMEOUT,
        metavar="S",
        help="close an association after S seconds with nothing received (default: %(default)g)",
    )
    serve.add_argument(
        "--ready-file",
        metavar="PATH",
        help='also write {"host", "port", "hostname", "tls"} as JSON to PATH once listening',
    )
    add_fault_option(serve, FAULT_SPECS, "server")
    add_variant_option(serve, VARIANT_SPECS, "server")
    serve.set_defaults(run=_serve)

    connect = commands.add_parser(
        "connect",
        parents=[common],
        help="open one association (the initiator)",
        description="Connect, send the host-id MSG, then the --send messages (pipelined); print each answer; "
        "answer the acceptor's MSGs; close --stay seconds after the last answer.",
        epilog=f"exit status: {EXIT_OK} every message answered with RPY, {EXIT_ERROR} connection or protocol "
        f"error, {EXIT_USAGE} bad arguments or files, {EXIT_TIMEOUT} timeout, {EXIT_REJECTED} a message was "
        "answered with ERR\n\n" + epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    connect.add_argument("--peer-host", required=True)
    connect.add_argument("--peer-port", type=port_number, required=True)
    connect.add_argument(
        "--timeout",
        type=positive_float,
        default=10.0,
        metavar="S",
        help="deadline for the whole exchange (default: %(default)g)",
    )
    connect.add_argument(
        "--stay",
        type=non_negative_float,
        default=0.0,
        metavar="S",
        help="after the last answer, keep serving the acceptor's MSGs for S seconds (default: 0)",
    )
    connect.add_argument("--tls", action="store_true", help="connect with TLS")
    connect.add_argument(
        "--tls-ca", metavar="PEM", help="verify the server's chain against this CA (with --tls)"
    )
    add_fault_option(connect, FAULT_SPECS, "client")
    add_variant_option(connect, VARIANT_SPECS, "client")
    connect.set_defaults(run=_connect)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser().parse_args(argv), CliError, EXIT_USAGE, EXIT_OK)


if __name__ == "__main__":
    sys.exit(main())

"""Command line of the reference BTP node: ``python -m reference_impl.btp``.

``serve`` runs a BTP server over WebSocket for conformance suites to test
(optionally with a deliberate fault); ``client`` connects to any BTP server,
authenticates, sends requests and serves the server's requests for a while.
Run either with ``--help`` for the details.

Output (stdout, one line each, flushed): ``BTP_READY url=ws://HOST:PORT/
port=PORT`` (serve, once listening), then ``BTP_<WHAT> {json}`` lines:
``BTP_AUTHENTICATED``, ``BTP_AUTH_FAILED``, ``BTP_RECEIVED`` (a request of
the peer), ``BTP_BALANCE`` (an accepted Transfer), ``BTP_UNEXPECTED``,
``BTP_UNREADABLE``, ``BTP_RESPONSE`` (the answer to one of our requests),
``BTP_CLOSED``.  Logs go to stderr.  Tokens are never printed or logged.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from .node import (
    DEFAULT_AUTH_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_REQUEST_TIMEOUT,
    BtpError,
    BtpNode,
    RequestResult,
    RequestSpec,
    format_event,
    format_result,
    run_client,
)
from ..node_cli import (
    non_negative_float,
    port_number,
    positive_float,
    run_command,
    serve_until_stopped,
)
from .packet import MAX_AMOUNT, ContentType
from ..faults import add_fault_option, fault_help
from ..variants import Shape, add_variant_option, variant_help
from .faults import SPECS as FAULT_SPECS
from .variants import SPECS as VARIANT_SPECS
from .session import SessionEvent

log = logging.getLogger("reference_impl.btp")

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_AUTH = 3
EXIT_TIMEOUT = 5
EXIT_REJECTED = 6

_EXIT_BY_KIND = {"auth": EXIT_AUTH, "timeout": EXIT_TIMEOUT}


class CliError(Exception):
    """A problem with the command line or its files: one line to stderr, exit 2."""


def _print(line: str | None) -> None:
    if line is not None:
        print(line, flush=True)


# --- tokens ----------------------------------------------------------------------------


def _auth_token(args: argparse.Namespace) -> bytes:
    """The token, from a file (one trailing newline dropped) or an environment variable."""
    if args.auth_token_file is not None:
        try:
            raw = Path(args.auth_token_file).read_bytes()
        except OSError as exc:
            raise CliError(
                f"--auth-token-file: cannot read {args.auth_token_file}: {exc.strerror or exc}"
            ) from None
        for ending in (b"\r\n", b"\n"):
            if raw.endswith(ending):
                raw = raw[: -len(ending)]
                break
        where = "--auth-token-file"
    else:
        value = os.environb.get(os.fsencode(args.auth_token_env))
        if value is None:
            raise CliError(
                f"--auth-token-env: environment variable {args.auth_token_env} is not set"
            )
        raw = value
        where = "--auth-token-env"
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CliError(
            f"{where}: the token is not UTF-8 (BTP auth tokens are UTF-8 text)"
        ) from None
    return raw


def _add_token_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument(
        "--auth-token-file",
        metavar="PATH",
        help="file holding the auth token (UTF-8; one trailing newline is dropped)",
    )
    group.add_argument(
        "--auth-token-env", metavar="VAR", help="environment variable holding the auth token"
    )


# --- request options -------------------------------------------------------------------


def _message_spec(text: str) -> RequestSpec:
    name, sep, body = text.partition(":")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME:TEXT, got {text!r}")
    if not name.isascii():
        raise argparse.ArgumentTypeError(f"protocol name {name!r} must be ASCII (IA5String)")
    return RequestSpec.message(name, body, ContentType.TEXT_PLAIN_UTF8)


def _data_spec(text: str) -> RequestSpec:
    name, sep, body = text.partition(":")
    if not sep or not name or not name.isascii():
        raise argparse.ArgumentTypeError(f"expected NAME:HEX with an ASCII name, got {text!r}")
    try:
        data = bytes.fromhex(body)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{body!r} is not hex") from None
    return RequestSpec.message(name, data, ContentType.APPLICATION_OCTET_STREAM)


def _transfer_spec(text: str) -> RequestSpec:
    try:
        amount = int(text, 10)
        return RequestSpec.transfer(amount)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"amount must be an integer in 0..{MAX_AMOUNT}, got {text!r}"
        ) from None


def _add_request_options(parser: argparse.ArgumentParser, when: str) -> None:
    group = parser.add_argument_group(
        "requests",
        f"sent {when}, in command-line order, each waiting for its answer; "
        "each answer is printed as 'BTP_RESPONSE {json}'",
    )
    group.add_argument(
        "--send-message",
        dest="requests",
        action="append",
        type=_message_spec,
        metavar="NAME:TEXT",
        help="a Message whose primary entry is NAME, content type 1 "
        "(text/plain; charset=utf-8), data TEXT; repeatable",
    )
    group.add_argument(
        "--send-data",
        dest="requests",
        action="append",
        type=_data_spec,
        metavar="NAME:HEX",
        help="a Message whose primary entry is NAME, content type 0 "
        "(application/octet-stream), data HEX (e.g. ilp:0c...); repeatable",
    )
    group.add_argument(
        "--send-transfer",
        dest="requests",
        action="append",
        type=_transfer_spec,
        metavar="AMOUNT",
        help="a Transfer of AMOUNT; repeatable",
    )
    group.add_argument(
        "--send-balance",
        dest="requests",
        action="append_const",
        const=RequestSpec.balance(),
        help="the balance query of docs/btp-adapter.md; repeatable",
    )


def _balance_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("balance")
    group.add_argument(
        "--initial-balance",
        type=_amount,
        default=0,
        metavar="N",
        help="balance before any Transfer (default: %(default)s)",
    )
    group.add_argument(
        "--max-balance",
        type=_amount,
        default=MAX_AMOUNT,
        metavar="N",
        help="Transfers that would take the balance above N are refused with "
        "Error F08 (default: 2**64-1)",
    )


def _check_balance(args: argparse.Namespace) -> None:
    if args.initial_balance > args.max_balance:
        raise CliError(
            f"--initial-balance {args.initial_balance} is above --max-balance {args.max_balance}"
        )


# --- serve -----------------------------------------------------------------------------


async def _serve(args: argparse.Namespace) -> int:
    _check_balance(args)
    token = _auth_token(args)

    def on_event(peer: str, event: SessionEvent) -> None:
        _print(format_event(event, peer))

    def on_result(result: RequestResult) -> None:
        _print(format_result(result))

    node = BtpNode(
        token,
        initial_balance=args.initial_balance,
        max_balance=args.max_balance,
        auth_timeout=args.auth_timeout,
        idle_timeout=args.idle_timeout,
        request_timeout=args.timeout,
        faults=args.fault,
        requests=args.requests or [],
        on_event=on_event,
        on_result=on_result,
        variants=args.variant,
        shape=Shape.from_variants(set(args.variant), args.late_seconds),
    )
    if args.fault:
        log.warning("fault injection active: %s", ", ".join(args.fault))
    await serve_until_stopped(
        node,
        args.host,
        args.port,
        args.ready_file,
        lambda host, port: (
            f"BTP_READY url={node.url} port={port}",
            {"url": node.url, "host": host, "port": port},
        ),
        CliError,
    )
    return EXIT_OK


# --- client ----------------------------------------------------------------------------


async def _client(args: argparse.Namespace) -> int:
    _check_balance(args)
    token = _auth_token(args)
    requests: list[RequestSpec] = args.requests or []
    try:
        run = await run_client(
            args.url,
            token,
            requests,
            stay=args.stay,
            timeout=args.timeout,
            initial_balance=args.initial_balance,
            max_balance=args.max_balance,
            faults=args.fault,
            on_event=lambda event: _print(format_event(event)),
            on_result=lambda result: _print(format_result(result)),
            variants=args.variant,
            shape=Shape.from_variants(set(args.variant), args.late_seconds),
        )
    except BtpError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return _EXIT_BY_KIND.get(exc.kind, EXIT_ERROR)
    rejected = [result for result in run.results if not result.ok]
    if rejected:
        first = rejected[0]
        code = getattr(first.packet, "code", "?")
        print(
            f"error: {len(rejected)} request(s) answered with an Error, first: {first.spec.label} -> {code}",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_REJECTED
    return EXIT_OK


# --- parser ----------------------------------------------------------------------------


def _amount(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= value <= MAX_AMOUNT:
        raise argparse.ArgumentTypeError(f"must be in 0..2**64-1, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m reference_impl.btp",
        description="Reference BTP 2.0 (RFC 23) node of the conformance harness, over WebSocket.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging threshold; logs go to stderr (default: %(default)s)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve_parser = commands.add_parser(
        "serve",
        parents=[common],
        help="run a BTP server",
        description="Listen for BTP clients over WebSocket: authenticate them (auth Message with the "
        "configured auth_token), answer Messages (empty Response; 'balance' and 'echo' as "
        "documented in docs/btp-adapter.md) and Transfers (balance += amount, or Error F08 above "
        "--max-balance). When listening, prints 'BTP_READY url=ws://HOST:PORT/ port=PORT'. "
        "SIGTERM or SIGINT stops it (exit 0).",
        epilog=fault_help(FAULT_SPECS, {"server": "serve", "client": "client"})
        + "\n\n"
        + variant_help(VARIANT_SPECS),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve_parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    serve_parser.add_argument(
        "--port", type=port_number, default=0, help="TCP port; 0 picks a free one (default)"
    )
    _add_token_options(serve_parser)
    _balance_options(serve_parser)
    serve_parser.add_argument(
        "--auth-timeout",
        type=positive_float,
        default=DEFAULT_AUTH_TIMEOUT,
        metavar="S",
        help="seconds a client gets to authenticate (default: %(default)g)",
    )
    serve_parser.add_argument(
        "--idle-timeout",
        type=positive_float,
        default=DEFAULT_IDLE_TIMEOUT,
        metavar="S",
        help="close a connection after S seconds with nothing received (default: %(default)g)",
    )
    serve_parser.add_argument(
        "--timeout",
        type=positive_float,
        default=DEFAULT_REQUEST_TIMEOUT,
        metavar="S",
        help="seconds to wait for the answer to each request we send (default: %(default)g)",
    )
    add_fault_option(serve_parser, FAULT_SPECS, "server")
    add_variant_option(serve_parser, VARIANT_SPECS, "server")
    serve_parser.add_argument(
        "--ready-file",
        metavar="PATH",
        help='also write {"url", "host", "port"} as JSON to PATH once listening',
    )
    _add_request_options(serve_parser, "to every client once it has authenticated")
    serve_parser.set_defaults(run=_serve)

    client_parser = commands.add_parser(
        "client",
        parents=[common],
        help="connect to a BTP server, send requests, serve its requests",
        description="Connect, authenticate, send the requests given (printing each answer), then keep "
        "serving the server's requests like a server would (Messages, Transfers, balance) for --stay "
        "seconds, then close.",
        epilog=f"exit status: {EXIT_OK} every request answered with a Response, {EXIT_ERROR} connection "
        f"or protocol error, {EXIT_USAGE} bad arguments or files, {EXIT_AUTH} authentication refused, "
        f"{EXIT_TIMEOUT} timeout, {EXIT_REJECTED} a request was answered with an Error",
    )
    client_parser.add_argument("--url", required=True, help="the server, e.g. ws://127.0.0.1:7768/")
    _add_token_options(client_parser)
    _balance_options(client_parser)
    client_parser.add_argument(
        "--stay",
        type=non_negative_float,
        default=0.0,
        metavar="S",
        help="after the requests, serve the server's requests for S seconds (default: 0)",
    )
    client_parser.add_argument(
        "--timeout",
        type=positive_float,
        default=DEFAULT_REQUEST_TIMEOUT,
        metavar="S",
        help="deadline for connecting, for the auth answer and for each request's "
        "answer (default: %(default)g)",
    )
    _add_request_options(client_parser, "after authentication")
    add_fault_option(client_parser, FAULT_SPECS, "client")
    add_variant_option(client_parser, VARIANT_SPECS, "client")
    client_parser.set_defaults(run=_client)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser().parse_args(argv), CliError, EXIT_USAGE, EXIT_OK)


if __name__ == "__main__":
    sys.exit(main())

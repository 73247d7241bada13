"""Command line of the reference SSB node: ``python -m reference_impl.ssb``.

``serve`` runs a node for conformance suites to test (optionally with a
deliberate fault); ``replicate`` fetches and verifies a feed from any peer.
Run either with ``--help`` for the details.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import logging
import sys
from pathlib import Path

from ..node_cli import positive_float, run_command, serve_until_stopped
from ..faults import FaultPoints, add_fault_option, fault_help
from ..variants import Shape, add_variant_option, variant_help
from .variants import SPECS as VARIANT_SPECS
from .faults import SPECS as FAULT_SPECS
from .feed import FeedError
from .keys import MAIN_NETWORK_KEY, Keypair, feed_id_to_public
from .node import (
    DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_REPLICATE_TIMEOUT,
    ReplicationError,
    SsbNode,
    replicate,
)

log = logging.getLogger("reference_impl.ssb")

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_HANDSHAKE = 3
EXIT_INVALID_MESSAGE = 4
EXIT_TIMEOUT = 5

_EXIT_BY_KIND = {
    "handshake": EXIT_HANDSHAKE,
    "invalid-message": EXIT_INVALID_MESSAGE,
    "timeout": EXIT_TIMEOUT,
}


class CliError(Exception):
    """A problem with the command line or its files: one line to stderr, exit 2."""


# --- shared options -------------------------------------------------------------------


def _add_identity_options(parser: argparse.ArgumentParser, *, key_file_required: bool) -> None:
    group = parser.add_argument_group("identity and network")
    group.add_argument(
        "--key-file",
        metavar="PATH",
        required=key_file_required,
        help="secret key file in ssb-keys format (like ~/.ssb/secret)"
        + ("" if key_file_required else "; default: a fresh throwaway identity"),
    )
    group.add_argument(
        "--create-key",
        action="store_true",
        help="if --key-file does not exist, generate a new identity and save it there (mode 0600)",
    )
    network = group.add_mutually_exclusive_group()
    network.add_argument(
        "--network-key",
        metavar="HEX",
        help="network identifier (caps.shs), 32 bytes as hex or base64; "
        "default: the main SSB network",
    )
    network.add_argument(
        "--network-key-file",
        metavar="PATH",
        help="file holding the network identifier as hex or base64",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging threshold; logs go to stderr (default: %(default)s)",
    )


def _parse_network_key(text: str, where: str) -> bytes:
    text = text.strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        try:
            key = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise CliError(f"{where}: network key is neither hex nor base64") from None
    if len(key) != 32:
        raise CliError(f"{where}: network key must be 32 bytes, got {len(key)}")
    return key


def _network_key(args: argparse.Namespace) -> bytes:
    if args.network_key is not None:
        return _parse_network_key(args.network_key, "--network-key")
    if args.network_key_file is not None:
        try:
            text = Path(args.network_key_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"--network-key-file: {exc}") from None
        return _parse_network_key(text, args.network_key_file)
    return MAIN_NETWORK_KEY


def _keypair(args: argparse.Namespace) -> Keypair:
    if args.key_file is None:
        return Keypair.generate()
    path = Path(args.key_file)
    if not path.exists():
        if not args.create_key:
            raise CliError(f"{path}: no such key file (add --create-key to generate one)")
        keypair = Keypair.generate()
        keypair.save(path)
        log.info("created identity %s in %s", keypair.feed_id, path)
        return keypair
    try:
        return Keypair.load(path)
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot load key file: {exc}") from None


def _feed_id(text: str, option: str) -> bytes:
    try:
        return feed_id_to_public(text)
    except ValueError as exc:
        raise CliError(f"{option}: {exc}") from None


# --- serve ----------------------------------------------------------------------------


def _load_seed_feed(node: SsbNode, path: str) -> None:
    try:
        messages = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CliError(f"--seed-feed {path}: {exc}") from None
    if not isinstance(messages, list):
        raise CliError(f"--seed-feed {path}: expected a JSON list of message values")
    for position, msg in enumerate(messages, 1):
        try:
            node.add_message(msg)
        except FeedError as exc:
            raise CliError(f"--seed-feed {path}: message {position} rejected: {exc}") from None


async def _serve(args: argparse.Namespace) -> int:
    node = SsbNode(
        _keypair(args),
        _network_key(args),
        faults=args.fault,
        handshake_timeout=args.handshake_timeout,
        idle_timeout=args.idle_timeout,
        variants=args.variant,
        shape=Shape.from_variants(set(args.variant), args.late_seconds),
    )
    for path in args.seed_feed:
        _load_seed_feed(node, path)
    for number in range(1, args.seed_messages + 1):
        node.publish({"type": "post", "text": f"seed message {number}"})
    if node.faults:
        log.warning("fault injection active: %s", ", ".join(sorted(node.faults)))

    await serve_until_stopped(
        node,
        args.host,
        args.port,
        args.ready_file,
        lambda host, port: (
            f"SSB_READY host={host} port={port} id={node.feed_id}",
            {"host": host, "port": port, "id": node.feed_id},
        ),
        CliError,
    )
    return EXIT_OK


# --- replicate ------------------------------------------------------------------------


async def _replicate(args: argparse.Namespace) -> int:
    peer_public = _feed_id(args.peer_public_key, "--peer-public-key")
    feed_id = args.feed or args.peer_public_key
    _feed_id(feed_id, "--feed")
    try:
        messages = await replicate(
            args.peer_host,
            args.peer_port,
            network_key=_network_key(args),
            keypair=_keypair(args),
            peer_public=peer_public,
            feed_id=feed_id,
            timeout=args.timeout,
            faults=args.fault,
            shape=Shape.from_variants(set(args.variant), args.late_seconds),
        )
    except ReplicationError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return _EXIT_BY_KIND.get(exc.kind, EXIT_ERROR)
    if args.out:
        Path(args.out).write_text(
            json.dumps(messages, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    latest = messages[-1]["sequence"] if messages else 0
    print(
        f"SSB_REPLICATED feed={feed_id} count={len(messages)} latest_sequence={latest}", flush=True
    )
    return FaultPoints(FAULT_SPECS, args.fault).apply(
        "replication-exit-status", EXIT_OK, error_status=EXIT_ERROR
    )


# --- parser ---------------------------------------------------------------------------


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m reference_impl.ssb",
        description="Reference Secure Scuttlebutt node of the conformance harness: "
        "secret handshake, box stream, RPC and classic feeds.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        help="run a node that serves its feeds over SSB",
        description="Listen for SSB connections and serve createHistoryStream (all options of "
        "the protocol guide), whoami and publish (publish only to a client using the node's "
        "own key). When listening, prints one line to stdout: "
        "'SSB_READY host=H port=P id=@...ed25519'. SIGTERM or SIGINT stops it (exit 0).",
        epilog=(
            fault_help(FAULT_SPECS, {"server": "serve", "client": "replicate"})
            + "\n\n"
            + variant_help(VARIANT_SPECS)
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_identity_options(serve, key_file_required=True)
    listen = serve.add_argument_group("listening")
    listen.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    listen.add_argument(
        "--port",
        type=_non_negative_int,
        default=8008,
        help="TCP port; 0 picks a free one (default: %(default)s)",
    )
    listen.add_argument(
        "--ready-file",
        metavar="PATH",
        help='also write {"host", "port", "id"} as JSON to PATH once listening',
    )
    listen.add_argument(
        "--handshake-timeout",
        type=positive_float,
        default=DEFAULT_HANDSHAKE_TIMEOUT,
        metavar="S",
        help="seconds a client gets to finish the handshake (default: %(default)g)",
    )
    listen.add_argument(
        "--idle-timeout",
        type=positive_float,
        default=DEFAULT_IDLE_TIMEOUT,
        metavar="S",
        help="close a connection (with goodbyes) after this many seconds "
        "with nothing received and no message sent (default: %(default)g)",
    )
    content = serve.add_argument_group("feeds")
    content.add_argument(
        "--seed-messages",
        type=_non_negative_int,
        default=0,
        metavar="N",
        help="publish N 'post' messages to the node's own feed at start",
    )
    content.add_argument(
        "--seed-feed",
        action="append",
        default=[],
        metavar="FILE.json",
        help="load a feed (a JSON list of message values, e.g. the --out of "
        "replicate), verified message by message; repeatable",
    )
    add_fault_option(serve, FAULT_SPECS, "server")
    add_variant_option(serve, VARIANT_SPECS, "server")
    serve.set_defaults(run=_serve)

    client = commands.add_parser(
        "replicate",
        help="fetch and verify one feed from a peer",
        description="Connect to a peer, run the handshake, call createHistoryStream "
        "(live false), verify every message (signature, id, sequence and previous chain), "
        "then say goodbye. On success prints "
        "'SSB_REPLICATED feed=@... count=N latest_sequence=M'.",
        epilog=f"exit status: {EXIT_OK} replicated and verified, {EXIT_ERROR} connection or "
        f"protocol error, {EXIT_USAGE} bad arguments or files, {EXIT_HANDSHAKE} handshake failed, "
        f"{EXIT_INVALID_MESSAGE} invalid message, {EXIT_TIMEOUT} timeout",
    )
    _add_identity_options(client, key_file_required=False)
    peer = client.add_argument_group("peer")
    peer.add_argument(
        "--peer-host",
        default="127.0.0.1",
        metavar="HOST",
        help="the peer's address (default: %(default)s)",
    )
    peer.add_argument(
        "--peer-port", type=int, required=True, metavar="PORT", help="the peer's TCP port"
    )
    peer.add_argument(
        "--peer-public-key",
        required=True,
        metavar="@...ed25519",
        help="the peer's identity; the handshake fails unless it is really the peer's",
    )
    client.add_argument(
        "--feed", metavar="@...ed25519", help="feed to replicate (default: the peer's own feed)"
    )
    client.add_argument(
        "--out",
        metavar="FILE.json",
        help="write the verified messages there, as a JSON list of message values",
    )
    client.add_argument(
        "--timeout",
        type=positive_float,
        default=DEFAULT_REPLICATE_TIMEOUT,
        metavar="S",
        help="give up after this many seconds (default: %(default)g)",
    )
    add_fault_option(client, FAULT_SPECS, "client")
    add_variant_option(client, VARIANT_SPECS, "client")
    client.set_defaults(run=_replicate)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser().parse_args(argv), CliError, EXIT_USAGE, EXIT_OK)


if __name__ == "__main__":
    sys.exit(main())

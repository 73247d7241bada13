"""The command-line contract of STOMP client targets (docs/stomp-adapter.md,
"Client targets"), shared by the launch adapters of third-party client
libraries (stomppy_client.py, stompman_client.py).

    ADAPTER --manifest stomp.toml --node-id ID --cert PEM --key PEM --ca PEM
            --messages FILE [--timeout S]

The adapter reads the manifest (``servers``, ``host``, ``login``,
``passcode``, ``destination``), replaces every ``${NODE_ID}``, picks a
server at random among the entries, and hands the rest to the library:
TLS, framing, receipts. It prints ``DELIVERED=<n>`` (n: the message's
position in the messages file, from 0) when message n is receipted, then
``DONE delivered=<count>``; exit 0 when every message was receipted, 1
when it gave up, 2 on bad arguments, 5 when ``--timeout`` ran out, 8 after a
``CANNOT_DRIVE <library> <version>: <reason>`` line (the installed release
lacks an API the adapter calls: the target did not start). Each
ERROR frame the server sends (to CONNECT or to a SEND) is reported as
``ERROR_FRAME {"headers": {...}, "body": "..."}`` (one JSON line), which
the harness quotes at the head of its failure message.

What is the adapter's own (manifest, message file, resending what a dropped
connection left unreceipted) is kept small and plain, so that what the
harness sees on the wire is the library's doing.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tomllib
from dataclasses import dataclass
from typing import NoReturn

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 5
EXIT_CANNOT_DRIVE = 8
"""The release of the library lacks an API the adapter needs: it printed
``CANNOT_DRIVE <library> <version>: <reason>`` before connecting
(conformance/core/target_errors.py: a target not started, no rule's failure)."""

MAX_FILE_BYTES = 16 << 20
"""Bound on the manifest and messages files (written by the harness)."""


@dataclass(frozen=True)
class Message:
    type: str
    body: bytes


@dataclass(frozen=True)
class Plan:
    servers: list[tuple[str, int]]
    host: str
    login: str | None
    passcode: str | None
    destination: str
    messages: list[Message]
    cert: str
    key: str
    ca: str
    timeout: float

    def choose_server(self) -> tuple[str, int]:
        # Profile: "the client SHOULD randomly choose one of the server
        # addresses"; repeated entries weigh the choice.
        return random.SystemRandom().choice(self.servers)


class UsageError(Exception):
    pass


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"{what}: {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise UsageError(f"{what}: {path} is larger than {MAX_FILE_BYTES} bytes")
    return data


def _address(entry: object) -> tuple[str, int]:
    if not isinstance(entry, str) or ":" not in entry:
        raise UsageError(f'--manifest: servers entry {entry!r} is not "host:port"')
    host, _, port = entry.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not port.isdigit() or not 0 < int(port) < 65536 or not host:
        raise UsageError(f'--manifest: servers entry {entry!r} is not "host:port"')
    return host, int(port)


def parse_args(argv: list[str] | None, prog: str, description: str) -> Plan:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--manifest", required=True, help="the server node's stomp.toml")
    parser.add_argument("--node-id", required=True, help="our node id, for ${NODE_ID}")
    parser.add_argument("--cert", required=True, help="our certificate chain (PEM)")
    parser.add_argument("--key", required=True, help="our private key (PEM)")
    parser.add_argument("--ca", required=True, help="the CA server chains must lead to (PEM)")
    parser.add_argument("--messages", required=True, help='JSON lines {"type": ..., "body": {...}}')
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="seconds to get everything receipted"
    )
    args = parser.parse_args(argv)
    try:
        manifest = tomllib.loads(_read(args.manifest, "--manifest").decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"--manifest: not TOML: {exc}") from None

    def value(key: str, required: bool) -> str | None:
        text = manifest.get(key)
        if text is None and not required:
            return None
        if not isinstance(text, str):
            raise UsageError(f"--manifest: {key} must be a string")
        return text.replace("${NODE_ID}", args.node_id)

    servers = manifest.get("servers")
    if not isinstance(servers, list) or not servers:
        raise UsageError("--manifest: servers must be a non-empty list")
    messages = []
    for number, line in enumerate(
        _read(args.messages, "--messages").decode("utf-8").splitlines(), 1
    ):
        if not line.strip():
            continue
        item = json.loads(line)
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("type"), str)
            or not isinstance(item.get("body"), dict)
        ):
            raise UsageError(f'--messages line {number}: expected {{"type": str, "body": object}}')
        body = json.dumps(item["body"], ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        messages.append(Message(item["type"], body))
    return Plan(
        servers=[_address(entry) for entry in servers],
        host=value("host", True),
        login=value("login", False),
        passcode=value("passcode", False),
        destination=value("destination", True),
        messages=messages,
        cert=args.cert,
        key=args.key,
        ca=args.ca,
        timeout=args.timeout,
    )


def delivered(index: int) -> None:
    print(f"DELIVERED={index}", flush=True)


def done(count: int) -> None:
    print(f"DONE delivered={count}", flush=True)


ERROR_BODY_LIMIT = 2000
"""Characters of an ERROR frame's body an ERROR_FRAME line carries."""


def error_frame(headers: dict[str, str], body: bytes | str) -> None:
    """Report an ERROR frame the server sent: ``ERROR_FRAME <JSON>``."""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else str(body)
    print(
        "ERROR_FRAME "
        + json.dumps(
            {
                "headers": {str(k): str(v) for k, v in dict(headers).items()},
                "body": text[:ERROR_BODY_LIMIT],
            },
            sort_keys=True,
        ),
        flush=True,
    )


def cannot_drive(library: str, version: str, reason: str) -> NoReturn:
    """Say that this release of ``library`` cannot be driven, and exit."""
    print(f"CANNOT_DRIVE {library} {version}: {reason}", flush=True)
    log(f"error: this adapter cannot drive {library} {version}: {reason}")
    sys.exit(EXIT_CANNOT_DRIVE)


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)

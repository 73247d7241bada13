"""The ``[targets.NAME.container]`` table of a targets file (docs/containers.md):
the image the harness runs a node's server role in, and its
``[container.client]`` table for the client role, read and checked when
the targets file is read. Running them is containers.py's part.

    [targets.my-node.container]
    image = "conformance/reference:dev"
    command = "btp serve --host 0.0.0.0 --port 7768 --auth-token-file /run/secrets/token"
    ports = [7768]                       # the first is the server role's
    url = "ws://{host}:{port}/"          # URL-addressed protocols: the published address
    mounts = { "/run/secrets/token" = "{auth_token_file}" }   # read-only bind mounts
    writable = { "/keys" = "{workdir}/keys" }                # read-write host directories
    env = { LOG_LEVEL = "info" }
    credential_env = { NODE_TOKEN = "auth_token" }          # a credential's value as a variable
    ready = "BTP_READY"                  # regex on the container's log
    ready_port = false                   # also wait until the port accepts TCP
    ready_timeout = 30
    outputs = { public_key = "id" }      # params from KEY=VALUE pairs in the log
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from .target_commands import command_argv
from .target_errors import TargetError

_ADDRESS_OUTPUTS = ("host", "port", "url")


@dataclass(frozen=True)
class ContainerSpec:
    image: str
    command: tuple[str, ...] = ()
    ports: tuple[int, ...] = ()
    url: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    credential_env: Mapping[str, str] = field(default_factory=dict)
    mounts: Mapping[str, str] = field(default_factory=dict)
    writable: Mapping[str, str] = field(default_factory=dict)
    ready: str = ""
    ready_port: bool = False
    ready_timeout: float = 30.0
    outputs: Mapping[str, str] = field(default_factory=dict)
    client: "ContainerClientSpec | None" = None
    """The client role's containers; None: client-role cases are not
    applicable."""

    @property
    def serves(self) -> bool:
        """Whether the harness runs the server role in a container (a
        client-only target's table has no ports)."""
        return bool(self.ports)


@dataclass(frozen=True)
class ContainerClientSpec:
    """``[targets.NAME.container.client]``: the node's client role, one
    container per launch (per case), on the host's network."""

    image: str
    command: tuple[str, ...]
    entrypoint: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    credential_env: Mapping[str, str] = field(default_factory=dict)
    mounts: Mapping[str, str] = field(default_factory=dict)
    writable: Mapping[str, str] = field(default_factory=dict)
    ready_timeout: float = 30.0
    """Seconds a launched client has to connect to the harness (as
    launch.ready_timeout for a process: the container's start is part of it)."""
    service: "ContainerServiceSpec | None" = None
    """``[...client.service]``: a container kept for the whole run beside
    the launches (what a node keeps running between its client sessions,
    such as its message broker)."""


@dataclass(frozen=True)
class ContainerServiceSpec:
    """``[targets.NAME.container.client.service]``: one container per run,
    started before the first client launch and removed with the run, from
    the client's image, env and mounts, on the host's network with the
    target's work dir at its own path (as a launch), so launches reach
    what it serves on 127.0.0.1 and share files with it in the work dir."""

    command: tuple[str, ...]
    ready: str
    """A regex a line of its output matches once it serves."""
    ready_timeout: float = 60.0


CONTAINER_FIELDS = (
    "image",
    "command",
    "ports",
    "url",
    "env",
    "credential_env",
    "mounts",
    "writable",
    "ready",
    "ready_port",
    "ready_timeout",
    "outputs",
    "client",
)
CLIENT_FIELDS = (
    "image",
    "entrypoint",
    "command",
    "env",
    "credential_env",
    "mounts",
    "writable",
    "ready_timeout",
    "service",
)
SERVICE_FIELDS = ("command", "ready", "ready_timeout")
SERVER_ONLY_FIELDS = tuple(field for field in CONTAINER_FIELDS if field not in ("image", "client"))
"""Fields of the container table that configure the server role; a
client-only target's table has only image and client."""


def _string_tables(
    table: dict, cwhere: str, names: tuple[str, ...], credentials: Mapping[str, Any]
) -> dict[str, dict[str, str]]:
    """The tables of strings of a container (or client) table, validated:
    one path for both roles, so both give the same errors."""
    tables: dict[str, dict[str, str]] = {}
    for name in names:
        value = table.get(name, {})
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise TargetError(f"{cwhere}: {name} must be a table of strings, got {value!r}")
        tables[name] = dict(value)
    for variable, credential in tables["credential_env"].items():
        if credential not in credentials:
            raise TargetError(
                f"{cwhere}: credential_env {variable} names credential {credential!r}, which the "
                f"target does not have (credentials: {sorted(credentials) or 'none'})"
            )
    for variable in tables["env"]:
        if variable in tables["credential_env"]:
            raise TargetError(f"{cwhere}: {variable} is in both env and credential_env")
    for name in ("mounts", "writable"):
        for inside in tables[name]:
            if not inside.startswith("/") or ":" in inside:
                raise TargetError(
                    f"{cwhere}: {name} key {inside!r} must be an absolute path in the container "
                    "(without ':')"
                )
    both = set(tables["mounts"]) & set(tables["writable"])
    if both:
        raise TargetError(f"{cwhere}: {sorted(both)} in both mounts and writable")
    return tables


def _image(value: Any, cwhere: str) -> str:
    if not isinstance(value, str) or not value.strip() or any(ch.isspace() for ch in value):
        raise TargetError(
            f"{cwhere}: image must be an image reference such as 'conformance/reference:dev', "
            f"got {value!r}"
        )
    return value


def parse_client(
    table: Any,
    where: str,
    image: str,
    roles: tuple[str, ...],
    credentials: Mapping[str, Any],
) -> ContainerClientSpec:
    """The ``[targets.NAME.container.client]`` table, validated."""
    cwhere = f"{where} [container.client]"
    if not isinstance(table, dict):
        raise TargetError(
            f"{cwhere}: must be a table (command, and optionally image, entrypoint, env, "
            "credential_env, mounts, writable, ready_timeout, service)"
        )
    unknown = set(table) - set(CLIENT_FIELDS)
    if unknown:
        raise TargetError(
            f"{cwhere}: unknown field(s) {sorted(unknown)}; known: {sorted(CLIENT_FIELDS)}"
        )
    if "client" not in roles:
        raise TargetError(
            f"{cwhere}: runs the node's client role, but roles does not list 'client'"
        )
    command = command_argv(table.get("command"), f"{cwhere} command")
    if not command:
        raise TargetError(
            f"{cwhere}: command is required: the client's arguments, with placeholders such as "
            "{peer_host} {peer_port} (the harness's server, on the host's loopback)"
        )
    entrypoint = command_argv(table.get("entrypoint"), f"{cwhere} entrypoint")
    tables = _string_tables(
        table, cwhere, ("env", "credential_env", "mounts", "writable"), credentials
    )
    return ContainerClientSpec(
        image=_image(table.get("image", image), cwhere),
        command=command,
        entrypoint=entrypoint,
        env=tables["env"],
        credential_env=tables["credential_env"],
        mounts=tables["mounts"],
        writable=tables["writable"],
        ready_timeout=_ready_timeout(table, cwhere),
        service=_service(table["service"], where) if "service" in table else None,
    )


def _service(table: Any, where: str) -> ContainerServiceSpec:
    """The ``[targets.NAME.container.client.service]`` table, validated."""
    swhere = f"{where} [container.client.service]"
    if not isinstance(table, dict):
        raise TargetError(
            f"{swhere}: must be a table (command, ready, and optionally ready_timeout)"
        )
    unknown = set(table) - set(SERVICE_FIELDS)
    if unknown:
        raise TargetError(
            f"{swhere}: unknown field(s) {sorted(unknown)}; known: {sorted(SERVICE_FIELDS)}"
        )
    command = command_argv(table.get("command"), f"{swhere} command")
    if not command:
        raise TargetError(f"{swhere}: command is required: what the container runs for the run")
    ready = table.get("ready")
    if not isinstance(ready, str) or not ready:
        raise TargetError(
            f"{swhere}: ready is required: a regex a line of the service's output matches "
            f"once it serves, got {ready!r}"
        )
    try:
        re.compile(ready)
    except re.error as exc:
        raise TargetError(f"{swhere}: ready {ready!r} is not a regex: {exc}") from None
    return ContainerServiceSpec(
        command=command, ready=ready, ready_timeout=_ready_timeout(table, swhere, 60.0)
    )


def _ready_timeout(table: dict, cwhere: str, default: float = 30.0) -> float:
    timeout = table.get("ready_timeout", default)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise TargetError(
            f"{cwhere}: ready_timeout must be a positive number of seconds, got {timeout!r}"
        )
    return float(timeout)


def parse_container(
    table: Any, where: str, roles: tuple[str, ...], credentials: Mapping[str, Any]
) -> ContainerSpec:
    """The ``[targets.NAME.container]`` table, validated; its commands are
    split like launch commands (command_argv)."""
    cwhere = f"{where} [container]"
    if not isinstance(table, dict):
        raise TargetError(f"{cwhere}: must be a table")
    unknown = set(table) - set(CONTAINER_FIELDS)
    if unknown:
        raise TargetError(
            f"{cwhere}: unknown field(s) {sorted(unknown)}; known: {sorted(CONTAINER_FIELDS)}"
        )
    image = _image(table.get("image"), cwhere)
    client = (
        parse_client(table["client"], where, image, roles, credentials)
        if "client" in table
        else None
    )
    if "server" not in roles:
        if client is None:
            raise TargetError(
                f"{cwhere}: a container without a [container.client] table runs the node's server "
                "role, but roles does not list 'server'"
            )
        server_fields = sorted(set(table) & set(SERVER_ONLY_FIELDS))
        if server_fields:
            raise TargetError(
                f"{cwhere}: {', '.join(server_fields)} configure(s) the server role, which the "
                f"target does not play (roles: {', '.join(roles)}); the client's fields go in "
                "[container.client]"
            )
        return ContainerSpec(image=image, client=client)
    ports = table.get("ports")
    if (
        not isinstance(ports, list)
        or not ports
        or not all(
            isinstance(p, int) and not isinstance(p, bool) and 1 <= p <= 65535 for p in ports
        )
    ):
        raise TargetError(
            f"{cwhere}: ports must be a non-empty list of container ports 1..65535 (the first is "
            f"the server role's; each is published on 127.0.0.1), got {ports!r}"
        )
    if len(set(ports)) != len(ports):
        raise TargetError(f"{cwhere}: ports lists a port twice: {ports}")
    tables = _string_tables(
        table, cwhere, ("env", "credential_env", "mounts", "writable", "outputs"), credentials
    )
    for param in tables["outputs"]:
        if param in _ADDRESS_OUTPUTS:
            raise TargetError(
                f"{cwhere}: outputs cannot set {param!r}: a container's address is its published "
                "port on 127.0.0.1 (ports, url)"
            )
    ready = table.get("ready", "")
    if not isinstance(ready, str):
        raise TargetError(f"{cwhere}: ready must be a regular expression string, got {ready!r}")
    if ready:
        try:
            re.compile(ready)
        except re.error as exc:
            raise TargetError(f"{cwhere}: ready is not a valid regex: {exc}") from None
    ready_port = table.get("ready_port", not ready)
    if not isinstance(ready_port, bool):
        raise TargetError(f"{cwhere}: ready_port must be true or false, got {ready_port!r}")
    if not ready and not ready_port:
        raise TargetError(
            f"{cwhere}: no readiness check: give ready (a regex on the log) or ready_port = true"
        )
    url = table.get("url", "")
    if not isinstance(url, str):
        raise TargetError(
            f"{cwhere}: url must be a string such as 'ws://{{host}}:{{port}}/', got {url!r}"
        )
    return ContainerSpec(
        image=image,
        command=command_argv(table.get("command"), f"{cwhere} command"),
        ports=tuple(ports),
        url=url,
        env=tables["env"],
        credential_env=tables["credential_env"],
        mounts=tables["mounts"],
        writable=tables["writable"],
        ready=ready,
        ready_port=ready_port,
        ready_timeout=_ready_timeout(table, cwhere),
        outputs=tables["outputs"],
        client=client,
    )

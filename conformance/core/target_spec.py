"""Targets: the nodes under test, described declaratively in TOML.

A targets file holds one table per target::

    [targets.my-node]
    implementation = "my-ssb"          # what it is
    version = "1.2.3"
    protocol = "ssb"
    roles = ["server", "client"]       # roles the node can play
    capabilities = ["publish"]         # adapter features (see docs/targets.md)
    host = "127.0.0.1"                 # where its server role listens
    port = 8008                        # 0: the harness picks a free port
    # url = "ws://127.0.0.1:7768/"     # for protocols addressed by URL

    [targets.my-node.params]           # public facts the cases need
    public_key = "@...ed25519"

    [targets.my-node.credentials]      # secrets: only file paths or env var names
    secret_key_file = "/etc/my-node/secret"
    network_key_env = "MY_NETWORK_KEY"

    [targets.my-node.adapters]         # commands exposing what the wire cannot show
    accepted = "my-node dump-accepted --data {workdir}/data"

    [targets.my-node.launch]           # present when the harness starts the node
    server = "my-node serve --port {port} --caps-file {network_key_file}"
    client = "my-node connect {peer_host}:{peer_port} {peer_public_key}"
    ready = "LISTENING"                # regex on its output: server is up
    ready_timeout = 30
    outputs = { public_key = "id" }    # params read from KEY=VALUE output

Credential values are never read into a repr, log line or report: a case
asks for one by name and gets the bytes. Launch commands are argv lists
(shlex-split, no shell) with ``{placeholder}`` fields (target_commands.py).

This module is the declaration: the Target a table describes, read and
checked when the file is read (parse_target, unknown_keys_problem) and
before anything is started (definition_problems). The ``[container]`` table
is container_spec.py's; running a target is target_runtime.py's.
"""

from __future__ import annotations

import difflib
import re
import secrets
import tomllib
import urllib.parse
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from .container_spec import ContainerSpec, parse_container
from .package_install import PackageInstall, PackageSource, parse_package_source
from .requirements import ROLES
from .target_commands import PLACEHOLDER, command_argv
from .target_errors import TargetError

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The checkout (or install prefix) the built-in targets' commands run from."""

KNOWN_PROTOCOLS = ("ssb", "btp", "stomp", "ripp", "ripplehost")
"""Protocol ids: the first part of every case id, the suite folder name
(conformance/suites/<id>). "ripplehost" is the Ripple host protocol (BEEP-style
frames over TCP); "ripp" the RIPP binary envelopes of the Ripple workers."""

RUN_PKI_FILES = (
    "ca_file",
    "server_cert_file",
    "server_key_file",
    "client_cert_file",
    "client_key_file",
)
"""The run's test CA and certificates (conformance/core/pki.py, ``params()``):
put into the params of STOMP and TLS Ripple host targets, unless the target
gives its own of the same name."""

KNOWN_PARAMS: dict[str, frozenset[str]] = {
    "ssb": frozenset({"public_key"}),
    "btp": frozenset({"auth_timeout", "accepts_any_token"}),
    "stomp": frozenset(
        {
            "stomp_host",
            "destination",
            "login",
            "node_id",
            "manifest_file",
            "idle_seconds",
            "heart_beat_ms",
            "adapter_timeout",
            "accepted_body",
            *RUN_PKI_FILES,
        }
    ),
    "ripp": frozenset({"registry_file"}),
    "ripplehost": frozenset({"tls", *RUN_PKI_FILES}),
}
"""The ``[targets.NAME.params]`` keys each protocol's cases and preflight
read (docs/targets.md). Any other key of a targets file is refused as a
typo unless the target's own commands name it as a ``{placeholder}``.
tests/harness/test_unknown_params.py checks these sets against what the
suites and interop cases read."""

KNOWN_CREDENTIALS: dict[str, frozenset[str]] = {
    "ssb": frozenset({"network_key", "secret_key"}),
    "btp": frozenset({"auth_token"}),
    "stomp": frozenset(
        {"passcode", "client_cert", "client_key", "server_cert", "server_key", "ca"}
    ),
    "ripp": frozenset(),
    "ripplehost": frozenset(),
}
"""The credential names (without ``_file``/``_env``/``_generate``) each
protocol's cases read; others only when the target's own commands name them
(``{NAME_file}``, a container's ``credential_env``)."""


GENERATORS = {"hex16": lambda: secrets.token_hex(16), "hex32": lambda: secrets.token_hex(32)}
"""Secrets the harness can make for a target it launches (e.g. the auth
token of a reference node): written to a 0600 file in the run's work dir."""


@dataclass(frozen=True)
class CredentialRef:
    kind: str  # "file" or "env"
    ref: str

    def __repr__(self) -> str:
        return f"<{self.kind} credential {self.ref}>"


@dataclass(frozen=True)
class LaunchSpec:
    server: tuple[str, ...] = ()
    client: tuple[str, ...] = ()
    ready: str = ""
    ready_timeout: float = 30.0
    outputs: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str = ""


@dataclass(frozen=True)
class Target:
    name: str
    implementation: str
    version: str
    protocol: str
    roles: tuple[str, ...]
    capabilities: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = 0
    url: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)
    credentials: Mapping[str, CredentialRef] = field(default_factory=dict)
    launch: LaunchSpec | None = None
    container: ContainerSpec | None = None
    """The image the harness runs the server role in (docs/containers.md);
    exclusive with launch."""
    adapters: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Named adapter commands (argv with placeholders): what a node exposes
    where the wire alone cannot show a behaviour, e.g. the messages a STOMP
    server accepted (docs/stomp-adapter.md)."""
    description: str = ""
    source: str = ""
    base_dir: str = ""
    versions: PackageSource | None = None
    """Where other releases of the target's package come from
    (``[targets.NAME.versions]``): ``NAME@VERSION`` is then a target of its
    own (versioned_targets.py, docs/versions.md)."""
    package: PackageInstall | None = None
    """A versioned target's release and its cache: installed before any of
    its processes starts (None for every other target)."""

    @property
    def launchable(self) -> bool:
        return self.launch is not None and bool(self.launch.server or self.launch.client)

    def can_launch(self, role: str) -> bool:
        if self.container is not None:
            # A container target's client role: [container.client]; its
            # server role is started at the run's start, not per case.
            return role == "client" and self.container.client is not None
        return self.launch is not None and bool(getattr(self.launch, role))

    @property
    def client_connect_timeout(self) -> float:
        """Seconds a launched client (a launch.client process or a
        [container.client] container) has to connect to the harness: its
        ready_timeout, since its start is part of the wait."""
        if self.container is not None and self.container.client is not None:
            return self.container.client.ready_timeout
        if self.launch is not None:
            return self.launch.ready_timeout
        return LaunchSpec.ready_timeout

    @property
    def harness_starts_server(self) -> bool:
        """Whether the harness starts the server role (a launch.server command
        or a container), so that it gets the run's files (e.g. its TLS CA)."""
        return (self.container is not None and self.container.serves) or (
            self.launch is not None and bool(self.launch.server)
        )

    def describe(self) -> dict[str, Any]:
        """Everything about the target that may be shown: no credential values."""
        return {
            "name": self.name,
            "implementation": self.implementation,
            "version": self.version,
            "protocol": self.protocol,
            "roles": list(self.roles),
            "capabilities": list(self.capabilities),
            "address": (
                f"container {self.container.image}, port {self.container.ports[0]} published on "
                "127.0.0.1"
                if self.container and self.container.serves
                else f"(client only, in containers of {self.container.client.image}"
                + (
                    ", beside a service container for the run)"
                    if self.container.client.service
                    else ")"
                )
                if self.container and self.container.client
                else self.url or f"{self.host}:{self.port or '(chosen at launch)'}"
            ),
            "launched_by_harness": self.launchable or self.container is not None,
            "credentials": sorted(f"{name} ({ref.kind})" for name, ref in self.credentials.items()),
            "source": self.source,
        }


def _require(table: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in table:
        raise TargetError(f"{where}: missing required field {key!r}")
    value = table[key]
    if not isinstance(value, kind):
        raise TargetError(f"{where}: field {key!r} must be a {kind.__name__}, got {value!r}")
    return value


def did_you_mean(unknown: list[str], known: set[str] | frozenset[str]) -> str:
    """`` (did you mean 'public_key'?)`` for the unknown keys that are close
    to a known one, else ""."""
    hints = [
        f"{key!r} -> {match[0]!r}" if len(unknown) > 1 else repr(match[0])
        for key in unknown
        if (match := difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6))
    ]
    return f" (did you mean {', '.join(hints)}?)" if hints else ""


def _named_placeholders(table: Mapping[str, Any]) -> set[str]:
    """Every ``{name}`` the target's own commands hold (launch, adapters,
    container), and the credentials its container's credential_env names."""
    names: set[str] = set()

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, str):
            names.update(PLACEHOLDER.findall(value))
            if key == "credential_env":
                names.add(f"{value}_file")
        elif isinstance(value, Mapping):
            for inner_key, inner in value.items():
                walk(inner, "credential_env" if key == "credential_env" else str(inner_key))
        elif isinstance(value, list):
            for item in value:
                walk(item, key)

    for section in ("launch", "adapters", "container"):
        walk(table.get(section, {}), section)
    return names


def unknown_keys_problem(table: Mapping[str, Any], protocol: str, where: str) -> str | None:
    """Keys of [params] and [credentials] that neither the protocol's cases
    read (KNOWN_PARAMS, KNOWN_CREDENTIALS) nor the target's own commands
    name: almost always a typo, which would otherwise surface as "public_key
    is missing" or a case not applicable for want of a credential."""
    named = _named_placeholders(table)
    problems = []
    params = table.get("params", {})
    if not isinstance(params, Mapping):
        return f"{where}: params must be a table of name = value"
    known = KNOWN_PARAMS.get(protocol, frozenset())
    unknown = sorted(key for key in params if key not in known and key not in named)
    if unknown:
        problems.append(
            f"[params]: unknown param(s) {unknown}{did_you_mean(unknown, known)}; the {protocol} "
            f"cases read: {', '.join(sorted(known)) or 'none'}"
        )
    credentials = table.get("credentials", {})
    if not isinstance(credentials, Mapping):
        return f"{where}: credentials must be a table of name = path or variable name"
    known_credentials = KNOWN_CREDENTIALS.get(protocol, frozenset())
    unknown = []
    candidates: set[str] = set()
    for key in credentials:
        suffix = next((s for s in ("_file", "_env", "_generate") if key.endswith(s)), None)
        if suffix is None:
            continue  # refused with its own message (a secret is never written into a file)
        base = key[: -len(suffix)]
        if base not in known_credentials and f"{base}_file" not in named:
            unknown.append(key)
            candidates.update(f"{known_name}{suffix}" for known_name in known_credentials)
    if unknown:
        problems.append(
            f"[credentials]: unknown credential(s) {sorted(unknown)}"
            f"{did_you_mean(sorted(unknown), candidates)}; the {protocol} cases read: "
            f"{', '.join(sorted(known_credentials)) or 'none'} (each as NAME_file, NAME_env or "
            "NAME_generate)"
        )
    if not problems:
        return None
    return (
        f"{where} "
        + "; ".join(problems)
        + ". A key of your own is known when a launch, adapter or "
        "container command of the target names it ({NAME}, or {NAME_file} for a credential); see "
        "docs/targets.md"
    )


def parse_target(name: str, table: Mapping[str, Any], source: str, base_dir: str) -> Target:
    where = f"{source}: target {name!r}"
    known = {
        "implementation",
        "version",
        "protocol",
        "roles",
        "capabilities",
        "host",
        "port",
        "url",
        "params",
        "credentials",
        "launch",
        "container",
        "adapters",
        "description",
        "versions",
    }
    unknown = set(table) - known
    if unknown:
        raise TargetError(
            f"{where}: unknown field(s) {sorted(unknown)}{did_you_mean(sorted(unknown), known)}; "
            f"known: {sorted(known)}"
        )
    protocol = _require(table, "protocol", str, where)
    if protocol not in KNOWN_PROTOCOLS:
        raise TargetError(f"{where}: protocol {protocol!r} is not one of {KNOWN_PROTOCOLS}")
    problem = unknown_keys_problem(table, protocol, where)
    if problem:
        raise TargetError(problem)
    roles = tuple(_require(table, "roles", list, where))
    bad_roles = [r for r in roles if r not in ROLES]
    if not roles or bad_roles:
        raise TargetError(f"{where}: roles must be a non-empty list of {ROLES}, got {list(roles)}")
    port = table.get("port", 0)
    if not isinstance(port, int) or not 0 <= port <= 65535:
        raise TargetError(f"{where}: port must be an integer 0..65535, got {port!r}")
    credentials: dict[str, CredentialRef] = {}
    for key, value in dict(table.get("credentials", {})).items():
        if not isinstance(value, str):
            raise TargetError(
                f"{where}: credential {key!r} must be a string (a path or a variable name)"
            )
        if key.endswith("_file"):
            credentials[key[:-5]] = CredentialRef("file", value)
        elif key.endswith("_env"):
            credentials[key[:-4]] = CredentialRef("env", value)
        elif key.endswith("_generate"):
            if value not in GENERATORS:
                raise TargetError(
                    f"{where}: credential {key!r}: generator must be one of {sorted(GENERATORS)}"
                )
            credentials[key[:-9]] = CredentialRef("generate", value)
        else:
            raise TargetError(
                f"{where}: credential {key!r} must end in _file (a path), _env (an environment "
                "variable name) or _generate (a fresh secret per run, for launched targets); "
                "secrets are never written into a targets file"
            )
    launch = None
    if "launch" in table:
        lt = dict(table["launch"])
        lwhere = f"{where} [launch]"
        unknown = set(lt) - {"server", "client", "ready", "ready_timeout", "outputs", "env", "cwd"}
        if unknown:
            raise TargetError(f"{lwhere}: unknown field(s) {sorted(unknown)}")
        launch = LaunchSpec(
            server=command_argv(lt.get("server"), lwhere),
            client=command_argv(lt.get("client"), lwhere),
            ready=str(lt.get("ready", "")),
            ready_timeout=float(lt.get("ready_timeout", 30.0)),
            outputs=dict(lt.get("outputs", {})),
            env=dict(lt.get("env", {})),
            cwd=str(lt.get("cwd", "")),
        )
        if launch.ready:
            try:
                re.compile(launch.ready)
            except re.error as exc:
                raise TargetError(f"{lwhere}: ready is not a valid regex: {exc}") from None
        for role in ("server", "client"):
            if getattr(launch, role) and role not in roles:
                raise TargetError(
                    f"{lwhere}: has a {role} command but roles does not list {role!r}"
                )
    container = None
    if "container" in table:
        if launch is not None:
            raise TargetError(
                f"{where}: has both [launch] and [container]; a target's node is started one way"
            )
        container = parse_container(table["container"], where, roles, credentials)
    adapters_table = table.get("adapters", {})
    if not isinstance(adapters_table, dict):
        raise TargetError(f"{where}: adapters must be a table of name = command")
    adapters = {
        name: command_argv(command, f"{where} [adapters] {name}")
        for name, command in adapters_table.items()
    }
    if "server" in roles and not (
        table.get("host") or table.get("url") or (launch and launch.server) or container
    ):
        raise TargetError(
            f"{where}: a server-role target needs host/port, url, a launch.server command or "
            "a [container]"
        )
    return Target(
        name=name,
        implementation=_require(table, "implementation", str, where),
        version=str(table.get("version", "unknown")),
        protocol=protocol,
        roles=roles,
        capabilities=tuple(table.get("capabilities", ())),
        host=str(table.get("host", "127.0.0.1")),
        port=port,
        url=str(table.get("url", "")),
        params=dict(table.get("params", {})),
        credentials=credentials,
        launch=launch,
        container=container,
        adapters=adapters,
        description=str(table.get("description", "")),
        source=source,
        base_dir=base_dir,
        versions=parse_package_source(table["versions"], where) if "versions" in table else None,
    )


def load_targets_file(path: Path | str, text: str | None = None) -> dict[str, Target]:
    path = Path(path)
    try:
        data = tomllib.loads(text if text is not None else path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TargetError(f"targets file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise TargetError(f"targets file {path} is not valid TOML: {exc}") from None
    tables = data.get("targets")
    if not isinstance(tables, dict) or not tables:
        raise TargetError(f"targets file {path} has no [targets.NAME] tables")
    base_dir = str(path.resolve().parent) if text is None else str(REPO_ROOT)
    return {name: parse_target(name, table, str(path), base_dir) for name, table in tables.items()}


def builtin_targets() -> dict[str, Target]:
    text = (
        resources.files("conformance.targets").joinpath("builtin.toml").read_text(encoding="utf-8")
    )
    return load_targets_file("<built-in targets>", text)


def load_targets(files: list[str] | tuple[str, ...] = ()) -> dict[str, Target]:
    """Built-in targets, then each file's; a later definition of a name wins."""
    targets = builtin_targets()
    for file in files:
        targets.update(load_targets_file(file))
    return targets


def definition_problems(target: Target, serving: bool = True) -> list[str]:
    """What is wrong with a target's definition before anything is started
    (the preflight's generic part; each protocol adds its own checks).
    ``serving``: the run needs the target's server role."""
    problems = []
    launches_server = target.harness_starts_server
    if serving and "server" not in target.roles:
        problems.append(f"it does not play the server role (roles: {', '.join(target.roles)})")
    if not target.host.strip() or any(ch.isspace() for ch in target.host) or "/" in target.host:
        problems.append(f"host {target.host!r} is not a host name or address (a URL goes in url)")
    if target.url:
        parts = urllib.parse.urlsplit(target.url)
        try:
            _ = parts.port  # raises ValueError for a port out of range
        except ValueError:
            problems.append(f"url {target.url!r} has an invalid port")
        if not parts.scheme or not parts.hostname:
            problems.append(
                f"url {target.url!r} needs a scheme and a host, e.g. ws://127.0.0.1:7768/"
            )
    if serving and not launches_server and not target.url and target.port == 0:
        problems.append(
            "port is 0 (chosen at launch) but there is no launch.server command to start it: "
            "give the port the node listens on"
        )
    if target.launch is not None and target.launch.ready_timeout <= 0:
        problems.append(f"launch.ready_timeout must be positive, got {target.launch.ready_timeout}")
    return problems

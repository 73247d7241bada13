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
(shlex-split, no shell) with ``{placeholder}`` fields.
"""

from __future__ import annotations

import atexit
import difflib
import fcntl
import logging
import math
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.parse
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from .containers import ContainerClient, ContainerServer, ContainerSpec, parse_container
from .readiness import (
    Exited,
    ReadyWhen,
    StartingServer,
    port_accepts,
    read_outputs,
    wait_until_ready,
)
from .requirements import ROLES

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The checkout (or install prefix) the built-in targets' commands run from."""

KNOWN_PROTOCOLS = ("ssb", "btp", "stomp", "ripp", "ripplehost")
"""Protocol ids: the first part of every case id, the suite folder name
(conformance/suites/<id>). "ripplehost" is the Ripple host protocol (BEEP-style
frames over TCP); "ripp" the RIPP binary envelopes of the Ripple workers."""
_PLACEHOLDER = re.compile(r"\{([a-zA-Z_][a-zA-Z0-9_]*)\}")

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


MAX_ADAPTER_OUTPUT = 256 << 20
"""Bytes of an adapter command's output the harness reads at most."""

GENERATORS = {"hex16": lambda: secrets.token_hex(16), "hex32": lambda: secrets.token_hex(32)}
"""Secrets the harness can make for a target it launches (e.g. the auth
token of a reference node): written to a 0600 file in the run's work dir."""


PLACEHOLDER_TYPES: dict[str, type] = {
    "port": int,
    "peer_port": int,
    "container_port": int,
    "count": int,
    "client_timeout": int,
    "client_stay": float,
}
"""The placeholders that stand for numbers, and the type the harness passes
for each (docs/targets.md, "Placeholders"): ``int`` a whole number (``6``,
never ``6.0``: scripts/ssb-server.sh refuses anything but digits),
``float`` a number of seconds that may have a fraction (``0.5``, ``10.0``;
a whole number is one too). Every other placeholder is text (a path, a
host, an id). A value of another type from a suite is a harness bug; the
launch refuses it (TargetError) rather than hand a node an argument it may
refuse. tests/harness/test_placeholder_types.py checks every built-in
target's programs against these types."""


def client_timeout(deadline: float) -> int:
    """The ``{client_timeout}`` a suite gives a launched client for its whole
    exchange: four read deadlines, at least 5 s, in whole seconds (rounded
    up). A client may answer each message at the latest moment the read
    deadline allows, and a replicating client's exchange has about four
    such steps in sequence (SSB: hello, authenticate, request, goodbye), so
    twice the deadline cut short clients that were only slow (seen with the
    reference client's late-answers variant: "replication did not finish
    within 6 s")."""
    return max(5, math.ceil(4 * deadline))


class TargetError(Exception):
    """A targets file is wrong, or a target could not be started. The message
    says which target, which field, and what to do."""


class TargetNotStarted(TargetError):
    """The target (one of its roles) did not start: its process or container
    could not be run, exited before it was ready or before its client
    connected to the harness, was not ready within its readiness deadline,
    or an adapter command exited non-zero without printing anything. Not a
    verdict on any rule: the case ends in ``error``, and a run in which no
    MUST case failed for its own rule gets the verdict "NOT CERTIFIED: the
    target did not start" (exit status 4 of ``conformance certify``)."""


def placeholder_text(name: str, value: Any, where: str) -> str:
    """``value`` as the text of placeholder ``{name}``, after checking it
    has the type PLACEHOLDER_TYPES gives the name."""
    kind = PLACEHOLDER_TYPES.get(name)
    if kind is not None:
        allowed = (int,) if kind is int else (int, float)
        if isinstance(value, bool) or not isinstance(value, allowed):
            raise TargetError(
                f"{where}: placeholder {{{name}}} takes "
                f"{'a whole number' if kind is int else 'a number'}, but the harness passed "
                f"{value!r} (a harness bug; see PLACEHOLDER_TYPES in conformance/core/targets.py)"
            )
    return str(value)


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
                else f"(client only, in containers of {self.container.client.image})"
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


def _argv(value: Any, where: str) -> tuple[str, ...]:
    if value in (None, ""):
        return ()
    if isinstance(value, str):
        return tuple(shlex.split(value))
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise TargetError(f"{where}: a command is a string or a list of strings, got {value!r}")


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
            names.update(_PLACEHOLDER.findall(value))
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
            server=_argv(lt.get("server"), lwhere),
            client=_argv(lt.get("client"), lwhere),
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
        container = parse_container(table["container"], where, roles, credentials, _argv)
    adapters_table = table.get("adapters", {})
    if not isinstance(adapters_table, dict):
        raise TargetError(f"{where}: adapters must be a table of name = command")
    adapters = {
        name: _argv(command, f"{where} [adapters] {name}")
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


def runtime_problems(runtime: "TargetRuntime", serving: bool = True) -> list[str]:
    """Credentials that cannot be read, checked once the target is started
    (a launched node may write its key files as it starts). Only the paths
    and variable names are named, never a value."""
    if not serving:
        return []  # a launched client's files appear when each case launches it
    problems = []
    for name, ref in runtime.target.credentials.items():
        if ref.kind == "env":
            if ref.ref not in os.environ:
                problems.append(f"credential {name}: environment variable {ref.ref} is not set")
        elif ref.kind == "file":
            try:
                path = Path(runtime._expand_text(ref.ref))
            except TargetError as exc:
                problems.append(f"credential {name}: {exc}")
                continue
            if not path.is_file():
                problems.append(f"credential {name}: file {path} does not exist")
            elif not os.access(path, os.R_OK):
                problems.append(f"credential {name}: file {path} is not readable")
    return problems


_LOG = logging.getLogger(__name__)
ADDRESS_IN_USE_ATTEMPTS = 3
_ADDRESS_IN_USE = re.compile(r"eaddrinuse|address already in use", re.IGNORECASE)
"""How a program says a port it was given was taken (errno text, Erlang's
atom, Node's code)."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class ProcessHandle:
    """A process the harness started, in its own process group so that
    stopping it also stops whatever it spawned. Output goes to a log file."""

    def __init__(self, argv: list[str], log_path: Path, env: dict[str, str], cwd: str) -> None:
        self.argv = argv
        self.log_path = log_path
        self._log = open(log_path, "ab")
        try:
            self.process = subprocess.Popen(
                argv,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=cwd or None,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        except OSError as exc:
            self._log.close()
            raise TargetNotStarted(f"could not start {argv[0]!r}: {exc}") from None
        self.started = time.monotonic()

    def output(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def running(self) -> bool:
        return self.process.poll() is None

    def wait(self, timeout: float) -> int | None:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace: float = 3.0) -> int | None:
        if self.process.poll() is None:
            for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
                try:
                    os.killpg(self.process.pid, sig)
                except ProcessLookupError:
                    break
                if self.wait(wait) is not None:
                    break
        else:
            # The leader exited; children it left in the group still go.
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._log.close()
        return self.process.returncode

    def tail(self, lines: int = 20) -> str:
        return "\n".join(self.output().splitlines()[-lines:])

    @property
    def returncode(self) -> int | None:
        return self.process.returncode


class TargetRuntime:
    """A target during a run: the address its server role is reached at, the
    params learnt at launch, credentials, and the processes started for it."""

    def __init__(self, target: Target, work_dir: Path, log_dir: Path, run_id: str = "") -> None:
        self.target = target
        self.run_id = run_id
        """Labels the containers of a container target (docs/containers.md)."""
        self.container: ContainerServer | None = None
        self.work_dir = work_dir
        self.log_dir = log_dir
        self.host = target.host
        self.port = target.port
        self.url = target.url
        self.params: dict[str, Any] = dict(target.params)
        self.server: ProcessHandle | None = None
        self.restarts = 0
        self._launches = 0
        self.client_containers: list[ContainerClient] = []
        """Client-role containers launched for cases; stop() removes any a
        case left (their fixtures normally stop them)."""

    # -- credentials: values go to the cases, never into text
    def has_credential(self, name: str) -> bool:
        ref = self.target.credentials.get(name)
        if ref is None:
            return False
        if ref.kind == "generate":
            return True
        if ref.kind == "env":
            return ref.ref in os.environ
        return Path(self._expand_text(ref.ref)).is_file()

    def credential(self, name: str) -> bytes:
        ref = self.target.credentials.get(name)
        if ref is None:
            raise TargetError(f"target {self.target.name!r} has no credential {name!r}")
        if ref.kind == "generate":
            return Path(self.credential_file(name)).read_bytes()
        if ref.kind == "env":
            value = os.environ.get(ref.ref)
            if value is None:
                raise TargetError(
                    f"target {self.target.name!r}: credential {name!r} expects "
                    f"environment variable {ref.ref} to be set"
                )
            return value.encode()
        path = Path(self._expand_text(ref.ref))
        try:
            return path.read_bytes()
        except OSError as exc:
            raise TargetError(
                f"target {self.target.name!r}: credential {name!r} file {path}: {exc.strerror}"
            ) from None

    def secret_values(self) -> list[bytes]:
        """Every credential's value that can be read now (generated ones
        are generated), for masking them in traces and messages."""
        values = []
        for name in self.target.credentials:
            try:
                values.append(self.credential(name))
            except (TargetError, OSError):
                continue  # a missing credential fails the case that needs it
        return values

    def credential_file(self, name: str) -> str:
        """A path holding the credential, for launch commands: the file itself,
        or for an env credential a 0600 file written into the work dir."""
        ref = self.target.credentials[name]
        if ref.kind == "file":
            return str(Path(self._expand_text(ref.ref)))
        path = self.work_dir / f"{name}.credential"
        if ref.kind == "generate":
            if not path.exists():
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as handle:
                    handle.write(GENERATORS[ref.ref]())
            return str(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(self.credential(name))
        return str(path)

    # -- placeholders
    def _context(self, extra: Mapping[str, Any]) -> dict[str, str]:
        ctx: dict[str, str] = {
            "python": sys.executable,
            "repo": str(REPO_ROOT),
            "workdir": str(self.work_dir),
            "target_dir": self.target.base_dir or str(REPO_ROOT),
            "host": self.host,
            "port": str(self.port),
            "url": self.url,
        }
        if self.container is not None and self.container.container is not None:
            # For adapters that ask the node in its container: docker exec {container_id} ...
            ctx["container_id"] = self.container.id
        ctx.update({k: str(v) for k, v in self.params.items()})
        ctx.update(
            {k: placeholder_text(k, v, f"target {self.target.name!r}") for k, v in extra.items()}
        )
        return ctx

    def _expand_text(self, text: str, extra: Mapping[str, Any] = {}) -> str:
        ctx = self._context(extra)

        def repl(match: re.Match[str]) -> str:
            key = match.group(1)
            if key in ctx:
                return ctx[key]
            if key.endswith("_file") and key[:-5] in self.target.credentials:
                return self.credential_file(key[:-5])
            raise TargetError(
                f"target {self.target.name!r}: unknown placeholder {{{key}}}; "
                f"known: {sorted(ctx)} and <credential>_file"
            )

        return _PLACEHOLDER.sub(repl, text)

    def _start(self, role: str, extra: Mapping[str, Any]) -> ProcessHandle:
        launch = self.target.launch
        assert launch is not None
        argv = [self._expand_text(part, extra) for part in getattr(launch, role)]
        env = dict(os.environ)
        env.update({k: self._expand_text(v, extra) for k, v in launch.env.items()})
        self._launches += 1
        # The work dir's random suffix keeps two runtimes of one target
        # (an implementation against itself) from sharing a log.
        log = (
            self.log_dir
            / f"{self.target.name}.{self.work_dir.name.rsplit('.', 1)[-1]}.{role}.{self._launches}.log"
        )
        cwd = (
            self._expand_text(launch.cwd, extra)
            if launch.cwd
            else (self.target.base_dir or str(REPO_ROOT))
        )
        return ProcessHandle(argv, log, env, cwd)

    # -- server role
    def start_server(self) -> None:
        """Start the server role (launched and container targets) and wait
        until it is ready."""
        if self.target.container is not None:
            if not self.target.container.serves:
                return  # client only: its containers start per case
            server = ContainerServer(self, self.target.container)
            self.container = server
            try:
                server.start()
            except BaseException:
                self.container = None
                server.remove()
                raise
            return
        launch = self.target.launch
        if launch is None or not launch.server:
            return
        for attempt in range(1, ADDRESS_IN_USE_ATTEMPTS + 1):
            try:
                self._start_launched_server(launch)
                return
            except TargetNotStarted as exc:
                # A free port is only free when it is picked: the program
                # (or a port its script picked for itself, e.g. RabbitMQ's
                # AMQP listener) may find it taken by another connection by
                # the time it binds, seconds later on a busy machine. That
                # is no fault of the target: start it again, on fresh ports.
                if attempt == ADDRESS_IN_USE_ATTEMPTS or not _ADDRESS_IN_USE.search(str(exc)):
                    raise
                _LOG.warning(
                    "target %r: start %d failed on an address already in use (log %s); starting it "
                    "again on fresh ports",
                    self.target.name,
                    attempt,
                    self.log_dir,
                )

    def _start_launched_server(self, launch: LaunchSpec) -> None:
        if self.target.port == 0 and "{port}" in " ".join(launch.server):
            self.port = free_port(self.host)
        handle = self._start("server", {})
        self.server = handle
        what = f"target {self.target.name!r}"
        starting = StartingServer(
            what,
            "output",
            handle.output,
            lambda: handle.running() or Exited(handle.process.returncode),
            lambda port: bool(port) and port_accepts(self.host, port, timeout=0.2),
        )
        # Without a ready line, the port answering is what ready means (a
        # port of 0, learnt from the outputs later, never answers).
        when = ReadyWhen(launch.ready, None if launch.ready else self.port, launch.ready_timeout)
        try:
            wait_until_ready(starting, when, poll_interval=0.05)
        except TargetError:
            handle.stop()
            raise
        for param, value in read_outputs(handle.output(), launch.outputs, what, "output").items():
            if param == "port":
                self.port = int(value)
            elif param == "host":
                self.host = value
            elif param == "url":
                self.url = value
            else:
                self.params[param] = value

    def ensure_server(self) -> str | None:
        """Restart a launched server that died; returns a note saying so."""
        if self.container is not None and not self.container.running():
            tail = "\n".join(self.container.logs().splitlines()[-5:])
            code = self.container.state().get("ExitCode")
            self.restarts += 1
            try:
                self.container.restart(kill=False)
            except TargetNotStarted as exc:
                raise TargetError(
                    f"target container had exited (code {code}) and did not start again: {exc}"
                ) from None
            return f"target container had exited (code {code}) and was started again; its last output:\n{tail}"
        if self.server is not None and not self.server.running():
            code = self.server.process.returncode
            tail = self.server.tail(5)
            self.server.stop()
            self.restarts += 1
            try:
                self.start_server()
            except TargetNotStarted as exc:
                # It started for this run and then died: the cases judge it.
                raise TargetError(
                    f"target process had exited (code {code}) and did not start again: {exc}; "
                    f"its last output before it exited:\n{tail}"
                ) from None
            return f"target process had exited (code {code}) and was restarted; its last output:\n{tail}"
        return None

    def launch_client(self, extra: Mapping[str, Any]) -> "ProcessHandle | ContainerClient":
        """Start the client role pointed at the harness: a process
        (launch.client) or a container ([container.client]); both offer
        output/tail/running/wait/stop/returncode."""
        spec = self.target.container.client if self.target.container is not None else None
        if spec is None:
            return self._start("client", extra)
        self._launches += 1
        client = ContainerClient(self, spec, extra, self._launches)
        self.client_containers = [c for c in self.client_containers if c._container is not None]
        self.client_containers.append(client)
        client.start()
        return client

    def has_adapter(self, name: str) -> bool:
        return bool(self.target.adapters.get(name))

    def run_adapter(self, name: str, extra: Mapping[str, Any] = {}, timeout: float = 30.0) -> str:
        """Run the target's adapter command ``name`` and return what it
        printed on stdout. A missing adapter, a nonzero exit or a run past
        ``timeout`` is a TargetError naming the command and its stderr."""
        argv_template = self.target.adapters.get(name)
        if not argv_template:
            raise TargetError(
                f"target {self.target.name!r} has no adapter {name!r} "
                f"(adapters: {', '.join(sorted(self.target.adapters)) or 'none'})"
            )
        argv = [self._expand_text(part, extra) for part in argv_template]
        env = dict(os.environ)
        if self.target.launch is not None:
            env.update({k: self._expand_text(v, extra) for k, v in self.target.launch.env.items()})
        cwd = (
            self._expand_text(self.target.launch.cwd, extra)
            if self.target.launch and self.target.launch.cwd
            else (self.target.base_dir or str(REPO_ROOT))
        )
        # Output goes to files, so a chatty adapter cannot fill memory
        # through a pipe; at most MAX_ADAPTER_OUTPUT bytes are read back.
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            try:
                process = subprocess.Popen(
                    argv,
                    stdout=out,
                    stderr=err,
                    env=env,
                    cwd=cwd,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except OSError as exc:
                raise TargetNotStarted(
                    f"target {self.target.name!r}: adapter {name!r} could not start: {exc}"
                ) from None
            try:
                code = process.wait(timeout)
            except subprocess.TimeoutExpired:
                # The whole process group: an adapter script's children too.
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait()
                raise TargetError(
                    f"target {self.target.name!r}: adapter {name!r} ran past {timeout} s"
                ) from None
            out.seek(0)
            stdout = out.read(MAX_ADAPTER_OUTPUT + 1)
            if code != 0:
                err.seek(0)
                tail = "\n".join(err.read(65536).decode("utf-8", "replace").splitlines()[-10:])
                # Exiting non-zero with nothing on stdout: the adapter did
                # not start (a missing tool, a crash on start-up), which no
                # rule is about; with output it ran and broke its contract.
                kind = TargetNotStarted if not stdout.strip() else TargetError
                raise kind(
                    f"target {self.target.name!r}: adapter {name!r} exited with code {code}"
                    f"{' printing nothing on stdout' if kind is TargetNotStarted else ''}; its stderr:\n"
                    f"{tail or '(none)'}"
                )
        if len(stdout) > MAX_ADAPTER_OUTPUT:
            raise TargetError(
                f"target {self.target.name!r}: adapter {name!r} printed more than "
                f"{MAX_ADAPTER_OUTPUT} bytes"
            )
        return stdout.decode("utf-8", "replace")

    def restart_server(self, kill: bool = True) -> None:
        """Stop the launched server (SIGKILL to its process group with
        ``kill``, as a crash; else SIGTERM) and start it again with the same
        work dir, so that what it stored is there for it to find. A container
        target's container is killed (or stopped) and started again, the same
        container: its filesystem and mounts, so what it stored, stay."""
        try:
            self._restart_server(kill)
        except TargetNotStarted as exc:
            # It started for this run: not coming back is an error of the
            # case that restarted it, not a target that did not start.
            raise TargetError(
                f"target {self.target.name!r} did not start again after a restart: {exc}"
            ) from None

    def _restart_server(self, kill: bool) -> None:
        if self.container is not None:
            self.restarts += 1
            self.container.restart(kill)
            return
        if self.server is None:
            raise TargetError(
                f"target {self.target.name!r}: the harness did not launch its server, so it "
                "cannot restart it"
            )
        if kill:
            try:
                os.killpg(self.server.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.server.wait(5.0)
        self.server.stop()
        self.server = None
        self.restarts += 1
        self.start_server()

    def stop(self) -> None:
        for client in self.client_containers:
            client.stop(grace=1.0)
        self.client_containers.clear()
        if self.container is not None:
            # Its log is saved to logs/ first; the reaper would remove it anyway.
            self.container.remove()
            self.container = None
        if self.server is not None:
            self.server.stop()
            self.server = None
        remove_work_dir(self.work_dir)


WORK_DIR_PREFIX = "conformance-"
WORK_DIR_OWNER_LOCK = ".owner.lock"
"""A file in each work dir on which the process that made the dir holds an
exclusive flock(2) until it removes the dir. The kernel drops the lock when
that process dies, however it dies (SIGKILL included), so a work dir whose
lock can be taken has no live owner: the next run removes it."""
_owned_work_dirs: dict[Path, tuple[int, int]] = {}
"""Work dirs this process made and has not removed yet: path -> (the fd
holding the owner lock, the pid of the process that made it)."""


def make_work_dir(name: str) -> Path:
    """A private (0700) scratch directory for a target's key files and state.
    It lives outside the reports tree, because reports are shared and key
    files are secrets; it is deleted when the run ends (remove_work_dir,
    called by TargetRuntime.stop; at interpreter exit for any left). The
    dirs of runs killed too hard to clean up are removed here, by the next
    run (remove_abandoned_work_dirs)."""
    remove_abandoned_work_dirs()
    path = Path(tempfile.mkdtemp(prefix=f"{WORK_DIR_PREFIX}{name}."))
    os.chmod(path, 0o700)
    # Locked under a temporary name and then renamed, so that no other run
    # ever finds the owner lock unlocked while this one is starting.
    pending = path / f"{WORK_DIR_OWNER_LOCK}.{os.getpid()}"
    fd = os.open(pending, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.rename(pending, path / WORK_DIR_OWNER_LOCK)
    _owned_work_dirs[path] = (fd, os.getpid())
    return path


def remove_work_dir(path: Path) -> None:
    """Delete a work dir with what it holds (credentials, node state), then
    let go of its owner lock."""
    shutil.rmtree(path, ignore_errors=True)
    owned = _owned_work_dirs.pop(path, None)
    if owned is not None:
        os.close(owned[0])


def remove_abandoned_work_dirs(parent: Path | None = None) -> list[Path]:
    """Remove the work dirs under ``parent`` (the temp dir) whose owner is
    gone: ours (same user, a real directory, holding the owner lock file)
    and with the lock free. A dir whose lock is held belongs to a live run
    and is left alone; so is anything without the lock file (not made by
    make_work_dir, or made by a version without it). Returns what it removed."""
    parent = Path(parent or tempfile.gettempdir())
    removed = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(WORK_DIR_PREFIX):
            continue
        path = Path(entry.path)
        if path in _owned_work_dirs:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if not entry.is_dir(follow_symlinks=False) or info.st_uid != os.getuid():
                continue
            fd = os.open(path / WORK_DIR_OWNER_LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # held: its run is alive
            # Held by us now, so no other run removes it at the same time.
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        finally:
            os.close(fd)
    return removed


@atexit.register
def _remove_owned_work_dirs() -> None:
    """A run that ended without stopping its targets (an exception past the
    plugin, SystemExit) still leaves no secrets behind."""
    for path, (_, maker) in list(_owned_work_dirs.items()):
        # A forked child that exits normally must not take its parent's dirs.
        if maker == os.getpid():
            remove_work_dir(path)


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM when the harness dies, even by
    SIGKILL, so that no launched node outlives a killed run (Linux only).

    The "parent" of PR_SET_PDEATHSIG is the *thread* that forked: a node
    started from a worker thread (``asyncio.to_thread``, an executor) gets
    SIGTERM as soon as that thread ends. Start and restart nodes from the
    event-loop thread (conformance/suites/stomp/adapter.py does)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    except (OSError, AttributeError):
        pass

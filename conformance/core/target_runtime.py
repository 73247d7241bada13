"""Targets during a run: the processes (and containers) the harness starts
for a target, the address its server role is reached at, the params learnt
at launch, its credentials' values and its adapter commands. What a target
is comes from target_spec.py (the declaration); this module runs it.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping

from .container_spec import ContainerClientSpec
from .containers import ContainerClient, ContainerServer
from .readiness import (
    Exited,
    ReadyWhen,
    StartingServer,
    port_accepts,
    read_outputs,
    wait_until_ready,
)
from .target_commands import PLACEHOLDER, placeholder_text
from .package_install import require_installed
from .target_errors import TargetError, TargetNotStarted
from .target_spec import GENERATORS, REPO_ROOT, LaunchSpec, Target
from .work_dirs import remove_work_dir
from .forkserver import fork_node
from .parent_death import die_with_parent

MAX_ADAPTER_OUTPUT = 256 << 20
"""Bytes of an adapter command's output the harness reads at most."""


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
        # A reference node launched from a forked session is forked by the
        # session's server, its modules imported already (a node's start is
        # mostly its imports; client cases start one per case). Any other
        # command, or where that cannot be, starts as declared.
        forked = fork_node(argv, env, cwd or None, self._log.fileno())
        try:
            self.process = forked or subprocess.Popen(
                argv,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=cwd or None,
                start_new_session=True,
                preexec_fn=die_with_parent if sys.platform == "linux" else None,
            )
        except OSError as exc:
            self._log.close()
            raise TargetNotStarted(f"could not start {argv[0]!r}: {exc}") from None
        self.started = time.monotonic()
        self.attached_upto = 0
        """Bytes of the log already attached to a case's report (new_log)."""

    def new_log(self) -> str:
        """The output written since the last call (for a case's report)."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self.attached_upto)
                data = log.read()
        except FileNotFoundError:
            return ""
        self.attached_upto += len(data)
        return data.decode("utf-8", errors="replace")

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
        self.unreported_clients: list[ProcessHandle] = []
        """Client processes launched since the last case's report took their logs."""
        self.restarts = 0
        self._launches = 0
        self.client_containers: list[ContainerClient] = []
        self.client_service: ContainerClient | None = None
        """The client's service container ([container.client.service]), from
        the first launch to the run's end."""
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

        return PLACEHOLDER.sub(repl, text)

    def _start(self, role: str, extra: Mapping[str, Any]) -> ProcessHandle:
        launch = self.target.launch
        assert launch is not None
        if self.target.package is not None:
            # A versioned target (docs/versions.md): its release is
            # installed first; one that cannot be is a target not started.
            require_installed(self.target.package)
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
            handle = self._start("client", extra)
            self.unreported_clients.append(handle)
            return handle
        if spec.service is not None and self.client_service is None:
            self._start_client_service(spec)
        self._launches += 1
        client = ContainerClient(self, spec, extra, self._launches)
        self.client_containers = [c for c in self.client_containers if c._container is not None]
        self.client_containers.append(client)
        client.start()
        return client

    def _start_client_service(self, spec: ContainerClientSpec) -> None:
        """The client's service container, once per run, before the first
        launch: a launch that found no service would start its own (and
        lose it with its container)."""
        assert spec.service is not None
        service = ContainerClient(self, spec, {}, 0, command=spec.service.command)
        try:
            service.start()
            service.wait_ready(spec.service.ready, spec.service.ready_timeout)
        except BaseException:
            service.stop(grace=1.0)
            raise
        self.client_service = service

    def new_process_logs(self) -> list[tuple[str, Path, str]]:
        """(role, log file, text) of what the target's processes wrote since
        the last call: the server's new lines, and each client launched
        since then (a container target's logs come from its container)."""
        logs = []
        if self.server is not None:
            logs.append(("server", self.server.log_path, self.server.new_log()))
        clients, self.unreported_clients = self.unreported_clients, []
        logs += [("client", client.log_path, client.new_log()) for client in clients]
        return [(role, path, text) for role, path, text in logs if text.strip()]

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
        if self.client_service is not None:
            # After the launches: none is left to need it. Its output is saved to logs/.
            self.client_service.stop(grace=10.0)
            self.client_service = None
        if self.container is not None:
            # Its log is saved to logs/ first; the reaper would remove it anyway.
            self.container.remove()
            self.container = None
        if self.server is not None:
            self.server.stop()
            self.server = None
        remove_work_dir(self.work_dir)


def runtime_problems(runtime: TargetRuntime, serving: bool = True) -> list[str]:
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

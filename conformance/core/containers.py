"""Targets in containers: a ``[targets.NAME.container]`` table names an image
(read and checked by container_spec.py), and the harness runs the node's server role in a container for the run
(with ``testcontainers``), publishes its port(s) on 127.0.0.1 on ports the
engine picks, waits until it is ready, and removes it afterwards.

The table's keys, with an example, are in container_spec.py's docstring.

Secrets reach a container only as mounted files or environment variables
set when it is created, never through an image.

Clean-up: testcontainers' own reaper (Ryuk) is an image pulled from Docker
Hub, which cannot be pulled here, so it is disabled
(``TESTCONTAINERS_RYUK_DISABLED=true``) and replaced by a small reaper of
our own (``python -m conformance.core.containers reap``): a process in its
own session, reparented away from the harness's process tree, that holds
the read end of a pipe whose write end only the harness process has. When
the harness ends in any way (a normal end, Ctrl-C, SIGKILL of the whole
process tree) the pipe reaches EOF and the reaper removes every container
labelled with the harness's session.
"""

from __future__ import annotations

import argparse
import atexit
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Protocol

from .container_spec import ContainerClientSpec, ContainerSpec
from .readiness import (
    Exited,
    ReadyWhen,
    StartingServer,
    port_accepts,
    read_outputs,
    wait_until_ready,
)
from .redact import Redactor
from .target_errors import TargetError, TargetNotStarted

if TYPE_CHECKING:
    # For annotations only: the reaper process (python -m
    # conformance.core.containers reap) must start fast, and target_spec
    # imports pytest (through requirements).
    from .target_spec import Target


class TargetRuntimeView(Protocol):
    """What a container needs of its target's runtime (target_runtime's
    TargetRuntime, which starts the containers, so that this module does not
    import it): the target and the run's dirs and id, placeholders and
    credentials; and the address and params it sets once the server is
    ready (the published port, the outputs)."""

    target: Target
    run_id: str
    work_dir: Path
    log_dir: Path
    host: str
    port: int
    url: str
    params: dict[str, Any]

    def _expand_text(self, text: str, extra: Mapping[str, Any] = ...) -> str: ...

    def credential(self, name: str) -> bytes: ...

    def secret_values(self) -> list[bytes]: ...


RUN_LABEL = "org.conformance.run"
"""Label of every container a run starts: the run id (``conformance certify``
prints it first)."""
SESSION_LABEL = "org.conformance.session"
"""Label naming the harness process (one pytest session) that started the
container; its reaper removes exactly these."""
TARGET_LABEL = "org.conformance.target"

DOCKER_API_TIMEOUT = 30
"""Seconds any one call to the Docker engine may take."""
REAPER_SWEEPS = (0.0, 1.0, 2.5)
"""Seconds after the harness's end at which the reaper removes the labelled
containers: a container whose creation was under way when the harness died
appears a moment later."""
ALLURE_LOG_LIMIT = 64 * 1024
"""Bytes of a case's container log attached to its Allure result at most."""


# ------------------------------------------------------------------ reaper

_SESSION_ID = uuid.uuid4().hex
_reaper: subprocess.Popen[bytes] | None = None


def _new_process_session() -> None:
    """A forked process is a harness process of its own: its own label and,
    once it starts a container, its own reaper. A session forked by the
    runner's fork server (core/forkserver.py) would otherwise share the
    label the server drew at import, and the first session to end would
    have its reaper remove the containers of every other."""
    global _SESSION_ID, _reaper
    _SESSION_ID = uuid.uuid4().hex
    _reaper = None


os.register_at_fork(after_in_child=_new_process_session)


def session_id() -> str:
    """This harness process's session label value."""
    return _SESSION_ID


def ensure_reaper(log_dir: Path) -> None:
    """Start this process's reaper once, before its first container exists."""
    global _reaper
    if _reaper is not None:
        return
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / f"container-reaper.{_SESSION_ID[:12]}.log", "ab") as log:
        # stdin is the pipe: only this process holds its write end (Python
        # pipes are not inherited by other children), so EOF means we ended.
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "conformance.core.containers",
                "reap",
                "--label",
                f"{SESSION_LABEL}={_SESSION_ID}",
            ],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd="/",
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
    # The reaper forks once and its first process exits as soon as the
    # second runs, so the reaper leaves our process tree (a "kill the whole
    # tree" does not reach it); this collects the first one.
    try:
        code = process.wait(DOCKER_API_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        code = None
    if code != 0:
        raise TargetError(f"the container reaper did not start (exit {code}); see {log_dir}")
    _reaper = process
    atexit.register(release_reaper)


def release_reaper() -> None:
    """Close the pipe: the reaper removes whatever is left and exits."""
    global _reaper
    if _reaper is not None and _reaper.stdin is not None:
        try:
            _reaper.stdin.close()
        except OSError:
            pass
    _reaper = None


def docker_client() -> Any:
    # Imported here: the Docker SDK (a dependency of testcontainers) is needed
    # by container targets only.
    import docker

    return docker.from_env(timeout=DOCKER_API_TIMEOUT)


def remove_labelled(label: str) -> list[str]:
    """Remove (force) every container with ``label`` (KEY=VALUE); their names."""
    client = docker_client()
    try:
        removed = []
        for container in client.containers.list(all=True, filters={"label": label}):
            try:
                container.remove(force=True, v=True)
                removed.append(container.name)
            except Exception as exc:  # gone already, or being removed by the harness itself
                if "No such container" not in str(exc) and "already in progress" not in str(exc):
                    raise
        return removed
    finally:
        client.close()


def _reap(label: str) -> int:
    if os.fork() != 0:
        os._exit(0)  # the first process: the harness collects it at once
    import signal

    # A Ctrl-C or hang-up of the terminal is for the harness; the reaper
    # must outlive it to clean up after it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    print(f"reaper {os.getpid()} watching for the end of harness session {label}", flush=True)
    stdin = sys.stdin.buffer.fileno()
    while os.read(stdin, 4096):
        pass  # nothing is ever written: only EOF matters
    started = time.monotonic()
    for at in REAPER_SWEEPS:
        time.sleep(max(0.0, at - (time.monotonic() - started)))
        try:
            removed = remove_labelled(label)
        except Exception as exc:
            print(f"sweep at {at:g} s failed: {exc}", flush=True)
            continue
        if removed:
            print(
                f"removed {len(removed)} container(s) left by the harness: {', '.join(removed)}",
                flush=True,
            )
    print("reaper done", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.core.containers")
    sub = parser.add_subparsers(dest="command", required=True)
    reap = sub.add_parser("reap", help="remove the containers with LABEL once stdin reaches EOF")
    reap.add_argument("--label", required=True, help="KEY=VALUE")
    args = parser.parse_args(argv)
    return _reap(args.label)


# ------------------------------------------------------------------ a running container


def require_image(image: str, what: str) -> None:
    """The image must be in the engine already: never pulled (no registry)."""
    try:
        client = docker_client()
        try:
            client.images.get(image)
        finally:
            client.close()
    except Exception as exc:
        hint = (
            " (build it: scripts/docker-build-images.sh)"
            if image.startswith("conformance/")
            else ""
        )
        raise TargetError(
            f"{what}: image {image} is not available from the Docker engine{hint}: {exc}"
        ) from None


def environment(
    runtime: TargetRuntimeView,
    spec: "ContainerSpec | ContainerClientSpec",
    extra: Mapping[str, Any],
) -> dict[str, str]:
    """A container's variables: ``env`` expanded, ``credential_env`` values."""
    out = {key: runtime._expand_text(value, extra) for key, value in spec.env.items()}
    for key, credential in spec.credential_env.items():
        out[key] = runtime.credential(credential).decode()
    return out


def volumes(
    runtime: TargetRuntimeView,
    spec: "ContainerSpec | ContainerClientSpec",
    extra: Mapping[str, Any],
    what: str,
) -> list[tuple[str, str, str]]:
    """(host path, path inside, mode) of ``mounts`` (read-only, must exist)
    and ``writable`` (read-write, created 0700)."""
    out = []
    for inside, host in spec.mounts.items():
        path = Path(runtime._expand_text(host, extra))
        if not path.exists():
            raise TargetError(f"{what}: mounts {inside}: {path} does not exist")
        out.append((str(path), inside, "ro"))
    for inside, host in spec.writable.items():
        path = Path(runtime._expand_text(host, extra))
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        out.append((str(path), inside, "rw"))
    return out


class ContainerServer:
    """The server role of a container target during a run."""

    def __init__(self, runtime: TargetRuntimeView, spec: ContainerSpec) -> None:
        self.runtime = runtime
        self.spec = spec
        self.container: Any = None  # testcontainers DockerContainer
        self.name = f"conformance-{re.sub(r'[^a-zA-Z0-9_.-]', '-', runtime.target.name)}-{uuid.uuid4().hex[:8]}"
        self.log_path = (
            runtime.log_dir
            / f"{runtime.target.name}.{runtime.work_dir.name.rsplit('.', 1)[-1]}.container.log"
        )
        self.attached_upto = 0
        """Bytes of the log already attached to a case's report."""
        self.restarts = 0
        self._redactor: Any = None

    @property
    def id(self) -> str:
        return self.container.get_wrapped_container().id if self.container is not None else ""

    def _what(self) -> str:
        return (
            f"target {self.runtime.target.name!r} (container {self.name}, image {self.spec.image})"
        )

    def start(self) -> None:
        os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
        # Imported here, not at the top: testcontainers (and the Docker SDK)
        # is an optional dependency that only container targets need.
        try:
            from testcontainers.core.config import testcontainers_config
            from testcontainers.core.container import DockerContainer
        except ImportError as exc:
            raise TargetError(
                f"target {self.runtime.target.name!r} runs in a container, which needs the "
                f"testcontainers package: {exc}"
            ) from None
        # Ryuk is an image from Docker Hub; our reaper replaces it.
        testcontainers_config.ryuk_disabled = True
        runtime, spec = self.runtime, self.spec
        extra = {"container_port": spec.ports[0]}
        require_image(spec.image, f"target {runtime.target.name!r}")
        ensure_reaper(runtime.log_dir)
        container = DockerContainer(spec.image, docker_client_kw={"timeout": DOCKER_API_TIMEOUT})
        if spec.command:
            container.with_command([runtime._expand_text(part, extra) for part in spec.command])
        for key, value in environment(runtime, spec, extra).items():
            container.with_env(key, value)
        for host, inside, mode in volumes(runtime, spec, extra, self._what()):
            container.with_volume_mapping(host, inside, mode)
        for port in spec.ports:
            # Loopback only, on a port the engine picks (parallel runs never
            # collide). docker's SDK takes (host_ip, host_port).
            container.ports[f"{port}/tcp"] = ("127.0.0.1", None)  # type: ignore[assignment]
        container.with_name(self.name)
        container.with_kwargs(
            labels={
                RUN_LABEL: runtime.run_id or "unknown",
                SESSION_LABEL: _SESSION_ID,
                TARGET_LABEL: runtime.target.name,
            }
        )
        self.container = container
        try:
            container.start()
        except Exception as exc:
            # The engine refused to run it (its command not found, ...):
            # the target did not start (an unavailable image or engine
            # was found above, before anything was started).
            raise TargetNotStarted(f"{self._what()} could not be started: {exc}") from None
        self._wait_ready(0)

    def logs(self) -> str:
        """The container's whole log (stdout and stderr interleaved), every
        credential value of the target masked: it goes into errors, the
        report and logs/."""
        try:
            raw = self.container.get_wrapped_container().logs(stdout=True, stderr=True)
        except Exception as exc:
            return f"(container log unavailable: {exc})"
        text = raw.decode("utf-8", "replace")
        if self._redactor is None:
            self._redactor = Redactor(self.runtime.secret_values())
        return self._redactor.text(text) if self._redactor else text

    def state(self) -> dict[str, Any]:
        wrapped = self.container.get_wrapped_container()
        wrapped.reload()
        return dict(wrapped.attrs.get("State") or {})

    def running(self) -> bool:
        try:
            return bool(self.state().get("Running"))
        except Exception:
            return False

    def _host_port(self, port: int) -> int:
        wrapped = self.container.get_wrapped_container()
        bindings = (wrapped.attrs.get("NetworkSettings") or {}).get("Ports") or {}
        for binding in bindings.get(f"{port}/tcp") or []:
            if binding.get("HostIp") in ("127.0.0.1", "") and binding.get("HostPort"):
                return int(binding["HostPort"])
        raise LookupError(f"container port {port} is not published (bindings: {bindings})")

    def _port_answers(self, port: int) -> bool:
        """The container's ``port`` accepts TCP inside its network: a
        connect to its bridge address, since the published port is answered
        by docker-proxy before the node listens."""
        wrapped = self.container.get_wrapped_container()
        networks = ((wrapped.attrs.get("NetworkSettings") or {}).get("Networks") or {}).values()
        addresses = [n.get("IPAddress") for n in networks if n.get("IPAddress")]
        return any(port_accepts(address, port, timeout=0.5) for address in addresses)

    def _container_state(self) -> bool | Exited:
        state = self.state()
        if state.get("Running"):
            return True
        if state.get("Status") in ("exited", "dead"):
            return Exited(state.get("ExitCode"), state.get("Error") or "")
        return False  # created, restarting: not running yet

    def _wait_ready(self, offset: int) -> None:
        """Until the log after ``offset`` matches ``ready`` (and the port
        answers, with ready_port); then the published address and outputs."""
        spec = self.spec
        server = StartingServer(
            self._what(),
            "log",
            lambda: self.logs()[offset:],
            self._container_state,
            self._port_answers,
        )
        text = wait_until_ready(
            server,
            ReadyWhen(spec.ready, spec.ports[0] if spec.ready_port else None, spec.ready_timeout),
        )
        # Key files a node writes as it starts exist now: mask them too.
        self._redactor = None
        self._read_address(text)

    def _read_address(self, text: str) -> None:
        runtime, spec = self.runtime, self.spec
        self.container.get_wrapped_container().reload()
        try:
            published = {port: self._host_port(port) for port in spec.ports}
        except LookupError as exc:
            raise TargetError(f"{self._what()}: {exc}") from None
        runtime.host = "127.0.0.1"
        runtime.port = published[spec.ports[0]]
        for port, host_port in published.items():
            runtime.params[f"published_port_{port}"] = host_port
        for param, value in read_outputs(text, spec.outputs, self._what(), "log").items():
            runtime.params[param] = self.host_path(value)
        if spec.url:
            runtime.url = runtime._expand_text(spec.url)

    def host_path(self, value: str) -> str:
        """A value naming a file in a writable (or mounted) directory of the
        container, as the harness sees it; other values unchanged."""
        mapped = {**self.spec.mounts, **self.spec.writable}
        for inside, host in sorted(mapped.items(), key=lambda pair: -len(pair[0])):
            inside = inside.rstrip("/")
            if value == inside or value.startswith(inside + "/"):
                return str(Path(self.runtime._expand_text(host)) / value[len(inside) :].lstrip("/"))
        return value

    def restart(self, kill: bool = True) -> None:
        """SIGKILL (``kill``, a crash) or stop the container, then start the
        same container again: its filesystem and mounted directories, and so
        what the node stored, stay. The published port may change; it is
        read again, as are the outputs, from the log written since."""
        offset = len(self.logs())
        wrapped = self.container.get_wrapped_container()
        try:
            if kill:
                if self.running():
                    wrapped.kill()
            else:
                wrapped.stop(timeout=5)
            wrapped.wait(timeout=DOCKER_API_TIMEOUT)
            wrapped.start()
        except Exception as exc:
            raise TargetError(f"{self._what()} could not be restarted: {exc}") from None
        self.restarts += 1
        self._wait_ready(offset)

    def new_log(self) -> str:
        """The log written since the last call (for a case's report)."""
        text = self.logs()
        new, self.attached_upto = text[self.attached_upto :], len(text)
        return new

    def remove(self) -> None:
        """Save the whole log to the run's logs/, then remove the container."""
        if self.container is None:
            return
        try:
            self.log_path.write_text(self.logs(), encoding="utf-8")
        except OSError:
            pass
        try:
            self.container.stop(force=True, delete_volume=True)
        except Exception:
            # Gone already, or the engine did not answer; the reaper removes
            # it when this process ends.
            pass
        self.container = None


# ------------------------------------------------------------------ the client role

CLIENT_POLL_INTERVAL = 0.1
"""Seconds between looks at a client container's state while waiting for it
to exit."""
ROLE_LABEL = "org.conformance.role"


class ContainerClient:
    """One launch of a container target's client role (one case): a
    container on the host's network, so that the harness's server on
    127.0.0.1 is the container's 127.0.0.1 too. It offers what the suites
    use of a launched process (``target_runtime.ProcessHandle``): ``output``,
    ``tail``, ``running``, ``wait``, ``stop``, ``returncode``.

    The target's private work dir is bind-mounted read-write at its own
    path, so the paths placeholders give (``{messages_file}``,
    ``{manifest_file}``, ``{auth_token_file}`` ...: files the suites and
    the runtime write there) mean the same inside as outside."""

    def __init__(
        self,
        runtime: TargetRuntimeView,
        spec: ContainerClientSpec,
        extra: Mapping[str, Any],
        launch: int,
        command: tuple[str, ...] | None = None,
    ) -> None:
        """``launch``: the launch's number in the run, 0 for the client's
        service container, which runs ``command`` instead of the client's."""
        self.runtime = runtime
        self.spec = spec
        self.kind = "client" if launch else "service"
        safe = re.sub(r"[^a-zA-Z0-9_.-]", "-", runtime.target.name)
        numbered = f"client-{launch}" if launch else "client-service"
        self.name = f"conformance-{safe}-{numbered}-{uuid.uuid4().hex[:8]}"
        suffix = runtime.work_dir.name.rsplit(".", 1)[-1]
        numbered = f"client.{launch}" if launch else "client-service"
        self.log_path = runtime.log_dir / f"{runtime.target.name}.{suffix}.{numbered}.container.log"
        self.argv = [runtime._expand_text(part, extra) for part in command or spec.command]
        self._extra = dict(extra)
        self._container: Any = None  # docker SDK Container
        self._final_log: str | None = None
        self._returncode: int | None = None
        self._redactor: Any = None
        self.started = time.monotonic()
        self.start_seconds = 0.0
        """Seconds from create to running (the per-case start cost)."""

    def _what(self) -> str:
        role = "client" if self.kind == "client" else "client's service"
        return (
            f"target {self.runtime.target.name!r} {role} (container {self.name}, "
            f"image {self.spec.image})"
        )

    def wait_ready(self, pattern: str, timeout: float) -> None:
        """Until a line of the container's output matches ``pattern`` (a
        service container); a TargetNotStarted with its output's end if it
        exits first or is not ready by ``timeout``."""

        def state() -> bool | Exited:
            if self.running():
                return True
            if self._returncode is not None:
                return Exited(self._returncode, "")
            return False

        wait_until_ready(
            StartingServer(self._what(), "output", self.output, state, lambda port: False),
            ReadyWhen(pattern, None, timeout),
        )

    def start(self) -> None:
        runtime, spec, extra = self.runtime, self.spec, self._extra
        # The work dir at its own path: per-case files the suites write there
        # are named by host paths in the placeholders.
        binds = {str(runtime.work_dir): {"bind": str(runtime.work_dir), "mode": "rw"}}
        for host, inside, mode in volumes(runtime, spec, extra, self._what()):
            binds[host] = {"bind": inside, "mode": mode}
        kwargs: dict[str, Any] = dict(
            command=self.argv,
            name=self.name,
            detach=True,
            environment=environment(runtime, spec, extra),
            volumes=binds,
            # The harness's servers listen on loopback only: on the host's
            # network stack the container reaches them at 127.0.0.1, with
            # no port published and no bridge address involved.
            network_mode="host",
            labels={
                RUN_LABEL: runtime.run_id or "unknown",
                SESSION_LABEL: _SESSION_ID,
                TARGET_LABEL: runtime.target.name,
                ROLE_LABEL: self.kind,
            },
        )
        if spec.entrypoint:
            kwargs["entrypoint"] = list(spec.entrypoint)
        require_image(spec.image, self._what())
        ensure_reaper(runtime.log_dir)
        began = time.monotonic()
        client = docker_client()
        try:
            # create + start: the container exists (and is labelled for the
            # reaper) before it runs.
            self._container = client.containers.create(spec.image, **kwargs)
            self._container.start()
        except Exception as exc:
            self.stop()
            raise TargetNotStarted(f"{self._what()} could not be started: {exc}") from None
        finally:
            client.close()
        self.start_seconds = time.monotonic() - began
        self.started = time.monotonic()

    def _state(self) -> dict[str, Any]:
        self._container.reload()
        return dict(self._container.attrs.get("State") or {})

    def running(self) -> bool:
        if self._container is None:
            return False
        try:
            state = self._state()
        except Exception:
            return False
        if state.get("Running"):
            return True
        if state.get("Status") in ("exited", "dead"):
            self._returncode = state.get("ExitCode")
            return False
        return state.get("Status") == "created"  # not started yet: not exited either

    def wait(self, timeout: float) -> int | None:
        """The exit code once the container has exited, or None if it still
        runs after ``timeout`` seconds."""
        end = time.monotonic() + max(0.0, timeout)
        while True:
            if self._container is None or not self.running():
                return self._returncode
            if time.monotonic() >= end:
                return None
            time.sleep(min(CLIENT_POLL_INTERVAL, max(0.0, end - time.monotonic())))

    @property
    def returncode(self) -> int | None:
        return self._returncode

    def output(self) -> str:
        """The container's log so far (stdout and stderr), credentials masked."""
        if self._container is None:
            return self._final_log or ""
        try:
            raw = self._container.logs(stdout=True, stderr=True)
        except Exception as exc:
            return self._final_log or f"(container log unavailable: {exc})"
        text = raw.decode("utf-8", "replace")
        if self._redactor is None:
            self._redactor = Redactor(self.runtime.secret_values())
        return self._redactor.text(text) if self._redactor else text

    def tail(self, lines: int = 20) -> str:
        return "\n".join(self.output().splitlines()[-lines:])

    def stop(self, grace: float = 3.0) -> int | None:
        """SIGTERM, SIGKILL after ``grace`` seconds (``docker stop``), then
        save the log to logs/ and remove the container. Idempotent."""
        container = self._container
        if container is None:
            return self._returncode
        try:
            if self.running():
                container.stop(timeout=max(1, round(grace)))
            self.running()  # reads the exit code
        except Exception:
            pass  # removed below with force
        self._final_log = self.output()
        try:
            self.log_path.write_text(self._final_log, encoding="utf-8")
        except OSError:
            pass
        try:
            container.remove(force=True, v=True)
        except Exception as exc:
            # Gone already, or the engine did not answer; the reaper removes
            # it when this process ends.
            if "No such container" not in str(exc) and "already in progress" not in str(exc):
                print(f"conformance: {self._what()} not removed: {exc}", file=sys.stderr)
        self._container = None
        return self._returncode


if __name__ == "__main__":
    sys.exit(main())

"""Pytest sessions and reference nodes forked from a warm interpreter.

Every certification is a pytest session in a child process of its own
(runner/session.py: each run starts clean). Starting one costs a new
interpreter importing pytest, its plugins and the harness: about half the
CPU time of a short session (a RIPP server certification: 1.5 CPU-s started
as ``python -m pytest``, 1.0 forked, measured with RUSAGE_CHILDREN over five
sessions). A process that runs many sessions (``certify`` with several
targets, ``conformance mutation``, the project's tests) pays it once: from
its second session on, a fork server (``python -m
conformance.core.forkserver``'s server, started then, living as long as the
process that started it) holds those modules imported and forks each
session from itself.

A forked session is the same session: its own process, the same pytest
command line, environment, working directory, standard streams and process
group as a started one, and it is started, waited for, signalled and killed
through the same interface (:class:`ForkedProcess` answers like
``subprocess.Popen``). What it does not redo is import the modules. The
test modules of the suites are never imported before the session's
collection, so that pytest still rewrites their asserts.

Protocol (one Unix socket pair, the server's end inherited): a request is
a 4-byte big-endian length and a JSON object (``argv``, ``env``, ``cwd``)
sent with four descriptors (SCM_RIGHTS): the requester's end of a reply
socket pair, and the session's stdin, stdout and stderr. The server forks,
sends the child's pid (8 bytes) on the reply socket, and later its exit
status (4 bytes, signed, as Popen's returncode). It reaps the child only
once the requester has closed the reply socket: until then the pid stays
the session's (a zombie cannot be reused), so a signal sent after the
session ended never reaches another process.

The nodes too. A reference node (``python -m reference_impl.X``, this
interpreter) is mostly its imports, and a client case starts one per case:
a forked session is given a channel to its server (a socket pair's end,
named by CONFORMANCE_NODE_CHANNEL_FD), on which :func:`fork_node` asks,
with the same request, for the node to be forked from the server, which
holds the nodes' modules imported. The node runs in a session of its own
(its process group, as the harness starts nodes), gets SIGTERM when the
server dies and, from the server, when the session that asked for it is
gone first (as a started node gets it when its session dies); its module
runs as ``__main__`` with the streams, ``sys.argv``, ``sys.path[0]``,
signal dispositions and exit functions a new interpreter would have. A
node whose environment differs from the server's in a variable read at
import (IMPORT_TIME_VARIABLES) is started as a new interpreter. Six RIPP
client certifications (13 client launches each) in one process: 14.3
CPU-s as new interpreters, 8.4 with sessions and nodes forked (a cpuacct
cgroup around ``run_mutation`` called six times).

A process that starts ``conformance`` commands (the project's test
workers run hundreds: `tests/conftest.py`) can share its server with them
(:func:`share_with_children`): the server also listens on an address
(CONFORMANCE_FORKSERVER_ADDRESS, inherited by the commands), and a command
that finds it asks there for its sessions, from the first one on, instead
of starting the first as a new interpreter and a server of its own for the
next. The server forks for such a process only when it runs the same
interpreter and harness, in the same terminal session, with the
environment the preloaded modules were imported with; the session joins
that process's group (so a Ctrl-C, or a kill of the group, reaches it as it
reaches a started one). Otherwise it refuses, and the process goes on as
if there were no shared server. A CLI-heavy part of the project's tests
(tests/harness: test_interop_command, test_unknown_params,
test_placeholder_types, test_crosscheck, each running `conformance`): 27.8
CPU-s before, 22.0 with the shared server.

``CONFORMANCE_FORKSERVER=0`` starts every session and node as a new
interpreter.
"""

from __future__ import annotations

import array
import atexit
import functools
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import warnings
from typing import IO, Any, Callable

from .parent_death import die_with_parent

ENV_SWITCH = "CONFORMANCE_FORKSERVER"
PRELOADED = (
    "pytest",
    "_pytest.assertion.rewrite",
    "_pytest.junitxml",
    "pytest_asyncio.plugin",
    "allure_pytest.plugin",
    "conformance.plugin",
)
"""What the server imports before it forks: pytest, the plugins every
session loads (runner/session.py PYTEST_PLUGIN_ARGS) and, through the
harness's plugin, the harness core. Never a suite's test module."""


def suite_helpers() -> tuple[str, ...]:
    """The suites' modules that are not test modules nor conftest files (the
    peers, prerequisites, sessions, and the reference cores they import):
    pytest imports those two kinds itself, rewriting their asserts, and a
    module imported before cannot be rewritten."""
    import conformance.suites as suites

    return _package_modules(
        suites, lambda name: not name.startswith(("test_", "conftest", "learn_"))
    )


def _package_modules(top: Any, keep: Callable[[str], bool]) -> tuple[str, ...]:
    """Each package directly under ``top`` (a package module) and those of
    its modules whose name ``keep`` accepts, as dotted names."""
    import pkgutil

    names = []
    for package in pkgutil.iter_modules(top.__path__):
        if not package.ispkg:
            continue
        names.append(f"{top.__name__}.{package.name}")
        for module in pkgutil.iter_modules([f"{top.__path__[0]}/{package.name}"]):
            if keep(module.name):
                names.append(f"{top.__name__}.{package.name}.{module.name}")
    return tuple(names)


READY = b"R"
START_DEADLINE = 60.0
"""Seconds the server may take to import PRELOADED and say it is ready."""
REQUEST_LIMIT = 16 << 20
"""A request's JSON (a command line and an environment) is far smaller."""


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1") != "0"


class ForkServerError(RuntimeError):
    """The fork server could not start or answer; the caller starts the
    session as a new interpreter instead."""


class ForkedProcess:
    """A session or a node forked by the server, answering like ``subprocess.Popen``:
    ``pid``, ``returncode``, ``poll``, ``wait``, ``send_signal``,
    ``terminate``, ``kill``, and ``stderr`` when it was asked for as a pipe.

    One thread reads the exit status from the reply socket; ``poll``,
    ``wait`` and ``send_signal`` only look at what it found, so they never
    wait for one another: a thread waiting for the session to end (a
    certification's worker) does not stop another from signalling it
    (Ctrl-C stopping every session)."""

    def __init__(self, args: list[str], pid: int, reply: socket.socket, stderr: IO[bytes] | None):
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self.stderr = stderr
        self._reply = reply
        self._ended = threading.Event()
        # Held while the pid is signalled and while the reply socket is
        # closed: the server reaps the session only once it is closed, so
        # a pid signalled under this lock is still the session's.
        self._lock = threading.Lock()
        threading.Thread(
            target=self._read_status, daemon=True, name=f"status of session {pid}"
        ).start()

    def _read_status(self) -> None:
        data = _recv_exactly(self._reply, 4)
        # No status: the server died before the session ended (it is
        # killed with the process that started it). The session is the
        # server's orphan now; wait for it to be gone.
        code = struct.unpack(">i", data)[0] if data is not None else self._orphan_code()
        with self._lock:
            self.returncode = code
            self._reply.close()  # the server may reap the child now
        self._ended.set()

    def _orphan_code(self) -> int:
        while _alive(self.pid):
            time.sleep(0.05)
        return -signal.SIGKILL

    def poll(self) -> int | None:
        return self.returncode if self._ended.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        with self._lock:
            if self.returncode is None:
                try:
                    os.kill(self.pid, sig)
                except ProcessLookupError:
                    pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


class _Requester:
    """What asks a fork server for sessions: a control connection, one
    request at a time on it."""

    control: socket.socket
    lock: threading.Lock

    def alive(self) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def fork(
        self, argv: list[str], env: dict[str, str], stdout: int, stderr: int | None
    ) -> ForkedProcess:
        reply, remote = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pipe_read = pipe_write = None
        try:
            if stderr == subprocess.PIPE:
                pipe_read, pipe_write = os.pipe()
                err_fd = pipe_write
            else:
                err_fd = 2 if stderr is None else stderr
            payload = json.dumps(
                {
                    "argv": argv,
                    "env": env,
                    "cwd": os.getcwd(),
                    # What a server shared with other processes checks
                    # before it forks a session for one of them (_serve).
                    "python": sys.executable,
                    "harness": _harness_dir(),
                    "sid": os.getsid(0),
                    "pgid": os.getpgrp(),
                }
            ).encode()
            fds = array.array("i", [remote.fileno(), 0, stdout, err_fd])
            with self.lock:
                self.control.sendmsg(
                    [struct.pack(">I", len(payload)) + payload],
                    [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)],
                )
            remote.close()
            remote = None
            ready, _, _ = select.select([reply], [], [], START_DEADLINE)
            data = _recv_exactly(reply, 8) if ready else None
            if data is None:
                raise ForkServerError("the fork server did not fork the session")
            pid = struct.unpack(">q", data)[0]
            if pid < 0:
                raise ForkSessionRefused(
                    "the shared fork server does not fork for this process (another "
                    "interpreter, harness, terminal session or environment at import)"
                )
        except (OSError, ForkServerError):
            reply.close()
            if pipe_read is not None:
                os.close(pipe_read)
            raise
        finally:
            if remote is not None:
                remote.close()
            if pipe_write is not None:
                os.close(pipe_write)
        stream = os.fdopen(pipe_read, "rb") if pipe_read is not None else None
        return ForkedProcess(argv, pid, reply, stream)


class _Server(_Requester):
    """The requester's handle on its fork server process. ``shared``: the
    server also listens on an address (SHARE_ENV) for the processes this
    one starts (share_with_children)."""

    def __init__(self, shared: bool = False) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        listener = None
        self.address = ""
        passed = [theirs.fileno()]
        if shared:
            # Linux's abstract namespace: no file to leave behind; who may
            # connect is checked on each connection (SO_PEERCRED, _serve).
            self.address = f"conformance-forkserver-{os.getpid()}-{os.urandom(6).hex()}"
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind("\0" + self.address)
            listener.listen(64)
            passed.append(listener.fileno())
        try:
            self.process = subprocess.Popen(
                # -c, not -m: the package (conformance.core) imports this
                # module, and runpy would warn of running it a second time.
                [sys.executable, "-c", _SERVER_MAIN, *map(str, passed)],
                pass_fds=passed,
                stdin=subprocess.DEVNULL,
                # Its own output (none unless it fails) goes where ours does.
            )
        finally:
            theirs.close()
            if listener is not None:
                listener.close()
        self.control = ours
        self.lock = threading.Lock()
        ready, _, _ = select.select([ours], [], [], START_DEADLINE)
        if not ready or ours.recv(1) != READY:
            self.close()
            raise ForkServerError("the fork server did not get ready")

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        self.control.close()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class _RemoteServer(_Requester):
    """A connection to the fork server of a process that started this one
    (its address in SHARE_ENV): this process's sessions are forked there,
    from the first one on, instead of by a server of its own."""

    def __init__(self, address: str) -> None:
        self.control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.lock = threading.Lock()
        self.control.settimeout(START_DEADLINE)
        try:
            self.control.connect("\0" + address)
        except OSError:
            self.control.close()
            raise
        self.control.settimeout(None)

    def alive(self) -> bool:
        return self.control.fileno() >= 0

    def close(self) -> None:
        self.control.close()


class ForkSessionRefused(ForkServerError):
    """A shared server does not fork for this process; it starts its sessions
    as it would without one."""


@functools.cache
def _harness_dir() -> str:
    """Where this interpreter's harness package is: a shared server forks
    only for processes that would import the same code. (Once per process:
    every session's request carries it.)"""
    import conformance

    return os.path.dirname(os.path.abspath(conformance.__file__))


_server: _Server | None = None
_server_failed = False
_sessions_started = 0
_remote: _RemoteServer | None = None
_remote_failed = False
_lock = threading.Lock()

SHARE_ENV = "CONFORMANCE_FORKSERVER_ADDRESS"
"""Set by :func:`share_with_children` in the process whose server is
shared, and so inherited by the processes it starts: the address of the
server, which forks their sessions too."""


def share_with_children() -> bool:
    """Start this process's fork server now, listening for the processes it
    starts too (SHARE_ENV, inherited): a ``conformance`` command run by this
    one has its sessions forked from the first on, instead of starting each
    as a new interpreter or a server of its own (the project's test workers
    run hundreds of such commands). The server forks for a process only if
    it runs the same interpreter and harness, in the same terminal session
    (its sessions join that process's group, so a Ctrl-C or a kill of the
    group reaches them as it reaches started ones), with the environment
    the preloaded modules were imported with (IMPORT_TIME_VARIABLES); any
    other starts its sessions as it would without it. False (nothing
    started) where forking is switched off or the server cannot start."""
    global _server, _server_failed
    if not enabled():
        return False
    with _lock:
        if _server is not None and _server.address:
            os.environ[SHARE_ENV] = _server.address
            return True
        if _server is not None:
            return False  # a server of its own already, not listening
        try:
            _server = _Server(shared=True)
        except (OSError, ForkServerError) as exc:
            _server_failed = True
            sys.stderr.write(f"conformance: no shared fork server ({exc})\n")
            return False
        os.environ[SHARE_ENV] = _server.address
        return True


@atexit.register
def _stop_server() -> None:
    """The server goes with the process that started it, before that one
    exits: a run that ends leaves no process of its own behind (an
    interrupted one has stopped its sessions by then)."""
    global _server
    with _lock:
        server, _server = _server, None
    if server is not None:
        server.close()


def start_session(
    argv: list[str], stdout: IO[bytes], env: dict[str, str], stderr: int | None = None
) -> subprocess.Popen | ForkedProcess:
    """``python -m pytest ...`` (``argv``) with ``stdout`` to a file, its
    stderr inherited or (``subprocess.PIPE``) piped: forked by this
    process's fork server from the second session on, started as a new
    interpreter otherwise (the first session, CONFORMANCE_FORKSERVER=0, a
    server that failed)."""
    global _server, _server_failed, _sessions_started, _remote, _remote_failed
    server: _Requester | None = None
    with _lock:
        _sessions_started += 1
    if argv[1:3] == ["-m", "pytest"] and enabled():
        with _lock:
            address = os.environ.get(SHARE_ENV, "")
            shared_here = _server is not None and _server.address == address
            if address and not shared_here and _remote is None and not _remote_failed:
                try:
                    _remote = _RemoteServer(address)
                except OSError:
                    _remote_failed = True  # gone with its process: on our own
            if _remote is not None:
                server = _remote
    if server is not None:
        try:
            return server.fork(argv, env, stdout.fileno(), stderr)
        except (OSError, ForkServerError):
            # Refused (this process is not one it forks for) or gone: the
            # sessions are this process's own business from now on.
            with _lock:
                if _remote is server:
                    _remote_failed = True
                    _remote = None
            server.close()
            server = None
    if argv[1:3] == ["-m", "pytest"] and enabled():
        with _lock:
            if _server is not None and not _server.alive():
                _server = None
                _server_failed = True  # killed under us: do not start another
            if _server is None and not _server_failed and _sessions_started > 1:
                try:
                    _server = _Server()
                except (OSError, ForkServerError) as exc:
                    _server_failed = True
                    sys.stderr.write(
                        f"conformance: no fork server ({exc}); sessions start as new processes\n"
                    )
            server = _server
    if server is not None:
        try:
            return server.fork(argv, env, stdout.fileno(), stderr)
        except (OSError, ForkServerError) as exc:
            sys.stderr.write(f"conformance: the fork server failed ({exc}); starting the session\n")
    return subprocess.Popen(argv, stdout=stdout, stderr=stderr, env=env)


def fork_node(
    argv: list[str], env: dict[str, str], cwd: str | None, output: int
) -> ForkedProcess | None:
    """In a forked session, a reference node's command line (``python -m
    reference_impl.X ...`` with this interpreter) forked by the server that
    forked the session, which holds the nodes' modules imported: its own
    process group, stdin from /dev/null, stdout and stderr to ``output``.
    None where it cannot be (not a forked session, another command, an
    environment the server's imports would not match, a server gone): the
    caller starts the node as a new interpreter. Only the reference nodes:
    any other program is started the way its declaration says."""
    if len(argv) < 3 or argv[0] != sys.executable or argv[1] != "-m":
        return None
    if not argv[2].startswith("reference_impl."):
        return None
    channel = _node_channel()
    if channel is None:
        return None
    reply, remote = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        payload = json.dumps({"argv": argv, "env": env, "cwd": cwd or os.getcwd()}).encode()
        fds = array.array("i", [remote.fileno(), devnull, output, output])
        with _channel_lock:
            channel.sendmsg(
                [struct.pack(">I", len(payload)) + payload],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)],
            )
        remote.close()
        ready, _, _ = select.select([reply], [], [], START_DEADLINE)
        data = _recv_exactly(reply, 8) if ready else None
        pid = struct.unpack(">q", data)[0] if data is not None else -1
    except OSError:
        pid = -1
    finally:
        os.close(devnull)
        remote.close()
    if pid < 0:
        reply.close()
        return None
    return ForkedProcess(argv, pid, reply, None)


_channel: socket.socket | None = None
_channel_lock = threading.Lock()


def _node_channel() -> socket.socket | None:
    """This forked session's channel to its server (NODE_CHANNEL_ENV, "FD
    PID": a process started by the session inherits the variable, not the
    descriptor, and must not take another descriptor of its own for it)."""
    global _channel
    with _channel_lock:
        if _channel is None:
            fd, _, pid = os.environ.get(NODE_CHANNEL_ENV, "").partition(" ")
            if not fd.isdigit() or pid != str(os.getpid()):
                return None
            _channel = socket.socket(fileno=int(fd))
        return _channel


# The server side.

NODE_CHANNEL_ENV = "CONFORMANCE_NODE_CHANNEL_FD"
"""Set in a forked session: the descriptor of its channel to the server,
on which it asks for its nodes to be forked (:func:`fork_node`)."""
IMPORT_TIME_VARIABLES = ("PYTHON", "BTP_", "WEBSOCKETS_", "LANG", "LC_", "TZ")
"""Prefixes of the environment variables that the interpreter or a
preloaded module reads when it starts or is imported (the interpreter's
PYTHON*, reference_impl/btp/packet.py's BTP_PURE_PYTHON, websockets'
limits, the locale): a node whose environment differs from the server's
in one of them is started as a new interpreter, which reads them."""


def _serve(control: socket.socket, listener: socket.socket | None = None) -> None:
    # A Ctrl-C at the terminal reaches the whole process group: the
    # sessions stop on it as started ones do, and the requester decides
    # what happens next; the server stays until the requester goes.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    start_env = dict(os.environ)
    harness = _harness_dir()
    # Connections of the processes the requester started (a shared server,
    # share_with_children), each asking for sessions as the requester does.
    others: list[socket.socket] = []
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_write)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in PRELOADED + suite_helpers() + node_modules():
            __import__(name)
    control.sendall(READY)
    # pid -> reply socket, for the children whose status is not sent yet;
    # the nodes among them are stopped when their session goes first.
    running: dict[int, socket.socket] = {}
    nodes: set[int] = set()
    ended: dict[socket.socket, int] = {}  # reply socket -> pid, status sent, not reaped
    channels: list[socket.socket] = []  # each forked session's, for its nodes

    def for_another_process(payload: dict[str, Any]) -> bool:
        """Whether a session asked for by another process than the requester
        is one this server may fork: the same interpreter and harness (the
        modules it holds are the ones that process would import), the same
        terminal session (its session joins that process's group), the
        environment the preloaded modules were imported with."""
        return (
            payload.get("python") == sys.executable
            and payload.get("harness") == harness
            and payload.get("sid") == os.getsid(0)
            and isinstance(payload.get("pgid"), int)
            and _same_at_import(start_env, payload["env"])
        )

    def fork(
        request: tuple[dict[str, Any], list[int]],
        channel: socket.socket | None,
        other: bool = False,
    ) -> None:
        payload, fds = request
        reply = socket.socket(fileno=fds[0])
        refused = (channel is not None and not _same_at_import(start_env, payload["env"])) or (
            other and not for_another_process(payload)
        )
        if refused:
            for fd in fds[1:]:
                os.close(fd)
            _send(reply, struct.pack(">q", -1))  # refused: start it as a new interpreter
            reply.close()
            return
        session_end = theirs = None
        if channel is None:
            session_end, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            if other:
                # In the asking process's group, as a session it started
                # would be (set here and by the parent: whichever runs first).
                try:
                    os.setpgid(0, payload["pgid"])
                except OSError:
                    pass
            if channel is None:
                _run_session(payload, fds, theirs.fileno())
            _run_node(payload, fds)
        if other:
            try:
                os.setpgid(pid, payload["pgid"])
            except OSError:
                pass  # the child did it first (or has already gone)
        for fd in fds[1:]:
            os.close(fd)
        if theirs is not None:
            theirs.close()
            channels.append(session_end)
        if _send(reply, struct.pack(">q", pid)):
            running[pid] = reply
            if channel is not None:
                nodes.add(pid)
        else:  # the requester is gone already
            running[pid] = reply
            _stop_orphaned_node(pid, nodes)

    while True:
        watched = [control, wake_read, *ended, *channels, *others]
        if listener is not None:
            watched.append(listener)
        # A node's requester that goes before it ends: its session died.
        watched += [running[pid] for pid in nodes if pid in running]
        readable, _, _ = select.select(watched, [], [])
        if wake_read in readable:
            os.read(wake_read, 4096)
        for pid, reply in list(running.items()):
            # WNOWAIT: the exit is read, the zombie kept until the
            # requester is done with the pid.
            result = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if result is None:
                continue
            code = result.si_status if result.si_code == os.CLD_EXITED else -result.si_status
            del running[pid]
            nodes.discard(pid)
            _send(reply, struct.pack(">i", code))
            ended[reply] = pid
        for reply in [s for s in readable if s in ended]:
            if not _recv_or_eof(reply):  # the requester closed it: reap
                os.waitpid(ended.pop(reply), 0)
                reply.close()
        for pid in [p for p in nodes if running.get(p) in readable]:
            if not _recv_or_eof(running[pid]):
                _stop_orphaned_node(pid, nodes)
        for channel in [s for s in readable if s in channels]:
            request = _receive(channel)
            if request is None:  # the session ended (or sent nonsense)
                channels.remove(channel)
                channel.close()
            else:
                fork(request, channel)
        if listener is not None and listener in readable:
            _accept(listener, others)
        for other in [s for s in readable if s in others]:
            request = _receive(other)
            if request is None:  # that process is gone; its sessions go on alone
                others.remove(other)
                other.close()
            else:
                fork(request, None, other=True)
        if control in readable:
            request = _receive(control)
            if request is None:
                return  # the requester is gone; the sessions go on alone
            fork(request, None)


def _accept(listener: socket.socket, others: list[socket.socket]) -> None:
    """A process's connection to a shared server, kept only if that process
    runs as the same user (the server forks what it is asked to)."""
    try:
        connection, _ = listener.accept()
    except OSError:
        return
    credentials = connection.getsockopt(
        socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
    )
    _, uid, _ = struct.unpack("3i", credentials)
    if uid != os.getuid():
        connection.close()
        return
    others.append(connection)


def _send(sock: socket.socket, data: bytes) -> bool:
    try:
        sock.sendall(data)
        return True
    except OSError:
        return False


def _recv_or_eof(sock: socket.socket) -> bytes:
    try:
        return sock.recv(1)
    except OSError:
        return b""


def _stop_orphaned_node(pid: int, nodes: set[int]) -> None:
    """The session that asked for the node is gone without stopping it: the
    node goes too, as a started one does (it gets SIGTERM when its parent
    dies); the server reaps it once it has exited."""
    nodes.discard(pid)
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass


def _same_at_import(start: dict[str, str], env: dict[str, str]) -> bool:
    """Whether a node with environment ``env`` would import the preloaded
    modules the way the server did (IMPORT_TIME_VARIABLES)."""
    differing = {k for k in start.keys() | env.keys() if start.get(k) != env.get(k)}
    return not any(name.startswith(IMPORT_TIME_VARIABLES) for name in differing)


def node_modules() -> tuple[str, ...]:
    """The reference nodes' modules but their ``__main__`` (run anew in each
    node, as ``python -m`` does) and the Hypothesis strategies (the suites'
    tests import those, the nodes never)."""
    import reference_impl

    return _package_modules(
        reference_impl, lambda name: name != "__main__" and not name.endswith("strategies")
    )


def _receive(control: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    fds = array.array("i")
    try:
        message, ancillary, _, _ = control.recvmsg(4, socket.CMSG_SPACE(4 * fds.itemsize))
    except OSError:
        return None
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    if 0 < len(message) < 4:
        message += _recv_exactly(control, 4 - len(message)) or b""
    if len(message) < 4:
        for fd in fds:
            os.close(fd)
        return None
    (size,) = struct.unpack(">I", message)
    body = _recv_exactly(control, size) if size <= REQUEST_LIMIT else None
    if body is None or len(fds) != 4:
        for fd in fds:
            os.close(fd)
        return None
    return json.loads(body), list(fds)


def _become(payload: dict[str, Any], fds: list[int], keep: int | None = None) -> None:
    """In a child just forked: a new interpreter's signal dispositions
    (SIGCHLD and SIGTERM at their defaults, SIGINT raising
    KeyboardInterrupt; SIGPIPE stays ignored, as Python sets it at start-up
    and the server has it), the request's streams as 0, 1 and 2, no other
    descriptor of the server's but ``keep``, and its directory and
    environment."""
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in zip((0, 1, 2), fds[1:]):
        os.dup2(fd, target)
    # What a new interpreter would hold: the three streams (and the
    # channel a session is given). The server's sockets, the other
    # sessions' and nodes' replies and channels, are not the child's.
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd != keep:
            try:
                os.close(fd)
            except OSError:
                pass  # the directory listing's own descriptor, closed already
    os.chdir(payload["cwd"])
    os.environ.clear()
    os.environ.update(payload["env"])


def _end_child(code: int) -> None:
    """Leave as an interpreter leaves: the exit functions registered in the
    child (work dirs removed, a container reaper released), the streams
    flushed; never back into the server's loop."""
    try:
        import atexit

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _run_session(payload: dict[str, Any], fds: list[int], channel: int) -> None:
    code = 70
    try:
        _become(payload, fds, keep=channel)
        os.environ[NODE_CHANNEL_ENV] = f"{channel} {os.getpid()}"
        argv = payload["argv"]
        import pytest

        # The plugins were imported by the server, so pytest cannot rewrite
        # their asserts, and says so; the suites' modules it still rewrites.
        args = [*argv[3:], "-W", "ignore:Module already imported so cannot be rewritten"]
        sys.argv = [os.path.join(os.path.dirname(pytest.__file__), "__main__.py"), *argv[3:]]
        code = int(pytest.main(args))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the child must end here, never return to the server loop
        import traceback

        traceback.print_exc()
    _end_child(code)


def _run_node(payload: dict[str, Any], fds: list[int]) -> None:
    """``python -m MODULE ARGS`` (``payload["argv"]``) in this child: its own
    session (a new process group, as the harness starts nodes), SIGTERM
    when the server dies (as a started node gets it when its session dies),
    the module run as ``__main__`` with the standard streams a new
    interpreter would open."""
    code = 70
    try:
        os.setsid()
        _become(payload, fds)
        die_with_parent()
        import io
        import runpy

        unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
        for fd, name in ((1, "stdout"), (2, "stderr")):
            raw = io.FileIO(fd, "w", closefd=False)
            stream = raw if unbuffered else io.BufferedWriter(raw)
            setattr(
                sys,
                name,
                io.TextIOWrapper(
                    stream,  # type: ignore[arg-type]
                    encoding=getattr(sys, name).encoding,
                    errors="backslashreplace" if name == "stderr" else getattr(sys, name).errors,
                    line_buffering=name == "stderr" or os.isatty(fd),
                    write_through=unbuffered,
                ),
            )
        argv = payload["argv"]
        sys.argv = [argv[2], *argv[3:]]
        sys.path[0] = payload["cwd"]  # what `python -m` puts first
        runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        # An interpreter that ends on an uncaught Ctrl-C dies of SIGINT.
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # noqa: BLE001 - the child must end here, never return to the server loop
        import traceback

        traceback.print_exc()
        code = 1
    _end_child(code)


def serve_inherited(fd: int, listener_fd: int | None = None) -> None:
    """The server process's entry point: serve on the inherited socket (and
    the inherited listening socket of a shared server)."""
    _serve(
        socket.socket(fileno=fd),
        socket.socket(fileno=listener_fd) if listener_fd is not None else None,
    )


_SERVER_MAIN = (
    "import sys; from conformance.core.forkserver import serve_inherited; "
    "serve_inherited(*map(int, sys.argv[1:]))"
)

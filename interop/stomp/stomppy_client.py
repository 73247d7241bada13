"""Launch adapter: stomp.py (PyPI ``stomp.py``) as a Swaptacular STOMP client
target (docs/stomp-adapter.md, "Client targets"; client_contract.py).

stomp.py does the TLS connection, the CONNECT (its 1.2 protocol sends the
STOMP command), the framing and the RECEIPT matching; this adapter hands it
the manifest's values and counts a message delivered when stomp.py reports
the RECEIPT for it. What stomp.py leaves to applications, sending again what
a dropped connection left unreceipted, the adapter does: a new connection,
the same SENDs (same receipt ids).

TLS: the profile wants the server chain verified and the hostname not
checked. stomp.py's ``set_ssl`` builds ``ssl.SSLContext(ssl_version)`` and,
with ``verify=True``, only sets ``verify_mode``; with its default
``ssl_version`` (PROTOCOL_TLS_CLIENT) ``check_hostname`` stays on, and
``verify=False`` drops chain verification too. The one setting that gives
chain verification without a hostname check is ``ssl_version=
ssl.PROTOCOL_TLS`` (deprecated in Python, whose contexts start with
check_hostname off): the adapter uses it. No setting requires TLS 1.3 (see
docs/findings/stomp.py-9.0.md).
"""

from __future__ import annotations

import inspect
import os
import secrets
import ssl
import sys
import threading
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from client_contract import cannot_drive  # noqa: E402

try:
    import stomp
    import stomp.exception
except Exception as exc:  # noqa: BLE001 - any release that does not import (py2-only syntax, ...)
    from importlib import metadata

    try:
        # The first on the path: a versioned target's, on PYTHONPATH.
        release = metadata.version("stomp.py")
    except metadata.PackageNotFoundError:
        release = "(unknown version)"
    # A release whose own pins no longer work with this Python's packages
    # (stomp.py 8.0.0 pins pyOpenSSL 20, which fails on today's cryptography).
    cannot_drive("stomp.py", release, f"import stomp failed: {type(exc).__name__}: {exc}")

from client_contract import (  # noqa: E402
    EXIT_FAILED,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    Plan,
    UsageError,  # noqa: E402
    delivered,
    done,
    error_frame,
    log,
    parse_args,
)


def stomp_version() -> str:
    """The installed distribution's version (stomp.py 8.0.1's own
    ``__version__`` still says 8.0.0), else the module's."""
    from importlib import metadata

    try:
        distribution = metadata.distribution("stomp.py")
        # The distribution of the module imported, not another on the path.
        if (
            Path(str(distribution.locate_file("stomp"))).resolve()
            == Path(stomp.__file__).parent.resolve()
        ):
            return distribution.version
    except metadata.PackageNotFoundError:
        pass
    version = getattr(stomp, "__version__", "(unknown version)")
    return ".".join(str(part) for part in version) if isinstance(version, tuple) else str(version)


NEEDED_PARAMETERS = {
    "Connection12": (
        "host_and_ports",
        "vhost",
        "heartbeats",
        "reconnect_attempts_max",
        "timeout",
        "try_loopback_connect",
    ),
    "Connection12.set_ssl": ("for_hosts", "cert_file", "key_file", "ca_certs", "ssl_version"),
    "Connection12.connect": ("username", "passcode", "wait"),
    "Connection12.send": ("destination", "body", "content_type", "headers"),
    "Connection12.disconnect": ("receipt",),
    "ConnectionListener.on_receipt": ("frame",),
    "ConnectionListener.on_connected": ("frame",),
}
"""What this adapter calls, by name: a release whose API lacks one is a
release the adapter cannot drive (a target not started), not a client that
breaks a rule. Listeners got (headers, body) before stomp.py 5 and a frame
since; the keyword arguments of Connection12 and set_ssl grew over releases.
``verify`` of set_ssl is passed only where it exists."""


def api_problem() -> str | None:
    """What of NEEDED_PARAMETERS the installed stomp.py lacks, or None."""
    import inspect

    missing = []
    for path, names in NEEDED_PARAMETERS.items():
        owner = stomp
        for part in path.split("."):
            owner = getattr(owner, part, None)
            if owner is None:
                missing.append(f"stomp.{path} does not exist")
                break
        else:
            try:
                parameters = inspect.signature(owner).parameters
            except (TypeError, ValueError):
                continue
            open_ended = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
            lacking = [n for n in names if n not in parameters and not open_ended]
            if lacking:
                missing.append(f"stomp.{path} has no parameter {', '.join(lacking)}")
    return "; ".join(missing) or None


MAX_FRUITLESS_ATTEMPTS = 6
BACKOFF_FIRST = 0.1
BACKOFF_MAX = 2.0


class Listener(stomp.ConnectionListener):
    """stomp.py calls these from its I/O thread."""

    def __init__(self, in_flight: dict[str, int], done_set: set[int], lock: threading.Lock) -> None:
        self.in_flight = in_flight
        self.done_set = done_set
        self.lock = lock
        self.connected = threading.Event()
        self.changed = threading.Condition(lock)
        self.lost = False

    def on_connected(self, frame) -> None:
        self.connected.set()

    def on_receipt(self, frame) -> None:
        receipt = frame.headers.get("receipt-id")
        with self.lock:
            index = self.in_flight.pop(receipt, None)
            if index is not None and index not in self.done_set:
                self.done_set.add(index)
                delivered(index)
            self.changed.notify_all()

    def on_error(self, frame) -> None:
        error_frame(frame.headers, frame.body or "")

    def on_disconnected(self) -> None:
        with self.lock:
            self.lost = True
            self.changed.notify_all()


def one_connection(plan: Plan, done_set: set[int], prefix: str, end: float) -> str:
    """Connect, send what is not delivered, wait for the RECEIPTs; returns why
    the connection ended."""
    host, port = plan.choose_server()
    remaining = max(end - time.monotonic(), 0.1)
    conn = stomp.Connection12(
        [(host, port)],
        vhost=plan.host,
        heartbeats=(0, 0),
        reconnect_attempts_max=1,
        timeout=min(remaining, 10.0),
        try_loopback_connect=False,
    )
    # Releases before set_ssl had ``verify`` verify the chain whenever
    # ca_certs is given.
    verify = {"verify": True} if "verify" in inspect.signature(conn.set_ssl).parameters else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        conn.set_ssl(
            for_hosts=[(host, port)],
            cert_file=plan.cert,
            key_file=plan.key,
            ca_certs=plan.ca,
            ssl_version=ssl.PROTOCOL_TLS,
            **verify,
        )
    lock = threading.Lock()
    in_flight: dict[str, int] = {}
    listener = Listener(in_flight, done_set, lock)
    conn.set_listener("adapter", listener)
    try:
        conn.connect(username=plan.login, passcode=plan.passcode, wait=False)
    except (stomp.exception.StompException, OSError, ssl.SSLError) as exc:
        return f"connect to {host}:{port} failed: {type(exc).__name__}: {exc}"
    try:
        if not listener.connected.wait(max(end - time.monotonic(), 0.01)):
            return "no CONNECTED"
        with lock:
            todo = [i for i in range(len(plan.messages)) if i not in done_set]
            for index in todo:
                in_flight[f"{prefix}-{index}"] = index
        for index in todo:
            message = plan.messages[index]
            conn.send(
                plan.destination,
                message.body,
                content_type="application/json",
                headers={
                    "type": message.type,
                    "persistent": "true",
                    "receipt": f"{prefix}-{index}",
                },
            )
        with lock:
            while len(done_set) < len(plan.messages) and not listener.lost:
                left = end - time.monotonic()
                if left <= 0:
                    return "deadline"
                listener.changed.wait(left)
            if listener.lost:
                return "connection lost"
        conn.disconnect(receipt=f"{prefix}-disconnect")
        return "done"
    except (stomp.exception.StompException, OSError, ssl.SSLError) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        try:
            if conn.is_connected():
                conn.disconnect()
        except Exception:  # noqa: BLE001 - tearing down a connection that is going anyway
            pass


def main(argv: list[str] | None = None) -> int:
    try:
        plan = parse_args(
            argv, "stomppy_client.py", "stomp.py as a Swaptacular STOMP client target"
        )
    except UsageError as exc:
        log(f"error: {exc}")
        return EXIT_USAGE
    problem = api_problem()
    if problem:
        cannot_drive("stomp.py", stomp_version(), problem)
    log(f"stomp.py {stomp_version()} from {Path(stomp.__file__).parent}")
    end = time.monotonic() + plan.timeout
    done_set: set[int] = set()
    prefix = secrets.token_hex(8)
    fruitless, backoff = 0, BACKOFF_FIRST
    status = EXIT_OK
    while len(done_set) < len(plan.messages):
        if time.monotonic() >= end:
            log(
                f"error: {len(plan.messages) - len(done_set)} message(s) not receipted after {plan.timeout:g} s"
            )
            status = EXIT_TIMEOUT
            break
        before = len(done_set)
        why = one_connection(plan, done_set, prefix, end)
        if why != "done":
            log(f"connection ended: {why}")
        if len(done_set) == len(plan.messages):
            break
        fruitless = 0 if len(done_set) > before else fruitless + 1
        if fruitless >= MAX_FRUITLESS_ATTEMPTS:
            log(f"error: {fruitless} connections in a row delivered nothing")
            status = EXIT_FAILED
            break
        time.sleep(max(0.0, min(backoff, end - time.monotonic())))
        backoff = min(backoff * 2, BACKOFF_MAX)
    done(len(done_set))
    sys.stdout.flush()
    # stomp.py's threads are daemons, but a receiver blocked in a TLS read
    # can delay interpreter shutdown: leave at once.
    os._exit(status)


if __name__ == "__main__":
    main()

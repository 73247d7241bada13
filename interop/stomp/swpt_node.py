"""swpt_stomp (Swaptacular's own STOMP server and client) as the STOMP
targets ``swpt-server`` and ``swpt-client`` (conformance/targets/builtin.toml).

swpt_stomp is installed in a venv of its own by scripts/install-swpt-stomp.sh
(.tools/swpt-stomp/venv); this script only prepares what it needs and runs
its own commands (``swpt-server``, ``swpt-client``, ``configure-queue``):

    swpt_node.py server --workdir DIR --port PORT --cert PEM --key KEY --ca PEM --client-cert PEM [--amqp-port N]
        A Swaptacular node of type "Accounting Authorities" (node id
        00000001, the accounting authority of the harness's debtor ids): a
        node database in Swaptacular's layout (DIR/swpt-server/nodedata,
        SWPT_NODEDATA_URL), the harness as its peer (a creditors agent named
        by the serialNumber of --client-cert), a private RabbitMQ
        (scripts/rabbitmq.sh --amqp-only with the rabbitmq_random_exchange
        plugin; its data in DIR/swpt-server/rabbitmq, so a restart finds it)
        with the node type's exchange ``accounts_in`` and the queue
        ``swpt-accepted`` bound to it with "#", then ``swpt-server`` on
        PORT (TLS 1.3, client certificates from --ca required). Prints
            SWPT_SERVER_READY port=<port> amqp_port=<port> manifest=<stomp.toml>
        and stays in the foreground; SIGTERM stops everything.
    swpt_node.py accepted --port AMQP_PORT [--queue swpt-accepted]
        The ``accepted`` adapter (docs/stomp-adapter.md): what swpt-server
        published to ``accounts_in``, read without consuming it.
    swpt_node.py client --workdir DIR --manifest TOML --node-id ID --cert PEM --key KEY --ca PEM
                        --messages JSONL --timeout SECONDS
        A node of type "Creditors Agents" with id ID whose peer is the
        harness (the accounting authority 00000001, reached at the servers
        of --manifest, its stomp.toml): a private RabbitMQ, the peer's queue
        made by swpt_stomp's ``configure-queue``, the messages put in it in
        file order (AMQP type and content type as swpt_stomp's client reads
        them), then ``swpt-client`` sending them. swpt-client acknowledges a
        message in its queue once the server's RECEIPT confirmed it
        (rmq.py ``send_acks``); the client's AMQP connection goes through a
        relay here that reads those acknowledgements and prints
        ``DELIVERED=<n>`` for each message they cover (docs/stomp-adapter.md,
        "Client targets"). swpt-client exits when its STOMP connection ends
        (client.py ``connect``); like the supervisor a node runs it under, this
        starts it again until every message is delivered (exit 0) or
        --timeout runs out (exit 1).
        With --shared-broker RUN_WORKDIR, the private RabbitMQ is one for
        every launch of the run instead of one per launch: the first launch
        starts it under a keeper of its own (``swpt_node.py broker``, in
        RUN_WORKDIR/swpt-client-broker) that stops it once the run's work
        dir is removed or its owner gone; each launch configures, fills and
        at its end deletes a queue of its own.
    swpt_node.py broker --state-dir RUN_WORKDIR/swpt-client-broker --owner RUN_WORKDIR
        That keeper, started for the run instead: a container target's
        client service (conformance/targets/containers.toml), which outlives
        the launches' containers; prints SHARED_BROKER_READY amqp_port=<port>.

Both roles use the run's certificates: the run's CA plays every node's root
certificate (``root-ca.crt``, the peer's ``root-ca.crt`` and ``sub-ca.crt``),
and the Swaptacular subjects swpt_stomp checks are in the run's leaves
(conformance/core/pki.py).
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from conformance.core.pki import HARNESS_AA_NODE_ID, certificate_node_id  # noqa: E402

DEFAULT_SWPT_BIN = REPO / ".tools" / "swpt-stomp" / "venv" / "bin"
SERVER_NODE_ID = HARNESS_AA_NODE_ID
"""swpt-server's own node id: the accounting authority whose debtor ids
(0x00000001xxxxxxxx) the harness's SMP examples use (an AA accepts only
messages for its own debtors, swpt_stomp process_messages.py 116-117)."""
SERVER_EXCHANGE = "accounts_in"
SERVER_QUEUE = "swpt-accepted"
CLIENT_QUEUE = "swpt-client.to-harness"
AA, CA = "Accounting Authorities", "Creditors Agents"


def log(*parts: object) -> None:
    print("swpt_node.py:", *parts, file=sys.stderr, flush=True)


def _write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)


def _stomp_toml(servers: list[str], host: str, destination: str) -> str:
    return (
        f"servers = {json.dumps(servers)}\nhost = {json.dumps(host)}\n"
        f"destination = {json.dumps(destination)}\n"
    )


def make_server_nodedata(root: Path, ca: Path, port: int, peer_id: str) -> None:
    """The node database of an accounting authority with the harness as a
    creditors-agent peer (swpt_stomp peer_data.py ``_LocalDirectory``)."""
    ca_pem = ca.read_bytes()
    _write(root / "root-ca.crt", ca_pem)
    _write(root / "db" / "nodeid", SERVER_NODE_ID + "\n")
    _write(root / "db" / "nodetype", AA + "\n")
    # Rewritten at every start: the port is the harness's pick for this start.
    _write(
        root / "nodeinfo" / "stomp.toml",
        _stomp_toml([f"127.0.0.1:{port}"], "/", f"/exchange/{SERVER_EXCHANGE}"),
    )
    peer = root / "peers" / peer_id
    for name in ("root-ca.crt", "sub-ca.crt", "peercert.crt"):
        _write(peer / name, ca_pem)
    _write(peer / "nodetype.txt", CA + "\n")
    # Every creditor id: the harness draws its creditor ids at random
    # (docs/stomp-adapter.md); swpt_stomp's Subnet.parse("") is the
    # universal subnet (peer_data.py 52-65), as it is for the AA itself.
    _write(peer / "subnet.txt", "\n")
    _write(
        peer / "nodeinfo" / "stomp.toml",
        _stomp_toml(["stomp-client.invalid:1234"], "/", "/exchange/creditors_in"),
    )
    _write(peer / "ACTIVE", b"")


def make_client_nodedata(root: Path, ca: Path, node_id: str, manifest: Path) -> None:
    """The node database of a creditors agent ``node_id`` whose peer is the
    harness, the accounting authority HARNESS_AA_NODE_ID, with the
    harness's stomp.toml (swpt_stomp reads the peer's servers, host,
    destination and login from it, with ${NODE_ID} replaced)."""
    ca_pem = ca.read_bytes()
    _write(root / "root-ca.crt", ca_pem)
    _write(root / "db" / "nodeid", node_id + "\n")
    _write(root / "db" / "nodetype", CA + "\n")
    _write(root / "creditors-subnet.txt", "\n")
    _write(
        root / "nodeinfo" / "stomp.toml",
        _stomp_toml(["127.0.0.1:1"], "/", "/exchange/creditors_in"),
    )
    peer = root / "peers" / HARNESS_AA_NODE_ID
    for name in ("root-ca.crt", "sub-ca.crt", "peercert.crt"):
        _write(peer / name, ca_pem)
    _write(peer / "nodetype.txt", AA + "\n")
    _write(peer / "masq-subnet.txt", "\n")
    _write(peer / "nodeinfo" / "stomp.toml", manifest.read_bytes())
    _write(peer / "ACTIVE", b"")


# -- processes -------------------------------------------------------------------------------


class Broker:
    """A private RabbitMQ (scripts/rabbitmq.sh --amqp-only)."""

    def __init__(
        self, data_dir: Path, exchange: str, queue: str, timeout: int, amqp_port: int = 0
    ) -> None:
        argv = [
            str(REPO / "scripts" / "rabbitmq.sh"),
            "--amqp-only",
            "--plugin",
            "rabbitmq_random_exchange",
            "--data-dir",
            str(data_dir),
            "--exchange",
            exchange,
            "--queue",
            queue,
            "--python",
            sys.executable,
            "--timeout",
            str(timeout),
        ]
        if amqp_port:
            argv += ["--amqp-port", str(amqp_port)]
        # rabbitmq.sh starts the broker again on other ports if one it
        # picked was taken before the broker bound it.
        self.process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=sys.stderr, stdin=subprocess.DEVNULL
        )
        self.amqp_port = 0
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.decode("utf-8", "replace").strip()
            match = re.search(r"RABBITMQ_READY=1 .*amqp_port=(\d+)", line)
            if match:
                self.amqp_port = int(match.group(1))
                break
            log("rabbitmq.sh:", line)
        if not self.amqp_port:
            self.process.wait()
            raise SystemExit(
                f"swpt_node.py: RabbitMQ did not start (rabbitmq.sh exited {self.process.returncode})"
            )
        # Nothing more is read; a thread keeps the pipe from filling.
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            log("rabbitmq.sh:", raw.decode("utf-8", "replace").rstrip())

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/"

    def stop(self) -> None:
        _stop(self.process, 20.0)


def _stop(process: subprocess.Popen | None, grace: float) -> None:
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _swpt_env(args: argparse.Namespace, nodedata: Path, broker_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "SWPT_NODEDATA_URL": f"file://{nodedata}",
            "PROTOCOL_BROKER_URL": broker_url,
            "APP_LOG_LEVEL": "info",
            "APP_LOG_FORMAT": "text",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def _swpt_bin(args: argparse.Namespace, name: str) -> str:
    path = Path(args.swpt_bin) / name
    if not os.access(path, os.X_OK):
        raise SystemExit(f"swpt_node.py: {path} not found: run scripts/install-swpt-stomp.sh")
    return str(path)


def _terminate_on_sigterm() -> None:
    def handler(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _port_accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


# -- server role -----------------------------------------------------------------------------


def cmd_server(args: argparse.Namespace) -> int:
    _terminate_on_sigterm()
    work = Path(args.workdir) / "swpt-server"
    nodedata = work / "nodedata"
    peer_id = certificate_node_id(args.client_cert)
    if not peer_id:
        raise SystemExit(
            f"swpt_node.py: {args.client_cert} has no serialNumber in its subject (the Swaptacular "
            "node id swpt-server identifies its peers by)"
        )
    make_server_nodedata(nodedata, Path(args.ca), args.port, peer_id)
    broker = server = None
    try:
        broker = Broker(
            work / "rabbitmq", SERVER_EXCHANGE, SERVER_QUEUE, args.timeout, args.amqp_port
        )
        env = _swpt_env(args, nodedata, broker.url)
        env.update(
            {
                "SWPT_SERVER_PORT": str(args.port),
                "SWPT_SERVER_CERT": str(Path(args.cert).resolve()),
                "SWPT_SERVER_KEY": str(Path(args.key).resolve()),
                "SWPT_SERVER_BUFFER": "100",
            }
        )
        server = subprocess.Popen(
            [_swpt_bin(args, "swpt-server")], env=env, stdin=subprocess.DEVNULL
        )
        deadline = time.monotonic() + args.timeout
        while not _port_accepts(args.port):
            if server.poll() is not None:
                raise SystemExit(
                    f"swpt_node.py: swpt-server exited with code {server.returncode} before it listened"
                )
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"swpt_node.py: swpt-server not listening on {args.port} within {args.timeout} s"
                )
            time.sleep(0.1)
        print(
            f"SWPT_SERVER_READY port={args.port} amqp_port={broker.amqp_port} "
            f"manifest={nodedata / 'nodeinfo' / 'stomp.toml'} peer={peer_id}",
            flush=True,
        )
        while True:
            if server.poll() is not None:
                log(f"swpt-server exited on its own with code {server.returncode}")
                return 1
            if broker.process.poll() is not None:
                log(f"rabbitmq.sh exited on its own with code {broker.process.returncode}")
                return 1
            time.sleep(0.2)
    finally:
        _stop(server, 10.0)
        if broker is not None:
            broker.stop()


def cmd_accepted(args: argparse.Namespace) -> int:
    """amqp_accepted.py's reader, with swpt-server's mapping: it accepts SENDs
    to exactly /exchange/accounts_in (aio_protocols.py 547-555) and publishes
    them to that exchange with a routing key of its own (process_messages.py
    214-221), so the destination a record maps back to is the exchange's."""
    import amqp_accepted

    def describe(method, props, body):
        record = original(method, props, body)
        if method.exchange:
            record["destination"] = f"/exchange/{method.exchange}"
        return record

    original = amqp_accepted.describe
    amqp_accepted.describe = describe
    return amqp_accepted.main(["read", "--port", str(args.port), "--queue", args.queue])


# -- client role -----------------------------------------------------------------------------


class AmqpFrames:
    """An incremental reader of AMQP 0-9-1 frames in one direction."""

    def __init__(self, expect_header: bool) -> None:
        self.buffer = bytearray()
        self.header = expect_header

    def feed(self, data: bytes) -> list[tuple[int, int, bytes]]:
        self.buffer += data
        frames = []
        if self.header:
            if len(self.buffer) < 8:
                return frames
            del self.buffer[:8]  # "AMQP\0\0\x09\x01"
            self.header = False
        while len(self.buffer) >= 7:
            kind, channel, size = struct.unpack(">BHI", self.buffer[:7])
            if len(self.buffer) < 8 + size:
                break
            frames.append((kind, channel, bytes(self.buffer[7 : 7 + size])))
            del self.buffer[: 8 + size]
        return frames


def _shortstr(payload: bytes, at: int) -> tuple[bytes, int]:
    n = payload[at]
    return payload[at + 1 : at + 1 + n], at + 1 + n


class AckWatch:
    """Reads swpt-client's AMQP conversation: which message each delivery
    tag carries (basic.deliver and its body), and which tags it
    acknowledges (basic.ack, ``multiple`` covering every earlier tag of the
    channel). Prints DELIVERED=<n> once per message acknowledged."""

    def __init__(self, bodies: list[bytes]) -> None:
        self.bodies = bodies
        self.delivered: set[int] = set()
        self.done = asyncio.Event()
        if not bodies:
            self.done.set()

    def connection(self):
        tags: dict[tuple[int, int], int | None] = {}  # (channel, tag) -> message index
        pending: dict[int, list] = {}  # channel -> [tag, size, body]

        def from_broker(kind: int, channel: int, payload: bytes) -> None:
            if kind == 1 and payload[:4] == struct.pack(">HH", 60, 60):  # basic.deliver
                _, at = _shortstr(payload, 4)
                (tag,) = struct.unpack(">Q", payload[at : at + 8])
                pending[channel] = [tag, None, b""]
            elif kind == 2 and channel in pending:  # content header
                pending[channel][1] = struct.unpack(">Q", payload[4:12])[0]
                self._complete(pending, channel, tags)
            elif kind == 3 and channel in pending:  # body
                pending[channel][2] += payload
                self._complete(pending, channel, tags)

        def from_client(kind: int, channel: int, payload: bytes) -> None:
            if kind == 1 and payload[:4] == struct.pack(">HH", 60, 80):  # basic.ack
                tag, bits = struct.unpack(">QB", payload[4:13])
                covered = [
                    key
                    for key in tags
                    if key[0] == channel and (key[1] <= tag if bits & 1 else key[1] == tag)
                ]
                for key in sorted(covered, key=lambda k: k[1]):
                    index = tags.pop(key)
                    if index is not None and index not in self.delivered:
                        self.delivered.add(index)
                        print(f"DELIVERED={index}", flush=True)
                if len(self.delivered) == len(self.bodies):
                    self.done.set()

        return from_broker, from_client

    def _complete(self, pending: dict, channel: int, tags: dict) -> None:
        tag, size, body = pending[channel]
        if size is not None and len(body) >= size:
            del pending[channel]
            tags[(channel, tag)] = self.bodies.index(body) if body in self.bodies else None


async def amqp_relay(upstream_port: int, watch: AckWatch) -> asyncio.AbstractServer:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
        except OSError:
            writer.close()
            return
        from_broker, from_client = watch.connection()

        async def pump(src, dst, frames: AmqpFrames, seen) -> None:
            try:
                while data := await src.read(65536):
                    for frame in frames.feed(data):
                        seen(*frame)
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                dst.close()

        await asyncio.gather(
            pump(reader, up_writer, AmqpFrames(True), from_client),
            pump(up_reader, writer, AmqpFrames(False), from_broker),
        )

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def publish_messages(amqp_port: int, queue: str, messages: list[dict]) -> list[bytes]:
    """Put the messages in the peer's queue, in order, as a node's own
    producers would (swpt_stomp's client reads the AMQP type and content
    type, rmq.py ``consume_queue``)."""
    import pika

    bodies = [
        json.dumps(m["body"], separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        for m in messages
    ]
    connection = _amqp_connection(amqp_port)
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        for message, body in zip(messages, bodies):
            channel.basic_publish(
                "",
                queue,
                body,
                pika.BasicProperties(
                    type=message["type"], content_type="application/json", delivery_mode=2
                ),
                mandatory=True,
            )
    finally:
        connection.close()
    return bodies


# -- one broker for every client launch of a run -----------------------------------------------

SHARED_BROKER_DIR = "swpt-client-broker"
"""Under the run's work dir: the shared broker's data, its state file and
its log."""


def _owner_gone(owner: Path) -> bool:
    """True once the run that owns ``owner`` (the target's work dir) is over:
    the dir was removed, or its owner lock (conformance/core/work_dirs.py)
    is free, which the kernel guarantees once the owning harness died."""
    lock = owner / ".owner.lock"
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def cmd_broker(args: argparse.Namespace) -> int:
    """The shared broker's keeper (started detached by the first client
    launch of a run): a RabbitMQ kept until the run's work dir goes away,
    then stopped. It holds an exclusive flock on ``alive`` for its whole
    life, so a launch tells a live broker from a dead one's state file."""
    state = Path(args.state_dir)
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    alive = os.open(state / "alive", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(alive, fcntl.LOCK_EX)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.set())
    broker = Broker(state / "rabbitmq", "creditors_in", "creditors_in.unused", args.timeout)
    try:
        _write(
            state / "broker.json", json.dumps({"amqp_port": broker.amqp_port, "pid": os.getpid()})
        )
        print(f"SHARED_BROKER_READY amqp_port={broker.amqp_port}", flush=True)
        # Nothing more goes to the launch that started this keeper.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
        owner = Path(args.owner)
        # The run's end has no event to wait on from here (the harness removes
        # the dir); two checks a second bound the broker's stay after it.
        while not stopping.wait(0.5):
            if _owner_gone(owner) or broker.process.poll() is not None:
                break
    finally:
        broker.stop()
        os.close(alive)
    return 0


def attach_shared_broker(owner: Path, timeout: float) -> int:
    """The AMQP port of the run's shared broker, started here (detached, in
    a session of its own, so that the harness stopping this launch leaves
    it to the next) if no live one is recorded. A lock serializes launches
    that start at the same time, so one broker serves them all."""
    state = owner / SHARED_BROKER_DIR
    state.mkdir(mode=0o700, exist_ok=True)
    lock = os.open(state / "start.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise SystemExit(
                        f"swpt_node.py: another launch held {state}/start.lock for {timeout:.0f} s"
                    ) from None
                time.sleep(0.2)  # flock(2) has no timeout; another launch is starting the broker
        port = _live_shared_broker(state)
        if port:
            log(f"using the run's shared RabbitMQ (AMQP port {port})")
            return port
        log_file = open(state / "broker.log", "ab")
        keeper = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "broker",
                "--state-dir",
                str(state),
                "--owner",
                str(owner),
                "--timeout",
                str(int(timeout)),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log_file,
            start_new_session=True,
        )
        log_file.close()
        assert keeper.stdout is not None
        line = keeper.stdout.readline().decode("utf-8", "replace")
        keeper.stdout.close()
        match = re.search(r"SHARED_BROKER_READY amqp_port=(\d+)", line)
        if not match:
            keeper.wait()
            tail = (state / "broker.log").read_text("utf-8", "replace")[-2000:]
            raise SystemExit(
                f"swpt_node.py: the shared RabbitMQ did not start (keeper exited {keeper.returncode}):\n{tail}"
            )
        log(
            f"started the run's shared RabbitMQ (AMQP port {match.group(1)}; log {state}/broker.log)"
        )
        return int(match.group(1))
    finally:
        os.close(lock)


def _live_shared_broker(state: Path) -> int:
    """The AMQP port in ``broker.json`` if its keeper still holds ``alive``; 0 if not."""
    try:
        fd = os.open(state / "alive", os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return 0
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return json.loads((state / "broker.json").read_text())["amqp_port"]
    finally:
        os.close(fd)
    return 0


def _amqp_connection(amqp_port: int):
    """A blocking AMQP connection to a private broker on loopback (guest)."""
    import pika

    return pika.BlockingConnection(
        pika.ConnectionParameters(
            host="127.0.0.1",
            port=amqp_port,
            credentials=pika.PlainCredentials("guest", "guest"),
            heartbeat=0,
        )
    )


def delete_queue(amqp_port: int, queue: str) -> None:
    """A launch's queue leaves the shared broker with it."""
    connection = _amqp_connection(amqp_port)
    try:
        connection.channel().queue_delete(queue)
    finally:
        connection.close()


def cmd_client(args: argparse.Namespace) -> int:
    _terminate_on_sigterm()
    started = time.monotonic()
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="swpt-client.", dir=args.workdir))
    nodedata = work / "nodedata"
    make_client_nodedata(nodedata, Path(args.ca), args.node_id, Path(args.manifest))
    messages = [
        json.loads(line)
        for line in Path(args.messages).read_text("utf-8").splitlines()
        if line.strip()
    ]
    broker = None
    queue = CLIENT_QUEUE
    amqp_port = 0
    try:
        if args.shared_broker:
            amqp_port = attach_shared_broker(Path(args.shared_broker), 120)
            # One queue per launch: launches of a run that overlap (case jobs)
            # never read each other's messages.
            queue = f"{CLIENT_QUEUE}.{work.name}"
        else:
            broker = Broker(work / "rabbitmq", "creditors_in", "creditors_in.unused", 120)
            amqp_port = broker.amqp_port
        env = _swpt_env(args, nodedata, f"amqp://guest:guest@127.0.0.1:{amqp_port}/")
        configure = subprocess.run(
            [_swpt_bin(args, "configure-queue"), HARNESS_AA_NODE_ID, queue],
            env=env,
            stdin=subprocess.DEVNULL,
        )
        if configure.returncode != 0:
            log(f"configure-queue exited with code {configure.returncode}")
            return 1
        bodies = publish_messages(amqp_port, queue, messages)
        log(
            f"{len(bodies)} message(s) in queue {queue} after {time.monotonic() - started:.1f} s; "
            "starting swpt-client"
        )
        return asyncio.run(_run_client(args, env, bodies, amqp_port, queue, started))
    finally:
        if broker is not None:
            broker.stop()
        elif amqp_port:
            try:
                delete_queue(amqp_port, queue)
            except Exception as error:  # the broker may be stopping with the run
                log(f"could not delete queue {queue}: {error!r}")
        shutil.rmtree(work, ignore_errors=True)


async def _run_client(
    args: argparse.Namespace,
    env: dict[str, str],
    bodies: list[bytes],
    amqp_port: int,
    queue: str,
    started: float,
) -> int:
    watch = AckWatch(bodies)
    relay = await amqp_relay(amqp_port, watch)
    relay_port = relay.sockets[0].getsockname()[1]
    env = dict(
        env,
        PROTOCOL_BROKER_URL=f"amqp://guest:guest@127.0.0.1:{relay_port}/",
        SWPT_SERVER_CERT=str(Path(args.cert).resolve()),
        SWPT_SERVER_KEY=str(Path(args.key).resolve()),
        SWPT_CLIENT_BUFFER="100",
    )
    argv = [_swpt_bin(args, "swpt-client"), HARNESS_AA_NODE_ID, queue]
    # --timeout counts from here: the broker's start is not the client's time.
    deadline = time.monotonic() + args.timeout
    runs = 0
    try:
        while not watch.done.is_set() and time.monotonic() < deadline:
            runs += 1
            process = await asyncio.create_subprocess_exec(*argv, env=env, stdin=subprocess.DEVNULL)
            done = asyncio.create_task(watch.done.wait())
            exited = asyncio.create_task(process.wait())
            await asyncio.wait(
                {done, exited},
                timeout=max(0.0, deadline - time.monotonic()),
                return_when=asyncio.FIRST_COMPLETED,
            )
            if process.returncode is None:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), 10)
                except asyncio.TimeoutError:
                    process.kill()
                    await process.wait()
            else:
                log(f"swpt-client exited with code {process.returncode} (run {runs})")
            done.cancel()
            if not watch.done.is_set():
                await asyncio.sleep(1.0)  # a supervisor's restart delay
    finally:
        relay.close()
    if watch.done.is_set():
        print(f"DONE delivered={len(watch.delivered)}", flush=True)
        return 0
    log(
        f"gave up after {args.timeout} s: {len(watch.delivered)} of {len(bodies)} message(s) delivered"
    )
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--swpt-bin",
        default=str(DEFAULT_SWPT_BIN),
        help="swpt_stomp's venv bin directory (scripts/install-swpt-stomp.sh)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("server")
    s.add_argument("--workdir", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--cert", required=True)
    s.add_argument("--key", required=True)
    s.add_argument("--ca", required=True)
    s.add_argument(
        "--client-cert", required=True, help="the harness's client certificate (names its node id)"
    )
    s.add_argument("--timeout", type=int, default=120)
    s.add_argument(
        "--amqp-port", type=int, default=0, help="the broker's AMQP port (default: a free one)"
    )
    a = sub.add_parser("accepted")
    a.add_argument("--port", type=int, required=True)
    a.add_argument("--queue", default=SERVER_QUEUE)
    c = sub.add_parser("client")
    c.add_argument("--workdir", required=True)
    c.add_argument("--manifest", required=True)
    c.add_argument("--node-id", required=True)
    c.add_argument("--cert", required=True)
    c.add_argument("--key", required=True)
    c.add_argument("--ca", required=True)
    c.add_argument("--messages", required=True)
    c.add_argument("--timeout", type=float, default=30.0)
    c.add_argument(
        "--shared-broker",
        metavar="RUN_WORKDIR",
        help="use one RabbitMQ for every launch of the run whose work dir this is (started by the "
        "first launch, stopped when the dir goes away) instead of one per launch",
    )
    b = sub.add_parser(
        "broker",
        help="the shared broker's keeper (started by a client launch, or for the run by a "
        "container target's client service)",
    )
    b.add_argument("--state-dir", required=True)
    b.add_argument("--owner", required=True)
    b.add_argument("--timeout", type=int, default=120)
    args = parser.parse_args(argv)
    commands = {
        "server": cmd_server,
        "accepted": cmd_accepted,
        "client": cmd_client,
        "broker": cmd_broker,
    }
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())

"""The RabbitMQ STOMP target: scripts/rabbitmq.sh starts and stops a private
broker cleanly, a TLS 1.3 CONNECT/SEND/RECEIPT round trip works with client
certificates, interop/stomp/amqp_accepted.py reads back what was receipted
(without consuming it), durable messages survive a SIGKILL and restart, our
reference client delivers to it, and `conformance certify --target rabbitmq`
gives the verdict with exactly the known findings
(docs/findings/rabbitmq-3.10.md).

Skipped, with the reason, only when Debian's rabbitmq-server is not installed
(scripts/install-rabbitmq.sh, or scripts/setup.sh --rabbitmq).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..last_certification import known_not_passed

from conformance.core.pki import make_pki
from reference_impl.stomp.frame import HEARTBEAT, Frame, FrameParser, encode_frame
from reference_impl.stomp.smp import encode_message, example_message
from reference_impl.stomp.tls import client_context

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "rabbitmq.sh"
ADAPTER = REPO_ROOT / "interop" / "stomp" / "amqp_accepted.py"
READY = re.compile(r"RABBITMQ_READY=1 port=(\d+) amqp_port=(\d+)")
READY_TIMEOUT = 180.0
IO_TIMEOUT = 20.0

pytestmark = pytest.mark.skipif(
    not Path("/usr/lib/rabbitmq/bin/rabbitmq-server").exists(),
    reason="Debian's rabbitmq-server is not installed (scripts/install-rabbitmq.sh needs apt-get and root)",
)


class Broker:
    """One scripts/rabbitmq.sh process, in its own process group."""

    def __init__(self, pki, data_dir: Path | None, log: Path) -> None:
        argv = [
            str(SCRIPT),
            "--cert",
            str(pki.server_cert_file),
            "--key",
            str(pki.server_key_file),
            "--ca",
            str(pki.ca_file),
            "--python",
            sys.executable,
        ]
        if data_dir is not None:
            argv += ["--data-dir", str(data_dir)]
        self.log = log
        with open(log, "ab") as handle:
            self.process = subprocess.Popen(
                argv,
                stdout=handle,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        offset = log.stat().st_size if log.exists() else 0
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            text = log.read_bytes()[offset:].decode(errors="replace")
            match = READY.search(text)
            if match:
                self.port, self.amqp_port = int(match.group(1)), int(match.group(2))
                self.data_dir = Path(re.search(r"data_dir=(\S+)", text).group(1))
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                pytest.fail(
                    f"scripts/rabbitmq.sh not ready (exit {self.process.poll()}):\n{text[-3000:]}"
                )
            time.sleep(0.1)

    def group_alive(self, wait: float = 10.0) -> bool:
        """Whether any process of the group is left after ``wait`` seconds
        (killed children stay zombies until init reaps them)."""
        deadline = time.monotonic() + wait
        while True:
            try:
                os.killpg(self.process.pid, 0)
            except ProcessLookupError:
                return False
            if time.monotonic() > deadline:
                return True
            time.sleep(0.1)

    def terminate(self, timeout: float = 60.0) -> int | None:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(10)

    def accepted(self) -> list[dict]:
        completed = subprocess.run(
            [
                sys.executable,
                str(ADAPTER),
                "read",
                "--port",
                str(self.amqp_port),
                "--queue",
                "smp-accepted",
            ],
            capture_output=True,
            timeout=60,
        )
        assert completed.returncode == 0, completed.stderr.decode(errors="replace")
        return [json.loads(line) for line in completed.stdout.decode().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def broker(pki, tmp_path_factory):
    work = tmp_path_factory.mktemp("rabbitmq")
    running = Broker(pki, work / "data", work / "broker.log")
    yield running
    if running.terminate() is None:
        running.kill()


class StompTls:
    """A minimal blocking STOMP 1.2 client over TLS, every read bounded."""

    def __init__(self, port: int, context: ssl.SSLContext) -> None:
        raw = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT)
        self.sock = context.wrap_socket(raw)
        self.parser = FrameParser()
        self.frames: list[Frame] = []

    def send(self, frame: Frame) -> None:
        self.sock.sendall(encode_frame(frame))

    def read(self) -> Frame:
        while not self.frames:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by the server")
            self.frames.extend(f for f in self.parser.receive_data(data) if f is not HEARTBEAT)
        return self.frames.pop(0)

    def close(self) -> None:
        self.sock.close()


def smp_send(receipt: str, destination: str = "/exchange/smp/12345678") -> tuple[Frame, str]:
    message = dict(example_message("ConfigureAccount"))
    message["creditor_id"] = (1 << 32) + secrets.randbelow(1 << 62)
    body = encode_message(message)
    return Frame(
        "SEND",
        (
            ("destination", destination),
            ("receipt", receipt),
            ("type", "ConfigureAccount"),
            ("content-type", "application/json"),
            ("persistent", "true"),
        ),
        body,
    ), body.decode()


def connect(port: int, pki) -> StompTls:
    client = StompTls(port, client_context(pki.client_cert_file, pki.client_key_file, pki.ca_file))
    assert client.sock.version() == "TLSv1.3"
    client.send(Frame("CONNECT", (("accept-version", "1.2"), ("host", "/"), ("heart-beat", "0,0"))))
    connected = client.read()
    assert connected.command == "CONNECTED", connected
    assert connected.get("version") == "1.2"
    return client


def deliver(port: int, pki, count: int = 1) -> list[tuple[str, str]]:
    """SENDs ``count`` messages, each waiting for its RECEIPT; returns (receipt, body) pairs."""
    client = connect(port, pki)
    sent = []
    try:
        for _ in range(count):
            receipt = f"t-{secrets.token_hex(6)}"
            frame, body = smp_send(receipt)
            client.send(frame)
            reply = client.read()
            assert reply.command == "RECEIPT" and reply.get("receipt-id") == receipt, reply
            sent.append((receipt, body))
        client.send(Frame("DISCONNECT", (("receipt", "bye"),)))
        assert client.read().get("receipt-id") == "bye"
    finally:
        client.close()
    return sent


def test_tls_round_trip_and_adapter_reads_what_was_receipted(broker, pki):
    sent = deliver(broker.port, pki, count=3)
    first = broker.accepted()
    second = broker.accepted()
    assert first == second, "reading the queue consumed or reordered it"
    bodies = [line["body"] for line in first]
    positions = [bodies.index(body) for _, body in sent]
    assert positions == sorted(positions), "the adapter does not list messages in acceptance order"
    for receipt, body in sent:
        line = first[bodies.index(body)]
        assert line == {
            "destination": "/exchange/smp/12345678",
            "type": "ConfigureAccount",
            "content-type": "application/json",
            "receipt": receipt,
            "body": body,
        }


def test_no_client_certificate_is_refused(broker, pki):
    context = client_context(None, None, pki.ca_file)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=IO_TIMEOUT) as raw:
        # TLS 1.3: the server's refusal (certificate_required alert) comes
        # after the client's Finished, so it shows on the first read.
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with context.wrap_socket(raw) as tls:
                tls.sendall(
                    encode_frame(Frame("CONNECT", (("accept-version", "1.2"), ("host", "/"))))
                )
                if not tls.recv(4096):
                    raise ConnectionError("closed without a reply")


def test_tls_1_2_is_refused(broker, pki):
    context = client_context(pki.client_cert_file, pki.client_key_file, pki.ca_file)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    with socket.create_connection(("127.0.0.1", broker.port), timeout=IO_TIMEOUT) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            context.wrap_socket(raw).close()


def test_reference_client_delivers_to_rabbitmq(broker, pki, tmp_path):
    manifest = tmp_path / "stomp.toml"
    manifest.write_text(
        f'servers = ["127.0.0.1:{broker.port}"]\nhost = "/"\n'
        'destination = "/exchange/smp/${NODE_ID}"\n'
    )
    bodies = []
    with open(tmp_path / "messages.jsonl", "w") as handle:
        for _ in range(3):
            message = dict(example_message("ConfigureAccount"))
            message["creditor_id"] = (1 << 32) + secrets.randbelow(1 << 62)
            bodies.append(message)
            handle.write(json.dumps({"type": "ConfigureAccount", "body": message}) + "\n")
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "reference_impl.stomp",
            "client",
            "--manifest",
            str(manifest),
            "--node-id",
            "87654321",
            "--cert",
            str(pki.client_cert_file),
            "--key",
            str(pki.client_key_file),
            "--ca",
            str(pki.ca_file),
            "--messages",
            str(tmp_path / "messages.jsonl"),
            "--timeout",
            "60",
        ],
        capture_output=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    out = completed.stdout.decode()
    assert completed.returncode == 0, out + completed.stderr.decode(errors="replace")
    assert sorted(re.findall(r"^DELIVERED=(\d+)$", out, re.M)) == ["0", "1", "2"]
    held = [line for line in broker.accepted() if line["destination"] == "/exchange/smp/87654321"]
    held_creditors = {json.loads(line["body"])["creditor_id"] for line in held}
    assert {m["creditor_id"] for m in bodies} <= held_creditors
    assert all(
        line["type"] == "ConfigureAccount"
        and line["content-type"] == "application/json"
        and line["receipt"]
        for line in held
    )


def test_stops_cleanly_and_keeps_messages_through_sigkill(pki, tmp_path):
    # A temporary data dir (no --data-dir): SIGTERM stops the broker and its
    # epmd, and removes the directory.
    temporary = Broker(pki, None, tmp_path / "temporary.log")
    data_dir = temporary.data_dir
    assert data_dir.is_dir()
    assert temporary.terminate() is not None, (
        "scripts/rabbitmq.sh did not exit within 60 s of SIGTERM"
    )
    assert not temporary.group_alive(), "beam or epmd outlived scripts/rabbitmq.sh"
    assert not data_dir.exists()

    # A kept data dir: SIGKILL of the whole group right after the RECEIPTs,
    # a new start finds the durable queue and the persistent messages.
    first = Broker(pki, tmp_path / "data", tmp_path / "kept.log")
    sent = deliver(first.port, pki, count=2)
    first.kill()
    assert not first.group_alive()
    second = Broker(pki, tmp_path / "data", tmp_path / "kept.log")
    try:
        bodies = [line["body"] for line in second.accepted()]
        assert [body for _, body in sent] == [b for b in bodies if b in {body for _, body in sent}]
    finally:
        assert second.terminate() is not None


# Real findings against RabbitMQ 3.10.8, each shown with its bytes in
# docs/findings/rabbitmq-3.10.md (sections 1-3). The blocked cases are those
# that declare error-on-missing-destination as their prerequisite.
KNOWN_FINDINGS = {
    case: outcome
    for case, (_, outcome) in known_not_passed("rabbitmq", ("failed", "error")).items()
}
"""The failed cases of rabbitmq's last certification (docs/certified-today.json)."""


def test_harness_certifies_rabbitmq_with_the_known_findings(tmp_path):
    from ..harness.cli_runner import certify

    run = certify(tmp_path, "--target", "rabbitmq", timeout=600)
    records = run.by_case("rabbitmq")
    assert len(records) >= 30, run.output
    failed = {
        case: r["outcome"] for case, r in records.items() if r["outcome"] in ("failed", "error")
    }
    assert failed == KNOWN_FINDINGS, run.output
    for case, record in records.items():
        if record["outcome"] == "blocked":
            assert record["blocked_by"] in KNOWN_FINDINGS, (case, record["blocked_by"])
    na = {case for case, r in records.items() if r["outcome"] == "not_applicable"}
    # and the manifest case: RabbitMQ publishes no stomp.toml (a node's web server does), and the
    # target gives no params.manifest_file
    assert all(
        ".client." in case or case == "stomp.manifest.server.provides-valid-manifest" for case in na
    ), "only client-role cases (rabbitmq is a server target) and the manifest"
    # The storage cases ran through the AMQP adapter, the restart one too.
    for case in (
        "stomp.receipt.server.receipted-message-is-stored",
        "stomp.receipt.server.stored-after-restart",
        "stomp.receipt.server.stored-after-connection-cut",
    ):
        assert records[case]["outcome"] == "passed", records[case]["message"]
    assert run.code == 1 and "rabbitmq [rabbitmq 3.10.8, stomp]: NOT CONFORMANT" in run.output


FAKE_PYTHON = """#!/bin/bash
# The Python rabbitmq.sh is given (--python), except that the free ports it
# asks for on the calls listed in TAKE_CALLS are the port TAKEN_PORT, which
# the test holds: what happens when another process takes a free port
# between rabbitmq.sh picking it and the broker binding it.
if [ "$1" = -c ] && [[ "$2" == *getsockname* ]]; then
    n=$(( $(cat "$CALLS_FILE" 2>/dev/null || echo 0) + 1 )); echo "$n" > "$CALLS_FILE"
    for take in $TAKE_CALLS; do
        [ "$n" -eq "$take" ] && { echo "$TAKEN_PORT"; exit 0; }
    done
fi
exec "$REAL_PYTHON" "$@"
"""


def _read_until_ready(process: subprocess.Popen, timeout: float) -> str:
    """rabbitmq.sh's stdout until its ready line, or until it exits or
    ``timeout`` passes; what it printed."""
    import select

    out = b""
    deadline = time.monotonic() + timeout
    while b"RABBITMQ_READY=1" not in out:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        readable, _, _ = select.select([process.stdout], [], [], remaining)
        if not readable:
            break
        chunk = os.read(process.stdout.fileno(), 4096)
        if not chunk:  # exited
            break
        out += chunk
    return out.decode(errors="replace")


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "take_calls, ready",
    [
        # --amqp-only asks for four ports a start: STOMP (unused), AMQP, epmd,
        # then the Erlang distribution port, the one CI saw taken.
        ("4", True),
        ("4 8 12", False),  # taken at every start: gives up after the third
    ],
)
def test_a_broker_that_finds_a_port_taken_starts_again_on_other_ports(tmp_path, take_calls, ready):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    taken = holder.getsockname()[1]
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    env = dict(
        os.environ,
        CALLS_FILE=str(tmp_path / "calls"),
        TAKE_CALLS=take_calls,
        TAKEN_PORT=str(taken),
        REAL_PYTHON=sys.executable,
    )
    stderr = tmp_path / "rabbitmq.sh.err"
    with open(stderr, "wb") as err:
        process = subprocess.Popen(
            [str(SCRIPT), "--amqp-only", "--python", str(fake), "--timeout", "120"],
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    try:
        out = _read_until_ready(process, READY_TIMEOUT)
        errors = stderr.read_text(errors="replace")
        retries = re.findall(r"starting it again on other free ports \(attempt (\d) of 3\)", errors)
        if ready:
            match = READY.search(out)
            assert match, f"not ready after a taken port:\n{out}\n{errors[-3000:]}"
            assert retries == ["2"], errors[-3000:]
            assert int(match.group(2)) != taken
        else:
            assert process.wait(60) != 0 and "RABBITMQ_READY" not in out
            assert retries == ["2", "3"], errors[-3000:]
            assert "rabbitmq-server exited before it was ready" in errors
            assert "dist_port_already_used" in errors, "the log's tail says why"
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
        holder.close()

"""scripts/ssb-server.sh starts the reference ssb-server as a target, seeds
its feed, reports its facts, publishes on request, and cleans up on SIGTERM."""

import base64
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from nacl.signing import SigningKey

from reference_impl.ssb.keys import Keypair

from .node_env import REPO_ROOT, requires_node_modules

pytestmark = [pytest.mark.node_interop, requires_node_modules]

SCRIPT = REPO_ROOT / "scripts" / "ssb-server.sh"
IDENTITY_SEED = bytes(range(100, 132))
TEST_NETWORK_KEY = bytes(range(32))


def free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def parse_facts(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def wait_for_info_file(path: Path, server: subprocess.Popen, timeout: float) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return parse_facts(path.read_text())
        if server.poll() is not None:
            pytest.fail(f"ssb-server.sh exited with {server.returncode}: {server.stderr.read()}")
        time.sleep(0.2)
    pytest.fail(f"no {path} after {timeout}s")


@pytest.fixture
def running_server(tmp_path):
    info_file = tmp_path / "ssb-server.info"
    server = subprocess.Popen(
        [
            str(SCRIPT),
            "--port",
            str(free_loopback_port()),
            "--messages",
            "2",
            "--seed",
            IDENTITY_SEED.hex(),
            "--network-key",
            TEST_NETWORK_KEY.hex(),
            "--info-file",
            str(info_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        facts = wait_for_info_file(info_file, server, timeout=120)
        yield server, facts
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def test_reports_identity_and_seed_messages(running_server):
    server, facts = running_server
    expected_id = (
        "@" + base64.b64encode(SigningKey(IDENTITY_SEED).verify_key.encode()).decode() + ".ed25519"
    )
    assert facts["SSB_ID"] == expected_id
    assert facts["SSB_HOST"] == "127.0.0.1"
    assert facts["SSB_NETWORK_KEY"] == TEST_NETWORK_KEY.hex()
    assert facts["SSB_SEQUENCE"] == "2"
    assert facts["SSB_READY"] == "1"
    # The harness reads the server's secret with the reference implementation.
    assert Keypair.load(facts["SSB_SECRET"]).feed_id == expected_id
    # The same facts reach stdout for a harness that reads the pipe.
    stdout_facts = {}
    while "SSB_READY" not in stdout_facts:
        stdout_facts.update(parse_facts(server.stdout.readline()))
    assert stdout_facts == facts


def test_accepts_tcp_connections_on_its_port(running_server):
    _, facts = running_server
    with socket.create_connection((facts["SSB_HOST"], int(facts["SSB_PORT"])), timeout=5):
        pass


def test_publish_appends_to_the_feed(running_server):
    _, facts = running_server
    completed = subprocess.run(
        [str(SCRIPT), "publish", "--home", facts["SSB_HOME"], "--text", "live message"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    published = parse_facts(completed.stdout)
    assert published["SSB_MSG_SEQ"] == "3"
    assert re.fullmatch(r"%[A-Za-z0-9+/]{43}=\.sha256", published["SSB_MSG_KEY"])


def test_sigterm_stops_server_and_removes_home(running_server):
    server, facts = running_server
    home_root = Path(facts["SSB_HOME"]).parent
    server_pid = int(facts["SSB_PID"])
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=30)
    assert not home_root.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(server_pid, 0)

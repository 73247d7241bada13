"""Does an ssb-server session survive a change of the host's network
interfaces? Run as root inside a private network namespace (the test runs
it under ``unshare -n``, so the host's network is never touched):

    unshare -n .venv/bin/python -m tests.interop.ssb_network_change_check [--live-interfaces]

Starts scripts/ssb-server.sh on loopback (with ``--live-interfaces`` when
given), opens a session as the harness does and reads the server's feed,
adds a veth pair (what a container starting beside a run does to the
host), waits past two polls of ssb-gossip's interface watcher (one per
second), then reads the feed again on the same session. Prints one JSON
line: {"survived": bool, "detail": str}. Exit 0 whenever the check ran.
See docs/findings/ssb-server-16.md, "Sessions dropped on a host network change".
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from conformance.core.transport import PeerClosed, TcpConnection, WireTrace
from conformance.suites.ssb.session import SsbClientSession, server_public_key
from reference_impl.ssb.keys import MAIN_NETWORK_KEY, Keypair

from .node_env import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "ssb-server.sh"
START_TIMEOUT = 120.0
READ_DEADLINE = 5.0
AFTER_CHANGE = 3.5
"""The watcher polls every second; 3.5 s leaves room for a loaded machine."""
VETH, VETH_PEER = "netchange-a", "netchange-b"


def free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def read_facts(server: subprocess.Popen, info_file: Path) -> dict[str, str]:
    """The facts the script writes (atomically) once ready, within START_TIMEOUT."""
    end = time.monotonic() + START_TIMEOUT
    while not info_file.exists():
        if server.poll() is not None:
            raise RuntimeError(f"ssb-server.sh exited ({server.returncode}) before it was ready")
        if time.monotonic() > end:
            raise RuntimeError(f"ssb-server.sh not ready within {START_TIMEOUT} s")
        time.sleep(0.2)
    return dict(line.split("=", 1) for line in info_file.read_text().splitlines() if "=" in line)


async def read_feed(session: SsbClientSession, feed: str) -> int:
    req = await session.request(["createHistoryStream"], [{"id": feed, "limit": 1}])
    items, _ = await session.collect_stream(req, "the server's feed", READ_DEADLINE)
    return len(items)


async def check(port: int, feed: str) -> dict:
    conn = await TcpConnection.open(
        "127.0.0.1", port, WireTrace(), READ_DEADLINE, "network-change check"
    )
    session = await SsbClientSession.open(
        conn, MAIN_NETWORK_KEY, Keypair.generate(), server_public_key(feed)
    )
    before = await read_feed(session, feed)
    if before != 1:
        return {"survived": False, "detail": f"no message of the feed before the change ({before})"}
    subprocess.run(
        ["ip", "link", "add", VETH, "type", "veth", "peer", "name", VETH_PEER], check=True
    )
    for name in (VETH, VETH_PEER):
        subprocess.run(["ip", "link", "set", name, "up"], check=True)
    await asyncio.sleep(AFTER_CHANGE)
    try:
        after = await read_feed(session, feed)
    except (AssertionError, PeerClosed) as exc:
        return {"survived": False, "detail": f"after the interface change: {exc}"}
    finally:
        await conn.close()
    return {
        "survived": after == 1,
        "detail": f"after the interface change the feed read gave {after} message(s)",
    }


def main(argv: list[str]) -> int:
    if os.environ.get("SSB_NETWORK_CHANGE_IN_NAMESPACE") != "1":
        print("run me under `unshare -n` with SSB_NETWORK_CHANGE_IN_NAMESPACE=1", file=sys.stderr)
        return 2
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    port = free_loopback_port()
    info_file = Path(tempfile.mkdtemp(prefix="ssb-network-change-")) / "info"
    command = [
        str(SCRIPT),
        "--port",
        str(port),
        "--messages",
        "1",
        "--info-file",
        str(info_file),
        *argv,
    ]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, cwd=REPO_ROOT)
    try:
        facts = read_facts(server, info_file)
        result = asyncio.run(check(port, facts["SSB_ID"]))
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        subprocess.run(["ip", "link", "del", VETH], capture_output=True)
        info_file.unlink(missing_ok=True)
        info_file.parent.rmdir()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""A target that refuses everything passes no case.

Negative cases ("rejects ...", "hangs up on ...", "silent on ...", "ends on
...") want the target to say no. A node that says no to everything -- it
hangs up at once, or reads and hangs up, or never answers -- must not pass
them: each one passes only once the target has shown it accepts the valid
counterpart, in the case itself or through a prerequisite that passed. Here
such nodes are certified through the CLI, as a user would, and every case
must end blocked, failed (or, for a silent node, error / not applicable),
never passed.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from reference_impl.ssb.keys import Keypair
from ..harness.cli_runner import certify

NEGATIVE_WORDS = (
    "rejects",
    "hangs-up",
    "silent-on",
    "ends-on",
    "error-on",
    "disconnects",
    "closes-",
    "refuses",
    "ignores",
)
"""Words by which a case id says the case wants the target to say no."""

SSB_REFUSER = """
import socket, sys, threading
mode = sys.argv[1]
feed_id = sys.argv[2]
server = socket.create_server(("127.0.0.1", 0))

def refuse(conn):
    try:
        if mode == "read-then-close":
            conn.settimeout(2)
            conn.recv(4096)       # whatever the harness sends first, then no
    except OSError:
        pass
    conn.close()

print(f"SSB_READY host=127.0.0.1 port={server.getsockname()[1]} id={feed_id}", flush=True)
while True:
    conn, _ = server.accept()
    threading.Thread(target=refuse, args=(conn,), daemon=True).start()
"""

BTP_REFUSER = """
import asyncio, sys
from websockets.asyncio.server import serve
mode = sys.argv[1]

async def handler(ws):
    if mode == "close-at-once":
        await ws.close()
        return
    async for _ in ws:    # never answers the auth Message, nor anything else
        pass

async def main():
    async with serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"BTP_READY url=ws://127.0.0.1:{port}/ port={port}", flush=True)
        await asyncio.Future()

asyncio.run(main())
"""


def ssb_refuser(tmp_path: Path, mode: str) -> Path:
    script = tmp_path / "ssb_refuser.py"
    script.write_text(SSB_REFUSER)
    targets = tmp_path / "targets.toml"
    targets.write_text(
        textwrap.dedent(f"""
        [targets.refuser]
        implementation = "refuser-{mode}"
        version = "test"
        protocol = "ssb"
        roles = ["server"]
        capabilities = ["publish"]
        host = "127.0.0.1"
        port = 0
        [targets.refuser.credentials]
        secret_key_file = "{tmp_path / "secret"}"
        [targets.refuser.launch]
        server = "{{python}} {script} {mode} {Keypair.generate().feed_id}"
        ready = "SSB_READY"
        ready_timeout = 30
        outputs = {{ public_key = "id", port = "port" }}
    """)
    )
    Keypair.generate().save(tmp_path / "secret")
    return targets


def btp_refuser(tmp_path: Path, mode: str) -> Path:
    script = tmp_path / "btp_refuser.py"
    script.write_text(BTP_REFUSER)
    targets = tmp_path / "targets.toml"
    targets.write_text(
        textwrap.dedent(f"""
        [targets.refuser]
        implementation = "refuser-{mode}"
        version = "test"
        protocol = "btp"
        roles = ["server"]
        capabilities = ["balance"]
        host = "127.0.0.1"
        port = 0
        [targets.refuser.params]
        auth_timeout = 1
        [targets.refuser.credentials]
        auth_token_generate = "hex16"
        [targets.refuser.launch]
        server = "{{python}} {script} {mode}"
        ready = "BTP_READY"
        outputs = {{ url = "url", port = "port" }}
    """)
    )
    return targets


def assert_refuser_passes_nothing(run, allowed: set[str]) -> dict[str, dict]:
    assert run.code == 1, run.output
    assert "refuser [" in run.output and "NOT CONFORMANT" in run.output, run.output
    records = run.by_case("refuser")
    server_cases = {c: r for c, r in records.items() if r["role"] == "server"}
    assert len(server_cases) >= 20, f"every server case gets a result line: {sorted(server_cases)}"
    passed = sorted(c for c, r in records.items() if r["outcome"] == "passed")
    assert not passed, f"a target that refuses everything passed {passed}"
    negative = {c: r for c, r in server_cases.items() if any(word in c for word in NEGATIVE_WORDS)}
    assert len(negative) >= 8, sorted(negative)
    wrong = {
        c: (r["outcome"], r["message"][:200])
        for c, r in negative.items()
        if r["outcome"] not in allowed
    }
    assert not wrong, wrong
    return records


@pytest.mark.parametrize("mode", ["close-at-once", "read-then-close"])
def test_ssb_node_that_hangs_up_on_everything_passes_no_case(tmp_path, mode):
    run = certify(
        tmp_path,
        "--targets-file",
        str(ssb_refuser(tmp_path, mode)),
        "--target",
        "refuser",
        timeout=240,
    )
    records = assert_refuser_passes_nothing(run, {"blocked", "failed"})
    # The root cause is named: the handshake, and every negative
    # handshake case is blocked by it rather than passed or failed.
    assert records["ssb.shs.server.completes-valid-handshake"]["outcome"] == "failed"
    for case_id in (
        "ssb.shs.server.rejects-wrong-network-key",
        "ssb.shs.server.rejects-truncated-msg1",
        "ssb.shs.server.rejects-garbage-msg1",
    ):
        assert records[case_id]["outcome"] == "blocked", records[case_id]
        assert records[case_id]["message"].startswith(
            "blocked by ssb.shs.server.completes-valid-handshake"
        ), records[case_id]["message"]


def test_btp_server_that_closes_every_websocket_at_once_passes_no_case(tmp_path):
    run = certify(
        tmp_path,
        "--targets-file",
        str(btp_refuser(tmp_path, "close-at-once")),
        "--target",
        "refuser",
        timeout=240,
    )
    records = assert_refuser_passes_nothing(run, {"blocked", "failed"})
    assert records["btp.auth.server.accepts-valid-auth"]["outcome"] == "failed"
    for case_id in (
        "btp.auth.server.rejects-wrong-token",
        "btp.auth.server.disconnects-client-that-never-authenticates",
        "btp.auth.server.closes-after-auth-error",
        "btp.flow.server.silent-on-garbage",
    ):
        assert records[case_id]["outcome"] == "blocked", records[case_id]
        assert "btp.auth.server.accepts-valid-auth" in records[case_id]["message"], records[
            case_id
        ]["message"]


def test_btp_server_that_never_answers_auth_passes_no_case(tmp_path):
    # A silent node is also declared unresponsive after a few cases; a case
    # it reaches then is an error, but never a pass.
    run = certify(
        tmp_path,
        "--targets-file",
        str(btp_refuser(tmp_path, "never-answer")),
        "--target",
        "refuser",
        "--deadline",
        "1",
        timeout=240,
    )
    records = assert_refuser_passes_nothing(run, {"blocked", "failed", "error"})
    assert records["btp.auth.server.accepts-valid-auth"]["outcome"] == "failed"
    blocked = [c for c, r in records.items() if r["outcome"] == "blocked"]
    assert (
        "btp.auth.server.rejects-wrong-token" in blocked
        and "btp.flow.server.silent-on-garbage" in blocked
    )

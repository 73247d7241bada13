"""The secret-handshake MITM scenario (conformance/interop/ssb/test_shs_mitm.py,
docs/mitm.md), run as a user runs it: `conformance interop` in a subprocess.

- Every pair available: the reference node as client and server, the npm
  secret-handshake client, ssb-server as server. Every MITM case passes,
  and each trace holds the relay's record of what it could not open.
- Negative control: a server built from the project's cores that answers a
  msg3 it could not open with a msg4 anyway (and keeps going) fails exactly
  the server-side MITM cases, with the bytes it wrote; the honest client's
  cases still pass.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from conformance.interop.ssb.mitm import EndpointReport
from reference_impl.ssb import connection as connection_module
from reference_impl.ssb import shs
from reference_impl.ssb.keys import Keypair
from reference_impl.ssb.node import SsbNode

from .node_env import REPO_ROOT, requires_node_modules

CLIENT_CASES = {
    "ssb.mitm.client.aborts-on-substituted-ephemeral-key",
    "ssb.mitm.client.aborts-on-impostor-server-key",
    "ssb.mitm.client.aborts-on-replayed-server-handshake",
}
SERVER_CASES = {
    "ssb.mitm.server.aborts-on-substituted-ephemeral-key",
    "ssb.mitm.server.aborts-on-impostor-client-key",
    "ssb.mitm.server.aborts-on-replayed-client-handshake",
}
MITM_CASES = CLIENT_CASES | SERVER_CASES


def interop(run_dir: Path, *args: str, timeout: float = 400) -> tuple[int, str, list[dict]]:
    completed = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "interop", "--run-dir", str(run_dir), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
    )
    records = [
        json.loads(line)
        for line in (run_dir / "results.jsonl").read_text().splitlines()
        if line.strip()
    ]
    return completed.returncode, completed.stdout + completed.stderr, records


def mitm_records(records: list[dict], client: str, server: str) -> dict[str, dict]:
    return {
        r["case_id"]: r
        for r in records
        if r["case_id"].startswith("ssb.mitm.")
        and r["target"] == client
        and r.get("peer_implementation") == server
    }


def assert_all_pass_with_relay_record(
    run_dir: Path, records: list[dict], client: str, server: str
) -> None:
    mitm = mitm_records(records, client, server)
    assert set(mitm) == MITM_CASES, f"{client} -> {server}: {sorted(mitm)}"
    for case_id, record in mitm.items():
        assert record["outcome"] == "passed", (
            f"{client} -> {server}: {case_id}: {record['message']}"
        )
        # The impostor server key rests on a "must" of the guide, the other
        # scenarios on the profile's S1 (docs/ssb-profile.md): all MUST.
        assert record["level"] == "MUST" and record["citation"].startswith("SSB guide, Handshake")
        trace = (run_dir / "traces" / f"{client}+{server}" / f"{case_id}.txt").read_text()
        assert "relay record:" in trace and "relay could not:" in trace, trace[-2000:]
        assert "relay OPENED" not in trace, trace[-2000:]
        # The relay's forgeries are in the trace, with the bytes.
        assert "forged" in trace or "replayed" in trace


def test_reference_client_and_server_abort_every_mitm_scenario(tmp_path):
    run_dir = tmp_path / "run"
    code, output, records = interop(
        run_dir, "--client", "reference-ssb", "--server", "reference-ssb"
    )
    assert code == 0, output
    assert_all_pass_with_relay_record(run_dir, records, "reference-ssb", "reference-ssb")


@pytest.mark.node_interop
@requires_node_modules
def test_npm_client_and_ssb_server_abort_every_mitm_scenario(tmp_path):
    """secret-handshake (npm) as client of both servers, the reference
    client against ssb-server: independent code at either end."""
    run_dir = tmp_path / "run"
    code, output, records = interop(
        run_dir,
        "--client",
        "secret-handshake",
        "--client",
        "reference-ssb",
        "--server",
        "ssb-server",
        "--server",
        "reference-ssb",
    )
    assert code == 0, output
    for client, server in (
        ("secret-handshake", "reference-ssb"),
        ("secret-handshake", "ssb-server"),
        ("reference-ssb", "ssb-server"),
    ):
        assert_all_pass_with_relay_record(run_dir, records, client, server)


# ---------------------------------------------------------------- negative control


class AcceptsUnverifiedClientAuth(shs.ServerHandshake):
    """The deliberately broken endpoint: a msg3 that does not open is
    answered with a msg4 all the same (signed, boxed with the secrets the
    server has, its own key standing in for the client's unknown one), as a
    server that ignored the failed verification would."""

    def __init__(
        self,
        network_key: bytes,
        keypair: Keypair,
        ephemeral_secret: bytes | None = None,
        *args,
        **kwargs,
    ) -> None:
        self.broken_ephemeral = ephemeral_secret or shs.generate_ephemeral_secret()
        self.broken_identity = (network_key, keypair)
        super().__init__(network_key, keypair, self.broken_ephemeral, *args, **kwargs)

    def receive_data(self, data: bytes) -> bytes:
        try:
            return super().receive_data(data)
        except shs.HandshakeError as exc:
            if exc.step != "msg3":
                raise
            network_key, keypair = self.broken_identity
            client_ephemeral = self.transcript["msg1"][32:]
            return shs.server_accept(
                network_key=network_key,
                server_keypair=keypair,
                detached_signature_A=bytes(64),
                client_public=keypair.public,
                shared_secret_ab=shs.shared_secret_ab(self.broken_ephemeral, client_ephemeral),
                shared_secret_aB=shs.server_shared_secret_aB(keypair, client_ephemeral),
                shared_secret_Ab=shs.server_shared_secret_Ab(self.broken_ephemeral, keypair.public),
            )


@contextmanager
def broken_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SsbNode, int]]:
    """A reference node whose server handshake is the broken one, serving
    from a thread of this process (the harness and client are subprocesses)."""
    monkeypatch.setattr(connection_module, "ServerHandshake", AcceptsUnverifiedClientAuth)
    node = SsbNode(Keypair.generate())
    for number in range(3):
        node.publish({"type": "post", "text": f"message {number + 1} of the broken server"})
    loop = asyncio.new_event_loop()
    _, port = loop.run_until_complete(node.start("127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield node, port
    finally:
        asyncio.run_coroutine_threadsafe(node.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_server_that_ignores_a_failed_msg3_fails_the_server_mitm_cases(tmp_path, monkeypatch):
    with broken_server(monkeypatch) as (node, port):
        targets = tmp_path / "targets.toml"
        targets.write_text(f"""
[targets.broken-shs-server]
implementation = "broken-shs-server"
version = "0"
protocol = "ssb"
roles = ["server"]
host = "127.0.0.1"
port = {port}

[targets.broken-shs-server.params]
public_key = "{node.feed_id}"
""")
        run_dir = tmp_path / "run"
        code, output, records = interop(
            run_dir,
            "--targets-file",
            str(targets),
            "--client",
            "reference-ssb",
            "--server",
            "broken-shs-server",
        )
    assert code == 1, output
    by_case = {r["case_id"]: r for r in records}
    # The honest session works: the MITM verdicts are about the MITM.
    assert by_case["ssb.interop.client.replicates-peer-feed"]["outcome"] == "passed", output
    for case_id in SERVER_CASES:
        record = by_case[case_id]
        assert record["outcome"] == "failed", (case_id, record)
        assert "the server wrote 80 byte(s) past msg2 instead of hanging up" in record["message"], (
            record
        )
        assert (
            case_id in record["message"]
            and "[MUST (profile), SSB guide, Handshake" in record["message"]
        )
    for case_id in CLIENT_CASES:
        assert by_case[case_id]["outcome"] == "passed", (case_id, by_case[case_id])


def test_endpoint_report_names_each_way_of_not_aborting():
    """The checks behind the cases, one by one (the control above shows one
    of them failing end to end)."""
    clean = EndpointReport("client", "msg3", provocation="a forged msg4", closed=True, exit_code=3)
    assert clean.problems(3.0) == [] and clean.verdict(3.0) is None
    wrote = EndpointReport(
        "server", "msg2", provocation="a relayed msg3", wrote=b"\x01" * 80, closed=True
    )
    [problem] = wrote.problems(3.0)
    assert problem.startswith("wrote 80 byte(s) past msg2 instead of hanging up: 0101")
    assert wrote.verdict(3.0).startswith(
        "after a relayed msg3, the server wrote 80 byte(s) past msg2"
    )
    open_ = EndpointReport("server", "msg2", provocation="a relayed msg3", closed=False)
    assert open_.problems(3.0) == ["kept the connection open for 3 s without closing it"]
    success = EndpointReport("client", "msg3", provocation="x", closed=True, exit_code=0)
    assert "exited 0" in success.problems(3.0)[0]
    opened = EndpointReport(
        "client", "msg3", provocation="x", closed=True, exit_code=1, opened=["the client's msg3"]
    )
    assert opened.problems(3.0) == ["let the relay open the client's msg3"]

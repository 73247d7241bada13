"""The machinery of the STOMP server-role suite (conformance/suites/stomp:
peer.py, preflight.py, conftest.py and the tls/connect/frame/send/manifest
cases): the peer's verdicts on scripted servers, the preflight and the
per-run PKI. That the conformant reference node passes every case and that
each fault makes exactly its own cases fail, end to end, is
tests/mutation/test_mutation.py's."""

from __future__ import annotations

import asyncio
import importlib
import re
import ssl
import textwrap
from pathlib import Path

import pytest

from conformance.core.pki import harness_server_context, run_pki
from conformance.core.targets import TargetRuntime, load_targets_file
from conformance.core.node_grammar import NodeGrammarViolation
from conformance.core.transport import DeadlineExceeded, ProtocolViolation, TcpConnection, WireTrace
from conformance.suites.stomp import preflight as stomp_preflight
from conformance.suites.stomp.prerequisites import SERVER_GRAMMAR
from conformance.suites.stomp.peer import (
    MAX_FRAME_BYTES,
    StompPeer,
    client_context,
    settings_of,
    tls_files,
)
from reference_impl.stomp.faults import SPECS

SUITE = Path(__file__).resolve().parents[2] / "conformance" / "suites" / "stomp"
OWN_FILES = (
    "test_tls_server.py",
    "test_connect_server.py",
    "test_frame_server.py",
    "test_send_server.py",
    "test_manifest_server.py",
)


def own_case_ids() -> list[str]:
    ids = []
    # Case ids named by a constant of the file, or of prerequisites.py (the
    # grammar case's, which the peer names too).
    shared = (SUITE / "prerequisites.py").read_text(encoding="utf-8")
    for name in OWN_FILES:
        text = (SUITE / name).read_text(encoding="utf-8")
        ids += re.findall(r"@requirement\(\s*\"([^\"]+)\"", text)
        constants = dict(
            re.findall(r"^([A-Z_][A-Z0-9_]*) = \"([^\"]+)\"$", shared + "\n" + text, re.MULTILINE)
        )
        ids += [
            constants[n]
            for n in re.findall(r"@requirement\(\s*([A-Z_][A-Z0-9_]*)\s*,", text)
            if n in constants
        ]
    return ids


def registered_case_ids(names: tuple[str, ...]) -> list[str]:
    """The case ids the suite's modules register: their requirement markers."""
    ids = []
    for name in names:
        module = importlib.import_module(f"conformance.suites.stomp.{name.removesuffix('.py')}")
        for obj in vars(module).values():
            ids += [
                mark.args[0]
                for mark in getattr(obj, "pytestmark", [])
                if mark.name == "requirement"
            ]
    return ids


def test_every_case_is_caught_by_a_fault_of_the_reference_server():
    """Each case must be shown to fail for a server with the matching
    defect: the registry names a server fault for it. The cases are those
    the suite's files register (no fixed count: a new case comes with its
    fault), and every case a server fault names is one of the suite's."""
    caught = {case for spec in SPECS if spec.role == "server" for case in spec.cases}
    ids = own_case_ids()
    assert ids and len(ids) == len(set(ids)), ids
    assert sorted(ids) == sorted(registered_case_ids(OWN_FILES))
    assert all(".server." in case for case in ids), ids
    assert sorted(set(ids) - caught) == []
    assert sorted(caught - set(registered_case_ids(OWN_FILES + ("test_receipt_server.py",)))) == []


# -- preflight and prepare -------------------------------------------------------------------


def runtime_of(toml: str, tmp_path: Path) -> TargetRuntime:
    (target,) = load_targets_file("t.toml", textwrap.dedent(toml)).values()
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return TargetRuntime(target, work, tmp_path)


LAUNCHED = """
    [targets.t]
    implementation = "x"
    protocol = "stomp"
    roles = ["server"]
    [targets.t.launch]
    server = "node --cert {server_cert_file} --ca {ca_file}"
"""
EXTERNAL = """
    [targets.t]
    implementation = "x"
    protocol = "stomp"
    roles = ["server"]
    host = "127.0.0.1"
    port = 1234
"""


def test_prepare_puts_the_run_pki_into_the_params(tmp_path):
    runtime = runtime_of(LAUNCHED, tmp_path)
    stomp_preflight.prepare(runtime)
    pki = run_pki()
    assert runtime.params["ca_file"] == str(pki.ca_file)
    assert runtime.params["server_key_file"] == str(pki.server_key_file)
    assert stomp_preflight.preflight(runtime, serving=True) == []
    files = tls_files(runtime)
    assert (files.cert_file, files.key_file) == (
        str(pki.client_cert_file),
        str(pki.client_key_file),
    )


def test_prepare_keeps_what_the_target_gives(tmp_path):
    cert, key = run_pki().cert_pair("client")
    runtime = runtime_of(
        EXTERNAL
        + f"""
    [targets.t.params]
    ca_file = "{run_pki().ca_file}"
    [targets.t.credentials]
    client_cert_file = "{cert}"
    client_key_file = "{key}"
    """,
        tmp_path,
    )
    stomp_preflight.prepare(runtime)
    assert "client_cert_file" not in runtime.params and "client_key_file" not in runtime.params
    assert runtime.params["ca_file"] == str(run_pki().ca_file)
    assert stomp_preflight.preflight(runtime, serving=True) == []


def test_preflight_names_what_an_external_target_lacks(tmp_path):
    runtime = runtime_of(
        EXTERNAL
        + """
    [targets.t.params]
    idle_seconds = -1
    manifest_file = "/nonexistent/stomp.toml"
    """,
        tmp_path,
    )
    stomp_preflight.prepare(runtime)
    problems = " | ".join(stomp_preflight.preflight(runtime, serving=True))
    for words in (
        "params.ca_file is missing",
        "credential client_cert_file",
        "credential client_key_file",
        "idle_seconds must be a positive number",
        "manifest_file /nonexistent/stomp.toml is not a file",
    ):
        assert words in problems, problems


def test_preflight_refuses_files_that_do_not_load(tmp_path):
    bad = tmp_path / "not-a-cert.pem"
    bad.write_text("not a certificate")
    runtime = runtime_of(
        EXTERNAL
        + f"""
    [targets.t.params]
    ca_file = "{bad}"
    [targets.t.credentials]
    client_cert_file = "{bad}"
    client_key_file = "{bad}"
    """,
        tmp_path,
    )
    problems = stomp_preflight.preflight(runtime, serving=True)
    assert len(problems) == 1 and "cannot load the harness's TLS files" in problems[0], problems
    assert "not a certificate" not in problems[0]


def test_settings_defaults_and_params(tmp_path):
    runtime = runtime_of(
        EXTERNAL
        + """
    [targets.t.params]
    stomp_host = "/vhost"
    login = "me"
    """,
        tmp_path,
    )
    settings = settings_of(runtime)
    assert settings.destination == "/exchange/smp" and settings.host_header == "/vhost"
    headers = dict(settings.connect_headers(runtime, heart_beat=(1, 2)))
    assert headers == {
        "accept-version": "1.2",
        "host": "/vhost",
        "login": "me",
        "heart-beat": "1,2",
    }
    assert "login" not in dict(settings.connect_headers(runtime, login=False))


# -- the peer's verdicts, against scripted TLS servers --------------------------------------


async def scripted(script, *, require_client_cert: bool = True):
    """A TLS server on loopback running ``script(reader, writer)`` for each
    connection; returns (server, port)."""
    context = harness_server_context(
        run_pki(), minimum=ssl.TLSVersion.TLSv1_3, require_client_cert=require_client_cert
    )

    async def handle(reader, writer):
        try:
            await script(reader, writer)
        except (ConnectionError, ssl.SSLError, OSError):
            pass

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    return server, server.sockets[0].getsockname()[1]


async def peer_to(port: int, *, cert: bool = True, deadline: float = 1.0) -> StompPeer:
    pki = run_pki()
    pair = (str(pki.client_cert_file), str(pki.client_key_file)) if cert else None
    conn = await TcpConnection.open(
        "127.0.0.1", port, WireTrace(), deadline, ssl=client_context(str(pki.ca_file), pair)
    )
    return StompPeer(conn)


async def read_frame(reader) -> bytes:
    return await reader.readuntil(b"\x00")


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_error_then_close_is_accepted():
    async def script(reader, writer):
        await read_frame(reader)
        writer.write(b"ERROR\nmessage:no\n\n\x00\n")
        await writer.drain()
        writer.close()

    async def main():
        server, port = await scripted(script)
        async with server:
            peer = await peer_to(port)
            await peer.send_raw(b"SEND\n\n\x00", "a SEND")
            frame = await peer.await_error_then_close("a SEND")
            assert frame.command == "ERROR" and frame.get("message") == "no"

    run(main())


def test_error_without_close_fails_naming_the_rule():
    async def script(reader, writer):
        await read_frame(reader)
        writer.write(b"ERROR\nmessage:no\n\n\x00")
        await writer.drain()
        await asyncio.sleep(5)

    async def main():
        server, port = await scripted(script)
        async with server:
            peer = await peer_to(port, deadline=0.5)
            await peer.send_raw(b"SEND\n\n\x00", "a SEND")
            with pytest.raises(AssertionError, match="kept the connection open"):
                await peer.await_error_then_close("a SEND")

    run(main())


def test_close_without_error_fails():
    async def script(reader, writer):
        await read_frame(reader)
        writer.close()

    async def main():
        server, port = await scripted(script)
        async with server:
            peer = await peer_to(port)
            await peer.send_raw(b"SEND\n\n\x00", "a SEND")
            with pytest.raises(AssertionError, match="without sending an ERROR frame"):
                await peer.await_error_then_close("a SEND")

    run(main())


def test_frames_after_error_fail():
    async def script(reader, writer):
        await read_frame(reader)
        writer.write(b"ERROR\n\n\x00\n\nRECEIPT\nreceipt-id:late\n\n\x00")
        await writer.drain()
        writer.close()

    async def main():
        server, port = await scripted(script)
        async with server:
            peer = await peer_to(port)
            await peer.send_raw(b"SEND\n\n\x00", "a SEND")
            with pytest.raises(
                AssertionError, match="sent more instead of closing.*receipt-id:late"
            ):
                await peer.await_error_then_close("a SEND")

    run(main())


def test_malformed_frame_from_the_target_is_a_violation_with_its_bytes():
    async def script(reader, writer):
        await read_frame(reader)
        writer.write(b"RECEIPT\nno colon here\n\n\x00")
        await writer.drain()
        await asyncio.sleep(2)

    async def main():
        server, port = await scripted(script)
        async with server:
            peer = await peer_to(port)
            await peer.send_raw(b"SEND\n\n\x00", "a SEND")
            with pytest.raises(NodeGrammarViolation, match="frame grammar.*no colon") as info:
                await peer.next_frame("a RECEIPT")
            assert b"RECEIPT".hex() in str(info.value)
            # The grammar case's rule, with where the frame starts.
            assert info.value.grammar_case == SERVER_GRAMMAR
            assert info.value.record.offset == 0

    run(main())


def test_a_flood_without_nul_is_refused_at_the_bound():
    async def script(reader, writer):
        await read_frame(reader)
        writer.write(b"ERROR\n\n")
        for _ in range(MAX_FRAME_BYTES // 65536 + 2):
            writer.write(b"x" * 65536)
            await writer.drain()
        await asyncio.sleep(2)

    async def main():
        server, port = await scripted(script)
        async with server:
            peer = await peer_to(port, deadline=5.0)
            await peer.send_raw(b"SEND\n\n\x00", "a SEND")
            with pytest.raises(ProtocolViolation, match="limit") as info:
                await peer.next_frame("an answer")
            # A bound of the harness's, not the grammar: the case that read it fails.
            assert not isinstance(info.value, NodeGrammarViolation)

    run(main())


def test_silence_is_a_deadline_with_what_was_awaited():
    async def script(reader, writer):
        await asyncio.sleep(3)

    async def main():
        server, port = await scripted(script)
        async with server:
            peer = await peer_to(port, deadline=0.3)
            with pytest.raises(DeadlineExceeded, match="no the CONNECTED frame within"):
                await peer.next_frame("the CONNECTED frame")

    run(main())


def test_tls13_refusal_of_a_client_without_certificate_shows_on_the_first_read():
    """The scripted server requires a certificate; the client's TLS 1.3
    handshake completes without one and the refusal comes as an alert or a
    close on the first read: next_or_close says closed (None), not a hang."""

    async def script(reader, writer):
        await reader.read(100)

    async def main():
        server, port = await scripted(script)
        async with server:
            peer = await peer_to(port, cert=False)
            await peer.conn.send_quietly(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
            assert await peer.next_or_close("CONNECTED") is None
            assert peer.conn.tls_alert is None or "CERTIFICATE" in peer.conn.tls_alert.upper()

    run(main())


def test_heart_beats_are_counted_and_gaps_measured():
    async def script(reader, writer):
        await read_frame(reader)
        writer.write(b"CONNECTED\nversion:1.2\nheart-beat:100,0\n\n\x00")
        for _ in range(5):
            await asyncio.sleep(0.1)
            writer.write(b"\n")
            await writer.drain()
        writer.write(b"RECEIPT\nreceipt-id:x\n\n\x00")
        await writer.drain()
        await asyncio.sleep(1)

    async def main():
        server, port = await scripted(script)
        async with server:
            peer = await peer_to(port)
            await peer.connect((("accept-version", "1.2"), ("host", "/")))
            start = peer.arrivals[-1]
            frame = await peer.next_frame("a RECEIPT")
            assert frame.get("receipt-id") == "x" and peer.heartbeats == 5
            gaps = peer.gaps(start, peer.arrivals[-1])
            assert len(gaps) >= 5 and max(gaps) < 0.5

    run(main())

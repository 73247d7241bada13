"""The Ripple host node over TCP: the acceptor in-process against raw sockets,
the initiator against it, TLS, and the command line end to end."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from reference_impl.ripplehost.frame import (
    MessageReader,
    encode_frame,
    encode_message,
    message_frames,
)
from reference_impl.ripplehost.node import (
    Outgoing,
    RippleNode,
    answer_for,
    client_tls_context,
    parse_outgoing,
    run_initiator,
    server_tls_context,
)

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 10.0
HOST_ID = {"type": "host-id", "hostname": "a.example"}


def quiet(_kind, _payload) -> None:
    pass


async def read_messages(reader: asyncio.StreamReader, count: int):
    """``count`` complete messages, then whether the peer closed (with a deadline)."""
    decoder = MessageReader()
    got = []
    while len(got) < count:
        data = await asyncio.wait_for(reader.read(65536), DEADLINE)
        if not data:
            break
        got += decoder.receive_data(data)
    return got


async def closed_without_bytes(reader: asyncio.StreamReader) -> bytes:
    """Everything the peer still sends until it closes (bounded by DEADLINE)."""
    data = b""
    while True:
        chunk = await asyncio.wait_for(reader.read(65536), DEADLINE)
        if not chunk:
            return data
        data += chunk


async def with_node(test, **options):
    node = RippleNode("b.example", emit=quiet, **options)
    host, port = await node.start("127.0.0.1", 0)
    try:
        await test(host, port)
    finally:
        await node.close()


async def open_identified(host, port):
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(encode_message("MSG", 0, HOST_ID))
    [reply] = await read_messages(reader, 1)
    assert (reply.type, reply.msgno, reply.body) == (
        "RPY",
        0,
        {"type": "host-id", "hostname": "b.example"},
    )
    return reader, writer


def test_answer_for_the_service_table():
    assert answer_for({"type": "ping"}).body == {"type": "pong"}
    assert answer_for({"type": "echo", "x": 1}).body == {"type": "echo", "x": 1}
    assert answer_for({"type": "echo", "chunk": 3}).chunk_size == 3
    assert answer_for({"type": "echo", "chunk": 0}).error
    assert answer_for({"type": "hold", "seconds": 2}).delay == 2.0
    assert answer_for({"type": "hold", "seconds": 31}).error
    assert answer_for({"type": "ping-me", "count": 2}).pings == 2
    unknown = answer_for({"type": "teleport"})
    assert (
        unknown.error
        and unknown.body["error"] == "unknown-type"
        and unknown.body["message-type"] == "teleport"
    )


def test_parse_outgoing():
    items = parse_outgoing(
        [
            {"type": "ping"},
            {"body": {"type": "echo"}, "to_user": "a", "from_user": "b", "chunk_size": 4},
        ]
    )
    assert items == [Outgoing({"type": "ping"}), Outgoing({"type": "echo"}, "a", "b", 4)]
    for bad in (
        {},
        [1],
        [{"body": {}}],
        [{"body": {"type": "x"}, "to_user": "a"}],
        [{"body": {"type": "x"}, "oops": 1}],
    ):
        with pytest.raises(ValueError):
            parse_outgoing(bad)


def test_acceptor_serves_ping_echo_chunked_and_interleaved():
    async def test(host, port):
        reader, writer = await open_identified(host, port)
        big = {"type": "echo", "text": "y" * 3000, "chunk": 700}
        chunks = message_frames("MSG", 2, big, chunk_size=500)
        assert len(chunks) > 2
        writer.write(b"".join(encode_frame(f) for f in chunks[:-1]))  # MSG 2 incomplete
        writer.write(encode_message("MSG", 4, {"type": "ping"}, to_user="bob", from_user="alice"))
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(encode_frame(chunks[-1]))
        answers = {m.msgno: m for m in await read_messages(reader, 2)}
        assert answers[4].body == {"type": "pong"} and (
            answers[4].to_user,
            answers[4].from_user,
        ) == ("alice", "bob")
        assert answers[2].body == big and answers[2].frames > 1
        writer.close()

    asyncio.run(with_node(test))


@pytest.mark.parametrize(
    "bad",
    [
        b'MSG 1.0 2 . 15\r\n{"type":"ping"}XYZ\r\n',  # missing END
        b'MSG 1.0 2 . 14\r\n{"type":"ping"}END\r\n',  # wrong size
        b"MSG 1.0 02 . 15\r\n",  # malformed header
        b'RPY 1.0 7 . 15\r\n{"type":"pong"}END\r\n',  # reply to an unknown msgno
        b'MSG 1.0 3 . 15\r\n{"type":"ping"}END\r\n',  # the acceptor's own parity
    ],
)
def test_acceptor_closes_at_once_without_answering(bad):
    async def test(host, port):
        reader, writer = await open_identified(host, port)
        writer.write(bad)
        assert await closed_without_bytes(reader) == b""
        writer.close()

    asyncio.run(with_node(test))


def test_acceptor_closes_on_reused_outstanding_msgno():
    async def test(host, port):
        reader, writer = await open_identified(host, port)
        writer.write(encode_message("MSG", 2, {"type": "hold", "seconds": 5}))
        writer.write(encode_message("MSG", 2, {"type": "ping"}))
        assert await closed_without_bytes(reader) == b""
        writer.close()

    asyncio.run(with_node(test))


def test_acceptor_ping_me_uses_odd_msgnos_and_hold_answers_later():
    async def test(host, port):
        reader, writer = await open_identified(host, port)
        writer.write(encode_message("MSG", 2, {"type": "hold", "seconds": 0.3}))
        writer.write(encode_message("MSG", 4, {"type": "ping-me", "count": 2}))
        got = await read_messages(reader, 3)
        assert [(m.type, m.msgno) for m in got] == [("RPY", 4), ("MSG", 1), ("MSG", 3)]
        writer.write(
            encode_message("RPY", 1, {"type": "pong"}) + encode_message("RPY", 3, {"type": "pong"})
        )
        [held] = await read_messages(reader, 1)
        assert (held.type, held.msgno, held.body) == ("RPY", 2, {"type": "held"})
        writer.close()

    asyncio.run(with_node(test))


def test_acceptor_without_host_id_in_time_closes():
    async def test(host, port):
        reader, writer = await asyncio.open_connection(host, port)
        assert await closed_without_bytes(reader) == b""
        writer.close()

    asyncio.run(with_node(test, host_id_timeout=0.3))


def test_initiator_against_acceptor():
    async def test(host, port):
        lines = []
        result = await run_initiator(
            host,
            port,
            "a.example",
            [
                Outgoing({"type": "ping"}),
                Outgoing({"type": "echo", "x": "z" * 100}, chunk_size=9),
                Outgoing({"type": "ping-me", "count": 1}),
            ],
            timeout=DEADLINE,
            stay=0.3,
            emit=lambda kind, payload: lines.append(kind),
        )
        assert (
            result.peer_hostname == "b.example"
            and result.close_reason == "done"
            and not result.timed_out
        )
        assert sorted(a.message.msgno for a in result.answers) == [2, 4, 6]
        assert "MSG" in lines  # the acceptor's ping, answered during --stay

    asyncio.run(with_node(test))


def test_tls(tmp_path):
    from conformance.core.pki import make_pki

    pki = make_pki(tmp_path / "pki")

    async def test(host, port):
        result = await run_initiator(
            host,
            port,
            "a.example",
            [Outgoing({"type": "ping"})],
            timeout=DEADLINE,
            ssl_context=client_tls_context(str(pki.ca_file)),
            emit=quiet,
        )
        assert [a.message.body for a in result.answers] == [{"type": "pong"}]

    asyncio.run(
        with_node(
            test,
            ssl_context=server_tls_context(str(pki.server_cert_file), str(pki.server_key_file)),
        )
    )


def test_command_line_serve_and_connect(tmp_path):
    send = tmp_path / "send.json"
    send.write_text(
        json.dumps([{"type": "ping"}, {"body": {"type": "echo", "n": 1}, "chunk_size": 4}])
    )
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reference_impl.ripplehost",
            "serve",
            "--hostname",
            "b.example",
            "--port",
            "0",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = server.stdout.readline()
        assert line.startswith("RIPPLE_READY port=")
        port = line.split()[1].split("=")[1]
        client = subprocess.run(
            [
                sys.executable,
                "-m",
                "reference_impl.ripplehost",
                "connect",
                "--peer-host",
                "127.0.0.1",
                "--peer-port",
                port,
                "--hostname",
                "a.example",
                "--send",
                str(send),
                "--timeout",
                "10",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert client.returncode == 0, client.stderr
        answers = [
            json.loads(line.split(" ", 1)[1])
            for line in client.stdout.splitlines()
            if line.startswith("RIPPLE_ANSWER")
        ]
        assert [a["body"] for a in answers] == [{"type": "pong"}, {"type": "echo", "n": 1}]
        unknown = tmp_path / "unknown.json"
        unknown.write_text(json.dumps([{"type": "nope"}]))
        client = subprocess.run(
            [
                sys.executable,
                "-m",
                "reference_impl.ripplehost",
                "connect",
                "--peer-host",
                "127.0.0.1",
                "--peer-port",
                port,
                "--hostname",
                "a.example",
                "--send",
                str(unknown),
                "--timeout",
                "10",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert client.returncode == 6, client.stderr
    finally:
        server.terminate()
        server.wait(timeout=10)

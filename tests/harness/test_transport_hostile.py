"""Transports and protocol readers against hostile peers, in process: every
read is bounded in bytes and time, deadlines are absolute per expected
message, traces keep a bounded prefix and count the rest, and bad bytes are
a ProtocolViolation (an AssertionError: a failure, never an error)."""

from __future__ import annotations

import asyncio
import os
import time
import tracemalloc

import pytest
from websockets.asyncio.server import serve

from conformance.core.redact import Redactor
from conformance.core.transport import (
    MAX_BYTES_WHILE_AWAITING_CLOSE,
    Deadline,
    DeadlineExceeded,
    PeerClosed,
    ProtocolViolation,
    TcpConnection,
    WireTrace,
    target_bytes,
)
from conformance.core.websocket import MAX_MESSAGE_SIZE, WebSocketConnection
from conformance.suites.btp.peer import MAX_PACKET_SIZE, BtpPeer
from conformance.suites.ssb.session import MAX_RPC_BODY, SsbClientSession, TargetRpcMessage
from reference_impl.ssb import boxstream
from reference_impl.ssb.boxstream import BoxStreamEncoder, BoxStreamError
from reference_impl.ssb.rpc import RpcError, RpcMessage, encode_header
from reference_impl.ssb.shs import BoxStreamParams
from tests.hostile.fake_targets import reset, ws_frame

FLOOD_CHUNK = os.urandom(65536)


async def start_tcp(handler):
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def flood_writer(reader, writer):
    try:
        while True:
            writer.write(FLOOD_CHUNK)
            await writer.drain()
    except (ConnectionError, OSError):
        pass


# ------------------------------------------------------------------ traces


def test_trace_keeps_a_bounded_prefix_per_direction_and_counts_the_rest():
    trace = WireTrace(limit=1000)
    trace.record("sent", b"s" * 300, "request")
    for _ in range(50):
        trace.record("received", b"r" * 700)
    assert trace.kept_bytes == {"sent": 300, "received": 1000}
    assert trace.dropped_bytes == {"received": 50 * 700 - 1000}
    assert trace.total("received") == 35000
    text = trace.render()
    assert "first 300 of 700 bytes kept" in text
    assert (
        "(34000 further bytes not kept, target -> harness: the trace keeps the first 1000 bytes per direction; "
        "35000 bytes in all)" in text
    )


def test_trace_bounds_entries_of_a_trickling_target():
    trace = WireTrace(max_entries=100)
    for _ in range(1000):
        trace.record("received", b"x")
        trace.event("note")
    assert len(trace.entries) == 100 and trace.dropped_entries == 1900
    assert "(1900 further entries not kept" in trace.render()


def test_secret_across_the_cut_stays_masked():
    token = b"very-secret-token"
    trace = WireTrace(limit=20, redactor=Redactor([token]))
    trace.record("sent", b"0123456789" + token)  # the cut falls inside the token
    text = trace.render()
    assert "very-sec" not in text and "76 65 72 79" not in text
    assert "** **" in text


# ------------------------------------------------------------------ TCP


async def test_flood_while_awaiting_close_is_bounded_in_time_bytes_and_memory():
    server, port = await start_tcp(flood_writer)
    async with server:
        trace = WireTrace()
        conn = await TcpConnection.open("127.0.0.1", port, trace, deadline=2.0)
        tracemalloc.start()
        started = time.monotonic()
        closed, data = await conn.await_close()
        elapsed = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        conn.abort()
    assert not closed and len(data) == MAX_BYTES_WHILE_AWAITING_CLOSE
    assert elapsed < 2.5
    assert trace.kept_bytes["received"] <= trace.limit and trace.dropped_bytes["received"] > 0
    assert peak < 8 * MAX_BYTES_WHILE_AWAITING_CLOSE, f"peak {peak} bytes"
    assert "harness stops reading" in trace.render()


async def test_trickle_cannot_extend_the_deadline_of_a_message():
    async def slowloris(reader, writer):
        try:
            while True:
                writer.write(b"\x01")
                await writer.drain()
                await asyncio.sleep(0.1)
        except (ConnectionError, OSError):
            pass

    server, port = await start_tcp(slowloris)
    async with server:
        conn = await TcpConnection.open("127.0.0.1", port, WireTrace(), deadline=0.6)
        started = time.monotonic()
        with pytest.raises(
            DeadlineExceeded, match=r"no msg2 within 0.6 s: received [4-7] of 64 bytes \(0101"
        ):
            await conn.receive_exactly(64, "msg2")
        assert time.monotonic() - started < 0.9
        conn.abort()


async def test_a_loop_of_reads_sharing_one_deadline_ends_with_it():
    async def slowloris(reader, writer):
        try:
            while True:
                writer.write(b"\x02")
                await writer.drain()
                await asyncio.sleep(0.1)
        except (ConnectionError, OSError):
            pass

    server, port = await start_tcp(slowloris)
    async with server:
        conn = await TcpConnection.open("127.0.0.1", port, WireTrace(), deadline=5.0)
        window = Deadline(0.5)
        started = time.monotonic()
        got = b""
        with pytest.raises(DeadlineExceeded, match="target sent nothing within 0.5 s"):
            while True:
                got += await conn.receive_some(window)
        assert time.monotonic() - started < 0.8 and 3 <= len(got) <= 7
        conn.abort()


async def test_send_to_a_target_that_reset_is_a_failure_not_an_error():
    async def resetter(reader, writer):
        await reader.read(1)
        reset(writer)

    server, port = await start_tcp(resetter)
    async with server:
        conn = await TcpConnection.open("127.0.0.1", port, WireTrace(), deadline=1.0)
        await conn.send(b"x", "first byte")
        await asyncio.sleep(0.2)
        with pytest.raises(
            PeerClosed, match="closed or reset the connection while the harness sent"
        ):
            for _ in range(50):  # the reset shows on a write after it arrived
                await conn.send(b"y" * 65536, "more")
                await asyncio.sleep(0.01)
        assert await conn.send_quietly(b"z") is False
        conn.abort()


def test_decode_errors_of_target_bytes_become_violations_of_the_same_type():
    with pytest.raises(ProtocolViolation) as caught:
        with target_bytes("reading the target's box", b"\xde\xad\xbe\xef", BoxStreamError):
            raise BoxStreamError("header authentication failed")
    violation = caught.value
    assert isinstance(violation, AssertionError) and isinstance(violation, BoxStreamError)
    assert violation.reason == "header authentication failed"
    assert (
        str(violation) == "reading the target's box (header authentication failed); bytes: deadbeef"
    )
    with pytest.raises(ValueError):  # errors not listed are the harness's own: not converted
        with target_bytes("x", b"", BoxStreamError):
            raise ValueError("harness bug")


# ------------------------------------------------------------------ SSB session


def session_pair(conn: TcpConnection) -> tuple[SsbClientSession, BoxStreamEncoder]:
    """A harness session and the encoder of the fake server opposite it (no handshake: fixed keys)."""
    k1, k2, n1, n2 = (os.urandom(32), os.urandom(32), os.urandom(24), os.urandom(24))
    params = BoxStreamParams(
        encrypt_key=k1,
        encrypt_nonce=n1,
        decrypt_key=k2,
        decrypt_nonce=n2,
        peer_public=os.urandom(32),
    )
    return SsbClientSession(conn, params), BoxStreamEncoder(k2, n2)


async def with_ssb_server(script, check):
    """``script(writer, encoder)`` plays the target; ``check(session)`` the harness."""
    holder = {}

    async def handler(reader, writer):
        await holder["ready"].wait()
        try:
            await script(writer, holder["encoder"])
        except (ConnectionError, OSError):
            pass

    holder["ready"] = asyncio.Event()
    server, port = await start_tcp(handler)
    async with server:
        conn = await TcpConnection.open("127.0.0.1", port, WireTrace(), deadline=0.6)
        session, holder["encoder"] = session_pair(conn)
        holder["ready"].set()
        try:
            await check(session)
        finally:
            conn.abort()


async def test_ssb_messages_on_other_requests_cannot_extend_a_deadline():
    async def chatter(writer, encoder):
        n = 0
        while True:
            n += 1
            writer.write(encoder.encode(RpcMessage.from_json(-7, {"n": n}, stream=True).encode()))
            await writer.drain()
            await asyncio.sleep(0.05)

    async def check(session):
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded, match="no the answer within 0.6 s"):
            await session.next_message(1, "the answer")
        assert time.monotonic() - started < 0.9
        assert 5 <= len(session.inbox) <= 20

    await with_ssb_server(chatter, check)


async def test_ssb_endless_stream_ends_at_its_deadline():
    async def endless(writer, encoder):
        n = 0
        while True:
            n += 1
            writer.write(encoder.encode(RpcMessage.from_json(-1, {"n": n}, stream=True).encode()))
            await writer.drain()
            await asyncio.sleep(0.01)

    async def check(session):
        started = time.monotonic()
        with pytest.raises(
            DeadlineExceeded, match=r"the stream of the feed did not end within 0.6 s: \d+ items"
        ):
            await session.collect_stream(1, "the feed")
        assert time.monotonic() - started < 0.9

    await with_ssb_server(endless, check)


async def test_ssb_rpc_header_declaring_4_gib_is_a_violation_showing_the_header():
    async def huge(writer, encoder):
        writer.write(encoder.encode(encode_header(0x0A, 0xFFFFFFFF, -1) + b"{"))
        await writer.drain()
        await asyncio.sleep(5)

    async def check(session):
        started = time.monotonic()
        with pytest.raises(
            ProtocolViolation,
            match=rf"body length exceeds limit: 4294967295 > {MAX_RPC_BODY}\)"
            r"; bytes: 0affffffffffffffff7b",
        ):
            await session.next_message(1, "the answer")
        assert time.monotonic() - started < 0.3

    await with_ssb_server(huge, check)


async def test_ssb_box_header_declaring_more_than_4096_is_a_violation():
    async def huge(writer, encoder):
        header, body = boxstream.seal_box(encoder._key, encoder.nonce, bytes(5000))
        writer.write(header + body[:100])
        await writer.drain()
        await asyncio.sleep(5)

    async def check(session):
        with pytest.raises(
            ProtocolViolation, match="box stream does not decrypt .*body length exceeds 4096"
        ):
            await session.next_message(1, "the answer")
        # Once failed, the stream fails the same way (not with a RuntimeError of the decoder).
        with pytest.raises(ProtocolViolation):
            session.decoder.receive_data(b"more")

    await with_ssb_server(huge, check)


async def test_ssb_valid_message_then_garbage_delivers_the_message_then_fails():
    async def valid_then_garbage(writer, encoder):
        writer.write(
            encoder.encode(RpcMessage.from_json(-1, {"ok": True}).encode()) + os.urandom(200)
        )
        await writer.drain()
        await asyncio.sleep(5)

    async def check(session):
        msg = await session.next_message(1, "the answer")
        assert msg.json() == {"ok": True}
        with pytest.raises(ProtocolViolation, match="header authentication failed"):
            await session.next_message(2, "the next answer")

    await with_ssb_server(valid_then_garbage, check)


def test_ssb_body_that_is_not_json_is_a_violation_and_still_an_rpc_error():
    msg = TargetRpcMessage(-1, False, False, 2, b"{not json")
    with pytest.raises(
        ProtocolViolation, match=r"not valid JSON .*; bytes: 7b6e6f74206a736f6e"
    ) as caught:
        msg.json()
    assert isinstance(caught.value, RpcError)


# ------------------------------------------------------------------ WebSocket / BTP


async def ws_server(script):
    async def handler(ws):
        try:
            await script(ws)
        except Exception:
            pass

    return serve(handler, "127.0.0.1", 0, compression=None, ping_interval=None)


async def test_websocket_frame_declaring_4_gib_fails_from_its_header():
    async def huge(ws):
        await ws.recv()
        ws.transport.write(ws_frame(b"\x01" * 512, declared=1 << 32))
        await asyncio.sleep(5)

    async with await ws_server(huge) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        trace = WireTrace()
        peer = BtpPeer(
            await WebSocketConnection.open(f"ws://127.0.0.1:{port}/", trace, deadline=1.0)
        )
        await peer.send_raw(b"\x06\x00\x00\x00\x01\x00", "a request")
        started = time.monotonic()
        with pytest.raises(ProtocolViolation) as caught:
            await peer.next_packet("the answer")
        assert time.monotonic() - started < 0.5
        text = str(caught.value)
        assert f"frame with 4294967296 bytes exceeds limit of {MAX_PACKET_SIZE} bytes" in text
        assert "close code 1009" in text and "bytes: 827f0000000100000000" in text
        assert "WebSocket closed by the harness" in trace.render()
        await peer.conn.close()


async def test_websocket_message_of_100_mib_is_refused_from_its_header_and_not_read_on():
    """A node writing one whole 100 MiB message where an answer is due, and
    reading nothing meanwhile (a close frame would go unheeded): the harness
    refuses the message from its frame header, writes close code 1009
    (message too big), drops the connection and reads no further, so the
    node's next writes fail long before its message is out; the failure and
    the trace show the header, the failure names the bound and how many
    bytes were read."""
    total = 100 << 20
    header = ws_frame(b"", declared=total)
    ended: asyncio.Future = asyncio.get_running_loop().create_future()

    async def huge(ws):
        written = 0
        try:
            await ws.recv()
            ws.transport.pause_reading()
            ws.transport.write(header)
            while written < total and not ws.transport.is_closing():
                piece = FLOOD_CHUNK[: total - written]
                ws.transport.write(piece)
                written += len(piece)
                await ws.drain()
        finally:
            ended.set_result(written)

    async with await ws_server(huge) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        trace = WireTrace()
        peer = BtpPeer(
            await WebSocketConnection.open(f"ws://127.0.0.1:{port}/", trace, deadline=10.0)
        )
        await peer.send_raw(b"\x06\x00\x00\x00\x01\x00", "a request")
        with pytest.raises(ProtocolViolation) as caught:
            await peer.next_packet("the answer")
        written = await ended
    text = str(caught.value)
    assert (
        f"frame header announcing a 104857600-byte message (frame with 104857600 bytes exceeds limit of "
        f"{MAX_PACKET_SIZE} bytes), over the harness's bound of {MAX_PACKET_SIZE} bytes on a BTP packet "
        "(MAX_PACKET_SIZE; BTP itself sets no size); the harness refused the message from that header, "
        "closed the connection with close code 1009 (message too big)"
    ) in text
    assert text.endswith("The frame header; bytes: 827f0000000006400000"), text
    read = int(text.split(" raw byte(s) read on this connection")[0].rsplit("(", 1)[1])
    assert 0 < read <= MAX_MESSAGE_SIZE, read
    assert written < total // 4, written
    rendered = trace.render()
    assert "header of a WebSocket frame over the size bound" in rendered
    assert "82 7f 00 00 00 00 06 40 00 00" in rendered


async def test_oer_length_prefix_of_4_gib_is_a_violation():
    async def huge(ws):
        first = await ws.recv()
        await ws.send(b"\x01" + first[1:5] + b"\x84\xff\xff\xff\xff" + bytes(8))
        await asyncio.sleep(5)

    async with await ws_server(huge) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        peer = BtpPeer(
            await WebSocketConnection.open(f"ws://127.0.0.1:{port}/", WireTrace(), deadline=1.0)
        )
        await peer.send_raw(b"\x06\x00\x00\x00\x07\x00", "a request")
        with pytest.raises(
            ProtocolViolation, match=r"envelope of 4294967295 bytes.*; bytes: 010000000784ffffffff"
        ) as caught:
            await peer.next_packet("the answer")
        # The packet grammar's (core/node_grammar.py): its case judges it.
        assert caught.value.grammar_case == "btp.packet.server.sends-well-formed-packets"
        await peer.conn.close()


async def test_websocket_flood_of_messages_while_awaiting_silence_is_bounded():
    async def flood(ws):
        while True:
            ws.transport.write(ws_frame(FLOOD_CHUNK[:16384]))
            await asyncio.sleep(0)

    async with await ws_server(flood) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        conn = await WebSocketConnection.open(f"ws://127.0.0.1:{port}/", WireTrace(), deadline=2.0)
        started = time.monotonic()
        closed, messages = await conn.await_close()
        assert time.monotonic() - started < 2.5
        assert not closed and sum(len(m) for m in messages) <= (1 << 20) + 16384
        assert conn.trace.dropped_bytes["received"] > 0
        await conn.close()


async def test_websocket_trickle_ends_at_the_deadline_and_is_not_silence():
    async def slowloris(ws):
        frame = ws_frame(b"\x01\x00\x00\x00\x01\x00")
        for index in range(len(frame) * 100):
            ws.transport.write(frame[index % len(frame) : index % len(frame) + 1])
            await asyncio.sleep(0.1)

    async with await ws_server(slowloris) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        trace = WireTrace()
        conn = await WebSocketConnection.open(f"ws://127.0.0.1:{port}/", trace, deadline=0.35)
        started = time.monotonic()
        with pytest.raises(
            DeadlineExceeded,
            match=r"no the answer within 0.35 s; [1-7] raw byte\(s\) arrived without "
            r"completing a WebSocket message, the last chunk: [0-9a-f]{2}",
        ):
            await conn.receive("the answer")
        assert time.monotonic() - started < 0.6
        assert trace.bytes_in("received"), (
            "trickled bytes are in the trace: the target was not silent"
        )
        await conn.close()


async def test_websocket_upgrade_answered_with_garbage_is_a_violation():
    async def garbage(reader, writer):
        await reader.read(1024)
        writer.write(b"\x16\x03\x01 not http at all\r\n" * 4)
        await writer.drain()
        await asyncio.sleep(2)

    server, port = await start_tcp(garbage)
    async with server:
        with pytest.raises(
            ProtocolViolation, match=r"not a valid HTTP response.*; bytes: 160301206e6f74"
        ):
            await WebSocketConnection.open(f"ws://127.0.0.1:{port}/", WireTrace(), deadline=1.0)

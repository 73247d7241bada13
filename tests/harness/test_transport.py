"""Transports: every read ends at its deadline, and the trace keeps both directions."""

import asyncio
import time

import pytest
from websockets.asyncio.server import serve

from conformance.core.transport import (
    DeadlineExceeded,
    PeerClosed,
    TcpConnection,
    WireTrace,
    hexdump,
)
from conformance.core.websocket import WebSocketConnection


async def start_tcp(handler):
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_tcp_read_from_silent_peer_ends_at_deadline():
    async def silent(reader, writer):
        await asyncio.sleep(5)

    server, port = await start_tcp(silent)
    async with server:
        trace = WireTrace()
        conn = await TcpConnection.open("127.0.0.1", port, trace, deadline=0.3)
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded, match="no msg2 within 0.3 s"):
            await conn.receive_exactly(64, "msg2")
        assert time.monotonic() - started < 1.0
        conn.abort()


async def test_tcp_close_mid_message_is_reported_with_bytes():
    async def short(reader, writer):
        writer.write(b"\x01\x02\x03")
        await writer.drain()
        writer.close()

    server, port = await start_tcp(short)
    async with server:
        trace = WireTrace()
        conn = await TcpConnection.open("127.0.0.1", port, trace, deadline=1.0)
        with pytest.raises(PeerClosed, match="after 3 of the 10 bytes of header; got 010203"):
            await conn.receive_exactly(10, "header")
        text = trace.render()
        assert "target -> harness  3 bytes" in text and "01 02 03" in text
        assert "target closed the connection" in text


async def test_await_close_reports_bytes_written_before_closing():
    async def chatty(reader, writer):
        await reader.readexactly(4)
        writer.write(b"oops")
        await writer.drain()
        writer.close()

    server, port = await start_tcp(chatty)
    async with server:
        conn = await TcpConnection.open("127.0.0.1", port, WireTrace(), deadline=1.0)
        await conn.send(b"ping", "four bytes")
        closed, data = await conn.await_close()
        assert closed and data == b"oops"


def test_trace_keeps_memory_bounded():
    trace = WireTrace(limit=1000)
    for _ in range(100):
        trace.record("received", b"x" * 100)
    assert sum(len(e.data) for e in trace.entries) <= 2000 and trace.dropped > 0
    assert "further bytes not kept" in trace.render()


def test_hexdump_layout():
    assert hexdump(b"AB\x00") == "00000000  " + "41 42 00".ljust(47) + "  |AB.|"


async def test_websocket_read_deadline_and_trace():
    async def silent(ws):
        await asyncio.sleep(5)

    async with serve(silent, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        trace = WireTrace()
        conn = await WebSocketConnection.open(f"ws://127.0.0.1:{port}/", trace, deadline=0.3)
        await conn.send(b"\x06\x00", "two bytes")
        with pytest.raises(DeadlineExceeded, match="no answer within 0.3 s"):
            await conn.receive("answer")
        assert await conn.messages_within(0.1) == []
        assert "binary message: two bytes" in trace.render()
        await conn.close()


async def test_websocket_close_by_peer_is_seen():
    async def closer(ws):
        await ws.close(1008, "go away")

    async with serve(closer, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        trace = WireTrace()
        conn = await WebSocketConnection.open(f"ws://127.0.0.1:{port}/", trace, deadline=1.0)
        closed, messages = await conn.await_close()
        assert closed and messages == []
        assert "close code 1008 (go away)" in trace.render()

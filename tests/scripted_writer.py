"""A connection to a peer that writes given bytes: what the suites' readers
(the harness's side of a protocol) are tested against without a node."""

from __future__ import annotations

import asyncio

from conformance.core.transport import TcpConnection, WireTrace

CHUNK_GAP = 0.05
"""Seconds between the writes: each chunk arrives in a read of its own."""


async def connection_to_writer(
    chunks: list[bytes], label: str = "grammar test"
) -> tuple[TcpConnection, asyncio.AbstractServer]:
    """A harness connection (1 s read deadline) to a loopback server that
    writes ``chunks``, each in a write of its own, then stays open for 5 s;
    the caller closes the server."""

    async def script(reader, writer):
        for chunk in chunks:
            writer.write(chunk)
            await writer.drain()
            await asyncio.sleep(CHUNK_GAP)
        await asyncio.sleep(5)

    server = await asyncio.start_server(script, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    conn = await TcpConnection.open("127.0.0.1", port, WireTrace(), 1.0, label)
    return conn, server

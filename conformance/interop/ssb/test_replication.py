"""Interop: one implementation's client replicates from another's server.

The harness starts the server target (``--peer``), puts a recording relay in
front of it, and launches the client target's client command pointed at the
relay, asking it to replicate the server's own feed. The client command's
contract (docs/targets.md): exit 0 only after it replicated and verified the
feed, non-zero otherwise.
"""

from __future__ import annotations

import asyncio

from conformance.core.requirements import requirement
from conformance.core.transport import TcpRelay

CLIENT_TIMEOUT = 30


@requirement(
    "ssb.interop.client.replicates-peer-feed",
    "MUST",
    "SSB guide, Handshake; Box stream; RPC protocol; createHistoryStream; Feeds (end to end)",
    role="client",
    basis="wire-format: the handshake messages, box stream, RPC header and feed message layouts the guide defines, end to end between two implementations: replication stops where either one's bytes deviate",
)
async def test_client_replicates_the_server_feed(target, peer_target, wire_trace):
    feed = peer_target.params.get("public_key")
    assert feed, f"peer {peer_target.target.name} has no public_key param"
    async with TcpRelay(peer_target.host, peer_target.port, wire_trace) as relay:
        process = target.launch_client(
            {
                "peer_host": relay.host,
                "peer_port": relay.port,
                "peer_public_key": feed,
                "feed": feed,
                "client_timeout": CLIENT_TIMEOUT,
            }
        )
        try:
            code = await asyncio.to_thread(process.wait, CLIENT_TIMEOUT + 10)
        finally:
            process.stop()
    assert code == 0, (
        f"{target.target.name} client did not replicate {peer_target.target.name}'s feed "
        f"(exit {code}); client output:\n{process.tail(10)}"
    )
    assert wire_trace.bytes_in("client->server") and wire_trace.bytes_in("server->client"), (
        "no traffic went through the relay"
    )

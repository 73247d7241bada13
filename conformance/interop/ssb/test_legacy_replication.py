"""Interop: a client that holds nothing of a feed replicates all of it from a
server, asking the way it does on the network.

The scenario that shows erratum SSB-E1 (docs/errata/ssb.md): ssb-server's
legacy replication (npm ssb-replicate, legacy.js) asks with
createHistoryStream ``{seq: last + 1, live: true}`` -- ``seq: 1`` for a feed
it holds nothing of -- and appends only a message that continues the feed it
holds (ssb-db validates the chain on append). A server that reads
``sequence`` as the guide's words say ("later than") sends message 2 first,
and ssb-server ends up with nothing. The harness first fetches the feed
itself, without a ``sequence`` option (from the beginning under every
reading), to know what the client must end up holding.

Client command contract (docs/targets.md): exit 0 only after it replicated
and verified the feed. A client that also prints ``SSB_MSG seq=N
key=%...`` lines (scripts/ssb-server.sh replicate does) has each key checked
against the server's message ids; one that prints ``SSB_REPLICATED ...
latest_sequence=M`` (both the reference client and ssb-server's script do)
has M checked.
"""

from __future__ import annotations

import asyncio
import re

from conformance.core.requirements import not_applicable, requirement
from conformance.core.targets import TargetError
from conformance.core.transport import TcpRelay
from reference_impl.ssb.feed import message_id
from reference_impl.ssb.keys import MAIN_NETWORK_KEY, Keypair, feed_id_to_public
from reference_impl.ssb.node import ReplicationError, replicate

# ssb-server's client start-up (a fresh server, its database, ssb-friends'
# graph) counts against this too, hence more than test_replication's 30 s.
CLIENT_TIMEOUT = 60
HARNESS_FETCH_TIMEOUT = 20
_MSG_LINE = re.compile(r"^SSB_MSG seq=(\d+) key=(\S+)", re.MULTILINE)
_REPLICATED_LINE = re.compile(r"^SSB_REPLICATED .*latest_sequence=(\d+)", re.MULTILINE)


def peer_network_key(peer) -> bytes:
    if "network_key" not in peer.target.credentials:
        return MAIN_NETWORK_KEY
    raw = peer.credential("network_key").strip()
    try:
        key = bytes.fromhex(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise TargetError(f"target {peer.target.name}: network_key credential is not hex") from None
    return key


async def server_feed_ids(peer, feed: str) -> list[str]:
    """The ids of the server's feed, 1..N, fetched and verified by the
    harness without a ``sequence`` option."""
    try:
        messages = await replicate(
            peer.host,
            peer.port,
            network_key=peer_network_key(peer),
            keypair=Keypair.generate(),
            peer_public=feed_id_to_public(feed),
            feed_id=feed,
            timeout=HARNESS_FETCH_TIMEOUT,
        )
    except ReplicationError as exc:
        raise AssertionError(
            f"the harness could not fetch {peer.target.name}'s feed itself "
            f"(without a sequence option) to know what the client must get: {exc}"
        ) from None
    return [message_id(msg) for msg in messages]


@requirement(
    "ssb.interop.client.legacy-replicates-every-message",
    "MUST",
    'SSB guide, createHistoryStream ("ask each other whether the feeds they are interested in have '
    'any new messages"; sequence, read as "from"); Feeds (end to end)',
    role="client",
    errata=["SSB-E1"],
    basis="erratum: SSB-E1 ssb-server's legacy replication asks for latest + 1 and must get every message from it",
)
async def test_client_replicates_every_message_of_the_server_feed(target, peer_target, wire_trace):
    feed = peer_target.params.get("public_key")
    assert feed, f"peer {peer_target.target.name} has no public_key param"
    ids = await server_feed_ids(peer_target, feed)
    if not ids:
        not_applicable(f"{peer_target.target.name}'s feed is empty: there is nothing to replicate")
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
            code = await asyncio.to_thread(process.wait, CLIENT_TIMEOUT + 15)
        finally:
            process.stop()
    output = process.output()
    assert code == 0, (
        f"{target.target.name}, holding nothing of {feed}, did not end up holding its {len(ids)} message(s) "
        f"served by {peer_target.target.name} (exit {code}). Under erratum SSB-E1 a server must answer "
        f"sequence/seq N starting with message N; a client's legacy replication asks for last + 1. "
        f"Client output:\n{process.tail(25)}"
    )
    reported = {int(seq): key for seq, key in _MSG_LINE.findall(output)}
    if reported:
        wanted = {seq: key for seq, key in enumerate(ids, 1)}
        missing = sorted(set(wanted) - set(reported))
        different = [
            f"{seq}: {reported[seq]} != {wanted[seq]}"
            for seq in wanted
            if seq in reported and reported[seq] != wanted[seq]
        ]
        assert not missing and not different, (
            f"{target.target.name} reports holding messages that are not the server's: missing sequences "
            f"{missing}, different ids {different}"
        )
    latest = _REPLICATED_LINE.search(output)
    if latest:
        assert int(latest.group(1)) >= len(ids), (
            f"{target.target.name} reports latest sequence {latest.group(1)}; the server's feed has {len(ids)}"
        )
    assert wire_trace.bytes_in("client->server") and wire_trace.bytes_in("server->client"), (
        "no traffic went through the relay"
    )

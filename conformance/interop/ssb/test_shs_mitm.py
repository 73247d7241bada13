"""Interop: a man-in-the-middle between a real client and a real server.

The harness starts the server target (``--peer``), puts :class:`ShsMitm`
between it and the client target (``--target``, launched against the relay
with the real server's key), and attacks the secret handshake. Each case
checks one endpoint of one scenario: that it hung up before any
application data flowed, wrote nothing past its last legitimate handshake
message, and that the relay could open none of its boxes (nor get a
forged one accepted). The client must also not report success (exit 0).

Every case depends on the plain replication case: an endpoint that refuses
every connection would "abort" too, so the MITM verdicts count only once the
same pair has completed an honest session.
"""

from __future__ import annotations

import pytest

from conformance.core.requirements import requirement
from conformance.core.targets import TargetError
from reference_impl.ssb.keys import MAIN_NETWORK_KEY, feed_id_to_public

from .mitm import EndpointReport, Scenario, ShsMitm, network_key_of

REPLICATION = "ssb.interop.client.replicates-peer-feed"
CLIENT_TIMEOUT = 30
GUIDE = "SSB guide, Handshake"
SWAP = '("A man-in-the-middle could swap out the ephemeral keys in Messages 1 and 2 for their own keys")'
REPLAY = '("Past handshakes cannot be replayed")'


@pytest.fixture
def mitm(target, peer_target, wire_trace, deadline) -> ShsMitm:
    feed = peer_target.params.get("public_key")
    if not feed:
        raise TargetError(f"peer {peer_target.target.name} has no public_key param")
    try:
        server_public = feed_id_to_public(str(feed))
    except ValueError as exc:
        raise TargetError(f"peer public_key {feed!r} is not an SSB feed id: {exc}") from None

    def launch(host: str, port: int):
        return target.launch_client(
            {
                "peer_host": host,
                "peer_port": port,
                "peer_public_key": feed,
                "feed": feed,
                "client_timeout": CLIENT_TIMEOUT,
            }
        )

    wait = target.target.client_connect_timeout
    return ShsMitm(
        trace=wire_trace,
        network_key=network_key_of(peer_target, MAIN_NETWORK_KEY),
        server_host=peer_target.host,
        server_port=peer_target.port,
        server_public=server_public,
        launch_client=launch,
        deadline=deadline,
        connect_wait=wait,
        session_limit=CLIENT_TIMEOUT + 10,
    )


def assert_aborted(report: EndpointReport | None, deadline: float) -> None:
    if report is None:
        raise AssertionError("the scenario produced no report for this endpoint")
    verdict = report.verdict(deadline)
    if verdict is not None:
        raise AssertionError(verdict)


@requirement(
    "ssb.mitm.client.aborts-on-substituted-ephemeral-key",
    "MUST",
    f"{GUIDE} {SWAP}, 4. Server accept (Client verifies)",
    role="client",
    depends=[REPLICATION],
    basis="profile: S1 a handshake check that fails ends the handshake (step 4: the relay's msg4 does not verify; close, nothing past msg3, no exit 0), docs/ssb-profile.md",
)
async def test_client_aborts_on_substituted_ephemeral_key(mitm, deadline):
    outcome = await mitm.run(Scenario.SUBSTITUTED_EPHEMERAL)
    assert_aborted(outcome.client, deadline)


@requirement(
    "ssb.mitm.server.aborts-on-substituted-ephemeral-key",
    "MUST",
    f"{GUIDE} {SWAP}, 3. Client authenticate (Server verifies)",
    role="client",
    depends=[REPLICATION],
    basis="profile: S1 a handshake check that fails ends the handshake (step 3: msg3 over the substituted keys does not open; close, nothing past msg2), docs/ssb-profile.md",
)
async def test_server_aborts_on_substituted_ephemeral_key(mitm, deadline):
    outcome = await mitm.run(Scenario.SUBSTITUTED_EPHEMERAL)
    assert_aborted(outcome.server, deadline)


@requirement(
    "ssb.mitm.client.aborts-on-impostor-server-key",
    "MUST",
    f'{GUIDE} ("The client must know the server’s public key before connecting"), '
    "4. Server accept (Client verifies)",
    role="client",
    depends=[REPLICATION],
    basis="plain-words",
)
async def test_client_aborts_on_impostor_server_key(mitm, deadline):
    outcome = await mitm.run(Scenario.IMPOSTOR_KEY)
    assert_aborted(outcome.client, deadline)


@requirement(
    "ssb.mitm.server.aborts-on-impostor-client-key",
    "MUST",
    f'{GUIDE} ("a message that only the real server can read and not a man-in-the-middle"), '
    "3. Client authenticate (Server verifies)",
    role="client",
    depends=[REPLICATION],
    basis="profile: S1 a handshake check that fails ends the handshake (step 3: the relay's forged msg3 does not open; close, nothing past msg2), docs/ssb-profile.md",
)
async def test_server_aborts_on_impostor_client_key(mitm, deadline):
    outcome = await mitm.run(Scenario.IMPOSTOR_KEY)
    assert_aborted(outcome.server, deadline)


@requirement(
    "ssb.mitm.server.aborts-on-replayed-client-handshake",
    "MUST",
    f"{GUIDE} {REPLAY}, 3. Client authenticate (Server verifies)",
    role="client",
    depends=[REPLICATION],
    basis="profile: S1 a handshake check that fails ends the handshake (step 3: the replayed msg3 does not open under this handshake's keys; close, nothing past msg2), docs/ssb-profile.md",
)
async def test_server_aborts_on_replayed_client_handshake(mitm, deadline):
    outcome = await mitm.run(Scenario.REPLAYED_CLIENT_HANDSHAKE)
    assert_aborted(outcome.server, deadline)


@requirement(
    "ssb.mitm.client.aborts-on-replayed-server-handshake",
    "MUST",
    f"{GUIDE} {REPLAY}, 4. Server accept (Client verifies)",
    role="client",
    depends=[REPLICATION],
    basis="profile: S1 a handshake check that fails ends the handshake (step 4: the replayed msg4 does not open under this handshake's keys; close, nothing past msg3, no exit 0), docs/ssb-profile.md",
)
async def test_client_aborts_on_replayed_server_handshake(mitm, deadline):
    outcome = await mitm.run(Scenario.REPLAYED_SERVER_HANDSHAKE)
    assert_aborted(outcome.client, deadline)

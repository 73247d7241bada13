"""Secret handshake, target as server (SSB guide, "Handshake").

The security properties the guide lists are checked from the outside: a
peer on another network, a client that does not know the server's real
key, a tampered or replayed message, and truncated or garbage input must
all end with the server hanging up without writing another byte.
"""

from __future__ import annotations

from conformance.core.requirements import blocked, requirement
from conformance.core.transport import target_bytes
from reference_impl.ssb import shs
from reference_impl.ssb.keys import Keypair

from .prerequisites import HANDSHAKE
from .session import (
    HandshakeOutcome,
    client_handshake,
    expect_hang_up_without_writing,
    flip_byte,
    random_bytes,
)

OTHER_NETWORK_KEY = bytes(range(32))


async def show_valid_handshake(
    connect,
    network_key,
    keypair,
    server_public,
    label: str = "valid counterpart: a complete handshake first",
) -> HandshakeOutcome:
    """The valid counterpart of a negative case, on a connection of its own
    and before the invalid step: a target that hangs up on everything would
    otherwise pass every "rejects" case. When the valid handshake does not
    complete either, the case is blocked by the handshake rule, not passed."""
    conn = await connect(label)
    try:
        outcome = await client_handshake(conn, network_key, keypair, server_public)
    except (AssertionError, OSError) as exc:
        blocked(
            HANDSHAKE,
            "failed within this case",
            f"a valid handshake on a fresh connection did not complete ({exc}), so hanging up on an "
            "invalid one shows nothing",
        )
    await conn.close()
    return outcome


@requirement(
    "ssb.shs.server.completes-valid-handshake",
    "MUST",
    "SSB guide, Handshake, 2. Server hello; 4. Server accept (all four steps)",
    basis="wire-format: msg2 (64 bytes: nacl_auth of the ephemeral key under the network identifier, then the key) and msg4 (80 bytes: secret box of detached_signature_B), 2. Server hello and 4. Server accept",
)
async def test_completes_valid_handshake(connect, network_key, harness_keypair, server_public):
    """A client that knows the network key and the server's public key
    completes the handshake: msg2 authenticates under the network key and
    msg4 carries the server's signature, which proves its identity."""
    conn = await connect()
    outcome = await client_handshake(conn, network_key, harness_keypair, server_public)
    assert outcome.params.peer_public == server_public


@requirement(
    "ssb.shs.server.rejects-wrong-network-key",
    "MUST",
    "SSB guide, Handshake, 1. Client hello (Server verifies: assert_nacl_auth_verify)",
    depends=[HANDSHAKE],
    basis="profile: S1 a handshake check that fails ends the handshake (step 1: msg1's hmac does not verify under the network key; close, no msg2), docs/ssb-profile.md",
)
async def test_rejects_wrong_network_key(connect, network_key, harness_keypair, server_public):
    """msg1 authenticated under another network's key: the server must not
    answer with msg2 (that would confirm a listener to a stranger)."""
    await show_valid_handshake(connect, network_key, harness_keypair, server_public)
    other = OTHER_NETWORK_KEY if network_key != OTHER_NETWORK_KEY else bytes(32)
    msg1 = shs.hello(other, shs.ephemeral_public(shs.generate_ephemeral_secret()))
    conn = await connect()
    await conn.send(msg1, "msg1 authenticated under a different network key")
    await expect_hang_up_without_writing(conn, "a msg1 for another network")


@requirement(
    "ssb.shs.server.rejects-client-without-server-key",
    "MUST",
    "SSB guide, Handshake, 3. Client authenticate (Server verifies: assert_nacl_secretbox_open)",
    depends=[HANDSHAKE],
    basis="plain-words",
)
async def test_rejects_client_not_knowing_server_key(
    connect, network_key, harness_keypair, server_public
):
    """A man in the middle that does not know the server's real public key
    derives the wrong shared secret aB; the server must not send msg4."""
    await show_valid_handshake(connect, network_key, harness_keypair, server_public)
    wrong_server_public = Keypair.generate().public
    hs = shs.ClientHandshake(network_key, harness_keypair, wrong_server_public)
    conn = await connect()
    await conn.send(hs.data_to_send(), "msg1: client hello")
    msg2 = await conn.receive_exactly(shs.HELLO_SIZE, "msg2 (server hello)")
    with target_bytes("target's msg2 (server hello) does not verify", msg2, shs.HandshakeError):
        msg3 = hs.receive_data(msg2)
    await conn.send(msg3, "msg3 computed with a wrong server public key")
    await expect_hang_up_without_writing(conn, "a msg3 made for another server key")


@requirement(
    "ssb.shs.server.rejects-tampered-msg3",
    "MUST",
    "SSB guide, Handshake, 3. Client authenticate (Server verifies)",
    depends=[HANDSHAKE],
    basis="profile: S1 a handshake check that fails ends the handshake (step 3: a tampered msg3 fails assert_nacl_secretbox_open; close, no msg4), docs/ssb-profile.md",
)
async def test_rejects_tampered_msg3(connect, network_key, harness_keypair, server_public):
    """One bit of msg3 flipped in transit: the secret box fails to open."""
    await show_valid_handshake(connect, network_key, harness_keypair, server_public)
    hs = shs.ClientHandshake(network_key, harness_keypair, server_public)
    conn = await connect()
    await conn.send(hs.data_to_send(), "msg1: client hello")
    msg2 = await conn.receive_exactly(shs.HELLO_SIZE, "msg2 (server hello)")
    with target_bytes("target's msg2 (server hello) does not verify", msg2, shs.HandshakeError):
        msg3 = hs.receive_data(msg2)
    await conn.send(flip_byte(msg3, 40), "msg3 with one bit flipped at offset 40")
    await expect_hang_up_without_writing(conn, "a tampered msg3")


@requirement(
    "ssb.shs.server.rejects-replayed-handshake",
    "MUST",
    'SSB guide, Handshake ("Past handshakes cannot be replayed"), 3. Client authenticate',
    depends=[HANDSHAKE],
    basis="profile: S1 a handshake check that fails ends the handshake (step 3: a recorded msg3 does not open under this handshake's keys; close, no msg4), docs/ssb-profile.md",
)
async def test_rejects_replayed_msg1_and_msg3(connect, network_key, harness_keypair, server_public):
    """msg1 and msg3 recorded from an earlier, successful session and sent
    again: the server's new ephemeral key makes the old msg3 fail."""
    recorded = await show_valid_handshake(
        connect, network_key, harness_keypair, server_public, "earlier session, recorded"
    )
    replay = await connect("replay")
    await replay.send(recorded.msg1, "msg1 replayed from the earlier session")
    await replay.receive_exactly(shs.HELLO_SIZE, "msg2 (server hello)")
    await replay.send(recorded.msg3, "msg3 replayed from the earlier session")
    await expect_hang_up_without_writing(replay, "a replayed msg3")


@requirement(
    "ssb.shs.server.rejects-replayed-msg3-with-fresh-msg1",
    "MUST",
    'SSB guide, Handshake ("Past handshakes cannot be replayed"), 3. Client authenticate',
    depends=[HANDSHAKE],
    basis="profile: S1 a handshake check that fails ends the handshake (step 3: an earlier session's msg3 does not open under this handshake's keys; close, no msg4), docs/ssb-profile.md",
)
async def test_rejects_replayed_msg3_after_fresh_msg1(
    connect, network_key, harness_keypair, server_public
):
    """A fresh msg1 followed by the msg3 of an earlier session."""
    recorded = await show_valid_handshake(
        connect, network_key, harness_keypair, server_public, "earlier session, recorded"
    )
    replay = await connect("replay")
    await replay.send(
        shs.hello(network_key, shs.ephemeral_public(shs.generate_ephemeral_secret())),
        "msg1: fresh client hello",
    )
    await replay.receive_exactly(shs.HELLO_SIZE, "msg2 (server hello)")
    await replay.send(recorded.msg3, "msg3 replayed from the earlier session")
    await expect_hang_up_without_writing(replay, "a msg3 replayed after a fresh msg1")


@requirement(
    "ssb.shs.server.rejects-truncated-msg1",
    "MUST",
    "SSB guide, Handshake, 1. Client hello (assert(length(msg1) == 64))",
    depends=[HANDSHAKE],
    basis="profile: S1 a handshake check that fails ends the handshake (step 1: assert(length(msg1) == 64) fails at the end of stream; close, no msg2), docs/ssb-profile.md",
)
async def test_rejects_truncated_msg1(connect, network_key, harness_keypair, server_public):
    await show_valid_handshake(connect, network_key, harness_keypair, server_public)
    msg1 = shs.hello(network_key, shs.ephemeral_public(shs.generate_ephemeral_secret()))
    conn = await connect()
    await conn.send(msg1[:40], "first 40 of the 64 bytes of msg1")
    conn.finish_sending()
    await expect_hang_up_without_writing(conn, "a msg1 truncated to 40 bytes and end of stream")


@requirement(
    "ssb.shs.server.rejects-truncated-msg3",
    "MUST",
    "SSB guide, Handshake, 3. Client authenticate (msg3 is 112 bytes)",
    depends=[HANDSHAKE],
    basis="profile: S1 a handshake check that fails ends the handshake (step 3: a msg3 short of 112 bytes at the end of stream does not open; close, no msg4), docs/ssb-profile.md",
)
async def test_rejects_truncated_msg3(connect, network_key, harness_keypair, server_public):
    await show_valid_handshake(connect, network_key, harness_keypair, server_public)
    hs = shs.ClientHandshake(network_key, harness_keypair, server_public)
    conn = await connect()
    await conn.send(hs.data_to_send(), "msg1: client hello")
    msg2 = await conn.receive_exactly(shs.HELLO_SIZE, "msg2 (server hello)")
    with target_bytes("target's msg2 (server hello) does not verify", msg2, shs.HandshakeError):
        msg3 = hs.receive_data(msg2)
    await conn.send(msg3[:100], "first 100 of the 112 bytes of msg3")
    conn.finish_sending()
    await expect_hang_up_without_writing(conn, "a msg3 truncated to 100 bytes and end of stream")


@requirement(
    "ssb.shs.server.rejects-garbage-msg1",
    "MUST",
    "SSB guide, Handshake, 1. Client hello (Server verifies)",
    depends=[HANDSHAKE],
    basis="profile: S1 a handshake check that fails ends the handshake (step 1: random bytes fail assert_nacl_auth_verify; close, no msg2), docs/ssb-profile.md",
)
async def test_rejects_garbage_msg1(connect, network_key, harness_keypair, server_public):
    await show_valid_handshake(connect, network_key, harness_keypair, server_public)
    conn = await connect()
    await conn.send(random_bytes(shs.HELLO_SIZE), "64 random bytes in place of msg1")
    await expect_hang_up_without_writing(conn, "a random msg1")


@requirement(
    "ssb.shs.server.rejects-garbage-msg3",
    "MUST",
    "SSB guide, Handshake, 3. Client authenticate (Server verifies)",
    depends=[HANDSHAKE],
    basis="profile: S1 a handshake check that fails ends the handshake (step 3: random bytes fail assert_nacl_secretbox_open; close, no msg4), docs/ssb-profile.md",
)
async def test_rejects_garbage_msg3(connect, network_key, harness_keypair, server_public):
    await show_valid_handshake(connect, network_key, harness_keypair, server_public)
    hs = shs.ClientHandshake(network_key, harness_keypair, server_public)
    conn = await connect()
    await conn.send(hs.data_to_send(), "msg1: client hello")
    await conn.receive_exactly(shs.HELLO_SIZE, "msg2 (server hello)")
    await conn.send(random_bytes(shs.CLIENT_AUTH_SIZE), "112 random bytes in place of msg3")
    await expect_hang_up_without_writing(conn, "a random msg3")


@requirement(
    "ssb.shs.server.uses-fresh-ephemeral-keys",
    "SHOULD",
    'SSB guide, Handshake ("Handshakes provide forward secrecy"), 2. Server hello',
    depends=[HANDSHAKE],
    basis="inference: the forward secrecy and replay protection the guide says handshakes provide rest on a freshly generated ephemeral key per handshake",
)
async def test_uses_fresh_ephemeral_key_per_handshake(
    connect, network_key, harness_keypair, server_public
):
    """Two handshakes must not reuse the server's ephemeral key: reuse
    destroys forward secrecy and makes msg3 replayable."""
    first = await client_handshake(
        await connect("first"), network_key, harness_keypair, server_public
    )
    second = await client_handshake(
        await connect("second"), network_key, harness_keypair, server_public
    )
    assert first.msg2[32:] != second.msg2[32:], (
        f"the server sent the same ephemeral public key in two handshakes: {first.msg2[32:].hex()}"
    )

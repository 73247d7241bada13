"""Secret handshake, target as server: the signature inside msg3
(SSB guide, "3. Client authenticate").

The cases of test_shs_server.py break msg3's secret box; a server that
opens the box but never checks the signature inside it passes all of them.
Here the box opens and only the signature is wrong.
"""

from __future__ import annotations

from conformance.core.requirements import requirement
from reference_impl.ssb import shs
from reference_impl.ssb.keys import Keypair

from .session import expect_hang_up_without_writing

HANDSHAKE = "ssb.shs.server.completes-valid-handshake"


async def send_msg3_with_signature(
    connect,
    network_key: bytes,
    client: Keypair,
    server_public: bytes,
    signer: Keypair,
    signed_server_public: bytes,
    what: str,
):
    """Run steps 1-2 as a client that claims ``client``'s identity, then send a
    msg3 that opens under the right box key but whose signature is made by
    ``signer`` over ``signed_server_public`` (one of them wrong)."""
    secret = shs.generate_ephemeral_secret()
    conn = await connect()
    await conn.send(shs.hello(network_key, shs.ephemeral_public(secret)), "msg1: client hello")
    msg2 = await conn.receive_exactly(shs.HELLO_SIZE, "msg2 (server hello)")
    server_ephemeral = shs.open_hello(network_key, msg2, step="msg2")
    ab = shs.shared_secret_ab(secret, server_ephemeral)
    a_b = shs.client_shared_secret_aB(secret, server_public)
    signature = shs.client_auth_signature(
        network_key=network_key,
        client_keypair=signer,
        server_public=signed_server_public,
        shared_secret_ab=ab,
    )
    msg3 = shs.box_client_auth(
        network_key=network_key,
        shared_secret_ab=ab,
        shared_secret_aB=a_b,
        detached_signature_A=signature,
        client_public=client.public,
    )
    await conn.send(msg3, f"msg3 whose box opens but whose signature is {what}")
    await expect_hang_up_without_writing(conn, f"a msg3 whose signature is {what}")


@requirement(
    "ssb.shs.server.rejects-msg3-signed-by-another-key",
    "MUST",
    "SSB guide, Handshake, 3. Client authenticate (\"the server opens the box, stores the client's "
    'long term public key and verifies the signature")',
    depends=[HANDSHAKE],
    basis="profile: S1 a handshake check that fails ends the handshake (step 3: assert_nacl_sign_verify_detached fails under the key msg3 carries; close, no msg4), docs/ssb-profile.md",
)
async def test_rejects_msg3_signed_by_another_key(
    connect, network_key, harness_keypair, server_public
):
    """msg3 claims identity A but the signature is made with another key:
    a server that skips assert_nacl_sign_verify_detached would accept
    anyone as anyone."""
    await send_msg3_with_signature(
        connect,
        network_key,
        harness_keypair,
        server_public,
        Keypair.generate(),
        server_public,
        "made by a key other than the one in msg3",
    )


@requirement(
    "ssb.shs.server.rejects-msg3-signed-for-another-server",
    "MUST",
    "SSB guide, Handshake, 3. Client authenticate (assert_nacl_sign_verify_detached over "
    "concat(network_identifier, server_longterm_pk, sha256(shared_secret_ab)))",
    depends=[HANDSHAKE],
    basis="profile: S1 a handshake check that fails ends the handshake (step 3: a signature over another server's key fails assert_nacl_sign_verify_detached; close, no msg4), docs/ssb-profile.md",
)
async def test_rejects_msg3_signed_for_another_server(
    connect, network_key, harness_keypair, server_public
):
    """The client's own key signed, but over another server's public key: the
    signature binds the client to this server, so it must not verify."""
    await send_msg3_with_signature(
        connect,
        network_key,
        harness_keypair,
        server_public,
        harness_keypair,
        Keypair.generate().public,
        "over another server's public key",
    )

"""Tests of reference_impl.ssb.keys and reference_impl.ssb.shs."""

from __future__ import annotations

import base64
import json
import os
import stat

import nacl.bindings
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ..fuzz_budget import examples

from reference_impl.ssb import shs
from reference_impl.ssb.keys import (
    MAIN_NETWORK_KEY,
    Keypair,
    feed_id_to_public,
    public_to_feed_id,
    verify_signature,
)
from reference_impl.ssb.shs import (
    BoxStreamParams,
    ClientHandshake,
    HandshakeError,
    ServerHandshake,
)

CLIENT = Keypair.from_seed(bytes([1]) * 32)
SERVER = Keypair.from_seed(bytes([2]) * 32)
OTHER = Keypair.from_seed(bytes([3]) * 32)
OTHER_NETWORK_KEY = bytes(range(32))
CLIENT_EPHEMERAL = bytes([4]) * 32
SERVER_EPHEMERAL = bytes([5]) * 32


def new_pair(
    *,
    client_network_key: bytes = MAIN_NETWORK_KEY,
    server_network_key: bytes = MAIN_NETWORK_KEY,
    server_public: bytes = SERVER.public,
    client_ephemeral: bytes | None = CLIENT_EPHEMERAL,
    server_ephemeral: bytes | None = SERVER_EPHEMERAL,
    authorize=None,
) -> tuple[ClientHandshake, ServerHandshake]:
    client = ClientHandshake(client_network_key, CLIENT, server_public, client_ephemeral)
    server = ServerHandshake(server_network_key, SERVER, server_ephemeral, authorize)
    return client, server


def run(client: ClientHandshake, server: ServerHandshake) -> None:
    """Drive an honest handshake to completion in whole messages."""
    msg2 = server.receive_data(client.data_to_send())
    msg4 = server.receive_data(client.receive_data(msg2))
    assert client.receive_data(msg4) == b""


def feed_in_chunks(machine, data: bytes, chunk_sizes: list[int]) -> bytes:
    """Feed ``data`` split by ``chunk_sizes`` (cycled); return all replies."""
    replies = bytearray()
    position = 0
    index = 0
    while position < len(data):
        size = chunk_sizes[index % len(chunk_sizes)]
        replies += machine.receive_data(data[position : position + size])
        position += size
        index += 1
    return bytes(replies)


# --- keys -----------------------------------------------------------------------


class TestKeypair:
    def test_from_seed_layout(self):
        assert CLIENT.seed == bytes([1]) * 32
        assert len(CLIENT.public) == 32
        assert CLIENT.secret == CLIENT.seed + CLIENT.public

    def test_from_secret_round_trip(self):
        assert Keypair.from_secret(CLIENT.secret) == CLIENT

    def test_from_secret_rejects_mismatched_public_half(self):
        with pytest.raises(ValueError, match="does not match"):
            Keypair.from_secret(CLIENT.seed + SERVER.public)

    @pytest.mark.parametrize("size", [0, 31, 33])
    def test_from_seed_rejects_wrong_length(self, size):
        with pytest.raises(ValueError):
            Keypair.from_seed(bytes(size))

    def test_from_secret_rejects_wrong_length(self):
        with pytest.raises(ValueError):
            Keypair.from_secret(CLIENT.secret[:63])

    def test_generate_gives_distinct_keys(self):
        assert Keypair.generate().public != Keypair.generate().public

    def test_sign_and_verify(self):
        signature = CLIENT.sign(b"message")
        assert len(signature) == 64
        assert verify_signature(CLIENT.public, b"message", signature)
        assert not verify_signature(CLIENT.public, b"other message", signature)
        assert not verify_signature(SERVER.public, b"message", signature)

    @pytest.mark.parametrize(
        "public, signature",
        [(bytes(31), bytes(64)), (CLIENT.public, bytes(63)), (bytes(32), bytes(64))],
    )
    def test_verify_signature_treats_malformed_input_as_invalid(self, public, signature):
        assert verify_signature(public, b"message", signature) is False

    def test_curve25519_conversion_agrees_on_a_shared_secret(self):
        client_view = nacl.bindings.crypto_scalarmult(
            CLIENT.curve25519_secret(), SERVER.curve25519_public()
        )
        server_view = nacl.bindings.crypto_scalarmult(
            SERVER.curve25519_secret(), CLIENT.curve25519_public()
        )
        assert client_view == server_view

    def test_repr_shows_only_the_feed_id(self):
        text = repr(CLIENT)
        assert text == f"Keypair({CLIENT.feed_id})"
        assert base64.b64encode(CLIENT.secret).decode() not in text
        assert CLIENT.seed.hex() not in text


class TestFeedId:
    def test_format_and_round_trip(self):
        feed_id = CLIENT.feed_id
        assert feed_id == "@" + base64.b64encode(CLIENT.public).decode() + ".ed25519"
        assert public_to_feed_id(CLIENT.public) == feed_id
        assert feed_id_to_public(feed_id) == CLIENT.public

    @pytest.mark.parametrize(
        "feed_id",
        [
            "",
            CLIENT.feed_id[1:],  # no sigil
            "%" + CLIENT.feed_id[1:],  # message sigil
            CLIENT.feed_id.replace(".ed25519", ".sha256"),
            CLIENT.feed_id.replace(".ed25519", ""),
            "@" + base64.b64encode(bytes(31)).decode() + ".ed25519",
            "@" + base64.b64encode(bytes(33)).decode() + ".ed25519",
            "@not base64!.ed25519",
            # Same bytes, but non-zero padding bits: not the canonical encoding.
            "@" + base64.b64encode(bytes(32)).decode()[:-2] + "B=.ed25519",
        ],
    )
    def test_rejects_malformed(self, feed_id):
        with pytest.raises(ValueError):
            feed_id_to_public(feed_id)

    def test_rejects_non_string(self):
        with pytest.raises(ValueError):
            feed_id_to_public(CLIENT.public)  # type: ignore[arg-type]

    def test_public_to_feed_id_rejects_wrong_length(self):
        with pytest.raises(ValueError):
            public_to_feed_id(bytes(31))


class TestSecretFile:
    def test_save_load_round_trip_with_owner_only_mode(self, tmp_path):
        path = tmp_path / "secret"
        CLIENT.save(path)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert Keypair.load(path) == CLIENT

    def test_save_tightens_the_mode_of_an_existing_file(self, tmp_path):
        path = tmp_path / "secret"
        path.write_text("old")
        path.chmod(0o644)
        CLIENT.save(path)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600

    def test_saved_document_has_the_ssb_keys_fields(self, tmp_path):
        path = tmp_path / "secret"
        CLIENT.save(path)
        json_lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
        document = json.loads("\n".join(json_lines))
        assert document == {
            "curve": "ed25519",
            "public": base64.b64encode(CLIENT.public).decode() + ".ed25519",
            "private": base64.b64encode(CLIENT.secret).decode() + ".ed25519",
            "id": CLIENT.feed_id,
        }

    def test_load_ignores_comment_lines_as_ssb_server_writes_them(self, tmp_path):
        document = {
            "curve": "ed25519",
            "public": base64.b64encode(SERVER.public).decode() + ".ed25519",
            "private": base64.b64encode(SERVER.secret).decode() + ".ed25519",
            "id": SERVER.feed_id,
        }
        path = tmp_path / "secret"
        path.write_text(
            "# this is your SECRET name.\n# WARNING: never show this to anyone.\n\n"
            + json.dumps(document, indent=2)
            + "\n\n#\n# The only part of this file that's safe to share is your public name:\n#\n"
            + f"#   {SERVER.feed_id}\n"
        )
        assert Keypair.load(path) == SERVER

    @pytest.mark.parametrize(
        "change",
        [
            {"curve": "k256"},
            {"id": OTHER.feed_id},
            {"public": base64.b64encode(OTHER.public).decode() + ".ed25519"},
            {"private": "not a key"},
        ],
    )
    def test_load_rejects_inconsistent_files(self, tmp_path, change):
        path = tmp_path / "secret"
        CLIENT.save(path)
        document = json.loads(
            "\n".join(line for line in path.read_text().splitlines() if not line.startswith("#"))
        )
        document.update(change)
        path.write_text(json.dumps(document))
        with pytest.raises(ValueError):
            Keypair.load(path)

    def test_load_rejects_non_json(self, tmp_path):
        path = tmp_path / "secret"
        path.write_text("# only a comment\nnot json\n")
        with pytest.raises(ValueError):
            Keypair.load(path)


# --- primitives -------------------------------------------------------------------


class TestPrimitives:
    def test_hello_layout(self):
        ephemeral = shs.ephemeral_public(CLIENT_EPHEMERAL)
        msg = shs.hello(MAIN_NETWORK_KEY, ephemeral)
        assert len(msg) == 64
        assert msg[32:] == ephemeral
        assert msg[:32] == shs.nacl_auth(MAIN_NETWORK_KEY, ephemeral)
        assert shs.open_hello(MAIN_NETWORK_KEY, msg) == ephemeral

    def test_nacl_auth_is_hmac_sha512_truncated(self):
        # RFC 4231 test case 2, whose HMAC-SHA-512 starts with these 32 bytes.
        assert shs.nacl_auth(b"Jefe", b"what do ya want for nothing?") == bytes.fromhex(
            "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554"
        )

    @pytest.mark.parametrize("step", ["msg1", "msg2"])
    def test_open_hello_reports_the_given_step(self, step):
        msg = shs.hello(OTHER_NETWORK_KEY, shs.ephemeral_public(CLIENT_EPHEMERAL))
        with pytest.raises(HandshakeError) as caught:
            shs.open_hello(MAIN_NETWORK_KEY, msg, step=step)
        assert (caught.value.step, caught.value.reason) == (step, "hmac mismatch")

    @pytest.mark.parametrize("size", [0, 63, 65])
    def test_open_hello_wrong_length(self, size):
        with pytest.raises(HandshakeError) as caught:
            shs.open_hello(MAIN_NETWORK_KEY, bytes(size))
        assert caught.value.reason == "wrong length"

    def test_open_client_auth_wrong_length(self):
        with pytest.raises(HandshakeError) as caught:
            shs.open_client_auth(
                network_key=MAIN_NETWORK_KEY,
                server_public=SERVER.public,
                shared_secret_ab=bytes(32),
                shared_secret_aB=bytes(32),
                msg3=bytes(111),
            )
        assert (caught.value.step, caught.value.reason) == ("msg3", "wrong length")

    def test_open_server_accept_wrong_length(self):
        with pytest.raises(HandshakeError) as caught:
            shs.open_server_accept(
                network_key=MAIN_NETWORK_KEY,
                server_public=SERVER.public,
                detached_signature_A=bytes(64),
                client_public=CLIENT.public,
                shared_secret_ab=bytes(32),
                shared_secret_aB=bytes(32),
                shared_secret_Ab=bytes(32),
                msg4=bytes(81),
            )
        assert (caught.value.step, caught.value.reason) == ("msg4", "wrong length")

    def test_both_sides_derive_the_same_shared_secrets(self):
        client_ephemeral_public = shs.ephemeral_public(CLIENT_EPHEMERAL)
        server_ephemeral_public = shs.ephemeral_public(SERVER_EPHEMERAL)
        assert shs.shared_secret_ab(CLIENT_EPHEMERAL, server_ephemeral_public) == (
            shs.shared_secret_ab(SERVER_EPHEMERAL, client_ephemeral_public)
        )
        assert shs.client_shared_secret_aB(CLIENT_EPHEMERAL, SERVER.public) == (
            shs.server_shared_secret_aB(SERVER, client_ephemeral_public)
        )
        assert shs.client_shared_secret_Ab(CLIENT, server_ephemeral_public) == (
            shs.server_shared_secret_Ab(SERVER_EPHEMERAL, CLIENT.public)
        )

    def test_low_order_point_is_rejected(self):
        with pytest.raises(ValueError):
            shs.shared_secret_ab(CLIENT_EPHEMERAL, bytes(32))

    def test_primitives_reproduce_the_machine_messages(self):
        client, server = new_pair()
        run(client, server)
        transcript = client.transcript
        client_ephemeral_public = shs.ephemeral_public(CLIENT_EPHEMERAL)
        server_ephemeral_public = shs.open_hello(MAIN_NETWORK_KEY, transcript["msg2"], step="msg2")
        secrets = {
            "shared_secret_ab": shs.shared_secret_ab(CLIENT_EPHEMERAL, server_ephemeral_public),
            "shared_secret_aB": shs.client_shared_secret_aB(CLIENT_EPHEMERAL, SERVER.public),
        }
        msg3 = shs.client_auth(
            network_key=MAIN_NETWORK_KEY,
            client_keypair=CLIENT,
            server_public=SERVER.public,
            **secrets,
        )
        assert msg3 == transcript["msg3"]
        detached_signature_A, client_public = shs.open_client_auth(
            network_key=MAIN_NETWORK_KEY, server_public=SERVER.public, msg3=msg3, **secrets
        )
        assert client_public == CLIENT.public
        secrets["shared_secret_Ab"] = shs.client_shared_secret_Ab(CLIENT, server_ephemeral_public)
        msg4 = shs.server_accept(
            network_key=MAIN_NETWORK_KEY,
            server_keypair=SERVER,
            detached_signature_A=detached_signature_A,
            client_public=CLIENT.public,
            **secrets,
        )
        assert msg4 == transcript["msg4"]
        shs.open_server_accept(
            network_key=MAIN_NETWORK_KEY,
            server_public=SERVER.public,
            detached_signature_A=detached_signature_A,
            client_public=CLIENT.public,
            msg4=msg4,
            **secrets,
        )
        params = shs.box_stream_params(
            network_key=MAIN_NETWORK_KEY,
            local_public=CLIENT.public,
            peer_public=SERVER.public,
            local_ephemeral_public=client_ephemeral_public,
            peer_ephemeral_public=server_ephemeral_public,
            **secrets,
        )
        assert params == client.result


# --- state machines -------------------------------------------------------------


class TestHandshake:
    def test_message_sizes_and_results(self):
        client, server = new_pair()
        run(client, server)
        assert client.complete and server.complete
        assert not client.failed and not server.failed
        sizes = {step: len(msg) for step, msg in client.transcript.items()}
        assert sizes == {"msg1": 64, "msg2": 64, "msg3": 112, "msg4": 80}
        assert client.transcript == server.transcript
        assert server.client_public == CLIENT.public
        assert client.result.peer_public == SERVER.public
        assert server.result.peer_public == CLIENT.public

    def test_results_mirror_each_other(self):
        client, server = new_pair()
        run(client, server)
        assert client.result.encrypt_key == server.result.decrypt_key
        assert client.result.encrypt_nonce == server.result.decrypt_nonce
        assert client.result.decrypt_key == server.result.encrypt_key
        assert client.result.decrypt_nonce == server.result.encrypt_nonce
        assert client.result.encrypt_key != client.result.decrypt_key
        assert client.result.encrypt_nonce != client.result.decrypt_nonce

    def test_box_stream_nonces_come_from_the_receivers_hello(self):
        client, server = new_pair()
        run(client, server)
        # Client-to-server starts at the server hello's hmac, and vice versa.
        assert client.result.encrypt_nonce == client.transcript["msg2"][:24]
        assert server.result.encrypt_nonce == client.transcript["msg1"][:24]

    def test_params_repr_hides_keys(self):
        client, server = new_pair()
        run(client, server)
        text = repr(client.result)
        assert text == f"BoxStreamParams(peer={SERVER.feed_id})"
        for secret in (client.result.encrypt_key, client.result.decrypt_key):
            assert secret.hex() not in text
            assert repr(secret) not in text

    def test_params_are_frozen(self):
        client, server = new_pair()
        run(client, server)
        with pytest.raises(AttributeError):
            client.result.encrypt_key = bytes(32)  # type: ignore[misc]
        assert isinstance(client.result, BoxStreamParams)

    def test_random_ephemeral_keys_by_default(self):
        first, _ = new_pair(client_ephemeral=None)
        second, _ = new_pair(client_ephemeral=None)
        assert first.data_to_send() != second.data_to_send()
        client, server = new_pair(client_ephemeral=None, server_ephemeral=None)
        run(client, server)
        assert client.complete and server.complete

    @settings(max_examples=examples(40), deadline=None)
    @given(
        client_chunks=st.lists(st.integers(1, 120), min_size=1, max_size=8),
        server_chunks=st.lists(st.integers(1, 120), min_size=1, max_size=8),
        client_ephemeral=st.binary(min_size=32, max_size=32),
        server_ephemeral=st.binary(min_size=32, max_size=32),
    )
    def test_round_trip_with_arbitrary_chunking(
        self, client_chunks, server_chunks, client_ephemeral, server_ephemeral
    ):
        client, server = new_pair(
            client_ephemeral=client_ephemeral, server_ephemeral=server_ephemeral
        )
        msg2 = feed_in_chunks(server, client.data_to_send(), server_chunks)
        msg3 = feed_in_chunks(client, msg2, client_chunks)
        msg4 = feed_in_chunks(server, msg3, server_chunks)
        assert feed_in_chunks(client, msg4, client_chunks) == b""
        assert client.complete and server.complete
        assert client.result.encrypt_key == server.result.decrypt_key
        assert client.trailing_data == b"" and server.trailing_data == b""

    def test_one_byte_at_a_time(self):
        client, server = new_pair()
        replies = bytearray()
        for expected_needed, byte in zip(range(64, 0, -1), client.data_to_send()):
            assert server.bytes_needed == expected_needed
            replies += server.receive_data(bytes([byte]))
        assert len(replies) == 64 and server.bytes_needed == 112
        msg3 = client.receive_data(bytes(replies))
        msg4 = bytearray()
        for byte in msg3:
            msg4 += server.receive_data(bytes([byte]))
        assert server.complete and server.bytes_needed == 0
        for index, byte in enumerate(msg4):
            assert client.bytes_needed == 80 - index
            assert client.receive_data(bytes([byte])) == b""
        assert client.complete and client.bytes_needed == 0

    def test_bytes_beyond_the_handshake_become_trailing_data(self):
        client, server = new_pair()
        msg2 = server.receive_data(client.data_to_send())
        msg3 = client.receive_data(msg2)
        msg4 = server.receive_data(msg3 + b"client box stream")
        assert server.trailing_data == b"client box stream"
        assert client.receive_data(msg4 + b"server box stream") == b""
        assert client.trailing_data == b"server box stream"

    def test_authorize_sees_the_client_key(self):
        seen = []
        client, server = new_pair(authorize=lambda public: seen.append(public) or True)
        run(client, server)
        assert seen == [CLIENT.public]

    def test_unauthorized_client_is_rejected_without_reply(self):
        client, server = new_pair(authorize=lambda public: False)
        msg3 = client.receive_data(server.receive_data(client.data_to_send()))
        with pytest.raises(HandshakeError) as caught:
            server.receive_data(msg3)
        assert (caught.value.step, caught.value.reason) == ("msg3", "unauthorized client")
        assert server.failed and not server.complete
        assert server.client_public == CLIENT.public
        assert "msg4" not in server.transcript

    def test_exception_from_authorize_fails_the_machine(self):
        def authorize(public: bytes) -> bool:
            raise LookupError("database down")

        client, server = new_pair(authorize=authorize)
        msg3 = client.receive_data(server.receive_data(client.data_to_send()))
        with pytest.raises(LookupError):
            server.receive_data(msg3)
        assert server.failed


class TestAttacks:
    def expect_error(self, machine, data: bytes, step: str, reason: str) -> None:
        with pytest.raises(HandshakeError) as caught:
            machine.receive_data(data)
        assert (caught.value.step, caught.value.reason) == (step, reason)
        assert machine.failed and not machine.complete
        assert machine.bytes_needed == 0

    def test_wrong_network_key_at_msg1(self):
        client, server = new_pair(client_network_key=OTHER_NETWORK_KEY)
        self.expect_error(server, client.data_to_send(), "msg1", "hmac mismatch")

    def test_wrong_network_key_at_msg2(self):
        # A server on another network answers a hello it should have refused.
        client, _ = new_pair()
        client.data_to_send()
        msg2 = shs.hello(OTHER_NETWORK_KEY, shs.ephemeral_public(SERVER_EPHEMERAL))
        self.expect_error(client, msg2, "msg2", "hmac mismatch")

    def test_low_order_ephemeral_key_at_msg2(self):
        client, _ = new_pair()
        client.data_to_send()
        self.expect_error(
            client, shs.hello(MAIN_NETWORK_KEY, bytes(32)), "msg2", "invalid ephemeral key"
        )

    def test_client_dialling_the_wrong_server_key_fails_at_msg3(self):
        client, server = new_pair(server_public=OTHER.public)
        msg3 = client.receive_data(server.receive_data(client.data_to_send()))
        self.expect_error(server, msg3, "msg3", "secretbox open failed")

    def test_mitm_substituting_ephemeral_keys_is_detected_at_msg3(self):
        # The attacker knows the network key and swaps in its own ephemeral
        # keys in both directions, but cannot compute a·B, so relaying the
        # client's msg3 to the server fails.
        attacker_to_server = bytes([6]) * 32
        attacker_to_client = bytes([7]) * 32
        client, server = new_pair()
        client.data_to_send()
        server.receive_data(shs.hello(MAIN_NETWORK_KEY, shs.ephemeral_public(attacker_to_server)))
        msg3 = client.receive_data(
            shs.hello(MAIN_NETWORK_KEY, shs.ephemeral_public(attacker_to_client))
        )
        self.expect_error(server, msg3, "msg3", "secretbox open failed")

    @pytest.mark.parametrize("index", [0, 16, 63, 111])
    def test_tampered_msg3(self, index):
        client, server = new_pair()
        msg3 = bytearray(client.receive_data(server.receive_data(client.data_to_send())))
        msg3[index] ^= 0x80
        self.expect_error(server, bytes(msg3), "msg3", "secretbox open failed")

    def test_msg3_replayed_in_another_session(self):
        recorded_client, recorded_server = new_pair()
        run(recorded_client, recorded_server)
        transcript = recorded_client.transcript
        _, server = new_pair(server_ephemeral=bytes([8]) * 32)
        server.receive_data(transcript["msg1"])
        self.expect_error(server, transcript["msg3"], "msg3", "secretbox open failed")

    def test_msg3_with_another_clients_signature(self):
        # Boxed correctly (the attacker holds the ephemeral secret) but signed
        # by OTHER while claiming CLIENT's identity.
        client, server = new_pair()
        client.data_to_send()
        server.receive_data(client.transcript["msg1"])
        server_ephemeral_public = shs.ephemeral_public(SERVER_EPHEMERAL)
        shared_secret_ab = shs.shared_secret_ab(CLIENT_EPHEMERAL, server_ephemeral_public)
        msg3 = shs.box_client_auth(
            network_key=MAIN_NETWORK_KEY,
            shared_secret_ab=shared_secret_ab,
            shared_secret_aB=shs.client_shared_secret_aB(CLIENT_EPHEMERAL, SERVER.public),
            detached_signature_A=shs.client_auth_signature(
                network_key=MAIN_NETWORK_KEY,
                client_keypair=OTHER,
                server_public=SERVER.public,
                shared_secret_ab=shared_secret_ab,
            ),
            client_public=CLIENT.public,
        )
        self.expect_error(server, msg3, "msg3", "bad signature")
        assert server.client_public is None

    def test_tampered_msg4(self):
        client, server = new_pair()
        msg2 = server.receive_data(client.data_to_send())
        msg4 = bytearray(server.receive_data(client.receive_data(msg2)))
        msg4[40] ^= 0x01
        self.expect_error(client, bytes(msg4), "msg4", "secretbox open failed")

    def test_msg4_from_another_session(self):
        recorded_client, recorded_server = new_pair()
        run(recorded_client, recorded_server)
        client, server = new_pair(client_ephemeral=bytes([9]) * 32)
        client.receive_data(server.receive_data(client.data_to_send()))
        recorded_msg4 = recorded_client.transcript["msg4"]
        self.expect_error(client, recorded_msg4, "msg4", "secretbox open failed")


class TestStateErrors:
    def test_result_before_completion(self):
        client, server = new_pair()
        for machine in (client, server):
            assert not machine.complete
            with pytest.raises(RuntimeError):
                _ = machine.result

    def test_client_must_send_msg1_before_receiving(self):
        client, _ = new_pair()
        with pytest.raises(RuntimeError):
            client.receive_data(bytes(64))

    def test_msg1_is_handed_out_once(self):
        client, server = new_pair()
        assert len(client.data_to_send()) == 64
        assert client.data_to_send() == b""
        assert server.data_to_send() == b""

    def test_receiving_after_failure(self):
        _, server = new_pair()
        with pytest.raises(HandshakeError):
            server.receive_data(bytes(64))
        with pytest.raises(RuntimeError):
            server.receive_data(b"")

    def test_receiving_after_completion(self):
        client, server = new_pair()
        run(client, server)
        for machine in (client, server):
            with pytest.raises(RuntimeError):
                machine.receive_data(b"x")

    def test_empty_input_is_harmless(self):
        client, server = new_pair()
        assert server.receive_data(b"") == b""
        assert server.bytes_needed == 64
        client.data_to_send()
        assert client.receive_data(b"") == b""

    @pytest.mark.parametrize(
        "kwargs",
        [
            {"client_network_key": bytes(31)},
            {"client_ephemeral": bytes(31)},
            {"server_public": bytes(31)},
            # 32 bytes, but not the encoding of a usable Ed25519 point.
            {"server_public": bytes(32)},
        ],
    )
    def test_client_constructor_validation(self, kwargs):
        with pytest.raises(ValueError):
            new_pair(**kwargs)

    @pytest.mark.parametrize(
        "kwargs", [{"server_network_key": bytes(33)}, {"server_ephemeral": bytes(16)}]
    )
    def test_server_constructor_validation(self, kwargs):
        with pytest.raises(ValueError):
            new_pair(**kwargs)

"""Tests of reference_impl.ssb.boxstream."""

from __future__ import annotations

import nacl.bindings
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ..fuzz_budget import examples

from reference_impl.ssb.boxstream import (
    HEADER_SIZE,
    MAX_BODY,
    BoxStreamDecoder,
    BoxStreamEncoder,
    BoxStreamError,
    increment_nonce,
    seal_box,
    seal_goodbye,
)
from reference_impl.ssb.keys import MAIN_NETWORK_KEY, Keypair
from reference_impl.ssb.shs import ClientHandshake, ServerHandshake

KEY = bytes(range(32))
NONCE = bytes(range(100, 124))
ALL_ONES_NONCE = b"\xff" * 24


def pair(
    nonce: bytes = NONCE, max_body: int = MAX_BODY
) -> tuple[BoxStreamEncoder, BoxStreamDecoder]:
    return BoxStreamEncoder(KEY, nonce), BoxStreamDecoder(KEY, nonce, max_body)


def flip(data: bytes, index: int) -> bytes:
    mutated = bytearray(data)
    mutated[index] ^= 0x01
    return bytes(mutated)


def nonce_int(value: int) -> bytes:
    return value.to_bytes(24, "big")


class TestIncrementNonce:
    def test_counts_big_endian(self):
        assert increment_nonce(nonce_int(0)) == nonce_int(1)
        assert increment_nonce(nonce_int(0x00FF)) == nonce_int(0x0100)
        assert increment_nonce(nonce_int(5), by=2) == nonce_int(7)

    def test_wraps_modulo_2_192(self):
        assert increment_nonce(ALL_ONES_NONCE) == nonce_int(0)
        assert increment_nonce(ALL_ONES_NONCE, by=3) == nonce_int(2)

    def test_rejects_wrong_length(self):
        with pytest.raises(ValueError):
            increment_nonce(bytes(23))


class TestSealBox:
    def test_layout_follows_the_guide(self):
        header, body_ciphertext = seal_box(KEY, NONCE, b"hello")
        assert len(header) == HEADER_SIZE
        assert len(body_ciphertext) == 5
        header_plaintext = nacl.bindings.crypto_secretbox_open_easy(header, NONCE, KEY)
        assert header_plaintext[:2] == (5).to_bytes(2, "big")
        body_tag = header_plaintext[2:]
        # The body is secret box 2: the nonce after the header's.
        assert (
            nacl.bindings.crypto_secretbox_open_easy(
                body_tag + body_ciphertext, increment_nonce(NONCE), KEY
            )
            == b"hello"
        )

    def test_goodbye_is_eighteen_boxed_zero_bytes(self):
        goodbye = seal_goodbye(KEY, NONCE)
        assert len(goodbye) == HEADER_SIZE
        assert nacl.bindings.crypto_secretbox_open_easy(goodbye, NONCE, KEY) == bytes(18)

    def test_can_forge_oversized_bodies_up_to_the_u16_limit(self):
        header, body_ciphertext = seal_box(KEY, NONCE, bytes(65535))
        assert len(body_ciphertext) == 65535
        with pytest.raises(ValueError):
            seal_box(KEY, NONCE, bytes(65536))


class TestEncoder:
    def test_single_box(self):
        encoder, _ = pair()
        wire = encoder.encode_box(b"hello")
        header, body_ciphertext = seal_box(KEY, NONCE, b"hello")
        assert wire == header + body_ciphertext
        assert encoder.nonce == increment_nonce(NONCE, 2)

    def test_encode_splits_into_boxes_of_at_most_max_body(self):
        encoder, decoder = pair()
        data = bytes(range(256)) * 20  # 5120 bytes
        wire = encoder.encode(data)
        assert len(wire) == 2 * HEADER_SIZE + len(data)
        assert [len(body) for body in decoder.receive_data(wire)] == [MAX_BODY, 5120 - MAX_BODY]
        assert encoder.nonce == increment_nonce(NONCE, 4)

    def test_encode_nothing_emits_nothing(self):
        encoder, _ = pair()
        assert encoder.encode(b"") == b""
        assert encoder.nonce == NONCE

    @pytest.mark.parametrize("size", [0, MAX_BODY + 1])
    def test_encode_box_rejects_out_of_range_bodies(self, size):
        encoder, _ = pair()
        with pytest.raises(ValueError):
            encoder.encode_box(bytes(size))

    def test_goodbye(self):
        encoder, _ = pair()
        goodbye = encoder.goodbye()
        assert goodbye == seal_goodbye(KEY, NONCE)
        assert encoder.ended
        assert encoder.nonce == increment_nonce(NONCE)

    def test_nothing_after_goodbye(self):
        encoder, _ = pair()
        encoder.goodbye()
        with pytest.raises(RuntimeError):
            encoder.encode(b"late")
        with pytest.raises(RuntimeError):
            encoder.goodbye()

    def test_constructor_validation(self):
        with pytest.raises(ValueError):
            BoxStreamEncoder(bytes(31), NONCE)
        with pytest.raises(ValueError):
            BoxStreamDecoder(KEY, bytes(25))

    def test_nonce_wraps(self):
        encoder, decoder = pair(ALL_ONES_NONCE)
        wire = encoder.encode(b"a") + encoder.encode(b"b") + encoder.goodbye()
        assert encoder.nonce == nonce_int(4)
        assert decoder.receive_data(wire) == [b"a", b"b"]
        assert decoder.ended and decoder.nonce == nonce_int(4)


class TestDecoder:
    @settings(max_examples=examples(60), deadline=None)
    @given(
        messages=st.lists(st.binary(min_size=0, max_size=9000), max_size=6),
        chunk_sizes=st.lists(st.integers(1, 5000), min_size=1, max_size=10),
        goodbye=st.booleans(),
    )
    def test_round_trip_with_arbitrary_chunking(self, messages, chunk_sizes, goodbye):
        encoder, decoder = pair()
        wire = b"".join(encoder.encode(message) for message in messages)
        if goodbye:
            wire += encoder.goodbye()
        received = []
        position = index = 0
        while position < len(wire):
            size = chunk_sizes[index % len(chunk_sizes)]
            received += decoder.receive_data(wire[position : position + size])
            position += size
            index += 1
        assert all(0 < len(body) <= MAX_BODY for body in received)
        assert b"".join(received) == b"".join(messages)
        assert decoder.ended == goodbye
        assert decoder.nonce == encoder.nonce

    def test_one_byte_at_a_time(self):
        encoder, decoder = pair()
        wire = encoder.encode_box(b"abc") + encoder.goodbye()
        expected_needed = [34 - i for i in range(34)] + [3, 2, 1] + [34 - i for i in range(34)]
        received = []
        for needed, byte in zip(expected_needed, wire, strict=True):
            assert decoder.bytes_needed == needed
            received += decoder.receive_data(bytes([byte]))
        assert received == [b"abc"]
        assert decoder.ended and decoder.bytes_needed == 0

    def test_truncated_stream_waits_without_error(self):
        encoder, decoder = pair()
        wire = encoder.encode_box(b"hello")
        assert decoder.receive_data(wire[:-1]) == []
        assert decoder.bytes_needed == 1
        assert not decoder.ended and not decoder.failed

    def test_empty_body_box_is_authenticated_and_delivered(self):
        # Conforming senders never emit one, but it is a valid secret box.
        header, body_ciphertext = seal_box(KEY, NONCE, b"")
        _, decoder = pair()
        assert decoder.receive_data(header + body_ciphertext) == [b""]
        assert not decoder.ended

    def test_empty_input_after_goodbye_is_fine(self):
        encoder, decoder = pair()
        decoder.receive_data(encoder.goodbye())
        assert decoder.receive_data(b"") == []


class TestDecoderErrors:
    def expect_error(self, decoder: BoxStreamDecoder, wire: bytes, reason: str) -> BoxStreamError:
        with pytest.raises(BoxStreamError) as caught:
            decoder.receive_data(wire)
        assert caught.value.reason == reason
        assert decoder.failed and decoder.bytes_needed == 0
        return caught.value

    @pytest.mark.parametrize("index", [0, 15, 16, 33])
    def test_tampered_header(self, index):
        encoder, decoder = pair()
        wire = encoder.encode_box(b"hello")
        self.expect_error(decoder, flip(wire, index), "header authentication failed")

    @pytest.mark.parametrize("index", [34, 38])
    def test_tampered_body(self, index):
        encoder, decoder = pair()
        wire = encoder.encode_box(b"hello")
        self.expect_error(decoder, flip(wire, index), "body authentication failed")

    def test_wrong_key(self):
        encoder = BoxStreamEncoder(bytes(32), NONCE)
        _, decoder = pair()
        self.expect_error(decoder, encoder.encode_box(b"x"), "header authentication failed")

    def test_replayed_box(self):
        encoder, decoder = pair()
        box = encoder.encode_box(b"once")
        assert decoder.receive_data(box) == [b"once"]
        self.expect_error(decoder, box, "header authentication failed")

    def test_declared_length_over_max_body_is_rejected_at_the_header(self):
        header, _ = seal_box(KEY, NONCE, bytes(MAX_BODY + 1))
        _, decoder = pair()
        self.expect_error(decoder, header, "body length exceeds 4096")

    def test_custom_max_body(self):
        encoder, decoder = pair(max_body=100)
        assert decoder.receive_data(encoder.encode_box(bytes(100))) == [bytes(100)]
        self.expect_error(decoder, encoder.encode_box(bytes(101)), "body length exceeds 100")

    def test_data_after_goodbye_in_the_same_chunk(self):
        encoder, decoder = pair()
        wire = encoder.encode_box(b"last words") + encoder.goodbye() + b"!"
        error = self.expect_error(decoder, wire, "data after goodbye")
        assert error.bodies == [b"last words"]
        assert decoder.ended

    def test_data_after_goodbye_in_a_later_chunk(self):
        encoder, decoder = pair()
        assert decoder.receive_data(encoder.goodbye()) == []
        assert decoder.ended and decoder.bytes_needed == 0
        self.expect_error(decoder, b"\x00", "data after goodbye")

    def test_error_carries_the_bodies_decoded_before_it(self):
        encoder, decoder = pair()
        wire = encoder.encode(b"one") + encoder.encode(b"two")
        tampered = flip(encoder.encode(b"three"), 0)
        error = self.expect_error(decoder, wire + tampered, "header authentication failed")
        assert error.bodies == [b"one", b"two"]

    def test_stays_failed(self):
        encoder, decoder = pair()
        tampered = flip(encoder.encode_box(b"x"), 0)
        self.expect_error(decoder, tampered, "header authentication failed")
        with pytest.raises(RuntimeError):
            decoder.receive_data(b"")


def test_box_streams_over_a_completed_handshake():
    client_keys = Keypair.from_seed(bytes([1]) * 32)
    server_keys = Keypair.from_seed(bytes([2]) * 32)
    client = ClientHandshake(MAIN_NETWORK_KEY, client_keys, server_keys.public)
    server = ServerHandshake(MAIN_NETWORK_KEY, server_keys)
    msg4 = server.receive_data(client.receive_data(server.receive_data(client.data_to_send())))

    # The server is done once it sends msg4 and may start its stream in the
    # same write; the client finds those bytes in trailing_data.
    server_sends = BoxStreamEncoder(server.result.encrypt_key, server.result.encrypt_nonce)
    client.receive_data(msg4 + server_sends.encode(b"hello client"))
    client_receives = BoxStreamDecoder(client.result.decrypt_key, client.result.decrypt_nonce)
    assert client_receives.receive_data(client.trailing_data) == [b"hello client"]

    client_sends = BoxStreamEncoder(client.result.encrypt_key, client.result.encrypt_nonce)
    server_receives = BoxStreamDecoder(server.result.decrypt_key, server.result.decrypt_nonce)
    wire = client_sends.encode(b"hello server") + client_sends.goodbye()
    assert server_receives.receive_data(wire) == [b"hello server"]
    assert server_receives.ended

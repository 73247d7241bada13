"""The reference implementation against vectors/ssb/shs.json and boxstream.json."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from reference_impl.ssb import shs
from reference_impl.ssb.boxstream import (
    BoxStreamDecoder,
    BoxStreamEncoder,
    BoxStreamError,
    increment_nonce,
    seal_box,
)
from reference_impl.ssb.keys import MAIN_NETWORK_KEY, Keypair

REPO_ROOT = Path(__file__).resolve().parents[2]
VECTORS_DIR = REPO_ROOT / "vectors" / "ssb"
GENERATOR_PATH = REPO_ROOT / "scripts" / "gen_ssb_vectors_shs_box.py"

SHS = json.loads((VECTORS_DIR / "shs.json").read_text(encoding="utf-8"))
BOXSTREAM = json.loads((VECTORS_DIR / "boxstream.json").read_text(encoding="utf-8"))


def h(field: str) -> bytes:
    return bytes.fromhex(field)


def by_id(cases: list[dict]) -> dict:
    return {"argvalues": cases, "ids": [case["id"] for case in cases]}


# --- coverage of the files themselves -----------------------------------------


def test_shs_file_header_and_coverage():
    assert (SHS["protocol"], SHS["component"]) == ("ssb", "shs")
    assert len(SHS["vectors"]) >= 3
    network_keys = [h(vector["network_key"]) for vector in SHS["vectors"]]
    assert MAIN_NETWORK_KEY in network_keys
    assert len(set(network_keys)) == len(network_keys)
    assert {case["step"] for case in SHS["invalid"]} == {"msg1", "msg3"}
    assert {case["step"] for case in SHS["invalid_client"]} == {"msg2", "msg4"}


def test_boxstream_file_header_and_coverage():
    assert (BOXSTREAM["protocol"], BOXSTREAM["component"]) == ("ssb", "boxstream")
    assert {vector["id"] for vector in BOXSTREAM["vectors"]} >= {
        "single-small-body",
        "max-body",
        "split-5000",
        "goodbye-only",
        "nonce-wrap",
    }
    assert {case["reason"] for case in BOXSTREAM["invalid"]} == {
        "header authentication failed",
        "body authentication failed",
        "body length exceeds 4096",
        "data after goodbye",
    }


def test_generator_reproduces_the_committed_files():
    spec = importlib.util.spec_from_file_location("gen_ssb_vectors_shs_box", GENERATOR_PATH)
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert generator.render(generator.shs_document()) == (VECTORS_DIR / "shs.json").read_text()
    assert generator.render(generator.boxstream_document()) == (
        (VECTORS_DIR / "boxstream.json").read_text()
    )


# --- secret handshake -------------------------------------------------------------


@pytest.mark.parametrize("vector", **by_id(SHS["vectors"]))
def test_shs_vector_with_the_state_machines(vector):
    network_key = h(vector["network_key"])
    client_keys = Keypair.from_seed(h(vector["client_seed"]))
    server_keys = Keypair.from_seed(h(vector["server_seed"]))
    assert client_keys.public == h(vector["client_public"])
    assert server_keys.public == h(vector["server_public"])

    client = shs.ClientHandshake(
        network_key, client_keys, server_keys.public, h(vector["client_ephemeral_secret"])
    )
    server = shs.ServerHandshake(network_key, server_keys, h(vector["server_ephemeral_secret"]))
    assert client.data_to_send() == h(vector["msg1"])
    assert server.receive_data(h(vector["msg1"])) == h(vector["msg2"])
    assert client.receive_data(h(vector["msg2"])) == h(vector["msg3"])
    assert server.receive_data(h(vector["msg3"])) == h(vector["msg4"])
    assert client.receive_data(h(vector["msg4"])) == b""

    client_to_server = (h(vector["client_to_server_key"]), h(vector["client_to_server_nonce"]))
    server_to_client = (h(vector["server_to_client_key"]), h(vector["server_to_client_nonce"]))
    assert (client.result.encrypt_key, client.result.encrypt_nonce) == client_to_server
    assert (client.result.decrypt_key, client.result.decrypt_nonce) == server_to_client
    assert (server.result.encrypt_key, server.result.encrypt_nonce) == server_to_client
    assert (server.result.decrypt_key, server.result.decrypt_nonce) == client_to_server
    assert server.client_public == client_keys.public


@pytest.mark.parametrize("vector", **by_id(SHS["vectors"]))
def test_shs_vector_with_the_primitives(vector):
    network_key = h(vector["network_key"])
    client_keys = Keypair.from_seed(h(vector["client_seed"]))
    server_keys = Keypair.from_seed(h(vector["server_seed"]))
    client_ephemeral_secret = h(vector["client_ephemeral_secret"])
    server_ephemeral_secret = h(vector["server_ephemeral_secret"])
    client_ephemeral_public = shs.ephemeral_public(client_ephemeral_secret)
    server_ephemeral_public = shs.ephemeral_public(server_ephemeral_secret)
    assert client_ephemeral_public == h(vector["client_ephemeral_public"])
    assert server_ephemeral_public == h(vector["server_ephemeral_public"])

    assert shs.hello(network_key, client_ephemeral_public) == h(vector["msg1"])
    assert shs.hello(network_key, server_ephemeral_public) == h(vector["msg2"])
    assert shs.open_hello(network_key, h(vector["msg1"])) == client_ephemeral_public

    secrets = {
        "shared_secret_ab": h(vector["shared_secret_ab"]),
        "shared_secret_aB": h(vector["shared_secret_aB"]),
    }
    assert (
        shs.shared_secret_ab(server_ephemeral_secret, client_ephemeral_public)
        == (secrets["shared_secret_ab"])
    )
    assert (
        shs.server_shared_secret_aB(server_keys, client_ephemeral_public)
        == (secrets["shared_secret_aB"])
    )
    assert shs.server_shared_secret_Ab(server_ephemeral_secret, client_keys.public) == (
        h(vector["shared_secret_Ab"])
    )

    detached_signature_A, client_public = shs.open_client_auth(
        network_key=network_key, server_public=server_keys.public, msg3=h(vector["msg3"]), **secrets
    )
    assert client_public == client_keys.public
    secrets["shared_secret_Ab"] = h(vector["shared_secret_Ab"])
    shs.open_server_accept(
        network_key=network_key,
        server_public=server_keys.public,
        detached_signature_A=detached_signature_A,
        client_public=client_public,
        msg4=h(vector["msg4"]),
        **secrets,
    )


def _feed_expecting_error(machine, input_bytes: bytes, expected_reply: bytes, case: dict) -> None:
    reply = b""
    with pytest.raises(shs.HandshakeError) as caught:
        reply = machine.receive_data(input_bytes[: shs.HELLO_SIZE])
        machine.receive_data(input_bytes[shs.HELLO_SIZE :])
    assert (caught.value.step, caught.value.reason) == (case["step"], case["reason"])
    assert reply == expected_reply
    assert machine.failed


def _server_for(case: dict) -> shs.ServerHandshake:
    server_keys = Keypair.from_seed(h(case["server_seed"]))
    assert server_keys.public == h(case["server_public"])
    return shs.ServerHandshake(
        h(case["network_key"]), server_keys, h(case["server_ephemeral_secret"])
    )


def _client_for(case: dict) -> shs.ClientHandshake:
    client_keys = Keypair.from_seed(h(case["client_seed"]))
    assert client_keys.public == h(case["client_public"])
    client = shs.ClientHandshake(
        h(case["network_key"]),
        client_keys,
        h(case["server_public"]),
        h(case["client_ephemeral_secret"]),
    )
    assert client.data_to_send() == h(case["msg1"])
    return client


@pytest.mark.parametrize("case", **by_id(SHS["invalid"]))
def test_shs_invalid_server_case(case):
    _feed_expecting_error(_server_for(case), h(case["input_hex"]), h(case["output_hex"]), case)


@pytest.mark.parametrize("case", **by_id(SHS["invalid"]))
def test_shs_invalid_server_case_byte_by_byte(case):
    server = _server_for(case)
    with pytest.raises(shs.HandshakeError) as caught:
        for byte in h(case["input_hex"]):
            server.receive_data(bytes([byte]))
    assert (caught.value.step, caught.value.reason) == (case["step"], case["reason"])


@pytest.mark.parametrize("case", **by_id(SHS["invalid_client"]))
def test_shs_invalid_client_case(case):
    _feed_expecting_error(_client_for(case), h(case["input_hex"]), h(case["output_hex"]), case)


# --- box stream -------------------------------------------------------------------


@pytest.mark.parametrize("vector", **by_id(BOXSTREAM["vectors"]))
def test_boxstream_vector_encoding(vector):
    key, nonce = h(vector["key"]), h(vector["nonce"])
    encoder = BoxStreamEncoder(key, nonce)
    wire = b"".join(encoder.encode(h(body)) for body in vector["bodies"])
    expected_boxes = b"".join(h(box["header"]) + h(box["body"]) for box in vector["boxes"])
    assert wire == expected_boxes
    if vector["goodbye"]:
        goodbye = encoder.goodbye()
        assert goodbye == h(vector["goodbye_header"])
        wire += goodbye
    else:
        assert vector["goodbye_header"] is None
    assert wire == h(vector["wire"])


@pytest.mark.parametrize("vector", **by_id(BOXSTREAM["vectors"]))
def test_boxstream_vector_box_by_box(vector):
    key, nonce = h(vector["key"]), h(vector["nonce"])
    decoder = BoxStreamDecoder(key, nonce)
    plaintext = b"".join(h(body) for body in vector["bodies"])
    received = []
    for box in vector["boxes"]:
        header, body_ciphertext = h(box["header"]), h(box["body"])
        (body,) = decoder.receive_data(header + body_ciphertext)
        # Each box uses two nonces: one for its header, one for its body.
        header_nonce = increment_nonce(nonce, 2 * len(received))
        assert seal_box(key, header_nonce, body) == (
            header,
            body_ciphertext,
        )
        received.append(body)
    assert b"".join(received) == plaintext


@pytest.mark.parametrize("chunk_size", [1, 7, 34, 4130, 1 << 20])
@pytest.mark.parametrize("vector", **by_id(BOXSTREAM["vectors"]))
def test_boxstream_vector_decoding(vector, chunk_size):
    decoder = BoxStreamDecoder(h(vector["key"]), h(vector["nonce"]))
    wire = h(vector["wire"])
    received = []
    for start in range(0, len(wire), chunk_size):
        received += decoder.receive_data(wire[start : start + chunk_size])
    assert b"".join(received) == b"".join(h(body) for body in vector["bodies"])
    assert len(received) == len(vector["boxes"])
    assert decoder.ended == vector["goodbye"]


@pytest.mark.parametrize("case", **by_id(BOXSTREAM["invalid"]))
def test_boxstream_invalid_case(case):
    decoder = BoxStreamDecoder(h(case["key"]), h(case["nonce"]))
    with pytest.raises(BoxStreamError) as caught:
        decoder.receive_data(h(case["wire"]))
    assert caught.value.reason == case["reason"]
    assert caught.value.bodies == [h(body) for body in case["bodies_before_error"]]
    assert decoder.failed


@pytest.mark.parametrize("case", **by_id(BOXSTREAM["invalid"]))
def test_boxstream_invalid_case_byte_by_byte(case):
    decoder = BoxStreamDecoder(h(case["key"]), h(case["nonce"]))
    received = []
    with pytest.raises(BoxStreamError) as caught:
        for byte in h(case["wire"]):
            received += decoder.receive_data(bytes([byte]))
    assert caught.value.reason == case["reason"]
    assert received == [h(body) for body in case["bodies_before_error"]]

#!/usr/bin/env python3
"""Generate vectors/ssb/shs.json and vectors/ssb/boxstream.json.

Every key, nonce and payload comes from a fixed label through SHA-256 or
SHAKE-256, so running this again produces byte-identical files. The files are
committed; tests check the reference implementation against them and that
this script still reproduces them. vectors/ssb/README.md documents the layout.

Usage: scripts/gen_ssb_vectors_shs_box.py [--check]
  --check   write nothing; exit 1 if the committed files differ from what
            this script generates
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from conformance.core.vector_files import write_or_check  # noqa: E402

from reference_impl.ssb import shs  # noqa: E402
from reference_impl.ssb.boxstream import (  # noqa: E402
    HEADER_SIZE,
    MAX_BODY,
    BoxStreamDecoder,
    BoxStreamEncoder,
    BoxStreamError,
    increment_nonce,
    seal_box,
    seal_goodbye,
)
from reference_impl.ssb.keys import MAIN_NETWORK_KEY, Keypair  # noqa: E402

VECTORS_DIR = REPO_ROOT / "vectors" / "ssb"
SHS_PATH = VECTORS_DIR / "shs.json"
BOXSTREAM_PATH = VECTORS_DIR / "boxstream.json"

_LABEL_PREFIX = b"ssb-conformance-vectors/"


def derive(label: str) -> bytes:
    """32 fixed bytes named by ``label``."""
    return hashlib.sha256(_LABEL_PREFIX + label.encode()).digest()


def derive_bytes(label: str, size: int) -> bytes:
    """``size`` fixed bytes named by ``label`` (for payloads)."""
    return hashlib.shake_256(_LABEL_PREFIX + label.encode()).digest(size)


def flip_bit(data: bytes, index: int) -> bytes:
    """``data`` with the lowest bit of byte ``index`` inverted."""
    mutated = bytearray(data)
    mutated[index] ^= 0x01
    return bytes(mutated)


# --- Secret handshake ---------------------------------------------------------


def run_handshake(
    network_key: bytes,
    client: Keypair,
    server: Keypair,
    client_ephemeral_secret: bytes,
    server_ephemeral_secret: bytes,
) -> tuple[shs.ClientHandshake, shs.ServerHandshake]:
    client_machine = shs.ClientHandshake(
        network_key, client, server.public, client_ephemeral_secret
    )
    server_machine = shs.ServerHandshake(network_key, server, server_ephemeral_secret)
    msg2 = server_machine.receive_data(client_machine.data_to_send())
    msg4 = server_machine.receive_data(client_machine.receive_data(msg2))
    client_machine.receive_data(msg4)
    assert client_machine.complete and server_machine.complete
    return client_machine, server_machine


def shs_vector(
    vector_id: str,
    description: str,
    network_key: bytes,
    client_seed: bytes,
    server_seed: bytes,
) -> dict[str, str]:
    client = Keypair.from_seed(client_seed)
    server = Keypair.from_seed(server_seed)
    client_ephemeral_secret = derive(f"shs/{vector_id}/client_ephemeral_secret")
    server_ephemeral_secret = derive(f"shs/{vector_id}/server_ephemeral_secret")
    client_ephemeral_public = shs.ephemeral_public(client_ephemeral_secret)
    server_ephemeral_public = shs.ephemeral_public(server_ephemeral_secret)
    client_machine, server_machine = run_handshake(
        network_key, client, server, client_ephemeral_secret, server_ephemeral_secret
    )
    transcript = client_machine.transcript
    assert transcript == server_machine.transcript

    # The shared secrets are not exposed by the machines, so compute them with
    # the primitives, once from each side, and require agreement.
    shared_secret_ab = shs.shared_secret_ab(client_ephemeral_secret, server_ephemeral_public)
    shared_secret_aB = shs.client_shared_secret_aB(client_ephemeral_secret, server.public)
    shared_secret_Ab = shs.client_shared_secret_Ab(client, server_ephemeral_public)
    assert shared_secret_ab == shs.shared_secret_ab(
        server_ephemeral_secret, client_ephemeral_public
    )
    assert shared_secret_aB == shs.server_shared_secret_aB(server, client_ephemeral_public)
    assert shared_secret_Ab == shs.server_shared_secret_Ab(server_ephemeral_secret, client.public)

    client_params = client_machine.result
    server_params = server_machine.result
    assert client_params.encrypt_key == server_params.decrypt_key
    assert client_params.encrypt_nonce == server_params.decrypt_nonce
    assert server_params.encrypt_key == client_params.decrypt_key
    assert server_params.encrypt_nonce == client_params.decrypt_nonce

    return {
        "id": vector_id,
        "description": description,
        "network_key": network_key.hex(),
        "client_seed": client_seed.hex(),
        "client_public": client.public.hex(),
        "server_seed": server_seed.hex(),
        "server_public": server.public.hex(),
        "client_ephemeral_secret": client_ephemeral_secret.hex(),
        "client_ephemeral_public": client_ephemeral_public.hex(),
        "server_ephemeral_secret": server_ephemeral_secret.hex(),
        "server_ephemeral_public": server_ephemeral_public.hex(),
        "msg1": transcript["msg1"].hex(),
        "msg2": transcript["msg2"].hex(),
        "msg3": transcript["msg3"].hex(),
        "msg4": transcript["msg4"].hex(),
        "shared_secret_ab": shared_secret_ab.hex(),
        "shared_secret_aB": shared_secret_aB.hex(),
        "shared_secret_Ab": shared_secret_Ab.hex(),
        "client_to_server_key": client_params.encrypt_key.hex(),
        "client_to_server_nonce": client_params.encrypt_nonce.hex(),
        "server_to_client_key": server_params.encrypt_key.hex(),
        "server_to_client_nonce": server_params.encrypt_nonce.hex(),
    }


def shs_vectors() -> list[dict[str, str]]:
    return [
        shs_vector(
            "main-network",
            "Handshake on the main Scuttlebutt network.",
            MAIN_NETWORK_KEY,
            derive("shs/main-network/client_seed"),
            derive("shs/main-network/server_seed"),
        ),
        shs_vector(
            "private-network",
            "Handshake on a private network with its own network key.",
            derive("shs/private-network/network_key"),
            derive("shs/private-network/client_seed"),
            derive("shs/private-network/server_seed"),
        ),
        shs_vector(
            "extreme-seeds",
            "Another network key; client seed all zero bytes, server seed all 0xff bytes.",
            derive("shs/extreme-seeds/network_key"),
            bytes(32),
            b"\xff" * 32,
        ),
    ]


class _HandshakeSession:
    """The secrets of one honest handshake, for forging messages from them."""

    def __init__(
        self,
        network_key: bytes,
        client: Keypair,
        server: Keypair,
        client_ephemeral_secret: bytes,
        server_ephemeral_secret: bytes,
    ) -> None:
        self.network_key = network_key
        self.client = client
        self.server = server
        self.client_ephemeral_secret = client_ephemeral_secret
        self.server_ephemeral_secret = server_ephemeral_secret
        self.client_ephemeral_public = shs.ephemeral_public(client_ephemeral_secret)
        self.server_ephemeral_public = shs.ephemeral_public(server_ephemeral_secret)
        self.msg1 = shs.hello(network_key, self.client_ephemeral_public)
        self.msg2 = shs.hello(network_key, self.server_ephemeral_public)
        self.shared_secret_ab = shs.shared_secret_ab(
            client_ephemeral_secret, self.server_ephemeral_public
        )
        self.shared_secret_aB = shs.client_shared_secret_aB(client_ephemeral_secret, server.public)
        self.shared_secret_Ab = shs.client_shared_secret_Ab(client, self.server_ephemeral_public)
        self.detached_signature_A = self.client_signature()
        self.msg3 = self.box_msg3(self.detached_signature_A)

    def client_signature(
        self,
        *,
        network_key: bytes | None = None,
        server_public: bytes | None = None,
        signer: Keypair | None = None,
    ) -> bytes:
        """detached_signature_A, optionally over the wrong data or by the wrong key."""
        return shs.client_auth_signature(
            network_key=self.network_key if network_key is None else network_key,
            client_keypair=self.client if signer is None else signer,
            server_public=self.server.public if server_public is None else server_public,
            shared_secret_ab=self.shared_secret_ab,
        )

    def box_msg3(
        self,
        detached_signature_A: bytes,
        *,
        network_key: bytes | None = None,
        shared_secret_aB: bytes | None = None,
    ) -> bytes:
        """msg3 around a signature, optionally under the wrong box key."""
        return shs.box_client_auth(
            network_key=self.network_key if network_key is None else network_key,
            shared_secret_ab=self.shared_secret_ab,
            shared_secret_aB=(
                self.shared_secret_aB if shared_secret_aB is None else shared_secret_aB
            ),
            detached_signature_A=detached_signature_A,
            client_public=self.client.public,
        )

    def server_signature(
        self, *, signer: Keypair | None = None, detached_signature_A: bytes | None = None
    ) -> bytes:
        """detached_signature_B, optionally by the wrong key or over the wrong data."""
        return shs.server_accept_signature(
            network_key=self.network_key,
            server_keypair=self.server if signer is None else signer,
            detached_signature_A=(
                self.detached_signature_A if detached_signature_A is None else detached_signature_A
            ),
            client_public=self.client.public,
            shared_secret_ab=self.shared_secret_ab,
        )

    def box_msg4(self, detached_signature_B: bytes) -> bytes:
        return shs.box_server_accept(
            network_key=self.network_key,
            shared_secret_ab=self.shared_secret_ab,
            shared_secret_aB=self.shared_secret_aB,
            shared_secret_Ab=self.shared_secret_Ab,
            detached_signature_B=detached_signature_B,
        )


def _main_network_session(
    server_ephemeral_label: str = "server_ephemeral_secret",
) -> _HandshakeSession:
    return _HandshakeSession(
        MAIN_NETWORK_KEY,
        Keypair.from_seed(derive("shs/invalid/client_seed")),
        Keypair.from_seed(derive("shs/invalid/server_seed")),
        derive("shs/invalid/client_ephemeral_secret"),
        derive(f"shs/invalid/{server_ephemeral_label}"),
    )


def _reply_before_error(
    machine: shs.ClientHandshake | shs.ServerHandshake, input_bytes: bytes, step: str, reason: str
) -> bytes:
    """Feed the peer's hello, then the rest; check the error; return the reply to the hello.

    The reply is b"" when the hello itself is rejected.
    """
    reply = b""
    try:
        reply = machine.receive_data(input_bytes[: shs.HELLO_SIZE])
        machine.receive_data(input_bytes[shs.HELLO_SIZE :])
    except shs.HandshakeError as error:
        if (error.step, error.reason) != (step, reason):
            raise AssertionError(f"expected ({step}, {reason}), got {error}") from error
        return reply
    raise AssertionError(f"no HandshakeError ({step}, {reason})")


def invalid_server_case(
    session: _HandshakeSession,
    case_id: str,
    description: str,
    input_bytes: bytes,
    step: str,
    reason: str,
) -> dict[str, str]:
    machine = shs.ServerHandshake(
        session.network_key, session.server, session.server_ephemeral_secret
    )
    output = _reply_before_error(machine, input_bytes, step, reason)
    return {
        "id": case_id,
        "description": description,
        "network_key": session.network_key.hex(),
        "server_seed": session.server.seed.hex(),
        "server_public": session.server.public.hex(),
        "server_ephemeral_secret": session.server_ephemeral_secret.hex(),
        "server_ephemeral_public": session.server_ephemeral_public.hex(),
        "step": step,
        "input_hex": input_bytes.hex(),
        "output_hex": output.hex(),
        "reason": reason,
    }


def invalid_client_case(
    session: _HandshakeSession,
    case_id: str,
    description: str,
    input_bytes: bytes,
    step: str,
    reason: str,
) -> dict[str, str]:
    machine = shs.ClientHandshake(
        session.network_key, session.client, session.server.public, session.client_ephemeral_secret
    )
    msg1 = machine.data_to_send()
    output = _reply_before_error(machine, input_bytes, step, reason)
    return {
        "id": case_id,
        "description": description,
        "network_key": session.network_key.hex(),
        "client_seed": session.client.seed.hex(),
        "client_public": session.client.public.hex(),
        "client_ephemeral_secret": session.client_ephemeral_secret.hex(),
        "client_ephemeral_public": session.client_ephemeral_public.hex(),
        "server_public": session.server.public.hex(),
        "msg1": msg1.hex(),
        "step": step,
        "input_hex": input_bytes.hex(),
        "output_hex": output.hex(),
        "reason": reason,
    }


def shs_invalid_server_cases() -> list[dict[str, str]]:
    session = _main_network_session()
    other_network_key = derive("shs/invalid/other_network_key")
    other_keypair = Keypair.from_seed(derive("shs/invalid/other_seed"))
    other_server_aB = shs.client_shared_secret_aB(
        session.client_ephemeral_secret, other_keypair.public
    )
    replayed = _main_network_session("replay_server_ephemeral_secret")
    cases = [
        (
            session,
            "msg1-hmac-bit-flipped",
            "Client hello whose hmac has one bit flipped.",
            flip_bit(session.msg1, 0),
            "msg1",
            "hmac mismatch",
        ),
        (
            session,
            "msg1-ephemeral-key-bit-flipped",
            "Client hello whose ephemeral key has one bit flipped, so the hmac no longer matches.",
            flip_bit(session.msg1, 40),
            "msg1",
            "hmac mismatch",
        ),
        (
            session,
            "msg1-wrong-network-key",
            "Client hello authenticated with a different network key.",
            shs.hello(other_network_key, session.client_ephemeral_public),
            "msg1",
            "hmac mismatch",
        ),
        (
            session,
            "msg1-low-order-ephemeral-key",
            "Correctly authenticated client hello whose ephemeral key is the all-zero "
            "point, which makes every shared secret zero.",
            shs.hello(session.network_key, bytes(32)),
            "msg1",
            "invalid ephemeral key",
        ),
        (
            session,
            "msg3-wrong-network-key",
            "Valid client hello, then a msg3 boxed and signed under a different network key.",
            session.msg1
            + session.box_msg3(
                session.client_signature(network_key=other_network_key),
                network_key=other_network_key,
            ),
            "msg3",
            "secretbox open failed",
        ),
        (
            session,
            "msg3-wrong-server-key",
            "The client believes the server has another long-term key, so its a·B "
            "differs and the server cannot open msg3 (MITM without the server's key).",
            session.msg1
            + session.box_msg3(
                session.client_signature(server_public=other_keypair.public),
                shared_secret_aB=other_server_aB,
            ),
            "msg3",
            "secretbox open failed",
        ),
        (
            session,
            "msg3-ciphertext-bit-flipped",
            "Honest msg3 with one bit of the ciphertext flipped.",
            session.msg1 + flip_bit(session.msg3, 50),
            "msg3",
            "secretbox open failed",
        ),
        (
            session,
            "msg3-signature-over-wrong-server-key",
            "msg3 boxed with the right secrets, but the client signed another server key.",
            session.msg1
            + session.box_msg3(session.client_signature(server_public=other_keypair.public)),
            "msg3",
            "bad signature",
        ),
        (
            session,
            "msg3-signed-by-other-key",
            "msg3 claims the client's key but the signature was made by another key.",
            session.msg1 + session.box_msg3(session.client_signature(signer=other_keypair)),
            "msg3",
            "bad signature",
        ),
        (
            replayed,
            "msg3-replayed",
            "msg1 and msg3 recorded from an honest session with this server, replayed to it "
            "in a new session where it uses a fresh ephemeral key.",
            session.msg1 + session.msg3,
            "msg3",
            "secretbox open failed",
        ),
    ]
    return [invalid_server_case(*case) for case in cases]


def shs_invalid_client_cases() -> list[dict[str, str]]:
    session = _main_network_session()
    other_network_key = derive("shs/invalid/other_network_key")
    other_keypair = Keypair.from_seed(derive("shs/invalid/other_seed"))
    cases = [
        (
            "msg2-hmac-bit-flipped",
            "Server hello whose hmac has one bit flipped.",
            flip_bit(session.msg2, 31),
            "msg2",
            "hmac mismatch",
        ),
        (
            "msg2-wrong-network-key",
            "Server hello authenticated with a different network key.",
            shs.hello(other_network_key, session.server_ephemeral_public),
            "msg2",
            "hmac mismatch",
        ),
        (
            "msg2-low-order-ephemeral-key",
            "Correctly authenticated server hello whose ephemeral key is the all-zero point.",
            shs.hello(session.network_key, bytes(32)),
            "msg2",
            "invalid ephemeral key",
        ),
        (
            "msg4-ciphertext-bit-flipped",
            "Honest msg4 with one bit of the ciphertext flipped.",
            session.msg2 + flip_bit(session.box_msg4(session.server_signature()), 20),
            "msg4",
            "secretbox open failed",
        ),
        (
            "msg4-signed-by-other-key",
            "msg4 boxed with the right secrets but signed by a key other than the server's.",
            session.msg2 + session.box_msg4(session.server_signature(signer=other_keypair)),
            "msg4",
            "bad signature",
        ),
        (
            "msg4-signature-over-wrong-data",
            "msg4 signed by the server over a different detached_signature_A.",
            session.msg2
            + session.box_msg4(
                session.server_signature(
                    detached_signature_A=flip_bit(session.detached_signature_A, 0)
                )
            ),
            "msg4",
            "bad signature",
        ),
    ]
    return [invalid_client_case(session, *case) for case in cases]


def shs_document() -> dict[str, object]:
    return {
        "protocol": "ssb",
        "component": "shs",
        "spec": "scuttlebutt-protocol-guide, Handshake",
        "vectors": shs_vectors(),
        "invalid": shs_invalid_server_cases(),
        "invalid_client": shs_invalid_client_cases(),
    }


# --- Box stream -------------------------------------------------------------------


def boxstream_vector(
    vector_id: str, description: str, nonce: bytes, bodies: list[bytes], goodbye: bool
) -> dict[str, object]:
    key = derive(f"boxstream/{vector_id}/key")
    encoder = BoxStreamEncoder(key, nonce)
    boxes = []
    for body in bodies:
        for start in range(0, len(body), MAX_BODY):
            box = encoder.encode_box(body[start : start + MAX_BODY])
            boxes.append({"header": box[:HEADER_SIZE].hex(), "body": box[HEADER_SIZE:].hex()})
    goodbye_header = encoder.goodbye() if goodbye else None
    wire = b"".join(bytes.fromhex(box["header"] + box["body"]) for box in boxes)
    if goodbye_header is not None:
        wire += goodbye_header

    decoder = BoxStreamDecoder(key, nonce)
    assert b"".join(decoder.receive_data(wire)) == b"".join(bodies)
    assert decoder.ended == goodbye

    return {
        "id": vector_id,
        "description": description,
        "key": key.hex(),
        "nonce": nonce.hex(),
        "bodies": [body.hex() for body in bodies],
        "goodbye": goodbye,
        "boxes": boxes,
        "goodbye_header": goodbye_header.hex() if goodbye_header is not None else None,
        "wire": wire.hex(),
    }


def boxstream_vectors() -> list[dict[str, object]]:
    def nonce(vector_id: str) -> bytes:
        return derive(f"boxstream/{vector_id}/nonce")[:24]

    return [
        boxstream_vector(
            "single-small-body",
            "One short body, then goodbye.",
            nonce("single-small-body"),
            [b"hello, box stream"],
            True,
        ),
        boxstream_vector(
            "several-bodies",
            "Bodies of 1, 100 and 4095 bytes, then goodbye.",
            nonce("several-bodies"),
            [derive_bytes(f"boxstream/several-bodies/{size}", size) for size in (1, 100, 4095)],
            True,
        ),
        boxstream_vector(
            "max-body",
            "One body of exactly 4096 bytes, the largest allowed, then goodbye.",
            nonce("max-body"),
            [derive_bytes("boxstream/max-body", 4096)],
            True,
        ),
        boxstream_vector(
            "split-5000",
            "A 5000-byte write, sent as a 4096-byte box and a 904-byte box.",
            nonce("split-5000"),
            [derive_bytes("boxstream/split-5000", 5000)],
            True,
        ),
        boxstream_vector(
            "goodbye-only",
            "An empty stream: just the goodbye header.",
            nonce("goodbye-only"),
            [],
            True,
        ),
        boxstream_vector(
            "nonce-wrap",
            "Starting nonce 0xff..ff: the first body uses 00..00 and the nonce keeps "
            "counting from there (wrap modulo 2^192).",
            b"\xff" * 24,
            [b"before wrap", b"after wrap"],
            True,
        ),
        boxstream_vector(
            "nonce-carry",
            "Starting nonce ending in 00ffff, so incrementing carries across bytes.",
            bytes(21) + b"\x00\xff\xff",
            [b"first", b"second"],
            True,
        ),
        boxstream_vector(
            "no-goodbye",
            "One body and no goodbye: a stream cut off cleanly between boxes.",
            nonce("no-goodbye"),
            [b"unfinished"],
            False,
        ),
    ]


def boxstream_invalid_case(
    case_id: str,
    description: str,
    key: bytes,
    nonce: bytes,
    wire: bytes,
    reason: str,
) -> dict[str, object]:
    try:
        BoxStreamDecoder(key, nonce).receive_data(wire)
    except BoxStreamError as error:
        assert error.reason == reason, error
        bodies_before_error = error.bodies
    else:
        raise AssertionError(f"{case_id}: no BoxStreamError")
    return {
        "id": case_id,
        "description": description,
        "key": key.hex(),
        "nonce": nonce.hex(),
        "wire": wire.hex(),
        "reason": reason,
        "bodies_before_error": [body.hex() for body in bodies_before_error],
    }


def boxstream_invalid_cases() -> list[dict[str, object]]:
    key = derive("boxstream/invalid/key")
    other_key = derive("boxstream/invalid/other_key")
    nonce = derive("boxstream/invalid/nonce")[:24]
    first_body, second_body = b"first body", b"second body"

    def box(body: bytes, box_nonce: bytes, box_key: bytes = key) -> bytes:
        header, body_ciphertext = seal_box(box_key, box_nonce, body)
        return header + body_ciphertext

    first_box = box(first_body, nonce)
    second_nonce = increment_nonce(nonce, 2)
    second_box = box(second_body, second_nonce)
    goodbye_after_first = seal_goodbye(key, second_nonce)
    cases = [
        (
            "tampered-header",
            "One bit of the first header flipped.",
            flip_bit(first_box, 20),
            "header authentication failed",
        ),
        (
            "tampered-body",
            "One bit of the first body ciphertext flipped.",
            flip_bit(first_box, HEADER_SIZE + 3),
            "body authentication failed",
        ),
        (
            "tampered-second-header",
            "A valid box, then a box whose header has one bit flipped.",
            first_box + flip_bit(second_box, 0),
            "header authentication failed",
        ),
        (
            "declared-length-4097",
            "A header correctly sealed with the stream key declaring a 4097-byte body.",
            box(derive_bytes("boxstream/invalid/4097", 4097), nonce),
            "body length exceeds 4096",
        ),
        (
            "wrong-key",
            "A box sealed with a different key.",
            box(first_body, nonce, other_key),
            "header authentication failed",
        ),
        (
            "boxes-reordered",
            "The second box sent before the first (nonce mismatch).",
            second_box + first_box,
            "header authentication failed",
        ),
        (
            "tampered-goodbye",
            "A valid box, then a goodbye header with one bit flipped.",
            first_box + flip_bit(goodbye_after_first, 33),
            "header authentication failed",
        ),
        (
            "data-after-goodbye",
            "A valid box, the goodbye, then one more byte.",
            first_box + goodbye_after_first + b"\x00",
            "data after goodbye",
        ),
        (
            "box-after-goodbye",
            "The goodbye, then a box correctly sealed with the next nonce.",
            seal_goodbye(key, nonce) + box(first_body, increment_nonce(nonce)),
            "data after goodbye",
        ),
    ]
    return [
        boxstream_invalid_case(case_id, description, key, nonce, wire, reason)
        for case_id, description, wire, reason in cases
    ]


def boxstream_document() -> dict[str, object]:
    return {
        "protocol": "ssb",
        "component": "boxstream",
        "spec": "scuttlebutt-protocol-guide, Box stream",
        "vectors": boxstream_vectors(),
        "invalid": boxstream_invalid_cases(),
    }


def render(document: dict[str, object]) -> str:
    return json.dumps(document, indent=2) + "\n"


def main() -> int:
    return write_or_check(
        __doc__.splitlines()[0],
        lambda: {SHS_PATH: render(shs_document()), BOXSTREAM_PATH: render(boxstream_document())},
    )


if __name__ == "__main__":
    sys.exit(main())

"""Secret handshake (SHS): the primitives and a sans-I/O state machine per role.

Follows "Handshake" in scuttlebutt-protocol-guide. Names mirror the guide:
``a``/``b`` are the client's/server's ephemeral Curve25519 keys, ``A``/``B``
their long-term Ed25519 keys, ``N`` the network identifier.

The module has two layers:

* Pure functions, one per message (``hello``, ``client_auth``,
  ``server_accept``, their ``open_*`` counterparts and the shared-secret
  helpers). Conformance suites call them directly to forge or mutate
  individual messages, so the lower-level ``box_*`` and ``*_signature``
  functions let a caller put arbitrary signatures or keys into a message.
* :class:`ClientHandshake` and :class:`ServerHandshake`: bytes in, bytes out,
  no I/O, no clock. They accept input in any chunking.

Errors caused by the peer raise :class:`HandshakeError`; calling a machine in
the wrong state (a caller bug) raises RuntimeError.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import nacl.bindings
import nacl.exceptions
import nacl.utils

from ..faults import FaultPoints
from .faults import SPECS as FAULT_SPECS
from .faults import Fault
from .keys import Keypair, public_to_feed_id, verify_signature

NETWORK_KEY_SIZE = 32
EPHEMERAL_KEY_SIZE = 32
HELLO_SIZE = 64
CLIENT_AUTH_SIZE = 112
SERVER_ACCEPT_SIZE = 80

_HMAC_SIZE = 32
_SIGNATURE_SIZE = 64
_PUBLIC_KEY_SIZE = 32
_BOX_STREAM_NONCE_SIZE = 24
# Each handshake secret box key is used for exactly one box, which is why the
# guide can use an all-zero nonce for both of them.
_ZERO_NONCE = bytes(24)


class HandshakeError(Exception):
    """The peer sent a handshake message that must be rejected.

    Attributes:
        step: the message being processed, ``"msg1"`` to ``"msg4"``.
        reason: a short, stable description such as ``"hmac mismatch"``.
    """

    def __init__(self, step: str, reason: str) -> None:
        super().__init__(f"{step}: {reason}")
        self.step = step
        self.reason = reason


def _sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def nacl_auth(key: bytes, msg: bytes) -> bytes:
    """libsodium's ``crypto_auth``: HMAC-SHA-512 truncated to 32 bytes.

    PyNaCl does not expose ``crypto_auth``, and HMAC-SHA-512-256 is exactly the
    first half of HMAC-SHA-512, so the standard library computes it.
    """
    return hmac.new(key, msg, hashlib.sha512).digest()[:_HMAC_SIZE]


def _scalarmult(secret: bytes, public: bytes) -> bytes:
    try:
        return nacl.bindings.crypto_scalarmult(secret, public)
    except nacl.exceptions.RuntimeError:
        # libsodium refuses points of small order, whose product is all zeros:
        # such a "shared secret" would be known to anyone.
        raise ValueError("scalar multiplication with a low-order point") from None


def _ed25519_public_to_curve25519(public: bytes) -> bytes:
    try:
        return nacl.bindings.crypto_sign_ed25519_pk_to_curve25519(public)
    except nacl.exceptions.CryptoError:
        raise ValueError("not a usable Ed25519 public key") from None


def generate_ephemeral_secret() -> bytes:
    """A fresh random Curve25519 secret key for one handshake."""
    return nacl.utils.random(EPHEMERAL_KEY_SIZE)


def ephemeral_public(ephemeral_secret: bytes) -> bytes:
    """The Curve25519 public key of an ephemeral secret key."""
    return nacl.bindings.crypto_scalarmult_base(ephemeral_secret)


# --- Messages 1 and 2: hello -------------------------------------------------


def hello(network_key: bytes, ephemeral_public: bytes) -> bytes:
    """Message 1 (client hello) or 2 (server hello): ``hmac_N(eph) || eph``."""
    return nacl_auth(network_key, ephemeral_public) + ephemeral_public


def hello_is_authentic(network_key: bytes, msg: bytes) -> bool:
    """Whether a hello's HMAC is its ephemeral key's under ``network_key``."""
    tag, peer_ephemeral_public = msg[:_HMAC_SIZE], msg[_HMAC_SIZE:]
    return hmac.compare_digest(tag, nacl_auth(network_key, peer_ephemeral_public))


def open_hello(network_key: bytes, msg: bytes, *, step: str = "msg1") -> bytes:
    """Verify a hello and return the sender's ephemeral public key.

    ``step`` names the message in the raised HandshakeError: "msg1" when the
    server checks the client hello, "msg2" when the client checks the reply.
    """
    if len(msg) != HELLO_SIZE:
        raise HandshakeError(step, "wrong length")
    if not hello_is_authentic(network_key, msg):
        raise HandshakeError(step, "hmac mismatch")
    return msg[_HMAC_SIZE:]


# --- Shared secrets ----------------------------------------------------------
# Each raises ValueError when the peer's key leads to a degenerate secret.


def shared_secret_ab(ephemeral_secret: bytes, peer_ephemeral_public: bytes) -> bytes:
    """``a·b``: both sides combine their ephemeral secret with the peer's public."""
    return _scalarmult(ephemeral_secret, peer_ephemeral_public)


def client_shared_secret_aB(client_ephemeral_secret: bytes, server_public: bytes) -> bytes:
    """``a·B`` as the client computes it, from the server's long-term key."""
    return _scalarmult(client_ephemeral_secret, _ed25519_public_to_curve25519(server_public))


def server_shared_secret_aB(server_keypair: Keypair, client_ephemeral_public: bytes) -> bytes:
    """``a·B`` as the server computes it, from its long-term secret key."""
    return _scalarmult(server_keypair.curve25519_secret(), client_ephemeral_public)


def client_shared_secret_Ab(client_keypair: Keypair, server_ephemeral_public: bytes) -> bytes:
    """``A·b`` as the client computes it, from its long-term secret key."""
    return _scalarmult(client_keypair.curve25519_secret(), server_ephemeral_public)


def server_shared_secret_Ab(server_ephemeral_secret: bytes, client_public: bytes) -> bytes:
    """``A·b`` as the server computes it, from the client's long-term key."""
    return _scalarmult(server_ephemeral_secret, _ed25519_public_to_curve25519(client_public))


# --- Message 3: client authenticate ------------------------------------------


def _client_auth_box_key(
    network_key: bytes, shared_secret_ab: bytes, shared_secret_aB: bytes
) -> bytes:
    return _sha256(network_key + shared_secret_ab + shared_secret_aB)


def client_auth_signed_message(
    network_key: bytes, server_public: bytes, shared_secret_ab: bytes
) -> bytes:
    """What the client signs for message 3: ``N || B || sha256(a·b)``."""
    return network_key + server_public + _sha256(shared_secret_ab)


def client_auth_signature(
    *, network_key: bytes, client_keypair: Keypair, server_public: bytes, shared_secret_ab: bytes
) -> bytes:
    """``detached_signature_A``: the client signs ``N || B || sha256(a·b)``."""
    return client_keypair.sign(
        client_auth_signed_message(network_key, server_public, shared_secret_ab)
    )


def box_client_auth(
    *,
    network_key: bytes,
    shared_secret_ab: bytes,
    shared_secret_aB: bytes,
    detached_signature_A: bytes,
    client_public: bytes,
) -> bytes:
    """Message 3 around any signature and client key (for forging)."""
    return nacl.bindings.crypto_secretbox_easy(
        detached_signature_A + client_public,
        _ZERO_NONCE,
        _client_auth_box_key(network_key, shared_secret_ab, shared_secret_aB),
    )


def client_auth(
    *,
    network_key: bytes,
    client_keypair: Keypair,
    server_public: bytes,
    shared_secret_ab: bytes,
    shared_secret_aB: bytes,
) -> bytes:
    """Message 3 (112 bytes): the client's signature and long-term key, boxed."""
    return box_client_auth(
        network_key=network_key,
        shared_secret_ab=shared_secret_ab,
        shared_secret_aB=shared_secret_aB,
        detached_signature_A=client_auth_signature(
            network_key=network_key,
            client_keypair=client_keypair,
            server_public=server_public,
            shared_secret_ab=shared_secret_ab,
        ),
        client_public=client_keypair.public,
    )


def unbox_client_auth(
    *, network_key: bytes, shared_secret_ab: bytes, shared_secret_aB: bytes, msg3: bytes
) -> tuple[bytes, bytes]:
    """Open message 3's box, its signature unchecked; return
    ``(detached_signature_A, client_public)``."""
    if len(msg3) != CLIENT_AUTH_SIZE:
        raise HandshakeError("msg3", "wrong length")
    try:
        plaintext = nacl.bindings.crypto_secretbox_open_easy(
            msg3, _ZERO_NONCE, _client_auth_box_key(network_key, shared_secret_ab, shared_secret_aB)
        )
    except nacl.exceptions.CryptoError:
        raise HandshakeError("msg3", "secretbox open failed") from None
    return plaintext[:_SIGNATURE_SIZE], plaintext[_SIGNATURE_SIZE:]


def client_auth_signature_is_valid(
    *,
    network_key: bytes,
    server_public: bytes,
    shared_secret_ab: bytes,
    detached_signature_A: bytes,
    client_public: bytes,
) -> bool:
    """Whether message 3's signature is the client's over ``N || B || sha256(a·b)``."""
    signed = client_auth_signed_message(network_key, server_public, shared_secret_ab)
    return verify_signature(client_public, signed, detached_signature_A)


def open_client_auth(
    *,
    network_key: bytes,
    server_public: bytes,
    shared_secret_ab: bytes,
    shared_secret_aB: bytes,
    msg3: bytes,
) -> tuple[bytes, bytes]:
    """Open and verify message 3; return ``(detached_signature_A, client_public)``."""
    detached_signature_A, client_public = unbox_client_auth(
        network_key=network_key,
        shared_secret_ab=shared_secret_ab,
        shared_secret_aB=shared_secret_aB,
        msg3=msg3,
    )
    if not client_auth_signature_is_valid(
        network_key=network_key,
        server_public=server_public,
        shared_secret_ab=shared_secret_ab,
        detached_signature_A=detached_signature_A,
        client_public=client_public,
    ):
        raise HandshakeError("msg3", "bad signature")
    return detached_signature_A, client_public


# --- Message 4: server accept ------------------------------------------------


def _server_accept_box_key(
    network_key: bytes, shared_secret_ab: bytes, shared_secret_aB: bytes, shared_secret_Ab: bytes
) -> bytes:
    return _sha256(network_key + shared_secret_ab + shared_secret_aB + shared_secret_Ab)


def server_accept_signed_message(
    network_key: bytes, detached_signature_A: bytes, client_public: bytes, shared_secret_ab: bytes
) -> bytes:
    """What the server signs for message 4: ``N || sig_A || A || sha256(a·b)``."""
    return network_key + detached_signature_A + client_public + _sha256(shared_secret_ab)


def server_accept_signature(
    *,
    network_key: bytes,
    server_keypair: Keypair,
    detached_signature_A: bytes,
    client_public: bytes,
    shared_secret_ab: bytes,
) -> bytes:
    """``detached_signature_B``: the server signs ``N || sig_A || A || sha256(a·b)``."""
    return server_keypair.sign(
        server_accept_signed_message(
            network_key, detached_signature_A, client_public, shared_secret_ab
        )
    )


def box_server_accept(
    *,
    network_key: bytes,
    shared_secret_ab: bytes,
    shared_secret_aB: bytes,
    shared_secret_Ab: bytes,
    detached_signature_B: bytes,
) -> bytes:
    """Message 4 around any signature (for forging)."""
    return nacl.bindings.crypto_secretbox_easy(
        detached_signature_B,
        _ZERO_NONCE,
        _server_accept_box_key(network_key, shared_secret_ab, shared_secret_aB, shared_secret_Ab),
    )


def server_accept(
    *,
    network_key: bytes,
    server_keypair: Keypair,
    detached_signature_A: bytes,
    client_public: bytes,
    shared_secret_ab: bytes,
    shared_secret_aB: bytes,
    shared_secret_Ab: bytes,
) -> bytes:
    """Message 4 (80 bytes): the server's signature, boxed with all three secrets."""
    return box_server_accept(
        network_key=network_key,
        shared_secret_ab=shared_secret_ab,
        shared_secret_aB=shared_secret_aB,
        shared_secret_Ab=shared_secret_Ab,
        detached_signature_B=server_accept_signature(
            network_key=network_key,
            server_keypair=server_keypair,
            detached_signature_A=detached_signature_A,
            client_public=client_public,
            shared_secret_ab=shared_secret_ab,
        ),
    )


def open_server_accept(
    *,
    network_key: bytes,
    server_public: bytes,
    detached_signature_A: bytes,
    client_public: bytes,
    shared_secret_ab: bytes,
    shared_secret_aB: bytes,
    shared_secret_Ab: bytes,
    msg4: bytes,
) -> bytes:
    """Open and verify message 4; return ``detached_signature_B``."""
    if len(msg4) != SERVER_ACCEPT_SIZE:
        raise HandshakeError("msg4", "wrong length")
    try:
        detached_signature_B = nacl.bindings.crypto_secretbox_open_easy(
            msg4,
            _ZERO_NONCE,
            _server_accept_box_key(
                network_key, shared_secret_ab, shared_secret_aB, shared_secret_Ab
            ),
        )
    except nacl.exceptions.CryptoError:
        raise HandshakeError("msg4", "secretbox open failed") from None
    signed = server_accept_signed_message(
        network_key, detached_signature_A, client_public, shared_secret_ab
    )
    if not verify_signature(server_public, signed, detached_signature_B):
        raise HandshakeError("msg4", "bad signature")
    return detached_signature_B


# --- Box stream parameters ---------------------------------------------------


@dataclass(frozen=True, repr=False)
class BoxStreamParams:
    """Keys and starting nonces of the two box streams, from one side's view.

    ``encrypt_*`` protect what this side sends, ``decrypt_*`` what it receives.
    ``peer_public`` is the peer's authenticated long-term Ed25519 key.
    """

    encrypt_key: bytes
    encrypt_nonce: bytes
    decrypt_key: bytes
    decrypt_nonce: bytes
    peer_public: bytes

    def __repr__(self) -> str:
        # Keys stay out of logs and tracebacks; the peer's identity is enough.
        return f"BoxStreamParams(peer={public_to_feed_id(self.peer_public)})"


def box_stream_params(
    *,
    network_key: bytes,
    shared_secret_ab: bytes,
    shared_secret_aB: bytes,
    shared_secret_Ab: bytes,
    local_public: bytes,
    peer_public: bytes,
    local_ephemeral_public: bytes,
    peer_ephemeral_public: bytes,
) -> BoxStreamParams:
    """Derive the box stream keys and nonces ("Keys and nonces" in the guide).

    The stream towards a peer is keyed with the receiver's long-term key and
    starts at the hmac of the receiver's ephemeral key, so the client-to-server
    stream uses ``B`` and ``b`` and the server-to-client stream ``A`` and ``a``.
    """
    double_hashed = _sha256(
        _sha256(network_key + shared_secret_ab + shared_secret_aB + shared_secret_Ab)
    )
    return BoxStreamParams(
        encrypt_key=_sha256(double_hashed + peer_public),
        encrypt_nonce=nacl_auth(network_key, peer_ephemeral_public)[:_BOX_STREAM_NONCE_SIZE],
        decrypt_key=_sha256(double_hashed + local_public),
        decrypt_nonce=nacl_auth(network_key, local_ephemeral_public)[:_BOX_STREAM_NONCE_SIZE],
        peer_public=peer_public,
    )


# --- State machines ----------------------------------------------------------


def _check_size(value: bytes, size: int, what: str) -> bytes:
    if len(value) != size:
        raise ValueError(f"{what} must be {size} bytes, got {len(value)}")
    return bytes(value)


class _Handshake:
    """Buffering, transcript and failure bookkeeping shared by both roles.

    A subclass lists the messages it receives in ``_incoming`` as
    ``(step, size)`` pairs and handles each in ``_handle(step, message)``,
    which returns the bytes to send in reply.
    """

    _incoming: tuple[tuple[str, int], ...]

    def __init__(
        self,
        network_key: bytes,
        keypair: Keypair,
        ephemeral_secret: bytes | None,
        faults: Iterable[Fault | str],
    ) -> None:
        # Rules broken on purpose (faults.py), applied at the fault points.
        self._points = FaultPoints(FAULT_SPECS, frozenset(faults))
        self._network_key = _check_size(network_key, NETWORK_KEY_SIZE, "network key")
        self._keypair = keypair
        if ephemeral_secret is None:
            ephemeral_secret = generate_ephemeral_secret()
        self._ephemeral_secret = _check_size(
            self._points.apply("ephemeral-secret", ephemeral_secret),
            EPHEMERAL_KEY_SIZE,
            "ephemeral secret",
        )
        self._ephemeral_public = ephemeral_public(self._ephemeral_secret)
        self._buffer = bytearray()
        self._incoming_index = 0
        self._transcript: dict[str, bytes] = {}
        self._result: BoxStreamParams | None = None
        self._failed = False
        self.trailing_data = b""
        """Bytes that followed the last handshake message: box stream data."""

    def _handle(self, step: str, message: bytes) -> bytes:
        raise NotImplementedError

    @property
    def complete(self) -> bool:
        return self._result is not None

    @property
    def failed(self) -> bool:
        return self._failed

    @property
    def result(self) -> BoxStreamParams:
        if self._result is None:
            raise RuntimeError("handshake is not complete")
        return self._result

    @property
    def bytes_needed(self) -> int:
        """How many more bytes the message currently awaited needs (0 if none)."""
        if self.complete or self._failed:
            return 0
        _, size = self._incoming[self._incoming_index]
        return size - len(self._buffer)

    @property
    def transcript(self) -> dict[str, bytes]:
        """The handshake messages sent and received so far, by step name."""
        return dict(self._transcript)

    def _check_can_receive(self) -> None:
        if self._failed:
            raise RuntimeError("handshake has failed")
        if self.complete:
            raise RuntimeError("handshake is complete; box stream data goes to the decoder")

    def receive_data(self, data: bytes) -> bytes:
        """Consume bytes from the peer; return the bytes to send now (maybe b"").

        Raises HandshakeError if the peer's message is rejected; the machine is
        then failed for good, and nothing from this call is to be sent.
        """
        self._check_can_receive()
        self._buffer += data
        reply = bytearray()
        try:
            while not self.complete and self.bytes_needed <= 0:
                step, size = self._incoming[self._incoming_index]
                message = bytes(self._buffer[:size])
                del self._buffer[:size]
                self._transcript[step] = message
                self._incoming_index += 1
                reply += self._handle(step, message)
        except BaseException:
            self._failed = True
            raise
        if self.complete:
            self.trailing_data = bytes(self._buffer)
            self._buffer.clear()
        return bytes(reply)


class ClientHandshake(_Handshake):
    """The connecting side: sends msg1 and msg3, checks msg2 and msg4."""

    _incoming = (("msg2", HELLO_SIZE), ("msg4", SERVER_ACCEPT_SIZE))

    def __init__(
        self,
        network_key: bytes,
        keypair: Keypair,
        server_public: bytes,
        ephemeral_secret: bytes | None = None,
        *,
        faults: Iterable[Fault | str] = (),
    ) -> None:
        super().__init__(network_key, keypair, ephemeral_secret, faults)
        self._server_public = _check_size(server_public, _PUBLIC_KEY_SIZE, "server public key")
        # Fail now, not at msg2, if the key we were told to dial is unusable.
        _ed25519_public_to_curve25519(self._server_public)
        self._msg1_taken = False
        self._server_ephemeral_public = b""
        self._shared_secret_ab = b""
        self._shared_secret_aB = b""
        self._shared_secret_Ab = b""
        self._detached_signature_A = b""

    def data_to_send(self) -> bytes:
        """Message 1 on the first call, b"" afterwards."""
        if self._msg1_taken:
            return b""
        self._msg1_taken = True
        msg1 = hello(
            self._points.apply("client-hello-key", self._network_key), self._ephemeral_public
        )
        self._transcript["msg1"] = msg1
        return msg1

    def receive_data(self, data: bytes) -> bytes:
        """Consume server bytes; returns msg3 once msg2 is complete, else b""."""
        if not self._msg1_taken:
            raise RuntimeError("send data_to_send() (msg1) before receiving")
        return super().receive_data(data)

    def _handle(self, step: str, message: bytes) -> bytes:
        if step == "msg2":
            return self._handle_server_hello(message)
        self._handle_server_accept(message)
        return b""

    def _handle_server_hello(self, msg2: bytes) -> bytes:
        if not self._points.apply(
            "server-hello-authentic", hello_is_authentic(self._network_key, msg2)
        ):
            raise HandshakeError("msg2", "hmac mismatch")
        self._server_ephemeral_public = msg2[_HMAC_SIZE:]
        try:
            self._shared_secret_ab = shared_secret_ab(
                self._ephemeral_secret, self._server_ephemeral_public
            )
            self._shared_secret_aB = client_shared_secret_aB(
                self._ephemeral_secret, self._server_public
            )
            self._shared_secret_Ab = client_shared_secret_Ab(
                self._keypair, self._server_ephemeral_public
            )
        except ValueError:
            raise HandshakeError("msg2", "invalid ephemeral key") from None
        signed = client_auth_signed_message(
            self._network_key, self._server_public, self._shared_secret_ab
        )
        self._detached_signature_A = self._keypair.sign(
            self._points.apply("client-auth-signed-data", signed)
        )
        msg3 = box_client_auth(
            network_key=self._network_key,
            shared_secret_ab=self._shared_secret_ab,
            shared_secret_aB=self._shared_secret_aB,
            detached_signature_A=self._detached_signature_A,
            client_public=self._keypair.public,
        )
        self._transcript["msg3"] = msg3
        return msg3

    def _handle_server_accept(self, msg4: bytes) -> None:
        error = self._points.apply("server-accept-error", self._server_accept_error(msg4))
        if error is not None:
            raise error
        self._result = box_stream_params(
            network_key=self._network_key,
            shared_secret_ab=self._shared_secret_ab,
            shared_secret_aB=self._shared_secret_aB,
            shared_secret_Ab=self._shared_secret_Ab,
            local_public=self._keypair.public,
            peer_public=self._server_public,
            local_ephemeral_public=self._ephemeral_public,
            peer_ephemeral_public=self._server_ephemeral_public,
        )

    def _server_accept_error(self, msg4: bytes) -> HandshakeError | None:
        """Why msg4 is to be refused (its box does not open, or its signature
        is not the server's over the guide's data); None when it is valid."""
        try:
            open_server_accept(
                network_key=self._network_key,
                server_public=self._server_public,
                detached_signature_A=self._detached_signature_A,
                client_public=self._keypair.public,
                shared_secret_ab=self._shared_secret_ab,
                shared_secret_aB=self._shared_secret_aB,
                shared_secret_Ab=self._shared_secret_Ab,
                msg4=msg4,
            )
        except HandshakeError as error:
            return error
        return None


class ServerHandshake(_Handshake):
    """The accepting side: checks msg1 and msg3, sends msg2 and msg4.

    ``authorize``, if given, is called with the client's long-term public key
    once msg3 has been verified; returning False rejects the client with
    HandshakeError("msg3", "unauthorized client") before anything is sent.
    """

    _incoming = (("msg1", HELLO_SIZE), ("msg3", CLIENT_AUTH_SIZE))

    def __init__(
        self,
        network_key: bytes,
        keypair: Keypair,
        ephemeral_secret: bytes | None = None,
        authorize: Callable[[bytes], bool] | None = None,
        *,
        faults: Iterable[Fault | str] = (),
    ) -> None:
        super().__init__(network_key, keypair, ephemeral_secret, faults)
        self._authorize = authorize
        self._client_ephemeral_public = b""
        self._shared_secret_ab = b""
        self._shared_secret_aB = b""
        self.client_public: bytes | None = None
        """The client's long-term key, set once msg3 has been verified."""

    def data_to_send(self) -> bytes:
        """Always b"": the server speaks only in reply to the client."""
        return b""

    def _handle(self, step: str, message: bytes) -> bytes:
        if step == "msg1":
            return self._handle_client_hello(message)
        return self._handle_client_auth(message)

    def _handle_client_hello(self, msg1: bytes) -> bytes:
        if not self._points.apply(
            "client-hello-authentic", hello_is_authentic(self._network_key, msg1)
        ):
            raise HandshakeError("msg1", "hmac mismatch")
        self._client_ephemeral_public = msg1[_HMAC_SIZE:]
        try:
            self._shared_secret_ab = shared_secret_ab(
                self._ephemeral_secret, self._client_ephemeral_public
            )
            self._shared_secret_aB = server_shared_secret_aB(
                self._keypair, self._client_ephemeral_public
            )
        except ValueError:
            raise HandshakeError("msg1", "invalid ephemeral key") from None
        msg2 = hello(self._network_key, self._ephemeral_public)
        self._transcript["msg2"] = msg2
        return msg2

    def _handle_client_auth(self, msg3: bytes) -> bytes:
        detached_signature_A, client_public = unbox_client_auth(
            network_key=self._network_key,
            shared_secret_ab=self._shared_secret_ab,
            shared_secret_aB=self._shared_secret_aB,
            msg3=msg3,
        )
        signature_valid = client_auth_signature_is_valid(
            network_key=self._network_key,
            server_public=self._keypair.public,
            shared_secret_ab=self._shared_secret_ab,
            detached_signature_A=detached_signature_A,
            client_public=client_public,
        )
        if not self._points.apply("client-auth-signature-valid", signature_valid):
            raise HandshakeError("msg3", "bad signature")
        self.client_public = client_public
        if self._authorize is not None and not self._authorize(client_public):
            raise HandshakeError("msg3", "unauthorized client")
        try:
            shared_secret_Ab = server_shared_secret_Ab(self._ephemeral_secret, client_public)
        except ValueError:
            # The signature verified, yet the key has no usable Curve25519 form
            # (e.g. it carries a small-order component).
            raise HandshakeError("msg3", "invalid client key") from None
        signed = server_accept_signed_message(
            self._network_key, detached_signature_A, client_public, self._shared_secret_ab
        )
        msg4 = box_server_accept(
            network_key=self._network_key,
            shared_secret_ab=self._shared_secret_ab,
            shared_secret_aB=self._shared_secret_aB,
            shared_secret_Ab=shared_secret_Ab,
            detached_signature_B=self._keypair.sign(
                self._points.apply("server-accept-signed-data", signed)
            ),
        )
        self._transcript["msg4"] = msg4
        self._result = box_stream_params(
            network_key=self._network_key,
            shared_secret_ab=self._shared_secret_ab,
            shared_secret_aB=self._shared_secret_aB,
            shared_secret_Ab=shared_secret_Ab,
            local_public=self._keypair.public,
            peer_public=client_public,
            local_ephemeral_public=self._ephemeral_public,
            peer_ephemeral_public=self._client_ephemeral_public,
        )
        return msg4

"""Long-term SSB identities: Ed25519 key pairs, feed ids and the secret file.

An SSB identity is an Ed25519 key pair. Its public half, written as
``@<base64>.ed25519``, is the feed id. The handshake also uses the same keys
converted to Curve25519 for Diffie-Hellman, so :class:`Keypair` offers both
forms.

The secret file format is the one ssb-keys (and therefore ssb-server) reads
and writes: a JSON object, possibly surrounded by ``#`` comment lines.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from pathlib import Path

import nacl.bindings
import nacl.exceptions
import nacl.signing

MAIN_NETWORK_KEY = bytes.fromhex("d4a1cb88a66f02f8db635ce26441cc5dac1b08420ceaac230839b755845a9ffb")
"""The network identifier (``caps.shs``) of the main Scuttlebutt network."""

PUBLIC_KEY_SIZE = 32
SECRET_KEY_SIZE = 64
SEED_SIZE = 32
SIGNATURE_SIZE = 64

_FEED_ID_PREFIX = "@"
_ED25519_SUFFIX = ".ed25519"

# ssb-server writes this kind of warning around the JSON; keep the same habit
# so a file saved here looks familiar to people used to ~/.ssb/secret.
_SECRET_FILE_COMMENT = (
    "# This is your SECRET key. Anyone who learns it can impersonate you.\n"
    "# Never show this file to anyone, and keep it readable only by you.\n"
)


def _decode_ed25519_base64(text: str, expected_size: int, what: str) -> bytes:
    """Decode ``<base64>.ed25519`` into exactly ``expected_size`` bytes."""
    if not isinstance(text, str) or not text.endswith(_ED25519_SUFFIX):
        raise ValueError(f"{what} must be a string ending in {_ED25519_SUFFIX!r}")
    encoded = text[: -len(_ED25519_SUFFIX)]
    try:
        raw = base64.b64decode(encoded, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"{what} is not valid base64: {exc}") from None
    if len(raw) != expected_size:
        raise ValueError(f"{what} must encode {expected_size} bytes, got {len(raw)}")
    # Several base64 strings can decode to the same bytes (non-zero padding
    # bits); only the canonical one names the key, so reject the others.
    if base64.b64encode(raw).decode("ascii") != encoded:
        raise ValueError(f"{what} is not canonical base64")
    return raw


def public_to_feed_id(public: bytes) -> str:
    """Return the feed id ``@<base64>.ed25519`` of a 32-byte Ed25519 key."""
    if len(public) != PUBLIC_KEY_SIZE:
        raise ValueError(f"public key must be {PUBLIC_KEY_SIZE} bytes, got {len(public)}")
    return _FEED_ID_PREFIX + base64.b64encode(public).decode("ascii") + _ED25519_SUFFIX


def feed_id_to_public(feed_id: str) -> bytes:
    """Return the 32-byte Ed25519 key named by ``feed_id``.

    Raises ValueError unless ``feed_id`` is exactly ``@<canonical base64 of 32
    bytes>.ed25519``.
    """
    if not isinstance(feed_id, str) or not feed_id.startswith(_FEED_ID_PREFIX):
        raise ValueError(f"feed id must start with {_FEED_ID_PREFIX!r}: {feed_id!r}")
    return _decode_ed25519_base64(feed_id[len(_FEED_ID_PREFIX) :], PUBLIC_KEY_SIZE, "feed id")


def verify_signature(public: bytes, msg: bytes, sig: bytes) -> bool:
    """Return whether ``sig`` is a valid Ed25519 signature of ``msg`` by ``public``.

    Malformed keys or signatures count as invalid rather than raising, because
    callers check signatures that came off the wire.
    """
    if len(public) != PUBLIC_KEY_SIZE or len(sig) != SIGNATURE_SIZE:
        return False
    try:
        nacl.signing.VerifyKey(public).verify(msg, sig)
    except nacl.exceptions.BadSignatureError:
        return False
    return True


class Keypair:
    """An Ed25519 identity. Build one with the classmethods.

    Attributes:
        public: the 32-byte public key.
        secret: the 64-byte libsodium secret key (seed followed by public).
        seed: the 32-byte seed the key pair is derived from.
    """

    __slots__ = ("_signing_key", "public", "secret", "seed")

    def __init__(self, signing_key: nacl.signing.SigningKey) -> None:
        self._signing_key = signing_key
        self.seed: bytes = bytes(signing_key)
        self.public: bytes = bytes(signing_key.verify_key)
        self.secret: bytes = self.seed + self.public

    @classmethod
    def generate(cls) -> Keypair:
        return cls(nacl.signing.SigningKey.generate())

    @classmethod
    def from_seed(cls, seed: bytes) -> Keypair:
        if len(seed) != SEED_SIZE:
            raise ValueError(f"seed must be {SEED_SIZE} bytes, got {len(seed)}")
        return cls(nacl.signing.SigningKey(seed))

    @classmethod
    def from_secret(cls, secret: bytes) -> Keypair:
        """Build from a 64-byte libsodium secret key (seed || public)."""
        if len(secret) != SECRET_KEY_SIZE:
            raise ValueError(f"secret key must be {SECRET_KEY_SIZE} bytes, got {len(secret)}")
        keypair = cls.from_seed(secret[:SEED_SIZE])
        # A secret key whose second half disagrees with its seed would sign as
        # one identity while claiming another; refuse it.
        if keypair.public != secret[SEED_SIZE:]:
            raise ValueError("secret key's public half does not match its seed")
        return keypair

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Keypair:
        """Read an ssb-keys secret file (JSON with ``#`` comment lines)."""
        text = Path(path).read_text(encoding="utf-8")
        json_text = "\n".join(
            line for line in text.splitlines() if not line.lstrip().startswith("#")
        )
        try:
            document = json.loads(json_text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not a JSON secret file: {exc}") from None
        if not isinstance(document, dict):
            raise ValueError(f"{path}: secret file must hold a JSON object")
        if document.get("curve") != "ed25519":
            raise ValueError(f"{path}: unsupported curve {document.get('curve')!r}")
        keypair = cls.from_secret(
            _decode_ed25519_base64(document.get("private"), SECRET_KEY_SIZE, "private key")
        )
        if "public" in document:
            public = _decode_ed25519_base64(document["public"], PUBLIC_KEY_SIZE, "public key")
            if public != keypair.public:
                raise ValueError(f"{path}: public key does not match the private key")
        if "id" in document and document["id"] != keypair.feed_id:
            raise ValueError(f"{path}: id does not match the private key")
        return keypair

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write an ssb-keys secret file readable only by its owner (0600)."""
        document = {
            "curve": "ed25519",
            "public": base64.b64encode(self.public).decode("ascii") + _ED25519_SUFFIX,
            "private": base64.b64encode(self.secret).decode("ascii") + _ED25519_SUFFIX,
            "id": self.feed_id,
        }
        contents = _SECRET_FILE_COMMENT + json.dumps(document, indent=2) + "\n"
        # Create with 0600 so the secret is never briefly world-readable, and
        # chmod as well because O_CREAT's mode is ignored for an existing file.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as secret_file:
            os.fchmod(secret_file.fileno(), 0o600)
            secret_file.write(contents)

    def sign(self, msg: bytes) -> bytes:
        """Return the 64-byte detached Ed25519 signature of ``msg``."""
        return self._signing_key.sign(msg).signature

    @property
    def feed_id(self) -> str:
        return public_to_feed_id(self.public)

    def curve25519_secret(self) -> bytes:
        """The secret key converted to Curve25519, for scalar multiplication."""
        return nacl.bindings.crypto_sign_ed25519_sk_to_curve25519(self.secret)

    def curve25519_public(self) -> bytes:
        """The public key converted to Curve25519, for scalar multiplication."""
        return nacl.bindings.crypto_sign_ed25519_pk_to_curve25519(self.public)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Keypair):
            return NotImplemented
        # The public key is derived from the seed, so it identifies the pair.
        return self.public == other.public

    def __hash__(self) -> int:
        return hash(self.public)

    def __repr__(self) -> str:
        return f"Keypair({self.feed_id})"

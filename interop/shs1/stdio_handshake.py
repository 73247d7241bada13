"""Shared plumbing of the shs1-test stdio adapters.

shs1-test (npm) spawns an adapter with hex arguments, speaks one side of
the secret handshake to it over stdin/stdout, and expects, after a good
handshake, the 112-byte outcome: encryption key, encryption nonce,
decryption key, decryption nonce.  On a bad peer message the adapter must
exit non-zero at once without writing anything more.  The handshake itself
is the project's sans-I/O implementation in reference_impl/ssb/shs.py; this
module only moves its bytes.
"""

import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    # The adapters run as plain scripts from any directory; the reference
    # implementation is imported from this checkout, installed or not.
    sys.path.insert(0, str(REPO_ROOT))

EXIT_PEER_MISBEHAVED = 1
EXIT_BAD_ARGUMENTS = 2


def fail(status: int, message: str) -> "NoReturn":  # noqa: F821 - annotation only
    sys.stderr.write(f"{Path(sys.argv[0]).name}: {message}\n")
    sys.stderr.flush()
    # os._exit: nothing buffered may reach stdout after a rejection.
    os._exit(status)


def hex_argument(text: str, length: int, name: str) -> bytes:
    try:
        value = bytes.fromhex(text)
    except ValueError:
        fail(EXIT_BAD_ARGUMENTS, f"{name} is not hex: {text!r}")
    if len(value) != length:
        fail(EXIT_BAD_ARGUMENTS, f"{name} must be {length} bytes, got {len(value)}")
    return value


def read_exactly(count: int) -> bytes:
    """Reads count bytes from stdin; a hang-up before that is a bad peer."""
    chunks = []
    remaining = count
    while remaining:
        chunk = os.read(0, remaining)
        if not chunk:
            fail(
                EXIT_PEER_MISBEHAVED,
                f"peer hung up {remaining} bytes short of a {count}-byte message",
            )
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(1, view)
        view = view[written:]


def run(handshake) -> None:
    """Drives a started handshake to completion and writes the outcome."""
    from reference_impl.ssb.shs import HandshakeError

    while not handshake.complete:
        incoming = read_exactly(handshake.bytes_needed)
        try:
            reply = handshake.receive_data(incoming)
        except HandshakeError as error:
            fail(EXIT_PEER_MISBEHAVED, f"handshake rejected: {error}")
        if reply:
            write_all(reply)
    params = handshake.result
    write_all(params.encrypt_key + params.encrypt_nonce + params.decrypt_key + params.decrypt_nonce)

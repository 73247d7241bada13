"""Box stream, target as server: nonces and the goodbye (SSB guide,
"Box stream", "Goodbye", "Keys and nonces")."""

from __future__ import annotations

import nacl.bindings
from nacl.exceptions import CryptoError

from conformance.core.requirements import not_applicable, requirement
from conformance.core.transport import Deadline, DeadlineExceeded, short_hex
from reference_impl.ssb import rpc
from reference_impl.ssb.boxstream import HEADER_SIZE, increment_nonce

HANDSHAKE = "ssb.shs.server.completes-valid-handshake"
CLOSES_AFTER_GOODBYE = "ssb.boxstream.server.closes-after-goodbye"
MAX_BOXES_CHECKED = 64
GOODBYE_PLAINTEXT = bytes(18)
QUIET_SECONDS = 1.0


@requirement(
    "ssb.boxstream.server.nonces-increment-per-box",
    "MUST",
    'SSB guide, Box stream, Keys and nonces ("The starting nonce is used for the first header in the '
    'stream" ... "then incremented for the first body")',
    depends=[HANDSHAKE],
    basis="wire-format: box stream nonces, Keys and nonces (box_stream_params figure): the starting nonce for the first header, incremented for its body, then for the next header",
)
async def test_nonces_increment_per_box(open_session, server_feed_id):
    """Reads the target's boxes by hand: header k opens with the key from the
    handshake and nonce n + 2k, its body with n + 2k + 1. Several boxes are
    needed (a message and the end of the stream at least), so the feed is asked for."""
    session = await open_session()
    key, nonce = session.params.decrypt_key, session.params.decrypt_nonce
    await session.request(["createHistoryStream"], [{"id": server_feed_id, "keys": False}])
    buffer = b""
    opened = 0
    # One deadline for the two boxes: every read shares it, so a target
    # trickling bytes cannot keep the case reading.
    boxes_due = Deadline(session.conn.deadline)
    while opened < 2:
        try:
            received = await session.conn.receive_some(boxes_due)
        except DeadlineExceeded:
            raise DeadlineExceeded(
                f"{opened} complete box(es) within {boxes_due.seconds} s; the rule needs "
                f"two; bytes of an unfinished box: {short_hex(buffer)}"
            ) from None
        buffer += received
        while len(buffer) >= HEADER_SIZE and opened < MAX_BOXES_CHECKED:
            try:
                header = nacl.bindings.crypto_secretbox_open_easy(buffer[:HEADER_SIZE], nonce, key)
            except CryptoError:
                raise AssertionError(
                    f"header of box {opened + 1} does not open with the server-to-client key and nonce "
                    f"{nonce.hex()} (starting nonce + {2 * opened}): {short_hex(buffer[:HEADER_SIZE])}"
                ) from None
            if header == GOODBYE_PLAINTEXT:
                assert opened >= 1, "target sent the goodbye before any box"
                return
            length = int.from_bytes(header[:2], "big")
            if len(buffer) < HEADER_SIZE + length:
                break
            body = buffer[HEADER_SIZE : HEADER_SIZE + length]
            try:
                nacl.bindings.crypto_secretbox_open_easy(
                    header[2:] + body, increment_nonce(nonce), key
                )
            except CryptoError:
                raise AssertionError(
                    f"body of box {opened + 1} does not open with nonce {increment_nonce(nonce).hex()} "
                    f"(header's nonce + 1): {short_hex(body)}"
                ) from None
            buffer = buffer[HEADER_SIZE + length :]
            nonce = increment_nonce(nonce, 2)
            opened += 1
        if not received:
            break  # the target closed the connection
    assert opened >= 2, f"only {opened} box(es) arrived; the rule needs at least two to be checked"


@requirement(
    "ssb.boxstream.server.ends-stream-with-goodbye",
    "MUST",
    'SSB guide, Box stream, Goodbye ("The stream ends with a special ... header")',
    depends=[HANDSHAKE],
    basis="wire-format: the end of a box stream, Goodbye (box_stream_goodbye figure): the stream ends with a secret box of 18 zero bytes",
)
async def test_ends_its_stream_with_goodbye(open_session, deadline):
    """When the target ends the connection the last thing on its box stream
    is the authenticated goodbye header, so that the peer can tell a
    finished connection from a reset one. The harness ends the session the
    gentle way: its RPC goodbye first; its box stream goodbye only once the
    target answered (or after a quiet second), so the target has every
    chance to close its own stream first."""
    session = await open_session()
    await session.send_rpc_bytes(rpc.GOODBYE, "RPC goodbye (the box stream goodbye follows later)")
    sent_box_goodbye = False
    last = b""
    # The whole ending shares one deadline (the quiet second, then the
    # answer to both goodbyes), so a target trickling bytes cannot prolong it.
    ending = Deadline(QUIET_SECONDS + deadline)
    while not session.decoder.ended:
        if ending.expired:
            raise AssertionError(
                f"target neither ended its box stream nor closed the connection within "
                f"{ending.seconds} s of the harness's RPC goodbye; the last bytes it sent "
                f"({len(last)}): {short_hex(last, 96)}"
            )
        try:
            data = await session.conn.receive_some(min(QUIET_SECONDS, ending.remaining()))
        except DeadlineExceeded:
            if sent_box_goodbye:
                # A target that never ends its stream breaks no rule of this
                # case (closing after the goodbye is CLOSES_AFTER_GOODBYE, a
                # SHOULD): there is no ending to judge.
                not_applicable(
                    f"the target neither ended its box stream nor closed the connection "
                    f"{deadline} s after both goodbyes, so there is no end of stream to check "
                    f"(closing after a goodbye is {CLOSES_AFTER_GOODBYE}, a SHOULD)"
                )
            data = None
        if data == b"":
            break  # closed
        if data:
            last = data
            bodies = session.decoder.receive_data(data)
            for body in bodies:
                session.conn.trace.record("received-plain", body, "box body (decrypted)")
            answered = any(body == rpc.GOODBYE for body in bodies) or session.decoder.ended
        else:
            answered = True
        if answered and not sent_box_goodbye and not session.decoder.ended:
            await session.conn.send_quietly(session.encoder.goodbye(), "box stream goodbye")
            sent_box_goodbye = True
    assert session.decoder.ended, (
        "target closed the connection without a box stream goodbye header"
        f"{' (after the harness sent its own)' if sent_box_goodbye else ''}; the last bytes it sent "
        f"({len(last)}): {short_hex(last, 96)}"
    )

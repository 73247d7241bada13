"""Target as server (consumer): envelopes the receiver must refuse before
any payload parsing, each seen in-band: the refused Delta is followed, in
the same write, by a valid Checkpoint_request. A conformant consumer closes
without answering it (profile P1: close at once, sending nothing); one that
applied the Delta answers with last_sequence_no 1 (RIPP, "Field Details",
"CRC-32C Integrity"; docs/ripp-profile.md P1)."""

from __future__ import annotations

import struct

from conformance.core.requirements import requirement
from conformance.core.transport import short_hex
from reference_impl.ripp.envelope import CRC_SIZE, HEADER_SIZE, MAX_PAYLOAD, crc32c, encode_envelope
from reference_impl.ripp.payloads import (
    CheckpointRequest,
    DeltaMsg,
    FieldValue,
    SetDelta,
    encode_delta,
    encode_payload,
)

from .peer import key, set_delta
from .prerequisites import APPLIES, CHECKPOINT

FIELDS = "RIPP, Field Details"
FLIP_PROBE_CHECKPOINT = 9


def with_crc(data: bytes | bytearray) -> bytes:
    """``data`` with its CRC-32C recomputed: the envelope is sound except for
    the field a case broke on purpose."""
    body = bytes(data[:-CRC_SIZE])
    return body + struct.pack("<I", crc32c(body))


async def refused(
    ready_peer, output, mutate, what: str, *, half_close: bool = False, build=None
) -> None:
    """``mutate`` the envelope of a valid Delta 1 (``build(peer)``, when given,
    makes the envelope instead), send it with a Checkpoint_request after it,
    and require the consumer to close, sending nothing."""
    name, schema = output
    peer = await ready_peer()
    if build is None:
        bad = mutate(
            bytearray(peer.delta_bytes(name, schema, 1, key("AAPL"), set_delta(schema, 1)))
        )
    else:
        bad = build(peer)
    probe = encode_envelope(peer.envelope(CheckpointRequest(FLIP_PROBE_CHECKPOINT)))
    await peer.conn.send_quietly(
        bytes(bad) + probe, f"{what}, then a Checkpoint_request in the same write"
    )
    if half_close:
        peer.conn.finish_sending()
    closed, data = await peer.closes_at_once()
    if data:
        raise AssertionError(
            f"after {what} ({short_hex(bytes(bad))}) the consumer answered instead of closing: "
            f"{short_hex(data)} (the envelope must be refused before deserialization; profile P1: "
            "close, sending nothing)"
        )
    assert closed, (
        f"after {what} ({short_hex(bytes(bad))}) the consumer neither answered nor closed the connection "
        "(profile P1: a refused envelope closes the connection at once)"
    )


@requirement(
    "ripp.envelope.server.rejects-bad-magic",
    "MUST",
    f'{FIELDS} ("Allows detection of protocol mismatch or corrupt stream start"); Message Envelope Format '
    "(profile P1: receiver check 2, magic, refuses the envelope; the connection closes, nothing sent)",
    depends=[APPLIES],
    basis="profile: P1 envelope, receiver check 2 (magic) and a refused envelope closes the "
    "connection at once, sending nothing, docs/ripp-profile.md",
)
async def test_rejects_bad_magic(ready_peer, output):
    def mutate(data):
        data[0:4] = b"RIPQ"
        return with_crc(data)

    await refused(ready_peer, output, mutate, "a Delta whose magic is RIPQ (CRC recomputed)")


@requirement(
    "ripp.envelope.server.rejects-unsupported-version",
    "MUST",
    f'{FIELDS} ("The receiver must reject messages with an unsupported version") (profile P1: '
    "receiver check 4; a refused envelope closes the connection, nothing sent)",
    depends=[APPLIES],
    errata=["RIPP-E3"],
    basis="plain-words",
)
async def test_rejects_unsupported_version(ready_peer, output):
    def mutate(data):
        data[4] = 2
        return with_crc(data)

    await refused(ready_peer, output, mutate, "a Delta of envelope version 2 (CRC recomputed)")


@requirement(
    "ripp.envelope.server.rejects-unknown-type",
    "MUST",
    f'{FIELDS} ("Message type: Single byte identifying the payload variant") (profile P1: '
    "receiver check 5, type not in the table P2, refuses the envelope)",
    depends=[APPLIES],
    basis="profile: P1 envelope, receiver check 5 (type not in table P2) and a refused envelope "
    "closes the connection at once, sending nothing, docs/ripp-profile.md",
)
async def test_rejects_unknown_type(ready_peer, output):
    def mutate(data):
        data[5] = 9
        return with_crc(data)

    await refused(
        ready_peer, output, mutate, "a Delta relabelled as message type 9 (defined nowhere)"
    )


@requirement(
    "ripp.envelope.server.rejects-nonzero-flags",
    "MUST",
    f'{FIELDS} ("Flags: Reserved for future use (e.g., compression bit, priority). Currently always '
    '0.") (profile P1: receiver check 6, flags not 0, refuses the envelope)',
    depends=[APPLIES],
    basis="profile: P1 envelope, receiver check 6 (flags not 0) and a refused envelope closes the "
    "connection at once, sending nothing, docs/ripp-profile.md",
)
async def test_rejects_nonzero_flags(ready_peer, output):
    def mutate(data):
        data[6] = 1
        return with_crc(data)

    await refused(ready_peer, output, mutate, "a Delta with flags 0x01 (CRC recomputed)")


@requirement(
    "ripp.envelope.server.rejects-flipped-bit",
    "MUST",
    f'{FIELDS} ("A single bit flip in any field is detected before deserialization"); CRC-32C Integrity '
    '("Rejects the message on mismatch (no deserialization attempted)") (profile P1: receiver '
    "checks 1 to 6, the CRC-32C of RIPP-E2; a refused envelope closes the connection, nothing sent)",
    depends=[APPLIES],
    errata=["RIPP-E2"],
    basis="profile: P1 envelope, receiver checks (a flipped bit fails the CRC-32C of RIPP-E2 or an "
    "earlier check) and a refused envelope closes the connection at once, sending nothing, "
    "docs/ripp-profile.md",
)
async def test_rejects_flipped_bit_at_every_offset(ready_peer, output):
    name, schema = output
    peer = await ready_peer("template")
    size = len(peer.delta_bytes(name, schema, 1, key("AAPL"), set_delta(schema, 1)))
    await peer.conn.close()
    failures = []
    for offset in range(size):

        def mutate(data, offset=offset):
            data[offset] ^= 1 << (offset % 8)
            return data

        try:
            # The flip may make the length field claim more than was sent:
            # the harness half-closes so that the consumer sees the stream end.
            await refused(
                ready_peer,
                output,
                mutate,
                f"a Delta with bit {offset % 8} of byte {offset} flipped",
                half_close=True,
            )
        except AssertionError as exc:
            failures.append(f"byte {offset}: {exc}")
    assert not failures, (
        f"{len(failures)} of {size} single-bit flips were not refused; first: {failures[0]}"
    )


@requirement(
    "ripp.envelope.server.rejects-oversized-length",
    "MUST",
    f'{FIELDS} ("Payload length: 32-bit little-endian integer") (profile P1: receiver check 1, '
    "a length negative or above MAX_PAYLOAD refused without waiting for the bytes)",
    depends=[CHECKPOINT],
    basis="profile: P1 envelope, receiver check 1 (length negative or above MAX_PAYLOAD, refused "
    "as soon as the 59 header bytes are in, without waiting for the claimed bytes) and a refused "
    "envelope closes the connection at once, sending nothing, docs/ripp-profile.md",
)
async def test_rejects_oversized_length(ready_peer, output):
    name, schema = output
    for claimed in (MAX_PAYLOAD + 1, 0x7FFFFFFF, -1):
        peer = await ready_peer(f"length {claimed}")
        header = bytearray(
            peer.delta_bytes(name, schema, 1, key("AAPL"), set_delta(schema, 1))[:HEADER_SIZE]
        )
        header[55:59] = struct.pack("<i", claimed)
        await peer.conn.send_quietly(
            bytes(header),
            f"a Delta header claiming a payload of {claimed} bytes, and nothing after it",
        )
        closed, data = await peer.closes_at_once()
        assert closed and not data, (
            f"a header claiming {claimed} payload bytes (profile bound {MAX_PAYLOAD}) must be refused at once, "
            "without waiting for the bytes; the consumer "
            + (f"sent {short_hex(data)}" if data else "kept the connection open, waiting")
        )


def with_payload(data: bytes | bytearray, payload: bytes) -> bytes:
    """The envelope ``data`` carrying ``payload`` instead, its length field
    and CRC-32C made to match: only the payload is wrong."""
    header = bytearray(data[:HEADER_SIZE])
    header[55:59] = struct.pack("<i", len(payload))
    return with_crc(bytes(header) + payload + bytes(CRC_SIZE))


@requirement(
    "ripp.payload.server.rejects-trailing-bytes",
    "MUST",
    f'{FIELDS} ("Allows the receiver to read exactly the right number of bytes.") (profile P1: a '
    "payload with bytes left over after its value is refused, the connection closes, nothing sent; "
    "P6: delta_bytes that do not decode as Delta.t, or a value that does not decode completely as "
    "its field's type, likewise)",
    depends=[APPLIES],
    basis="profile: P1 envelope (a payload that has bytes left over after its value: close at "
    "once, sending nothing) and P6 deltas (delta_bytes and every field value decode completely, "
    "else a protocol error: close, sending nothing), docs/ripp-profile.md",
)
async def test_rejects_trailing_bytes(ready_peer, output):
    """A reader that stops at the end of a value takes each of these Deltas
    as Delta 1 and answers the Checkpoint_request after it; the length field
    and the CRC cover the extra byte, so only a reader that requires every
    byte to be used refuses them."""
    name, schema = output
    valid = set_delta(schema, 1)

    def payload_plus_byte(peer):
        data = peer.delta_bytes(name, schema, 1, key("AAPL"), valid)
        return with_payload(data, data[HEADER_SIZE:-CRC_SIZE] + b"\x00")

    def delta_bytes_plus_byte(peer):
        data = peer.delta_bytes(name, schema, 1, key("AAPL"), valid)
        msg = DeltaMsg(name, key("AAPL"), encode_delta(valid) + b"\x00", 1, None)
        return with_payload(data, encode_payload(msg))

    def value_plus_byte(peer):
        first, *rest = valid.fields
        padded = SetDelta([FieldValue(first.field, first.value + b"\x00"), *rest])
        return peer.delta_bytes(name, schema, 1, key("AAPL"), padded)

    failures = []
    for build, what in (
        (payload_plus_byte, "a Delta whose payload has one byte (00) after the Delta_msg"),
        (delta_bytes_plus_byte, "a Delta whose delta_bytes have one byte (00) after the Delta.t"),
        (
            value_plus_byte,
            f"a Delta whose value of field {valid.fields[0].field!r} has one byte (00) after it",
        ),
    ):
        try:
            await refused(ready_peer, output, None, what, build=build)
        except AssertionError as exc:
            failures.append(str(exc))
    assert not failures, (
        f"{len(failures)} of 3 values followed by a byte they do not use were taken: "
        + "; ".join(failures)
    )

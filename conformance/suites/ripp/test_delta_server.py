"""Target as server (consumer): Deltas applied per source only when their
sequence number is higher than the last, seen in-band through the
Checkpoint_ack (RIPP, "Sequence Numbering"; docs/ripp-profile.md P6, P7)."""

from __future__ import annotations

from conformance.core.requirements import requirement
from conformance.core.transport import short_hex
from reference_impl.ripp.payloads import (
    CheckpointRequest,
    FieldValue,
    RemoveDelta,
    SetDelta,
    fingerprint,
)
from reference_impl.ripp.envelope import ZERO_FINGERPRINT, decode_envelope, encode_envelope

from .peer import ExpectedState, closes_on, describe, key, set_delta, source_of
from .prerequisites import APPLIES, CHECKPOINT

SEQ = "RIPP, Sequence Numbering"


async def send_deltas(peer, output, numbers, *, keys=None) -> ExpectedState:
    """Send Deltas with the sequence numbers given (all in one write, so the
    consumer must split the stream by the length fields) and return the
    state a conformant consumer then holds."""
    name, schema = output
    expected = ExpectedState(schema)
    data = b""
    for seq in numbers:
        k = key((keys or {}).get(seq, "AAPL"))
        delta = set_delta(schema, seq) if seq != 4 or keys is None else RemoveDelta()
        data += peer.delta_bytes(name, schema, seq, k, delta)
        expected.apply(seq, k, delta)
    await peer.send_raw(
        data, f"Deltas of {name} with sequence numbers {', '.join(map(str, numbers))}"
    )
    return expected


async def assert_state(peer, output, expected: ExpectedState, count: int, what: str) -> None:
    name, _ = output
    state = source_of(await peer.checkpoint(), name)
    want = (expected.track.last, count, expected.digest())
    got = (state.last_sequence_no, state.applied_count, state.state_digest)
    assert got == want, (
        f"after {what}, the Checkpoint_ack shows {describe(state)}; a consumer that applied "
        f"exactly the deltas the rule allows shows last_sequence_no {want[0]}, applied_count "
        f"{want[1]}, digest {want[2].hex()}"
    )


@requirement(
    APPLIES,
    "MUST",
    f'{SEQ} ("Ordering: within a single source, deltas are applied in sequence order") (profile P6, '
    "P7)",
    depends=[CHECKPOINT],
    basis="profile: P6 sequence numbers and deltas (sequence_no = last + 1 is applied; Set, Patch, "
    "Remove on the applied state) and P7 checkpoint (last_sequence_no, applied_count, "
    "state_digest), docs/ripp-profile.md",
)
async def test_applies_in_order(ready_peer, output):
    peer = await ready_peer()
    # The keys arrive out of their sorted order (MSFT before AAPL), and the
    # schema's fields are not in sorted order either: the digest is over the
    # state sorted by key and by field (P7), which a node that keeps arrival
    # order does not compute.
    expected = await send_deltas(
        peer, output, [1, 2, 3, 4, 5], keys={1: "MSFT", 2: "GOOG", 3: "MSFT", 4: "GOOG", 5: "AAPL"}
    )
    await assert_state(
        peer,
        output,
        expected,
        5,
        "Deltas 1..5 (Set MSFT, Set GOOG, Set MSFT, Remove GOOG, Set AAPL)",
    )


@requirement(
    "ripp.delta.server.discards-duplicates",
    "MUST",
    f'{SEQ} ("Idempotent delivery: duplicate messages (from at-least-once transport) are silently '
    'discarded") (profile P6: sequence_no <= last is discarded silently, not applied, not counted)',
    depends=[APPLIES],
    errata=["RIPP-E3"],
    basis="profile: P6 sequence numbers and deltas (sequence_no <= last: discarded silently, not "
    "applied, not counted), docs/ripp-profile.md",
)
async def test_discards_duplicates(ready_peer, output):
    peer = await ready_peer()
    expected = await send_deltas(peer, output, [1, 2, 2, 1, 3])
    await assert_state(
        peer, output, expected, 3, "Deltas 1, 2, 2, 1, 3 (each a Set of the same key)"
    )


@requirement(
    "ripp.delta.server.applies-after-gap",
    "MUST",
    f'{SEQ} ("Gap detection: if sequence jumps from 42 to 44, sequence 43 was lost") (profile P6: '
    "sequence_no > last + 1 is applied)",
    depends=[APPLIES],
    errata=["RIPP-E3"],
    basis="profile: P6 sequence numbers and deltas (sequence_no > last + 1: applied, last := "
    "sequence_no; a later lower number is discarded), docs/ripp-profile.md",
)
async def test_applies_after_gap(ready_peer, output):
    peer = await ready_peer()
    # The lost 3 comes last: below the last applied, it is discarded like a
    # duplicate (set_remote: sequence_no <= last), though it never arrived before.
    expected = await send_deltas(peer, output, [1, 2, 4, 5, 3])
    await assert_state(
        peer,
        output,
        expected,
        4,
        "Deltas 1, 2, 4, 5, 3 (4 and 5 applied despite the gap, the late 3 discarded)",
    )


@requirement(
    "ripp.delta.server.tracks-sources-apart",
    "MUST",
    f'{SEQ} ("The receiver tracks the last-seen sequence number per source") (profile P6)',
    depends=[APPLIES],
    basis="profile: P6 sequence numbers and deltas (the consumer keeps last per source_output of "
    "the Handshake), docs/ripp-profile.md",
)
async def test_tracks_sources_apart(ready_peer, registry):
    outputs = list(registry.items())
    assert len(outputs) >= 2, "the registry needs two outputs for this case"
    peer = await ready_peer()
    first = await send_deltas(peer, outputs[0], [1, 2, 3])
    second = await send_deltas(peer, outputs[1], [1, 2])
    await assert_state(
        peer,
        outputs[1],
        second,
        2,
        f"Deltas 1, 2, 3 of {outputs[0][0]} then 1, 2 of {outputs[1][0]}",
    )
    await assert_state(peer, outputs[0], first, 3, f"Deltas 1, 2, 3 of {outputs[0][0]}")


@requirement(
    "ripp.delta.server.refuses-unknown-fingerprint",
    "MUST",
    'RIPP, Field Details ("The receiver compares this against its local schema registry to verify '
    'compatibility before deserialization") (profile P4: an unknown fingerprint is a protocol '
    "error, the connection closes)",
    depends=[APPLIES],
    errata=["RIPP-E4"],
    basis="profile: P4 schema fingerprint (a Delta's fingerprint not among the writer schemas "
    "accepted in the negotiation is a protocol error: close, before decoding the payload), "
    "docs/ripp-profile.md",
)
async def test_refuses_unknown_fingerprint(ready_peer, output):
    name, schema = output
    peer = await ready_peer()
    data = bytearray(peer.delta_bytes(name, schema, 1, key("AAPL"), set_delta(schema, 1)))
    # Same delta, the fingerprint field replaced by one no negotiated schema has; CRC recomputed.
    env = decode_envelope(bytes(data))._replace(fingerprint=b"f" * 32)
    probe = encode_envelope(peer.envelope(CheckpointRequest(9)))
    await peer.conn.send_quietly(
        encode_envelope(env) + probe,
        "a Delta whose schema fingerprint is ffff... (no "
        "negotiated schema has it), then a Checkpoint_request in the same write",
    )
    assert env.fingerprint != ZERO_FINGERPRINT
    closed, received = await peer.closes_at_once()
    assert closed and not received, (
        "a Delta with an unknown schema fingerprint must be refused before deserialization (profile P4: close, "
        f"sending nothing); the consumer {'closed after sending ' + short_hex(received) if closed else 'kept the connection open'}"
    )


@requirement(
    "ripp.delta.server.closes-on-undeclared-output",
    "MUST",
    'RIPP, Handshake ("Schema compatibility for each declared output") (profile P6: a Delta for an '
    "output not declared in the Handshake is a protocol error: close, sending nothing)",
    depends=[APPLIES],
    basis="profile: P6 sequence numbers and deltas (a Delta for an output not declared in the "
    "Handshake is a protocol error: close, sending nothing), docs/ripp-profile.md",
)
async def test_closes_on_undeclared_output(ready_peer, output, registry):
    name, schema = output
    undeclared = f"{name}-undeclared"
    assert undeclared not in registry, f"the registry declares {undeclared!r} itself"
    peer = await ready_peer()
    # The envelope carries the fingerprint of a negotiated schema (P4's check
    # passes): only the output name the payload gives is not declared.
    data = peer.delta_bytes(undeclared, schema, 1, key("AAPL"), set_delta(schema, 1))
    data += encode_envelope(peer.envelope(CheckpointRequest(72)))
    await peer.conn.send_quietly(
        data,
        f"a Delta for output {undeclared!r} (not declared; the fingerprint of {name}'s schema), "
        "then a Checkpoint_request in the same write",
    )
    closed, sent = await peer.closes_at_once()
    assert closed and not sent, (
        f"a Delta for output {undeclared!r}, which the Handshake did not declare, must close the "
        "connection, nothing sent (profile P6); the consumer "
        + (f"sent {short_hex(sent)}" if sent else "kept the connection open")
    )


@requirement(
    "ripp.delta.server.closes-on-undeclared-field",
    "MUST",
    'RIPP, Handshake ("Schema compatibility for each declared output") (profile P6: a Delta '
    "naming a field not in the writer schema it declared is a protocol error: close, sending "
    "nothing)",
    depends=[APPLIES],
    basis="profile: P6 sequence numbers and deltas (a Delta that names a field not in the writer "
    "schema is a protocol error: close, sending nothing), docs/ripp-profile.md",
)
async def test_closes_on_undeclared_field(ready_peer, output):
    name, schema = output
    undeclared = "undeclared_field"
    assert all(f.field_name != undeclared for f in schema.fields)
    peer = await ready_peer()
    # Every field of the schema, and one more: a reader that skips fields it
    # does not know applies the rest and answers the Checkpoint_request.
    delta = SetDelta([*set_delta(schema, 1).fields, FieldValue(undeclared, b"\x00")])
    await closes_on(
        peer,
        peer.delta_bytes(name, schema, 1, key("AAPL"), delta),
        f"a Delta 1 of {name} whose Set also names {undeclared!r}, a field its writer schema lacks",
        "profile P6: a field not in the writer schema is a protocol error",
    )


@requirement(
    "ripp.delta.server.closes-on-fingerprint-of-another-output",
    "MUST",
    'RIPP, Field Details ("Identifies the schema of the payload.") (profile P4: after decoding, '
    "the schema of source_output must have the envelope's fingerprint, else a protocol error: "
    "close)",
    # A consumer that compares no fingerprint at all breaks the rule of
    # refuses-unknown-fingerprint first; this case tells apart one that looks
    # the fingerprint up among the negotiated ones but not for its own output.
    depends=[APPLIES, "ripp.delta.server.refuses-unknown-fingerprint"],
    basis="profile: P4 schema fingerprint (after decoding, the schema of the Delta's "
    "source_output must have the fingerprint its envelope carries, else a protocol error), "
    "docs/ripp-profile.md",
)
async def test_closes_on_fingerprint_of_another_output(ready_peer, registry):
    (name, schema), (other, other_schema) = list(registry.items())[:2]
    assert fingerprint(schema) != fingerprint(other_schema), (
        f"the registry's outputs {name} and {other} need schemas of different fingerprints"
    )
    peer = await ready_peer()
    # A negotiated fingerprint (P4's first check passes), but the other
    # output's: only a consumer comparing it with the Delta's own output refuses.
    data = peer.delta_bytes(name, schema, 1, key("AAPL"), set_delta(schema, 1))
    env = decode_envelope(data)._replace(fingerprint=fingerprint(other_schema))
    await closes_on(
        peer,
        encode_envelope(env),
        f"a Delta 1 of {name} carrying the fingerprint of {other}'s schema (CRC recomputed)",
        "profile P4: the fingerprint must be its output's schema's",
    )

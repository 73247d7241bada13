"""Target as server (consumer): the target's envelopes, the handshake and
schema negotiation, checkpoints (RIPP, "Handshake Protocol", "Handshake";
docs/ripp-profile.md P1, P5, P7)."""

from __future__ import annotations

import asyncio
import dataclasses
import time

from conformance.core.node_grammar import exchange_cut_short
from conformance.core.requirements import blocked, not_applicable, requirement
from conformance.core.transport import short_hex
from reference_impl.ripp.envelope import encode_envelope
from reference_impl.ripp.payloads import CheckpointRequest, Handshake, Heartbeat, SchemaNegotiation

from .peer import (
    ENVELOPE_GRAMMAR,
    GRAMMAR_BASIS,
    RippPeer,
    closes_on,
    describe,
    key,
    new_worker_id,
    set_delta,
)
from .prerequisites import CHECKPOINT, HANDSHAKE, SERVER_GRAMMAR, VALID_ENVELOPES

FORMAT = "RIPP, Message Envelope Format"
HANDSHAKE_TEXT = "RIPP, Handshake; Handshake Protocol"


def without_field(schema, name: str):
    """``schema`` with field ``name`` removed: data written with it lacks a
    field the reader needs (the text's "missing field x")."""
    return dataclasses.replace(schema, fields=[f for f in schema.fields if f.field_name != name])


def required_field(schema):
    for f in schema.fields:
        if f.default is None:
            return f.field_name
    raise AssertionError(
        f"the registry's schema {schema.schema_name} has no field without a default: "
        "an incompatible writer cannot be built from it"
    )


async def negotiated(open_peer, registry):
    """A connection whose Handshake (every registry entry, a fresh worker id)
    got ok=true: (peer, worker id, negotiation). ok=false blocks the case by
    the handshake case: its rule, not the case's."""
    peer = await open_peer()
    worker_id = new_worker_id()
    negotiation = await peer.handshake(list(registry.items()), worker_id=worker_id)
    if not negotiation.ok:
        blocked(
            HANDSHAKE,
            "failed within this case",
            f"the Handshake got ok=false ({negotiation.errors})",
        )
    return peer, worker_id, negotiation


@requirement(
    VALID_ENVELOPES,
    "MUST",
    f'{FORMAT} ("Payload (bin_prot encoded)"); Field Details ("Schema fingerprint: 32-byte '
    'zero-padded string") (profile P3; P4: a control message carries 32 zero bytes as its '
    "fingerprint)",
    basis="wire-format: the payload layout of profile P3 (exactly what bin_write_t writes) and "
    "the fingerprint field of Message Envelope Format (zero-padded ASCII; 32 zero bytes in a "
    "control message, profile P4) in the envelopes the node sends; the envelope's own layout is "
    "the grammar case's (sends-well-formed-envelopes)",
)
async def test_sends_valid_envelopes(open_peer, registry):
    peer = await open_peer()
    await peer.handshake(list(registry.items()))
    got = peer.received[-1]
    assert got.envelope.fingerprint == bytes(32), (
        f"the Schema_negotiation carries fingerprint {got.envelope.fingerprint!r}; profile P4: control messages "
        f"carry 32 zero bytes: {short_hex(got.raw)}"
    )


@requirement(
    "ripp.envelope.server.sends-zero-flags",
    "MUST",
    'RIPP, Field Details ("Flags: Reserved for future use (e.g., compression bit, priority). '
    'Currently always 0.")',
    depends=[VALID_ENVELOPES],
    basis="wire-format: the Flags byte at offset 6 of the envelope, reserved and currently always 0 "
    "(Field Details) in every envelope the node sends; a receiver of the profile refuses any "
    "other value (P1, check 6)",
)
async def test_sends_zero_flags(open_peer, registry):
    peer = await open_peer()
    peer_hs = await peer.handshake(list(registry.items()))
    got = peer.received[-1]
    assert got.raw[6] == 0, (
        f"the Schema_negotiation has flags {got.raw[6]:#04x}, not 0: {short_hex(got.raw)}"
    )
    assert isinstance(peer_hs, SchemaNegotiation)


@requirement(
    HANDSHAKE,
    "MUST",
    f'{HANDSHAKE_TEXT} ("Schema_negotiation(ok=true)") (profile P5: ok is true exactly when '
    "check_backward gives no error)",
    depends=[VALID_ENVELOPES],
    basis="profile: P5 handshake and schema negotiation (the consumer answers a Handshake with one "
    "Schema_negotiation, ok=true with no errors when the declared writer schemas pass "
    "check_backward against its registry), docs/ripp-profile.md",
)
async def test_accepts_compatible_schema(open_peer, registry):
    peer = await open_peer()
    negotiation = await peer.handshake(list(registry.items()))
    assert negotiation.ok and not negotiation.errors, (
        f"a Handshake declaring the registry's own schemas (writer = reader) got ok={negotiation.ok}, "
        f"errors {negotiation.errors}"
    )
    assert negotiation.protocol_version == 1, (
        f"Schema_negotiation protocol_version {negotiation.protocol_version}"
    )


@requirement(
    "ripp.handshake.server.refuses-incompatible-schema",
    "MUST",
    f'{HANDSHAKE_TEXT} ("If schema negotiation fails"; "[connection rejected]") (profile P5: '
    "ok=false with the error missing field, then the consumer closes)",
    depends=[HANDSHAKE],
    basis="profile: P5 handshake and schema negotiation (check_backward gives missing field <f>; "
    "after ok=false the consumer closes once the answer is written), docs/ripp-profile.md",
)
async def test_refuses_incompatible_schema(open_peer, output):
    name, schema = output
    missing = required_field(schema)
    peer = await open_peer()
    negotiation = await peer.handshake([(name, without_field(schema, missing))])
    assert not negotiation.ok, (
        f"a writer schema of {name} without the required field {missing!r} got ok=true: "
        "check_backward(reader, writer) must fail with a missing field"
    )
    assert any(missing in error for error in negotiation.errors), (
        f"ok=false but the errors {negotiation.errors} do not name the missing field {missing!r}"
    )
    closed, data = await peer.closes_silently()
    assert closed, (
        'after Schema_negotiation(ok=false) the consumer kept the connection open ("[connection rejected]")'
    )
    assert not data, f"after refusing the schemas the consumer sent more: {short_hex(data)}"


@requirement(
    "ripp.handshake.server.refuses-unsupported-protocol-version",
    "MUST",
    'RIPP, Handshake ("Protocol version compatibility"); Field Details ("The receiver must reject '
    'messages with an unsupported version") (profile P5: a Handshake protocol_version other than 1 '
    "gets ok=false, then the consumer closes; RIPP-E3 reads that must as the envelope's version)",
    depends=[HANDSHAKE],
    errata=["RIPP-E3"],
    basis="profile: P5 handshake and schema negotiation (protocol_version of the Handshake not 1: "
    "ok=false, and after ok=false the consumer closes), docs/ripp-profile.md",
)
async def test_refuses_unsupported_protocol_version(open_peer, registry):
    peer = await open_peer()
    negotiation = await peer.handshake(list(registry.items()), protocol_version=2)
    assert not negotiation.ok, (
        "a Handshake with protocol_version 2 got ok=true (only version 1 exists)"
    )
    closed, data = await peer.closes_silently()
    assert closed, "after refusing protocol_version 2 the consumer kept the connection open"


@requirement(
    "ripp.envelope.server.sequence-increases",
    "MUST",
    'RIPP, Field Details ("Sequence number: Monotonically increasing per sender") (profile P6: the '
    "sender's per-connection envelope counter)",
    depends=[CHECKPOINT],
    errata=["RIPP-E3"],
    basis="profile: P6 sequence numbers (the envelope sequence is the sender's per-connection "
    "counter, 1 then +1 for each envelope, for consumers as for producers), docs/ripp-profile.md",
)
async def test_sequence_increases(ready_peer):
    # The Schema_negotiation and two Checkpoint_acks: three envelopes of the
    # consumer on one connection, enough to show a counter that does not increase.
    peer = await ready_peer()
    for checkpoint_id in (51, 52):
        await peer.checkpoint(checkpoint_id)
    numbers = [r.envelope.sequence for r in peer.received]
    assert all(b > a for a, b in zip(numbers, numbers[1:])), (
        f"the consumer's envelopes (Schema_negotiation, then two Checkpoint_acks) carry sequence numbers "
        f"{numbers}: each must be above the one before (profile P6)"
    )
    counter = list(range(1, len(numbers) + 1))
    assert numbers == counter, (
        f"the consumer's envelopes (Schema_negotiation, then two Checkpoint_acks) carry sequence "
        f"numbers {numbers}; profile P6: the per-connection counter, 1 for the first envelope and +1 "
        f"for each after it, {counter}"
    )


LIVENESS_INTERVALS = 3
"""Profile P8: the consumer closes when this many intervals pass with no Heartbeat."""
MAX_LIVENESS_WAIT = 30.0


@requirement(
    "ripp.heartbeat.server.closes-without-heartbeats",
    "MUST",
    'RIPP, Heartbeat ("The coordinator uses heartbeats for liveness detection and load-aware partition '
    'assignment.") (profile P8: 3 intervals with no Heartbeat, the consumer closes; P9)',
    depends=[CHECKPOINT],
    basis="profile: P8 heartbeats (the consumer treats a producer as dead when 3 intervals pass "
    "with no Heartbeat, and closes; P9), docs/ripp-profile.md",
)
async def test_closes_without_heartbeats(open_peer, registry, deadline):
    peer, worker_id, negotiation = await negotiated(open_peer, registry)
    interval = negotiation.heartbeat_interval_ms / 1000
    if LIVENESS_INTERVALS * interval > MAX_LIVENESS_WAIT:
        not_applicable(
            f"the consumer asks for a Heartbeat every {interval:g} s: {LIVENESS_INTERVALS} intervals "
            f"are more than this case waits ({MAX_LIVENESS_WAIT:g} s)"
        )
    # First Heartbeats, for more than the three intervals since the
    # negotiation: a consumer that closes whatever comes (or counts from the
    # negotiation) shows here, and a checkpoint after them must be answered.
    for n in range(4):
        await peer.send(
            Heartbeat(worker_id, time.time_ns(), 0.5),
            f"Heartbeat {n + 1}, every {0.8 * interval:g} s",
        )
        last = time.monotonic()
        await asyncio.sleep(0.8 * interval)
    await peer.checkpoint(61)
    # Then none: the consumer must close, sending nothing, about three
    # intervals after the last (not before one and a half, the longest gap
    # a conformant producer may leave).
    closed, data = await peer.closes_silently(
        LIVENESS_INTERVALS * interval + deadline - (time.monotonic() - last)
    )
    silent_for = time.monotonic() - last
    assert closed, (
        f"the producer sent no Heartbeat for {silent_for:.2f} s after asking for one every {interval:g} s; "
        f"the consumer must take it for dead after {LIVENESS_INTERVALS} intervals and close (profile P8)"
    )
    assert not data, (
        f"before closing for the missing Heartbeats the consumer sent {short_hex(data)}"
    )
    assert silent_for >= 1.5 * interval, (
        f"the consumer closed {silent_for:.2f} s after the last Heartbeat, before 1.5 intervals of {interval:g} s "
        "(profile P8: three intervals; a conformant producer's gaps reach 1.5)"
    )


@requirement(
    CHECKPOINT,
    "MUST",
    'RIPP, Message Types ("2Checkpoint_requestcoordinator -> workerTrigger checkpoint") (profile P7)',
    depends=[HANDSHAKE],
    basis="profile: P7 checkpoint (the consumer answers a Checkpoint_request with one "
    "Checkpoint_ack, one source_state per declared output, 0, 0 and the empty state's digest "
    "before any Delta), docs/ripp-profile.md",
)
async def test_answers_checkpoint_request(ready_peer, registry):
    peer = await ready_peer()
    ack = await peer.checkpoint(41)
    names = sorted(s.source_output for s in ack.sources)
    assert names == sorted(registry), (
        f"the Checkpoint_ack lists sources {names}, the Handshake declared {sorted(registry)}"
    )
    for state in ack.sources:
        assert (
            state.last_sequence_no == 0
            and state.applied_count == 0
            and state.state_digest.hex() == "93b885adfe0da089cdf634904fd59f71"
        ), (
            f"before any Delta, source {state.source_output} shows {describe(state)} "
            "(profile P7: 0, 0 and the digest of the empty state)"
        )


@requirement(
    "ripp.heartbeat.server.closes-on-foreign-worker",
    "MUST",
    'RIPP, Heartbeat ("worker_id : string") (profile P8: a Heartbeat whose worker_id differs from '
    "the Handshake's is a protocol error; P9: close, sending nothing)",
    depends=[CHECKPOINT],
    basis="profile: P8 heartbeats (a Heartbeat whose worker_id differs from the Handshake's "
    "source_worker_id is a protocol error) and P9 (close, nothing sent), docs/ripp-profile.md",
)
async def test_closes_on_foreign_worker(open_peer, registry):
    peer, worker_id, negotiation = await negotiated(open_peer, registry)
    # A consumer that does not compare the worker_id takes the Heartbeat and
    # answers the Checkpoint_request after it; one that does closes first.
    foreign = f"{worker_id}-other"
    data = encode_envelope(peer.envelope(Heartbeat(foreign, time.time_ns(), 0.5)))
    data += encode_envelope(peer.envelope(CheckpointRequest(71)))
    await peer.conn.send_quietly(
        data,
        f"a Heartbeat naming worker_id {foreign!r} (the Handshake named {worker_id!r}), then a "
        "Checkpoint_request in the same write",
    )
    closed, sent = await peer.closes_at_once()
    assert not sent, (
        f"after a Heartbeat naming worker_id {foreign!r}, not the Handshake's {worker_id!r}, the "
        f"consumer answered instead of closing: {short_hex(sent)} (profile P8: a protocol error; "
        "P9: close, sending nothing)"
    )
    assert closed, (
        f"after a Heartbeat naming worker_id {foreign!r}, not the Handshake's {worker_id!r}, the "
        "consumer kept the connection open (profile P8: a protocol error; P9: close)"
    )


@requirement(
    "ripp.heartbeat.server.closes-on-load-out-of-range",
    "MUST",
    'RIPP, Heartbeat ("load : float       (* 0.0 to 1.0 *)") (profile P3: load is a finite float '
    "in [0.0, 1.0]; P8: a Heartbeat whose load is out of range is a protocol error: close)",
    depends=[CHECKPOINT],
    basis="profile: P3 range rules (load is a finite float in [0.0, 1.0]) and P8 (a Heartbeat "
    "whose load is out of range is a protocol error: close, sending nothing), docs/ripp-profile.md",
)
async def test_closes_on_load_out_of_range(open_peer, registry):
    peer, worker_id, negotiation = await negotiated(open_peer, registry)
    await closes_on(
        peer,
        encode_envelope(peer.envelope(Heartbeat(worker_id, time.time_ns(), 1.5))),
        "a Heartbeat of the Handshake's worker with load 1.5",
        "profile P3: load in [0.0, 1.0]; P8: out of range is a protocol error",
    )


@requirement(
    "ripp.handshake.server.closes-on-message-before-handshake",
    "MUST",
    f'{HANDSHAKE_TEXT} ("Connection establishment follows a 3-step protocol:") (profile P2: '
    "anything but a Handshake first at the consumer is a protocol error; P9: close, sending "
    "nothing)",
    depends=[HANDSHAKE],
    basis="profile: P2 message types and directions (a message that comes before the step that "
    "allows it, anything but a Handshake first at the consumer, is a protocol error: close at "
    "once, sending nothing) and P9, docs/ripp-profile.md",
)
async def test_closes_on_message_before_handshake(open_peer, registry):
    peer = await open_peer()
    worker_id = new_worker_id()
    # A Heartbeat of the worker whose Handshake follows in the same write:
    # valid but for its place, so only the order can make a consumer refuse
    # it; one that skips or takes it answers the Handshake, one that
    # refuses closes first.
    early = encode_envelope(peer.envelope(Heartbeat(worker_id, time.time_ns(), 0.5)))
    handshake = encode_envelope(peer.envelope(Handshake(worker_id, list(registry.items()), 1)))
    await closes_on(
        peer,
        early,
        f"a Heartbeat of worker {worker_id!r} before any Handshake",
        "profile P2: anything but a Handshake first is a protocol error",
        probe=handshake,
        probe_what="that worker's Handshake",
    )


@requirement(
    "ripp.handshake.server.closes-on-second-handshake",
    "MUST",
    f'{HANDSHAKE_TEXT} ("Connection establishment follows a 3-step protocol:") (profile P2: the '
    "producer sends the Handshake once; a second Handshake is a protocol error; P9: close, "
    "sending nothing)",
    depends=[CHECKPOINT],
    basis="profile: P2 message types and directions (the Handshake is sent once, first; a second "
    "Handshake is a protocol error: close at once, sending nothing) and P9, docs/ripp-profile.md",
)
async def test_closes_on_second_handshake(open_peer, registry):
    peer, worker_id, negotiation = await negotiated(open_peer, registry)
    # The same Handshake again: a consumer that ignores it answers the
    # Checkpoint_request after it, one that negotiates anew sends a
    # Schema_negotiation; one that refuses closes first.
    again = encode_envelope(peer.envelope(Handshake(worker_id, list(registry.items()), 1)))
    await closes_on(
        peer,
        again,
        "a second Handshake (the same as the first) after the ok Schema_negotiation",
        "profile P2: a second Handshake is a protocol error",
    )


async def shown_envelopes(open_peer, registry) -> list[RippPeer]:
    """Each kind of envelope a consumer of the profile sends (P2, P5, P7):
    the Schema_negotiation ok=true to a Handshake of the registry's schemas,
    the Checkpoint_ack to a Checkpoint_request after a Delta, and on a second
    connection the Schema_negotiation ok=false to a Handshake missing a
    required field. Which answers come, and when, is the other cases' rules:
    a connection the target ends early, or answers otherwise, shows less
    (exchange_cut_short)."""
    name, schema = next(iter(registry.items()))
    accepted = await open_peer("each kind of envelope the consumer sends")
    with exchange_cut_short(accepted.conn.trace):
        await accepted.handshake(list(registry.items()))
        await accepted.send_raw(
            accepted.delta_bytes(name, schema, 1, key("GRAMMAR"), set_delta(schema, 1)),
            f"Delta 1 of {name}",
        )
        await accepted.checkpoint(11)
    refused = await open_peer("the consumer's Schema_negotiation ok=false")
    with exchange_cut_short(refused.conn.trace):
        await refused.handshake([(name, without_field(schema, required_field(schema)))])
    return [accepted, refused]


@requirement(
    SERVER_GRAMMAR,
    "MUST",
    ENVELOPE_GRAMMAR,
    errata=["RIPP-E2"],
    basis=f"{GRAMMAR_BASIS} in every envelope a consumer sends",
    grammar=True,
)
async def test_sends_well_formed_envelopes(open_peer, registry, node_grammar):
    """Every envelope the consumer sent in this run, in every case's traffic,
    is an envelope of the grammar: the violations the other cases met (each
    of them blocked by this case) and those of its own exchange, which shows
    each kind of envelope a consumer sends (shown_envelopes)."""
    with node_grammar.judging():
        peers = await shown_envelopes(open_peer, registry)
        # peer.consumed: the envelopes read whole passed the grammar, whatever
        # their payloads (P3, P4: sends-valid-envelopes).
        if not any(peer.consumed for peer in peers):
            blocked(
                HANDSHAKE,
                "failed within this case",
                "the consumer sent no whole envelope on either connection (not even a "
                "Schema_negotiation), so there was nothing to judge",
            )

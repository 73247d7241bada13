"""Target as client (producer): the harness listens, launches the target's
producer pointed at it and plays the consumer (RIPP, "Handshake Protocol",
"Heartbeat", "Sequence Numbering"; docs/ripp-profile.md P2, P5, P6, P8)."""

from __future__ import annotations

import itertools
import struct
import time

from conformance.core.node_grammar import exchange_cut_short
from conformance.core.requirements import blocked, not_applicable, requirement
from conformance.core.transport import Deadline, DeadlineExceeded, short_hex
from reference_impl.ripp.envelope import CRC_SIZE, crc32c, encode_envelope
from reference_impl.ripp import binprot as bp
from reference_impl.ripp.payloads import (
    DELTA_T,
    CheckpointAck,
    CheckpointRequest,
    DeltaMsg,
    Handshake,
    Heartbeat,
    PayloadError,
    SchemaNegotiation,
    SourceState,
    decode_delta,
    fingerprint,
)
from reference_impl.ripp.session import SourceTrack, state_digest

from .peer import ENVELOPE_GRAMMAR, GRAMMAR_BASIS, canonical_payload
from .prerequisites import CLIENT_ENVELOPES, CLIENT_GRAMMAR, CLIENT_HANDSHAKE

CLIENT_WAITS = "ripp.handshake.client.waits-for-negotiation"
"""A producer that does not wait for the Schema_negotiation has sent its Deltas
before any answer: the cases judging what it sends after one rely on it."""

HEARTBEAT_MS = 1000
"""The interval the harness asks for: short, so that a case sees several,
and long enough that P8's [0.5, 1.5] band (here +-0.5 s) is not met by a
producer whose timer fires late on a loaded machine. At 300 ms the band was
+-0.15 s, and the reference producer stamped one gap of 0.45 s while ten
test workers shared two cores: a verdict about the machine, not the node."""
WATCH_SECONDS = 4.5
"""Four gaps or more at HEARTBEAT_MS."""


async def accept_handshake(
    peer, *, ok: bool = True, interval_ms: int = HEARTBEAT_MS, **kw
) -> Handshake:
    # Whatever comes before the Handshake is the rule of sends-handshake-first,
    # not of the case calling this: it is skipped (at most a few envelopes).
    for _ in range(8):
        got = await peer.next_envelope("the producer's Handshake", **kw)
        if isinstance(got.message, Handshake):
            break
    else:
        raise AssertionError("the producer sent 8 envelopes and no Handshake")
    hs = got.message
    errors = (
        []
        if ok
        else [f"{name}: missing field x" for name, _ in hs.output_schemas[:1]]
        or ["missing field x"]
    )
    await peer.send(
        SchemaNegotiation(ok, errors, 1, interval_ms, "conformance-consumer"),
        f"Schema_negotiation ok={str(ok).lower()}, heartbeat_interval_ms {interval_ms}",
    )
    return hs


async def read_all(peer, count: int, **kw) -> list:
    return [
        await peer.next_envelope(f"envelope {n + 1} after the negotiation", **kw)
        for n in range(count)
    ]


@requirement(
    CLIENT_ENVELOPES,
    "MUST",
    'RIPP, Message Envelope Format ("Payload (bin_prot encoded)"); Field Details ("Schema '
    'fingerprint: 32-byte zero-padded string") (profile P3; P4: a Delta carries the fingerprint '
    "of its writer schema)",
    role="client",
    basis="wire-format: the payload layouts of profile P3 (exactly what bin_write_t writes) and "
    "the fingerprint field of Message Envelope Format (zero-padded ASCII; a Delta's non-empty, "
    "profile P4) in the envelopes the node sends; the envelope's own layout is the grammar "
    "case's (sends-well-formed-envelopes)",
)
async def test_client_sends_valid_envelopes(launched_producer):
    async with launched_producer(count=3) as peer:
        await accept_handshake(peer)
        received = await read_all(peer, 3)
        deltas = [r for r in received if isinstance(r.message, DeltaMsg)]
        assert deltas, (
            f"no Delta among the producer's first envelopes: {[type(r.message).__name__ for r in received]}"
        )
        for r in deltas:
            assert len(r.envelope.fingerprint.rstrip(b"\0")) > 0, (
                f"a Delta carries an empty schema fingerprint (profile P4): {short_hex(r.raw)}"
            )


@requirement(
    CLIENT_HANDSHAKE,
    "MUST",
    'RIPP, Handshake ("Sent on connection establishment"); Handshake Protocol (profile P2: the '
    "producer sends the Handshake once, first; P5)",
    role="client",
    depends=[CLIENT_ENVELOPES],
    basis="profile: P2 message types and directions (Handshake: sent by the producer, the "
    "connecting side, once, first) and P5 (protocol_version 1), docs/ripp-profile.md",
)
async def test_client_sends_handshake_first(launched_producer):
    async with launched_producer(count=1) as peer:
        first = await peer.next_envelope("the producer's first envelope")
        assert isinstance(first.message, Handshake), (
            f"the producer's first message is a {type(first.message).__name__}, not a Handshake: {short_hex(first.raw)}"
        )
        assert first.message.protocol_version == 1 and first.message.output_schemas, (
            f"Handshake protocol_version {first.message.protocol_version}, outputs {first.message.output_schemas}"
        )


@requirement(
    "ripp.envelope.client.sends-zero-flags",
    "MUST",
    'RIPP, Field Details ("Flags: Reserved for future use (e.g., compression bit, priority). '
    'Currently always 0.")',
    role="client",
    depends=[CLIENT_ENVELOPES],
    basis="wire-format: the Flags byte at offset 6 of the envelope, reserved and currently always 0 "
    "(Field Details) in every envelope the node sends; a receiver of the profile refuses any "
    "other value (P1, check 6)",
)
async def test_client_sends_zero_flags(launched_producer):
    async with launched_producer(count=2) as peer:
        await accept_handshake(peer, allow_flags=True)
        await read_all(peer, 2, allow_flags=True)
        received = list(peer.received)
        flagged = [r for r in received if r.raw[6] != 0]
        assert not flagged, (
            f"{len(flagged)} envelope(s) with non-zero flags, first: {short_hex(flagged[0].raw)}"
        )


@requirement(
    "ripp.envelope.client.sequence-increases",
    "MUST",
    'RIPP, Field Details ("Sequence number: Monotonically increasing per sender") (profile P6: '
    "the sender's per-connection envelope counter)",
    role="client",
    depends=[CLIENT_HANDSHAKE],
    errata=["RIPP-E3"],
    basis="profile: P6 sequence numbers (the envelope sequence is the sender's per-connection "
    "counter, 1 then +1 for each envelope), docs/ripp-profile.md",
)
async def test_client_envelope_sequence_increases(launched_producer):
    async with launched_producer(count=4) as peer:
        await accept_handshake(peer)
        await read_all(peer, 4)
        numbers = [r.envelope.sequence for r in peer.received]
        assert all(b > a for a, b in zip(numbers, numbers[1:])), (
            f"envelope sequence numbers {numbers}: each must be above the one before (profile P6)"
        )
        counter = list(range(1, len(numbers) + 1))
        assert numbers == counter, (
            f"envelope sequence numbers {numbers}; profile P6: the per-connection counter, 1 for "
            f"the first envelope and +1 for each after it, {counter}"
        )


@requirement(
    "ripp.delta.client.sends-deltas",
    "MUST",
    'RIPP, Sequence Numbering ("Each worker maintains a monotonically increasing sequence counter per '
    'output")',
    role="client",
    depends=[CLIENT_HANDSHAKE],
    basis="wire-format: sequence_no, whose value the text fixes as the worker's monotonically "
    "increasing counter per output (Sequence Numbering); a receiver reads a number at or below "
    "the last of its output as a duplicate and discards the Delta (set_remote, profile P6)",
)
async def test_client_delta_sequence_per_output(launched_producer):
    async with launched_producer(count=4) as peer:
        await accept_handshake(peer)
        received = await read_all(peer, 4)
        per_output: dict[str, list[int]] = {}
        for r in received:
            if isinstance(r.message, DeltaMsg):
                per_output.setdefault(r.message.source_output, []).append(r.message.sequence_no)
        assert per_output, "the producer sent no Delta after an ok negotiation"
        for output, numbers in per_output.items():
            assert all(b > a for a, b in zip(numbers, numbers[1:])), (
                f"Deltas of {output} carry sequence_no {numbers}: the counter per output must increase"
            )


@requirement(
    "ripp.delta.client.deltas-match-handshake",
    "MUST",
    'RIPP, Field Details ("Schema fingerprint: 32-byte zero-padded string."); Encoding ("No schema '
    'embedded in the payload") (profile P6: a Delta for an undeclared output, not decoding as Delta.t, or '
    "naming a field outside the writer schema is a protocol error; P4)",
    role="client",
    depends=[CLIENT_HANDSHAKE],
    basis="profile: P4 schema fingerprint (a Delta carries the fingerprint of the writer schema of "
    "its source_output as declared in the Handshake) and P6 deltas (an undeclared output, "
    "delta_bytes not decoding as Delta.t, or a field outside the writer schema is a protocol "
    "error), docs/ripp-profile.md",
)
async def test_client_deltas_match_the_handshake(launched_producer):
    """Found by interop as a cross-check: a producer whose Deltas name a
    field its Handshake's schema lacks passed every other case, and every
    consumer following the profile closes on its first Delta."""
    async with launched_producer(count=4) as peer:
        hs = await accept_handshake(peer)
        tracks = {
            name: SourceTrack(schema, fingerprint(schema)) for name, schema in hs.output_schemas
        }
        received = await read_all(peer, 4)
        deltas = [r for r in received if isinstance(r.message, DeltaMsg)]
        assert deltas, "the producer sent no Delta after an ok negotiation"
        for r in deltas:
            msg = r.message
            track = tracks.get(msg.source_output)
            assert track is not None, (
                f"a Delta for output {msg.source_output!r}, which the Handshake did not "
                f"declare (it declared {sorted(tracks)}): {short_hex(r.raw)}"
            )
            assert r.envelope.fingerprint == track.fingerprint, (
                f"the Delta for {msg.source_output!r} #{msg.sequence_no} carries the schema fingerprint "
                f"{r.envelope.fingerprint!r}; its output's schema in the Handshake has {track.fingerprint!r}"
            )
            try:
                delta = decode_delta(msg.delta_bytes)
                track.validate(delta)
            except PayloadError as exc:
                raise AssertionError(
                    f"the Delta for {msg.source_output!r} #{msg.sequence_no} does not match its "
                    f"writer schema: {exc}; delta_bytes {short_hex(msg.delta_bytes)}"
                ) from None
            # The values the envelope's decoder does not see into are bin_prot too (P3, P6).
            what = f"the delta_bytes of the Delta for {msg.source_output!r} #{msg.sequence_no}"
            canonical_payload(what, msg.delta_bytes, r.raw, delta, DELTA_T)
            for fv in getattr(delta, "fields", []):
                value_type = track.field_types[fv.field]
                canonical_payload(
                    f"the value of field {fv.field!r} in {what}",
                    fv.value,
                    r.raw,
                    bp.decode(value_type, fv.value),
                    value_type,
                )


@requirement(
    CLIENT_WAITS,
    "MUST",
    'RIPP, Handshake Protocol ("Connection establishment follows a 3-step protocol:") (profile P2: '
    "Deltas, Heartbeats and Checkpoint_requests only after an ok Schema_negotiation)",
    role="client",
    depends=[CLIENT_HANDSHAKE],
    basis="profile: P2 message types and directions (Delta, Checkpoint_request and Heartbeat are "
    "sent by the producer after an ok Schema_negotiation) and P5, docs/ripp-profile.md",
)
async def test_client_waits_for_negotiation(launched_producer, deadline):
    async with launched_producer(count=3, stay=2.0) as peer:
        first = await peer.next_envelope("the producer's Handshake")
        assert isinstance(first.message, Handshake), (
            f"the producer's first message is a {type(first.message).__name__}, not a Handshake: {short_hex(first.raw)}"
        )
        # The Schema_negotiation is held back for a while: a producer that
        # sends its Deltas without waiting for it shows them here (answered at
        # once, it could not be told from one that waits).
        window = min(1.0, deadline / 2)
        try:
            early = await peer.next_envelope(
                "nothing while the Schema_negotiation is held back", deadline=Deadline(window)
            )
        except DeadlineExceeded:
            early = None
        assert early is None, (
            f"with its Handshake unanswered for {window:g} s, the producer sent a "
            f"{type(early.message).__name__}: {short_hex(early.raw)}; nothing may follow the Handshake before an ok "
            "Schema_negotiation (profile P2)"
        )
        await peer.send(
            SchemaNegotiation(True, [], 1, HEARTBEAT_MS, "conformance-consumer"),
            "Schema_negotiation ok=true, held back",
        )
        # Its Deltas come after it: the held-back window did hold something back.
        got = await read_all(peer, 1)
        assert got, "no envelope after the Schema_negotiation"


@requirement(
    "ripp.envelope.client.rejects-unsupported-version",
    "MUST",
    'RIPP, Field Details ("The receiver must reject messages with an unsupported version") (profile P1 '
    "and P9: a producer refusing an envelope closes, sending nothing)",
    role="client",
    depends=[CLIENT_HANDSHAKE, CLIENT_WAITS],
    errata=["RIPP-E3"],
    basis="plain-words",
)
async def test_client_rejects_unsupported_version(launched_producer):
    async with launched_producer(count=3, stay=2.0) as peer:
        for _ in range(8):
            got = await peer.next_envelope("the producer's Handshake")
            if isinstance(got.message, Handshake):
                break
        else:
            raise AssertionError("the producer sent 8 envelopes and no Handshake")
        data = bytearray(
            encode_envelope(
                peer.envelope(SchemaNegotiation(True, [], 1, HEARTBEAT_MS, "conformance-consumer"))
            )
        )
        data[4] = 2
        body = bytes(data[:-CRC_SIZE])
        data[-CRC_SIZE:] = struct.pack("<I", crc32c(body))
        await peer.conn.send_quietly(
            bytes(data), "Schema_negotiation ok=true in an envelope of version 2 (CRC recomputed)"
        )
        closed, sent = await peer.closes_silently()
        assert not sent, (
            f"after a Schema_negotiation in an envelope of version 2 the producer went on as if it were "
            f"version 1 and sent {short_hex(sent)}; the envelope must be refused (profile P1: close, "
            "sending nothing)"
        )
        assert closed, (
            "after a Schema_negotiation in an envelope of version 2 the producer kept the connection open"
        )


@requirement(
    "ripp.handshake.client.closes-on-other-protocol-version",
    "MUST",
    'RIPP, Handshake ("Protocol version compatibility") (profile P5: a producer receiving a '
    "Schema_negotiation whose protocol_version is not 1 closes, ok or not; P9)",
    role="client",
    depends=[CLIENT_HANDSHAKE, CLIENT_WAITS],
    basis="profile: P5 handshake and schema negotiation (a producer receiving ok = false, or a "
    "protocol_version other than 1, closes), docs/ripp-profile.md",
)
async def test_client_closes_on_other_protocol_version(launched_producer):
    async with launched_producer(count=3, stay=2.0) as peer:
        for _ in range(8):
            got = await peer.next_envelope("the producer's Handshake")
            if isinstance(got.message, Handshake):
                break
        else:
            raise AssertionError("the producer sent 8 envelopes and no Handshake")
        # ok=true: a producer that reads only ok goes on and sends its Deltas.
        await peer.send(
            SchemaNegotiation(True, [], 2, HEARTBEAT_MS, "conformance-consumer"),
            "Schema_negotiation ok=true naming protocol_version 2",
        )
        closed, sent = await peer.closes_silently()
        assert not sent, (
            f"after a Schema_negotiation (ok=true) naming protocol_version 2 the producer went on "
            f"and sent {short_hex(sent)}; profile P5: a protocol_version other than 1 closes"
        )
        assert closed, (
            "after a Schema_negotiation naming protocol_version 2 the producer kept the connection "
            "open (profile P5: it closes)"
        )


@requirement(
    "ripp.handshake.client.stops-after-rejection",
    "MUST",
    'RIPP, Handshake Protocol ("If schema negotiation fails"; "[connection rejected]") (profile P5: '
    "a producer receiving ok=false closes; P9)",
    role="client",
    depends=[CLIENT_HANDSHAKE, CLIENT_WAITS],
    basis="profile: P5 handshake and schema negotiation (a producer receiving ok = false closes; "
    "P9: negotiation ok=false, the producer closes), docs/ripp-profile.md",
)
async def test_client_stops_after_rejection(launched_producer):
    async with launched_producer(count=3, stay=2.0) as peer:
        await accept_handshake(peer, ok=False)
        closed, data = await peer.closes_silently()
        assert not data, (
            f"after Schema_negotiation(ok=false) the producer went on sending: {short_hex(data)}"
        )
        assert closed, "after Schema_negotiation(ok=false) the producer kept the connection open"


@requirement(
    "ripp.heartbeat.client.names-handshake-worker",
    "MUST",
    'RIPP, Heartbeat ("worker_id : string") (profile P8: worker_id is the Handshake\'s '
    "source_worker_id; a consumer closes on a Heartbeat naming another)",
    role="client",
    depends=[CLIENT_HANDSHAKE],
    basis="profile: P8 heartbeats (a Heartbeat's worker_id is the Handshake's source_worker_id, "
    "and one naming another is a protocol error that closes the connection), docs/ripp-profile.md",
)
async def test_client_heartbeat_names_handshake_worker(launched_producer, deadline):
    interval = HEARTBEAT_MS / 1000
    async with launched_producer(count=0, stay=2 * interval + deadline + 2) as peer:
        hs = await accept_handshake(peer)
        # Whether and when Heartbeats come is the rule of sends-at-interval
        # (a SHOULD, so no prerequisite of this MUST): this case judges the
        # worker_id of those that come within two intervals, up to two.
        heartbeats = []
        wait = Deadline(2 * interval + deadline)
        while len(heartbeats) < 2:
            try:
                got = await peer.next_envelope("the producer's Heartbeats", deadline=wait)
            except DeadlineExceeded:
                break
            if isinstance(got.message, Heartbeat):
                heartbeats.append(got)
        if not heartbeats:
            not_applicable(
                f"no Heartbeat within {2 * interval + deadline:g} s of the negotiation "
                f"(heartbeat_interval_ms {HEARTBEAT_MS}); sends-at-interval judges that"
            )
        for got in heartbeats:
            assert got.message.worker_id == hs.source_worker_id, (
                f"a Heartbeat names worker_id {got.message.worker_id!r}, the Handshake "
                f"source_worker_id {hs.source_worker_id!r} (profile P8: the same; a consumer closes "
                f"on another): {short_hex(got.raw)}"
            )


@requirement(
    "ripp.heartbeat.client.sends-at-interval",
    "SHOULD",
    'RIPP, Heartbeat ("Sent periodically (default every 5 seconds)"); Message Types (profile P8)',
    role="client",
    depends=[CLIENT_HANDSHAKE],
    basis="profile: P8 heartbeats (the producer adopts the consumer's heartbeat_interval_ms; gaps "
    "between consecutive Heartbeats in [0.5, 1.5] intervals), docs/ripp-profile.md",
)
async def test_client_heartbeats_at_negotiated_interval(launched_producer, deadline):
    interval = HEARTBEAT_MS / 1000
    async with launched_producer(count=0, stay=WATCH_SECONDS + interval + deadline + 2) as peer:
        await accept_handshake(peer)
        # The watch starts at the first Heartbeat, not at the negotiation: the
        # bytes may take up to the read deadline to come (a producer writing
        # late, a slow network), and this case judges the rate, not how soon
        # the first one leaves.
        first = Deadline(interval + deadline)
        while True:
            got = await peer.next_envelope("the producer's first Heartbeat", deadline=first)
            if isinstance(got.message, Heartbeat):
                break
        start = time.monotonic()
        arrivals: list[float] = [0.0]
        stamps: list[int] = [got.message.timestamp_ns]
        watch = Deadline(WATCH_SECONDS)
        while not watch.expired:
            try:
                got = await peer.next_envelope("the producer's next Heartbeat", deadline=watch)
            except AssertionError:
                if watch.expired:
                    break
                raise
            if isinstance(got.message, Heartbeat):
                arrivals.append(time.monotonic() - start)
                stamps.append(got.message.timestamp_ns)
        # Profile P8: consecutive gaps within [0.5, 1.5] intervals, so the
        # count over the watch lies between what the longest and the
        # shortest allowed gaps give (one more for the Heartbeat at its start,
        # one of slack at each end for the read's timing).
        fewest = int(WATCH_SECONDS / (1.5 * interval))
        most = int(WATCH_SECONDS / (0.5 * interval)) + 2
        assert fewest <= len(arrivals) <= most, (
            f"{len(arrivals)} Heartbeat(s) in the {WATCH_SECONDS} s from the first, after asking for one every "
            f"{HEARTBEAT_MS} ms (profile P8: gaps of 0.5 to 1.5 intervals give {fewest} to {most}); arrivals at "
            f"{[round(a, 2) for a in arrivals]} s"
        )
        # The gaps are judged on the producer's own timestamp_ns (profile P8:
        # "the producer's clock"), not on when the harness read them: on a
        # loaded machine the harness's reads bunch up, and that jitter is
        # the harness's, not the target's. The count above is judged on the
        # harness's clock, so a producer cannot fake its rate.
        gaps = [(b - a) / 1e9 for a, b in zip(stamps, stamps[1:])]
        off = [round(g, 3) for g in gaps if not 0.5 * interval <= g <= 1.5 * interval]
        assert not off, (
            f"Heartbeat gaps by their timestamp_ns {[round(g, 3) for g in gaps]} s; profile P8: "
            f"each within [0.5, 1.5] x {interval} s, off: {off}"
        )


UNREQUESTED_CHECKPOINT_ID = 424_242
"""The checkpoint_id of the Checkpoint_ack nobody asked for: far from the ids
a producer numbers its own requests with (the reference's 1, and 1000000 on
for its unprompted-traffic variant); the next one up if the producer has
requested it."""


@requirement(
    "ripp.checkpoint.client.closes-on-unrequested-ack",
    "MUST",
    'RIPP, Message Types ("3Checkpoint_ackworker -> coordinatorCheckpoint complete") (profile '
    "P7: a Checkpoint_ack answers a Checkpoint_request; P2: a message out of place is a protocol "
    "error; P9: close, sending nothing)",
    role="client",
    depends=[CLIENT_HANDSHAKE, CLIENT_WAITS],
    basis="profile: P2 message types and directions (a Checkpoint_ack is sent by the consumer, "
    "one per Checkpoint_request: one for a checkpoint the producer never requested comes before "
    "the step that allows it, a protocol error: close at once, sending nothing), P7 and P9, "
    "docs/ripp-profile.md",
)
async def test_client_closes_on_unrequested_ack(launched_producer, deadline):
    # The producer is asked to stay well past the window the case gives it to
    # close: one that drops the ack is still open at the window's end.
    async with launched_producer(count=1, stay=3 * deadline + 2) as peer:
        hs = await accept_handshake(peer)
        # Its first envelope after the negotiation shows it took the
        # negotiation and goes on (a Delta, or a request of its own).
        await read_all(peer, 1)
        requested = {
            r.message.checkpoint_id
            for r in peer.received
            if isinstance(r.message, CheckpointRequest)
        }
        checkpoint_id = next(
            n for n in itertools.count(UNREQUESTED_CHECKPOINT_ID) if n not in requested
        )
        # A Checkpoint_ack a consumer would send for that checkpoint (P7: each
        # declared output, sorted, nothing applied): out of place, not malformed.
        names = sorted(
            (name for name, _ in hs.output_schemas),
            key=lambda n: n.encode("utf-8", "surrogateescape"),
        )
        empty = state_digest({})
        ack = CheckpointAck(
            checkpoint_id,
            "conformance-consumer",
            [SourceState(name, 0, 0, empty) for name in names],
        )
        await peer.send(ack, f"Checkpoint_ack for checkpoint {checkpoint_id}, never requested")
        # What the producer sent meanwhile (Heartbeats, its Deltas, requests
        # of its own) may have left before it read the ack: only the close counts.
        closed, sent = await peer.closes_silently()
        assert closed, (
            f"after a Checkpoint_ack for checkpoint {checkpoint_id}, which it never "
            f"requested, the producer kept the connection open for {deadline:g} s (profile P2, "
            f"P7: a protocol error; P9: close, sending nothing); it sent meanwhile "
            f"{short_hex(sent) if sent else 'nothing'}"
        )


GRAMMAR_DELTAS = 3
"""The Deltas the client grammar case asks the producer for."""


@requirement(
    CLIENT_GRAMMAR,
    "MUST",
    ENVELOPE_GRAMMAR,
    role="client",
    errata=["RIPP-E2"],
    basis=f"{GRAMMAR_BASIS} in every envelope a producer sends",
    grammar=True,
)
async def test_client_sends_well_formed_envelopes(launched_producer, deadline, node_grammar):
    """Every envelope the producer sent in this run, in every case's traffic,
    is an envelope of the grammar: the violations the other cases met (each
    of them blocked by this case) and those of its own exchange, which shows
    each kind of envelope a producer sends (P2, P8): its Handshake, its
    Deltas after an ok Schema_negotiation, and its Heartbeats (asked for
    every HEARTBEAT_MS). Which come, and when, is the other cases' rules: an
    exchange the producer ends early shows less (exchange_cut_short)."""
    stay = 2 * HEARTBEAT_MS / 1000 + deadline + 2
    with node_grammar.judging():
        async with launched_producer(count=GRAMMAR_DELTAS, stay=stay) as peer:
            with exchange_cut_short(peer.conn.trace):
                await accept_handshake(peer)
                watch = Deadline(2 * HEARTBEAT_MS / 1000 + deadline)
                # bounded: the Deltas, any requests of its own, then a Heartbeat
                for n in range(GRAMMAR_DELTAS + 8):
                    got = await peer.next_envelope(
                        f"envelope {n + 1} after the negotiation", deadline=watch
                    )
                    if isinstance(got.message, Heartbeat):
                        break
        # peer.consumed: the envelopes read whole passed the grammar, whatever
        # their payloads (P3, P4: sends-valid-envelopes).
        if not peer.consumed:
            blocked(
                CLIENT_HANDSHAKE,
                "failed within this case",
                "the producer sent no whole envelope (not even its Handshake), so there was "
                "nothing to judge",
            )

"""The RIPP reference node's faults: ``python -m reference_impl.ripp consume|produce
--fault NAME`` (repeatable). Each breaks one rule of the RIPP text or of the
project's profile (docs/ripp-profile.md) on purpose; ``cases`` are the
conformance cases that must catch it, and no other case may fail (cases
that rely on the broken rule to tell their own apart are ``blocked``). See
reference_impl/faults.py and docs/mutation.md.

Roles: "server" faults go to ``consume`` (the accepting consumer),
"client" faults to ``produce`` (the connecting producer).

Each fault is declared as what it changes at the named points of
:data:`POINTS`: the sessions (session.py), their envelope reader
(envelope.py) and the producer run (node.py) compute the correct value
there and pass it through :class:`~reference_impl.faults.FaultPoints`, so
the rules read without the ways of breaking them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import struct
from typing import Any, Optional

from ..faults import FaultSpec, fault_enum
from .envelope import CRC_SIZE, HEADER_SIZE, MAGIC, VERSION, MsgType, crc32c
from . import binprot as bp
from .payloads import (
    DEFAULT_HEARTBEAT_MS,
    PAYLOAD_TYPES,
    PROTOCOL_VERSION,
    DeltaMsg,
    DeltaT,
    FieldValue,
    PatchDelta,
    SetDelta,
    decode_payload,
    fingerprint,
    key_bytes,
    msg_type_of,
    sample_value,
)
from .schema import negotiate

POINTS: dict[str, str] = {
    # --- receiving envelopes (envelope.EnvelopeReader)
    "payload-bound": "the largest payload length the reader accepts in a header (max_payload); "
    "no context",
    "magic-accepted": "whether the first 4 bytes of a buffered header are accepted (they are the "
    "magic); context: magic (the 4 bytes)",
    "received-envelope": "the bytes of one complete envelope as received, before the envelope "
    "checks run on them; a change returns the bytes the checks see instead, or None to skip the "
    "envelope; no context",
    # --- sending envelopes (session._Session._send)
    "envelope-sequence": "the sequence number of an envelope the node sends; no context",
    "envelope-flags": "the flags byte of an envelope the node sends (0); no context",
    "sent-envelope": "the encoded bytes of an envelope the node sends; no context",
    "sent-payload": "the bin_prot bytes of the payload of an envelope the node sends (the "
    "shortest encoding of each value, P3); context: msg (the message they encode)",
    "received-payload": "the payload bytes of a received envelope the node decodes (all of "
    "them: a value must use every byte, P1); context: envelope",
    # --- the consumer (session.ConsumerSession)
    "negotiation-errors": "the consumer's errors for a Handshake (empty: ok = true); context: "
    "handshake, registry (output name -> reader schema)",
    "negotiation": "the Schema_negotiation the consumer answers a Handshake with (its own "
    "protocol_version, 1); context: handshake",
    "checkpoint-request-answered": "whether the consumer answers a Checkpoint_request it reads "
    "(True); no context",
    "checkpoint-ack": "the Checkpoint_ack the consumer sends; context: sources (output name -> "
    "SourceTrack)",
    "delta-fingerprint": "the schema fingerprint a Delta's envelope is checked with (its own); "
    "context: envelope, sources",
    "compared-last": "the sequence number a Delta's sequence_no must exceed to be applied (its "
    "source's last applied one); context: sequence_no, track (its SourceTrack), sources",
    "delta-record": "what the consumer keeps of a source's history for the faults (None: nothing), "
    "updated as a Delta arrives, before it is applied; context: sequence_no, track, applying "
    "(whether it will be applied)",
    "heartbeat-worker-accepted": "whether the consumer takes a Heartbeat (its worker_id is the "
    "Handshake's source_worker_id, P8); context: heartbeat",
    "undeclared-output-refused": "whether a Delta for an output the Handshake did not declare "
    "closes the connection (True, P6) rather than being dropped; context: delta",
    "output-fingerprint-matches": "whether a Delta's envelope fingerprint (a negotiated one) is "
    "that of its own output's schema (P4); context: delta, fingerprint",
    "early-message-refused": "whether a message other than a Handshake that comes first closes "
    "the connection (True, P2) rather than being dropped; context: envelope",
    "second-handshake-refused": "whether a Handshake after the first closes the connection "
    "(True, P2) rather than being dropped; context: envelope",
    "received-delta": "the Delta.t decoded from a Delta's delta_bytes, before it is checked "
    "against the writer schema (P6); context: track (the output's SourceTrack)",
    "liveness-deadline": "when the consumer closes a producer that sent no Heartbeat (ns, None: "
    "never); no context",
    # --- the producer (session.ProducerSession, node.run_producer)
    "deltas-before-handshake": "the Deltas (output, key, delta) the producer sends before its "
    "Handshake (none); context: outputs (name, writer schema)",
    "sending-states": "the states in which the producer may send Deltas and Checkpoint_requests "
    '({"open"}); no context',
    "negotiation-accepted": "whether the producer goes on after a Schema_negotiation of its "
    "protocol version (its ok field); context: negotiation",
    "control-fingerprint": "the schema fingerprint of the producer's Handshake, Heartbeats "
    "and Checkpoint_requests (32 zero bytes, P4); context: outputs (name, writer schema)",
    "heartbeat": "the Heartbeat the producer sends (worker_id: the Handshake's "
    "source_worker_id, P8); no context",
    "negotiation-version-accepted": "whether the producer takes a Schema_negotiation's "
    "protocol_version (it is 1, P5); context: negotiation",
    "heartbeat-interval-ms": "the Heartbeat interval the producer keeps, in ms (the negotiated "
    "one); no context",
    "heartbeat-deadline": "when the producer's next Heartbeat is due (ns, None: never); no context",
    "unrequested-ack-refused": "whether a Checkpoint_ack for a checkpoint the producer never "
    "requested closes the connection (True, P2, P7) rather than being dropped; context: ack",
    "delta-sequence-no": "the sequence_no of a Delta the producer sends; no context",
    "delta": "the Delta.t a Delta the producer sends carries; context: output",
    "deltas-before-negotiation": "whether the producer run sends its Deltas right after the "
    "Handshake rather than once the ok Schema_negotiation arrived (False); no context",
}


# --- what the faults change ----------------------------------------------------------------


def _crc_ok(raw: bytes) -> bool:
    return raw[-CRC_SIZE:] == struct.pack("<I", crc32c(raw[:-CRC_SIZE]))


def _with_crc(raw: bytes, wrong: bool = False) -> bytes:
    """``raw`` with its CRC-32C computed anew (``wrong``: that CRC XOR 1)."""
    return raw[:-CRC_SIZE] + struct.pack("<I", crc32c(raw[:-CRC_SIZE]) ^ wrong)


def _patched(raw: Optional[bytes], offset: int, value: bytes) -> Optional[bytes]:
    """``raw`` with ``value`` at ``offset``, its CRC right only if it was:
    switching one check off leaves the others to run on the bytes as
    received (a CRC that was wrong is still refused)."""
    if raw is None or raw[offset : offset + len(value)] == value:
        return raw
    return _with_crc(raw[:offset] + value + raw[offset + len(value) :], wrong=not _crc_ok(raw))


def accept_any_magic(accepted: bool, **_: Any) -> bool:
    return True


def magic_rewritten(raw: Optional[bytes]) -> Optional[bytes]:
    return _patched(raw, 0, MAGIC)


def version_rewritten(raw: Optional[bytes]) -> Optional[bytes]:
    return _patched(raw, 4, bytes([VERSION]))


def flags_cleared(raw: Optional[bytes]) -> Optional[bytes]:
    return _patched(raw, 6, b"\x00")


def crc_recomputed(raw: Optional[bytes]) -> Optional[bytes]:
    return None if raw is None else _with_crc(raw)


def unknown_type_skipped(raw: Optional[bytes]) -> Optional[bytes]:
    """An envelope of an undefined type is dropped once the checks before the
    type's (magic, CRC) passed; one that fails them is left to be refused."""
    if raw is None or raw[5] in set(MsgType) or not _crc_ok(raw):
        return raw
    return None


FAULTY_MAX_PAYLOAD = 64 << 20
"""The no-length-bound fault still stops somewhere: it proves the case
catches a node that waits for the claimed bytes, not that the machine has
2 GiB to spare."""


def no_length_bound(bound: int) -> int:
    return FAULTY_MAX_PAYLOAD


def always_one(number: int, **_: Any) -> int:
    return 1


def flag_one(flags: int) -> int:
    return 1


def crc_flipped(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 1])


def checkpoint_ack_crc_big_endian(data: bytes) -> bytes:
    """checkpoint-ack-crc-big-endian: a Checkpoint_ack's CRC-32C is stored
    big-endian (the text: "CRC-32C (Castagnoli, int32 LE)"); the envelopes
    before it in the session are sound."""
    if data[5] != MsgType.CHECKPOINT_ACK:
        return data
    return data[:-CRC_SIZE] + struct.pack(">I", crc32c(data[:-CRC_SIZE]))


def delta_crc_without_payload(data: bytes) -> bytes:
    """client-delta-crc-without-payload: a Delta's CRC-32C covers its 59
    header bytes only, not its payload (the text: "Covers all bytes from
    offset 0 through the end of the payload"); its Handshake is sound."""
    if data[5] != MsgType.DELTA:
        return data
    return data[:-CRC_SIZE] + struct.pack("<I", crc32c(data[:HEADER_SIZE]))


def negotiated_whatever_version(
    errors: list[str], *, handshake: Any, registry: dict, **_: Any
) -> list[str]:
    return negotiate(registry, dataclasses.replace(handshake, protocol_version=PROTOCOL_VERSION))


def every_schema_accepted(errors: list[str], *, handshake: Any, **_: Any) -> list[str]:
    """As if the registry read every output as written (the version still counts)."""
    return negotiate(dict(handshake.output_schemas), handshake)


def every_schema_refused(errors: list[str], **_: Any) -> list[str]:
    return ["refused"]


def never(answered: bool) -> bool:
    return False


def skip_fingerprint_check(fp: bytes, *, envelope: Any, sources: dict, **_: Any) -> bytes:
    """The fingerprint of the schema the Delta's output was negotiated with,
    whatever the envelope carries (a Delta that does not decode, or names an
    output not negotiated, keeps its own: the core refuses it as usual)."""
    try:
        msg = decode_payload(envelope.msg_type, envelope.payload)
    except ValueError:
        return fp
    track = sources.get(msg.source_output) if isinstance(msg, DeltaMsg) else None
    return fp if track is None else track.fingerprint


def _arrived(track: Any) -> frozenset:
    return (track.fault_record or {}).get("arrived", frozenset())


def arrival_recorded(record: Optional[dict], *, sequence_no: int, **_: Any) -> dict:
    record = record or {}
    return {**record, "arrived": record.get("arrived", frozenset()) | {sequence_no}}


def duplicate_applied(last: int, *, sequence_no: int, track: Any, **_: Any) -> int:
    """A sequence_no that arrived before is applied as if it were next."""
    if sequence_no <= last and sequence_no in _arrived(track):
        return sequence_no - 1
    return last


def late_gap_fill_applied(last: int, *, sequence_no: int, track: Any, **_: Any) -> int:
    """A sequence_no below the last applied that never arrived (a gap's late
    filler) is applied as if it were next (the last applied stays as it was)."""
    if sequence_no <= last and sequence_no not in _arrived(track):
        return sequence_no - 1
    return last


def held_after_gap(last: int, *, sequence_no: int, **_: Any) -> int:
    """A Delta past a gap is discarded, as if it had arrived before."""
    return sequence_no if sequence_no > last + 1 else last


def one_counter(last: int, *, sources: dict, **_: Any) -> int:
    """The highest sequence number applied for any source."""
    return max((track.last for track in sources.values()), default=last)


def digest_before_recorded(
    record: Optional[dict], *, track: Any, applying: bool, **_: Any
) -> Optional[dict]:
    if not applying:
        return record
    return {**(record or {}), "digest_before": track.digest()}


def digests_before_last(ack: Any, *, sources: dict, **_: Any) -> Any:
    """Each source's state digest as it was before its last applied Delta."""
    for state in ack.sources:
        record = sources[state.source_output].fault_record or {}
        state.state_digest = record.get("digest_before", state.state_digest)
    return ack


def no_deadline(deadline: Optional[int]) -> None:
    return None


def first_delta_early(deltas: list, *, outputs: list, **_: Any) -> list:
    """A Set of the first output's first key, with sample values."""
    if not outputs:
        return deltas
    name, schema = outputs[0]
    first = [FieldValue(f.field_name, sample_value(f.field_type, 1)) for f in schema.fields]
    return [*deltas, (name, key_bytes("K1"), SetDelta(first))]


def also_awaiting_negotiation(states: frozenset) -> frozenset:
    return states | {"await_negotiation"}


def rejection_ignored(ok: bool, **_: Any) -> bool:
    return True


def default_heartbeat_interval(interval_ms: int) -> int:
    return DEFAULT_HEARTBEAT_MS


def undeclared_field_added(delta: DeltaT, **_: Any) -> DeltaT:
    if isinstance(delta, (SetDelta, PatchDelta)):
        return type(delta)([*delta.fields, FieldValue("undeclared_field", b"\x00")])
    return delta


def at_once(early: bool) -> bool:
    return True


def _int_in_four_bytes(n: int) -> bytes:
    """An int in bin_prot's ``fd`` + int32 form, which its reader accepts for
    any value that fits, but its writer uses only from 2^15 on."""
    if -(1 << 31) <= n < 1 << 31:
        return b"\xfd" + struct.pack("<i", n)
    return bp.encode(bp.INT, n)


def ints_in_four_bytes(payload: bytes, *, msg: Any) -> bytes:
    """The payload with each int field of the message record (not those
    nested in lists or strings) written in four bytes: the same values, a
    longer encoding than the one bin_prot writes."""
    out = bytearray()
    for name, field_type in PAYLOAD_TYPES[msg_type_of(msg)].fields:
        value = getattr(msg, name)
        if field_type is bp.INT:
            out += _int_in_four_bytes(value)
        else:
            field_type.write(out, value)
    return bytes(out)


def first_output_fingerprint(fp: bytes, *, outputs: list, **_: Any) -> bytes:
    return fingerprint(outputs[0][1]) if outputs else fp


def handshake_version_echoed(negotiation: Any, *, handshake: Any, **_: Any) -> Any:
    return dataclasses.replace(negotiation, protocol_version=handshake.protocol_version)


def ack_of_another_worker(ack: Any, **_: Any) -> Any:
    return dataclasses.replace(ack, worker_id=ack.worker_id + "-checkpoints")


def sources_in_handshake_order(ack: Any, *, sources: dict, **_: Any) -> Any:
    """The source states in the order the Handshake declared the outputs
    (the consumer's sources, kept in that order), not sorted by name."""
    by_name = {state.source_output: state for state in ack.sources}
    return dataclasses.replace(ack, sources=[by_name[name] for name in sources if name in by_name])


_STATE_T = bp.List(bp.Tuple(bp.BYTES, bp.List(bp.Tuple(bp.BYTES, bp.BYTES))))
"""Profile P7's type of the applied state (session.py's, which imports this
module: it cannot be imported from there)."""


def digests_keys_in_arrival_order(ack: Any, *, sources: dict, **_: Any) -> Any:
    """Each state digest over the entries in the order their keys first
    arrived (fields still sorted), not sorted by key."""
    for state in ack.sources:
        entries = sources[state.source_output].entries
        listed = [(k, sorted(entries[k].items())) for k in entries]
        state.state_digest = hashlib.md5(bp.encode(_STATE_T, listed)).digest()
    return ack


def payload_trailing_bytes_dropped(payload: bytes, *, envelope: Any, **_: Any) -> bytes:
    """The payload cut after the value its type reads: bytes after it are
    ignored, as a reader that stops at the end of the value does."""
    reader = bp.Reader(payload)
    try:
        PAYLOAD_TYPES[MsgType(envelope.msg_type)].read(reader)
    except (ValueError, bp.BinProtError):
        return payload
    return payload[: reader.pos]


def heartbeat_of_another_worker(heartbeat: Any) -> Any:
    return dataclasses.replace(heartbeat, worker_id=heartbeat.worker_id + "-heartbeats")


def accepted(verdict: bool, **_: Any) -> bool:
    return True


def not_refused(refused: bool, **_: Any) -> bool:
    return False


def undeclared_fields_dropped(delta: DeltaT, *, track: Any, **_: Any) -> DeltaT:
    """The Delta without the fields its writer schema lacks, as a reader that
    skips unknown fields would apply it."""
    if isinstance(delta, (SetDelta, PatchDelta)):
        return type(delta)([fv for fv in delta.fields if fv.field in track.field_types])
    return delta


def load_clamped(payload: bytes, *, envelope: Any, **_: Any) -> bytes:
    """A Heartbeat's load brought into [0.0, 1.0] (NaN to 0.0) before the
    range rule sees it, as a reader that clamps instead of refusing."""
    if envelope.msg_type != MsgType.HEARTBEAT:
        return payload
    try:
        heartbeat = bp.decode(PAYLOAD_TYPES[MsgType.HEARTBEAT], payload)
    except bp.BinProtError:
        return payload
    load = heartbeat.load
    clamped = 0.0 if load != load else min(1.0, max(0.0, load))
    if clamped == load:
        return payload
    return bp.encode(PAYLOAD_TYPES[MsgType.HEARTBEAT], dataclasses.replace(heartbeat, load=clamped))


def every_other_number(number: int, **_: Any) -> int:
    """1, 3, 5, ...: still increasing, but not the counter P6 fixes (+1)."""
    return 2 * number - 1


SERVER = "ripp.envelope.server."
HANDSHAKE = "ripp.handshake.server."
DELTA = "ripp.delta.server."
CLIENT = "ripp.envelope.client."

SPECS: tuple[FaultSpec, ...] = (
    # --- consumer (server role)
    FaultSpec(
        "accept-bad-crc",
        "server",
        "apply envelopes whose CRC-32C does not match (the CRC is not checked)",
        (SERVER + "rejects-flipped-bit",),
        changes={"received-envelope": crc_recomputed},
    ),
    FaultSpec(
        "skip-magic-check",
        "server",
        "read envelopes whatever their first 4 bytes are",
        (SERVER + "rejects-bad-magic",),
        changes={"magic-accepted": accept_any_magic, "received-envelope": magic_rewritten},
    ),
    FaultSpec(
        "ignore-envelope-version",
        "server",
        "read envelopes of any version byte as version 1",
        (SERVER + "rejects-unsupported-version",),
        changes={"received-envelope": version_rewritten},
    ),
    FaultSpec(
        "accept-unknown-type",
        "server",
        "skip envelopes of an undefined message type instead of closing",
        (SERVER + "rejects-unknown-type",),
        changes={"received-envelope": unknown_type_skipped},
    ),
    FaultSpec(
        "accept-nonzero-flags",
        "server",
        "read envelopes whatever their flags byte is (profile P1's check 6 skipped)",
        (SERVER + "rejects-nonzero-flags",),
        changes={"received-envelope": flags_cleared},
    ),
    FaultSpec(
        "consumer-repeat-envelope-sequence",
        "server",
        "number every envelope it sends 1 (Schema_negotiation and Checkpoint_acks alike)",
        (SERVER + "sequence-increases",),
        changes={"envelope-sequence": always_one},
    ),
    FaultSpec(
        "no-length-bound",
        "server",
        "wait for (and buffer) whatever payload length a header claims instead of refusing it",
        (SERVER + "rejects-oversized-length",),
        changes={"payload-bound": no_length_bound},
    ),
    FaultSpec(
        "nonzero-flags",
        "server",
        "write flags 0x01 in every envelope it sends",
        (SERVER + "sends-zero-flags",),
        changes={"envelope-flags": flag_one},
    ),
    FaultSpec(
        "bad-outgoing-crc",
        "server",
        "write a wrong CRC-32C (the correct one XOR 1) in every envelope it sends",
        (SERVER + "sends-well-formed-envelopes",),
        changes={"sent-envelope": crc_flipped},
    ),
    FaultSpec(
        "checkpoint-ack-crc-big-endian",
        "server",
        "store the CRC-32C of each Checkpoint_ack big-endian (the Schema_negotiation before it is "
        "sound), in the middle of a session",
        (SERVER + "sends-well-formed-envelopes",),
        changes={"sent-envelope": checkpoint_ack_crc_big_endian},
    ),
    FaultSpec(
        "ignore-handshake-version",
        "server",
        "negotiate whatever protocol_version the Handshake names",
        (HANDSHAKE + "refuses-unsupported-protocol-version",),
        changes={"negotiation-errors": negotiated_whatever_version},
    ),
    FaultSpec(
        "accept-incompatible-schema",
        "server",
        "answer every Handshake with ok=true, whatever check_backward says",
        (HANDSHAKE + "refuses-incompatible-schema",),
        changes={"negotiation-errors": every_schema_accepted},
    ),
    FaultSpec(
        "apply-duplicates",
        "server",
        "apply again a Delta whose sequence_no arrived before (a duplicate) instead of discarding it",
        (DELTA + "discards-duplicates",),
        changes={"delta-record": arrival_recorded, "compared-last": duplicate_applied},
    ),
    FaultSpec(
        "hold-after-gap",
        "server",
        "discard Deltas after a gap until the missing sequence numbers arrive",
        (DELTA + "applies-after-gap",),
        changes={"compared-last": held_after_gap},
    ),
    FaultSpec(
        "apply-late-gap-fill",
        "server",
        "apply a Delta whose sequence_no is below the last applied but never arrived before (a late filler "
        "of a gap) instead of discarding it",
        (DELTA + "applies-after-gap",),
        changes={"delta-record": arrival_recorded, "compared-last": late_gap_fill_applied},
    ),
    FaultSpec(
        "one-counter-for-all-sources",
        "server",
        "keep one last-applied sequence number for all sources instead of one per source",
        (DELTA + "tracks-sources-apart",),
        changes={"compared-last": one_counter},
    ),
    FaultSpec(
        "skip-fingerprint-check",
        "server",
        "decode Deltas whatever schema fingerprint their envelope carries",
        (DELTA + "refuses-unknown-fingerprint",),
        changes={"delta-fingerprint": skip_fingerprint_check},
    ),
    FaultSpec(
        "refuse-all-schemas",
        "server",
        'answer every Handshake with ok=false (error "refused"), whatever check_backward says',
        (HANDSHAKE + "accepts-compatible-schema",),
        changes={"negotiation-errors": every_schema_refused},
    ),
    FaultSpec(
        "ignore-checkpoint-request",
        "server",
        "read Checkpoint_requests and never answer them",
        ("ripp.checkpoint.server.answers-request",),
        changes={"checkpoint-request-answered": never},
    ),
    FaultSpec(
        "no-liveness-check",
        "server",
        "never close a producer that stops sending Heartbeats (profile P8's three intervals)",
        ("ripp.heartbeat.server.closes-without-heartbeats",),
        changes={"liveness-deadline": no_deadline},
    ),
    FaultSpec(
        "wrong-ack-digest",
        "server",
        "report the digest of the state before the last applied Delta in Checkpoint_acks",
        (DELTA + "applies-in-order",),
        changes={"delta-record": digest_before_recorded, "checkpoint-ack": digests_before_last},
    ),
    FaultSpec(
        "non-minimal-ints",
        "server",
        "write each int field of its payloads in bin_prot's 4-byte form (fd + int32) instead of "
        "the shortest one (profile P3: exactly what bin_write_t writes)",
        (SERVER + "sends-valid-envelopes",),
        changes={"sent-payload": ints_in_four_bytes},
    ),
    FaultSpec(
        "negotiation-echoes-version",
        "server",
        "put the Handshake's protocol_version in its Schema_negotiation instead of its own (1)",
        (HANDSHAKE + "refuses-unsupported-protocol-version",),
        changes={"negotiation": handshake_version_echoed},
    ),
    FaultSpec(
        "ack-foreign-worker-id",
        "server",
        "name another worker_id in its Checkpoint_acks than in its Schema_negotiation",
        ("ripp.checkpoint.server.answers-request",),
        changes={"checkpoint-ack": ack_of_another_worker},
    ),
    FaultSpec(
        "ack-sources-in-handshake-order",
        "server",
        "list a Checkpoint_ack's source states in Handshake order instead of sorted by "
        "source_output",
        ("ripp.checkpoint.server.answers-request",),
        changes={"checkpoint-ack": sources_in_handshake_order},
    ),
    FaultSpec(
        "digest-keys-in-arrival-order",
        "server",
        "compute state_digest over the entries in the order their keys arrived instead of sorted "
        "by key",
        (DELTA + "applies-in-order",),
        changes={"checkpoint-ack": digests_keys_in_arrival_order},
    ),
    FaultSpec(
        "accept-trailing-payload-bytes",
        "server",
        "read a payload's value and ignore the bytes after it instead of closing",
        ("ripp.payload.server.rejects-trailing-bytes",),
        changes={"received-payload": payload_trailing_bytes_dropped},
    ),
    FaultSpec(
        "envelope-sequence-by-two",
        "server",
        "number its envelopes 1, 3, 5, ... (increasing, but not by 1)",
        (SERVER + "sequence-increases",),
        changes={"envelope-sequence": every_other_number},
    ),
    FaultSpec(
        "accept-foreign-heartbeat",
        "server",
        "take a Heartbeat whatever worker_id it names instead of closing on one that is not the "
        "Handshake's",
        ("ripp.heartbeat.server.closes-on-foreign-worker",),
        changes={"heartbeat-worker-accepted": accepted},
    ),
    FaultSpec(
        "drop-undeclared-output",
        "server",
        "drop a Delta for an output the Handshake did not declare and stay open instead of closing",
        (DELTA + "closes-on-undeclared-output",),
        changes={"undeclared-output-refused": not_refused},
    ),
    FaultSpec(
        "drop-undeclared-fields",
        "server",
        "apply a Delta without the fields its writer schema lacks instead of closing",
        (DELTA + "closes-on-undeclared-field",),
        changes={"received-delta": undeclared_fields_dropped},
    ),
    FaultSpec(
        "clamp-heartbeat-load",
        "server",
        "bring a Heartbeat's load into [0.0, 1.0] instead of closing on one outside it",
        ("ripp.heartbeat.server.closes-on-load-out-of-range",),
        changes={"received-payload": load_clamped},
    ),
    FaultSpec(
        "any-negotiated-fingerprint",
        "server",
        "take a Delta carrying the fingerprint of any negotiated schema, also another output's",
        (DELTA + "closes-on-fingerprint-of-another-output",),
        changes={"output-fingerprint-matches": accepted},
    ),
    FaultSpec(
        "drop-message-before-handshake",
        "server",
        "drop a message other than a Handshake that comes first and stay open instead of closing",
        (HANDSHAKE + "closes-on-message-before-handshake",),
        changes={"early-message-refused": not_refused},
    ),
    FaultSpec(
        "drop-second-handshake",
        "server",
        "drop a second Handshake and stay open instead of closing",
        (HANDSHAKE + "closes-on-second-handshake",),
        changes={"second-handshake-refused": not_refused},
    ),
    # --- producer (client role)
    FaultSpec(
        "no-heartbeats",
        "client",
        "never send a Heartbeat",
        ("ripp.heartbeat.client.sends-at-interval",),
        changes={"heartbeat-deadline": no_deadline},
    ),
    FaultSpec(
        "default-heartbeat-interval",
        "client",
        "send Heartbeats every 5 s (the text's default) whatever interval the consumer stated",
        ("ripp.heartbeat.client.sends-at-interval",),
        changes={"heartbeat-interval-ms": default_heartbeat_interval},
    ),
    FaultSpec(
        "client-nonzero-flags",
        "client",
        "write flags 0x01 in every envelope it sends",
        (CLIENT + "sends-zero-flags",),
        changes={"envelope-flags": flag_one},
    ),
    FaultSpec(
        "client-bad-crc",
        "client",
        "write a wrong CRC-32C (the correct one XOR 1) in every envelope it sends",
        (CLIENT + "sends-well-formed-envelopes",),
        changes={"sent-envelope": crc_flipped},
    ),
    FaultSpec(
        "client-delta-crc-without-payload",
        "client",
        "compute the CRC-32C of each Delta over its 59 header bytes only, not its payload (the "
        "Handshake before them is sound), in the middle of a session",
        (CLIENT + "sends-well-formed-envelopes",),
        changes={"sent-envelope": delta_crc_without_payload},
    ),
    FaultSpec(
        "repeat-envelope-sequence",
        "client",
        "number every envelope it sends 1",
        (CLIENT + "sequence-increases",),
        changes={"envelope-sequence": always_one},
    ),
    FaultSpec(
        "delta-before-handshake",
        "client",
        "send its first Delta before the Handshake",
        ("ripp.handshake.client.sends-handshake-first",),
        changes={"deltas-before-handshake": first_delta_early},
    ),
    FaultSpec(
        "client-ignore-envelope-version",
        "client",
        "the producer reads envelopes of any version byte as version 1",
        (CLIENT + "rejects-unsupported-version",),
        changes={"received-envelope": version_rewritten},
    ),
    FaultSpec(
        "client-no-wait-for-negotiation",
        "client",
        "send its Deltas right after the Handshake, before the Schema_negotiation arrives (which it then "
        "reads as usual)",
        ("ripp.handshake.client.waits-for-negotiation",),
        changes={"sending-states": also_awaiting_negotiation, "deltas-before-negotiation": at_once},
    ),
    FaultSpec(
        "ignore-rejection",
        "client",
        "go on sending Deltas after a Schema_negotiation with ok=false",
        ("ripp.handshake.client.stops-after-rejection",),
        changes={"negotiation-accepted": rejection_ignored},
    ),
    FaultSpec(
        "repeat-delta-sequence",
        "client",
        "give every Delta sequence_no 1",
        ("ripp.delta.client.sends-deltas",),
        changes={"delta-sequence-no": always_one},
    ),
    FaultSpec(
        "delta-undeclared-field",
        "client",
        "every Set or Patch Delta also names a field its writer schema does not have (undeclared_field)",
        ("ripp.delta.client.deltas-match-handshake",),
        changes={"delta": undeclared_field_added},
    ),
    FaultSpec(
        "client-non-minimal-ints",
        "client",
        "write each int field of its payloads in bin_prot's 4-byte form (fd + int32) instead of "
        "the shortest one (profile P3: exactly what bin_write_t writes)",
        (CLIENT + "sends-valid-envelopes",),
        changes={"sent-payload": ints_in_four_bytes},
    ),
    FaultSpec(
        "client-control-fingerprint",
        "client",
        "put its first output's schema fingerprint in its Handshake and Heartbeats instead of 32 "
        "zero bytes",
        (CLIENT + "sends-valid-envelopes",),
        changes={"control-fingerprint": first_output_fingerprint},
    ),
    FaultSpec(
        "heartbeat-foreign-worker-id",
        "client",
        "name another worker_id in its Heartbeats than the Handshake's source_worker_id",
        ("ripp.heartbeat.client.names-handshake-worker",),
        changes={"heartbeat": heartbeat_of_another_worker},
    ),
    FaultSpec(
        "client-accept-any-negotiation-version",
        "client",
        "go on after an ok Schema_negotiation whatever protocol_version it names",
        ("ripp.handshake.client.closes-on-other-protocol-version",),
        changes={"negotiation-version-accepted": accepted},
    ),
    FaultSpec(
        "drop-unrequested-ack",
        "client",
        "drop a Checkpoint_ack for a checkpoint it never requested and stay open instead of "
        "closing",
        ("ripp.checkpoint.client.closes-on-unrequested-ack",),
        changes={"unrequested-ack-refused": not_refused},
    ),
)

Fault = fault_enum("Fault", SPECS)
"""One member per fault (``Fault.ACCEPT_BAD_CRC`` is ``"accept-bad-crc"``)."""

REGISTRY: dict[str, FaultSpec] = {spec.name: spec for spec in SPECS}

NOT_ISOLABLE: dict[str, str] = {}
"""Cases whose rule cannot be broken without breaking other cases' rules
too (none so far)."""

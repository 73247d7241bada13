"""The RIPP alphabet of ``conformance learn`` (conformance/learn/): the
harness as a producer, the target as the consumer (server role).

Inputs are built with the reference core (reference_impl/ripp) and the
suite's registry: the Handshake declares the registry's first output with
its own schema (or the schema without a required field, or protocol
version 2), Deltas of that output carry the next sequence number, the last
one again, or one past a gap. A consumer says nothing about the Deltas it
takes; a Checkpoint_request shows its state. The mapper computes what a
conformant consumer holds after the Deltas sent (``ExpectedState`` of the
suite, the reference core's ``SourceTrack``), and the Checkpoint_ack is the
word ``ACK`` when it says exactly that, else ``ACK(<what differs>)``
(``last``, ``count``, ``digest``, ``id``, ``no-source``, and ``worker``
when it names another worker than the Schema_negotiation). So the model
stays finite: it learns whether the consumer applies Deltas as the profile
says (P6), not the numbers. Each Delta input ends with a Checkpoint_request
in the same write, and a duplicate or a late gap fill is sent with what it
repeats or fills, in one input: the difference shows on the input that
makes it, where the equivalence oracle's bounded walks find it.

Liveness (P8): the consumer closes after three heartbeat intervals without
a Heartbeat. After every input of an ok session the mapper sends a
Heartbeat of its own (``ConnectionMapper.owed``), as a live producer does,
so that no query outlives the consumer's patience; the consumer's closing
on silence is therefore not learnt (a coverage gap of this alphabet).

Read window: 0.3 s. The reference consumer answers within milliseconds;
``late-answers`` writes as late as half the read window (0.15 s, under the
profile's 0.4 s bound of reference_impl/ripp/variants.py), leaving 0.15 s
for a loaded machine.
"""

from __future__ import annotations

import dataclasses
import itertools
import struct
import time
from typing import Any

from conformance.core.target_runtime import TargetRuntime
from conformance.learn.alphabet import AbstractInput, ConnectionMapper, ProtocolAlphabet, Received
from reference_impl.ripp.envelope import (
    CRC_SIZE,
    HEADER_SIZE,
    MAX_PAYLOAD,
    ZERO_FINGERPRINT,
    EnvelopeError,
    EnvelopeReader,
    encode_envelope,
    make_envelope,
)
from reference_impl.ripp.payloads import (
    CheckpointAck,
    CheckpointRequest,
    DeltaMsg,
    Handshake,
    Heartbeat,
    PayloadError,
    SchemaNegotiation,
    decode_payload,
    encode_delta,
    encode_payload,
    fingerprint,
    msg_type_of,
)

from .peer import GRAMMAR_CHECKS, ExpectedState, key, set_delta
from .registry import load_registry

READ_WINDOW = 0.3
LENGTH_AT = HEADER_SIZE - 4
"""The envelope header ends with its int32 payload length."""
CHECKPOINT_ID = 41
_workers = itertools.count(1)

_S = "ripp.{}.server.{}"


def _case(area: str, name: str) -> str:
    return _S.format(area, name)


INPUTS = (
    AbstractInput(
        "handshake",
        "Handshake declaring the registry's first output with its own schema",
        (_case("handshake", "accepts-compatible-schema"),),
    ),
    AbstractInput(
        "handshake-incompatible",
        "Handshake whose schema lacks a field the registry's reader requires",
        (_case("handshake", "refuses-incompatible-schema"),),
    ),
    AbstractInput(
        "handshake-version-2",
        "Handshake of protocol_version 2",
        (_case("handshake", "refuses-unsupported-protocol-version"),),
    ),
    AbstractInput(
        "delta",
        "two Deltas with the next sequence numbers (their keys in descending order), then a "
        "Checkpoint_request",
        (_case("delta", "applies-in-order"),),
    ),
    AbstractInput(
        "delta-duplicate",
        "a Delta with the next sequence number, the same Delta again, then a Checkpoint_request",
        (_case("delta", "discards-duplicates"),),
    ),
    AbstractInput(
        "delta-gap",
        "a Delta one sequence number past the next, then a Checkpoint_request",
        (_case("delta", "applies-after-gap"),),
    ),
    AbstractInput(
        "delta-late-fill",
        "a Delta two past the next, then the one it skipped (a late gap fill), then a "
        "Checkpoint_request",
        (_case("delta", "applies-after-gap"),),
    ),
    AbstractInput(
        "delta-unknown-fingerprint",
        "Delta whose fingerprint is no negotiated schema's",
        (_case("delta", "refuses-unknown-fingerprint"),),
    ),
    AbstractInput(
        "delta-undeclared-output",
        "Delta for an output the Handshake did not declare",
        (_case("delta", "closes-on-undeclared-output"),),
    ),
    AbstractInput(
        "checkpoint",
        f"Checkpoint_request {CHECKPOINT_ID}",
        (_case("checkpoint", "answers-request"),),
    ),
    AbstractInput("heartbeat", "Heartbeat of the Handshake's worker", ()),
    AbstractInput(
        "heartbeat-foreign-worker",
        "Heartbeat naming another worker",
        (_case("heartbeat", "closes-on-foreign-worker"),),
    ),
    AbstractInput(
        "bad-crc",
        "Checkpoint_request with one bit of its CRC flipped",
        (_case("envelope", "rejects-flipped-bit"),),
    ),
    AbstractInput(
        "bad-magic",
        "Checkpoint_request whose magic is wrong (CRC recomputed)",
        (_case("envelope", "rejects-bad-magic"),),
    ),
    AbstractInput(
        "envelope-version-2",
        "Checkpoint_request in an envelope of version 2",
        (_case("envelope", "rejects-unsupported-version"),),
    ),
    AbstractInput(
        "envelope-unknown-type",
        "an envelope of message type 9 (a Checkpoint_request's payload)",
        (_case("envelope", "rejects-unknown-type"),),
    ),
    AbstractInput(
        "envelope-nonzero-flags",
        "Checkpoint_request in an envelope with flags 1",
        (_case("envelope", "rejects-nonzero-flags"),),
    ),
    AbstractInput(
        "envelope-oversized-length",
        f"an envelope header whose length field is {MAX_PAYLOAD + 1} (over the profile's bound), "
        "and nothing after it",
        (_case("envelope", "rejects-oversized-length"),),
    ),
    AbstractInput(
        "trailing-payload-bytes",
        "Checkpoint_request with a byte after its payload (length and CRC cover it)",
        (_case("payload", "rejects-trailing-bytes"),),
    ),
)

WORD_CASES = {
    "ACK(": (_case("delta", "applies-in-order"), _case("checkpoint", "answers-request")),
    "version=": (_case("handshake", "refuses-unsupported-protocol-version"),),
    "sequence-not-increasing": (_case("envelope", "sequence-increases"),),
    "UNDECODABLE(flags)": (_case("envelope", "sends-zero-flags"),),
    # The envelope grammar (profile P1's checks 1 to 5) is the grammar case's
    # rule (peer.GRAMMAR_CHECKS), named first; a payload that does not decode
    # is sends-valid-envelopes' (named for every UNDECODABLE word, as before).
    **{
        f"UNDECODABLE({check})": (_case("envelope", "sends-well-formed-envelopes"),)
        for check in sorted(GRAMMAR_CHECKS)
    },
    "UNDECODABLE": (_case("envelope", "sends-valid-envelopes"),),
}


class ConsumerConnection(ConnectionMapper):
    def __init__(self, runtime: TargetRuntime) -> None:
        registry = load_registry(runtime.params.get("registry_file"))
        self.output, self.schema = next(iter(registry.items()))
        self.worker = f"learner-{next(_workers)}"
        self.sequence = 0
        self.sent_max = 0
        self.expected = ExpectedState(self.schema)
        self.negotiated = False
        self.their_worker: str | None = None
        self.reader = EnvelopeReader()
        self.their_sequence = -1
        self.broken = False

    # -- inputs
    def _envelope(self, msg: Any, fp: bytes = ZERO_FINGERPRINT, payload: bytes | None = None):
        self.sequence += 1
        return make_envelope(
            msg_type_of(msg),
            encode_payload(msg) if payload is None else payload,
            sequence=self.sequence,
            timestamp_ns=time.time_ns(),
            fingerprint=fp,
        )

    def _bytes(self, msg: Any, **options: Any) -> bytes:
        return encode_envelope(self._envelope(msg, **options))

    def _delta(self, seq: int, output: str | None = None, fp: bytes | None = None) -> bytes:
        delta = set_delta(self.schema, seq)
        # Keys in descending order as sequence numbers grow: a digest taken
        # in arrival order differs from the profile's (sorted keys).
        key_bytes = key(f"k{(-seq) % 3}")
        if output is None and fp is None and self.negotiated:
            self.expected.apply(seq, key_bytes, delta)
        self.sent_max = max(self.sent_max, seq)
        msg = DeltaMsg(output or self.output, key_bytes, encode_delta(delta), seq, None)
        return self._bytes(msg, fp=fp if fp is not None else fingerprint(self.schema))

    def concrete(self, name: str) -> bytes:
        if name == "handshake":
            return self._bytes(Handshake(self.worker, [(self.output, self.schema)]))
        if name == "handshake-incompatible":
            required = next(f.field_name for f in self.schema.fields if f.default is None)
            fields = [f for f in self.schema.fields if f.field_name != required]
            schema = dataclasses.replace(self.schema, fields=fields)
            return self._bytes(Handshake(self.worker, [(self.output, schema)]))
        if name == "handshake-version-2":
            return self._bytes(Handshake(self.worker, [(self.output, self.schema)], 2))
        probe = self._bytes(CheckpointRequest(CHECKPOINT_ID))
        if name == "delta":
            first = self.sent_max + 1
            return self._delta(first) + self._delta(first + 1) + probe
        if name == "delta-duplicate":
            seq = self.sent_max + 1
            delta = self._delta(seq)
            return delta + self._delta(seq) + probe
        if name == "delta-gap":
            return self._delta(self.sent_max + 2) + probe
        if name == "delta-late-fill":
            skipped = self.sent_max + 1
            return self._delta(skipped + 1) + self._delta(skipped) + probe
        if name == "delta-unknown-fingerprint":
            return self._delta(self.sent_max + 1, fp=b"learner-unknown-schema".ljust(32, b"\0"))
        if name == "delta-undeclared-output":
            return self._delta(self.sent_max + 1, output="learner-undeclared")
        if name == "checkpoint":
            return self._bytes(CheckpointRequest(CHECKPOINT_ID))
        if name in ("heartbeat", "heartbeat-foreign-worker"):
            worker = self.worker if name == "heartbeat" else "learner-foreign"
            return self._bytes(Heartbeat(worker, time.time_ns(), 0.5))
        request = CheckpointRequest(CHECKPOINT_ID)
        if name == "bad-crc":
            data = bytearray(self._bytes(request))
            data[-1] ^= 0x01
            return bytes(data)
        if name == "bad-magic":
            data = bytearray(self._bytes(request))
            data[0] ^= 0xFF
            return _recrc(bytes(data))
        if name.startswith("envelope-"):
            envelope = self._envelope(request)
            if name == "envelope-oversized-length":
                head = encode_envelope(envelope)[:HEADER_SIZE]
                return head[:LENGTH_AT] + struct.pack("<i", MAX_PAYLOAD + 1)
            changed = {
                "envelope-version-2": {"version": 2},
                "envelope-unknown-type": {"msg_type": 9},
                "envelope-nonzero-flags": {"flags": 1},
            }[name]
            return encode_envelope(envelope._replace(**changed))
        if name == "trailing-payload-bytes":
            return self._bytes(request, payload=encode_payload(request) + b"\0")
        raise KeyError(name)

    def owed(self) -> bytes:
        # Liveness (P8): a Heartbeat after every input of an ok session.
        if not self.negotiated:
            return b""
        return self._bytes(Heartbeat(self.worker, time.time_ns(), 0.5))

    # -- outputs
    def received(self, data: bytes) -> Received:
        got = Received()
        if self.broken or not data:
            return got
        try:
            envelopes = self.reader.receive_data(data)
        except EnvelopeError as exc:
            self.broken = True
            got.words.append(f"UNDECODABLE({exc.check})")
            return got
        for envelope in envelopes:
            notes = []
            if envelope.sequence <= self.their_sequence:
                notes.append("sequence-not-increasing")
            self.their_sequence = envelope.sequence
            try:
                message = decode_payload(envelope.msg_type, envelope.payload)
            except PayloadError:
                got.words.append("UNDECODABLE(payload)")
                self.broken = True
                return got
            got.words.append(self._word(message, notes))
        return got

    def _word(self, message: Any, notes: list[str]) -> str:
        if isinstance(message, SchemaNegotiation):
            if message.protocol_version != 1:
                notes.append(f"version={message.protocol_version}")
            if message.ok and message.errors:
                notes.append("errors-when-ok")
            self.negotiated = message.ok
            self.their_worker = message.worker_id
            head = "NEGOTIATION(ok" if message.ok else "NEGOTIATION(refused"
            return head + "".join("," + note for note in notes) + ")"
        if isinstance(message, CheckpointAck):
            if message.checkpoint_id != CHECKPOINT_ID:
                notes.append("id")
            if message.worker_id != self.their_worker:
                notes.append("worker")
            sources = {state.source_output: state for state in message.sources}
            mine = sources.get(self.output)
            track = self.expected.track
            if mine is None:
                notes.append("no-source")
            else:
                if mine.last_sequence_no != track.last:
                    notes.append("last")
                if mine.applied_count != track.applied:
                    notes.append("count")
                if mine.state_digest != self.expected.digest():
                    notes.append("digest")
            return f"ACK({','.join(notes)})" if notes else "ACK"
        word = type(message).__name__
        return f"{word}({','.join(notes)})" if notes else word


def _recrc(data: bytes) -> bytes:
    from reference_impl.ripp.envelope import crc32c

    body = data[:-CRC_SIZE]
    return body + struct.pack("<I", crc32c(body))


class RippServerAlphabet(ProtocolAlphabet):
    protocol = "ripp"
    role = "server"
    inputs = INPUTS
    read_window = READ_WINDOW
    word_cases = WORD_CASES

    def new_connection(self, runtime: TargetRuntime) -> ConnectionMapper:
        return ConsumerConnection(runtime)


ALPHABETS = {"server": RippServerAlphabet()}

"""The harness's side of a RIPP connection: a :class:`RippPeer` over a
:class:`TcpConnection`, building envelopes and payloads with the sans-I/O
core (reference_impl/ripp) so that it can forge, mutate and replay them,
and reading the target's envelopes with the strict decoder and a bound on
every length.

The strict decoder (:meth:`RippPeer.next_envelope`), shared by every case,
allows exactly the bytes the text and the profile allow: the profile's six
receiver checks (P1), a payload that is its type's value with no byte left
over and written in bin_prot's one encoding of that value (P3: "exactly what
``bin_write_t`` writes"; bin_prot's own reader also takes longer integer
forms, so decoding alone would not see them), and a fingerprint field of
zero-padded ASCII that is all zeros on every message but a Delta (P4). The
steps that read a value the profile fixes check it where they read it: a
Schema_negotiation's protocol_version (1) and its errors (none when ok), a
Checkpoint_ack's checkpoint_id, worker_id and the order of its sources.

An envelope that breaks the envelope grammar (the layout of Message
Envelope Format: the length field, magic, CRC-32C, version 1, a type of the
table; profile P1's receiver checks 1 to 5) is a NodeGrammarViolation of
``ripp.envelope.<role>.sends-well-formed-envelopes`` (core/node_grammar.py):
that case fails for it, with its bytes and its offset on the connection, and
the case that read it is blocked by it. The flags byte (``sends-zero-flags``),
the payload (P3), the fingerprint (P4) and the values the steps check stay
plain ProtocolViolations of the case that read them."""

from __future__ import annotations

import itertools
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from conformance.core import node_grammar
from conformance.core.transport import (
    Deadline,
    ProtocolViolation,
    TcpConnection,
    short_hex,
    target_bytes,
)
from reference_impl.ripp.envelope import (
    CRC_SIZE,
    HEADER_SIZE,
    MAX_PAYLOAD,
    ZERO_FINGERPRINT,
    Envelope,
    EnvelopeError,
    MsgType,
    crc32c,
    decode_envelope,
    encode_envelope,
    fingerprint_text,
    make_envelope,
)
from reference_impl.ripp import binprot as bp
from reference_impl.ripp.payloads import (
    CheckpointAck,
    CheckpointRequest,
    DeltaMsg,
    DeltaT,
    FieldValue,
    Handshake,
    PayloadError,
    Schema,
    SchemaNegotiation,
    SetDelta,
    decode_payload,
    encode_delta,
    encode_payload,
    fingerprint,
    msg_type_of,
)
from reference_impl.ripp.session import SourceTrack
from reference_impl.ripp.node import sample_value, _key_bytes

from .prerequisites import CLIENT_GRAMMAR, SERVER_GRAMMAR

GRAMMAR_CHECKS = frozenset({"length", "magic", "crc", "version", "type"})
"""The receiver checks of profile P1 that are the envelope grammar (the
layout of the text's Message Envelope Format). The sixth, flags, is the
rule of the sends-zero-flags cases ("Currently always 0"): a value of a
field, not its layout."""

ENVELOPE_GRAMMAR = (
    'RIPP, Message Envelope Format ("Every wire message follows this layout:"; "Total overhead '
    'per message: 63 bytes (header + CRC)"); Field Details ("Covers all bytes from offset 0 through the end of '
    'the payload") (profile P1: the layout and receiver checks 1 to 5, length, magic, CRC, '
    "version, type)"
)
"""The envelope grammar every envelope a node sends has (the grammar cases
of both roles, core/node_grammar.py; RippPeer.next_envelope)."""
GRAMMAR_BASIS = (
    "wire-format: the envelope layout of Message Envelope Format (magic RIPP, version 1, a type "
    "of the table, the payload length field within profile P1's bound and equal to the payload "
    "read, CRC-32C over bytes 0..58+N as RIPP-E2 reads it, stored little-endian)"
)

_worker_ids = itertools.count(1)


def new_worker_id(prefix: str = "harness") -> str:
    return f"{prefix}-{next(_worker_ids)}"


def key(text: str) -> bytes:
    """A delta key as the text has it: a bin_prot encoded string."""
    return _key_bytes(text)


def set_delta(schema: Schema, i: int) -> SetDelta:
    """A Set of every field of ``schema`` with values depending on ``i`` (so
    that applying delta i twice, or out of order, changes the state)."""
    return SetDelta(
        [FieldValue(f.field_name, sample_value(f.field_type, i)) for f in schema.fields]
    )


@dataclass
class Received:
    envelope: Envelope
    raw: bytes
    message: Any


@dataclass
class ExpectedState:
    """What a conformant consumer holds for one source after the deltas the
    profile says it applies (P6), computed with the reference core."""

    schema: Schema
    track: SourceTrack = field(init=False)

    def __post_init__(self) -> None:
        self.track = SourceTrack(self.schema, fingerprint(self.schema))

    def apply(self, seq: int, key_bytes: bytes, delta: DeltaT) -> None:
        if seq > self.track.last:
            self.track.apply(key_bytes, delta)
            self.track.last = seq

    def digest(self) -> bytes:
        return self.track.digest()


class RippPeer:
    def __init__(self, conn: TcpConnection, role: str = "server") -> None:
        self.conn = conn
        self.role = role
        """The target's role: ``server`` (the consumer the harness connects
        to) or ``client`` (the producer that connects to the harness)."""
        self.sequence = 0
        self.received: list[Received] = []
        self.negotiation: SchemaNegotiation | None = None
        self.consumed = 0
        """Bytes of the target's on this connection read as whole envelopes:
        where the envelope read next starts."""
        self.grammar_break: node_grammar.NodeGrammarViolation | None = None
        """The envelope that broke the grammar (nothing after it can be
        read: profile P1, there is no resynchronisation)."""

    @property
    def grammar_case(self) -> str:
        return SERVER_GRAMMAR if self.role == "server" else CLIENT_GRAMMAR

    def grammar_violation(self, rule: str, data: bytes) -> node_grammar.NodeGrammarViolation:
        """Record the envelope at :attr:`consumed` that breaks the envelope
        grammar for the grammar case of the target's role, once; every read
        after it raises it again (unrecorded)."""
        self.grammar_break = node_grammar.violation(
            self.grammar_case,
            rule,
            data,
            direction=f"{self.role} to harness",
            offset=self.consumed,
            connection=self.conn.label,
        )
        return self.grammar_break

    def _after_grammar_break(self) -> None:
        if self.grammar_break is not None:
            raise node_grammar.again(self.grammar_break)

    # -- sending
    def envelope(
        self, msg: Any, *, fp: bytes = ZERO_FINGERPRINT, sequence: int | None = None
    ) -> Envelope:
        self.sequence += 1
        return make_envelope(
            msg_type_of(msg),
            encode_payload(msg),
            sequence=self.sequence if sequence is None else sequence,
            timestamp_ns=time.time_ns(),
            fingerprint=fp,
        )

    async def send_raw(self, data: bytes, note: str) -> None:
        await self.conn.send(data, note)

    async def send(self, msg: Any, note: str, *, fp: bytes = ZERO_FINGERPRINT) -> bytes:
        data = encode_envelope(self.envelope(msg, fp=fp))
        await self.conn.send(data, note)
        return data

    def delta_bytes(
        self, output: str, schema: Schema, seq: int, key_bytes: bytes, delta: DeltaT
    ) -> bytes:
        msg = DeltaMsg(output, key_bytes, encode_delta(delta), seq, None)
        return encode_envelope(self.envelope(msg, fp=fingerprint(schema)))

    # -- receiving
    async def next_raw(self, what: str, deadline: float | Deadline | None = None) -> bytes:
        self._after_grammar_break()
        limit = deadline if deadline is not None else Deadline(self.conn.deadline)
        header = await self.conn.receive_exactly(HEADER_SIZE, f"the header of {what}", limit)
        length = struct.unpack_from("<i", header, 55)[0]
        if not 0 <= length <= MAX_PAYLOAD:
            # The profile's bound on the length field (P1, check 1), not one
            # of the harness's own: the envelope grammar's.
            raise self.grammar_violation(
                f"{what}: the target's envelope claims a payload of {length} bytes "
                f"(profile P1: 0..{MAX_PAYLOAD})",
                header,
            ) from None
        rest = await self.conn.receive_exactly(
            length + CRC_SIZE, f"the payload and CRC of {what}", limit
        )
        return header + rest

    async def next_envelope(
        self, what: str, *, allow_flags: bool = True, deadline: float | Deadline | None = None
    ) -> Received:
        """The target's next envelope, checked as the profile's receiver
        checks it (length, magic, CRC, version, type, flags), and its
        payload decoded. ``allow_flags``: a non-zero flags byte is read
        anyway (only the case about flags judges it)."""
        raw = await self.next_raw(what, deadline)
        checked = raw
        if (
            allow_flags
            and raw[6] != 0
            and raw[-CRC_SIZE:] == struct.pack("<I", crc32c(raw[:-CRC_SIZE]))
        ):
            patched = bytearray(raw)
            patched[6] = 0
            patched[-CRC_SIZE:] = struct.pack("<I", crc32c(bytes(patched[:-CRC_SIZE])))
            checked = bytes(patched)
        try:
            env = decode_envelope(checked)
        except EnvelopeError as exc:
            if exc.check in GRAMMAR_CHECKS:
                raise self.grammar_violation(
                    f"{what}: the target's envelope breaks the envelope grammar (profile P1, "
                    f"check {exc.check}: {exc.reason})",
                    raw,
                ) from None
            raise ProtocolViolation(
                f"{what}: the target's envelope is refused by the profile's checks ({exc})", raw
            ) from None
        self.consumed += len(raw)
        name = MsgType(env.msg_type).name
        with target_bytes(
            f"{what}: the payload of the target's {name} does not decode", raw, PayloadError
        ):
            message = decode_payload(env.msg_type, env.payload)
        canonical_payload(f"{what}: the payload of the target's {name}", env.payload, raw, message)
        with target_bytes(
            f"{what}: the fingerprint field of the target's {name} is not zero-padded ASCII "
            "(text: Schema fingerprint: 32-byte zero-padded string)",
            raw,
            ValueError,
        ):
            fingerprint_text(env.fingerprint)
        if not isinstance(message, DeltaMsg) and env.fingerprint != ZERO_FINGERPRINT:
            raise ProtocolViolation(
                f"{what}: the target's {name} carries the schema fingerprint "
                f"{env.fingerprint!r}; profile P4: every message but a Delta carries 32 zero bytes",
                raw,
            )
        received = Received(env._replace(flags=raw[6]), raw, message)
        self.received.append(received)
        return received

    async def expect(self, cls: type, what: str, **kw: Any) -> Any:
        got = await self.next_envelope(what, **kw)
        if not isinstance(got.message, cls):
            raise AssertionError(
                f"expected {what} ({cls.__name__}); the target sent a "
                f"{type(got.message).__name__}: {short_hex(got.raw)}"
            )
        return got.message

    # -- steps
    async def handshake(
        self,
        outputs: list[tuple[str, Schema]],
        *,
        worker_id: str | None = None,
        protocol_version: int = 1,
    ) -> SchemaNegotiation:
        hs = Handshake(worker_id or new_worker_id(), outputs, protocol_version)
        await self.send(
            hs,
            f"Handshake declaring {', '.join(n for n, _ in outputs)} "
            f"(protocol_version {protocol_version})",
        )
        negotiation = await self.expect(
            SchemaNegotiation, "the Schema_negotiation answering the Handshake"
        )
        raw = short_hex(self.received[-1].raw)
        if negotiation.protocol_version != 1:
            raise AssertionError(
                f"the Schema_negotiation answering a Handshake of protocol_version "
                f"{protocol_version} names protocol_version {negotiation.protocol_version}; "
                f"profile P3: the consumer's own, 1: {raw}"
            )
        if negotiation.ok and negotiation.errors:
            raise AssertionError(
                f"the Schema_negotiation has ok=true and errors {negotiation.errors}; profile P3: "
                f"errors are empty when ok: {raw}"
            )
        self.negotiation = negotiation
        return negotiation

    async def checkpoint(self, checkpoint_id: int = 7) -> CheckpointAck:
        await self.send(CheckpointRequest(checkpoint_id), f"Checkpoint_request {checkpoint_id}")
        ack = await self.expect(CheckpointAck, f"the Checkpoint_ack for checkpoint {checkpoint_id}")
        raw = short_hex(self.received[-1].raw)
        if ack.checkpoint_id != checkpoint_id:
            raise AssertionError(
                f"the Checkpoint_ack names checkpoint {ack.checkpoint_id}, the request "
                f"{checkpoint_id} (profile P7: it echoes checkpoint_id)"
            )
        if self.negotiation is not None and ack.worker_id != self.negotiation.worker_id:
            raise AssertionError(
                f"the Checkpoint_ack names worker_id {ack.worker_id!r}, the consumer's "
                f"Schema_negotiation {self.negotiation.worker_id!r} (profile P3: both are the "
                f"consumer's worker id): {raw}"
            )
        names = [state.source_output for state in ack.sources]
        in_order = sorted(names, key=lambda n: n.encode("utf-8", "surrogateescape"))
        if names != in_order:
            raise AssertionError(
                f"the Checkpoint_ack lists its sources as {names}; profile P7: sorted by "
                f"source_output bytewise, {in_order}: {raw}"
            )
        return ack

    async def closes_silently(self, seconds: float | None = None) -> tuple[bool, bytes]:
        """(closed, bytes the target sent meanwhile)."""
        return await self.conn.await_close(seconds)

    async def closes_at_once(self) -> tuple[bool, bytes]:
        """Like closes_silently, within two of the heartbeat intervals the
        consumer stated: a consumer that did not refuse what it got, and only
        closes because no Heartbeat came (three intervals, profile P8), is
        not closing "at once" (profile P1)."""
        window = self.conn.deadline
        if self.negotiation is not None:
            window = min(window, 2 * self.negotiation.heartbeat_interval_ms / 1000)
        return await self.conn.await_close(window)


async def closes_on(
    peer: RippPeer,
    bad: bytes,
    what: str,
    rule: str,
    *,
    probe: bytes | None = None,
    probe_what: str = "a Checkpoint_request",
) -> None:
    """Send ``bad`` (envelopes a consumer must refuse) and, in the same write,
    ``probe`` (a Checkpoint_request unless given: before the negotiation,
    the Handshake): a consumer that takes ``bad`` answers the probe, one
    that refuses closes first, sending nothing (profile P9)."""
    if probe is None:
        probe = encode_envelope(peer.envelope(CheckpointRequest(73)))
    await peer.conn.send_quietly(bad + probe, f"{what}, then {probe_what} in the same write")
    closed, sent = await peer.closes_at_once()
    assert not sent, (
        f"after {what} the consumer answered instead of closing: {short_hex(sent)} ({rule}; "
        "P9: close, sending nothing)"
    )
    assert closed, f"after {what} the consumer kept the connection open ({rule}; P9: close)"


def canonical_payload(what: str, data: bytes, raw: bytes, value: Any, bintype: Any = None) -> None:
    """Raise ProtocolViolation unless ``data``, decoded as ``value``, is the
    one encoding bin_prot writes for it (profile P3; README, RIPP: a nat0
    below 0x80 is one byte, and bin_prot's writer takes the shortest form
    of every integer): bin_prot's reader takes ``fe 05 00`` for 5, so a
    decoder alone passes a node that writes it. ``bintype``: the type of
    ``value`` when it is not a message payload."""
    written = encode_payload(value) if bintype is None else bp.encode(bintype, value)
    if written == data:
        return
    at = next(
        (i for i, (a, b) in enumerate(zip(data, written)) if a != b), min(len(data), len(written))
    )
    raise ProtocolViolation(
        f"{what} is not bin_prot's encoding of its value (profile P3: exactly what bin_write_t "
        f"writes): from byte {at} the target wrote {short_hex(data[at:])}, bin_prot writes "
        f"{short_hex(written[at:])}",
        raw,
    )


def source_of(ack: CheckpointAck, output: str):
    for state in ack.sources:
        if state.source_output == output:
            return state
    raise AssertionError(
        f"the Checkpoint_ack lists no source {output!r} (profile P7: one per declared output); "
        f"it lists {[s.source_output for s in ack.sources]}"
    )


def describe(state) -> str:
    return (
        f"last_sequence_no {state.last_sequence_no}, applied_count {state.applied_count}, "
        f"digest {state.state_digest.hex()}"
    )

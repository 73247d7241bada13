"""RIPP sessions, sans-I/O: one connection, either role.

:class:`ConsumerSession` is the accepting side, :class:`ProducerSession` the
connecting side (``docs/ripp-profile.md`` P2).  Neither reads a socket or a
clock: hand each chunk of received bytes to ``receive_data(data, now_ns)``,
act on the events it returns, write what ``data_to_send()`` returns, call
``poll(now_ns)`` no later than ``next_deadline()`` (heartbeats, timeouts),
and close the socket once ``closed`` is set and the pending bytes are
written.  ``now_ns`` is any monotonic nanosecond clock the I/O layer likes;
it is also what goes in the envelope timestamps of control messages.

Rules (profile sections in brackets):

* Any refused envelope [P1], undecodable payload or range-rule breach [P3],
  or message out of place [P2]: close at once, sending nothing.
* Consumer: the first message must be a Handshake.  It is answered with one
  Schema_negotiation [P5]; ``ok = false`` (version mismatch, incompatible
  or unknown outputs) is followed by closing.  Deltas are checked against
  the negotiated writer fingerprints before their payload is decoded [P4],
  then applied per ``source_output`` only when ``sequence_no > last``:
  duplicates are discarded silently, gaps applied and reported [P6].
  Checkpoint_request -> Checkpoint_ack with per-source last sequence number,
  count and state digest [P7].  Three heartbeat intervals with no Heartbeat
  close the connection [P8].
* Producer: sends its Handshake on ``start``; closes on ``ok = false`` or a
  protocol version other than 1; after ``ok`` sends a Heartbeat every
  negotiated interval [P8] and whatever deltas and checkpoint requests its
  owner asks for.

Faults (``--fault``, reference_impl/ripp/faults.py) reach a session as
``faults=...``; each changes a value at a named point
(:meth:`FaultPoints.apply`), so with none on the code below is the rule as
written.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence

from ..faults import FaultPoints

from . import binprot as bp
from .envelope import (
    MAX_PAYLOAD,
    ZERO_FINGERPRINT,
    Envelope,
    EnvelopeError,
    EnvelopeReader,
    MsgType,
    encode_envelope,
    make_envelope,
)
from .payloads import (
    DEFAULT_HEARTBEAT_MS,
    HEARTBEAT_MAX_MS,
    HEARTBEAT_MIN_MS,
    PROTOCOL_VERSION,
    CheckpointAck,
    CheckpointRequest,
    DeltaMsg,
    DeltaT,
    Handshake,
    Heartbeat,
    PatchDelta,
    PayloadError,
    RemoveDelta,
    Schema,
    SchemaNegotiation,
    SetDelta,
    SourceState,
    decode_delta,
    decode_payload,
    encode_delta,
    encode_payload,
    fingerprint,
    msg_type_of,
)
from .faults import SPECS as FAULT_SPECS
from .schema import negotiate

NS_PER_MS = 1_000_000
HANDSHAKE_TIMEOUT_NS = 10_000_000_000  # profile P5: 10 s
LIVENESS_INTERVALS = 3  # profile P8

# --- events ---------------------------------------------------------------


@dataclass
class HandshakeReceived:
    handshake: Handshake


@dataclass
class NegotiationSent:
    ok: bool
    errors: list[str]


@dataclass
class Negotiated:
    """Producer: the consumer's Schema_negotiation arrived."""

    negotiation: SchemaNegotiation


@dataclass
class DeltaApplied:
    source_output: str
    sequence_no: int
    key: bytes
    delta: DeltaT


@dataclass
class DuplicateDiscarded:
    source_output: str
    sequence_no: int
    last: int


@dataclass
class GapDetected:
    """Sequence numbers ``first_missing .. last_missing`` never arrived."""

    source_output: str
    first_missing: int
    last_missing: int


@dataclass
class CheckpointAnswered:
    ack: CheckpointAck


@dataclass
class CheckpointAckReceived:
    ack: CheckpointAck


@dataclass
class HeartbeatReceived:
    heartbeat: Heartbeat
    at_ns: int


@dataclass
class HeartbeatSent:
    heartbeat: Heartbeat


@dataclass
class Closed:
    """The session is over.  ``kind``: envelope, payload, protocol, rejected,
    timeout, liveness or peer; ``check`` the envelope check for ``envelope``."""

    kind: str
    reason: str
    check: Optional[str] = None


# --- applied state --------------------------------------------------------

_STATE_T = bp.List(bp.Tuple(bp.BYTES, bp.List(bp.Tuple(bp.BYTES, bp.BYTES))))


def state_digest(entries: dict[bytes, dict[bytes, bytes]]) -> bytes:
    """Profile P7: MD5 of the sorted state as ``(string * (string * string) list) list``."""
    canonical = [(k, sorted(entries[k].items())) for k in sorted(entries)]
    return hashlib.md5(bp.encode(_STATE_T, canonical)).digest()


@dataclass
class SourceTrack:
    schema: Schema
    fingerprint: bytes
    last: int = 0
    applied: int = 0
    entries: dict[bytes, dict[bytes, bytes]] = field(default_factory=dict)
    fault_record: Optional[dict] = None
    """What an active fault keeps of this source's history (the point
    delta-record); None without faults."""
    # field name -> descriptor of its value, from the writer schema
    field_types: dict[str, bp.BinType] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for f in self.schema.fields:
            self.field_types.setdefault(f.field_name, f.field_type.bintype())

    def validate(self, delta: DeltaT) -> None:
        if isinstance(delta, RemoveDelta):
            return
        for fv in delta.fields:
            t = self.field_types.get(fv.field)
            if t is None:
                raise PayloadError(f"Delta.t names field {fv.field!r}, not in the writer schema")
            try:
                bp.decode(t, fv.value)
            except bp.BinProtError as exc:
                raise PayloadError(
                    f"value of field {fv.field!r} is not a {t.name}: {exc}"
                ) from None

    def apply(self, key: bytes, delta: DeltaT) -> None:
        if isinstance(delta, SetDelta):
            self.entries[key] = {
                fv.field.encode("utf-8", "surrogateescape"): fv.value for fv in delta.fields
            }
        elif isinstance(delta, PatchDelta):
            entry = self.entries.setdefault(key, {})
            for fv in delta.fields:
                entry[fv.field.encode("utf-8", "surrogateescape")] = fv.value
        else:
            self.entries.pop(key, None)
        self.applied += 1

    def digest(self) -> bytes:
        return state_digest(self.entries)


# --- common ---------------------------------------------------------------


class _Session:
    role = "?"

    def __init__(
        self,
        worker_id: str,
        *,
        max_payload: int = MAX_PAYLOAD,
        handshake_timeout_ns: int = HANDSHAKE_TIMEOUT_NS,
        faults: Iterable[Any] = (),
    ) -> None:
        self.worker_id = worker_id
        self.handshake_timeout_ns = handshake_timeout_ns
        self._points = FaultPoints(FAULT_SPECS, frozenset(faults))
        self.faults = self._points.active
        """The names of the faults on (none: the conformant session)."""
        self._reader = EnvelopeReader(max_payload, self._points)
        self._out = bytearray()
        self._sequence = 0
        self.closed: Optional[Closed] = None
        self.state = "new"
        self.started_ns: Optional[int] = None
        self.sent_log: list[Envelope] = []  # every envelope sent, for traces

    # I/O side
    def data_to_send(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        return out

    def receive_data(self, data: bytes, now_ns: int) -> list[Any]:
        if self.closed is not None:
            return []
        events: list[Any] = []
        try:
            envelopes = self._reader.receive_data(data)
            failure = None
        except EnvelopeError as exc:
            envelopes, failure = exc.decoded, exc
        for env in envelopes:
            if self.closed is not None:
                return events
            events.extend(self._handle(env, now_ns))
        if failure is not None and self.closed is None:
            events.append(self._close("envelope", failure.reason, failure.check))
        return events

    def eof(self) -> list[Any]:
        if self.closed is not None:
            return []
        return [self._close("peer", "the peer closed the connection")]

    def next_deadline(self) -> Optional[int]:
        if self.closed is not None or self.started_ns is None:
            return None
        if self.state == self._awaiting:
            return self.started_ns + self.handshake_timeout_ns
        return self._open_deadline()

    def poll(self, now_ns: int) -> list[Any]:
        if self.closed is not None or self.started_ns is None:
            return []
        if self.state == self._awaiting:
            if now_ns - self.started_ns >= self.handshake_timeout_ns:
                return [
                    self._close("timeout", f"no {self._awaited_name} within the handshake timeout")
                ]
            return []
        return self._open_poll(now_ns)

    # internals
    _awaiting = "?"
    _awaited_name = "?"

    def _open_deadline(self) -> Optional[int]:
        return None

    def _open_poll(self, now_ns: int) -> list[Any]:
        return []

    def _close(self, kind: str, reason: str, check: Optional[str] = None) -> Closed:
        self.closed = Closed(kind, reason, check)
        self.state = "closed"
        return self.closed

    def _send(
        self,
        msg: Any,
        now_ns: int,
        *,
        fingerprint: bytes = ZERO_FINGERPRINT,
        timestamp_ns: Optional[int] = None,
    ) -> Envelope:
        self._sequence += 1
        env = make_envelope(
            msg_type_of(msg),
            self._points.apply("sent-payload", encode_payload(msg), msg=msg),
            sequence=self._points.apply("envelope-sequence", self._sequence),
            timestamp_ns=now_ns if timestamp_ns is None else timestamp_ns,
            fingerprint=fingerprint,
            flags=self._points.apply("envelope-flags", 0),
        )
        self._out += self._points.apply("sent-envelope", encode_envelope(env))
        self.sent_log.append(env)
        return env

    def _decode(self, env: Envelope) -> Any:
        """The envelope's payload, or None after closing the session."""
        try:
            return decode_payload(
                env.msg_type, self._points.apply("received-payload", env.payload, envelope=env)
            )
        except PayloadError as exc:
            self._close("payload", f"{MsgType(env.msg_type).name}: {exc}")
            return None

    def _unexpected(self, env: Envelope) -> Closed:
        return self._close(
            "protocol",
            f"{MsgType(env.msg_type).name} is not expected by a {self.role} in state {self.state}",
        )

    def _handle(self, env: Envelope, now_ns: int) -> list[Any]:
        raise NotImplementedError


# --- consumer ---------------------------------------------------------------


class ConsumerSession(_Session):
    """The accepting side: answers the Handshake, applies deltas, acks checkpoints.

    ``registry`` maps output names to the reader schemas this consumer
    accepts.  ``heartbeat_interval_ms`` is what it asks producers for (P8).
    """

    role = "consumer"
    _awaiting = "await_handshake"
    _awaited_name = "Handshake"

    def __init__(
        self,
        worker_id: str,
        registry: dict[str, Schema],
        *,
        heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_MS,
        **kw: Any,
    ) -> None:
        super().__init__(worker_id, **kw)
        if not HEARTBEAT_MIN_MS <= heartbeat_interval_ms <= HEARTBEAT_MAX_MS:
            raise ValueError(
                f"heartbeat interval must be within {HEARTBEAT_MIN_MS}..{HEARTBEAT_MAX_MS} ms"
            )
        self.registry = dict(registry)
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.handshake: Optional[Handshake] = None
        self.sources: dict[str, SourceTrack] = {}
        self._by_fingerprint: dict[bytes, set[str]] = {}
        self.last_heartbeat_ns: Optional[int] = None

    def start(self, now_ns: int) -> None:
        """The connection was accepted at ``now_ns``."""
        self.started_ns = now_ns
        self.state = "await_handshake"

    def checkpoint_ack(self, checkpoint_id: int) -> CheckpointAck:
        ack = CheckpointAck(
            checkpoint_id,
            self.worker_id,
            [
                SourceState(name, t.last, t.applied, t.digest())
                for name, t in sorted(
                    self.sources.items(), key=lambda kv: kv[0].encode("utf-8", "surrogateescape")
                )
            ],
        )
        return self._points.apply("checkpoint-ack", ack, sources=self.sources)

    def _open_deadline(self) -> Optional[int]:
        if self.state != "open" or self.last_heartbeat_ns is None:
            return None
        return self._points.apply(
            "liveness-deadline",
            self.last_heartbeat_ns + LIVENESS_INTERVALS * self.heartbeat_interval_ms * NS_PER_MS,
        )

    def _open_poll(self, now_ns: int) -> list[Any]:
        deadline = self._open_deadline()
        if deadline is not None and now_ns >= deadline:
            return [
                self._close(
                    "liveness",
                    f"no Heartbeat for {LIVENESS_INTERVALS} intervals "
                    f"of {self.heartbeat_interval_ms} ms",
                )
            ]
        return []

    def _handle(self, env: Envelope, now_ns: int) -> list[Any]:
        if self.state == "new":
            self.start(now_ns)
        t = env.msg_type
        if self.state == "await_handshake":
            if t != MsgType.HANDSHAKE:
                # P2: anything but a Handshake first is out of place
                if not self._points.apply("early-message-refused", True, envelope=env):
                    return []
                return [self._unexpected(env)]
            hs = self._decode(env)
            if hs is None:
                return [self.closed]
            return self._on_handshake(hs, now_ns)
        if t == MsgType.HANDSHAKE:
            # P2: the Handshake comes once; a second one is out of place
            if not self._points.apply("second-handshake-refused", True, envelope=env):
                return []
            return [self._unexpected(env)]
        if t == MsgType.DELTA:
            return self._on_delta(env)
        if t == MsgType.CHECKPOINT_REQUEST:
            if not self._points.apply("checkpoint-request-answered", True):
                return []
            req = self._decode(env)
            if req is None:
                return [self.closed]
            ack = self.checkpoint_ack(req.checkpoint_id)
            self._send(ack, now_ns)
            return [CheckpointAnswered(ack)]
        if t == MsgType.HEARTBEAT:
            hb = self._decode(env)
            if hb is None:
                return [self.closed]
            same_worker = hb.worker_id == self.handshake.source_worker_id
            if not self._points.apply("heartbeat-worker-accepted", same_worker, heartbeat=hb):
                return [
                    self._close(
                        "protocol",
                        f"Heartbeat worker_id {hb.worker_id!r} is not the Handshake's "
                        f"{self.handshake.source_worker_id!r}",
                    )
                ]
            self.last_heartbeat_ns = now_ns
            return [HeartbeatReceived(hb, now_ns)]
        return [self._unexpected(env)]

    def _on_handshake(self, hs: Handshake, now_ns: int) -> list[Any]:
        self.handshake = hs
        errors = self._points.apply(
            "negotiation-errors", negotiate(self.registry, hs), handshake=hs, registry=self.registry
        )
        ok = not errors
        self._send(
            self._points.apply(
                "negotiation",
                SchemaNegotiation(
                    ok, errors, PROTOCOL_VERSION, self.heartbeat_interval_ms, self.worker_id
                ),
                handshake=hs,
            ),
            now_ns,
        )
        events: list[Any] = [HandshakeReceived(hs), NegotiationSent(ok, errors)]
        if not ok:
            events.append(self._close("rejected", "; ".join(errors)))
            return events
        for name, schema in hs.output_schemas:
            fp = fingerprint(schema)
            self.sources[name] = SourceTrack(schema, fp)
            self._by_fingerprint.setdefault(fp, set()).add(name)
        self.state = "open"
        # liveness is measured from the negotiation: the first Heartbeat is due one interval later
        self.last_heartbeat_ns = now_ns
        return events

    def _on_delta(self, env: Envelope) -> list[Any]:
        # P4: the fingerprint is checked before the payload is decoded
        fp = self._points.apply(
            "delta-fingerprint", env.fingerprint, envelope=env, sources=self.sources
        )
        if fp not in self._by_fingerprint:
            return [
                self._close(
                    "protocol",
                    f"Delta fingerprint {fp!r} is not a negotiated writer schema",
                )
            ]
        msg: DeltaMsg = self._decode(env)
        if msg is None:
            return [self.closed]
        track = self.sources.get(msg.source_output)
        if track is None:
            if not self._points.apply("undeclared-output-refused", True, delta=msg):
                return []
            return [
                self._close(
                    "protocol",
                    f"Delta for output {msg.source_output!r}, not declared in the Handshake",
                )
            ]
        if not self._points.apply(
            "output-fingerprint-matches", track.fingerprint == fp, delta=msg, fingerprint=fp
        ):
            return [
                self._close(
                    "protocol",
                    f"Delta for {msg.source_output!r} carries the fingerprint "
                    f"{fp!r}, its schema's is {track.fingerprint!r}",
                )
            ]
        seq = msg.sequence_no
        last = self._points.apply(
            "compared-last", track.last, sequence_no=seq, track=track, sources=self.sources
        )
        if seq <= last:
            # the text's set_remote: "Already seen -- idempotent discard"
            track.fault_record = self._points.apply(
                "delta-record", track.fault_record, sequence_no=seq, track=track, applying=False
            )
            return [DuplicateDiscarded(msg.source_output, seq, track.last)]
        try:
            delta = self._points.apply("received-delta", decode_delta(msg.delta_bytes), track=track)
            track.validate(delta)
        except PayloadError as exc:
            return [self._close("payload", f"Delta {msg.source_output!r} #{seq}: {exc}")]
        events: list[Any] = []
        if seq > last + 1:
            events.append(GapDetected(msg.source_output, last + 1, seq - 1))
        track.fault_record = self._points.apply(
            "delta-record", track.fault_record, sequence_no=seq, track=track, applying=True
        )
        track.apply(msg.key, delta)
        track.last = max(track.last, seq)  # the last applied never goes back
        events.append(DeltaApplied(msg.source_output, seq, msg.key, delta))
        return events


# --- producer ---------------------------------------------------------------


class ProducerSession(_Session):
    """The connecting side: Handshake, then deltas, heartbeats, checkpoint requests.

    ``outputs`` lists ``(output name, writer schema)`` in Handshake order.
    ``load`` is what the next Heartbeat reports (0.0 .. 1.0).
    """

    role = "producer"
    _awaiting = "await_negotiation"
    _awaited_name = "Schema_negotiation"

    def __init__(
        self,
        worker_id: str,
        outputs: Sequence[tuple[str, Schema]],
        *,
        protocol_version: int = PROTOCOL_VERSION,
        heartbeat_gap: float = 1.0,
        **kw: Any,
    ) -> None:
        super().__init__(worker_id, **kw)
        self.outputs = list(outputs)
        self.heartbeat_gap = heartbeat_gap
        """Gap between Heartbeats after the first, in negotiated intervals
        (profile P8 allows [0.5, 1.5]; the conformant variant
        frequent-heartbeats uses less than 1)."""
        self.fingerprints = {name: fingerprint(s) for name, s in self.outputs}
        self.protocol_version = protocol_version
        self.negotiation: Optional[SchemaNegotiation] = None
        self.next_sequence_no = {name: 1 for name, _ in self.outputs}
        self.load = 0.0
        self._next_heartbeat_ns: Optional[int] = None
        self._requested: set[int] = set()

    def start(self, now_ns: int) -> None:
        """The connection is up: send the Handshake."""
        if self.started_ns is not None:
            raise RuntimeError("already started")
        self.started_ns = now_ns
        self.state = "await_negotiation"
        for output, key, delta in self._points.apply(
            "deltas-before-handshake", [], outputs=self.outputs
        ):
            self._send_delta(output, key, delta, now_ns)
        self._send(
            Handshake(self.worker_id, self.outputs, self.protocol_version),
            now_ns,
            fingerprint=self._control_fingerprint(),
        )

    def _control_fingerprint(self) -> bytes:
        """P4: a control payload is fixed by the profile, not by a schema."""
        return self._points.apply("control-fingerprint", ZERO_FINGERPRINT, outputs=self.outputs)

    @property
    def heartbeat_interval_ns(self) -> Optional[int]:
        if self.negotiation is None:
            return None
        return (
            self._points.apply("heartbeat-interval-ms", self.negotiation.heartbeat_interval_ms)
            * NS_PER_MS
        )

    def _require_open(self) -> None:
        if self.state not in self._points.apply("sending-states", frozenset({"open"})):
            raise RuntimeError(f"cannot send in state {self.state}")

    def send_delta(
        self,
        output: str,
        key: bytes,
        delta: DeltaT,
        now_ns: int,
        *,
        sequence_no: Optional[int] = None,
        watermark_ns: Optional[int] = None,
        timestamp_ns: Optional[int] = None,
    ) -> int:
        """Send one Delta; ``sequence_no`` overrides the per-output counter
        (tests resend old numbers).  Returns the sequence number used."""
        self._require_open()
        return self._send_delta(
            output,
            key,
            delta,
            now_ns,
            sequence_no=sequence_no,
            watermark_ns=watermark_ns,
            timestamp_ns=timestamp_ns,
        )

    def _send_delta(
        self,
        output: str,
        key: bytes,
        delta: DeltaT,
        now_ns: int,
        *,
        sequence_no: Optional[int] = None,
        watermark_ns: Optional[int] = None,
        timestamp_ns: Optional[int] = None,
    ) -> int:
        if output not in self.fingerprints:
            raise KeyError(f"output {output!r} is not declared in the Handshake")
        seq = self.next_sequence_no[output] if sequence_no is None else sequence_no
        seq = self._points.apply("delta-sequence-no", seq)
        self.next_sequence_no[output] = max(self.next_sequence_no[output], seq + 1)
        delta = self._points.apply("delta", delta, output=output)
        msg = DeltaMsg(output, key, encode_delta(delta), seq, watermark_ns)
        self._send(msg, now_ns, fingerprint=self.fingerprints[output], timestamp_ns=timestamp_ns)
        return seq

    def request_checkpoint(self, checkpoint_id: int, now_ns: int) -> None:
        self._require_open()
        self._requested.add(checkpoint_id)
        self._send(
            CheckpointRequest(checkpoint_id), now_ns, fingerprint=self._control_fingerprint()
        )

    def _open_deadline(self) -> Optional[int]:
        if self.state != "open":
            return None
        return self._points.apply("heartbeat-deadline", self._next_heartbeat_ns)

    def _open_poll(self, now_ns: int) -> list[Any]:
        due = self._open_deadline()
        if due is None or now_ns < due:
            return []
        hb = self._points.apply("heartbeat", Heartbeat(self.worker_id, now_ns, self.load))
        self._send(hb, now_ns, fingerprint=self._control_fingerprint())
        interval = round(self.heartbeat_interval_ns * self.heartbeat_gap)
        # From this Heartbeat, not from when it was due: a poll that came
        # late (a starved loop) must not make the next gap short to catch
        # up (P8 bounds each gap, below as well as above; seen under load:
        # a 0.518 s gap followed by a 0.081 s one at a 0.3 s interval).
        self._next_heartbeat_ns = now_ns + interval
        return [HeartbeatSent(hb)]

    def _handle(self, env: Envelope, now_ns: int) -> list[Any]:
        t = env.msg_type
        if self.state == "await_negotiation":
            if t != MsgType.SCHEMA_NEGOTIATION:
                return [self._unexpected(env)]
            neg = self._decode(env)
            if neg is None:
                return [self.closed]
            self.negotiation = neg
            events: list[Any] = [Negotiated(neg)]
            if not self._points.apply(
                "negotiation-version-accepted",
                neg.protocol_version == PROTOCOL_VERSION,
                negotiation=neg,
            ):
                events.append(
                    self._close(
                        "protocol", f"consumer speaks protocol version {neg.protocol_version}"
                    )
                )
            elif not self._points.apply("negotiation-accepted", neg.ok, negotiation=neg):
                events.append(
                    self._close("rejected", "; ".join(neg.errors) or "negotiation failed")
                )
            else:
                self.state = "open"
                self._next_heartbeat_ns = now_ns + self.heartbeat_interval_ns
            return events
        if self.state == "open" and t == MsgType.CHECKPOINT_ACK:
            ack = self._decode(env)
            if ack is None:
                return [self.closed]
            if ack.checkpoint_id not in self._requested:
                # P2, P7: a Checkpoint_ack answers a Checkpoint_request of this producer
                if not self._points.apply("unrequested-ack-refused", True, ack=ack):
                    return []
                return [
                    self._close(
                        "protocol",
                        f"Checkpoint_ack for checkpoint {ack.checkpoint_id}, never requested",
                    )
                ]
            self._requested.discard(ack.checkpoint_id)
            return [CheckpointAckReceived(ack)]
        return [self._unexpected(env)]

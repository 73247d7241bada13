"""The RIPP reference node over TCP: a thin asyncio layer on the sans-I/O
sessions of :mod:`.session`.

:class:`ConsumerNode` accepts connections (the consumer side, "server" role
of the suites); :func:`run_producer` connects and plays the producer
("client" role). Every read waits no longer than the session's next
deadline (heartbeats, timeouts), every envelope is bounded by the envelope
reader's ``max_payload``, and a session that closes ends its connection at
once after writing what it queued (a Schema_negotiation with ``ok =
false``; nothing after a refused envelope, profile P1).

Faults (``--fault``, :mod:`.faults`) are applied here, by subclassing the
sessions and wrapping the envelope reader, never inside the correct code
paths: a node started without faults runs the sessions as they are.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

from . import binprot as bp
from .envelope import (
    CRC_SIZE,
    HEADER_SIZE,
    MAGIC,
    MAX_PAYLOAD,
    OVERHEAD,
    VERSION,
    ZERO_FINGERPRINT,
    Envelope,
    EnvelopeError,
    EnvelopeReader,
    MsgType,
    crc32c,
    decode_envelope,
    encode_envelope,
    make_envelope,
)
from ..variants import UNPROMPTED_TRAFFIC, Shape, shape_writer
from .faults import Fault
from .payloads import (
    DEFAULT_HEARTBEAT_MS,
    PROTOCOL_VERSION,
    DeltaMsg,
    DeltaT,
    FieldType,
    FieldValue,
    PatchDelta,
    RemoveDelta,
    Schema,
    SchemaNegotiation,
    SetDelta,
    decode_payload,
    encode_delta,
    encode_payload,
    msg_type_of,
    schema_from_json,
)
from .variants import FREQUENT_HEARTBEATS, HEARTBEAT_GAP, UNPROMPTED_CHECKPOINT_IDS, WATERMARKS
from .session import (
    CheckpointAckReceived,
    CheckpointAnswered,
    Closed,
    ConsumerSession,
    DeltaApplied,
    DuplicateDiscarded,
    GapDetected,
    HeartbeatSent,
    Negotiated,
    NegotiationSent,
    ProducerSession,
    SourceTrack,
)

log = logging.getLogger("reference_impl.ripp")

READ_CHUNK = 65536
DEFAULT_STAY = 0.0
MAX_DELTAS_FILE_BYTES = 16 << 20
FAULTY_MAX_PAYLOAD = 64 << 20
"""The no-length-bound fault still stops somewhere: it proves the case
catches a node that waits for the claimed bytes, not that the machine has
2 GiB to spare."""


_EPOCH_OFFSET_NS = time.time_ns() - time.monotonic_ns()


def monotonic_ns() -> int:
    """A monotonic clock expressed as nanoseconds since the Unix epoch: the
    sessions' timeouts never jump with the wall clock, and the timestamps
    they put into envelopes and Heartbeats read as the profile's P1 wants
    (nanoseconds since the epoch), as the OCaml peer's do."""
    return time.monotonic_ns() + _EPOCH_OFFSET_NS


def wall_ns() -> int:
    return time.time_ns()


class RippError(Exception):
    """A producer run that did not complete: ``kind`` is ``connect``,
    ``timeout``, ``rejected`` or ``protocol``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


# --- files ----------------------------------------------------------------------------------


def load_registry_file(path: str) -> dict[str, Schema]:
    """``{"<output>": <schema json>}`` (the form of payloads.schema_from_json)."""
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, dict) or not data:
        raise ValueError("a registry file maps output names to schemas")
    return {str(name): schema_from_json(schema) for name, schema in data.items()}


@dataclass
class DeltaSpec:
    output: str
    key: bytes
    delta: DeltaT
    sequence_no: Optional[int] = None


def _key_bytes(text: str) -> bytes:
    # The text: "key : string (* bin_prot encoded key *)": a symbol, as a bin_prot string.
    out = bytearray()
    bp.write_string(out, text.encode("utf-8"))
    return bytes(out)


def load_deltas_file(path: str) -> list[DeltaSpec]:
    """A JSON list of ``{"output", "key", "op": "set"|"patch"|"remove",
    "fields": {"<field>": "<hex of the bin_prot value>"}, "sequence_no"?}``."""
    with open(path, "rb") as handle:
        raw = handle.read(MAX_DELTAS_FILE_BYTES + 1)
    if len(raw) > MAX_DELTAS_FILE_BYTES:
        raise ValueError(f"deltas file is over {MAX_DELTAS_FILE_BYTES} bytes")
    specs = []
    for item in json.loads(raw):
        op = item.get("op", "set")
        fields = [
            FieldValue(name, bytes.fromhex(value)) for name, value in item.get("fields", {}).items()
        ]
        delta: DeltaT = {
            "set": SetDelta,
            "patch": PatchDelta,
            "remove": lambda _fields: RemoveDelta(),
        }[op](fields)
        specs.append(
            DeltaSpec(
                str(item["output"]), _key_bytes(str(item["key"])), delta, item.get("sequence_no")
            )
        )
    return specs


def sample_value(field_type: FieldType, i: int) -> bytes:
    """A deterministic value of ``field_type`` for generated delta number ``i``
    (a peer that knows ``i`` can compute the state the deltas build)."""

    def value(t: FieldType) -> Any:
        return {
            "Int": lambda: i,
            "Int64": lambda: i * 1000,
            "Float": lambda: i / 4,
            "Bool": lambda: i % 2 == 1,
            "String": lambda: f"v{i}".encode(),
            "Option": lambda: value(t.inner),
            "List": lambda: [value(t.inner)],
        }[t.kind]()

    return bp.encode(field_type.bintype(), value(field_type))


def generated_deltas(outputs: list[tuple[str, Schema]], count: int) -> list[DeltaSpec]:
    """``count`` deltas for the first output: Set on keys K0..K3 in turn, every
    5th a Patch of the first field, every 7th a Remove."""
    name, schema = outputs[0]
    specs = []
    for i in range(1, count + 1):
        key = _key_bytes(f"K{i % 4}")
        if i % 7 == 0:
            delta: DeltaT = RemoveDelta()
        elif i % 5 == 0 and schema.fields:
            first = schema.fields[0]
            delta = PatchDelta([FieldValue(first.field_name, sample_value(first.field_type, i))])
        else:
            delta = SetDelta(
                [FieldValue(f.field_name, sample_value(f.field_type, i)) for f in schema.fields]
            )
        specs.append(DeltaSpec(name, key, delta))
    return specs


# --- output lines ---------------------------------------------------------------------------


def format_event(event: Any, peer: str = "") -> Optional[str]:
    """One ``RIPP_<WHAT> {json}`` line per event worth showing."""
    where = {"peer": peer} if peer else {}
    if isinstance(event, NegotiationSent):
        return "RIPP_NEGOTIATED " + json.dumps({**where, "ok": event.ok, "errors": event.errors})
    if isinstance(event, Negotiated):
        n = event.negotiation
        return "RIPP_NEGOTIATED " + json.dumps(
            {
                **where,
                "ok": n.ok,
                "errors": n.errors,
                "heartbeat_interval_ms": n.heartbeat_interval_ms,
            }
        )
    if isinstance(event, DeltaApplied):
        return "RIPP_APPLIED " + json.dumps(
            {**where, "output": event.source_output, "sequence_no": event.sequence_no}
        )
    if isinstance(event, DuplicateDiscarded):
        return "RIPP_DUPLICATE " + json.dumps(
            {
                **where,
                "output": event.source_output,
                "sequence_no": event.sequence_no,
                "last": event.last,
            }
        )
    if isinstance(event, GapDetected):
        return "RIPP_GAP " + json.dumps(
            {
                **where,
                "output": event.source_output,
                "missing": [event.first_missing, event.last_missing],
            }
        )
    if isinstance(event, (CheckpointAnswered, CheckpointAckReceived)):
        ack = event.ack
        return "RIPP_CHECKPOINT " + json.dumps(
            {
                **where,
                "checkpoint_id": ack.checkpoint_id,
                "sources": [
                    {
                        "output": s.source_output,
                        "last_sequence_no": s.last_sequence_no,
                        "applied_count": s.applied_count,
                        "state_digest": s.state_digest.hex(),
                    }
                    for s in ack.sources
                ],
            }
        )
    if isinstance(event, Closed):
        return "RIPP_CLOSED " + json.dumps(
            {**where, "kind": event.kind, "reason": event.reason, "check": event.check}
        )
    return None


# --- faults ---------------------------------------------------------------------------------


class FaultyEnvelopeReader(EnvelopeReader):
    """The envelope reader with the receiver checks the faults switch off:
    each complete envelope is patched so that the correct decoder accepts it
    (magic, version, CRC rewritten), undefined types are skipped, and with
    no-length-bound the claimed length is waited for."""

    def __init__(self, faults: frozenset, max_payload: int = MAX_PAYLOAD) -> None:
        super().__init__(max_payload)
        self.faults = faults
        self.bound = FAULTY_MAX_PAYLOAD if Fault.NO_LENGTH_BOUND in faults else max_payload

    def receive_data(self, data: bytes) -> list[Envelope]:
        if self._error is not None:
            raise EnvelopeError(self._error.reason, self._error.check)
        self._buf += data
        out: list[Envelope] = []
        try:
            while len(self._buf) >= HEADER_SIZE:
                length = struct.unpack_from("<i", self._buf, 55)[0]
                if length < 0 or length > self.bound:
                    raise EnvelopeError(f"payload length field {length} out of bounds", "length")
                total = OVERHEAD + length
                if len(self._buf) < total:
                    break
                raw = bytearray(self._buf[:total])
                del self._buf[:total]
                # Each fault switches off its own check only: the others run
                # in the profile's order on the bytes as received.
                if raw[0:4] != MAGIC and Fault.SKIP_MAGIC_CHECK not in self.faults:
                    raise EnvelopeError(
                        f"magic {bytes(raw[0:4]).hex()} is not 52495050 (RIPP)", "magic"
                    )
                crc_ok = raw[-CRC_SIZE:] == struct.pack("<I", crc32c(bytes(raw[:-CRC_SIZE])))
                if not crc_ok and Fault.ACCEPT_BAD_CRC not in self.faults:
                    raise EnvelopeError("CRC-32C mismatch", "crc")
                if Fault.SKIP_MAGIC_CHECK in self.faults:
                    raw[0:4] = MAGIC
                if self.faults & {
                    Fault.IGNORE_ENVELOPE_VERSION,
                    Fault.CLIENT_IGNORE_ENVELOPE_VERSION,
                }:
                    raw[4] = VERSION
                if Fault.ACCEPT_NONZERO_FLAGS in self.faults:
                    raw[6] = 0
                if Fault.ACCEPT_UNKNOWN_TYPE in self.faults and raw[5] not in set(MsgType):
                    continue
                raw[-CRC_SIZE:] = struct.pack("<I", crc32c(bytes(raw[:-CRC_SIZE])))
                out.append(decode_envelope(bytes(raw), max_payload=max(self.bound, MAX_PAYLOAD)))
        except EnvelopeError as exc:
            exc.decoded = out
            self._error = exc
            self._buf = bytearray()
            raise
        return out


class _OutgoingFaults:
    """Mixin: flags and CRC of what the node sends, and envelope numbering."""

    faults: frozenset = frozenset()

    def _send(
        self,
        msg: Any,
        now_ns: int,
        *,
        fingerprint: bytes = ZERO_FINGERPRINT,
        timestamp_ns: Optional[int] = None,
    ) -> Envelope:
        nonzero = self.faults & {Fault.NONZERO_FLAGS, Fault.CLIENT_NONZERO_FLAGS}
        bad_crc = self.faults & {Fault.BAD_OUTGOING_CRC, Fault.CLIENT_BAD_CRC}
        repeat = bool(
            self.faults & {Fault.REPEAT_ENVELOPE_SEQUENCE, Fault.CONSUMER_REPEAT_ENVELOPE_SEQUENCE}
        )
        if not (nonzero or bad_crc or repeat):
            return super()._send(msg, now_ns, fingerprint=fingerprint, timestamp_ns=timestamp_ns)  # type: ignore[misc]
        self._sequence += 1  # type: ignore[attr-defined]
        env = make_envelope(
            msg_type_of(msg),
            encode_payload(msg),
            sequence=1 if repeat else self._sequence,
            timestamp_ns=now_ns if timestamp_ns is None else timestamp_ns,
            fingerprint=fingerprint,
            flags=1 if nonzero else 0,
        )
        data = bytearray(encode_envelope(env))
        if bad_crc:
            data[-1] ^= 1
        self._out += data  # type: ignore[attr-defined]
        self.sent_log.append(env)  # type: ignore[attr-defined]
        return env


class FaultyConsumerSession(_OutgoingFaults, ConsumerSession):
    def __init__(self, *args: Any, faults: frozenset, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.faults = faults
        self._reader = FaultyEnvelopeReader(faults, self._reader.max_payload)
        self._shared_last = 0
        self._digest_before_last: dict[str, bytes] = {}
        self._arrived: dict[str, set[int]] = {}
        """With apply-duplicates, apply-late-gap-fill: the sequence_no of every Delta that arrived, per source."""

    def _handle(self, env: Envelope, now_ns: int) -> list[Any]:
        if (
            Fault.IGNORE_CHECKPOINT_REQUEST in self.faults
            and self.state == "open"
            and env.msg_type == MsgType.CHECKPOINT_REQUEST
        ):
            return []
        return super()._handle(env, now_ns)

    def _on_handshake(self, hs: Any, now_ns: int) -> list[Any]:
        if Fault.REFUSE_ALL_SCHEMAS in self.faults:
            self.handshake = hs
            self._send(
                SchemaNegotiation(
                    False, ["refused"], PROTOCOL_VERSION, self.heartbeat_interval_ms, self.worker_id
                ),
                now_ns,
            )
            return [NegotiationSent(False, ["refused"]), self._close("rejected", "refused")]
        if Fault.IGNORE_HANDSHAKE_VERSION in self.faults:
            hs = dataclasses.replace(hs, protocol_version=PROTOCOL_VERSION)
        if Fault.ACCEPT_INCOMPATIBLE_SCHEMA in self.faults:
            # Declare every output as if the registry read it as written.
            saved = self.registry
            self.registry = {name: schema for name, schema in hs.output_schemas}
            try:
                return super()._on_handshake(hs, now_ns)
            finally:
                self.registry = saved
        return super()._on_handshake(hs, now_ns)

    def _peek(self, env: Envelope) -> Optional[DeltaMsg]:
        try:
            return decode_payload(env.msg_type, env.payload)
        except ValueError:
            return None

    def _on_delta(self, env: Envelope) -> list[Any]:
        msg = self._peek(env)
        track: Optional[SourceTrack] = (
            self.sources.get(msg.source_output) if msg is not None else None
        )
        if track is None or msg is None:
            return super()._on_delta(env)
        if Fault.SKIP_FINGERPRINT_CHECK in self.faults:
            env = env._replace(fingerprint=track.fingerprint)
        arrived = self._arrived.setdefault(msg.source_output, set())
        seen = msg.sequence_no in arrived
        arrived.add(msg.sequence_no)
        if Fault.APPLY_DUPLICATES in self.faults and msg.sequence_no <= track.last and seen:
            track.last = msg.sequence_no - 1
        if Fault.APPLY_LATE_GAP_FILL in self.faults:
            if msg.sequence_no <= track.last and not seen:
                # applied as if it were next, then the counter goes back to where it was
                last, track.last = track.last, msg.sequence_no - 1
                events = super()._on_delta(env)
                track.last = max(track.last, last)
                return events
        if Fault.HOLD_AFTER_GAP in self.faults and msg.sequence_no > track.last + 1:
            return [DuplicateDiscarded(msg.source_output, msg.sequence_no, track.last)]
        if Fault.ONE_COUNTER_FOR_ALL_SOURCES in self.faults:
            track.last = self._shared_last
        before = track.digest()
        events = super()._on_delta(env)
        if any(isinstance(e, DeltaApplied) for e in events):
            self._digest_before_last[msg.source_output] = before
        if Fault.ONE_COUNTER_FOR_ALL_SOURCES in self.faults:
            self._shared_last = track.last
        return events

    def _open_deadline(self) -> Optional[int]:
        return None if Fault.NO_LIVENESS_CHECK in self.faults else super()._open_deadline()

    def checkpoint_ack(self, checkpoint_id: int):
        ack = super().checkpoint_ack(checkpoint_id)
        if Fault.WRONG_ACK_DIGEST in self.faults:
            for state in ack.sources:
                state.state_digest = self._digest_before_last.get(
                    state.source_output, state.state_digest
                )
        return ack


class FaultyProducerSession(_OutgoingFaults, ProducerSession):
    def __init__(self, *args: Any, faults: frozenset, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.faults = faults
        if Fault.CLIENT_IGNORE_ENVELOPE_VERSION in faults:
            self._reader = FaultyEnvelopeReader(faults, self._reader.max_payload)

    def _require_open(self) -> None:
        if (
            Fault.CLIENT_NO_WAIT_FOR_NEGOTIATION in self.faults
            and self.state == "await_negotiation"
        ):
            return  # the fault: Deltas before the Schema_negotiation
        super()._require_open()

    def start(self, now_ns: int) -> None:
        if Fault.DELTA_BEFORE_HANDSHAKE in self.faults and self.outputs:
            name, schema = self.outputs[0]
            first = [FieldValue(f.field_name, sample_value(f.field_type, 1)) for f in schema.fields]
            self._send(
                DeltaMsg(name, _key_bytes("K1"), encode_delta(SetDelta(first)), 1, None),
                now_ns,
                fingerprint=self.fingerprints[name],
            )
            self.next_sequence_no[name] = 2
        super().start(now_ns)

    @property
    def heartbeat_interval_ns(self) -> Optional[int]:
        if self.negotiation is None:
            return None
        if Fault.DEFAULT_HEARTBEAT_INTERVAL in self.faults:
            return DEFAULT_HEARTBEAT_MS * 1_000_000
        return self.negotiation.heartbeat_interval_ms * 1_000_000

    def _open_deadline(self) -> Optional[int]:
        return None if Fault.NO_HEARTBEATS in self.faults else super()._open_deadline()

    def _open_poll(self, now_ns: int) -> list[Any]:
        return [] if Fault.NO_HEARTBEATS in self.faults else super()._open_poll(now_ns)

    def _handle(self, env: Envelope, now_ns: int) -> list[Any]:
        events = super()._handle(env, now_ns)
        if (
            Fault.IGNORE_REJECTION in self.faults
            and self.closed is not None
            and self.closed.kind == "rejected"
        ):
            # Carry on as if the consumer had said ok.
            self.closed = None
            self.state = "open"
            self._next_heartbeat_ns = now_ns + self.heartbeat_interval_ns
            events = [e for e in events if not isinstance(e, Closed)]
        return events


# --- connection pump ------------------------------------------------------------------------


async def pump(
    session: Any,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    on_event: Callable[[Any], None],
    until: Optional[Callable[[], bool]] = None,
    deadline: Optional[float] = None,
) -> None:
    """Move bytes between the socket and ``session`` until it closes, the
    peer hangs up, ``until()`` holds or the monotonic ``deadline`` passes.
    Reads never wait past the session's next deadline."""

    async def flush() -> None:
        data = session.data_to_send()
        if data:
            writer.write(data)
            await writer.drain()

    await flush()
    while session.closed is None and not (until and until()):
        now = monotonic_ns()
        waits = []
        nxt = session.next_deadline()
        if nxt is not None:
            waits.append(max(0, nxt - now) / 1e9)
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            waits.append(left)
        try:
            data = await asyncio.wait_for(reader.read(READ_CHUNK), min(waits) if waits else None)
        except asyncio.TimeoutError:
            data = None
        except (ConnectionError, OSError):
            data = b""
        if data is None:
            events = session.poll(monotonic_ns())
        elif data:
            events = session.receive_data(data, monotonic_ns())
            events += session.poll(monotonic_ns())
        else:
            events = session.eof()
        for event in events:
            on_event(event)
        try:
            await flush()
        except (ConnectionError, OSError):
            for event in session.eof():
                on_event(event)
            return


# --- consumer -------------------------------------------------------------------------------


class ConsumerNode:
    """Accepts producers; one ConsumerSession per connection."""

    def __init__(
        self,
        worker_id: str,
        registry: dict[str, Schema],
        *,
        heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_MS,
        max_payload: int = MAX_PAYLOAD,
        faults: Iterable[Fault] = (),
        on_event: Callable[[str, Any], None] = lambda peer, e: None,
        shape: Shape = Shape(),
    ) -> None:
        self.worker_id = worker_id
        self.shape = shape
        self.registry = registry
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_payload = max_payload
        self.faults = frozenset(faults)
        self.on_event = on_event
        self._server: Optional[asyncio.base_events.Server] = None
        self._tasks: set[asyncio.Task] = set()

    def new_session(self) -> ConsumerSession:
        kw = dict(heartbeat_interval_ms=self.heartbeat_interval_ms, max_payload=self.max_payload)
        if self.faults:
            return FaultyConsumerSession(self.worker_id, self.registry, faults=self.faults, **kw)
        return ConsumerSession(self.worker_id, self.registry, **kw)

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._connection, host, port)
        sock = self._server.sockets[0].getsockname()
        return sock[0], sock[1]

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        peer_info = writer.get_extra_info("peername") or ("?", 0)
        peer = f"{peer_info[0]}:{peer_info[1]}"
        writer = shape_writer(writer, self.shape)
        session = self.new_session()
        session.start(monotonic_ns())
        try:
            await pump(session, reader, writer, lambda event: self.on_event(peer, event))
        except Exception:  # a bug must not take the listener down; the connection ends
            log.exception("connection %s failed", peer)
        finally:
            writer.close()
            if task is not None:
                self._tasks.discard(task)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()


# --- producer -------------------------------------------------------------------------------


@dataclass
class ProducerRun:
    negotiation: Optional[SchemaNegotiation] = None
    sent: int = 0
    heartbeats: int = 0
    acks: list = field(default_factory=list)
    closed: Optional[Closed] = None


async def run_producer(
    host: str,
    port: int,
    worker_id: str,
    outputs: list[tuple[str, Schema]],
    deltas: list[DeltaSpec],
    *,
    timeout: float,
    stay: float = DEFAULT_STAY,
    checkpoint: bool = False,
    faults: Iterable[Fault] = (),
    on_event: Callable[[Any], None] = lambda e: None,
    variants: Iterable[str] = (),
    shape: Shape = Shape(),
) -> ProducerRun:
    """Connect, handshake, send ``deltas``, optionally ask for a checkpoint,
    keep heartbeating for ``stay`` seconds, close."""
    faults = frozenset(faults)
    run = ProducerRun()

    def record(event: Any) -> None:
        if isinstance(event, Negotiated):
            run.negotiation = event.negotiation
        elif isinstance(event, HeartbeatSent):
            run.heartbeats += 1
        elif isinstance(event, CheckpointAckReceived):
            if event.ack.checkpoint_id < UNPROMPTED_CHECKPOINT_IDS:
                run.acks.append(event.ack)
        elif isinstance(event, Closed):
            run.closed = event
        on_event(event)

    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except asyncio.TimeoutError:
        raise RippError(
            "timeout", f"could not connect to {host}:{port} within {timeout} s"
        ) from None
    except OSError as exc:
        raise RippError(
            "connect", f"could not connect to {host}:{port}: {exc.strerror or exc}"
        ) from None
    writer = shape_writer(writer, shape)
    variants = frozenset(variants)
    kw: dict[str, Any] = dict(handshake_timeout_ns=int(timeout * 1e9))
    if FREQUENT_HEARTBEATS in variants:
        kw["heartbeat_gap"] = HEARTBEAT_GAP
    session: ProducerSession = (
        FaultyProducerSession(worker_id, outputs, faults=faults, **kw)
        if faults
        else ProducerSession(worker_id, outputs, **kw)
    )
    own_checkpoints = iter(range(UNPROMPTED_CHECKPOINT_IDS, UNPROMPTED_CHECKPOINT_IDS + 1000))

    def ask_unprompted() -> None:
        """Variant unprompted-traffic: a Checkpoint_request nobody asked for."""
        if UNPROMPTED_TRAFFIC in variants and session.state == "open":
            session.request_checkpoint(next(own_checkpoints), monotonic_ns())

    def send_deltas() -> None:
        for spec in deltas:
            sequence_no = 1 if Fault.REPEAT_DELTA_SEQUENCE in faults else spec.sequence_no
            delta = spec.delta
            if Fault.DELTA_UNDECLARED_FIELD in faults and isinstance(delta, (SetDelta, PatchDelta)):
                delta = type(delta)([*delta.fields, FieldValue("undeclared_field", b"\x00")])
            session.send_delta(
                spec.output,
                spec.key,
                delta,
                monotonic_ns(),
                sequence_no=sequence_no,
                timestamp_ns=wall_ns(),
                watermark_ns=wall_ns() if WATERMARKS in variants else None,
            )
            run.sent += 1

    early = Fault.CLIENT_NO_WAIT_FOR_NEGOTIATION in faults
    try:
        session.start(monotonic_ns())
        if early:
            send_deltas()  # the fault: no waiting for the Schema_negotiation
        await pump(session, reader, writer, record, until=lambda: session.state == "open")
        if session.state != "open":
            closed = session.closed
            kind = {"rejected": "rejected", "timeout": "timeout"}.get(
                closed.kind if closed else "", "protocol"
            )
            raise RippError(
                kind,
                f"no usable Schema_negotiation: {closed.reason if closed else 'connection ended'}",
            )
        ask_unprompted()
        if not early:
            send_deltas()
        ask_unprompted()
        if checkpoint:
            session.request_checkpoint(1, monotonic_ns())
            await pump(
                session,
                reader,
                writer,
                record,
                until=lambda: bool(run.acks),
                deadline=time.monotonic() + timeout,
            )
            if not run.acks and session.closed is None:
                raise RippError("timeout", f"no Checkpoint_ack within {timeout} s")
        await pump(session, reader, writer, record, deadline=time.monotonic() + stay)
        if session.closed is not None and session.closed.kind != "peer" and run.closed is None:
            run.closed = session.closed
    finally:
        writer.close()
        try:
            # Late writes (variant late-answers) are still queued: they leave before the close does.
            await asyncio.wait_for(writer.wait_closed(), 1.0 + shape.late)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass
    return run

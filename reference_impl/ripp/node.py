"""The RIPP reference node over TCP: a thin asyncio layer on the sans-I/O
sessions of :mod:`.session`.

:class:`ConsumerNode` accepts connections (the consumer side, "server" role
of the suites); :func:`run_producer` connects and plays the producer
("client" role). Every read waits no longer than the session's next
deadline (heartbeats, timeouts), every envelope is bounded by the envelope
reader's ``max_payload``, and a session that closes ends its connection at
once after writing what it queued (a Schema_negotiation with ``ok =
false``; nothing after a refused envelope, profile P1).

Faults (``--fault``, :mod:`.faults`) go to the sessions as ``faults=...``
(each changes a value at a named point, reference_impl/ripp/faults.py);
:func:`run_producer` has one point of its own, deltas-before-negotiation.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

from .envelope import (
    MAX_PAYLOAD,
)
from ..variants import UNPROMPTED_TRAFFIC, Shape, shape_writer
from ..faults import FaultPoints
from .faults import SPECS as FAULT_SPECS
from .faults import Fault
from .payloads import (
    DEFAULT_HEARTBEAT_MS,
    DeltaT,
    FieldValue,
    PatchDelta,
    RemoveDelta,
    Schema,
    SchemaNegotiation,
    SetDelta,
    key_bytes as _key_bytes,
    sample_value,
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
)

log = logging.getLogger("reference_impl.ripp")

READ_CHUNK = 65536
DEFAULT_STAY = 0.0
MAX_DELTAS_FILE_BYTES = 16 << 20


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
        return ConsumerSession(
            self.worker_id,
            self.registry,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            max_payload=self.max_payload,
            faults=self.faults,
        )

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
    points = FaultPoints(FAULT_SPECS, frozenset(faults))
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
    session = ProducerSession(worker_id, outputs, faults=points.active, **kw)
    own_checkpoints = iter(range(UNPROMPTED_CHECKPOINT_IDS, UNPROMPTED_CHECKPOINT_IDS + 1000))

    def ask_unprompted() -> None:
        """Variant unprompted-traffic: a Checkpoint_request nobody asked for."""
        if UNPROMPTED_TRAFFIC in variants and session.state == "open":
            session.request_checkpoint(next(own_checkpoints), monotonic_ns())

    def send_deltas() -> None:
        for spec in deltas:
            session.send_delta(
                spec.output,
                spec.key,
                spec.delta,
                monotonic_ns(),
                sequence_no=spec.sequence_no,
                timestamp_ns=wall_ns(),
                watermark_ns=wall_ns() if WATERMARKS in variants else None,
            )
            run.sent += 1

    early = points.apply("deltas-before-negotiation", False)
    try:
        session.start(monotonic_ns())
        if early:
            send_deltas()
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

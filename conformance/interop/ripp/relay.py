"""An envelope-aware recording relay between a RIPP producer (the client
target) and a RIPP consumer (the server target, ``--peer``).

RIPP runs over plain TCP, so the harness can sit in the middle and act:

- it forwards every envelope verbatim, each way, once it is complete (so
  what it injects lands between envelopes, never inside one), and records
  each in the trace;
- after the producer's Delta with ``sequence_no`` REPLAY_AFTER it replays,
  verbatim, that Delta and the ones before it, newest first (a network or a
  restarted producer delivering again: with N=3 the consumer receives 1, 2,
  2, 1, 3, the sequence of issue #13's duplicate-discard case);
- once the producer's last Delta (``sequence_no`` = N) went through, or when
  the producer closes first, it sends the consumer a Checkpoint_request of
  its own on the producer's connection and keeps the Checkpoint_ack that
  answers it (the producer did not ask for it and never sees it).

Why in-band on the producer's connection: the profile (P6) makes the applied
state belong to the connection, so a second connection of the harness would
see an empty state; the ack, on the connection the deltas came on, shows per
source the last applied ``sequence_no``, how many deltas were applied and the
digest of the applied state (P7). Receivers do not close on the envelope
header's sequence number (P6), so a replayed envelope and the injected
request need no renumbering.

Every read is bounded by the envelope's length bound (P1) and by the case's
deadlines; a stream the relay cannot split (bad length field) is forwarded
as it is and no longer parsed (the consumer judges it; the case shows it).
"""

from __future__ import annotations

import asyncio
import secrets
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from conformance.core import impair
from conformance.core.transport import (
    MAX_READ_CHUNK,
    ConnectionTrace,
    WireTrace,
    short_hex,
    socket_ends,
)
from reference_impl.ripp.envelope import (
    CRC_SIZE,
    HEADER_SIZE,
    MAX_PAYLOAD,
    EnvelopeError,
    MsgType,
    decode_envelope,
    encode_envelope,
    make_envelope,
)
from reference_impl.ripp.payloads import (
    CheckpointAck,
    CheckpointRequest,
    DeltaMsg,
    PayloadError,
    decode_payload,
    encode_payload,
)

REPLAY_AFTER = 2
"""The producer's Delta after which the relay replays it and its
predecessors (sequence_no 2: the consumer sees 1, 2, 2, 1, ...)."""


@dataclass
class Seen:
    """One envelope that crossed the relay."""

    direction: str
    raw: bytes
    message: Any
    """The decoded payload, or None when it did not decode."""
    problem: str | None
    injected: bool = False
    at: float = field(default_factory=time.monotonic)

    def describe(self) -> str:
        kind = type(self.message).__name__ if self.message is not None else "undecodable"
        return (
            f"{kind}{' (injected by the harness)' if self.injected else ''}: {short_hex(self.raw)}"
        )


def _decode(raw: bytes) -> tuple[Any, str | None]:
    try:
        env = decode_envelope(raw)
    except EnvelopeError as exc:
        return None, f"envelope refused ({exc.check}): {exc}"
    try:
        return decode_payload(env.msg_type, env.payload), None
    except PayloadError as exc:
        return None, f"{MsgType(env.msg_type).name} payload does not decode: {exc}"


class _Splitter:
    """Complete envelopes out of a byte stream (length bound P1); after a
    bad length field it gives up splitting and passes bytes through."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.broken: str | None = None

    def feed(self, data: bytes) -> tuple[list[bytes], bytes]:
        """(complete envelopes, bytes to pass through unparsed)."""
        if self.broken:
            return [], data
        self.buf += data
        out = []
        while len(self.buf) >= HEADER_SIZE:
            length = struct.unpack_from("<i", self.buf, 55)[0]
            if not 0 <= length <= MAX_PAYLOAD:
                self.broken = f"length field {length} outside 0..{MAX_PAYLOAD}: {short_hex(bytes(self.buf[:HEADER_SIZE]))}"
                rest, self.buf = bytes(self.buf), bytearray()
                return out, rest
            total = HEADER_SIZE + length + CRC_SIZE
            if len(self.buf) < total:
                break
            out.append(bytes(self.buf[:total]))
            del self.buf[:total]
        return out, b""


class RippRelay:
    """``async with RippRelay(host, port, trace, count=N) as relay``: the
    producer is pointed at ``relay.host:relay.port``."""

    def __init__(
        self,
        server_host: str,
        server_port: int,
        trace: WireTrace,
        *,
        count: int,
        replay: bool = True,
        checkpoint: bool = True,
    ) -> None:
        self.server_host, self.server_port, self.trace = server_host, server_port, trace
        self.count, self.replay, self.checkpoint = count, replay, checkpoint
        self.host, self.port = "127.0.0.1", 0
        self.seen: list[Seen] = []
        self.connections = 0
        self.checkpoint_id = secrets.randbelow(1 << 30)
        self.ack: CheckpointAck | None = None
        self.ack_event = asyncio.Event()
        self.producer_closed_at: float | None = None
        self.consumer_closed_at: float | None = None
        self.notes: list[str] = []
        self._server: asyncio.base_events.Server | None = None
        self._front: impair.ImpairRelay | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- what went through
    def messages(
        self, direction: str, cls: type | None = None, *, injected: bool | None = None
    ) -> list[Seen]:
        return [
            s
            for s in self.seen
            if s.direction == direction
            and (cls is None or isinstance(s.message, cls))
            and (injected is None or s.injected == injected)
        ]

    async def wait_ack(self, seconds: float) -> CheckpointAck | None:
        try:
            await asyncio.wait_for(self.ack_event.wait(), seconds)
        except asyncio.TimeoutError:
            pass
        return self.ack

    # -- plumbing
    async def __aenter__(self) -> RippRelay:
        self._server = await asyncio.start_server(self._track, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        # With an impairment, the producer's connection comes through a relay
        # in front and the consumer's goes through one (conformance/core/impair.py).
        self._front = await impair.front(self.host, self.port)
        if self._front is not None:
            self.port = self._front.port
            self.trace.event(f"the producer is given {self.host}:{self.port}{impair.through()}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        if self._front is not None:
            await self._front.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _track(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.ensure_future(self._on_producer(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _record(
        self, wire: ConnectionTrace, direction: str, raw: bytes, injected: bool = False
    ) -> Seen:
        message, problem = _decode(raw)
        seen = Seen(direction, raw, message, problem, injected)
        self.seen.append(seen)
        wire.record(
            direction,
            raw,
            ("injected by the harness: " if injected else "")
            + (type(message).__name__ if message is not None else f"({problem})"),
        )
        return seen

    async def _on_producer(
        self, p_reader: asyncio.StreamReader, p_writer: asyncio.StreamWriter
    ) -> None:
        self.connections += 1
        # In the trace, one connection per producer connection: from the
        # producer's end to the consumer the relay forwards to.
        wire = self.trace.connect(
            "relayed",
            socket_ends(p_writer)[1],
            (self.server_host, self.server_port),
            "client",
            "producer to consumer, relayed",
        )
        wire.event(
            f"producer connected to the relay (connection {self.connections}); relaying to "
            f"{self.server_host}:{self.server_port}"
        )
        try:
            c_reader, c_writer = await impair.open_connection(self.server_host, self.server_port)
        except OSError as exc:
            wire.event(f"relay could not reach the consumer: {exc}")
            wire.ended("server", "rst")
            p_writer.close()
            return
        deltas: list[bytes] = []
        asked = False

        async def inject_checkpoint() -> None:
            nonlocal asked
            if asked or not self.checkpoint:
                return
            asked = True
            last = max(
                (struct.unpack_from("<q", s.raw, 7)[0] for s in self.messages("client->server")),
                default=0,
            )
            raw = encode_envelope(
                make_envelope(
                    MsgType.CHECKPOINT_REQUEST,
                    encode_payload(CheckpointRequest(self.checkpoint_id)),
                    sequence=last + 1,
                    timestamp_ns=time.time_ns(),
                )
            )
            self._record(wire, "client->server", raw, injected=True)
            c_writer.write(raw)
            await c_writer.drain()

        async def upstream() -> None:
            splitter = _Splitter()
            try:
                while data := await p_reader.read(MAX_READ_CHUNK):
                    envelopes, rest = splitter.feed(data)
                    for raw in envelopes:
                        seen = self._record(wire, "client->server", raw)
                        c_writer.write(raw)
                        if isinstance(seen.message, DeltaMsg):
                            deltas.append(raw)
                            seq = seen.message.sequence_no
                            if self.replay and seq == REPLAY_AFTER:
                                for old in reversed(deltas):
                                    self._record(wire, "client->server", old, injected=True)
                                    c_writer.write(old)
                            if seq >= self.count:
                                await c_writer.drain()
                                await inject_checkpoint()
                    if rest:
                        self.notes.append(
                            f"the producer's stream could not be split: {splitter.broken}"
                        )
                        wire.record("client->server", rest, "unsplittable")
                        c_writer.write(rest)
                    await c_writer.drain()
            except (ConnectionError, OSError):
                pass
            self.producer_closed_at = time.monotonic()
            wire.event("producer closed its side")
            wire.ended("client", "fin")
            # The producer is done: ask now if its last Delta never came,
            # and hold the consumer's side open until the answer (bounded
            # by the case, which leaves the relay).
            try:
                await inject_checkpoint()
                if self.checkpoint:
                    await self.ack_event.wait()
                if c_writer.can_write_eof():
                    c_writer.write_eof()
            except (ConnectionError, OSError):
                pass

        async def downstream() -> None:
            splitter = _Splitter()
            try:
                while data := await c_reader.read(MAX_READ_CHUNK):
                    envelopes, rest = splitter.feed(data)
                    for raw in envelopes:
                        seen = self._record(wire, "server->client", raw)
                        if isinstance(seen.message, CheckpointAck) and asked and self.ack is None:
                            # The harness's own question: the producer never asked.
                            self.ack = seen.message
                            self.ack_event.set()
                            continue
                        p_writer.write(raw)
                    if rest:
                        self.notes.append(
                            f"the consumer's stream could not be split: {splitter.broken}"
                        )
                        wire.record("server->client", rest, "unsplittable")
                        p_writer.write(rest)
                    await p_writer.drain()
            except (ConnectionError, OSError):
                pass
            self.consumer_closed_at = time.monotonic()
            wire.event("consumer closed its side")
            wire.ended("server", "fin")
            self.ack_event.set()  # no answer is coming any more
            try:
                if p_writer.can_write_eof():
                    p_writer.write_eof()
            except (ConnectionError, OSError):
                pass

        try:
            await asyncio.gather(upstream(), downstream())
        finally:
            for writer in (p_writer, c_writer):
                writer.close()

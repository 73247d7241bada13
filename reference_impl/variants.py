"""Conformant variants of the reference nodes: behaviours the texts allow
and the plain reference node does not show.

The reference nodes are one reading of each text. A suite written beside
them can lean, without anyone noticing, on what they happen to do: answer at
once, write one frame per write, never speak unprompted. ``--variant NAME``
(repeatable) switches a node to another allowed behaviour, so that
``conformance mutation --variants`` can certify each one and show that every
verdict of the suites holds for it too (docs/mutation.md, "Conformant
variants"). Each variant cites the sentence of the text that allows it.

Three variants shape the bytes a node writes, the same way in every protocol,
below the protocol and above TLS (so under TLS each piece is a TLS record of
its own): :data:`SPLIT_WRITES`, :data:`COALESCE_WRITES` and
:data:`LATE_ANSWERS`. :class:`WriteShaper` does it for asyncio stream writers
(:func:`shape_writer`) and raw transports (:class:`ShapedTransport`, for the
WebSocket node). Each protocol adds its own variants in
``reference_impl/<protocol>/variants.py`` and its node applies them.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

ROLES = ("server", "client")

SPLIT_WRITES = "split-writes"
COALESCE_WRITES = "coalesce-writes"
LATE_ANSWERS = "late-answers"
UNPROMPTED_TRAFFIC = "unprompted-traffic"

SPLIT_PAUSE = 0.002
"""After the first byte of every write, and before its last, a pause: long
enough that a reader on loopback sees the piece alone (a 1-byte write can
still be merged with the next by a reader that is slower than the writer),
short enough that a run stays quick."""
COALESCE_WINDOW = 0.03
"""How long writes are held so that those made meanwhile leave in one write."""
DEFAULT_LATE_SECONDS = 1.5
"""How late every write leaves with ``late-answers``, by default half the
harness's default read deadline (3 s): the latest moment a harness that
gives each awaited answer its own deadline can wait for, with a margin for a
loaded machine. ``--late-seconds`` sets it."""
TCP_STREAM = (
    "TCP is a byte stream (RFC 9293, section 3.8.3): a sender's writes carry no boundaries the "
    "receiver can see, so a frame may arrive in any number of pieces, or several in one"
)


@dataclass(frozen=True)
class VariantSpec:
    name: str
    roles: tuple[str, ...]
    """The roles whose launch command takes the flag ("server", "client")."""
    description: str
    allowed_by: str
    """The sentence of the text (or of the profile) that allows it."""

    def __post_init__(self) -> None:
        if not self.roles or set(self.roles) - set(ROLES):
            raise ValueError(f"variant {self.name}: roles must be among {ROLES}")
        if not self.allowed_by:
            raise ValueError(f"variant {self.name}: a variant cites the sentence that allows it")


def wire_variants(
    frame_unit: str, answer_limit: str, frame_units: str | None = None
) -> tuple[VariantSpec, ...]:
    """The three variants that shape the bytes, for a protocol whose unit of
    writing is ``frame_unit`` (plural ``frame_units``) and whose text says
    ``answer_limit`` about how soon an answer is due."""
    frame_units = frame_units or f"{frame_unit}s"
    return (
        VariantSpec(
            SPLIT_WRITES,
            ROLES,
            f"every write split into 1-byte writes (each {frame_unit} arrives in "
            "pieces, with a pause after its first byte and before its last)",
            TCP_STREAM,
        ),
        VariantSpec(
            COALESCE_WRITES,
            ROLES,
            f"writes held for {COALESCE_WINDOW * 1000:g} ms and sent together "
            f"(several {frame_units} in one write)",
            TCP_STREAM,
        ),
        VariantSpec(
            LATE_ANSWERS,
            ROLES,
            f"every write leaves --late-seconds late (default {DEFAULT_LATE_SECONDS:g} "
            "s): answers at the latest moment the harness's read deadline allows",
            answer_limit,
        ),
    )


def add_variant_option(
    parser: argparse.ArgumentParser, specs: tuple[VariantSpec, ...], role: str
) -> None:
    """``--variant NAME`` (repeatable) with the variants of one role, and
    ``--late-seconds``."""
    names = [spec.name for spec in specs if role in spec.roles]
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME",
        choices=names,
        help="behave in another way the text allows (repeatable): " + ", ".join(names),
    )
    parser.add_argument(
        "--late-seconds",
        type=float,
        default=DEFAULT_LATE_SECONDS,
        metavar="S",
        help=f"with --variant {LATE_ANSWERS}: how late every write leaves "
        f"(default {DEFAULT_LATE_SECONDS:g})",
    )


def variant_help(specs: tuple[VariantSpec, ...]) -> str:
    width = max(len(spec.name) for spec in specs)
    lines = ["conformant variants (--variant, repeatable), each a behaviour the text allows:"]
    lines += [
        f"  {spec.name:<{width}}  {spec.description} [{'/'.join(spec.roles)}]" for spec in specs
    ]
    return "\n".join(lines)


@dataclass(frozen=True)
class Shape:
    """How a node's writes leave: the wire variants that are on. The
    harness's impairment relay (conformance/core/impair.py) shapes its two
    directions with the same pump, through the last three fields."""

    split: bool = False
    coalesce: bool = False
    late: float = 0.0
    window: float = COALESCE_WINDOW
    """With ``coalesce``: how long writes are held."""
    lateness: Callable[[], float] | None = None
    """Instead of ``late``: how late each write leaves, drawn per write."""
    pieces: Callable[[bytes], Iterator[tuple[bytes, float]]] | None = None
    """Instead of ``split``: how a batch goes on the wire, as pieces, each
    followed by a pause (seconds; 0 lets the loop run)."""

    @classmethod
    def from_variants(
        cls, variants: frozenset[str] | set[str], late_seconds: float = DEFAULT_LATE_SECONDS
    ) -> Shape:
        return cls(
            split=SPLIT_WRITES in variants,
            coalesce=COALESCE_WRITES in variants,
            late=late_seconds if LATE_ANSWERS in variants else 0.0,
        )

    @property
    def plain(self) -> bool:
        return not (self.split or self.coalesce or self.late or self.lateness or self.pieces)


_EOF, _CLOSE = object(), object()


class WriteShaper:
    """Writes queued in order and put on ``sink`` by one task, shaped. The
    owner's ``write`` never blocks; a ``drain`` waits until the queue is
    empty only when splitting (so a node writing much meets back-pressure);
    late and coalesced writes leave on their own schedule, in order."""

    def __init__(
        self,
        shape: Shape,
        write: Callable[[bytes], None],
        write_eof: Callable[[], None],
        close: Callable[[], None],
        is_closing: Callable[[], bool],
    ) -> None:
        self.shape = shape
        self._write, self._write_eof, self._close, self._is_closing = (
            write,
            write_eof,
            close,
            is_closing,
        )
        self._queue: deque[tuple[float, Any]] = deque()
        self._wake = asyncio.Event()
        self._empty = asyncio.Event()
        self._empty.set()
        self._task: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()
        self.queued = 0
        """Bytes put and not yet on the wire."""

    def put(self, item: Any) -> None:
        if self.closed.is_set():
            return
        loop = asyncio.get_running_loop()
        late = self.shape.lateness() if self.shape.lateness is not None else self.shape.late
        self._queue.append((loop.time() + late, item))
        if isinstance(item, (bytes, bytearray, memoryview)):
            self.queued += len(item)
        self._empty.clear()
        self._wake.set()
        if self._task is None:
            self._task = loop.create_task(self._pump())

    async def flushed(self) -> None:
        await self._empty.wait()

    def abort(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._queue.clear()
        self.queued = 0
        self._empty.set()
        self.closed.set()

    async def _pump(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                if not self._queue:
                    self._empty.set()
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                release, _ = self._queue[0]
                if release > loop.time():
                    await asyncio.sleep(release - loop.time())
                if self.shape.coalesce:
                    await asyncio.sleep(self.shape.window)
                batch = bytearray()
                marker = None
                while self._queue and self._queue[0][0] <= loop.time():
                    _, item = self._queue.popleft()
                    if isinstance(item, (bytes, bytearray, memoryview)):
                        batch += item
                        self.queued -= len(item)
                        if not self.shape.coalesce:
                            break
                    else:
                        marker = item
                        break
                if batch and not self._is_closing():
                    await self._put_on_wire(bytes(batch))
                if marker is _EOF and not self._is_closing():
                    self._write_eof()
                elif marker is _CLOSE:
                    self._close()
                    return
        finally:
            self._empty.set()
            self.closed.set()

    async def _put_on_wire(self, data: bytes) -> None:
        if self.shape.pieces is not None:
            for piece, pause in self.shape.pieces(data):
                if self._is_closing():
                    return
                if piece:
                    self._write(piece)
                await asyncio.sleep(
                    pause
                )  # 0: each piece its own send(), the loop runs between them
            return
        if not self.shape.split or len(data) == 1:
            self._write(data)
            return
        for index in range(len(data)):
            if self._is_closing():
                return
            self._write(data[index : index + 1])
            if index == 0 or index == len(data) - 2:
                await asyncio.sleep(SPLIT_PAUSE)
            else:
                await asyncio.sleep(0)  # each byte its own send(): let the loop run between them


class ShapedStreamWriter:
    """An ``asyncio.StreamWriter`` whose writes leave shaped; everything else
    is the wrapped writer's."""

    def __init__(self, writer: asyncio.StreamWriter, shape: Shape) -> None:
        self._writer = writer
        self._shaper = WriteShaper(
            shape, writer.write, writer.write_eof, writer.close, writer.is_closing
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)

    def write(self, data: bytes) -> None:
        if data:
            self._shaper.put(bytes(data))

    def writelines(self, data: Any) -> None:
        for chunk in data:
            self.write(chunk)

    def write_eof(self) -> None:
        self._shaper.put(_EOF)

    def close(self) -> None:
        if self._shaper._task is None:
            self._writer.close()
            self._shaper.closed.set()
        else:
            self._shaper.put(_CLOSE)

    def is_closing(self) -> bool:
        return self._shaper.closed.is_set() or self._writer.is_closing()

    async def drain(self) -> None:
        if self._shaper.shape.split:
            await self._shaper.flushed()
        await self._writer.drain()

    async def wait_closed(self) -> None:
        await self._shaper.closed.wait()
        await self._writer.wait_closed()

    @property
    def transport(self) -> asyncio.BaseTransport:
        return self._writer.transport


def shape_writer(writer: asyncio.StreamWriter, shape: Shape) -> asyncio.StreamWriter:
    """``writer`` itself when the shape is plain, else a shaped proxy."""
    return writer if shape.plain else ShapedStreamWriter(writer, shape)  # type: ignore[return-value]


class ShapedTransport(asyncio.Transport):
    """A transport whose writes leave shaped (for a protocol object that
    writes to its transport itself, as a ``websockets`` connection does).
    ``close`` leaves after the queued writes; ``abort`` at once."""

    def __init__(self, transport: asyncio.Transport, shape: Shape) -> None:
        super().__init__()
        self._transport = transport
        self._shaper = WriteShaper(
            shape, transport.write, transport.write_eof, transport.close, transport.is_closing
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if data:
            self._shaper.put(bytes(data))

    def writelines(self, list_of_data: Any) -> None:
        for chunk in list_of_data:
            self.write(chunk)

    def write_eof(self) -> None:
        self._shaper.put(_EOF)

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def close(self) -> None:
        if self._shaper._task is None:
            self._transport.close()
            self._shaper.closed.set()
        else:
            self._shaper.put(_CLOSE)

    def abort(self) -> None:
        self._shaper.abort()
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._shaper.closed.is_set() or self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()

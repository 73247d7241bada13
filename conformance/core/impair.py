"""Network impairment: every connection between the harness and a target
through an in-process loopback relay that shapes the TCP byte stream in
each direction (below TLS and WebSocket), seeded so that a run can be
replayed (docs/impairment.md).

Real networks deliver a frame in pieces, several frames in one read, late,
slowly. A verdict that changes when the bytes arrive in other pieces is a
verdict about the test machine, not about the node. ``certify --impair
PROFILE`` (and ``interop``, ``mutation``) puts the relay between the harness
and the target in both roles:

- server role: the harness connects to the relay, which has first connected
  to the target (:func:`open_connection`, :func:`connect_socket`), so a
  target that refuses the connection is refused as on clean loopback;
- client role: the target is given the relay's address, and the relay
  connects to the harness's listener (:class:`ImpairRelay`, :func:`front`).

Profiles (:data:`PROFILES`): ``fragment``, ``coalesce``, ``delay``,
``throttle``, ``stall``, each with parameters (``delay:ms=200,jitter=50``).
Each direction of each connection draws from its own
``random.Random("<seed>/<case id>/<connection>/<direction>")``: the same
seed gives the same cut points (as byte offsets of the stream), pauses and
delays, whatever other cases ran before. What a seed cannot replay is how
the endpoints' own writes reach the relay.

The shaping itself is the reference nodes' write shaper
(:class:`reference_impl.variants.WriteShaper`, the queue-and-pump of the
split/coalesce/late variants): the relay reads each direction and puts what
it read on the shaper of the other side.

A profile that would break a rule of a text, or a deadline of the harness
(a delay longer than a required answer time), is refused before any case
runs (:func:`refusal`): exit status 2 with the reason.
"""

from __future__ import annotations

import asyncio
import random
import socket
import ssl as ssl_module
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from reference_impl.variants import _CLOSE, _EOF, Shape, WriteShaper

READ_CHUNK = 65536
HIGH_WATER = 1 << 20
"""Bytes the relay holds per direction before it stops reading the sender
(TCP back-pressure): a flooding peer fills no memory."""


@dataclass(frozen=True)
class Param:
    name: str
    default: float
    unit: str
    meaning: str
    minimum: float = 0.0
    integer: bool = False


@dataclass(frozen=True)
class ProfileSpec:
    name: str
    description: str
    params: tuple[Param, ...]

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


PROFILES: dict[str, ProfileSpec] = {
    spec.name: spec
    for spec in (
        ProfileSpec(
            "fragment",
            "every write cut at random points into pieces of 1 to max bytes, each its own send(); "
            "a pause after each of the first pieces and before each of the last ones of a write",
            (
                Param(
                    "max",
                    16,
                    "bytes",
                    "largest piece (pieces are 1..max bytes, uniformly)",
                    1,
                    True,
                ),
                Param(
                    "pauses",
                    4,
                    "",
                    "pauses per write: half after its first pieces, half before its last ones",
                    0,
                    True,
                ),
                Param("pause_ms", 2, "ms", "length of each pause"),
            ),
        ),
        ProfileSpec(
            "coalesce",
            "writes held for a window and delivered together, in one write",
            (Param("ms", 30, "ms", "how long writes are held", 1),),
        ),
        ProfileSpec(
            "delay",
            "every write delivered late: a fixed delay plus a random jitter (order kept)",
            (
                Param("ms", 100, "ms", "fixed one-way delay"),
                Param("jitter", 25, "ms", "random extra delay, 0..jitter, drawn per write"),
            ),
        ),
        ProfileSpec(
            "throttle",
            "a bandwidth cap per direction: bytes leave in slices, paced at the rate",
            (
                Param("rate", 32768, "bytes/s", "the cap", 1024),
                Param(
                    "slice",
                    256,
                    "bytes",
                    "bytes per slice (each a send() followed by its share of the time)",
                    1,
                    True,
                ),
            ),
        ),
        ProfileSpec(
            "stall",
            "a pause in the middle of a write (of a frame, as the sender wrote it): every "
            "every-th write of a direction is cut at a random point and its rest held back",
            (
                Param("ms", 200, "ms", "length of the stall"),
                Param(
                    "every",
                    3,
                    "writes",
                    "which writes stall: the 1st, then every every-th",
                    1,
                    True,
                ),
            ),
        ),
    )
}


class ImpairmentError(ValueError):
    """A profile that cannot be parsed, or is refused: a usage error."""


@dataclass(frozen=True)
class Profile:
    name: str
    given: tuple[tuple[str, float], ...] = ()
    """The parameters given on the command line, in their order."""

    @property
    def spec(self) -> ProfileSpec:
        return PROFILES[self.name]

    def get(self, name: str) -> float:
        for key, value in self.given:
            if key == name:
                return value
        param = self.spec.param(name)
        assert param is not None, name
        return param.default

    def text(self) -> str:
        """As given, with the defaults left out: ``fragment``, ``delay:ms=200,jitter=50``."""
        if not self.given:
            return self.name
        return self.name + ":" + ",".join(f"{k}={v:g}" for k, v in self.given)

    def resolved(self) -> dict[str, float]:
        return {p.name: self.get(p.name) for p in self.spec.params}

    # -- what the profile adds to the way: for the refusals and the cases that time the target

    def one_way(self, size: int = 1024) -> float:
        """Worst seconds the relay adds to a write of ``size`` bytes on its way
        (a message of that size, from its first byte sent to its last
        delivered)."""
        if self.name == "fragment":
            return self.get("pauses") * self.get("pause_ms") / 1000 + 0.0001 * size / max(
                1, self.get("max")
            )
        if self.name == "coalesce":
            return self.get("ms") / 1000
        if self.name == "delay":
            return (self.get("ms") + self.get("jitter")) / 1000
        if self.name == "throttle":
            return size / self.get("rate") + self.get("slice") / self.get("rate")
        if self.name == "stall":
            return self.get("ms") / 1000
        raise AssertionError(self.name)

    def jitter(self) -> float:
        """Worst change the relay makes to the time between two writes of a
        direction, as the receiver sees it (what a case timing gaps, such as
        heart-beats, must allow for)."""
        if self.name == "delay":
            return self.get("jitter") / 1000
        if self.name == "throttle":
            return self.get("slice") / self.get("rate")
        return self.one_way(0)


def parse_profile(text: str) -> Profile:
    """``NAME`` or ``NAME:KEY=VALUE,KEY=VALUE``; ImpairmentError naming what
    is wrong and what is allowed."""
    name, _, rest = text.strip().partition(":")
    name = name.strip()
    if name not in PROFILES:
        raise ImpairmentError(
            f"unknown impairment profile {name!r}; profiles: {', '.join(PROFILES)} "
            "(docs/impairment.md)"
        )
    spec = PROFILES[name]
    given: list[tuple[str, float]] = []
    for item in filter(None, (part.strip() for part in rest.split(","))) if rest else ():
        key, eq, value = item.partition("=")
        key = key.strip()
        param = spec.param(key)
        if param is None:
            raise ImpairmentError(
                f"profile {name} has no parameter {key!r}; its parameters: "
                + ", ".join(
                    f"{p.name} ({p.meaning}, default {p.default:g}{' ' + p.unit if p.unit else ''})"
                    for p in spec.params
                )
            )
        if not eq:
            raise ImpairmentError(f"profile {name}: parameter {key} needs a value ({key}=N)")
        try:
            number = float(value)
        except ValueError:
            raise ImpairmentError(f"profile {name}: {key}={value!r} is not a number") from None
        if param.integer and number != int(number):
            raise ImpairmentError(f"profile {name}: {key} must be a whole number, got {value}")
        if not number >= param.minimum or number != number or number == float("inf"):
            raise ImpairmentError(
                f"profile {name}: {key} must be at least {param.minimum:g}, got {value}"
            )
        if any(k == key for k, _ in given):
            raise ImpairmentError(f"profile {name}: {key} given twice")
        given.append((key, number))
    return Profile(name, tuple(given))


def new_seed() -> int:
    return random.SystemRandom().randrange(1, 10**9)


@dataclass(frozen=True)
class Impairment:
    profile: Profile
    seed: int

    def describe(self) -> str:
        """What results, summaries and traces record: ``fragment seed=123``."""
        return f"{self.profile.text()} seed={self.seed}"

    @classmethod
    def parse(cls, described: str) -> Impairment:
        """The inverse of :meth:`describe`."""
        text, _, seed = described.rpartition(" seed=")
        return cls(parse_profile(text), int(seed))

    def rng(self, key: str) -> random.Random:
        return random.Random(f"{self.seed}/{key}")

    def shape(self, key: str) -> Shape:
        """The shape of one direction of one connection."""
        p = self.profile
        rng = self.rng(key)
        if p.name == "fragment":
            return Shape(
                pieces=_Fragmenter(
                    rng, int(p.get("max")), int(p.get("pauses")), p.get("pause_ms") / 1000
                )
            )
        if p.name == "coalesce":
            return Shape(coalesce=True, window=p.get("ms") / 1000)
        if p.name == "delay":
            fixed, jitter = p.get("ms") / 1000, p.get("jitter") / 1000
            return Shape(lateness=lambda: fixed + rng.uniform(0, jitter))
        if p.name == "throttle":
            return Shape(pieces=_Throttle(p.get("rate"), int(p.get("slice"))))
        if p.name == "stall":
            return Shape(pieces=_Staller(rng, p.get("ms") / 1000, int(p.get("every"))))
        raise AssertionError(p.name)


class _Fragmenter:
    """Cut points drawn along the stream: piece lengths 1..max, one after
    the other, whatever the writes (a write's end is a cut too)."""

    def __init__(self, rng: random.Random, largest: int, pauses: int, pause: float) -> None:
        self.rng, self.largest, self.pause = rng, largest, pause
        self.head, self.tail = (pauses + 1) // 2, pauses // 2
        self.left = rng.randint(1, largest)

    def __call__(self, data: bytes) -> Iterator[tuple[bytes, float]]:
        pieces = []
        at = 0
        while at < len(data):
            take = min(self.left, len(data) - at)
            pieces.append(data[at : at + take])
            at += take
            self.left -= take
            if self.left == 0:
                self.left = self.rng.randint(1, self.largest)
        last = len(pieces) - 1
        for index, piece in enumerate(pieces):
            paused = index < last and (index < self.head or index >= last - self.tail)
            yield piece, self.pause if paused else 0.0


class _Throttle:
    def __init__(self, rate: float, slice_bytes: int) -> None:
        self.rate, self.slice = rate, slice_bytes

    def __call__(self, data: bytes) -> Iterator[tuple[bytes, float]]:
        for at in range(0, len(data), self.slice):
            piece = data[at : at + self.slice]
            yield piece, len(piece) / self.rate


class _Staller:
    def __init__(self, rng: random.Random, pause: float, every: int) -> None:
        self.rng, self.pause, self.every = rng, pause, every
        self.writes = 0

    def __call__(self, data: bytes) -> Iterator[tuple[bytes, float]]:
        stall = self.writes % self.every == 0 and len(data) > 1
        self.writes += 1
        if not stall:
            yield data, 0.0
            return
        cut = self.rng.randint(1, len(data) - 1)
        yield data[:cut], self.pause
        yield data[cut:], 0.0


# --- the run's impairment -------------------------------------------------------------------

_ACTIVE: Impairment | None = None
_CASE = "run"
_CONNECTIONS = 0


def activate(impairment: Impairment | None) -> None:
    """Set (or, with None, clear) the impairment of this process's run."""
    global _ACTIVE
    _ACTIVE = impairment


def active() -> Impairment | None:
    return _ACTIVE


def begin_case(case_id: str) -> None:
    """Connections are numbered per case, so that a case's draws do not
    depend on the cases before it (a --case subset replays them)."""
    global _CASE, _CONNECTIONS
    _CASE, _CONNECTIONS = case_id, 0


def _next_key() -> str:
    global _CONNECTIONS
    _CONNECTIONS += 1
    return f"{_CASE}/{_CONNECTIONS}"


def slack() -> float:
    """Seconds a case that times the target should allow for the relay: the
    worst change of the time between two writes of one direction (0 on a
    clean run). Cases timing gaps (heart-beats) widen their bounds by it on
    both sides: the node's own gaps are what the rules speak of."""
    return _ACTIVE.profile.jitter() if _ACTIVE is not None else 0.0


def round_trip() -> float:
    """Seconds the relay adds to a request and its answer (0 on a clean run)."""
    return 2 * _ACTIVE.profile.one_way() if _ACTIVE is not None else 0.0


# --- refusals -------------------------------------------------------------------------------

DEADLINE_SHARE = 0.5
"""Of a required answer time, the share the relay may take (request and
answer together): the rest is the node's, as the ``late-answers`` variants
take half the read deadline."""
RIPP_BUILTIN_HEARTBEAT = 0.5
"""The reference RIPP consumer's heartbeat interval (the interval a RIPP
target states is known only once connected): profile P8's liveness, and
the window of "closes at once" (two intervals), count in it."""
BTP_DEFAULT_AUTH_TIMEOUT = 30.0
LARGEST_TIMED_MESSAGE = {
    "ssb": 16 * 1024,
    "btp": 4 * 1024,
    "stomp": 24 * 1024,
    "ripp": 4 * 1024,
    "ripplehost": 4 * 1024,
}
"""Bytes of the largest message a case sends or waits for within one read
deadline (measured in the reference runs' traces, rounded up: SSB 6 KiB
boxes of a long post, STOMP a 17 KiB SEND, BTP, RIPP and Ripple host
messages under 1 KiB): what a throttle must carry in its share of it."""


def limits(
    protocol: str, deadline: float, params: dict[str, Any] | None = None
) -> list[tuple[float, str]]:
    """The answer times of ``protocol`` the relay must stay within: (seconds
    a request and its answer may take in all, what requires it)."""
    params = params or {}
    out = [
        (deadline, f"the read deadline ({deadline:g} s, --deadline): every answer a case awaits")
    ]
    if protocol == "ripp":
        out.append(
            (
                2 * RIPP_BUILTIN_HEARTBEAT,
                f"RIPP profile P1/P8: a consumer refusing an envelope closes at once, within two heartbeat "
                f"intervals of the built-in {RIPP_BUILTIN_HEARTBEAT:g} s (three intervals without Heartbeat "
                "is liveness)",
            )
        )
    if protocol == "btp":
        timeout = float(params.get("auth_timeout", BTP_DEFAULT_AUTH_TIMEOUT))
        out.append(
            (
                timeout,
                f"BTP authentication: the server drops a client that has not authenticated within "
                f"its auth_timeout ({timeout:g} s, params.auth_timeout)",
            )
        )
    return out


def refusal(
    profile: Profile, protocol: str, deadline: float, params: dict[str, Any] | None = None
) -> str | None:
    """Why ``profile`` cannot be used to certify a ``protocol`` target, or
    None. A round trip through the relay may take at most
    :data:`DEADLINE_SHARE` of every answer time of :func:`limits`."""
    size = LARGEST_TIMED_MESSAGE.get(protocol, 4096)
    trip = profile.one_way(256) + profile.one_way(size)
    for seconds, why in limits(protocol, deadline, params):
        allowed = DEADLINE_SHARE * seconds
        if trip > allowed:
            what = (
                f"a request and its answer ({size} bytes) take up to {trip:.3g} s through it"
                if profile.name == "throttle"
                else f"it adds up to {trip:.3g} s to a request and its answer"
            )
            return (
                f"impairment {profile.text()} refused for {protocol}: {what}, more than "
                f"{DEADLINE_SHARE:.0%} of {why} ({allowed:g} s)"
            )
    return None


# --- the relay ------------------------------------------------------------------------------


class _Direction:
    """One direction of a link: what the relay reads from ``reader`` goes,
    shaped, to ``writer``. A close after the bytes before it; a reset as an
    abort, also after them (the clean path would have delivered them)."""

    def __init__(self, shape: Shape, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.reset = False
        transport = writer.transport
        self.shaper = WriteShaper(
            shape, transport.write, self._write_eof, self._close, transport.is_closing
        )

    def _write_eof(self) -> None:
        if self.writer.can_write_eof() and not self.writer.is_closing():
            try:
                self.writer.write_eof()
            except OSError:
                pass

    def _close(self) -> None:
        if self.reset:
            self.writer.transport.abort()
        else:
            self.writer.close()

    async def pump(self, reader: asyncio.StreamReader) -> None:
        try:
            while data := await reader.read(READ_CHUNK):
                self.shaper.put(data)
                if self.shaper.queued > HIGH_WATER:
                    await self.shaper.flushed()
            self.shaper.put(_EOF)
        except (ConnectionError, OSError):
            self.reset = True
            self.shaper.put(_CLOSE)


class _Link:
    """One connection through the relay: harness side and target side, a
    shaped direction each way."""

    def __init__(
        self,
        impairment: Impairment,
        key: str,
        harness: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        target: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self.key = key
        self.harness, self.target = harness, target
        self.to_target = _Direction(impairment.shape(f"{key}/harness->target"), target[1])
        self.to_harness = _Direction(impairment.shape(f"{key}/target->harness"), harness[1])
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        try:
            await asyncio.gather(
                self.to_target.pump(self.harness[0]), self.to_harness.pump(self.target[0])
            )
            # Both sides sent their EOF (or reset): once the bytes queued are
            # out, close what is left.
            for direction in (self.to_target, self.to_harness):
                await direction.shaper.flushed()
                direction.shaper.put(_CLOSE)
            await asyncio.gather(
                self.to_target.shaper.closed.wait(), self.to_harness.shaper.closed.wait()
            )
        finally:
            self.abort()

    def abort(self) -> None:
        for direction in (self.to_target, self.to_harness):
            direction.shaper.abort()
        for _, writer in (self.harness, self.target):
            if not writer.is_closing():
                writer.close()


_LINKS: set[_Link] = set()


def _track(link: _Link) -> None:
    _LINKS.add(link)
    link.task.add_done_callback(lambda _: _LINKS.discard(link))


async def _loopback_pair() -> tuple[
    socket.socket, tuple[asyncio.StreamReader, asyncio.StreamWriter]
]:
    """A connected TCP socket on loopback (the harness's end, not yet
    wrapped) and the relay's end of it as streams."""
    loop = asyncio.get_running_loop()
    accepted: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = (
        loop.create_future()
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    sock.bind(("127.0.0.1", 0))
    mine = sock.getsockname()

    def on_accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if writer.get_extra_info("peername") == mine and not accepted.done():
            accepted.set_result((reader, writer))
        else:
            writer.transport.abort()

    server = await asyncio.start_server(on_accept, "127.0.0.1", 0)
    try:
        await loop.sock_connect(sock, server.sockets[0].getsockname())
        pair = await accepted
    except BaseException:
        sock.close()
        raise
    finally:
        server.close()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock, pair


async def connect_socket(host: str, port: int) -> socket.socket | None:
    """With an impairment active: connect to the target at ``host:port``
    (an OSError as on a clean run when it refuses), and return the
    harness's end of a loopback connection to the relay, which shapes both
    directions; None without one."""
    impairment = _ACTIVE
    if impairment is None:
        return None
    target = await asyncio.open_connection(host, port)
    try:
        sock, harness = await _loopback_pair()
    except BaseException:
        target[1].transport.abort()
        raise
    _track(_Link(impairment, _next_key(), harness, target))
    return sock


async def open_connection(
    host: str,
    port: int,
    *,
    ssl: ssl_module.SSLContext | None = None,
    server_hostname: str | None = None,
    ssl_handshake_timeout: float | None = None,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """``asyncio.open_connection`` to a target, through the relay when an
    impairment is active (TLS, if any, runs over it, end to end)."""
    sock = await connect_socket(host, port)
    if sock is None:
        return await asyncio.open_connection(
            host,
            port,
            ssl=ssl,
            server_hostname=server_hostname,
            ssl_handshake_timeout=ssl_handshake_timeout,
        )
    try:
        return await asyncio.open_connection(
            sock=sock,
            ssl=ssl,
            server_hostname=server_hostname,
            ssl_handshake_timeout=ssl_handshake_timeout,
        )
    except BaseException:
        sock.close()
        raise


class ImpairRelay:
    """A listener on loopback in front of a harness listener at
    ``host:port``, for the client role: the target is given this relay's
    address; each connection it makes is relayed, shaped, to the harness's
    listener."""

    def __init__(self, impairment: Impairment, host: str, port: int) -> None:
        self.impairment = impairment
        self.upstream = (host, port)
        self.host = host
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._links: set[_Link] = set()

    async def start(self) -> ImpairRelay:
        self._server = await asyncio.start_server(self._on_target, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _on_target(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        key = _next_key()
        try:
            harness = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            return
        link = _Link(self.impairment, key, harness, (reader, writer))
        self._links.add(link)
        _track(link)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            link.abort()
            link.task.cancel()
        await asyncio.gather(*(link.task for link in self._links), return_exceptions=True)
        self._links.clear()

    async def __aenter__(self) -> ImpairRelay:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def front(host: str, port: int) -> ImpairRelay | None:
    """With an impairment active, a started :class:`ImpairRelay` in front of
    the harness's listener at ``host:port`` (give the target its address);
    None without one. The caller stops it."""
    if _ACTIVE is None:
        return None
    return await ImpairRelay(_ACTIVE, host, port).start()


def through() -> str:
    """`` through the impairment relay (fragment seed=1)`` for trace events,
    or ``""`` on a clean run."""
    return f" through the impairment relay ({_ACTIVE.describe()})" if _ACTIVE is not None else ""

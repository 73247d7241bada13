"""The system under learning: abstract words in, abstract words out, over
real connections to a running target.

One query is one new connection (the reset): every input is sent as the
protocol's :class:`~conformance.learn.alphabet.ConnectionMapper` makes it,
then the mapper reads for the alphabet's read window (a deadline on every
read: the window, or less once the target hangs up). Once the target has
closed, later inputs are not sent and their output is ``closed``.

Queries are cached by word, with every prefix: AALpy asks the same
prefixes many times. A word whose run disagrees with what the cache holds
for one of its prefixes is run again ``repeats`` times: when every repeat
agrees with the cache the disagreement is recorded (timing on a loaded
machine) and learning goes on; otherwise the target answers that word in
more than one way, and :class:`NondeterministicTarget` stops the learning,
naming the word and every answer seen. The mapper never picks one.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aalpy.base import SUL

from ..core.redact import Redactor
from ..core.target_runtime import TargetRuntime
from ..core.transport import WireTrace
from .alphabet import CLOSE, CLOSED, SEPARATOR, SILENCE, ProtocolAlphabet
from .defaults import DEFAULT_REPEATS

CONNECT_DEADLINE = 5.0
"""Seconds to connect (and finish a TLS handshake): a launched node on
loopback accepts in milliseconds; five seconds covers a loaded machine."""


class NondeterministicTarget(RuntimeError):
    """The target answered one input word in more than one way."""

    def __init__(self, word: tuple[str, ...], answers: list[tuple[str, ...]]) -> None:
        self.word = word
        self.answers = answers
        distinct = sorted(set(answers))
        super().__init__(
            f"the target answers {' · '.join(word)} in {len(distinct)} ways over "
            f"{len(answers)} runs: " + " | ".join(" · ".join(answer) for answer in distinct)
        )


class TargetUnreachable(RuntimeError):
    """A new connection to the target failed (it crashed, or stopped
    accepting) in the middle of learning: a finding, not a model."""


@dataclass
class Disagreement:
    """A run that disagreed with the cache, then every repeat agreed."""

    word: tuple[str, ...]
    cached: tuple[str, ...]
    seen: tuple[str, ...]
    repeats: int

    def to_json(self) -> dict[str, Any]:
        return {
            "word": list(self.word),
            "cached": list(self.cached),
            "seen": list(self.seen),
            "repeats_agreeing_with_cache": self.repeats,
        }


@dataclass
class StepRecord:
    """One input of a concrete run: what was sent, what came back, the word."""

    input: str
    sent: bytes
    received: bytes
    output: str
    unprompted: int

    def to_json(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "sent_hex": self.sent.hex(),
            "received_hex": self.received.hex(),
            "output": self.output,
            "unprompted_dropped": self.unprompted,
        }


@dataclass
class MapperStats:
    membership_queries: int = 0
    """Queries asked of the mapper (cached or not)."""
    concrete_queries: int = 0
    """Connections opened."""
    concrete_steps: int = 0
    cache_hits: int = 0
    unprompted_dropped: int = 0
    disagreements: list[Disagreement] = field(default_factory=list)


class Mapper(SUL):
    """AALpy's SUL over one running target (see the module docstring).
    Only :meth:`query` is used: the learner and the oracle ask whole words."""

    def __init__(
        self,
        runtime: TargetRuntime,
        alphabet: ProtocolAlphabet,
        *,
        read_window: float | None = None,
        repeats: int = DEFAULT_REPEATS,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__()
        self.runtime = runtime
        self.alphabet = alphabet
        self.read_window = read_window if read_window is not None else alphabet.read_window
        self.repeats = repeats
        self.loop = loop or asyncio.new_event_loop()
        self._own_loop = loop is None
        self.cache: dict[tuple[str, ...], tuple[str, ...]] = {(): ()}
        self.stats = MapperStats()
        self._tls = alphabet.tls_context(runtime)
        self._redactor: Redactor | None = None
        """The target's secrets, read at the first run (a launched node may
        write its key files as it starts)."""

    def close(self) -> None:
        if self._own_loop:
            self.loop.close()

    # -- AALpy's interface: whole words only
    def pre(self) -> None:  # pragma: no cover - query() does not call it
        raise NotImplementedError("the mapper answers whole words: use query()")

    def post(self) -> None:  # pragma: no cover
        raise NotImplementedError("the mapper answers whole words: use query()")

    def step(self, letter: Any) -> Any:  # pragma: no cover
        raise NotImplementedError("the mapper answers whole words: use query()")

    def query(self, word: tuple) -> list:
        word = tuple(word)
        self.num_queries += 1
        self.num_steps += len(word)
        self.stats.membership_queries += 1
        cached = self.cache.get(word)
        if cached is not None:
            self.stats.cache_hits += 1
            self.num_cached_queries += 1
            return list(cached)
        closed_prefix = self._closed_prefix(word)
        if closed_prefix is not None:
            # A connection the target closed takes nothing more: no run needed.
            outputs = self.cache[closed_prefix] + (CLOSED,) * (len(word) - len(closed_prefix))
            self._store(word, outputs)
            self.stats.cache_hits += 1
            return list(outputs)
        outputs = self.outputs(self.run(word))
        conflict = self._conflict(word, outputs)
        if conflict is not None:
            outputs = self._resolve(word, outputs, conflict)
        self._store(word, outputs)
        return list(outputs)

    # -- the cache
    def _closed_prefix(self, word: tuple[str, ...]) -> tuple[str, ...] | None:
        for end in range(1, len(word)):
            prefix = word[:end]
            outputs = self.cache.get(prefix)
            if outputs is None:
                return None
            if outputs[-1] == CLOSED or outputs[-1].split(SEPARATOR)[-1] == CLOSE:
                return prefix
        return None

    def _conflict(self, word: tuple[str, ...], outputs: tuple[str, ...]) -> tuple[str, ...] | None:
        """The longest cached prefix of ``word`` whose outputs differ from ``outputs``."""
        for end in range(len(word), 0, -1):
            cached = self.cache.get(word[:end])
            if cached is not None:
                return word[:end] if cached != outputs[:end] else None
        return None

    def _resolve(
        self, word: tuple[str, ...], first: tuple[str, ...], prefix: tuple[str, ...]
    ) -> tuple[str, ...]:
        cached = self.cache[prefix]
        answers = [first]
        for _ in range(self.repeats):
            answers.append(self.outputs(self.run(word)))
        repeats = answers[1:]
        if all(answer[: len(prefix)] == cached for answer in repeats) and len(set(repeats)) == 1:
            self.stats.disagreements.append(
                Disagreement(word, cached, first[: len(prefix)], len(repeats))
            )
            return repeats[0]
        # The cache's answer (to the prefix) is one of the answers seen.
        raise NondeterministicTarget(word, [cached, *answers])

    def _store(self, word: tuple[str, ...], outputs: tuple[str, ...]) -> None:
        for end in range(1, len(word) + 1):
            self.cache.setdefault(word[:end], outputs[:end])

    # -- concrete runs
    @staticmethod
    def outputs(records: list[StepRecord]) -> tuple[str, ...]:
        return tuple(record.output for record in records)

    def run(self, word: tuple[str, ...]) -> list[StepRecord]:
        """One concrete run of ``word`` on a new connection (no cache)."""
        self.stats.concrete_queries += 1
        self.stats.concrete_steps += len(word)
        records = self.loop.run_until_complete(self._run(word))
        self.stats.unprompted_dropped += sum(record.unprompted for record in records)
        # The bytes go into replay files: the target's credentials (a BTP
        # auth token in the auth Message) are masked, as in traces; a
        # replay runs the word again, not these bytes.
        if self._redactor is None:
            self._redactor = Redactor(self.runtime.secret_values())
        for record in records:
            record.sent = self._redactor.masked(record.sent)
            record.received = self._redactor.masked(record.received)
        return records

    async def _run(self, word: tuple[str, ...]) -> list[StepRecord]:
        trace = WireTrace()
        try:
            conn = await self.alphabet.open(self.runtime, trace, CONNECT_DEADLINE, self._tls)
        except (ConnectionError, AssertionError) as exc:  # DeadlineExceeded is an AssertionError
            raise TargetUnreachable(
                f"could not open a connection for {' · '.join(word) or 'the empty word'}: {exc}"
            ) from None
        mapper = self.alphabet.new_connection(self.runtime)
        records: list[StepRecord] = []
        closed = False
        try:
            for name in word:
                if closed:
                    records.append(StepRecord(name, b"", b"", CLOSED, 0))
                    continue
                data = mapper.concrete(name)
                await conn.send_quietly(data, name)
                closed, received = await conn.await_close(self.read_window)
                got = mapper.received(received)
                owed = mapper.owed()
                if owed and not closed:
                    await conn.send_quietly(owed, "owed")
                words = got.words + ([CLOSE] if closed else [])
                records.append(
                    StepRecord(
                        name,
                        data,
                        self.alphabet.received_bytes(received),
                        SEPARATOR.join(words) or SILENCE,
                        got.unprompted,
                    )
                )
        finally:
            conn.abort()
        return records

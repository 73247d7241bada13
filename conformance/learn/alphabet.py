"""What a protocol gives the learner: its abstract alphabet and the
concrete side of one connection.

An :class:`AbstractInput` is a name the learner sends (``host-id``,
``SEND-no-destination``) with the suite cases whose rule it exercises: a
difference from the reference that first shows on that input is named by
those cases, and an input with no case is a coverage gap when it separates.

A :class:`ConnectionMapper` lives for one connection (one query): it turns
each input into bytes from the reference codec, with the concrete state
the protocol needs (message numbers, receipts), and the bytes the target
sends into output words. Words are short names of what came back
(``RPY(pong)``, ``ERROR``); the mapper (mapper.py) joins the words of one
read window with ``+``, adds ``close`` when the target hung up, and says
``silence`` when nothing came. Traffic the protocol's conformant variants
allow the target to send unprompted (pings of its own, heart-beats) is not
a word: :meth:`ConnectionMapper.received` drops it and counts it.
"""

from __future__ import annotations

import importlib
import ssl
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core.target_runtime import TargetRuntime
from ..core.transport import TcpConnection, WireTrace

SILENCE = "silence"
"""Nothing came back within the read window."""
CLOSE = "close"
"""The target closed (or reset) the connection."""
CLOSED = "closed"
"""The connection was already closed before this input: nothing was sent."""
SEPARATOR = "+"


@dataclass(frozen=True)
class AbstractInput:
    name: str
    description: str
    cases: tuple[str, ...] = ()
    """The suite cases whose rule this input exercises."""
    needs: str | None = None
    """A capability the target must declare for this input to be sent
    (e.g. Ripple host ``hold``): without it the input is left out."""
    unless: str | None = None
    """A target param that, set to true, makes the input's rule not apply
    to the target, as it makes its cases not applicable (e.g. BTP
    ``accepts_any_token``): the input is then left out."""


@dataclass
class Received:
    """What one read window's bytes made: the words, and how many units
    of unprompted traffic were dropped."""

    words: list[str] = field(default_factory=list)
    unprompted: int = 0


class LearnConnection(Protocol):
    """What the mapper needs of one connection to the target: a TCP
    connection (core/transport.py) by default; a protocol carried in
    WebSocket messages gives its own (BTP)."""

    async def send_quietly(self, data: bytes, note: str = "") -> bool: ...

    async def await_close(self, deadline: float | None = None) -> tuple[bool, Any]:
        """Read for ``deadline`` seconds or until the target closes:
        ``(closed, what came)``, bounded."""
        ...

    def abort(self) -> None: ...


class ConnectionMapper(ABC):
    """One connection's concrete state (see the module docstring)."""

    @abstractmethod
    def concrete(self, name: str) -> bytes:
        """The bytes of the abstract input ``name`` now."""

    @abstractmethod
    def received(self, data: bytes) -> Received:
        """Feed the bytes of one read window (possibly none); the words of
        the complete units they hold, unprompted traffic dropped. Bytes that
        cannot be decoded give one word naming why, and nothing more is
        decoded on this connection."""

    def owed(self) -> bytes:
        """Bytes the harness sends back at once after a read window (e.g.
        heart-beats it agreed to): none by default."""
        return b""


class ProtocolAlphabet(ABC):
    """A protocol's alphabet for one role of the target."""

    protocol: str
    role: str
    inputs: tuple[AbstractInput, ...]
    read_window: float
    """Seconds the mapper reads after each input (the module of each
    protocol says why its figure is enough)."""
    writes_per_answer: int = 1
    """How many writes of the target one answer may take within the read
    window (BTP: the Error and the WebSocket close frame that follows it).
    A node that makes each write late (variant ``late-answers``) is
    learnt with each write as late as half the window shared out among
    them: :meth:`late_window`."""

    def late_window(self, read_window: float | None = None) -> float:
        """The window ``late-answers`` is made late within (mutation's
        ``late_seconds`` takes half of it): the read window over the writes
        of one answer."""
        return (read_window or self.read_window) / self.writes_per_answer

    word_cases: dict[str, tuple[str, ...]] = {}
    """Output words (or parts of words) -> the cases whose rule they break."""

    def tls_context(self, runtime: TargetRuntime) -> ssl.SSLContext | None:
        return None

    async def open(
        self,
        runtime: TargetRuntime,
        trace: WireTrace,
        deadline: float,
        tls: ssl.SSLContext | None,
    ) -> LearnConnection:
        """A new connection to the target (the reset): TCP to its host and
        port, with ``tls`` when the protocol has it. Raises ConnectionError
        or DeadlineExceeded when none can be opened."""
        return await TcpConnection.open(
            runtime.host, runtime.port, trace, deadline=deadline, label="learn", ssl=tls
        )

    def received_bytes(self, received: Any) -> bytes:
        """What :meth:`LearnConnection.await_close` returned, as the bytes a
        replay file shows (TCP: those bytes)."""
        return received

    @abstractmethod
    def new_connection(self, runtime: TargetRuntime) -> ConnectionMapper:
        """A mapper for one new connection to ``runtime``'s target."""

    def inputs_for(self, runtime: TargetRuntime | None) -> tuple[AbstractInput, ...]:
        """The inputs this target can take: those needing a capability it
        does not declare, or made not applicable by a param it sets, are
        left out (all of them kept without a runtime)."""
        if runtime is None:
            return self.inputs
        capabilities = set(runtime.target.capabilities)
        return tuple(
            item
            for item in self.inputs
            if (item.needs is None or item.needs in capabilities)
            and (item.unless is None or runtime.params.get(item.unless) is not True)
        )

    def cases_for(self, name: str, *outputs: str) -> tuple[str, ...]:
        """The cases a difference on input ``name`` touches: first those of
        the rule-breaking words in ``outputs`` (the rule the target broke
        shows in its answer), then the input's own."""
        cases: list[str] = []
        for output in outputs:
            for part, named in self.word_cases.items():
                if part in output:
                    cases += [case for case in named if case not in cases]
        cases += [case for case in self.input(name).cases if case not in cases]
        return tuple(cases)

    def input(self, name: str) -> AbstractInput:
        for item in self.inputs:
            if item.name == name:
                return item
        raise KeyError(name)


ALPHABET_MODULE = "conformance.suites.{protocol}.learn_alphabet"
"""Where a protocol's alphabets live: beside its suite."""


def alphabet_for(protocol: str, role: str) -> ProtocolAlphabet:
    """The alphabet of ``protocol``'s ``role`` (``ALPHABETS[role]`` of its
    module); KeyError naming what exists when there is none."""
    try:
        module = importlib.import_module(ALPHABET_MODULE.format(protocol=protocol))
    except ModuleNotFoundError:
        raise KeyError(f"no learning alphabet for protocol {protocol!r} yet") from None
    alphabets = module.ALPHABETS
    if role not in alphabets:
        raise KeyError(
            f"no learning alphabet for the {role} role of {protocol!r} (roles: "
            f"{', '.join(sorted(alphabets))})"
        )
    return alphabets[role]


def learnable() -> dict[str, tuple[str, ...]]:
    """Protocol -> the roles that have an alphabet."""
    found = {}
    for protocol in ("ripplehost", "stomp", "ripp", "btp", "ssb"):
        try:
            module = importlib.import_module(ALPHABET_MODULE.format(protocol=protocol))
        except ModuleNotFoundError:
            continue
        found[protocol] = tuple(sorted(module.ALPHABETS))
    return found

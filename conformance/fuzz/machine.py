"""What every fuzzing state machine shares: actions, failures, the live
connection, and the bookkeeping the engine (engine.py) and a replay read.

A rule of a machine draws values and turns them into an *action*: a JSON
object such as ``{"do": "send", "messages": [...], "writes": [...]}``.
:meth:`FuzzMachine.perform` logs the action and executes it against the
live target, judging what comes back. A replay (``conformance replay``)
performs the logged actions of a saved failure in order, with no Hypothesis
in between, so the same file checks the next version of a node.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hypothesis.stateful import RuleBasedStateMachine

from ..core.target_runtime import TargetRuntime
from ..core.redact import Redactor
from ..core.transport import WireTrace

PLACEHOLDER = re.compile(rb"(?P<line>[a-z-]+:)?@@(?P<name>[A-Z]+)@@(?P<eol>\r?\n)?")
"""Where a message's bytes hold a value of the target's or of the example:
``@@R@@`` a nonce unique to the example (receipt values: what a target
stored in an earlier example never answers for this one), ``@@HOST@@``,
``@@DEST@@``, ``@@LOGIN@@``, ``@@PASSCODE@@`` the target's settings (a
secret never lands in a replay file). ``line`` and ``eol`` let a value the
target does not have drop its whole header line."""


class FuzzFailure(AssertionError):
    """The target broke the rule of ``case_id``: what the reference (fed the
    same inputs) says may come back, and what came."""

    def __init__(self, case_id: str, message: str, expected: str = "", observed: str = "") -> None:
        super().__init__(f"{case_id}: {message}")
        self.case_id = case_id
        self.message = message
        self.expected = expected
        self.observed = observed


@dataclass
class Message:
    """One logical message of a ``send`` action: its bytes, the case whose
    rule it exercises (None: mutated bytes, judged by what the reference made
    of them) and a label for traces."""

    data: bytes
    case: str | None
    label: str

    def to_json(self) -> dict[str, Any]:
        return {"hex": self.data.hex(), "case": self.case, "label": self.label}

    @classmethod
    def from_json(cls, item: dict[str, Any]) -> Message:
        return cls(bytes.fromhex(item["hex"]), item.get("case"), item.get("label", ""))


def send_action(messages: list[Message], cuts: list[int]) -> dict[str, Any]:
    """The action that sends ``messages`` joined into one byte string and
    cut into writes at ``cuts`` (modulo its length): message boundaries split
    or joined. ``writes`` holds the lengths of the writes."""
    total = sum(len(m.data) for m in messages)
    points = sorted({cut % (total + 1) for cut in cuts} | {0, total})
    writes = [b - a for a, b in zip(points, points[1:])] or [0]
    return {"do": "send", "messages": [m.to_json() for m in messages], "writes": writes}


@dataclass
class Observation:
    """What the example saw, for the failure's record."""

    expected: list[str] = field(default_factory=list)
    observed: list[str] = field(default_factory=list)


class FuzzSession:
    """The engine's side of the machines of one run: the live target, the
    read deadline, the failures met, the counts. A machine class is bound
    to one session (:func:`bind`)."""

    def __init__(self, runtime: TargetRuntime, deadline: float) -> None:
        self.runtime = runtime
        self.deadline = deadline
        self.examples = 0
        """Machines started (examples, shrinking runs included)."""
        self.started = time.monotonic()
        self.first_failure_at: float | None = None
        self.examples_before_failure: int | None = None
        self.last_failure: FailedExample | None = None
        self.health: list[str] = []
        """Notes of restarts: a target that exited (with its log tail) or
        stopped answering, restarted between examples."""
        self.redactor = Redactor(runtime.secret_values())
        """The target's secrets, masked in the traces."""
        self.cache: dict[str, Any] = {}
        """What machines compute once per run (TLS contexts, the target's settings)."""
        self.unresponsive = False
        """Set by a machine that could not reach the target: the engine
        restarts it before the next example."""

    def begin_example(self) -> None:
        """Between examples: a launched target that exited, or stopped
        answering, is started again and the exit recorded."""
        self.examples += 1
        runtime = self.runtime
        note = runtime.ensure_server()
        if note:
            self.health.append(note)
        elif self.unresponsive and (runtime.server is not None or runtime.container is not None):
            tail = runtime.server.tail(5) if runtime.server is not None else ""
            runtime.restart_server(kill=True)
            self.health.append(
                f"target stopped answering and was restarted; its last output:\n{tail}"
            )
        self.unresponsive = False

    def record_failure(self, machine: FuzzMachine, failure: FuzzFailure) -> None:
        if self.first_failure_at is None:
            self.first_failure_at = time.monotonic() - self.started
            self.examples_before_failure = self.examples
        self.last_failure = FailedExample(
            failure=failure,
            actions=[dict(action) for action in machine.actions],
            trace=machine.trace.render(),
        )


@dataclass
class FailedExample:
    failure: FuzzFailure
    actions: list[dict[str, Any]]
    trace: str


class FuzzMachine(RuleBasedStateMachine):
    """Base of the per protocol and role machines. Subclasses implement
    :meth:`execute` (one action, judged) and :meth:`finish` (the checks at
    the end of an example: answers still due, a close still due)."""

    protocol: ClassVar[str] = ""
    role: ClassVar[str] = ""
    case_ids: ClassVar[tuple[str, ...]] = ()
    """Every case id the machine can blame (tests hold them to the suite)."""
    session: ClassVar[FuzzSession]

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.actions: list[dict[str, Any]] = []
        self.trace = WireTrace(redactor=self.session.redactor)
        self.failed = False
        self.nonce = secrets.token_hex(4)
        self.nonces_used = 0
        self.session.begin_example()

    @property
    def deadline(self) -> float:
        return self.session.deadline

    @property
    def runtime(self) -> TargetRuntime:
        return self.session.runtime

    def placeholder_values(self) -> dict[str, bytes | None]:
        """The target's values of the placeholders its strategies put into
        messages (None: leave the header line out); the nonce is added."""
        return {}

    def expand(self, action: dict[str, Any]) -> tuple[list[bytes], list[bytes]]:
        """A send action's messages and writes as they go on the wire: each
        placeholder replaced (a receipt nonce unique to the example, the
        target's host, destination, login, passcode), the cut points moved
        with the bytes around them."""
        values = self.placeholder_values()
        messages: list[bytes] = []
        shifts: list[tuple[int, int, int]] = []  # (template position, template end, new end)
        offset = 0
        new_offset = 0
        for item in action["messages"]:
            template = bytes.fromhex(item["hex"])
            out = bytearray()
            last = 0
            for match in PLACEHOLDER.finditer(template):
                out += template[last : match.start()]
                name = match.group("name").decode()
                if name == "R":
                    self.nonces_used += 1
                    value: bytes | None = f"{self.nonce}-{self.nonces_used}".encode()
                else:
                    value = values.get(name)
                line, eol = match.group("line") or b"", match.group("eol") or b""
                replacement = b"" if value is None and line else line + (value or b"") + eol
                out += replacement
                last = match.end()
                shifts.append((offset + match.start(), offset + match.end(), new_offset + len(out)))
            out += template[last:]
            messages.append(bytes(out))
            offset += len(template)
            new_offset += len(out)

        def moved(point: int) -> int:
            new = point
            for start, end, new_end in shifts:
                if point >= end:
                    new = point + (new_end - end)
                elif point > start:
                    return new_end
            return new

        cuts, position = [], 0
        for size in action["writes"]:
            position += size
            cuts.append(moved(position))
        wire = b"".join(messages)
        writes, previous = [], 0
        for cut in cuts:
            if cut > previous:
                writes.append(wire[previous:cut])
                previous = cut
        if previous < len(wire):
            writes.append(wire[previous:])
        return messages, writes

    def perform(self, action: dict[str, Any]) -> None:
        """Log ``action``, run it against the target and judge the answers;
        a broken rule raises :class:`FuzzFailure` (and is recorded)."""
        self.actions.append(action)
        self.trace.event(f"action {len(self.actions)}: {describe(action)}")
        try:
            self.loop.run_until_complete(self.execute(action))
        except FuzzFailure as failure:
            self.failed = True
            self.session.record_failure(self, failure)
            raise

    def teardown(self) -> None:
        try:
            if not self.failed:
                try:
                    self.loop.run_until_complete(self.finish())
                except FuzzFailure as failure:
                    self.failed = True
                    self.session.record_failure(self, failure)
                    raise
        finally:
            self.loop.run_until_complete(self.close())
            self.loop.close()

    async def execute(self, action: dict[str, Any]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    async def finish(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    async def close(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


def describe(action: dict[str, Any]) -> str:
    """An action in one line, for traces and progress."""
    if action.get("do") == "send":
        labels = ", ".join(item.get("label") or "bytes" for item in action["messages"])
        return f"send [{labels}] in {len(action['writes'])} write(s) {action['writes']}"
    return " ".join(f"{k}={v}" for k, v in action.items())


def bind(machine: type[FuzzMachine], session: FuzzSession) -> type[FuzzMachine]:
    """A subclass of ``machine`` whose examples run against ``session``."""
    return type(machine.__name__, (machine,), {"session": session})

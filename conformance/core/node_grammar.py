"""The frame grammar of what a node sends, judged once, by a case of its own.

A suite's decoder of node output raises :class:`NodeGrammarViolation` when
the node's bytes break the protocol's frame grammar (not a bound the
harness sets: that stays a plain ProtocolViolation). Raising it records the
violation for the run (:func:`violation`, through the sink the plugin sets
per case), so whichever case read the bytes:

- a case other than the grammar case that ends with the violation (raised,
  or in the context of the AssertionError it ends with) is ``blocked`` by
  the grammar case, with the rule and the bytes: it fails only for its own
  rule;
- the grammar case of that protocol and role (``grammar=True`` in its
  requirement) runs after every other case of its protocol and role, in the
  same worker under ``certify --case-jobs N``, and judges its own exchange
  and every violation recorded in the run folder by any case of the session
  (:class:`GrammarJudge`): it fails listing them, with their bytes.

The records are lines of a file of the run folder
(``RunFolder.grammar_violations``), appended with O_APPEND like
results.jsonl, so they reach the grammar case from other processes too.
docs/prerequisites.md ("The grammar of what a node sends") describes it.
"""

from __future__ import annotations

import asyncio
import json
import os
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, NoReturn, Sequence

from .requirements import blocked
from .transport import ProtocolViolation, short_hex

SHOWN_IN_LIST = 5
"""Violations the grammar case lists in its failure message (all are in the
run folder's file)."""


@dataclass(frozen=True)
class GrammarRecord:
    """One violation as the run folder keeps it."""

    grammar_case: str
    """The case whose rule it breaks (``<protocol>.<component>.<role>.sends-well-formed-...``)."""
    case_id: str
    """The case whose traffic held the bytes."""
    rule: str
    """The grammar rule broken, in the decoder's words."""
    direction: str
    """Who sent the bytes to whom: ``server to harness``, ``client to harness``."""
    offset: int | None
    """Where the offending frame starts in the bytes the node sent on that
    connection (None when the decoder cannot tell)."""
    data_hex: str
    """The bytes of the offending frame as far as they were read (bounded)."""
    connection: str = ""
    run_id: str = ""
    """The run that recorded it (a run folder reused by a later run keeps
    the earlier records: the grammar case reads its own run's)."""

    def text(self) -> str:
        """One line: the rule, who sent the bytes where, and the bytes
        (``; bytes: <hex>`` as every ProtocolViolation shows them)."""
        where = f" on {self.connection}" if self.connection else ""
        at = f", frame at offset {self.offset}" if self.offset is not None else ""
        return (
            f"{self.rule} ({self.direction}{where}, in {self.case_id}{at}); bytes: "
            f"{self.data_hex or '(none)'}"
        )


class NodeGrammarViolation(ProtocolViolation):
    """Bytes a node sent that break the protocol's frame grammar. A
    ProtocolViolation (so an AssertionError): code that does not know of it
    still fails with the bytes."""

    def __init__(self, record: GrammarRecord, data: bytes) -> None:
        self.record = record
        super().__init__(
            f"{record.rule} ({record.direction}"
            + (f", frame at offset {record.offset}" if record.offset is not None else "")
            + ")",
            data,
        )

    @property
    def grammar_case(self) -> str:
        return self.record.grammar_case


Sink = Callable[[GrammarRecord], None]
_CASE: str = ""
_SINK: Sink | None = None


def begin_case(case_id: str, sink: Sink | None) -> None:
    """The plugin, before each case: where :func:`violation` records what it
    is given, and the case it is recorded for. One case runs at a time in a
    process (a pytest session, or one xdist worker)."""
    global _CASE, _SINK
    _CASE, _SINK = case_id, sink


_ALSO_CLASSES: dict[type, type] = {}


def violation(
    grammar_case: str,
    rule: str,
    data: bytes,
    *,
    direction: str,
    offset: int | None = None,
    connection: str = "",
    error: BaseException | None = None,
) -> NodeGrammarViolation:
    """The exception for a decoder to raise, recorded for the run as it is
    made: the bytes were read, whatever the case then does with the error.
    With ``error`` (the decoder's own exception) it is an instance of that
    exception's class too, with its attributes: code that catches the
    decoder's error type goes on catching it."""
    record = GrammarRecord(
        grammar_case,
        _CASE or "(no case)",
        rule,
        direction,
        offset,
        short_hex(bytes(data)),
        connection,
    )
    if _SINK is not None:
        _SINK(record)
    if error is None:
        return NodeGrammarViolation(record, data)
    cls = _ALSO_CLASSES.get(type(error))
    if cls is None:
        cls = type(
            f"{type(error).__name__}GrammarViolation", (NodeGrammarViolation, type(error)), {}
        )
        _ALSO_CLASSES[type(error)] = cls
    made = cls.__new__(cls)
    made.__dict__.update(getattr(error, "__dict__", {}))
    NodeGrammarViolation.__init__(made, record, data)
    return made


def again(made: NodeGrammarViolation) -> NodeGrammarViolation:
    """``made`` raised again, unrecorded, where a reader meets the same
    bytes again (no frame after a broken one; a body read a second time):
    a new instance of its class, with its attributes, so each raise has a
    traceback of its own."""
    cls = type(made)
    fresh = cls.__new__(cls)
    fresh.__dict__.update(made.__dict__)
    NodeGrammarViolation.__init__(fresh, made.record, made.data)
    return fresh


def grammar_violation_in(exc: BaseException | None) -> NodeGrammarViolation | None:
    """The NodeGrammarViolation ``exc`` is, or was raised while handling (a
    case that wraps it in an AssertionError of its own, ``from None``
    included: the context is kept)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, NodeGrammarViolation):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def append_record(path: Path, record: GrammarRecord) -> None:
    """One line per record; O_APPEND makes each one write, so several
    processes (xdist workers) can append to one file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(asdict(record), sort_keys=True, ensure_ascii=False) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def read_records(path: Path, grammar_case: str, run_id: str = "") -> list[GrammarRecord]:
    """The records of ``grammar_case`` in ``path`` made by run ``run_id``
    (a torn line is skipped)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    records = []
    for line in text.splitlines():
        try:
            record = GrammarRecord(**json.loads(line))
        except (ValueError, TypeError):
            continue
        if record.grammar_case == grammar_case and record.run_id == run_id:
            records.append(record)
    return records


@dataclass(frozen=True)
class GrammarJudge:
    """What the grammar case uses (the ``node_grammar`` fixture): its own
    exchange runs inside :meth:`judging`, which then fails the case when
    any case of the session recorded a violation of its rule."""

    case_id: str
    records_file: Path
    run_id: str = ""
    check_prerequisites: Callable[[tuple[str, ...]], None] | None = None
    """Ends the case blocked by the root cause of the first of the given
    cases that did not pass in this run, as ``depends`` would (the plugin
    sets it); returns when all passed."""

    def nothing_to_judge(self, depends: Sequence[str], why: str) -> NoReturn:
        """The case's own exchange read nothing of the node: blocked as a
        case depending on ``depends`` would be (by the root cause of the
        first that did not pass in this run: a failed handshake, say), else
        by the last of them, with ``why``. A grammar case has no
        ``depends`` of its own: it judges the other cases' records however
        they ended."""
        if self.check_prerequisites is not None:
            self.check_prerequisites(tuple(depends))
        blocked(depends[-1], "failed within this case", why)

    def recorded(self) -> list[GrammarRecord]:
        return read_records(self.records_file, self.case_id, self.run_id)

    @contextmanager
    def judging(self) -> Iterator[None]:
        """Run the case's own exchange. A violation in it, or any recorded by
        another case of the session, fails the case listing them all with
        their bytes; another failure of the exchange stands when no
        violation was recorded (it is then the case's own, or a blocked
        prerequisite)."""
        ended: BaseException | None = None
        try:
            yield
        except (KeyboardInterrupt, SystemExit, asyncio.CancelledError):
            raise
        except BaseException as exc:  # a blocked() skip too: the records outweigh it
            ended = exc
        records = self.recorded()
        if records:
            shown = "\n".join("- " + record.text() for record in records[:SHOWN_IN_LIST])
            more = (
                f"\n(and {len(records) - SHOWN_IN_LIST} more in the run folder)"
                if len(records) > SHOWN_IN_LIST
                else ""
            )
            own = ""
            if ended is not None and grammar_violation_in(ended) is None:
                own = f"\n(this case's own exchange ended too: {ended})"
            raise AssertionError(
                f"the node sent {len(records)} frame(s) that break the frame grammar:\n"
                + shown
                + more
                + own
            ) from None
        if ended is not None:
            raise ended


@contextmanager
def exchange_cut_short(trace: Any) -> Iterator[None]:
    """A grammar case's own exchange that ends before its last step (the
    node closed or reset, answered otherwise or later than the other cases'
    rules want) shows fewer frames; what it read is still judged. Only a
    frame that breaks the grammar fails the grammar case: the rest is the
    other cases' rules (a close while the harness wrote is an
    AssertionError, PeerClosed, or a ConnectionError), noted in the case's
    wire ``trace``."""
    try:
        yield
    except (AssertionError, ConnectionError) as exc:
        if grammar_violation_in(exc) is not None:
            raise
        trace.event(f"the exchange ended early: {exc}")

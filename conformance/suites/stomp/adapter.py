"""The ``accepted`` adapter of STOMP targets (docs/stomp-adapter.md).

A RECEIPT says a message was processed; whether the node really kept it
lies behind the server. A target with capability ``accepted`` names a
command (``[targets.X.adapters] accepted = "..."``) printing one JSON object
per accepted message. :func:`parse_accepted` is the sans-I/O reader of that
output; the fixtures run the command (with a time limit) and match the
harness's own messages among whatever else the node holds.

A breach of the adapter contract is an :class:`AdapterContractError`, a
:class:`TargetError`: the case ends in ``error`` (the harness could not
read the node), never in a verdict on the protocol.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import pytest

from conformance.core.target_errors import TargetError
from conformance.core.target_runtime import TargetRuntime

from .own_messages import OwnMessage
from .peer import settings_of

ACCEPTED = "accepted"
"""Capability and adapter name."""
RESTART = "restart"
"""Capability: the harness may SIGKILL the launched server and start it again."""

DEFAULT_ADAPTER_TIMEOUT = 30.0
"""Seconds the adapter command may take (params ``adapter_timeout``): a
Python or pika start-up plus a read of a local store or queue takes about
a second; the margin is for loaded CI machines."""

MAX_RECORDS = 200_000
MAX_LINE_CHARS = 1 << 20
"""Bounds on the adapter's output: the harness needs its own few hundred
messages, not a production node's history."""

SHOWN_LINES = 5
SHOWN_CHARS = 300

REQUIRED_MEMBERS: dict[str, tuple[type, ...]] = {
    "destination": (str,),
    "type": (str,),
    "content-type": (str,),
    "receipt": (str, type(None)),
    "body": (str,),
}


class AdapterContractError(TargetError):
    """The adapter's output breaks docs/stomp-adapter.md; the message names
    the rule and shows the offending lines."""


@dataclass(frozen=True)
class AcceptedMessage:
    """One line of the adapter's output; ``index`` is its position (the
    node's acceptance order), ``line`` its 1-based line number."""

    index: int
    line: int
    destination: str
    type: str
    content_type: str
    receipt: str | None
    body: str
    json_body: bool = False
    """The node stores a message's JSON value, not its bytes (target param
    ``accepted_body = "json"``): the body is matched as a JSON value."""

    def brief(self) -> str:
        return (
            f"line {self.line}: destination={self.destination!r} type={self.type!r} "
            f"content-type={self.content_type!r} receipt={self.receipt!r} body={_cut(self.body)}"
        )


def _cut(text: str, limit: int = SHOWN_CHARS) -> str:
    shown = repr(text[:limit])
    return shown + (f"...(+{len(text) - limit} chars)" if len(text) > limit else "")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"member {key!r} appears twice")
        seen[key] = value
    return seen


def parse_accepted(text: str) -> list[AcceptedMessage]:
    """The records of an ``accepted`` adapter's stdout, or
    :class:`AdapterContractError` naming the broken rule and showing the
    line (number and text). Empty lines are skipped; a CR before the LF is
    tolerated."""
    records: list[AcceptedMessage] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw[:-1] if raw.endswith("\r") else raw
        if not line.strip():
            continue
        if len(line) > MAX_LINE_CHARS:
            raise AdapterContractError(
                f"accepted adapter: line {number} has {len(line)} characters, over the "
                f"bound of {MAX_LINE_CHARS} (docs/stomp-adapter.md): {_cut(line)}"
            )
        if len(records) >= MAX_RECORDS:
            raise AdapterContractError(
                f"accepted adapter printed more than {MAX_RECORDS} records "
                "(docs/stomp-adapter.md): point it at a queue of its own"
            )
        try:
            obj = json.loads(line, object_pairs_hook=_no_duplicates)
        except (ValueError, RecursionError) as exc:
            raise AdapterContractError(
                f"accepted adapter: line {number} is not one JSON object ({exc}); the contract "
                f"(docs/stomp-adapter.md) wants one JSON object per line and nothing else on stdout:\n"
                f"{_context(text, number)}"
            ) from None
        if not isinstance(obj, dict):
            raise AdapterContractError(
                f"accepted adapter: line {number} is JSON but not an object "
                f"({_json_kind(obj)}); docs/stomp-adapter.md:\n{_context(text, number)}"
            )
        problems = []
        for member, kinds in REQUIRED_MEMBERS.items():
            if member not in obj:
                problems.append(f"no {member!r}")
            elif not isinstance(obj[member], kinds):
                wanted = " or ".join("null" if k is type(None) else "string" for k in kinds)
                problems.append(f"{member!r} is {_json_kind(obj[member])}, not {wanted}")
        if problems:
            raise AdapterContractError(
                f"accepted adapter: line {number} breaks the record form "
                f"({'; '.join(problems)}); docs/stomp-adapter.md:\n"
                f"{_context(text, number)}"
            )
        records.append(
            AcceptedMessage(
                len(records),
                number,
                obj["destination"],
                obj["type"],
                obj["content-type"],
                obj["receipt"],
                obj["body"],
            )
        )
    return records


def _json_kind(value: Any) -> str:
    """The JSON name of a decoded value's type, as the adapter wrote it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), type(value).__name__)


def _context(text: str, number: int) -> str:
    """The offending line with up to two before it, numbered, each cut to a
    readable length."""
    lines = text.split("\n")
    first = max(1, number - 2)
    return "\n".join(f"  {n:>5}| {_cut(lines[n - 1])}" for n in range(first, number + 1))


# -- finding the harness's own messages among the records --------------------------------


@dataclass
class Lookup:
    """Where the harness's messages are among the adapter's records."""

    stored: dict[str, AcceptedMessage]
    """receipt -> the record with the body and headers sent."""
    altered: dict[str, list[str]]
    """receipt -> what differs in records carrying the body sent."""
    missing: list[OwnMessage]
    total: int

    def problems(self, sent: list[OwnMessage]) -> list[str]:
        out = []
        for message in sent:
            if message.receipt in self.altered and message.receipt not in self.stored:
                out.append(
                    f"SEND receipt:{message.receipt} stored altered: "
                    + "; ".join(self.altered[message.receipt])
                )
            elif message.receipt not in self.stored:
                out.append(
                    f"SEND receipt:{message.receipt} (body {_cut(message.body, 120)}) is not among the "
                    f"{self.total} record(s) the adapter printed"
                )
        return out


def json_value_key(body: str) -> str | None:
    """A JSON body's value in one canonical text (keys sorted, no spaces;
    numbers as parsed, so 2.0 and 2 stay apart; a repeated key is no JSON
    value at all), or None when the body is not JSON. Two bodies have the
    same key exactly when they parse to the same value."""
    try:
        value = json.loads(body, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError):
        return None
    return "json:" + json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def find_own(records: list[AcceptedMessage], sent: list[OwnMessage]) -> Lookup:
    """Match sent messages to records by body (unique per message, see
    :func:`.own_messages.own_message`), then compare the headers the contract carries.
    A record of a node that stores JSON values (``json_body``) matches a
    message whose body parses to the same value; every other record only
    the exact text sent."""
    by_body: dict[str, list[AcceptedMessage]] = {}
    for record in records:
        key = json_value_key(record.body) if record.json_body else record.body
        if key is not None:
            by_body.setdefault(key, []).append(record)
    stored: dict[str, AcceptedMessage] = {}
    altered: dict[str, list[str]] = {}
    missing: list[OwnMessage] = []
    for message in sent:
        value_key = json_value_key(message.body)
        candidates = by_body.get(message.body, []) + (
            by_body.get(value_key, []) if value_key else []
        )
        if not candidates:
            missing.append(message)
            continue
        for record in candidates:
            diffs = [
                f"{name} {got!r} instead of {want!r}"
                for name, got, want in (
                    ("destination", record.destination, message.destination),
                    ("type", record.type, message.type),
                    ("content-type", record.content_type, message.content_type),
                )
                if got != want
            ]
            if record.receipt is not None and record.receipt != message.receipt:
                diffs.append(f"receipt {record.receipt!r} instead of {message.receipt!r}")
            if not diffs:
                stored[message.receipt] = record
                break
            altered.setdefault(message.receipt, []).append(f"{record.brief()}: " + ", ".join(diffs))
    return Lookup(stored, altered, missing, len(records))


# -- fixtures (imported by conftest.py) --------------------------------------------------

ReadAccepted = Callable[[str], Awaitable[list[AcceptedMessage]]]


def adapter_timeout(runtime: TargetRuntime) -> float:
    value = runtime.params.get("adapter_timeout", DEFAULT_ADAPTER_TIMEOUT)
    try:
        seconds = float(value)
        if seconds <= 0:
            raise ValueError
    except (TypeError, ValueError):
        raise TargetError(
            f"target {runtime.target.name}: params.adapter_timeout must be a positive number "
            f"of seconds, got {value!r}"
        ) from None
    return seconds


async def read_accepted(runtime: TargetRuntime, when: str) -> list[AcceptedMessage]:
    """Run the target's ``accepted`` command (in a thread: it is a
    subprocess with its own time limit, enforced by run_adapter) and parse
    its output. ``when`` says in errors at which step it was read."""
    timeout = adapter_timeout(runtime)
    try:
        # run_adapter kills the command at ``timeout``; the outer wait is a
        # backstop so that a stuck thread cannot hold the case forever.
        output = await asyncio.wait_for(
            asyncio.to_thread(runtime.run_adapter, ACCEPTED, {}, timeout), timeout + 5.0
        )
    except asyncio.TimeoutError:
        raise TargetError(
            f"accepted adapter of {runtime.target.name} ({when}) did not finish within "
            f"{timeout + 5.0:g} s"
        ) from None
    except TargetError as exc:
        # The same kind: an adapter that did not start stays TargetNotStarted.
        raise type(exc)(f"accepted adapter ({when}): {exc}") from None
    try:
        records = parse_accepted(output)
    except AdapterContractError as exc:
        raise AdapterContractError(f"{exc}\n(read {when})") from None
    form = runtime.params.get("accepted_body", "bytes")
    if form not in ("bytes", "json"):
        raise TargetError(
            f'target {runtime.target.name}: params.accepted_body must be "bytes" or "json", '
            f"got {form!r} (docs/stomp-adapter.md)"
        )
    if form == "json":
        records = [dataclasses.replace(record, json_body=True) for record in records]
    return records


@pytest.fixture
def accepted_messages(target: TargetRuntime) -> ReadAccepted:
    """``await accepted_messages("after the RECEIPT")`` -> the records the
    target's ``accepted`` adapter prints now (docs/stomp-adapter.md)."""

    async def read(when: str = "") -> list[AcceptedMessage]:
        return await read_accepted(target, when or "during the case")

    return read


@pytest.fixture
def smp_destination(target: TargetRuntime) -> str:
    """The destination the receipt cases SEND to: the target's param
    ``destination`` (the manifest's destination with the node id put in),
    else peer.DEFAULT_DESTINATION."""
    return settings_of(target).destination


@pytest.fixture
def restart_target_server(target: TargetRuntime) -> Callable[[], Awaitable[None]]:
    """``await restart_target_server()``: SIGKILL the launched server's
    process group and start it again (capability ``restart``)."""

    async def restart() -> None:
        # In this thread, not asyncio.to_thread: the launched process gets
        # PR_SET_PDEATHSIG (parent_death.die_with_parent), which fires when the
        # *thread* that forked it ends; a worker thread of the case's event
        # loop ends with the case, and the restarted server was SIGTERMed.
        target.restart_server(True)

    return restart

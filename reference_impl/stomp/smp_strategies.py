"""Hypothesis strategies for SMP 2.1 messages, valid and precisely invalid.

Both are driven by the schema tables of :mod:`reference_impl.stomp.smp`:

- :func:`valid_messages` draws every field from its range, then makes each
  cross-field rule hold (``_REPAIRS``). The values stay inside what deployed
  Swaptacular nodes accept as well (timestamps 1970..9999 with offsets up to
  14 hours, hex in one case, no NUL characters, which PostgreSQL text columns
  cannot store), so a node refusing one is at fault.
- :func:`invalid_messages` takes a valid message and breaks exactly one rule of
  exactly one field (or one cross-field rule), from the deterministic catalog
  :func:`field_mutations` / :data:`RULE_BREAKERS` that the vector generator
  (``scripts/gen_stomp_vectors_smp.py``) also uses. It yields
  ``(message, field_at_fault, reason)`` and only when :func:`smp.validate_message`
  reports exactly that one problem, so the triple is right by construction.

A mutated message may hold a non-finite float (``inf``); :func:`body_text`
writes it as ``1e400``, the JSON way to say a number no double can hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any, Callable

from hypothesis import strategies as st

from . import smp
from .smp import Field, MESSAGE_TYPES

DELETE = object()
"""A mutation value meaning: remove the field."""

SPECIAL_COORDINATOR_TYPES = ("direct", "agent", "issuing", "interest", "delete")  # SMP:311-343
STATUS_CODES = (
    "SENDER_IS_UNREACHABLE",
    "RECIPIENT_IS_UNREACHABLE",
    "TIMEOUT",
    "NEWER_INTEREST_RATE",
    "TRANSFER_NOTE_IS_TOO_LONG",
    "INSUFFICIENT_AVAILABLE_AMOUNT",
)  # SMP:681-701

_EARLIEST = datetime(1970, 1, 2)  # the text's own sentinels are 1970-01-01 and 9999-12-31
_LATEST = datetime(9999, 12, 30)


# ----------------------------------------------------------------------------- valid values


def _truncate_utf8(limit: int) -> Callable[[str], str]:
    def cut(text: str) -> str:
        return text.encode("utf-8")[:limit].decode("utf-8", "ignore")

    return cut


def _date_time_text(moment: datetime, offset_minutes: int, zulu: bool) -> str:
    local = (moment + timedelta(minutes=offset_minutes)).replace(
        tzinfo=timezone(timedelta(minutes=offset_minutes))
    )
    text = local.isoformat()
    return text[:-6] + "Z" if zulu and offset_minutes == 0 else text


def date_times() -> st.SearchStrategy[str]:
    """RFC 3339 date-times with an offset, as Swaptacular nodes write and read them."""
    return st.builds(
        _date_time_text,
        st.datetimes(_EARLIEST, _LATEST),
        st.integers(-14 * 60, 14 * 60) | st.just(0),
        st.booleans(),
    )


def value_strategy(spec: Field) -> st.SearchStrategy[Any]:
    """Valid values for one field, by its row in the schema table."""
    if spec.kind == "int":
        values = st.integers(spec.lo, spec.hi) | st.sampled_from([spec.lo, spec.hi])
        return values.filter(lambda v: v not in spec.forbidden) if spec.forbidden else values
    if spec.kind == "float":
        return st.floats(spec.lo, spec.hi, allow_nan=False, allow_infinity=False)
    if spec.kind == "date-time":
        return date_times()
    if spec.kind == "date":
        return st.dates(date(1970, 1, 1), date(9999, 12, 31)).map(date.isoformat)
    if spec.kind == "bytes":
        return (
            st.sampled_from(spec.byte_lengths)
            .flatmap(lambda n: st.binary(min_size=n, max_size=n))
            .flatmap(lambda raw: st.sampled_from([raw.hex(), raw.hex().upper()]))
        )
    if spec.pattern is not None:
        return st.from_regex(f"^{spec.pattern}$", fullmatch=True)
    if spec.ascii:
        alphabet = st.characters(min_codepoint=1, max_codepoint=127)
    else:
        alphabet = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")
    if spec.unit == "utf8-bytes":
        text = st.text(alphabet, min_size=spec.min_len, max_size=spec.max_len).map(
            _truncate_utf8(spec.max_len)
        )
    else:
        text = st.text(alphabet, min_size=spec.min_len, max_size=spec.max_len)
    return text.filter(lambda v: v not in spec.forbidden) if spec.forbidden else text


def _field_strategy(type_name: str, spec: Field) -> st.SearchStrategy[Any]:
    # Realistic values next to arbitrary ones, so cross rules on them get exercised.
    if spec.name == "coordinator_type":
        return st.sampled_from(SPECIAL_COORDINATOR_TYPES) | value_strategy(spec)
    if spec.name == "status_code":
        codes = st.sampled_from(STATUS_CODES) | value_strategy(spec)
        return (
            codes.filter(lambda v: v != "OK") if "OK" in spec.forbidden else st.just("OK") | codes
        )
    return value_strategy(spec)


# ----------------------------------------------------------------------------- cross rules


def _repair_min_max(m: dict) -> None:
    if m["max_locked_amount"] < m["min_locked_amount"]:
        m["min_locked_amount"], m["max_locked_amount"] = (
            m["max_locked_amount"],
            m["min_locked_amount"],
        )
        if m["min_locked_amount"] < 0:  # the old max was negative: no valid pair with it
            m["min_locked_amount"] = 0


def _repair_direct(m: dict) -> None:
    if m["coordinator_type"] == "direct":
        m["coordinator_id"] = m["creditor_id"]


def _repair_issuing(m: dict) -> None:
    if m["coordinator_type"] == "issuing":
        m["coordinator_id"] = m["debtor_id"]
        m["creditor_id"] = 0


def _repair_failed_commit(m: dict) -> None:
    if m["status_code"] != "OK":
        m["committed_amount"] = 0


def _repair_chain(m: dict) -> None:
    if m["previous_transfer_number"] >= m["transfer_number"]:
        m["previous_transfer_number"] = m["transfer_number"] - 1


_REPAIRS: dict[str, Callable[[dict], None]] = {
    "max-locked-at-least-min-locked": _repair_min_max,
    "direct-coordinator-is-creditor": _repair_direct,
    "issuing-coordinator-is-debtor": _repair_issuing,
    "issuing-sender-is-debtors-account": _repair_issuing,
    "failed-commit-moves-nothing": _repair_failed_commit,
    "previous-transfer-is-earlier": _repair_chain,
}


def _other(value: int, lo: int = smp.MIN_INT64, hi: int = smp.MAX_INT64) -> int:
    return value + 1 if value < hi else value - 1


def _break_min_max(m: dict) -> None:
    low = max(1, m["min_locked_amount"])
    m["min_locked_amount"], m["max_locked_amount"] = low, low - 1


def _break_direct(m: dict) -> None:
    m["coordinator_type"] = "direct"
    m["coordinator_id"] = _other(m["creditor_id"])


def _break_issuing_id(m: dict) -> None:
    m["coordinator_type"], m["creditor_id"] = "issuing", 0
    m["coordinator_id"] = _other(m["debtor_id"])


def _break_issuing_root(m: dict) -> None:
    m["coordinator_type"], m["coordinator_id"] = "issuing", m["debtor_id"]
    m["creditor_id"] = m["creditor_id"] or 1


def _break_failed_commit(m: dict) -> None:
    m["status_code"] = "TIMEOUT"
    m["committed_amount"] = max(1, m["committed_amount"])


def _break_chain(m: dict) -> None:
    m["previous_transfer_number"] = m["transfer_number"]


RULE_BREAKERS: dict[str, Callable[[dict], None]] = {
    "max-locked-at-least-min-locked": _break_min_max,
    "direct-coordinator-is-creditor": _break_direct,
    "issuing-coordinator-is-debtor": _break_issuing_id,
    "issuing-sender-is-debtors-account": _break_issuing_root,
    "failed-commit-moves-nothing": _break_failed_commit,
    "previous-transfer-is-earlier": _break_chain,
}
"""For each cross-field rule: make it fail while every field stays valid."""


def repair(type_name: str, message: dict) -> dict:
    """Make every cross-field rule of the type hold (in place; returns ``message``)."""
    for rule in MESSAGE_TYPES[type_name].rules:
        _REPAIRS[rule.name](message)
    return message


@st.composite
def _valid_of(draw: st.DrawFn, type_name: str) -> dict:
    message_type = MESSAGE_TYPES[type_name]
    message: dict[str, Any] = {"type": type_name}
    for spec in message_type.fields:
        message[spec.name] = draw(_field_strategy(type_name, spec), label=spec.name)
    return repair(type_name, message)


def valid_messages(type_name: str | None = None) -> st.SearchStrategy[dict]:
    """Valid SMP messages of ``type_name`` (any type when None), as parsed JSON objects."""
    if type_name is None:
        return st.sampled_from(sorted(MESSAGE_TYPES)).flatmap(_valid_of)
    if type_name not in MESSAGE_TYPES:
        raise ValueError(f"unknown SMP message type {type_name!r}")
    return _valid_of(type_name)


# ----------------------------------------------------------------------------- mutations


@dataclass(frozen=True)
class Mutation:
    """Replace one field's value (or remove it, ``DELETE``) to break one rule."""

    label: str  # short name for vector ids
    value: Any  # the new value, DELETE, or a function of the current value
    reason: str


def _as_string(current: Any) -> str:
    # The valid value itself, quoted: only its JSON type is wrong, so a reader that converts
    # numeric strings (marshmallow does) sees an otherwise valid message.
    return repr(current) if isinstance(current, float) else str(current)


def _with_fraction(current: Any) -> float:
    return current + 0.5 if abs(current) < 2**52 else 1.5


def _as_float(current: Any) -> float:
    return float(current) if abs(current) < 2**53 else 1.0


def field_mutations(spec: Field) -> list[Mutation]:
    """Every single-rule break of one field, deterministic and in a fixed order."""
    r = smp
    out = [Mutation("missing", DELETE, r.MISSING)]
    if spec.kind == "int":
        out += [
            Mutation("string", _as_string, r.WRONG_TYPE),
            Mutation("fraction", _with_fraction, r.WRONG_TYPE),
            Mutation("integral-float", _as_float, r.WRONG_TYPE),
            Mutation("boolean", True, r.WRONG_TYPE),
            Mutation("null", None, r.WRONG_TYPE),
            Mutation("below-range", spec.lo - 1, r.OUT_OF_RANGE),
            Mutation("above-range", spec.hi + 1, r.OUT_OF_RANGE),
        ]
        out += [Mutation(f"forbidden-{v}", v, r.FORBIDDEN_VALUE) for v in spec.forbidden]
    elif spec.kind == "float":
        out += [
            Mutation("string", _as_string, r.WRONG_TYPE),
            Mutation("boolean", False, r.WRONG_TYPE),
            Mutation("null", None, r.WRONG_TYPE),
            Mutation("infinite", math.inf, r.NOT_FINITE),
            Mutation("minus-infinite", -math.inf, r.NOT_FINITE),
            Mutation("nan", math.nan, r.NOT_FINITE),
        ]
        if spec.lo is not None:
            out += [
                Mutation("just-below-range", math.nextafter(spec.lo, -math.inf), r.OUT_OF_RANGE),
                Mutation("below-range", spec.lo - 1, r.OUT_OF_RANGE),
            ]
        if spec.hi is not None:
            out += [Mutation("just-above-range", math.nextafter(spec.hi, math.inf), r.OUT_OF_RANGE)]
    elif spec.kind == "date-time":
        out += [
            Mutation("number", 1716199200, r.WRONG_TYPE),
            Mutation("null", None, r.WRONG_TYPE),
            Mutation("no-offset", "2024-05-20T10:00:00", r.NO_UTC_OFFSET),
            Mutation("date-only", "2024-05-20", r.BAD_TIMESTAMP),
            Mutation("words", "yesterday", r.BAD_TIMESTAMP),
            Mutation("empty", "", r.BAD_TIMESTAMP),
            Mutation("month-13", "2024-13-01T00:00:00+00:00", r.BAD_TIMESTAMP),
            Mutation("february-30", "2024-02-30T00:00:00Z", r.BAD_TIMESTAMP),
            Mutation("hour-24", "2024-05-20T24:00:00Z", r.BAD_TIMESTAMP),
            Mutation("leap-second", "2016-12-31T23:59:60Z", r.BAD_TIMESTAMP),
            Mutation("offset-24h", "2024-05-20T10:00:00+24:00", r.BAD_TIMESTAMP),
            Mutation("basic-format", "20240520T100000Z", r.BAD_TIMESTAMP),
            Mutation("lone-surrogate", "2024-05-20T10:00:00Z\ud800", r.LONE_SURROGATE),
        ]
    elif spec.kind == "date":
        out += [
            Mutation("number", 20240520, r.WRONG_TYPE),
            Mutation("null", None, r.WRONG_TYPE),
            Mutation("february-30", "2024-02-30", r.BAD_DATE),
            Mutation("basic-format", "20240520", r.BAD_DATE),
            Mutation("date-time", "2024-05-20T00:00:00+00:00", r.BAD_DATE),
            Mutation("year-0", "0000-01-01", r.BAD_DATE),
        ]
    elif spec.kind == "bytes":
        lower = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        out += [
            Mutation("number", 0, r.WRONG_TYPE),
            Mutation("null", None, r.WRONG_TYPE),
            Mutation("not-hex", "zz" * 32, r.BAD_HEX),
            Mutation("odd-digits", lower[:63], r.BAD_HEX),
            Mutation("mixed-case", lower[:32].upper() + lower[32:], r.BAD_HEX),
            Mutation("31-bytes", lower[:62], r.WRONG_BYTE_LENGTH),
            Mutation("33-bytes", lower + "00", r.WRONG_BYTE_LENGTH),
            Mutation("1-byte", "00", r.WRONG_BYTE_LENGTH),
        ]
    else:  # string
        out += [
            Mutation("number", 1, r.WRONG_TYPE),
            Mutation("null", None, r.WRONG_TYPE),
            Mutation("array", ["x"], r.WRONG_TYPE),
            Mutation("lone-surrogate", "x\udc00", r.LONE_SURROGATE),
        ]
        if spec.ascii:
            out.append(Mutation("non-ascii", "Zahlung-\u00fc", r.NOT_ASCII))
        if spec.max_len is not None:
            if spec.unit == "utf8-bytes":
                # Few characters, too many bytes: counting characters would let it through.
                out.append(
                    Mutation("too-many-bytes", "\u00e9" * (spec.max_len // 2 + 1), r.TOO_LONG)
                )
                out.append(Mutation("one-byte-too-long", "a" * (spec.max_len + 1), r.TOO_LONG))
            elif spec.ascii:
                out.append(Mutation("one-too-long", "A" * (spec.max_len + 1), r.TOO_LONG))
            else:
                out.append(Mutation("one-too-long", "\U0001f600" * (spec.max_len + 1), r.TOO_LONG))
        if spec.min_len > 0:
            out.append(Mutation("empty", "", r.TOO_SHORT))
        if spec.pattern is not None:
            out += [
                Mutation("nine-chars", "text.1234", r.PATTERN_MISMATCH),
                Mutation("space", "a b", r.PATTERN_MISMATCH),
                Mutation("non-ascii", "\u00fc", r.PATTERN_MISMATCH),
            ]
        out += [Mutation(f"forbidden-{v}", v, r.FORBIDDEN_VALUE) for v in spec.forbidden]
    return out


def type_mutations(type_name: str) -> list[Mutation]:
    """Breaks of the body's own ``type`` member."""
    other = "AccountPurge" if type_name != "AccountPurge" else "ConfigureAccount"
    return [
        Mutation("missing", DELETE, smp.MISSING),
        Mutation("number", 1, smp.WRONG_TYPE),
        Mutation("other-type", other, smp.TYPE_MISMATCH),
    ]


def apply_mutation(message: dict, field_name: str, mutation: Mutation) -> dict:
    result = dict(message)
    if mutation.value is DELETE:
        del result[field_name]
    elif callable(mutation.value):
        result[field_name] = mutation.value(message[field_name])
    else:
        result[field_name] = mutation.value
    return result


def exactly(problems: list[smp.SmpProblem], field_name: str, reason: str) -> bool:
    return [(p.field, p.reason) for p in problems] == [(field_name, reason)]


@st.composite
def _invalid_of(draw: st.DrawFn, type_name: str) -> tuple[str, dict, str, str]:
    message = draw(_valid_of(type_name))
    message_type = MESSAGE_TYPES[type_name]
    targets: list[tuple[str, Any]] = [("type", m) for m in type_mutations(type_name)]
    for spec in message_type.fields:
        targets += [(spec.name, m) for m in field_mutations(spec)]
    targets += [(rule.at_fault, rule) for rule in message_type.rules]
    field_name, how = draw(st.sampled_from(targets))
    if isinstance(how, Mutation):
        broken, reason = apply_mutation(message, field_name, how), how.reason
    else:
        broken = dict(message)
        RULE_BREAKERS[how.name](broken)
        reason = smp.INCONSISTENT
    return type_name, broken, field_name, reason


def invalid_messages(type_name: str | None = None) -> st.SearchStrategy[tuple[dict, str, str]]:
    """``(message, field_at_fault, reason)``: a message of ``type_name`` (any type
    when None) that breaks exactly one rule, which validate_message reports alone."""
    if type_name is None:
        base = st.sampled_from(sorted(MESSAGE_TYPES)).flatmap(_invalid_of)
    elif type_name not in MESSAGE_TYPES:
        raise ValueError(f"unknown SMP message type {type_name!r}")
    else:
        base = _invalid_of(type_name)
    # The filter states the contract; by construction it never rejects (the tests check the
    # deterministic catalog without it).
    return base.filter(lambda q: exactly(smp.validate_message(q[0], q[1]), q[2], q[3])).map(
        lambda q: q[1:]
    )


# ----------------------------------------------------------------------------- bodies

_INF = {math.inf: "__smp_positive_infinity__", -math.inf: "__smp_negative_infinity__"}


def body_text(message: Any) -> str:
    """JSON text of a (possibly broken) message; infinities written 1e400 / -1e400
    (Python reads those back as infinities). NaN has no JSON form: callers keep
    NaN cases out of bodies. Non-ASCII is kept as is, except that a string with an
    unpaired surrogate forces escapes (such a string has no UTF-8 form)."""
    import json

    def encode(value: Any) -> Any:
        if isinstance(value, float) and math.isinf(value):
            return _INF[value]
        if isinstance(value, dict):
            return {k: encode(v) for k, v in value.items()}
        if isinstance(value, list):
            return [encode(v) for v in value]
        return value

    encoded = encode(message)
    text = json.dumps(encoded, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(encoded, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace(f'"{_INF[math.inf]}"', "1e400").replace(f'"{_INF[-math.inf]}"', "-1e400")

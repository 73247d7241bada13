"""Swaptacular Messaging Protocol 2.1 message bodies: schema tables and validation.

Spec: ``swaptacular-messaging-protocol.rst`` (SMP 2.1, 2024-05-20), cited below
as ``SMP:<line>``; the STOMP profile (``swaptacular-stomp-transport.txt``) as
``PROFILE:<line>``.

Every message type is one declarative :class:`MessageType` row: its fields (kind,
range, length bound and its unit, ASCII-only, pattern, forbidden values, the
lines of the text that say so) and its cross-field rules. There is no code per
message type: :func:`validate_message` walks the table.

What the SMP text leaves to "separate document(s)" (SMP:102-107: it "does not
define or mandate any particular method for message serialization"), and how
this module reads it for ``application/json`` bodies (PROFILE:51). The choices
follow the maintained Swaptacular implementation (swpt_stomp ``smp_schemas.py``
and swpt_pythonlib ``protocol_schemas.py``, marshmallow schemas) so that what
the harness sends as valid is accepted by real nodes:

- the body is one JSON object (RFC 8259), UTF-8;
- it carries a ``"type"`` member equal to the message type (the STOMP ``type``
  header, PROFILE:34); ``validate_body`` also requires the two to agree;
- members the type does not define are ignored, not refused (the text is
  silent; the Swaptacular schemas use ``unknown = EXCLUDE``);
- ``int32``/``int64`` are JSON numbers without fraction or exponent, in the
  two's-complement range; ``float`` is any JSON number (an integer literal is
  a float value), and must come out finite;
- ``date-time`` is an ISO 8601 / RFC 3339 string with a UTC offset (the text's
  own values look like ``"1970-01-01T00:00:00+00:00"``, SMP:946); a timestamp
  without an offset names no moment, so it is refused, though marshmallow
  accepts it (hence basis ``json-mapping``); ``date`` is ``YYYY-MM-DD``;
- ``bytes`` (only ``debtor_info_sha256``) is hexadecimal, all upper or all lower
  case, as the Swaptacular schemas read it (``^([0-9A-F]{64}|[0-9a-f]{64})?$``);
- a string holding an unpaired surrogate (``"\\ud800"`` in the JSON text) is no
  Unicode string: refused (RFC 8259 section 8.2; it has no UTF-8 form, so its
  byte length is undefined);
- members with the same name twice are refused (RFC 8259 section 4: names
  SHOULD be unique; which one counts differs between parsers).

Each problem's ``reason`` is one of :data:`REASONS`, whose basis says where the
rule comes from: ``smp-text`` (the SMP text says it), ``json`` (RFC 8259 / the
profile's JSON), ``json-mapping`` (this module's reading of the serialization
the text leaves open, above) or ``harness-bound`` (a size bound of ours).
Cross-field rules are checked only when every field they read is valid on its
own, so one broken field yields exactly one problem.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field as dataclass_field
from datetime import date
from typing import Any, Callable, Mapping

MIN_INT32, MAX_INT32 = -(1 << 31), (1 << 31) - 1
MIN_INT64, MAX_INT64 = -(1 << 63), (1 << 63) - 1

MAX_BODY_BYTES = 65536
"""Bound on a body given to :func:`validate_body` (harness-bound). The largest
valid message (AccountUpdate with 2000 bytes of config_data and a 200-character
IRI, every character written as a JSON escape) stays under 20 KiB; the rest
leaves room for members this version does not define."""

BODY = "(body)"
"""The ``field`` of a problem with the body as a whole (not JSON, too large...)."""

# ----------------------------------------------------------------------------- reasons

SMP_TEXT, JSON_BASIS, JSON_MAPPING, HARNESS_BOUND = (
    "smp-text",
    "json",
    "json-mapping",
    "harness-bound",
)

MISSING = "missing"
WRONG_TYPE = "wrong type"
OUT_OF_RANGE = "out of range"
NOT_FINITE = "not finite"
TOO_LONG = "too long"
TOO_SHORT = "too short"
NOT_ASCII = "not ASCII"
LONE_SURROGATE = "lone surrogate"
PATTERN_MISMATCH = "pattern mismatch"
FORBIDDEN_VALUE = "forbidden value"
BAD_TIMESTAMP = "bad timestamp"
NO_UTC_OFFSET = "timestamp without UTC offset"
BAD_DATE = "bad date"
BAD_HEX = "bad hex"
WRONG_BYTE_LENGTH = "wrong byte length"
INCONSISTENT = "inconsistent"
TYPE_MISMATCH = "type mismatch"
UNKNOWN_TYPE = "unknown message type"
BODY_TOO_LARGE = "body too large"
NOT_UTF8 = "not UTF-8"
NOT_JSON = "not JSON"
NOT_OBJECT = "not a JSON object"
DUPLICATE_KEY = "duplicate key"
NESTED_TOO_DEEP = "nested too deeply"

REASONS: dict[str, tuple[str, str]] = {
    MISSING: (
        SMP_TEXT,
        "a field the message type defines is absent (the text lists no optional field)",
    ),
    WRONG_TYPE: (
        JSON_MAPPING,
        "the JSON value is of another kind than the field's type (a string, "
        "boolean, null, array or object for a number; 1.0 for an integer; ...)",
    ),
    OUT_OF_RANGE: (
        SMP_TEXT,
        "an integer outside int32/int64, or a number outside the range the text gives",
    ),
    NOT_FINITE: (
        SMP_TEXT,
        "a float the text requires finite is infinite (e.g. written 1e400) or NaN",
    ),
    TOO_LONG: (
        SMP_TEXT,
        "a string longer than its bound, counted in the unit the text names "
        "(ASCII symbols, UTF-8 bytes, or Unicode characters)",
    ),
    TOO_SHORT: (
        SMP_TEXT,
        "a string shorter than its lower bound (coordinator_type: at least 1 symbol)",
    ),
    NOT_ASCII: (SMP_TEXT, 'a string the text says is "ASCII only" holds a character above U+007F'),
    LONE_SURROGATE: (
        JSON_BASIS,
        "a string holds an unpaired UTF-16 surrogate (RFC 8259 section 8.2)",
    ),
    PATTERN_MISMATCH: (
        SMP_TEXT,
        "transfer_note_format does not match ^[0-9A-Za-z.-]{0,8}$ (SMP:544-545)",
    ),
    FORBIDDEN_VALUE: (
        SMP_TEXT,
        'a value the text excludes (status_code "OK" in RejectedTransfer, acquired_amount 0)',
    ),
    BAD_TIMESTAMP: (
        JSON_MAPPING,
        "a date-time that is not an ISO 8601 / RFC 3339 date-time string "
        "naming a real calendar moment",
    ),
    NO_UTC_OFFSET: (
        JSON_MAPPING,
        "a date-time without Z or a +hh:mm offset (a local time names no moment; "
        "marshmallow accepts it)",
    ),
    BAD_DATE: (JSON_MAPPING, "a date that is not YYYY-MM-DD naming a real calendar day"),
    BAD_HEX: (JSON_MAPPING, "a bytes field that is not hexadecimal in one letter case"),
    WRONG_BYTE_LENGTH: (
        SMP_TEXT,
        "debtor_info_sha256 holds neither 0 nor 32 bytes (SMP:1005-1006)",
    ),
    INCONSISTENT: (
        SMP_TEXT,
        "a cross-field rule is broken (the field named is the one the harness blames)",
    ),
    TYPE_MISMATCH: (
        JSON_MAPPING,
        'the body\'s "type" differs from the message type (the STOMP type header)',
    ),
    UNKNOWN_TYPE: (
        JSON_MAPPING,
        "a message type SMP 2.1 does not define (the profile's list is "
        '"non-exhaustive", PROFILE:36, so a node may know more)',
    ),
    BODY_TOO_LARGE: (HARNESS_BOUND, f"the body exceeds {MAX_BODY_BYTES} bytes"),
    NOT_UTF8: (
        JSON_BASIS,
        "the body is not UTF-8 (RFC 8259 section 8.1), or starts with a byte order mark",
    ),
    NOT_JSON: (JSON_BASIS, "the body is not JSON text (NaN and Infinity literals included)"),
    NOT_OBJECT: (JSON_BASIS, "the body is JSON but not an object"),
    NESTED_TOO_DEEP: (
        HARNESS_BOUND,
        "arrays or objects nested deeper than the parser's recursion limit "
        "(about 1000 levels; no SMP message nests at all)",
    ),
    DUPLICATE_KEY: (
        JSON_MAPPING,
        "a member name occurs twice in one object (RFC 8259: SHOULD be unique)",
    ),
}


def reason_basis(reason: str) -> str:
    """Where the rule behind ``reason`` comes from (see :data:`REASONS`)."""
    return REASONS[reason][0]


@dataclass(frozen=True)
class SmpProblem:
    """One broken rule: the field at fault (``type`` for the message type,
    :data:`BODY` for the whole body), a reason from :data:`REASONS`, and a
    human-readable detail."""

    field: str
    reason: str
    detail: str = ""

    @property
    def basis(self) -> str:
        # A problem with the "type" member is ours to define: the SMP text has no such field.
        return JSON_MAPPING if self.field == "type" else reason_basis(self.reason)

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}" + (f" ({self.detail})" if self.detail else "")


# ----------------------------------------------------------------------------- schema tables


@dataclass(frozen=True)
class Field:
    """One field of one message type, with every per-field rule the text gives."""

    name: str
    kind: str  # "int" | "float" | "string" | "date-time" | "date" | "bytes"
    cite: str  # "SMP:<lines>" where the type and rules are stated
    lo: int | float | None = None  # inclusive bounds (int: the int32/int64 range unless narrowed)
    hi: int | float | None = None
    min_len: int = 0
    max_len: int | None = None
    unit: str = "chars"  # "chars" (code points; ASCII symbols) | "utf8-bytes"
    ascii: bool = False
    pattern: str | None = None
    forbidden: tuple[Any, ...] = ()
    byte_lengths: tuple[int, ...] = ()  # bytes fields: allowed decoded lengths


def int64(name: str, cite: str, lo: int = MIN_INT64, hi: int = MAX_INT64) -> Field:
    return Field(name, "int", cite, lo=lo, hi=hi)


def int32(name: str, cite: str, lo: int = MIN_INT32, hi: int = MAX_INT32) -> Field:
    return Field(name, "int", cite, lo=lo, hi=hi)


def float_(name: str, cite: str, lo: float | None = None, hi: float | None = None) -> Field:
    # Every float field of SMP 2.1 is required finite, directly (negligible_amount SMP:143,
    # interest SMP:923-924, interest_rate SMP:929) or through a bounded range (demurrage_rate).
    return Field(name, "float", cite, lo=lo, hi=hi)


def string(
    name: str,
    cite: str,
    max_len: int | None = None,
    *,
    min_len: int = 0,
    unit: str = "chars",
    ascii: bool = False,
    pattern: str | None = None,
    forbidden: tuple[Any, ...] = (),
) -> Field:
    return Field(
        name,
        "string",
        cite,
        min_len=min_len,
        max_len=max_len,
        unit=unit,
        ascii=ascii,
        pattern=pattern,
        forbidden=forbidden,
    )


def date_time(name: str, cite: str) -> Field:
    return Field(name, "date-time", cite)


def date_(name: str, cite: str) -> Field:
    return Field(name, "date", cite)


@dataclass(frozen=True)
class CrossRule:
    """A rule between fields; checked only when every field in ``reads`` is valid."""

    name: str
    reads: tuple[str, ...]
    at_fault: str
    holds: Callable[[Mapping[str, Any]], bool]
    cite: str
    detail: str
    level: str = "MUST"


@dataclass(frozen=True)
class MessageType:
    name: str
    direction: str  # "incoming" (client -> accounting server) | "outgoing"
    cite: str
    fields: tuple[Field, ...]
    rules: tuple[CrossRule, ...] = ()
    should: tuple[CrossRule, ...] = dataclass_field(default=())  # SHOULD-level, not validity

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


# Shared field shapes, each with the lines that define it.
_COORDINATOR_TYPE_CITE = 'SMP:307-309 ("between 1 and 30 symbols, ASCII only")'
_ACCOUNT_ID_CITE = 'SMP:1109-1110 ([#account-id]: "at most 100 symbols, ASCII only")'
_CONFIG_DATA_CITE = "SMP:189-193, 264-265 ([#config-data-limitations]: UTF-8 at most 2000 bytes)"
_NOTE_CITE = "SMP:486-489, 541-542 ([#note-limitations]: UTF-8 at most 500 bytes)"
_NOTE_FORMAT_CITE = "SMP:499-501, 544-545 ([#transfer-note-format]: ^[0-9A-Za-z.-]{0,8}$)"
TRANSFER_NOTE_FORMAT_PATTERN = r"[0-9A-Za-z.-]{0,8}"
CODE_MAX = 30
ACCOUNT_ID_MAX = 100
CONFIG_DATA_MAX_BYTES = 2000
TRANSFER_NOTE_MAX_BYTES = 500
IRI_MAX_CHARS = 200
CONTENT_TYPE_MAX = 100


def _coordinator_type(cite: str = _COORDINATOR_TYPE_CITE) -> Field:
    return string("coordinator_type", cite, CODE_MAX, min_len=1, ascii=True)


def _account_id(name: str, cite: str) -> Field:
    return string(name, f"{cite}; {_ACCOUNT_ID_CITE}", ACCOUNT_ID_MAX, ascii=True)


def _ids(debtor: str, creditor: str) -> tuple[Field, Field]:
    return int64("debtor_id", debtor), int64("creditor_id", creditor)


_MIN_LE_MAX = CrossRule(
    "max-locked-at-least-min-locked",
    ("min_locked_amount", "max_locked_amount"),
    "max_locked_amount",
    lambda m: m["max_locked_amount"] >= m["min_locked_amount"],
    "SMP:359-361",
    'max_locked_amount "MUST be equal or bigger than the value of min_locked_amount"',
)
_DIRECT = CrossRule(
    "direct-coordinator-is-creditor",
    ("coordinator_type", "coordinator_id", "creditor_id"),
    "coordinator_id",
    lambda m: m["coordinator_type"] != "direct" or m["coordinator_id"] == m["creditor_id"],
    "SMP:311-314",
    'for coordinator type "direct", coordinator_id MUST be equal to creditor_id',
)
_ISSUING_ID = CrossRule(
    "issuing-coordinator-is-debtor",
    ("coordinator_type", "coordinator_id", "debtor_id"),
    "coordinator_id",
    lambda m: m["coordinator_type"] != "issuing" or m["coordinator_id"] == m["debtor_id"],
    "SMP:334-337",
    'for coordinator type "issuing", coordinator_id MUST be equal to debtor_id',
)
_ISSUING_ROOT = CrossRule(
    "issuing-sender-is-debtors-account",
    ("coordinator_type", "creditor_id"),
    "creditor_id",
    lambda m: m["coordinator_type"] != "issuing" or m["creditor_id"] == 0,
    "SMP:334-337",
    'for coordinator type "issuing", the creditor_id of the sender MUST be 0',
)
_FAILED_COMMIT = CrossRule(
    "failed-commit-moves-nothing",
    ("status_code", "committed_amount"),
    "committed_amount",
    lambda m: m["status_code"] == "OK" or m["committed_amount"] == 0,
    "SMP:879-880",
    'when status_code is not "OK", committed_amount MUST be zero ([#failed-commit])',
)
_TRANSFER_CHAIN = CrossRule(
    "previous-transfer-is-earlier",
    ("transfer_number", "previous_transfer_number"),
    "previous_transfer_number",
    lambda m: m["previous_transfer_number"] < m["transfer_number"],
    "SMP:1164-1166, 1215-1219, 1507-1510",
    "previous_transfer_number names an earlier transfer, and later transfers MUST have bigger "
    "transfer_numbers, so it is smaller than transfer_number (inferred; swpt schemas check it)",
)

# SHOULD-level advice: a message breaking one is still valid.
_DISMISSED_NOTE = CrossRule(
    "dismissed-transfer-has-empty-note",
    ("committed_amount", "transfer_note"),
    "transfer_note",
    lambda m: m["committed_amount"] != 0 or m["transfer_note"] == "",
    "SMP:496-497",
    "if the transfer is being dismissed, transfer_note SHOULD contain an empty string",
    "SHOULD",
)
_DISMISSED_FORMAT = CrossRule(
    "dismissed-transfer-has-empty-note-format",
    ("committed_amount", "transfer_note_format"),
    "transfer_note_format",
    lambda m: m["committed_amount"] != 0 or m["transfer_note_format"] == "",
    "SMP:503-504",
    "if the transfer is being dismissed, transfer_note_format SHOULD contain an empty string",
    "SHOULD",
)
_DEMURRAGE_FLOOR = CrossRule(
    "demurrage-rate-not-below-minus-50",
    ("demurrage_rate",),
    "demurrage_rate",
    lambda m: m["demurrage_rate"] >= -50,
    "SMP:1027-1028",
    "demurrage_rate SHOULD NOT be smaller than -50",
    "SHOULD",
)
_COMMIT_PERIOD_FLOOR = CrossRule(
    "commit-period-at-least-30-days",
    ("commit_period",),
    "commit_period",
    lambda m: m["commit_period"] >= 2592000,
    "SMP:1038-1040",
    "commit_period SHOULD be at least 2592000 (30 days)",
    "SHOULD",
)
_NOTE_MAX_FLOOR = CrossRule(
    "transfer-note-max-bytes-at-least-150",
    ("transfer_note_max_bytes",),
    "transfer_note_max_bytes",
    lambda m: m["transfer_note_max_bytes"] >= 150,
    "SMP:1050",
    "transfer_note_max_bytes SHOULD NOT be smaller than 150",
    "SHOULD",
)
_NOT_DEBTORS_ACCOUNT = CrossRule(
    "account-transfer-not-for-debtors-account",
    ("creditor_id",),
    "creditor_id",
    lambda m: m["creditor_id"] != 0,
    "SMP:1148-1150",
    '"AccountTransfer messages are not sent for debtors\' accounts (that is: creditor_id = 0)" '
    "(no RFC 2119 keyword: advice)",
    "SHOULD",
)

MESSAGE_TYPES: dict[str, MessageType] = {
    t.name: t
    for t in (
        MessageType(
            "ConfigureAccount",
            "incoming",
            "SMP:127-226",
            (
                *_ids("SMP:134", "SMP:137-139"),
                float_(
                    "negligible_amount", 'SMP:141-143 ("a *finite* non-negative number")', lo=0.0
                ),
                int32("config_flags", "SMP:149"),
                string("config_data", _CONFIG_DATA_CITE, CONFIG_DATA_MAX_BYTES, unit="utf8-bytes"),
                date_time("ts", "SMP:195"),
                int32("seqnum", "SMP:200"),
            ),
        ),
        MessageType(
            "PrepareTransfer",
            "incoming",
            "SMP:294-425",
            (
                *_ids("SMP:301", "SMP:304-305"),
                _coordinator_type(),
                int64("coordinator_id", "SMP:345"),
                int64("coordinator_request_id", "SMP:349"),
                int64("min_locked_amount", 'SMP:355-357 ("MUST be a non-negative number")', lo=0),
                # No lower bound of its own: only ">= min_locked_amount" (SMP:359-361), a cross rule.
                int64("max_locked_amount", "SMP:359-361"),
                _account_id("recipient", "SMP:363-365"),
                date_time("final_interest_rate_ts", "SMP:367-377"),
                int32("max_commit_delay", 'SMP:379-387 ("MUST be a non-negative number")', lo=0),
                date_time("ts", "SMP:389"),
            ),
            (_MIN_LE_MAX, _DIRECT, _ISSUING_ID, _ISSUING_ROOT),
        ),
        MessageType(
            "FinalizeTransfer",
            "incoming",
            "SMP:450-536",
            (
                *_ids("SMP:455", "SMP:458-459"),
                int64("transfer_id", "SMP:461"),
                # "MUST contain the value of the coordinator_type field in the PrepareTransfer" (SMP:466-469):
                # the same bounds, by reference.
                _coordinator_type("SMP:466-469 -> SMP:307-309"),
                int64("coordinator_id", "SMP:471"),
                int64("coordinator_request_id", "SMP:476"),
                int64("committed_amount", 'SMP:481-484 ("MUST be a non-negative number")', lo=0),
                string("transfer_note", _NOTE_CITE, TRANSFER_NOTE_MAX_BYTES, unit="utf8-bytes"),
                string(
                    "transfer_note_format", _NOTE_FORMAT_CITE, pattern=TRANSFER_NOTE_FORMAT_PATTERN
                ),
                date_time("ts", "SMP:506"),
            ),
            (),
            (_DISMISSED_NOTE, _DISMISSED_FORMAT),
        ),
        MessageType(
            "RejectedConfig",
            "outgoing",
            "SMP:604-638",
            (
                *_ids("SMP:609", "SMP:612"),
                date_time("config_ts", "SMP:615"),
                int32("config_seqnum", "SMP:618"),
                int32("config_flags", "SMP:621"),
                # "The value of the negligible_amount field in the rejected message" (SMP:624-626): the
                # rejected message's own rule (SMP:141-143) by reference.
                float_("negligible_amount", "SMP:624-626 -> SMP:141-143", lo=0.0),
                string(
                    "config_data",
                    "SMP:628-630; SMP:264-265",
                    CONFIG_DATA_MAX_BYTES,
                    unit="utf8-bytes",
                ),
                string(
                    "rejection_code",
                    'SMP:632-634 ("between 0 and 30 symbols, ASCII only")',
                    CODE_MAX,
                    ascii=True,
                ),
                date_time("ts", "SMP:636"),
            ),
        ),
        MessageType(
            "RejectedTransfer",
            "outgoing",
            "SMP:641-701",
            (
                *_ids("SMP:646", "SMP:649-650"),
                _coordinator_type("SMP:652-654"),
                int64("coordinator_id", "SMP:656"),
                int64("coordinator_request_id", "SMP:660"),
                string(
                    "status_code",
                    'SMP:666-669 ("between 0 and 30 symbols, ASCII only. The value MUST not be '
                    '"OK"")',
                    CODE_MAX,
                    ascii=True,
                    forbidden=("OK",),
                ),
                int64("total_locked_amount", 'SMP:671-675 ("MUST be a non-negative number")', lo=0),
                date_time("ts", "SMP:677"),
            ),
        ),
        MessageType(
            "PreparedTransfer",
            "outgoing",
            "SMP:704-771",
            (
                *_ids("SMP:710", "SMP:713-714"),
                int64("transfer_id", "SMP:716"),
                _coordinator_type("SMP:721-723"),
                int64("coordinator_id", "SMP:725"),
                int64("coordinator_request_id", "SMP:729"),
                int64("locked_amount", 'SMP:735-737 ("MUST be a non-negative number")', lo=0),
                # "The value of the recipient field in the corresponding PrepareTransfer" (SMP:739-741).
                _account_id("recipient", "SMP:739-741 -> SMP:363-365"),
                date_time("prepared_at", "SMP:743"),
                float_("demurrage_rate", 'SMP:746-750 ("between -100 and 0")', lo=-100.0, hi=0.0),
                date_time("deadline", "SMP:752"),
                date_time("final_interest_rate_ts", "SMP:757-759"),
                date_time("ts", "SMP:761"),
            ),
        ),
        MessageType(
            "FinalizedTransfer",
            "outgoing",
            "SMP:821-880",
            (
                *_ids("SMP:826", "SMP:829-830"),
                int64("transfer_id", "SMP:832"),
                _coordinator_type("SMP:837-839"),
                int64("coordinator_id", "SMP:841"),
                int64("coordinator_request_id", "SMP:845"),
                int64(
                    "committed_amount", 'SMP:851-855 ("MUST always be a non-negative number")', lo=0
                ),
                string(
                    "status_code",
                    'SMP:857-863 ("between 0 and 30 symbols, ASCII only")',
                    CODE_MAX,
                    ascii=True,
                ),
                int64("total_locked_amount", 'SMP:865-869 ("MUST be a non-negative number")', lo=0),
                date_time("prepared_at", "SMP:871"),
                date_time("ts", "SMP:874-877"),
            ),
            (_FAILED_COMMIT,),
        ),
        MessageType(
            "AccountUpdate",
            "outgoing",
            "SMP:883-1069",
            (
                *_ids("SMP:890", "SMP:893-894"),
                date_("creation_date", "SMP:896"),
                date_time("last_change_ts", "SMP:901"),
                int32("last_change_seqnum", "SMP:907"),
                int64("principal", "SMP:914-916"),
                float_("interest", 'SMP:918-924 ("MUST be *finite*")'),
                float_(
                    "interest_rate",
                    'SMP:926-929 ("MUST NOT be smaller than -100, and MUST be *finite*")',
                    lo=-100.0,
                ),
                date_time("last_interest_rate_change_ts", "SMP:935-946"),
                date_time("last_config_ts", "SMP:948-952"),
                int32("last_config_seqnum", "SMP:954-958"),
                float_(
                    "negligible_amount",
                    'SMP:960-965 ("MUST always be a *finite* non-negative number")',
                    lo=0.0,
                ),
                int32("config_flags", "SMP:967"),
                string(
                    "config_data",
                    "SMP:973-977; SMP:264-265",
                    CONFIG_DATA_MAX_BYTES,
                    unit="utf8-bytes",
                ),
                _account_id("account_id", "SMP:979-985"),
                string(
                    "debtor_info_iri",
                    'SMP:987-995 ("at most 200 Unicode characters")',
                    IRI_MAX_CHARS,
                ),
                string(
                    "debtor_info_content_type",
                    'SMP:997-1001 ("at most 100 symbols, ASCII only")',
                    CONTENT_TYPE_MAX,
                    ascii=True,
                ),
                Field(
                    "debtor_info_sha256",
                    "bytes",
                    'SMP:1003-1008 ("exactly 0, or exactly 32 bytes")',
                    byte_lengths=(0, 32),
                ),
                # The transfer_number of an emitted AccountTransfer (positive, SMP:1164) or 0 (SMP:1010-1014).
                int64("last_transfer_number", "SMP:1010-1014 with SMP:1164 (inferred: >= 0)", lo=0),
                date_time("last_transfer_committed_at", "SMP:1016-1021"),
                float_("demurrage_rate", 'SMP:1023-1029 ("between -100 and 0")', lo=-100.0, hi=0.0),
                int32("commit_period", 'SMP:1031-1040 ("MUST be a non-negative number")', lo=0),
                int32(
                    "transfer_note_max_bytes",
                    "SMP:1042-1048 (non-negative, not above the 500 of SMP:541-542)",
                    lo=0,
                    hi=TRANSFER_NOTE_MAX_BYTES,
                ),
                date_time("ts", "SMP:1052"),
                int32("ttl", 'SMP:1056-1059 ("MUST be a non-negative number")', lo=0),
            ),
            (),
            (_DEMURRAGE_FLOOR, _COMMIT_PERIOD_FLOOR, _NOTE_MAX_FLOOR),
        ),
        MessageType(
            "AccountPurge",
            "outgoing",
            "SMP:1121-1141",
            (
                *_ids("SMP:1127", "SMP:1130-1131"),
                date_("creation_date", "SMP:1133"),
                date_time("ts", "SMP:1136"),
            ),
        ),
        MessageType(
            "AccountTransfer",
            "outgoing",
            "SMP:1144-1223",
            (
                *_ids("SMP:1152", "SMP:1155-1156"),
                date_("creation_date", "SMP:1158"),
                int64("transfer_number", 'SMP:1161-1166 ("MUST be a positive number")', lo=1),
                _coordinator_type("SMP:1168-1170"),
                _account_id("sender", "SMP:1172-1175"),
                _account_id("recipient", "SMP:1177-1180"),
                Field(
                    "acquired_amount",
                    "int",
                    'SMP:1182-1187 ("MUST NOT be zero")',
                    lo=MIN_INT64,
                    hi=MAX_INT64,
                    forbidden=(0,),
                ),
                string(
                    "transfer_note",
                    "SMP:1189-1194; SMP:541-542",
                    TRANSFER_NOTE_MAX_BYTES,
                    unit="utf8-bytes",
                ),
                string(
                    "transfer_note_format",
                    "SMP:1196-1201; SMP:544-545",
                    pattern=TRANSFER_NOTE_FORMAT_PATTERN,
                ),
                date_time("committed_at", "SMP:1203"),
                int64("principal", "SMP:1206-1209"),
                date_time("ts", "SMP:1211"),
                # Either 0 or an earlier transfer_number, which is positive (SMP:1215-1219, 1164).
                int64(
                    "previous_transfer_number", "SMP:1215-1219 with SMP:1164 (inferred: >= 0)", lo=0
                ),
            ),
            (_TRANSFER_CHAIN,),
            (_NOT_DEBTORS_ACCOUNT,),
        ),
    )
}

INCOMING_TYPES = tuple(n for n, t in MESSAGE_TYPES.items() if t.direction == "incoming")
OUTGOING_TYPES = tuple(n for n, t in MESSAGE_TYPES.items() if t.direction == "outgoing")

EXTRA_FIELDS_POLICY = "ignored"
"""Members a type does not define are ignored: the SMP text is silent, the
Swaptacular schemas exclude them (``unknown = EXCLUDE``), and refusing them
would shut out later protocol versions that add fields."""

# ----------------------------------------------------------------------------- field checks

_SURROGATE = re.compile("[\ud800-\udfff]")
# RFC 3339 date-time, with the forms marshmallow's ISO parser also reads: seconds may be left
# out, the offset may be +hh, +hhmm or +hh:mm, and " " may stand for "T". Fraction digits are
# bounded so a hostile string cannot make the regex or int() work hard.
_DATE_TIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,12}))?)?"
    r"(Z|[+-]\d{2}(?::?\d{2})?)?\Z",
    re.ASCII,
)
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})\Z", re.ASCII)
_HEX = re.compile(r"(?:[0-9a-f]*|[0-9A-F]*)\Z")
_ANY_HEX = re.compile(r"[0-9a-fA-F]*\Z")
_PATTERNS: dict[str, re.Pattern[str]] = {}


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _valid_day(year: int, month: int, day: int) -> bool:
    try:
        date(year, month, day)  # refuses year 0, month 13, Feb 30...
    except ValueError:
        return False
    return True


def parse_date_time(text: str) -> tuple[str | None, str]:
    """(reason or None, detail) for a date-time string."""
    match = _DATE_TIME.match(text)
    if match is None:
        return BAD_TIMESTAMP, "not an ISO 8601 date-time (YYYY-MM-DDThh:mm:ss[.f](Z|+hh:mm))"
    year, month, day, hour, minute, second, _fraction, offset = match.groups()
    if not _valid_day(int(year), int(month), int(day)):
        return BAD_TIMESTAMP, "no such calendar day"
    # Leap second 60 refused: neither Python nor the Swaptacular schemas can hold it.
    if int(hour) > 23 or int(minute) > 59 or (second is not None and int(second) > 59):
        return BAD_TIMESTAMP, "no such time of day"
    if offset is None:
        return NO_UTC_OFFSET, "no Z or +hh:mm offset"
    if offset != "Z":
        digits = offset[1:].replace(":", "")
        if int(digits[:2]) > 23 or (len(digits) > 2 and int(digits[2:]) > 59):
            return BAD_TIMESTAMP, "no such UTC offset"
    return None, ""


def _check_field(spec: Field, value: Any) -> SmpProblem | None:
    def problem(reason: str, detail: str) -> SmpProblem:
        return SmpProblem(spec.name, reason, detail)

    kind = _json_kind(value)
    if spec.kind == "int":
        if kind != "integer":
            return problem(WRONG_TYPE, f"expected an integer, got {kind}")
        if not spec.lo <= value <= spec.hi:
            return problem(OUT_OF_RANGE, f"{_short(value)} not in [{spec.lo}, {spec.hi}]")
        if value in spec.forbidden:
            return problem(FORBIDDEN_VALUE, f"{value} is not allowed")
        return None
    if spec.kind == "float":
        if kind not in ("integer", "number"):
            return problem(WRONG_TYPE, f"expected a number, got {kind}")
        try:
            number = float(value)
        except OverflowError:  # an integer literal too big for a double
            number = math.inf if value > 0 else -math.inf
        if not math.isfinite(number):
            return problem(NOT_FINITE, f"{value!r} is not finite")
        if (spec.lo is not None and number < spec.lo) or (spec.hi is not None and number > spec.hi):
            return problem(OUT_OF_RANGE, f"{number!r} not in [{spec.lo}, {spec.hi}]")
        return None
    if kind != "string":
        return problem(WRONG_TYPE, f"expected a string, got {kind}")
    if _SURROGATE.search(value):
        return problem(LONE_SURROGATE, "an unpaired UTF-16 surrogate is not a Unicode character")
    if spec.kind == "date-time":
        reason, detail = parse_date_time(value)
        return problem(reason, f"{_short(value)!r}: {detail}") if reason else None
    if spec.kind == "date":
        m = _DATE.match(value)
        if m is None or not _valid_day(*(int(g) for g in m.groups())):
            return problem(BAD_DATE, f"{_short(value)!r} is not a YYYY-MM-DD calendar day")
        return None
    if spec.kind == "bytes":
        if not _ANY_HEX.match(value) or len(value) % 2:
            return problem(BAD_HEX, f"{_short(value)!r} is not hexadecimal")
        if not _HEX.match(value):
            return problem(BAD_HEX, "mixes upper and lower case hex digits")
        if len(value) // 2 not in spec.byte_lengths:
            return problem(
                WRONG_BYTE_LENGTH, f"{len(value) // 2} bytes, allowed {spec.byte_lengths}"
            )
        return None
    # spec.kind == "string"
    if spec.ascii and not value.isascii():
        return problem(NOT_ASCII, "holds a character above U+007F")
    size = len(value.encode("utf-8")) if spec.unit == "utf8-bytes" else len(value)
    unit = (
        "UTF-8 bytes" if spec.unit == "utf8-bytes" else ("symbols" if spec.ascii else "characters")
    )
    if spec.max_len is not None and size > spec.max_len:
        return problem(TOO_LONG, f"{size} {unit}, at most {spec.max_len}")
    if size < spec.min_len:
        return problem(TOO_SHORT, f"{size} {unit}, at least {spec.min_len}")
    if spec.pattern is not None:
        pattern = _PATTERNS.setdefault(spec.pattern, re.compile(spec.pattern))
        if not pattern.fullmatch(value):
            return problem(PATTERN_MISMATCH, f"{_short(value)!r} does not match ^{spec.pattern}$")
    if value in spec.forbidden:
        return problem(FORBIDDEN_VALUE, f"{value!r} is not allowed")
    return None


def _short(value: Any, limit: int = 40) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "..."


# ----------------------------------------------------------------------------- public API


def validate_message(
    type_name: str, obj: Any, *, check_type_member: bool = True
) -> list[SmpProblem]:
    """Every MUST-level problem of ``obj`` as an SMP message of ``type_name``;
    empty when valid. ``obj`` is the parsed JSON body. The body's ``type``
    member must equal ``type_name`` unless ``check_type_member`` is false."""
    message_type = MESSAGE_TYPES.get(type_name)
    if message_type is None:
        return [
            SmpProblem(
                "type", UNKNOWN_TYPE, f"{_short(type_name)!r} is not an SMP 2.1 message type"
            )
        ]
    if not isinstance(obj, dict):
        return [SmpProblem(BODY, NOT_OBJECT, f"got {_json_kind(obj)}")]
    problems: list[SmpProblem] = []
    if check_type_member:
        if "type" not in obj:
            problems.append(SmpProblem("type", MISSING, 'the body has no "type" member'))
        elif not isinstance(obj["type"], str):
            problems.append(
                SmpProblem("type", WRONG_TYPE, f"expected a string, got {_json_kind(obj['type'])}")
            )
        elif obj["type"] != type_name:
            problems.append(
                SmpProblem("type", TYPE_MISMATCH, f"{_short(obj['type'])!r} is not {type_name!r}")
            )
    valid: set[str] = set()
    for spec in message_type.fields:
        if spec.name not in obj:
            problems.append(SmpProblem(spec.name, MISSING, f"{type_name} requires {spec.name}"))
            continue
        found = _check_field(spec, obj[spec.name])
        if found is None:
            valid.add(spec.name)
        else:
            problems.append(found)
    for rule in message_type.rules:
        if valid.issuperset(rule.reads) and not rule.holds(obj):
            problems.append(SmpProblem(rule.at_fault, INCONSISTENT, f"{rule.detail} ({rule.cite})"))
    return problems


def should_problems(type_name: str, obj: Any) -> list[SmpProblem]:
    """SHOULD-level advice the message does not follow (it may still be valid).
    Only rules whose fields are valid are read."""
    message_type = MESSAGE_TYPES.get(type_name)
    if message_type is None or not isinstance(obj, dict):
        return []
    return [
        SmpProblem(rule.at_fault, rule.name, f"{rule.detail} ({rule.cite})")
        for rule in message_type.should
        if all(n in obj and _check_field(message_type.field(n), obj[n]) is None for n in rule.reads)
        and not rule.holds(obj)
    ]


class _DuplicateKey(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, value in pairs:
        if name in result:
            raise _DuplicateKey(name)
        result[name] = value
    return result


def _bounded_int(text: str) -> int:
    # Python refuses to convert integers of more than 4300 digits (a ValueError that would
    # read as "not JSON"). Up to 400 digits the value is exact (so an integer literal in a float
    # field becomes a finite double or overflows to infinity as it should); beyond, it saturates
    # to +-10**400, out of every SMP range with the right sign and no double either.
    if len(text.lstrip("-")) > 400:
        return -(10**400) if text.startswith("-") else 10**400
    return int(text)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_body(body: bytes, *, max_bytes: int = MAX_BODY_BYTES) -> tuple[Any, SmpProblem | None]:
    """(parsed JSON value, None), or (None, the problem) when the body is not
    bounded UTF-8 JSON text with unique member names."""
    if len(body) > max_bytes:
        return None, SmpProblem(BODY, BODY_TOO_LARGE, f"{len(body)} bytes, at most {max_bytes}")
    if body.startswith(b"\xef\xbb\xbf"):
        return None, SmpProblem(
            BODY, NOT_UTF8, "starts with a UTF-8 byte order mark (RFC 8259 section 8.1)"
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        return None, SmpProblem(BODY, NOT_UTF8, f"invalid UTF-8 at byte {error.start}")
    try:
        value = json.loads(
            text,
            object_pairs_hook=_object_pairs,
            parse_int=_bounded_int,
            parse_constant=_refuse_constant,
        )
    except _DuplicateKey as error:
        return None, SmpProblem(
            _short(error.name), DUPLICATE_KEY, f"{_short(error.name)!r} occurs twice"
        )
    except RecursionError:
        return None, SmpProblem(
            BODY, NESTED_TOO_DEEP, "the JSON nests deeper than the parser's recursion limit"
        )
    except ValueError as error:  # json.JSONDecodeError included
        return None, SmpProblem(BODY, NOT_JSON, _short(str(error), 120))
    return value, None


def validate_body(
    type_header: str | None, body: bytes, *, max_bytes: int = MAX_BODY_BYTES
) -> list[SmpProblem]:
    """Problems of a SEND body carrying an SMP message whose STOMP ``type`` header
    is ``type_header``: bounded UTF-8 JSON, an object, its own ``type`` equal to
    the header, then every rule of that type. Empty when valid."""
    if type_header is None:
        return [SmpProblem("type", MISSING, "no STOMP type header")]
    value, problem = parse_body(body, max_bytes=max_bytes)
    if problem is not None:
        return [problem]
    if not isinstance(value, dict):
        return [SmpProblem(BODY, NOT_OBJECT, f"got {_json_kind(value)}")]
    if type_header not in MESSAGE_TYPES:
        return [
            SmpProblem(
                "type", UNKNOWN_TYPE, f"{_short(type_header)!r} is not an SMP 2.1 message type"
            )
        ]
    body_type = value.get("type")
    if isinstance(body_type, str) and body_type != type_header:
        # Checking the fields against either type would report noise; the disagreement is the fault.
        return [
            SmpProblem(
                "type",
                TYPE_MISMATCH,
                f"body type {_short(body_type)!r} differs from the STOMP type header {type_header!r}",
            )
        ]
    return validate_message(type_header, value)


_EXAMPLES: dict[str, dict[str, Any]] = {
    "ConfigureAccount": {
        "type": "ConfigureAccount",
        "debtor_id": 4294967297,
        "creditor_id": 4294967298,
        "negligible_amount": 2.0,
        "config_flags": 0,
        "config_data": "",
        "ts": "2024-05-20T10:00:00+00:00",
        "seqnum": 1,
    },
    "PrepareTransfer": {
        "type": "PrepareTransfer",
        "debtor_id": 4294967297,
        "creditor_id": 4294967298,
        "coordinator_type": "direct",
        "coordinator_id": 4294967298,
        "coordinator_request_id": 1,
        "min_locked_amount": 0,
        "max_locked_amount": 1000,
        "recipient": "4294967299",
        "final_interest_rate_ts": "9999-12-31T23:59:59+00:00",
        "max_commit_delay": 2147483647,
        "ts": "2024-05-20T10:00:00+00:00",
    },
    "FinalizeTransfer": {
        "type": "FinalizeTransfer",
        "debtor_id": 4294967297,
        "creditor_id": 4294967298,
        "transfer_id": 7,
        "coordinator_type": "direct",
        "coordinator_id": 4294967298,
        "coordinator_request_id": 1,
        "committed_amount": 1000,
        "transfer_note": "Invoice 42",
        "transfer_note_format": "",
        "ts": "2024-05-20T10:00:05+00:00",
    },
    "RejectedConfig": {
        "type": "RejectedConfig",
        "debtor_id": 4294967297,
        "creditor_id": 4294967298,
        "config_ts": "2024-05-20T10:00:00+00:00",
        "config_seqnum": 1,
        "config_flags": 0,
        "negligible_amount": 2.0,
        "config_data": "",
        "rejection_code": "CONFIGURATION_IS_NOT_EFFECTUAL",
        "ts": "2024-05-20T10:00:01+00:00",
    },
    "RejectedTransfer": {
        "type": "RejectedTransfer",
        "debtor_id": 4294967297,
        "creditor_id": 4294967298,
        "coordinator_type": "direct",
        "coordinator_id": 4294967298,
        "coordinator_request_id": 1,
        "status_code": "INSUFFICIENT_AVAILABLE_AMOUNT",
        "total_locked_amount": 0,
        "ts": "2024-05-20T10:00:01+00:00",
    },
    "PreparedTransfer": {
        "type": "PreparedTransfer",
        "debtor_id": 4294967297,
        "creditor_id": 4294967298,
        "transfer_id": 7,
        "coordinator_type": "direct",
        "coordinator_id": 4294967298,
        "coordinator_request_id": 1,
        "locked_amount": 1000,
        "recipient": "4294967299",
        "prepared_at": "2024-05-20T10:00:01+00:00",
        "demurrage_rate": -21.5,
        "deadline": "2024-06-19T10:00:01+00:00",
        "final_interest_rate_ts": "9999-12-31T23:59:59+00:00",
        "ts": "2024-05-20T10:00:01+00:00",
    },
    "FinalizedTransfer": {
        "type": "FinalizedTransfer",
        "debtor_id": 4294967297,
        "creditor_id": 4294967298,
        "transfer_id": 7,
        "coordinator_type": "direct",
        "coordinator_id": 4294967298,
        "coordinator_request_id": 1,
        "committed_amount": 1000,
        "status_code": "OK",
        "total_locked_amount": 0,
        "prepared_at": "2024-05-20T10:00:01+00:00",
        "ts": "2024-05-20T10:00:06+00:00",
    },
    "AccountUpdate": {
        "type": "AccountUpdate",
        "debtor_id": 4294967297,
        "creditor_id": 4294967298,
        "creation_date": "2024-05-01",
        "last_change_ts": "2024-05-20T10:00:06+00:00",
        "last_change_seqnum": 3,
        "principal": 9000,
        "interest": 12.5,
        "interest_rate": 2.0,
        "last_interest_rate_change_ts": "1970-01-01T00:00:00+00:00",
        "last_config_ts": "2024-05-20T10:00:00+00:00",
        "last_config_seqnum": 1,
        "negligible_amount": 2.0,
        "config_flags": 0,
        "config_data": "",
        "account_id": "4294967298",
        "debtor_info_iri": "https://example.com/debtors/4294967297/",
        "debtor_info_content_type": "application/vnd.swaptacular.coin-info+json",
        "debtor_info_sha256": "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
        "last_transfer_number": 5,
        "last_transfer_committed_at": "2024-05-20T10:00:06+00:00",
        "demurrage_rate": -50.0,
        "commit_period": 2592000,
        "transfer_note_max_bytes": 500,
        "ts": "2024-05-20T10:00:07+00:00",
        "ttl": 2592000,
    },
    "AccountPurge": {
        "type": "AccountPurge",
        "debtor_id": 4294967297,
        "creditor_id": 4294967298,
        "creation_date": "2024-05-01",
        "ts": "2024-05-20T10:00:00+00:00",
    },
    "AccountTransfer": {
        "type": "AccountTransfer",
        "debtor_id": 4294967297,
        "creditor_id": 4294967298,
        "creation_date": "2024-05-01",
        "transfer_number": 5,
        "coordinator_type": "direct",
        "sender": "4294967298",
        "recipient": "4294967299",
        "acquired_amount": -1000,
        "transfer_note": "Invoice 42",
        "transfer_note_format": "",
        "committed_at": "2024-05-20T10:00:06+00:00",
        "principal": 9000,
        "ts": "2024-05-20T10:00:07+00:00",
        "previous_transfer_number": 4,
    },
}


def example_message(type_name: str) -> dict[str, Any]:
    """A valid message of ``type_name`` (a fresh dict) that also follows every
    SHOULD of the text; creditor ids are above the reserved 0..2^32-1 (SMP:232-234)."""
    return json.loads(json.dumps(_EXAMPLES[type_name]))


def encode_message(obj: Mapping[str, Any]) -> bytes:
    """The JSON body for a message: compact UTF-8, non-ASCII kept as is."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode(
        "utf-8"
    )

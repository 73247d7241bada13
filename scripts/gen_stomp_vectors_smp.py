#!/usr/bin/env python3
"""Generate vectors/stomp/smp.json: SMP 2.1 message bodies, valid and invalid.

Every message is built from fixed values (the examples of
reference_impl/stomp/smp.py and the deterministic mutation catalog of
reference_impl/stomp/smp_strategies.py), so running this again produces a
byte-identical file. Each vector is checked against the reference validator
while it is generated: a valid one must give no problem, an invalid one
exactly the one problem it names (field and reason). tests/stomp/test_smp.py
checks the validator against the committed file and that this script still
reproduces it.

Usage: scripts/gen_stomp_vectors_smp.py [--check]
  --check   write nothing; exit 1 if the committed file differs from what
            this script generates
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from conformance.core.vector_files import write_or_check  # noqa: E402

from reference_impl.stomp import smp  # noqa: E402
from reference_impl.stomp import smp_strategies as ss  # noqa: E402

VECTORS_PATH = REPO_ROOT / "vectors" / "stomp" / "smp.json"
GENERATOR = "scripts/gen_stomp_vectors_smp.py"
SPEC = (
    "swaptacular-messaging-protocol.rst (SMP 2.1, cited SMP:<line>); swaptacular-stomp-transport.txt "
    "(cited PROFILE:<line>); RFC 8259 for JSON"
)

DECISIONS = {
    "serialization": "SMP 2.1 leaves serialization to other documents (SMP:102-107); the profile requires "
    "application/json (PROFILE:51). Bodies are read as one UTF-8 JSON object, following "
    "the maintained Swaptacular schemas (swpt_stomp smp_schemas.py, swpt_pythonlib "
    "protocol_schemas.py).",
    "type_member": 'The body carries "type" equal to the message type, and it must agree with the STOMP '
    "type header (PROFILE:34). The SMP text itself defines no such field.",
    "extra_members": "Members a type does not define are ignored (the text is silent; the Swaptacular "
    "schemas use unknown = EXCLUDE).",
    "integers": "int32 / int64 are JSON numbers without fraction or exponent in the two's-complement range; "
    "1.0 is refused for an integer field (marshmallow would accept it: basis json-mapping).",
    "floats": "Any JSON number, integer literals included; it must be finite (1e400 reads as infinity).",
    "date_time": "ISO 8601 / RFC 3339: YYYY-MM-DD(T| )hh:mm[:ss[.f{1,12}]] then Z, +hh, +hhmm or +hh:mm "
    "(the forms marshmallow's parser reads); an offset is required (no offset: refused, "
    "basis json-mapping, though marshmallow accepts it); leap second 60 refused.",
    "date": "YYYY-MM-DD naming a real day, year 0001 or later.",
    "bytes": "debtor_info_sha256 is hexadecimal in one letter case, 0 or 64 digits, as the Swaptacular "
    "schemas read it.",
    "string_units": '"symbols, ASCII only" counts characters of an ASCII string; config_data and '
    "transfer_note count UTF-8 bytes; debtor_info_iri counts Unicode code points.",
    "unpaired_surrogates": "A string with an unpaired surrogate escape is refused (no UTF-8 form).",
    "duplicate_members": "A member name twice in one object is refused (parsers disagree on which counts).",
    "max_body_bytes": smp.MAX_BODY_BYTES,
}

LAYOUT = {
    "id, description": "name and purpose of the vector",
    "type": "the STOMP type header the body is sent with",
    "body": "the body as text (UTF-8 on the wire); body_hex instead when the bytes are not UTF-8 text "
    "or are too large to show",
    "should": "valid vectors: names of SHOULD-level rules the message does not follow (smp.should_problems); "
    "the message is still valid",
    "field": 'invalid vectors: the field at fault ("type" for the type member or header, "(body)" for the '
    "body as a whole, or a member name for a duplicate key)",
    "reason": "invalid vectors: the one SmpProblem.reason the reference validator reports",
    "basis": "where the rule comes from: smp-text, json, json-mapping, harness-bound (see reasons)",
    "cite": "the lines of the text behind the rule",
    "swpt_divergence": "only where the maintained Swaptacular schemas are known to do otherwise: what they do",
}


def body_of(message: Any) -> str:
    return ss.body_text(message)


# ----------------------------------------------------------------------------- valid


def _at_bound(spec: smp.Field, high: bool) -> Any:
    if spec.kind == "int":
        value = spec.hi if high else spec.lo
        if value in spec.forbidden:
            value = value - 1 if high else value + 1
        return value
    if spec.kind == "float":
        if high:
            return spec.hi if spec.hi is not None else 1.7976931348623157e308
        return spec.lo if spec.lo is not None else -1.7976931348623157e308
    if spec.kind == "date-time":
        return "9999-12-31T23:59:59+00:00" if high else "1970-01-01T00:00:00+00:00"
    if spec.kind == "date":
        return "9999-12-31" if high else "1970-01-01"
    if spec.kind == "bytes":
        return "FF" * max(spec.byte_lengths) if high else ""
    if spec.pattern is not None:
        return "A.b-9" + "z" * 3 if high else ""
    if not high:
        return "x" * spec.min_len
    if spec.unit == "utf8-bytes":
        return "\u00e9" * (spec.max_len // 2)  # exactly max_len bytes, half as many characters
    if spec.ascii:
        return "~" * spec.max_len
    return "\U0001f600" * spec.max_len  # max_len code points, 4 UTF-8 bytes each


def _bounds_message(type_name: str, high: bool) -> dict:
    message = {"type": type_name}
    for spec in smp.MESSAGE_TYPES[type_name].fields:
        message[spec.name] = _at_bound(spec, high)
    if type_name == "RejectedTransfer" and message["status_code"] == "":
        message["status_code"] = ""  # 0 symbols is allowed (SMP:667)
    return ss.repair(type_name, message)


def _with(type_name: str, **changes: Any) -> dict:
    message = smp.example_message(type_name)
    message.update(changes)
    return message


def valid_cases() -> list[dict]:
    cases: list[tuple[str, str, str, Any]] = []  # (id, description, type, message or raw body text)
    for name in smp.MESSAGE_TYPES:
        cases.append((f"example-{name}", f"A typical {name}.", name, smp.example_message(name)))
    for name in smp.MESSAGE_TYPES:
        cases.append(
            (
                f"upper-bounds-{name}",
                f"{name} with every field at its upper bound: int64/int32 "
                "maxima, strings at their longest (counted in their unit), 9999-12-31.",
                name,
                _bounds_message(name, True),
            )
        )
        cases.append(
            (
                f"lower-bounds-{name}",
                f"{name} with every field at its lower bound: int minima, "
                "shortest strings, 1970-01-01.",
                name,
                _bounds_message(name, False),
            )
        )
    cases += [
        (
            "extra-members-ignored",
            "Members the type does not define are ignored, nested ones included.",
            "ConfigureAccount",
            _with("ConfigureAccount", unknown="ignored", extension={"a": [1, 2.5, None]}),
        ),
        (
            "members-in-any-order",
            "Member order does not matter.",
            "AccountPurge",
            dict(reversed(list(smp.example_message("AccountPurge").items()))),
        ),
        (
            "escaped-non-ascii",
            "config_data written with JSON \\u escapes (2000 UTF-8 bytes once decoded: "
            "1000 x U+00E9).",
            "ConfigureAccount",
            json.dumps(
                _with("ConfigureAccount", config_data="\u00e9" * 1000),
                ensure_ascii=True,
                separators=(",", ":"),
            ),
        ),
        (
            "pretty-printed",
            "Whitespace between tokens is JSON.",
            "AccountPurge",
            json.dumps(smp.example_message("AccountPurge"), indent=2),
        ),
        (
            "int64-beyond-2-53",
            "int64 values above 2^53 must survive: JSON parsers that read numbers as "
            "doubles would round them.",
            "ConfigureAccount",
            _with("ConfigureAccount", debtor_id=9007199254740993, creditor_id=-9007199254740993),
        ),
        (
            "float-as-integer-literal",
            "A float field written as an integer literal (0) is a number.",
            "ConfigureAccount",
            _with("ConfigureAccount", negligible_amount=0),
        ),
        (
            "float-exponent",
            "A float field written with an exponent (1E2).",
            "ConfigureAccount",
            json.dumps(
                _with("ConfigureAccount", negligible_amount=1.0), separators=(",", ":")
            ).replace('"negligible_amount":1.0', '"negligible_amount":1E2'),
        ),
        (
            "float-negative-zero",
            "-0.0 is not below 0.",
            "ConfigureAccount",
            _with("ConfigureAccount", negligible_amount=-0.0),
        ),
        (
            "float-subnormal",
            "The smallest positive double.",
            "ConfigureAccount",
            _with("ConfigureAccount", negligible_amount=5e-324),
        ),
        (
            "demurrage-rate-zero",
            "demurrage_rate at 0, the top of -100..0.",
            "PreparedTransfer",
            _with("PreparedTransfer", demurrage_rate=0.0),
        ),
        (
            "interest-rate-minus-100",
            'interest_rate at -100 ("MUST NOT be smaller than -100").',
            "AccountUpdate",
            _with("AccountUpdate", interest_rate=-100.0, interest=-1e300),
        ),
        (
            "date-time-zulu",
            "Z as the UTC offset.",
            "AccountPurge",
            _with("AccountPurge", ts="2024-05-20T10:00:00Z"),
        ),
        (
            "date-time-negative-offset",
            "A negative UTC offset.",
            "AccountPurge",
            _with("AccountPurge", ts="2024-05-20T05:00:00-05:00"),
        ),
        (
            "date-time-microseconds",
            "Six fraction digits, as Python's isoformat writes them.",
            "AccountPurge",
            _with("AccountPurge", ts="2024-05-20T10:00:00.123456+00:00"),
        ),
        (
            "date-time-milliseconds",
            "Three fraction digits, as JavaScript's toISOString writes them.",
            "AccountPurge",
            _with("AccountPurge", ts="2024-05-20T10:00:00.123Z"),
        ),
        (
            "date-time-no-seconds",
            "ISO 8601 allows leaving seconds out; marshmallow reads it.",
            "AccountPurge",
            _with("AccountPurge", ts="2024-05-20T10:00Z"),
        ),
        (
            "date-time-basic-offset",
            "Offset +hhmm (ISO 8601 basic form; marshmallow reads it).",
            "AccountPurge",
            _with("AccountPurge", ts="2024-05-20T15:30:00+0530"),
        ),
        (
            "date-time-space-separator",
            "A space for T (RFC 3339 section 5.6 note; marshmallow reads it).",
            "AccountPurge",
            _with("AccountPurge", ts="2024-05-20 10:00:00+00:00"),
        ),
        (
            "date-leap-day",
            "29 February of a leap year.",
            "AccountPurge",
            _with("AccountPurge", creation_date="2024-02-29"),
        ),
        (
            "sha256-empty",
            "debtor_info_sha256 of 0 bytes.",
            "AccountUpdate",
            _with("AccountUpdate", debtor_info_sha256=""),
        ),
        (
            "sha256-lowercase",
            "debtor_info_sha256 in lowercase hex.",
            "AccountUpdate",
            _with(
                "AccountUpdate",
                debtor_info_sha256="e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
        ),
        (
            "iri-unicode",
            "debtor_info_iri is an IRI: non-ASCII allowed, counted in characters.",
            "AccountUpdate",
            _with(
                "AccountUpdate", debtor_info_iri="https://b\u00fccher.example/\u00e4\u00f6\u00fc/"
            ),
        ),
        (
            "prepare-issuing",
            "An issuing transfer: sender is the debtor's account (creditor_id 0), "
            "coordinator_id is the debtor_id (SMP:334-337).",
            "PrepareTransfer",
            _with(
                "PrepareTransfer",
                coordinator_type="issuing",
                creditor_id=0,
                coordinator_id=4294967297,
            ),
        ),
        (
            "prepare-agent",
            "An agent transfer: coordinator_id is not checked against the message.",
            "PrepareTransfer",
            _with("PrepareTransfer", coordinator_type="agent", coordinator_id=123),
        ),
        (
            "prepare-zero-amounts",
            "min and max locked amounts both 0 (SMP:420-425).",
            "PrepareTransfer",
            _with("PrepareTransfer", min_locked_amount=0, max_locked_amount=0),
        ),
        (
            "prepare-zero-commit-delay",
            "max_commit_delay 0 (non-negative: allowed).",
            "PrepareTransfer",
            _with("PrepareTransfer", min_locked_amount=0, max_locked_amount=0, max_commit_delay=0),
        ),
        (
            "finalized-failed-commit",
            "status_code not OK with committed_amount 0 (SMP:879-880).",
            "FinalizedTransfer",
            _with("FinalizedTransfer", status_code="TIMEOUT", committed_amount=0),
        ),
        (
            "finalized-empty-status",
            'status_code of 0 symbols (allowed: "between 0 and 30").',
            "FinalizedTransfer",
            _with("FinalizedTransfer", status_code="", committed_amount=0),
        ),
        (
            "rejected-empty-status",
            'RejectedTransfer status_code of 0 symbols is not "OK".',
            "RejectedTransfer",
            _with("RejectedTransfer", status_code=""),
        ),
        (
            "rejected-status-ok-lowercase",
            '"ok" is not "OK".',
            "RejectedTransfer",
            _with("RejectedTransfer", status_code="ok"),
        ),
        (
            "account-transfer-first",
            "The first transfer of an account: previous_transfer_number 0.",
            "AccountTransfer",
            _with(
                "AccountTransfer",
                transfer_number=1,
                previous_transfer_number=0,
                acquired_amount=9223372036854775807,
            ),
        ),
        (
            "account-transfer-unknown-sender",
            'Empty sender: "the sender is unknown" (SMP:1174-1175).',
            "AccountTransfer",
            _with("AccountTransfer", sender="", acquired_amount=1),
        ),
        (
            "should-dismissed-with-note",
            "FinalizeTransfer dismissing (committed_amount 0) with a note: valid, "
            "but the note SHOULD be empty (SMP:496-497, 503-504).",
            "FinalizeTransfer",
            _with("FinalizeTransfer", committed_amount=0, transfer_note_format="text"),
        ),
        (
            "should-account-update-floors",
            "AccountUpdate below three SHOULD floors: demurrage_rate -100, "
            "commit_period 0, transfer_note_max_bytes 0 (SMP:1027-1028, 1038-1040, 1050).",
            "AccountUpdate",
            _with(
                "AccountUpdate", demurrage_rate=-100.0, commit_period=0, transfer_note_max_bytes=0
            ),
        ),
        (
            "should-account-transfer-debtors-account",
            "AccountTransfer for creditor_id 0, which the text says "
            "is not sent (SMP:1148-1150), without a MUST.",
            "AccountTransfer",
            _with("AccountTransfer", creditor_id=0),
        ),
    ]
    out = []
    for case_id, description, type_name, message in cases:
        body = message if isinstance(message, str) else body_of(message)
        problems = smp.validate_body(type_name, body.encode("utf-8"))
        assert problems == [], (case_id, problems)
        parsed = json.loads(body)
        should = [p.reason for p in smp.should_problems(type_name, parsed)]
        out.append(
            {
                "id": case_id,
                "description": description,
                "type": type_name,
                "body": body,
                "should": should,
            }
        )
    return out


# ----------------------------------------------------------------------------- invalid

# Each wrong-type, timestamp and date variant is listed in full once (on these fields); elsewhere one
# of each kind stands for the rest, to keep the file readable.
_FULL_VARIANTS = {
    ("ConfigureAccount", "debtor_id"),
    ("ConfigureAccount", "negligible_amount"),
    ("ConfigureAccount", "config_data"),
    ("ConfigureAccount", "ts"),
    ("AccountPurge", "creation_date"),
    ("AccountUpdate", "debtor_info_sha256"),
    ("PrepareTransfer", "coordinator_type"),
    ("FinalizeTransfer", "transfer_note_format"),
}
_SHORT_DATE_TIME = {"missing", "number", "no-offset", "words"}


def _keep(type_name: str, spec: smp.Field, mutation: ss.Mutation, seen_wrong_type: set) -> bool:
    if isinstance(mutation.value, float) and math.isnan(mutation.value):
        return False  # NaN has no JSON form; see body-nan-literal
    if (type_name, spec.name) in _FULL_VARIANTS:
        return True
    if spec.kind == "date-time":
        return mutation.label in _SHORT_DATE_TIME
    if spec.kind == "date":
        return mutation.label in {"missing", "number", "february-30"}
    if mutation.reason == smp.WRONG_TYPE:
        if spec.name in seen_wrong_type:
            return False
        seen_wrong_type.add(spec.name)
    return True


def _cite(type_name: str, field_name: str) -> str:
    message_type = smp.MESSAGE_TYPES[type_name]
    if field_name == "type":
        return "PROFILE:34 (type header); the type member is the Swaptacular JSON mapping"
    return message_type.field(field_name).cite


SWPT_NOTE = (
    "swpt_stomp smp_schemas.py (commit 4e5de85, marshmallow 3.26.2, adapted to SMP 2.1's "
    "final_interest_rate_ts)"
)


def swpt_divergence(case_id: str, type_name: str, field: str, reason: str) -> str | None:
    """What the maintained Swaptacular schemas do instead of refusing, where they differ.
    Observed once with a local copy of those schemas (they are not installable from PyPI);
    every smp-text vector is refused by them and every valid vector accepted."""
    label = case_id.rsplit(".", 1)[-1]
    spec = (
        smp.MESSAGE_TYPES[type_name].field(field)
        if type_name in smp.MESSAGE_TYPES and field in smp.MESSAGE_TYPES[type_name].field_names
        else None
    )
    if (
        reason == smp.WRONG_TYPE
        and spec is not None
        and label in {"string", "fraction", "integral-float"}
    ):
        return (
            f"{SWPT_NOTE} accept it: marshmallow's Integer/Float (strict=False) convert numeric strings, "
            "and Integer truncates 1.5 to 1"
        )
    if reason == smp.NO_UTC_OFFSET:
        return f"{SWPT_NOTE} accept it as a naive datetime"
    if reason == smp.LONE_SURROGATE and spec is not None:
        if spec.unit == "utf8-bytes":
            return (
                f"{SWPT_NOTE} raise UnicodeEncodeError from the byte-length validator (an exception "
                "other than ValidationError)"
            )
        if not spec.ascii and spec.kind == "string" and spec.pattern is None:
            return (
                f"{SWPT_NOTE} accept it (Length counts code points; nothing else checks the string)"
            )
    if reason == smp.DUPLICATE_KEY:
        return f"{SWPT_NOTE} accept it: json.loads keeps the last value"
    if reason == smp.BODY_TOO_LARGE:
        return (
            f"{SWPT_NOTE} accept it: the schemas bound no body size (the STOMP frame bound applies)"
        )
    if case_id == "huge-integer":
        return "json.loads raises ValueError (Python's 4300-digit limit) before any schema sees it"
    if reason == smp.NESTED_TOO_DEEP:
        return "json.loads raises RecursionError before any schema sees it"
    return None


def _invalid_entry(
    case_id: str,
    description: str,
    type_name: str,
    body: str | bytes,
    field: str,
    reason: str,
    cite: str,
) -> dict:
    raw = body if isinstance(body, bytes) else body.encode("utf-8")
    problems = smp.validate_body(type_name, raw)
    assert ss.exactly(problems, field, reason), (case_id, problems)
    entry = {"id": case_id, "description": description, "type": type_name}
    if isinstance(body, bytes):
        entry["body_hex"] = body.hex()
    else:
        entry["body"] = body
    entry.update({"field": field, "reason": reason, "basis": problems[0].basis, "cite": cite})
    divergence = swpt_divergence(case_id, type_name, field, reason)
    if divergence is not None:
        entry["swpt_divergence"] = divergence
    return entry


def invalid_cases() -> list[dict]:
    out: list[dict] = []
    for type_name, message_type in smp.MESSAGE_TYPES.items():
        base = smp.example_message(type_name)
        for mutation in ss.type_mutations(type_name):
            broken = ss.apply_mutation(base, "type", mutation)
            out.append(
                _invalid_entry(
                    f"{type_name}.type.{mutation.label}",
                    f"{type_name} whose type member is {mutation.label}.",
                    type_name,
                    body_of(broken),
                    "type",
                    mutation.reason,
                    _cite(type_name, "type"),
                )
            )
        seen_wrong_type: set[str] = set()
        for spec in message_type.fields:
            for mutation in ss.field_mutations(spec):
                if not _keep(type_name, spec, mutation, seen_wrong_type):
                    continue
                broken = ss.apply_mutation(base, spec.name, mutation)
                shown = (
                    "removed"
                    if mutation.value is ss.DELETE
                    else f"set to {_describe(broken[spec.name])}"
                )
                out.append(
                    _invalid_entry(
                        f"{type_name}.{spec.name}.{mutation.label}",
                        f"{type_name} with {spec.name} {shown}.",
                        type_name,
                        body_of(broken),
                        spec.name,
                        mutation.reason,
                        spec.cite,
                    )
                )
        for rule in message_type.rules:
            broken = dict(base)
            ss.RULE_BREAKERS[rule.name](broken)
            out.append(
                _invalid_entry(
                    f"{type_name}.{rule.name}",
                    f"{type_name} breaking: {rule.detail}.",
                    type_name,
                    body_of(broken),
                    rule.at_fault,
                    smp.INCONSISTENT,
                    rule.cite,
                )
            )
    out += body_cases()
    return out


def _describe(value: Any) -> str:
    if isinstance(value, str) and len(value) > 40:
        return f"a string of {len(value)} characters ({len(value.encode('utf-8', 'surrogatepass'))} UTF-8 bytes)"
    if isinstance(value, float) and math.isinf(value):
        return "1e400" if value > 0 else "-1e400"
    return json.dumps(value, ensure_ascii=True)


_DEPTH = 5000


def body_cases() -> list[dict]:
    purge = body_of(smp.example_message("AccountPurge"))
    filler = smp.MAX_BODY_BYTES + 1 - len(purge) - len(',"padding":""')
    padded = purge[:-1] + ',"padding":"' + "x" * filler + '"}'
    assert len(padded.encode()) == smp.MAX_BODY_BYTES + 1
    return [
        _invalid_entry(
            "body-empty",
            "An empty body.",
            "AccountPurge",
            "",
            smp.BODY,
            smp.NOT_JSON,
            "PROFILE:51 (application/json)",
        ),
        _invalid_entry(
            "body-truncated",
            "JSON cut off before its end.",
            "AccountPurge",
            purge[:-1],
            smp.BODY,
            smp.NOT_JSON,
            "PROFILE:51",
        ),
        _invalid_entry(
            "body-nan-literal",
            "NaN is not JSON (a float field cannot carry it).",
            "ConfigureAccount",
            body_of(smp.example_message("ConfigureAccount")).replace(
                '"negligible_amount":2.0', '"negligible_amount":NaN'
            ),
            smp.BODY,
            smp.NOT_JSON,
            "PROFILE:51; RFC 8259 section 6",
        ),
        _invalid_entry(
            "body-infinity-literal",
            "Infinity is not JSON.",
            "ConfigureAccount",
            body_of(smp.example_message("ConfigureAccount")).replace(
                '"negligible_amount":2.0', '"negligible_amount":Infinity'
            ),
            smp.BODY,
            smp.NOT_JSON,
            "PROFILE:51; RFC 8259 section 6",
        ),
        _invalid_entry(
            "body-single-quotes",
            "Single-quoted strings are not JSON.",
            "AccountPurge",
            purge.replace('"', "'"),
            smp.BODY,
            smp.NOT_JSON,
            "PROFILE:51",
        ),
        _invalid_entry(
            "body-trailing-comma",
            "A trailing comma is not JSON.",
            "AccountPurge",
            purge[:-1] + ",}",
            smp.BODY,
            smp.NOT_JSON,
            "PROFILE:51",
        ),
        _invalid_entry(
            "body-two-values",
            "Two JSON texts one after the other.",
            "AccountPurge",
            purge + purge,
            smp.BODY,
            smp.NOT_JSON,
            "PROFILE:51",
        ),
        _invalid_entry(
            "body-array",
            "A JSON array holding the message.",
            "AccountPurge",
            f"[{purge}]",
            smp.BODY,
            smp.NOT_OBJECT,
            "PROFILE:51; SMP messages have named fields",
        ),
        _invalid_entry(
            "body-string",
            "A JSON string.",
            "AccountPurge",
            json.dumps(purge),
            smp.BODY,
            smp.NOT_OBJECT,
            "PROFILE:51",
        ),
        _invalid_entry(
            "body-null",
            "JSON null.",
            "AccountPurge",
            "null",
            smp.BODY,
            smp.NOT_OBJECT,
            "PROFILE:51",
        ),
        _invalid_entry(
            "body-latin-1",
            "The body in ISO 8859-1, not UTF-8.",
            "ConfigureAccount",
            body_of(_with("ConfigureAccount", config_data="caf\u00e9")).encode("latin-1"),
            smp.BODY,
            smp.NOT_UTF8,
            "RFC 8259 section 8.1",
        ),
        _invalid_entry(
            "body-utf8-bom",
            "A UTF-8 byte order mark before the JSON.",
            "AccountPurge",
            b"\xef\xbb\xbf" + purge.encode(),
            smp.BODY,
            smp.NOT_UTF8,
            "RFC 8259 section 8.1 (MUST NOT add a byte order mark)",
        ),
        _invalid_entry(
            "body-too-large",
            f"A valid message padded to {smp.MAX_BODY_BYTES + 1} bytes with an extra member.",
            "AccountPurge",
            padded,
            smp.BODY,
            smp.BODY_TOO_LARGE,
            "harness bound (smp.MAX_BODY_BYTES)",
        ),
        _invalid_entry(
            "body-nested-too-deep",
            f"An extra member nested {_DEPTH} arrays deep (within the size "
            "bound): refused, not a crash.",
            "AccountPurge",
            purge[:-1] + ',"deep":' + "[" * _DEPTH + "]" * _DEPTH + "}",
            smp.BODY,
            smp.NESTED_TOO_DEEP,
            "harness bound (Python's JSON recursion limit)",
        ),
        _invalid_entry(
            "body-duplicate-member",
            "debtor_id twice with different values.",
            "AccountPurge",
            purge[:-1] + ',"debtor_id":1}',
            "debtor_id",
            smp.DUPLICATE_KEY,
            "RFC 8259 section 4 (names SHOULD be unique)",
        ),
        _invalid_entry(
            "header-body-type-mismatch",
            "A valid AccountPurge body sent with type ConfigureAccount.",
            "ConfigureAccount",
            purge,
            "type",
            smp.TYPE_MISMATCH,
            "PROFILE:34 (the type header gives the message type)",
        ),
        _invalid_entry(
            "header-unknown-type",
            "A type header SMP 2.1 does not define (the profile's list is "
            "non-exhaustive, PROFILE:36: a node may know more types).",
            "PendingBalanceChange",
            purge.replace("AccountPurge", "PendingBalanceChange"),
            "type",
            smp.UNKNOWN_TYPE,
            "PROFILE:36-47",
        ),
        _invalid_entry(
            "huge-integer",
            "An integer of 5000 digits: out of range, read without error.",
            "AccountPurge",
            purge.replace('"debtor_id":4294967297', '"debtor_id":' + "9" * 5000),
            "debtor_id",
            smp.OUT_OF_RANGE,
            "SMP:1127 (int64)",
        ),
        _invalid_entry(
            "float-literal-overflow",
            "1e400 in a float field reads as infinity.",
            "ConfigureAccount",
            body_of(_with("ConfigureAccount", negligible_amount=math.inf)),
            "negligible_amount",
            smp.NOT_FINITE,
            "SMP:141-143",
        ),
    ]


def document() -> dict:
    valid = valid_cases()
    invalid = invalid_cases()
    ids = [case["id"] for case in valid + invalid]
    assert len(ids) == len(set(ids)), "duplicate vector ids"
    return {
        "protocol": "stomp",
        "component": "smp",
        "spec": SPEC,
        "generator": GENERATOR,
        "description": "SMP 2.1 message bodies as carried in STOMP SEND frames. `valid` bodies must be "
        "accepted as their `type`; each `invalid` body breaks exactly one rule, named by "
        "`field` and `reason` as reference_impl/stomp/smp.py reports it. See `decisions` for "
        "the choices the SMP text leaves to a serialization document it does not give.",
        "layout": LAYOUT,
        "decisions": DECISIONS,
        "reasons": {
            reason: {"basis": basis, "meaning": meaning}
            for reason, (basis, meaning) in smp.REASONS.items()
        },
        "message_types": {
            name: {
                "direction": t.direction,
                "cite": t.cite,
                "fields": [f.name for f in t.fields],
                "rules": [{"name": r.name, "field": r.at_fault, "cite": r.cite} for r in t.rules],
                "should": [{"name": r.name, "field": r.at_fault, "cite": r.cite} for r in t.should],
            }
            for name, t in smp.MESSAGE_TYPES.items()
        },
        "valid": valid,
        "invalid": invalid,
    }


def render(doc: dict) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    return write_or_check(__doc__.splitlines()[0], lambda: {VECTORS_PATH: render(document())})


if __name__ == "__main__":
    sys.exit(main())

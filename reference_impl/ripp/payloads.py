"""RIPP payloads: the text's handshake, delta_msg and heartbeat, and the
profile's Schema.t, Delta.t, Schema_negotiation and checkpoint messages.

The OCaml type definitions in ``docs/ripp-profile.md`` (P3) are normative;
each descriptor below is their field-by-field transcription (same names,
same order, same constructor order), so the bytes match what
``[@@deriving bin_io]`` writes.  OCaml strings holding text (names, ids,
errors) are Python ``str``; those holding bytes (keys, encoded values,
digests) are ``bytes``.

:func:`decode_payload` also applies the profile's range rules (P3) that the
bin_prot types cannot carry; a payload breaking one raises
:class:`PayloadError` like an undecodable one.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from . import binprot as bp
from .binprot import (
    BOOL,
    BYTES,
    FLOAT,
    INT,
    INT64,
    TEXT,
    BinProtError,
    List,
    Option,
    Record,
    Tuple,
    Variant,
)
from .envelope import MsgType

PROTOCOL_VERSION = 1
HEARTBEAT_MIN_MS = 10
HEARTBEAT_MAX_MS = 3_600_000
DEFAULT_HEARTBEAT_MS = 5000  # the text: "default every 5 seconds"


class PayloadError(ValueError):
    """A payload that does not decode as its type, or breaks a range rule."""

    def __init__(self, reason: str, offset: int | None = None) -> None:
        super().__init__(reason if offset is None else f"{reason} (byte {offset})")
        self.reason = reason
        self.offset = offset


# --- Schema ---------------------------------------------------------------

_KINDS = ("Int", "Int64", "Float", "Bool", "String", "Option", "List")


@dataclass(frozen=True)
class FieldType:
    kind: str  # one of _KINDS
    inner: Optional["FieldType"] = None

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"unknown field type {self.kind}")
        if (self.kind in ("Option", "List")) != (self.inner is not None):
            raise ValueError(
                f"{self.kind} {'needs' if self.inner is None else 'takes no'} inner type"
            )

    def __str__(self) -> str:
        # OCaml syntax, as check_backward's "type mismatch" error prints it.
        if self.inner is None:
            return self.kind.lower()
        return f"{self.inner} {self.kind.lower()}"

    @classmethod
    def parse(cls, text: str) -> "FieldType":
        """``"int64 option list"`` -> FieldType (the inverse of ``str``)."""
        words = text.split()
        if not words or words[0] not in ("int", "int64", "float", "bool", "string"):
            raise ValueError(f"bad field type {text!r}")
        t = cls(words[0].capitalize() if words[0] != "int64" else "Int64")
        for w in words[1:]:
            if w not in ("option", "list"):
                raise ValueError(f"bad field type {text!r}")
            t = cls(w.capitalize(), t)
        return t

    def bintype(self) -> bp.BinType:
        """The descriptor of a value of this field type."""
        if self.kind == "Option":
            return bp.Option(self.inner.bintype())
        if self.kind == "List":
            return bp.List(self.inner.bintype())
        return {"Int": INT, "Int64": INT64, "Float": FLOAT, "Bool": BOOL, "String": BYTES}[
            self.kind
        ]


@dataclass
class Field:
    field_name: str
    field_type: FieldType
    default: Optional[bytes] = None


@dataclass
class Schema:
    schema_name: str
    version: int
    fields: list[Field] = field(default_factory=list)


FIELD_TYPE_T = Variant(
    "Schema.field_type",
    build=lambda tag, arg: FieldType(_KINDS[tag], arg),
    split=lambda v: (_KINDS.index(v.kind), v.inner),
)
FIELD_TYPE_T.define(
    [(k, None) for k in _KINDS[:5]] + [("Option", FIELD_TYPE_T), ("List", FIELD_TYPE_T)]
)
FIELD_T = Record(
    "Schema.field",
    Field,
    [("field_name", TEXT), ("field_type", FIELD_TYPE_T), ("default", Option(BYTES))],
)
SCHEMA_T = Record(
    "Schema.t", Schema, [("schema_name", TEXT), ("version", INT), ("fields", List(FIELD_T))]
)


def fingerprint(schema: Schema) -> bytes:
    """Profile P4: MD5 hex (32 ASCII bytes) of the schema's bin_prot encoding."""
    return hashlib.md5(bp.encode(SCHEMA_T, schema)).hexdigest().encode("ascii")


# --- Delta.t --------------------------------------------------------------


@dataclass
class FieldValue:
    field: str
    value: bytes


@dataclass
class SetDelta:
    fields: list[FieldValue]


@dataclass
class PatchDelta:
    fields: list[FieldValue]


@dataclass
class RemoveDelta:
    pass


DeltaT = Union[SetDelta, PatchDelta, RemoveDelta]
FIELD_VALUE_T = Record("Delta.field_value", FieldValue, [("field", TEXT), ("value", BYTES)])
_DELTA_CLASSES = (SetDelta, PatchDelta, RemoveDelta)
DELTA_T = Variant(
    "Delta.t",
    build=lambda tag, arg: RemoveDelta() if tag == 2 else _DELTA_CLASSES[tag](arg),
    split=lambda v: (
        _DELTA_CLASSES.index(type(v)),
        None if isinstance(v, RemoveDelta) else v.fields,
    ),
).define([("Set", List(FIELD_VALUE_T)), ("Patch", List(FIELD_VALUE_T)), ("Remove", None)])


# --- messages -------------------------------------------------------------


@dataclass
class Handshake:
    source_worker_id: str
    output_schemas: list[tuple[str, Schema]]
    protocol_version: int = PROTOCOL_VERSION


@dataclass
class DeltaMsg:
    source_output: str
    key: bytes
    delta_bytes: bytes
    sequence_no: int
    watermark_ns: Optional[int] = None


@dataclass
class CheckpointRequest:
    checkpoint_id: int


@dataclass
class SourceState:
    source_output: str
    last_sequence_no: int
    applied_count: int
    state_digest: bytes


@dataclass
class CheckpointAck:
    checkpoint_id: int
    worker_id: str
    sources: list[SourceState]


@dataclass
class Heartbeat:
    worker_id: str
    timestamp_ns: int
    load: float


@dataclass
class SchemaNegotiation:
    ok: bool
    errors: list[str]
    protocol_version: int = PROTOCOL_VERSION
    heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_MS
    worker_id: str = ""


HANDSHAKE_T = Record(
    "Handshake.t",
    Handshake,
    [
        ("source_worker_id", TEXT),
        ("output_schemas", List(Tuple(TEXT, SCHEMA_T))),
        ("protocol_version", INT),
    ],
)
DELTA_MSG_T = Record(
    "Delta_msg.t",
    DeltaMsg,
    [
        ("source_output", TEXT),
        ("key", BYTES),
        ("delta_bytes", BYTES),
        ("sequence_no", INT),
        ("watermark_ns", Option(INT64)),
    ],
)
CHECKPOINT_REQUEST_T = Record("Checkpoint_request.t", CheckpointRequest, [("checkpoint_id", INT)])
SOURCE_STATE_T = Record(
    "Checkpoint_ack.source_state",
    SourceState,
    [
        ("source_output", TEXT),
        ("last_sequence_no", INT),
        ("applied_count", INT),
        ("state_digest", BYTES),
    ],
)
CHECKPOINT_ACK_T = Record(
    "Checkpoint_ack.t",
    CheckpointAck,
    [("checkpoint_id", INT), ("worker_id", TEXT), ("sources", List(SOURCE_STATE_T))],
)
HEARTBEAT_T = Record(
    "Heartbeat.t", Heartbeat, [("worker_id", TEXT), ("timestamp_ns", INT64), ("load", FLOAT)]
)
SCHEMA_NEGOTIATION_T = Record(
    "Schema_negotiation.t",
    SchemaNegotiation,
    [
        ("ok", BOOL),
        ("errors", List(TEXT)),
        ("protocol_version", INT),
        ("heartbeat_interval_ms", INT),
        ("worker_id", TEXT),
    ],
)

PAYLOAD_TYPES: dict[MsgType, bp.Record] = {
    MsgType.HANDSHAKE: HANDSHAKE_T,
    MsgType.DELTA: DELTA_MSG_T,
    MsgType.CHECKPOINT_REQUEST: CHECKPOINT_REQUEST_T,
    MsgType.CHECKPOINT_ACK: CHECKPOINT_ACK_T,
    MsgType.HEARTBEAT: HEARTBEAT_T,
    MsgType.SCHEMA_NEGOTIATION: SCHEMA_NEGOTIATION_T,
}
_TYPE_OF_CLASS = {t.cls: mt for mt, t in PAYLOAD_TYPES.items()}

# Every descriptor by the name vectors/ripp/*.json use for it.
NAMED_TYPES: dict[str, bp.BinType] = {
    t.name: t
    for t in (
        FIELD_TYPE_T,
        FIELD_T,
        SCHEMA_T,
        FIELD_VALUE_T,
        DELTA_T,
        SOURCE_STATE_T,
        *PAYLOAD_TYPES.values(),
    )
}


def msg_type_of(msg: Any) -> MsgType:
    return _TYPE_OF_CLASS[type(msg)]


def encode_payload(msg: Any) -> bytes:
    return bp.encode(PAYLOAD_TYPES[msg_type_of(msg)], msg)


def _check_ranges(msg: Any) -> None:
    """Profile P3's range rules; raise PayloadError naming the broken one."""
    if isinstance(msg, DeltaMsg):
        if msg.sequence_no < 1:
            raise PayloadError(f"sequence_no {msg.sequence_no} below 1")
    elif isinstance(msg, (CheckpointRequest, CheckpointAck)):
        if msg.checkpoint_id < 0:
            raise PayloadError(f"checkpoint_id {msg.checkpoint_id} negative")
    elif isinstance(msg, Heartbeat):
        if not (math.isfinite(msg.load) and 0.0 <= msg.load <= 1.0):
            raise PayloadError(f"load {msg.load!r} outside [0.0, 1.0]")
    elif isinstance(msg, SchemaNegotiation):
        if not HEARTBEAT_MIN_MS <= msg.heartbeat_interval_ms <= HEARTBEAT_MAX_MS:
            raise PayloadError(
                f"heartbeat_interval_ms {msg.heartbeat_interval_ms} outside {HEARTBEAT_MIN_MS}..{HEARTBEAT_MAX_MS}"
            )


def decode_payload(msg_type: int, payload: bytes) -> Any:
    """The message of ``msg_type`` that is exactly ``payload``, range-checked."""
    try:
        t = PAYLOAD_TYPES[MsgType(msg_type)]
    except ValueError:
        raise PayloadError(f"no payload type for message type {msg_type}") from None
    try:
        msg = bp.decode(t, payload)
    except BinProtError as exc:
        raise PayloadError(f"{t.name}: {exc}", exc.offset) from None
    _check_ranges(msg)
    return msg


def decode_delta(data: bytes) -> DeltaT:
    try:
        d = bp.decode(DELTA_T, data)
    except BinProtError as exc:
        raise PayloadError(f"Delta.t: {exc}", exc.offset) from None
    if not isinstance(d, RemoveDelta):
        names = [fv.field for fv in d.fields]
        if len(set(names)) != len(names):
            raise PayloadError("Delta.t names a field twice")
    return d


def encode_delta(d: DeltaT) -> bytes:
    return bp.encode(DELTA_T, d)


# --- JSON schema files ----------------------------------------------------
# The schema registry a node is started with (`--schemas FILE`) and the
# vectors use this form: {"schema_name": "vwap", "version": 2, "fields":
# [{"name": "price", "type": "float", "default": null | "<hex of bin_prot>"}]}.


def schema_from_json(j: dict) -> Schema:
    fields = []
    for f in j["fields"]:
        d = f.get("default")
        fields.append(
            Field(f["name"], FieldType.parse(f["type"]), None if d is None else bytes.fromhex(d))
        )
    return Schema(j["schema_name"], int(j["version"]), fields)


def schema_to_json(s: Schema) -> dict:
    return {
        "schema_name": s.schema_name,
        "version": s.version,
        "fields": [
            {
                "name": f.field_name,
                "type": str(f.field_type),
                "default": None if f.default is None else f.default.hex(),
            }
            for f in s.fields
        ],
    }


_BASE_TYPES = {
    "nat0": bp.NAT0,
    "int": INT,
    "int64": INT64,
    "string": BYTES,
    "float": FLOAT,
    "bool": BOOL,
}


def type_by_name(name: str) -> bp.BinType:
    """The descriptor a vector's ``type`` names: a profile type (``Handshake.t``,
    ``Delta.t``, ``Schema.field_type``...) or an OCaml type expression over
    nat0/int/int64/string/float/bool with postfix ``option``/``list`` and
    pairs ``(a * b)``."""
    name = name.strip()
    if name in NAMED_TYPES:
        return NAMED_TYPES[name]
    if name.startswith("(") and name.endswith(")") and " * " in name:
        return bp.Tuple(*(type_by_name(part) for part in name[1:-1].split(" * ")))
    head, _, last = name.rpartition(" ")
    if head and last == "option":
        return bp.Option(type_by_name(head))
    if head and last == "list":
        return bp.List(type_by_name(head))
    if name in _BASE_TYPES:
        return _BASE_TYPES[name]
    raise ValueError(f"unknown type {name!r}")


# --- values the reference producer generates ---------------------------------------------


def key_bytes(text: str) -> bytes:
    # The text: "key : string (* bin_prot encoded key *)": a symbol, as a bin_prot string.
    out = bytearray()
    bp.write_string(out, text.encode("utf-8"))
    return bytes(out)


def sample_value(field_type: FieldType, i: int) -> bytes:
    """A deterministic value of ``field_type`` for generated delta number ``i``
    (a peer that knows ``i`` can compute the state the deltas build)."""

    def value(t: FieldType) -> Any:
        return {
            "Int": lambda: i,
            "Int64": lambda: i * 1000,
            "Float": lambda: i / 4,
            "Bool": lambda: i % 2 == 1,
            "String": lambda: f"v{i}".encode(),
            "Option": lambda: value(t.inner),
            "List": lambda: [value(t.inner)],
        }[t.kind]()

    return bp.encode(field_type.bintype(), value(field_type))

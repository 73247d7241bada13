#!/usr/bin/env python3
"""Generate vectors/ripp/envelopes.json, binprot.json and payloads.json.

Deterministic: every value is written out below (no clock, no randomness),
so running this again produces byte-identical files.  Each vector is
checked against the reference codec while it is generated (a valid one
decodes to its value and encodes back to its bytes, or to canonical_hex; an
invalid one is refused with its reason).  The format is documented in
vectors/ripp/README.md; tests/ripp/test_vectors.py checks the codec against
the files and that this script still reproduces them; the OCaml peer
(interop/ripp-ocaml, `ripp_peer roundtrip`) checks them with the real
bin_prot.

Usage: scripts/gen_ripp_vectors.py [--check]
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from conformance.core.vector_files import write_or_check  # noqa: E402

from reference_impl.ripp import binprot as bp  # noqa: E402
from reference_impl.ripp.envelope import (  # noqa: E402
    MAX_PAYLOAD,
    ZERO_FINGERPRINT,
    EnvelopeError,
    EnvelopeReader,
    MsgType,
    crc32c,
    decode_envelope,
    encode_envelope,
    make_envelope,
)
from reference_impl.ripp.payloads import (  # noqa: E402
    PAYLOAD_TYPES,
    CheckpointAck,
    CheckpointRequest,
    DeltaMsg,
    Field,
    FieldType,
    FieldValue,
    Handshake,
    Heartbeat,
    PatchDelta,
    PayloadError,
    RemoveDelta,
    Schema,
    SchemaNegotiation,
    SetDelta,
    SourceState,
    decode_delta,
    decode_payload,
    encode_delta,
    encode_payload,
    fingerprint,
    schema_to_json,
    type_by_name,
)
from reference_impl.ripp.schema import check_backward  # noqa: E402
from reference_impl.ripp.session import state_digest  # noqa: E402

VECTORS_DIR = REPO_ROOT / "vectors" / "ripp"
SPEC = (
    "ripp-wire-protocol.txt; docs/ripp-profile.md (profile version 1); specs README, RIPP section"
)
GENERATOR = "scripts/gen_ripp_vectors.py"


def render(document: dict) -> str:
    return json.dumps(document, indent=2) + "\n"


# --- bin_prot ---------------------------------------------------------------

INT_EDGES = [
    (0, "zero"),
    (1, "one"),
    (0x7F, "largest one-byte"),
    (0x80, "smallest int16 class"),
    (0xFF, "0xff"),
    (0x100, "0x100"),
    (0x7FFF, "largest int16 class"),
    (0x8000, "smallest int32 class"),
    (0xFFFF, "0xffff"),
    (0x10000, "0x10000"),
    ((1 << 31) - 1, "largest int32 class"),
    ((1 << 31), "2^31: smallest int64 class"),
    ((1 << 32), "2^32"),
    (bp.OCAML_INT_MAX, "OCaml max_int 2^62-1"),
    (-1, "-1: neg int8"),
    (-2, "-2"),
    (-0x80, "-128: smallest neg int8"),
    (-0x81, "-129: int16 class"),
    (-0x8000, "-32768: smallest int16"),
    (-0x8001, "-32769: int32 class"),
    (-(1 << 31), "-2^31: smallest int32"),
    (-(1 << 31) - 1, "-2^31-1: int64 class"),
    (bp.OCAML_INT_MIN, "OCaml min_int -2^62"),
]
INT64_EXTRA = [
    ((1 << 62), "2^62: beyond OCaml int"),
    (bp.INT64_MAX, "2^63-1: Int64.max_int"),
    (-(1 << 62) - 1, "-2^62-1"),
    (bp.INT64_MIN, "-2^63: Int64.min_int"),
]
NAT0_EDGES = [
    (0, "zero"),
    (0x7F, "largest one-byte"),
    (0x80, "smallest 16-bit class"),
    (0xFFFF, "largest 16-bit class"),
    (0x10000, "smallest 32-bit class"),
    (0xFFFFFFFF, "largest 32-bit class"),
    (1 << 32, "smallest 64-bit class"),
    (bp.OCAML_INT_MAX, "max_int"),
]
FLOAT_BITS = [
    (0x0000000000000000, "0.0"),
    (0x8000000000000000, "-0.0"),
    (0x3FF0000000000000, "1.0"),
    (0xBFF8000000000000, "-1.5"),
    (0x3FB999999999999A, "0.1"),
    (0x7FF0000000000000, "infinity"),
    (0xFFF0000000000000, "neg_infinity"),
    (0x7FF8000000000001, "a NaN (payload kept as bits)"),
    (0x0000000000000001, "smallest subnormal"),
    (0x7FEFFFFFFFFFFFFF, "max_float"),
]


def _float(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def binprot_document() -> dict:
    valid: list[dict] = []
    invalid: list[dict] = []

    def add(type_name: str, value: Any, note: str) -> None:
        t = type_by_name(type_name)
        data = bp.encode(t, value)
        back = bp.decode(t, data)
        assert t.to_json(back) == t.to_json(value), (type_name, value)
        valid.append(
            {
                "id": f"{type_name}: {note}",
                "type": type_name,
                "value": t.to_json(value),
                "hex": data.hex(),
                "canonical": True,
            }
        )

    def noncanonical(type_name: str, hexstr: str, note: str) -> None:
        t = type_by_name(type_name)
        value = bp.decode(t, bytes.fromhex(hexstr))
        canon = bp.encode(t, value).hex()
        assert canon != hexstr
        valid.append(
            {
                "id": f"{type_name}: {note}",
                "type": type_name,
                "value": t.to_json(value),
                "hex": hexstr,
                "canonical": False,
                "canonical_hex": canon,
            }
        )

    def bad(type_name: str, hexstr: str, reason: str, note: str, layer: str = "bin_prot") -> None:
        t = type_by_name(type_name)
        try:
            bp.decode(t, bytes.fromhex(hexstr))
        except bp.BinProtError as exc:
            assert exc.reason == reason, (type_name, hexstr, exc)
            invalid.append(
                {
                    "id": f"{type_name}: {note}",
                    "type": type_name,
                    "hex": hexstr,
                    "reason": reason,
                    "offset": exc.offset,
                    "layer": layer,
                }
            )
            return
        raise AssertionError(f"{type_name} {hexstr} decoded")

    for n, note in NAT0_EDGES:
        add("nat0", n, note)
    for n, note in INT_EDGES:
        add("int", n, note)
    for n, note in INT_EDGES + INT64_EXTRA:
        add("int64", n, note)
    add("string", b"", "empty")
    add("string", b"a", "one byte")
    add("string", bytes(range(256)), "every byte value (length 256: fe 00 01)")
    add("string", b"x" * 127, "length 127: one-byte prefix")
    add("string", b"y" * 128, "length 128: fe 80 00")
    add("string", b"z" * 0x10000, "length 65536: fd prefix")
    for bits, note in FLOAT_BITS:
        add("float", _float(bits), note)
    add("bool", False, "false")
    add("bool", True, "true")
    add("int option", None, "None")
    add("int option", 0, "Some 0")
    add("int option", -129, "Some -129")
    add("int option option", None, "None")
    valid_none_some = bp.Option(bp.Option(bp.INT))
    # Some None and Some (Some 5): the JSON form [null] / [[5]] tells them apart
    for value, note in (([None], "Some None"), ([["5"]], "Some (Some 5)")):
        v = valid_none_some.from_json(value)
        data = bp.encode(valid_none_some, v)
        valid.append(
            {
                "id": f"int option option: {note}",
                "type": "int option option",
                "value": value,
                "hex": data.hex(),
                "canonical": True,
            }
        )
    add("string option", b"", 'Some ""')
    add("int list", [], "empty")
    add("int list", [0, -1, 0x80, -129, 1 << 31], "mixed size classes")
    add("string list", [], "empty")
    add("string list", [b"", b"ab", b""], "empty strings inside")
    add("int64 option list", [None, 1 << 62, None], "options in a list")
    add("float list", [1.0, -0.0], "floats")
    add("(string * int)", (b"key", 300), "pair")
    add("int list list", [[], [1], [2, 3]], "nested lists")
    add("string list", [b"s"] * 200, "200 elements: fe c8 00 count")

    noncanonical("int", "fe0500", "5 in the int16 class (bin_prot reads it)")
    noncanonical("int", "fd05000000", "5 in the int32 class")
    noncanonical("int", "fc0500000000000000", "5 in the int64 class")
    noncanonical("int", "fe80ff", "-128 in the int16 class")
    noncanonical("nat0", "fe0500", "5 in the 16-bit class")
    noncanonical("int64", "fd7f000000", "127 in the int32 class")
    noncanonical("string", "fe0200" + "6869", "length 2 in the 16-bit class")

    bad("int", "", "Buffer_short", "empty input")
    bad("int", "80", "Int_code", "marker 0x80 is no class")
    bad("int", "fb", "Int_code", "marker 0xfb is no class")
    bad("int", "ff", "Buffer_short", "neg int8 marker without its byte")
    bad("int", "ff05", "Neg_int8", "ff followed by a non-negative byte")
    bad("int", "ff7f", "Neg_int8", "ff 7f: 127 is not negative")
    bad("int", "fe05", "Buffer_short", "int16 class cut short")
    bad("int", "fd050000", "Buffer_short", "int32 class cut short")
    bad("int", "fc00000000000000", "Buffer_short", "int64 class cut short")
    bad("int", "fc0000000000000040", "Int_overflow", "2^62 does not fit OCaml's int")
    bad("int", "fcffffffffffffffbf", "Int_overflow", "-2^62-1 does not fit OCaml's int")
    bad("int", "0000", "Trailing", "one byte left after the value", layer="whole-buffer")
    bad("int64", "fb", "Int64_code", "marker 0xfb")
    bad("int64", "ff00", "Neg_int8", "ff 00")
    bad("nat0", "ff", "Nat0_code", "0xff is no nat0 class")
    bad("nat0", "80", "Nat0_code", "0x80")
    bad("nat0", "fc0000000000000040", "Nat0_overflow", "2^62 is above max_int")
    bad("nat0", "fcffffffffffffffff", "Nat0_overflow", "2^64-1")
    bad("nat0", "fd0000", "Buffer_short", "32-bit class cut short")
    bad("string", "0561626364", "Buffer_short", "length 5, 4 bytes follow")
    bad(
        "string",
        "fcffffffffffffff3f",
        "String_too_long",
        "length max_int, above Sys.max_string_length (no allocation)",
    )
    bad(
        "string",
        "fcf8ffffffffffff01",
        "String_too_long",
        "length 2^57-8, one above Sys.max_string_length",
    )
    bad(
        "string",
        "fcf7ffffffffffff01",
        "Buffer_short",
        "length 2^57-9 (the maximum) in a 9-byte buffer (no allocation)",
    )
    bad("string", "fdffffff7f", "Buffer_short", "length 2^31-1, nothing follows")
    bad("bool", "02", "Bool_code", "2 is not a bool")
    bad("bool", "ff", "Bool_code", "0xff is not a bool")
    bad("float", "000000000000f0", "Buffer_short", "7 bytes")
    bad("int option", "02", "Option_code", "option byte 2")
    bad("int option", "01", "Buffer_short", "Some without its value")
    bad("int list", "050102", "Buffer_short", "5 elements claimed, 2 bytes follow")
    bad(
        "int list", "fcffffffffffffff3f", "Buffer_short", "max_int elements claimed (no allocation)"
    )
    bad("string list", "02" + "00", "Buffer_short", "second element missing")

    return {
        "protocol": "ripp",
        "component": "bin_prot",
        "spec": SPEC,
        "generator": GENERATOR,
        "description": "bin_prot edge values: every integer size class at its boundaries for nat0, int (OCaml 63-bit) and int64, negatives, empty strings and lists, options (including Some None), floats by their IEEE bits, pairs. `valid` decode to `value` and encode to `hex` (or to `canonical_hex` where bin_prot reads a non-minimal form the writer never produces); `invalid` are refused with `reason` (bin_prot's ReadError constructor) at byte `offset`. See README.md for the JSON value form.",
        "valid": valid,
        "invalid": invalid,
    }


# --- payloads ---------------------------------------------------------------

F = FieldType
VWAP_V2 = Schema(
    "vwap",
    2,
    [
        Field("symbol", F("String")),
        Field("price", F("Float")),
        Field("volume", F("Int64")),
        Field("venue", F("Option", F("String")), default=b"\x00"),
    ],
)
VWAP_V3 = Schema(
    "vwap",
    3,
    [
        Field("symbol", F("String")),
        Field("price", F("Float")),
        Field("volume_lots", F("Int")),
        Field("venue", F("Option", F("String")), default=b"\x00"),
    ],
)
QUOTES_V1 = Schema(
    "quotes",
    1,
    [
        Field("bid", F("Float")),
        Field("ask", F("Float")),
        Field("sizes", F("List", F("Int"))),
        Field("halted", F("Bool"), default=b"\x00"),
    ],
)
EMPTY_SCHEMA = Schema("empty", 0, [])
DEEP_TYPE = F("Int")
for _ in range(6):
    DEEP_TYPE = F("List", F("Option", DEEP_TYPE))
NESTED_SCHEMA = Schema("nested", 1, [Field("deep", DEEP_TYPE)])

FLOAT = bp.FLOAT
ENC = bp.encode
DELTA_SET = SetDelta(
    [
        FieldValue("symbol", ENC(bp.BYTES, b"AAPL")),
        FieldValue("price", ENC(FLOAT, 189.25)),
        FieldValue("volume", ENC(bp.INT64, 1200)),
    ]
)
DELTA_PATCH = PatchDelta([FieldValue("price", ENC(FLOAT, 189.5))])
DELTA_REMOVE = RemoveDelta()
DELTA_SET_EMPTY = SetDelta([])
DELTA_SET_VENUE = SetDelta(
    [
        FieldValue("symbol", ENC(bp.BYTES, b"GOOG")),
        FieldValue("venue", ENC(bp.Option(bp.BYTES), b"XNAS")),
    ]
)

KEY_AAPL = ENC(bp.BYTES, b"AAPL")  # "bin_prot encoded key": a string key
KEY_GOOG = ENC(bp.BYTES, b"GOOG")


def _state_after(deltas: list[tuple[bytes, Any]]) -> dict:
    from reference_impl.ripp.session import SourceTrack

    track = SourceTrack(VWAP_V2, fingerprint(VWAP_V2))
    for key, d in deltas:
        track.apply(key, d)
    return track


TRACK_123 = _state_after(
    [(KEY_AAPL, DELTA_SET), (KEY_GOOG, DELTA_SET_VENUE), (KEY_AAPL, DELTA_PATCH)]
)

MESSAGES: list[tuple[str, Any]] = [
    ("handshake, one output (the text's vwap/v2)", Handshake("worker-a", [("vwap", VWAP_V2)], 1)),
    (
        "handshake, two outputs",
        Handshake("worker-a", [("vwap", VWAP_V2), ("quotes", QUOTES_V1)], 1),
    ),
    ("handshake, no outputs", Handshake("w", [], 1)),
    (
        "handshake, protocol version 2 (decodes; the consumer refuses it in negotiation)",
        Handshake("worker-a", [("vwap", VWAP_V2)], 2),
    ),
    ("handshake, non-ASCII worker id", Handshake("wörker-∆", [("empty", EMPTY_SCHEMA)], 1)),
    ("delta, Set, no watermark", DeltaMsg("vwap", KEY_AAPL, encode_delta(DELTA_SET), 1, None)),
    (
        "delta, Patch, watermark",
        DeltaMsg("vwap", KEY_AAPL, encode_delta(DELTA_PATCH), 3, 1_700_000_000_000_000_000),
    ),
    (
        "delta, Remove, sequence 0x80 (int16 class)",
        DeltaMsg("vwap", KEY_GOOG, encode_delta(DELTA_REMOVE), 0x80, 0),
    ),
    (
        "delta, Set, sequence 2^31 (int64 class), negative watermark",
        DeltaMsg("vwap", KEY_AAPL, encode_delta(DELTA_SET_EMPTY), 1 << 31, -1),
    ),
    ("checkpoint_request 0", CheckpointRequest(0)),
    ("checkpoint_request 0x8000", CheckpointRequest(0x8000)),
    (
        "checkpoint_ack, nothing applied",
        CheckpointAck(0, "worker-b", [SourceState("vwap", 0, 0, state_digest({}))]),
    ),
    (
        "checkpoint_ack after deltas 1, 2, 2, 1, 3 (Set AAPL, Set GOOG, Patch AAPL)",
        CheckpointAck(
            7,
            "worker-b",
            [
                SourceState("quotes", 0, 0, state_digest({})),
                SourceState("vwap", 3, 3, TRACK_123.digest()),
            ],
        ),
    ),
    ("checkpoint_ack, no sources", CheckpointAck(1, "worker-b", [])),
    ("heartbeat, load 0.0", Heartbeat("worker-a", 0, 0.0)),
    ("heartbeat, load 1.0", Heartbeat("worker-a", 1_700_000_000_123_456_789, 1.0)),
    ("heartbeat, load 0.25", Heartbeat("worker-a", 5_000_000_000, 0.25)),
    ("schema_negotiation ok", SchemaNegotiation(True, [], 1, 5000, "worker-b")),
    ("schema_negotiation ok, 100 ms heartbeats", SchemaNegotiation(True, [], 1, 100, "worker-b")),
    (
        "schema_negotiation refused, the text's example (reader v2, writer v3)",
        SchemaNegotiation(
            False, [f"vwap: {e}" for e in check_backward(VWAP_V2, VWAP_V3)], 1, 5000, "worker-b"
        ),
    ),
    (
        "schema_negotiation refused, version",
        SchemaNegotiation(False, ["unsupported protocol version 2"], 1, 5000, "worker-b"),
    ),
]

VALUES: list[tuple[str, str, Any]] = [
    ("Schema.t", "vwap v2", VWAP_V2),
    ("Schema.t", "vwap v3", VWAP_V3),
    ("Schema.t", "quotes v1 (list and bool fields)", QUOTES_V1),
    ("Schema.t", "no fields", EMPTY_SCHEMA),
    ("Schema.t", "field type nested 12 constructors deep", NESTED_SCHEMA),
    ("Schema.field_type", "Int", F("Int")),
    ("Schema.field_type", "String", F("String")),
    ("Schema.field_type", "Int64 Option List", F("List", F("Option", F("Int64")))),
    ("Delta.t", "Set", DELTA_SET),
    ("Delta.t", "Set, no fields", DELTA_SET_EMPTY),
    ("Delta.t", "Patch", DELTA_PATCH),
    ("Delta.t", "Remove", DELTA_REMOVE),
]


def payloads_document() -> dict:
    messages = []
    for note, msg in MESSAGES:
        mt = next(k for k, t in PAYLOAD_TYPES.items() if t.cls is type(msg))
        t = PAYLOAD_TYPES[mt]
        data = encode_payload(msg)
        assert bp.encode(t, decode_payload(mt, data)) == data
        messages.append(
            {
                "id": f"{t.name}: {note}",
                "msg_type": int(mt),
                "type": t.name,
                "value": t.to_json(msg),
                "hex": data.hex(),
            }
        )
    values = []
    for type_name, note, v in VALUES:
        t = type_by_name(type_name)
        data = bp.encode(t, v)
        assert bp.encode(t, bp.decode(t, data)) == data
        values.append(
            {
                "id": f"{type_name}: {note}",
                "type": type_name,
                "value": t.to_json(v),
                "hex": data.hex(),
            }
        )
    schemas = []
    for name, s in (
        ("vwap v2", VWAP_V2),
        ("vwap v3", VWAP_V3),
        ("quotes v1", QUOTES_V1),
        ("empty", EMPTY_SCHEMA),
    ):
        schemas.append(
            {
                "id": name,
                "schema": schema_to_json(s),
                "schema_hex": ENC(type_by_name("Schema.t"), s).hex(),
                "fingerprint": fingerprint(s).decode("ascii"),
            }
        )
    compat = []
    pairs = [
        ("same schema", VWAP_V2, VWAP_V2),
        ("the text's failing example: reader v2, writer v3", VWAP_V2, VWAP_V3),
        ("reader v3, writer v2", VWAP_V3, VWAP_V2),
        ("writer has extra fields", Schema("vwap", 1, [Field("symbol", F("String"))]), VWAP_V2),
        (
            "reader field with a default, missing in the writer",
            Schema(
                "vwap", 4, VWAP_V2.fields + [Field("note", F("String"), default=ENC(bp.BYTES, b""))]
            ),
            VWAP_V2,
        ),
        ("name mismatch", QUOTES_V1, VWAP_V2),
        ("type mismatch", Schema("vwap", 2, [Field("volume", F("Int"))]), VWAP_V2),
        (
            "duplicate writer field",
            VWAP_V2,
            Schema("vwap", 2, VWAP_V2.fields + [Field("price", F("Float"))]),
        ),
        (
            "invalid reader default",
            Schema("vwap", 2, [Field("flag", F("Bool"), default=b"\x07")]),
            VWAP_V2,
        ),
    ]
    for note, reader, writer in pairs:
        compat.append(
            {
                "id": note,
                "reader": schema_to_json(reader),
                "writer": schema_to_json(writer),
                "errors": check_backward(reader, writer),
            }
        )
    digests = [
        {"id": "empty state", "entries": [], "digest": state_digest({}).hex()},
        {
            "id": "after Set AAPL, Set GOOG, Patch AAPL (vwap v2)",
            "entries": [
                [k.hex(), [[f.hex(), v.hex()] for f, v in sorted(TRACK_123.entries[k].items())]]
                for k in sorted(TRACK_123.entries)
            ],
            "digest": TRACK_123.digest().hex(),
        },
    ]
    invalid = []

    def bad(msg_type: int, hexstr: str, layer: str, note: str) -> None:
        try:
            decode_payload(msg_type, bytes.fromhex(hexstr))
        except PayloadError as exc:
            invalid.append(
                {
                    "id": note,
                    "msg_type": msg_type,
                    "type": PAYLOAD_TYPES[MsgType(msg_type)].name,
                    "hex": hexstr,
                    "layer": layer,
                    "reason": exc.reason,
                }
            )
            return
        raise AssertionError(note)

    def payload(msg: Any) -> str:
        return encode_payload(msg).hex()

    hb_bad_load = Heartbeat("w", 0, 0.0)
    hb_hex = payload(hb_bad_load)
    bad(4, hb_hex[:-16] + struct.pack("<d", 1.5).hex(), "profile", "heartbeat load 1.5")
    bad(4, hb_hex[:-16] + struct.pack("<d", -0.0 - 0.5).hex(), "profile", "heartbeat load -0.5")
    bad(4, hb_hex[:-16] + "000000000000f87f", "profile", "heartbeat load NaN")
    bad(4, hb_hex[:-2], "bin_prot", "heartbeat cut one byte short")
    bad(4, hb_hex + "00", "whole-buffer", "heartbeat with a trailing byte")
    bad(
        1,
        payload(DeltaMsg("vwap", b"k", b"\x02", 1, None))[:-4] + "0000",
        "profile",
        "delta sequence_no 0",
    )
    bad(
        1,
        "0476776170" + "016b" + "0102" + "ff00" + "00",
        "bin_prot",
        "delta, sequence_no ff 00 (Neg_int8)",
    )
    bad(
        1,
        payload(DeltaMsg("vwap", b"k", b"\x02", 1, None))[:-2] + "02",
        "bin_prot",
        "delta watermark option byte 2",
    )
    bad(
        5,
        payload(SchemaNegotiation(True, [], 1, 5000, "b")).replace("01", "02", 1),
        "bin_prot",
        "negotiation ok byte 2",
    )
    bad(
        5,
        payload(SchemaNegotiation(True, [], 1, 5, "b")),
        "profile",
        "negotiation heartbeat interval 5 ms",
    )
    bad(
        5,
        payload(SchemaNegotiation(True, [], 1, 3_600_001, "b")),
        "profile",
        "negotiation heartbeat interval above one hour",
    )
    bad(2, "ff80", "profile", "checkpoint_request -128")
    bad(2, "fc0000000000000040", "bin_prot", "checkpoint_request 2^62 (Int_overflow)")
    # Handshake "w", [("o", {"s", 1, [{"f", <tag>, None}]})], 1
    bad(
        0,
        "0177" + "01" + "016f" + "0173" + "01" + "01" + "0166" + "07" + "00" + "01",
        "bin_prot",
        "handshake, field_type tag 7 (Sum_tag)",
    )
    # a field_type of 33 Option levels: bin_prot reads it, the profile's depth bound refuses it
    ft = "05" * 33 + "00"
    bad(
        0,
        "0177" + "01" + "016f" + "0173" + "01" + "01" + "0166" + ft + "00" + "01",
        "profile",
        "handshake, field_type nested 33 deep",
    )
    bad(
        3,
        payload(CheckpointAck(1, "b", [])) + "00",
        "whole-buffer",
        "checkpoint_ack with a trailing byte",
    )

    delta_invalid = []
    for hexstr, layer, note in (
        ("03", "bin_prot", "Delta.t tag 3 (Sum_tag)"),
        ("00", "bin_prot", "Set without its list"),
        ("0002" + "0178" + "0101" + "0178" + "0102", "profile", "Set naming field x twice"),
        ("0200", "whole-buffer", "Remove with a trailing byte"),
    ):
        try:
            decode_delta(bytes.fromhex(hexstr))
        except PayloadError as exc:
            delta_invalid.append(
                {"id": note, "type": "Delta.t", "hex": hexstr, "layer": layer, "reason": exc.reason}
            )
        else:
            raise AssertionError(note)

    return {
        "protocol": "ripp",
        "component": "payloads",
        "spec": SPEC,
        "generator": GENERATOR,
        "description": "Every payload type of docs/ripp-profile.md P3 (the text's handshake, delta_msg and heartbeat; the profile's Schema.t, Delta.t, Schema_negotiation, Checkpoint_request, Checkpoint_ack), each with its bin_prot bytes; schema fingerprints (P4); check_backward results (P5); applied-state digests (P7); invalid payloads with the layer that refuses them.",
        "messages": messages,
        "values": values,
        "schemas": schemas,
        "check_backward": compat,
        "state_digests": digests,
        "invalid": invalid + delta_invalid,
    }


# --- envelopes ----------------------------------------------------------------

TS = 1_700_000_000_000_000_000


def _env_fields(env) -> dict:
    return {
        "version": env.version,
        "msg_type": env.msg_type,
        "flags": env.flags,
        "sequence": str(env.sequence),
        "timestamp_ns": str(env.timestamp_ns),
        "fingerprint_hex": env.fingerprint.hex(),
        "payload_hex": env.payload.hex(),
    }


def _patch(data: bytes, offset: int, new: bytes, fix_crc: bool) -> bytes:
    b = bytearray(data)
    b[offset : offset + len(new)] = new
    if fix_crc:
        b[-4:] = struct.pack("<I", crc32c(bytes(b[:-4])))
    return bytes(b)


def envelopes_document() -> dict:
    crc = [
        {
            "id": "RFC 3720 B.4 / specs README: ASCII 123456789",
            "data_hex": b"123456789".hex(),
            "crc32c": "e3069283",
        },
        {"id": "empty", "data_hex": "", "crc32c": "00000000"},
        {"id": "RFC 3720 B.4: 32 bytes of zeros", "data_hex": "00" * 32, "crc32c": "8a9136aa"},
        {"id": "RFC 3720 B.4: 32 bytes of 0xff", "data_hex": "ff" * 32, "crc32c": "62a8ab43"},
        {
            "id": "RFC 3720 B.4: 00 01 .. 1f",
            "data_hex": bytes(range(32)).hex(),
            "crc32c": "46dd794e",
        },
        {
            "id": "RFC 3720 B.4: 1f 1e .. 00",
            "data_hex": bytes(range(31, -1, -1)).hex(),
            "crc32c": "113fdb5c",
        },
    ]
    for c in crc:
        assert crc32c(bytes.fromhex(c["data_hex"])) == int(c["crc32c"], 16), c

    valid = []
    by_type = {}
    seq = 0
    for note, msg in MESSAGES:
        mt = next(k for k, t in PAYLOAD_TYPES.items() if t.cls is type(msg))
        if mt in by_type and mt != MsgType.DELTA:
            continue
        seq += 1
        fp = fingerprint(VWAP_V2) if mt == MsgType.DELTA else ZERO_FINGERPRINT
        env = make_envelope(
            mt, encode_payload(msg), sequence=seq, timestamp_ns=TS + seq, fingerprint=fp
        )
        by_type.setdefault(mt, env)
        data = encode_envelope(env)
        assert decode_envelope(data) == env
        valid.append(
            {
                "id": f"{mt.name}: {note}",
                "hex": data.hex(),
                "crc32c": data[-4:][::-1].hex(),
                "envelope": _env_fields(env),
                "payload_type": PAYLOAD_TYPES[mt].name,
            }
        )
    extra = [
        (
            "empty payload (type Checkpoint_request, payload not parsed by the envelope layer)",
            make_envelope(MsgType.CHECKPOINT_REQUEST, b"", sequence=0, timestamp_ns=0),
        ),
        (
            "sequence and timestamp at the int64 extremes",
            make_envelope(
                MsgType.HEARTBEAT,
                encode_payload(Heartbeat("w", -1, 0.5)),
                sequence=(1 << 63) - 1,
                timestamp_ns=-(1 << 63),
            ),
        ),
        (
            "short fingerprint, zero-padded",
            make_envelope(
                MsgType.DELTA,
                encode_payload(MESSAGES[5][1]),
                sequence=9,
                timestamp_ns=TS,
                fingerprint=b"vwap/v2".ljust(32, b"\0"),
            ),
        ),
        (
            "payload of 256 bytes (the benchmark's size)",
            make_envelope(
                MsgType.DELTA,
                bytes(range(256)),
                sequence=2,
                timestamp_ns=TS,
                fingerprint=fingerprint(VWAP_V2),
            ),
        ),
    ]
    for note, env in extra:
        data = encode_envelope(env)
        assert decode_envelope(data) == env
        valid.append(
            {
                "id": note,
                "hex": data.hex(),
                "crc32c": data[-4:][::-1].hex(),
                "envelope": _env_fields(env),
                "payload_type": None,
            }
        )

    base = encode_envelope(by_type[MsgType.HEARTBEAT])
    n = len(base)
    invalid = []

    def bad(note: str, data: bytes, check: str) -> None:
        try:
            decode_envelope(data)
        except EnvelopeError as exc:
            assert exc.check == check, (note, exc)
            invalid.append({"id": note, "hex": data.hex(), "check": check, "reason": exc.reason})
            return
        raise AssertionError(note)

    bad("empty input", b"", "length")
    bad("62 bytes: one short of the minimum", base[:62], "length")
    bad("cut one byte short", base[:-1], "length")
    bad("one byte after the CRC", base + b"\0", "length")
    bad(
        "payload length field negative (-1), CRC fixed",
        _patch(base, 55, struct.pack("<i", -1), True),
        "length",
    )
    bad(
        f"payload length {MAX_PAYLOAD + 1} above the profile's bound, header only",
        _patch(base[:59], 55, struct.pack("<i", MAX_PAYLOAD + 1), False),
        "length",
    )
    bad(
        "payload length 2^31-1, header only",
        _patch(base[:59], 55, struct.pack("<i", 0x7FFFFFFF), False),
        "length",
    )
    bad(
        "length field one more than the payload, CRC fixed",
        _patch(base, 55, struct.pack("<i", n - 63 + 1), True),
        "length",
    )
    bad("bad magic RIPQ, CRC fixed", _patch(base, 0, b"RIPQ", True), "magic")
    bad(
        "bad magic, CRC also wrong (magic is checked first)",
        _patch(base, 0, b"XXXX", False),
        "magic",
    )
    bad(
        "magic byte-swapped (PPIR: an int32 LE write of 0x52495050), CRC fixed",
        _patch(base, 0, b"PPIR", True),
        "magic",
    )
    for offset, what in (
        (0, "magic"),
        (4, "version"),
        (5, "type"),
        (6, "flags"),
        (7, "sequence"),
        (15, "timestamp"),
        (23, "fingerprint"),
        (55, "length"),
        (59, "payload"),
        (n - 5, "payload end"),
        (n - 4, "CRC field"),
        (n - 1, "CRC field last byte"),
    ):
        for bit in (0, 7):
            flipped = bytearray(base)
            flipped[offset] ^= 1 << bit
            flipped = bytes(flipped)
            try:
                decode_envelope(flipped)
            except EnvelopeError as exc:
                check = exc.check
            else:
                raise AssertionError((offset, bit))
            invalid.append(
                {
                    "id": f"bit {bit} flipped at offset {offset} ({what})",
                    "hex": flipped.hex(),
                    "check": check,
                    "reason": "",
                }
            )
            invalid[-1]["reason"] = _reason(flipped)
    bad("version 2, CRC fixed", _patch(base, 4, b"\x02", True), "version")
    bad("version 0, CRC fixed", _patch(base, 4, b"\x00", True), "version")
    bad(
        "version 2 with a wrong CRC (CRC is checked before version)",
        _patch(base, 4, b"\x02", False),
        "crc",
    )
    bad(
        "version 2 and type 9, CRC fixed (version before type)",
        _patch(_patch(base, 4, b"\x02", False), 5, b"\x09", True),
        "version",
    )
    bad("type 6, CRC fixed", _patch(base, 5, b"\x06", True), "type")
    bad("type 255, CRC fixed", _patch(base, 5, b"\xff", True), "type")
    bad("flags 1, CRC fixed", _patch(base, 6, b"\x01", True), "flags")
    bad("flags 0x80, CRC fixed", _patch(base, 6, b"\x80", True), "flags")
    bad("CRC stored big-endian", base[:-4] + base[-4:][::-1], "crc")
    bad(
        "CRC-32 (zlib polynomial) instead of CRC-32C",
        base[:-4] + struct.pack("<I", __import__("zlib").crc32(base[:-4])),
        "crc",
    )

    streams = []

    def stream(
        note: str,
        chunks: list[bytes],
        envelopes: int,
        check: str | None,
        max_payload: int = MAX_PAYLOAD,
    ) -> None:
        r = EnvelopeReader(max_payload)
        got = 0
        failed = None
        for c in chunks:
            try:
                got += len(r.receive_data(c))
            except EnvelopeError as exc:
                got += len(exc.decoded)
                failed = exc.check
                break
        assert (got, failed) == (envelopes, check), (note, got, failed)
        streams.append(
            {
                "id": note,
                "chunks_hex": [c.hex() for c in chunks],
                "max_payload": max_payload,
                "envelopes": envelopes,
                "error_check": check,
            }
        )

    e1 = encode_envelope(by_type[MsgType.HANDSHAKE])
    e2 = encode_envelope(by_type[MsgType.DELTA])
    stream("two envelopes in one chunk", [e1 + e2], 2, None)
    stream("one byte at a time", [bytes([b]) for b in e2], 1, None)
    stream(
        "split inside the header and inside the CRC", [e1[:10], e1[10:-2], e1[-2:] + e2], 2, None
    )
    stream(
        "header claiming 2^31-1 bytes: refused from the 59 header bytes alone",
        [_patch(e2[:59], 55, struct.pack("<i", 0x7FFFFFFF), False)],
        0,
        "length",
    )
    stream(
        "header claiming 1000 bytes with a receiver bound of 512",
        [_patch(e2[:59], 55, struct.pack("<i", 1000), False)],
        0,
        "length",
        max_payload=512,
    )
    stream(
        "good envelope then a corrupted one in the same chunk",
        [e1 + _patch(e2, 70, b"\xee", False)],
        1,
        "crc",
    )
    stream(
        "bad magic after a good envelope",
        [e1, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b"\0" * 40],
        1,
        "magic",
    )

    return {
        "protocol": "ripp",
        "component": "envelope",
        "spec": SPEC,
        "generator": GENERATOR,
        "description": "RIPP envelopes (text: Message Envelope Format; profile P1): one valid envelope of every message type (Delta twice), edge fields, CRC-32C values including the RFC 3720 test values; invalid envelopes each with the first check that refuses it in the order length, magic, crc, version, type, flags; stream cases for EnvelopeReader.",
        "max_payload": MAX_PAYLOAD,
        "check_order": ["length", "magic", "crc", "version", "type", "flags"],
        "crc32c": crc,
        "valid": valid,
        "invalid": invalid,
        "streams": streams,
    }


def _reason(data: bytes) -> str:
    try:
        decode_envelope(data)
    except EnvelopeError as exc:
        return exc.reason
    return ""


def main() -> int:
    return write_or_check(
        __doc__.splitlines()[0],
        lambda: {
            VECTORS_DIR / "envelopes.json": render(envelopes_document()),
            VECTORS_DIR / "binprot.json": render(binprot_document()),
            VECTORS_DIR / "payloads.json": render(payloads_document()),
        },
    )


if __name__ == "__main__":
    sys.exit(main())

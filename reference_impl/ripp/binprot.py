"""A bounded reader and writer of OCaml's bin_prot, driven by type descriptors.

The encoding (``/work/shared/specs/README.md``, section RIPP; checked against
``janestreet/bin_prot`` ``src/read.ml`` and ``src/write.ml``):

* nat0 (lengths): ``00``..``7f`` is the value; ``fe`` + uint16 LE,
  ``fd`` + uint32 LE, ``fc`` + uint64 LE (at most OCaml's max_int, 2^62-1).
* int / int64: as nat0 for the positive classes but signed (``fe`` int16,
  ``fd`` int32, ``fc`` int64), plus ``ff`` + one byte for -128..-1.  The
  writer picks the smallest class (``0x80`` -> ``fe 80 00``,
  ``0x8000`` -> ``fd 00 80 00 00``, ``2^31`` -> ``fc ...``).  An OCaml
  ``int`` is 63 bits: an ``fc`` int outside -2^62 .. 2^62-1 is refused
  (bin_prot: ``Int_overflow``).
* string: nat0 length, the bytes.  list: nat0 count, the elements.
* float: 8 bytes IEEE-754 little-endian.  bool: ``00``/``01``.
* option: ``00`` None, ``01`` then the value.  Records and tuples: the fields
  in order.  Variants (fewer than 256 constructors): the constructor's index
  in declaration order as one byte, then its argument.

Like bin_prot's reader, ours accepts non-minimal integers (``fe 05 00`` is 5)
and refuses ``ff`` followed by a non-negative byte (``Neg_int8``), unknown
marker bytes, bool/option bytes other than 0/1 and variant tags past the
last constructor.  The writer writes the minimal form only.

Bounds: every length is checked against the bytes left before anything is
allocated (a string claiming 2^62 bytes in a 10-byte buffer fails at once;
a list cannot have more elements than bytes left, since every value of our
types takes at least one byte), and variants nest at most
:data:`MAX_DEPTH` deep, so hostile input costs memory proportional to its
own size and a bounded stack.  Errors are :class:`BinProtError` with the
name of bin_prot's ``ReadError`` constructor where one exists.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Sequence

OCAML_INT_MIN = -(1 << 62)
OCAML_INT_MAX = (1 << 62) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
# Profile P3: nesting of variants (Schema.field_type Option/List) is bounded
# so that decoding recursion stays far below Python's stack limit.
MAX_DEPTH = 32
# OCaml's Sys.max_string_length on 64-bit hosts (2^57 - 9)
MAX_STRING_LENGTH = (1 << 57) - 9

_U16 = struct.Struct("<H")
_I16 = struct.Struct("<h")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")


class BinProtError(ValueError):
    """Bytes that are not a value of the expected type."""

    def __init__(self, reason: str, offset: int, detail: str = "") -> None:
        super().__init__(f"{reason} at byte {offset}" + (f": {detail}" if detail else ""))
        self.reason = reason
        self.offset = offset
        self.detail = detail


class Reader:
    __slots__ = ("data", "pos", "end", "depth")

    def __init__(self, data: bytes, pos: int = 0, end: int | None = None) -> None:
        self.data = bytes(data)
        self.pos = pos
        self.end = len(self.data) if end is None else end
        self.depth = 0

    def left(self) -> int:
        return self.end - self.pos

    def take(self, n: int) -> bytes:
        if n > self.end - self.pos:
            raise BinProtError(
                "Buffer_short", self.pos, f"need {n} bytes, {self.end - self.pos} left"
            )
        p = self.pos
        self.pos = p + n
        return self.data[p : p + n]

    def byte(self) -> int:
        if self.pos >= self.end:
            raise BinProtError("Buffer_short", self.pos, "need 1 byte, 0 left")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def nat0(self) -> int:
        start = self.pos
        c = self.byte()
        if c < 0x80:
            return c
        if c == 0xFE:
            return _U16.unpack(self.take(2))[0]
        if c == 0xFD:
            return _U32.unpack(self.take(4))[0]
        if c == 0xFC:
            n = _U64.unpack(self.take(8))[0]
            if n > OCAML_INT_MAX:
                raise BinProtError("Nat0_overflow", start, f"{n} above max_int")
            return n
        raise BinProtError("Nat0_code", start, f"marker byte {c:#04x}")

    def _signed(self, code_error: str, allow_int64: bool, lo: int, hi: int) -> int:
        start = self.pos
        c = self.byte()
        if c < 0x80:
            return c
        if c == 0xFF:
            v = self.byte()
            if v < 0x80:
                # bin_prot's safe_bin_read_neg_int8: the byte must be negative
                raise BinProtError("Neg_int8", start, f"ff followed by non-negative {v:#04x}")
            return v - 256
        if c == 0xFE:
            return _I16.unpack(self.take(2))[0]
        if c == 0xFD:
            return _I32.unpack(self.take(4))[0]
        if c == 0xFC and allow_int64:
            n = _I64.unpack(self.take(8))[0]
            if not lo <= n <= hi:
                raise BinProtError("Int_overflow", start, f"{n} outside {lo}..{hi}")
            return n
        raise BinProtError(code_error, start, f"marker byte {c:#04x}")

    def int(self) -> int:
        return self._signed("Int_code", True, OCAML_INT_MIN, OCAML_INT_MAX)

    def int64(self) -> int:
        return self._signed("Int64_code", True, INT64_MIN, INT64_MAX)

    def string(self) -> bytes:
        start = self.pos
        n = self.nat0()
        if n > MAX_STRING_LENGTH:
            # bin_prot checks Sys.max_string_length before the bytes left
            raise BinProtError("String_too_long", start, f"length {n}")
        if n > self.end - self.pos:
            raise BinProtError(
                "Buffer_short",
                start,
                f"string length {n} beyond the {self.end - self.pos} bytes left",
            )
        return self.take(n)

    def float(self) -> float:
        return _F64.unpack(self.take(8))[0]

    def bool(self) -> bool:
        start = self.pos
        c = self.byte()
        if c == 0:
            return False
        if c == 1:
            return True
        raise BinProtError("Bool_code", start, f"byte {c:#04x}")


# --- writer primitives (minimal forms, as bin_prot's write.ml) -------------


def write_nat0(out: bytearray, n: int) -> None:
    if not 0 <= n <= OCAML_INT_MAX:
        raise ValueError(f"nat0 {n} outside 0..{OCAML_INT_MAX}")
    if n < 0x80:
        out.append(n)
    elif n < 0x10000:
        out.append(0xFE)
        out += _U16.pack(n)
    elif n < 1 << 32:
        out.append(0xFD)
        out += _U32.pack(n)
    else:
        out.append(0xFC)
        out += _U64.pack(n)


def _write_signed(out: bytearray, n: int) -> None:
    if n >= 0:
        if n < 0x80:
            out.append(n)
        elif n < 0x8000:
            out.append(0xFE)
            out += _I16.pack(n)
        elif n < 1 << 31:
            out.append(0xFD)
            out += _I32.pack(n)
        else:
            out.append(0xFC)
            out += _I64.pack(n)
    elif n >= -0x80:
        out.append(0xFF)
        out.append(n + 256)
    elif n >= -0x8000:
        out.append(0xFE)
        out += _I16.pack(n)
    elif n >= -(1 << 31):
        out.append(0xFD)
        out += _I32.pack(n)
    else:
        out.append(0xFC)
        out += _I64.pack(n)


def write_int(out: bytearray, n: int) -> None:
    if not OCAML_INT_MIN <= n <= OCAML_INT_MAX:
        raise ValueError(f"int {n} outside OCaml's 63-bit range")
    _write_signed(out, n)


def write_int64(out: bytearray, n: int) -> None:
    if not INT64_MIN <= n <= INT64_MAX:
        raise ValueError(f"int64 {n} outside the int64 range")
    _write_signed(out, n)


def write_string(out: bytearray, s: bytes) -> None:
    write_nat0(out, len(s))
    out += s


# --- type descriptors -------------------------------------------------------
#
# Each descriptor reads, writes, and converts to/from the JSON form of
# vectors/ripp/README.md (integers as decimal strings, strings as lowercase
# hex, floats as "0x" + 16 hex digits of their IEEE bits, options as null or
# [v], lists and tuples as arrays, records as objects, variants as
# ["Constructor"] or ["Constructor", argument]).


class BinType:
    name = "?"

    def read(self, r: Reader) -> Any:
        raise NotImplementedError

    def write(self, out: bytearray, v: Any) -> None:
        raise NotImplementedError

    def to_json(self, v: Any) -> Any:
        raise NotImplementedError

    def from_json(self, j: Any) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<bin_prot {self.name}>"


class _Nat0(BinType):
    name = "nat0"

    def read(self, r):
        return r.nat0()

    def write(self, out, v):
        write_nat0(out, v)

    def to_json(self, v):
        return str(v)

    def from_json(self, j):
        return int(j)


class _Int(BinType):
    name = "int"

    def read(self, r):
        return r.int()

    def write(self, out, v):
        write_int(out, v)

    def to_json(self, v):
        return str(v)

    def from_json(self, j):
        return int(j)


class _Int64(_Int):
    name = "int64"

    def read(self, r):
        return r.int64()

    def write(self, out, v):
        write_int64(out, v)


class _Bytes(BinType):
    """OCaml ``string`` as Python bytes (keys, encoded values, digests)."""

    name = "string"

    def read(self, r):
        return r.string()

    def write(self, out, v):
        if not isinstance(v, (bytes, bytearray)):
            raise TypeError(f"string field wants bytes, got {type(v).__name__}")
        write_string(out, bytes(v))

    def to_json(self, v):
        return bytes(v).hex()

    def from_json(self, j):
        return bytes.fromhex(j)


class _Text(_Bytes):
    """OCaml ``string`` as Python str (names, ids, error texts).

    surrogateescape keeps any bytes an OCaml peer sends (bin_prot does not
    require UTF-8) and writes them back unchanged.
    """

    def read(self, r):
        return r.string().decode("utf-8", "surrogateescape")

    def write(self, out, v):
        if not isinstance(v, str):
            raise TypeError(f"text field wants str, got {type(v).__name__}")
        write_string(out, v.encode("utf-8", "surrogateescape"))

    def to_json(self, v):
        return v.encode("utf-8", "surrogateescape").hex()

    def from_json(self, j):
        return bytes.fromhex(j).decode("utf-8", "surrogateescape")


class _Float(BinType):
    name = "float"

    def read(self, r):
        return r.float()

    def write(self, out, v):
        out += _F64.pack(float(v))

    def to_json(self, v):
        return "0x%016x" % _U64.unpack(_F64.pack(v))[0]

    def from_json(self, j):
        return _F64.unpack(_U64.pack(int(j, 16)))[0]


class _Bool(BinType):
    name = "bool"

    def read(self, r):
        return r.bool()

    def write(self, out, v):
        out.append(1 if v else 0)

    def to_json(self, v):
        return bool(v)

    def from_json(self, j):
        if not isinstance(j, bool):
            raise ValueError("bool wants true or false")
        return j


NAT0 = _Nat0()
INT = _Int()
INT64 = _Int64()
BYTES = _Bytes()
TEXT = _Text()
FLOAT = _Float()
BOOL = _Bool()


class Option(BinType):
    """``None`` or the value; when the inner type is itself an option, Some v
    is the 1-tuple ``(v,)`` so that Some None and None stay apart."""

    def __init__(self, inner: BinType) -> None:
        self.inner = inner
        self.nested = isinstance(inner, Option)
        self.name = f"{inner.name} option"

    def read(self, r):
        start = r.pos
        c = r.byte()
        if c == 0:
            return None
        if c == 1:
            v = self.inner.read(r)
            return (v,) if self.nested else v
        raise BinProtError("Option_code", start, f"byte {c:#04x}")

    def write(self, out, v):
        if v is None:
            out.append(0)
        else:
            out.append(1)
            self.inner.write(out, v[0] if self.nested else v)

    def to_json(self, v):
        return None if v is None else [self.inner.to_json(v[0] if self.nested else v)]

    def from_json(self, j):
        if j is None:
            return None
        if not isinstance(j, list) or len(j) != 1:
            raise ValueError("option wants null or [value]")
        v = self.inner.from_json(j[0])
        return (v,) if self.nested else v


class List(BinType):
    def __init__(self, inner: BinType) -> None:
        self.inner = inner
        self.name = f"{inner.name} list"

    def read(self, r):
        start = r.pos
        n = r.nat0()
        # Every element takes at least one byte: a count above the bytes left
        # is refused before the loop, so a claimed 2^62 costs nothing.
        if n > r.end - r.pos:
            raise BinProtError(
                "Buffer_short", start, f"list of {n} elements in {r.end - r.pos} bytes"
            )
        read = self.inner.read
        return [read(r) for _ in range(n)]

    def write(self, out, v):
        write_nat0(out, len(v))
        for x in v:
            self.inner.write(out, x)

    def to_json(self, v):
        return [self.inner.to_json(x) for x in v]

    def from_json(self, j):
        return [self.inner.from_json(x) for x in j]


class Tuple(BinType):
    def __init__(self, *items: BinType) -> None:
        self.items = items
        self.name = "(" + " * ".join(t.name for t in items) + ")"

    def read(self, r):
        return tuple(t.read(r) for t in self.items)

    def write(self, out, v):
        if len(v) != len(self.items):
            raise ValueError(f"{self.name} wants {len(self.items)} items")
        for t, x in zip(self.items, v):
            t.write(out, x)

    def to_json(self, v):
        return [t.to_json(x) for t, x in zip(self.items, v)]

    def from_json(self, j):
        if len(j) != len(self.items):
            raise ValueError(f"{self.name} wants {len(self.items)} items")
        return tuple(t.from_json(x) for t, x in zip(self.items, j))


class Record(BinType):
    """An OCaml record; the Python value is ``cls(**fields)`` (a dataclass)."""

    def __init__(
        self, name: str, cls: Callable[..., Any], fields: Sequence[tuple[str, BinType]]
    ) -> None:
        self.name = name
        self.cls = cls
        self.fields = list(fields)

    def read(self, r):
        return self.cls(**{f: t.read(r) for f, t in self.fields})

    def write(self, out, v):
        for f, t in self.fields:
            t.write(out, getattr(v, f))

    def to_json(self, v):
        return {f: t.to_json(getattr(v, f)) for f, t in self.fields}

    def from_json(self, j):
        if set(j) != {f for f, _ in self.fields}:
            raise ValueError(
                f"{self.name} wants fields {[f for f, _ in self.fields]}, got {sorted(j)}"
            )
        return self.cls(**{f: t.from_json(j[f]) for f, t in self.fields})


class Variant(BinType):
    """An OCaml variant with fewer than 256 constructors (tag: one byte).

    ``constructors`` lists ``(name, argument type or None)`` in declaration
    order; ``build(index, arg)`` makes the Python value and
    ``split(value) -> (index, arg)`` takes it apart.  ``define`` fills the
    constructors in later, for recursive types.
    """

    def __init__(
        self, name: str, build: Callable[[int, Any], Any], split: Callable[[Any], tuple[int, Any]]
    ) -> None:
        self.name = name
        self.build = build
        self.split = split
        self.constructors: list[tuple[str, BinType | None]] = []

    def define(self, constructors: Sequence[tuple[str, BinType | None]]) -> "Variant":
        self.constructors = list(constructors)
        return self

    def read(self, r):
        start = r.pos
        tag = r.byte()
        if tag >= len(self.constructors):
            raise BinProtError("Sum_tag", start, f"{self.name} has no constructor {tag}")
        arg_t = self.constructors[tag][1]
        if arg_t is None:
            return self.build(tag, None)
        r.depth += 1
        if r.depth > MAX_DEPTH:
            raise BinProtError("Nesting", start, f"variants nested more than {MAX_DEPTH} deep")
        try:
            return self.build(tag, arg_t.read(r))
        finally:
            r.depth -= 1

    def write(self, out, v):
        tag, arg = self.split(v)
        out.append(tag)
        arg_t = self.constructors[tag][1]
        if arg_t is not None:
            arg_t.write(out, arg)

    def to_json(self, v):
        tag, arg = self.split(v)
        name, arg_t = self.constructors[tag]
        return [name] if arg_t is None else [name, arg_t.to_json(arg)]

    def from_json(self, j):
        names = [n for n, _ in self.constructors]
        if not isinstance(j, list) or not j or j[0] not in names:
            raise ValueError(f"{self.name} wants [constructor, ...] with a constructor of {names}")
        tag = names.index(j[0])
        arg_t = self.constructors[tag][1]
        if (arg_t is None) != (len(j) == 1) or len(j) > 2:
            raise ValueError(f"{self.name}.{j[0]}: wrong arity")
        return self.build(tag, None if arg_t is None else arg_t.from_json(j[1]))


def decode(t: BinType, data: bytes) -> Any:
    """The value of type ``t`` that is exactly ``data`` (bytes left over: error)."""
    r = Reader(data)
    v = t.read(r)
    if r.pos != r.end:
        raise BinProtError("Trailing", r.pos, f"{r.end - r.pos} bytes after the {t.name}")
    return v


def encode(t: BinType, v: Any) -> bytes:
    out = bytearray()
    t.write(out, v)
    return bytes(out)

"""Schema compatibility: ``check_backward(reader, writer)`` and the
consumer's answer to a Handshake (``docs/ripp-profile.md`` P5).

The text shows ``check_backward(reader=v2, writer=v3) FAIL`` answered by
``Schema_negotiation(ok=false, errors=["missing field x"])`` and names no
other error; the profile lists them all, with their exact wording, and this
module produces them in the profile's order.
"""

from __future__ import annotations

from typing import Mapping

from . import binprot as bp
from .payloads import PROTOCOL_VERSION, Handshake, Schema


def _duplicates(schema: Schema) -> list[str]:
    seen: set[str] = set()
    dups: list[str] = []
    for f in schema.fields:
        if f.field_name in seen and f.field_name not in dups:
            dups.append(f.field_name)
        seen.add(f.field_name)
    return dups


def check_backward(reader: Schema, writer: Schema) -> list[str]:
    """Errors that stop data written with ``writer`` being read as ``reader``.

    Empty when compatible.  Writer fields the reader lacks are fine (the
    reader skips them); a reader field the writer lacks needs a default;
    shared fields need the same type; ``version`` is not compared.
    """
    errors: list[str] = []
    if reader.schema_name != writer.schema_name:
        errors.append(
            f"schema name mismatch: reader {reader.schema_name} writer {writer.schema_name}"
        )
    for name in _duplicates(writer) + [
        n for n in _duplicates(reader) if n not in _duplicates(writer)
    ]:
        errors.append(f"duplicate field {name}")
    for f in reader.fields:
        if f.default is not None:
            try:
                bp.decode(f.field_type.bintype(), f.default)
            except bp.BinProtError:
                errors.append(f"invalid default for field {f.field_name}")
    written = {}
    for f in writer.fields:
        written.setdefault(f.field_name, f)
    done: set[str] = set()
    for f in reader.fields:
        if f.field_name in done:
            continue
        done.add(f.field_name)
        w = written.get(f.field_name)
        if w is None:
            if f.default is None:
                errors.append(f"missing field {f.field_name}")
        elif w.field_type != f.field_type:
            errors.append(
                f"type mismatch for field {f.field_name}: reader {f.field_type} writer {w.field_type}"
            )
    return errors


def negotiate(registry: Mapping[str, Schema], handshake: Handshake) -> list[str]:
    """The consumer's error list for ``handshake`` (empty: ok = true)."""
    if handshake.protocol_version != PROTOCOL_VERSION:
        return [f"unsupported protocol version {handshake.protocol_version}"]
    errors: list[str] = []
    seen: set[str] = set()
    for output, writer in handshake.output_schemas:
        if output in seen:
            errors.append(f"{output}: duplicate output")
            continue
        seen.add(output)
        reader = registry.get(output)
        if reader is None:
            errors.append(f"{output}: unknown output")
            continue
        errors.extend(f"{output}: {e}" for e in check_backward(reader, writer))
    return errors

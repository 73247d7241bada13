"""The dataset's columns, derived from :class:`~conformance.core.results.ResultRecord`.

Why derived: ResultRecord is what the harness writes, one JSON line per
case; a hand-written copy of its fields here drifted (the dataset silently
dropped ``depends``, ``errata``, ``blocked_by``, ``start_failure`` and
``prerequisite_only``). Every column list and Spark schema the aggregation
uses is computed from the dataclass's fields and type hints, in the
dataclass's order, so a field added there is a column here.

:data:`SPARK_TYPES` maps each Python type a field may have to its Spark SQL
type; ``X | None`` is ``X`` (every Spark column is nullable). A field of any
other type stops the import (:func:`spark_type`), and
tests/aggregate/test_schema.py checks every field has its column.

No Spark import: the schemas are DDL strings, which Spark's readers take
as they are.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from ..core.results import ResultRecord

SPARK_TYPES: dict[Any, str] = {
    str: "string",
    float: "double",
    int: "bigint",
    bool: "boolean",
    list[str]: "array<string>",
}
"""Python type of a ResultRecord field -> Spark SQL type."""

LEVELS = ("MUST", "SHOULD", "MAY")
ROLES = ("server", "client")
KEY_COLUMNS = ("run_id", "target", "case_id", "peer_implementation")
"""What identifies a record: ingesting it again replaces it."""
PARTITION_COLUMNS = ("month", "protocol")

STORED_AS = {"time": "timestamp"}
"""Record fields the dataset stores with another type than the JSON line's:
``time`` (ISO text in results.jsonl) as a UTC timestamp."""
DERIVED_COLUMNS = {
    "time": ("date", "date"),
}
"""Columns ingest adds, each after the record field named: ``date``, the
run's date (from the run id, else from the record's time)."""
SOURCE_COLUMN = ("source_uri", "string")
"""The results.jsonl the record came from, as Spark names it (last column)."""
RUNS_SCHEMA_DDL = (
    "run_id string, run_dir string, date date, complete boolean, records long, malformed_lines long, "
    "torn_last_line boolean, first_time timestamp, last_time timestamp, implementations array<string>, "
    "protocols array<string>, ingest_id string, ingested_at timestamp, partial boolean"
)
"""The runs table, one row per run (made by ingest, not a record's fields).
``partial``: the run's summary.json says a selection (``--case``, ``-k``)
left cases of a target's suite out; such a run certifies nothing (the
certification matrix passes it over). NULL in rows written before the
column existed, and for runs without a summary: not partial."""


def spark_type(hint: Any) -> str:
    """The Spark SQL type of a field's type hint (``X | None`` as ``X``)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        kinds = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(kinds) == 1:
            return spark_type(kinds[0])
    try:
        return SPARK_TYPES[hint]
    except (KeyError, TypeError):
        raise TypeError(
            f"no Spark type for {hint!r}: add it to conformance.aggregate.schema.SPARK_TYPES"
        ) from None


def record_fields(record_type: type = ResultRecord) -> tuple[tuple[str, str], ...]:
    """(name, Spark SQL type) of each field of a record, in declaration order."""
    hints = typing.get_type_hints(record_type)
    return tuple((f.name, spark_type(hints[f.name])) for f in dataclasses.fields(record_type))


RECORD_FIELDS = record_fields()
"""A results.jsonl line's fields and their types, as ResultRecord writes them."""
RECORD_SCHEMA_DDL = ", ".join(f"{name} {kind}" for name, kind in RECORD_FIELDS)
"""The schema ingest reads results.jsonl lines with (a field a line lacks,
as in files written before the field existed, reads as NULL)."""


def _stored_fields() -> tuple[tuple[str, str], ...]:
    """The data files' columns: the record's (``protocol`` is a partition
    directory, not a column in the files), with the stored types and the
    derived columns, then the source."""
    out: list[tuple[str, str]] = []
    for name, kind in RECORD_FIELDS:
        if name in PARTITION_COLUMNS:
            continue
        out.append((name, STORED_AS.get(name, kind)))
        if name in DERIVED_COLUMNS:
            out.append(DERIVED_COLUMNS[name])
    out.append(SOURCE_COLUMN)
    return tuple(out)


STORED_FIELDS = _stored_fields()
RESULT_COLUMNS = tuple(name for name, _ in STORED_FIELDS)
"""Columns of the dataset's data files, in order (month and protocol are the
partition directories)."""
RESULTS_SCHEMA_DDL = ", ".join(
    f"{name} {kind}"
    for name, kind in STORED_FIELDS + tuple((p, "string") for p in PARTITION_COLUMNS)
)
"""The data files' columns and the partition columns, for reading them.
Reading with this schema, a file written before a column existed (an older
ingest: ``impairment``, ``depends``, ``errata``, ``blocked_by``,
``start_failure``, ``prerequisite_only``) gives NULL for it, whichever file
Spark would have taken its schema from."""

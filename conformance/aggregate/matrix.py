"""``conformance matrix``: compatibility matrices over a window of runs.

The matrices (each written as NAME.csv and NAME.json; ``index.html`` shows
them all):

``requirements``
    implementation and version × requirement (case id): latest verdict and
    pass rate, and for a latest verdict ``blocked`` its root cause
    (``latest_blocked_by``). Only records where the harness itself was the
    peer count: in an interop run a failure may be the other implementation's.
``certification``
    implementation (and version) × protocol: certified when every MUST case
    passed (or was not applicable) and at least one passed, in the latest
    *complete* run of that version (a partial run, ``--case`` or ``-k``, is
    not complete here); ``newest`` marks the version shown in the
    implementation × protocol grid (the one tested most recently, then the
    highest version). Status ``did not start`` when a MUST case ended because
    the target did not start and none failed for its own rule; the root
    causes of blocked MUST cases are listed (``blocked_must_root_causes``).
``interop``
    client implementation × server implementation per protocol, from
    records with ``peer_implementation``: the record's ``role`` is the role
    ``implementation`` played, the peer played the other one.
``flaky``
    a case both passed and failed (or errored) for the same implementation,
    version, protocol and peer; being blocked, or the target not starting,
    is no failure of the case's own rule, so it does not make a case flaky.
``trends``
    per night (the run's date) and implementation: verdict counts and runs.

Every matrix has the column ``network``: ``clean`` for runs on clean
loopback, else the impairment profile the run went through (``certify
--impair``; the record's ``impairment`` without its seed, e.g. ``fragment``
or ``delay:ms=200,jitter=50``), and groups by it: a node certified on clean
loopback and failing under ``fragment`` has a row of each
(docs/impairment.md).

A record's verdict is its outcome, except that an ``error`` whose target
did not start (``start_failure``) is ``did_not_start``, kept apart from a
rule's ``error``. Pass rate everywhere is passed / (passed + failed + error
+ did_not_start + blocked): not applicable is not a verdict, and a blocked
case (a prerequisite did not pass) or one whose target did not start did
not pass. Every matrix counts ``blocked`` and ``did_not_start`` in columns
of their own, apart from ``failed`` and ``error``; certification needs
neither for any MUST case.

The window: ``--since``/``--until`` bound the run date (inclusive), and
``--last-runs N`` keeps, for each implementation, its N most recent runs in
that range (by the runs table of the dataset).

Why it is computed this way: the dataset may hold tens of millions of
records and the job must run in a 2 GB driver on 2 cores. So every matrix
derives from three aggregations over the records, each with numeric
aggregates only (Spark's fast hash aggregation; a string or struct
"latest" would force a sort of every record): per case (requirements,
flaky), per run (certification, interop, trends) and over the few failed
records (the case lists). "Latest verdict" is the maximum of one number,
time in ms * 256 + verdict * 32 + level * 8 + the basis of the level, so
ties resolve the same way every
time; the latest blocked record's root cause (a string) comes from a
fourth aggregation over the blocked records alone. Every file is sorted on its key columns, with fixed number formats:
the files are byte-identical whichever Spark ran the job (local or a
standalone cluster) and however it split the work. The big requirements
matrix is written by Spark; the small ones are collected in one job, each
row as the CSV and JSON line Spark's own writers' generators make
(``to_csv``/``to_json``), sorted in Python and written by it: the same
bytes, without the fixed cost of a Spark job per file.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from datetime import date
from pathlib import Path
from typing import Any

from .dataset import read_data_files, read_results, read_runs
from .errors import IngestError, Progress
from .html import render
from .tables import (
    CLEAN,
    COUNTED,
    DID_NOT_START,
    DID_NOT_START_STATUS,
    NOT_PASSED,
    PAGE_VERSIONS,
    Matrix,
    Window,
)
from .versions import list_partitions, require_dataset

__all__ = ["MATRICES", "Matrix", "Window", "build", "run", "select_window"]

MATRICES = ("requirements", "certification", "interop", "flaky", "trends")
TS_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
OUTCOME_CODES = ("passed", "not_applicable", "blocked", DID_NOT_START, "failed", "error")
"""Index = code in the latest-verdict number; on a tie in time the worse
verdict wins (a rule's failure outranks a target that did not start)."""
LEVEL_CODES = ("MAY", "SHOULD", "MUST")
BASIS_CODES = ("keyword", "plain-words", "wire-format", "profile", "erratum", "inference")
"""The basis of a level (conformance.core.requirements.BasisKind), as its
kind alone: records written before the field had it are keyword."""
FLAKY_PAGE_ROWS = 150
"""The flakiest cases the page lists; the CSV has all."""
MAX_PUSHED_RUN_IDS = 2000
"""Up to this many runs, ``--last-runs`` also filters the records by run id
(cheap in the scan); beyond it the plan's IN list would cost more than it saves."""
BLOCKED_BY_MESSAGE = r"^blocked by (\S+)"
"""The root cause a blocked record's message names (conformance.core.results.blocked_by):
records written before ``blocked_by`` existed have only the message."""
EVIDENCE_COLUMNS = ("message", "trace_file", "citation", "source_uri")
"""Record fields the page shows for a cell's latest record: what the node
did, the trace beside its run's results.jsonl (source_uri), the citation."""


# ------------------------------------------------------------------ window


def _months(first: date, last: date) -> list[str]:
    """Every month (YYYY-MM) from ``first``'s to ``last``'s, both included."""
    out, (year, month) = [], (first.year, first.month)
    while (year, month) <= (last.year, last.month):
        out.append(f"{year:04d}-{month:02d}")
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return out


def last_runs(
    spark: Any, dataset: str | os.PathLike, window: Window
) -> tuple[list[tuple[str, str]], list[str]]:
    """For ``--last-runs N``: the (implementation, run_id) pairs to keep and
    the months their records lie in, from the runs table alone (one row per
    run), so that the records are read only from those months.

    A record's date is its run's date (from the run id), else its own
    time's: a run's records lie between its ``date`` (their earliest) and
    the day of its ``last_time``."""
    from pyspark.sql import Window as W
    from pyspark.sql import functions as F

    runs = read_runs(spark, dataset).where(F.col("date").isNotNull())
    if window.since:
        runs = runs.where(F.col("date") >= F.lit(window.since))
    if window.until:
        runs = runs.where(F.col("date") <= F.lit(window.until))
    per_impl = runs.select(
        "run_id",
        "first_time",
        "date",
        F.to_date("last_time").alias("last_date"),
        F.explode("implementations").alias("implementation"),
    )
    order = W.partitionBy("implementation").orderBy(
        F.col("first_time").desc(), F.col("run_id").desc()
    )
    kept = (
        per_impl.withColumn("_n", F.row_number().over(order))
        .where(F.col("_n") <= window.last_runs)
        .select("implementation", "run_id", "date", "last_date")
        .collect()
    )
    months = sorted({m for r in kept for m in _months(r.date, max(r.date, r.last_date or r.date))})
    return sorted({(r.implementation, r.run_id) for r in kept}), months


def read_months(spark: Any, dataset: str | os.PathLike, months: set[str] | None) -> Any:
    """The current version's records of only these months (all if None).

    The month directories are named to the reader: Spark then lists and
    opens only their files (``inputFiles()`` shows it), where a filter on the
    partition column would still list the whole history first."""
    if months is None:
        return read_results(spark, dataset)
    root = require_dataset(dataset) / "results"
    dirs = sorted(
        {str(path.parent) for (month, _), path in list_partitions(root).items() if month in months}
    )
    if not dirs:  # nothing in the window: the empty frame still has the columns
        from pyspark.sql import functions as F

        return read_results(spark, dataset).where(F.lit(False))
    return read_data_files(spark, root, *dirs)


def _verdict(F: Any) -> Any:
    """A record's outcome, with an ``error`` whose target did not start
    (``start_failure``; NULL in data files written before the column
    existed: false) as ``did_not_start``, apart from a rule's error."""
    did_not_start = (F.col("outcome") == "error") & F.coalesce(F.col("start_failure"), F.lit(False))
    return F.when(did_not_start, F.lit(DID_NOT_START)).otherwise(F.col("outcome"))


def _blocked_by(F: Any) -> Any:
    """A blocked record's root cause: its ``blocked_by``, else (a record
    written, or data file ingested, before the field existed) the case id
    its message starts with; NULL for any other record. Spark reads
    ``message`` only for the aggregations that use this column."""
    from_message = F.regexp_extract(F.col("message"), BLOCKED_BY_MESSAGE, 1)
    cause = F.coalesce(
        F.when(F.length("blocked_by") > 0, F.col("blocked_by")),
        F.when(F.length(from_message) > 0, from_message),
    )
    return F.when(F.col("outcome") == "blocked", cause)


def select_window(spark: Any, dataset: str | os.PathLike, window: Window) -> Any:
    """The dataset's records in the window (only the columns used), with
    each record's ``verdict`` (its outcome, ``did_not_start`` apart from a
    rule's error) and a blocked record's root cause (``blocked_by``).

    Reads only the month partitions the window can hold: ``--since`` and
    ``--until`` bound the month (the directories read) and the run date
    (row-group statistics); ``--last-runs`` first picks its runs from the
    small runs table and then reads only their months (and row groups)."""
    from pyspark.sql import functions as F

    months: set[str] | None = None
    if window.since or window.until:
        first = window.since.strftime("%Y-%m") if window.since else ""
        last = window.until.strftime("%Y-%m") if window.until else "9999-99"
        months = {
            m
            for m, _ in list_partitions(require_dataset(dataset) / "results")
            if first <= m <= last
        }
    pairs: list[tuple[str, str]] = []
    if window.last_runs:
        pairs, run_months = last_runs(spark, dataset, window)
        months = set(run_months) if months is None else months & set(run_months)
    res = read_months(spark, dataset, months).select(
        "run_id",
        # The evidence of a record (the page links each cell to its latest
        # one's); Spark reads them only for the queries that use them.
        *EVIDENCE_COLUMNS,
        "time",
        "date",
        "target",
        "implementation",
        "implementation_version",
        "protocol",
        "role",
        "case_id",
        "level",
        # The kind of the level's basis, without its note (docs/levels.md).
        F.trim(F.split(F.coalesce(F.col("basis"), F.lit("keyword")), ":").getItem(0)).alias(
            "basis"
        ),
        _verdict(F).alias("verdict"),
        _blocked_by(F).alias("blocked_by"),
        "peer_implementation",
        "month",
        # The impairment without its seed: one network condition, night after night.
        F.coalesce(F.regexp_replace("impairment", " seed=[0-9]+$", ""), F.lit(CLEAN)).alias(
            "network"
        ),
    )
    if window.since:
        res = res.where(
            (F.col("month") >= window.since.strftime("%Y-%m"))
            & (F.col("date") >= F.lit(window.since))
        )
    if window.until:
        res = res.where(
            (F.col("month") <= window.until.strftime("%Y-%m"))
            & (F.col("date") <= F.lit(window.until))
        )
    if window.last_runs:
        res = res.where(F.col("month").isin(*sorted(months or ())))
        run_ids = sorted({r for _, r in pairs})
        if len(run_ids) <= MAX_PUSHED_RUN_IDS:
            # Pushed down to Parquet: row groups of other runs are skipped
            # (ingest writes each partition's rows sorted by run).
            res = res.where(F.col("run_id").isin(*run_ids))
        keep = spark.createDataFrame(pairs, "implementation string, run_id string")
        res = res.join(F.broadcast(keep), ["implementation", "run_id"], "left_semi")
    return res.drop("month")


def _counts(F: Any, prefix: str = "", where: Any = None) -> list[Any]:
    def count(verdict: str) -> Any:
        cond = F.col("verdict") == verdict
        if where is not None:
            cond = cond & where
        return F.sum(F.when(cond, 1).otherwise(0)).alias(prefix + verdict)

    return [count(v) for v in COUNTED]


def _sums(F: Any, prefix: str = "") -> list[Any]:
    return [F.sum(prefix + o).alias(prefix + o) for o in COUNTED]


def _rate(F: Any, prefix: str = "") -> Any:
    """passed / (passed + failed + error + did_not_start + blocked): blocked
    and did not start did not pass."""
    denominator = sum((F.col(prefix + v) for v in NOT_PASSED), F.col(prefix + "passed"))
    return F.when(denominator > 0, F.round(F.col(prefix + "passed") / denominator, 4))


def _ts(F: Any, column: Any) -> Any:
    return F.date_format(column, TS_FORMAT)


def _code(F: Any, column: str, values: tuple[str, ...]) -> Any:
    expr = F.lit(0)
    for i, value in enumerate(values):
        expr = F.when(F.col(column) == value, i).otherwise(expr) if i else expr
    return expr


def _decode(F: Any, code: Any, values: tuple[str, ...]) -> Any:
    return F.element_at(F.array(*(F.lit(v) for v in values)), (code + 1).cast("int"))


# -------------------------------------------------------------- file lines

CSV_OPTIONS = {"escape": '"', "nullValue": "", "emptyValue": "", "lineSep": "\n"}
JSON_OPTIONS = {"ignoreNullFields": "false"}


def _text_columns(F: Any, frame: Any, columns: list[str]) -> list[Any]:
    """Every column as text with a fixed format (rates to 4 decimals, lists
    joined with ';', empty for null)."""
    fields = {f.name: f.dataType.typeName() for f in frame.schema.fields}
    cols = []
    for name in columns:
        kind = fields[name]
        col = F.col(name)
        if kind == "double":
            # format_string turns null into the text "null": keep it empty.
            col = F.when(col.isNotNull(), F.format_string("%.4f", col))
        elif kind == "array":
            col = F.array_join(col, ";")
        elif kind == "boolean":
            col = F.when(col, "true").when(~col, "false")
        else:
            col = col.cast("string")
        cols.append(col.alias(name))
    return cols


def _line_frame(F: Any, frame: Any, columns: list[str], key: list[str]) -> Any:
    """The key columns (``_k0``...), then each row as its CSV line (``_csv``)
    and its JSON line (``_json``).

    Why Spark makes the lines: ``to_csv`` and ``to_json`` run the very
    generators of Spark's CSV and JSON writers (quoting, whitespace
    trimming, number formats such as 1.0E-4), so the files are what a Spark
    write gave, while Python only sorts and concatenates them: one job for
    all the small matrices instead of two Spark writes (each a shuffle into
    one partition and a sort) per matrix."""
    return frame.select(
        *[F.col(k).alias(f"_k{i}") for i, k in enumerate(key)],
        F.to_csv(F.struct(*_text_columns(F, frame, columns)), CSV_OPTIONS).alias("_csv"),
        F.to_json(F.struct(*[F.col(c) for c in columns]), JSON_OPTIONS).alias("_json"),
    )


def _sort_key(row: Any, width: int) -> tuple[Any, ...]:
    """The first ``width`` key columns (``_k0``...) in Spark's ascending
    order: nulls first, strings by code point (the order of their UTF-8
    bytes)."""
    return tuple((row[f"_k{i}"] is not None, row[f"_k{i}"]) for i in range(width))


def _collect_lines(
    F: Any, parts: dict[str, tuple[Any, list[str], list[str]]]
) -> dict[str, tuple[list[tuple[str, str]], list[dict[str, Any]]]]:
    """For each name: (frame, columns, key) -> its lines sorted on its key,
    and its rows parsed back from the JSON lines (the values the page shows).

    All in one Spark job (a union): on 2 cores a job costs up to a second
    or two of fixed overhead even for a few rows, and the independent
    stages of one job run side by side."""
    width = max(len(key) for _, _, key in parts.values())
    frames = []
    for name, (frame, columns, key) in parts.items():
        lines = _line_frame(F, frame, columns, key)
        frames.append(
            lines.select(
                F.lit(name).alias("_name"),
                *[
                    F.col(f"_k{i}").cast("string")
                    if i < len(key)
                    else F.lit(None).cast("string").alias(f"_k{i}")
                    for i in range(width)
                ],
                "_csv",
                "_json",
            )
        )
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    got: dict[str, list[Any]] = {name: [] for name in parts}
    for row in union.collect():
        got[row["_name"]].append(row)
    out = {}
    for name, rows in got.items():
        rows.sort(key=lambda r: _sort_key(r, len(parts[name][2])))
        lines = [(r["_csv"], r["_json"]) for r in rows]
        out[name] = (lines, [json.loads(j) for _, j in lines])
    return out


# ---------------------------------------------------------------- matrices


def build(
    spark: Any, dataset: str | os.PathLike, window: Window = Window(), progress: Progress = print
) -> dict[str, Matrix]:
    """All matrices over the window. The small ones are collected; the
    requirements frame reads a cached aggregate, and per run aggregates are
    checkpointed in memory: ``run`` releases both (``release``)."""
    from pyspark.sql import Window as W
    from pyspark.sql import functions as F

    version = require_dataset(dataset)
    res = select_window(spark, dataset, window)
    peer = F.coalesce(F.col("peer_implementation"), F.lit(""))

    # Per case: counts and the latest verdict as one number. Cached: the
    # requirements files and the page's rows read it again.
    t = time.monotonic()
    latest_code = (
        F.unix_millis("time") * 256
        + _code(F, "verdict", OUTCOME_CODES) * 32
        + _code(F, "level", LEVEL_CODES) * 8
        + _code(F, "basis", BASIS_CODES)
    )
    case_keys = [
        "implementation",
        "implementation_version",
        "protocol",
        "network",
        "case_id",
        "peer",
    ]
    # The root cause of each case's latest blocked record: a string taken by
    # the latest code (max_by), which Spark's hash aggregation cannot hold,
    # so it is aggregated over the blocked records alone and joined on.
    blocked = (
        res.where(F.col("verdict") == "blocked")
        .withColumn("peer", peer)
        .groupBy(*case_keys)
        .agg(
            F.max(latest_code).alias("_blocked_code"),
            F.max_by("blocked_by", latest_code).alias("_blocked_by"),
        )
    )
    per_case = (
        res.withColumn("peer", peer)
        .groupBy(*case_keys)
        .agg(
            *_counts(F),
            F.count(F.lit(1)).alias("records"),
            F.max(latest_code).alias("_code"),
            F.min("time").alias("_first"),
            F.max("time").alias("_last"),
        )
        .join(blocked, case_keys, "left")
        .select(
            *case_keys,
            *COUNTED,
            "records",
            "_first",
            "_last",
            F.col("_code").alias("latest_code"),
            _decode(F, F.expr("(_code div 8) % 4"), LEVEL_CODES).alias("level"),
            _decode(F, F.expr("_code % 8"), BASIS_CODES).alias("basis"),
            _decode(F, F.expr("(_code div 32) % 8"), OUTCOME_CODES).alias("latest_outcome"),
            _ts(F, F.timestamp_millis(F.expr("_code div 256"))).alias("latest_time"),
            # Only when the latest record is the latest blocked one.
            F.when(F.col("_blocked_code") == F.col("_code"), F.col("_blocked_by")).alias(
                "latest_blocked_by"
            ),
        )
        .cache()
    )
    # One row per implementation version (and harness or other peer): the
    # record count, the requirements matrix's row count and the versions
    # the page shows, in the job that fills the cache.
    versions = (
        per_case.groupBy(
            "implementation",
            "protocol",
            "implementation_version",
            (F.col("peer") == "").alias("own"),
        )
        .agg(
            F.sum("records").alias("records"),
            F.count(F.lit(1)).alias("rows"),
            F.max("latest_time").alias("last"),
        )
        .collect()
    )
    records = sum(v["records"] for v in versions)
    if not records:
        raise IngestError(
            f"no records in the window ({window.text()}) of {dataset} (version {version.name})"
        )
    progress(
        f"matrix: {records:,} record(s) in the window ({window.text()}, dataset version {version.name}); "
        f"per-case aggregation: {time.monotonic() - t:.1f} s"
    )

    # Per run (and role, peer): counts, MUST counts, times; and the few
    # failed (or blocked) records: which cases, per run. Checkpointed, not
    # cached: the matrices join per_run with itself and with failures, Spark
    # then renames one side's attributes, and that side no longer matched
    # the cached plan: it scanned the records again (the plan showed it).
    # (Measured and dropped: one aggregation for both, split by the failed
    # case id, and grouping sets for per case and per run in one scan; the
    # hashing, not the reading, costs, and neither was faster.)
    t = time.monotonic()
    must = F.col("level") == "MUST"
    per_run = (
        res.withColumn("peer", peer)
        .groupBy(
            "implementation",
            "implementation_version",
            "protocol",
            "network",
            "peer",
            "role",
            "run_id",
            "date",
        )
        .agg(
            *_counts(F),
            *_counts(F, "must_", must),
            F.count(F.lit(1)).alias("records"),
            F.min("time").alias("first"),
            F.max("time").alias("last"),
        )
    )
    # A partial run (--case, -k: summary.json's partial) is no complete run
    # for the certification: its verdict holds for the selected cases only.
    complete = read_runs(spark, dataset).select(
        "run_id",
        (F.col("complete") & ~F.coalesce(F.col("partial"), F.lit(False))).alias("complete"),
    )
    per_run = (
        per_run.join(F.broadcast(complete), "run_id", "left")
        .withColumn("complete", F.coalesce("complete", F.lit(False)))
        .localCheckpoint()
    )
    verdict = F.col("verdict")
    failures = (
        res.where(verdict.isin(*NOT_PASSED) & (must | F.col("peer_implementation").isNotNull()))
        .withColumn("peer", peer)
        .groupBy(
            "implementation",
            "implementation_version",
            "protocol",
            "network",
            "peer",
            "role",
            "run_id",
        )
        .agg(
            F.sort_array(F.collect_set("case_id")).alias("not_passed"),
            *(
                F.sort_array(F.collect_set(F.when(must & cond, F.col(column)))).alias(name)
                for name, cond, column in (
                    ("failed_must", verdict.isin("failed", "error"), "case_id"),
                    ("blocked_must", verdict == "blocked", "case_id"),
                    ("blocked_must_root_causes", verdict == "blocked", "blocked_by"),
                    ("did_not_start_must", verdict == DID_NOT_START, "case_id"),
                )
            ),
        )
        .localCheckpoint()
    )
    progress(f"  per-run aggregation: {per_run.count():,} row(s): {time.monotonic() - t:.1f} s")

    t = time.monotonic()
    requirements, page = _requirements(spark, F, per_case, [v for v in versions if v["own"]])
    page = _with_evidence(F, res, peer, latest_code, per_case, page)
    matrices = {
        "requirements": requirements,
        "certification": _certification(F, W, per_run, failures),
        "interop": _interop(F, per_run, failures),
        "flaky": _flaky(F, per_case),
        "trends": _trends(F, per_run),
    }
    small = {name: m for name, m in matrices.items() if name != "requirements"}
    collected = _collect_lines(
        F,
        {
            **{name: (m.frame, m.columns, m.key) for name, m in small.items()},
            "requirements-page": (
                page,
                [*requirements.columns, *(f"latest_{c}" for c in EVIDENCE_COLUMNS)],
                requirements.key,
            ),
        },
    )
    for name, m in small.items():
        m.lines, m.rows = collected[name]
        m.count, m.frame = len(m.lines), None
    requirements.rows = collected["requirements-page"][1]
    # The page lists the flakiest (closest to half failing); the sort is
    # stable and the rows come in key order, so ties resolve the same way.
    flaky = matrices["flaky"]
    flaky.rows = sorted(flaky.rows, key=lambda r: (abs(r["fail_rate"] - 0.5), -r["records"]))[
        :FLAKY_PAGE_ROWS
    ]
    progress(
        "  "
        + ", ".join(f"{m.name} {m.count:,}" for m in matrices.values())
        + f" row(s): {time.monotonic() - t:.1f} s"
    )
    return matrices


def _with_evidence(F: Any, res: Any, peer: Any, latest_code: Any, per_case: Any, page: Any) -> Any:
    """The page's rows with their latest record's evidence (``latest_message``,
    ``latest_trace_file``, ``latest_citation``, ``latest_source_uri``): the
    records whose verdict code is their cell's latest, found by a join on
    the page's cells alone (two records of one cell in one millisecond with
    one verdict: either's evidence)."""
    keys = ["implementation", "implementation_version", "protocol", "network", "case_id"]
    cells = (
        per_case.where(F.col("peer") == "")
        .select(*keys, "latest_code")
        .join(page.select(*keys), keys, "left_semi")
    )
    latest = (
        res.where(peer == "")
        .withColumn("latest_code", latest_code)
        .join(F.broadcast(cells), [*keys, "latest_code"], "left_semi")
        .groupBy(*keys)
        .agg(*(F.first(c, ignorenulls=True).alias(f"latest_{c}") for c in EVIDENCE_COLUMNS))
    )
    return page.join(latest, keys, "left")


def _requirements(spark: Any, F: Any, per_case: Any, versions: list[Any]) -> tuple[Matrix, Any]:
    """The matrix (written by Spark) and the frame of the rows the page
    shows: those of the most recently tested versions of each
    implementation (latest first, then the highest version; Spark's
    descending order puts a null version last)."""
    columns = [
        "implementation",
        "implementation_version",
        "protocol",
        "network",
        "case_id",
        "level",
        "basis",
        "latest_outcome",
        "latest_blocked_by",
        "pass_rate",
        *COUNTED,
        "records",
        "latest_time",
    ]
    key = ["implementation", "implementation_version", "protocol", "network", "case_id"]
    frame = per_case.where(F.col("peer") == "").withColumn("pass_rate", _rate(F)).select(*columns)
    by_impl: dict[tuple[str, str], list[Any]] = {}
    for v in versions:
        by_impl.setdefault((v["implementation"], v["protocol"]), []).append(v)
    shown = []
    for (impl, proto), found in by_impl.items():
        found.sort(
            key=lambda v: (
                v["last"] or "",
                v["implementation_version"] is not None,
                v["implementation_version"] or "",
            ),
            reverse=True,
        )
        shown.extend((impl, proto, v["implementation_version"]) for v in found[:PAGE_VERSIONS])
    keep = spark.createDataFrame(
        shown, "implementation string, protocol string, implementation_version string"
    )
    page = frame.join(
        F.broadcast(keep), ["implementation", "protocol", "implementation_version"], "left_semi"
    )
    matrix = Matrix(
        "requirements",
        "Implementation and version × requirement",
        "Latest verdict and pass rate of each case for each implementation version; only records where the "
        "harness was the peer. latest_blocked_by: when the latest verdict is blocked, its root cause (the "
        "prerequisite case that did not pass); did_not_start: errors because the target did not start, "
        "apart from a rule's error.",
        columns,
        key,
        [],
        sum(v["rows"] for v in versions),
        frame=frame,
    )
    return matrix, page


def _certification(F: Any, W: Any, per_run: Any, failures: Any) -> Matrix:
    keys = ["implementation", "implementation_version", "protocol", "network"]
    runs = (
        per_run.where(F.col("peer") == "")
        .groupBy(*keys, "run_id")
        .agg(
            *_sums(F, "must_"),
            F.max("last").alias("run_time"),
            F.min("first").alias("first"),
            F.max(F.col("complete").cast("int")).alias("complete"),
        )
    )
    order = W.partitionBy(*keys).orderBy(F.col("run_time").desc(), F.col("run_id").desc())
    latest = (
        runs.where(F.col("complete") == 1)
        .withColumn("_n", F.row_number().over(order))
        .where(F.col("_n") == 1)
        .drop("_n", "first", "complete")
    )
    failed = (
        failures.where(F.col("peer") == "")
        .groupBy(*keys, "run_id")
        .agg(
            F.array_sort(F.array_distinct(F.flatten(F.collect_list("failed_must")))).alias(
                "failed_must"
            ),
            *(
                F.array_sort(F.array_distinct(F.flatten(F.collect_list(name)))).alias(name)
                for name in ("blocked_must", "blocked_must_root_causes", "did_not_start_must")
            ),
        )
    )
    latest = latest.join(failed, keys + ["run_id"], "left")
    seen = runs.groupBy(*keys).agg(
        F.min("first").alias("_first"),
        F.max("run_time").alias("_last"),
        F.count(F.lit(1)).alias("runs"),
        F.sum("complete").alias("complete_runs"),
    )
    frame = seen.join(latest, keys, "left")
    certified = (
        (F.col("must_failed") == 0)
        & (F.col("must_error") == 0)
        & (F.col("must_did_not_start") == 0)
        & (F.col("must_blocked") == 0)
        & (F.col("must_passed") > 0)
    )
    # As the run's own verdict (conformance.core.results.summarize): a
    # breach seen on the wire outranks a role that did not start.
    did_not_start = (F.col("must_did_not_start") > 0) & (F.col("must_failed") == 0)
    status = (
        F.when(F.col("run_id").isNull(), F.lit("no complete run"))
        .when(certified, F.lit("certified"))
        .when(did_not_start, F.lit(DID_NOT_START_STATUS))
        .otherwise(F.lit("not certified"))
    )
    newest_order = W.partitionBy("implementation", "protocol", "network").orderBy(
        F.col("_last").desc(), F.col("implementation_version").desc()
    )
    columns = [
        "implementation",
        "protocol",
        "network",
        "implementation_version",
        "newest",
        "status",
        "run_id",
        "run_time",
        *(f"must_{v}" for v in COUNTED),
        "failed_must",
        "blocked_must",
        "blocked_must_root_causes",
        "did_not_start_must",
        "runs",
        "complete_runs",
        "first_seen",
        "last_seen",
    ]
    frame = (
        frame.withColumn("status", status)
        .withColumn("newest", F.row_number().over(newest_order) == 1)
        .withColumns(
            {
                name: F.coalesce(name, F.array().cast("array<string>"))
                for name in (
                    "failed_must",
                    "blocked_must",
                    "blocked_must_root_causes",
                    "did_not_start_must",
                )
            }
        )
        .withColumn("run_time", _ts(F, "run_time"))
        .withColumn("first_seen", _ts(F, "_first"))
        .withColumn("last_seen", _ts(F, "_last"))
        .select(*columns)
    )
    return Matrix(
        "certification",
        "Implementation × protocol certification",
        "Certified: every MUST case passed or was not applicable, and at least one passed, in the latest "
        "complete run of that implementation version (a partial run, --case or -k, is not complete: it "
        "certifies nothing; a blocked MUST case did not pass; failed_must lists "
        "the MUST cases that failed for their own rule, blocked_must those blocked by a prerequisite, "
        "blocked_must_root_causes the prerequisites that blocked them, did_not_start_must those that "
        "ended because the target did not start). Status 'did not start': some MUST case ended because "
        "the target did not start and none failed for its own rule. "
        "'newest' marks the version tested most recently. 'network': clean loopback or the impairment profile "
        "the runs went through (certify --impair).",
        columns,
        ["implementation", "protocol", "network", "implementation_version"],
        [],
        frame=frame,
    )


def _orient(F: Any, frame: Any) -> Any:
    """client/server columns from (implementation, role, peer)."""
    client = F.when(F.col("role") == "client", F.col("implementation")).otherwise(F.col("peer"))
    server = F.when(F.col("role") == "server", F.col("implementation")).otherwise(F.col("peer"))
    return (
        frame.where(F.col("peer") != "")
        .withColumn("client_implementation", client)
        .withColumn("server_implementation", server)
    )


def _interop(F: Any, per_run: Any, failures: Any) -> Matrix:
    keys = ["protocol", "client_implementation", "server_implementation", "network"]
    runs = (
        _orient(F, per_run).groupBy(*keys, "run_id").agg(*_sums(F), F.max("last").alias("run_time"))
    )
    not_passed = (
        _orient(F, failures)
        .groupBy(*keys, "run_id")
        .agg(
            F.array_sort(F.array_distinct(F.flatten(F.collect_list("not_passed")))).alias(
                "not_passed"
            )
        )
    )
    runs = runs.join(not_passed, keys + ["run_id"], "left")
    latest = F.max(F.struct("run_time", "run_id", *COUNTED, "not_passed"))
    columns = [
        "protocol",
        "client_implementation",
        "server_implementation",
        "network",
        "pass_rate",
        *COUNTED,
        "runs",
        "latest_run_id",
        "latest_pass_rate",
        "latest_not_passed",
    ]
    frame = (
        runs.groupBy(*keys)
        .agg(*_sums(F), F.count(F.lit(1)).alias("runs"), latest.alias("_l"))
        .withColumn("pass_rate", _rate(F))
        .withColumn("latest_run_id", F.col("_l.run_id"))
        .withColumn("latest_pass_rate", _rate(F, "_l."))
        .withColumn(
            "latest_not_passed", F.coalesce("_l.not_passed", F.array().cast("array<string>"))
        )
        .select(*columns)
    )
    return Matrix(
        "interop",
        "Implementation × implementation interoperability",
        "Pass rate of interop cases per (client, server) pair, from records whose peer_implementation is set; "
        "the latest run's pass rate and the cases it did not pass.",
        columns,
        keys,
        [],
        frame=frame,
    )


def _flaky(F: Any, per_case: Any) -> Matrix:
    columns = [
        "implementation",
        "implementation_version",
        "protocol",
        "network",
        "case_id",
        "peer_implementation",
        "level",
        "fail_rate",
        *COUNTED,
        "records",
        "latest_outcome",
        "first_time",
        "last_time",
    ]
    not_passed = F.col("failed") + F.col("error")
    frame = (
        per_case.where((F.col("passed") > 0) & (not_passed > 0))
        .withColumn("peer_implementation", F.col("peer"))
        .withColumn("fail_rate", F.round(not_passed / (F.col("passed") + not_passed), 4))
        .withColumn("first_time", _ts(F, "_first"))
        .withColumn("last_time", _ts(F, "_last"))
        .select(*columns)
    )
    return Matrix(
        "flaky",
        "Flaky cases",
        "Cases that both passed and failed (or errored) for the same implementation, version, protocol and "
        "peer (empty peer: the harness); being blocked, or the target not starting, is no failure of the "
        "case's own rule.",
        columns,
        [
            "implementation",
            "implementation_version",
            "protocol",
            "network",
            "case_id",
            "peer_implementation",
        ],
        [],
        frame=frame,
    )


def _trends(F: Any, per_run: Any) -> Matrix:
    columns = [
        "date",
        "implementation",
        "network",
        *COUNTED,
        "records",
        "runs",
        "pass_rate",
    ]
    frame = (
        per_run.groupBy("date", "implementation", "network")
        .agg(*_sums(F), F.sum("records").alias("records"), F.countDistinct("run_id").alias("runs"))
        .withColumn("pass_rate", _rate(F))
        .withColumn("date", F.col("date").cast("string"))
        .select(*columns)
    )
    return Matrix(
        "trends",
        "Trends: pass counts per night",
        "Per night (the run's date) and implementation: verdict counts over all its records.",
        columns,
        ["date", "implementation", "network"],
        [],
        frame=frame,
    )


# ----------------------------------------------------------------- output


def _write_single(frame: Any, key: list[str], fmt: str, tmp: Path, options: dict[str, str]) -> Path:
    """Write ``frame`` sorted on ``key`` as one file; return its path."""
    (
        frame.repartition(1)
        .sortWithinPartitions(*key)
        .write.mode("overwrite")
        .options(**options)
        .format(fmt)
        .save(str(tmp))
    )
    parts = sorted(
        p for p in tmp.iterdir() if p.name.startswith("part-") and not p.name.endswith(".crc")
    )
    if len(parts) != 1:
        raise RuntimeError(f"expected one {fmt} part file in {tmp}, found {len(parts)}")
    return parts[0]


def _json_rows(path: Path) -> Any:
    """The rows of a JSON part file Spark wrote (a JSON line holds no raw
    line break: one line per row)."""
    with open(path, encoding="utf-8", newline="") as src:
        for line in src:
            line = line.rstrip("\n")
            if line:
                yield line


def _write_matrix(F: Any, matrix: Matrix, out: Path, window: Window) -> list[Path]:
    """NAME.csv and NAME.json of one matrix, each written next to its final
    name and renamed into place once complete: from its collected lines, or
    (the big one) from the files Spark wrote, sorted on the key, into a
    work directory."""
    # Named apart so that two jobs writing into one directory never mix their files.
    tag = uuid.uuid4().hex[:8]
    csv_tmp, json_tmp = (
        out / f".{matrix.name}.csv.{tag}.tmp",
        out / f".{matrix.name}.json.{tag}.tmp",
    )
    work = out / f".matrix-{matrix.name}-{tag}"
    head = {
        "matrix": matrix.name,
        "title": matrix.title,
        "description": matrix.description,
        "window": window.describe(),
        "columns": matrix.columns,
        "key": matrix.key,
        "row_count": matrix.count,
    }
    try:
        if matrix.lines is not None:
            json_lines: Any = (j for _, j in matrix.lines)
            with open(csv_tmp, "w", encoding="utf-8", newline="") as dst:
                # The header as Spark writes it: the column names (plain words, never quoted).
                dst.write(",".join(matrix.columns) + "\n")
                dst.writelines(c + "\n" for c, _ in matrix.lines)
        else:
            csv_part = _write_single(
                matrix.frame.select(*_text_columns(F, matrix.frame, matrix.columns)),
                matrix.key,
                "csv",
                work / "csv",
                {**CSV_OPTIONS, "header": "true"},
            )
            if csv_part.stat().st_size == 0:  # no rows: Spark may write no header
                csv_part.write_text(",".join(matrix.columns) + "\n", encoding="utf-8")
            os.replace(csv_part, csv_tmp)
            json_part = _write_single(
                matrix.frame, matrix.key, "json", work / "json", {**JSON_OPTIONS, "lineSep": "\n"}
            )
            json_lines = _json_rows(json_part)
        count = 0
        with open(json_tmp, "w", encoding="utf-8", newline="") as dst:
            dst.write(json.dumps(head, indent=1)[:-2] + ',\n "rows": [\n')
            for line in json_lines:
                dst.write(("" if count == 0 else ",\n") + line)
                count += 1
            dst.write("\n ]\n}\n")
        if count != matrix.count:
            raise RuntimeError(f"{matrix.name}: wrote {count} row(s), counted {matrix.count}")
        os.replace(csv_tmp, out / f"{matrix.name}.csv")
        os.replace(json_tmp, out / f"{matrix.name}.json")
    finally:
        csv_tmp.unlink(missing_ok=True)
        json_tmp.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    return [out / f"{matrix.name}.csv", out / f"{matrix.name}.json"]


def write_outputs(
    spark: Any,
    matrices: dict[str, Matrix],
    out: str | os.PathLike,
    window: Window,
    meta: dict[str, Any],
) -> list[Path]:
    """NAME.csv and NAME.json per matrix, index.html and matrix-report.json.

    Each file is written next to its final name and renamed into place, so
    a reader never sees half a file."""
    from pyspark.sql import functions as F

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for m in matrices.values():
        written.extend(_write_matrix(F, m, out, window))
    page = out / "index.html"
    tmp = out / ".index.html.tmp"
    tmp.write_text(render(matrices, window, meta), encoding="utf-8")
    os.replace(tmp, page)
    written.append(page)
    report = out / "matrix-report.json"
    report.write_text(
        json.dumps(
            {
                **meta,
                "window": window.describe(),
                "rows": {n: m.count for n, m in matrices.items()},
                "files": [p.name for p in written],
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    written.append(report)
    return written


def persisted(spark: Any) -> set[int]:
    """The ids of the RDDs kept in memory (caches and local checkpoints)."""
    return {int(i) for i in spark.sparkContext._jsc.getPersistentRDDs().keySet()}


def release(spark: Any, keep: set[int]) -> None:
    """Drop the caches and in-memory checkpoints made since ``keep`` was
    taken: ``clearCache`` alone leaves checkpoints in memory until the
    session ends, and tests and notebooks run many jobs in one session."""
    spark.catalog.clearCache()
    rdds = spark.sparkContext._jsc.getPersistentRDDs()
    for rdd_id in persisted(spark) - keep:
        rdds.get(rdd_id).unpersist(False)


def run(
    spark: Any,
    dataset: str | os.PathLike,
    out: str | os.PathLike,
    window: Window = Window(),
    progress: Progress = print,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build and write every matrix; returns the report (matrix-report.json)."""
    started = time.monotonic()
    version = require_dataset(dataset)
    before = persisted(spark)
    try:
        matrices = build(spark, dataset, window, progress)
        records = sum(r["records"] for r in matrices["trends"].rows)
        t = time.monotonic()
        info = {
            "dataset": str(Path(dataset).resolve()),
            "dataset_version": version.name,
            "records": records,
            "spark_master": spark.sparkContext.master,
            **(meta or {}),
        }
        written = write_outputs(spark, matrices, out, window, info)
        progress(f"  wrote {len(written)} file(s): {time.monotonic() - t:.1f} s")
    finally:
        release(spark, before)
    info.update(seconds=round(time.monotonic() - started, 2), files=[str(p) for p in written])
    progress(f"matrix done in {info['seconds']:.1f} s")
    return info

#!/usr/bin/env python3
"""The least work a Spark job can do for a full rebuild, one step per
process (``bench/spark_bench.py --floor`` runs them and prints the figures).

Why: issue #15 asks for a full rebuild within 1.5x DuckDB's time. These
steps are lower bounds of what any Spark implementation of the rebuild
must do on these files, in the project's Spark configuration (the same
session as the commands), each in a fresh process like a command (JVM start
included):

``read``
    read every line of every results.jsonl with the ingest's schema and
    discard the rows (Spark's ``noop`` sink): the JSON parse alone.
``write``
    the same read, the ingest's row expressions (types, validity, month),
    the records shuffled by month and protocol and written as Parquet
    partitioned like the dataset: what a rebuild must produce, less the
    dropping of duplicate keys, the counting and the manifest.
``dedupe``
    as ``write``, and first drop every record whose key (run, target,
    case, peer) an earlier-timed record repeats, with a window over the
    key ordered by time only: what DuckDB's ``QUALIFY row_number()`` does.
    The whole of the rebuild's ingest less the counting, the runs table and
    the manifest (the project's own window also orders ties by every other
    column, so that the choice is deterministic).
``aggregate``
    read that Parquet and compute the two aggregations every matrix comes
    from (per case and per run), into the ``noop`` sink: less than the
    matrix job, which also writes its tables.

    .venv/bin/python bench/spark_floor.py read RUNS_DIR
    .venv/bin/python bench/spark_floor.py write RUNS_DIR OUT_DIR
    .venv/bin/python bench/spark_floor.py dedupe RUNS_DIR OUT_DIR
    .venv/bin/python bench/spark_floor.py aggregate OUT_DIR
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conformance.aggregate import ingest  # noqa: E402
from conformance.aggregate.runs import find_runs  # noqa: E402
from conformance.aggregate.schema import PARTITION_COLUMNS, RECORD_SCHEMA_DDL  # noqa: E402
from conformance.aggregate.spark import get_session  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("read", "write", "dedupe", "aggregate"):
        print(__doc__.rsplit("\n\n", 1)[1], file=sys.stderr)
        return 2
    step = argv[0]
    spark = get_session()
    from pyspark.sql import functions as F

    started = time.monotonic()
    if step == "read":
        runs = find_runs([argv[1]])
        (
            spark.read.schema(RECORD_SCHEMA_DDL)
            .option("mode", "PERMISSIVE")
            .json([r.uri for r in runs])
            .write.format("noop")
            .mode("overwrite")
            .save()
        )
    elif step in ("write", "dedupe"):
        runs = find_runs([argv[1]])
        rows = ingest.parse_lines(spark, runs).where(F.col("kind") == "record").drop("kind")
        rows = rows.repartition(*PARTITION_COLUMNS)
        if step == "dedupe":
            from pyspark.sql import Window

            key = [
                *PARTITION_COLUMNS,
                "run_id",
                "target",
                "case_id",
                F.coalesce(F.col("peer_implementation"), F.lit("")),
            ]
            newest = F.row_number().over(
                Window.partitionBy(*key).orderBy(F.col("time").desc_nulls_last())
            )
            rows = rows.withColumn("_newest", newest).where(F.col("_newest") == 1).drop("_newest")
        rows.write.partitionBy(*PARTITION_COLUMNS).mode("overwrite").parquet(argv[2])
    else:
        res = spark.read.parquet(argv[1])
        peer = F.coalesce(F.col("peer_implementation"), F.lit(""))
        counts = [
            F.sum(F.when(F.col("outcome") == o, 1).otherwise(0)).alias(o)
            for o in ("passed", "failed", "error", "blocked", "not_applicable")
        ]
        per_case = (
            res.withColumn("peer", peer)
            .groupBy("implementation", "implementation_version", "protocol", "case_id", "peer")
            .agg(*counts, F.max("time").alias("last"))
        )
        per_run = (
            res.withColumn("peer", peer)
            .groupBy(
                "implementation",
                "implementation_version",
                "protocol",
                "peer",
                "role",
                "run_id",
                "date",
            )
            .agg(*counts, F.min("time").alias("first"), F.max("time").alias("last"))
        )
        for frame in (per_case, per_run):
            frame.write.format("noop").mode("overwrite").save()
    print(
        f"{step} done in {time.monotonic() - started:.1f} s (Spark start not included)", flush=True
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

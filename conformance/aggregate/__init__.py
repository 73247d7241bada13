"""Aggregation of many runs' results into compatibility matrices (issue #4).

``conformance ingest`` loads the ``results.jsonl`` of runs into a Parquet
dataset with PySpark (:mod:`.ingest`); ``conformance matrix`` computes the
matrices over a window of runs and writes CSV, JSON and a static HTML page
(:mod:`.matrix`, :mod:`.html`). :mod:`.spark` holds the one SparkSession
configuration all of them use, local or on a standalone cluster. PySpark is
an optional dependency (the ``aggregate`` extra): nothing here imports it at
module level, so the rest of the harness works without it.
"""

"""Aggregation of many runs' results into compatibility matrices (issue #4).

``conformance ingest`` loads the ``results.jsonl`` of runs into a Parquet
dataset with PySpark; ``conformance matrix`` computes the matrices over a
window of runs and writes CSV, JSON and a static HTML page. The modules:

* :mod:`.schema` -- the dataset's columns, derived from ResultRecord;
* :mod:`.runs` -- run discovery (the run directories a path names);
* :mod:`.versions` -- the dataset's versions on the file system (lock,
  staging, the ``current`` switch, pruning, the manifest), no Spark;
* :mod:`.dataset` -- reading the dataset's Parquet files with Spark;
* :mod:`.ingest` and :mod:`.compaction` -- the Spark jobs that build a
  new version;
* :mod:`.matrix` (the Spark job), :mod:`.html` (the page) and
  :mod:`.tables` (what both share);
* :mod:`.version_view` (the Spark job of ``conformance versions-view``:
  every rule across each implementation's releases), :mod:`.version_html`
  (its page) and :mod:`.release_order` (PEP 440 / semver order of releases);
* :mod:`.spark` -- the one SparkSession configuration all of them use,
  local or on a standalone cluster.

PySpark is an optional dependency (the ``aggregate`` extra): nothing here
imports it at module level, so the rest of the harness works without it.
"""

"""``conformance versions-view``: every rule across an implementation's releases.

For each implementation and rule (case id, per protocol and network
condition), over the implementation's releases in version order
(:mod:`.release_order`: PEP 440 for PyPI packages, semver for npm ones):

* the **latest verdict per release**: the verdict of the release's latest
  night (its latest record that night; on a tie in time the worse verdict,
  as in the matrices), with that record's run, harness version and
  evidence (trace, capture, results.jsonl);
* the **first failing release** (failed, or error: a verdict of the rule's
  own) and the **first later release that passes it again**;
* every **release where the verdict changed** from the release before
  (among the releases that ran the rule), and the **regressions** and
  **fixes** among them: a rule failing where the last release with a
  pass-or-fail verdict passed it, and the reverse (blocked, not applicable
  and not started say nothing about the rule and are skipped over);
* for the same release, the verdict of its **previous night** and that
  night's harness version: a change between a release's last two nights
  with the same harness version is the node (flaky, or its environment
  changed), with another harness version the harness changed.

The Spark job: one aggregation of the records to one row per release and
rule (the latest record as a number, ``max`` of time in ms x 8 + the
verdict's rank; its evidence and night by ``max_by``); a second one over
the records of earlier nights (each release's latest night joined on from
the first, a broadcast) gives the night before with its verdict and harness
version. The releases' ordinals, computed in Python for the few distinct
(implementation, version) pairs, are joined on as a broadcast table, and a
window over the ordinals of each rule gives the previous release's verdict
(``lag``), the last decisive verdict before it (``last`` ignoring nulls)
and the first failing and first fixed ordinals (``min`` over the
partition). The result, one row per release and rule (280 releases of 400
rules is 112,000 small rows), is collected and written by Python as
``versions.json``, ``regressions.json`` and ``index.html``.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .dataset import read_results
from .errors import IngestError, Progress
from .release_order import ecosystem, ordered
from .tables import CLEAN, DID_NOT_START
from .versions import require_dataset

VERDICT_CODES = ("passed", "not_applicable", "blocked", DID_NOT_START, "failed", "error")
"""As the matrices' OUTCOME_CODES: on a tie in time the later one (worse) wins."""
FAILING = ("failed", "error")
"""A verdict of the rule's own that is not a pass."""
DECISIVE = ("passed", *FAILING)
"""Verdicts that say whether the release keeps the rule."""
SAME_HARNESS = "same harness version: the node is flaky or its environment changed"
OTHER_HARNESS = "the harness changed"
RULE_KEYS = ("implementation", "protocol", "network", "case_id")


def _view_rows(spark: Any, dataset: str | os.PathLike, implementation: str | None) -> list[Any]:
    """One row per (implementation, protocol, network, case, release): see
    the module docstring."""
    from pyspark.sql import Window as W
    from pyspark.sql import functions as F

    from .matrix import _code, _verdict

    res = read_results(spark, dataset)
    if implementation:
        res = res.where(F.col("implementation") == implementation)
    res = res.where(F.col("peer_implementation").isNull()).select(
        "implementation",
        F.coalesce("implementation_version", F.lit("")).alias("version"),
        "protocol",
        F.coalesce(F.regexp_replace("impairment", " seed=[0-9]+$", ""), F.lit(CLEAN)).alias(
            "network"
        ),
        "case_id",
        "level",
        "date",
        "time",
        _verdict(F).alias("verdict"),
        "run_id",
        "harness_version",
        "trace_file",
        "pcap_file",
        "source_uri",
    )
    code = F.unix_millis("time") * 8 + _code(F, "verdict", VERDICT_CODES)
    release_keys = [*RULE_KEYS, "version"]
    coded = res.withColumn("_code", code)
    # The latest record of each release and rule (the latest night's latest:
    # the code orders by time first) with its evidence; a hash aggregation
    # into as many groups as release x rule rows.
    latest = coded.groupBy(*release_keys).agg(
        F.max("_code").alias("_code"),
        F.max_by(
            F.struct(
                "date",
                "level",
                "run_id",
                "harness_version",
                "trace_file",
                "pcap_file",
                "source_uri",
            ),
            "_code",
        ).alias("ev"),
        F.min("date").alias("first_night"),
        F.count(F.lit(1)).alias("records"),
    )
    # The night before: the latest record of an earlier night, by the
    # same code, among the records before each release's latest night (its
    # date joined on from the small aggregate).
    last = latest.select(*release_keys, F.col("ev.date").alias("_last"))
    previous = (
        coded.join(F.broadcast(last), release_keys)
        .where(F.col("date") < F.col("_last"))
        .groupBy(*release_keys)
        .agg(
            F.max("_code").alias("_previous_code"),
            F.max_by(F.struct("date", "harness_version"), "_code").alias("pev"),
        )
    )
    verdicts = F.array(*(F.lit(v) for v in VERDICT_CODES))

    def verdict_of(column: str) -> Any:
        return F.element_at(verdicts, (F.col(column) % 8 + 1).cast("int"))

    releases = (
        latest.join(previous, release_keys, "left")
        .withColumn("verdict", verdict_of("_code"))
        .withColumn("date", F.col("ev.date"))
        .withColumn("previous_night", F.col("pev.date"))
        .withColumn("previous_night_verdict", verdict_of("_previous_code"))
        .withColumn("previous_night_harness", F.col("pev.harness_version"))
        .drop("_code", "_previous_code", "pev")
    )
    # The ordinals of the few distinct releases, in the registry's order.
    pairs = res.select("implementation", "version").distinct().collect()
    by_impl: dict[str, list[str]] = {}
    for row in pairs:
        by_impl.setdefault(row.implementation, []).append(row.version)
    ordinals = [
        (impl, r.version, r.ordinal, r.order)
        for impl, versions in by_impl.items()
        for r in ordered(impl, versions)
    ]
    if not ordinals:
        return []
    order_table = spark.createDataFrame(
        ordinals, "implementation string, version string, ordinal int, version_order string"
    )
    rule = W.partitionBy(*RULE_KEYS)
    by_release = rule.orderBy("ordinal")
    decisive = F.when(F.col("verdict").isin(*DECISIVE), F.col("verdict"))
    failing = F.col("verdict").isin(*FAILING)
    view = (
        releases.join(F.broadcast(order_table), ["implementation", "version"])
        .withColumn("previous_release", F.lag("version").over(by_release))
        .withColumn("previous_release_verdict", F.lag("verdict").over(by_release))
        .withColumn(
            "previous_decisive",
            F.last(decisive, ignorenulls=True).over(
                by_release.rowsBetween(W.unboundedPreceding, -1)
            ),
        )
        .withColumn("first_failing", F.min(F.when(failing, F.col("ordinal"))).over(rule))
        .withColumn(
            "first_fixed",
            F.min(
                F.when(
                    (F.col("verdict") == "passed") & (F.col("ordinal") > F.col("first_failing")),
                    F.col("ordinal"),
                )
            ).over(rule),
        )
        .select(
            *RULE_KEYS,
            "version",
            "ordinal",
            "version_order",
            "verdict",
            F.col("date").cast("string").alias("date"),
            F.col("ev.level").alias("level"),
            F.col("ev.run_id").alias("run_id"),
            F.col("ev.harness_version").alias("harness_version"),
            F.col("ev.trace_file").alias("trace_file"),
            F.col("ev.pcap_file").alias("pcap_file"),
            F.col("ev.source_uri").alias("source_uri"),
            "records",
            F.col("first_night").cast("string").alias("first_night"),
            F.col("previous_night").cast("string").alias("previous_night"),
            "previous_night_verdict",
            "previous_night_harness",
            "previous_release",
            "previous_release_verdict",
            "previous_decisive",
            "first_failing",
            "first_fixed",
        )
    )
    return view.collect()


def _change(kind: str, before: str, after: str) -> str:
    if before == "passed" and after in FAILING:
        return "regressed"
    if before in FAILING and after == "passed":
        return "fixed"
    return kind


def assemble(rows: list[Any]) -> dict[str, Any]:
    """The collected rows as the view: per implementation its releases in
    order and per rule its strip (one cell per release that ran it), first
    failing and first fixed release, changes, regressions and fixes; and
    the verdict changes between two nights of one release (its last two)."""
    impls: dict[str, dict[str, Any]] = {}
    rules: dict[tuple[str, ...], dict[str, Any]] = {}
    latest_night: dict[str, str] = {}
    for r in rows:
        impl = impls.setdefault(
            r["implementation"],
            {"implementation": r["implementation"], "ecosystem": ecosystem(r["implementation"])},
        )
        impl.setdefault("_releases", {})[r["version"]] = (r["ordinal"], r["version_order"])
        latest_night[r["implementation"]] = max(
            latest_night.get(r["implementation"], ""), r["date"]
        )
        key = tuple(r[k] for k in RULE_KEYS)
        rule = rules.setdefault(
            key,
            {
                **{k: r[k] for k in RULE_KEYS},
                "level": r["level"],
                "cells": [],
                "_first": (r["first_failing"], r["first_fixed"]),
            },
        )
        rule["cells"].append(
            {
                "version": r["version"],
                "ordinal": r["ordinal"],
                "verdict": r["verdict"],
                "date": r["date"],
                "run_id": r["run_id"],
                "harness_version": r["harness_version"],
                "trace_file": r["trace_file"],
                "pcap_file": r["pcap_file"],
                "source_uri": r["source_uri"],
                "first_night": r["first_night"],
                "records": r["records"],
                "previous_night": r["previous_night"],
                "previous_night_verdict": r["previous_night_verdict"],
                "previous_night_harness": r["previous_night_harness"],
                "_previous_release": (r["previous_release"], r["previous_release_verdict"]),
                "_previous_decisive": r["previous_decisive"],
            }
        )
    release_changes: list[dict[str, Any]] = []
    night_changes: list[dict[str, Any]] = []
    for impl in impls.values():
        found = impl.pop("_releases")
        impl["releases"] = [
            {"version": v, "ordinal": o, "order": order}
            for v, (o, order) in sorted(found.items(), key=lambda kv: kv[1][0])
        ]
        impl["rules"] = []
    for key in sorted(rules):
        rule = rules[key]
        cells = sorted(rule["cells"], key=lambda c: c["ordinal"])
        version_of = {c["ordinal"]: c["version"] for c in cells}
        first_failing, first_fixed = rule.pop("_first")
        rule["first_failing"] = version_of.get(first_failing)
        rule["first_fixed"] = version_of.get(first_fixed)
        rule["changes"], rule["regressions"], rule["fixes"] = [], [], []
        for c in cells:
            before_version, before = c.pop("_previous_release")
            decisive = c.pop("_previous_decisive")
            # Regressed or fixed: against the last release with a pass-or-fail
            # verdict (blocked, n/a and not started in between say nothing).
            kind = "changed"
            if decisive == "passed" and c["verdict"] in FAILING:
                rule["regressions"].append(c["version"])
                kind = "regressed"
            elif decisive in FAILING and c["verdict"] == "passed":
                rule["fixes"].append(c["version"])
                kind = "fixed"
            if before is not None and before != c["verdict"]:
                change = {
                    "from_version": before_version,
                    "from": before,
                    "to_version": c["version"],
                    "to": c["verdict"],
                    "kind": kind,
                }
                rule["changes"].append(change)
                release_changes.append({**{k: rule[k] for k in RULE_KEYS}, **change})
            prev = c["previous_night_verdict"]
            if (
                prev is not None
                and prev != c["verdict"]
                and c["date"] == latest_night[rule["implementation"]]
            ):
                same = (c["previous_night_harness"] or "") == (c["harness_version"] or "")
                night_changes.append(
                    {
                        **{k: rule[k] for k in RULE_KEYS},
                        "version": c["version"],
                        "from_night": c["previous_night"],
                        "from": prev,
                        "from_harness_version": c["previous_night_harness"],
                        "to_night": c["date"],
                        "to": c["verdict"],
                        "to_harness_version": c["harness_version"],
                        "kind": _change("changed", prev, c["verdict"]),
                        "cause": SAME_HARNESS if same else OTHER_HARNESS,
                    }
                )
        rule["cells"] = cells
        impls[rule["implementation"]]["rules"].append(rule)
    return {
        "implementations": [impls[k] for k in sorted(impls)],
        "release_changes": release_changes,
        "night_changes": night_changes,
    }


def _where(change: dict[str, Any]) -> str:
    network = "" if change["network"] == CLEAN else f" [{change['network']}]"
    return f"{change['implementation']}{network} {change['case_id']}"


def news_lines(view: dict[str, Any]) -> list[str]:
    """Every verdict change as one plain line: between two releases of an
    implementation, and between a release's last two nights (with what
    tells a flaky node from a harness change)."""
    lines = []
    for c in view["release_changes"]:
        lines.append(
            f"{c['kind'].upper()} between releases: {_where(c)}: {c['from']} in "
            f"{c['from_version']} -> {c['to']} in {c['to_version']}"
        )
    for c in view["night_changes"]:
        harness = (
            f"harness {c['to_harness_version']}"
            if c["cause"] == SAME_HARNESS
            else f"harness {c['from_harness_version']} -> {c['to_harness_version']}"
        )
        lines.append(
            f"{c['kind'].upper()} between nights: {_where(c)} {c['version']}: {c['from']} on "
            f"{c['from_night']} -> {c['to']} on {c['to_night']} ({harness}: {c['cause']})"
        )
    return lines


def build(
    spark: Any,
    dataset: str | os.PathLike,
    implementation: str | None = None,
    progress: Progress = print,
) -> dict[str, Any]:
    """The version view of the dataset's current version (one implementation, or all)."""
    version = require_dataset(dataset)
    t = time.monotonic()
    rows = _view_rows(spark, dataset, implementation)
    if not rows:
        raise IngestError(
            f"no record of {implementation or 'any implementation'} in {dataset} "
            f"(version {version.name}) where the harness was the peer"
        )
    view = assemble(rows)
    progress(
        f"versions-view: {len(view['implementations'])} implementation(s), "
        f"{sum(len(i['releases']) for i in view['implementations'])} release(s), {len(rows):,} "
        f"release x rule row(s): {time.monotonic() - t:.1f} s"
    )
    return view


def write(view: dict[str, Any], out: str | os.PathLike, meta: dict[str, Any]) -> list[Path]:
    """versions.json (the view), regressions.json (the changes and their
    lines) and index.html, each written beside its name and renamed in."""
    from .version_html import render

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    lines = news_lines(view)
    files = {
        "versions.json": json.dumps({**meta, **view}, indent=1, sort_keys=True) + "\n",
        "regressions.json": json.dumps(
            {
                **meta,
                "release_changes": view["release_changes"],
                "night_changes": view["night_changes"],
                "lines": lines,
            },
            indent=1,
            sort_keys=True,
        )
        + "\n",
        "index.html": render(view, lines, meta),
    }
    written = []
    for name, text in files.items():
        tmp = out / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out / name)
        written.append(out / name)
    return written


def run(
    spark: Any,
    dataset: str | os.PathLike,
    out: str | os.PathLike,
    implementation: str | None = None,
    progress: Progress = print,
) -> dict[str, Any]:
    started = time.monotonic()
    view = build(spark, dataset, implementation, progress)
    meta = {
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "dataset": str(Path(dataset).resolve()),
        "dataset_version": require_dataset(dataset).name,
        "spark_master": spark.sparkContext.master,
    }
    written = write(view, out, meta)
    seconds = round(time.monotonic() - started, 2)
    progress(f"versions-view done in {seconds:.1f} s")
    return {
        "files": [str(p) for p in written],
        "seconds": seconds,
        "changes": len(view["release_changes"]) + len(view["night_changes"]),
        "view": view,
    }

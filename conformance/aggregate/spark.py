"""The SparkSession the aggregation jobs run in, and the checks before it.

Why a module of its own: every entry point (the CLI, the tests, the
benchmark) must get the *same* configuration, or a local run and a run on
the standalone cluster would not be comparable, and a test would measure a
different job than the one users run. The settings are tuned for this
project's machines (2 cores, a 2 GB driver) and for quiet output:

* ``local[*]`` unless ``--master spark://HOST:PORT`` names a standalone
  master (``scripts/spark-standalone.sh`` starts one on loopback);
* driver heap 1g, the JVM's other memory capped (code cache, direct
  buffers, metaspace) and the parallel (throughput) collector: in local
  mode the driver JVM also runs the tasks, and the whole driver process --
  heap plus everything else a JVM keeps -- must stay within 1.6 GiB
  (issue #15; bench/spark_bench.py measures it: a 1536m heap with G1 made
  the process peak at about 2 GB, a 2g heap at about 2.5 GB);
* 8 shuffle partitions (4 per core) with adaptive execution coalescing them:
  the 200 default means 200 tiny tasks per shuffle on 2 cores;
* everything bound to 127.0.0.1, no web UI, no console progress bars, and
  log4j at ERROR (our own progress lines say what happens);
* ANSI mode off: a bad value in a results file becomes NULL (and the line
  is then counted as malformed) instead of failing the job;
* partition column types are not inferred: ``month=2026-01`` stays a string;
* the JIT by the size of the job: a small job (``JobSize.small``) runs
  its JVMs with the quick compiler only (``-XX:TieredStopAtLevel=1``).
  HotSpot's default compiles hot code twice, quickly and then optimised;
  on a small job the optimising compilations are most of the JVM's CPU
  and finish when the job no longer needs them. Measured on this 2-core
  machine (2026-12-07, nothing beside it): tonight's 25 runs (12 MB of
  results) into a 1M-row dataset, 15 CPU-s and 12.6 s quick, 25 CPU-s and
  15 s full; a matrix over that dataset (8.4 MB of Parquet), 36-40 CPU-s
  and 26-29 s quick, 57 CPU-s and 31 s full; the full rebuild's ingest of
  630 MB of results, 56.5 CPU-s and 34 s quick, 58 CPU-s and 32 s full (the
  optimising compiler pays off from there). ``--jit quick|full`` overrides
  the choice.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_MASTER = "local[*]"
DRIVER_MEMORY = "1g"
EXECUTOR_MEMORY = "2g"
SHUFFLE_PARTITIONS = 8
MIN_JAVA = 17
MAX_PARTITION_BYTES = 96 << 20
OPEN_COST_BYTES = 64 << 10
QUICK_JIT_RESULTS_BYTES = 128 << 20
"""A job reading less than this of results files is small (a fifth of the
630 MB whose ingest the quick JIT no longer makes cheaper)."""
QUICK_JIT_DATASET_BYTES = 16 << 20
"""A job reading less than this of the dataset's Parquet is small (twice the
8.4 MB, a million rows, over which a matrix took a third less CPU quick)."""
JIT_CHOICES = ("auto", "quick", "full")
QUICK_JIT_OPTION = "-XX:TieredStopAtLevel=1"

LOG4J2 = """\
# Written by conformance.aggregate.spark: Spark's own logs at ERROR only.
rootLogger.level = error
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark %p %c{1}: %m%n%ex
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
# PySpark launches the JVM like a shell; with Spark's loggers at the root's
# level Spark skips its "Setting default log level" banner.
logger.spark.name = org.apache.spark
logger.spark.level = error
logger.sparkproject.name = org.sparkproject
logger.sparkproject.level = error
"""


class SparkUnavailable(RuntimeError):
    """Spark cannot start here: pyspark or Java missing, or a bad master URL.
    The message says what to install or change."""


def check_pyspark() -> str:
    """The pyspark version, or a clear error naming the extra to install."""
    try:
        import pyspark
    except ImportError as exc:
        raise SparkUnavailable(
            "pyspark is not installed: pip install -e '.[aggregate]' "
            "(scripts/setup.sh --aggregate installs it, and --test)"
        ) from exc
    return pyspark.__version__


def java_executable() -> str:
    """The java Spark will run: $JAVA_HOME/bin/java, else java on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
        raise SparkUnavailable(
            f"JAVA_HOME={home} has no bin/java; point it at a JDK {MIN_JAVA}+ "
            "or unset it to use java on PATH"
        )
    found = shutil.which("java")
    if not found:
        raise SparkUnavailable(
            f"Java is missing: Spark needs Java {MIN_JAVA} or newer on PATH or in JAVA_HOME "
            "(on Debian: apt-get install openjdk-17-jre-headless)"
        )
    return found


def check_java() -> tuple[str, int]:
    """(path, major version) of the java Spark will use; refuses Java < 17,
    which Spark 4 does not run on (the failure would otherwise be a long
    UnsupportedClassVersionError from deep inside the JVM launch)."""
    java = java_executable()
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SparkUnavailable(f"{java} -version failed: {exc}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        raise SparkUnavailable(
            f"cannot tell the Java version of {java}: {out.stderr.strip()[:200]}"
        )
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0" style
        major = int(match.group(2))
    if major < MIN_JAVA:
        raise SparkUnavailable(f"{java} is Java {major}; Spark needs Java {MIN_JAVA} or newer")
    return java, major


def check_master(master: str | None) -> str:
    """``local``, ``local[N]``/``local[*]`` or ``spark://HOST:PORT``."""
    if not master:
        return DEFAULT_MASTER
    if re.fullmatch(r"local(\[(\*|\d+)\])?", master) or re.fullmatch(r"spark://[^/:]+:\d+", master):
        return master
    raise SparkUnavailable(f"--master must be local[*] or spark://HOST:PORT, not {master!r}")


def log4j_config() -> Path:
    """A log4j2 properties file for the driver and executors, content-named
    so concurrent sessions never write over each other's."""
    digest = hashlib.sha256(LOG4J2.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"conformance-spark-log4j2-{digest}.properties"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(LOG4J2, encoding="utf-8")
        tmp.replace(path)
    return path


def input_bytes(*paths: str | os.PathLike) -> int:
    """The bytes of the files under ``paths`` (files or directories; missing
    ones count 0): what a job over them reads at most."""
    total = 0
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            total += path.stat().st_size
            continue
        for root, _dirs, files in os.walk(path):
            for name in files:
                try:
                    total += os.stat(os.path.join(root, name)).st_size
                except OSError:  # removed meanwhile (an old version pruned)
                    pass
    return total


@dataclass(frozen=True)
class JobSize:
    """What a Spark job reads at most: results files (JSON lines) and the
    dataset's Parquet files, in bytes."""

    results_bytes: int = 0
    dataset_bytes: int = 0

    @property
    def small(self) -> bool:
        """Small enough for the quick JIT: a Parquet byte holds about 75
        results bytes' rows, so each kind counts against its own limit."""
        return (
            self.results_bytes / QUICK_JIT_RESULTS_BYTES
            + self.dataset_bytes / QUICK_JIT_DATASET_BYTES
            < 1
        )

    def __str__(self) -> str:
        parts = [
            f"{size / 1e6:,.1f} MB of {what}"
            for size, what in ((self.results_bytes, "results"), (self.dataset_bytes, "Parquet"))
            if size
        ]
        return " and ".join(parts) or "nothing"


def quick_jit(jit: str, job: JobSize | None) -> bool:
    """Whether a job's JVMs run the quick compiler only: ``quick`` and
    ``full`` say so; ``auto`` picks it for a job known to be small (an
    unknown size keeps the optimising compiler)."""
    if jit not in JIT_CHOICES:
        raise SparkUnavailable(f"--jit must be one of {', '.join(JIT_CHOICES)}, not {jit!r}")
    if jit != "auto":
        return jit == "quick"
    return job is not None and job.small


def session_conf(
    master: str | None = None,
    driver_memory: str = DRIVER_MEMORY,
    extra: dict[str, str] | None = None,
    quick: bool = False,
) -> dict[str, str]:
    """The configuration as a plain dict (printed by the benchmark, tested);
    ``quick``: the JVMs run the quick JIT only (see the module docstring)."""
    master = check_master(master)
    java_opts = (
        f"-Dlog4j2.configurationFile=file:{log4j_config()} "
        f"-XX:ReservedCodeCacheSize=128m -XX:MaxDirectMemorySize=256m -XX:MaxMetaspaceSize=256m "
        # Throughput collector: batch jobs need no short pauses, and
        # it keeps no remembered sets (G1's cost 5 to 10% of the heap).
        f"-XX:+UseParallelGC" + (f" {QUICK_JIT_OPTION}" if quick else "")
    )
    conf = {
        "spark.master": master,
        "spark.app.name": "conformance-aggregate",
        "spark.driver.memory": driver_memory,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(SHUFFLE_PARTITIONS),
        "spark.default.parallelism": str(SHUFFLE_PARTITIONS),
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.ansi.enabled": "false",
        "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
        # Results files are small (one per run): pack many into one task
        # (the default 4 MB per-file cost would make hundreds of tiny tasks).
        "spark.sql.files.openCostInBytes": str(OPEN_COST_BYTES),
        "spark.sql.files.maxPartitionBytes": str(MAX_PARTITION_BYTES),
        "spark.sql.parquet.compression.codec": "snappy",
        # A task's rows fall into a few month/protocol partitions: writing
        # them through concurrent writers saves sorting every row first.
        "spark.sql.maxConcurrentOutputFileWriters": "32",
        # Standard Parquet timestamps (not the legacy INT96), readable by any tool.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        # Listing a few thousand local files is faster in the driver than as a job.
        "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000",
        "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
        "spark.hadoop.parquet.summary.metadata.level": "NONE",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }
    if master.startswith("spark://"):
        conf.update(
            {
                "spark.executor.memory": EXECUTOR_MEMORY,
                "spark.executor.cores": "2",
                "spark.cores.max": "2",
            }
        )
    conf.update(extra or {})
    return conf


def get_session(
    master: str | None = None,
    driver_memory: str = DRIVER_MEMORY,
    extra: dict[str, str] | None = None,
    quick: bool = False,
) -> Any:
    """A SparkSession with the project's settings (see the module docstring);
    ``quick``: its JVMs run the quick JIT only (quick_jit decides).

    Raises SparkUnavailable, with what to do, when pyspark or Java is
    missing. If a session is already running in this process it is reused
    (Spark allows one per JVM); its master must then be the one asked for."""
    check_pyspark()
    check_java()
    conf = session_conf(master, driver_memory, extra, quick)
    # Loopback only, and no "hostname resolves to a loopback address" warning.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        running = active.sparkContext.master
        if running != conf["spark.master"]:
            raise SparkUnavailable(
                f"a Spark session for {running} is already running in this process; "
                f"cannot switch to {conf['spark.master']}"
            )
        return active
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # py4j / JVM launch errors: make them readable
        text = str(exc).strip().splitlines()
        raise SparkUnavailable(
            f"Spark did not start ({conf['spark.master']}): "
            f"{text[0] if text else type(exc).__name__}"
        ) from exc
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def driver_pid(spark: Any) -> int | None:
    """The process id of the driver JVM (for memory sampling), when this
    process launched it."""
    gateway = getattr(spark.sparkContext, "_gateway", None)
    proc = getattr(gateway, "proc", None)
    return getattr(proc, "pid", None)

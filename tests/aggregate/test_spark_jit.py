"""The JIT a Spark job's JVMs run with (conformance.aggregate.spark): the
quick compiler only for a job over little data, the optimising one for a
big or unknown one, and the choice reaches the JVM."""

from __future__ import annotations

import pytest

from conformance.aggregate.spark import (
    QUICK_JIT_DATASET_BYTES,
    QUICK_JIT_OPTION,
    QUICK_JIT_RESULTS_BYTES,
    JobSize,
    SparkUnavailable,
    input_bytes,
    quick_jit,
    session_conf,
)


def test_auto_picks_the_quick_jit_only_for_a_small_job_of_known_size():
    assert quick_jit("auto", JobSize())
    assert quick_jit("auto", JobSize(results_bytes=QUICK_JIT_RESULTS_BYTES - 1))
    assert quick_jit("auto", JobSize(dataset_bytes=QUICK_JIT_DATASET_BYTES - 1))
    assert not quick_jit("auto", JobSize(results_bytes=QUICK_JIT_RESULTS_BYTES))
    assert not quick_jit("auto", JobSize(dataset_bytes=QUICK_JIT_DATASET_BYTES))
    # Each kind counts against its own limit: half of each is the whole budget.
    halves = JobSize(QUICK_JIT_RESULTS_BYTES // 2, QUICK_JIT_DATASET_BYTES // 2)
    assert not quick_jit("auto", halves)
    assert not quick_jit("auto", None), "an unknown size keeps the optimising compiler"


def test_quick_and_full_override_the_size():
    assert quick_jit("quick", JobSize(results_bytes=10 * QUICK_JIT_RESULTS_BYTES))
    assert not quick_jit("full", JobSize())
    with pytest.raises(SparkUnavailable, match="--jit must be one of auto, quick, full"):
        quick_jit("fast", JobSize())


def test_the_size_reads_as_what_the_job_reads():
    assert str(JobSize(12_000_000, 0)) == "12.0 MB of results"
    assert str(JobSize(12_000_000, 8_400_000)) == "12.0 MB of results and 8.4 MB of Parquet"
    assert str(JobSize()) == "nothing"


def test_input_bytes_counts_every_file_under_the_paths(tmp_path):
    (tmp_path / "a" / "month=2026-01").mkdir(parents=True)
    (tmp_path / "a" / "month=2026-01" / "part-0.parquet").write_bytes(b"x" * 300)
    (tmp_path / "a" / "manifest.json").write_bytes(b"y" * 20)
    single = tmp_path / "results.jsonl"
    single.write_bytes(b"z" * 7)
    assert input_bytes(tmp_path / "a") == 320
    assert input_bytes(tmp_path / "a", single, tmp_path / "missing") == 327


def test_the_choice_is_in_the_driver_and_executor_options():
    quick = session_conf("local[2]", quick=True)
    full = session_conf("local[2]", quick=False)
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        assert quick[key].split()[-1] == QUICK_JIT_OPTION
        assert QUICK_JIT_OPTION not in full[key]
        assert quick[key].removesuffix(f" {QUICK_JIT_OPTION}") == full[key]


def test_the_driver_jvm_runs_with_the_quick_jit(spark):
    """The tests' session asks for the quick JIT: the running JVM's own
    arguments carry it (PySpark passes the driver options to the JVM it
    launches)."""
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert QUICK_JIT_OPTION in list(runtime.getInputArguments())

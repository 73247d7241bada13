"""`certify --jobs N` starts the longest targets first: their session time
in the newest run beside this one (summary.json's target_seconds), else
their protocol's case count."""

from __future__ import annotations

import json
import os
import re

from conformance.core.targets import load_targets
from conformance.jobs import SUMMARY_SECONDS_KEY, last_durations, longest_first
from conformance.runner import suite_case_counts

from .cli_runner import certify


def _targets(*names: str):
    every = load_targets([])
    return [every[name] for name in names]


def _summary(runs, name: str, seconds: dict, mtime: float) -> None:
    path = runs / name / "summary.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({SUMMARY_SECONDS_KEY: seconds}))
    os.utime(path, (mtime, mtime))


def test_last_durations_take_each_target_from_the_newest_run_that_timed_it(tmp_path):
    _summary(tmp_path, "old", {"a": 50.0, "b": 7.0}, mtime=1_000)
    _summary(tmp_path, "new", {"a": 20.0}, mtime=2_000)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "summary.json").write_text("{not json")
    _summary(tmp_path, "negative", {"c": -1}, mtime=3_000)
    assert last_durations(tmp_path, ["a", "b", "c"]) == {"a": 20.0, "b": 7.0}
    assert last_durations(tmp_path / "missing", ["a"]) == {}


def test_timed_targets_are_ordered_by_time_and_the_others_by_estimate():
    ssb, ripp, stomp = _targets("reference-ssb", "reference-ripp", "reference-stomp")
    counts = {"ssb": 73, "ripp": 23, "stomp": 55}
    # Nothing timed: case counts alone.
    assert [t.name for t in longest_first([ripp, stomp, ssb], {}, counts)] == [
        "reference-ssb",
        "reference-stomp",
        "reference-ripp",
    ]
    # stomp timed long, ripp short: ssb (never timed) is estimated at the
    # mean seconds per case of the timed ones: 73 * (40 + 2) / (55 + 23) = 39.3 s.
    durations = {"reference-stomp": 40.0, "reference-ripp": 2.0}
    assert [t.name for t in longest_first([ripp, ssb, stomp], durations, counts)] == [
        "reference-stomp",
        "reference-ssb",
        "reference-ripp",
    ]


def test_case_counts_come_from_the_suites():
    counts = suite_case_counts()
    assert set(counts) >= {"ssb", "btp", "stomp", "ripp", "ripplehost"}
    assert all(count > 10 for count in counts.values()), counts


def test_certify_jobs_starts_the_target_that_took_longest_last_time(tmp_path):
    runs = tmp_path / "runs"
    # The given order is ripp then ripplehost; the last run says ripplehost is longer.
    _summary(runs, "earlier", {"reference-ripplehost": 90.0, "reference-ripp": 1.0}, mtime=1_000)
    run = certify(
        runs,
        "--target",
        "reference-ripp",
        "--target",
        "reference-ripplehost",
        "--jobs",
        "2",
        timeout=120,
    )  # its run dir is runs/run, beside runs/earlier
    assert run.code == 0, run.output
    starts = re.findall(r"^== start (\S+):", run.output, re.MULTILINE)
    assert starts == ["reference-ripplehost", "reference-ripp"], run.output
    seconds = run.summary[SUMMARY_SECONDS_KEY]
    assert set(seconds) == {"reference-ripp", "reference-ripplehost"}
    assert all(value > 0 for value in seconds.values()), seconds

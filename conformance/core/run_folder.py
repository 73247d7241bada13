"""What a run folder holds, named once.

A run (``conformance certify``, ``interop``, ``mutation``) writes one folder,
``reports/runs/<run-id>/`` by default. The harness (the pytest plugin, in
the child process that runs a suite), the runner that starts that child and
reads its files back, the report, the cross-check, ingest and the scripts
all find the same files here; none of them spells a file name.

Layout:

    results.jsonl               one ResultRecord per case and target (core/results.py)
    summary.json                counts, verdicts, exit code: written last
    planned-<session>.jsonl     the cases a pytest session was to run, in order
    preflight-<session>.json    why a session's preflight stopped it
    junit-<session>.xml         JUnit XML of a session
    pytest-<target>[-with-<peer>].log   the child pytest's own output
    interop-summary.json        the pairs an interop run certified
    coverage-gaps.json          what the cross-check found no case for
    allure-results/             Allure's raw results; allure-report/ the HTML
    logs/                       each target's own output (stdout, stderr)
    traces/<session>/<case>.txt the wire trace of each case
    traces/<session>/<case>.pcapng  the same trace as a capture for Wireshark (core/pcap.py)
    grammar-violations-<session>.jsonl  frames of the node that broke the
                                frame grammar, whichever case read them
                                (core/node_grammar.py)
    learn/<target>/             ``conformance learn``: model.json, model.dot,
                                model.svg, summary.json, replays/<n>-<name>.json
    fuzz-summary.json           what a fuzz run did per target (conformance fuzz)
    fuzz/replay-<target>-<case>.json  a shrunk failure of a fuzz run (conformance replay)

A *session* is one pytest run: a target alone (``NAME``) or an interop pair
(``CLIENT+SERVER``), see :func:`session_label`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "summary.json"
INTEROP_SUMMARY_FILE = "interop-summary.json"
COVERAGE_GAPS_FILE = "coverage-gaps.json"
ALLURE_RESULTS_DIR = "allure-results"
ALLURE_REPORT_DIR = "allure-report"
LOGS_DIR = "logs"
TRACES_DIR = "traces"
TRACE_SUFFIX = ".txt"
CAPTURE_SUFFIX = ".pcapng"
LEARN_DIR = "learn"
LEARNED_MODEL_STEM = "model"
LEARN_SUMMARY_FILE = "summary.json"
LEARN_REPLAYS_DIR = "replays"
FUZZ_SUMMARY_FILE = "fuzz-summary.json"
FUZZ_DIR = "fuzz"
DEFAULT_RUNS_DIR = Path("reports") / "runs"


def session_label(target: str, peer: str | None = None) -> str:
    """One pytest session's name in the run folder's file names."""
    return f"{target}+{peer}" if peer else target


@dataclass(frozen=True)
class RunFolder:
    """The files and folders of one run, under ``path``."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @classmethod
    def default(cls, run_id: str) -> RunFolder:
        return cls(DEFAULT_RUNS_DIR / run_id)

    @property
    def results(self) -> Path:
        return self.path / RESULTS_FILE

    @property
    def summary(self) -> Path:
        return self.path / SUMMARY_FILE

    @property
    def interop_summary(self) -> Path:
        return self.path / INTEROP_SUMMARY_FILE

    @property
    def coverage_gaps(self) -> Path:
        return self.path / COVERAGE_GAPS_FILE

    @property
    def allure_results(self) -> Path:
        return self.path / ALLURE_RESULTS_DIR

    @property
    def allure_report(self) -> Path:
        return self.path / ALLURE_REPORT_DIR

    @property
    def logs(self) -> Path:
        return self.path / LOGS_DIR

    @property
    def traces_root(self) -> Path:
        return self.path / TRACES_DIR

    def traces(self, target: str, peer: str | None = None) -> Path:
        """One folder per session: a run that certifies several targets runs
        the same case ids for each."""
        return self.traces_root / session_label(target, peer)

    def case_trace(self, case_id: str, target: str, peer: str | None = None) -> Path:
        """A case's wire trace as text (the record's ``trace_file``)."""
        return self.traces(target, peer) / f"{case_id}{TRACE_SUFFIX}"

    def case_capture(self, case_id: str, target: str, peer: str | None = None) -> Path:
        """A case's wire trace as a pcapng capture, beside the text."""
        return self.traces(target, peer) / f"{case_id}{CAPTURE_SUFFIX}"

    def capture_beside(self, trace_file: str | Path) -> Path:
        """The capture beside a text trace named as a record's ``trace_file``
        (relative to the run folder) names it."""
        return (self.path / trace_file).with_suffix(CAPTURE_SUFFIX)

    def captures(self) -> list[Path]:
        """Every capture the run wrote, in name order."""
        return sorted(self.traces_root.glob(f"*/*{CAPTURE_SUFFIX}"))

    @property
    def fuzz_summary(self) -> Path:
        return self.path / FUZZ_SUMMARY_FILE

    def fuzz_replay(self, target: str, case_id: str) -> Path:
        """The replay file of the failure a fuzz run found on ``target``."""
        return self.path / FUZZ_DIR / f"replay-{target}-{case_id}.json"

    def plan(self, target: str, peer: str | None = None) -> Path:
        return self.path / f"planned-{session_label(target, peer)}.jsonl"

    def preflight(self, target: str, peer: str | None = None) -> Path:
        return self.path / f"preflight-{session_label(target, peer)}.json"

    def junit(self, target: str, peer: str | None = None) -> Path:
        return self.path / f"junit-{session_label(target, peer)}.xml"

    def pytest_log(self, target: str, peer: str | None = None) -> Path:
        return self.path / f"pytest-{target}{'-with-' + peer if peer else ''}.log"

    def grammar_violations(self, target: str, peer: str | None = None) -> Path:
        """The node's frames that broke the frame grammar in a session, one
        record a line, for the grammar case of their protocol and role."""
        return self.path / f"grammar-violations-{session_label(target, peer)}.jsonl"

    def learn_dir(self, target: str) -> Path:
        """What ``conformance learn`` wrote for one target."""
        return self.path / LEARN_DIR / target

    def learned_model(self, target: str, suffix: str) -> Path:
        """The learned model as ``.json`` (the data), ``.dot`` or ``.svg``."""
        if suffix not in (".json", ".dot", ".svg"):
            raise ValueError(f"a learned model is .json, .dot or .svg, not {suffix!r}")
        return self.learn_dir(target) / f"{LEARNED_MODEL_STEM}{suffix}"

    def learn_summary(self, target: str) -> Path:
        return self.learn_dir(target) / LEARN_SUMMARY_FILE

    def learn_replays(self, target: str) -> Path:
        return self.learn_dir(target) / LEARN_REPLAYS_DIR

    def learn_replay(self, target: str, index: int, name: str) -> Path:
        """The replay file of the ``index``-th separating sequence, ``name``
        saying which case it touches (or that it is a coverage gap)."""
        return self.learn_replays(target) / f"{index:02d}-{name}.json"

    def is_run(self) -> bool:
        """A folder some run wrote results into (finished or not)."""
        return self.results.is_file()

    def is_finished(self) -> bool:
        """The summary is written last: without it the run was cut short."""
        return self.summary.is_file()

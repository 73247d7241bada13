"""`certify --jobs N` and `interop --all --jobs N`: several pytest sessions at
once give the same verdicts and case outcomes as one after the other, with
readable output (a start and an end line per target, progress lines
prefixed with the target), a preflight error still exits 2, and Ctrl-C
(or SIGTERM) stops every session and keeps what was recorded (measured: 38 s in all at
load average 9 on 2 cores, 26 s of it the serial-versus-parallel comparison)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from conformance.core.results import read_results
from conformance.jobs import ChildOutput, Console, Session, run_sessions
from reference_impl.ssb.keys import Keypair

from .cli_runner import CONFORMANCE, REPO_ROOT, WRONG_MSGNO_TARGET, certify, run_cli
from .fake_suite import ClosedPort
from .test_preflight import ssb_target

TARGETS = ["reference-btp", "reference-ripp", "reference-ripplehost", "wrong-msgno"]
"""wrong-msgno (a failed MUST case, the cases it blocks, and n/a client
cases) makes the comparison cover every kind of outcome and a NOT
CONFORMANT verdict."""
CHEAP_CASES = "server and not flow"
"""The server-role cases without the BTP flow cases (which wait out silence
deadlines): every target keeps a dozen or more cases, in a few seconds."""


def outcomes(run) -> set[tuple[str, str, str]]:
    return {(r["target"], r["case_id"], r["outcome"]) for r in run.records}


def verdicts(run) -> dict[str, bool]:
    return {group["target"]: group["conformant"] for group in run.summary["targets"]}


def final_summary(output: str) -> list[str]:
    """The count table and verdict lines printed at the end."""
    start = output.index("\ntarget ")
    return [
        line
        for line in output[start:].splitlines()
        if line.split(" ", 1)[0] in TARGETS + ["target"] and not line.startswith("[")
    ]


def test_jobs_give_the_same_verdicts_and_outcomes_as_serial(tmp_path):
    targets_file = tmp_path / "targets.toml"
    targets_file.write_text(WRONG_MSGNO_TARGET)
    args = ["--targets-file", str(targets_file), "-k", CHEAP_CASES]
    for name in TARGETS:
        args += ["--target", name]
    serial = certify(tmp_path / "serial", *args, "--jobs", "1", timeout=240)
    parallel = certify(tmp_path / "parallel", *args, "--jobs", "3", timeout=240)
    # wrong-msgno is not conformant: both runs exit 1, with the same verdicts.
    assert serial.code == parallel.code == 1, (serial.output, parallel.output)
    assert (
        verdicts(serial)
        == verdicts(parallel)
        == {
            "reference-btp": True,
            "reference-ripp": True,
            "reference-ripplehost": True,
            "wrong-msgno": False,
        }
    )
    assert outcomes(serial) == outcomes(parallel)
    assert len(serial.records) == len(parallel.records) >= 60
    assert {o for _, _, o in outcomes(parallel)} >= {
        "passed",
        "failed",
        "blocked",
        "not_applicable",
    }
    assert final_summary(serial.output) == final_summary(parallel.output)

    lines = parallel.output.splitlines()
    starts = [line for line in lines if line.startswith("== start ")]
    ends = [line for line in lines if line.startswith("== end ")]
    assert sorted(line.split()[2].rstrip(":") for line in starts) == sorted(TARGETS)
    assert sorted(line.split()[2].rstrip(":") for line in ends) == sorted(TARGETS)
    # -k left cases of every suite out: each verdict says it holds for the
    # selected cases only (docs/reports.md, "Selecting cases").
    for line in ends:
        assert re.fullmatch(
            r"== end \S+: (NOT )?CONFORMANT on the \d+ selected case\(s\)"
            r"( \(and \d+ prerequisite\(s\)\))? of \d+ \(partial run\), \d+ case\(s\): "
            r"passed \d+, failed \d+, error \d+, blocked \d+, n/a \d+; \d+\.\d s",
            line,
        ), line
    assert any("== end wrong-msgno: NOT CONFORMANT" in line for line in ends)
    # Never more than 3 sessions at once, and with 4 targets one had to wait.
    running = peak = 0
    for line in lines:
        running += line.startswith("== start ") - line.startswith("== end ")
        peak = max(peak, running)
    assert peak == 3
    # Every progress line is whole and names its target.
    # (A run of cases blocked by one root cause is one line, "[ 13-23/30] blk  11 cases ...".)
    numbered = re.compile(r"\[ *(\d+)(?:-(\d+))?/\d+\] (pass|FAIL|n/a |ERR |blk ) ")
    progress = [line for line in lines if numbered.search(line)]
    spans = [numbered.search(line).groups()[:2] for line in progress]
    assert sum(int(last or first) - int(first) + 1 for first, last in spans) == len(
        parallel.records
    )
    prefixed = re.compile(r"\[(%s)\]   \[ *\d+(-\d+)?/\d+\] " % "|".join(map(re.escape, TARGETS)))
    for line in progress:
        assert prefixed.match(line), line
    # Each session wrote its own junit file; they share only results.jsonl.
    for name in TARGETS:
        assert (parallel.run_dir / f"junit-{name}.xml").is_file()
        assert (parallel.run_dir / f"planned-{name}.jsonl").is_file()


def test_preflight_error_under_jobs_exits_2_and_starts_nothing_new(tmp_path):
    targets_file = tmp_path / "targets.toml"
    with ClosedPort() as closed:
        targets_file.write_text(ssb_target(closed.port, Keypair.generate().feed_id))
        run = certify(
            tmp_path,
            "--targets-file",
            str(targets_file),
            "--target",
            "node",
            "--target",
            "reference-ripp",
            "--target",
            "reference-btp",
            "--jobs",
            "2",
            timeout=180,
        )
    assert run.code == 2, run.output
    errors = [
        line
        for line in run.output.splitlines()
        if line.startswith("conformance: error: preflight:")
    ]
    assert len(errors) == 1 and "target node is unreachable" in errors[0], run.output
    summary = run.summary
    assert summary["preflight_target"] == "node"
    # Longest first, by case count (no earlier run timed them): node (SSB,
    # 73 cases) and reference-btp (40; about 20 s, its silence windows, so
    # still running however slowly node's preflight fails on a loaded
    # machine) start, reference-ripp (23) waits. The target already running
    # finished; the next was not started.
    assert summary["targets_not_run"] == ["reference-ripp"]
    assert "conformance: not run: reference-ripp" in run.output
    assert "== end reference-btp: CONFORMANT" in run.output
    assert {r["target"] for r in run.records} == {"reference-btp"}
    assert "== start reference-ripp:" not in run.output


@pytest.mark.parametrize(
    ("signum", "code", "word"),
    [
        (signal.SIGINT, 130, "interrupted (Ctrl-C)"),
        # SIGTERM: what a cancelled CI job, `kill` or `docker stop` sends.
        (signal.SIGTERM, 143, "terminated (SIGTERM)"),
    ],
    ids=["ctrl-c", "sigterm"],
)
def test_ctrl_c_or_sigterm_stops_every_session_and_keeps_the_results(tmp_path, signum, code, word):
    run_dir = tmp_path / "run"
    process = subprocess.Popen(
        CONFORMANCE
        + [
            "certify",
            "--run-dir",
            str(run_dir),
            "--jobs",
            "2",
            "--target",
            "reference-btp",
            "--target",
            "reference-ripplehost",
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    results = run_dir / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if results.is_file() and len({r["target"] for r in read_results(results)}) == 2:
            break
        time.sleep(0.05)
    else:
        process.kill()
        pytest.fail("both sessions did not record a case within 60 s")
    # Only the harness gets the signal (not its process group, as a terminal
    # would send it): it must stop its sessions itself.
    os.kill(process.pid, signum)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == code, output
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pid, 0)  # no session process is left in the harness's group
    records = [json.loads(line) for line in results.read_text().splitlines()]
    # Two lines (docs/targets.md, "Work dirs"): the run was interrupted and
    # its sessions' nodes stopped, and how many finished cases are kept where.
    said = [line for line in output.splitlines() if line.startswith("conformance: ")]
    assert said == [
        f"conformance: {word}: the run did not finish; the nodes it started were stopped and their work dirs removed",
        (
            f"conformance: {len(records)} finished case(s) kept in {run_dir.resolve()} (results.jsonl, traces/, "
            "allure-results/; no summary.json: the verdict needs a whole run)"
        ),
    ], output
    assert {r["target"] for r in records} == {"reference-btp", "reference-ripplehost"}
    assert len(records) < 40 + 27, "the run was stopped before it finished"


def test_interop_all_jobs_tally_each_pair_from_its_own_records(tmp_path):
    from .test_interop_all import TARGETS as INTEROP_TARGETS

    targets_file = tmp_path / "targets.toml"
    targets_file.write_text(INTEROP_TARGETS)
    run_dir = tmp_path / "run"
    completed = run_cli(
        "interop",
        "--all",
        "--protocol",
        "ripplehost",
        "--jobs",
        "2",
        "--targets-file",
        str(targets_file),
        "--run-dir",
        str(run_dir),
        timeout=240,
    )
    out = completed.stdout + completed.stderr
    assert completed.returncode == 1, out
    summary = json.loads((run_dir / "interop-summary.json").read_text())
    pairs = {(p["client"], p["server"]): p for p in summary["pairs"]}
    assert {key: p["verdict"] for key, p in pairs.items()} == {
        ("reference-ripplehost", "reference-ripplehost"): "interoperable",
        ("reference-ripplehost", "wrong-msgno"): "NOT interoperable",
        ("ghost", "reference-ripplehost"): "skipped",
        ("ghost", "wrong-msgno"): "skipped",
    }
    # The pairs ran at once, yet each counts only its own records.
    assert pairs[("reference-ripplehost", "reference-ripplehost")]["counts"]["passed"] == 2
    assert pairs[("reference-ripplehost", "wrong-msgno")]["counts"]["failed"] == 1
    assert pairs[("reference-ripplehost", "wrong-msgno")]["counts"]["passed"] == 1
    for label in ("reference-ripplehost+reference-ripplehost", "reference-ripplehost+wrong-msgno"):
        assert f"== start {label}:" in completed.stdout and f"== end {label}:" in completed.stdout
        assert (run_dir / f"junit-{label}.xml").is_file()


def test_interop_jobs_needs_all(tmp_path):
    completed = run_cli(
        "interop",
        "--client",
        "reference-ripp",
        "--server",
        "reference-ripp",
        "--jobs",
        "2",
        "--run-dir",
        str(tmp_path / "r"),
        timeout=60,
    )
    assert completed.returncode == 2 and "--jobs goes with --all" in completed.stderr


def scripted_session(
    label: str, seconds: float, log: list, lock: threading.Lock, resources=()
) -> Session:
    def run() -> int:
        with lock:
            log.append(("start", label))
        time.sleep(seconds)
        with lock:
            log.append(("end", label))
        return 0

    return Session(label, run, frozenset(resources))


def peak_overlap(log: list, labels=None) -> int:
    running, peak = set(), 0
    for event, label in log:
        if labels is None or label in labels:
            (running.add if event == "start" else running.discard)(label)
            peak = max(peak, len(running))
    return peak


def test_scheduler_keeps_to_jobs_and_resources():
    log: list = []
    lock = threading.Lock()
    sessions = [
        scripted_session("a", 0.3, log, lock, ["shared"]),
        scripted_session("b", 0.3, log, lock, ["shared"]),
        scripted_session("c", 0.2, log, lock),
        scripted_session("d", 0.2, log, lock),
        scripted_session("e", 0.2, log, lock),
    ]
    ended = []
    codes = run_sessions(
        sessions,
        2,
        ChildOutput(Console()),
        lambda s: None,
        lambda s, code, seconds: ended.append(s.label) or True,
    )
    assert codes == {label: 0 for label in "abcde"} and sorted(ended) == list("abcde")
    assert peak_overlap(log) == 2
    assert peak_overlap(log, {"a", "b"}) == 1, "sessions sharing a resource overlapped"


def test_scheduler_starts_nothing_new_after_a_stop():
    log: list = []
    lock = threading.Lock()
    sessions = [
        scripted_session("quick-bad", 0.05, log, lock),
        scripted_session("slow", 0.4, log, lock),
        scripted_session("next", 0.05, log, lock),
    ]
    codes = run_sessions(
        sessions,
        2,
        ChildOutput(Console()),
        lambda s: None,
        lambda s, code, seconds: s.label != "quick-bad",
    )
    # The running one finished, the pending one never started.
    assert set(codes) == {"quick-bad", "slow"} and ("end", "slow") in log
    assert ("start", "next") not in log


@pytest.fixture(autouse=True)
def _no_stray_reports(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    yield

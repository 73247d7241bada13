"""A run stopped (SIGTERM, Ctrl-C) in the middle of a case: the case has no
verdict, so no report may show it passed. results.jsonl has no line for it;
Allure and JUnit used to show it passed (allure-pytest wrote it with the
status of its passed setup, JUnit a nameless passed testcase), and so did
the Allure report built from them. The cases that ended before the
interrupt keep their results everywhere."""

from __future__ import annotations

import json
import shutil
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conformance import report

from .fake_suite import Listener, run_suite, targets_file, write_suite
from .test_work_dirs import _start, _stop

SLOW_AUTH_BTP = """
[targets.slow-auth-btp]
implementation = "reference-btp-slow-auth"
version = "test"
protocol = "btp"
roles = ["server"]
[targets.slow-auth-btp.params]
auth_timeout = 60
[targets.slow-auth-btp.credentials]
auth_token_generate = "hex16"
[targets.slow-auth-btp.launch]
server = "{python} -m reference_impl.btp serve --host {host} --port 0 --auth-token-file {auth_token_file} --auth-timeout 60"
ready = "BTP_READY"
outputs = { url = "url", port = "port" }
cwd = "{repo}"
"""
"""The BTP reference node dropping an unauthenticated connection only after
60 s: btp.auth.server.disconnects-client-that-never-authenticates, run
after its prerequisite (the valid auth case), first authenticates once in
its body (the node's second BTP_AUTHENTICATED line), then waits a minute
for the node to drop a silent connection."""
PREREQUISITE = "btp.auth.server.accepts-valid-auth"
SLOW = "btp.auth.server.disconnects-client-that-never-authenticates"
SLOW_FUNCTION = "test_disconnects_silent_client"
STATUS = {
    "passed": "passed",
    "failed": "failed",
    "error": "broken",
    "not_applicable": "skipped",
    "blocked": "skipped",
}


def _slow_case_is_running(run_dir: Path) -> bool:
    logs = "".join(path.read_text() for path in (run_dir / "logs").glob("slow-auth-btp.*.log"))
    return logs.count("BTP_AUTHENTICATED") >= 2


def _records(run_dir: Path) -> list[dict]:
    path = run_dir / "results.jsonl"
    return (
        [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if path.is_file()
        else []
    )


@pytest.mark.parametrize("how", ["sigterm", "ctrl-c"])
def test_a_case_cut_short_by_an_interrupt_is_nowhere_passed(tmp_path: Path, how: str) -> None:
    targets = tmp_path / "targets.toml"
    targets.write_text(SLOW_AUTH_BTP)
    process, run_dir, _ = _start(
        tmp_path, "--targets-file", str(targets), "--target", "slow-auth-btp", "-k", SLOW_FUNCTION
    )
    # The event: the slow case's body is running (its prerequisite ended).
    deadline = time.monotonic() + 60
    while not (_records(run_dir) and _slow_case_is_running(run_dir)):
        if process.poll() is not None:
            pytest.fail(
                f"certify ended before it could be stopped:\n{process.communicate()[0][-3000:]}"
            )
        if time.monotonic() > deadline:
            pytest.fail(f"no case ended within 60 s:\n{_stop(process, 'sigterm')[-3000:]}")
        time.sleep(0.05)
    started = time.monotonic()
    output = _stop(process, how)
    assert time.monotonic() - started < 30, "the run did not stop on the interrupt"
    assert process.returncode == (143 if how == "sigterm" else 130), output

    # The screen says it in two lines, no traceback (issue 24, item 14).
    assert "Traceback" not in output and "SessionTerminated" not in output, output
    said = [line for line in output.splitlines() if line.startswith("conformance: ")]
    word = "terminated (SIGTERM)" if how == "sigterm" else "interrupted (Ctrl-C)"
    assert said == [
        f"conformance: {word}: the run did not finish; the nodes it started were stopped and their work dirs removed",
        f"conformance: 1 finished case(s) kept in {run_dir} (results.jsonl, traces/, allure-results/; no "
        "summary.json: the verdict needs a whole run)",
    ], output
    # Besides the progress lines: a heading, the two lines, blank lines; nothing else.
    progress = [line for line in output.splitlines() if line.startswith("  ")]
    assert len(output.splitlines()) <= len(progress) + 6, output

    records = _records(run_dir)
    assert [(r["case_id"], r["outcome"]) for r in records] == [(PREREQUISITE, "passed")], output
    recorded = {r["case_id"]: r for r in records}

    # Allure: the finished case as recorded, the cut one broken, no verdict.
    allure = {}
    for path in (run_dir / "allure-results").glob("*-result.json"):
        data = json.loads(path.read_text())
        allure[data["name"]] = data
    assert set(allure) == {PREREQUISITE, SLOW}, sorted(allure)
    for case_id, data in allure.items():
        if case_id in recorded:
            assert data["status"] == STATUS[recorded[case_id]["outcome"]], (case_id, data["status"])
        else:
            assert data["status"] != "passed", f"{case_id} shows passed in Allure without a verdict"
    assert allure[SLOW]["status"] == "broken"
    assert "interrupted: no verdict" in allure[SLOW]["statusDetails"]["message"]
    assert "during the case's call" in allure[SLOW]["statusDetails"]["message"]
    assert (
        allure[SLOW]["historyId"] and allure[SLOW]["historyId"] != allure[PREREQUISITE]["historyId"]
    )

    # JUnit: no nameless testcase; the cut case is not a pass.
    junit = ET.parse(run_dir / "junit-slow-auth-btp.xml").getroot()
    testcases = {case.get("name"): case for case in junit.iter("testcase")}
    assert None not in testcases and len(testcases) == len(list(junit.iter("testcase"))), (
        ET.tostring(junit, encoding="unicode")
    )
    outcome = [
        child for child in testcases[SLOW_FUNCTION] if child.tag in ("failure", "error", "skipped")
    ]
    assert outcome and "interrupted: no verdict" in (outcome[0].get("message") or ""), ET.tostring(
        testcases[SLOW_FUNCTION], encoding="unicode"
    )
    (finished,) = [name for name in testcases if name != SLOW_FUNCTION]
    assert not [
        child.tag for child in testcases[finished] if child.tag in ("failure", "error", "skipped")
    ]

    # The Allure report built from these files: one pass, one broken.
    if report.BUNDLED_ALLURE.is_file() and shutil.which("java"):
        assert report.build_report(run_dir, no_history=True) == 0
        summary = json.loads((run_dir / "allure-report" / "widgets" / "summary.json").read_text())[
            "statistic"
        ]
        assert (summary["passed"], summary["broken"], summary["total"]) == (1, 1, 2), summary


CTRL_C_THEN_SIGTERM = """
import signal


def pytest_runtestloop(session):
    # Ctrl-C once the target is up (the plugin's preflight, run first,
    # started it), before the first case: outside any case.
    signal.raise_signal(signal.SIGINT)


def pytest_keyboard_interrupt(excinfo):
    # The CLI's SIGTERM (it sends one to its sessions as soon as Ctrl-C
    # reaches it), arriving while pytest reports the interrupt: a conftest's
    # hook runs before the plugin's, unless the plugin's runs first.
    signal.raise_signal(signal.SIGTERM)
"""

CASES = """
@requirement("stomp.fake.server.never-run", "MUST", "Fake §1")
def test_never_run(target):
    pass
"""


def test_sigterm_while_pytest_reports_the_interrupt_prints_no_traceback(tmp_path):
    suite = write_suite(tmp_path, CASES)
    (suite / "conftest.py").write_text(CTRL_C_THEN_SIGTERM)
    with Listener() as listener:
        run = run_suite(tmp_path, suite, targets_file(tmp_path, listener.port), timeout=60)
    # Interrupted (pytest's 2), not a crash: a SessionTerminated raised while
    # pytest reported the interrupt escaped it as pages of chained tracebacks.
    assert run.code == 2, run.output[-3000:]
    assert (
        "SessionTerminated" not in run.output
        and "During handling of the above exception" not in run.output
    ), run.output[-3000:]
    assert run.records == []


SWALLOWED_INTERRUPT = """
import asyncio, os, signal

@requirement("stomp.fake.server.ends-after-the-interrupt", "MUST", "Fake spec §1")
async def test_ends_after_the_interrupt(connect):
    await connect()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.sleep(5)
    except BaseException:
        # As asyncio.wait_for did in CPython 3.11 when the read it awaited
        # completed as the cancellation came: the interrupt is lost, and the
        # case ends as if nothing had happened.
        pass
"""


def test_a_case_that_outlives_the_interrupt_it_swallowed_has_no_verdict(tmp_path: Path) -> None:
    """After a Ctrl-C the CLI sends SIGTERM, which stops the targets; the
    case's task is cancelled, but a cancellation can be lost in the case's
    code (CPython 3.11's wait_for, above), and a case waiting for the node
    to drop its connection then saw the stopped node's close and passed in
    Allure (once in a loaded fast tier). A call that ends after a SIGTERM
    stopped the targets has no verdict: reported interrupted, never passed."""
    with Listener() as server:
        run = run_suite(
            tmp_path,
            write_suite(tmp_path, SWALLOWED_INTERRUPT),
            targets_file(tmp_path, server.port),
        )
    assert run.code != 0, run.output
    assert run.records == [], run.output
    (result,) = [
        json.loads(path.read_text())
        for path in (run.run_dir / "allure-results").glob("*-result.json")
    ]
    assert result["status"] == "broken", result["status"]
    assert "interrupted: no verdict" in result["statusDetails"]["message"]
    assert "during the case's call" in result["statusDetails"]["message"]

"""`conformance report`: Allure HTML reports of real runs, history across runs,
and the report as a person sees it, in headless Chromium.

The `report_ui` tests need what scripts/install-report-deps.sh installs (the
Allure command line from npm, Debian's chromium and chromium-driver) and the
`selenium` package (the `test` / `report` extras).  Without them they skip,
except in CI (CI set), where they fail: CI installs them first.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from conformance import cli, report

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = [sys.executable, "-m", "conformance.cli"]
INSTALL_SCRIPT = "scripts/install-report-deps.sh"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
]
ATTACHMENT = "wire trace (hex dump, both directions)"
CASE = "ssb.shs.server.rejects-tampered-msg3"
CERTIFY_ARGS = ["--protocol", "ssb", "-k", "shs"]
WAIT_S = 30


# -- dependencies: skip locally, fail in CI -------------------------------------


def _allure_missing() -> list[str]:
    missing = []
    if not (
        report.BUNDLED_ALLURE.is_file()
        or shutil.which("allure")
        or os.environ.get(report.ALLURE_ENV)
    ):
        missing.append(f"the Allure command line ({report.BUNDLED_ALLURE})")
    if not shutil.which("java"):
        missing.append("java")
    return missing


def _browser_missing() -> list[str]:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.is_file()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the Python package selenium (pip install -e '.[report]')")
    return missing


def require(missing: list[str]) -> None:
    if not missing:
        return
    message = f"missing {', '.join(missing)}: run {INSTALL_SCRIPT}"
    if os.environ.get("CI"):
        pytest.fail(
            f"{message} (CI installs these before the tests, so this is an install failure)"
        )
    pytest.skip(message)


# -- two real runs and their reports -----------------------------------------------


@dataclass
class Reports:
    runs: Path
    first: Path
    second: Path
    outputs: dict[str, str]
    seconds: dict[str, float]

    def report_dir(self, run: Path) -> Path:
        return run / "allure-report"


def _conformance(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        CONFORMANCE + list(args),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Reports:
    require(_allure_missing())
    runs = tmp_path_factory.mktemp("report") / "runs"
    first, second = runs / "20260101-first", runs / "20260102-second"
    outputs, seconds = {}, {}
    for name, run in (("first", first), ("second", second)):
        started = time.monotonic()
        done = _conformance("certify", "--run-dir", str(run), *CERTIFY_ARGS)
        seconds[f"certify {name}"] = time.monotonic() - started
        assert done.returncode == 0, f"certify {name} failed:\n{done.stdout}{done.stderr}"
    for name, run in (("first", first), ("second", second)):
        started = time.monotonic()
        done = _conformance("report", str(run))
        seconds[f"report {name}"] = time.monotonic() - started
        assert done.returncode == 0, f"conformance report {run} failed:\n{done.stdout}{done.stderr}"
        outputs[name] = done.stdout
    return Reports(runs, first, second, outputs, seconds)


def _results(run: Path) -> list[dict]:
    return [
        json.loads(line)
        for line in (run / "results.jsonl").read_text().splitlines()
        if line.strip()
    ]


def _allure_result(run: Path, case_id: str) -> dict:
    for path in (run / "allure-results").glob("*-result.json"):
        data = json.loads(path.read_text())
        if data.get("name") == case_id:
            return data
    raise AssertionError(f"no Allure result named {case_id} in {run}")


def _attachment_text(run: Path, case_id: str) -> str:
    result = _allure_result(run, case_id)
    (attachment,) = [a for a in result["attachments"] if a["name"] == ATTACHMENT]
    return (run / "allure-results" / attachment["source"]).read_text()


@pytest.mark.report_ui
def test_reports_carry_history_over(reports: Reports) -> None:
    first_report = reports.report_dir(reports.first)
    second_report = reports.report_dir(reports.second)
    for name, out in (("first", first_report), ("second", second_report)):
        assert (out / "index.html").is_file()
        assert f"report: {out}" in reports.outputs[name]
        assert "allure" in reports.outputs[name] and " open " in reports.outputs[name]
    assert "history: none carried over" in reports.outputs["first"]
    assert f"history: from {first_report / 'history'}" in reports.outputs["second"]

    trend_1 = json.loads((first_report / "history" / "history-trend.json").read_text())
    trend_2 = json.loads((second_report / "history" / "history-trend.json").read_text())
    assert len(trend_1) == 1
    assert len(trend_2) == 2, trend_2
    assert [entry["buildOrder"] for entry in trend_2] == [2, 1]
    cases = len(_results(reports.second))
    assert all(entry["data"]["total"] == cases for entry in trend_2)

    # Each case's own history: the second report knows the first run's outcome.
    (case,) = [
        data
        for data in map(
            json.loads, map(Path.read_text, (second_report / "data" / "test-cases").glob("*.json"))
        )
        if data["name"] == CASE
    ]
    assert case["extra"]["history"]["statistic"]["total"] == 2
    assert len(case["extra"]["history"]["items"]) == 1  # the first run's result
    # ... and hands both on to the next report.
    history = json.loads((second_report / "history" / "history.json").read_text())
    (entry,) = [e for e in history.values() if any(i["uid"] == case["uid"] for i in e["items"])]
    assert entry["statistic"]["total"] == 2 and entry["statistic"]["passed"] == 2
    assert len(entry["items"]) == 2

    # Executor and environment: what run, what harness, what implementation.
    run_id = json.loads((reports.second / "summary.json").read_text())["run_id"]
    executors = json.loads((second_report / "widgets" / "executors.json").read_text())
    assert executors[0]["buildOrder"] == 2 and run_id in executors[0]["buildName"]
    environment = {
        e["name"]: e["values"]
        for e in json.loads((second_report / "widgets" / "environment.json").read_text())
    }
    assert environment["run.id"] == [run_id]
    assert environment["harness.version"]
    # The verdict first (the widget shows its first entries), then what was certified.
    assert environment["target.reference-ssb"][0].startswith("CONFORMANT")
    assert environment["target.reference-ssb"][0].endswith(": reference-ssb 0.1.0 (ssb)")
    assert list(environment)[0] == "target.reference-ssb"


@pytest.mark.report_ui
def test_report_data_has_every_case_and_its_wire_trace(reports: Reports) -> None:
    out = reports.report_dir(reports.second)
    by_name = {}
    for path in (out / "data" / "test-cases").glob("*.json"):
        data = json.loads(path.read_text())
        by_name[data["name"]] = data
    expected = {r["case_id"] for r in _results(reports.second)}
    assert expected and expected <= set(by_name), sorted(expected - set(by_name))
    for case_id in expected:
        attachments = [
            a for step in [by_name[case_id]["testStage"]] for a in step.get("attachments", [])
        ]
        named = [a for a in attachments if a["name"] == ATTACHMENT]
        assert named, f"{case_id}: no '{ATTACHMENT}' attachment in the report"
        text = (out / "data" / "attachments" / named[0]["source"]).read_text()
        assert "-- connected to" in text and "harness -> target" in text, case_id
        labels = {label["name"]: label["value"] for label in by_name[case_id]["labels"]}
        assert labels["requirement"] == case_id and labels["protocol"] == "ssb"
        assert labels["level"] in ("MUST", "SHOULD", "MAY") and labels["severity"]


# -- the report in a browser ----------------------------------------------------------


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@contextlib.contextmanager
def serve_report(directory: Path):
    """A report over http on 127.0.0.1 (Allure's page loads its data with
    requests that browsers refuse for file:// pages): yields its index URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="report-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture
def served_report(reports: Reports):
    """The second report, served."""
    with serve_report(reports.report_dir(reports.second)) as url:
        yield url


@pytest.fixture
def browser(tmp_path: Path):
    require(_browser_missing())
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    # An explicit driver path: Selenium Manager (which downloads) never runs.
    service = Service(
        executable_path=str(CHROMEDRIVER), log_output=str(tmp_path / "chromedriver.log")
    )
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(WAIT_S)
    driver.set_script_timeout(WAIT_S)
    try:
        yield driver
    finally:
        try:
            driver.save_screenshot(str(tmp_path / "last-page.png"))
        except Exception:  # noqa: BLE001 -- a screenshot for debugging only
            pass
        driver.quit()


def _literal(text: str) -> str:
    """An XPath string literal for text (which may hold quotes)."""
    if "'" not in text:
        return f"'{text}'"
    return "concat(" + ', "\'", '.join(f"'{part}'" for part in text.split("'")) + ")"


@pytest.mark.report_ui
def test_report_in_chromium_shows_cases_and_wire_traces(
    reports: Reports, served_report: str, browser, tmp_path: Path
) -> None:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, WAIT_S)
    started = time.monotonic()

    def until(condition, what: str):
        try:
            return wait.until(condition)
        except TimeoutException as exc:
            raise AssertionError(
                f"after {WAIT_S} s the report page shows no {what} "
                f"(screenshot: {tmp_path / 'last-page.png'})"
            ) from exc

    # The suites page, as a person opens it: the tree starts collapsed; open
    # the case's suite groups (its parentSuite / suite / subSuite labels).
    browser.get(served_report + "#suites")
    labels = {
        label["name"]: label["value"] for label in _allure_result(reports.second, CASE)["labels"]
    }
    for group in (labels["parentSuite"], labels["suite"], labels["subSuite"]):
        title = until(
            EC.element_to_be_clickable(
                (
                    By.XPATH,
                    "//*[@data-node-kind='group']/*[contains(@class,'node__title')]"
                    f"[*[contains(@class,'node__name') and normalize-space()={_literal(group)}]]",
                )
            ),
            f"suite group '{group}'",
        )
        if "node__expanded" not in title.find_element(By.XPATH, "..").get_attribute("class"):
            title.click()

    # Every case of the run is listed under it.
    expected = sorted(r["case_id"] for r in _results(reports.second))
    leaf_names = "//*[contains(@class,'node__leaf')]//*[contains(@class,'node__name')]"
    until(
        lambda d: len(d.find_elements(By.XPATH, leaf_names)) >= len(expected),
        f"{len(expected)} cases",
    )
    listed = sorted(e.text.strip() for e in browser.find_elements(By.XPATH, leaf_names))
    assert listed == expected

    # Open the case: its page has the title and the wire-trace attachment.
    until(
        EC.element_to_be_clickable((By.XPATH, f"{leaf_names}[normalize-space()={_literal(CASE)}]")),
        f"case {CASE}",
    ).click()
    until(EC.url_contains("#suites/"), "case URL")
    until(
        EC.text_to_be_present_in_element((By.CSS_SELECTOR, ".side-by-side__right"), CASE),
        f"page of case {CASE}",
    )
    row = until(
        EC.element_to_be_clickable(
            (
                By.XPATH,
                "//*[contains(@class,'attachment-row') and @data-uid]"
                f"[.//*[contains(@class,'attachment-row__name') and normalize-space()={_literal(ATTACHMENT)}]]",
            )
        ),
        f"attachment '{ATTACHMENT}'",
    )
    row.click()

    # Opened, it shows the hex dump of both directions, as recorded.
    content = "//*[contains(@class,'attachment-row__content')]"
    until(
        lambda d: any("harness -> target" in e.text for e in d.find_elements(By.XPATH, content)),
        "hex dump text 'harness -> target' in the opened attachment",
    )
    shown = "\n".join(e.text for e in browser.find_elements(By.XPATH, content))
    assert "target -> harness" in shown
    recorded = _attachment_text(reports.second, CASE)
    hex_lines = [line.strip() for line in recorded.splitlines() if line.startswith("    0000")]
    assert hex_lines, recorded
    assert hex_lines[0].split("|")[0].strip() in shown

    # The History tab lists the first run's outcome of the same case.
    until(
        EC.element_to_be_clickable(
            (By.XPATH, "//*[contains(@class,'tabs')]//*[normalize-space()='History']")
        ),
        "History tab",
    ).click()
    until(
        EC.text_to_be_present_in_element((By.CSS_SELECTOR, ".side-by-side__right"), "(2 of 2)"),
        "'Success rate 100% (2 of 2)' (this run and the first) in the History tab",
    )
    assert time.monotonic() - started < 120


# -- errors, without Allure or a browser ----------------------------------------------


def _fake_run(
    run: Path,
    finished: str | None = None,
    with_report: bool = False,
    targets: tuple[str, ...] = ("reference-stomp",),
    impairment: str | None = None,
) -> Path:
    results = run / "allure-results"
    results.mkdir(parents=True)
    (results / "0-result.json").write_text(
        json.dumps({"name": "x", "status": "passed", "uuid": "0"})
    )
    if finished:
        (run / "summary.json").write_text(
            json.dumps(
                {
                    "run_id": run.name,
                    "finished": finished,
                    "targets": [{"target": t} for t in targets],
                    "targets_requested": list(targets),
                    "impairment": impairment,
                    "conformant": True,
                }
            )
        )
    if with_report:
        history = run / "allure-report" / "history"
        history.mkdir(parents=True)
        (history / "history.json").write_text("{}")
        (history / "history-trend.json").write_text(json.dumps([{"buildOrder": 7, "data": {}}]))
    return run


def test_previous_history_is_the_newest_earlier_run_with_a_report(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    old = _fake_run(runs / "b-old", "2026-01-01T00:00:00.000Z", with_report=True)
    newer = _fake_run(runs / "c-newer", "2026-01-02T00:00:00.000Z", with_report=True)
    _fake_run(runs / "d-no-report", "2026-01-03T00:00:00.000Z")
    this = _fake_run(runs / "a-this", "2026-01-04T00:00:00.000Z")
    later = _fake_run(runs / "e-later", "2026-01-05T00:00:00.000Z", with_report=True)
    assert report.previous_history(this) == newer / "allure-report" / "history"
    assert report.previous_history(newer) == old / "allure-report" / "history"
    assert report.previous_history(old) is None
    assert report.previous_history(later) == newer / "allure-report" / "history"
    assert report.previous_build_order(newer / "allure-report" / "history") == 7
    assert report.history_source(newer) == newer / "allure-report" / "history"


def test_previous_history_comes_only_from_the_same_series(tmp_path: Path) -> None:
    """A report's trend is its own series' (the same targets, the same
    impairment profile): a sibling run of other targets, or of the same
    targets under a profile, lends it nothing, however recent."""
    runs = tmp_path / "runs"
    nightly = _fake_run(
        runs / "a-stomp-night-1", "2026-01-01T00:00:00.000Z", True, ("activemq", "reference-stomp")
    )
    _fake_run(runs / "b-btp", "2026-01-02T00:00:00.000Z", True, ("reference-btp",))
    _fake_run(runs / "c-one-target", "2026-01-02T01:00:00.000Z", True, ("activemq",))
    _fake_run(
        runs / "d-impaired",
        "2026-01-02T02:00:00.000Z",
        True,
        ("activemq", "reference-stomp"),
        "fragment seed=5",
    )
    this = _fake_run(
        runs / "e-stomp-night-2", "2026-01-03T00:00:00.000Z", False, ("reference-stomp", "activemq")
    )
    assert report.run_series(this) == (("activemq", "reference-stomp"), None)
    assert report.previous_history(this) == nightly / "allure-report" / "history"
    impaired_again = _fake_run(
        runs / "f-impaired-2",
        "2026-01-04T00:00:00.000Z",
        False,
        ("activemq", "reference-stomp"),
        "fragment seed=6",
    )
    assert (
        report.previous_history(impaired_again) == runs / "d-impaired" / "allure-report" / "history"
    )
    lone = _fake_run(runs / "g-ripp", "2026-01-05T00:00:00.000Z", False, ("reference-ripp",))
    assert report.previous_history(lone) is None


def test_report_without_allure_says_how_to_install(tmp_path: Path, monkeypatch, capsys) -> None:
    run = _fake_run(tmp_path / "run", "2026-01-01T00:00:00.000Z")
    monkeypatch.setattr(report, "BUNDLED_ALLURE", tmp_path / "none" / "allure")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.delenv(report.ALLURE_ENV, raising=False)
    assert cli.main(["report", str(run)]) == report.EXIT_HARNESS_ERROR
    err = capsys.readouterr().err
    assert "Allure command line is not installed" in err and INSTALL_SCRIPT in err
    assert not (run / "allure-report").exists()


def test_report_refuses_bad_run_dirs_and_outputs(tmp_path: Path, capsys) -> None:
    assert cli.main(["report", str(tmp_path / "missing")]) == report.EXIT_USAGE
    empty = tmp_path / "empty"
    (empty / "allure-results").mkdir(parents=True)
    assert cli.main(["report", str(empty)]) == report.EXIT_USAGE
    assert "holds no Allure results" in capsys.readouterr().err
    run = _fake_run(tmp_path / "run")
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    assert cli.main(["report", str(run), "--out", str(precious)]) == report.EXIT_USAGE
    assert (precious / "notes.txt").read_text() == "keep me"
    assert "not an Allure report" in capsys.readouterr().err
    assert cli.main(["report", str(run), "--out", str(run)]) == report.EXIT_USAGE
    assert (
        cli.main(["report", str(run), "--history-from", str(tmp_path / "missing")])
        == report.EXIT_USAGE
    )

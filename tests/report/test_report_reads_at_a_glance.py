"""Issue 31, checked in a real browser: a two-target run with a failing
target (coilmq, which speaks no TLS, beside the reference STOMP node), its
Allure report served on 127.0.0.1 and read in Debian's headless Chromium.

What a reader must see: the verdicts first (the report's title names each
target's, the failing one first); a blocked case apart from a not
applicable one (Allure's "Unknown"), naming its root cause with a link
that opens the root cause's page; a failure in the harness's words, with
no Python class or traceback, and the node's own log beside the trace.
Screenshots of the overview, the failed case and the blocked case are
written to the test's tmp dir, and to docs/reports/ with
CONFORMANCE_UPDATE_SCREENSHOTS=1 (docs/reports.md shows them).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from conformance import report

from .test_report import (  # noqa: F401 -- the browser fixture and its helpers
    REPO_ROOT,
    WAIT_S,
    _allure_missing,
    browser,
    require,
    serve_report,
)
from tests.harness.cli_runner import run_cli

pytestmark = pytest.mark.report_ui

ROOT = "stomp.tls.server.completes-mutual-handshake"
CASE = "stomp.frame.server.keeps-header-spaces"
SCREENSHOTS = REPO_ROOT / "docs" / "reports"


@pytest.fixture(scope="module")
def two_target_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(_allure_missing())
    run_dir = tmp_path_factory.mktemp("glance") / "run"
    done = run_cli(
        "certify",
        "--run-dir",
        str(run_dir),
        "--target",
        "reference-stomp",
        "--target",
        "coilmq",
        "--case",
        CASE,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr  # coilmq: NOT CONFORMANT
    assert report.build_report(run_dir, no_history=True) == 0
    return run_dir / "allure-report"


def _pages(out: Path) -> dict[tuple[str, str], dict]:
    pages = {}
    for path in (out / "data" / "test-cases").glob("*.json"):
        case = json.loads(path.read_text())
        target = next(lb["value"] for lb in case["labels"] if lb["name"] == "target")
        pages[(case["name"], target)] = case
    return pages


@pytest.fixture
def served(two_target_report: Path):
    with serve_report(two_target_report) as url:
        yield url


def _shot(driver, tmp_path: Path, name: str) -> None:
    driver.save_screenshot(str(tmp_path / f"{name}.png"))
    if os.environ.get("CONFORMANCE_UPDATE_SCREENSHOTS"):
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / f"{name}.png", SCREENSHOTS / f"{name}.png")


def test_report_reads_at_a_glance_in_chromium(
    two_target_report: Path,
    served: str,
    browser,  # noqa: F811 -- the fixture imported from test_report
    tmp_path: Path,
) -> None:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, WAIT_S)

    def until_text(text: str, what: str) -> None:
        try:
            wait.until(EC.text_to_be_present_in_element((By.TAG_NAME, "body"), text))
        except TimeoutException as exc:
            raise AssertionError(
                f"after {WAIT_S} s the {what} does not show {text!r} (screenshot in {tmp_path})"
            ) from exc

    pages = _pages(two_target_report)
    root = pages[(ROOT, "coilmq")]
    blocked = pages[(CASE, "coilmq")]
    assert root["status"] == "failed" and blocked["status"] == "unknown"

    # The overview: the verdicts first, the failing target before the other.
    browser.get(served + "#")
    until_text("coilmq NOT CONFORMANT", "overview")
    body = browser.find_element(By.TAG_NAME, "body").text
    assert body.index("coilmq NOT CONFORMANT") < body.index("reference-stomp CONFORMANT"), body[
        :500
    ]
    assert "Blocked by a prerequisite" in body, body[:1500]  # blocked counted apart
    _shot(browser, tmp_path, "overview")

    # The root cause: the harness's sentence, no Python, the node's own log.
    browser.get(served + f"#testresult/{root['uid']}")
    until_text(ROOT, "failed case's page")
    until_text("TLS", "failed case's page")
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "conformance.plugin" not in body and "Traceback" not in body, body[:1500]
    assert body.count("the target reset the connection") == 1, body[:3000]  # said once
    assert "log of coilmq (server process" in body, body[:1500]
    _shot(browser, tmp_path, "failed-case")

    # The blocked case: its root cause named, and a link that opens its page.
    browser.get(served + f"#testresult/{blocked['uid']}")
    until_text(f"blocked by {ROOT}", "blocked case's page")
    _shot(browser, tmp_path, "blocked-case")
    link = browser.find_element(By.XPATH, f"//a[contains(normalize-space(), 'root cause: {ROOT}')]")
    assert link.get_attribute("href").endswith(f"#testresult/{root['uid']}")
    browser.get(link.get_attribute("href"))
    until_text("the target reset the connection", "root cause's page reached by the link")

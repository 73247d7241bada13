"""The Allure report tells blocked cases (skipped for Allure) apart from not
applicable ones, and names the root causes; a run stopped by its preflight
says why."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conformance import report
from tests.harness.fake_suite import Listener, run_suite, targets_file, write_suite
from tests.harness.test_blocked import CHAIN


def test_environment_names_root_causes_and_blocked_counts(tmp_path: Path) -> None:
    summary = {
        "run_id": "r1",
        "harness_version": "0",
        "conformant": False,
        "targets": [
            {
                "target": "node",
                "implementation": "impl",
                "implementation_version": "1",
                "protocol": "ssb",
                "conformant": False,
                "levels": {
                    "MUST": {
                        "passed": 3,
                        "failed": 1,
                        "error": 0,
                        "blocked": 2,
                        "not_applicable": 0,
                    }
                },
                "root_causes": [
                    {
                        "case_id": "ssb.shs.server.completes-valid-handshake",
                        "level": "MUST",
                        "outcome": "failed",
                        "message": "no msg2",
                        "blocked": ["a", "b"],
                    }
                ],
            }
        ],
    }
    report.write_environment(tmp_path, {"summary": summary, "complete": True, "run_id": "r1"})
    props = (tmp_path / "environment.properties").read_text()
    assert "target.node=NOT CONFORMANT (MUST: 1 failed, 2 blocked): impl 1 (ssb)" in props
    assert "target.node.root_causes=ssb.shs.server.completes-valid-handshake (blocked 2)" in props


def test_environment_says_a_run_was_partial(tmp_path: Path) -> None:
    summary = {
        "run_id": "r3",
        "conformant": True,
        "partial": True,
        "targets": [
            {
                "target": "node",
                "implementation": "impl",
                "implementation_version": "1",
                "protocol": "ripplehost",
                "conformant": True,
                "verdict": "CONFORMANT",
                "partial": True,
                "suite_cases": 30,
                "selected_cases": 3,
                "prerequisite_cases": 2,
                "levels": {"MUST": {"passed": 5}},
                "root_causes": [],
            }
        ],
    }
    report.write_environment(tmp_path, {"summary": summary, "complete": True, "run_id": "r3"})
    assert (
        "target.node=CONFORMANT on the 3 selected case(s) (and 2 prerequisite(s)) of 30 "
        "(partial run): impl 1 (ripplehost)"
    ) in (tmp_path / "environment.properties").read_text()


def test_preflight_error_is_in_the_environment(tmp_path: Path) -> None:
    summary = {
        "run_id": "r2",
        "targets": [],
        "conformant": False,
        "preflight_error": "target node is unreachable: no TCP connection to 127.0.0.1:9",
    }
    report.write_environment(tmp_path, {"summary": summary, "complete": True, "run_id": "r2"})
    assert (
        "run.preflight.error=target node is unreachable"
        in (tmp_path / "environment.properties").read_text()
    )


@pytest.mark.skipif(
    not (report.BUNDLED_ALLURE.is_file() and shutil.which("java")),
    reason="needs the Allure command line (scripts/install-report-deps.sh) and java",
)
def test_report_puts_blocked_cases_in_their_own_category(tmp_path: Path) -> None:
    with Listener() as server:
        run = run_suite(
            tmp_path,
            write_suite(tmp_path, "BASE_PASSES = False\n" + CHAIN),
            targets_file(tmp_path, server.port),
        )
    assert any(r["outcome"] == "blocked" for r in run.records)
    assert report.build_report(run.run_dir, no_history=True) == 0
    data = run.run_dir / "allure-report" / "data"
    categories = json.loads((data / "categories.json").read_text())["children"]

    def cases(name_start: str) -> set[str]:
        found = set()
        for category in categories:
            if category["name"].startswith(name_start):
                for message in category["children"]:
                    found |= {leaf["name"] for leaf in message.get("children", [message])}
        return found

    assert cases("Blocked by a prerequisite") == {
        "stomp.fake.server.mid",
        "stomp.fake.server.top",
        "stomp.fake.server.after-crash",
    }
    assert cases("Not applicable") == {"stomp.fake.client.na", "stomp.fake.server.after-na"}
    assert cases("Requirement failed") == {"stomp.fake.server.base"}
    # A blocked case is Allure's "unknown", apart from not applicable, and
    # its page links to its root cause's page.
    pages = {
        case["name"]: case
        for case in (json.loads(p.read_text()) for p in (data / "test-cases").glob("*.json"))
    }
    base_uid = pages["stomp.fake.server.base"]["uid"]
    mid = pages["stomp.fake.server.mid"]
    assert mid["status"] == "unknown"
    assert pages["stomp.fake.client.na"]["status"] == "skipped"
    assert {
        "name": "root cause: stomp.fake.server.base",
        "url": f"#testresult/{base_uid}",
        "type": "link",
    } in mid["links"]

"""conformance/allure_presentation.py: what the Allure report shows of a
result written by allure-pytest (issue 31: no Python in the report, blocked
apart from not applicable)."""

from __future__ import annotations

import json
from pathlib import Path

from conformance.allure_presentation import present_result, present_results, reflow

FAILURE = (
    "stomp.send.server.error-on-missing-destination [MUST, STOMP 1.2, SEND]: the target "
    "sent an ERROR frame but kept the connection open"
)


def _result(status: str, message: str, trace: str = "tb") -> dict:
    return {
        "name": "case",
        "status": status,
        "statusDetails": {"message": message, "trace": trace},
        "parameters": [{"name": "target", "value": "'coilmq'"}],
        "labels": [
            {"name": "tag", "value": "asyncio"},
            {"name": "tag", "value": "MUST"},
            {"name": "thread", "value": "1-MainThread"},
            {"name": "target", "value": "coilmq"},
        ],
        "description": "MUST: a citation\n\nThe CONNECTED of a session\nand the RECEIPT of its DISCONNECT.\n",
    }


def test_a_failure_reads_in_the_harness_words_once_without_traceback():
    shown = present_result(_result("failed", "conformance.plugin.ConformanceFailure: " + FAILURE))
    assert shown["statusDetails"] == {"message": FAILURE}
    assert shown["parameters"] == [{"name": "target", "value": "coilmq"}]
    assert {"name": "tag", "value": "asyncio"} not in shown["labels"]
    assert {"name": "tag", "value": "MUST"} in shown["labels"]
    assert not [label for label in shown["labels"] if label["name"] == "thread"]
    assert shown["description"] == (
        "MUST: a citation\n\nThe CONNECTED of a session and the RECEIPT of its DISCONNECT.\n"
    )


def test_blocked_is_unknown_and_not_applicable_stays_skipped():
    blocked = present_result(_result("skipped", "Skipped: blocked by x.y.z (failed): why"))
    assert blocked["status"] == "unknown"
    assert blocked["statusDetails"] == {"message": "blocked by x.y.z (failed): why"}
    na = present_result(_result("skipped", "Skipped: not applicable: no publish capability"))
    assert na["status"] == "skipped"
    assert na["statusDetails"] == {"message": "not applicable: no publish capability"}


def test_an_error_keeps_its_traceback():
    shown = present_result(_result("broken", "RuntimeError: the harness broke", "Traceback ..."))
    assert shown["statusDetails"] == {"message": "the harness broke", "trace": "Traceback ..."}


def test_a_docstring_indentation_is_no_block():
    text = "MUST: a citation\n\nA valid SEND whose receipt value has spaces: the\n    RECEIPT keeps them.\n"
    assert reflow(text) == (
        "MUST: a citation\n\nA valid SEND whose receipt value has spaces: the RECEIPT keeps them.\n"
    )


def test_indented_blocks_are_not_reflowed():
    text = "MUST: a citation\n\nA dump:\n    the bytes\n\n        00000000  43 4f\n        00000010  4e 4e\n"
    assert reflow(text) == (
        "MUST: a citation\n\nA dump: the bytes\n\n    00000000  43 4f\n    00000010  4e 4e\n"
    )


def test_present_results_rewrites_results_and_drops_fixture_containers(tmp_path: Path):
    (tmp_path / "a-result.json").write_text(
        json.dumps(_result("skipped", "Skipped: blocked by x (failed): y"))
    )
    (tmp_path / "b-container.json").write_text(
        json.dumps({"uuid": "b", "children": ["a"], "befores": [{"name": "open_peer"}]})
    )
    (tmp_path / "c-attachment.txt").write_text("trace")
    counts = present_results(tmp_path)
    assert counts == {"results": 1, "blocked": 1, "fixture_containers_removed": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-result.json", "c-attachment.txt"]
    assert json.loads((tmp_path / "a-result.json").read_text())["status"] == "unknown"

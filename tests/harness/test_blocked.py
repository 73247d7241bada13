"""Prerequisites (``depends``) and the ``blocked`` outcome, end to end through
the plugin, on small synthetic suites: one bug is reported once, as the root
cause, and the cases that relied on it are blocked by it, not failed."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from contextlib import redirect_stdout

import pytest

from conformance.cli import print_summary
from conformance.core.results import summarize

from .fake_suite import Listener, run_suite, targets_file, write_suite

CHAIN = """
@requirement("stomp.fake.server.top", "SHOULD", "Fake spec §3", depends=["stomp.fake.server.mid"])
def test_top(target):
    pass


@requirement("stomp.fake.server.mid", "MUST", "Fake spec §2", depends=["stomp.fake.server.base"])
def test_mid(target):
    pass


@requirement("stomp.fake.server.base", "MUST", "Fake spec §1", errata=["STOMP-E1"])
def test_base(target):
    assert BASE_PASSES, "the target sent de ad be ef instead of CONNECTED"


@requirement("stomp.fake.server.alone", "MUST", "Fake spec §4")
def test_alone(target):
    pass


@requirement("stomp.fake.client.na", "MUST", "Fake spec §5", role="client")
def test_na(target):
    pass


@requirement("stomp.fake.server.after-na", "MUST", "Fake spec §6", depends=["stomp.fake.client.na"])
def test_after_na(target):
    pass


@requirement("stomp.fake.server.crashes", "MAY", "Fake spec §7")
def test_crashes(target):
    raise RuntimeError("harness could not decode")


@requirement("stomp.fake.server.after-crash", "MAY", "Fake spec §8", depends=["stomp.fake.server.crashes"])
def test_after_crash(target):
    pass
"""
BASE_MESSAGE = "the target sent de ad be ef instead of CONNECTED"


@pytest.fixture
def listener():
    with Listener() as server:
        yield server


def chain_suite(tmp_path, base_passes: bool):
    return write_suite(tmp_path, f"BASE_PASSES = {base_passes}\n" + CHAIN)


def test_failed_prerequisite_blocks_its_dependents_transitively(tmp_path, listener):
    run = run_suite(tmp_path, chain_suite(tmp_path, False), targets_file(tmp_path, listener.port))
    assert run.code == 1, run.output
    records = run.records
    order = [r["case_id"] for r in records]
    # Prerequisites first, file order otherwise.
    assert order == [
        "stomp.fake.server.base",
        "stomp.fake.server.mid",
        "stomp.fake.server.top",
        "stomp.fake.server.alone",
        "stomp.fake.client.na",
        "stomp.fake.server.after-na",
        "stomp.fake.server.crashes",
        "stomp.fake.server.after-crash",
    ]
    cases = run.by_case()
    base = cases["stomp.fake.server.base"]
    assert base["outcome"] == "failed"
    # The failure message and the record cite the erratum beside the section.
    assert base["message"].startswith(
        "stomp.fake.server.base [MUST, Fake spec §1; as amended by erratum STOMP-E1]: "
        + BASE_MESSAGE
    )
    assert base["citation"] == "Fake spec §1; as amended by erratum STOMP-E1"
    assert base["errata"] == ["STOMP-E1"] and base["depends"] == []

    mid = cases["stomp.fake.server.mid"]
    assert mid["outcome"] == "blocked"
    assert mid["message"] == f"blocked by stomp.fake.server.base (failed): {BASE_MESSAGE}"
    assert mid["blocked_by"] == "stomp.fake.server.base"
    assert mid["depends"] == ["stomp.fake.server.base"]
    # Transitive: top depends on mid (blocked), and names the root cause.
    top = cases["stomp.fake.server.top"]
    assert top["outcome"] == "blocked" and top["blocked_by"] == "stomp.fake.server.base"
    assert (
        top["message"].splitlines()[0]
        == f"blocked by stomp.fake.server.base (failed): {BASE_MESSAGE}"
    )
    assert "stomp.fake.server.mid" in top["message"]
    # An erroring prerequisite blocks too, and says it errored.
    after_crash = cases["stomp.fake.server.after-crash"]
    assert after_crash["outcome"] == "blocked"
    assert after_crash["message"] == (
        "blocked by stomp.fake.server.crashes (error): RuntimeError: harness could not decode"
    )
    assert cases["stomp.fake.server.alone"]["outcome"] == "passed"

    # Terminal: blocked, not skipped; progress lines: "blk".
    assert "3 blocked, 2 not_applicable" in run.output and "skipped" not in run.output
    # Consecutive cases blocked by one root cause: one line, with the reason.
    assert (
        f"[  2-3/8] blk  2 cases (1 MUST, 1 SHOULD) blocked by stomp.fake.server.base (failed): "
        f"{BASE_MESSAGE}\n"
    ) in run.output
    assert "blk  MAY    stomp.fake.server.after-crash" in run.output

    # Summary: blocked counted apart, failed_must only own failures, root causes.
    summary = summarize(records)
    group = summary["targets"][0]
    assert group["levels"]["MUST"]["blocked"] == 1 and group["levels"]["SHOULD"]["blocked"] == 1
    assert group["failed_must"] == ["stomp.fake.server.base"]
    assert group["blocked_must"] == ["stomp.fake.server.mid"]
    causes = {c["case_id"]: c for c in group["root_causes"]}
    assert causes["stomp.fake.server.base"]["blocked"] == [
        "stomp.fake.server.mid",
        "stomp.fake.server.top",
    ]
    assert causes["stomp.fake.server.crashes"]["blocked"] == ["stomp.fake.server.after-crash"]
    assert group["root_causes"][0]["case_id"] == "stomp.fake.server.base", "MUST root causes first"
    assert not group["conformant"]

    # JUnit: blocked is skipped with the message, never a failure.
    junit = ET.parse(run.run_dir / "junit.xml").getroot()
    by_name = {case.get("name"): case for case in junit.iter("testcase")}
    mid_xml = by_name["test_mid"]
    assert mid_xml.find("failure") is None and mid_xml.find("error") is None
    assert (
        mid_xml.find("skipped")
        .get("message")
        .startswith("blocked by stomp.fake.server.base (failed)")
    )
    assert by_name["test_base"].find("failure") is not None

    # Allure: skipped, tagged blocked, the blocking case named.
    results = [
        json.loads(p.read_text()) for p in (run.run_dir / "allure-results").glob("*-result.json")
    ]
    allure_mid = next(r for r in results if r["name"] == "stomp.fake.server.mid")
    assert allure_mid["status"] == "skipped"
    labels = {(label["name"], label["value"]) for label in allure_mid["labels"]}
    assert ("tag", "blocked") in labels and ("blocked_by", "stomp.fake.server.base") in labels
    assert "blocked by stomp.fake.server.base (failed)" in allure_mid["statusDetails"]["message"]
    allure_base = next(r for r in results if r["name"] == "stomp.fake.server.base")
    assert allure_base["status"] == "failed"
    assert ("erratum", "STOMP-E1") in {
        (label["name"], label["value"]) for label in allure_base["labels"]
    }


def test_not_applicable_prerequisite_makes_the_dependent_not_applicable(tmp_path, listener):
    run = run_suite(tmp_path, chain_suite(tmp_path, True), targets_file(tmp_path, listener.port))
    cases = run.by_case()
    assert cases["stomp.fake.client.na"]["outcome"] == "not_applicable"
    after = cases["stomp.fake.server.after-na"]
    assert after["outcome"] == "not_applicable"
    assert "does not play the client role" in after["message"]
    assert "prerequisite stomp.fake.client.na" in after["message"]
    # With the prerequisite passing, the dependents run and pass.
    assert [
        cases[c]["outcome"]
        for c in ("stomp.fake.server.base", "stomp.fake.server.mid", "stomp.fake.server.top")
    ] == ["passed"] * 3


def test_keyword_selection_puts_the_prerequisites_back(tmp_path, listener):
    run = run_suite(
        tmp_path,
        chain_suite(tmp_path, False),
        targets_file(tmp_path, listener.port),
        "-k",
        "test_top or test_alone",
    )
    order = [r["case_id"] for r in run.records]
    assert order == [
        "stomp.fake.server.base",
        "stomp.fake.server.mid",
        "stomp.fake.server.top",
        "stomp.fake.server.alone",
    ], run.output
    assert run.by_case()["stomp.fake.server.top"]["outcome"] == "blocked"

    deselected = run_suite(
        tmp_path,
        chain_suite(tmp_path, True),
        targets_file(tmp_path, listener.port),
        "--deselect",
        "fakesuite/test_fake.py::test_base",
        "-k",
        "mid",
    )
    assert [r["case_id"] for r in deselected.records][-2:] == [
        "stomp.fake.server.base",
        "stomp.fake.server.mid",
    ]


@pytest.mark.parametrize(
    "body, expected",
    [
        (
            """
@requirement("stomp.fake.server.a", "MUST", "Fake §1", depends=["stomp.fake.server.nowhere"])
def test_a(target):
    pass
""",
            "depends on stomp.fake.server.nowhere, which is no collected case",
        ),
        (
            """
@requirement("stomp.fake.server.a", "MUST", "Fake §1", depends=["stomp.fake.server.b"])
def test_a(target):
    pass

@requirement("stomp.fake.server.b", "MUST", "Fake §2", depends=["stomp.fake.server.c"])
def test_b(target):
    pass

@requirement("stomp.fake.server.c", "MUST", "Fake §3", depends=["stomp.fake.server.a"])
def test_c(target):
    pass
""",
            "prerequisite cycle: stomp.fake.server.a -> stomp.fake.server.b -> stomp.fake.server.c -> stomp.fake.server.a",
        ),
        (
            """
@requirement("stomp.fake.server.a", "MUST", "Fake §1", depends=["stomp.fake.server.b"])
def test_a(target):
    pass

@requirement("stomp.fake.server.b", "SHOULD", "Fake §2")
def test_b(target):
    pass
""",
            "a prerequisite must be at least as strong as the case that depends on it",
        ),
    ],
)
def test_unknown_prerequisite_or_cycle_is_a_usage_error(tmp_path, listener, body, expected):
    run = run_suite(tmp_path, write_suite(tmp_path, body), targets_file(tmp_path, listener.port))
    assert run.code == 4, run.output
    assert expected in run.output
    assert not run.records


def test_printed_summary_lists_root_causes_first(tmp_path, listener):
    run = run_suite(tmp_path, chain_suite(tmp_path, False), targets_file(tmp_path, listener.port))
    summary = summarize(run.records)
    out = io.StringIO()
    with redirect_stdout(out):
        print_summary(summary, run.run_dir)
    text = out.getvalue()
    assert text.lstrip().startswith("root causes")
    assert text.index("stomp.fake.server.base") < text.index("passed")
    assert "2 case(s) blocked by it: stomp.fake.server.mid, stomp.fake.server.top" in text
    header = next(line for line in text.splitlines() if line.startswith("target"))
    assert "blocked" in header.split()
    must_row = next(
        line for line in text.splitlines() if line.startswith("fake") and " MUST " in line
    )
    # passed failed error blocked n/a
    assert must_row.split()[-5:] == ["1", "1", "0", "1", "2"]
    assert "1 MUST case(s) failed or errored, 1 MUST case(s) blocked by them" in text


WITHIN_CASE = """
from conformance.core.requirements import blocked


@requirement("stomp.fake.server.valid", "MUST", "Fake §1")
def test_valid(target):
    pass


@requirement("stomp.fake.server.rejects-bad", "MUST", "Fake §2", depends=["stomp.fake.server.valid"])
def test_rejects_bad(target):
    # The valid counterpart, shown again within the case, failed this time.
    blocked("stomp.fake.server.valid", "failed within this case", "no answer to the valid request")


@requirement("stomp.fake.server.after-bad", "SHOULD", "Fake §3", depends=["stomp.fake.server.rejects-bad"])
def test_after_bad(target):
    pass
"""


def test_case_blocking_itself_names_the_root_and_passes_it_on(tmp_path, listener):
    run = run_suite(
        tmp_path, write_suite(tmp_path, WITHIN_CASE), targets_file(tmp_path, listener.port)
    )
    cases = run.by_case()
    own = cases["stomp.fake.server.rejects-bad"]
    assert own["outcome"] == "blocked" and own["blocked_by"] == "stomp.fake.server.valid"
    assert own["message"] == (
        "blocked by stomp.fake.server.valid (failed within this case): "
        "no answer to the valid request"
    )
    after = cases["stomp.fake.server.after-bad"]
    assert after["outcome"] == "blocked" and after["blocked_by"] == "stomp.fake.server.valid"
    assert after["message"].startswith(
        "blocked by stomp.fake.server.valid (failed within this case): "
    )
    group = summarize(run.records)["targets"][0]
    assert not group["conformant"] and group["failed_must"] == []
    [cause] = group["root_causes"]
    assert cause["case_id"] == "stomp.fake.server.valid" and cause["outcome"] == "passed"
    assert cause["blocked"] == ["stomp.fake.server.rejects-bad", "stomp.fake.server.after-bad"]

"""The basis of a case's level (docs/levels.md): declared on the case,
checked against the texts by `conformance coverage --check`, and carried
by every report of a failure: the message's prefix, the progress line, the
root causes, results.jsonl and Allure (the trace file's header: its
level line, as the message)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from conformance.cli import print_summary
from conformance.core.requirements import (
    Basis,
    BasisKind,
    level_with_basis,
    requirement,
    requirement_of,
)
from conformance.core.results import summarize
from conformance.coverage.cases import SuiteCase, cases_in_file
from conformance.coverage.tool import analyse

from .fake_suite import Listener, run_suite, targets_file, write_suite


def test_a_basis_is_its_kind_and_for_most_kinds_a_note():
    assert Basis.parse("keyword") == Basis(BasisKind.KEYWORD)
    assert Basis.parse("inference: a frame it cannot parse it cannot process") == Basis(
        BasisKind.INFERENCE, "a frame it cannot parse it cannot process"
    )
    assert level_with_basis("MUST", "keyword") == "MUST"
    assert level_with_basis("MUST", "erratum: STOMP-E8 swpt_stomp") == "MUST (erratum)"
    assert level_with_basis("SHOULD", "plain-words") == "SHOULD (plain-words)"
    assert level_with_basis("MUST", None) == "MUST"  # records written before the field
    assert level_with_basis("MUST", "profile") == "MUST (profile)"  # the kind alone (matrices)
    with pytest.raises(ValueError, match="must start with one of keyword, plain-words"):
        Basis.parse("hunch: it feels right")
    with pytest.raises(ValueError, match="needs its note after a colon: the argument"):
        Basis.parse("inference")
    with pytest.raises(ValueError, match="takes no note"):
        Basis.parse("keyword: the sentence")


def test_a_case_declares_its_basis_and_an_erratum_basis_names_an_erratum_it_follows():
    marker = requirement(
        "stomp.fake.client.batch",
        "MUST",
        "Fake §1",
        role="client",
        errata=["STOMP-E8"],
        basis="erratum: STOMP-E8 (swpt_stomp receipts the last SEND of a batch)",
    )
    assert (
        marker.kwargs["basis"] == "erratum: STOMP-E8 (swpt_stomp receipts the last SEND of a batch)"
    )
    with pytest.raises(ValueError, match="basis erratum 'STOMP-E9' is not one of the errata"):
        requirement("stomp.fake.client.batch", "MUST", "Fake §1", basis="erratum: STOMP-E9 why")
    with pytest.raises(
        ValueError, match="case stomp.fake.server.x: basis wire-format needs its note"
    ):
        requirement("stomp.fake.server.x", "MUST", "Fake §1", basis="wire-format")


# ------------------------------------------------------------------ coverage --check

SPEC = """\
# Flow
The server MUST answer. The client should wait. Frames are length-prefixed. Nodes may retry.
"""

TABLE = """\
[spec]
title = "Demo"
files = ["demo/spec.md"]
cite_as = { "Demo" = "demo/spec.md" }

[[rule]]
quote = "The server MUST answer."
cases = ["demo.flow.server.answers", "demo.flow.server.answers-plain"]

[[rule]]
quote = "The client should wait."
cases = ["demo.flow.client.waits", "demo.flow.client.waits-plain", "demo.flow.client.must-wait"]

[[rule]]
quote = "Frames are length-prefixed."
cases = ["demo.flow.server.frames", "demo.flow.server.inferred", "demo.flow.server.inferred-should"]

[[rule]]
quote = "Nodes may retry."
cases = ["demo.flow.client.erratum", "demo.flow.client.profile"]
"""

DECLARED = {
    # case id: (level, basis, errata)
    "demo.flow.server.answers": ("MUST", "keyword", ()),
    "demo.flow.server.answers-plain": ("MUST", "plain-words", ()),
    "demo.flow.client.waits": ("SHOULD", "keyword", ()),
    "demo.flow.client.waits-plain": ("SHOULD", "plain-words", ()),
    "demo.flow.client.must-wait": ("MUST", "plain-words", ()),
    "demo.flow.server.frames": ("MUST", "wire-format: the length prefix of a frame", ()),
    "demo.flow.server.inferred": ("MUST", "inference: a node that retries forever never stops", ()),
    "demo.flow.server.inferred-should": (
        "SHOULD",
        "inference: a frame cut short is unreadable",
        (),
    ),
    "demo.flow.client.erratum": ("MUST", "erratum: DEMO-E1 every node retries", ("DEMO-E1",)),
    "demo.flow.client.profile": ("MUST", "profile: R1 of docs/demo-profile.md", ()),
}


def coverage_of(tmp_path: Path):
    (tmp_path / "demo.toml").write_text(TABLE)
    (tmp_path / "specs" / "demo").mkdir(parents=True)
    (tmp_path / "specs" / "demo" / "spec.md").write_text(SPEC)
    cases = {
        case_id: SuiteCase(
            case_id,
            level,
            'Demo, Flow ("The server MUST answer")',
            case_id.split(".")[2],
            "x.py:1",
            basis,
            errata,
        )
        for case_id, (level, basis, errata) in DECLARED.items()
    }
    return analyse("demo", tmp_path / "specs", cases, [], tables_dir=tmp_path)


def test_coverage_check_holds_each_level_against_its_basis(tmp_path):
    coverage = coverage_of(tmp_path)
    problems = {
        case_id: str(problem)
        for problem in coverage.problems
        for case_id in DECLARED
        if f"case {case_id} " in str(problem)
    }
    assert set(problems) == {
        "demo.flow.client.waits",
        "demo.flow.server.answers-plain",
        "demo.flow.client.must-wait",
        "demo.flow.server.inferred",
        "demo.flow.client.erratum",
        "demo.flow.client.profile",
    }, problems
    assert (
        "states MUST in an upper-case key word: basis keyword"
        in problems["demo.flow.server.answers-plain"]
    )
    assert "say at most SHOULD" in problems["demo.flow.client.must-wait"]
    # A lower-case "should" is no RFC 2119 key word (RFC 8174).
    assert (
        "in words of any case they say SHOULD: basis plain-words"
        in problems["demo.flow.client.waits"]
    )
    assert "never reported as the text's MUST" in problems["demo.flow.server.inferred"]
    assert "docs/errata/demo.md does not define" in problems["demo.flow.client.erratum"]
    assert "names no docs/<protocol>-profile.md that exists" in problems["demo.flow.client.profile"]
    assert len(coverage.problems) == len(problems), [str(p) for p in coverage.problems]
    levels = {entry["case_id"]: entry for entry in coverage.levels}
    assert (
        levels["demo.flow.client.waits"]["keyword_level"],
        levels["demo.flow.client.waits"]["words_level"],
    ) == (
        "no level",
        "SHOULD",
    )
    assert coverage.bases == {
        "keyword": 2,
        "plain-words": 3,
        "wire-format": 1,
        "profile": 1,
        "erratum": 1,
        "inference": 2,
    }


def test_a_keyword_case_on_a_plain_must_is_told_its_basis(tmp_path):
    (tmp_path / "demo.toml").write_text(
        TABLE.replace('"The client should wait."', '"The client must wait."')
    )
    (tmp_path / "specs" / "demo").mkdir(parents=True)
    (tmp_path / "specs" / "demo" / "spec.md").write_text(SPEC.replace("should wait", "must wait"))
    case = SuiteCase("demo.flow.client.waits", "MUST", "Demo, Flow", "client", "x.py:1")
    coverage = analyse("demo", tmp_path / "specs", {case.case_id: case}, [], tables_dir=tmp_path)
    (problem,) = [str(p) for p in coverage.problems if "demo.flow.client.waits " in str(p)]
    assert (
        "state no level in upper-case key words; in words of any case they say MUST: basis plain-words"
        in problem
    )


def test_the_case_reader_takes_basis_and_errata_from_the_decorator(tmp_path):
    suite = tmp_path / "conformance" / "suites" / "demo"
    suite.mkdir(parents=True)
    (suite / "test_demo.py").write_text(
        textwrap.dedent("""\
        WHY = "the format's length prefix"

        @requirement("demo.flow.server.frames", "MUST", "Demo, Flow", basis=f"wire-format: {WHY}")
        def test_frames(target):
            pass

        @requirement("demo.flow.client.batch", "MUST", "Demo, Flow", role="client",
                     errata=["DEMO-E1"], basis="erratum: DEMO-E1 why")
        def test_batch(target):
            pass
        """)
    )
    cases, problems = cases_in_file(suite / "test_demo.py", tmp_path)
    assert not problems
    assert [(c.basis, c.errata) for c in cases] == [
        ("wire-format: the format's length prefix", ()),
        ("erratum: DEMO-E1 why", ("DEMO-E1",)),
    ]


# ------------------------------------------------------------------ the reports

SUITE = """
@requirement(
    "stomp.fake.server.inferred",
    "SHOULD",
    "Fake §1",
    basis="inference: a frame the node cannot parse is one it cannot process",
)
def test_inferred(target):
    raise AssertionError("the target processed a frame without a colon in a header line")


@requirement("stomp.fake.server.keyword", "MUST", "Fake §2")
def test_keyword(target):
    raise AssertionError("no RECEIPT")
"""


def test_every_report_of_a_failure_carries_the_basis(tmp_path):
    with Listener() as listener:
        run = run_suite(
            tmp_path, write_suite(tmp_path, SUITE), targets_file(tmp_path, listener.port)
        )
    cases = run.by_case()
    inferred, keyword = cases["stomp.fake.server.inferred"], cases["stomp.fake.server.keyword"]
    assert (inferred["outcome"], keyword["outcome"]) == ("failed", "failed"), run.output[-3000:]
    assert inferred["basis"] == "inference: a frame the node cannot parse is one it cannot process"
    assert keyword["basis"] == "keyword"
    # The message's prefix gives the level with its word; a keyword level stands alone.
    assert inferred["message"].startswith(
        "stomp.fake.server.inferred [SHOULD (inference), Fake §1]: "
    )
    assert keyword["message"].startswith("stomp.fake.server.keyword [MUST, Fake §2]: ")
    # The progress line.
    assert "SHOULD (inference) stomp.fake.server.inferred" in run.output
    # Allure: a label, and the description's first lines.
    results = [
        json.loads(path.read_text())
        for path in (run.run_dir / "allure-results").glob("*-result.json")
    ]
    (allure_inferred,) = [r for r in results if r["name"] == "stomp.fake.server.inferred"]
    labels = {label["name"]: label["value"] for label in allure_inferred["labels"]}
    assert labels["basis"] == "inference" and labels["level"] == "SHOULD"
    assert allure_inferred["description"].startswith(
        "SHOULD (inference): Fake §1\n\nThe level's basis: inference: a frame the node cannot "
        "parse is one it cannot process."
    )


def test_the_root_causes_show_the_level_with_its_basis(tmp_path, capsys):
    records = [
        {
            "target": "node",
            "implementation": "node",
            "implementation_version": "1",
            "protocol": "stomp",
            "case_id": case_id,
            "level": level,
            "basis": basis,
            "citation": "Fake §1",
            "outcome": "failed",
            "message": f"{case_id} [x]: it did not",
        }
        for case_id, level, basis in (
            ("stomp.fake.client.batch", "MUST", "erratum: STOMP-E8 one RECEIPT per batch"),
            ("stomp.fake.client.plain", "MUST", "keyword"),
        )
    ]
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = summarize(records)
    assert [c["basis"] for c in summary["targets"][0]["root_causes"]] == [
        "erratum: STOMP-E8 one RECEIPT per batch",
        "keyword",
    ]
    print_summary(summary, tmp_path, results)
    out = capsys.readouterr().out
    assert "failed MUST (erratum) node: stomp.fake.client.batch" in out
    assert "failed MUST   node: stomp.fake.client.plain" in out


def test_the_requirement_marker_round_trips_the_basis():
    marker = requirement("stomp.fake.server.frames", "MUST", "Fake §1", basis="wire-format: x")

    class Item:
        def get_closest_marker(self, name):
            return marker.mark if name == "requirement" else None

    req = requirement_of(Item())  # type: ignore[arg-type]
    assert req is not None and req.basis == Basis(BasisKind.WIRE_FORMAT, "x")
    assert req.level_shown == "MUST (wire-format)"

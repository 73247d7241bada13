"""`conformance coverage`: the sentence splitter, the checks, the tables and
the generated docs."""

from __future__ import annotations

import textwrap
import os
from pathlib import Path

import pytest

from conformance.coverage.cases import SuiteCase
from conformance.coverage.sentences import keywords_in, parse_spec_file, split_sentences
from conformance.coverage.tool import (
    REPO,
    analyse,
    parse_citation,
    protocols_with_suites,
    protocols_with_tables,
    render_markdown,
    specs_dir,
)
from conformance.coverage.tool import CoverageError

DOCS = REPO / "docs" / "coverage"
REQUIRE_SPECS = "CONFORMANCE_REQUIRE_SPECS"


def require_spec_texts() -> Path:
    """The spec texts (<repo>/../shared/specs, or $CONFORMANCE_SPECS_DIR).

    A clone that is not beside the project's shared/ folder has none: the
    tests that read them are skipped there, saying why and how to point at
    the texts. In CI (CI=true) or with CONFORMANCE_REQUIRE_SPECS=1 their
    absence fails instead: a CI without the texts would otherwise pass
    without ever checking the coverage tables against them."""
    try:
        return specs_dir()
    except CoverageError as exc:
        if os.environ.get("CI") == "true" or os.environ.get(REQUIRE_SPECS) == "1":
            pytest.fail(f"the spec texts are required here (CI or {REQUIRE_SPECS}=1): {exc}")
        pytest.skip(f"needs the spec texts: {exc}")


@pytest.fixture
def spec_texts() -> Path:
    return require_spec_texts()


def test_sentences_end_at_stop_marks_not_at_abbreviations_or_ranges():
    text = "One MUST. Two? Three (e.g. four) ends here! Range 0 .. 1023 stays."
    assert split_sentences(text) == [
        "One MUST.",
        "Two?",
        "Three (e.g. four) ends here!",
        "Range 0 .. 1023 stays.",
    ]


def test_keywords_any_case_word_boundaries():
    assert keywords_in("the server should respond and MUST NOT retry") == ["SHOULD", "MUST NOT"]
    assert keywords_in("optionally mustard mayor requirements") == []
    assert keywords_in("All required fields must be present") == ["REQUIRED", "MUST"]


def test_markdown_sections_lists_tables_and_asn_comments():
    text = textwrap.dedent("""\
        ---
        title: x MUST not count
        ---
        # Top
        Intro line one
        continues. Second sentence.

        ## Sub

        - item one must hold
          and continue
        - item two

        | Code | Name |
        | :--- | :--- |
        | **T00** | Unreachable |

        ```asn1
        Error ::= SEQUENCE {
          -- Peers should match
          -- the ids.
          code IA5String  -- trailing comment
        }
        ```
        """)
    spec = parse_spec_file("x.md", text)
    assert [s.title for s in spec.sections] == ["Top", "Sub"]
    assert spec.sections[1].lineage == (0, 1)
    texts = [(s.section.title, s.text) for s in spec.sentences]
    assert texts == [
        ("Top", "Intro line one continues."),
        ("Top", "Second sentence."),
        ("Sub", "item one must hold and continue"),
        ("Sub", "item two"),
        ("Sub", "Code | Name"),
        ("Sub", "**T00** | Unreachable"),
        ("Sub", "Peers should match the ids."),
        ("Sub", "trailing comment"),
    ]
    assert [s.keywords for s in spec.sentences if s.keywords] == [["MUST"], ["SHOULD"]]


def test_asn_module_sections_start_at_the_comment_above_each_type():
    text = "Mod\nDEFINITIONS ::= BEGIN\n\n-- Each request should be unique.\nPrepare ::= SEQUENCE {\n  a UInt8\n}\nEND\n"
    spec = parse_spec_file("m.asn", text)
    sentence = [s for s in spec.sentences if s.keywords][0]
    assert sentence.section.title == "Prepare" and sentence.text == "Each request should be unique."


def test_rst_titles_become_sections_with_lines_kept():
    text = textwrap.dedent("""\
        +++++
        Title
        +++++
        :Version: 2.1

        Overview
        ========

        Intro must hold.

        Message
        -------

        field : int64
           The value MUST be positive.

        .. [#note] A note should count.
        """)
    spec = parse_spec_file("x.rst", text)
    assert [(s.title, s.level) for s in spec.sections] == [
        ("Title", 1),
        ("Overview", 2),
        ("Message", 3),
    ]
    assert spec.sections[2].lineage == (0, 1, 2)
    normative = [(s.section.title, s.text, s.line) for s in spec.sentences if s.keywords]
    assert normative == [
        ("Overview", "Intro must hold.", 9),
        ("Message", "field : int64 The value MUST be positive.", 14),
        ("Message", ".. [#note] A note should count.", 17),
    ]


def test_searchable_text_drops_emphasis_and_footnote_marks_only():
    spec = parse_spec_file(
        "x.txt",
        "# T\nClients SHOULD NOT do *hostname verification*<sup>3</sup>, "
        "frames _received_ keep config_data and 2 * 3.\n",
    )
    assert (
        "clients should not do hostname verification, frames received keep config_data and 2 * 3."
        == spec.searchable.split("t ", 1)[1]
    )
    assert "*hostname verification*<sup>3</sup>" in spec.sentences[0].text


def test_citation_parts_remarks_and_quotes():
    parts, quotes = parse_citation(
        'BTP 2.0, Error, Error Codes (name: "Corresponding (x) code"); RFC 0030 \u00a7Encoding'
    )
    assert parts == [["BTP 2.0", "Error", "Error Codes"], ["RFC 0030", "Encoding"]]
    assert quotes == ["Corresponding (x) code"]


def write_case_suite(tmp_path: Path) -> None:
    (tmp_path / "demo.toml").write_text(
        textwrap.dedent("""\
        [spec]
        title = "Demo"
        files = ["demo/spec.md"]
        cite_as = { "Demo" = "demo/spec.md" }

        [[out_of_scope]]
        file = "demo/spec.md"
        section = "Later"
        reason = "not yet"

        [[rule]]
        quote = "The server MUST answer."
        cases = ["demo.flow.server.answers"]

        [[rule]]
        quote = "Requests carry ids"
        reason = "fact without a case, said why"
        """)
    )
    specs = tmp_path / "specs" / "demo"
    specs.mkdir(parents=True)
    (specs / "spec.md").write_text(
        textwrap.dedent("""\
        # Flow
        The server MUST answer. Requests carry ids. The client should wait.
        ## Later
        Things MAY happen.
        """)
    )


def demo_cases(citation: str = 'Demo, Flow ("The server MUST answer")') -> dict[str, SuiteCase]:
    return {
        "demo.flow.server.answers": SuiteCase(
            "demo.flow.server.answers", "MUST", citation, "server", "x.py:1"
        ),
        "demo.flow.client.extra": SuiteCase(
            "demo.flow.client.extra", "MUST", "Demo, Flow", "client", "x.py:9"
        ),
    }


def test_analysis_counts_and_every_kind_of_problem(tmp_path):
    write_case_suite(tmp_path)
    coverage = analyse("demo", tmp_path / "specs", demo_cases(), [], tables_dir=tmp_path)
    counts = coverage.counts
    assert (
        counts["normative"],
        counts["covered_by_cases"],
        counts["covered_by_reason"],
        counts["out_of_scope"],
        counts["uncovered"],
    ) == (4, 1, 1, 1, 1)
    messages = [str(p) for p in coverage.problems]
    assert any(
        "The client should wait." in m and "neither a case nor a reason" in m for m in messages
    )
    assert any("demo.flow.client.extra" in m and "mapped by no rule" in m for m in messages)
    assert len(messages) == 2, messages


def test_analysis_flags_bad_quotes_unknown_cases_and_citations(tmp_path):
    write_case_suite(tmp_path)
    table = tmp_path / "demo.toml"
    table.write_text(
        table.read_text()
        + textwrap.dedent("""\
        [[rule]]
        quote = "The client should wait."
        cases = ["demo.flow.client.extra", "demo.flow.client.nowhere"]

        [[rule]]
        quote = "The server MUST answer. Requests"
        reason = "spans two sentences"

        [[rule]]
        quote = "not in the text"
        """)
    )
    cases = demo_cases('Demo, Flow, No Such Heading ("The server MUST reply")')
    coverage = analyse("demo", tmp_path / "specs", cases, [], tables_dir=tmp_path)
    messages = [str(p) for p in coverage.problems]
    assert any("demo.flow.client.nowhere" in m and "no suite defines" in m for m in messages)
    assert any("spans two sentences" in m for m in messages if "quote not found" in m)
    assert any("not in the text" in m and "neither cases nor a reason" in m for m in messages)
    assert any("'No Such Heading'" in m for m in messages)
    assert any("'the server must reply'" in m for m in messages)
    assert coverage.counts["uncovered"] == 0


def test_rule_occurrence_picks_one_of_a_repeated_sentence(tmp_path):
    write_case_suite(tmp_path)
    (tmp_path / "specs" / "demo" / "spec.md").write_text(
        textwrap.dedent("""\
        # Flow
        The server MUST answer. Requests carry ids. The client should wait.
        ## Keys
        host: You MUST substitute it.

        login: You MUST substitute it.
        ## Later
        Things MAY happen.
        """)
    )
    table = tmp_path / "demo.toml"
    table.write_text(
        table.read_text()
        + textwrap.dedent("""\
        [[rule]]
        quote = "The client should wait."
        cases = ["demo.flow.client.extra"]

        [[rule]]
        quote = "You MUST substitute it."
        occurrence = 1
        cases = ["demo.flow.server.answers"]

        [[rule]]
        quote = "You MUST substitute it."
        occurrence = 2
        cases = ["demo.flow.client.extra"]

        [[rule]]
        quote = "You MUST substitute it."
        occurrence = 3
        reason = "no third one"
        """)
    )
    coverage = analyse("demo", tmp_path / "specs", demo_cases(), [], tables_dir=tmp_path)
    rows = {(r.line, r.sentence): (r.server_cases, r.client_cases) for r in coverage.rows}
    assert rows[(4, "host: You MUST substitute it.")] == (["demo.flow.server.answers"], [])
    assert rows[(6, "login: You MUST substitute it.")] == ([], ["demo.flow.client.extra"])
    messages = [str(p) for p in coverage.problems]
    assert messages == [
        "[[rule]] occurrence 3 but the quote matches 2 sentence(s): You MUST substitute it."
    ]


def test_case_ids_imported_from_a_sibling_module_are_read(tmp_path):
    from conformance.coverage.cases import cases_in_file

    suite = tmp_path / "conformance" / "suites" / "demo"
    suite.mkdir(parents=True)
    (suite / "prerequisites.py").write_text(
        'ROOT = "demo.root.server.works"\nCITE = "Demo, Flow"\n'
    )
    (suite / "test_x.py").write_text(
        textwrap.dedent("""\
        from .prerequisites import ROOT, CITE as BASE
        from .absent import NOTHING

        @requirement(ROOT, "MUST", f"{BASE} (x)")
        def test_root(): pass

        @requirement(NOTHING, "MUST", "Demo")
        def test_unknown(): pass
        """)
    )
    cases, problems = cases_in_file(suite / "test_x.py", tmp_path)
    assert [(c.case_id, c.citation) for c in cases] == [
        ("demo.root.server.works", "Demo, Flow (x)")
    ]
    assert len(problems) == 1 and "NOTHING" in problems[0]


def test_citations_may_join_headings_with_and_and_name_footnotes(tmp_path):
    write_case_suite(tmp_path)
    (tmp_path / "specs" / "demo" / "spec.md").write_text(
        textwrap.dedent("""\
        # Flow
        The server MUST answer.<sup>2</sup> Requests carry ids. The client should wait.
        ## Later
        Things MAY happen.
        """)
    )
    good = analyse(
        "demo",
        tmp_path / "specs",
        demo_cases("Demo, Flow and Later; Demo, Flow, footnote 2"),
        [],
        tables_dir=tmp_path,
    )
    assert not [p for p in good.problems if "citation" in str(p)]
    bad = analyse(
        "demo",
        tmp_path / "specs",
        demo_cases("Demo, Flow and Nowhere, footnote 3"),
        [],
        tables_dir=tmp_path,
    )
    messages = [str(p) for p in bad.problems if "citation" in str(p)]
    assert any("'Flow and Nowhere'" in m for m in messages) and any(
        "'footnote 3'" in m for m in messages
    )


def test_missing_table_of_a_protocol_with_a_suite_is_an_error(tmp_path, spec_texts):
    coverage = analyse("btp", spec_texts, {}, [], tables_dir=tmp_path)
    assert any("has a suite but no coverage table" in str(p) for p in coverage.problems)


def test_missing_specs_dir_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CONFORMANCE_SPECS_DIR", str(tmp_path / "absent"))
    with pytest.raises(CoverageError, match="--specs-dir"):
        specs_dir()


@pytest.mark.parametrize("protocol", protocols_with_suites())
def test_every_protocol_with_a_suite_has_a_table(protocol):
    assert protocol in protocols_with_tables(), (
        f"protocol {protocol} has a suite but no conformance/coverage/{protocol}.toml"
    )


@pytest.mark.parametrize("protocol", protocols_with_tables())
def test_table_passes_the_check(protocol, spec_texts):
    coverage = analyse(protocol, spec_texts)
    assert not coverage.problems, "\n".join(str(p) for p in coverage.problems)
    assert coverage.counts["uncovered"] == 0


@pytest.mark.parametrize("protocol", protocols_with_tables())
def test_generated_docs_are_current(protocol, spec_texts):
    written = DOCS / f"{protocol}.md"
    expected = render_markdown(analyse(protocol, spec_texts))
    assert written.exists() and written.read_text(encoding="utf-8") == expected, (
        f"{written} is out of date: run `conformance coverage --protocol {protocol} --format markdown "
        "--write docs/coverage/`"
    )


def test_cli_check_exit_status(tmp_path):
    from conformance.cli import main

    assert main(["coverage", "--protocol", "btp", "--specs-dir", str(tmp_path / "absent")]) == 2


def test_absent_texts_skip_with_the_reason_outside_ci_and_fail_in_ci(tmp_path, monkeypatch):
    monkeypatch.setenv("CONFORMANCE_SPECS_DIR", str(tmp_path / "absent"))
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv(REQUIRE_SPECS, raising=False)
    with pytest.raises(pytest.skip.Exception, match="needs the spec texts.*--specs-dir"):
        require_spec_texts()
    for variable, value in (("CI", "true"), (REQUIRE_SPECS, "1")):
        with monkeypatch.context() as env:
            env.setenv(variable, value)
            with pytest.raises(pytest.fail.Exception, match="the spec texts are required here"):
                require_spec_texts()

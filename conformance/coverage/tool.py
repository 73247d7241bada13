"""``conformance coverage``: every normative sentence of a spec traced to cases.

Per protocol, ``conformance/coverage/<protocol>.toml`` maps the sentences of
the spec texts (``<repo>/../shared/specs`` unless ``--specs-dir`` or
``CONFORMANCE_SPECS_DIR`` say otherwise) to the case ids that check them, in
both roles, or to a written reason. The texts are not in the repository:
without them (none named, none at the default place) the command shows the
tables as last generated, ``docs/coverage/<protocol>.md``, and ``--check``,
``--write`` and ``--format json`` exit 2 saying where to point it::

    [spec]
    title = "BTP 2.0 (RFC 0023) and OER notes (RFC 0030)"
    files = ["btp/btp-2.0-rfc0023.md", "btp/oer-notes-rfc0030.md"]
    cite_as = { "BTP 2.0" = "btp/btp-2.0-rfc0023.md" }   # optional: citation label -> file

    [[out_of_scope]]          # a section and all its subsections; reason required
    file = "btp/oer-notes-rfc0030.md"
    section = "Fixed-length Timestamps"
    occurrence = 1            # only when the heading occurs more than once in the file
    reason = "..."

    [[rule]]
    quote = "exact substring of the sentence (whitespace-normalized)"
    section = "createHistoryStream"   # optional: only sentences under this heading
    file = "btp/btp-2.0-rfc0023.md"      # optional when unambiguous
    cases = ["btp.auth.server.accepts-valid-auth"]
    reason = "..."            # required when cases is empty
    occurrence = 2            # optional: only the 2nd sentence the quote matches (the
                              # same sentence written several times in one section)

A sentence is normative when it holds a requirement keyword (MUST, SHOULD,
MAY, REQUIRED, ... in any case) or a rule quotes it (rules stated as fact).
It is covered when a rule with cases or a reason quotes it, or when it lies
in an out-of-scope section.

Citations of cases are checked too. A citation is ``LABEL, Heading,
Subheading (remark)``, several of them joined by ``;`` (a later part
without a label cites the same document); ``§`` may stand for the comma
after the label; parenthesised remarks are not headings, and text quoted
in double quotes inside them (``...`` joining fragments) must be in the
spec. Every heading named must exist in the cited document (in ASN.1
modules, the type names are the headings); "A and B" names two headings
when no heading is called that, and "footnote 2" names a footnote mark
(``<sup>2</sup>``) of the document.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .cases import SuiteCase, collect_cases
from ..core.requirements import Basis, BasisKind
from .sentences import (
    LEVEL_RANK,
    Sentence,
    SpecFile,
    keyword_ranks,
    normalize_space,
    parse_spec_file,
    plain,
)

PACKAGE_DIR = Path(__file__).resolve().parent
REPO = PACKAGE_DIR.parents[1]
SUITES_DIR = REPO / "conformance" / "suites"
DEFAULT_SPECS_DIR = REPO.parent / "shared" / "specs"
SPECS_ENV = "CONFORMANCE_SPECS_DIR"
DOCS_DIR = REPO / "docs" / "coverage"
"""The stored tables (``--write docs/coverage/``): what ``conformance coverage``
shows when the spec texts are not beside the checkout."""
EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2

SPEC_KEYS = {"title", "files", "cite_as"}
OUT_OF_SCOPE_KEYS = {"file", "section", "reason", "occurrence"}
RULE_KEYS = {"quote", "file", "section", "cases", "reason", "occurrence"}


class CoverageError(Exception):
    """A problem that stops the tool (no specs directory, unreadable table)."""


@dataclass(frozen=True)
class Problem:
    message: str
    file: str = ""
    section: str = ""
    sentence: str = ""

    def __str__(self) -> str:
        where = ", ".join(p for p in (self.file, self.section) if p)
        text = f"{where}: {self.message}" if where else self.message
        return f"{text}: {self.sentence}" if self.sentence else text

    def as_dict(self) -> dict:
        return {
            "file": self.file,
            "section": self.section,
            "sentence": self.sentence,
            "message": self.message,
        }


@dataclass
class Row:
    file: str
    section: str
    line: int
    sentence: str
    keywords: list[str]
    server_cases: list[str] = field(default_factory=list)
    client_cases: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    status: str = "uncovered"
    """``cases``, ``reason``, ``out of scope`` or ``uncovered``."""

    @property
    def level(self) -> str:
        return ", ".join(self.keywords) if self.keywords else "(fact)"

    def as_dict(self) -> dict:
        return {
            "file": self.file,
            "section": self.section,
            "line": self.line,
            "sentence": self.sentence,
            "level": self.level,
            "server_cases": self.server_cases,
            "client_cases": self.client_cases,
            "reason": "; ".join(self.reasons),
            "status": self.status,
        }


@dataclass
class OutOfScope:
    file: str
    section: str
    reason: str
    normative: int = 0


@dataclass
class Coverage:
    protocol: str
    title: str = ""
    table: str = ""
    rows: list[Row] = field(default_factory=list)
    out_of_scope: list[OutOfScope] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    cases_defined: int = 0
    cases_traced: int = 0
    levels: list[dict] = field(default_factory=list)
    """Per case: its level, the basis it declares, and the highest level the
    sentences it checks state in upper-case key words and in words of any
    case (check_basis)."""

    @property
    def bases(self) -> dict[str, int]:
        """How many cases rest on each basis kind."""
        counts = {kind.value: 0 for kind in BasisKind}
        for entry in self.levels:
            counts[entry["basis"].split(":", 1)[0]] += 1
        return counts

    @property
    def counts(self) -> dict[str, int]:
        status = [r.status for r in self.rows]
        return {
            "normative": len(self.rows),
            "covered_by_cases": status.count("cases"),
            "covered_by_reason": status.count("reason"),
            "out_of_scope": status.count("out of scope"),
            "uncovered": status.count("uncovered"),
            "cases_defined": self.cases_defined,
            "cases_traced": self.cases_traced,
            "problems": len(self.problems),
        }

    def as_dict(self) -> dict:
        return {
            "protocol": self.protocol,
            "title": self.title,
            "table": self.table,
            "counts": self.counts,
            "rows": [r.as_dict() for r in self.rows],
            "out_of_scope": [vars(o) for o in self.out_of_scope],
            "bases": self.bases,
            "levels": self.levels,
            "problems": [p.as_dict() for p in self.problems],
        }


DEFAULT_SOURCE = "the default, <repo>/../shared/specs"


def specs_source(given: str | None = None) -> tuple[Path, str]:
    """Where the spec texts are looked for, and who said so: ``--specs-dir``,
    the environment variable, or the default beside the checkout."""
    if given:
        return Path(given), "--specs-dir"
    if os.environ.get(SPECS_ENV):
        return Path(os.environ[SPECS_ENV]), f"${SPECS_ENV}"
    return DEFAULT_SPECS_DIR, DEFAULT_SOURCE


def missing_specs_message(path: Path, source: str, needed_by: str = "") -> str:
    return (
        f"the spec texts are not at {path} ({source}){f'; {needed_by} needs them' if needed_by else ''}: "
        f"pass --specs-dir DIR or set {SPECS_ENV}=DIR to the folder holding them (btp/, ssb/, stomp/, "
        f"ripp/, ripplehost/: the project's shared/specs). Without any (no --specs-dir, no ${SPECS_ENV}), "
        f"`conformance coverage --protocol P` shows the stored table, {_shown(DOCS_DIR)}/P.md"
    )


def specs_dir(given: str | None = None) -> Path:
    path, source = specs_source(given)
    if not path.is_dir():
        raise CoverageError(missing_specs_message(path, source))
    return path


def stored_table(protocol: str) -> Path:
    return DOCS_DIR / markdown_file_name(protocol)


def table_path(protocol: str, tables_dir: Path = PACKAGE_DIR) -> Path:
    return tables_dir / f"{protocol}.toml"


def protocols_with_tables() -> list[str]:
    return sorted(p.stem for p in PACKAGE_DIR.glob("*.toml"))


def protocols_with_suites() -> list[str]:
    return sorted(p.name for p in SUITES_DIR.iterdir() if p.is_dir() and any(p.glob("test_*.py")))


def _check_keys(entry: dict, allowed: set[str], what: str, table: str) -> list[Problem]:
    unknown = sorted(set(entry) - allowed)
    return (
        [
            Problem(
                f"{what} has unknown key(s) {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})",
                table,
            )
        ]
        if unknown
        else []
    )


# --- citations --------------------------------------------------------------------------------

QUOTED = re.compile(r'"([^"]*)"')
PARENTHESISED = re.compile(r"\([^()]*\)")
ELLIPSIS = re.compile(r"\.\.\.|\u2026")


def parse_citation(citation: str) -> tuple[list[list[str]], list[str]]:
    """The parts of a citation (each a list of comma-separated segments,
    remarks removed) and the texts it quotes."""
    quotes = QUOTED.findall(citation)
    text = QUOTED.sub("", citation)
    while PARENTHESISED.search(text):
        text = PARENTHESISED.sub("", text)
    text = text.replace("\u00a7", ",")
    parts = []
    for part in text.split(";"):
        segments = [normalize_space(s) for s in part.split(",") if s.strip()]
        if segments:
            parts.append(segments)
    return parts, quotes


FOOTNOTE_REFERENCE = re.compile(r"footnotes?\s+(\d{1,3})", re.IGNORECASE)


def _names_parts_of(spec: SpecFile, segment: str) -> bool:
    """A citation segment that is not a heading but still names parts of
    the document: "Heading and Heading" (each must be a heading) or
    "footnote N" (the document must have the footnote mark N)."""
    footnote = FOOTNOTE_REFERENCE.fullmatch(segment)
    if footnote:
        mark = f"<sup>{footnote.group(1)}</sup>"
        return any(mark in sentence.text for sentence in spec.sentences)
    parts = [part.strip() for part in segment.split(" and ")]
    return len(parts) > 1 and all(part and spec.sections_named(part) for part in parts)


def check_citation(
    case: SuiteCase, specs: dict[str, SpecFile], cite_as: dict[str, str]
) -> list[Problem]:
    problems = []
    parts, quotes = parse_citation(case.citation)
    prefix = f"case {case.case_id} ({case.source}): citation {case.citation!r}"
    if not parts:
        return [Problem(f"{prefix} names no document")]
    labels = dict(cite_as)
    if not labels and len(specs) == 1:
        labels = {parts[0][0]: next(iter(specs))}
    document = None
    for number, segments in enumerate(parts):
        if segments[0] in labels:
            document, segments = labels[segments[0]], segments[1:]
        elif number == 0:
            problems.append(
                Problem(
                    f"{prefix} starts with {segments[0]!r}, not a known document label "
                    f"({', '.join(sorted(labels))})"
                )
            )
            return problems
        spec = specs[document]
        for heading in segments:
            if not spec.sections_named(heading) and not _names_parts_of(spec, heading):
                problems.append(
                    Problem(
                        f"{prefix} names section {heading!r}, which is not a heading of {document}",
                        document,
                    )
                )
    for quote in quotes:
        for fragment in ELLIPSIS.split(quote):
            fragment = plain(fragment).strip(" .,;:").casefold()
            if fragment and not any(fragment in spec.searchable for spec in specs.values()):
                problems.append(
                    Problem(f"{prefix} quotes {fragment!r}, which is not in the spec texts")
                )
    return problems


# --- the analysis -----------------------------------------------------------------------------


def _shown(path: Path) -> str:
    """A table's path as shown: relative to the repository when inside it."""
    try:
        return path.resolve().relative_to(REPO).as_posix()
    except ValueError:
        return str(path)


def load_table(path: Path) -> dict:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise CoverageError(f"{path}: not valid TOML: {exc}") from exc


def analyse(
    protocol: str,
    specs_root: Path,
    cases: dict[str, SuiteCase] | None = None,
    case_problems: list[str] | None = None,
    tables_dir: Path = PACKAGE_DIR,
) -> Coverage:
    """The traceability table of one protocol, with every problem found."""
    coverage = Coverage(protocol)
    if cases is None:
        cases, case_problems = collect_cases(REPO)
    protocol_cases = {cid: c for cid, c in cases.items() if c.protocol == protocol}
    coverage.cases_defined = len(protocol_cases)
    problems = coverage.problems
    problems.extend(Problem(p) for p in (case_problems or []) if f"/{protocol}/" in p)
    path = table_path(protocol, tables_dir)
    if not path.exists():
        if protocol in protocols_with_suites():
            problems.append(
                Problem(
                    f"protocol {protocol} has a suite but no coverage table "
                    f"({_shown(path)}): new protocols start with their table"
                )
            )
        else:
            problems.append(
                Problem(f"protocol {protocol} has no coverage table yet ({_shown(path)})")
            )
        return coverage
    table_name = _shown(path)
    coverage.table = table_name
    table = load_table(path)
    problems.extend(_check_keys(table, {"spec", "out_of_scope", "rule"}, "the table", table_name))
    spec_entry = table.get("spec", {})
    problems.extend(_check_keys(spec_entry, SPEC_KEYS, "[spec]", table_name))
    coverage.title = spec_entry.get("title", protocol)
    files = spec_entry.get("files", [])
    if not files:
        problems.append(Problem("[spec] lists no files", table_name))
    specs: dict[str, SpecFile] = {}
    for name in files:
        file_path = specs_root / name
        if not file_path.is_file():
            problems.append(Problem(f"spec file {file_path} not found", table_name))
            continue
        specs[name] = parse_spec_file(name, file_path.read_text(encoding="utf-8"))
    cite_as = dict(spec_entry.get("cite_as", {}))
    for label, name in cite_as.items():
        if name not in files:
            problems.append(
                Problem(
                    f"cite_as label {label!r} names {name!r}, not one of [spec] files", table_name
                )
            )
    if not specs:
        return coverage

    # Out-of-scope sections: (file, section index) -> entry.
    excluded: dict[tuple[str, int], OutOfScope] = {}
    for entry in table.get("out_of_scope", []):
        problems.extend(_check_keys(entry, OUT_OF_SCOPE_KEYS, "[[out_of_scope]]", table_name))
        name, title = entry.get("file", ""), entry.get("section", "")
        reason = str(entry.get("reason", "")).strip()
        if name not in specs:
            problems.append(
                Problem(
                    f"[[out_of_scope]] names file {name!r}, not one of [spec] files", name, title
                )
            )
            continue
        if not reason:
            problems.append(Problem("[[out_of_scope]] needs a reason", name, title))
        found = specs[name].sections_named(title)
        occurrence = entry.get("occurrence")
        if not found:
            problems.append(
                Problem("[[out_of_scope]] section is not a heading of the file", name, title)
            )
            continue
        if occurrence is not None:
            if not 1 <= int(occurrence) <= len(found):
                problems.append(
                    Problem(
                        f"[[out_of_scope]] occurrence {occurrence} but the heading occurs "
                        f"{len(found)} time(s)",
                        name,
                        title,
                    )
                )
                continue
            found = [found[int(occurrence) - 1]]
        elif len(found) > 1:
            problems.append(
                Problem(
                    f"[[out_of_scope]] heading occurs {len(found)} times in the file: "
                    "add occurrence = 1.." + str(len(found)),
                    name,
                    title,
                )
            )
            continue
        record = OutOfScope(name, title, reason)
        coverage.out_of_scope.append(record)
        excluded[(name, found[0].index)] = record

    # Rules: which sentences each one quotes.
    matches: dict[int, list[dict]] = {}
    sentence_list: list[Sentence] = [s for spec in specs.values() for s in spec.sentences]
    traced: set[str] = set()
    for entry in table.get("rule", []):
        problems.extend(_check_keys(entry, RULE_KEYS, "[[rule]]", table_name))
        quote = normalize_space(str(entry.get("quote", "")))
        name = entry.get("file")
        rule_cases = list(entry.get("cases", []))
        reason = str(entry.get("reason", "")).strip()
        if not quote:
            problems.append(Problem("[[rule]] without a quote", table_name))
            continue
        if name is not None and name not in specs:
            problems.append(
                Problem(
                    f"[[rule]] names file {name!r}, not one of [spec] files",
                    name or "",
                    sentence=quote,
                )
            )
            continue
        if not rule_cases and not reason:
            problems.append(
                Problem("[[rule]] has neither cases nor a reason", name or "", sentence=quote)
            )
        for case_id in rule_cases:
            if case_id not in cases:
                problems.append(
                    Problem(
                        f"[[rule]] names case {case_id}, which no suite defines",
                        name or "",
                        sentence=quote,
                    )
                )
            else:
                traced.add(case_id)
        # A short quote ("Required.") can stand in several sections: `section`
        # limits the rule to the sentences under that heading.
        section = entry.get("section")
        hits = [
            i
            for i, s in enumerate(sentence_list)
            if (name is None or s.file == name)
            and (section is None or s.section.title == section)
            and s.contains(quote)
        ]
        if not hits:
            inside = [
                n
                for n, spec in specs.items()
                if (name is None or n == name) and plain(quote).casefold() in spec.searchable
            ]
            hint = (
                " (it is in the text but spans two sentences: quote within one)" if inside else ""
            )
            problems.append(
                Problem(
                    f"[[rule]] quote not found in any sentence{hint}", name or "", sentence=quote
                )
            )
            continue
        occurrence = entry.get("occurrence")
        if occurrence is not None:
            # A sentence repeated word for word (the profile's "The client
            # MUST substitute all occurrences ..." under host, login and
            # destination) is told apart by its position.
            if not isinstance(occurrence, int) or not 1 <= occurrence <= len(hits):
                problems.append(
                    Problem(
                        f"[[rule]] occurrence {occurrence!r} but the quote matches "
                        f"{len(hits)} sentence(s)",
                        name or "",
                        sentence=quote,
                    )
                )
                continue
            hits = [hits[occurrence - 1]]
        hit_files = {sentence_list[i].file for i in hits}
        if name is None and len(hit_files) > 1:
            problems.append(
                Problem(
                    f"[[rule]] quote is in several files ({', '.join(sorted(hit_files))}): "
                    "add file = ...",
                    sentence=quote,
                )
            )
        for i in hits:
            matches.setdefault(i, []).append({"cases": rule_cases, "reason": reason})

    # Per case: the highest level its sentences state, (upper case, any case).
    stated: dict[str, tuple[int, int]] = {}
    for i, sentence in enumerate(sentence_list):
        keywords = sentence.keywords
        rules = matches.get(i, [])
        if not keywords and not rules:
            continue
        row = Row(sentence.file, sentence.section.title, sentence.line, sentence.text, keywords)
        ranks = keyword_ranks(sentence.plain)
        for rule in rules:
            for case_id in rule["cases"]:
                had = stated.get(case_id, (0, 0))
                stated[case_id] = (max(had[0], ranks[0]), max(had[1], ranks[1]))
                case = cases.get(case_id)
                column = (
                    row.client_cases
                    if case is not None and case.role == "client"
                    else row.server_cases
                )
                if case_id not in column:
                    column.append(case_id)
            if rule["reason"] and rule["reason"] not in row.reasons:
                row.reasons.append(rule["reason"])
        scope = next(
            (
                excluded[(sentence.file, index)]
                for index in sentence.section.lineage
                if (sentence.file, index) in excluded
            ),
            None,
        )
        if row.server_cases or row.client_cases:
            row.status = "cases"
        elif row.reasons:
            row.status = "reason"
        elif scope is not None:
            row.status = "out of scope"
            row.reasons.append(f"out of scope: {scope.reason}")
        else:
            problems.append(
                Problem(
                    f"normative sentence ({', '.join(keywords)}) has neither a case nor a reason",
                    sentence.file,
                    sentence.section.title,
                    sentence.text,
                )
            )
        if scope is not None:
            scope.normative += 1
        coverage.rows.append(row)

    for case_id, case in sorted(protocol_cases.items()):
        if case_id not in traced:
            problems.append(
                Problem(
                    f"case {case_id} ({case.source}) is mapped by no rule: "
                    "every case must trace to a sentence of the spec"
                )
            )
        problems.extend(check_citation(case, specs, cite_as))
        entry, problem = check_basis(case, stated.get(case_id, (0, 0)))
        coverage.levels.append(entry)
        if problem and case_id in traced:
            # An untraced case has its problem above; its level has no sentence to rest on.
            problems.append(Problem(problem))
    coverage.cases_traced = len(traced & set(protocol_cases))
    return coverage


RANK_LEVEL = {rank: level for level, rank in LEVEL_RANK.items()}
ERRATA_DIR = REPO / "docs" / "errata"


def _stated(rank: int) -> str:
    return RANK_LEVEL.get(rank, "no level")


def check_basis(case: SuiteCase, stated: tuple[int, int]) -> tuple[dict, str]:
    """The case's level held against its basis (docs/levels.md): keyword
    needs an upper-case key word at or above the level in a sentence the
    case checks; plain-words a word of any case ("must") there, and no
    upper-case one (then it is keyword); erratum an erratum the case follows
    and docs/errata/ defines; profile a docs/*-profile.md it names; the
    other kinds their note (checked when the case is read). Returns the
    case's entry of ``levels`` and the problem, or ""."""
    upper, anycase = stated
    entry = {
        "case_id": case.case_id,
        "level": case.level,
        "basis": case.basis,
        "keyword_level": _stated(upper),
        "words_level": _stated(anycase),
        "source": case.source,
    }
    where = f"case {case.case_id} ({case.source}) is {case.level}"
    try:
        basis = Basis.parse(case.basis)
    except ValueError as exc:
        return entry, f"{where}: {exc}"
    level = LEVEL_RANK[case.level]
    if basis.kind is BasisKind.KEYWORD and upper < level:
        hint = (
            f"; in words of any case they say {_stated(anycase)}: basis plain-words"
            if anycase >= level
            else ""
        )
        return entry, (
            f"{where} on basis keyword, but the sentences it checks state {_stated(upper)} in "
            f"upper-case key words{hint}. Lower the level to what the text states, or declare "
            'what binds it: basis="plain-words", "wire-format: ...", "profile: ...", '
            '"erratum: ..." or "inference: ..."'
        )
    if basis.kind is BasisKind.PLAIN_WORDS:
        if upper >= level:
            return (
                entry,
                f"{where} on basis plain-words, but its sentence states {_stated(upper)} in an upper-case key word: basis keyword",
            )
        if anycase < level:
            return entry, (
                f"{where} on basis plain-words, but the sentences it checks say at most "
                f"{_stated(anycase)}"
            )
    if basis.kind is BasisKind.INFERENCE and level > LEVEL_RANK["SHOULD"]:
        return entry, (
            f"{where} on an inference: an inference is never reported as the text's MUST. "
            "Lower the level to SHOULD (or what the text states), or name what binds it "
            "(a keyword sentence, the wire format, a profile rule, an erratum with its evidence)"
        )
    if basis.kind is BasisKind.ERRATUM:
        erratum = basis.note.split()[0]
        if erratum not in case.errata:
            return (
                entry,
                f"{where} on erratum {erratum}, which the case does not follow (errata=...)",
            )
        errata_file = ERRATA_DIR / f"{case.protocol}.md"
        if not errata_file.is_file() or not re.search(
            rf"^#+ .*\b{re.escape(erratum)}\b", errata_file.read_text("utf-8"), re.MULTILINE
        ):
            return (
                entry,
                f"{where} on erratum {erratum}, which {_shown(errata_file)} does not define",
            )
    if basis.kind is BasisKind.PROFILE:
        named = re.findall(r"docs/[\w.-]+-profile\.md", basis.note)
        if not named or not all((REPO / doc).is_file() for doc in named):
            return entry, (
                f"{where} on a profile rule, but its note names no docs/<protocol>-profile.md "
                f"that exists: {basis.note!r}"
            )
    return entry, ""


# --- output -----------------------------------------------------------------------------------

COUNT_LABELS = (
    ("normative", "normative sentences"),
    ("covered_by_cases", "covered by cases"),
    ("covered_by_reason", "covered by a reason"),
    ("out_of_scope", "out of scope"),
    ("uncovered", "uncovered"),
)


def render_text(coverage: Coverage) -> str:
    lines = [f"== {coverage.protocol}: {coverage.title} ({coverage.table or 'no table'})"]
    current = None
    for row in coverage.rows:
        if row.status == "out of scope":
            continue
        if (row.file, row.section) != current:
            current = (row.file, row.section)
            lines.append(f"\n{row.file}, {row.section}")
        lines.append(f"  [{row.level}] {row.sentence}")
        lines.append(f"      server: {', '.join(row.server_cases) or '-'}")
        lines.append(f"      client: {', '.join(row.client_cases) or '-'}")
        if row.reasons:
            lines.append(f"      reason: {'; '.join(row.reasons)}")
        if row.status == "uncovered":
            lines.append("      UNCOVERED")
    if coverage.out_of_scope:
        lines.append("\nout of scope:")
        for scope in coverage.out_of_scope:
            lines.append(
                f"  {scope.file}, {scope.section} ({scope.normative} normative): {scope.reason}"
            )
    counts = coverage.counts
    lines.append(
        "\n"
        + "; ".join(f"{label}: {counts[key]}" for key, label in COUNT_LABELS)
        + f"; cases traced: {counts['cases_traced']}/{counts['cases_defined']}"
        + "\ncases by the basis of their level: "
        + ", ".join(f"{kind} {n}" for kind, n in coverage.bases.items())
    )
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or "-"


def render_markdown(coverage: Coverage) -> str:
    counts = coverage.counts
    lines = [
        f"# Coverage: {coverage.title}",
        "",
        f"Generated from `{coverage.table}` and the spec texts by "
        f"`conformance coverage --protocol {coverage.protocol} --format markdown --write docs/coverage/`; "
        "do not edit by hand. Every sentence of the texts that states a requirement (a requirement "
        "keyword in any case, or a rule stated as fact, level `(fact)`) is mapped to the cases that "
        "check it, per role of the target, or to the reason it has none.",
        "",
        "| " + " | ".join(label for _, label in COUNT_LABELS) + " | cases traced |",
        "|" + "---|" * (len(COUNT_LABELS) + 1),
        "| "
        + " | ".join(str(counts[key]) for key, _ in COUNT_LABELS)
        + f" | {counts['cases_traced']}/{counts['cases_defined']} |",
        "",
    ]
    files = list(dict.fromkeys(row.file for row in coverage.rows))
    for name in files:
        lines += [
            f"## {name}",
            "",
            "| section | sentence | level | server cases | client cases | reason |",
            "|---|---|---|---|---|---|",
        ]
        for row in coverage.rows:
            if row.file != name or row.status == "out of scope":
                continue
            reason = "; ".join(row.reasons) + (
                " **UNCOVERED**" if row.status == "uncovered" else ""
            )
            lines.append(
                f"| {_cell(row.section)} | {_cell(row.sentence)} | {row.level} | "
                f"{_cell('<br>'.join(row.server_cases))} | {_cell('<br>'.join(row.client_cases))} | "
                f"{_cell(reason.strip())} |"
            )
        lines.append("")
    if coverage.levels:
        bases = coverage.bases
        lines += [
            "## Levels and their basis",
            "",
            "What binds each case's level (docs/levels.md), and the highest level the sentences "
            "it checks state in upper-case RFC 2119 key words and in words of any case. "
            + ", ".join(f"{kind}: {n}" for kind, n in bases.items() if n)
            + ".",
            "",
            "| case | level | basis | key words state | words state |",
            "|---|---|---|---|---|",
        ]
        for entry in sorted(coverage.levels, key=lambda e: e["case_id"]):
            lines.append(
                f"| `{entry['case_id']}` | {entry['level']} | {_cell(entry['basis'])} | "
                f"{entry['keyword_level']} | {entry['words_level']} |"
            )
        lines.append("")
    if coverage.out_of_scope:
        lines += [
            "## Out of scope",
            "",
            "| file | section (with its subsections) | normative sentences | reason |",
            "|---|---|---|---|",
        ]
        for scope in coverage.out_of_scope:
            lines.append(
                f"| {scope.file} | {_cell(scope.section)} | {scope.normative} | {_cell(scope.reason)} |"
            )
        lines.append("")
    if coverage.problems:
        lines += ["## Problems", ""] + [f"- {_cell(str(p))}" for p in coverage.problems] + [""]
    return "\n".join(lines)


def markdown_file_name(protocol: str) -> str:
    return f"{protocol}.md"


def show_stored_tables(wanted: list[str], path: Path) -> int:
    """Without the spec texts (only where none were named): the tables as
    last generated, docs/coverage/<protocol>.md, as they are (markdown)."""
    shown = [stored_table(protocol) for protocol in wanted]
    missing = [table for table in shown if not table.is_file()]
    if len(missing) < len(shown):
        print(
            f"conformance coverage: the spec texts are not at {path} ({DEFAULT_SOURCE}), so no table "
            f"is generated: showing {', '.join(_shown(t) for t in shown if t.is_file())}, as last generated "
            f"from them (markdown). --check, --write and --format json need the texts: --specs-dir DIR or "
            f"{SPECS_ENV}=DIR.",
            file=sys.stderr,
        )
    print(
        "\n".join(table.read_text(encoding="utf-8") for table in shown if table.is_file()), end=""
    )
    if missing:
        print(
            f"conformance coverage: no stored table {', '.join(_shown(t) for t in missing)} (protocols with "
            f"one: {', '.join(p.stem for p in sorted(DOCS_DIR.glob('*.md'))) or 'none'})",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return EXIT_OK


def cmd_coverage(args: argparse.Namespace) -> int:
    wanted = args.protocol or sorted(set(protocols_with_tables()) | set(protocols_with_suites()))
    path, source = specs_source(args.specs_dir)
    if not path.is_dir():
        needed_by = (
            "--check"
            if args.check
            else "--write"
            if args.write
            else "--format json"
            if args.format == "json"
            else ""
        )
        if needed_by or source != DEFAULT_SOURCE:
            # Named texts that are not there, or an option that needs them: say so, exit 2.
            print(
                f"conformance coverage: {missing_specs_message(path, source, needed_by)}",
                file=sys.stderr,
            )
            return EXIT_USAGE
        return show_stored_tables(wanted, path)
    try:
        root = specs_dir(args.specs_dir)
        cases, case_problems = collect_cases(REPO)
        results = [analyse(protocol, root, cases, case_problems) for protocol in wanted]
    except CoverageError as exc:
        print(f"conformance coverage: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.write:
        out = Path(args.write)
        out.mkdir(parents=True, exist_ok=True)
        for coverage in results:
            if coverage.table:
                (out / markdown_file_name(coverage.protocol)).write_text(
                    render_markdown(coverage), encoding="utf-8"
                )
                print(f"wrote {out / markdown_file_name(coverage.protocol)}")
    elif args.format == "json":
        print(json.dumps([c.as_dict() for c in results], indent=2))
    else:
        render = render_markdown if args.format == "markdown" else render_text
        print("\n".join(render(c) for c in results))
    problems = [(c.protocol, p) for c in results for p in c.problems]
    for protocol, problem in problems:
        print(f"coverage error [{protocol}] {problem}", file=sys.stderr)
    for coverage in results:
        counts = coverage.counts
        print(
            f"{coverage.protocol}: "
            + "; ".join(f"{label} {counts[key]}" for key, label in COUNT_LABELS)
            + f"; cases traced {counts['cases_traced']}/{counts['cases_defined']}; "
            f"errors {counts['problems']}",
            file=sys.stderr,
        )
    return EXIT_PROBLEMS if args.check and problems else EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "coverage",
        help="traceability table: each normative sentence of the spec texts "
        "-> the cases that check it, or the reason it has none",
    )
    parser.add_argument(
        "--protocol",
        action="append",
        default=[],
        help="only this protocol (repeatable); default: every protocol with a table or a suite",
    )
    parser.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 on any error (uncovered sentence, unknown quote, case or heading, "
        "case mapped by no rule, suite without table)",
    )
    parser.add_argument(
        "--specs-dir",
        default=None,
        help=f"folder of the spec texts (default ${SPECS_ENV} or <repo>/../shared/specs); "
        "without any, the stored tables of docs/coverage/ are shown, and --check, --write "
        "and --format json exit 2 saying so",
    )
    parser.add_argument(
        "--write",
        metavar="DIR",
        default=None,
        help="write <DIR>/<protocol>.md (markdown) for every protocol with a table",
    )
    parser.set_defaults(func=cmd_coverage)

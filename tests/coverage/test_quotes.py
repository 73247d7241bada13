"""Findings and errata quote the texts word for word (docs/levels.md,
"Quotes in findings and errata"): a maintainer whose node we fail checks
the sentence we quote, so every quote must be there.

In docs/findings/ and docs/errata/, outside code, a double-quoted span of
three words or more and every blockquote are quotes of the spec texts,
and each must be in them (whitespace, markup and case aside; ``...`` or
``[...]`` joins fragments, each of which must be there). Anything else is
marked: program output and messages are code (backticks); another
document's words carry their source right after the quote, ``"..." (from
bin_prot's README)``, a blockquote its source on its first line
(``> (from RFC 3080)``); a paraphrase ends ``(paraphrase)``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conformance.coverage.sentences import _searchable, parse_spec_file
from conformance.coverage.tool import REPO

from .test_coverage import require_spec_texts

DOCS = sorted((REPO / "docs" / "findings").glob("*.md")) + sorted(
    (REPO / "docs" / "errata").glob("*.md")
)
SPEC_SUFFIXES = (".md", ".txt", ".rst", ".asn")
FENCED = re.compile(r"```.*?```", re.S)
INDENTED_CODE = re.compile(r"^(?: {4}|\t).*$", re.M)
CODE_WITH_QUOTES = re.compile(r"`[^`\n]*\"[^`\n]*`")
BLOCKQUOTE = re.compile(r"(?:^> ?.*(?:\n|$))+", re.M)
# Within one paragraph: a stray quote mark must not pair across paragraphs.
QUOTED = re.compile(r'"((?:[^"\n]|\n(?!\s*\n)){1,600}?)"(\s*\((?:from |paraphrase)[^)]*\))?')
# "..." or "[...]" leaves words out; "[the schema fingerprint]" puts ours in.
ELISION = re.compile(r"\[[^\]]*\]|\.\.\.|…")
FOOTNOTE = re.compile(r"<sup>\d+</sup>")
MARKED = re.compile(r"^\((?:from |paraphrase)", re.I)


BULLET_OR_NUMBER = re.compile(r"(?:^|(?<=\s))(?:•|\d+\.)\s+")


def loose(text: str) -> str:
    """Text without list bullets and item numbers: a plain-text list ("1.
    Computes ... 2. Compares") quoted inline reads the same as in the text."""
    return " ".join(BULLET_OR_NUMBER.sub("", text).split())


def spec_texts_searchable(root: Path) -> list[str]:
    return [
        loose(parse_spec_file(str(path.relative_to(root)), path.read_text("utf-8")).searchable)
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.suffix in SPEC_SUFFIXES and "seeds" not in path.parts
    ]


def quotes_of(text: str) -> list[str]:
    """The quotes of the texts in one findings or errata file: blockquotes
    (their lines joined by newlines, list markers kept) and double-quoted
    spans of three words or more, outside code, not marked as another
    source's words or a paraphrase."""
    text = FENCED.sub("", text)
    text = INDENTED_CODE.sub("", text)
    text = CODE_WITH_QUOTES.sub("", text)
    found: list[str] = []
    for block in BLOCKQUOTE.findall(text):
        lines = [line[1:] for line in block.splitlines()]
        if lines and MARKED.match(lines[0].strip()):
            continue
        # One quote per paragraph of the blockquote; lines indented as code
        # (a JSON template, a figure) end a paragraph and are not prose.
        paragraph: list[str] = []
        for line in [*lines, ""]:
            if line.strip() and not line.startswith("    "):
                paragraph.append(line.strip())
            elif paragraph:
                found.append("\n".join(paragraph))
                paragraph = []
    text = BLOCKQUOTE.sub("\n", text)
    for match in QUOTED.finditer(text):
        quote = " ".join(match.group(1).split())
        if match.group(2) or len(quote.split()) < 3:
            continue
        found.append(quote)
    return found


def missing_fragments(quote: str, texts: list[str]) -> list[str]:
    """The fragments of ``quote`` (split at elisions) no text contains, each
    cleaned as the texts are for searching (markup, list markers, footnote
    marks, case)."""
    fragments = [
        fragment.strip(" .,;:\n")
        for fragment in ELISION.split(FOOTNOTE.sub("", quote))
        if len(fragment.strip(" .,;:\n")) > 3
    ]
    return [
        fragment
        for fragment in fragments
        if not any(
            loose(_searchable(fragment.splitlines())).strip(" .,;:") in text for text in texts
        )
    ]


def test_the_quote_reader_skips_code_and_marked_quotes():
    text = (
        'The guide says "each message has a sequence number" and the node wrote '
        '`"this is its own message"`; "other words here" (from bin_prot\'s README), '
        '"roughly what it says" (paraphrase), "two words".\n\n'
        "> (from RFC 3080)\n> a frame is a header\n\n"
        "> The server MUST answer.\n> Requests carry ids.\n\n"
        '```\n"in a code block" here\n```\n'
    )
    assert quotes_of(text) == [
        "The server MUST answer.\nRequests carry ids.",
        "each message has a sequence number",
    ]
    texts = ["the server must answer. requests carry ids."]
    assert missing_fragments("The server MUST answer. ... Requests carry ids.", texts) == []
    assert missing_fragments("The server SHOULD answer", texts) == ["The server SHOULD answer"]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return spec_texts_searchable(require_spec_texts())


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: path.name)
def test_every_quote_of_the_texts_is_in_the_texts(doc: Path, texts: list[str]):
    wrong = {
        quote[:200]: missing
        for quote in quotes_of(doc.read_text("utf-8"))
        if (missing := missing_fragments(quote, texts))
    }
    assert not wrong, (
        f"{doc.relative_to(REPO)} quotes words the texts do not contain (fix the quote; mark "
        "another source's words with (from ...) after the quote, a paraphrase with "
        "(paraphrase), program output as code): "
        + "; ".join(f"{quote!r}: not found {missing}" for quote, missing in wrong.items())
    )

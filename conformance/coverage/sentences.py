"""Spec texts cut into sections and sentences, and the normative ones found.

Sections come from headings: markdown ``#`` lines (the SSB guide, a
converted HTML page, uses ``## `` for every heading, so it is flat), and in
ASN.1 modules each type assignment (``Name ::=``) together with the comment
block just above it, and in reStructuredText (``.rst``) titles underlined
(and possibly overlined) with punctuation, levels in order of first use. Sentences end at ``.``, ``?`` or ``!`` followed by
white space, or at a blank line; every list item and table row is a
sentence of its own. Code blocks are not prose, except ASN.1 comments,
which are read as sentences. A sentence is normative when it holds one of
the requirement keywords in any case (these texts often write "must").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

KEYWORD_PATTERN = re.compile(
    r"\b(MUST\s+NOT|MUST|SHALL\s+NOT|SHALL|REQUIRED|SHOULD\s+NOT|SHOULD|RECOMMENDED"
    r"|MAY|OPTIONAL|NEVER|ALWAYS)\b",
    re.IGNORECASE,
)

HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)\s*(\S*)")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
TABLE_ROW = re.compile(r"^\s*\|")
TABLE_SEPARATOR = re.compile(r"^\s*\|?[\s:|-]+\|[\s:|-]*$")
ASN_ASSIGNMENT = re.compile(r"^([A-Za-z][\w-]*)\b[^-]*?::=")
# ".." (a range such as "0 .. 1023") and "..." do not end a sentence.
SENTENCE_END = re.compile(r"(?<=[^.][.?!])\s+")
# Abbreviations whose period does not end a sentence ("(e.g. having two
# subprotos ...)" is one sentence).
ABBREVIATIONS = ("e.g.", "i.e.", "cf.", "vs.", "approx.", "etc.)")
MARKDOWN_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
TYPOGRAPHIC = str.maketrans(
    {"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " "}
)


def normalize_space(text: str) -> str:
    return " ".join(text.split())


def plain(text: str) -> str:
    """Text without markdown markup and with straight quotes, for matching
    quotes written by hand against the spec."""
    text = MARKDOWN_LINK.sub(r"\1", text)
    text = text.replace("**", "").replace("`", "").translate(TYPOGRAPHIC)
    return normalize_space(text)


KEYWORD_RANK = {
    "MUST": 3,
    "MUST NOT": 3,
    "SHALL": 3,
    "SHALL NOT": 3,
    "REQUIRED": 3,
    "SHOULD": 2,
    "SHOULD NOT": 2,
    "RECOMMENDED": 2,
    "MAY": 1,
    "OPTIONAL": 1,
}
"""The level each RFC 2119 key word states (3 MUST, 2 SHOULD, 1 MAY); NEVER
and ALWAYS mark a sentence normative but state no level of their own."""
LEVEL_RANK = {"MUST": 3, "SHOULD": 2, "MAY": 1}


def keyword_ranks(text: str) -> tuple[int, int]:
    """The highest level ``text`` states in upper-case RFC 2119 key words,
    and in its words of any case ("must", "should", "may"): 0 for none."""
    upper = anycase = 0
    for match in KEYWORD_PATTERN.finditer(text):
        written = " ".join(match.group(1).split())
        rank = KEYWORD_RANK.get(written.upper(), 0)
        anycase = max(anycase, rank)
        if written.isupper():
            upper = max(upper, rank)
    return upper, anycase


def keywords_in(text: str) -> list[str]:
    """The requirement keywords in ``text``, upper case, in order, once each."""
    found: list[str] = []
    for match in KEYWORD_PATTERN.finditer(text):
        word = " ".join(match.group(1).upper().split())
        if word not in found:
            found.append(word)
    return found


@dataclass(frozen=True)
class Section:
    file: str
    title: str
    level: int
    index: int
    """Position of the section in its file (headings may repeat)."""
    line: int
    lineage: tuple[int, ...]
    """Indexes of this section and of every section it lies inside."""


@dataclass(frozen=True)
class Sentence:
    file: str
    section: Section
    text: str
    """Whitespace-normalized text as written (markup kept)."""
    line: int

    @property
    def plain(self) -> str:
        return plain(self.text)

    @property
    def keywords(self) -> list[str]:
        return keywords_in(self.plain)

    def contains(self, quote: str) -> bool:
        """A rule's quote is in this sentence: a case-sensitive substring
        after whitespace normalization, of the text as written or without
        markup."""
        quote = normalize_space(quote).translate(TYPOGRAPHIC)
        return quote in self.text.translate(TYPOGRAPHIC) or quote in self.plain


@dataclass
class SpecFile:
    path: str
    sections: list[Section] = field(default_factory=list)
    sentences: list[Sentence] = field(default_factory=list)
    searchable: str = ""
    """The whole text without markup, whitespace-normalized and lower case:
    where quotes in citations are looked for."""

    def sections_named(self, title: str) -> list[Section]:
        wanted = plain(title).casefold()
        return [s for s in self.sections if plain(s.title).casefold() == wanted]


def split_sentences(text: str) -> list[str]:
    """One paragraph (or list item, or table row) into sentences."""
    text = normalize_space(text)
    if not text:
        return []
    pieces = SENTENCE_END.split(text)
    sentences: list[str] = []
    for piece in pieces:
        if sentences and sentences[-1].endswith(ABBREVIATIONS):
            sentences[-1] = f"{sentences[-1]} {piece}"
        else:
            sentences.append(piece)
    return sentences


class _Builder:
    def __init__(self, path: str) -> None:
        self.spec = SpecFile(path)
        self.stack: list[Section] = []
        self.current: Section | None = None

    def open_section(self, title: str, level: int, line: int) -> None:
        while self.stack and self.stack[-1].level >= level:
            self.stack.pop()
        index = len(self.spec.sections)
        lineage = tuple(s.index for s in self.stack) + (index,)
        section = Section(self.spec.path, title, level, index, line, lineage)
        self.spec.sections.append(section)
        self.stack.append(section)
        self.current = section

    def add_unit(self, text: str, line: int) -> None:
        if self.current is None:
            self.open_section("(preamble)", 0, 1)
        assert self.current is not None
        for sentence in split_sentences(text):
            self.spec.sentences.append(Sentence(self.spec.path, self.current, sentence, line))


def asn_comment(line: str) -> str | None:
    """The comment of an ASN.1 line (``-- ...`` to the end of the line or
    to the next ``--``), or None."""
    match = re.search(r"--(.*?)(?:--|$)", line)
    return None if match is None else match.group(1).strip()


def _add_asn_comments(builder: _Builder, numbered_lines: list[tuple[int, str]]) -> None:
    """ASN.1 comments as prose: consecutive comment-only lines form one
    paragraph; an empty comment or a code line ends it; a comment after
    code on the same line is a paragraph of its own."""
    paragraph: list[str] = []
    start = 0

    def flush() -> None:
        nonlocal paragraph
        if paragraph:
            builder.add_unit(" ".join(paragraph), start)
        paragraph = []

    for number, line in numbered_lines:
        comment = asn_comment(line)
        if line.strip().startswith("--"):
            if comment:
                if not paragraph:
                    start = number
                paragraph.append(comment)
            else:
                flush()
            continue
        flush()
        if comment:
            builder.add_unit(comment, number)
    flush()


def parse_markdown(path: str, text: str) -> SpecFile:
    builder = _Builder(path)
    lines = text.splitlines()
    start = 0
    if lines and lines[0].strip() == "---":  # front matter: metadata, not prose
        for end in range(1, len(lines)):
            if lines[end].strip() == "---":
                start = end + 1
                break
    unit: list[str] = []
    unit_line = 0
    fence: list[tuple[int, str]] | None = None
    fence_is_asn = False

    def flush() -> None:
        nonlocal unit
        if unit:
            builder.add_unit(" ".join(unit), unit_line)
        unit = []

    for number, line in enumerate(lines[start:], start + 1):
        fence_match = FENCE.match(line)
        if fence is not None:
            if fence_match:
                if fence_is_asn or any("::=" in code for _, code in fence):
                    _add_asn_comments(builder, fence)
                fence = None
            else:
                fence.append((number, line))
            continue
        if fence_match:
            flush()
            fence, fence_is_asn = [], fence_match.group(2).lower().startswith("asn")
            continue
        heading = HEADING.match(line)
        if heading:
            flush()
            builder.open_section(plain(heading.group(2)), len(heading.group(1)), number)
            continue
        if not line.strip():
            flush()
            continue
        if TABLE_ROW.match(line):
            flush()
            if not TABLE_SEPARATOR.match(line):
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                builder.add_unit(" | ".join(cells), number)
            continue
        if LIST_ITEM.match(line):
            flush()
            unit, unit_line = [LIST_ITEM.sub("", line, count=1)], number
            continue
        stripped = line.strip()
        if stripped.startswith(">"):
            stripped = stripped.lstrip("> ")
        if not unit:
            unit_line = number
        unit.append(stripped)
    flush()
    if fence is not None and (fence_is_asn or any("::=" in code for _, code in fence)):
        _add_asn_comments(builder, fence)
    builder.spec.searchable = _searchable(lines[start:])
    return builder.spec


def parse_asn(path: str, text: str) -> SpecFile:
    builder = _Builder(path)
    lines = text.splitlines()
    starts: list[tuple[int, str]] = []  # (0-based first line of the section, title)
    for number, line in enumerate(lines):
        match = ASN_ASSIGNMENT.match(line)
        if not match:
            continue
        first = number
        back = number - 1
        while back >= 0 and not lines[back].strip():
            back -= 1
        while back >= 0 and lines[back].strip().startswith("--"):
            first = back
            back -= 1
        starts.append((first, match.group(1)))
    module = next((line.split()[0] for line in lines if line.strip()), path)
    boundaries = [(0, module)] + starts
    for position, (first, title) in enumerate(boundaries):
        last = boundaries[position + 1][0] if position + 1 < len(boundaries) else len(lines)
        if first >= last and position > 0:
            continue
        builder.open_section(title, 0 if position == 0 else 1, first + 1)
        _add_asn_comments(builder, [(n + 1, lines[n]) for n in range(first, last)])
    builder.spec.searchable = _searchable(lines)
    return builder.spec


# Single-character emphasis (*word*, _word_) and footnote marks (<sup>3</sup>)
# of texts converted to markdown: a citation quoting the words alone must
# still be found. Only the searchable text drops them (sentences and titles
# keep their markup, so tables and generated docs do not change).
EMPHASIS = re.compile(r"(?<![\w*])([*_])(?=\S)([^*_\n]+?)(?<=\S)\1(?![\w*])")
FOOTNOTE_MARK = re.compile(r"<sup>[^<]{0,8}</sup>")


def _searchable(lines: list[str]) -> str:
    cleaned = []
    for line in lines:
        line = HEADING.sub(r"\2", line)
        line = LIST_ITEM.sub("", line, count=1)
        cleaned.append(line.strip().lstrip(">").replace("|", " "))
    text = plain(" ".join(cleaned))
    text = EMPHASIS.sub(r"\2", FOOTNOTE_MARK.sub("", text))
    return normalize_space(text).casefold()


RST_ADORNMENT = re.compile(r"^([=\-`:'\"~^_*+#<>.])\1{2,}\s*$")


def rst_as_markdown(text: str) -> str:
    """reStructuredText headings rewritten as markdown ``#`` lines, every
    other line kept and the line count unchanged (so line numbers hold):
    the rest of an .rst text (paragraphs, ``*``/``1.`` lists, definition
    lists, ``.. [#note]`` footnotes) reads as markdown prose already."""
    lines = text.splitlines()
    out = list(lines)
    styles: list[tuple[str, bool]] = []
    number = 0
    while number + 1 < len(lines):
        title, under = lines[number], lines[number + 1]
        over = lines[number - 1] if number > 0 else ""
        adorned = RST_ADORNMENT.match(under)
        if (
            title.strip()
            and not title.startswith((" ", "\t"))
            and not RST_ADORNMENT.match(title)
            and adorned
            and len(under.rstrip()) >= len(title.rstrip())
        ):
            overlined = bool(RST_ADORNMENT.match(over)) and over.strip() == under.strip()
            style = (adorned.group(1), overlined)
            if style not in styles:
                styles.append(style)
            out[number] = "#" * min(styles.index(style) + 1, 6) + " " + title.strip()
            out[number + 1] = ""
            if overlined:
                out[number - 1] = ""
            number += 2
            continue
        number += 1
    return "\n".join(out) + "\n"


BOX_DRAWING = re.compile(r"[\u2500-\u257f]")
COLUMNS = re.compile(r"\S\s{2,}\S")
BULLET = re.compile(r"^\s*[\u2022\u25e6\u25aa]\s+")
TITLE_WORD = re.compile(r"^[(\"]?[A-Z0-9][\w.-]*\)?$|^-$")


def _is_plain_title(lines: list[str], number: int) -> bool:
    """A heading of a plain-text page (a web page saved as text): a short
    unindented line standing alone between blank lines, every word
    capitalised, no sentence or code punctuation at its end."""
    line = lines[number]
    stripped = line.strip()
    if not stripped or line[0].isspace() or len(stripped) > 60 or stripped[-1] in ".:;,?!=":
        return False
    if number > 0 and lines[number - 1].strip():
        return False
    if number + 1 < len(lines) and lines[number + 1].strip():
        return False
    if BOX_DRAWING.search(stripped) or COLUMNS.search(stripped):
        return False
    return all(TITLE_WORD.match(word) for word in stripped.split())


def plain_text_as_markdown(text: str) -> str:
    """A plain-text page (no markdown headings, e.g. the RIPP wiki page)
    rewritten as markdown with the line count unchanged: title lines become
    headings (the first ``#``, the others ``##``), bullets (``\u2022``) list
    items, column layouts (fields separated by two or more spaces, indented)
    and diagram lines (box drawing) table rows, so that each is a sentence
    of its own instead of one run-on paragraph; separator rules vanish."""
    lines = text.splitlines()
    out = []
    titles = 0
    for number, line in enumerate(lines):
        stripped = line.strip()
        if BOX_DRAWING.search(line):
            words = BOX_DRAWING.sub(" ", line).replace(">", " ").replace("<", " ").strip()
            # An arrow's head ("──>") is drawing too; what is left is the label.
            out.append(
                f"| {normalize_space(words).replace('|', '/')} |" if words.strip(" -") else ""
            )
        elif _is_plain_title(lines, number):
            out.append(("# " if titles == 0 else "## ") + stripped)
            titles += 1
        elif BULLET.match(line):
            out.append("- " + BULLET.sub("", line))
        elif line[:1].isspace() and COLUMNS.search(stripped) and not LIST_ITEM.match(line):
            out.append("| " + " | ".join(re.split(r"\s{2,}", stripped)) + " |")
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def parse_spec_file(path: str, text: str) -> SpecFile:
    if path.endswith(".asn"):
        return parse_asn(path, text)
    if path.endswith(".rst"):
        return parse_markdown(path, rst_as_markdown(text))
    if path.endswith(".txt") and not any(HEADING.match(line) for line in text.splitlines()):
        return parse_markdown(path, plain_text_as_markdown(text))
    return parse_markdown(path, text)

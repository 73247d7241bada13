"""Traceability of the spec texts: every normative sentence mapped to cases
or to a written reason (``conformance coverage``); see ``tool.py``.
The tables are ``<protocol>.toml`` beside this file."""

from .sentences import keywords_in, parse_spec_file, split_sentences
from .tool import Coverage, CoverageError, analyse, parse_citation, render_markdown, specs_dir

__all__ = [
    "Coverage",
    "CoverageError",
    "analyse",
    "keywords_in",
    "parse_citation",
    "parse_spec_file",
    "render_markdown",
    "specs_dir",
    "split_sentences",
]

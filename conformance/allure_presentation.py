"""What a reader of the Allure report sees of a run's ``allure-results``:
the harness's words, not Python's.

allure-pytest writes what pytest knows: the exception's class before its
message (``conformance.plugin.ConformanceFailure: ...``), a traceback for
every failure and skip, parameters as Python reprs (``'coilmq'``), a tag per
pytest marker (``asyncio``), and a set-up and tear-down step per fixture and
finalizer (``open_peer::<lambda>``, with no status: Allure's purple
"unknown"). `conformance report` passes the results through
:func:`present_results` before ``allure generate``:

- a failure's message is the harness's own sentence (case id, level, basis,
  citation, what the node did), once; the traceback is kept only for a case
  that ended in ``error`` (Allure's "broken"), where it shows a harness or
  target-start problem;
- a case blocked by a prerequisite becomes Allure's ``unknown`` status (no
  verdict for its own rule), apart from a not-applicable case (``skipped``),
  its message starting with the root cause's case id;
- parameters read ``target: coilmq``; the ``asyncio`` tag and pytest's host,
  thread, framework, language and package labels go;
- fixture set-up and tear-down (the ``*-container.json`` files) go: they are
  the harness's plumbing, not the case's steps;
- descriptions are reflowed (a docstring's hard line breaks joined, blank
  lines kept as paragraph breaks);
- once Allure has generated the report, a blocked case's page links to its
  root cause's page (:func:`link_root_causes`): Allure numbers its pages only
  while generating, so the link is written into the generated data.

The run's own ``allure-results`` stay as allure-pytest wrote them (other
Allure tools read them): the report is built from a presented copy.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

PYTEST_LABELS = frozenset({"host", "thread", "framework", "language", "package"})
"""Labels allure-pytest adds that say how the harness ran, not what it found."""
PYTEST_TAGS = frozenset({"asyncio"})
"""Tags that are pytest markers of the harness's own plumbing."""
EXCEPTION_PREFIX = re.compile(
    r"^(?:Skipped: |(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Failure|Exception): )"
)
"""``conformance.plugin.ConformanceFailure: `` and the like, and pytest's ``Skipped: ``."""
BLOCKED = "blocked by "


def plain_message(message: str) -> str:
    """A result message without the exception class (or ``Skipped:``) before it."""
    return EXCEPTION_PREFIX.sub("", message, count=1)


def plain_parameter(value: str) -> str:
    """``'coilmq'`` -> ``coilmq``: a parameter's repr as its value."""
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return value
    return parsed if isinstance(parsed, str) else value


def reflow(text: str) -> str:
    """Paragraphs as single lines: line breaks within a paragraph become
    spaces; blank lines, and lines of an indented block (a dump, a list),
    are kept."""
    # A docstring keeps its indentation after its first line: that common
    # indentation goes (as inspect.cleandoc's); what is indented deeper is a block.
    lines = text.strip("\n").splitlines()
    indents = [len(line) - len(line.lstrip()) for line in lines[1:] if line.strip()]
    base = min((i for i in indents if i), default=0)
    lines = [line[base:] if line[:base].isspace() else line for line in lines]
    paragraphs = re.split(r"\n\s*\n", "\n".join(lines))
    out = []
    for paragraph in paragraphs:
        lines = paragraph.splitlines()
        if any(line.startswith(("    ", "\t", "- ", "* ")) for line in lines[1:]):
            out.append(paragraph)
        else:
            out.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(out) + ("\n" if text.endswith("\n") else "")


def present_result(result: dict) -> dict:
    """One ``*-result.json`` as the report shows it (see the module doc)."""
    details = result.get("statusDetails") or {}
    message = plain_message(str(details.get("message") or ""))
    status = result.get("status")
    if status == "skipped" and message.startswith(BLOCKED):
        status = "unknown"
    presented_details = {"message": message} if message else {}
    if status == "broken" and details.get("trace"):
        presented_details["trace"] = details["trace"]
    for flag in ("known", "muted", "flaky"):
        if details.get(flag):
            presented_details[flag] = details[flag]
    result = dict(result, status=status, statusDetails=presented_details)
    result["parameters"] = [
        dict(p, value=plain_parameter(str(p.get("value", ""))))
        for p in result.get("parameters", [])
    ]
    result["labels"] = [
        label
        for label in result.get("labels", [])
        if label.get("name") not in PYTEST_LABELS
        and not (label.get("name") == "tag" and label.get("value") in PYTEST_TAGS)
    ]
    if isinstance(result.get("description"), str):
        result["description"] = reflow(result["description"])
    return result


def present_results(results: Path) -> dict[str, int]:
    """Rewrites ``results`` (a copy of an ``allure-results`` folder) for the
    report; returns counts of what changed. Files it cannot read are left
    as they are (Allure reports them)."""
    counts = {"results": 0, "blocked": 0, "fixture_containers_removed": 0}
    for path in sorted(results.glob("*-result.json")):
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        presented = present_result(result)
        counts["results"] += 1
        counts["blocked"] += presented["status"] == "unknown"
        path.write_text(json.dumps(presented), encoding="utf-8")
    for path in sorted(results.glob("*-container.json")):
        try:
            container = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        # Containers carry only fixtures' befores and afters in these runs.
        if isinstance(container, dict) and not container.get("links"):
            path.unlink()
            counts["fixture_containers_removed"] += 1
    return counts


def link_root_causes(report: Path) -> int:
    """In a generated report, give each blocked case (a ``blocked_by``
    label) a link to the page of its root cause, the same target's case of
    that id (Allure's route ``#testresult/<uid>``), and show a case's
    message once (Allure repeats it under "Test body"). Returns the links
    made."""
    cases_dir = report / "data" / "test-cases"
    cases = {}
    for path in cases_dir.glob("*.json"):
        try:
            cases[path] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue

    def label(case: dict, name: str) -> str | None:
        return next(
            (lb.get("value") for lb in case.get("labels", []) if lb.get("name") == name), None
        )

    uid_of = {(case.get("name"), label(case, "target")): case.get("uid") for case in cases.values()}
    made = 0
    for path, case in cases.items():
        stage = case.get("testStage")
        if isinstance(stage, dict) and stage.get("shouldDisplayMessage"):
            stage["shouldDisplayMessage"] = False
            path.write_text(json.dumps(case), encoding="utf-8")
        root = label(case, "blocked_by")
        uid = uid_of.get((root, label(case, "target"))) if root else None
        if not uid:
            continue
        link = {"name": f"root cause: {root}", "url": f"#testresult/{uid}", "type": "link"}
        case["links"] = [lk for lk in case.get("links", []) if lk.get("url") != link["url"]] + [
            link
        ]
        path.write_text(json.dumps(case), encoding="utf-8")
        made += 1
    return made

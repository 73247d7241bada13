"""The version view's page: one strip per rule across an implementation's releases.

Self-contained like the matrices' page (:mod:`.html`, whose colours and
evidence links it reuses): each cell is a release's latest verdict of the
rule, coloured, with a letter in it for readers who cannot tell the colours
apart (P pass, F fail, E error, B blocked, N not applicable, S not started,
a dot: not run), and a link to its run's trace (else the run's
results.jsonl) with the other evidence in its hover text. The first failing
release is outlined in red and marked with a down arrow, the first fixed
one outlined in green with an up arrow; each strip is followed by a line
saying both and every release where the verdict changed. Verdict changes
(between releases, between two nights of one release) are listed first,
in red.
"""

from __future__ import annotations

from html import escape
from typing import Any

from .html import STYLE, VERDICT_CLASS, _a, evidence_links
from .tables import CLEAN, DID_NOT_START

MAX_RULES = 400
"""Strips per implementation on the page (changed rules first); versions.json has all."""

LETTERS = {
    "passed": ("P", "pass"),
    "failed": ("F", "fail"),
    "error": ("E", "error (no verdict of the rule)"),
    "blocked": ("B", "blocked (a prerequisite did not pass)"),
    "not_applicable": ("N", "not applicable"),
    DID_NOT_START: ("S", "not started (the target did not start)"),
}

VIEW_STYLE = """
.strip td.cell{width:22px;min-width:22px;height:18px;padding:0;text-align:center;font-size:.75em;
 border:1px solid #fff}
.strip td.cell a{display:block;color:#000;text-decoration:none;background:rgba(255,255,255,.55);
 margin:2px;line-height:14px}
.strip td.cell a:focus{outline:2px solid #000}
.strip td.ff{box-shadow:inset 0 0 0 3px #7a0000} .strip td.fx{box-shadow:inset 0 0 0 3px #00441b}
.strip th.col{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:500;font-size:.8em}
.strip th.row{font-weight:400;font-size:.8em;white-space:nowrap;background:#fff}
.strip td.says{font-size:.8em;color:#444;min-width:24em;border:none}
.news{color:#b00000;border:2px solid #b00000;padding:.4em 1em;margin:1em 0}
.news li{margin:.2em 0}
"""


def _verdict_words(verdict: str | None) -> str:
    return LETTERS[verdict][1] if verdict in LETTERS else "not run"


def _legend() -> str:
    items = "".join(
        f'<span class="sw {VERDICT_CLASS[v]}"></span><b>{letter}</b> {escape(words)}'
        for v, (letter, words) in LETTERS.items()
    )
    return (
        f'<div class="legend"><p><b>Each cell, a release\'s latest verdict:</b>{items}'
        '<span class="sw v-none"></span><b>·</b> not run</p>'
        "<p>Outlined dark red with ▼: the first release that fails the rule; outlined dark "
        "green with ▲: the first later release that passes it again. Each cell links to its "
        "run's trace (or results.jsonl); hover for the run, night and harness version.</p></div>"
    )


def _cell(rule: dict[str, Any], cell: dict[str, Any] | None, version: str) -> str:
    if cell is None:
        return f'<td class="cell v-none" title="{_a(version + ": not run")}">·</td>'
    letter, words = LETTERS.get(cell["verdict"], ("?", cell["verdict"]))
    marks, arrow = [], ""
    if version == rule["first_failing"]:
        marks.append("ff")
        arrow = "▼"
    if version == rule["first_fixed"]:
        marks.append("fx")
        arrow = "▲"
    links = evidence_links(cell["source_uri"], cell["trace_file"], cell["pcap_file"])
    title = (
        f"{rule['case_id']} in {rule['implementation']} {version}: {words}\n"
        f"night {cell['date']} (run since {cell['first_night']}, {cell['records']} records), "
        f"run {cell['run_id']}, "
        f"harness {cell['harness_version']}"
    )
    if cell["previous_night_verdict"] and cell["previous_night_verdict"] != cell["verdict"]:
        title += (
            f"\nthe night before ({cell['previous_night']}): "
            f"{_verdict_words(cell['previous_night_verdict'])}"
        )
    if "ff" in marks:
        title += "\nfirst release that fails the rule"
    if "fx" in marks:
        title += "\nfirst later release that passes it again"
    # The link is the trace (else results.jsonl); the capture is named when
    # there is one. (Every evidence URL in every title made a year's page of
    # 20 implementations 30 MB.)
    title += "".join(f"\n{label}: {href}" for label, href in links if label == "capture")
    text = f"{arrow}{letter}"
    label = f"{rule['case_id']}, {rule['implementation']} {version}: {words}"
    inner = (
        f'<a href="{_a(links[0][1])}" title="{_a(title)}" aria-label="{_a(label)}">{text}</a>'
        if links
        else f'<span title="{_a(title)}">{text}</span>'
    )
    return f'<td class="cell {VERDICT_CLASS.get(cell["verdict"], "v-none")} {" ".join(marks)}">{inner}</td>'


def _says(rule: dict[str, Any]) -> str:
    parts = []
    if rule["first_failing"]:
        parts.append(f"first fails in {rule['first_failing']}")
        parts.append(
            f"passes again in {rule['first_fixed']}" if rule["first_fixed"] else "not fixed since"
        )
    if rule["regressions"][1:] or (rule["regressions"] and rule["fixes"]):
        parts.append("regressed in " + ", ".join(rule["regressions"]))
    if rule["changes"]:
        parts.append(
            "changed in "
            + ", ".join(
                f"{c['to_version']} ({_verdict_words(c['from'])} → {_verdict_words(c['to'])})"
                for c in rule["changes"]
            )
        )
    return "; ".join(parts) or "no change"


def _implementation(impl: dict[str, Any]) -> str:
    versions = [r["version"] for r in impl["releases"]]
    orders = sorted({r["order"] for r in impl["releases"]})
    rules = sorted(impl["rules"], key=lambda r: (not r["changes"], r["protocol"], r["case_id"]))
    shown = rules[:MAX_RULES]
    out = [
        f'<h2 id="{_a(impl["implementation"])}">{escape(impl["implementation"])}: '
        f"{len(versions)} release(s)</h2>",
        f"<p class=note>Releases in {escape(impl['ecosystem'])} order "
        f"({escape(', '.join(orders))}), oldest first: {escape(', '.join(versions))}.</p>",
    ]
    if len(shown) < len(rules):
        out.append(
            f"<p class=note>The first {len(shown)} of {len(rules)} rules (those whose verdict "
            "changed first); versions.json has them all.</p>"
        )
    out.append(
        '<table class="strip"><tr><th></th>'
        + "".join(f'<th class=col title="{_a(v)}">{escape(v)}</th>' for v in versions)
        + "<th></th></tr>"
    )
    for rule in shown:
        cells = {c["version"]: c for c in rule["cells"]}
        network = "" if rule["network"] == CLEAN else f" [{rule['network']}]"
        out.append(
            f"<tr><th class=row>{escape(rule['case_id'])}{escape(network)} "
            f"<span class=lvl>{escape(rule['level'] or '')}</span></th>"
            + "".join(_cell(rule, cells.get(v), v) for v in versions)
            + f"<td class=says>{escape(_says(rule))}</td></tr>"
        )
    out.append("</table>")
    return "".join(out)


def render(view: dict[str, Any], lines: list[str], meta: dict[str, Any]) -> str:
    impls = view["implementations"]
    news = (
        '<div class="news" role="alert"><b>Verdict changes (regressions are news):</b><ul>'
        + "".join(f"<li>{escape(line)}</li>" for line in lines)
        + "</ul></div>"
        if lines
        else "<p>No verdict changed between releases or between a release's last two nights.</p>"
    )
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width, initial-scale=1'>"
        f"<title>Conformance by release</title><style>{STYLE}{VIEW_STYLE}</style></head><body>"
        "<h1>Every rule across the releases</h1>"
        f"<p class=meta>Dataset version {escape(str(meta.get('dataset_version', '?')))} · "
        f"generated {escape(str(meta.get('generated', '')))} · "
        f"{len(impls)} implementation(s) · data: versions.json, regressions.json</p>"
        "<nav>"
        + "".join(
            f'<a href="#{_a(i["implementation"])}">{escape(i["implementation"])}</a>' for i in impls
        )
        + "</nav>"
        + news
        + _legend()
        + "".join(_implementation(i) for i in impls)
        + "</body></html>\n"
    )

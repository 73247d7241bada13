"""The static ``index.html`` of the matrices: one self-contained file.

Why static and self-contained: the page is opened from a CI artifact or a
file share, often offline, so it has no scripts, fonts or stylesheets to
fetch. Heatmaps are HTML tables and inline SVG coloured by verdict or by
pass rate; every cell carries a ``title`` (hover text) with the numbers
behind its colour, and a legend explains the colours. Large matrices are
cut for the page (newest versions, latest nights, worst flaky cases) with a
note naming the CSV that holds everything.

A blocked cell names its root cause (the prerequisite case that did not
pass) in its hover text and, visibly, in the list under its heatmap or in
the cell; a target that did not start is shown as "did not start", in a
colour of its own, never as a rule's error.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone
from html import escape
from typing import Any

from ..core.requirements import level_with_basis
from .tables import (
    CLEAN,
    DID_NOT_START,
    DID_NOT_START_STATUS,
    PAGE_VERSIONS,
    Matrix,
    Window,
    verdict_text,
)

MAX_NIGHTS = 180
MAX_LIST = 12
MAX_CAUSES = 60
"""Blocked and did-not-start cells listed under a heatmap; the CSV has all."""

VERDICT_CLASS = {
    "passed": "v-pass",
    "failed": "v-fail",
    "error": "v-err",
    DID_NOT_START: "v-dns",
    "blocked": "v-blk",
    "not_applicable": "v-na",
}
STATUS_WORDS = {
    "certified": "CONFORMANT",
    "not certified": "NOT CONFORMANT",
    DID_NOT_START_STATUS: "NOT CERTIFIED (did not start)",
    "no complete run": "no complete run",
}
"""The certification status as the page says it: the words `conformance
certify` gives the same run (the dataset keeps its own values, which the
CSVs and the nightly's comparisons read)."""
STATUS_CLASS = {
    "certified": "c-ok",
    "not certified": "c-fail",
    DID_NOT_START_STATUS: "c-dns",
    "no complete run": "c-none",
}


def _rate_class(rate: float | None) -> str:
    return "r-none" if rate is None else f"r{int(round(rate * 10))}"


def _pct(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate * 100:.1f}%"


def _a(text: Any) -> str:
    return escape("" if text is None else str(text), quote=True)


def _list(items: list[str]) -> str:
    if not items:
        return "none"
    more = f" (+{len(items) - MAX_LIST} more)" if len(items) > MAX_LIST else ""
    return ", ".join(items[:MAX_LIST]) + more


STYLE = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.5em;margin:0 0 .3em} h2{font-size:1.2em;margin:1.6em 0 .4em;border-bottom:1px solid #ccc}
h3{font-size:1em;margin:1em 0 .3em} .meta{color:#555} .note{color:#666;font-size:.9em}
table{border-collapse:collapse} th,td{padding:2px 5px;border:1px solid #ddd;text-align:left}
th{background:#f4f4f4;font-weight:600} td.num{text-align:right;font-variant-numeric:tabular-nums}
.heat td.cell{width:14px;min-width:14px;height:14px;padding:0;border:1px solid #fff}
.heat th.col{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:500;font-size:.8em;padding:3px 1px}
.heat th.row{font-weight:400;font-size:.8em;white-space:nowrap;background:#fff}
.grid td{min-width:7em;text-align:center}
.v-pass{background:#2e9d4b} .v-passflaky{background:#9fd49b} .v-fail{background:#d7301f}
.v-err{background:#7b3294} .v-na{background:#c9c9c9} .v-none{background:#fff}
.v-blk{background:repeating-linear-gradient(45deg,#f1a340 0 3px,#fee0b6 3px 6px)}
.v-dns{background:repeating-linear-gradient(-45deg,#4d4d4d 0 3px,#bababa 3px 6px)}
.c-dns{background:#4d4d4d;color:#fff} .cause{font-size:.85em;margin:.3em 0 0 1em;padding-left:1em}
.c-ok{background:#2e9d4b;color:#fff} .c-fail{background:#d7301f;color:#fff} .c-none{background:#c9c9c9}
.r-none{background:#eee}
.heat td.cell a{display:block;width:100%;height:100%}
.heat td.cell a:focus{outline:2px solid #000;outline-offset:-2px}
.heat td.root{box-shadow:inset 0 0 0 2px #000}
.evidence{font-size:.85em;padding-left:1.5em} .evidence li{margin:.3em 0}
.evidence li:target{background:#fff3b0} .evidence .msg{white-space:pre-wrap;color:#333}
.r0{background:#b2182b;color:#fff}.r1{background:#c8372d;color:#fff}.r2{background:#d6604d;color:#fff}
.r3{background:#e58e68}.r4{background:#f1b77e}.r5{background:#f7d98b}.r6{background:#e6e68a}
.r7{background:#c2df86}.r8{background:#91cf7f}.r9{background:#5cb566;color:#fff}.r10{background:#1a9850;color:#fff}
.legend span.sw{display:inline-block;width:14px;height:14px;vertical-align:middle;border:1px solid #999;margin:0 4px 0 12px}
.bar{display:inline-block;height:10px;background:#d7301f;vertical-align:middle}
.lvl{font-size:.75em;color:#666} nav a{margin-right:1em}
"""


def _legend() -> str:
    verdicts = [
        ("v-pass", "passed (pass rate 100%)"),
        ("v-passflaky", "latest passed, some runs did not"),
        ("v-fail", "failed"),
        ("v-err", "error (no verdict)"),
        ("v-dns", "did not start (the target did not start; says nothing about the rule)"),
        (
            "v-blk",
            "blocked by its root cause (a prerequisite did not pass; not a failure of this rule)",
        ),
        ("v-na", "not applicable"),
        ("v-none", "not run"),
    ]
    rates = "".join(
        f'<span class="sw r{i}" title="pass rate about {i * 10}%"></span>{i * 10}%'
        if i % 2 == 0
        else f'<span class="sw r{i}" title="pass rate about {i * 10}%"></span>'
        for i in range(11)
    )
    status = [
        ("c-ok", STATUS_WORDS["certified"]),
        ("c-fail", STATUS_WORDS["not certified"]),
        ("c-dns", STATUS_WORDS[DID_NOT_START_STATUS]),
        ("c-none", "no complete run in the window"),
    ]
    return (
        '<div class="legend"><p><b>Latest verdict:</b>'
        + "".join(f'<span class="sw {c}"></span>{escape(t)}' for c, t in verdicts)
        + "</p><p><b>Pass rate</b> (passed / (passed + failed + error + did not start + blocked)):"
        + rates
        + '<span class="sw r-none"></span>no verdict</p><p><b>Certification:</b>'
        + "".join(f'<span class="sw {c}"></span>{escape(t)}' for c, t in status)
        + "</p><p class=note>Hover over any cell for the numbers behind its colour.</p></div>"
    )


def _certification(table: Matrix) -> str:
    newest = [r for r in table.rows if r["newest"]]
    if not newest:
        return "<p>No record where the harness was the peer in this window.</p>"
    impls = sorted({r["implementation"] for r in newest})
    protocols = sorted({r["protocol"] for r in newest})
    cell = {(r["implementation"], r["protocol"]): r for r in newest}
    others: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in table.rows:
        if not r["newest"]:
            others[(r["implementation"], r["protocol"])].append(
                f"{r['implementation_version']}: {STATUS_WORDS[r['status']]}"
            )
    out = [
        '<table class="grid"><tr><th>implementation</th>'
        + "".join(f"<th>{escape(p)}</th>" for p in protocols)
        + "</tr>"
    ]
    for impl in impls:
        out.append(f"<tr><th>{escape(impl)}</th>")
        for proto in protocols:
            r = cell.get((impl, proto))
            if r is None:
                out.append('<td title="not tested"></td>')
                continue
            title = f"{impl} {r['implementation_version']} on {proto}: {STATUS_WORDS[r['status']]}"
            if r["run_id"]:
                title += (
                    f"\nlatest complete run {r['run_id']} ({r['run_time']})\nMUST passed {r['must_passed']}, "
                    f"failed {r['must_failed']}, error {r['must_error']}, "
                    f"did not start {r['must_did_not_start']}, blocked {r['must_blocked']}, "
                    f"n/a {r['must_not_applicable']}"
                )
                if r["failed_must"]:
                    title += "\nfailed (root causes): " + _list(r["failed_must"])
                if r["blocked_must"]:
                    title += "\nblocked: " + _list(r["blocked_must"])
                    title += "\nblocked by (root causes): " + _list(r["blocked_must_root_causes"])
                if r["did_not_start_must"]:
                    title += "\ndid not start: " + _list(r["did_not_start_must"])
            title += f"\nruns in window: {r['runs']} ({r['complete_runs']} complete)"
            if others.get((impl, proto)):
                title += "\nother versions: " + _list(sorted(others[(impl, proto)]))
            causes = (
                f"<br><small>blocked by {escape(_list(r['blocked_must_root_causes']))}</small>"
                if r["run_id"] and r["blocked_must_root_causes"]
                else ""
            )
            out.append(
                f'<td class="{STATUS_CLASS[r["status"]]}" title="{_a(title)}">'
                f"{escape(r['implementation_version'])}<br><small>{escape(STATUS_WORDS[r['status']])}</small>"
                f"{causes}</td>"
            )
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def _interop(table: Matrix) -> str:
    if not table.rows:
        return "<p>No interop records (records with peer_implementation) in this window.</p>"
    out = []
    by_proto: dict[str, list[dict]] = defaultdict(list)
    for r in table.rows:
        by_proto[r["protocol"]].append(r)
    for proto, rows in sorted(by_proto.items()):
        clients = sorted({r["client_implementation"] for r in rows})
        servers = sorted({r["server_implementation"] for r in rows})
        cell = {(r["client_implementation"], r["server_implementation"]): r for r in rows}
        out.append(
            f"<h3>{escape(proto)}</h3><table class=grid><tr><th>client ↓ / server →</th>"
            + "".join(f"<th>{escape(s)}</th>" for s in servers)
            + "</tr>"
        )
        for c in clients:
            out.append(f"<tr><th>{escape(c)}</th>")
            for s in servers:
                r = cell.get((c, s))
                if r is None:
                    out.append('<td title="no records for this pair"></td>')
                    continue
                title = (
                    f"client {c} × server {s} ({proto})\npass rate {_pct(r['pass_rate'])}: passed {r['passed']}, "
                    f"failed {r['failed']}, error {r['error']}, did not start {r['did_not_start']}, "
                    f"blocked {r['blocked']}, n/a {r['not_applicable']} over {r['runs']} run(s)"
                    f"\nlatest run {r['latest_run_id']}: {_pct(r['latest_pass_rate'])}"
                )
                if r["latest_not_passed"]:
                    title += "\nnot passed in it: " + _list(r["latest_not_passed"])
                out.append(
                    f'<td class="{_rate_class(r["pass_rate"])}" title="{_a(title)}">{_pct(r["pass_rate"])}</td>'
                )
            out.append("</tr>")
        out.append("</table>")
    return "".join(out)


def _requirements(table: Matrix) -> str:
    if not table.rows:
        return "<p>No records in this window.</p>"
    # Columns per protocol: implementation versions, most recently tested first.
    last: dict[tuple[str, str, str], str] = {}
    for r in table.rows:
        k = (r["protocol"], r["implementation"], r["implementation_version"])
        last[k] = max(last.get(k, ""), r["latest_time"] or "")
    columns: dict[str, list[tuple[str, str]]] = defaultdict(list)
    by_impl: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for (proto, impl, version), t in last.items():
        by_impl[(proto, impl)].append((t, version))
    for (proto, impl), versions in sorted(by_impl.items()):
        columns[proto].extend((impl, v) for _, v in sorted(versions, reverse=True))
    cell = {
        (r["protocol"], r["case_id"], r["implementation"], r["implementation_version"]): r
        for r in table.rows
    }
    # The level with its basis's word when it is not the cited sentence's
    # key word: "MUST (inference)" (docs/levels.md).
    levels = {
        (r["protocol"], r["case_id"]): level_with_basis(r["level"], r.get("basis"))
        for r in table.rows
    }
    out = []
    if len(table.rows) < table.count:
        out.append(
            f"<p class=note>Showing the {PAGE_VERSIONS} most recently tested versions of each "
            f"implementation ({len(table.rows):,} of {table.count:,} rows); requirements.csv has them "
            "all.</p>"
        )
    for proto, cols in sorted(columns.items()):
        outside: list[str] = []
        cases = sorted({case for (p, case) in levels if p == proto})
        out.append(
            f'<h3>{escape(proto)}: {len(cases)} requirement(s)</h3><table class="heat"><tr><th></th>'
            + "".join(
                f'<th class=col title="{_a(i + " " + v)}">{escape(i)} {escape(v)}</th>'
                for i, v in cols
            )
            + "</tr>"
        )
        # Root causes: the cases that blocked another of the same version.
        roots = {
            (r["latest_blocked_by"], r["implementation"], r["implementation_version"])
            for r in table.rows
            if r["protocol"] == proto
            and r["latest_outcome"] == "blocked"
            and r.get("latest_blocked_by")
        }
        evidence: list[tuple[tuple, str]] = []
        for case in cases:
            out.append(
                f"<tr><th class=row>{escape(case)} <span class=lvl>{escape(levels[(proto, case)])}</span></th>"
            )
            for impl, version in cols:
                r = cell.get((proto, case, impl, version))
                if r is None:
                    out.append('<td class="cell v-none" title="not run"></td>')
                    continue
                cls = VERDICT_CLASS.get(r["latest_outcome"], "v-none")
                if (
                    r["latest_outcome"] == "passed"
                    and r["pass_rate"] is not None
                    and r["pass_rate"] < 1
                ):
                    cls = "v-passflaky"
                latest = _latest_text(r)
                title = (
                    f"{impl} {version}\n{case} ({levels[(proto, case)]})\nlatest: {latest} "
                    f"({r['latest_time']})\npass rate {_pct(r['pass_rate'])}: passed {r['passed']}, "
                    f"failed {r['failed']}, error {r['error']}, did not start {r['did_not_start']}, "
                    f"blocked {r['blocked']}, n/a {r['not_applicable']} of {r['records']}"
                )
                anchor = f"e-{proto}-{len(evidence)}"
                root = (case, impl, version) in roots
                out.append(
                    f'<td class="cell {cls}{" root" if root else ""}"><a href="#{anchor}" '
                    f'title="{_a(title)}" aria-label="{_a(f"{case}, {impl} {version}: {latest}")}">'
                    "</a></td>"
                )
                order = (not root, r["latest_outcome"] == "passed", case, impl, version or "")
                evidence.append(
                    (order, _evidence_item(anchor, r, levels[(proto, case)], latest, root))
                )
                if r["latest_outcome"] in ("blocked", DID_NOT_START):
                    outside.append(f"{case} ({impl} {version}): {latest}")
            out.append("</tr>")
        out.append("</table>")
        out.append(_outside_the_rule(outside))
        out.append(
            "<p class=note>Every cell links to its latest record below: root causes (outlined in the "
            "grid) first, then the other verdicts that did not pass, then the passes.</p>"
            "<ol class=evidence>" + "".join(item for _, item in sorted(evidence)) + "</ol>"
        )
    return "".join(out)


EVIDENCE_MESSAGE_CHARS = 600
"""Characters of a latest record's message the page shows (results.jsonl has it all)."""


def evidence_links(
    source_uri: str | None, trace_file: str | None, pcap_file: str | None = None
) -> list[tuple[str, str]]:
    """(label, href) of a record's evidence, the files beside its run's
    results.jsonl (``source_uri``): its trace, its capture, the results
    file and the run's Allure report. The matrices' and the version view's
    pages link cells to these."""
    source = source_uri or ""
    run = source.rsplit("/", 1)[0] if "/" in source else ""
    links = []
    if run and trace_file:
        links.append(("trace", f"{run}/{trace_file}"))
    if run and pcap_file:
        links.append(("capture", f"{run}/{pcap_file}"))
    if source:
        links.append(("results.jsonl", source))
        links.append(("Allure report", f"{run}/allure-report/index.html"))
    return links


def _evidence_item(anchor: str, row: dict[str, Any], level: str, latest: str, root: bool) -> str:
    """One cell's latest record: verdict, level and citation, what the node
    did, and links to the trace, the run's results and its Allure report
    (the files beside the run's results.jsonl, ``latest_source_uri``)."""
    links = [
        f'<a href="{_a(href)}">{escape(label)}</a>'
        for label, href in evidence_links(
            row.get("latest_source_uri"), row.get("latest_trace_file")
        )
    ]
    message = row.get("latest_message") or ""
    if len(message) > EVIDENCE_MESSAGE_CHARS:
        message = message[:EVIDENCE_MESSAGE_CHARS] + " ..."
    return (
        f'<li id="{anchor}"><b>{escape(row["case_id"])}</b> {escape(row["implementation"])} '
        f"{escape(row['implementation_version'] or '')}: <b>{escape(latest)}</b>"
        + (" <b>(root cause)</b>" if root else "")
        + f" ({escape(level)}; latest {escape(str(row['latest_time']))})"
        + (f" {' · '.join(links)}" if links else "")
        + (
            f"<br><span class=note>{escape(row['latest_citation'])}</span>"
            if row.get("latest_citation")
            else ""
        )
        + (
            f"<div class=msg>{escape(message)}</div>"
            if message and row["latest_outcome"] != "passed"
            else ""
        )
        + "</li>"
    )


def _latest_text(row: dict[str, Any]) -> str:
    """A requirements row's latest verdict as the page says it: ``blocked
    by <root cause>``, ``did not start``, or the outcome."""
    if row["latest_outcome"] == "blocked":
        return f"blocked by {row.get('latest_blocked_by') or '(root cause not recorded)'}"
    return verdict_text(row["latest_outcome"])


def _outside_the_rule(lines: list[str]) -> str:
    """The cells of a heatmap whose latest verdict says nothing about the
    case's own rule (blocked, with the root cause; did not start), listed
    visibly under it."""
    if not lines:
        return ""
    more = (
        f"<li>... and {len(lines) - MAX_CAUSES} more: requirements.csv has them all "
        "(latest_outcome, latest_blocked_by)</li>"
        if len(lines) > MAX_CAUSES
        else ""
    )
    return (
        "<p class=note>Latest verdict blocked (with its root cause) or did not start:</p>"
        "<ul class=cause>"
        + "".join(f"<li>{escape(line)}</li>" for line in lines[:MAX_CAUSES])
        + more
        + "</ul>"
    )


def _flaky(table: Matrix) -> str:
    if not table.rows:
        return "<p>No flaky case in this window.</p>"
    rows = sorted(
        table.rows,
        key=lambda r: (
            abs(r["fail_rate"] - 0.5),
            -r["records"],
            r["implementation"],
            r["implementation_version"],
            r["case_id"],
            r["peer_implementation"],
        ),
    )
    out = []
    if len(rows) < table.count:
        out.append(
            f"<p class=note>The {len(rows)} flakiest of {table.count:,} (closest to half failing); "
            "flaky.csv has them all.</p>"
        )
    out.append(
        "<table><tr><th>implementation</th><th>version</th><th>protocol</th><th>case</th><th>peer</th>"
        "<th>level</th><th>fail rate</th><th>passed</th><th>failed</th><th>error</th><th>latest</th></tr>"
    )
    for r in rows:
        width = int(round(r["fail_rate"] * 60))
        span = f"{r['records']} records between {r['first_time']} and {r['last_time']}"
        out.append(
            f"<tr><td>{escape(r['implementation'])}</td><td>{escape(r['implementation_version'])}</td>"
            f"<td>{escape(r['protocol'])}</td><td>{escape(r['case_id'])}</td>"
            f"<td>{escape(r['peer_implementation'] or 'harness')}</td><td>{escape(r['level'])}</td>"
            f'<td class=num title="{_a(span)}">'
            f'<span class=bar style="width:{width}px"></span> {_pct(r["fail_rate"])}</td>'
            f"<td class=num>{r['passed']}</td><td class=num>{r['failed']}</td><td class=num>{r['error']}</td>"
            f"<td class='{VERDICT_CLASS.get(r['latest_outcome'], '')}'>"
            f"{escape(verdict_text(r['latest_outcome']))}</td></tr>"
        )
    out.append("</table>")
    return "".join(out)


def _trends(table: Matrix) -> str:
    if not table.rows:
        return "<p>No records in this window.</p>"
    nights = sorted({r["date"] for r in table.rows})
    out = []
    if len(nights) > MAX_NIGHTS:
        out.append(
            f"<p class=note>The last {MAX_NIGHTS} of {len(nights)} nights; trends.csv has them all.</p>"
        )
        nights = nights[-MAX_NIGHTS:]
    index = {d: i for i, d in enumerate(nights)}
    by_impl: dict[str, dict[str, dict]] = defaultdict(dict)
    for r in table.rows:
        if r["date"] in index:
            by_impl[r["implementation"]][r["date"]] = r
    step, height = 5, 28
    width = step * len(nights)
    out.append(
        f"<p class=note>Each bar is one night ({escape(nights[0])} to {escape(nights[-1])}): its height is the "
        "number of passed cases (scaled per implementation), its colour the pass rate.</p><table>"
    )
    for impl, days in sorted(by_impl.items()):
        top = max(d["passed"] for d in days.values()) or 1
        bars = []
        for day, r in sorted(days.items()):
            h = max(1, int(round(height * r["passed"] / top)))
            x = index[day] * step
            title = (
                f"{impl} {day}: passed {r['passed']}, failed {r['failed']}, error {r['error']}, "
                f"did not start {r['did_not_start']}, blocked {r['blocked']}, "
                f"n/a {r['not_applicable']} in {r['runs']} run(s); "
                f"pass rate {_pct(r['pass_rate'])}"
            )
            bars.append(
                f'<rect x="{x}" y="{height - h}" width="{step - 1}" height="{h}" '
                f'class="{_rate_class(r["pass_rate"])}"><title>{escape(title)}</title></rect>'
            )
        out.append(
            f"<tr><th class=row>{escape(impl)}</th><td><svg xmlns='http://www.w3.org/2000/svg' "
            f"width='{width}' height='{height}' role='img' aria-label='{_a(impl)} nightly passes'>"
            + "".join(bars)
            + "</svg></td></tr>"
        )
    out.append("</table>")
    return "".join(out)


SVG_FILL = (
    "".join(
        f"svg rect.r{i}{{fill:{c}}}"
        for i, c in enumerate(
            [
                "#b2182b",
                "#c8372d",
                "#d6604d",
                "#e58e68",
                "#f1b77e",
                "#f7d98b",
                "#e6e68a",
                "#c2df86",
                "#91cf7f",
                "#5cb566",
                "#1a9850",
            ]
        )
    )
    + "svg rect.r-none{fill:#ccc}"
)


def _by_network(table: Matrix, *columns: str) -> Matrix:
    """The table with an impaired network named beside each implementation
    (``ssb-server [fragment]``), so that the page shows a node under each
    impairment as a row (or column) of its own beside its clean run."""
    rows = []
    for row in table.rows:
        network = row.get("network") or CLEAN
        rows.append(
            row if network == CLEAN else {**row, **{c: f"{row[c]} [{network}]" for c in columns}}
        )
    return Matrix(
        table.name, table.title, table.description, table.columns, table.key, rows, table.count
    )


def render(tables: dict[str, Matrix], window: Window, meta: dict[str, Any]) -> str:
    """The whole page as a string."""
    tables = {
        **tables,
        **{
            name: _by_network(tables[name], *columns)
            for name, columns in (
                ("certification", ("implementation",)),
                ("requirements", ("implementation",)),
                ("interop", ("client_implementation", "server_implementation")),
                ("flaky", ("implementation",)),
                ("trends", ("implementation",)),
            )
            if name in tables
        },
    }
    d = window.describe()
    window_text = (
        ", ".join(
            filter(
                None,
                [
                    f"since {d['since']}" if d["since"] else "",
                    f"until {d['until']}" if d["until"] else "",
                    f"last {d['last_runs_per_implementation']} run(s) per implementation"
                    if d["last_runs_per_implementation"]
                    else "",
                ],
            )
        )
        or "all ingested runs"
    )
    generated = meta.get("generated") or datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    sections = [
        (
            "certification",
            "Certification: implementation × protocol",
            _certification(tables["certification"]),
            "The newest version of each implementation; hover for the failed MUST cases and the other versions.",
        ),
        (
            "interop",
            "Interoperability: client × server",
            _interop(tables["interop"]),
            "Pass rate of the interop cases for each pair of implementations, by the role each played.",
        ),
        (
            "requirements",
            "Requirements: implementation version × case",
            _requirements(tables["requirements"]),
            "Colour: the latest verdict; hover for the pass rate over the window.",
        ),
        (
            "flaky",
            "Flaky cases",
            _flaky(tables["flaky"]),
            "Cases with both outcomes for the same implementation, version and peer.",
        ),
        ("trends", "Trends: passes per night", _trends(tables["trends"]), ""),
    ]
    counts = " · ".join(f"{escape(n)}: {t.count:,} rows" for n, t in tables.items())
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width, initial-scale=1'>"
        f"<title>Conformance matrices</title><style>{STYLE}{SVG_FILL}</style></head><body>",
        "<h1>Conformance and interoperability matrices</h1>",
        f"<p class=meta>Window: {escape(window_text)} · {meta.get('records', 0):,} records · dataset version "
        f"{escape(str(meta.get('dataset_version', '?')))} · generated {escape(generated)}</p>",
        f"<p class=meta>{counts}</p>",
        "<nav>"
        + "".join(f'<a href="#{n}">{escape(t.split(":")[0])}</a>' for n, t, _, _ in sections)
        + "</nav>",
        _legend(),
    ]
    for name, title, body, note in sections:
        parts.append(f'<h2 id="{name}">{escape(title)}</h2>')
        if note:
            parts.append(f"<p class=note>{escape(note)} Data: {name}.csv, {name}.json.</p>")
        parts.append(body)
    parts.append("</body></html>\n")
    return "".join(parts)

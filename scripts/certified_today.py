#!/usr/bin/env python3
"""The README's "Certified today" table, generated from a certify run.

    scripts/certified_today.py RUN_DIR [RUN_DIR ...]          # print the table
    scripts/certified_today.py RUN_DIR ... --write            # update README.md and docs/certified-today.json
                                                              # (the runs' targets; the others keep theirs)

Reads each run's results.jsonl (the records, not anyone's notes), keeps for
every target its newest complete certification (every case of its suite for
each role it plays; interop records and partial runs are passed over), and
writes:

- ``docs/certified-today.json``: per target, the implementation, version,
  roles, verdict, the failed MUST and SHOULD case ids and outcome counts,
  with the run id and date it came from; and per implementation the
  releases certified, oldest first (``releases``; ``--from-data`` refreshes
  it from the targets);
- the section of README.md between ``<!-- certified-today:start -->`` and
  ``<!-- certified-today:end -->``, rendered from that file only;
- in every findings file (docs/findings/) that has one, the section between
  ``<!-- certification:start -->`` and ``<!-- certification:end -->``: its
  targets' verdicts, outcomes per level and the cases that did not pass,
  from that file only.

tests/harness/test_certified_today.py checks that the README section is the
rendering of the JSON file, so the table can only change by running this.
Run it after a nightly-style certification of the targets:

    conformance certify --jobs 2 --run-dir reports/runs/today \\
        --target reference-ssb ... --target ocaml-ripp
    scripts/certified_today.py reports/runs/today --write
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from conformance.aggregate.release_order import ordered  # noqa: E402
from conformance.core.results import read_results  # noqa: E402
from conformance.core.run_folder import RunFolder  # noqa: E402
from conformance.interop.crosscheck import suite_cases_by_role  # noqa: E402

DATA = REPO / "docs" / "certified-today.json"
README = REPO / "README.md"
START, END = "<!-- certified-today:start -->", "<!-- certified-today:end -->"
FINDINGS = REPO / "docs" / "findings"


def _known_targets() -> dict:
    from conformance.core.targets import TargetError, load_targets

    try:
        return load_targets([str(REPO / "conformance" / "targets" / "containers.toml")])
    except TargetError:
        return {}


TARGETS = _known_targets()


def collect(run_dirs: list[Path]) -> dict:
    """Each target's newest complete certification among the runs."""
    runs = sorted(run_dirs, key=lambda run: RunFolder(run).results.stat().st_mtime, reverse=True)
    targets: dict[str, dict] = {}
    suites: dict[str, dict[str, set[str]]] = {}
    for run in runs:
        by_target: dict[str, dict[str, dict]] = {}
        for record in read_results(RunFolder(run).results):
            if record.get("peer_implementation") is None:
                by_target.setdefault(record["target"], {})[record["case_id"]] = record
        for name, records in by_target.items():
            if name in targets:
                continue
            first = next(iter(records.values()))
            protocol = first["protocol"]
            suite = suites.setdefault(protocol, suite_cases_by_role(protocol))
            # The roles the target plays (its definition), else those its records name.
            known = TARGETS.get(name)
            roles = (
                sorted(known.roles)
                if known is not None
                else sorted({rec["role"] for rec in records.values()})
            )
            needed = set().union(*(suite.get(role, set()) for role in roles))
            if not needed <= set(records):
                continue  # a partial run is no certification
            failed = {
                level: sorted(
                    case
                    for case, rec in records.items()
                    if rec["outcome"] in ("failed", "error") and rec["level"] == level
                )
                for level in ("MUST", "SHOULD")
            }
            # What binds each failed case's level, when it is not the cited
            # sentence's own RFC 2119 key word (docs/levels.md).
            bases = {
                case: records[case]["basis"]
                for case in failed["MUST"] + failed["SHOULD"]
                if (records[case].get("basis") or "keyword") != "keyword"
            }
            counts: dict[str, int] = {}
            levels: dict[str, dict[str, int]] = {}
            for rec in records.values():
                counts[rec["outcome"]] = counts.get(rec["outcome"], 0) + 1
                by_outcome = levels.setdefault(rec["level"], {})
                by_outcome[rec["outcome"]] = by_outcome.get(rec["outcome"], 0) + 1
            not_passed = {
                case: {
                    "level": rec["level"],
                    "outcome": rec["outcome"],
                    "basis": rec.get("basis") or "keyword",
                }
                for case, rec in sorted(records.items())
                if rec["outcome"] in ("failed", "error", "blocked")
            }
            started = [rec for rec in records.values() if rec.get("start_failure")]
            verdict = (
                "NOT CERTIFIED: the target did not start"
                if started and not failed["MUST"]
                else "NOT CONFORMANT"
                if failed["MUST"] or counts.get("error")
                else "CONFORMANT"
            )
            targets[name] = {
                "implementation": first["implementation"],
                "version": first["implementation_version"],
                "protocol": protocol,
                "roles": roles,
                "verdict": verdict,
                "cases": len(records),
                "counts": dict(sorted(counts.items())),
                "levels": {
                    level: dict(sorted(levels[level].items()))
                    for level in ("MUST", "SHOULD", "MAY")
                    if level in levels
                },
                "not_passed": not_passed,
                "must_failed": failed["MUST"],
                "should_failed": failed["SHOULD"],
                "bases": bases,
                "run_id": first["run_id"],
                "date": first["time"][:10],
            }
    return {"targets": dict(sorted(targets.items(), key=lambda kv: (kv[1]["protocol"], kv[0])))}


def findings_file(implementation: str, version: str) -> str | None:
    major = version.split(".")[0]
    for candidate in sorted(FINDINGS.glob("*.md")):
        stem = candidate.stem
        if stem.startswith(implementation) and (
            f"-{major}" in stem[len(implementation) :] or stem == implementation
        ):
            return f"docs/findings/{candidate.name}"
    return None


def _shown_case(case: str, bases: dict[str, str]) -> str:
    """The case id, with the basis's word when the level is not the cited
    sentence's key word."""
    word = bases[case].split(":", 1)[0] if case in bases else ""
    return f"`{case}`" + (f" ({word})" if word else "")


def release_ranges(data: dict) -> dict[str, dict]:
    """Per implementation, the releases its targets certified, oldest first
    in the registry's order (conformance/aggregate/release_order.py: PEP
    440 for PyPI packages, semver for npm ones), and those CONFORMANT (a
    release is CONFORMANT when every target of it is)."""
    found: dict[str, dict[str, bool]] = {}
    for t in data["targets"].values():
        versions = found.setdefault(t["implementation"], {})
        conformant = t["verdict"] == "CONFORMANT"
        versions[t["version"]] = versions.get(t["version"], True) and conformant
    out = {}
    for impl, versions in sorted(found.items()):
        releases = [r.version for r in ordered(impl, versions)]
        out[impl] = {
            "releases": releases,
            "conformant": [v for v in releases if versions[v]],
        }
    return out


def range_text(entry: dict) -> str:
    """``16.0.1 (one release)``, or ``13.5.2 to 16.0.1 (15 releases, 3 CONFORMANT: ...)``."""
    releases, conformant = entry["releases"], entry["conformant"]
    if len(releases) == 1:
        return f"{releases[0]} (one release)"
    shown = ", ".join(conformant[:5]) + (", ..." if len(conformant) > 5 else "")
    return (
        f"{releases[0]} to {releases[-1]} ({len(releases)} releases, {len(conformant)} CONFORMANT"
        + (f": {shown}" if conformant else "")
        + ")"
    )


def render(data: dict) -> str:
    ranges = release_ranges(data)
    rows = [
        "| protocol | target | implementation | releases certified | roles | verdict | MUST failed | SHOULD failed | cases (passed / failed / blocked / n/a) | findings |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, t in data["targets"].items():
        counts = t["counts"]
        shown = " / ".join(
            str(counts.get(k, 0)) for k in ("passed", "failed", "blocked", "not_applicable")
        )
        if counts.get("error"):
            shown += f" (+{counts['error']} error)"
        bases = t.get("bases", {})
        failed_must = "<br>".join(_shown_case(c, bases) for c in t["must_failed"]) or "none"
        failed_should = "<br>".join(_shown_case(c, bases) for c in t["should_failed"]) or "none"
        found = (
            findings_file(t["implementation"], t["version"])
            if not name.startswith("reference-")
            else None
        )
        rows.append(
            f"| {t['protocol']} | `{name}` | {t['implementation']} {t['version']} | "
            f"{range_text(ranges[t['implementation']])} | {'/'.join(t['roles'])} | "
            f"{t['verdict']} | {failed_must} | {failed_should} | {shown} | "
            f"{f'[{Path(found).name}]({found})' if found else '-'} |"
        )
    runs = sorted({(t["date"], t["run_id"]) for t in data["targets"].values()})
    source = ", ".join(f"`{run_id}` ({date})" for date, run_id in runs)
    return (
        "Generated by `scripts/certified_today.py` from the certify run(s) "
        + source
        + " (`docs/certified-today.json`); never edited by hand. A word beside a failed case "
        + "names what binds its level when it is not the cited sentence's RFC 2119 key word "
        + "(plain-words, wire-format, profile, erratum, inference: docs/levels.md). "
        + "Releases certified: per implementation, the releases of it these runs certified, "
        + "oldest to newest in its registry's order (docs/versions-view.md).\n\n"
        + "\n".join(rows)
        + "\n"
    )


def replace_section(text: str, table: str, start: str = START, end: str = END) -> str:
    if start not in text or end not in text:
        raise SystemExit(f"no {start} ... {end} section")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{table}{end}{tail}"


FINDINGS_START, FINDINGS_END = "<!-- certification:start -->", "<!-- certification:end -->"
OUTCOME_ORDER = ("passed", "failed", "error", "blocked", "not_applicable")


def findings_targets(data: dict) -> dict[str, list[str]]:
    """Findings file -> the targets whose certification it reports."""
    files: dict[str, list[str]] = {}
    for name, t in data["targets"].items():
        if name.startswith("reference-"):
            continue
        found = findings_file(t["implementation"], t["version"])
        if found:
            files.setdefault(found, []).append(name)
    return files


def render_findings_block(data: dict, names: list[str]) -> str:
    """A findings file's certification section: per target, the verdict and
    the outcomes per level, then every case that did not pass with its
    level (and the basis's word) and outcome; from the data file only."""
    lines = [
        "Generated by `scripts/certified_today.py --write` from the last certification "
        "(`docs/certified-today.json`); never edited by hand.",
        "",
        "| target | run | verdict | MUST | SHOULD | MAY |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        t = data["targets"][name]
        cells = []
        for level in ("MUST", "SHOULD", "MAY"):
            counts = t.get("levels", {}).get(level, {})
            cells.append(
                ", ".join(
                    f"{counts[o]} {o.replace('_', ' ')}" for o in OUTCOME_ORDER if counts.get(o)
                )
                or "-"
            )
        lines.append(
            f"| `{name}` | `{t['run_id']}` ({t['date']}, {t['cases']} cases) | {t['verdict']} | "
            + " | ".join(cells)
            + " |"
        )
    rows = [
        (name, case, rec)
        for name in names
        for case, rec in data["targets"][name].get("not_passed", {}).items()
    ]
    if rows:
        lines += ["", "| target | case | level | outcome |", "|---|---|---|---|"]
        for name, case, rec in rows:
            word = rec["basis"].split(":", 1)[0]
            shown = rec["level"] + (f" ({word})" if word != "keyword" else "")
            lines.append(f"| `{name}` | `{case}` | {shown} | {rec['outcome']} |")
    return "\n".join(lines) + "\n"


def write_findings(data: dict) -> list[str]:
    """Rewrites the certification section of every findings file that has
    one; returns the files written."""
    written = []
    for found, names in sorted(findings_targets(data).items()):
        path = REPO / found
        text = path.read_text(encoding="utf-8")
        if FINDINGS_START not in text:
            continue
        new = replace_section(
            text, render_findings_block(data, names), FINDINGS_START, FINDINGS_END
        )
        if new != text:
            path.write_text(new, encoding="utf-8")
            written.append(found)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "runs", nargs="*", type=Path, help="certify run dirs (each with results.jsonl)"
    )
    parser.add_argument(
        "--write", action="store_true", help="update docs/certified-today.json and README.md"
    )
    parser.add_argument(
        "--from-data",
        action="store_true",
        help="render README.md's section from docs/certified-today.json as it is (and refresh its "
        "releases, derived from its targets)",
    )
    args = parser.parse_args(argv)
    if args.from_data:
        data = json.loads(DATA.read_text(encoding="utf-8"))
    else:
        missing = [run for run in args.runs if not RunFolder(run).is_run()]
        if not args.runs or missing:
            parser.error(
                f"give certify run dirs holding results.jsonl (missing: {missing or 'none given'})"
            )
        data = collect(args.runs)
        if not data["targets"]:
            parser.error("no complete certification in those runs")
        if args.write and DATA.is_file():
            # The runs replace the certifications of the targets they hold;
            # every other target keeps its last one (a run of one target
            # updates that target's row, not the whole table).
            kept = json.loads(DATA.read_text(encoding="utf-8"))["targets"]
            merged = {**kept, **data["targets"]}
            data = {
                "targets": dict(sorted(merged.items(), key=lambda kv: (kv[1]["protocol"], kv[0])))
            }
    table = render(data)
    if args.write or args.from_data:
        # The range of releases per implementation, beside the targets it
        # derives from (for readers of the JSON; the table computes it).
        data = {"targets": data["targets"], "releases": release_ranges(data)}
        DATA.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        README.write_text(
            replace_section(README.read_text(encoding="utf-8"), table), encoding="utf-8"
        )
        findings = write_findings(data)
        print(
            f"wrote {DATA.name}, README.md's table ({len(data['targets'])} targets)"
            + (f" and the certification section of {', '.join(findings)}" if findings else "")
        )
    else:
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())

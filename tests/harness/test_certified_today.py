"""README's "Certified today" table is generated (scripts/certified_today.py)
from certify runs' records, never typed: the README section is the rendering
of docs/certified-today.json, and the generator keeps each target's newest
complete certification."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

from conformance.core.results import ResultRecord, ResultWriter
from conformance.runner import suite_case_ids

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "certified_today", REPO / "scripts" / "certified_today.py"
)
certified_today = importlib.util.module_from_spec(spec)
spec.loader.exec_module(certified_today)


def test_readme_table_is_the_rendering_of_the_data_file():
    data = json.loads(certified_today.DATA.read_text(encoding="utf-8"))
    assert data["targets"], "docs/certified-today.json holds no target"
    readme = certified_today.README.read_text(encoding="utf-8")
    section = readme.split(certified_today.START, 1)[1].split(certified_today.END, 1)[0]
    assert section == "\n" + certified_today.render(data), (
        "run scripts/certified_today.py --from-data"
    )


def write_run(
    run_dir: Path, target: str, cases: list[str], failed: tuple[str, ...], mtime: float
) -> None:
    run_dir.mkdir(parents=True)
    writer = ResultWriter(run_dir)
    for case in cases:
        writer.append(
            ResultRecord(
                run_id=run_dir.name,
                time="2026-11-26T00:00:00Z",
                harness_version="t",
                target=target,
                implementation="impl",
                implementation_version="1.2",
                protocol="ripp",
                role=case.split(".")[2],
                case_id=case,
                level="MUST",
                citation="c",
                outcome="failed" if case in failed else "passed",
                duration_s=0.1,
            )
        )
    os.utime(run_dir / "results.jsonl", (mtime, mtime))


def test_newest_complete_certification_counts(tmp_path):
    clients = [case for case in suite_case_ids("ripp") if ".client." in case]
    write_run(tmp_path / "old", "producer", clients, (), 1_000)
    write_run(tmp_path / "new", "producer", clients, (clients[1],), 2_000)
    write_run(tmp_path / "partial", "producer", clients[:1], (), 3_000)
    data = certified_today.collect([tmp_path / "old", tmp_path / "new", tmp_path / "partial"])
    entry = data["targets"]["producer"]
    assert entry["run_id"] == "new" and entry["verdict"] == "NOT CONFORMANT"
    assert entry["must_failed"] == [clients[1]] and entry["roles"] == ["client"]
    table = certified_today.render(data)
    assert f"`{clients[1]}`" in table and "`new` (2026-11-26)" in table


def test_a_failed_case_shows_the_basis_of_its_level():
    data = {
        "targets": {
            "node": {
                "implementation": "node",
                "version": "1",
                "protocol": "btp",
                "roles": ["server"],
                "verdict": "NOT CONFORMANT",
                "cases": 3,
                "counts": {"failed": 2, "passed": 1},
                "must_failed": ["btp.flow.server.silent-on-garbage", "btp.auth.server.x"],
                "should_failed": [],
                "bases": {"btp.flow.server.silent-on-garbage": "plain-words"},
                "run_id": "r",
                "date": "2026-12-07",
            }
        }
    }
    row = certified_today.render(data).splitlines()[-1]
    assert "`btp.flow.server.silent-on-garbage` (plain-words)<br>`btp.auth.server.x` |" in row


def test_writing_one_targets_run_keeps_the_other_targets(tmp_path, monkeypatch):
    """--write with a run of one target replaces that target's row only:
    re-certifying one node after a fix does not drop the others."""
    data_file, readme = tmp_path / "certified-today.json", tmp_path / "README.md"
    kept = json.loads(certified_today.DATA.read_text(encoding="utf-8"))
    data_file.write_text(json.dumps(kept))
    readme.write_text(f"head\n{certified_today.START}\nold\n{certified_today.END}\ntail\n")
    monkeypatch.setattr(certified_today, "DATA", data_file)
    monkeypatch.setattr(certified_today, "README", readme)
    monkeypatch.setattr(certified_today, "write_findings", lambda data: [])
    clients = [case for case in suite_case_ids("ripp") if ".client." in case]
    write_run(tmp_path / "run", "producer", clients, (clients[0],), 1_000)
    assert certified_today.main([str(tmp_path / "run"), "--write"]) == 0
    written = json.loads(data_file.read_text())["targets"]
    assert set(written) == set(kept["targets"]) | {"producer"}
    assert written["producer"]["must_failed"] == [clients[0]]
    assert all(written[name] == entry for name, entry in kept["targets"].items())
    assert "`producer`" in readme.read_text() and readme.read_text().startswith("head\n")


def _target(implementation: str, version: str, verdict: str) -> dict:
    return {
        "implementation": implementation,
        "version": version,
        "protocol": "stomp",
        "roles": ["client"],
        "verdict": verdict,
        "cases": 1,
        "counts": {"passed": 1},
        "must_failed": [],
        "should_failed": [],
        "run_id": "r1",
        "date": "2026-12-07",
    }


def test_release_range_per_implementation():
    """One release is shown as such; several as their range in the
    registry's order (PEP 440 for stomp.py, semver for stompit), with the
    CONFORMANT ones named."""
    data = {
        "targets": {
            "stomp-py@4.1.9": _target("stomp.py", "4.1.9", "NOT CONFORMANT"),
            "stomp-py@4.1.10": _target("stomp.py", "4.1.10", "CONFORMANT"),
            "stomp-py@4.1.10rc1": _target("stomp.py", "4.1.10rc1", "CONFORMANT"),
            "stomp-py@9.0.0": _target("stomp.py", "9.0.0", "NOT CONFORMANT"),
            "stompit": _target("stompit", "1.0.0-beta.2", "CONFORMANT"),
        }
    }
    ranges = certified_today.release_ranges(data)
    assert ranges["stomp.py"] == {
        "releases": ["4.1.9", "4.1.10rc1", "4.1.10", "9.0.0"],
        "conformant": ["4.1.10rc1", "4.1.10"],
    }
    assert certified_today.range_text(ranges["stomp.py"]) == (
        "4.1.9 to 9.0.0 (4 releases, 2 CONFORMANT: 4.1.10rc1, 4.1.10)"
    )
    assert certified_today.range_text(ranges["stompit"]) == "1.0.0-beta.2 (one release)"
    table = certified_today.render(data)
    assert "| stomp.py 4.1.10 | 4.1.9 to 9.0.0 (4 releases, 2 CONFORMANT" in table
    assert "| stompit 1.0.0-beta.2 | 1.0.0-beta.2 (one release) |" in table


def test_the_data_file_keeps_the_ranges_of_its_targets():
    data = json.loads(certified_today.DATA.read_text(encoding="utf-8"))
    assert data["releases"] == certified_today.release_ranges(data), (
        "run scripts/certified_today.py --from-data"
    )
    # Today every implementation has one release certified.
    assert all(len(r["releases"]) == 1 for r in data["releases"].values())
    assert "| ssb-server 16.0.1 | 16.0.1 (one release) |" in certified_today.render(data)

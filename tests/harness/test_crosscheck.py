"""Interop as a cross-check of the suites (conformance/interop/crosscheck.py):
a failing pair of two CONFORMANT targets is a coverage gap, with both
certifications and the failing exchange; a partial certification, or a pair
where one target is not conformant, is no gap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from conformance.core.results import ResultRecord, ResultWriter
from conformance.core.run_folder import RunFolder
from conformance.interop.crosscheck import coverage_gaps, latest_certifications, render
from conformance.runner import suite_case_ids

REPO = Path(__file__).resolve().parents[2]
RIPP = "ripp"


def write_run(
    run_dir: Path,
    target: str,
    cases: list[str],
    failed: tuple[str, ...] = (),
    peer: str | None = None,
    mtime: float | None = None,
) -> Path:
    run_dir.mkdir(parents=True)
    writer = ResultWriter(run_dir)
    for case in cases:
        writer.append(
            ResultRecord(
                run_id=run_dir.name,
                time="2026-11-26T00:00:00Z",
                harness_version="test",
                target=target,
                implementation=target,
                implementation_version="1",
                protocol=RIPP,
                role=case.split(".")[2],
                case_id=case,
                level="MUST",
                citation="c",
                outcome="failed" if case in failed else "passed",
                duration_s=0.1,
                message=f"{case} [MUST, c]: what came" if case in failed else "",
                peer_implementation=peer,
                trace_file=f"traces/{case}.txt",
            )
        )
    if mtime is not None:
        os.utime(run_dir / "results.jsonl", (mtime, mtime))
    return run_dir


def role_cases(role: str) -> list[str]:
    return [case for case in suite_case_ids(RIPP) if case.split(".")[2] == role]


def test_a_certification_needs_every_case_of_the_roles_and_the_newest_counts(tmp_path):
    clients = role_cases("client")
    write_run(tmp_path / "old", "producer", clients, mtime=1_000)
    write_run(tmp_path / "new", "producer", clients, failed=(clients[0],), mtime=2_000)
    write_run(tmp_path / "newest-partial", "producer", clients[:2], mtime=3_000)
    write_run(
        tmp_path / "interop",
        "producer",
        clients,
        failed=tuple(clients),
        peer="consumer",
        mtime=4_000,
    )
    found = latest_certifications([tmp_path], {"producer": (RIPP, ("client",))})
    cert = found["producer"]
    assert cert.run_dir == str(tmp_path / "new")  # the partial and the interop run certify nothing
    assert not cert.conformant and cert.must_failed == [clients[0]]
    assert latest_certifications([tmp_path], {"absent": (RIPP, ("client",))}) == {}


def test_a_run_its_summary_marks_partial_certifies_nothing(tmp_path):
    # '--case ripp.*.client.*' on a client-only target runs every case of its
    # role, yet leaves the suite's server cases out: partial (issue 24, item 8).
    clients = role_cases("client")
    write_run(tmp_path / "full", "producer", clients, mtime=1_000)
    selected = write_run(tmp_path / "selected", "producer", clients, mtime=2_000)
    (selected / "summary.json").write_text(
        json.dumps(
            {
                "partial": True,
                "selection": {"case": ["ripp.*.client.*"]},
                "targets": [{"target": "producer", "protocol": RIPP, "partial": True}],
            }
        )
    )
    found = latest_certifications([tmp_path], {"producer": (RIPP, ("client",))})
    assert found["producer"].run_dir == str(tmp_path / "full")
    # Another target of the same run, not partial, still counts.
    both = write_run(tmp_path / "both", "consumer", role_cases("server"), mtime=3_000)
    (both / "summary.json").write_text(
        json.dumps(
            {
                "partial": True,
                "targets": [
                    {"target": "producer", "partial": True},
                    {"target": "consumer", "partial": False},
                ],
            }
        )
    )
    assert latest_certifications([tmp_path], {"consumer": (RIPP, ("server",))})[
        "consumer"
    ].run_dir == str(both)


def test_a_gap_is_a_failing_pair_of_two_conformant_targets(tmp_path):
    write_run(tmp_path / "c", "producer", role_cases("client"))
    write_run(tmp_path / "s", "consumer", role_cases("server"))
    certs = latest_certifications(
        [tmp_path], {"producer": (RIPP, ("client",)), "consumer": (RIPP, ("server",))}
    )
    assert certs["producer"].conformant and certs["consumer"].conformant
    failing = write_run(
        tmp_path / "i",
        "producer",
        ["ripp.interop.client.applies-each-delta-once"],
        failed=("ripp.interop.client.applies-each-delta-once",),
        peer="consumer-impl",
    )
    records = [json.loads(line) for line in (failing / "results.jsonl").read_text().splitlines()]
    pair = SimpleNamespace(
        client="producer", server="consumer", protocol=RIPP, verdict="NOT interoperable"
    )
    gaps = coverage_gaps([pair], records, certs, {"consumer": "consumer-impl"})
    assert [(g.client, g.server) for g in gaps] == [("producer", "consumer")]
    assert gaps[0].failing[0]["case_id"] == "ripp.interop.client.applies-each-delta-once"
    shown = render(gaps)
    assert "CONFORMANT in" in shown and "what came" in shown and "traces/" in shown
    assert "[MUST, c]" not in shown  # the record's prefix is dropped: what happened leads
    interoperable = SimpleNamespace(**{**vars(pair), "verdict": "interoperable"})
    assert coverage_gaps([interoperable], records, certs, {"consumer": "consumer-impl"}) == []
    certs["consumer"].conformant = False
    assert coverage_gaps([pair], records, certs, {"consumer": "consumer-impl"}) == []


def conformance(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "conformance.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_interop_writes_the_cross_check_with_real_certifications(tmp_path):
    """End to end: certify the reference RIPP node (both roles), then run
    it against itself and the producer that breaks deltas-match-handshake
    (the gap the cross-check first found): the reference pair interoperates,
    the mutant is not interoperable but NOT CONFORMANT, so no gap."""
    runs = tmp_path / "runs"
    certify = conformance(
        "certify", "--target", "reference-ripp", "--run-dir", str(runs / "certify"), cwd=REPO
    )
    assert certify.returncode == 0, certify.stdout[-2000:] + certify.stderr[-2000:]
    mutant_file = tmp_path / "mutant.toml"
    mutant = conformance(
        "mutation",
        "--protocol",
        RIPP,
        "--fault",
        "delta-undeclared-field",
        "--run-dir",
        str(runs / "mutation"),
        cwd=REPO,
    )
    assert mutant.returncode == 0, mutant.stdout[-2000:] + mutant.stderr[-2000:]
    mutant_file.write_text((runs / "mutation" / "mutants.toml").read_text())
    interop = conformance(
        "interop",
        "--client",
        "reference-ripp",
        "--client",
        "mutant-ripp-delta-undeclared-field",
        "--server",
        "reference-ripp",
        "--targets-file",
        str(mutant_file),
        "--certified-in",
        str(runs / "certify"),
        "--certified-in",
        str(runs / "mutation"),
        "--run-dir",
        str(tmp_path / "interop"),
        cwd=REPO,
    )
    assert interop.returncode == 1, (
        interop.stdout[-2000:] + interop.stderr[-2000:]
    )  # the mutant's pair fails
    gaps = json.loads(RunFolder(tmp_path / "interop").coverage_gaps.read_text())
    assert gaps["gaps"] == [] and str(runs / "certify") in gaps["searched"]
    assert "coverage gaps" not in interop.stdout

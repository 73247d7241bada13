"""Selecting cases by the ids the output prints: ``--case PATTERN``
(issue 24, item 7), and what a subset run says and records (item 8): the
verdict holds for the selected cases, summary.json says ``partial``, and a
selection that matches nothing is a usage error naming where the ids are
listed. Against the reference Ripple host and RIPP nodes (about 1 s a run)."""

from __future__ import annotations

import json

from .cli_runner import certify, run_cli

CHUNK = "ripplehost.chunk.server.*"
PREREQUISITES = [
    "ripplehost.hostid.server.replies-with-host-id",
    "ripplehost.msgno.server.reply-carries-msgno",
]
SELECTED = [
    "ripplehost.chunk.server.reassembles-chunked",
    "ripplehost.chunk.server.reassembles-interleaved",
    "ripplehost.chunk.server.counts-crlf-before-end",
]


def _suite_size(protocol: str) -> int:
    listed = run_cli("cases", "--protocol", protocol, "--json", timeout=60)
    assert listed.returncode == 0, listed.stderr
    return len(json.loads(listed.stdout))


def test_case_glob_runs_the_selected_cases_and_their_prerequisites_and_says_partial(tmp_path):
    run = certify(tmp_path, "--target", "reference-ripplehost", "--case", CHUNK, timeout=120)
    assert run.code == 0, run.output
    records = run.records
    assert [r["case_id"] for r in records] == PREREQUISITES + SELECTED, run.output
    # Prerequisites of the selection run too, marked as such.
    assert [r["case_id"] for r in records if r["prerequisite_only"]] == PREREQUISITES
    for case in PREREQUISITES:
        assert f"{case} (" in run.output and "(prerequisite of the selection)" in run.output
    total = _suite_size("ripplehost")
    assert total >= 30
    verdict = (
        f"reference-ripplehost [reference-ripplehost 0.1.0, ripplehost]: CONFORMANT on the 3 selected "
        f"case(s) (and 2 prerequisite(s)) of {total} (partial run)"
    )
    assert verdict in run.output.splitlines(), run.output
    assert "counts as no certification" in run.output
    summary = run.summary
    assert summary["partial"] is True and summary["selection"] == {"case": [CHUNK]}
    assert summary["verdict"] == "CONFORMANT"
    group = summary["targets"][0]
    assert (
        group["partial"],
        group["suite_cases"],
        group["selected_cases"],
        group["prerequisite_cases"],
    ) == (True, total, 3, 2)


def test_a_whole_run_is_not_partial(tmp_path):
    # 'ripp.*' selects every RIPP case (and no Ripple host one: a glob matches whole ids).
    run = certify(tmp_path, "--case", "ripp.*", timeout=120)
    assert run.code == 0, run.output
    assert (
        "certifying reference-ripp (ripp)" in run.output
        and "reference-ripplehost" not in run.output
    )
    assert run.summary["partial"] is False and run.summary["targets"][0]["partial"] is False
    assert "reference-ripp [reference-ripp 0.1.0, ripp]: CONFORMANT\n" in run.output
    # A keyword selection is partial too.
    keyword = certify(
        tmp_path / "k",
        "--target",
        "reference-ripplehost",
        "-k",
        "test_reassembles_chunked",
        timeout=120,
    )
    assert keyword.code == 0, keyword.output
    assert keyword.summary["partial"] is True and keyword.summary["selection"] == {
        "keyword": "test_reassembles_chunked"
    }
    assert "(partial run)" in keyword.output


def test_a_selection_matching_no_case_is_a_usage_error(tmp_path):
    # A word of an id is not an id: no case, exit 2, and where to look.
    run = certify(tmp_path, "--case", "sends-valid-hello", timeout=60)
    assert run.code == 2, run.output
    assert "conformance: error: --case sends-valid-hello matches no case" in run.output
    assert "did you mean ssb.shs.client.sends-valid-hello?" in run.output
    assert "`conformance cases`" in run.output
    assert not (run.run_dir / "results.jsonl").exists()
    # A named target whose suite has no selected case.
    other = certify(tmp_path / "o", "--target", "reference-ripp", "--case", CHUNK, timeout=60)
    assert other.code == 2 and "conformance cases --protocol ripp" in other.output, other.output
    # -k takes function names: a case id's words select nothing, and the error says how to select by id.
    keyword = certify(
        tmp_path / "k",
        "--target",
        "reference-ripplehost",
        "-k",
        "counts-crlf-before-end",
        timeout=120,
    )
    assert keyword.code == 2, keyword.output
    assert (
        "conformance: error: -k 'counts-crlf-before-end' selected no case of reference-ripplehost's suite "
        "(ripplehost): -k matches pytest function names"
    ) in keyword.output
    assert "--case 'ripplehost.chunk.server.counts-crlf-before-end'" in keyword.output
    assert "NOT CONFORMANT" not in keyword.output


def test_cases_lists_the_ids_to_select(tmp_path):
    listed = run_cli("cases", "--protocol", "ripplehost", "--case", CHUNK, timeout=60)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].startswith(
        "ripplehost: 3 certify case(s) selected by ripplehost.chunk.server.*"
    )
    assert [line.split()[2] for line in lines[1:4]] == SELECTED
    assert "after ripplehost.hostid.server.replies-with-host-id" in lines[1]
    as_json = json.loads(run_cli("cases", "--protocol", "ripplehost", "--json", timeout=60).stdout)
    assert {"case_id", "level", "role", "citation", "depends"} <= set(as_json[0])
    interop = run_cli("cases", "--interop", "--protocol", "ripplehost", timeout=60)
    assert "ripplehost.interop.client.ping-echo-round-trip" in interop.stdout
    bad = run_cli("cases", "--protocol", "ripplehost", "--case", "nope", timeout=60)
    assert bad.returncode == 2 and "matches no case" in bad.stderr


def test_interop_case_selection_runs_the_prerequisite(tmp_path):
    completed = run_cli(
        "interop",
        "--run-dir",
        str(tmp_path / "run"),
        "--client",
        "reference-ripplehost",
        "--server",
        "reference-ripplehost",
        "--case",
        "ripplehost.interop.client.ping-echo-round-trip",
        timeout=120,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output
    records = [
        json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    ]
    assert [(r["case_id"], r["prerequisite_only"]) for r in records] == [
        ("ripplehost.interop.client.exchanges-host-ids", True),
        ("ripplehost.interop.client.ping-echo-round-trip", False),
    ]
    wrong = run_cli(
        "interop",
        "--run-dir",
        str(tmp_path / "w"),
        "--client",
        "reference-ripplehost",
        "--server",
        "reference-ripplehost",
        "--case",
        "ssb.*",
        timeout=60,
    )
    assert (
        wrong.returncode == 2
        and "matches no case of the interop suite of ripplehost" in wrong.stderr
    )


def test_mutation_case_selection_judges_the_faults_of_the_selected_cases(tmp_path):
    completed = run_cli(
        "mutation",
        "--protocol",
        "ripplehost",
        "--case",
        CHUNK,
        "--run-dir",
        str(tmp_path / "m"),
        timeout=300,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    # Only the faults breaking a selected case, each caught by it.
    faults = [line for line in completed.stdout.splitlines() if line.startswith("ripplehost ")]
    assert faults and all(line.endswith(": caught") for line in faults), completed.stdout
    assert f"mutation score: {len(faults)}/{len(faults)} faults caught" in completed.stdout
    assert "partial run (--case ripplehost.chunk.server.*)" in completed.stderr
    wrong = run_cli(
        "mutation",
        "--protocol",
        "ripplehost",
        "--case",
        "nope",
        "--run-dir",
        str(tmp_path / "w"),
        timeout=60,
    )
    assert wrong.returncode == 2 and "matches no case" in wrong.stderr

"""stompit 1.0 (npm) as the STOMP client target `stompit` (issue 23):
`conformance certify --target stompit` gives the verdict with exactly the
failed cases docs/findings/stompit-1.0.md lists in its table "Failed
cases" (one MUST: accepts-cumulative-receipt, stompit counts a RECEIPT for
the SEND it names only; erratum STOMP-E8), and stompit delivers to the
reference node through
`conformance interop` with the SMP bodies intact (64-bit ids: the launcher
once rounded them through JavaScript numbers, stompit-1.0.md). The pairs
with RabbitMQ and ActiveMQ are in their own test files' tiers
(tests/stomp/test_activemq.py).

Skipped, with the reason, when the npm package stompit is not installed
(scripts/install-node-deps.sh). About 10 s each.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from tests.harness.cli_runner import CONFORMANCE, REPO_ROOT, certify

FINDINGS = REPO_ROOT / "docs" / "findings" / "stompit-1.0.md"
LAUNCHER = REPO_ROOT / "interop" / "node" / "stompit-client.js"
ROW = re.compile(
    r"^\| stompit \| `([a-z0-9.-]+)` \| (MUST|SHOULD)(?: \([a-z-]+\))? \| (failed|error|blocked) \|",
    re.MULTILINE,
)

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None
    or not (REPO_ROOT / "interop" / "node" / "node_modules" / "stompit" / "package.json").exists(),
    reason="node or the npm package stompit is not installed (scripts/install-node-deps.sh)",
)


def known_failures() -> dict[str, tuple[str, str]]:
    """The findings file's table "Failed cases": case id -> (level, outcome)."""
    return {
        case: (level, outcome) for case, level, outcome in ROW.findall(FINDINGS.read_text("utf-8"))
    }


def test_findings_file_has_its_failed_cases_table():
    text = FINDINGS.read_text("utf-8")
    assert "## Failed cases" in text and "| target | case | level | outcome | finding |" in text
    assert all(case.startswith("stomp.") for case in known_failures())


def test_harness_certifies_stompit_with_the_known_findings(tmp_path):
    run = certify(tmp_path, "--target", "stompit", timeout=300)
    records = run.by_case("stompit")
    judged = {
        case: (r["level"], r["outcome"])
        for case, r in records.items()
        if r["outcome"] in ("failed", "error", "blocked")
    }
    assert judged == known_failures(), run.output
    client_cases = {case for case in records if ".client." in case}
    assert len(client_cases) >= 15, run.output
    assert all(
        records[case]["outcome"] in ("passed", "failed", "error", "blocked")
        for case in client_cases
    ), "every client-role case is judged"
    expected_code = 1 if any(level == "MUST" for level, _ in known_failures().values()) else 0
    assert run.code == expected_code, run.output
    # Finding 1: of three pipelined SENDs answered by one RECEIPT for the
    # last, stompit reports only the last delivered.
    cumulative = records["stomp.receipt.client.accepts-cumulative-receipt"]
    if cumulative["outcome"] == "failed":
        assert "message(s) [0, 1] not" in cumulative["message"], cumulative["message"]


def test_stompit_delivers_to_the_reference_node_with_64_bit_ids_intact(tmp_path):
    run_dir = tmp_path / "run"
    completed = subprocess.run(
        CONFORMANCE
        + [
            "interop",
            "--run-dir",
            str(run_dir),
            "--client",
            "stompit",
            "--server",
            "reference-stomp",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO_ROOT,
    )
    records = [
        json.loads(line)
        for line in (run_dir / "results.jsonl").read_text().splitlines()
        if line.strip()
    ]
    assert {r["case_id"]: r["outcome"] for r in records} == {
        "stomp.interop.client.delivers-every-message": "passed",
        "stomp.interop.client.delivered-messages-are-stored": "passed",
        "stomp.interop.client.no-duplicate-without-reconnect": "passed",
    }, completed.stdout + completed.stderr


def test_launcher_sends_each_body_as_written(tmp_path):
    # The body text of the messages file, compacted, not a JavaScript
    # number's rounding of it: run the launcher's own functions.
    line = json.dumps(
        {
            "body": {
                "creditor_id": 6183357608661993299,
                "note": 'a, b: "c" }',
                "n": [1, {"x": None}],
                "f": -1.5e3,
                "t": True,
            },
            "type": "ConfigureAccount",
        },
        sort_keys=True,
    )
    script = (
        "const src = require('fs').readFileSync(process.argv[1], 'utf8');"
        "const pick = (name) => src.match(new RegExp('function ' + name + '[\\\\s\\\\S]*?\\\\n}\\\\n'))[0];"
        "const f = new Function('UsageError', pick('rawMember') + pick('compactJson')"
        " + 'return {rawMember, compactJson};');"
        "const {rawMember, compactJson} = f(Error);"
        "process.stdout.write(compactJson(rawMember(process.argv[2], 'body', 0)));"
    )
    completed = subprocess.run(
        ["node", "-e", script, str(LAUNCHER), line], capture_output=True, text=True, timeout=30
    )
    assert completed.returncode == 0, completed.stderr
    body = json.loads(line)["body"]
    assert completed.stdout == json.dumps(body, sort_keys=True, separators=(",", ":"))
    assert json.loads(completed.stdout)["creditor_id"] == 6183357608661993299

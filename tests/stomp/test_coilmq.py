"""coilmq 1.1.0 (PyPI) certified as it is: it has no TLS, so the profile's
first MUST fails with the TLS handshake's own words and every case that
needs a session is blocked by it (docs/findings/coilmq.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
ROOT = "stomp.tls.server.completes-mutual-handshake"


def test_coilmq_fails_the_tls_handshake_and_nothing_else_is_judged(tmp_path):
    run_dir = tmp_path / "run"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance.cli",
            "certify",
            "--target",
            "coilmq",
            "--run-dir",
            str(run_dir),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
    )
    assert completed.returncode == 1, completed.stdout + completed.stderr
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    outcomes = {r["case_id"]: r for r in records}
    assert outcomes[ROOT]["outcome"] == "failed"
    assert "TLS handshake with 127.0.0.1:" in outcomes[ROOT]["message"]
    # One root cause: the other server cases are blocked by it (or not
    # applicable), never failed for rules of their own.
    others = {r["outcome"] for case, r in outcomes.items() if case != ROOT and ".server." in case}
    assert others <= {"blocked", "not_applicable"}, others
    assert all(r["blocked_by"] == ROOT for r in records if r["outcome"] == "blocked")
    assert all(r["outcome"] == "not_applicable" for r in records if ".client." in r["case_id"])
    assert "coilmq [coilmq 1.1.0, stomp]: NOT CONFORMANT" in completed.stdout

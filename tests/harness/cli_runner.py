"""Runs the `conformance` CLI as a user would, in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = [sys.executable, "-m", "conformance.cli"]

RIPPLEHOST_SERVE = (
    "{python} -m reference_impl.ripplehost serve --host {host} --port 0 "
    "--hostname reference.ripple.test --host-id-timeout 5"
)
WRONG_MSGNO_TARGET = f"""
[targets.wrong-msgno]
implementation = "reference-ripplehost-wrong-msgno"
version = "test"
protocol = "ripplehost"
roles = ["server"]
[targets.wrong-msgno.launch]
server = "{RIPPLEHOST_SERVE} --fault reply-wrong-msgno"
ready = "RIPPLE_READY"
outputs = {{ port = "port", hostname = "hostname" }}
cwd = "{{repo}}"
"""
"""A targets file's `wrong-msgno`: the reference ripplehost server answering
with the wrong msgno, so a certify has a failed MUST case (and the cases it
blocks) and an interop pair with it is NOT interoperable."""


@dataclass
class CertifyRun:
    code: int
    output: str
    run_dir: Path
    seconds: float

    @property
    def records(self) -> list[dict]:
        path = self.run_dir / "results.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    @property
    def summary(self) -> dict:
        return json.loads((self.run_dir / "summary.json").read_text())

    def by_case(self, target: str) -> dict[str, dict]:
        return {r["case_id"]: r for r in self.records if r["target"] == target}


def run_cli(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """`conformance ARGS...` from the repository root, its output captured."""
    return subprocess.run(
        CONFORMANCE + list(args), capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT
    )


def certify(tmp_path: Path, *args: str, timeout: float = 300) -> CertifyRun:
    run_dir = tmp_path / "run"
    started = time.monotonic()
    completed = run_cli("certify", "--run-dir", str(run_dir), *args, timeout=timeout)
    return CertifyRun(
        completed.returncode,
        completed.stdout + completed.stderr,
        run_dir,
        time.monotonic() - started,
    )


STUCK_TARGET = """
[targets.stuck]
implementation = "stuck-ssb"
protocol = "ssb"
roles = ["server"]
[targets.stuck.launch]
server = "{python} -c 'import time; time.sleep(120)'"
ready = "NEVER"
ready_timeout = 60
"""
"""A node that never gets ready: its start waits ready_timeout (60 s), far
past a short --run-timeout, so the CLI's backstop has to stop the session
(tests/harness/test_run_timeout.py, test_work_dirs.py)."""


def certify_reference_grammar_cases(tmp_path: Path, target: str, *cases: str) -> CertifyRun:
    """Certifies the reference node ``target`` on its grammar ``cases``
    (core/node_grammar.py): each passes, and the node is CONFORMANT on them."""
    args = [arg for case in cases for arg in ("--case", case)]
    run = certify(tmp_path, "--target", target, *args, timeout=300)
    records = run.by_case(target)
    for case in cases:
        assert records[case]["outcome"] == "passed", records[case]
    assert run.code == 0, run.output[-2000:]
    return run


def certify_grammar_fault(
    tmp_path: Path,
    targets_text: str,
    target: str,
    reader: str,
    grammar_case: str,
    shown: tuple[str, ...],
) -> CertifyRun:
    """Certifies ``target`` of ``targets_text`` (a reference node with a
    grammar fault) on the case that reads the broken frame and the grammar
    case of its role, and checks the mechanism's verdicts
    (core/node_grammar.py): the grammar case fails listing the frame, with
    each of ``shown`` (its rule, its bytes in hex) and the reading case named; the reading
    case is blocked by it, not failed for its own rule; the target is NOT
    CONFORMANT."""
    targets = tmp_path / "targets.toml"
    targets.write_text(targets_text)
    run = certify(
        tmp_path,
        "--targets-file",
        str(targets),
        "--target",
        target,
        "--case",
        reader,
        "--case",
        grammar_case,
        timeout=300,
    )
    records = run.by_case(target)
    judged = records[grammar_case]
    assert judged["outcome"] == "failed", judged
    assert "break the frame grammar" in judged["message"], judged["message"]
    assert all(text in judged["message"] for text in shown), (shown, judged["message"])
    assert f"in {reader}" in judged["message"], judged["message"]
    blocked = records[reader]
    assert (blocked["outcome"], blocked["blocked_by"]) == ("blocked", grammar_case), blocked
    assert run.code == 1 and "NOT CONFORMANT" in run.output, run.output[-2000:]
    return run

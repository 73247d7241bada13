"""Versioned targets end to end, against the real registries (docs/versions.md):
an older stomp.py from PyPI and an older ilp-plugin-btp from npm installed
into a cache of their own and certified; a release that cannot install is
recorded as not started with the installer's reason; the run's secret (the
BTP auth token) appears in no log, trace or record.

They need PyPI and the npm registry: skipped, with the reason, where one is
unreachable; under CI=true a missing registry is a failure instead. Whole
certifications: the full tier (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REGISTRIES = {
    "PyPI": "https://pypi.org/pypi/stomp.py/json",
    "npm": "https://registry.npmjs.org/stompit",
}


def need_registry(name: str) -> None:
    try:
        with urllib.request.urlopen(REGISTRIES[name], timeout=15) as response:
            response.read(1)
    except OSError as exc:
        message = f"the {name} registry is unreachable from here ({REGISTRIES[name]}: {exc})"
        if os.environ.get("CI") == "true":
            pytest.fail(message + "; CI=true: the versioned targets' tests must run")
        pytest.skip(message)


def certify(tmp_path: Path, *args: str, env: dict | None = None) -> tuple[int, Path, str]:
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "certify", *args, "--run-dir", str(run_dir)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
        env={
            **os.environ,
            "PYTHONPATH": str(REPO),
            "CONFORMANCE_VERSIONS_CACHE": str(tmp_path / "cache"),
            **(env or {}),
        },
    )
    return done.returncode, run_dir, done.stdout + done.stderr


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def test_older_stomp_py_is_installed_and_certified(tmp_path):
    need_registry("PyPI")
    code, run_dir, output = certify(tmp_path, "--target", "stomp-py@8.0.1")
    assert code in (0, 1), output[-4000:]  # a verdict on the rules, not a start failure
    recs = records(run_dir)
    assert len(recs) > 50
    assert {(r["target"], r["implementation"], r["implementation_version"]) for r in recs} == {
        ("stomp-py@8.0.1", "stomp.py", "8.0.1")
    }
    assert not [r for r in recs if r.get("start_failure")]
    status = json.loads((tmp_path / "cache/stomp.py/8.0.1/install.json").read_text())
    assert status["ok"] and status["spec"] == "stomp.py==8.0.1"
    logs = "".join(p.read_text(errors="replace") for p in (run_dir / "logs").rglob("*.log"))
    assert f"stomp.py 8.0.1 from {tmp_path / 'cache/stomp.py/8.0.1/pkg/stomp'}" in logs


def test_release_that_cannot_install_is_not_started_with_the_reason(tmp_path):
    need_registry("PyPI")
    code, run_dir, output = certify(
        tmp_path,
        "--target", "stomp-py@0.0.1",
        "--case", "stomp.frame.client.sends-well-formed-frames",
    )  # fmt: skip
    assert code == 4, output[-4000:]
    (rec,) = records(run_dir)
    assert rec["outcome"] == "error" and rec["start_failure"] is True
    assert rec["implementation_version"] == "0.0.1"
    assert "stomp.py 0.0.1 could not be installed (stomp.py==0.0.1 from pypi)" in rec["message"]
    assert "No matching distribution found for stomp.py==0.0.1" in rec["message"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["not_started"] == ["stomp-py@0.0.1"]
    assert "NOT CERTIFIED: the target did not start" in output


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
def test_older_ilp_plugin_btp_is_certified_and_its_secret_is_in_no_log(tmp_path):
    need_registry("npm")
    if not (REPO / "interop/node/node_modules/btp-packet").exists():
        pytest.skip("the npm interop packages are not installed (scripts/install-node-deps.sh)")
    token = secrets.token_hex(16)
    targets = tmp_path / "targets.toml"
    builtin = (REPO / "conformance/targets/builtin.toml").read_text()
    # ilp-plugin-btp with its token from the environment, not generated: the
    # test knows the secret it looks for.
    table = builtin[builtin.index("[targets.ilp-plugin-btp]") :]
    table = table[: table.index("[targets.ilp-plugin-mini-accounts]")]
    table = table.replace("[targets.ilp-plugin-btp", "[targets.btp-under-test").replace(
        'auth_token_generate = "hex16"', 'auth_token_env = "VERSIONS_TEST_BTP_TOKEN"'
    )
    targets.write_text(table, encoding="utf-8")
    code, run_dir, output = certify(
        tmp_path,
        "--targets-file", str(targets),
        "--target", "btp-under-test@1.4.1",
        env={"VERSIONS_TEST_BTP_TOKEN": token},
    )  # fmt: skip
    assert code in (0, 1), output[-4000:]
    recs = records(run_dir)
    assert {(r["implementation"], r["implementation_version"]) for r in recs} == {
        ("ilp-plugin-btp", "1.4.1")
    }
    assert not [r for r in recs if r.get("start_failure")]
    logs = "".join(p.read_text(errors="replace") for p in (run_dir / "logs").rglob("*.log"))
    assert "ilp-plugin-btp 1.4.1 from" in logs
    assert token not in output
    for path in [*run_dir.rglob("*"), *(tmp_path / "cache").rglob("install.*")]:
        if path.is_file():
            assert token.encode() not in path.read_bytes(), f"the auth token is in {path}"

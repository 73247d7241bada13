"""The RIPP suite against the reference node, through the CLI: conformant as
it is; with a fault, exactly the fault's case fails (the full set of faults
is the mutation run, ``conformance mutation --protocol ripp``; here one per
area keeps the test short)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reference_impl.ripp.faults import REGISTRY

REPO = Path(__file__).resolve().parents[2]


def certify(tmp_path: Path, fault: str | None = None) -> tuple[int, list[dict]]:
    targets = ""
    name = "reference-ripp"
    if fault is not None:
        spec = REGISTRY[fault]
        name = f"ripp-{fault}"
        base = "{python} -m reference_impl.ripp"
        registry = "--schemas {repo}/conformance/suites/ripp/registry.json"
        server = f"{base} consume {registry} --host {{host}} --port 0 --heartbeat-interval 0.5"
        client = (f"{base} produce {registry} --peer-host {{peer_host}} --peer-port {{peer_port}} --source-id "
                  "{source_id} --count {count} --stay {client_stay} --timeout {client_timeout}")
        if spec.role == "server":
            server += f" --fault {fault}"
        else:
            client += f" --fault {fault}"
        targets = tmp_path / "targets.toml"
        targets.write_text(f'''
[targets.{name}]
implementation = "reference-ripp"
protocol = "ripp"
roles = ["server", "client"]
host = "127.0.0.1"
port = 0
[targets.{name}.launch]
server = "{server}"
client = "{client}"
ready = "RIPP_READY"
outputs = {{ port = "port" }}
cwd = "{{repo}}"
''')
    args = [sys.executable, "-m", "conformance.cli", "certify", "--protocol", "ripp", "--target", name,
            "--reports-dir", str(tmp_path / "reports")]
    if targets:
        args[4:4] = ["--targets-file", str(targets)]
    out = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=300)
    results = [json.loads(line) for path in (tmp_path / "reports").rglob("results.jsonl")
               for line in path.read_text().splitlines() if line.strip()]
    return out.returncode, results


def test_reference_node_is_conformant(tmp_path):
    code, results = certify(tmp_path)
    assert code == 0, [r for r in results if r["outcome"] != "passed"]
    assert len(results) >= 20 and all(r["outcome"] == "passed" for r in results)


@pytest.mark.parametrize("fault", ["accept-bad-crc", "apply-duplicates", "accept-incompatible-schema",
                                   "no-heartbeats", "delta-before-handshake",
                                   "refuse-all-schemas", "ignore-checkpoint-request"])
def test_each_fault_fails_exactly_its_case(tmp_path, fault):
    code, results = certify(tmp_path, fault)
    failed = {r["case_id"] for r in results if r["outcome"] in ("failed", "error")}
    assert failed == set(REGISTRY[fault].cases), f"{fault}: failed {sorted(failed)}"
    # A broken MUST makes the verdict "not conformant"; a broken SHOULD does not.
    must = any(r["level"] == "MUST" for r in results if r["case_id"] in failed)
    assert (code != 0) == must

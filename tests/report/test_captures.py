"""The pcapng capture beside each case's wire trace (conformance/core/pcap.py),
opened by Debian's tshark: one run certifying the five reference nodes, and
every capture it wrote read without a malformed packet or an expert error;
a STOMP case's capture shows its STOMP frames (the project's Lua dissector:
Wireshark has none), a BTP case's its WebSocket frames.

Needs /usr/bin/tshark (scripts/install-report-deps.sh installs it): skips
without it, except in CI, where it fails (tests/report/test_report.py's
``require``). Five certifications and a tshark per capture: the full tier.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.core import pcap
from conformance.core.run_folder import RunFolder

from .test_report import REPO_ROOT, require

TSHARK = Path("/usr/bin/tshark")
STOMP_DISSECTOR = Path(pcap.__file__).parent / "wireshark" / "stomp.lua"
REFERENCE_NODES = (
    "reference-ssb",
    "reference-btp",
    "reference-stomp",
    "reference-ripp",
    "reference-ripplehost",
)
STOMP_CASE = "stomp.connect.server.connect-gets-connected"
"""A server-role STOMP case: CONNECT from the harness, CONNECTED back."""


def _tshark(capture: Path, *args: str) -> str:
    done = subprocess.run(
        [str(TSHARK), "-X", f"lua_script:{STOMP_DISSECTOR}", "-r", str(capture), *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"tshark {' '.join(args)} {capture}: {done.stderr}"
    # tshark's own warnings (running as root) go to stderr; a Lua error in
    # the dissector shows in the dissection.
    return done.stdout


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunFolder:
    require([] if TSHARK.is_file() else [f"{TSHARK} (Debian's tshark)"])
    folder = RunFolder(tmp_path_factory.mktemp("captures") / "run")
    targets = [arg for name in REFERENCE_NODES for arg in ("--target", name)]
    done = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "certify", "--run-dir", str(folder.path)]
        + targets,
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"certify failed:\n{done.stdout}{done.stderr}"
    return folder


def _records(folder: RunFolder) -> list[dict]:
    return [json.loads(line) for line in folder.results.read_text().splitlines() if line.strip()]


def test_every_traced_case_has_its_capture_beside_its_trace_and_in_allure(run: RunFolder):
    traced = [r for r in _records(run) if r.get("trace_file")]
    assert {r["target"] for r in traced} == set(REFERENCE_NODES)
    missing = [r["trace_file"] for r in traced if not run.capture_beside(r["trace_file"]).is_file()]
    assert not missing, f"no capture beside {missing[:5]}"
    # The record names it, as it names the text trace.
    assert all(run.path / r["pcap_file"] == run.capture_beside(r["trace_file"]) for r in traced), [
        r.get("pcap_file") for r in traced[:3]
    ]
    attached = [
        attachment
        for result in run.allure_results.glob("*-result.json")
        for attachment in json.loads(result.read_text()).get("attachments", [])
        if attachment.get("type") == pcap.MEDIA_TYPE
    ]
    assert len(attached) >= len(traced)
    assert all(a["source"].endswith(f".{pcap.EXTENSION}") for a in attached)
    assert all((run.allure_results / a["source"]).read_bytes()[:4] == b"\n\r\r\n" for a in attached)


def test_tshark_reads_every_capture_of_the_run_without_a_malformed_packet(run: RunFolder):
    captures = run.captures()
    assert len({c.parent.name for c in captures}) == len(REFERENCE_NODES)
    problems = []
    for capture in captures:
        # -V: every field of every packet; -z expert: Wireshark's expert
        # findings, by severity (a malformed packet is an error).
        out = _tshark(capture, "-V", "-z", "expert")
        for sign in ("[Malformed Packet", "Lua Error", "Errors ("):
            if sign in out:
                problems.append(f"{capture.relative_to(run.path)}: {sign}")
    assert not problems, "\n".join(problems)


def test_a_stomp_case_shows_its_stomp_frames(run: RunFolder):
    capture = run.case_capture(STOMP_CASE, "reference-stomp")
    commands = _tshark(capture, "-Y", "stomp", "-T", "fields", "-e", "stomp.command").split()
    assert "CONNECT" in commands and "CONNECTED" in commands, commands
    detail = _tshark(capture, "-Y", "stomp", "-V")
    assert "Header: accept-version:" in detail and "Header: version:1.2" in detail


def test_a_btp_case_shows_websocket_frames(run: RunFolder):
    btp = [c for c in run.captures() if c.parent.name == "reference-btp"]
    opcodes = {
        capture.name: _tshark(
            capture, "-Y", "websocket", "-T", "fields", "-e", "websocket.opcode"
        ).split()
        for capture in btp
    }
    # Binary frames (opcode 2): BTP packets, in most captures of the node.
    with_frames = [name for name, seen in opcodes.items() if "2" in seen]
    assert len(with_frames) > len(btp) // 2, opcodes

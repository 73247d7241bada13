"""The pcapng capture beside each case's wire trace (conformance/core/pcap.py),
opened by Debian's tshark: one run certifying the five reference nodes, and
every capture it wrote read without a malformed packet or an expert error;
a STOMP case's capture shows its STOMP frames (the project's Lua dissector:
Wireshark has none), a BTP case's its WebSocket frames.

Needs /usr/bin/tshark (scripts/install-report-deps.sh installs it): skips
without it, except in CI, where it fails (tests/report/test_report.py's
``require``). Five certifications and a tshark per node (its captures merged): the full tier.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import dpkt
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


MERGECAP = Path("/usr/bin/mergecap")


def _merged(captures: list[Path], into: Path) -> tuple[Path, list[tuple[int, Path]]]:
    """The captures one after the other in one file (``mergecap -a``), and
    where each begins: (its first frame number, the capture). One tshark
    over a node's captures instead of one per capture: a tshark's start is
    most of its cost here (about 0.3 CPU-s), and 250 of them outran the
    test's time in a loaded full tier. Every connection of a capture opens
    with its SYN, so a 4-tuple seen again later is a new TCP stream to
    Wireshark, never the continuation of another capture's."""
    done = subprocess.run(
        [str(MERGECAP), "-a", "-F", "pcapng", "-w", str(into), *map(str, captures)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"mergecap: {done.stderr}"
    starts, frame = [], 1
    for capture in captures:
        starts.append((frame, capture))
        with open(capture, "rb") as stream:
            frame += sum(1 for _ in dpkt.pcapng.Reader(stream))
    return into, starts


def _capture_of(frame: int, starts: list[tuple[int, Path]]) -> Path:
    return [capture for first, capture in starts if first <= frame][-1]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunFolder:
    require([f"{tool} (Debian's tshark)" for tool in (TSHARK, MERGECAP) if not tool.is_file()])
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


PROBLEM_SIGNS = ("[Malformed Packet", "Lua Error", "Errors (")


def test_tshark_reads_every_capture_of_the_run_without_a_malformed_packet(
    run: RunFolder, tmp_path: Path
):
    captures = run.captures()
    nodes = sorted({c.parent.name for c in captures})
    assert len(nodes) == len(REFERENCE_NODES)
    problems = []
    for node in nodes:
        own = [c for c in captures if c.parent.name == node]
        merged, _ = _merged(own, tmp_path / f"{node}.pcapng")
        # -V: every field of every packet; -z expert: Wireshark's expert
        # findings, by severity (a malformed packet is an error).
        if not any(sign in _tshark(merged, "-V", "-z", "expert") for sign in PROBLEM_SIGNS):
            continue
        # Something is wrong in this node's captures: name which, each read alone.
        for capture in own:
            out = _tshark(capture, "-V", "-z", "expert")
            problems += [
                f"{capture.relative_to(run.path)}: {sign}" for sign in PROBLEM_SIGNS if sign in out
            ]
        if not problems:
            problems.append(f"{node}: the captures read together show a problem, none alone")
    assert not problems, "\n".join(problems)


def test_a_stomp_case_shows_its_stomp_frames(run: RunFolder):
    capture = run.case_capture(STOMP_CASE, "reference-stomp")
    commands = _tshark(capture, "-Y", "stomp", "-T", "fields", "-e", "stomp.command").split()
    assert "CONNECT" in commands and "CONNECTED" in commands, commands
    detail = _tshark(capture, "-Y", "stomp", "-V")
    assert "Header: accept-version:" in detail and "Header: version:1.2" in detail


def test_a_btp_case_shows_websocket_frames(run: RunFolder, tmp_path: Path):
    btp = [c for c in run.captures() if c.parent.name == "reference-btp"]
    merged, starts = _merged(btp, tmp_path / "btp.pcapng")
    opcodes: dict[str, list[str]] = {capture.name: [] for capture in btp}
    fields = _tshark(
        merged, "-Y", "websocket", "-T", "fields", "-e", "frame.number", "-e", "websocket.opcode"
    )
    for line in fields.splitlines():
        frame, _, seen = line.partition("\t")
        opcodes[_capture_of(int(frame), starts).name] += seen.split(",")
    # Binary frames (opcode 2): BTP packets, in most captures of the node.
    with_frames = [name for name, seen in opcodes.items() if "2" in seen]
    assert len(with_frames) > len(btp) // 2, opcodes

"""The STOMP faults live beside their specs (reference_impl/stomp/faults.py),
not inside the rules: every fault changes declared points, and no core
module tests for a fault. The mutation run (tests/mutation) proves that each
fault still breaks its rule; tests/stomp/test_server_core.py,
test_server_node.py and test_client.py check what several of them do."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reference_impl.faults import FaultPoints, check_points
from reference_impl.stomp import faults as stomp_faults
from reference_impl.stomp.frame import Frame, FrameParser
from reference_impl.stomp.server import ServerConnection

STOMP = Path(__file__).resolve().parents[2] / "reference_impl" / "stomp"
CORE_MODULES = (
    "server.py",
    "client.py",
    "node.py",
    "frame.py",
    "smp.py",
    "store.py",
    "tls.py",
    "manifest.py",
)
FAULT_TEST = re.compile(r"Fault\.|self\._faults|faults &|in faults|in self\.faults")


def test_every_fault_changes_declared_points():
    assert check_points(stomp_faults.SPECS, stomp_faults.POINTS) == []


def test_every_point_is_changed_by_some_fault():
    changed = {point for spec in stomp_faults.SPECS for point in spec.changes}
    assert set(stomp_faults.POINTS) == changed


@pytest.mark.parametrize("module", CORE_MODULES)
def test_no_core_module_tests_for_a_fault(module):
    lines = (STOMP / module).read_text(encoding="utf-8").splitlines()
    found = [
        f"{module}:{n}: {line.strip()}"
        for n, line in enumerate(lines, 1)
        if FAULT_TEST.search(line)
    ]
    assert found == []


def test_client_fault_members_are_the_registry_names():
    points = FaultPoints(stomp_faults.SPECS, {stomp_faults.ClientFault.EXACT_RECEIPTS})
    assert points.active == {"client-exact-receipts"}


def _frames(data: bytes) -> list[Frame]:
    return [item for item in FrameParser().receive_data(data) if isinstance(item, Frame)]


CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00"


def test_refusal_answer_faults():
    """no-error-on-malformed closes in silence; open-after-error sends the
    ERROR and stays open; both only for malformed frames."""
    silent = ServerConnection(faults={stomp_faults.Fault.NO_ERROR_ON_MALFORMED})
    silent.receive_data(CONNECT + b"SEND\nbad\n\n\x00")
    assert [f.command for f in _frames(silent.data_to_send())] == ["CONNECTED"]
    assert silent.finished
    stays = ServerConnection(faults={stomp_faults.Fault.OPEN_AFTER_ERROR})
    stays.receive_data(CONNECT + b"SEND\nbad\n\n\x00")
    assert [f.command for f in _frames(stays.data_to_send())] == ["CONNECTED", "ERROR"]
    assert not stays.finished and stays.ignore_input
    other = ServerConnection(faults={stomp_faults.Fault.OPEN_AFTER_ERROR})
    other.receive_data(CONNECT + b"SUBSCRIBE\nid:0\ndestination:/q\n\n\x00")
    assert [f.command for f in _frames(other.data_to_send())] == ["CONNECTED", "ERROR"]
    assert other.finished


def test_body_ends_at_nul_reads_the_rest_as_frames():
    items = [Frame("SEND", (("content-length", "9"),), b"a\x00DISCONNECT\n\n")]
    assert stomp_faults.body_ends_at_nul(items) == [
        Frame("SEND", (), b"a"),
        Frame("DISCONNECT", (), b""),
    ]


def test_receipts_reversed_keeps_other_frames_in_place():
    released = [(b"r1", True), (b"e", False), (b"r2", True)]
    assert stomp_faults.receipts_reversed(released) == [(b"r2", True), (b"e", False), (b"r1", True)]

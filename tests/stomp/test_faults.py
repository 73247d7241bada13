"""What some STOMP faults change at their points (reference_impl/stomp/faults.py).
That every fault changes declared points only and no core module tests
for a fault is tests/mutation/test_fault_points.py's. The mutation run (tests/mutation) proves that each
fault still breaks its rule; tests/stomp/test_server_core.py,
test_server_node.py and test_client.py check what several of them do."""

from __future__ import annotations


from reference_impl.faults import FaultPoints
from reference_impl.stomp import faults as stomp_faults
from reference_impl.stomp.frame import Frame, FrameParser
from reference_impl.stomp.server import ServerConnection


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

"""A case is never blocked by itself: when a prerequisite, or the case's own
body, blames the case's own rule, the case runs (or ends) as ``failed``,
through the plugin, on a small synthetic suite."""

from __future__ import annotations

import pytest

from .fake_suite import Listener, run_suite, targets_file, write_suite

SELF_BLAMING = """
from conformance.core.requirements import blocked


@requirement("stomp.fake.server.reader", "MUST", "Fake §1")
def test_reader(target):
    # Meets a breach of the frame size rule while reading: blames that rule's case.
    blocked("stomp.fake.server.frame-size", "failed within this case", "a frame of 70000 bytes; bytes: 0a0b")


@requirement("stomp.fake.server.frame-size", "MUST", "Fake §2", depends=["stomp.fake.server.reader"])
def test_frame_size(target):
    assert False, "the target sent a frame of 70000 bytes, over the 65536 limit"


@requirement("stomp.fake.server.blames-itself", "MUST", "Fake §3")
def test_blames_itself(target):
    blocked("stomp.fake.server.blames-itself", "failed within this case", "a frame of 70000 bytes; bytes: 0c0d")
"""


@pytest.fixture
def listener():
    with Listener() as server:
        yield server


def test_a_case_blamed_by_its_prerequisite_or_itself_fails(tmp_path, listener):
    run = run_suite(
        tmp_path, write_suite(tmp_path, SELF_BLAMING), targets_file(tmp_path, listener.port)
    )
    cases = run.by_case()
    reader = cases["stomp.fake.server.reader"]
    assert (
        reader["outcome"] == "blocked" and reader["blocked_by"] == "stomp.fake.server.frame-size"
    ), reader
    # Its prerequisite was blocked by it: the case still runs and judges its own rule.
    own = cases["stomp.fake.server.frame-size"]
    assert own["outcome"] == "failed", own
    assert own["message"].startswith(
        "stomp.fake.server.frame-size [MUST, Fake §2]: the target sent a frame of 70000 bytes"
    ), own["message"]
    # blocked() naming the case itself, raised in its body, is its failure, with the same text.
    itself = cases["stomp.fake.server.blames-itself"]
    assert itself["outcome"] == "failed", itself
    assert itself["message"] == (
        "stomp.fake.server.blames-itself [MUST, Fake §3]: a frame of 70000 bytes; bytes: 0c0d"
    ), itself["message"]
    assert not [r for r in run.records if r.get("blocked_by") == r["case_id"]]

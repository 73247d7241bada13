"""The frame grammar of what a node sends, judged by a case of its own
(core/node_grammar.py): a case whose traffic holds a frame breaking it is
blocked by the grammar case, which runs last and fails listing every such
frame with its bytes; serially and in pytest-xdist workers alike."""

from __future__ import annotations

import dataclasses

import pytest

from conformance.core import node_grammar
from conformance.core.requirements import requirement
from conformance.plugin.ordering import case_groups

from .fake_suite import Listener, run_suite, targets_file, write_suite

XDIST = ("-p", "xdist.plugin", "-n", "2", "--dist", "loadgroup")
GRAMMAR = "stomp.fake.server.sends-well-formed-frames"

SUITE = f"""
from conformance.core import node_grammar as grammar

GRAMMAR = "{GRAMMAR}"


def decode(data):
    '''Stands for a suite's decoder of what the node sends.'''
    if b":" not in data.split(b"\\n")[1]:
        raise grammar.violation(
            GRAMMAR, "header line has no colon", data, direction="server to harness", offset=7
        )
    return data


# First in the file: the grammar case still runs after every other case.
@requirement(GRAMMAR, "MUST", "Fake §0", basis="wire-format: the fake frame", grammar=True)
def test_grammar(target, node_grammar):
    with node_grammar.judging():
        decode(b"RECEIPT\\nreceipt-id:1\\n\\n\\x00")


@requirement("stomp.fake.server.reader", "MUST", "Fake §1")
def test_reader(target):
    decode(b"RECEIPT\\nstored\\n\\n\\x00")


@requirement("stomp.fake.server.wraps-it", "MUST", "Fake §2")
def test_wraps_it(target):
    try:
        decode(b"ERROR\\nbroken\\n\\n\\x00")
    except AssertionError as exc:
        raise AssertionError(f"no RECEIPT came: {{exc}}") from None


@requirement("stomp.fake.server.reads-on", "MUST", "Fake §3")
def test_reads_on(target):
    try:
        decode(b"CONNECTED\\nversion\\n\\n\\x00")
    except grammar.NodeGrammarViolation:
        pass  # a case that judges something else of the connection


@requirement("stomp.fake.server.own-rule", "MUST", "Fake §4")
def test_own_rule(target):
    decode(b"RECEIPT\\nreceipt-id:2\\n\\n\\x00")
    assert False, "the target sent ERROR instead of RECEIPT"


@requirement("stomp.fake.client.clean", "MUST", "Fake §5", role="client")
def test_client_clean(target):
    pass
"""


@pytest.fixture
def listener():
    with Listener() as server:
        yield server


def check_run(run) -> None:
    cases = run.by_case()
    for case in ("stomp.fake.server.reader", "stomp.fake.server.wraps-it"):
        record = cases[case]
        assert record["outcome"] == "blocked" and record["blocked_by"] == GRAMMAR, record
        # The blocked case shows the rule and the bytes.
        assert "header line has no colon" in record["message"], record["message"]
        assert "frame at offset 7); bytes: " in record["message"], record["message"]
    assert cases["stomp.fake.server.reads-on"]["outcome"] == "passed"
    assert cases["stomp.fake.server.own-rule"]["outcome"] == "failed"
    judged = cases[GRAMMAR]
    assert judged["outcome"] == "failed", judged
    message = judged["message"]
    assert "the node sent 3 frame(s) that break the frame grammar" in message, message
    for case, data in (
        ("stomp.fake.server.reader", b"RECEIPT\nstored\n\n\x00"),
        ("stomp.fake.server.wraps-it", b"ERROR\nbroken\n\n\x00"),
        ("stomp.fake.server.reads-on", b"CONNECTED\nversion\n\n\x00"),
    ):
        assert f"in {case}, frame at offset 7); bytes: {data.hex()}" in message, message
    server_cases = [r["case_id"] for r in run.records if r["role"] == "server"]
    assert server_cases[-1] == GRAMMAR, server_cases


def test_violations_block_their_case_and_fail_the_grammar_case(tmp_path, listener):
    run = run_suite(tmp_path, write_suite(tmp_path, SUITE), targets_file(tmp_path, listener.port))
    assert run.code == 1, run.output
    check_run(run)


def test_in_xdist_workers_too(tmp_path, listener):
    """Under ``certify --case-jobs N`` the grammar case runs in the worker of
    its protocol and role's cases, after them; the records reach it through
    the run folder."""
    run = run_suite(
        tmp_path,
        write_suite(tmp_path, SUITE),
        targets_file(tmp_path, listener.port, roles='["server", "client"]'),
        *XDIST,
    )
    assert run.code == 1, run.output
    check_run(run)


def test_grammar_case_groups_its_protocol_and_role():
    class Item:
        def __init__(self, marker):
            self.marker = marker

        def get_closest_marker(self, name):
            return self.marker.mark

    items = [
        Item(requirement(GRAMMAR, "MUST", "Fake §0", basis="wire-format: f", grammar=True)),
        Item(requirement("stomp.fake.server.a", "MUST", "Fake §1")),
        Item(requirement("stomp.fake.server.b", "MUST", "Fake §2")),
        Item(requirement("stomp.fake.client.c", "MUST", "Fake §3", role="client")),
        Item(requirement("btp.fake.server.d", "MUST", "Fake §4")),
    ]
    groups = case_groups(items)  # type: ignore[arg-type]
    assert {groups.get(id(item)) for item in items[:3]} == {GRAMMAR}
    assert id(items[3]) not in groups and id(items[4]) not in groups


def test_violation_is_recorded_when_made(tmp_path):
    """Raised or caught, the bytes were read: the record is written as the
    violation is made, for the case that made it."""
    path = tmp_path / "grammar.jsonl"
    node_grammar.begin_case(
        "stomp.fake.server.x", lambda record: node_grammar.append_record(path, record)
    )
    try:
        made = node_grammar.violation(
            GRAMMAR, "no NUL", b"RECEIPT\n\n", direction="server to harness", offset=3
        )
    finally:
        node_grammar.begin_case("", None)
    [record] = node_grammar.read_records(path, GRAMMAR)
    assert record.case_id == "stomp.fake.server.x" and record.offset == 3
    assert record.data_hex == b"RECEIPT\n\n".hex()
    assert node_grammar.grammar_violation_in(made) is made
    wrapped = AssertionError("wrapped")
    wrapped.__context__ = made
    assert node_grammar.grammar_violation_in(wrapped) is made
    assert node_grammar.read_records(path, "stomp.fake.server.other") == []
    # A run folder reused by a later run: each run's grammar case reads its own records.
    node_grammar.append_record(path, dataclasses.replace(record, run_id="later"))
    assert node_grammar.read_records(path, GRAMMAR) == [record]
    assert [r.run_id for r in node_grammar.read_records(path, GRAMMAR, "later")] == ["later"]

"""What a failed case stores: the harness's own message, never pytest's
assertion introspection (``assert 44 == 42``, ``+ where 44 = <... object at
0x7f...>.msgno``, diffs), which names Python objects rather than what the
node did (issue 24, item 10). Through the plugin, on a small synthetic
suite; the unit of it, ``assertion_message``, on asserts raised here."""

from __future__ import annotations

import pytest

from conformance.plugin.outcomes import assertion_message

from .fake_suite import Listener, run_suite, targets_file, write_suite

SUITE = """
class Reply:
    msgno = 44


@requirement("stomp.fake.server.with-message", "MUST", "Fake §1")
def test_with_message(target):
    reply = Reply()
    assert reply.msgno == 42, f"the answer to msgno 42 carries msgno {reply.msgno}\\nbytes: 0a0b 100% shown"


@requirement("stomp.fake.server.bare", "MUST", "Fake §2")
def test_bare(target):
    reply = Reply()
    assert reply.msgno == 42


@requirement("stomp.fake.server.diff", "MUST", "Fake §3")
def test_diff(target):
    got = [1, 5, 4, 3, 2]
    assert got == [1, 2, 3, 4, 5], f"expected sequences 1..5 in order, got {got}"


@requirement("stomp.fake.server.message-starting-with-assert", "MUST", "Fake §4")
def test_message_starting_with_assert(target):
    assert isinstance(Reply(), int), "assert the reply is an Error: it is a Response"


@requirement("stomp.fake.server.raised", "MUST", "Fake §5")
def test_raised(target):
    raise AssertionError("the target closed the connection\\nassert this line is the helper's own")
"""


@pytest.fixture
def listener():
    with Listener() as server:
        yield server


def test_stored_messages_carry_no_assertion_introspection(tmp_path, listener):
    run = run_suite(tmp_path, write_suite(tmp_path, SUITE), targets_file(tmp_path, listener.port))
    cases = run.by_case()
    assert {r["outcome"] for r in cases.values()} == {"failed"}, run.output[-3000:]
    messages = {case: r["message"].split("]: ", 1)[1] for case, r in cases.items()}
    assert messages == {
        "stomp.fake.server.with-message": "the answer to msgno 42 carries msgno 44\nbytes: 0a0b 100% shown",
        "stomp.fake.server.bare": "assert reply.msgno == 42",
        "stomp.fake.server.diff": "expected sequences 1..5 in order, got [1, 5, 4, 3, 2]",
        "stomp.fake.server.message-starting-with-assert": "assert the reply is an Error: it is a Response",
        # Not an assert statement: the helper's text as it is.
        "stomp.fake.server.raised": "the target closed the connection\nassert this line is the helper's own",
    }, messages
    for record in cases.values():
        assert " at 0x" not in record["message"] and "where" not in record["message"], record[
            "message"
        ]
        # The trace file's header holds the same message.
        trace = (run.run_dir / record["trace_file"]).read_text() if record.get("trace_file") else ""
        assert " at 0x" not in trace


class _Reply:
    msgno = 44


def test_assertion_message_of_a_plain_assertion_error_is_its_text():
    with pytest.raises(AssertionError) as caught:
        raise AssertionError("as given\nassert 1 == 2")
    assert assertion_message(caught.value) == "as given\nassert 1 == 2"


def test_assertion_message_strips_what_pytest_appended():
    reply = _Reply()
    with pytest.raises(AssertionError) as caught:
        assert reply.msgno == 42, "msgno 44 instead of 42\nsecond line"
    assert "where" in str(caught.value)  # this module's asserts are rewritten too
    assert assertion_message(caught.value) == "msgno 44 instead of 42\nsecond line"
    with pytest.raises(AssertionError) as caught:
        assert reply.msgno == 42
    assert assertion_message(caught.value) == "assert reply.msgno == 42"

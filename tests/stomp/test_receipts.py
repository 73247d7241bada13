"""Receipt semantics: the ``accepted`` adapter's parser against good and
broken outputs (docs/stomp-adapter.md), and the stomp.receipt.server.*
cases against the reference node, correct and with each receipt fault on:
exactly the matching case fails."""

from __future__ import annotations

import json

import pytest

from conformance.suites.stomp.adapter import (MAX_LINE_CHARS, AcceptedMessage, AdapterContractError, OwnMessage,
                                              find_own, parse_accepted)


def record(**overrides) -> dict:
    base = {"destination": "/exchange/smp", "type": "ConfigureAccount", "content-type": "application/json",
            "receipt": "r-1", "body": '{"type":"ConfigureAccount"}'}
    base.update(overrides)
    return base


def lines(*objects) -> str:
    return "".join(json.dumps(o) + "\n" for o in objects)


# -- the parser: outputs the contract allows ------------------------------------------------

def test_parses_records_in_order_with_their_line_numbers():
    text = lines(record(receipt="a"), record(receipt=None, body="{}"), record(receipt="c"))
    got = parse_accepted(text)
    assert [(r.index, r.line, r.receipt) for r in got] == [(0, 1, "a"), (1, 2, None), (2, 3, "c")]
    assert got[1].body == "{}" and got[0].content_type == "application/json"


def test_empty_output_is_no_records():
    assert parse_accepted("") == []
    assert parse_accepted("\n\n") == []


def test_blank_lines_crlf_and_extra_members_are_accepted():
    text = "\r\n" + json.dumps(record(extra=1, stored_at="2026-01-01")) + "\r\n\n"
    (got,) = parse_accepted(text)
    assert got.line == 2 and got.type == "ConfigureAccount"


def test_body_keeps_unicode_and_nul():
    body = '{"config_data":"\u00e9\u4e2d\\u0000"}'
    (got,) = parse_accepted(lines(record(body=body)))
    assert got.body == body


def test_last_line_without_newline():
    (got,) = parse_accepted(json.dumps(record()))
    assert got.receipt == "r-1"


# -- the parser: outputs that break it, with the line shown ------------------------------------

@pytest.mark.parametrize("text, words", [
    ("INFO connecting to broker\n" + lines(record()), ["line 1 is not one JSON object", "INFO connecting"]),
    (lines(record()) + "[1, 2]\n", ["line 2 is JSON but not an object (array)", "[1, 2]"]),
    (lines(record()) + json.dumps({k: v for k, v in record().items() if k != "body"}) + "\n",
     ["line 2", "no 'body'"]),
    (lines(record(receipt=5)), ["line 1", "'receipt' is number, not string or null"]),
    (lines(record(body={"type": "x"})), ["'body' is object, not string"]),
    (lines(record(type=None)), ["'type' is null, not string"]),
    ('{"destination": "a", "destination": "b", "type": "t", "content-type": "c", "receipt": null, "body": ""}\n',
     ["line 1 is not one JSON object", "appears twice"]),
    (lines(record())[:-10] + "\n", ["line 1 is not one JSON object"]),
])
def test_contract_breaches_name_the_rule_and_show_the_line(text, words):
    with pytest.raises(AdapterContractError) as info:
        parse_accepted(text)
    message = str(info.value)
    for word in words:
        assert word in message, message
    assert "docs/stomp-adapter.md" in message


def test_breach_shows_the_lines_before_it():
    text = lines(record(receipt="first"), record(receipt="second")) + "garbage here\n"
    with pytest.raises(AdapterContractError) as info:
        parse_accepted(text)
    message = str(info.value)
    assert "    1| " in message and "    3| 'garbage here'" in message and "first" in message


def test_overlong_line_is_refused_without_parsing_it():
    text = "x" * (MAX_LINE_CHARS + 1) + "\n"
    with pytest.raises(AdapterContractError, match="over the bound"):
        parse_accepted(text)


def test_deeply_nested_json_is_a_contract_breach_not_a_crash():
    with pytest.raises(AdapterContractError):
        parse_accepted("[" * 100_000 + "\n")


def test_adapter_contract_error_is_a_target_error():
    # A broken adapter must end the case in ``error`` (the harness could not
    # read the node), never as a verdict on the protocol: not an AssertionError.
    from conformance.core.targets import TargetError
    assert issubclass(AdapterContractError, TargetError)
    assert not issubclass(AdapterContractError, AssertionError)


# -- matching the harness's own messages ---------------------------------------------------

def own(n: int, **overrides) -> OwnMessage:
    fields = dict(receipt=f"r-{n}", destination="/exchange/smp", type="ConfigureAccount",
                  content_type="application/json", body=f'{{"creditor_id":{10**10 + n}}}')
    fields.update(overrides)
    return OwnMessage(**fields)


def as_record(index: int, message: OwnMessage, **overrides) -> AcceptedMessage:
    fields = dict(index=index, line=index + 1, destination=message.destination, type=message.type,
                  content_type=message.content_type, receipt=message.receipt, body=message.body)
    fields.update(overrides)
    return AcceptedMessage(**fields)


def test_find_own_among_foreign_records_and_null_receipts():
    sent = [own(1), own(2), own(3)]
    foreign = AcceptedMessage(0, 1, "/exchange/other", "AccountUpdate", "application/json", None, "{}")
    records = [foreign, as_record(1, sent[2], receipt=None), as_record(2, sent[0])]
    found = find_own(records, sent)
    assert set(found.stored) == {"r-1", "r-3"} and [m.receipt for m in found.missing] == ["r-2"]
    problems = found.problems(sent)
    assert len(problems) == 1 and "receipt:r-2" in problems[0] and "3 record(s)" in problems[0]


def test_find_own_reports_altered_headers():
    sent = [own(1)]
    found = find_own([as_record(0, sent[0], type="AccountUpdate", receipt="other")], sent)
    assert not found.stored
    (problem,) = found.problems(sent)
    assert "stored altered" in problem and "type 'AccountUpdate' instead of 'ConfigureAccount'" in problem
    assert "receipt 'other' instead of 'r-1'" in problem


def test_find_own_prefers_an_intact_copy_over_an_altered_one():
    sent = [own(1)]
    found = find_own([as_record(0, sent[0], destination="/x"), as_record(1, sent[0])], sent)
    assert found.stored["r-1"].index == 1 and not found.problems(sent)

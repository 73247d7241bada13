"""Receipt semantics: the ``accepted`` adapter's parser against good and
broken outputs (docs/stomp-adapter.md), and the stomp.receipt.server.*
cases against the reference node, correct and with each receipt fault on:
exactly the matching case fails."""

from __future__ import annotations

import json

import pytest

from conformance.core.requirements import level_with_basis
from conformance.suites.stomp.adapter import (
    MAX_LINE_CHARS,
    AcceptedMessage,
    AdapterContractError,
    find_own,
    parse_accepted,
)
from conformance.suites.stomp.own_messages import OwnMessage, own_message, own_messages


def record(**overrides) -> dict:
    base = {
        "destination": "/exchange/smp",
        "type": "ConfigureAccount",
        "content-type": "application/json",
        "receipt": "r-1",
        "body": '{"type":"ConfigureAccount"}',
    }
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


@pytest.mark.parametrize(
    "text, words",
    [
        (
            "INFO connecting to broker\n" + lines(record()),
            ["line 1 is not one JSON object", "INFO connecting"],
        ),
        (lines(record()) + "[1, 2]\n", ["line 2 is JSON but not an object (array)", "[1, 2]"]),
        (
            lines(record()) + json.dumps({k: v for k, v in record().items() if k != "body"}) + "\n",
            ["line 2", "no 'body'"],
        ),
        (lines(record(receipt=5)), ["line 1", "'receipt' is number, not string or null"]),
        (lines(record(body={"type": "x"})), ["'body' is object, not string"]),
        (lines(record(type=None)), ["'type' is null, not string"]),
        (
            '{"destination": "a", "destination": "b", "type": "t", "content-type": "c", "receipt": null, "body": ""}\n',
            ["line 1 is not one JSON object", "appears twice"],
        ),
        (lines(record())[:-10] + "\n", ["line 1 is not one JSON object"]),
    ],
)
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
    fields = dict(
        receipt=f"r-{n}",
        destination="/exchange/smp",
        type="ConfigureAccount",
        content_type="application/json",
        body=f'{{"creditor_id":{10**10 + n}}}',
    )
    fields.update(overrides)
    return OwnMessage(**fields)


def as_record(index: int, message: OwnMessage, **overrides) -> AcceptedMessage:
    fields = dict(
        index=index,
        line=index + 1,
        destination=message.destination,
        type=message.type,
        content_type=message.content_type,
        receipt=message.receipt,
        body=message.body,
    )
    fields.update(overrides)
    return AcceptedMessage(**fields)


def test_find_own_among_foreign_records_and_null_receipts():
    sent = [own(1), own(2), own(3)]
    foreign = AcceptedMessage(
        0, 1, "/exchange/other", "AccountUpdate", "application/json", None, "{}"
    )
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
    assert (
        "stored altered" in problem
        and "type 'AccountUpdate' instead of 'ConfigureAccount'" in problem
    )
    assert "receipt 'other' instead of 'r-1'" in problem


def test_find_own_prefers_an_intact_copy_over_an_altered_one():
    sent = [own(1)]
    found = find_own([as_record(0, sent[0], destination="/x"), as_record(1, sent[0])], sent)
    assert found.stored["r-1"].index == 1 and not found.problems(sent)


def test_find_own_matches_json_values_only_for_a_node_that_stores_them():
    # accepted_body = "json" (swpt_stomp publishes its schema's dumps: other key
    # order, spaces): the same value is stored; without it, the bytes must match.
    sent = [
        own(1, body='{"type":"ConfigureAccount","creditor_id":10000000001,"negligible_amount":2.0}')
    ]
    reserialized = (
        '{"negligible_amount": 2.0, "type": "ConfigureAccount", "creditor_id": 10000000001}'
    )
    assert find_own(
        [as_record(0, sent[0], body=reserialized, json_body=True)], sent
    ).stored.keys() == {"r-1"}
    assert not find_own([as_record(0, sent[0], body=reserialized)], sent).stored
    # Values compared exactly: 2 is not 2.0, a repeated key is no value, another id is another message.
    for other in (
        '{"negligible_amount": 2, "type": "ConfigureAccount", "creditor_id": 10000000001}',
        '{"negligible_amount": 2.0, "type": "ConfigureAccount", "creditor_id": 10000000001, '
        '"creditor_id": 10000000001}',
        '{"negligible_amount": 2.0, "type": "ConfigureAccount", "creditor_id": 10000000002}',
    ):
        assert not find_own([as_record(0, sent[0], body=other, json_body=True)], sent).stored, other
    # Headers are still compared: the same value under another type is stored altered.
    found = find_own(
        [as_record(0, sent[0], body=reserialized, json_body=True, type="AccountUpdate")], sent
    )
    assert "stored altered" in found.problems(sent)[0]


def test_own_messages_are_valid_smp_with_unique_unreserved_creditor_ids():
    from reference_impl.stomp.smp import validate_message

    messages = own_messages("/exchange/smp", 200, "t")
    bodies = [json.loads(m.body) for m in messages]
    assert all(validate_message(m.type, body) == [] for m, body in zip(messages, bodies))
    assert len({m.body for m in messages}) == len({m.receipt for m in messages}) == 200
    assert all(2**32 <= body["creditor_id"] < 2**63 for body in bodies)
    assert dict(messages[0].headers()) == {
        "destination": "/exchange/smp",
        "receipt": messages[0].receipt,
        "type": "ConfigureAccount",
        "content-type": "application/json",
        "persistent": "true",
    }


def test_reference_accepted_command_output_parses_and_matches(tmp_path):
    """The reference node's ``accepted`` command (its store, as the
    ``accepted`` adapter of reference-stomp) speaks the contract the parser
    reads, bodies with non-ASCII text and escaped header values included."""
    import subprocess
    import sys

    from reference_impl.stomp.store import Store, StoredMessage

    sent = [own_message("/exchange/smp:x\\n", "cli"), own_message("/exchange/smp", "cli")]
    sent[1] = OwnMessage(
        sent[1].receipt,
        sent[1].destination,
        sent[1].type,
        sent[1].content_type,
        sent[1].body.replace('"config_data":""', '"config_data":"\u00e9\\n\u4e2d"'),
    )
    with Store(tmp_path / "store") as store:
        store.append(
            StoredMessage(
                m.destination,
                m.type,
                m.content_type,
                m.receipt,
                m.body.encode("utf-8"),
                m.headers(),
            )
            for m in sent
        )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "reference_impl.stomp",
            "accepted",
            "--store",
            str(tmp_path / "store"),
        ],
        capture_output=True,
        timeout=60,
        check=True,
    )
    found = find_own(parse_accepted(out.stdout.decode("utf-8")), sent)
    assert not found.problems(sent) and [r.index for r in found.stored.values()] == [0, 1]


# -- the cases against the reference node, correct and broken ---------------------------------

RECEIPT_CASES = {
    "stomp.receipt.server.receipt-id-echoes-receipt",
    "stomp.receipt.server.receipts-in-order",
    "stomp.receipt.server.receipt-confirms-pipelined-sends",
    "stomp.receipt.server.receipted-message-is-stored",
    "stomp.receipt.server.stored-after-connection-cut",
    "stomp.receipt.server.stored-after-restart",
}


def receipt_faults() -> dict[str, set[str]]:
    """The reference server's faults that break a receipt rule (the fault
    registry, reference_impl/stomp/faults.py), with the cases that must catch
    each."""
    from reference_impl.stomp.faults import SPECS

    return {
        spec.name: set(spec.cases)
        for spec in SPECS
        if spec.role == "server" and set(spec.cases) <= RECEIPT_CASES
    }


def stomp_target(
    name: str,
    fault: str | None = None,
    capabilities: str = '["accepted", "restart"]',
    adapter: str | None = None,
) -> str:
    """The built-in reference-stomp target (its own launch and adapter
    commands), server role only, with ``--fault`` or another ``accepted``
    command when given."""
    from conformance.mutation import builtin_tables, mutant_table, targets_toml

    table = builtin_tables()["reference-stomp"]
    table = (
        mutant_table(table, fault, "server")
        if fault
        else {
            **table,
            "roles": ["server"],
            "launch": {k: v for k, v in table["launch"].items() if k != "client"},
        }
    )
    table["capabilities"] = json.loads(capabilities)
    table["implementation"] = f"reference-stomp-{name}"
    if adapter is not None:
        table["adapters"] = {"accepted": adapter}
    return targets_toml({name: table})


# Adapters that break the contract: the storage cases end in ``error`` (the
# harness could not read the node), never in a verdict on the node.
GARBAGE_ADAPTER = "{python} -c \"print('INFO: connecting'); print('{}')\""
FAILING_ADAPTER = "{python} -c \"import sys; print('store locked', file=sys.stderr); sys.exit(3)\""


def test_the_registry_has_a_fault_for_every_receipt_case():
    faults = receipt_faults()
    assert set().union(*faults.values()) == RECEIPT_CASES, faults


@pytest.fixture(scope="module")
def certified(tmp_path_factory):
    """One certification of the correct reference node and of one broken
    node per receipt fault, receipt cases only (-k; their prerequisites,
    the TLS handshake and CONNECT, are put back by the harness)."""
    from tests.harness.cli_runner import certify

    tmp_path = tmp_path_factory.mktemp("receipts")
    faults = receipt_faults()
    text = stomp_target("correct") + stomp_target("no-capabilities", capabilities="[]")
    text += stomp_target("adapter-garbage", adapter=GARBAGE_ADAPTER)
    text += stomp_target("adapter-fails", adapter=FAILING_ADAPTER)
    text += "".join(stomp_target(f"fault-{fault}", fault) for fault in faults)
    targets = tmp_path / "targets.toml"
    targets.write_text(text)
    args = [
        "--targets-file",
        str(targets),
        "-k",
        "receipt_server",
        "--target",
        "correct",
        "--target",
        "no-capabilities",
        "--target",
        "adapter-garbage",
        "--target",
        "adapter-fails",
    ]
    for fault in faults:
        args += ["--target", f"fault-{fault}"]
    return certify(tmp_path, *args, timeout=900), faults


def test_correct_reference_node_passes_every_receipt_case(certified):
    run, _ = certified
    records = run.by_case("correct")
    assert {case: records[case]["outcome"] for case in RECEIPT_CASES} == dict.fromkeys(
        RECEIPT_CASES, "passed"
    ), run.output[-3000:]


def test_without_the_adapter_only_the_wire_rules_apply(certified):
    run, _ = certified
    records = run.by_case("no-capabilities")
    outcomes = {case: records[case]["outcome"] for case in RECEIPT_CASES}
    wire = {
        "stomp.receipt.server.receipt-id-echoes-receipt",
        "stomp.receipt.server.receipts-in-order",
    }
    assert outcomes == {
        case: "passed" if case in wire else "not_applicable" for case in RECEIPT_CASES
    }, outcomes
    assert (
        "lacks the 'accepted' capability"
        in records["stomp.receipt.server.receipted-message-is-stored"]["message"]
    )


def test_each_receipt_fault_fails_exactly_its_own_cases(certified):
    run, faults = certified
    for fault, expected in faults.items():
        name = f"fault-{fault}"
        records = run.by_case(name)
        failed = {case for case, r in records.items() if r["outcome"] == "failed"}
        assert failed == expected, (
            f"{fault}: failed {sorted(failed)}, expected {sorted(expected)}\n{run.output[-3000:]}"
        )
        for case, record in records.items():
            if case in expected:
                # The message names the requirement, its level with what binds
                # it, and its citation.
                # The level with its basis's word: "MUST (erratum)" for the
                # cases whose MUST is erratum STOMP-E4's decision.
                shown = level_with_basis(record["level"], record["basis"])
                assert record["message"].startswith(f"{case} [{shown}, "), record["message"]
            elif record["outcome"] != "passed":
                # A case relying on a broken rule is blocked by it, never failed.
                assert record["outcome"] == "blocked" and record["blocked_by"] in expected, (
                    fault,
                    record,
                )
        assert f"{name} [reference-stomp-{name} 0.1.0, stomp]: NOT CONFORMANT" in run.output, fault


def test_failure_messages_show_what_the_node_did(certified):
    run, _ = certified
    order = run.by_case("fault-receipts-out-of-order")["stomp.receipt.server.receipts-in-order"][
        "message"
    ]
    assert "came after the RECEIPT for SEND" in order and "receipts by SEND number" in order
    echo = run.by_case("fault-wrong-receipt-id")["stomp.receipt.server.receipt-id-echoes-receipt"][
        "message"
    ]
    assert "-x'" in echo and "RECEIPT [receipt-id:" in echo
    stored = run.by_case("fault-receipt-before-store")[
        "stomp.receipt.server.receipted-message-is-stored"
    ]
    assert "is not among the" in stored["message"] and "creditor_id" in stored["message"]
    trace = (run.run_dir / stored["trace_file"]).read_text()
    assert "accepted adapter after the RECEIPT" in trace and "SEND" in trace


@pytest.mark.parametrize(
    "name, words",
    [
        (
            "adapter-garbage",
            [
                "accepted adapter: line 1 is not one JSON object",
                "'INFO: connecting'",
                "docs/stomp-adapter.md",
            ],
        ),
        ("adapter-fails", ["adapter 'accepted' exited with code 3", "store locked"]),
    ],
)
def test_a_broken_adapter_ends_the_storage_cases_in_error(certified, name, words):
    run, _ = certified
    records = run.by_case(name)
    stored = records["stomp.receipt.server.receipted-message-is-stored"]
    assert stored["outcome"] == "error", stored
    for word in words:
        assert word in stored["message"], stored["message"]
    # The wire rules do not need the adapter; the dependents are blocked.
    assert records["stomp.receipt.server.receipt-id-echoes-receipt"]["outcome"] == "passed"
    assert records["stomp.receipt.server.stored-after-restart"]["outcome"] == "blocked"

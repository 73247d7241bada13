"""The fuzzing machines without a live target: the case ids they can blame
are the suites', placeholders expand with the write boundaries kept, the
STOMP judge follows the reference and what the texts allow beyond it."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import pytest

from conformance.cli import build_parser
from conformance.core.redact import Redactor
from conformance.fuzz.cli import duration
from conformance.fuzz.engine import MACHINES, machine_for, round_seed
from conformance.fuzz.machine import Message, bind, send_action
from conformance.fuzz.stomp_server import RECEIPT, StompServerMachine, Track
from conformance.runner.plan import suite_case_ids
from reference_impl.stomp.frame import Frame, FrameParser, encode_frame

CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:0,0\n\n\x00"


def send(receipt: str) -> bytes:
    return encode_frame(
        Frame(
            "SEND",
            (
                ("destination", "/exchange/smp"),
                ("receipt", receipt),
                ("type", "ConfigureAccount"),
                ("content-type", "application/json"),
                ("persistent", "true"),
            ),
            b'{"type":"ConfigureAccount","debtor_id":1,"creditor_id":2,"negligible_amount":2.0,'
            b'"config_flags":0,"config_data":"","ts":"2024-05-20T10:00:00+00:00","seqnum":1}',
        )
    )


@pytest.mark.parametrize("where", sorted(MACHINES))
def test_every_case_a_machine_blames_is_a_case_of_the_suite(where):
    protocol, role = where
    machine = machine_for(protocol, role)
    cases = set(suite_case_ids(protocol))
    assert machine.case_ids, "a machine that can blame no case judges nothing"
    assert set(machine.case_ids) <= cases, sorted(set(machine.case_ids) - cases)
    assert all(case.split(".")[2] == role for case in machine.case_ids)


def stub_machine():
    session = SimpleNamespace(
        begin_example=lambda: None,
        redactor=Redactor(),
        cache={
            "stomp": {"HOST": b"/", "DEST": b"/exchange/smp", "LOGIN": None, "PASSCODE": b"s3cr3t"}
        },
    )
    return bind(StompServerMachine, session)()  # type: ignore[arg-type]


def test_placeholders_expand_and_the_cuts_move_with_the_bytes():
    machine = stub_machine()
    try:
        connect = Message(
            b"CONNECT\nhost:@@HOST@@\nlogin:@@LOGIN@@\npasscode:@@PASSCODE@@\n\n\x00", None, "c"
        )
        receipt = Message(b"SEND\nreceipt:@@R@@\n\n\x00", None, "s")
        template_length = len(connect.data)
        # A cut just after the first message, one inside the second's placeholder.
        action = send_action([connect, receipt], [template_length, template_length + 12])
        messages, writes = machine.expand(action)
        assert messages[0] == b"CONNECT\nhost:/\npasscode:s3cr3t\n\n\x00"  # no login: line left out
        assert messages[1].startswith(b"SEND\nreceipt:" + machine.nonce.encode() + b"-")
        assert b"".join(writes) == b"".join(messages)
        assert writes[0] == messages[0], "the message boundary stays a write boundary"
        # The cut fell inside "receipt:@@R@@\n": it moves past the value, never into it.
        assert writes[1] == messages[1][: messages[1].index(b"\n", 5) + 1]
        assert len(writes) == 3
        _, again = machine.expand(action)
        assert b"".join(again) != b"".join(writes), "each run of an action gets its own nonce"
    finally:
        machine.loop.close()


def feed(track: Track, *chunks: bytes) -> None:
    for chunk in chunks:
        track.feed(chunk, None)


def receipt(receipt_id: str, body: bytes = b"") -> Frame:
    return Frame("RECEIPT", (("receipt-id", receipt_id),), body)


def test_a_receipt_may_stand_for_the_sends_stored_before_it():
    track = Track("plain", frozenset())
    feed(track, CONNECT, send("a") + send("b") + send("c"))
    [connected] = [f for f in FrameParser().receive_data(b"CONNECTED\nversion:1.2\n\n\x00")]
    track.consume(connected)
    track.consume(receipt("c"))  # cumulative receipts: c confirms a and b
    assert track.divergence is None and track.complete
    assert track.receipted() == ["a", "b", "c"]


def test_a_receipt_going_backwards_breaks_receipts_in_order():
    track = Track("plain", frozenset())
    feed(track, CONNECT, send("a") + send("b"))
    track.consume(Frame("CONNECTED", (("version", "1.2"),)))
    track.consume(receipt("b"))
    track.consume(receipt("a"))
    assert track.divergence is not None
    assert track.divergence.case_id == RECEIPT + "receipts-in-order"


@pytest.mark.parametrize(
    "answer, case",
    [
        (receipt("a-x"), RECEIPT + "receipt-id-echoes-receipt"),
        (receipt("a", b"body"), "stomp.frame.server.no-body-on-connected-or-receipt"),
    ],
)
def test_a_wrong_answer_is_blamed_on_its_rule(answer, case):
    track = Track("plain", frozenset())
    track.feed(CONNECT, None)
    track.feed(send("a"), RECEIPT + "receipt-id-echoes-receipt")
    track.consume(Frame("CONNECTED", (("version", "1.2"),)))
    track.consume(answer)
    assert track.divergence is not None and track.divergence.case_id == case


@pytest.mark.parametrize(
    "headers, case",
    [
        ((("receipt-id", "a"),), "stomp.frame.server.error-has-message-header"),
        ((("message", "no type"),), "stomp.frame.server.error-carries-receipt-id"),
        ((("message", "no type"), ("receipt-id", "a")), None),
    ],
)
def test_an_error_needs_its_message_and_receipt_id(headers, case):
    track = Track("plain", frozenset())
    feed(track, CONNECT, send("a").replace(b"type:ConfigureAccount\n", b""))
    track.consume(Frame("CONNECTED", (("version", "1.2"),)))
    track.consume(Frame("ERROR", headers, b"details"))
    if case is None:
        assert track.divergence is None and track.complete and track.closing
    else:
        assert track.divergence is not None and track.divergence.case_id == case


def test_the_lenient_reference_processes_what_the_plain_one_refuses():
    plain, lenient = (
        Track("plain", frozenset()),
        Track("lenient-sends", frozenset({"lenient-sends"})),
    )
    no_type = send("a").replace(b"type:ConfigureAccount\n", b"")
    for track in (plain, lenient):
        feed(track, CONNECT, no_type)
    assert [e.kind for e in plain.expected] == ["CONNECTED", "ERROR"] and plain.closing
    assert [e.kind for e in lenient.expected] == ["CONNECTED", "SEND-RECEIPT"]
    assert not lenient.closing


def test_durations_and_seeds():
    assert duration("90") == 90 and duration("60s") == 60 and duration("10m") == 600
    with pytest.raises(argparse.ArgumentTypeError):
        duration("soon")
    assert round_seed(1, 0) == round_seed(1, 0) != round_seed(1, 1)


def test_the_cli_has_fuzz_and_replay():
    parser = build_parser()
    args = parser.parse_args(["fuzz", "--target", "x", "--budget", "2m", "--seed", "5"])
    assert (args.target, args.budget, args.seed, args.examples) == ("x", 120.0, 5, None)
    args = parser.parse_args(["replay", "f.json", "--target", "y", "--targets-file", "t.toml"])
    assert (args.file, args.target, args.targets_file) == ("f.json", "y", ["t.toml"])

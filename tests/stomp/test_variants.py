"""reference_impl/stomp/variants.py: the STOMP reference node's conformant
variants, in the sans-I/O cores (the certification of each is
``conformance mutation --protocol stomp --variants``)."""

from __future__ import annotations

import pytest

from reference_impl.stomp.__main__ import build_parser
from reference_impl.stomp.client import (
    ClientSession,
    ClientSettings,
    Connected,
    Disconnected,
    OutgoingMessage,
    State,
    variant_settings,
)
from reference_impl.stomp.frame import HEARTBEAT, Frame, FrameParser, encode_frame
from reference_impl.stomp.server import ServerConnection
from reference_impl.stomp.smp import example_message
from reference_impl.stomp.variants import (
    CLIENT_HEART_BEAT,
    SPECS,
    VARIANT_HEADER,
    FrameStyle,
)

from .test_server_core import CONNECT, connected, frames, send_frame

TYPES = ("ConfigureAccount", "PrepareTransfer", "FinalizeTransfer")


def settings() -> ClientSettings:
    return ClientSettings(host="/1234", destination="/exchange/smp-1234", receipt_prefix="p")


def receipt(receipt_id: str) -> bytes:
    return encode_frame(Frame("RECEIPT", (("receipt-id", receipt_id),)))


def connected_session(count: int, variants: set[str]) -> tuple[ClientSession, list[Frame]]:
    """A client session with the variants' settings, CONNECT answered; the
    frames it sent after CONNECT."""
    messages = [
        OutgoingMessage.from_json(TYPES[i % 3], example_message(TYPES[i % 3])) for i in range(count)
    ]
    session = ClientSession(
        variant_settings(settings(), frozenset(variants)), messages, variants=variants
    )
    session.start_connection()
    session.data_to_send()
    events = session.receive_data(encode_frame(Frame("CONNECTED", (("version", "1.2"),))))
    assert isinstance(events[0], Connected)
    return session, frames(session.data_to_send())


def names(role: str) -> list[str]:
    return [spec.name for spec in SPECS if role in spec.roles]


def test_every_variant_cites_its_sentence_and_the_command_line_takes_it():
    assert len({spec.name for spec in SPECS}) == len(SPECS)
    for spec in SPECS:
        assert spec.allowed_by and spec.description
    common = ["--cert", "c", "--key", "k", "--ca", "a"]
    for name in names("server"):
        args = build_parser().parse_args(["serve", *common, "--store", "s", "--variant", name])
        assert args.variant == [name]
    for name in names("client"):
        args = build_parser().parse_args(
            [
                "client",
                "--manifest",
                "m",
                "--node-id",
                "1",
                *common,
                "--messages",
                "x",
                "--variant",
                name,
            ]
        )
        assert args.variant == [name]


def test_frame_style_encodings_parse_back_to_the_same_frame():
    frame = Frame("RECEIPT", (("receipt-id", "a:b"),))
    for style in (
        FrameStyle(crlf=True),
        FrameStyle(extra_eols=True),
        FrameStyle(content_length=True),
        FrameStyle(True, True, True),
    ):
        data = style.encode(frame)
        items = FrameParser().receive_data(data)
        assert items[0].command == "RECEIPT" and items[0].get("receipt-id") == "a:b"
        assert all(item is HEARTBEAT for item in items[1:])
    assert FrameStyle(crlf=True).encode(frame).startswith(b"RECEIPT\r\n")
    assert len(FrameParser().receive_data(FrameStyle(extra_eols=True).encode(frame))) == 4
    assert FrameStyle(content_length=True).encode(frame).count(b"content-length:0") == 1
    assert FrameStyle().encode(frame) == b"RECEIPT\nreceipt-id:a\\cb\n\n\x00"


def test_server_extra_headers_and_minimal_connected():
    conn = ServerConnection(session_id="s1", variants={"extra-headers"})
    conn.receive_data(CONNECT)
    [connected_frame] = frames(conn.data_to_send())
    assert [name for name, _ in connected_frame.headers] == [
        "session",
        "server",
        "heart-beat",
        "version",
    ]
    [request] = conn.receive_data(send_frame("r1"))
    conn.stored(request.request_id)
    [answer] = frames(conn.data_to_send())
    assert answer.headers == (VARIANT_HEADER, ("receipt-id", "r1"))
    conn = ServerConnection(session_id="s1", variants={"minimal-connected"})
    conn.receive_data(CONNECT)
    [connected_frame] = frames(conn.data_to_send())
    assert [name for name, _ in connected_frame.headers] == ["version", "heart-beat"]


def test_server_bare_errors_have_no_body():
    conn = connected(variants={"bare-errors"})
    conn.receive_data(send_frame("r1", drop=("destination",)))
    [error] = frames(conn.data_to_send())
    assert error.command == "ERROR" and not error.body
    assert (
        error.get("message") and error.get("receipt-id") == "r1" and not error.has("content-type")
    )
    assert conn.closing


def test_server_lenient_sends_processes_what_the_profile_forbids_senders():
    conn = connected(variants={"lenient-sends"})
    [request] = conn.receive_data(
        send_frame("r1", drop=("type", "content-type"), persistent="false", body=b"not json")
    )
    assert request.message.type == "" and request.message.body == b"not json"
    conn.stored(request.request_id)
    [answer] = frames(conn.data_to_send())
    assert answer.command == "RECEIPT" and answer.get("receipt-id") == "r1"
    conn.receive_data(send_frame("r2", drop=("destination",)))
    assert [frame.command for frame in frames(conn.data_to_send())] == ["ERROR"]


def test_server_cumulative_receipts_sends_the_last_of_those_stored_together():
    conn = connected(variants={"cumulative-receipts"})
    requests = conn.receive_data(send_frame("r1") + send_frame("r2") + send_frame("r3"))
    for request in requests:
        conn.stored(request.request_id)
    assert [frame.get("receipt-id") for frame in frames(conn.data_to_send())] == ["r3"]
    # Stored apart (the caller writes in between): a RECEIPT each.
    [request] = conn.receive_data(send_frame("r4"))
    conn.stored(request.request_id)
    assert [frame.get("receipt-id") for frame in frames(conn.data_to_send())] == ["r4"]
    # A DISCONNECT's RECEIPT is never left out, and goes after the last SEND's.
    requests = conn.receive_data(
        send_frame("r5") + send_frame("r6") + b"DISCONNECT\nreceipt:d\n\n\x00"
    )
    for request in requests:
        conn.stored(request.request_id)
    assert [frame.get("receipt-id") for frame in frames(conn.data_to_send())] == ["r6", "d"]
    assert conn.finished


def test_client_connection_per_message_disconnects_after_each_receipt():
    session, sent = connected_session(3, {"connection-per-message"})
    assert [frame.command for frame in sent] == ["SEND"]
    session.receive_data(receipt(sent[0].get("receipt")))
    [disconnect] = frames(session.data_to_send())
    assert disconnect.command == "DISCONNECT"
    events = session.receive_data(receipt(disconnect.get("receipt")))
    assert isinstance(events[-1], Disconnected) and not session.finished


@pytest.mark.parametrize("variant", ["linger", "close-without-disconnect"])
def test_client_after_the_last_receipt(variant):
    session, sent = connected_session(1, {variant})
    session.receive_data(receipt(sent[0].get("receipt")))
    assert session.data_to_send() == b""
    if variant == "linger":
        assert session.lingering and session.state is State.OPEN
        session.end_linger()
        assert [frame.command for frame in frames(session.data_to_send())] == ["DISCONNECT"]
    else:
        assert session.closing and session.finished


def test_client_send_and_connect_headers():
    session, sent = connected_session(1, {"extra-headers", "json-charset"})
    assert sent[0].headers[0] == VARIANT_HEADER
    assert [name for name, _ in sent[0].headers][1:] == [
        "persistent",
        "content-type",
        "type",
        "receipt",
        "destination",
        "content-length",
    ]
    assert sent[0].get("content-type") == "application/json;charset=utf-8"
    session = ClientSession(
        variant_settings(settings(), frozenset({"other-heart-beats"})),
        [],
        variants={"extra-headers"},
    )
    session.start_connection()
    [connect] = frames(session.data_to_send())
    assert connect.headers[0] == ("heart-beat", "%d,%d" % CLIENT_HEART_BEAT)
    assert connect.headers[-1] == ("accept-version", "1.2")

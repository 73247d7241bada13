"""reference_impl/stomp/server.py: the sans-I/O server connection.

Bytes in, store requests and bytes out: what it answers, what it refuses
(and that it closes after every ERROR), and the receipt rule of the
Swaptacular profile: no RECEIPT leaves before every earlier SEND of the
connection is confirmed stored."""

from __future__ import annotations

import pytest

from reference_impl.stomp.faults import Fault
from reference_impl.stomp.frame import Frame, FrameParser, encode_frame
from reference_impl.stomp.server import ServerConnection, StoreRequest
from reference_impl.stomp.smp import encode_message, example_message

CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00"
BODY = encode_message(example_message("ConfigureAccount"))


def send_frame(
    receipt: str | None = "r1",
    *,
    body: bytes = BODY,
    drop: tuple[str, ...] = (),
    extra: tuple[tuple[str, str], ...] = (),
    **overrides: str,
) -> bytes:
    headers = {
        "destination": "/exchange/smp",
        "receipt": receipt,
        "type": "ConfigureAccount",
        "content-type": "application/json",
        "persistent": "true",
    }
    headers.update({name.replace("_", "-"): value for name, value in overrides.items()})
    pairs = tuple(
        (name, value) for name, value in headers.items() if value is not None and name not in drop
    )
    return encode_frame(Frame("SEND", pairs + extra, body))


def frames(data: bytes) -> list[Frame]:
    return [item for item in FrameParser().receive_data(data) if isinstance(item, Frame)]


def connected(**kwargs) -> ServerConnection:
    conn = ServerConnection(**kwargs)
    assert conn.receive_data(CONNECT) == []
    [frame] = frames(conn.data_to_send())
    assert frame.command == "CONNECTED"
    return conn


def only_error(conn: ServerConnection) -> Frame:
    out = frames(conn.data_to_send())
    assert [frame.command for frame in out] == ["ERROR"], out
    assert conn.closing and conn.finished
    return out[0]


# ---------------------------------------------------------------- CONNECT


@pytest.mark.parametrize("command", ["CONNECT", "STOMP"])
def test_connect_and_stomp_get_connected_1_2(command):
    conn = ServerConnection(session_id="s9")
    conn.receive_data(f"{command}\naccept-version:1.0,1.1,1.2\nhost:/node\n\n\x00".encode())
    [frame] = frames(conn.data_to_send())
    assert frame.command == "CONNECTED"
    assert frame.get("version") == "1.2"
    assert frame.get("heart-beat") == "1000,10000"
    assert frame.get("session") == "s9"
    assert conn.connected and not conn.closing


def test_login_and_passcode_not_required_nor_checked():
    conn = ServerConnection()
    conn.receive_data(b"CONNECT\naccept-version:1.2\nhost:/\nlogin:x\npasscode:secret\n\n\x00")
    assert frames(conn.data_to_send())[0].command == "CONNECTED"


@pytest.mark.parametrize(
    "client, ours, expected",
    [
        ("0,0", (1000, 10000), (0, 0)),
        ("0,500", (1000, 10000), (1000, 0)),  # they want ours every 500, we can do 1000: max
        ("0,5000", (1000, 10000), (5000, 0)),
        ("3000,0", (1000, 10000), (0, 10000)),  # they can send every 3000, we want 10000: max
        ("20000,20000", (1000, 10000), (20000, 20000)),
        ("500,500", (0, 0), (0, 0)),
    ],
)
def test_heart_beat_negotiation(client, ours, expected):
    conn = ServerConnection(heart_beat=ours)
    conn.receive_data(f"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:{client}\n\n\x00".encode())
    [frame] = frames(conn.data_to_send())
    assert frame.get("heart-beat") == f"{ours[0]},{ours[1]}"
    assert conn.heart_beats == expected


def test_no_heart_beat_header_means_none():
    conn = connected()
    assert conn.heart_beats == (0, 0)


@pytest.mark.parametrize(
    "frame, message",
    [
        (b"CONNECT\nhost:/\n\n\x00", "unsupported protocol version"),
        (b"CONNECT\naccept-version:1.0,1.1\nhost:/\n\n\x00", "unsupported protocol version"),
        (b"CONNECT\naccept-version:1.2\n\n\x00", "missing host header"),
        (b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:10\n\n\x00", "bad heart-beat header"),
        (b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:-1,0\n\n\x00", "bad heart-beat header"),
        (b"CONNECT\naccept-version:1.2\nhost:/\ncontent-length:1\n\nx\x00", "body on CONNECT"),
    ],
)
def test_connect_refusals(frame, message):
    conn = ServerConnection()
    conn.receive_data(frame)
    error = only_error(conn)
    assert error.get("message") == message
    if message == "unsupported protocol version":
        assert error.get("version") == "1.2"  # Protocol Negotiation: the versions we support


def test_connect_error_does_not_echo_passcode():
    conn = ServerConnection()
    conn.receive_data(b"CONNECT\nhost:/\npasscode:hunter2\n\n\x00")
    error = only_error(conn)
    assert b"hunter2" not in encode_frame(error)


@pytest.mark.parametrize(
    "data",
    [send_frame(), b"DISCONNECT\nreceipt:1\n\n\x00", b"SUBSCRIBE\nid:0\ndestination:/q\n\n\x00"],
)
def test_frames_before_connect_get_error(data):
    conn = ServerConnection()
    assert conn.receive_data(data) == []
    assert only_error(conn).get("message") == "not connected"


def test_eols_before_connect_are_ignored():
    conn = ServerConnection()
    conn.receive_data(b"\n\r\n" + CONNECT)
    assert frames(conn.data_to_send())[0].command == "CONNECTED"


def test_second_connect_refused():
    conn = connected()
    conn.receive_data(CONNECT)
    assert only_error(conn).get("message") == "already connected"


@pytest.mark.parametrize(
    "command", ["SUBSCRIBE", "UNSUBSCRIBE", "BEGIN", "COMMIT", "ABORT", "ACK", "NACK"]
)
def test_optional_commands_refused(command):
    conn = connected()
    conn.receive_data(
        f"{command}\nid:0\ntransaction:t\ndestination:/q\nreceipt:x7\n\n\x00".encode()
    )
    error = only_error(conn)
    assert error.get("message") == "unsupported command"
    assert error.get("receipt-id") == "x7"


@pytest.mark.parametrize("command", ["CONNECTED", "MESSAGE", "RECEIPT", "ERROR"])
def test_server_commands_from_client_refused(command):
    conn = connected()
    conn.receive_data(f"{command}\n\n\x00".encode())
    assert only_error(conn).get("message") == "server frame from a client"


# ---------------------------------------------------------------- SEND and RECEIPT


def test_receipt_only_after_store_confirmed():
    conn = connected()
    [request] = conn.receive_data(send_frame("m-1"))
    assert isinstance(request, StoreRequest)
    assert request.message.destination == "/exchange/smp" and request.message.receipt == "m-1"
    assert request.message.type == "ConfigureAccount" and request.message.body == BODY
    assert conn.data_to_send() == b""  # not stored yet: no RECEIPT
    conn.stored(request.request_id)
    [receipt] = frames(conn.data_to_send())
    assert receipt == Frame("RECEIPT", (("receipt-id", "m-1"),))


def test_receipts_wait_for_every_earlier_store_and_keep_order():
    conn = connected()
    requests = conn.receive_data(b"".join(send_frame(f"m-{i}") for i in range(5)))
    assert [r.request_id for r in requests] == [1, 2, 3, 4, 5]
    conn.stored(3)
    conn.stored(2)
    assert conn.data_to_send() == b""  # store 1 still pending: nothing may overtake it
    conn.stored(1)
    assert [f.get("receipt-id") for f in frames(conn.data_to_send())] == ["m-0", "m-1", "m-2"]
    conn.stored(5)
    assert conn.data_to_send() == b""
    conn.stored(4)
    assert [f.get("receipt-id") for f in frames(conn.data_to_send())] == ["m-3", "m-4"]


def test_disconnect_receipt_waits_for_earlier_stores():
    conn = connected()
    [request] = conn.receive_data(send_frame("m-1") + b"DISCONNECT\nreceipt:bye\n\n\x00")
    assert conn.closing and not conn.finished and conn.disconnected
    assert conn.data_to_send() == b""
    conn.stored(request.request_id)
    assert [f.get("receipt-id") for f in frames(conn.data_to_send())] == ["m-1", "bye"]
    assert conn.finished


def test_disconnect_without_receipt_closes_quietly():
    conn = connected()
    conn.receive_data(b"DISCONNECT\n\n\x00" + send_frame())
    assert conn.data_to_send() == b"" and conn.finished


def test_input_after_disconnect_ignored():
    conn = connected()
    conn.receive_data(b"DISCONNECT\nreceipt:1\n\n\x00")
    assert conn.receive_data(send_frame()) == []


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"drop": ("destination",)}, "missing destination"),
        ({"destination": ""}, "missing destination"),
        ({"drop": ("type",)}, "missing type header"),
        ({"drop": ("content-type",)}, "missing content-type header"),
        ({"drop": ("persistent",)}, "persistent must be true"),
        ({"persistent": "false"}, "persistent must be true"),
        ({"persistent": "TRUE"}, "persistent must be true"),
        ({"content_type": "text/plain"}, "unsupported content-type"),
        ({"content_type": "application/json;charset=latin-1"}, "unsupported content-type"),
        ({"type": "NoSuchType"}, "unknown message type"),
        (
            {"type": "PrepareTransfer"},
            "invalid SMP message",
        ),  # the body's type says ConfigureAccount
        ({"body": b"not json"}, "invalid SMP message"),
        ({"body": b"\xff\xfe"}, "invalid SMP message"),
        ({"body": b""}, "invalid SMP message"),
        ({"body": b'{"type":"ConfigureAccount"}'}, "invalid SMP message"),
        ({"extra": (("transaction", "t1"),)}, "transactions not supported"),
    ],
)
def test_send_refusals_error_with_receipt_id_then_close(kwargs, message):
    conn = connected()
    assert conn.receive_data(send_frame("bad-1", **kwargs)) == []
    error = only_error(conn)
    assert error.get("message") == message
    assert error.get("receipt-id") == "bad-1"
    assert error.get("content-type") == "text/plain" and error.body
    assert conn.accepted == 0


def test_missing_receipt_refused_without_receipt_id():
    conn = connected()
    assert conn.receive_data(send_frame(None)) == []
    error = only_error(conn)
    assert error.get("message") == "missing receipt header" and error.get("receipt-id") is None


def test_invalid_smp_error_names_the_field():
    message = example_message("ConfigureAccount")
    message["seqnum"] = 1 << 40
    conn = connected()
    conn.receive_data(send_frame(body=encode_message(message)))
    assert b"seqnum" in only_error(conn).body


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "Application/JSON",
        "application/json;charset=utf-8",
        "application/json; charset=UTF-8",
    ],
)
def test_json_content_types_accepted(content_type):
    conn = connected()
    [request] = conn.receive_data(send_frame(content_type=content_type))
    assert request.message.content_type == content_type


def test_empty_receipt_value_accepted():
    conn = connected()
    [request] = conn.receive_data(send_frame(""))
    conn.stored(request.request_id)
    assert frames(conn.data_to_send())[0].get("receipt-id") == ""


def test_repeated_header_first_wins_and_user_headers_kept():
    conn = connected()
    data = send_frame(extra=(("destination", "/second"), ("x-user", "kept")))
    [request] = conn.receive_data(data)
    assert request.message.destination == "/exchange/smp"
    assert ("x-user", "kept") in request.message.headers


def test_escaped_header_values_are_unescaped():
    conn = connected()
    [request] = conn.receive_data(send_frame(destination="/a:b\\c\nd"))
    assert request.message.destination == "/a:b\\c\nd"
    assert b"destination:/a\\cb\\\\c\\nd" in send_frame(destination="/a:b\\c\nd")


def test_crlf_line_ends_and_heart_beats_between_frames_accepted():
    conn = ServerConnection()
    conn.receive_data(CONNECT.replace(b"\n", b"\r\n") + b"\r\n\n")
    assert frames(conn.data_to_send())[0].command == "CONNECTED"
    data = send_frame().replace(
        b"\n", b"\r\n", send_frame().index(b"\n\n") + 1
    )  # header lines only
    [request] = conn.receive_data(b"\n" + data + b"\r\n\n")
    assert request.message.body == BODY


def test_pipelined_frames_split_anywhere():
    data = b"".join(send_frame(f"m-{i}") for i in range(3))
    conn = connected()
    requests = []
    for byte in range(len(data)):
        requests += conn.receive_data(data[byte : byte + 1])
    assert [r.message.receipt for r in requests] == ["m-0", "m-1", "m-2"]


# ---------------------------------------------------------------- malformed frames, failures


@pytest.mark.parametrize(
    "data",
    [
        b"SEND\ndestination:/a\\tb\n\n\x00",  # undefined escape
        b"SEND\ndestination:/q\nx-a:ab\\\n\n\x00",  # a lone backslash ends the value
        b"SEND\ndestination:/q\nx-a\\:b\n\n\x00",  # and the name
        b"SEND\nno colon here\n\n\x00",
        b"SEND\n:empty-name\n\n\x00",
        b"FLY\n\n\x00",
        b"SEND\ncontent-length:x\n\n\x00",
        b"SEND\ncontent-length:2\n\nabc\x00",
        b"SEND\ndestination:/a\rb\n\n\x00",
    ],
)
def test_malformed_frame_error_then_close(data):
    conn = connected()
    assert conn.receive_data(data) == []
    error = only_error(conn)
    assert error.get("message") == "malformed frame"
    assert conn.receive_data(send_frame()) == []


def test_oversized_frame_refused_with_bounded_buffer():
    conn = connected(max_frame_bytes=4096)
    conn.receive_data(b"SEND\ndestination:/q\n\n" + b"x" * 5000)
    assert only_error(conn).get("message") == "malformed frame"


def test_frames_before_a_malformed_one_are_processed_first():
    conn = connected()
    [request] = conn.receive_data(send_frame("ok") + b"SEND\nbad\\q:1\n\n\x00")
    assert conn.data_to_send() == b""  # the ERROR waits behind the RECEIPT
    conn.stored(request.request_id)
    assert [f.command for f in frames(conn.data_to_send())] == ["RECEIPT", "ERROR"]
    assert conn.finished


def test_store_failure_is_error_with_receipt_id_and_drops_later_output():
    conn = connected()
    first, second, third = conn.receive_data(b"".join(send_frame(f"m-{i}") for i in range(3)))
    conn.stored(first.request_id)
    conn.store_failed(second.request_id, "disk full")
    conn.stored(third.request_id)
    out = frames(conn.data_to_send())
    assert [(f.command, f.get("receipt-id")) for f in out] == [("RECEIPT", "m-0"), ("ERROR", "m-1")]
    assert conn.finished


def test_heart_beat_timeout_error_then_close():
    conn = connected()
    conn.heart_beat_timeout()
    assert only_error(conn).get("message") == "heart-beat timeout"


def test_eof_finishes_once_stores_are_confirmed():
    conn = connected()
    [request] = conn.receive_data(send_frame())
    conn.receive_eof()
    assert conn.closing and not conn.finished
    conn.stored(request.request_id)
    conn.data_to_send()
    assert conn.finished


# ---------------------------------------------------------------- faults of the core


def test_fault_connected_without_version():
    conn = ServerConnection(faults={Fault.CONNECTED_WITHOUT_VERSION})
    conn.receive_data(CONNECT)
    assert frames(conn.data_to_send())[0].get("version") is None


@pytest.mark.parametrize(
    "fault, data",
    [
        (Fault.REFUSE_STOMP_COMMAND, b"STOMP\naccept-version:1.2\nhost:/\n\n\x00"),
        (Fault.REQUIRE_LOGIN, CONNECT),
        (Fault.REQUIRE_PASSCODE, CONNECT),
    ],
)
def test_connect_faults_refuse(fault, data):
    conn = ServerConnection(faults={fault})
    conn.receive_data(data)
    only_error(conn)


def test_fault_wrong_receipt_id_and_out_of_order():
    conn = connected(faults={Fault.WRONG_RECEIPT_ID})
    [request] = conn.receive_data(send_frame("a"))
    conn.stored(request.request_id)
    assert frames(conn.data_to_send())[0].get("receipt-id") == "a-x"
    conn = connected(faults={Fault.RECEIPTS_OUT_OF_ORDER})
    requests = conn.receive_data(send_frame("a") + send_frame("b"))
    for request in requests:
        conn.stored(request.request_id)
    assert [f.get("receipt-id") for f in frames(conn.data_to_send())] == ["b", "a"]


def test_fault_receipt_before_store():
    conn = connected(faults={Fault.RECEIPT_BEFORE_STORE})
    conn.receive_data(send_frame("a"))
    assert frames(conn.data_to_send())[0].get("receipt-id") == "a"


def test_fault_malformed_handling():
    conn = connected(faults={Fault.NO_ERROR_ON_MALFORMED})
    conn.receive_data(b"SEND\nx\\t:1\n\n\x00")
    assert conn.data_to_send() == b"" and conn.finished
    conn = connected(faults={Fault.OPEN_AFTER_ERROR})
    conn.receive_data(b"SEND\nx\\t:1\n\n\x00")
    assert frames(conn.data_to_send())[0].command == "ERROR" and not conn.closing


def test_fault_header_handling():
    conn = connected(faults={Fault.LAST_HEADER_WINS})
    [request] = conn.receive_data(send_frame(extra=(("destination", "/second"),)))
    assert request.message.destination == "/second"
    conn = connected(faults={Fault.NO_HEADER_UNESCAPE})
    [request] = conn.receive_data(send_frame(destination="/a:b"))
    assert request.message.destination == "/a\\cb"


def test_fault_keep_trailing_backslash():
    """The value ending in a lone backslash keeps it; \\t is still fatal."""
    trailing = send_frame("r1").replace(b"receipt:r1\n", b"receipt:r1\\\n")
    assert connected().receive_data(trailing) == []
    conn = connected(faults={Fault.KEEP_TRAILING_BACKSLASH})
    [request] = conn.receive_data(trailing)
    assert request.message.receipt == "r1\\"
    escaped = send_frame("r1").replace(b"receipt:r1\n", b"receipt:r1\\\\\\\n")
    [request] = connected(faults={Fault.KEEP_TRAILING_BACKSLASH}).receive_data(escaped)
    assert request.message.receipt == "r1\\\\"
    conn = connected(faults={Fault.KEEP_TRAILING_BACKSLASH})
    conn.receive_data(send_frame("r1").replace(b"receipt:r1\n", b"receipt:r\\t1\n"))
    assert only_error(conn).get("message") == "malformed frame"


def test_fault_refusals_of_valid_input():
    conn = connected(faults={Fault.REFUSE_HEART_BEATS})
    conn.receive_data(b"\n")
    only_error(conn)
    conn = connected(faults={Fault.REFUSE_CRLF})
    conn.receive_data(send_frame().replace(b"\n", b"\r\n", 2))
    only_error(conn)
    conn = connected(faults={Fault.ACCEPT_MISSING_DESTINATION})
    assert len(conn.receive_data(send_frame(drop=("destination",)))) == 1
    conn = connected(faults={Fault.NO_DISCONNECT_RECEIPT})
    conn.receive_data(b"DISCONNECT\nreceipt:1\n\n\x00")
    assert conn.data_to_send() == b"" and conn.finished


def test_fault_body_ends_at_nul_reads_the_rest_as_frames():
    body = BODY + b"\x00DISCONNECT\nreceipt:smuggled\n\n"
    conn = connected()
    conn.receive_data(send_frame("n", body=body))
    assert (
        only_error(conn).get("message") == "invalid SMP message"
    )  # conformant: one SEND, not JSON
    conn = connected(faults={Fault.BODY_ENDS_AT_NUL})
    [request] = conn.receive_data(send_frame("n", body=body))
    assert request.message.body == BODY
    conn.stored(request.request_id)
    assert [f.get("receipt-id") for f in frames(conn.data_to_send())] == ["n", "smuggled"]


def test_fault_silent_on_invalid_body_and_open_after_profile_error():
    conn = connected(faults={Fault.SILENT_ON_INVALID_BODY})
    assert conn.receive_data(send_frame(body=b"{")) == []
    assert conn.data_to_send() == b"" and not conn.closing
    conn = connected(faults={Fault.OPEN_AFTER_PROFILE_ERROR})
    conn.receive_data(send_frame(drop=("type",)) + b"DISCONNECT\nreceipt:1\n\n\x00")
    assert [f.command for f in frames(conn.data_to_send())] == ["ERROR"] and not conn.closing
    conn = connected(faults={Fault.OPEN_AFTER_PROFILE_ERROR})
    conn.receive_data(send_frame(drop=("destination",)))
    only_error(conn)  # other refusals still close


def test_fault_refuse_connect_command():
    conn = ServerConnection(faults={Fault.REFUSE_CONNECT_COMMAND})
    conn.receive_data(CONNECT)
    only_error(conn)
    conn = ServerConnection(faults={Fault.REFUSE_CONNECT_COMMAND})
    conn.receive_data(b"STOMP\naccept-version:1.2\nhost:/\n\n\x00")
    assert frames(conn.data_to_send())[0].command == "CONNECTED"

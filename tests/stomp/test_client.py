"""The reference STOMP client: the sans-I/O session (reference_impl/stomp/
client.py) frame by frame, and the asyncio client end to end against the
reference server on loopback with this run's certificates, including a
connection dropped before the RECEIPT and the resend that must follow."""

from __future__ import annotations

import asyncio
import json
import ssl
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from ..fuzz_budget import examples

from conformance.core.pki import harness_client_context, harness_server_context, make_pki
from reference_impl.stomp.client import (
    ClientFailure,
    ClientFault,
    ClientSession,
    ClientSettings,
    Connected,
    Delivered,
    Disconnected,
    OutgoingMessage,
    ProtocolViolation,
    ServerError,
    State,
    parse_messages,
    run_client,
    settings_from_manifest,
    tls_context,
)
from reference_impl.stomp.frame import HEARTBEAT, Frame, FrameParser, encode_frame
from reference_impl.stomp.manifest import parse_manifest
from reference_impl.stomp.smp import example_message

REPO_ROOT = Path(__file__).resolve().parents[2]
TYPES = ("ConfigureAccount", "PrepareTransfer", "FinalizeTransfer", "AccountUpdate", "AccountPurge")


def messages(count: int = 3) -> list[OutgoingMessage]:
    return [
        OutgoingMessage.from_json(TYPES[i % len(TYPES)], example_message(TYPES[i % len(TYPES)]))
        for i in range(count)
    ]


def settings(**changes) -> ClientSettings:
    values = dict(host="/1234", destination="/exchange/smp-1234", login="1234", receipt_prefix="p")
    values.update(changes)
    return ClientSettings(**values)


def frames_of(data: bytes) -> list[Frame]:
    return [item for item in FrameParser().receive_data(data) if item is not HEARTBEAT]


def wire(frame: Frame) -> bytes:
    return encode_frame(frame)


CONNECTED = wire(Frame("CONNECTED", (("version", "1.2"), ("heart-beat", "0,0"))))


def receipt(receipt_id: str) -> bytes:
    return wire(Frame("RECEIPT", (("receipt-id", receipt_id),)))


def connected_session(count: int = 3, faults=(), **changes) -> tuple[ClientSession, list[Frame]]:
    """A session with CONNECT answered; the frames it sent after CONNECT."""
    session = ClientSession(settings(**changes), messages(count), faults=faults)
    session.start_connection()
    session.data_to_send()
    events = session.receive_data(CONNECTED)
    assert isinstance(events[0], Connected)
    return session, frames_of(session.data_to_send())


# --------------------------------------------------------------------------- CONNECT


def test_connect_frame_carries_the_profile_headers():
    session = ClientSession(settings(passcode="secret"), messages(1))
    session.start_connection()
    (connect,) = frames_of(session.data_to_send())
    assert connect.command == "CONNECT"
    assert connect.headers == (
        ("accept-version", "1.2"),
        ("host", "/1234"),
        ("login", "1234"),
        ("passcode", "secret"),
        ("heart-beat", "10000,10000"),
    )
    assert session.state is State.CONNECTING


def test_connect_headers_are_not_escaped():
    """STOMP 1.2, Value Encoding: CONNECT is not escaped, so a backslash or a
    colon goes out as it is."""
    session = ClientSession(settings(host="/a:b\\c"), messages(1))
    session.start_connection()
    data = session.data_to_send()
    assert b"\nhost:/a:b\\c\n" in data


@pytest.mark.parametrize("bad", ["/a\nb", "/a\rb", "/a\0b"])
def test_values_a_connect_frame_cannot_carry_are_refused(bad):
    with pytest.raises(ValueError, match="CONNECT"):
        settings(host=bad)
    with pytest.raises(ValueError, match="CONNECT"):
        settings(login=bad)


def test_login_and_passcode_are_left_out_when_the_manifest_has_none():
    session = ClientSession(settings(login=None), messages(1))
    session.start_connection()
    (connect,) = frames_of(session.data_to_send())
    assert not connect.has("login") and not connect.has("passcode")


def test_passcode_is_not_in_the_settings_repr():
    assert "secret" not in repr(settings(passcode="secret"))


# --------------------------------------------------------------------------- SEND


def test_sends_carry_every_required_header_and_the_json_body():
    session, sent = connected_session(3)
    assert [frame.command for frame in sent] == ["SEND"] * 3
    for index, frame in enumerate(sent):
        assert frame.get("destination") == "/exchange/smp-1234"
        assert frame.get("receipt") == f"p-{index}"
        assert frame.get("type") == TYPES[index]
        assert frame.get("content-type") == "application/json"
        assert frame.get("persistent") == "true"
        assert frame.get("content-length") == str(len(frame.body))
        assert json.loads(frame.body) == example_message(TYPES[index])


def test_send_headers_are_escaped():
    """Every frame but CONNECT/CONNECTED escapes colons (STOMP 1.2, Value Encoding)."""
    session = ClientSession(settings(destination="/ex:1"), messages(1))
    session.start_connection()
    session.data_to_send()
    session.receive_data(CONNECTED)
    data = session.data_to_send()
    assert b"\ndestination:/ex\\c1\n" in data
    assert frames_of(data)[0].get("destination") == "/ex:1"


def test_receipt_ids_are_unique():
    session, sent = connected_session(5)
    ids = [frame.get("receipt") for frame in sent]
    assert len(set(ids)) == 5


def test_window_bounds_sends_in_flight():
    session, sent = connected_session(5, window=2)
    assert [frame.get("receipt") for frame in sent] == ["p-0", "p-1"]
    session.receive_data(receipt("p-0"))
    assert [frame.get("receipt") for frame in frames_of(session.data_to_send())] == ["p-2"]
    session.receive_data(receipt("p-2"))
    assert [frame.get("receipt") for frame in frames_of(session.data_to_send())] == ["p-3", "p-4"]


# --------------------------------------------------------------------------- RECEIPT


def test_nothing_is_delivered_before_its_receipt():
    session, _ = connected_session(3)
    assert session.delivered == [] and not session.all_delivered
    assert session.receive_data(b"\n") == []  # a heart-beat confirms nothing
    assert session.delivered == []


def test_a_receipt_confirms_every_earlier_send():
    """Profile, footnote 2: every RECEIPT confirms all preceding messages."""
    session, _ = connected_session(4)
    events = session.receive_data(receipt("p-2"))
    assert events == [Delivered(0, "p-0"), Delivered(1, "p-1"), Delivered(2, "p-2")]
    assert session.receive_data(receipt("p-3")) == [Delivered(3, "p-3")]
    assert session.all_delivered


def test_receipts_split_across_reads_and_byte_by_byte():
    session, _ = connected_session(2)
    data = receipt("p-0") + b"\n" + receipt("p-1")
    events = []
    for index in range(len(data)):
        events += session.receive_data(data[index : index + 1])
    assert [event for event in events if isinstance(event, Delivered)] == [
        Delivered(0, "p-0"),
        Delivered(1, "p-1"),
    ]


def test_disconnect_with_receipt_after_everything_is_delivered():
    session, _ = connected_session(2)
    session.receive_data(receipt("p-1"))
    (disconnect,) = frames_of(session.data_to_send())
    assert disconnect.command == "DISCONNECT" and disconnect.get("receipt")
    assert session.state is State.DISCONNECTING and session.finished
    session.heartbeat()
    assert session.data_to_send() == b"\n"
    events = session.receive_data(receipt(disconnect.get("receipt")))
    assert events == [Disconnected()]
    assert session.closing
    assert session.data_to_send() == b""


def test_unknown_receipt_id_confirms_nothing_and_ends_the_connection():
    session, _ = connected_session(2)
    (event,) = session.receive_data(receipt("not-ours"))
    assert isinstance(event, ProtocolViolation) and "not-ours" in event.reason
    assert session.delivered == [] and session.closing


def test_receipt_without_receipt_id_is_a_violation():
    session, _ = connected_session(1)
    (event,) = session.receive_data(wire(Frame("RECEIPT")))
    assert isinstance(event, ProtocolViolation) and session.delivered == []


# --------------------------------------------------------------------------- dropped connections


def test_unreceipted_messages_are_sent_again_after_a_drop():
    session, first = connected_session(4)
    session.receive_data(receipt("p-1"))
    session.data_to_send()
    session.connection_lost()
    assert session.state is State.IDLE and not session.finished
    session.start_connection()
    (connect,) = frames_of(session.data_to_send())
    assert connect.command == "CONNECT"
    session.receive_data(CONNECTED)
    again = frames_of(session.data_to_send())
    # the same SENDs, same receipt ids (a message id), delivered ones not again
    assert [frame.get("receipt") for frame in again] == ["p-2", "p-3"]
    assert [frame.body for frame in again] == [frame.body for frame in first[2:]]
    assert session.receive_data(receipt("p-3")) == [Delivered(2, "p-2"), Delivered(3, "p-3")]
    assert session.delivered == [0, 1, 2, 3]


def test_resent_messages_go_before_never_sent_ones():
    session, _ = connected_session(4, window=2)
    session.connection_lost()
    session.start_connection()
    session.data_to_send()
    session.receive_data(CONNECTED)
    assert [frame.get("receipt") for frame in frames_of(session.data_to_send())] == ["p-0", "p-1"]


def test_a_receipt_after_the_connection_ended_counts_for_nothing():
    session, _ = connected_session(2)
    session.connection_lost()
    assert session.receive_data(receipt("p-1")) == []
    assert session.delivered == []


def test_a_receipt_from_an_earlier_connection_id_is_not_taken_on_a_new_one_before_resend():
    session, _ = connected_session(2, window=1)
    session.connection_lost()
    session.start_connection()
    session.data_to_send()
    session.receive_data(CONNECTED)
    session.data_to_send()
    (event,) = session.receive_data(receipt("p-1"))  # p-1 was never sent on this connection
    assert isinstance(event, ProtocolViolation)


def test_server_error_ends_the_connection_without_delivering():
    session, _ = connected_session(2)
    (event,) = session.receive_data(wire(Frame("ERROR", (("message", "no"),), b"details")))
    assert isinstance(event, ServerError) and event.message == "no"
    assert session.closing and session.delivered == []
    session.connection_lost()
    assert not session.finished


# --------------------------------------------------------------------------- what the server sends


@pytest.mark.parametrize("version", [None, "1.1", "1.2,1.1"])
def test_connected_must_say_version_1_2(version):
    session = ClientSession(settings(), messages(1))
    session.start_connection()
    session.data_to_send()
    headers = () if version is None else (("version", version),)
    (event,) = session.receive_data(wire(Frame("CONNECTED", headers)))
    assert isinstance(event, ProtocolViolation) and session.closing
    assert session.data_to_send() == b""


def test_heart_beats_are_negotiated():
    """STOMP 1.2, Heart-beating: MAX(cx, sy) one way, MAX(sx, cy) the other."""
    session = ClientSession(settings(heart_beat=(10_000, 3_000)), messages(1))
    session.start_connection()
    session.data_to_send()
    (event,) = session.receive_data(
        wire(Frame("CONNECTED", (("version", "1.2"), ("heart-beat", "1000,20000"))))
    )
    assert event == Connected(None, 20_000, 3_000)
    session.data_to_send()
    session.heartbeat()
    assert session.data_to_send() == b"\n"


def test_no_heart_beats_when_either_side_says_zero():
    session = ClientSession(settings(heart_beat=(0, 5000)), messages(1))
    session.start_connection()
    session.data_to_send()
    (event,) = session.receive_data(
        wire(Frame("CONNECTED", (("version", "1.2"), ("heart-beat", "5000,0"))))
    )
    assert (event.send_every, event.expect_every) == (0, 5000)


def test_unreadable_heart_beat_header_is_a_violation():
    session = ClientSession(settings(), messages(1))
    session.start_connection()
    session.data_to_send()
    (event,) = session.receive_data(
        wire(Frame("CONNECTED", (("version", "1.2"), ("heart-beat", "x"))))
    )
    assert isinstance(event, ProtocolViolation)


@pytest.mark.parametrize(
    "data",
    [
        wire(
            Frame(
                "MESSAGE", (("destination", "/q"), ("message-id", "1"), ("subscription", "0")), b"x"
            )
        ),
        CONNECTED,
        b"RECEIPT\nreceipt-id:a\\tb\n\n\x00",  # undefined escape
        b"NONSENSE\n\n\x00",
    ],
)
def test_unexpected_or_malformed_frames_end_the_connection(data):
    session, _ = connected_session(1)
    (event,) = session.receive_data(data)
    assert isinstance(event, ProtocolViolation) and session.closing and session.delivered == []


def test_receipt_before_connected_is_a_violation():
    session = ClientSession(settings(), messages(1))
    session.start_connection()
    (event,) = session.receive_data(receipt("p-0"))
    assert isinstance(event, ProtocolViolation)


def test_oversized_frame_from_the_server_is_refused_not_buffered():
    session, _ = connected_session(1)
    (event,) = session.receive_data(b"ERROR\n\n" + b"x" * (2 << 20))
    assert isinstance(event, ProtocolViolation) and "limit" in event.reason


def test_only_subset_commands_over_a_whole_session():
    """Profile: peers MUST NOT presume SUBSCRIBE and the like are understood."""
    session = ClientSession(settings(), messages(3), faults=())
    sent: list[Frame] = []
    session.start_connection()
    sent += frames_of(session.data_to_send())
    session.receive_data(CONNECTED)
    sent += frames_of(session.data_to_send())
    session.connection_lost()
    session.start_connection()
    session.receive_data(CONNECTED)
    sent += frames_of(session.data_to_send())
    session.receive_data(receipt("p-2"))
    sent += frames_of(session.data_to_send())
    assert {frame.command for frame in sent} == {"CONNECT", "SEND", "DISCONNECT"}


# --------------------------------------------------------------------------- manifest and files


MANIFEST = """
servers = ["127.0.0.1:1", "127.0.0.1:1"]
host = "/${NODE_ID}"
login = "node-${NODE_ID}"
passcode = "pw-${NODE_ID}"
destination = "/exchange/${NODE_ID}/${NODE_ID}"
"""


def test_settings_substitute_the_node_id_where_the_profile_says():
    """host, login and destination; the profile says nothing of the sort for
    the passcode, which is sent as written (manifest.py)."""
    made = settings_from_manifest(parse_manifest(MANIFEST), "42", frozenset(), "x")
    assert (made.host, made.login, made.destination) == ("/42", "node-42", "/exchange/42/42")
    assert made.passcode == "pw-${NODE_ID}"


@pytest.mark.parametrize(
    "fault, field",
    [
        (ClientFault.LITERAL_NODE_ID_HOST, "host"),
        (ClientFault.LITERAL_NODE_ID_LOGIN, "login"),
        (ClientFault.LITERAL_NODE_ID_DESTINATION, "destination"),
    ],
)
def test_literal_node_id_faults_keep_one_value_unsubstituted(fault, field):
    made = settings_from_manifest(parse_manifest(MANIFEST), "42", frozenset({fault}), "x")
    for name in ("host", "login", "destination"):
        assert ("${NODE_ID}" in getattr(made, name)) == (name == field)


def test_parse_messages_reads_json_lines():
    text = (
        "\n".join(json.dumps({"type": t, "body": example_message(t)}) for t in TYPES[:2]) + "\n\n"
    )
    parsed = parse_messages(text)
    assert [message.type for message in parsed] == list(TYPES[:2])
    assert json.loads(parsed[1].body) == example_message(TYPES[1])


@pytest.mark.parametrize(
    "line, words",
    [
        ("{", "line 2: not JSON"),
        ("[]", "line 2: expected an object"),
        ('{"type": "", "body": {}}', 'line 2: "type"'),
        ('{"type": "T", "body": 3}', 'line 2: "body"'),
        ('{"type": "T", "body": {}, "x": 1}', "line 2: expected"),
    ],
)
def test_parse_messages_names_the_bad_line(line, words):
    from reference_impl.stomp.client import ClientUsageError

    with pytest.raises(ClientUsageError, match=words):
        parse_messages('{"type": "T", "body": {}}\n' + line)


# --------------------------------------------------------------------------- faults


def test_client_faults_match_the_registry():
    from reference_impl.stomp.faults import SPECS

    assert {spec.name for spec in SPECS if spec.role == "client"} == {
        fault.value for fault in ClientFault
    }


def test_fault_count_before_receipt_reports_delivery_at_send_time():
    session = ClientSession(settings(), messages(2), faults={ClientFault.COUNT_BEFORE_RECEIPT})
    session.start_connection()
    session.data_to_send()
    events = session.receive_data(CONNECTED)
    assert [event for event in events if isinstance(event, Delivered)] == [
        Delivered(0, None),
        Delivered(1, None),
    ]
    assert session.receive_data(receipt("p-1")) == []  # not reported twice
    assert session.reported_delivered == 2


def test_fault_client_exact_receipts_confirms_the_named_send_only():
    session, _ = connected_session(4, faults={ClientFault.EXACT_RECEIPTS})
    assert session.receive_data(receipt("p-2")) == [Delivered(2, "p-2")]
    assert session.delivered == [2] and [item.index for item in session._in_flight] == [0, 1, 3]
    # One RECEIPT per SEND, in order, delivers everything as without the fault.
    assert session.receive_data(receipt("p-0") + receipt("p-1") + receipt("p-3")) == [
        Delivered(0, "p-0"),
        Delivered(1, "p-1"),
        Delivered(3, "p-3"),
    ]
    assert session.all_delivered


def test_fault_no_resend_gives_up_unreceipted_messages():
    session, _ = connected_session(3, faults={ClientFault.NO_RESEND}, window=2)
    session.connection_lost()
    assert session.abandoned == [0, 1]
    session.start_connection()
    session.data_to_send()
    session.receive_data(CONNECTED)
    assert [frame.get("receipt") for frame in frames_of(session.data_to_send())] == ["p-2"]


@pytest.mark.parametrize(
    "fault, check",
    [
        (ClientFault.OMIT_TYPE, lambda f: not f.has("type")),
        (ClientFault.OMIT_CONTENT_TYPE, lambda f: not f.has("content-type")),
        (ClientFault.PERSISTENT_FALSE, lambda f: f.get("persistent") == "false"),
        (ClientFault.OMIT_RECEIPT, lambda f: not f.has("receipt")),
    ],
)
def test_header_faults_change_only_their_header(fault, check):
    _, sent = connected_session(2, faults={fault})
    sends = [frame for frame in sent if frame.command == "SEND"]
    assert len(sends) == 2 and all(check(frame) for frame in sends)
    _, good = connected_session(2)
    for bad, right in zip(sends, good):
        differing = {name for name, _ in set(bad.headers) ^ set(right.headers)}
        assert len(differing) <= 1


def test_fault_omit_receipt_confirms_with_a_receipted_disconnect():
    session, sent = connected_session(2, faults={ClientFault.OMIT_RECEIPT})
    assert [frame.command for frame in sent] == ["SEND", "SEND", "DISCONNECT"]
    events = session.receive_data(receipt(sent[-1].get("receipt")))
    assert events == [Delivered(0, None), Delivered(1, None), Disconnected()]


def test_fault_send_subscribe_sends_a_subscribe():
    _, sent = connected_session(1, faults={ClientFault.SEND_SUBSCRIBE})
    assert [frame.command for frame in sent] == ["SUBSCRIBE", "SEND"]


def test_fault_body_not_json():
    text = json.dumps({"type": "T", "body": {"a": 1}})
    messages_read = parse_messages(text)
    json.loads(messages_read[0].body)  # the message as read is JSON; the fault cuts the SEND's
    session = ClientSession(settings(), messages_read, faults={ClientFault.BODY_NOT_JSON})
    session.start_connection()
    session.data_to_send()
    session.receive_data(CONNECTED)
    (send,) = [frame for frame in frames_of(session.data_to_send()) if frame.command == "SEND"]
    assert send.body == messages_read[0].body[:-1]
    with pytest.raises(ValueError):
        json.loads(send.body)


# --------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def _client_context(pki, faults=frozenset()) -> ssl.SSLContext:
    return tls_context(
        str(pki.client_cert_file), str(pki.client_key_file), str(pki.ca_file), faults
    )


async def _start_server(pki, store: Path):
    from reference_impl.stomp.node import StompServerNode

    node = StompServerNode(
        cert_file=str(pki.server_cert_file),
        key_file=str(pki.server_key_file),
        ca_file=str(pki.ca_file),
        store_dir=store,
    )
    host, port = await node.start("127.0.0.1", 0)
    return node, port


def _stored(store: Path):
    from reference_impl.stomp.store import read_messages

    return read_messages(store)


async def test_delivers_to_the_reference_server(pki, tmp_path):
    """The server's certificate names stomp-server.invalid, not 127.0.0.1: the
    client checks the chain only (profile: SHOULD NOT verify the hostname)."""
    node, port = await _start_server(pki, tmp_path / "store")
    try:
        session = ClientSession(settings(receipt_prefix="e2e"), messages(5))
        events = []
        run = await run_client(
            session,
            lambda: ("127.0.0.1", port),
            _client_context(pki),
            timeout=20,
            on_event=events.append,
        )
    finally:
        await node.close()
    assert run.delivered == [0, 1, 2, 3, 4] and run.connections == 1
    assert [e.index for e in events if isinstance(e, Delivered)] == [0, 1, 2, 3, 4]
    assert isinstance(events[-1], Disconnected)
    stored = _stored(tmp_path / "store")
    assert [(m.receipt, m.type, m.destination, m.content_type) for m in stored] == [
        (f"e2e-{i}", TYPES[i], "/exchange/smp-1234", "application/json") for i in range(5)
    ]
    assert [m.body for m in stored] == [m.body for m in messages(5)]


class DroppingProxy:
    """A TLS-terminating man in the middle between the client and the
    reference server: it relays frames both ways, and on its first
    ``drops`` connections, when the server's first RECEIPT comes back, it
    cuts both connections instead of passing the RECEIPT on. The server has
    stored the message by then; the client must not count it delivered and
    must send it again."""

    def __init__(self, pki, upstream_port: int, drops: int = 1) -> None:
        self.pki = pki
        self.upstream_port = upstream_port
        self.drops = drops
        self.connections = 0
        self.client_frames: list[list[Frame]] = []
        self.dropped_receipts: list[str] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(
            self._handle, "127.0.0.1", 0, ssl=harness_server_context(self.pki)
        )
        return self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _handle(self, client_reader, client_writer) -> None:
        self.connections += 1
        dropping = self.connections <= self.drops
        seen: list[Frame] = []
        self.client_frames.append(seen)
        server_reader, server_writer = await asyncio.wait_for(
            asyncio.open_connection(
                "127.0.0.1", self.upstream_port, ssl=harness_client_context(self.pki)
            ),
            10,
        )

        async def up() -> None:
            parser = FrameParser()
            while data := await client_reader.read(65536):
                seen.extend(item for item in parser.receive_data(data) if item is not HEARTBEAT)
                server_writer.write(data)

        async def down() -> None:
            parser = FrameParser()
            while data := await server_reader.read(65536):
                items = [item for item in parser.receive_data(data) if item is not HEARTBEAT]
                receipts = [item.get("receipt-id") for item in items if item.command == "RECEIPT"]
                if dropping and receipts:
                    self.dropped_receipts += receipts
                    return
                client_writer.write(data)

        tasks = [asyncio.create_task(up()), asyncio.create_task(down())]
        self._tasks.update(tasks)
        try:
            await asyncio.wait(tasks, timeout=20, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            client_writer.transport.abort()
            server_writer.transport.abort()


async def test_resends_what_was_not_receipted_when_the_connection_drops(pki, tmp_path):
    node, port = await _start_server(pki, tmp_path / "store")
    proxy = DroppingProxy(pki, port, drops=1)
    proxy_port = await proxy.start()
    events = []
    try:
        session = ClientSession(settings(receipt_prefix="drop"), messages(4))
        run = await run_client(
            session,
            lambda: ("127.0.0.1", proxy_port),
            _client_context(pki),
            timeout=30,
            on_event=events.append,
        )
    finally:
        await proxy.close()
        await node.close()
    assert proxy.dropped_receipts, "the proxy never saw a RECEIPT to drop"
    assert run.connections == 2 and proxy.connections == 2
    assert sorted(run.delivered) == [0, 1, 2, 3]
    first, second = ([f for f in frames if f.command == "SEND"] for frames in proxy.client_frames)
    assert first, "nothing was sent on the first connection"
    # Everything sent on the dropped connection is sent again on the next one,
    # same receipt ids (message ids), first; nothing was counted delivered before.
    resent = [f.get("receipt") for f in second[: len(first)]]
    assert resent == [f.get("receipt") for f in first]
    assert [f.body for f in second[: len(first)]] == [f.body for f in first]
    delivered_at = [i for i, e in enumerate(events) if isinstance(e, Delivered)]
    connected_at = [i for i, e in enumerate(events) if isinstance(e, Connected)]
    assert len(connected_at) == 2 and min(delivered_at) > connected_at[1]
    # At least once: every message is in the store; the dropped ones may be twice.
    stored = _stored(tmp_path / "store")
    assert {m.receipt for m in stored} == {f"drop-{i}" for i in range(4)}


async def test_no_resend_fault_gives_up_after_a_drop(pki, tmp_path):
    node, port = await _start_server(pki, tmp_path / "store")
    proxy = DroppingProxy(pki, port, drops=1)
    proxy_port = await proxy.start()
    try:
        session = ClientSession(settings(), messages(3), faults={ClientFault.NO_RESEND})
        with pytest.raises(ClientFailure) as failure:
            await run_client(
                session, lambda: ("127.0.0.1", proxy_port), _client_context(pki), timeout=30
            )
    finally:
        await proxy.close()
        await node.close()
    assert failure.value.kind == "abandoned"


async def _fake_server(pki, handler, **context_options):
    server = await asyncio.start_server(
        handler, "127.0.0.1", 0, ssl=harness_server_context(pki, **context_options)
    )
    return server, server.sockets[0].getsockname()[1]


async def _silent(reader, writer):
    await reader.read(65536)
    writer.close()


@pytest.mark.parametrize(
    "cert, context_options, faults, delivers, words",
    [
        # a chain from an unknown CA; accepted only when the client is broken
        ("untrusted-server", {}, frozenset(), False, "CERTIFICATE_VERIFY_FAILED"),
        ("untrusted-server", {}, frozenset({ClientFault.NO_VERIFY}), True, ""),
        # a server that speaks TLS 1.2 at most (the handshake ends in an alert or a reset)
        ("server", {"maximum": ssl.TLSVersion.TLSv1_2}, frozenset(), False, ""),
        (
            "server",
            {"maximum": ssl.TLSVersion.TLSv1_2},
            frozenset({ClientFault.ALLOW_TLS_1_2}),
            True,
            "",
        ),
        # the certificate names stomp-server.invalid, not 127.0.0.1
        ("server", {}, frozenset({ClientFault.CHECK_HOSTNAME}), False, "mismatch"),
    ],
)
async def test_tls_rules_of_the_client(pki, cert, context_options, faults, delivers, words):
    """Against a harness-like server that receipts everything: the profile's
    client connects only over TLS 1.3 to a chain from its CA, whatever
    hostname the certificate names."""
    commands: list[str] = []

    async def receipting(reader, writer):
        parser = FrameParser()
        try:
            while data := await asyncio.wait_for(reader.read(65536), 10):
                for frame in parser.receive_data(data):
                    if frame is HEARTBEAT:
                        continue
                    commands.append(frame.command)
                    if frame.command == "CONNECT":
                        writer.write(CONNECTED)
                    elif frame.get("receipt"):
                        writer.write(receipt(frame.get("receipt")))
        except (OSError, asyncio.TimeoutError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(
        receipting, "127.0.0.1", 0, ssl=harness_server_context(pki, cert=cert, **context_options)
    )
    port = server.sockets[0].getsockname()[1]
    try:
        session = ClientSession(settings(), messages(1), faults=faults)
        if delivers:
            run = await run_client(
                session, lambda: ("127.0.0.1", port), _client_context(pki, faults), timeout=10
            )
            assert run.delivered == [0]
        else:
            with pytest.raises(ClientFailure) as failure:
                await run_client(
                    session, lambda: ("127.0.0.1", port), _client_context(pki, faults), timeout=10
                )
            assert failure.value.kind == "gave-up" and words in str(failure.value)
            assert session.delivered == [] and commands == []  # not one frame got through
    finally:
        server.close()


async def test_gives_up_within_the_deadline_when_no_receipt_comes(pki):
    async def mute(reader, writer):
        # CONNECTED, then reads and never answers
        try:
            await asyncio.wait_for(reader.read(65536), 10)
            writer.write(CONNECTED)
            while await asyncio.wait_for(reader.read(65536), 10):
                pass
        except (OSError, asyncio.TimeoutError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(mute, "127.0.0.1", 0, ssl=harness_server_context(pki))
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    try:
        session = ClientSession(settings(), messages(2))
        started = loop.time()
        with pytest.raises(ClientFailure) as failure:
            await run_client(
                session, lambda: ("127.0.0.1", port), _client_context(pki), timeout=1.5
            )
        assert loop.time() - started < 5
    finally:
        server.close()
    assert failure.value.kind == "timeout" and session.delivered == []


async def _run_cli(*args: str, timeout: float = 30) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "reference_impl.stomp",
        "client",
        *args,
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
    return process.returncode, stdout.decode(), stderr.decode()


def _cli_files(pki, tmp_path: Path, port: int, count: int = 3) -> list[str]:
    manifest = tmp_path / "stomp.toml"
    manifest.write_text(
        f'servers = ["127.0.0.1:{port}"]\nhost = "/"\ndestination = "/exchange/${{NODE_ID}}"\n'
    )
    lines = tmp_path / "messages.jsonl"
    lines.write_text(
        "".join(
            json.dumps({"type": TYPES[i], "body": example_message(TYPES[i])}) + "\n"
            for i in range(count)
        )
    )
    return [
        "--manifest",
        str(manifest),
        "--node-id",
        "777",
        "--cert",
        str(pki.client_cert_file),
        "--key",
        str(pki.client_key_file),
        "--ca",
        str(pki.ca_file),
        "--messages",
        str(lines),
    ]


async def test_client_command_prints_each_delivery_then_done(pki, tmp_path):
    node, port = await _start_server(pki, tmp_path / "store")
    try:
        status, out, err = await _run_cli(*_cli_files(pki, tmp_path, port), "--timeout", "20")
    finally:
        await node.close()
    assert status == 0, err
    assert out.splitlines() == ["DELIVERED=0", "DELIVERED=1", "DELIVERED=2", "DONE delivered=3"]
    assert {m.destination for m in _stored(tmp_path / "store")} == {"/exchange/777"}
    assert "BEGIN" not in err and "PRIVATE" not in err


async def test_client_command_fails_clearly_against_an_untrusted_server(pki, tmp_path):
    server, port = await _fake_server(pki, _silent, cert="untrusted-server")
    try:
        status, out, err = await _run_cli(*_cli_files(pki, tmp_path, port), "--timeout", "20")
    finally:
        server.close()
    assert status == 1
    assert out.splitlines() == ["DONE delivered=0"]
    assert "CERTIFICATE_VERIFY_FAILED" in err and "3 message(s) not receipted" in err


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda files: files.__setitem__(1, "/nonexistent/stomp.toml"), "--manifest: cannot read"),
        (
            lambda files: Path(files[1]).write_text("servers = []\nhost='/'\ndestination='/q'\n"),
            "servers",
        ),
        (lambda files: Path(files[-1]).write_text("not json\n"), "--messages line 1"),
        (lambda files: files.__setitem__(3, "7\n77"), "node_id must not contain CR, LF or NUL"),
    ],
)
async def test_client_command_usage_errors_exit_2(pki, tmp_path, change, words):
    files = _cli_files(pki, tmp_path, 1)
    change(files)
    status, out, err = await _run_cli(*files, "--timeout", "5")
    assert status == 2 and words in err and out == ""


# --------------------------------------------------------------------------- hostile servers (hypothesis)

_server_chunks = st.one_of(
    st.sampled_from(
        [
            CONNECTED,
            b"\n",
            b"\r\n",
            wire(Frame("ERROR", (("message", "x"),), b"boom")),
            wire(Frame("MESSAGE", (("destination", "/q"),), b"m")),
            b"RECEIPT\n\n\x00",
        ]
    ),
    st.integers(0, 7).map(lambda i: receipt(f"p-{i}")),
    st.text(max_size=12).map(lambda t: receipt(t)),
    st.binary(max_size=40),
)


@hypothesis_settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.lists(_server_chunks, max_size=12), st.data())
def test_no_server_stream_crashes_the_session_or_fakes_a_delivery(chunks, data):
    """Whatever a server sends, the session returns events (never raises),
    sends only subset commands, and counts message i delivered only after a
    RECEIPT naming message i or a later one that was in flight."""
    session = ClientSession(settings(window=3), messages(6))
    session.start_connection()
    sent = frames_of(session.data_to_send())
    stream = b"".join(chunks)
    cut = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    for start, end in zip([0] + cut, cut + [len(stream)]):
        before = set(session.delivered)
        events = session.receive_data(stream[start:end])
        out = session.data_to_send()
        new_frames = frames_of(out) if out.strip(b"\n") else []
        sent += new_frames
        newly = set(session.delivered) - before
        if newly:
            receipted = stream[:end]
            # the highest message confirmed must have had its own RECEIPT
            assert receipt(f"p-{max(newly)}") in receipted
        assert all(
            isinstance(e, (Connected, Delivered, ServerError, ProtocolViolation, Disconnected))
            for e in events
        )
    assert {f.command for f in sent} <= {"CONNECT", "SEND", "DISCONNECT"}
    assert session.delivered == sorted(session.delivered)
    # After the connection ends, a well-behaved server gets everything not yet delivered.
    session.connection_lost()
    session.start_connection()
    session.data_to_send()
    session.receive_data(CONNECTED)
    for _ in range(10):
        resent = [f for f in frames_of(session.data_to_send()) if f.command == "SEND"]
        if not resent:
            break
        session.receive_data(receipt(resent[-1].get("receipt")))
    assert session.all_delivered


async def test_heart_beats_go_out_and_a_silent_server_is_left(pki):
    """STOMP 1.2, Heart-beating: with 100 ms agreed both ways the client sends
    an EOL at least every 100 ms with nothing else to send, and a server that
    promised heart-beats and then says nothing is given up after the
    tolerance (twice the interval plus HEARTBEAT_GRACE) and reconnected."""
    loop = asyncio.get_running_loop()
    connections: list[dict] = []

    async def promising_then_silent(reader, writer):
        record = {"eols": 0, "opened": loop.time(), "closed": None}
        connections.append(record)
        parser = FrameParser()
        try:
            while data := await asyncio.wait_for(reader.read(65536), 10):
                for item in parser.receive_data(data):
                    if item is HEARTBEAT:
                        record["eols"] += 1
                    elif item.command == "CONNECT":
                        writer.write(
                            wire(
                                Frame("CONNECTED", (("version", "1.2"), ("heart-beat", "100,100")))
                            )
                        )
        except (OSError, asyncio.TimeoutError):
            pass
        finally:
            record["closed"] = loop.time()
            writer.close()

    server = await asyncio.start_server(
        promising_then_silent, "127.0.0.1", 0, ssl=harness_server_context(pki)
    )
    port = server.sockets[0].getsockname()[1]
    try:
        session = ClientSession(settings(heart_beat=(100, 100)), messages(1))
        with pytest.raises(ClientFailure):
            await run_client(
                session, lambda: ("127.0.0.1", port), _client_context(pki), timeout=3.0
            )
        await asyncio.sleep(0.1)
    finally:
        server.close()
    first = connections[0]
    assert len(connections) >= 2, "the client never gave up the silent connection"
    lasted = first["closed"] - first["opened"]
    assert 1.1 <= lasted <= 2.5, lasted
    assert first["eols"] >= 0.5 * lasted / 0.1, (first["eols"], lasted)


async def test_client_command_never_prints_the_passcode(pki, tmp_path):
    """Even at DEBUG, through a drop (the proxy) and its reconnect."""
    node, port = await _start_server(pki, tmp_path / "store")
    proxy = DroppingProxy(pki, port, drops=1)
    proxy_port = await proxy.start()
    try:
        files = _cli_files(pki, tmp_path, proxy_port)
        manifest = Path(files[1])
        manifest.write_text(
            manifest.read_text() + 'login = "${NODE_ID}"\npasscode = "pa55-c0de-never-shown"\n'
        )
        status, out, err = await _run_cli(*files, "--timeout", "20", "--log-level", "DEBUG")
    finally:
        await proxy.close()
        await node.close()
    assert status == 0, err
    assert proxy.connections == 2
    connect = proxy.client_frames[0][0]
    assert connect.get("passcode") == "pa55-c0de-never-shown" and connect.get("login") == "777"
    assert "pa55-c0de-never-shown" not in out + err
    assert out.splitlines()[-1] == "DONE delivered=3"

"""reference_impl/btp/variants.py: the BTP reference node's conformant
variants, in the sans-I/O session and in the node over WebSocket (the
certification of each is ``conformance mutation --protocol btp --variants``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.frames import Frame, Opcode

from reference_impl.btp.__main__ import build_parser
from reference_impl.btp.node import BtpNode, RequestSpec, run_client
from reference_impl.btp.oer import check_generalized_time
from reference_impl.btp.packet import (
    ContentType,
    Error,
    Message,
    ProtocolDataEntry,
    Response,
    Transfer,
    decode_packet,
    encode_packet,
)
from reference_impl.btp.session import BtpSession
from reference_impl.btp.variants import (
    FIRST_SEQUENTIAL_ID,
    INFO_NAME,
    NOTICE_NAME,
    SPECS,
    UNPROMPTED_NAME,
)
from reference_impl.variants import Shape

from .test_node import TOKEN, Raw, auth_packet, running_node

pytestmark = pytest.mark.timeout(60)

READ_TIMEOUT = 5.0


def names(role: str) -> list[str]:
    return [spec.name for spec in SPECS if role in spec.roles]


def server_session(*variants: str) -> BtpSession:
    return BtpSession.server(lambda token: token == TOKEN, variants=variants)


def authenticated(*variants: str) -> BtpSession:
    session = server_session(*variants)
    session.receive_message(encode_packet(auth_packet(7)))
    return session


def sent(session: BtpSession) -> list[Any]:
    return [decode_packet(payload) for payload in session.messages_to_send()]


def test_every_variant_cites_its_sentence_and_the_command_line_takes_it():
    assert len({spec.name for spec in SPECS}) == len(SPECS)
    for spec in SPECS:
        assert spec.allowed_by and spec.description
    for name in names("server"):
        args = build_parser().parse_args(["serve", "--auth-token-env", "T", "--variant", name])
        assert args.variant == [name]
    for name in names("client"):
        args = build_parser().parse_args(
            ["client", "--url", "ws://127.0.0.1:1/", "--auth-token-env", "T", "--variant", name]
        )
        assert args.variant == [name]


def test_extra_protocol_data_in_answers_errors_and_the_clients_auth_message():
    session = server_session("extra-protocol-data")
    session.receive_message(encode_packet(auth_packet(7)))
    [auth_answer] = sent(session)
    assert isinstance(auth_answer, Response) and [e.name for e in auth_answer.protocol_data] == [
        INFO_NAME
    ]
    echo = ProtocolDataEntry("echo", ContentType.TEXT_PLAIN_UTF8, b"hi")
    session.receive_message(encode_packet(Message(8, (echo,))))
    [answer] = sent(session)
    assert answer.protocol_data[0] == echo and answer.protocol_data[1].name == INFO_NAME
    session.receive_message(encode_packet(Message(9, (echo, echo))))
    [error] = sent(session)
    assert isinstance(error, Error) and [e.name for e in error.protocol_data] == [INFO_NAME]
    client = BtpSession.client(TOKEN, variants={"extra-protocol-data"})
    [auth] = sent(client)
    assert [e.name for e in auth.protocol_data] == ["auth", INFO_NAME, "auth_token"]
    request_id = client.receive_message(encode_packet(Response(auth.request_id)))[0].request_id
    assert request_id == auth.request_id
    client.send_transfer(3)
    [transfer] = sent(client)
    assert [e.name for e in transfer.protocol_data] == [INFO_NAME]


def test_sequential_request_ids_wrap_to_zero():
    client = BtpSession.client(TOKEN, variants={"sequential-request-ids"})
    [auth] = sent(client)
    assert auth.request_id == FIRST_SEQUENTIAL_ID
    client.receive_message(encode_packet(Response(auth.request_id)))
    ids = [client.send_message((ProtocolDataEntry("x", 1, b"y"),)) for _ in range(3)]
    assert ids == [0xFFFFFFFF, 0, 1]


def test_rfc30_timestamps_take_every_precision_without_trailing_zeros():
    session = authenticated("rfc30-timestamps")
    sent(session)
    entry = ProtocolDataEntry("x", 1, b"y")
    forms = []
    for request_id in range(10, 18):
        session.receive_message(encode_packet(Message(request_id, (entry, entry))))
        [error] = sent(session)
        assert check_generalized_time(error.triggered_at) is None, error.triggered_at
        fraction = error.triggered_at[15:-1] if len(error.triggered_at) > 15 else ""
        assert not fraction.endswith("0")
        forms.append(len(fraction))
    assert forms[0] == 0 and max(forms) <= 3 and forms[4] == 0


def test_auth_timeout_message_then_close():
    session = server_session("auth-timeout-message")
    events = session.auth_timed_out()
    [notice] = sent(session)
    assert isinstance(notice, Message) and notice.protocol_data[0].name == NOTICE_NAME
    assert session.closed and events


def test_refuse_unknown_subprotocols_answers_with_an_error_but_serves_balance_and_echo():
    session = authenticated("refuse-unknown-subprotocols")
    sent(session)
    session.receive_message(
        encode_packet(Message(8, (ProtocolDataEntry("conformance_probe", 1, b"x"),)))
    )
    [error] = sent(session)
    assert isinstance(error, Error) and error.code == "F00" and error.request_id == 8
    session.receive_message(encode_packet(Message(9, (ProtocolDataEntry("balance", 2, b"{}"),))))
    [answer] = sent(session)
    assert isinstance(answer, Response) and answer.protocol_data[0].name == "balance"
    session.receive_message(encode_packet(Transfer(10, 1)))
    [answer] = sent(session)
    assert isinstance(answer, Response)


@pytest.mark.parametrize(
    "entries",
    [
        (ProtocolDataEntry("auth", 1, b""), ProtocolDataEntry("auth_token", 1, TOKEN)),
        (ProtocolDataEntry("auth", 0, b"x"), ProtocolDataEntry("auth_token", 1, TOKEN)),
        (ProtocolDataEntry("auth", 0, b""),),
        (ProtocolDataEntry("auth", 0, b""), ProtocolDataEntry("auth_token", 0, b"\xff")),
    ],
    ids=["auth-content-type", "auth-data", "no-token", "token-not-utf8"],
)
def test_auth_refusals_f00_refuses_the_structural_ones_with_f00_and_closes(entries):
    plain = server_session()
    plain.receive_message(encode_packet(Message(5, entries)))
    [plain_error] = sent(plain)
    assert plain_error.code == "F01"
    session = server_session("auth-refusals-f00")
    session.receive_message(encode_packet(Message(5, entries)))
    [error] = sent(session)
    assert isinstance(error, Error) and error.request_id == 5
    assert (error.code, error.name) == ("F00", "NotAcceptedError")
    assert session.closed


# --------------------------------------------------------------------------- over WebSocket


class FrameRecorder(ClientConnection):
    """A client connection that notes every frame it receives (opcode, fin, size)."""

    frames: list[tuple[Opcode, bool, int]]

    def process_event(self, event: Any) -> None:
        if not hasattr(self, "frames"):
            self.frames = []
        if isinstance(event, Frame):  # not the HTTP answer to the upgrade
            self.frames.append((event.opcode, event.fin, len(event.data)))
        super().process_event(event)


async def test_fragmented_messages_carry_a_ping_and_end_with_an_empty_frame():
    async with (
        running_node(variants={"fragmented-messages"}) as node,
        connect(node.url, proxy=None, compression=None, create_connection=FrameRecorder) as ws,
    ):
        peer = Raw(ws)
        await peer.auth()
        frames = ws.frames  # type: ignore[attr-defined]
        assert [opcode for opcode, _, _ in frames] == [
            Opcode.BINARY,
            Opcode.PING,
            Opcode.CONT,
            Opcode.CONT,
            Opcode.CONT,
        ]
        assert [fin for _, fin, _ in frames] == [False, True, False, False, True]
        assert frames[0][2] == 1 and frames[-1][2] == 0


@pytest.mark.parametrize(
    "variants", [{"split-writes"}, {"coalesce-writes"}, {"split-writes", "coalesce-writes"}]
)
async def test_shaped_writes_keep_the_node_working_and_closing(variants):
    node = BtpNode(TOKEN, variants=variants, shape=Shape.from_variants(variants))
    await node.start("127.0.0.1", 0)
    try:
        async with connect(node.url, proxy=None, compression=None, open_timeout=READ_TIMEOUT) as ws:
            peer = Raw(ws)
            await peer.auth()
            echo = ProtocolDataEntry("echo", 1, b"x" * 40)
            assert await peer.call(Message(5, (echo,))) == Response(5, (echo,))
            started = time.monotonic()
            await node.close()  # closes the connection through the shaped transport
            await peer.closed()
            assert time.monotonic() - started < 4
    finally:
        await node.close()


async def test_late_answers_leave_late():
    late = 0.4
    node = BtpNode(
        TOKEN, variants={"late-answers"}, shape=Shape.from_variants({"late-answers"}, late)
    )
    await node.start("127.0.0.1", 0)
    try:
        async with connect(node.url, proxy=None, compression=None, open_timeout=READ_TIMEOUT) as ws:
            peer = Raw(ws)
            await peer.send(auth_packet(3))
            started = time.monotonic()
            assert await peer.recv() == Response(3)
            assert time.monotonic() - started >= late * 0.9
    finally:
        await node.close()


async def test_unprompted_traffic_follows_the_auth_response_and_stops_a_refused_kind():
    async with (
        running_node(variants={"unprompted-traffic"}) as node,
        connect(node.url, proxy=None, compression=None, open_timeout=READ_TIMEOUT) as ws,
    ):
        peer = Raw(ws)
        await peer.auth(request_id=3)  # the auth Response comes first
        first = await peer.recv()
        assert isinstance(first, Message) and first.protocol_data[0].name == UNPROMPTED_NAME
        await peer.send(Error(first.request_id, "F00", "NotAcceptedError", "20261126100000Z", b""))
        kinds = []
        for _ in range(3):
            packet = await peer.recv()
            kinds.append(type(packet).__name__)
            await peer.send(Response(packet.request_id))
        assert kinds == ["Transfer"] * 3, kinds  # Messages refused: only Transfers follow
        probe = Message(4, (ProtocolDataEntry("conformance_probe", 1, b"x"),))
        await peer.send(probe)
        while isinstance(answer := await peer.recv(), Transfer):
            await peer.send(Response(answer.request_id))
        assert answer == Response(4)


async def test_unprompted_traffic_stops_at_the_bound_when_nothing_is_answered():
    async with (
        running_node(variants={"unprompted-traffic"}) as node,
        connect(node.url, proxy=None, compression=None, open_timeout=READ_TIMEOUT) as ws,
    ):
        peer = Raw(ws)
        await peer.auth()
        got = [await peer.recv() for _ in range(4)]
        assert all(isinstance(packet, (Message, Transfer)) for packet in got)
        await peer.silence(1.2)  # more than two intervals: the fifth unanswered request is not sent
        await peer.send(Message(9, (ProtocolDataEntry("conformance_probe", 1, b"x"),)))
        assert await peer.recv() == Response(9)


async def test_client_variants_against_the_node():
    variants = {
        "unprompted-traffic",
        "extra-protocol-data",
        "sequential-request-ids",
        "fragmented-messages",
    }
    async with running_node(variants=variants) as node:
        run = await asyncio.wait_for(
            run_client(
                node.url,
                TOKEN,
                [RequestSpec.message("echo", "hi"), RequestSpec.transfer(2)],
                timeout=READ_TIMEOUT,
                variants=variants,
            ),
            20,
        )
        assert [result.ok for result in run.results] == [True, True]
        assert run.results[0].packet.protocol_data[0].name == "echo"


async def test_reordered_answers_leave_last_first():
    async with (
        running_node(variants={"reordered-answers"}) as node,
        connect(node.url, proxy=None, compression=None, open_timeout=READ_TIMEOUT) as ws,
    ):
        peer = Raw(ws)
        await peer.auth()
        probes = [
            Message(request_id, (ProtocolDataEntry("conformance_probe", 1, b"x"),))
            for request_id in (5, 6, 7)
        ]
        for probe in probes:  # all three arrive within the node's window
            await peer.send(probe)
        answers = [(await peer.recv()).request_id for _ in probes]
        assert sorted(answers) == [5, 6, 7] and answers != [5, 6, 7], answers

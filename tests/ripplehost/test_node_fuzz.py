"""The Ripple host node under hostile input.

- hypothesis-made byte streams (valid sessions mutated: bytes flipped,
  inserted, deleted, cut; random bytes; headers claiming huge sizes), fed in
  random pieces to the sans-I/O session: no exception but the session's own
  events, output that is well-formed frames answering only msgnos the peer
  sent, nothing after the close, bounded buffering;
- some of them over real TCP to the asyncio node: it never logs a handler
  failure, each connection ends (closed, or still answering a ping) within a
  deadline, and the node keeps serving new connections;
- whatever size a header claims, memory stays bounded.
"""

from __future__ import annotations

import asyncio
import logging

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ..fuzz_budget import examples

from conformance.fuzz.strategies import RIPPLE_HOST_ID as HOST_ID
from conformance.fuzz.strategies import pieces, ripplehost_streams as streams
from reference_impl.ripplehost.frame import (
    DEFAULT_MAX_HEADER_LINE,
    DEFAULT_MAX_SIZE,
    FrameError,
    MessageReader,
    encode_message,
)
from reference_impl.ripplehost.node import RippleNode
from reference_impl.ripplehost.session import Closed, MessageReceived, RippleSession, Role
from tests.memory_bounds import peak_while_offering

DEADLINE = 10.0


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams, st.lists(st.integers(0, 3000), max_size=10))
def test_hostile_streams_keep_the_session_rules(data, cuts):
    session = RippleSession(Role.ACCEPTOR, "b.example")
    out = bytearray()
    received_msgnos = set()
    closed_at = None
    for piece in pieces(data, cuts):
        for event in session.receive_data(piece):
            if isinstance(event, MessageReceived):
                received_msgnos.add(event.message.msgno)
                session.reply(event.message.msgno, {"type": "pong"})
            elif isinstance(event, Closed):
                closed_at = len(out)
        out += session.data_to_send()
        assert session.parser.buffered <= DEFAULT_MAX_HEADER_LINE + DEFAULT_MAX_SIZE + 5
        if session.closed:
            assert session.receive_data(b'MSG 1.0 2 . 15\r\n{"type":"ping"}END\r\n') == []
            break
    try:
        answers = MessageReader().receive_data(bytes(out))
    except FrameError as exc:  # the node's own output must always parse
        raise AssertionError(
            f"session wrote a malformed frame: {exc.reason}: {bytes(out)[:200]!r}"
        ) from None
    for answer in answers:
        assert answer.type in ("RPY", "ERR")
        handled_by_session = answer.body.get("type") == "host-id" or answer.body.get("error") in (
            "host-id-required",
            "host-id-repeated",
            "unsupported-version",
        )
        assert answer.msgno in received_msgnos or handled_by_session, answer
    if closed_at is not None:
        assert session.data_to_send() == b""


def test_huge_claimed_sizes_keep_memory_bounded():
    for header in (
        b"MSG 1.0 2 . 65536\r\n",
        b"MSG 1.0 2 * 65536\r\n",
        b"MSG 1.0 2 . 2147483647\r\n",
        b"MSG 1.0 2 . 99999999999999999999\r\n",
        b"MSG 1.0 2 . 1 " + b"u" * 100000,
    ):
        session = RippleSession(Role.ACCEPTOR, "b.example")
        session.receive_data(HOST_ID)
        session.data_to_send()
        peak = peak_while_offering(
            session.receive_data, header, lambda session=session: session.closed
        )
        assert session.closed, header[:40]
        assert peak < 4 << 20, f"{peak} bytes for {header[:40]!r}"


def test_many_chunked_messages_in_progress_are_bounded():
    session = RippleSession(Role.ACCEPTOR, "b.example")
    session.receive_data(HOST_ID)
    frame = b"MSG 1.0 %d * 60000\r\n" + b"x" * 60000 + b"END\r\n"
    for n in range(1, 200):
        session.receive_data(frame.replace(b"%d", str(2 * n).encode()))
        if session.closed:
            break
    assert session.closed and "message" in session.close_reason


class _Failures(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def _over_tcp(data_list: list[bytes]) -> None:
    failures = _Failures()
    logging.getLogger("reference_impl.ripplehost").addHandler(failures)
    node = RippleNode(
        "b.example", emit=lambda kind, payload: None, host_id_timeout=2.0, idle_timeout=2.0
    )
    host, port = await node.start("127.0.0.1", 0)
    try:
        for data in data_list:
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(data)
            try:
                await writer.drain()
            except ConnectionError:
                pass
            # Within the deadline the node either closes or is still serving.
            ended = False
            try:
                while True:
                    chunk = await asyncio.wait_for(reader.read(65536), 3.0)
                    if not chunk:
                        ended = True
                        break
            except TimeoutError:
                pass
            except ConnectionError:
                ended = True
            if not ended:
                # still open: it must still be reading (it closes idle ones itself within idle_timeout)
                chunk = await asyncio.wait_for(reader.read(65536), DEADLINE)
            writer.close()
        # and it still serves a fresh, valid association
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(HOST_ID + encode_message("MSG", 2, {"type": "ping"}))
        decoder, got = MessageReader(), []
        while len(got) < 2:
            got += decoder.receive_data(await asyncio.wait_for(reader.read(65536), DEADLINE))
        assert got[1].body == {"type": "pong"}
        writer.close()
    finally:
        await node.close()
        logging.getLogger("reference_impl.ripplehost").removeHandler(failures)
    assert not failures.records, [r.getMessage() for r in failures.records]


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(streams, min_size=1, max_size=3))
def test_hostile_streams_over_tcp(data_list):
    asyncio.run(_over_tcp(data_list))

"""The harness's side of an SSB connection, driven by the reference cores.

Cases use :class:`SsbClientSession` to talk to a target server the way a
well-behaved peer would (handshake, box stream, RPC), and its lower-level
pieces to forge, tamper with or replay what they send. Every byte goes
through the connection's wire trace, with a note saying what it was.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from conformance.core.transport import DeadlineExceeded, TcpConnection, short_hex
from reference_impl.ssb import boxstream, rpc, shs
from reference_impl.ssb.boxstream import BoxStreamDecoder, BoxStreamEncoder, BoxStreamError
from reference_impl.ssb.keys import Keypair, feed_id_to_public
from reference_impl.ssb.rpc import RpcDecoder, RpcError, RpcMessage

MAX_BOX_BODY = boxstream.MAX_BODY
MAX_RPC_BODY = 1 << 20
MAX_STREAM_ITEMS = 10_000
"""Bound on how many stream items a case collects, so that a target that
streams forever cannot exhaust memory."""


def server_public_key(feed_id: str) -> bytes:
    return feed_id_to_public(feed_id)


@dataclass
class HandshakeOutcome:
    params: shs.BoxStreamParams
    msg1: bytes
    msg2: bytes
    msg3: bytes
    msg4: bytes


async def client_handshake(conn: TcpConnection, network_key: bytes, keypair: Keypair,
                           server_public: bytes) -> HandshakeOutcome:
    """The four handshake steps as client; a target answer that does not
    verify fails the case, quoting the bytes."""
    hs = shs.ClientHandshake(network_key, keypair, server_public)
    msg1 = hs.data_to_send()
    await conn.send(msg1, "msg1: client hello")
    msg2 = await conn.receive_exactly(shs.HELLO_SIZE, "msg2 (server hello, 64 bytes)")
    try:
        msg3 = hs.receive_data(msg2)
    except shs.HandshakeError as exc:
        raise AssertionError(f"target's msg2 does not verify ({exc}): {msg2.hex()}") from None
    await conn.send(msg3, "msg3: client authenticate")
    msg4 = await conn.receive_exactly(shs.SERVER_ACCEPT_SIZE, "msg4 (server accept, 80 bytes)")
    try:
        hs.receive_data(msg4)
    except shs.HandshakeError as exc:
        raise AssertionError(f"target's msg4 does not verify ({exc}): {msg4.hex()}") from None
    return HandshakeOutcome(hs.result, msg1, msg2, msg3, msg4)


class SsbClientSession:
    """An RPC session over a box stream, as the requester, on one connection.

    Receiving keeps the raw RpcMessages (flags, request number, body bytes)
    because the cases judge exactly those.
    """

    def __init__(self, conn: TcpConnection, params: shs.BoxStreamParams) -> None:
        self.conn = conn
        self.params = params
        self.encoder = BoxStreamEncoder(params.encrypt_key, params.encrypt_nonce)
        self.decoder = BoxStreamDecoder(params.decrypt_key, params.decrypt_nonce)
        self.rpc_decoder = RpcDecoder(MAX_RPC_BODY)
        self.next_req = 1
        self.inbox: list[RpcMessage] = []
        self.box_bodies: list[bytes] = []
        self.box_goodbye = False
        self.rpc_goodbye = False

    @classmethod
    async def open(cls, conn: TcpConnection, network_key: bytes, keypair: Keypair,
                   server_public: bytes) -> SsbClientSession:
        outcome = await client_handshake(conn, network_key, keypair, server_public)
        return cls(conn, outcome.params)

    # -- sending
    async def send_rpc_bytes(self, data: bytes, note: str) -> None:
        self.conn.trace.record("sent-plain", data, note)
        await self.conn.send(self.encoder.encode(data), f"box stream carrying: {note}")

    def request_message(self, name: list[str], args: list, type_: str = "source",
                        req: int | None = None) -> RpcMessage:
        if req is None:
            req = self.next_req
            self.next_req += 1
        body = {"name": name, "type": type_, "args": args}
        return RpcMessage.from_json(req, body, stream=type_ != "async")

    async def request(self, name: list[str], args: list, type_: str = "source") -> int:
        msg = self.request_message(name, args, type_)
        await self.send_rpc_bytes(msg.encode(), f"RPC request {msg.req}: {json.dumps(msg.json())}")
        return msg.req

    async def end_stream(self, req: int, note: str = "") -> None:
        msg = RpcMessage.from_json(req, True, stream=True, end=True)
        await self.send_rpc_bytes(msg.encode(), note or f"RPC end of our stream {req}")

    async def goodbye(self) -> None:
        await self.send_rpc_bytes(rpc.GOODBYE, "RPC goodbye")
        await self.conn.send(self.encoder.goodbye(), "box stream goodbye")

    # -- receiving
    async def _pump(self, deadline: float | None = None) -> bool:
        """Read once; decode boxes and RPC messages into the inbox. Returns
        False when the target closed the connection."""
        data = await self.conn.receive_some(deadline)
        if not data:
            return False
        try:
            bodies = self.decoder.receive_data(data)
        except BoxStreamError as exc:
            raise AssertionError(f"target's box stream does not decrypt ({exc.reason}) at bytes "
                                 f"{short_hex(data)}") from None
        if self.decoder.ended:
            self.box_goodbye = True
        for body in bodies:
            self.box_bodies.append(body)
            try:
                for msg in self.rpc_decoder.receive_data(body):
                    self.conn.trace.record("received-plain", msg.encode(), f"RPC {describe(msg)[:160]}")
                    self.inbox.append(msg)
            except RpcError as exc:
                raise AssertionError(f"target's RPC stream is malformed ({exc}); box body {short_hex(body)}") from None
        if self.rpc_decoder.ended:
            self.rpc_goodbye = True
        return True

    async def next_message(self, req: int, what: str, deadline: float | None = None) -> RpcMessage:
        """The next message the target sends on our request ``req`` (it
        answers with ``-req``). Messages on other request numbers stay queued."""
        while True:
            for i, msg in enumerate(self.inbox):
                if msg.req == -req:
                    return self.inbox.pop(i)
            if self.box_goodbye or self.rpc_goodbye:
                raise AssertionError(f"target ended the session (goodbye) while the case awaited {what}")
            try:
                alive = await self._pump(deadline)
            except DeadlineExceeded:
                raise DeadlineExceeded(f"no {what} within {deadline or self.conn.deadline} s") from None
            if not alive:
                raise AssertionError(f"target closed the connection while the case awaited {what}")

    async def collect_stream(self, req: int, what: str, deadline: float | None = None,
                             answer_end: bool = True) -> tuple[list[RpcMessage], RpcMessage]:
        """Stream data on ``req`` until the target's end message; returns both.
        Answers the end with our own, as a requester must."""
        items: list[RpcMessage] = []
        while True:
            msg = await self.next_message(req, what, deadline)
            if msg.end:
                if answer_end:
                    await self.end_stream(req, f"RPC end of stream {req} (answering the target's end)")
                return items, msg
            items.append(msg)
            if len(items) > MAX_STREAM_ITEMS:
                raise AssertionError(f"target sent more than {MAX_STREAM_ITEMS} items on stream {req}")

    async def quiet_for(self, req: int, seconds: float) -> list[RpcMessage]:
        """Everything the target sends on ``req`` within ``seconds`` (used to
        check that nothing comes)."""
        got: list[RpcMessage] = []
        while True:
            try:
                got.append(await self.next_message(req, "more messages", seconds))
            except DeadlineExceeded:
                return got


async def expect_hang_up_without_writing(conn: TcpConnection, after: str) -> None:
    """The spec's rule for invalid handshake messages: the target closes the
    connection, and writes not one byte more."""
    closed, data = await conn.await_close()
    assert not data, (f"after {after}, the target wrote {len(data)} byte(s) instead of hanging up "
                      f"silently: {short_hex(data, 96)}")
    assert closed, f"after {after}, the target kept the connection open for {conn.deadline} s without closing it"


def describe(msg: RpcMessage) -> str:
    """A message as a failure message shows it: flags, number, body, bytes."""
    body: Any
    try:
        body = msg.value()
    except RpcError:
        body = msg.body
    shown = body.hex() if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False)
    if len(shown) > 300:
        shown = shown[:300] + "..."
    return (f"req={msg.req} stream={msg.stream} end={msg.end} type={msg.body_type.name} "
            f"body={shown} (bytes {short_hex(msg.encode(), 96)})")


def error_body(msg: RpcMessage) -> Any:
    """The body of an end/err message, or None if it is not JSON."""
    try:
        return msg.json()
    except Exception:
        return None


def flip_byte(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1:]


def random_bytes(size: int) -> bytes:
    return os.urandom(size)

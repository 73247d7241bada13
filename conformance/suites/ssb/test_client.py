"""Target as client: the harness listens, launches the target's client
command pointed at it, and plays the server (SSB guide, "Handshake",
"RPC protocol", "createHistoryStream").

The target is asked to replicate a feed the harness holds, so after the
handshake it is expected to call createHistoryStream on it.
"""

from __future__ import annotations

import json
import time

from conformance.core.requirements import blocked, requirement
from conformance.core.transport import Deadline, DeadlineExceeded
from reference_impl.ssb import shs
from reference_impl.ssb.boxstream import BoxStreamEncoder
from reference_impl.ssb.feed import Feed
from reference_impl.ssb.keys import Keypair
from reference_impl.ssb.rpc import RpcMessage

from .prerequisites import CLIENT_HANDSHAKE, CLIENT_HELLO, CLIENT_HISTORY_REQUEST
from .session import (MAX_RPC_BODY, TargetBoxStreamDecoder, TargetRpcDecoder, describe,
                      expect_hang_up_without_writing, random_bytes)

OTHER_NETWORK_KEY = bytes(range(32))


def harness_feed(keypair: Keypair, count: int = 3) -> Feed:
    feed = Feed(keypair)
    start = int(time.time() * 1000)
    for n in range(count):
        feed.append({"type": "post", "text": f"message {n + 1} served by the conformance harness"}, start + n)
    return feed


class ServedSession:
    """The harness as server after a completed handshake."""

    def __init__(self, conn, params: shs.BoxStreamParams) -> None:
        self.conn = conn
        self.encoder = BoxStreamEncoder(params.encrypt_key, params.encrypt_nonce)
        # The target's bytes: a box or RPC frame that does not decode is a
        # ProtocolViolation (a failure showing the bytes), never an error.
        self.decoder = TargetBoxStreamDecoder(params.decrypt_key, params.decrypt_nonce)
        self.rpc = TargetRpcDecoder(MAX_RPC_BODY)
        self.inbox: list[RpcMessage] = []

    async def next_message(self, what: str) -> RpcMessage:
        # One deadline for the whole message: a client trickling bytes cannot
        # extend it read by read.
        deadline = Deadline(self.conn.deadline)
        while not self.inbox:
            try:
                data = await self.conn.receive_some(deadline)
            except DeadlineExceeded:
                raise DeadlineExceeded(f"no {what} within {deadline.seconds} s") from None
            if not data:
                raise AssertionError(f"target client closed the connection while the case awaited {what}")
            for body in self.decoder.receive_data(data):
                self.inbox.extend(self.rpc.receive_data(body))
            # Messages that came in the same read as a goodbye still count.
            if not self.inbox and (self.decoder.ended or self.rpc.ended):
                raise AssertionError(f"target client said goodbye while the case awaited {what}")
        return self.inbox.pop(0)

    async def send(self, msg: RpcMessage, note: str) -> None:
        await self.conn.send(self.encoder.encode(msg.encode()), note)


async def valid_client_hello(conn, network_key: bytes) -> bytes:
    """The client's msg1, which must authenticate under the network key: the
    valid step a negative client case needs before its invalid answer (a
    client that sends garbage and hangs up shows nothing by hanging up)."""
    msg1 = await conn.receive_exactly(shs.HELLO_SIZE, "msg1 (client hello)")
    try:
        shs.open_hello(network_key, msg1, step="msg1")
    except shs.HandshakeError as exc:
        blocked(CLIENT_HELLO, "failed within this case",
                f"the client's msg1 does not authenticate under the network key ({exc}): {msg1.hex()}")
    return msg1


async def serve_handshake(conn, network_key: bytes, keypair: Keypair) -> ServedSession:
    hs = shs.ServerHandshake(network_key, keypair)
    msg1 = await conn.receive_exactly(shs.HELLO_SIZE, "msg1 (client hello)")
    try:
        msg2 = hs.receive_data(msg1)
    except shs.HandshakeError as exc:
        raise AssertionError(f"target's msg1 does not verify ({exc}): {msg1.hex()}") from None
    await conn.send(msg2, "msg2: server hello")
    msg3 = await conn.receive_exactly(shs.CLIENT_AUTH_SIZE, "msg3 (client authenticate)")
    try:
        msg4 = hs.receive_data(msg3)
    except shs.HandshakeError as exc:
        raise AssertionError(f"target's msg3 does not verify ({exc}): {msg3.hex()}") from None
    await conn.send(msg4, "msg4: server accept")
    return ServedSession(conn, hs.result)


async def first_history_request(session: ServedSession) -> RpcMessage:
    """The client's createHistoryStream request (other requests, such as a
    client's own housekeeping calls, are answered with an error and skipped)."""
    for _ in range(20):
        msg = await session.next_message("the client's createHistoryStream request")
        body = msg.json() if msg.body_type.name == "JSON" else None
        if msg.req > 0 and isinstance(body, dict) and body.get("name") == ["createHistoryStream"]:
            return msg
        if msg.req > 0 and not msg.end:
            error = {"name": "Error", "message": "not served by the conformance harness", "stack": ""}
            await session.send(RpcMessage.from_json(-msg.req, error, stream=msg.stream, end=True),
                               f"error for unrelated request {msg.req}")
    raise AssertionError("the client sent 20 messages without calling createHistoryStream")


@requirement("ssb.shs.client.sends-valid-hello", "MUST", "SSB guide, Handshake, 1. Client hello",
             role="client")
async def test_client_hello_authenticates_under_network_key(launched_client, network_key, harness_keypair):
    async with launched_client(harness_keypair, harness_keypair.feed_id) as (conn, _):
        msg1 = await conn.receive_exactly(shs.HELLO_SIZE, "msg1 (client hello)")
        try:
            shs.open_hello(network_key, msg1, step="msg1")
        except shs.HandshakeError as exc:
            raise AssertionError(f"msg1 does not authenticate under the network key ({exc}): {msg1.hex()}") from None


@requirement("ssb.shs.client.rejects-wrong-network-key", "MUST",
             "SSB guide, Handshake, 2. Server hello (Client verifies: assert_nacl_auth_verify)", role="client",
             depends=[CLIENT_HANDSHAKE])
async def test_client_rejects_server_hello_of_another_network(launched_client, network_key, harness_keypair):
    other = OTHER_NETWORK_KEY if network_key != OTHER_NETWORK_KEY else bytes(32)
    async with launched_client(harness_keypair, harness_keypair.feed_id) as (conn, _):
        await valid_client_hello(conn, network_key)
        msg2 = shs.hello(other, shs.ephemeral_public(shs.generate_ephemeral_secret()))
        await conn.send(msg2, "msg2 authenticated under a different network key")
        await expect_hang_up_without_writing(conn, "a msg2 for another network")


@requirement("ssb.shs.client.rejects-forged-server-accept", "MUST",
             "SSB guide, Handshake, 4. Server accept (Client verifies)", role="client",
             depends=[CLIENT_HANDSHAKE])
async def test_client_rejects_forged_server_accept(launched_client, network_key, harness_keypair):
    """A man in the middle without the server's secret key cannot produce
    msg4; the client must hang up rather than start the box stream."""
    async with launched_client(harness_keypair, harness_keypair.feed_id) as (conn, _):
        hs = shs.ServerHandshake(network_key, harness_keypair)
        await conn.send(hs.receive_data(await valid_client_hello(conn, network_key)), "msg2: server hello")
        await conn.receive_exactly(shs.CLIENT_AUTH_SIZE, "msg3 (client authenticate)")
        await conn.send(random_bytes(shs.SERVER_ACCEPT_SIZE), "80 random bytes in place of msg4")
        await expect_hang_up_without_writing(conn, "a forged msg4")


@requirement("ssb.shs.client.completes-valid-handshake", "MUST",
             "SSB guide, Handshake, 3. Client authenticate; Box stream", role="client",
             depends=[CLIENT_HELLO])
async def test_client_completes_handshake_and_speaks_box_stream(launched_client, network_key, harness_keypair):
    async with launched_client(harness_keypair, harness_keypair.feed_id) as (conn, _):
        session = await serve_handshake(conn, network_key, harness_keypair)
        msg = await session.next_message("the client's first RPC message")
        assert msg.req != 0, f"first RPC message has request number 0: {describe(msg)}"


@requirement("ssb.history.client.sends-well-formed-request", "MUST",
             "SSB guide, RPC protocol, Request format; createHistoryStream (\"Clients must use the name sequence\")",
             role="client",
             depends=[CLIENT_HANDSHAKE])
async def test_client_history_request_is_well_formed(launched_client, network_key, harness_keypair):
    async with launched_client(harness_keypair, harness_keypair.feed_id) as (conn, _):
        session = await serve_handshake(conn, network_key, harness_keypair)
        msg = await first_history_request(session)
        body = msg.json()
        assert msg.stream and not msg.end, f"a source request must set the stream flag (and not end): {describe(msg)}"
        assert body.get("type") == "source", f"createHistoryStream is a source procedure: {describe(msg)}"
        args = body.get("args")
        assert isinstance(args, list) and args and isinstance(args[0], dict), f"args must be [options]: {describe(msg)}"
        assert args[0].get("id") == harness_keypair.feed_id, (
            f"asked for feed {args[0].get('id')!r}, not the one it was told to replicate ({harness_keypair.feed_id})")
        assert "seq" not in args[0], f"clients must use the name sequence, not seq: {json.dumps(args[0])}"


@requirement("ssb.rpc.client.closes-stream-after-responder-end", "MUST",
             "SSB guide, RPC protocol, Source example (\"source type requests must always be closed by both ends\")",
             role="client",
             depends=[CLIENT_HANDSHAKE, CLIENT_HISTORY_REQUEST])
async def test_client_closes_its_end_of_a_finished_stream(launched_client, network_key, harness_keypair):
    feed = harness_feed(harness_keypair)
    async with launched_client(harness_keypair, harness_keypair.feed_id) as (conn, _):
        session = await serve_handshake(conn, network_key, harness_keypair)
        request = await first_history_request(session)
        options = request.json()["args"][0]
        keys = options.get("keys", True)
        after = int(options.get("sequence", options.get("seq", 0)) or 0)
        for value in feed.messages:
            if value["sequence"] <= after:
                continue
            item = {"key": feed.ids[value["sequence"] - 1], "value": value, "timestamp": value["timestamp"]} if keys else value
            await session.send(RpcMessage.from_json(-request.req, item, stream=True), f"feed message {value['sequence']}")
        await session.send(RpcMessage.from_json(-request.req, True, stream=True, end=True), "end of stream (true)")
        for _ in range(50):
            msg = await session.next_message("the client's end of the finished stream")
            if msg.req == request.req and msg.end:
                assert msg.stream, f"the client's closing message must set the stream flag: {describe(msg)}"
                return
        raise AssertionError("the client never closed its end of the finished stream")

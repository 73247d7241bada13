"""Target as client: the harness listens, launches the target's client
command pointed at it, and plays the server (SSB guide, "Handshake",
"RPC protocol", "createHistoryStream").

The target is asked to replicate a feed the harness holds, so after the
handshake it is expected to call createHistoryStream on it.
"""

from __future__ import annotations

import json
import time

import pytest

from conformance.core.node_grammar import exchange_cut_short
from conformance.core.requirements import blocked, not_applicable, requirement
from conformance.core.transport import Deadline, DeadlineExceeded, ProtocolViolation
from reference_impl.ssb import shs
from reference_impl.ssb.boxstream import BoxStreamEncoder
from reference_impl.ssb.feed import Feed
from reference_impl.ssb.keys import Keypair
from reference_impl.ssb.rpc import RpcMessage

from .prerequisites import CLIENT_GRAMMAR, CLIENT_HANDSHAKE, CLIENT_HELLO, CLIENT_HISTORY_REQUEST
from .test_rpc_more_server import RPC_FORMAT, RPC_FORMAT_BASIS
from .session import (
    MAX_RPC_BODY,
    TargetBoxStreamDecoder,
    TargetRpcDecoder,
    describe,
    expect_hang_up_without_writing,
    random_bytes,
)

OTHER_NETWORK_KEY = bytes(range(32))


def harness_feed(keypair: Keypair, count: int = 3) -> Feed:
    feed = Feed(keypair)
    start = int(time.time() * 1000)
    for n in range(count):
        feed.append(
            {"type": "post", "text": f"message {n + 1} served by the conformance harness"},
            start + n,
        )
    return feed


class ServedSession:
    """The harness as server after a completed handshake."""

    def __init__(self, conn, params: shs.BoxStreamParams, feed_id: str = "") -> None:
        self.conn = conn
        self.feed_id = feed_id
        """The harness's own identity in this session (its feed)."""
        self.encoder = BoxStreamEncoder(params.encrypt_key, params.encrypt_nonce)
        # The target's bytes: a box or RPC frame that does not decode is a
        # ProtocolViolation (a failure showing the bytes), never an error.
        self.decoder = TargetBoxStreamDecoder(params.decrypt_key, params.decrypt_nonce)
        self.rpc = TargetRpcDecoder(MAX_RPC_BODY, CLIENT_GRAMMAR, "client to harness", conn.label)
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
                raise AssertionError(
                    f"target client closed the connection while the case awaited {what}"
                )
            self.receive_data(data)
            # Messages that came in the same read as a goodbye still count.
            if not self.inbox and (self.decoder.ended or self.rpc.ended):
                raise AssertionError(f"target client said goodbye while the case awaited {what}")
        return self.inbox.pop(0)

    def receive_data(self, data: bytes) -> None:
        """Decrypt the target's bytes into the inbox. Each RPC message, and
        each goodbye, also goes into the trace in plaintext."""
        rpc_ended, box_ended = self.rpc.ended, self.decoder.ended
        for body in self.decoder.receive_data(data):
            for msg in self.rpc.receive_data(body):
                self.conn.trace.record("received-plain", msg.encode(), f"RPC {describe(msg)[:160]}")
                self.inbox.append(msg)
        if self.rpc.ended and not rpc_ended:
            self.conn.trace.record("received-plain", bytes(9), "RPC goodbye")
        if self.decoder.ended and not box_ended:
            self.conn.trace.event("target's box stream goodbye header")

    async def send(self, msg: RpcMessage, note: str) -> None:
        self.conn.trace.record("sent-plain", msg.encode(), note)
        await self.conn.send(self.encoder.encode(msg.encode()), note)


async def valid_client_hello(conn, network_key: bytes) -> bytes:
    """The client's msg1, which must authenticate under the network key: the
    valid step a negative client case needs before its invalid answer (a
    client that sends garbage and hangs up shows nothing by hanging up)."""
    msg1 = await conn.receive_exactly(shs.HELLO_SIZE, "msg1 (client hello)")
    try:
        shs.open_hello(network_key, msg1, step="msg1")
    except shs.HandshakeError as exc:
        blocked(
            CLIENT_HELLO,
            "failed within this case",
            f"the client's msg1 does not authenticate under the network key ({exc}): {msg1.hex()}",
        )
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
    return ServedSession(conn, hs.result, keypair.feed_id)


MAX_MESSAGES_BEFORE_HISTORY_REQUEST = 50
"""Messages a client may send before its request for the feed it was told to
replicate (ssb-server 16 sends 8: gossip.ping and its first ping, blobs,
ebt, ooo, its own feed; each read has the case's deadline too)."""


def history_options(msg: RpcMessage) -> dict:
    """The options of a createHistoryStream request, {} when malformed."""
    body = msg.json()
    args = body.get("args") if isinstance(body, dict) else None
    return args[0] if isinstance(args, list) and args and isinstance(args[0], dict) else {}


async def first_history_request(
    session: ServedSession, feed_id: str, check=None, held: int = 0
) -> RpcMessage:
    """The client's createHistoryStream request for ``feed_id``, the feed it
    was told to replicate.

    A client may ask for other feeds too, before it (the guide: peers ask
    each other about "the feeds they are interested in"; ssb-server asks
    first for its own): ``check``, if given, judges every createHistoryStream
    request as it comes; those for other feeds are answered as for feeds the
    harness does not hold (a live one is left open, another ends at once
    with no message). Other requests (a client's own housekeeping
    calls) are answered with an error, once per request number.

    When the client's first request is not the awaited one, the harness asks
    as a server peer does: it calls createHistoryStream on the client for its
    own feed after the ``held`` messages it serves (not live), like the
    reference node (``_ServerSession._ask_peer_for_own_feed``). ssb-server's
    legacy replication asks for the feeds it follows only once its peer has
    made that call (erratum SSB-E1, "What a server needs").

    The harness does not serve EBT: a client's ``["ebt", "replicate"]`` gets
    an error, the guide's first trigger for falling back to
    createHistoryStream. Falling back is a "may" (SSB guide, "EBT
    Replication", "Fallback Mechanisms"), so a client that asked for EBT
    and then makes no createHistoryStream request for the feed (ssb-db2 with
    ssb-ebt, as Manyverse runs it) leaves the case nothing to judge: not
    applicable, with what it asked."""
    seen: set[int] = set()
    asked: int | None = None  # our own request's number while it is open
    ebt_refused: list[str] = []  # the client's ["ebt", "replicate"] requests, refused
    for _ in range(MAX_MESSAGES_BEFORE_HISTORY_REQUEST):
        try:
            msg = await session.next_message(
                f"the client's createHistoryStream request for {feed_id}"
            )
        except ProtocolViolation:
            raise  # bytes that break a rule are judged whatever the client asked
        except (DeadlineExceeded, AssertionError) as exc:  # silence, a goodbye or a close
            if ebt_refused:
                not_applicable(
                    f"the client replicates by EBT only: it asked {', '.join(ebt_refused)}, which the harness "
                    f"does not serve and answered with an error, and then made no createHistoryStream request "
                    f"for {feed_id} ({exc}); falling back to createHistoryStream is a 'may' (SSB guide, EBT "
                    f"Replication, Fallback Mechanisms), so there is no request to judge"
                )
            raise
        if msg.req <= 0 or msg.req in seen:
            # An answer to our call, or more of a stream the client opened.
            if asked is not None and msg.req == -asked and msg.end:
                await session.send(
                    RpcMessage.from_json(asked, True, stream=True, end=True),
                    f"end of our createHistoryStream request {asked} (the client ended it)",
                )
                asked = None
            continue
        seen.add(msg.req)
        body = msg.json() if msg.body_type.name == "JSON" else None
        if isinstance(body, dict) and body.get("name") == ["createHistoryStream"]:
            if check is not None:
                check(msg)
            options = history_options(msg)
            if options.get("id") == feed_id:
                return msg
            if options.get("live") is not True:
                await session.send(
                    RpcMessage.from_json(-msg.req, True, stream=True, end=True),
                    f"end of stream {msg.req} at once: no message of {options.get('id')!r} here",
                )
        elif not msg.end:
            if isinstance(body, dict) and body.get("name") == ["ebt", "replicate"]:
                ebt_refused.append(
                    f'["ebt", "replicate"] (request {msg.req}: {json.dumps(body.get("args"))})'
                )
            error = {
                "name": "Error",
                "message": "not served by the conformance harness",
                "stack": "",
            }
            await session.send(
                RpcMessage.from_json(-msg.req, error, stream=msg.stream, end=True),
                f"error for unrelated request {msg.req}",
            )
        if asked is None and len(seen) == 1:
            asked = 1
            options = {"id": session.feed_id, "sequence": held + 1, "live": False, "keys": False}
            await session.send(
                RpcMessage.from_json(
                    asked,
                    {"name": ["createHistoryStream"], "type": "source", "args": [options]},
                    stream=True,
                ),
                "our createHistoryStream request for our own feed, as a server peer makes",
            )
    raise AssertionError(
        f"the client sent {MAX_MESSAGES_BEFORE_HISTORY_REQUEST} messages without calling "
        f"createHistoryStream for {feed_id}, the feed it was told to replicate"
    )


@requirement(
    "ssb.shs.client.sends-valid-hello",
    "MUST",
    "SSB guide, Handshake, 1. Client hello",
    role="client",
    basis="wire-format: msg1, 1. Client hello (64 bytes: nacl_auth of the client's ephemeral key under the network identifier, then the key)",
)
async def test_client_hello_authenticates_under_network_key(
    launched_client, network_key, harness_keypair
):
    async with launched_client(harness_keypair, harness_keypair.feed_id) as (conn, _):
        msg1 = await conn.receive_exactly(shs.HELLO_SIZE, "msg1 (client hello)")
        try:
            shs.open_hello(network_key, msg1, step="msg1")
        except shs.HandshakeError as exc:
            raise AssertionError(
                f"msg1 does not authenticate under the network key ({exc}): {msg1.hex()}"
            ) from None


@requirement(
    "ssb.shs.client.rejects-wrong-network-key",
    "MUST",
    "SSB guide, Handshake, 2. Server hello (Client verifies: assert_nacl_auth_verify)",
    role="client",
    depends=[CLIENT_HANDSHAKE],
    basis="profile: S1 a handshake check that fails ends the handshake (step 2: msg2's hmac does not verify under the network key; close, no msg3), docs/ssb-profile.md",
)
async def test_client_rejects_server_hello_of_another_network(
    launched_client, network_key, harness_keypair
):
    other = OTHER_NETWORK_KEY if network_key != OTHER_NETWORK_KEY else bytes(32)
    async with launched_client(harness_keypair, harness_keypair.feed_id) as (conn, _):
        await valid_client_hello(conn, network_key)
        msg2 = shs.hello(other, shs.ephemeral_public(shs.generate_ephemeral_secret()))
        await conn.send(msg2, "msg2 authenticated under a different network key")
        await expect_hang_up_without_writing(conn, "a msg2 for another network")


@requirement(
    "ssb.shs.client.rejects-forged-server-accept",
    "MUST",
    "SSB guide, Handshake, 4. Server accept (Client verifies)",
    role="client",
    depends=[CLIENT_HANDSHAKE],
    basis="profile: S1 a handshake check that fails ends the handshake (step 4: a forged msg4 fails assert_nacl_secretbox_open; close, no box stream), docs/ssb-profile.md",
)
async def test_client_rejects_forged_server_accept(launched_client, network_key, harness_keypair):
    """A man in the middle without the server's secret key cannot produce
    msg4; the client must hang up rather than start the box stream."""
    async with launched_client(harness_keypair, harness_keypair.feed_id) as (conn, _):
        hs = shs.ServerHandshake(network_key, harness_keypair)
        await conn.send(
            hs.receive_data(await valid_client_hello(conn, network_key)), "msg2: server hello"
        )
        await conn.receive_exactly(shs.CLIENT_AUTH_SIZE, "msg3 (client authenticate)")
        await conn.send(random_bytes(shs.SERVER_ACCEPT_SIZE), "80 random bytes in place of msg4")
        await expect_hang_up_without_writing(conn, "a forged msg4")


@requirement(
    "ssb.shs.client.completes-valid-handshake",
    "MUST",
    "SSB guide, Handshake, 3. Client authenticate; Box stream",
    role="client",
    depends=[CLIENT_HELLO],
    basis="wire-format: msg3, 3. Client authenticate (112 bytes: secret box of detached_signature_A and the client's long-term key), and the box stream that follows",
)
async def test_client_completes_handshake_and_speaks_box_stream(
    launched_client, network_key, harness_keypair
):
    async with launched_client(harness_keypair, harness_keypair.feed_id) as (conn, _):
        session = await serve_handshake(conn, network_key, harness_keypair)
        msg = await session.next_message("the client's first RPC message")
        assert msg.req != 0, f"first RPC message has request number 0: {describe(msg)}"


@requirement(
    "ssb.history.client.sends-well-formed-request",
    "MUST",
    'SSB guide, RPC protocol, Request format; createHistoryStream ("Clients must use the name sequence")',
    role="client",
    depends=[CLIENT_HANDSHAKE],
    basis="plain-words",
)
async def test_client_history_request_is_well_formed(launched_client, network_key, harness_keypair):
    """Every createHistoryStream request the client makes until it asks for
    the feed it was told to replicate must be well formed, and it must ask
    for that feed; requests for other feeds (its own, say) are allowed."""
    told = harness_keypair.feed_id
    requests: list[RpcMessage] = []

    def well_formed(msg: RpcMessage) -> None:
        requests.append(msg)
        which = f"createHistoryStream request {len(requests)} (req {msg.req})"
        body = msg.json()
        assert msg.stream and not msg.end, (
            f"a source request must set the stream flag (and not end), {which}: {describe(msg)}"
        )
        assert body.get("type") == "source", (
            f"createHistoryStream is a source procedure, {which}: {describe(msg)}"
        )
        args = body.get("args")
        assert isinstance(args, list) and args and isinstance(args[0], dict), (
            f"args must be [options], {which}: {describe(msg)}"
        )
        feed = args[0].get("id")
        assert isinstance(feed, str) and feed, (
            f"id (the feed) is required, {which}: {json.dumps(args[0])}"
        )
        assert "seq" not in args[0], (
            f"clients must use the name sequence, not seq, {which} "
            f"(for {'the feed it was told to replicate' if feed == told else feed}): "
            f"{json.dumps(args[0])}"
        )

    async with launched_client(harness_keypair, told) as (conn, _):
        session = await serve_handshake(conn, network_key, harness_keypair)
        await first_history_request(session, told, check=well_formed)
        # What came in the same reads as that request is judged too.
        for later in list(session.inbox):
            body = later.json() if later.req > 0 and later.body_type.name == "JSON" else None
            if isinstance(body, dict) and body.get("name") == ["createHistoryStream"]:
                well_formed(later)


@requirement(
    "ssb.rpc.client.closes-stream-after-responder-end",
    "MUST",
    'SSB guide, RPC protocol, Source example ("source type requests must always be closed by both ends")',
    role="client",
    depends=[CLIENT_HANDSHAKE, CLIENT_HISTORY_REQUEST],
    basis="plain-words",
)
async def test_client_closes_its_end_of_a_finished_stream(
    launched_client, network_key, harness_keypair
):
    feed = harness_feed(harness_keypair)
    async with launched_client(harness_keypair, harness_keypair.feed_id) as (conn, _):
        session = await serve_handshake(conn, network_key, harness_keypair)
        request = await first_history_request(
            session, harness_keypair.feed_id, held=len(feed.messages)
        )
        options = request.json()["args"][0]
        keys = options.get("keys", True)
        after = int(options.get("sequence", options.get("seq", 0)) or 0)
        for value in feed.messages:
            if value["sequence"] <= after:
                continue
            item = (
                {
                    "key": feed.ids[value["sequence"] - 1],
                    "value": value,
                    "timestamp": value["timestamp"],
                }
                if keys
                else value
            )
            await session.send(
                RpcMessage.from_json(-request.req, item, stream=True),
                f"feed message {value['sequence']}",
            )
        await session.send(
            RpcMessage.from_json(-request.req, True, stream=True, end=True), "end of stream (true)"
        )
        for _ in range(50):
            msg = await session.next_message("the client's end of the finished stream")
            if msg.req == request.req and msg.end:
                assert msg.stream, (
                    f"the client's closing message must set the stream flag: {describe(msg)}"
                )
                return
        raise AssertionError("the client never closed its end of the finished stream")


@requirement(
    CLIENT_GRAMMAR,
    "MUST",
    RPC_FORMAT,
    role="client",
    basis=RPC_FORMAT_BASIS,
    grammar=True,
)
async def test_client_sends_well_formed_messages(
    launched_client, network_key, harness_keypair, wire_trace, node_grammar
):
    """Every RPC message the client sent in this run, in every case's
    traffic, keeps the RPC message format (session.TargetRpcDecoder), as
    the server's grammar case judges the server's: the violations the
    other cases met (each of them blocked by this case) and those of its
    own exchange, the client's requests until it asks for the feed it was
    told to replicate (a client that replicates by EBT only ends that
    exchange not applicable to the history cases; what it sent until then
    was judged all the same)."""
    with node_grammar.judging():
        read = 0
        with exchange_cut_short(wire_trace):
            async with launched_client(harness_keypair, harness_keypair.feed_id) as (conn, _):
                session = await serve_handshake(conn, network_key, harness_keypair)
                try:
                    await first_history_request(session, harness_keypair.feed_id)
                except pytest.skip.Exception as ended:
                    if not session.rpc.decoded:
                        raise
                    wire_trace.event(f"the exchange ended early: {ended}")
                read = session.rpc.decoded
        if not read:
            node_grammar.nothing_to_judge(
                (CLIENT_HELLO, CLIENT_HANDSHAKE),
                "the client sent no RPC message at all, so there was nothing to judge",
            )

"""Target as client, continued: the harness plays the server and serves a
feed it built, valid or broken in exactly one rule, and judges the client
by the exit status its client command must give (docs/targets.md: 0 only
after it replicated and verified the feed) and by what it sends.

SSB guide sections: "Handshake" (2. Server hello, 4. Server accept),
"Box stream" (Goodbye), "RPC protocol" (Source example), "Feeds"
(Structure, Message format, Signature).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time

from conformance.core.requirements import requirement
from conformance.core.targets import client_timeout
from conformance.core.transport import DeadlineExceeded, short_hex
from reference_impl.ssb import shs
from reference_impl.ssb.boxstream import BoxStreamError
from reference_impl.ssb.feed import (
    SIGNATURE_SUFFIX,
    create_message,
    encode_signature,
    json_stringify,
    message_id,
    signing_input,
)
from reference_impl.ssb.keys import Keypair
from reference_impl.ssb.rpc import RpcError, RpcMessage

from .session import describe, expect_hang_up_without_writing
from .test_client import ServedSession, first_history_request, serve_handshake

CLIENT_HELLO = "ssb.shs.client.sends-valid-hello"
CLIENT_HANDSHAKE = "ssb.shs.client.completes-valid-handshake"
CLIENT_HISTORY_REQUEST = "ssb.history.client.sends-well-formed-request"
REPLICATES = "ssb.history.client.replicates-valid-feed"
REJECTS_PREREQUISITES = [CLIENT_HANDSHAKE, CLIENT_HISTORY_REQUEST, REPLICATES]
FEED_CITE = "SSB guide, Feeds"
EXIT_GRACE = 10.0
"""Seconds beyond the client's own timeout to wait for it to exit."""


# --- feeds the harness serves ----------------------------------------------------


def valid_messages(keypair: Keypair, count: int = 3, content: dict | None = None) -> list[dict]:
    messages: list[dict] = []
    start = int(time.time() * 1000)
    for n in range(count):
        body = (
            dict(content)
            if content
            else {"type": "post", "text": f"message {n + 1} from the conformance harness"}
        )
        previous = message_id(messages[-1]) if messages else None
        messages.append(create_message(keypair, previous, n + 1, start + n, body))
    return messages


def signed(keypair: Keypair, fields: dict) -> dict:
    """``fields`` (any names, any order) plus a signature over their canonical JSON."""
    msg = dict(fields)
    msg["signature"] = encode_signature(keypair.sign(signing_input(msg)))
    return msg


def second_message_fields(keypair: Keypair, first: dict) -> dict:
    return {
        "previous": message_id(first),
        "author": keypair.feed_id,
        "sequence": 2,
        "timestamp": first["timestamp"] + 1,
        "hash": "sha256",
        "content": {"type": "post", "text": "message 2 from the conformance harness"},
    }


def flipped_signature(msg: dict) -> dict:
    raw = bytearray(base64.b64decode(msg["signature"][: -len(SIGNATURE_SUFFIX)]))
    raw[0] ^= 0xFF
    return {**msg, "signature": base64.b64encode(bytes(raw)).decode("ascii") + SIGNATURE_SUFFIX}


# --- serving and judging -----------------------------------------------------------


def history_item(msg: dict, keys: bool):
    return {"key": message_id(msg), "value": msg, "timestamp": msg["timestamp"]} if keys else msg


def first_wanted(options: dict) -> int:
    """The first sequence the request asks for. A fresh client asks from the
    start (no sequence, or 0/1, which both readings of the guide's
    "sequence" -- erratum SSB-E1 -- serve from message 1)."""
    value = options.get("sequence", options.get("seq", 0))
    return (
        max(1, int(value)) if isinstance(value, (int, float)) and not isinstance(value, bool) else 1
    )


async def send_rpc(
    session: ServedSession, packets: list[RpcMessage], note: str, boxes: str = "one-per-message"
) -> bool:
    """Send RPC packets boxed one per message, split (each message over two
    boxes) or packed (all in one box). False if the client hung up."""
    wire = [p.encode() for p in packets]
    if boxes == "split":
        chunks = [piece for w in wire for piece in (w[:5], w[5:])]
    elif boxes == "packed":
        chunks = [b"".join(wire)]
    else:
        chunks = wire
    for n, chunk in enumerate(chunks):
        if not await session.conn.send_quietly(
            session.encoder.encode_box(chunk), f"{note} (box {n + 1} of {len(chunks)})"
        ):
            return False
    return True


async def finish_like_a_server(session: ServedSession) -> bool:
    """After serving: read what the client sends until it hangs up; answer its
    RPC goodbye with ours at once (the guide orders neither goodbye, and a
    muxrpc client -- npm pull-goodbye -- ends its box stream only once the
    peer's RPC goodbye came), its box stream goodbye with ours. Returns
    whether its box stream ended with the goodbye header before the
    connection closed."""
    rpc_goodbye_sent = False
    while True:
        try:
            data = await session.conn.receive_some()
        except DeadlineExceeded:
            return session.decoder.ended
        if not data:
            return session.decoder.ended
        try:
            session.receive_data(data)
        except (BoxStreamError, RpcError):
            return False
        if (session.decoder.ended or session.rpc.ended) and not rpc_goodbye_sent:
            rpc_goodbye_sent = True
            await session.conn.send_quietly(session.encoder.encode(b"\0" * 9), "RPC goodbye")
        if session.decoder.ended:
            await session.conn.send_quietly(session.encoder.goodbye(), "box stream goodbye")
            await session.conn.close()
            return True


async def client_exit_status(process, deadline: float) -> int | None:
    return await asyncio.to_thread(process.wait, client_timeout(deadline) + EXIT_GRACE)


async def serve_feed(
    launched_client,
    network_key: bytes,
    keypair: Keypair,
    messages: list[dict],
    deadline: float,
    boxes: str = "one-per-message",
) -> tuple[int | None, object, bool]:
    """Launch the client, serve ``messages`` as the feed it asks for, end
    the stream; returns (exit status or None, process, goodbye seen)."""
    async with launched_client(keypair, keypair.feed_id) as (conn, process):
        session = await serve_handshake(conn, network_key, keypair)
        request = await first_history_request(session, keypair.feed_id, held=len(messages))
        options = request.json()["args"][0]
        keys = options.get("keys", True) is not False
        start = first_wanted(options)
        packets = [
            RpcMessage.from_json(-request.req, history_item(m, keys), stream=True)
            for m in messages
            if m["sequence"] >= start
        ]
        packets.append(RpcMessage.from_json(-request.req, True, stream=True, end=True))
        goodbye = False
        if await send_rpc(
            session, packets, f"feed of {len(packets) - 1} message(s) and the end", boxes
        ):
            goodbye = await finish_like_a_server(session)
        return await client_exit_status(process, deadline), process, goodbye


async def expect_rejected(
    launched_client, network_key, keypair, messages, deadline, what: str
) -> None:
    code, process, _ = await serve_feed(launched_client, network_key, keypair, messages, deadline)
    assert code is not None, (
        f"served a feed whose {what}, the client neither rejected nor finished within "
        f"{client_timeout(deadline) + EXIT_GRACE:g} s; output:\n{process.tail(10)}"
    )
    assert code != 0, (
        f"the client accepted a feed whose {what} (exit 0); message 2 as served: "
        f"{json.dumps(messages[-1])[:400]}"
    )


# --- the valid counterpart ----------------------------------------------------------


@requirement(
    REPLICATES,
    "MUST",
    'SSB guide, createHistoryStream; Feeds, Signature ("This enables recipients to verify that a message '
    'was really posted by a particular identity")',
    role="client",
    depends=[CLIENT_HANDSHAKE, CLIENT_HISTORY_REQUEST],
    basis="plain-words",
)
async def test_client_replicates_a_valid_feed(
    launched_client, network_key, harness_keypair, deadline
):
    """The positive counterpart of every "rejects" case below: a valid
    three-message feed is accepted (exit 0)."""
    code, process, _ = await serve_feed(
        launched_client, network_key, harness_keypair, valid_messages(harness_keypair), deadline
    )
    assert code == 0, (
        f"the client did not accept a valid feed (exit {code}); output:\n{process.tail(10)}"
    )


@requirement(
    "ssb.feed.client.keeps-content-key-order",
    "MUST",
    'SSB guide, Feeds, Signature ("the order of dictionary entries within content matters; they must '
    'be in the same order that you received them")',
    role="client",
    depends=[REPLICATES],
    basis="plain-words",
)
async def test_client_verifies_with_content_keys_in_received_order(
    launched_client, network_key, harness_keypair, deadline
):
    """Content keys in non-alphabetical order: a client that re-sorts them
    before verifying computes a different signing input and wrongly
    rejects a valid feed."""
    content = {"type": "post", "zeta": "last letter first", "alpha": 1, "text": "keys out of order"}
    code, process, _ = await serve_feed(
        launched_client,
        network_key,
        harness_keypair,
        valid_messages(harness_keypair, 3, content),
        deadline,
    )
    assert code == 0, (
        f"the client rejected a valid feed whose content keys are not sorted (exit {code}); "
        f"content {json.dumps(content)}; output:\n{process.tail(10)}"
    )


@requirement(
    "ssb.boxstream.client.accepts-rpc-split-across-boxes",
    "MUST",
    'SSB guide, RPC protocol ("Multiple RPC messages may be put inside one box or a single RPC message '
    'may be split over several boxes")',
    role="client",
    depends=[REPLICATES],
    basis="wire-format: RPC messages over the box stream, RPC protocol (rpc_alignment figure): they are not aligned to boxes, so a reader of the format reads them split or packed",
)
async def test_client_accepts_rpc_messages_split_and_packed(
    launched_client, network_key, harness_keypair, deadline
):
    """The feed served twice: every RPC message split over two boxes, then
    all of them packed into one box."""
    for boxes in ("split", "packed"):
        code, process, _ = await serve_feed(
            launched_client,
            network_key,
            harness_keypair,
            valid_messages(harness_keypair),
            deadline,
            boxes,
        )
        assert code == 0, (
            f"the client did not accept a valid feed sent with RPC messages {boxes} "
            f"(exit {code}); output:\n{process.tail(10)}"
        )


@requirement(
    "ssb.boxstream.client.ends-stream-with-goodbye",
    "MUST",
    'SSB guide, Box stream, Goodbye ("The stream ends with a special ... header")',
    role="client",
    depends=[REPLICATES],
    basis="wire-format: the end of a box stream, Goodbye (box_stream_goodbye figure): the stream ends with a secret box of 18 zero bytes",
)
async def test_client_ends_its_box_stream_with_goodbye(
    launched_client, network_key, harness_keypair, deadline
):
    code, process, goodbye = await serve_feed(
        launched_client, network_key, harness_keypair, valid_messages(harness_keypair), deadline
    )
    assert goodbye, (
        "the client closed the connection without ending its box stream with the goodbye "
        f"header (exit {code}); output:\n{process.tail(10)}"
    )


# --- feeds broken in one rule -------------------------------------------------------


@requirement(
    "ssb.feed.client.rejects-bad-signature",
    "MUST",
    f'{FEED_CITE}, Signature ("All messages in a feed are signed by that feed\'s long-term secret key")',
    role="client",
    depends=REJECTS_PREREQUISITES,
    basis="profile: S3 a replicating client keeps only messages that verify (the signature does not verify), docs/ssb-profile.md",
)
async def test_client_rejects_a_bad_signature(
    launched_client, network_key, harness_keypair, deadline
):
    first, second = valid_messages(harness_keypair, 2)
    await expect_rejected(
        launched_client,
        network_key,
        harness_keypair,
        [first, flipped_signature(second)],
        deadline,
        "message 2 has a signature with its first byte inverted",
    )


@requirement(
    "ssb.feed.client.rejects-foreign-author",
    "MUST",
    f'{FEED_CITE}, Message format (author: "Public key of the feed that the message will be posted in")',
    role="client",
    depends=REJECTS_PREREQUISITES,
    basis="profile: S3 a replicating client keeps only messages that verify (author is not the feed asked for), docs/ssb-profile.md",
)
async def test_client_rejects_a_message_by_another_author(
    launched_client, network_key, harness_keypair, deadline
):
    """Message 2 is validly signed, but by another identity that claims its
    place in this feed."""
    first = valid_messages(harness_keypair, 1)[0]
    other = Keypair.generate()
    fields = {**second_message_fields(harness_keypair, first), "author": other.feed_id}
    await expect_rejected(
        launched_client,
        network_key,
        harness_keypair,
        [first, signed(other, fields)],
        deadline,
        "message 2 is by another author",
    )


@requirement(
    "ssb.feed.client.rejects-broken-previous-link",
    "MUST",
    f'{FEED_CITE}, Structure ("Each message (except the first one) references the ID of the previous message")',
    role="client",
    depends=REJECTS_PREREQUISITES,
    basis="profile: S3 a replicating client keeps only messages that verify (previous is not the id of the message before it), docs/ssb-profile.md",
)
async def test_client_rejects_a_wrong_previous(
    launched_client, network_key, harness_keypair, deadline
):
    first = valid_messages(harness_keypair, 1)[0]
    elsewhere = create_message(
        harness_keypair, None, 1, first["timestamp"], {"type": "post", "text": "another first"}
    )
    fields = {**second_message_fields(harness_keypair, first), "previous": message_id(elsewhere)}
    await expect_rejected(
        launched_client,
        network_key,
        harness_keypair,
        [first, signed(harness_keypair, fields)],
        deadline,
        "message 2's previous is not message 1's id",
    )


@requirement(
    "ssb.feed.client.rejects-wrong-sequence",
    "MUST",
    f'{FEED_CITE}, Message format (sequence: "1 for the first message in a feed, 2 for the second and so on")',
    role="client",
    depends=REJECTS_PREREQUISITES,
    basis="profile: S3 a replicating client keeps only messages that verify (sequence is not one more than the message before it), docs/ssb-profile.md",
)
async def test_client_rejects_a_sequence_gap(
    launched_client, network_key, harness_keypair, deadline
):
    first = valid_messages(harness_keypair, 1)[0]
    fields = {**second_message_fields(harness_keypair, first), "sequence": 3}
    await expect_rejected(
        launched_client,
        network_key,
        harness_keypair,
        [first, signed(harness_keypair, fields)],
        deadline,
        "second message has sequence 3",
    )


@requirement(
    "ssb.feed.client.rejects-invalid-content-type",
    "MUST",
    f'{FEED_CITE}, Message format (content type "must be a Unicode string between 3 and 52 code units long")',
    role="client",
    depends=REJECTS_PREREQUISITES,
    basis="profile: S3 a replicating client keeps only messages that verify (content type shorter than 3 code units), docs/ssb-profile.md",
)
async def test_client_rejects_a_too_short_content_type(
    launched_client, network_key, harness_keypair, deadline
):
    first = valid_messages(harness_keypair, 1)[0]
    fields = {
        **second_message_fields(harness_keypair, first),
        "content": {"type": "po", "text": "type too short"},
    }
    await expect_rejected(
        launched_client,
        network_key,
        harness_keypair,
        [first, signed(harness_keypair, fields)],
        deadline,
        "message 2's content type is 2 code units long",
    )


@requirement(
    "ssb.feed.client.rejects-extra-field",
    "MUST",
    f'{FEED_CITE}, Message format ("Only these fields are allowed and they all must be present")',
    role="client",
    depends=REJECTS_PREREQUISITES,
    basis="profile: S3 a replicating client keeps only messages that verify (a field besides the seven), docs/ssb-profile.md",
)
async def test_client_rejects_an_extra_field(
    launched_client, network_key, harness_keypair, deadline
):
    first = valid_messages(harness_keypair, 1)[0]
    fields = {**second_message_fields(harness_keypair, first), "extra": "not a message field"}
    await expect_rejected(
        launched_client,
        network_key,
        harness_keypair,
        [first, signed(harness_keypair, fields)],
        deadline,
        "message 2 has a field 'extra' besides the seven allowed",
    )


@requirement(
    "ssb.feed.client.rejects-fields-out-of-order",
    "MUST",
    f'{FEED_CITE}, Message format ("Fields must appear in this order")',
    role="client",
    depends=REJECTS_PREREQUISITES,
    basis="profile: S3 a replicating client keeps only messages that verify (fields out of the guide's order), docs/ssb-profile.md",
)
async def test_client_rejects_fields_out_of_order(
    launched_client, network_key, harness_keypair, deadline
):
    """hash before timestamp, signed over that order: only author and
    sequence may be swapped (legacy)."""
    first = valid_messages(harness_keypair, 1)[0]
    f = second_message_fields(harness_keypair, first)
    fields = {
        "previous": f["previous"],
        "author": f["author"],
        "sequence": 2,
        "hash": "sha256",
        "timestamp": f["timestamp"],
        "content": f["content"],
    }
    await expect_rejected(
        launched_client,
        network_key,
        harness_keypair,
        [first, signed(harness_keypair, fields)],
        deadline,
        "message 2 has hash before timestamp",
    )


@requirement(
    "ssb.feed.client.rejects-wrong-hash-name",
    "MUST",
    f'{FEED_CITE}, Message format (hash: "The fixed string sha256")',
    role="client",
    depends=REJECTS_PREREQUISITES,
    basis="profile: S3 a replicating client keeps only messages that verify (hash is not sha256), docs/ssb-profile.md",
)
async def test_client_rejects_another_hash_name(
    launched_client, network_key, harness_keypair, deadline
):
    first = valid_messages(harness_keypair, 1)[0]
    fields = {**second_message_fields(harness_keypair, first), "hash": "blake2b"}
    await expect_rejected(
        launched_client,
        network_key,
        harness_keypair,
        [first, signed(harness_keypair, fields)],
        deadline,
        "message 2's hash is 'blake2b'",
    )


@requirement(
    "ssb.feed.client.rejects-non-canonical-signing",
    "MUST",
    f'{FEED_CITE}, Signature ("Before signing a message it must be serialized according to a specific '
    'canonical JSON format")',
    role="client",
    depends=REJECTS_PREREQUISITES,
    basis="profile: S3 a replicating client keeps only messages that verify (the signature verifies over the canonical format only), docs/ssb-profile.md",
)
async def test_client_rejects_a_signature_over_compact_json(
    launched_client, network_key, harness_keypair, deadline
):
    """Message 2 signed over its compact JSON (as sent over RPC) instead of
    the two-space-indented canonical form."""
    first = valid_messages(harness_keypair, 1)[0]
    fields = second_message_fields(harness_keypair, first)
    compact = json_stringify(fields).encode("utf-8")
    bad = {**fields, "signature": encode_signature(harness_keypair.sign(compact))}
    await expect_rejected(
        launched_client,
        network_key,
        harness_keypair,
        [first, bad],
        deadline,
        "message 2 is signed over compact JSON, not the canonical format",
    )


# --- handshake -----------------------------------------------------------------------


@requirement(
    "ssb.shs.client.uses-fresh-ephemeral-keys",
    "SHOULD",
    'SSB guide, Handshake ("Handshakes provide forward secrecy"), 1. Client hello',
    role="client",
    depends=[CLIENT_HELLO],
    basis="inference: the forward secrecy and replay protection the guide says handshakes provide rest on a freshly generated ephemeral key per handshake",
)
async def test_client_uses_a_fresh_ephemeral_key_per_handshake(launched_client, harness_keypair):
    keys = []
    for attempt in ("first", "second"):
        async with launched_client(harness_keypair, harness_keypair.feed_id) as (conn, process):
            msg1 = await conn.receive_exactly(shs.HELLO_SIZE, f"msg1 of the {attempt} launch")
            keys.append(msg1[32:])
            await conn.close()
            process.stop()
    assert keys[0] != keys[1], (
        f"the client sent the same ephemeral public key twice: {keys[0].hex()}"
    )


@requirement(
    "ssb.shs.client.rejects-truncated-msg2",
    "MUST",
    "SSB guide, Handshake, 2. Server hello (assert(length(msg2) == 64))",
    role="client",
    depends=[CLIENT_HANDSHAKE],
    basis="profile: S1 a handshake check that fails ends the handshake (step 2: assert(length(msg2) == 64) fails at the end of stream; close, no msg3), docs/ssb-profile.md",
)
async def test_client_rejects_a_truncated_server_hello(
    launched_client, network_key, harness_keypair
):
    async with launched_client(harness_keypair, harness_keypair.feed_id) as (conn, _):
        hs = shs.ServerHandshake(network_key, harness_keypair)
        msg2 = hs.receive_data(await conn.receive_exactly(shs.HELLO_SIZE, "msg1 (client hello)"))
        await conn.send(msg2[:40], "first 40 of the 64 bytes of msg2")
        conn.finish_sending()
        await expect_hang_up_without_writing(conn, "a msg2 truncated to 40 bytes and end of stream")


@requirement(
    "ssb.shs.client.rejects-msg4-with-bad-signature",
    "MUST",
    'SSB guide, Handshake, 4. Server accept ("the client opens the box and verifies the server\'s signature")',
    role="client",
    depends=[CLIENT_HANDSHAKE],
    basis="profile: S1 a handshake check that fails ends the handshake (step 4: assert_nacl_sign_verify_detached fails on the server's signature; close, no box stream), docs/ssb-profile.md",
)
async def test_client_rejects_a_server_accept_with_a_wrong_signature(
    launched_client, network_key, harness_keypair
):
    """msg4 opens with the right key but holds the server's signature over
    another client's key: a client that only opens the box would go on."""
    async with launched_client(harness_keypair, harness_keypair.feed_id) as (conn, _):
        secret = shs.generate_ephemeral_secret()
        client_ephemeral = shs.open_hello(
            network_key, await conn.receive_exactly(shs.HELLO_SIZE, "msg1"), step="msg1"
        )
        await conn.send(shs.hello(network_key, shs.ephemeral_public(secret)), "msg2: server hello")
        ab = shs.shared_secret_ab(secret, client_ephemeral)
        a_b = shs.server_shared_secret_aB(harness_keypair, client_ephemeral)
        msg3 = await conn.receive_exactly(shs.CLIENT_AUTH_SIZE, "msg3 (client authenticate)")
        signature_a, client_public = shs.open_client_auth(
            network_key=network_key,
            server_public=harness_keypair.public,
            shared_secret_ab=ab,
            shared_secret_aB=a_b,
            msg3=msg3,
        )
        a_b_big = shs.server_shared_secret_Ab(secret, client_public)
        wrong = shs.server_accept_signature(
            network_key=network_key,
            server_keypair=harness_keypair,
            detached_signature_A=signature_a,
            client_public=Keypair.generate().public,
            shared_secret_ab=ab,
        )
        msg4 = shs.box_server_accept(
            network_key=network_key,
            shared_secret_ab=ab,
            shared_secret_aB=a_b,
            shared_secret_Ab=a_b_big,
            detached_signature_B=wrong,
        )
        await conn.send(msg4, "msg4 that opens, holding a signature over another client's key")
        await expect_hang_up_without_writing(conn, "a msg4 whose signature does not verify")


@requirement(
    "ssb.shs.client.rejects-replayed-server-hello-and-accept",
    "MUST",
    'SSB guide, Handshake ("Past handshakes cannot be replayed"), 4. Server accept',
    role="client",
    depends=[CLIENT_HANDSHAKE],
    basis="profile: S1 a handshake check that fails ends the handshake (step 4: a recorded msg4 does not open under this handshake's keys; close, no box stream), docs/ssb-profile.md",
)
async def test_client_rejects_a_replayed_server_handshake(
    launched_client, network_key, harness_keypair
):
    """msg2 and msg4 recorded from a completed handshake with the same client
    identity, replayed to its next connection: the client's fresh ephemeral
    key makes the old msg4 fail to open."""
    async with launched_client(harness_keypair, harness_keypair.feed_id) as (conn, process):
        hs = shs.ServerHandshake(network_key, harness_keypair)
        msg2 = hs.receive_data(
            await conn.receive_exactly(shs.HELLO_SIZE, "msg1 (recorded session)")
        )
        await conn.send(msg2, "msg2: server hello (recorded)")
        msg4 = hs.receive_data(
            await conn.receive_exactly(shs.CLIENT_AUTH_SIZE, "msg3 (recorded session)")
        )
        await conn.send(msg4, "msg4: server accept (recorded)")
        await conn.close()
        process.stop()
    async with launched_client(harness_keypair, harness_keypair.feed_id) as (conn, _):
        await conn.receive_exactly(shs.HELLO_SIZE, "msg1 (replay session)")
        await conn.send(msg2, "msg2 replayed from the recorded session")
        msg3 = await conn.receive_exactly(shs.CLIENT_AUTH_SIZE, "msg3 (replay session)")
        await conn.send(msg4, "msg4 replayed from the recorded session")
        await expect_hang_up_without_writing(
            conn, f"a replayed msg4 (after its msg3 {short_hex(msg3, 16)})"
        )


# --- RPC as requester ------------------------------------------------------------------


@requirement(
    "ssb.rpc.client.first-request-is-number-1",
    "SHOULD",
    'SSB guide, RPC protocol, Source example ("Because this is the first RPC request, the request '
    'number is 1")',
    role="client",
    depends=[CLIENT_HANDSHAKE],
    basis="inference: the Source example numbers a peer's first request 1; a responder answers whatever number it is given, so the numbering is the network's convention, not a layout a reader depends on",
)
async def test_client_numbers_requests_from_one(launched_client, network_key, harness_keypair):
    async with launched_client(harness_keypair, harness_keypair.feed_id) as (conn, _):
        session = await serve_handshake(conn, network_key, harness_keypair)
        msg = await session.next_message("the client's first RPC message")
        assert msg.req == 1, f"the client's first request must be number 1: {describe(msg)}"


@requirement(
    "ssb.rpc.client.json-without-whitespace",
    "SHOULD",
    "SSB guide, RPC protocol, Source example (\"JSON messages don't have indentation or whitespace "
    'when sent over the wire")',
    role="client",
    depends=[CLIENT_HISTORY_REQUEST],
    basis="inference: the guide says JSON 'don't have indentation or whitespace when sent over the wire' as a fact of the network, and indented JSON still parses",
)
async def test_client_request_json_is_compact(launched_client, network_key, harness_keypair):
    async with launched_client(harness_keypair, harness_keypair.feed_id) as (conn, _):
        session = await serve_handshake(conn, network_key, harness_keypair)
        msg = await first_history_request(session, harness_keypair.feed_id)
        compact = json.dumps(msg.json(), separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        assert msg.body == compact, (
            f"the request body has whitespace outside strings: {short_hex(msg.body, 120)} "
            f"(compact: {compact.decode()[:200]})"
        )

"""The SSB reference node's faults: ``python -m reference_impl.ssb serve|replicate
--fault NAME`` (repeatable). Each breaks one rule of the SSB guide on
purpose; ``cases`` are the conformance cases that must catch it (see
reference_impl/faults.py and docs/mutation.md).

A fault is declared here as what it changes: a function for each fault
point it touches (:data:`POINTS`). The cores (ServerHandshake/ClientHandshake,
BoxStreamEncoder/Decoder, RpcDecoder, RpcEndpoint, SsbConnection,
verify_message) and the node layer (SsbNode, replicate, the command line)
take an explicit ``faults`` set of :data:`Fault` members, compute the correct
value at each point and pass it through :class:`~reference_impl.faults.FaultPoints`;
their correct paths hold no fault branch.

This module imports no core (the cores import it), only the codecs its
changes build wrong outputs with: keys.py and message.py.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import replace
from typing import Any

import nacl.bindings

from ..faults import FaultSpec, fault_enum
from .keys import Keypair, verify_signature
from .message import (
    SIGNATURE_SUFFIX,
    create_message,
    json_stringify,
    message_id,
    without_signature,
)

SHS = "ssb.shs.server."
BOX = "ssb.boxstream.server."
RPC = "ssb.rpc.server."
HISTORY = "ssb.history.server."
FEED = "ssb.feed.server."
CLIENT_SHS = "ssb.shs.client."
CLIENT_FEED = "ssb.feed.client."
CLIENT_FEED_REPLICATED = "ssb.history.client.replicates-valid-feed"

_HANG_UP_CASES = tuple(
    SHS + rule
    for rule in (
        "rejects-wrong-network-key",
        "rejects-client-without-server-key",
        "rejects-tampered-msg3",
        "rejects-replayed-handshake",
        "rejects-replayed-msg3-with-fresh-msg1",
        "rejects-truncated-msg1",
        "rejects-truncated-msg3",
        "rejects-garbage-msg1",
        "rejects-garbage-msg3",
        "rejects-msg3-signed-by-another-key",
        "rejects-msg3-signed-for-another-server",
    )
)

POINTS: dict[str, str] = {
    # --- secret handshake (shs.py), both roles
    "ephemeral-secret": "the ephemeral Curve25519 secret of one handshake (fresh for each, or the "
    "one its caller passed); no context",
    "client-hello-key": "the network key the client authenticates its hello (msg1) with; no context",
    "client-hello-authentic": "whether the client hello's (msg1) HMAC verifies with the server's "
    "network key; no context",
    "server-hello-authentic": "whether the server hello's (msg2) HMAC verifies with the client's "
    "network key; no context",
    "client-auth-signed-data": "the bytes the client signs for msg3, N || B || sha256(a·b); no context",
    "client-auth-signature-valid": "whether the client's signature inside msg3 verifies; no context",
    "server-accept-signed-data": "the bytes the server signs for msg4, N || sig_A || A || "
    "sha256(a·b); no context",
    "server-accept-error": "what the client finds wrong with msg4 (server accept): a HandshakeError "
    "(its box does not open, or the signature inside does not verify), None when it is valid; "
    "no context",
    # --- box stream (boxstream.py, connection.py)
    "largest-box-body": "the largest body the encoder seals in one box (4096: longer data is split "
    "over several boxes); no context",
    "unauthentic-header": "what the decoder takes for the plaintext of a box header whose "
    "authentication tag does not verify (None: nothing, the stream fails); context: box (the 34 "
    "header bytes), nonce, key",
    "unauthentic-body": "what the decoder takes for a box body whose authentication tag does not "
    "verify (None: nothing, the stream fails); context: box (tag and ciphertext), nonce, key",
    "box-stream-goodbye": "the goodbye header the connection sends last when it closes; no context",
    # --- RPC (rpc.py)
    "rpc-bytes-after-message": "the received bytes after an RPC message just decoded: the rest of "
    "the box body (a bytearray the decoder reads on); no context",
    "rpc-bytes-at-box-end": "the start of an RPC message left unfinished at the end of a box body, "
    "kept for the next box (a bytearray); no context",
    "first-request-number": "the number of the first request the endpoint makes (1); no context",
    "request-message": "the packet of a request the endpoint makes (RpcMessage); context: body (the "
    "request's JSON value: name, type, args)",
    "stream-data-message": "a packet of data the endpoint sends as the responder on the peer's "
    "source or duplex stream (RpcMessage); context: value (the value sent), latest_request (the "
    "number of the peer's latest request)",
    "stream-end-body": "the body of a normal end of the peer's stream (true); no context",
    "error-body": "the body of an error answering the peer's request ({name, message, stack}); "
    "no context",
    "end-stream-the-peer-ended": "whether the endpoint ends its side of a stream whose other side "
    "the peer ended (True: a stream is closed by both ends); context: our_request (True: the "
    "responder ended our request; False: the requester aborted its own)",
    # --- feeds, the receiving side (feed.py verify_message, node.py replicate)
    "message-fields": "the field names of a received message in their order, as checked against "
    "the guide's; context: order (the guide's order)",
    "message-rule": "whether a received message keeps one rule; context: rule ('author': of the "
    "feed replicated and of the previous message's author, 'sequence', 'previous', 'hash', "
    "'content-type-length', 'signature'), and for 'signature' also msg, public (the author's key) "
    "and signature (its 64 bytes)",
    "received-message": "a message value the client received, as it verifies it; no context",
    # --- the node (node.py, __main__.py)
    "new-message-timestamp": "the timestamp of a message the node publishes (milliseconds since "
    "the epoch); no context",
    "history-request": "the arguments of a createHistoryStream request as the node reads them, "
    "before they are checked; no context",
    "history-options": "the options of a createHistoryStream request once checked (HistoryOptions); "
    "context: requested (the options object asked with), feed_held (whether the node holds the "
    "feed asked for)",
    "history-refusal": "why the node refuses a createHistoryStream request: the message of the "
    "error that ends it (None: no refusal, the stream just ends); context: args (the request's "
    "arguments)",
    "history-item": "one message as createHistoryStream serves it, {key, value, timestamp} (keys "
    "false sends its value); context: own_feed (whether the message is of the node's own feed), "
    "keypair (the node's), key_before (the id of the message before it; the first message: of "
    "the last)",
    "history-next-sequence": "the sequence of the next message a createHistoryStream stream "
    "serves, once one was sent (the one after it); context: sent (messages sent on the stream so "
    "far), length (the feed's length now), message_of (sequence -> that message)",
    "unknown-procedure-answer": "how the node answers a request for a procedure it does not have: "
    "a function (conn, request, name, message), the guide's an error that ends the request; "
    "no context",
    "stay-open-after-error": "whether the node goes on serving after answering a request with an "
    "error (True); no context",
    "answer-goodbye": "whether the node answers the peer's goodbye with its own and ends the "
    "connection (True); no context",
    "bytes-after-rejected-handshake": "what the server writes after rejecting a handshake message "
    "(invalid or cut short), before it hangs up (nothing); no context",
    "bytes-after-handshake-cut": "what the client writes when the server hangs up mid-handshake, "
    "before it hangs up too (nothing); no context",
    "replication-request": "the options of the client's createHistoryStream request, {id, "
    "[sequence], live, keys}; no context",
    "replication-exit-status": "the exit status of a replicate run that fetched and verified the "
    "feed (0); context: error_status (the status of a failed run)",
}
"""The fault points of the SSB cores and node layer: name -> what the value
is and what context comes with it."""


# --- secret handshake

FIXED_EPHEMERAL_SECRET = bytes(range(1, 33))
"""The ephemeral secret of every handshake of a node with reuse-ephemeral-key
or client-reuse-ephemeral-key, in every process (no forward secrecy; a
recorded handshake can be replayed)."""


def _fixed_ephemeral_secret(secret: bytes) -> bytes:
    return FIXED_EPHEMERAL_SECRET


def _inverted(network_key: bytes) -> bytes:
    """Another network key: every bit of the right one inverted."""
    return bytes(byte ^ 0xFF for byte in network_key)


def _always_passes(verdict: bool) -> bool:
    """A check that passes whatever it was given."""
    return True


def _other_data(signed: bytes) -> bytes:
    """Not the guide's data: the same bytes with the last one inverted, so
    the signature made over them verifies over nothing the peer expects."""
    return signed[:-1] + bytes([signed[-1] ^ 0xFF])


def _no_error(error: Exception | None) -> None:
    return None


def _unless_bad_signature(error: Exception | None) -> Exception | None:
    """msg4 opened, its signature unchecked: only a box that does not open is refused."""
    if error is not None and getattr(error, "reason", None) == "bad signature":
        return None
    return error


# --- box stream

_TAG_SIZE = 16


def _largest_declarable_body(limit: int) -> int:
    """One box however long the data: the most a header's u16 length can say."""
    return 0xFFFF


def _opened_without_tag(rejected: bytes | None, *, box: bytes, nonce: bytes, key: bytes) -> bytes:
    """Decrypt a secret box (tag + ciphertext) without checking its tag.
    Sealing zeros yields the XSalsa20 key stream the ciphertext was made with."""
    ciphertext = box[_TAG_SIZE:]
    stream = nacl.bindings.crypto_secretbox_easy(bytes(len(ciphertext)), nonce, key)[_TAG_SIZE:]
    return bytes(a ^ b for a, b in zip(ciphertext, stream))


def _no_goodbye(header: bytes) -> bytes:
    return b""


# --- RPC


def _nothing_kept(rest: bytearray) -> bytearray:
    return bytearray()


def _number_2(first: int) -> int:
    return 2


def _indented_request(message: Any, *, body: Any) -> Any:
    return replace(message, body=json_stringify(body, 2).encode("utf-8"))


def _json_cut_short(message: Any, **context: Any) -> Any:
    """stream-data-json-cut-short, client-request-json-cut-short: a JSON
    body without its last byte (its closing brace or quote), the body type
    still JSON: a body no JSON reader can read."""
    # 2 is rpc.BodyType.JSON (rpc.py imports this module, not the other way).
    if int(message.body_type) != 2 or not message.body:
        return message
    return replace(message, body=message.body[:-1])


def _numbered_by_latest_request(message: Any, *, value: Any, latest_request: int) -> Any:
    return replace(message, req=-latest_request)


def _without_stream_flag(message: Any, **context: Any) -> Any:
    return replace(message, stream=False)


def _indented_data(message: Any, *, value: Any, **context: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview, str)):
        return message  # a BINARY or STRING body: no JSON to indent
    return replace(message, body=json.dumps(value, indent=2).encode("utf-8"))


def _false(value: Any) -> bool:
    return False


def _without_name(body: dict) -> dict:
    return {key: value for key, value in body.items() if key != "name"}


def _left_open_after_requester_abort(end: bool, *, our_request: bool) -> bool:
    """Our side of the peer's stream stays open once the peer aborted it."""
    return end and our_request


def _left_open_after_responder_end(end: bool, *, our_request: bool) -> bool:
    """Our side of our own stream stays open once the responder ended it."""
    return end and not our_request


# --- feeds, the receiving side


def _without_extra_fields(names: tuple, *, order: tuple) -> tuple:
    return tuple(name for name in names if name in order)


def _in_order_if_complete(names: tuple, *, order: tuple) -> tuple:
    """The seven fields in any order read as the guide's order."""
    return order if sorted(map(str, names)) == sorted(order) else names


def _waiving(waived: str):
    """The change of a fault that lets through messages breaking ``waived``."""

    def waive(holds: bool, *, rule: str, **context: Any) -> bool:
        return holds or rule == waived

    return waive


def _compact_json_signature_too(holds: bool, *, rule: str, **context: Any) -> bool:
    """A signature over the message's compact JSON (as sent over RPC) accepted
    besides one over its canonical JSON."""
    if holds or rule != "signature":
        return holds
    compact = json_stringify(without_signature(context["msg"])).encode("utf-8")
    return verify_signature(context["public"], compact, context["signature"])


def _content_keys_sorted(value: Any) -> Any:
    """``type`` first, then alphabetically, as a client that rebuilds the
    content from its own model would order it."""
    content = value.get("content") if isinstance(value, dict) else None
    if not isinstance(content, dict):
        return value
    ordered = sorted(content, key=lambda key: (key != "type", key))
    return {**value, "content": {key: content[key] for key in ordered}}


# --- the node: publishing and serving feeds


def _in_seconds(timestamp_ms: int) -> int:
    return timestamp_ms // 1000


def flip_signature_byte(msg: dict) -> dict:
    """A copy of ``msg`` whose signature has its first byte inverted."""
    raw = bytearray(base64.b64decode(msg["signature"][: -len(SIGNATURE_SUFFIX)]))
    raw[0] ^= 0xFF
    return {**msg, "signature": base64.b64encode(bytes(raw)).decode("ascii") + SIGNATURE_SUFFIX}


def _bad_signature(item: dict, **context: Any) -> dict:
    value = flip_signature_byte(item["value"])
    return {**item, "key": message_id(value), "value": value}


def _key_of_message_before(item: dict, *, key_before: str, **context: Any) -> dict:
    return {**item, "key": key_before}


def _resigned_without_previous(
    item: dict, *, own_feed: bool, keypair: Keypair, **context: Any
) -> dict:
    value = item["value"]
    if not own_feed or value["sequence"] == 1:
        return item
    value = create_message(keypair, None, value["sequence"], value["timestamp"], value["content"])
    return {**item, "key": message_id(value), "value": value}


def _options_object(args: list) -> dict | None:
    return args[0] if args and isinstance(args[0], dict) else None


def _without_seq(args: list) -> list:
    options = _options_object(args)
    if options is None or "seq" not in options:
        return args
    return [{key: value for key, value in options.items() if key != "seq"}, *args[1:]]


def _without_seq_beside_sequence(args: list) -> list:
    """seq read only when sequence is absent: the two never conflict."""
    options = _options_object(args)
    if options is None or "sequence" not in options:
        return args
    return _without_seq(args)


def _unlimited(options: Any, **context: Any) -> Any:
    return replace(options, limit=None)


def _from_message_2_by_default(options: Any, *, requested: dict, **context: Any) -> Any:
    if "sequence" in requested or "seq" in requested:
        return options
    return replace(options, sequence=2)


HISTORY_PAGE = 20
"""The page of a paging history server: jitdb's (ssb-db2's query engine)."""


def _pages_resume_at_last_timestamp(
    next_sequence: int, *, sent: int, length: int, message_of: Any, **context: Any
) -> Any:
    """A server paging its feed by timestamp that starts each next page at
    the last page's timestamp (>= where > was meant): the page's last message
    comes again, and so do the messages of its millisecond before it (not
    further back than the page's second message, so that every page moves on)."""
    if sent % HISTORY_PAGE or next_sequence > length:
        return next_sequence
    last = message_of(next_sequence - 1)["timestamp"]
    resume = next_sequence - 1
    while resume > next_sequence - HISTORY_PAGE + 1 and message_of(resume - 1)["timestamp"] == last:
        resume -= 1
    return resume


def _keys_false_by_default(options: Any, *, requested: dict, **context: Any) -> Any:
    return options if "keys" in requested else replace(options, keys=False)


def _keys_always(options: Any, **context: Any) -> Any:
    return replace(options, keys=True)


def _after_the_given_message(options: Any, **context: Any) -> Any:
    return replace(options, sequence=options.sequence + 1)


def _never_live(options: Any, **context: Any) -> Any:
    return replace(options, live=False)


def _live_unless_true(options: Any, *, requested: dict, **context: Any) -> Any:
    return replace(options, live=True) if requested.get("live") is False else options


def _no_old_by_default_when_live(options: Any, *, requested: dict, **context: Any) -> Any:
    if options.live and "old" not in requested:
        return replace(options, old=False)
    return options


def _old_always(options: Any, **context: Any) -> Any:
    return replace(options, old=True)


def _live_for_unknown_feed(options: Any, *, feed_held: bool, **context: Any) -> Any:
    return options if feed_held else replace(options, live=True)


def _no_refusal_without_id(refusal: str | None, *, args: list) -> str | None:
    options = _options_object(args)
    return None if options is not None and "id" not in options else refusal


def _answer_as_data(conn: Any, request: Any, name: str, message: str) -> None:
    """The error body sent as a plain answer, without the end/err flag: an
    async request gets it as its response, a source or duplex stream as data
    (and stays open); a sink, on which the responder sends nothing, gets nothing."""
    body = {"name": name, "message": message, "stack": ""}
    if request.type in ("async", "sync"):  # rpc.ASYNC_TYPES
        conn.respond(request.req, body)
    elif request.type != "sink":
        conn.stream_send(request.req, body)


def _without_end_flag(answer: Any) -> Any:
    return _answer_as_data


def _sixteen_random_bytes(nothing: bytes) -> bytes:
    return os.urandom(16)


# --- the client


def _start_named_seq(options: dict) -> dict:
    """The start option named seq, in sequence's place (1 when the client
    would send none)."""
    renamed = {"id": options["id"], "seq": options.get("sequence", 1)}
    renamed.update((key, value) for key, value in options.items() if key not in ("id", "sequence"))
    return renamed


def _error_status(status: int, *, error_status: int) -> int:
    return error_status


SPECS: tuple[FaultSpec, ...] = (
    # --- secret handshake, server
    FaultSpec(
        "bad-server-accept",
        "server",
        "msg4 (server accept) carries a signature over the wrong data",
        (SHS + "completes-valid-handshake",),
        changes={"server-accept-signed-data": _other_data},
    ),
    FaultSpec(
        "accept-any-network-key",
        "server",
        "accept a client hello whatever network key its HMAC was made with (answer msg2)",
        (SHS + "rejects-wrong-network-key", SHS + "rejects-garbage-msg1"),
        changes={"client-hello-authentic": _always_passes},
    ),
    FaultSpec(
        "write-after-bad-handshake",
        "server",
        "write 16 garbage bytes after an invalid or truncated handshake message, then hang up",
        _HANG_UP_CASES,
        changes={"bytes-after-rejected-handshake": _sixteen_random_bytes},
    ),
    FaultSpec(
        "reuse-ephemeral-key",
        "server",
        "use one ephemeral key pair for every handshake (no forward secrecy, msg3 replayable)",
        (SHS + "uses-fresh-ephemeral-keys", SHS + "rejects-replayed-handshake"),
        changes={"ephemeral-secret": _fixed_ephemeral_secret},
    ),
    # --- box stream, server
    FaultSpec(
        "skip-header-auth",
        "server",
        "decrypt box headers without checking their authentication tag",
        (BOX + "ends-on-tampered-header",),
        changes={"unauthentic-header": _opened_without_tag},
    ),
    FaultSpec(
        "skip-body-auth",
        "server",
        "decrypt box bodies without checking their authentication tag",
        (BOX + "ends-on-tampered-body",),
        changes={"unauthentic-body": _opened_without_tag},
    ),
    FaultSpec(
        "ignore-goodbye",
        "server",
        "neither answer nor close on the peer's goodbye",
        (BOX + "closes-after-goodbye",),
        changes={"answer-goodbye": _false},
    ),
    FaultSpec(
        "drop-rpc-split-across-boxes",
        "server",
        "discard the start of an RPC message left unfinished at the end of a box",
        (BOX + "accepts-rpc-split-across-boxes",),
        changes={"rpc-bytes-at-box-end": _nothing_kept},
    ),
    FaultSpec(
        "first-rpc-per-box",
        "server",
        "read only the first RPC message of each box, dropping the rest of the box",
        (BOX + "accepts-several-rpc-per-box",),
        changes={"rpc-bytes-after-message": _nothing_kept},
    ),
    FaultSpec(
        "no-box-split",
        "server",
        "send an RPC message longer than 4096 bytes as one box body",
        (BOX + "splits-large-messages",),
        changes={"largest-box-body": _largest_declarable_body},
    ),
    FaultSpec(
        "hang-up-without-goodbye",
        "server",
        "end the connection without the box stream goodbye header",
        (BOX + "ends-stream-with-goodbye",),
        changes={"box-stream-goodbye": _no_goodbye},
    ),
    # --- RPC, server
    FaultSpec(
        "first-request-number-2",
        "server",
        "the server numbers its own requests to the peer (its createHistoryStream for its own feed) from 2",
        (RPC + "numbers-own-requests-from-1",),
        changes={"first-request-number": _number_2},
    ),
    FaultSpec(
        "number-replies-by-latest-request",
        "server",
        "stream replies carry minus the latest request's number, not their own request's",
        (RPC + "responses-use-negated-request-number",),
        changes={"stream-data-message": _numbered_by_latest_request},
    ),
    FaultSpec(
        "no-stream-flag",
        "server",
        "stream data on a source request goes out without the stream flag",
        (RPC + "source-responses-set-stream-flag",),
        changes={"stream-data-message": _without_stream_flag},
    ),
    FaultSpec(
        "end-stream-with-false",
        "server",
        "a finished source stream ends with the JSON body false instead of true",
        (RPC + "ends-source-stream-with-true",),
        changes={"stream-end-body": _false},
    ),
    FaultSpec(
        "no-end-for-unknown-feed",
        "server",
        "createHistoryStream for a feed the node does not hold never ends (no message, the stream stays "
        "open)",
        (RPC + "ends-source-stream-with-true",),
        changes={"history-options": _live_for_unknown_feed},
    ),
    FaultSpec(
        "keep-stream-open-after-abort",
        "server",
        "do not close our end of a stream the requester aborted",
        (RPC + "closes-stream-on-requester-abort",),
        changes={"end-stream-the-peer-ended": _left_open_after_requester_abort},
    ),
    FaultSpec(
        "stream-data-json-cut-short",
        "server",
        "stream data goes out with its JSON body cut short by its last byte (body type still JSON)",
        (RPC + "sends-well-formed-messages",),
        changes={"stream-data-message": _json_cut_short},
    ),
    FaultSpec(
        "indented-json",
        "server",
        "stream data goes out as indented JSON",
        (RPC + "json-without-whitespace",),
        changes={"stream-data-message": _indented_data},
    ),
    FaultSpec(
        "no-error-on-unknown",
        "server",
        "answer unknown procedures without the end/err flag",
        (
            RPC + "unknown-async-procedure-gets-error",
            RPC + "unknown-source-procedure-ends-stream-with-error",
        ),
        changes={"unknown-procedure-answer": _without_end_flag},
    ),
    FaultSpec(
        "error-body-without-name",
        "server",
        "error bodies carry only a message, no name",
        (RPC + "error-body-names-the-error",),
        changes={"error-body": _without_name},
    ),
    FaultSpec(
        "close-after-unknown-procedure",
        "server",
        "end the connection right after answering an unknown procedure with an error",
        (RPC + "serves-after-an-error",),
        changes={"stay-open-after-error": _false},
    ),
    # --- createHistoryStream, server
    FaultSpec(
        "default-sequence-skips-first",
        "server",
        "without sequence, createHistoryStream starts after message 1 instead of at the beginning",
        (HISTORY + "serves-whole-feed-in-order", FEED + "chain-links"),
        changes={"history-options": _from_message_2_by_default},
    ),
    FaultSpec(
        "pages-repeat-last-millisecond",
        "server",
        f"createHistoryStream serves the feed in pages of {HISTORY_PAGE} and starts each next page "
        "at the last page's timestamp (>= where > was meant): the page's last message, and those of "
        "its millisecond before it, come again",
        (HISTORY + "serves-long-feed-whole",),
        changes={"history-next-sequence": _pages_resume_at_last_timestamp},
    ),
    FaultSpec(
        "keys-default-false",
        "server",
        "createHistoryStream without keys sends bare messages (keys defaults to false)",
        (HISTORY + "keys-default-true",),
        changes={"history-options": _keys_false_by_default},
    ),
    FaultSpec(
        "ignore-keys-false",
        "server",
        "createHistoryStream keys=false still sends {key, value, timestamp}",
        (HISTORY + "keys-false-sends-bare-messages",),
        changes={"history-options": _keys_always},
    ),
    FaultSpec(
        "exclusive-sequence",
        "server",
        "createHistoryStream sequence=N starts after message N (the guide's words, not the network's "
        "reading: erratum SSB-E1)",
        (HISTORY + "sequence-starts-at-given-message",),
        changes={"history-options": _after_the_given_message},
    ),
    FaultSpec(
        "ignore-seq-alias",
        "server",
        "createHistoryStream ignores the legacy option name seq",
        (HISTORY + "accepts-seq-alias",),
        changes={"history-request": _without_seq},
    ),
    FaultSpec(
        "accept-conflicting-seq",
        "server",
        "createHistoryStream with seq and sequence conflicting follows sequence instead of failing",
        (HISTORY + "rejects-conflicting-seq-and-sequence",),
        changes={"history-request": _without_seq_beside_sequence},
    ),
    FaultSpec(
        "ignore-limit",
        "server",
        "createHistoryStream ignores limit",
        (HISTORY + "limit-caps-messages",),
        changes={"history-options": _unlimited},
    ),
    FaultSpec(
        "missing-id-ends-normally",
        "server",
        "createHistoryStream without id ends the stream with true instead of an error",
        (HISTORY + "missing-id-is-an-error",),
        changes={"history-refusal": _no_refusal_without_id},
    ),
    FaultSpec(
        "ignore-live",
        "server",
        "createHistoryStream live=true ends the stream after the existing messages",
        (HISTORY + "live-sends-new-messages", HISTORY + "live-old-false-skips-existing"),
        changes={"history-options": _never_live},
    ),
    FaultSpec(
        "live-false-keeps-stream-open",
        "server",
        "createHistoryStream live=false (given explicitly) keeps the stream open like live=true",
        (HISTORY + "ends-stream-when-not-live",),
        changes={"history-options": _live_unless_true},
    ),
    FaultSpec(
        "live-old-default-false",
        "server",
        "createHistoryStream live=true without old skips the existing messages",
        (HISTORY + "live-old-default-sends-existing",),
        changes={"history-options": _no_old_by_default_when_live},
    ),
    FaultSpec(
        "ignore-old-false",
        "server",
        "createHistoryStream old=false still sends the existing messages",
        (HISTORY + "live-old-false-skips-existing",),
        changes={"history-options": _old_always},
    ),
    FaultSpec(
        "timestamp-in-seconds",
        "server",
        "new messages carry a timestamp in seconds, not milliseconds",
        (FEED + "timestamp-is-milliseconds",),
        changes={"new-message-timestamp": _in_seconds},
    ),
    # --- feeds, server
    FaultSpec(
        "bad-signature",
        "server",
        "serve messages with one signature byte flipped (keys are the ids of what is served)",
        (FEED + "signatures-verify",),
        changes={"history-item": _bad_signature},
    ),
    FaultSpec(
        "wrong-message-key",
        "server",
        "keys=true items carry the id of the previous message (the first: of the last) as key",
        (FEED + "keys-are-message-ids",),
        changes={"history-item": _key_of_message_before},
    ),
    FaultSpec(
        "broken-chain",
        "server",
        "serve the node's own messages after the first re-signed with previous null",
        (FEED + "chain-links",),
        changes={"history-item": _resigned_without_previous},
    ),
    # --- client role (replicate)
    FaultSpec(
        "client-bad-hello",
        "client",
        "the client hello's HMAC is made with a wrong network key",
        ("ssb.shs.client.sends-valid-hello",),
        changes={"client-hello-key": _inverted},
    ),
    FaultSpec(
        "client-bad-auth-signature",
        "client",
        "msg3 (client authenticate) carries a signature over the wrong data",
        ("ssb.shs.client.completes-valid-handshake",),
        changes={"client-auth-signed-data": _other_data},
    ),
    FaultSpec(
        "client-accept-any-network-key",
        "client",
        "the client accepts a server hello whatever network key its HMAC was made with",
        ("ssb.shs.client.rejects-wrong-network-key",),
        changes={"server-hello-authentic": _always_passes},
    ),
    FaultSpec(
        "client-skip-server-accept-check",
        "client",
        "the client does not verify msg4 (server accept) and starts the box stream",
        # Not opening msg4 at all also lets through a replayed msg4 and
        # one whose signature is wrong (cases from the coverage tables).
        (
            "ssb.shs.client.rejects-forged-server-accept",
            "ssb.shs.client.rejects-msg4-with-bad-signature",
            "ssb.shs.client.rejects-replayed-server-hello-and-accept",
        ),
        changes={"server-accept-error": _no_error},
    ),
    FaultSpec(
        "client-uses-seq-name",
        "client",
        "the client names the createHistoryStream start option seq (always sent)",
        ("ssb.history.client.sends-well-formed-request",),
        changes={"replication-request": _start_named_seq},
    ),
    FaultSpec(
        "client-keep-stream-open-after-end",
        "client",
        "the client does not close its end of a source stream the responder ended",
        ("ssb.rpc.client.closes-stream-after-responder-end",),
        changes={"end-stream-the-peer-ended": _left_open_after_responder_end},
    ),
    # --- cases from the coverage tables (issue 11)
    FaultSpec(
        "skip-client-auth-signature-check",
        "server",
        "open msg3 (client authenticate) but accept it without verifying the client's signature inside",
        (
            SHS + "rejects-msg3-signed-by-another-key",
            SHS + "rejects-msg3-signed-for-another-server",
        ),
        changes={"client-auth-signature-valid": _always_passes},
    ),
    FaultSpec(
        "client-fail-after-replication",
        "client",
        "the client exits with an error status after replicating and verifying a valid feed",
        (CLIENT_FEED_REPLICATED,),
        changes={"replication-exit-status": _error_status},
    ),
    FaultSpec(
        "client-sort-content-keys",
        "client",
        "the client verifies signatures with the content keys re-sorted (type first, then alphabetically) "
        "instead of in the order received",
        ("ssb.feed.client.keeps-content-key-order",),
        changes={"received-message": _content_keys_sorted},
    ),
    FaultSpec(
        "client-drop-rpc-split-across-boxes",
        "client",
        "the client discards the start of an RPC message left unfinished at the end of a box",
        ("ssb.boxstream.client.accepts-rpc-split-across-boxes",),
        changes={"rpc-bytes-at-box-end": _nothing_kept},
    ),
    FaultSpec(
        "client-hang-up-without-goodbye",
        "client",
        "the client ends the connection without the box stream goodbye header",
        ("ssb.boxstream.client.ends-stream-with-goodbye",),
        changes={"box-stream-goodbye": _no_goodbye},
    ),
    FaultSpec(
        "client-skip-signature-check",
        "client",
        "the client accepts feed messages without verifying their signature",
        (CLIENT_FEED + "rejects-bad-signature", CLIENT_FEED + "rejects-non-canonical-signing"),
        changes={"message-rule": _waiving("signature")},
    ),
    FaultSpec(
        "client-accept-foreign-author",
        "client",
        "the client accepts a message whose author is not the feed it replicates",
        (CLIENT_FEED + "rejects-foreign-author",),
        changes={"message-rule": _waiving("author")},
    ),
    FaultSpec(
        "client-skip-previous-check",
        "client",
        "the client does not check that previous is the id of the message before",
        (CLIENT_FEED + "rejects-broken-previous-link",),
        changes={"message-rule": _waiving("previous")},
    ),
    FaultSpec(
        "client-skip-sequence-check",
        "client",
        "the client does not check that sequence is the previous one + 1",
        (CLIENT_FEED + "rejects-wrong-sequence",),
        changes={"message-rule": _waiving("sequence")},
    ),
    FaultSpec(
        "client-skip-content-type-length-check",
        "client",
        "the client accepts a content type of any length (not only 3 to 52 code units)",
        (CLIENT_FEED + "rejects-invalid-content-type",),
        changes={"message-rule": _waiving("content-type-length")},
    ),
    FaultSpec(
        "client-accept-extra-fields",
        "client",
        "the client accepts messages with fields besides the seven the guide allows",
        (CLIENT_FEED + "rejects-extra-field",),
        changes={"message-fields": _without_extra_fields},
    ),
    FaultSpec(
        "client-accept-any-field-order",
        "client",
        "the client accepts the seven message fields in any order",
        (CLIENT_FEED + "rejects-fields-out-of-order",),
        changes={"message-fields": _in_order_if_complete},
    ),
    FaultSpec(
        "client-accept-any-hash-name",
        "client",
        "the client accepts a hash field other than sha256",
        (CLIENT_FEED + "rejects-wrong-hash-name",),
        changes={"message-rule": _waiving("hash")},
    ),
    FaultSpec(
        "client-accept-compact-json-signature",
        "client",
        "the client also accepts a signature made over the message's compact JSON",
        (CLIENT_FEED + "rejects-non-canonical-signing",),
        changes={"message-rule": _compact_json_signature_too},
    ),
    FaultSpec(
        "client-reuse-ephemeral-key",
        "client",
        "the client uses one fixed ephemeral key pair for every handshake, in every process",
        (
            CLIENT_SHS + "uses-fresh-ephemeral-keys",
            CLIENT_SHS + "rejects-replayed-server-hello-and-accept",
        ),
        changes={"ephemeral-secret": _fixed_ephemeral_secret},
    ),
    FaultSpec(
        "client-write-on-eof-in-handshake",
        "client",
        "when the server hangs up mid-handshake (a short msg2), the client writes 16 bytes before hanging up",
        (CLIENT_SHS + "rejects-truncated-msg2",),
        changes={"bytes-after-handshake-cut": _sixteen_random_bytes},
    ),
    FaultSpec(
        "client-skip-server-accept-signature-check",
        "client",
        "the client opens msg4 (server accept) but does not verify the server's signature inside",
        (CLIENT_SHS + "rejects-msg4-with-bad-signature",),
        changes={"server-accept-error": _unless_bad_signature},
    ),
    FaultSpec(
        "client-first-request-number-2",
        "client",
        "the client numbers its requests from 2",
        ("ssb.rpc.client.first-request-is-number-1",),
        changes={"first-request-number": _number_2},
    ),
    FaultSpec(
        "client-request-json-cut-short",
        "client",
        "the client's request bodies go out cut short by their last byte (body type still JSON)",
        ("ssb.rpc.client.sends-well-formed-messages",),
        changes={"request-message": _json_cut_short},
    ),
    FaultSpec(
        "client-indented-json",
        "client",
        "the client sends its request bodies as indented JSON",
        ("ssb.rpc.client.json-without-whitespace",),
        changes={"request-message": _indented_request},
    ),
)

Fault = fault_enum("Fault", SPECS)
"""One member per fault (``Fault.ACCEPT_ANY_NETWORK_KEY`` is
``"accept-any-network-key"``)."""

REGISTRY: dict[str, FaultSpec] = {spec.name: spec for spec in SPECS}

NOT_ISOLABLE: dict[str, str] = {
    # --- cases from the coverage tables (issue 11)
    BOX + "nonces-increment-per-box": (
        "every case after the handshake reads the target's box stream with the guide's nonces (the harness's "
        "BoxStreamDecoder, conformance/suites/ssb/session.py); a node whose nonces do not advance as the guide "
        "says has boxes no case can open, so a fault here fails all of them, not this one alone (this case "
        "names the cause with the nonce and the bytes)"
    ),
    RPC + "json-bodies-have-json-type": (
        "every case that reads createHistoryStream parses its items as JSON, which the harness (like a JS "
        "peer, which hands a STRING or BINARY body over as a string or a Buffer) does only for a body declared "
        "JSON; a node that declares another body type fails all of those cases, and declaring it only on the "
        "end fails ssb.rpc.server.ends-source-stream-with-true, this case's prerequisite"
    ),
    HISTORY + "limit-default-unlimited": (
        "cases of other rules read the whole feed (or a live stream past the existing messages) without a "
        "limit, relying on the default being unlimited without declaring this case as a prerequisite: a node "
        "serving at most 4 messages by default (measured by mutation) also failed "
        "ssb.boxstream.server.splits-large-messages, ssb.history.server.sequence-starts-at-given-message, "
        "ssb.history.server.live-sends-new-messages and ssb.history.server.live-old-false-skips-existing"
    ),
}
"""Cases whose rule cannot be broken without breaking other cases' rules too,
with the reason; the mutation table lists them (docs/mutation.md)."""

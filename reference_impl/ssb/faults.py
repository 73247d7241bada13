"""The SSB reference node's faults: ``python -m reference_impl.ssb serve|replicate
--fault NAME`` (repeatable). Each breaks one rule of the SSB guide on
purpose; ``cases`` are the conformance cases that must catch it (see
reference_impl/faults.py and docs/mutation.md).

The cores take them as an explicit ``faults`` set of :data:`Fault` members
(ServerHandshake/ClientHandshake, BoxStreamEncoder/Decoder, RpcDecoder,
RpcEndpoint, SsbConnection), the node layer as ``SsbNode(faults=...)`` and
``replicate(faults=...)``.
"""

from __future__ import annotations

from ..faults import FaultSpec, fault_enum

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

SPECS: tuple[FaultSpec, ...] = (
    # --- secret handshake, server
    FaultSpec(
        "bad-server-accept",
        "server",
        "msg4 (server accept) carries a signature over the wrong data",
        (SHS + "completes-valid-handshake",),
    ),
    FaultSpec(
        "accept-any-network-key",
        "server",
        "accept a client hello whatever network key its HMAC was made with (answer msg2)",
        (SHS + "rejects-wrong-network-key", SHS + "rejects-garbage-msg1"),
    ),
    FaultSpec(
        "write-after-bad-handshake",
        "server",
        "write 16 garbage bytes after an invalid or truncated handshake message, then hang up",
        _HANG_UP_CASES,
    ),
    FaultSpec(
        "reuse-ephemeral-key",
        "server",
        "use one ephemeral key pair for every handshake (no forward secrecy, msg3 replayable)",
        (SHS + "uses-fresh-ephemeral-keys", SHS + "rejects-replayed-handshake"),
    ),
    # --- box stream, server
    FaultSpec(
        "skip-header-auth",
        "server",
        "decrypt box headers without checking their authentication tag",
        (BOX + "ends-on-tampered-header",),
    ),
    FaultSpec(
        "skip-body-auth",
        "server",
        "decrypt box bodies without checking their authentication tag",
        (BOX + "ends-on-tampered-body",),
    ),
    FaultSpec(
        "ignore-goodbye",
        "server",
        "neither answer nor close on the peer's goodbye",
        (BOX + "closes-after-goodbye",),
    ),
    FaultSpec(
        "drop-rpc-split-across-boxes",
        "server",
        "discard the start of an RPC message left unfinished at the end of a box",
        (BOX + "accepts-rpc-split-across-boxes",),
    ),
    FaultSpec(
        "first-rpc-per-box",
        "server",
        "read only the first RPC message of each box, dropping the rest of the box",
        (BOX + "accepts-several-rpc-per-box",),
    ),
    FaultSpec(
        "no-box-split",
        "server",
        "send an RPC message longer than 4096 bytes as one box body",
        (BOX + "splits-large-messages",),
    ),
    FaultSpec(
        "hang-up-without-goodbye",
        "server",
        "end the connection without the box stream goodbye header",
        (BOX + "ends-stream-with-goodbye",),
    ),
    # --- RPC, server
    FaultSpec(
        "first-request-number-2",
        "server",
        "the server numbers its own requests to the peer (its createHistoryStream for its own feed) from 2",
        (RPC + "numbers-own-requests-from-1",),
    ),
    FaultSpec(
        "number-replies-by-latest-request",
        "server",
        "stream replies carry minus the latest request's number, not their own request's",
        (RPC + "responses-use-negated-request-number",),
    ),
    FaultSpec(
        "no-stream-flag",
        "server",
        "stream data on a source request goes out without the stream flag",
        (RPC + "source-responses-set-stream-flag",),
    ),
    FaultSpec(
        "end-stream-with-false",
        "server",
        "a finished source stream ends with the JSON body false instead of true",
        (RPC + "ends-source-stream-with-true",),
    ),
    FaultSpec(
        "no-end-for-unknown-feed",
        "server",
        "createHistoryStream for a feed the node does not hold never ends (no message, the stream stays "
        "open)",
        (RPC + "ends-source-stream-with-true",),
    ),
    FaultSpec(
        "keep-stream-open-after-abort",
        "server",
        "do not close our end of a stream the requester aborted",
        (RPC + "closes-stream-on-requester-abort",),
    ),
    FaultSpec(
        "indented-json",
        "server",
        "stream data goes out as indented JSON",
        (RPC + "json-without-whitespace",),
    ),
    FaultSpec(
        "no-error-on-unknown",
        "server",
        "answer unknown procedures without the end/err flag",
        (
            RPC + "unknown-async-procedure-gets-error",
            RPC + "unknown-source-procedure-ends-stream-with-error",
        ),
    ),
    FaultSpec(
        "error-body-without-name",
        "server",
        "error bodies carry only a message, no name",
        (RPC + "error-body-names-the-error",),
    ),
    FaultSpec(
        "close-after-unknown-procedure",
        "server",
        "end the connection right after answering an unknown procedure with an error",
        (RPC + "serves-after-an-error",),
    ),
    # --- createHistoryStream, server
    FaultSpec(
        "default-sequence-skips-first",
        "server",
        "without sequence, createHistoryStream starts after message 1 instead of at the beginning",
        (HISTORY + "serves-whole-feed-in-order", FEED + "chain-links"),
    ),
    FaultSpec(
        "keys-default-false",
        "server",
        "createHistoryStream without keys sends bare messages (keys defaults to false)",
        (HISTORY + "keys-default-true",),
    ),
    FaultSpec(
        "ignore-keys-false",
        "server",
        "createHistoryStream keys=false still sends {key, value, timestamp}",
        (HISTORY + "keys-false-sends-bare-messages",),
    ),
    FaultSpec(
        "exclusive-sequence",
        "server",
        "createHistoryStream sequence=N starts after message N (the guide's words, not the network's "
        "reading: erratum SSB-E1)",
        (HISTORY + "sequence-starts-at-given-message",),
    ),
    FaultSpec(
        "ignore-seq-alias",
        "server",
        "createHistoryStream ignores the legacy option name seq",
        (HISTORY + "accepts-seq-alias",),
    ),
    FaultSpec(
        "accept-conflicting-seq",
        "server",
        "createHistoryStream with seq and sequence conflicting follows sequence instead of failing",
        (HISTORY + "rejects-conflicting-seq-and-sequence",),
    ),
    FaultSpec(
        "ignore-limit",
        "server",
        "createHistoryStream ignores limit",
        (HISTORY + "limit-caps-messages",),
    ),
    FaultSpec(
        "missing-id-ends-normally",
        "server",
        "createHistoryStream without id ends the stream with true instead of an error",
        (HISTORY + "missing-id-is-an-error",),
    ),
    FaultSpec(
        "ignore-live",
        "server",
        "createHistoryStream live=true ends the stream after the existing messages",
        (HISTORY + "live-sends-new-messages", HISTORY + "live-old-false-skips-existing"),
    ),
    FaultSpec(
        "live-false-keeps-stream-open",
        "server",
        "createHistoryStream live=false (given explicitly) keeps the stream open like live=true",
        (HISTORY + "ends-stream-when-not-live",),
    ),
    FaultSpec(
        "live-old-default-false",
        "server",
        "createHistoryStream live=true without old skips the existing messages",
        (HISTORY + "live-old-default-sends-existing",),
    ),
    FaultSpec(
        "ignore-old-false",
        "server",
        "createHistoryStream old=false still sends the existing messages",
        (HISTORY + "live-old-false-skips-existing",),
    ),
    FaultSpec(
        "timestamp-in-seconds",
        "server",
        "new messages carry a timestamp in seconds, not milliseconds",
        (FEED + "timestamp-is-milliseconds",),
    ),
    # --- feeds, server
    FaultSpec(
        "bad-signature",
        "server",
        "serve messages with one signature byte flipped (keys are the ids of what is served)",
        (FEED + "signatures-verify",),
    ),
    FaultSpec(
        "wrong-message-key",
        "server",
        "keys=true items carry the id of the previous message (the first: of the last) as key",
        (FEED + "keys-are-message-ids",),
    ),
    FaultSpec(
        "broken-chain",
        "server",
        "serve the node's own messages after the first re-signed with previous null",
        (FEED + "chain-links",),
    ),
    # --- client role (replicate)
    FaultSpec(
        "client-bad-hello",
        "client",
        "the client hello's HMAC is made with a wrong network key",
        ("ssb.shs.client.sends-valid-hello",),
    ),
    FaultSpec(
        "client-bad-auth-signature",
        "client",
        "msg3 (client authenticate) carries a signature over the wrong data",
        ("ssb.shs.client.completes-valid-handshake",),
    ),
    FaultSpec(
        "client-accept-any-network-key",
        "client",
        "the client accepts a server hello whatever network key its HMAC was made with",
        ("ssb.shs.client.rejects-wrong-network-key",),
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
    ),
    FaultSpec(
        "client-uses-seq-name",
        "client",
        "the client names the createHistoryStream start option seq (always sent)",
        ("ssb.history.client.sends-well-formed-request",),
    ),
    FaultSpec(
        "client-keep-stream-open-after-end",
        "client",
        "the client does not close its end of a source stream the responder ended",
        ("ssb.rpc.client.closes-stream-after-responder-end",),
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
    ),
    FaultSpec(
        "client-fail-after-replication",
        "client",
        "the client exits with an error status after replicating and verifying a valid feed",
        (CLIENT_FEED_REPLICATED,),
    ),
    FaultSpec(
        "client-sort-content-keys",
        "client",
        "the client verifies signatures with the content keys re-sorted (type first, then alphabetically) "
        "instead of in the order received",
        ("ssb.feed.client.keeps-content-key-order",),
    ),
    FaultSpec(
        "client-drop-rpc-split-across-boxes",
        "client",
        "the client discards the start of an RPC message left unfinished at the end of a box",
        ("ssb.boxstream.client.accepts-rpc-split-across-boxes",),
    ),
    FaultSpec(
        "client-hang-up-without-goodbye",
        "client",
        "the client ends the connection without the box stream goodbye header",
        ("ssb.boxstream.client.ends-stream-with-goodbye",),
    ),
    FaultSpec(
        "client-skip-signature-check",
        "client",
        "the client accepts feed messages without verifying their signature",
        (CLIENT_FEED + "rejects-bad-signature", CLIENT_FEED + "rejects-non-canonical-signing"),
    ),
    FaultSpec(
        "client-accept-foreign-author",
        "client",
        "the client accepts a message whose author is not the feed it replicates",
        (CLIENT_FEED + "rejects-foreign-author",),
    ),
    FaultSpec(
        "client-skip-previous-check",
        "client",
        "the client does not check that previous is the id of the message before",
        (CLIENT_FEED + "rejects-broken-previous-link",),
    ),
    FaultSpec(
        "client-skip-sequence-check",
        "client",
        "the client does not check that sequence is the previous one + 1",
        (CLIENT_FEED + "rejects-wrong-sequence",),
    ),
    FaultSpec(
        "client-skip-content-type-length-check",
        "client",
        "the client accepts a content type of any length (not only 3 to 52 code units)",
        (CLIENT_FEED + "rejects-invalid-content-type",),
    ),
    FaultSpec(
        "client-accept-extra-fields",
        "client",
        "the client accepts messages with fields besides the seven the guide allows",
        (CLIENT_FEED + "rejects-extra-field",),
    ),
    FaultSpec(
        "client-accept-any-field-order",
        "client",
        "the client accepts the seven message fields in any order",
        (CLIENT_FEED + "rejects-fields-out-of-order",),
    ),
    FaultSpec(
        "client-accept-any-hash-name",
        "client",
        "the client accepts a hash field other than sha256",
        (CLIENT_FEED + "rejects-wrong-hash-name",),
    ),
    FaultSpec(
        "client-accept-compact-json-signature",
        "client",
        "the client also accepts a signature made over the message's compact JSON",
        (CLIENT_FEED + "rejects-non-canonical-signing",),
    ),
    FaultSpec(
        "client-reuse-ephemeral-key",
        "client",
        "the client uses one fixed ephemeral key pair for every handshake, in every process",
        (
            CLIENT_SHS + "uses-fresh-ephemeral-keys",
            CLIENT_SHS + "rejects-replayed-server-hello-and-accept",
        ),
    ),
    FaultSpec(
        "client-write-on-eof-in-handshake",
        "client",
        "when the server hangs up mid-handshake (a short msg2), the client writes 16 bytes before hanging up",
        (CLIENT_SHS + "rejects-truncated-msg2",),
    ),
    FaultSpec(
        "client-skip-server-accept-signature-check",
        "client",
        "the client opens msg4 (server accept) but does not verify the server's signature inside",
        (CLIENT_SHS + "rejects-msg4-with-bad-signature",),
    ),
    FaultSpec(
        "client-first-request-number-2",
        "client",
        "the client numbers its requests from 2",
        ("ssb.rpc.client.first-request-is-number-1",),
    ),
    FaultSpec(
        "client-indented-json",
        "client",
        "the client sends its request bodies as indented JSON",
        ("ssb.rpc.client.json-without-whitespace",),
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

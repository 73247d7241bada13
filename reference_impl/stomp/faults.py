"""The STOMP reference server's faults: ``python -m reference_impl.stomp serve
--fault NAME`` (repeatable). Each breaks one rule of the Swaptacular STOMP
profile or of STOMP 1.2 on purpose; ``cases`` are the conformance cases that
must catch it (see reference_impl/faults.py and docs/mutation.md).

The sans-I/O core takes them as ``ServerConnection(faults=...)``, the node
layer as ``StompServerNode(faults=...)``; the TLS ones change the server's
``ssl.SSLContext`` (:func:`reference_impl.stomp.node.server_ssl_context`).
"""

from __future__ import annotations

from ..faults import FaultSpec, fault_enum

TLS = "stomp.tls.server."
CONNECT = "stomp.connect.server."
FRAME = "stomp.frame.server."
SEND = "stomp.send.server."
RECEIPT = "stomp.receipt.server."
MANIFEST = "stomp.manifest.server."

SPECS: tuple[FaultSpec, ...] = (
    # --- the node's manifest (serve --manifest)
    FaultSpec(
        "manifest-without-destination",
        "server",
        "the stomp.toml written by --manifest has no destination key",
        (MANIFEST + "provides-valid-manifest",),
    ),
    # --- TLS (the server's context)
    FaultSpec(
        "accept-tls-1-2",
        "server",
        "the server's TLS context allows TLS 1.2 (minimum_version TLSv1_2)",
        (TLS + "refuses-tls-1-2",),
    ),
    FaultSpec(
        "client-certificate-optional",
        "server",
        "the server asks for a client certificate but completes the handshake without one (CERT_OPTIONAL)",
        (TLS + "requires-client-certificate",),
    ),
    FaultSpec(
        "no-client-certificate-check",
        "server",
        "the server neither asks for nor verifies client certificates (CERT_NONE)",
        (TLS + "requires-client-certificate", TLS + "refuses-untrusted-client-certificate"),
    ),
    FaultSpec(
        "untrusted-server-certificate",
        "server",
        "the server presents a certificate from a CA of its own, made at start, that no client trusts",
        (TLS + "completes-mutual-handshake",),
    ),
    # --- CONNECT / CONNECTED
    FaultSpec(
        "refuse-connect-command",
        "server",
        "answer a CONNECT frame with ERROR (the STOMP frame still gets CONNECTED)",
        (CONNECT + "connect-gets-connected",),
    ),
    FaultSpec(
        "refuse-stomp-command",
        "server",
        "answer a STOMP frame (the CONNECT synonym) with ERROR",
        (CONNECT + "stomp-command-gets-connected",),
    ),
    FaultSpec(
        "connected-without-version",
        "server",
        "CONNECTED frames carry no version header",
        (CONNECT + "connected-says-version-1-2",),
    ),
    FaultSpec(
        "ignore-accept-version",
        "server",
        "a CONNECT whose accept-version has no version in common (no 1.2) gets CONNECTED version:1.2 anyway",
        (CONNECT + "error-on-no-common-version",),
    ),
    FaultSpec(
        "require-login",
        "server",
        "answer a CONNECT without a login header with ERROR",
        (CONNECT + "does-not-require-login",),
    ),
    FaultSpec(
        "require-passcode",
        "server",
        "answer a CONNECT without a passcode header with ERROR",
        (CONNECT + "does-not-require-passcode",),
    ),
    FaultSpec(
        "no-heart-beats",
        "server",
        "CONNECTED offers heart-beats but the server never sends any",
        (CONNECT + "sends-heart-beats",),
    ),
    FaultSpec(
        "missing-heart-beat-expects-beats",
        "server",
        "a CONNECT without heart-beat header is taken to promise the client's heart-beats (the session is "
        "dropped after 2 seconds with nothing received) instead of meaning heart-beat:0,0",
        (CONNECT + "missing-heart-beat-means-none",),
    ),
    FaultSpec(
        "refuse-heart-beats",
        "server",
        "an EOL (heart-beat) received after CONNECT is answered with ERROR and a close",
        (CONNECT + "accepts-heart-beats",),
    ),
    FaultSpec(
        "drop-idle-connections",
        "server",
        "close any connection after 2 seconds with nothing received, whatever heart-beating was agreed",
        (CONNECT + "keeps-idle-connection", CONNECT + "missing-heart-beat-means-none"),
    ),
    FaultSpec(
        "no-disconnect-receipt",
        "server",
        "a DISCONNECT with a receipt header is answered by closing, without the RECEIPT",
        (CONNECT + "disconnect-gets-receipt",),
    ),
    # --- frames
    FaultSpec(
        "no-error-on-malformed",
        "server",
        "a malformed frame makes the server close the connection without sending ERROR",
        (FRAME + "error-then-close-on-malformed-frame", FRAME + "error-on-undefined-escape"),
    ),
    FaultSpec(
        "open-after-error",
        "server",
        "after an ERROR for a malformed frame the connection stays open (input is ignored)",
        (FRAME + "error-then-close-on-malformed-frame",),
    ),
    FaultSpec(
        "body-ends-at-nul",
        "server",
        "a SEND body ends at its first NUL even when content-length counts more; the rest is read as frames",
        (FRAME + "accepts-body-with-nul",),
    ),
    FaultSpec(
        "refuse-crlf",
        "server",
        "frames whose lines end with CRLF are treated as malformed (ERROR, close)",
        (FRAME + "accepts-crlf-line-ends",),
    ),
    FaultSpec(
        "body-on-receipt",
        "server",
        "RECEIPT frames carry a body (only SEND, MESSAGE and ERROR may)",
        (FRAME + "no-body-on-connected-or-receipt",),
    ),
    FaultSpec(
        "error-without-message",
        "server",
        "ERROR frames carry no message header",
        (FRAME + "error-has-message-header",),
    ),
    FaultSpec(
        "error-without-receipt-id",
        "server",
        "an ERROR answering a frame with a receipt header carries no receipt-id",
        (FRAME + "error-carries-receipt-id",),
    ),
    FaultSpec(
        "trim-header-values",
        "server",
        "header values are stripped of leading and trailing spaces",
        (FRAME + "keeps-header-spaces",),
    ),
    FaultSpec(
        "last-header-wins",
        "server",
        "of repeated headers the last entry is used instead of the first",
        (FRAME + "repeated-header-first-wins",),
    ),
    FaultSpec(
        "no-header-unescape",
        "server",
        "header values are kept as escaped on the wire (\\c stays \\c) instead of being unescaped",
        (FRAME + "unescapes-header-values",),
    ),
    # --- SEND
    FaultSpec(
        "accept-missing-destination",
        "server",
        "a SEND without a destination header is stored and receipted",
        (SEND + "error-on-missing-destination",),
    ),
    FaultSpec(
        "silent-on-invalid-body",
        "server",
        "a SEND whose body is not JSON or not a valid SMP message gets neither RECEIPT nor ERROR (dropped)",
        (
            SEND + "processes-or-refuses-non-json-body",
            SEND + "processes-or-refuses-invalid-smp-body",
        ),
    ),
    FaultSpec(
        "open-after-profile-error",
        "server",
        "a SEND missing receipt, type or content-type, or with persistent not true, gets ERROR but the "
        "connection stays open (input is ignored)",
        (
            SEND + "processes-or-refuses-missing-type",
            SEND + "processes-or-refuses-missing-content-type",
            SEND + "processes-or-refuses-non-persistent",
            SEND + "processes-or-refuses-missing-receipt",
        ),
    ),
    # --- receipts and storage
    FaultSpec(
        "wrong-receipt-id",
        "server",
        "RECEIPTs for SENDs carry the receipt header's value with '-x' appended",
        (RECEIPT + "receipt-id-echoes-receipt",),
    ),
    FaultSpec(
        "receipts-out-of-order",
        "server",
        "RECEIPTs that become ready together are sent in reverse order",
        (RECEIPT + "receipts-in-order",),
    ),
    FaultSpec(
        "receipt-before-store",
        "server",
        "a SEND is receipted at once and written to the store 3 seconds later",
        # Only this one fails: receipt-confirms-pipelined-sends, stored-after-connection-cut
        # and stored-after-restart depend on receipted-message-is-stored and are blocked by it.
        (RECEIPT + "receipted-message-is-stored",),
    ),
    FaultSpec(
        "pipelined-stored-late",
        "server",
        "when several SENDs arrive together, all are receipted at once but only the last is stored "
        "then; the others are written 3 seconds later (a write-behind for bursts)",
        (RECEIPT + "receipt-confirms-pipelined-sends",),
    ),
    FaultSpec(
        "forget-on-connection-cut",
        "server",
        "when a connection ends without DISCONNECT, the messages it stored are removed from the store",
        (RECEIPT + "stored-after-connection-cut",),
    ),
    FaultSpec(
        "store-lost-on-restart",
        "server",
        "the store is emptied when the server starts (as if messages were only kept in memory)",
        (RECEIPT + "stored-after-restart",),
    ),
    # --- client role (python -m reference_impl.stomp client --fault NAME; reference_impl/stomp/client.py,
    # ClientFault has the same names)
    FaultSpec(
        "count-before-receipt",
        "client",
        "print DELIVERED=<n> as soon as the SEND is written, before its RECEIPT",
        ("stomp.receipt.client.delivered-only-after-receipt",),
    ),
    FaultSpec(
        "client-exact-receipts",
        "client",
        "a RECEIPT confirms only the SEND it names; the earlier SENDs of the connection stay in flight "
        "(footnote 2 ignored)",
        ("stomp.receipt.client.accepts-cumulative-receipt",),
    ),
    FaultSpec(
        "no-resend",
        "client",
        "after a dropped connection, give up the messages sent on it and not receipted",
        ("stomp.receipt.client.resends-unreceipted-after-drop",),
    ),
    FaultSpec(
        "omit-receipt",
        "client",
        "SENDs carry no receipt header (a receipted DISCONNECT confirms them instead)",
        ("stomp.send.client.includes-receipt",),
    ),
    FaultSpec(
        "omit-type", "client", "SENDs carry no type header", ("stomp.send.client.includes-type",)
    ),
    FaultSpec(
        "omit-content-type",
        "client",
        "SENDs carry no content-type header",
        ("stomp.send.client.includes-content-type",),
    ),
    FaultSpec(
        "persistent-false",
        "client",
        "SENDs carry persistent:false",
        ("stomp.send.client.persistent-true",),
    ),
    FaultSpec(
        "send-before-connect",
        "client",
        "on each connection, the first pending SEND goes out before CONNECT",
        ("stomp.connect.client.sends-connect-first",),
    ),
    FaultSpec(
        "skip-first-message",
        "client",
        "the first message of the messages file is never sent",
        ("stomp.send.client.sends-each-message",),
    ),
    FaultSpec(
        "send-after-disconnect",
        "client",
        "right after its DISCONNECT, send the first message's SEND again",
        ("stomp.connect.client.nothing-after-disconnect",),
    ),
    FaultSpec(
        "send-subscribe",
        "client",
        "right after CONNECTED, send a SUBSCRIBE frame (a command outside the profile's subset)",
        ("stomp.send.client.only-subset-commands",),
    ),
    FaultSpec(
        "body-not-json",
        "client",
        "SEND bodies are the JSON text of the message cut one byte short (not JSON, so not SMP)",
        ("stomp.send.client.body-is-valid-smp",),
    ),
    FaultSpec(
        "omit-accept-version",
        "client",
        "CONNECT carries no accept-version header (a STOMP 1.0 CONNECT)",
        ("stomp.connect.client.accept-version-includes-1-2",),
    ),
    FaultSpec(
        "literal-node-id-host",
        "client",
        "the CONNECT host header is the manifest's value with ${NODE_ID} left in",
        ("stomp.connect.client.host-substitutes-node-id",),
    ),
    FaultSpec(
        "literal-node-id-login",
        "client",
        "the CONNECT login header is the manifest's value with ${NODE_ID} left in",
        ("stomp.connect.client.login-substitutes-node-id",),
    ),
    FaultSpec(
        "literal-node-id-destination",
        "client",
        "the SEND destination header is the manifest's value with ${NODE_ID} left in",
        ("stomp.send.client.destination-substitutes-node-id",),
    ),
    FaultSpec(
        "check-hostname",
        "client",
        "TLS checks the server certificate's names against the host the client connects to",
        ("stomp.tls.client.skips-hostname-verification",),
    ),
    FaultSpec(
        "no-verify",
        "client",
        "TLS does not verify the server's certificate chain (CERT_NONE)",
        ("stomp.tls.client.verifies-server-chain",),
    ),
    FaultSpec(
        "allow-tls-1-2",
        "client",
        "the client's TLS context allows TLS 1.2 (minimum_version TLSv1_2)",
        ("stomp.tls.client.refuses-tls-1-2",),
    ),
    FaultSpec(
        "no-client-certificate",
        "client",
        "the client presents no certificate",
        ("stomp.tls.client.presents-certificate",),
    ),
)

Fault = fault_enum("Fault", SPECS)
"""One member per fault (``Fault.RECEIPT_BEFORE_STORE`` is ``"receipt-before-store"``)."""

REGISTRY: dict[str, FaultSpec] = {spec.name: spec for spec in SPECS}

NOT_ISOLABLE: dict[str, str] = {}
"""Cases whose rule cannot be broken alone, with the reason (none yet)."""

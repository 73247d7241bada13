"""The BTP reference node's faults: ``python -m reference_impl.btp serve|client
--fault NAME`` (repeatable). Each breaks one rule of BTP 2.0 (RFC 23) on
purpose; ``cases`` are the conformance cases that must catch it (see
reference_impl/faults.py and docs/mutation.md).

The sans-I/O session takes them as ``BtpSession(faults=...)``, the node
layer as ``BtpNode(faults=...)`` and ``run_client(faults=...)``.
"""

from __future__ import annotations

from ..faults import FaultSpec, fault_enum

AUTH = "btp.auth.server."
FLOW = "btp.flow.server."
ERROR = "btp.error.server."
TRANSFER = "btp.transfer.server."

SPECS: tuple[FaultSpec, ...] = (
    # --- authentication, server
    FaultSpec(
        "refuse-valid-auth",
        "server",
        "answer a valid auth Message with Error F00 (and close)",
        (AUTH + "accepts-valid-auth",),
    ),
    FaultSpec(
        "refuse-extra-auth-entries",
        "server",
        "answer a valid auth Message with more than the auth and auth_token entries with Error F01",
        (AUTH + "accepts-extra-auth-entries",),
    ),
    FaultSpec(
        "no-auth-required",
        "server",
        "serve requests sent before the auth Message (no Error, no close)",
        (AUTH + "error-on-transfer-before-auth", AUTH + "error-on-non-auth-message-first"),
    ),
    FaultSpec(
        "serve-transfer-before-auth",
        "server",
        "settle a Transfer sent before the auth Message (Messages still get the Error)",
        (AUTH + "error-on-transfer-before-auth",),
    ),
    FaultSpec(
        "serve-message-before-auth",
        "server",
        "answer a non-auth Message sent before the auth Message with a Response",
        (AUTH + "error-on-non-auth-message-first",),
    ),
    FaultSpec(
        "stay-open-after-auth-error",
        "server",
        "keep the connection open after an auth Error",
        (AUTH + "closes-after-auth-error", AUTH + "rejects-wrong-token"),
    ),
    FaultSpec(
        "accept-wrong-token", "server", "accept any auth_token", (AUTH + "rejects-wrong-token",)
    ),
    FaultSpec(
        "accept-missing-auth-token",
        "server",
        "accept an auth Message without an auth_token entry",
        (AUTH + "rejects-missing-auth-token",),
    ),
    FaultSpec(
        "accept-duplicate-names-in-auth",
        "server",
        "accept an auth Message with two protocol data entries of one name",
        (AUTH + "rejects-duplicate-subprotocol-names",),
    ),
    FaultSpec(
        "no-auth-timeout",
        "server",
        "never disconnect a client that does not authenticate",
        (AUTH + "disconnects-client-that-never-authenticates",),
    ),
    # --- flow, server
    FaultSpec(
        "wrong-request-id",
        "server",
        "after auth, answers carry the request's id + 1",
        (FLOW + "response-carries-request-id",),
    ),
    FaultSpec(
        "answer-twice",
        "server",
        "answer each ordinary Message twice",
        (FLOW + "answers-concurrent-requests-once-each",),
    ),
    FaultSpec(
        "answer-auth-twice",
        "server",
        "answer a valid auth Message with two Responses (the same Response twice)",
        (FLOW + "answers-concurrent-requests-once-each",),
    ),
    FaultSpec(
        "reply-to-unexpected",
        "server",
        "answer a Response or Error to no in-flight request with an Error",
        (
            FLOW + "silent-on-response-for-unknown-request",
            FLOW + "silent-on-error-for-unknown-request",
        ),
    ),
    FaultSpec(
        "reply-to-unreadable",
        "server",
        "answer an unreadable packet with an Error",
        tuple(
            FLOW + rule
            for rule in (
                "silent-on-truncated-packet",
                "silent-on-length-beyond-end",
                "silent-on-garbage",
                "silent-on-illegal-characters",
                "silent-on-text-message",
                "silent-on-unknown-type",
            )
        ),
    ),
    FaultSpec(
        "accept-duplicate-names",
        "server",
        "after auth, serve a request with two protocol data entries of one name",
        ("btp.subprotocol.server.rejects-duplicate-names",),
    ),
    # --- Error packets, server
    FaultSpec(
        "nonstandard-error-code",
        "server",
        "Errors carry code F99, which is not in the spec's table (so no name can match it either)",
        (ERROR + "code-from-table", ERROR + "name-matches-code"),
    ),
    FaultSpec(
        "error-name-mismatch",
        "server",
        "Errors carry the name of another code (F00 named InvalidPacketError, ...)",
        (ERROR + "name-matches-code",),
    ),
    FaultSpec(
        "triggered-at-local-time",
        "server",
        "Errors carry triggeredAt as a local time, without the final Z (20171115140000.000)",
        (ERROR + "triggered-at-is-utc", ERROR + "triggered-at-valid-time"),
    ),
    FaultSpec(
        "triggered-at-trailing-zero",
        "server",
        "Errors carry triggeredAt with a two-digit fraction ending in 0 (20171115140000.50Z), a form RFC 30 "
        "lists as invalid",
        (ERROR + "triggered-at-valid-time",),
    ),
    FaultSpec(
        "oversized-error-data",
        "server",
        "Errors carry 9000 bytes of data (the ASN.1 allows at most 8192)",
        (ERROR + "data-at-most-8192-bytes",),
    ),
    FaultSpec(
        "error-code-four-characters",
        "server",
        "Errors carry a 4-character code, the table's with a 0 appended (F000 for F00), where the ASN.1 "
        "fixes 3 (IA5String (SIZE (3)), no length prefix)",
        (ERROR + "code-has-three-characters",),
    ),
    # --- Transfers, server
    FaultSpec(
        "balance-on-error",
        "server",
        "a Transfer refused with Error F08 still increases the balance",
        (TRANSFER + "error-means-balance-unchanged",),
    ),
    FaultSpec(
        "response-without-balance-update",
        "server",
        "a Transfer answered with a Response leaves the balance unchanged",
        (TRANSFER + "response-means-balance-updated",),
    ),
    # --- client role
    FaultSpec(
        "client-message-before-auth",
        "client",
        "the client sends a Message before its auth Message",
        ("btp.auth.client.sends-auth-first",),
    ),
    FaultSpec(
        "client-omits-auth-token",
        "client",
        "the client's auth Message has no auth_token entry",
        ("btp.auth.client.sends-utf8-auth-token",),
    ),
    FaultSpec(
        "client-wrong-request-id",
        "client",
        "the client answers the server's requests with the request's id + 1",
        ("btp.flow.client.response-carries-request-id",),
    ),
    FaultSpec(
        "client-reply-to-unexpected",
        "client",
        "the client answers a Response or Error to no in-flight request with an Error",
        (
            "btp.flow.client.silent-on-response-for-unknown-request",
            "btp.flow.client.silent-on-second-response",
            "btp.flow.client.silent-on-error-for-unknown-request",
        ),
    ),
    FaultSpec(
        "client-reply-to-unreadable",
        "client",
        "the client answers an unreadable packet with an Error",
        ("btp.flow.client.silent-on-unreadable-packet",),
    ),
    # --- cases from the coverage tables (issue 11)
    FaultSpec(
        "reject-extra-bytes-in-envelope",
        "server",
        "treat a packet with bytes after protocolData inside its envelope as unreadable (silence)",
        ("btp.packet.server.ignores-extra-bytes-in-envelope",),
    ),
    FaultSpec(
        "serve-unknown-type-as-message",
        "server",
        "serve a packet of an undefined type (such as 9) whose envelope reads as a Message's",
        (FLOW + "silent-on-unknown-type",),
    ),
    FaultSpec(
        "client-reply-to-unexpected-error",
        "client",
        "the client answers an Error to no in-flight request with an Error (Responses are still ignored)",
        ("btp.flow.client.silent-on-error-for-unknown-request",),
    ),
    FaultSpec(
        "client-reuse-request-id",
        "client",
        "the client gives its first request after auth the auth Message's request id",
        ("btp.flow.client.request-ids-unique",),
    ),
    FaultSpec(
        "client-refuse-auth-response-with-data",
        "client",
        "the client takes an auth Response that carries protocol data for a refusal (and closes)",
        ("btp.auth.client.accepts-auth-response-with-protocol-data",),
    ),
    FaultSpec(
        "client-retry-after-final-error",
        "client",
        "the client sends a request again after a final (F) Error to it",
        ("btp.error.client.no-retry-after-final-error",),
    ),
)

Fault = fault_enum("Fault", SPECS)
"""One member per fault (``Fault.NO_AUTH_REQUIRED`` is ``"no-auth-required"``)."""

REGISTRY: dict[str, FaultSpec] = {spec.name: spec for spec in SPECS}

NOT_ISOLABLE: dict[str, str] = {
    # --- cases from the coverage tables (issue 11)
    "btp.packet.server.canonical-lengths": (
        "the harness reads every packet with the strict BTP decoder (reference_impl/btp/packet.py), which "
        "refuses a length in long form below 128 or with a leading zero byte, and a protocol data count with "
        "a leading zero, as unreadable; each answer this case judges (to a probe, to two sub-protocols of one "
        "name, to a Transfer before auth) is also read by the cases of those rules, so a fault here fails them "
        "too (this case names the non-canonical field with the bytes)"
    ),
    AUTH + "requires-reauth-after-reconnect": (
        "its wire sequence (authenticate, close, a new connection, a probe Message without auth) is the one "
        "btp.auth.server.error-on-non-auth-message-first already performs with its valid counterpart first "
        "(show_valid_auth), and that case is its prerequisite: a node that carries auth over to a new "
        "connection fails that case, and this one is blocked by it"
    ),
}
"""Cases whose rule cannot be broken without breaking other cases' rules too,
with the reason; the mutation table lists them (docs/mutation.md)."""

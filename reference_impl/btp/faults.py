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
    FaultSpec("refuse-valid-auth", "server",
              "answer a valid auth Message with Error F00 (and close)",
              (AUTH + "accepts-valid-auth",)),
    FaultSpec("refuse-extra-auth-entries", "server",
              "answer a valid auth Message with more than the auth and auth_token entries with Error F01",
              (AUTH + "accepts-extra-auth-entries",)),
    FaultSpec("no-auth-required", "server",
              "serve requests sent before the auth Message (no Error, no close)",
              (AUTH + "error-on-transfer-before-auth", AUTH + "error-on-non-auth-message-first")),
    FaultSpec("serve-transfer-before-auth", "server",
              "settle a Transfer sent before the auth Message (Messages still get the Error)",
              (AUTH + "error-on-transfer-before-auth",)),
    FaultSpec("serve-message-before-auth", "server",
              "answer a non-auth Message sent before the auth Message with a Response",
              (AUTH + "error-on-non-auth-message-first",)),
    FaultSpec("stay-open-after-auth-error", "server",
              "keep the connection open after an auth Error",
              (AUTH + "closes-after-auth-error", AUTH + "rejects-wrong-token")),
    FaultSpec("accept-wrong-token", "server",
              "accept any auth_token",
              (AUTH + "rejects-wrong-token",)),
    FaultSpec("accept-missing-auth-token", "server",
              "accept an auth Message without an auth_token entry",
              (AUTH + "rejects-missing-auth-token",)),
    FaultSpec("accept-duplicate-names-in-auth", "server",
              "accept an auth Message with two protocol data entries of one name",
              (AUTH + "rejects-duplicate-subprotocol-names",)),
    FaultSpec("no-auth-timeout", "server",
              "never disconnect a client that does not authenticate",
              (AUTH + "disconnects-client-that-never-authenticates",)),
    # --- flow, server
    FaultSpec("wrong-request-id", "server",
              "answers carry the request's id + 1 (not the auth answer)",
              (FLOW + "response-carries-request-id", FLOW + "answers-concurrent-requests-once-each")),
    FaultSpec("answer-twice", "server",
              "answer each ordinary Message twice",
              (FLOW + "answers-concurrent-requests-once-each",)),
    FaultSpec("reply-to-unexpected", "server",
              "answer a Response or Error to no in-flight request with an Error",
              (FLOW + "silent-on-response-for-unknown-request", FLOW + "silent-on-error-for-unknown-request")),
    FaultSpec("reply-to-unreadable", "server",
              "answer an unreadable packet with an Error",
              tuple(FLOW + rule for rule in ("silent-on-truncated-packet", "silent-on-length-beyond-end",
                                             "silent-on-garbage", "silent-on-illegal-characters",
                                             "silent-on-text-message"))),
    FaultSpec("accept-duplicate-names", "server",
              "after auth, serve a request with two protocol data entries of one name",
              ("btp.subprotocol.server.rejects-duplicate-names",)),
    # --- Error packets, server
    FaultSpec("nonstandard-error-code", "server",
              "Errors carry code F99, which is not in the spec's table (name NotAcceptedError)",
              (ERROR + "code-from-table",)),
    FaultSpec("error-name-mismatch", "server",
              "Errors carry the name of another code (F00 named InvalidPacketError, ...)",
              (ERROR + "name-matches-code",)),
    FaultSpec("local-time-triggered-at", "server",
              "Errors' triggeredAt is a local GeneralizedTime without the Z",
              (ERROR + "triggered-at-is-utc",)),
    FaultSpec("oversized-error-data", "server",
              "Errors' data is padded to 8193 bytes",
              (ERROR + "data-at-most-8192-bytes",)),
    # --- Transfers, server
    FaultSpec("balance-on-error", "server",
              "a Transfer refused with Error F08 still increases the balance",
              (TRANSFER + "error-means-balance-unchanged",)),
    FaultSpec("response-without-balance-update", "server",
              "a Transfer answered with a Response leaves the balance unchanged",
              (TRANSFER + "response-means-balance-updated",)),
    # --- client role
    FaultSpec("client-message-before-auth", "client",
              "the client sends a Message before its auth Message",
              ("btp.auth.client.sends-auth-first",)),
    FaultSpec("client-omits-auth-token", "client",
              "the client's auth Message has no auth_token entry",
              ("btp.auth.client.sends-utf8-auth-token",)),
    FaultSpec("client-wrong-request-id", "client",
              "the client answers the server's requests with the request's id + 1",
              ("btp.flow.client.response-carries-request-id",)),
    FaultSpec("client-reply-to-unexpected", "client",
              "the client answers a Response or Error to no in-flight request with an Error",
              ("btp.flow.client.silent-on-response-for-unknown-request", "btp.flow.client.silent-on-second-response")),
    FaultSpec("client-reply-to-unreadable", "client",
              "the client answers an unreadable packet with an Error",
              ("btp.flow.client.silent-on-unreadable-packet",)),
)

Fault = fault_enum("Fault", SPECS)
"""One member per fault (``Fault.NO_AUTH_REQUIRED`` is ``"no-auth-required"``)."""

REGISTRY: dict[str, FaultSpec] = {spec.name: spec for spec in SPECS}

NOT_ISOLABLE: dict[str, str] = {}
"""Cases whose rule cannot be broken without breaking other cases' rules too,
with the reason; the mutation table lists them (docs/mutation.md)."""

"""Case ids the BTP cases name as prerequisites (``depends=``).

A case depends on the rules it relies on to tell its own rule apart: when
one of them did not pass in the same run, the case is reported ``blocked``
by it instead of failing for a rule that is not its own. The graph is
acyclic; its roots are the valid auth (target as server) and the client's
auth Message (target as client).
"""

from __future__ import annotations

# -- target as server
AUTH = "btp.auth.server.accepts-valid-auth"
"""Every case after auth authenticates first; every negative auth case is
told apart from a target that refuses everything by it."""
REQUEST_ID = "btp.flow.server.response-carries-request-id"
"""The harness finds the answer to a request by its request id."""
ANSWERS_ONCE = "btp.flow.server.answers-concurrent-requests-once-each"
"""A case that takes the next packet after a request for its answer, or
listens for silence after auth (one answer per request, the auth Message's
too: a second answer would be taken for the next request's, or for an answer
where the case wants silence)."""
AUTHENTICATED = (AUTH, REQUEST_ID, ANSWERS_ONCE)
"""A case that authenticates and matches answers to its requests."""

SERVER_GRAMMAR = "btp.packet.server.sends-well-formed-packets"
"""The packet grammar of everything the server sends (core/node_grammar.py):
not a prerequisite of any case; a case that reads a packet breaking it is
blocked by it, and it runs after every other server case."""
CANONICAL = "btp.packet.server.canonical-lengths"
"""The canonical OER of the lengths and counts in everything the server
sends: a grammar case too, of that one rule (a packet the strict decoder
refuses only for a non-canonical length or count is judged by it, not by
SERVER_GRAMMAR)."""
ERROR_CODE = "btp.error.server.code-has-three-characters"
"""A case that reads an Error of the target: one unreadable because of its
code's form (not three IA5 characters) blocks it by this rule's case
(BtpPeer.next_packet), which alone fails for it."""
ERROR_BEFORE_AUTH = "btp.auth.server.error-on-transfer-before-auth"
NON_AUTH_FIRST = "btp.auth.server.error-on-non-auth-message-first"
DUPLICATE_NAMES = "btp.subprotocol.server.rejects-duplicate-names"

# -- target as client
CLIENT_AUTH = "btp.auth.client.sends-auth-first"
CLIENT_REQUEST_ID = "btp.flow.client.response-carries-request-id"
CLIENT_GRAMMAR = "btp.packet.client.sends-well-formed-packets"
"""The packet grammar of everything the client sends, as SERVER_GRAMMAR
(canonical lengths included: the client role has no case of that rule alone)."""

# -- shared state (``shares=``): cases naming it run one after another under
# ``certify --case-jobs N`` (docs/concurrency.md)
BALANCE_STATE = "balance"
"""The balance of the harness's account at the target: the Transfer cases
read it before and after their Transfers, and every case that sends a
Transfer (before auth, where the target must refuse it, or while provoking
an Error) would move it if the target took the Transfer."""

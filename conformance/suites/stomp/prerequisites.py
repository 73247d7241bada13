"""Case ids the STOMP cases name as prerequisites (``depends=``).

A case depends on the rules it relies on to tell its own rule apart: when
one of them did not pass in the same run, the case is reported ``blocked``
by it instead of failing for a rule that is not its own. The graph is
acyclic; its root for the target as server is the mutual TLS handshake
(every connection of the suite is one), then CONNECT answered by CONNECTED
(every case that sends frames after connecting).
"""

from __future__ import annotations

# -- target as server
TLS = "stomp.tls.server.completes-mutual-handshake"
"""Every connection is a TLS 1.3 connection with the harness's certificate:
a target refusing it refuses everything, and each negative TLS case needs it
as the valid counterpart (the refusal is of the bad certificate, not of
every client)."""
CONNECTED = "stomp.connect.server.connect-gets-connected"
"""A case that connects before its own step; a refusal of the step would
otherwise be a refusal of every session."""
SESSION = (TLS, CONNECTED)
"""What every case after CONNECT relies on."""
DISCONNECT_RECEIPT = "stomp.connect.server.disconnect-gets-receipt"
"""A case that ends with DISCONNECT receipt:... to show the session still
works (heart-beat and idle cases): a target that never answers a DISCONNECT
receipt would otherwise fail them."""
ACCEPTS_BEATS = "stomp.connect.server.accepts-heart-beats"
"""A case that sends EOLs between frames (heart-beats)."""
RECEIPT_ECHO = "stomp.receipt.server.receipt-id-echoes-receipt"
"""A case that matches a RECEIPT to its SEND by receipt-id (the frame and
SEND cases that want a valid SEND receipted; helper RECEIPTS' case)."""
MISSING_DESTINATION = "stomp.send.server.error-on-missing-destination"
"""The plain ERROR-then-close answer to a SEND the server cannot process."""

SERVER_GRAMMAR = "stomp.frame.server.sends-well-formed-frames"
"""The frame grammar of everything the server sends (core/node_grammar.py):
not a prerequisite of any case; a case that reads a frame breaking it is
blocked by it, and it runs after every other server case."""

# -- target as client
CLIENT_GRAMMAR = "stomp.frame.client.sends-well-formed-frames"
"""The frame grammar of everything the client sends, as SERVER_GRAMMAR."""

# -- shared state (``shares=``): cases naming it run one after another under
# ``certify --case-jobs N`` (docs/concurrency.md)
ACCEPTED_STATE = "accepted"
"""What the target's ``accepted`` adapter reads: RabbitMQ's adapter takes
the queue's messages unacknowledged and hands them back at the end, so while
one case reads, another case's read misses them. Messages sent by other
cases do not matter (each case looks for its own bodies)."""

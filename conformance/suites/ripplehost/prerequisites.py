"""Case ids the Ripple host cases name as prerequisites (``depends=``).

A case depends on the rules it relies on to tell its own rule apart: when
one of them did not pass in the same run, the case is reported ``blocked``
by it instead of failing for a rule that is not its own. The graph is
acyclic; its roots are the acceptor's host-id reply (target as server) and
the initiator's host-id MSG (target as client).
"""

from __future__ import annotations

# -- target as server (the acceptor)
HOST_ID = "ripplehost.hostid.server.replies-with-host-id"
"""Every case after the host-id exchange: without it the target serves nothing."""
REPLY_MSGNO = "ripplehost.msgno.server.reply-carries-msgno"
"""The harness finds the answer to a MSG by its msgno: every case that
judges an answer (or checks that a probe still gets one) relies on it."""
IDENTIFIED = (HOST_ID, REPLY_MSGNO)
"""A case that exchanges host-ids and matches answers to its MSGs."""
CLOSES_ON_MALFORMED = "ripplehost.frame.server.closes-on-malformed-header"
"""The silence of a closing target is judged only once it closes at all."""
REASSEMBLES = "ripplehost.chunk.server.reassembles-chunked"
"""Interleaving is told apart from chunking only once chunking works."""
SERVER_GRAMMAR = "ripplehost.frame.server.sends-well-formed-frames"
"""The frame grammar of everything the acceptor sends (core/node_grammar.py):
not a prerequisite of any case; a case that reads a frame breaking it is
blocked by it, and it runs after every other server case."""

# -- target as client (the initiator)
CLIENT_HOST_ID = "ripplehost.hostid.client.sends-host-id-first"
"""Every client case finds the client's first MSG, the host-id, and answers it."""
CLIENT_REPLY_MSGNO = "ripplehost.msgno.client.reply-carries-msgno"
CLIENT_CLOSES_ON_MALFORMED = "ripplehost.frame.client.closes-on-malformed-header"
"""As for the acceptor: the initiator's silence is judged only once it closes at all."""
CLIENT_GRAMMAR = "ripplehost.frame.client.sends-well-formed-frames"
"""The frame grammar of everything the initiator sends, as SERVER_GRAMMAR."""
CLIENT_CLOSES_SILENTLY = "ripplehost.frame.client.closes-silently-on-malformed-header"
"""A frame with a bad trailer or size is judged by the same silent close as a
bad header: a target that answers before closing fails that case, not these."""

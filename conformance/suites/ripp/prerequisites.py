"""Case ids the RIPP cases name as prerequisites (``depends=``).

A case depends on the rules it relies on to tell its own rule apart: when
one of them did not pass in the same run, the case is reported ``blocked``
by it instead of failing for a rule that is not its own. Target as server
(consumer): the harness reads the target's envelopes (VALID_ENVELOPES), gets
through the handshake (HANDSHAKE), sees what the node applied through the
Checkpoint_ack (CHECKPOINT) and compares it with the digest of the expected
state (APPLIES). Target as client (producer): the Handshake comes first.
"""

from __future__ import annotations

# -- target as server (consumer)
VALID_ENVELOPES = "ripp.envelope.server.sends-valid-envelopes"
HANDSHAKE = "ripp.handshake.server.accepts-compatible-schema"
CHECKPOINT = "ripp.checkpoint.server.answers-request"
APPLIES = "ripp.delta.server.applies-in-order"
"""Every case judging what the node applied compares Checkpoint_ack digests
with the digest of the state it expects (a node reporting wrong digests
fails this case and blocks the others)."""

# -- target as client (producer)
CLIENT_ENVELOPES = "ripp.envelope.client.sends-valid-envelopes"
CLIENT_HANDSHAKE = "ripp.handshake.client.sends-handshake-first"

# -- the envelope grammar of what the node sends (core/node_grammar.py)
SERVER_GRAMMAR = "ripp.envelope.server.sends-well-formed-envelopes"
"""The envelope grammar of everything the consumer sends: not a
prerequisite of any case; a case that reads an envelope breaking it is
blocked by it, and it runs after every other server case."""
CLIENT_GRAMMAR = "ripp.envelope.client.sends-well-formed-envelopes"
"""The envelope grammar of everything the producer sends, as SERVER_GRAMMAR."""

"""Case ids the SSB cases name as prerequisites (``depends=``).

A case depends on the rules it relies on to tell its own rule apart: when
one of them did not pass in the same run, the case is reported ``blocked``
by it instead of failing for a rule that is not its own. The graph is
acyclic, and its roots are the cases that rely on nothing but a TCP
connection: the valid handshake (target as server) and the client's hello
(target as client).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from conformance.core.requirements import blocked
from reference_impl.ssb.boxstream import BoxStreamError

# -- target as server
HANDSHAKE = "ssb.shs.server.completes-valid-handshake"
"""Every server case after the handshake opens a session with it."""

NUMBERING = "ssb.rpc.server.responses-use-negated-request-number"
"""The harness finds the answers to a request by its negated number."""
STREAM_FLAG = "ssb.rpc.server.source-responses-set-stream-flag"
STREAM_END = "ssb.rpc.server.ends-source-stream-with-true"
"""A stream is read to its end; ``true`` tells a finished stream from a failed one."""

SESSION = (HANDSHAKE, NUMBERING)
"""A case that sends a request and reads the first answer to it."""
READS_STREAM = (HANDSHAKE, NUMBERING, STREAM_FLAG, STREAM_END)
"""A case that reads a source stream to its end."""

WHOLE_FEED = "ssb.history.server.serves-whole-feed-in-order"
LIMIT = "ssb.history.server.limit-caps-messages"
KEYS_DEFAULT_TRUE = "ssb.history.server.keys-default-true"
KEYS_FALSE = "ssb.history.server.keys-false-sends-bare-messages"
UNKNOWN_ASYNC_ERROR = "ssb.rpc.server.unknown-async-procedure-gets-error"
LIMIT_DEFAULT = "ssb.history.server.limit-default-unlimited"
"""A case that needs every message (the latest, or one just published) reads
the feed without a limit and relies on the default being unlimited."""

SERVER_GRAMMAR = "ssb.rpc.server.sends-well-formed-messages"
"""The RPC message format of everything the server sends (core/node_grammar.py):
not a prerequisite of any case; a case that reads a message breaking it is
blocked by it, and it runs after every other server case."""

# -- target as client
CLIENT_GRAMMAR = "ssb.rpc.client.sends-well-formed-messages"
"""The RPC message format of everything the client sends, as SERVER_GRAMMAR."""
CLIENT_HELLO = "ssb.shs.client.sends-valid-hello"
CLIENT_HANDSHAKE = "ssb.shs.client.completes-valid-handshake"
CLIENT_HISTORY_REQUEST = "ssb.history.client.sends-well-formed-request"
SEQUENCE = "ssb.history.server.sequence-starts-at-given-message"
"""The case of the ``sequence`` option (renamed with its erratum, SSB-E1)."""

BOX_SIZE = "ssb.boxstream.server.splits-large-messages"
"""A box body carries at most 4096 bytes; longer RPC messages are split."""
OVERSIZED_BOX_REASON = "body length exceeds"
"""The start of BoxStreamError.reason (a stable text) for a box header that
declares a body longer than the harness accepts."""


@contextmanager
def reading_the_feed() -> Iterator[None]:
    """Around a case's reading of the target's feed: a box body over 4096
    bytes breaks the box size rule (a feed may hold messages longer than one
    box, e.g. the one that rule's case publishes), and leaves nothing this
    case could judge, so the case is blocked by that rule, not failed."""
    try:
        yield
    except BoxStreamError as exc:
        if not str(getattr(exc, "reason", "")).startswith(OVERSIZED_BOX_REASON):
            raise
        blocked(
            BOX_SIZE,
            "failed within this case",
            f"the target sent a box body longer than a box may carry while this case read its feed ({exc})",
        )


# -- shared state (``shares=``): cases naming it run one after another under
# ``certify --case-jobs N`` (docs/concurrency.md)
FEED_STATE = "feed"
"""The target's own feed: the cases that publish to it (through the
``publish`` adapter) and the cases that compare two reads of it, or a read
with what they published (another case publishing in between would change
what they compare). A single read of the feed is judged on its own, and
stays valid when another case appends."""

"""The RIPP reference node's conformant variants: ``python -m reference_impl.ripp
consume|produce --variant NAME`` (repeatable), each a behaviour the text
(ripp-wire-protocol.txt) or the profile (docs/ripp-profile.md) allows and the
plain node does not show (see reference_impl/variants.py). ``conformance
mutation --variants`` certifies each: the suite must find it CONFORMANT.

The consumer (server role) sends nothing unprompted in this protocol (its
only envelopes answer a Handshake or a Checkpoint_request), so the variants
of its own traffic are the producer's (client role).
"""

from __future__ import annotations

from ..variants import UNPROMPTED_TRAFFIC, VariantSpec, wire_variants

WATERMARKS = "watermarks"
FREQUENT_HEARTBEATS = "frequent-heartbeats"
HEARTBEAT_GAP = 0.6
"""With ``frequent-heartbeats``, the gap between Heartbeats after the first,
in negotiated intervals: inside the profile's [0.5, 1.5]."""
UNPROMPTED_CHECKPOINT_IDS = 1_000_000
"""The first checkpoint_id of the producer's unprompted Checkpoint_requests
(its asked-for checkpoint is 1)."""

LATE_SECONDS_MAX = 0.4
"""The latest a RIPP node may write, with the 0.5 s Heartbeat interval the
built-in targets negotiate: a consumer treats a producer as dead after 3
intervals without a Heartbeat (profile P8), and a producer's first Heartbeat
reaches it one interval plus a round trip after the negotiation leaves, so a
node writing more than about one interval late cuts off every producer.
``conformance mutation`` gives ``late-answers`` at most this."""

SPECS: tuple[VariantSpec, ...] = (
    *wire_variants(
        "envelope",
        "the text sets no time within which a Schema_negotiation or Checkpoint_ack is due "
        "(the profile's only timeouts are 10 s for the handshake)",
    ),
    VariantSpec(
        UNPROMPTED_TRAFFIC,
        ("client",),
        "the producer asks for checkpoints of its own: right after the ok negotiation, before any Delta, "
        "and again after its Deltas (checkpoint_id from 1000000 on)",
        'profile P5: "After an ok negotiation the producer may send Deltas, Heartbeats and '
        'Checkpoint_requests"; text, Message Types: Checkpoint_request coordinator -> worker',
    ),
    VariantSpec(
        WATERMARKS,
        ("client",),
        "every Delta carries the optional watermark_ns (the producer's clock)",
        'text, delta_msg: "An optional watermark update piggy-backed on the data message" '
        "(profile P3: watermark_ns : int64 option)",
    ),
    VariantSpec(
        FREQUENT_HEARTBEATS,
        ("client",),
        f"after the first Heartbeat (one interval after the ok negotiation), one every {HEARTBEAT_GAP:g} "
        "negotiated intervals",
        "profile P8: \"a conformant producer's gaps between consecutive Heartbeats lie in [0.5, 1.5] "
        'intervals"',
    ),
)

"""The SSB reference node's conformant variants: ``python -m reference_impl.ssb
serve|replicate --variant NAME`` (repeatable), each a behaviour the
Scuttlebutt protocol guide allows and the plain node does not show (see
reference_impl/variants.py). ``conformance mutation --variants`` certifies
each: the suite must find it CONFORMANT.

The wire variants shape the TCP bytes the node writes, so a handshake
message, a box header or a box body may arrive in pieces, or several in one
read.
"""

from __future__ import annotations

from ..variants import UNPROMPTED_TRAFFIC, VariantSpec, wire_variants

UNPROMPTED_INTERVAL = 0.5
"""Seconds between the server's own ``whoami`` requests with ``unprompted-traffic``."""

SPECS: tuple[VariantSpec, ...] = (
    *wire_variants(
        "handshake message or box",
        "the guide sets no time within which a request must be answered",
        "handshake messages or boxes",
    ),
    VariantSpec(
        UNPROMPTED_TRAFFIC,
        ("server",),
        "right after the handshake, before the peer asks anything, the server makes requests of its own "
        "(createHistoryStream for its own feed, as ssb-server's legacy replication does, and whoami), "
        f"then a whoami every {UNPROMPTED_INTERVAL:g} s",
        'Scuttlebutt protocol guide, RPC protocol: "Both peers make requests to each other at the same '
        'time using the pair of box streams that have been established"',
    ),
)

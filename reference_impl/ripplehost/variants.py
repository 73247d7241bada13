"""The Ripple host reference node's conformant variants: ``python -m
reference_impl.ripplehost serve|connect --variant NAME`` (repeatable), each
a behaviour the text (sctp-binding.txt) or the profile
(docs/ripplehost-profile.md) allows and the plain node does not show (see
reference_impl/variants.py). ``conformance mutation --variants`` certifies
each: the suite must find it CONFORMANT.
"""

from __future__ import annotations

from ..variants import UNPROMPTED_TRAFFIC, VariantSpec, wire_variants

UNPROMPTED_INTERVAL = 0.5
"""Seconds between the node's own pings with ``unprompted-traffic``."""

SPECS: tuple[VariantSpec, ...] = (
    *wire_variants("frame", "the text sets no time within which a MSG must be answered"),
    VariantSpec(
        UNPROMPTED_TRAFFIC,
        ("server", "client"),
        f'a MSG {{"type":"ping"}} of the node\'s own right after the host-id exchange, then every '
        f"{UNPROMPTED_INTERVAL:g} s (the acceptor with odd msgnos, the initiator with even ones)",
        'Ripple SCTP binding, Host Messages: "The host that initiated the association must use only '
        "even-numbered msgnos and the host that received the association must use only odd-numbered "
        'msgnos" (both hosts send MSGs); profile section 4: only MSGs before the host-id RPY are '
        "forbidden",
    ),
)

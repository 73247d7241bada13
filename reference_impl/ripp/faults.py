"""The RIPP reference node's faults: ``python -m reference_impl.ripp consume|produce
--fault NAME`` (repeatable). Each breaks one rule of the RIPP text or of the
project's profile (docs/ripp-profile.md) on purpose; ``cases`` are the
conformance cases that must catch it, and no other case may fail (cases
that rely on the broken rule to tell their own apart are ``blocked``). See
reference_impl/faults.py and docs/mutation.md.

Roles: "server" faults go to ``consume`` (the accepting consumer),
"client" faults to ``produce`` (the connecting producer).
"""

from __future__ import annotations

from ..faults import FaultSpec, fault_enum

SERVER = "ripp.envelope.server."
HANDSHAKE = "ripp.handshake.server."
DELTA = "ripp.delta.server."
CLIENT = "ripp.envelope.client."

SPECS: tuple[FaultSpec, ...] = (
    # --- consumer (server role)
    FaultSpec(
        "accept-bad-crc",
        "server",
        "apply envelopes whose CRC-32C does not match (the CRC is not checked)",
        (SERVER + "rejects-flipped-bit",),
    ),
    FaultSpec(
        "skip-magic-check",
        "server",
        "read envelopes whatever their first 4 bytes are",
        (SERVER + "rejects-bad-magic",),
    ),
    FaultSpec(
        "ignore-envelope-version",
        "server",
        "read envelopes of any version byte as version 1",
        (SERVER + "rejects-unsupported-version",),
    ),
    FaultSpec(
        "accept-unknown-type",
        "server",
        "skip envelopes of an undefined message type instead of closing",
        (SERVER + "rejects-unknown-type",),
    ),
    FaultSpec(
        "accept-nonzero-flags",
        "server",
        "read envelopes whatever their flags byte is (profile P1's check 6 skipped)",
        (SERVER + "rejects-nonzero-flags",),
    ),
    FaultSpec(
        "consumer-repeat-envelope-sequence",
        "server",
        "number every envelope it sends 1 (Schema_negotiation and Checkpoint_acks alike)",
        (SERVER + "sequence-increases",),
    ),
    FaultSpec(
        "no-length-bound",
        "server",
        "wait for (and buffer) whatever payload length a header claims instead of refusing it",
        (SERVER + "rejects-oversized-length",),
    ),
    FaultSpec(
        "nonzero-flags",
        "server",
        "write flags 0x01 in every envelope it sends",
        (SERVER + "sends-zero-flags",),
    ),
    FaultSpec(
        "bad-outgoing-crc",
        "server",
        "write a wrong CRC-32C (the correct one XOR 1) in every envelope it sends",
        (SERVER + "sends-valid-envelopes",),
    ),
    FaultSpec(
        "ignore-handshake-version",
        "server",
        "negotiate whatever protocol_version the Handshake names",
        (HANDSHAKE + "refuses-unsupported-protocol-version",),
    ),
    FaultSpec(
        "accept-incompatible-schema",
        "server",
        "answer every Handshake with ok=true, whatever check_backward says",
        (HANDSHAKE + "refuses-incompatible-schema",),
    ),
    FaultSpec(
        "apply-duplicates",
        "server",
        "apply again a Delta whose sequence_no arrived before (a duplicate) instead of discarding it",
        (DELTA + "discards-duplicates",),
    ),
    FaultSpec(
        "hold-after-gap",
        "server",
        "discard Deltas after a gap until the missing sequence numbers arrive",
        (DELTA + "applies-after-gap",),
    ),
    FaultSpec(
        "apply-late-gap-fill",
        "server",
        "apply a Delta whose sequence_no is below the last applied but never arrived before (a late filler "
        "of a gap) instead of discarding it",
        (DELTA + "applies-after-gap",),
    ),
    FaultSpec(
        "one-counter-for-all-sources",
        "server",
        "keep one last-applied sequence number for all sources instead of one per source",
        (DELTA + "tracks-sources-apart",),
    ),
    FaultSpec(
        "skip-fingerprint-check",
        "server",
        "decode Deltas whatever schema fingerprint their envelope carries",
        (DELTA + "refuses-unknown-fingerprint",),
    ),
    FaultSpec(
        "refuse-all-schemas",
        "server",
        'answer every Handshake with ok=false (error "refused"), whatever check_backward says',
        (HANDSHAKE + "accepts-compatible-schema",),
    ),
    FaultSpec(
        "ignore-checkpoint-request",
        "server",
        "read Checkpoint_requests and never answer them",
        ("ripp.checkpoint.server.answers-request",),
    ),
    FaultSpec(
        "no-liveness-check",
        "server",
        "never close a producer that stops sending Heartbeats (profile P8's three intervals)",
        ("ripp.heartbeat.server.closes-without-heartbeats",),
    ),
    FaultSpec(
        "wrong-ack-digest",
        "server",
        "report the digest of the state before the last applied Delta in Checkpoint_acks",
        (DELTA + "applies-in-order",),
    ),
    # --- producer (client role)
    FaultSpec(
        "no-heartbeats",
        "client",
        "never send a Heartbeat",
        ("ripp.heartbeat.client.sends-at-interval",),
    ),
    FaultSpec(
        "default-heartbeat-interval",
        "client",
        "send Heartbeats every 5 s (the text's default) whatever interval the consumer stated",
        ("ripp.heartbeat.client.sends-at-interval",),
    ),
    FaultSpec(
        "client-nonzero-flags",
        "client",
        "write flags 0x01 in every envelope it sends",
        (CLIENT + "sends-zero-flags",),
    ),
    FaultSpec(
        "client-bad-crc",
        "client",
        "write a wrong CRC-32C (the correct one XOR 1) in every envelope it sends",
        (CLIENT + "sends-valid-envelopes",),
    ),
    FaultSpec(
        "repeat-envelope-sequence",
        "client",
        "number every envelope it sends 1",
        (CLIENT + "sequence-increases",),
    ),
    FaultSpec(
        "delta-before-handshake",
        "client",
        "send its first Delta before the Handshake",
        ("ripp.handshake.client.sends-handshake-first",),
    ),
    FaultSpec(
        "client-ignore-envelope-version",
        "client",
        "the producer reads envelopes of any version byte as version 1",
        (CLIENT + "rejects-unsupported-version",),
    ),
    FaultSpec(
        "client-no-wait-for-negotiation",
        "client",
        "send its Deltas right after the Handshake, before the Schema_negotiation arrives (which it then "
        "reads as usual)",
        ("ripp.handshake.client.waits-for-negotiation",),
    ),
    FaultSpec(
        "ignore-rejection",
        "client",
        "go on sending Deltas after a Schema_negotiation with ok=false",
        ("ripp.handshake.client.stops-after-rejection",),
    ),
    FaultSpec(
        "repeat-delta-sequence",
        "client",
        "give every Delta sequence_no 1",
        ("ripp.delta.client.sends-deltas",),
    ),
    FaultSpec(
        "delta-undeclared-field",
        "client",
        "every Set or Patch Delta also names a field its writer schema does not have (undeclared_field)",
        ("ripp.delta.client.deltas-match-handshake",),
    ),
)

Fault = fault_enum("Fault", SPECS)
"""One member per fault (``Fault.ACCEPT_BAD_CRC`` is ``"accept-bad-crc"``)."""

REGISTRY: dict[str, FaultSpec] = {spec.name: spec for spec in SPECS}

NOT_ISOLABLE: dict[str, str] = {}
"""Cases whose rule cannot be broken without breaking other cases' rules
too (none so far)."""

"""Interop: one implementation's RIPP producer (client role) against
another's consumer (server role, ``--peer``).

The harness starts the consumer, puts the envelope-aware relay of
conformance/interop/ripp/relay.py in front of it and launches the client
target's producer command at the relay with the client-role suite's
placeholders (``{peer_host}``, ``{peer_port}``, ``{source_id}``, ``{count}``,
``{client_stay}``, ``{client_timeout}``). The relay replays Deltas (the
consumer receives 1, 2, 2, 1, 3) and asks the consumer for a checkpoint on
the producer's connection; the Checkpoint_ack shows what the consumer
applied (docs/ripp-profile.md P6, P7), which the harness compares with what
its own codec makes of the producer's Deltas as they crossed the relay.
"""

from __future__ import annotations

import asyncio

from conformance.core.requirements import requirement
from conformance.suites.ripp.peer import ExpectedState
from reference_impl.ripp.payloads import (
    DeltaMsg,
    Handshake,
    Heartbeat,
    PayloadError,
    SchemaNegotiation,
    decode_delta,
)

from .relay import RippRelay

COUNT = 3
"""Deltas the producer sends: with the relay's replay the consumer gets 1, 2, 2, 1, 3."""
CLIENT_TIMEOUT = 10
WAIT_GRACE = 10.0
NEGOTIATED = "ripp.interop.client.negotiates-schemas"
EMPTY_DIGEST = bytes.fromhex("93b885adfe0da089cdf634904fd59f71")


async def exchange(
    target, peer_target, wire_trace, deadline: float, *, stay: float = 0.0, replay: bool = True
) -> tuple[RippRelay, int | None, str]:
    """Run the producer through the relay to its end; (relay, exit code,
    producer output tail)."""
    async with RippRelay(
        peer_target.host, peer_target.port, wire_trace, count=COUNT, replay=replay
    ) as relay:
        process = target.launch_client(
            {
                "peer_host": relay.host,
                "peer_port": relay.port,
                "source_id": "interop-producer",
                "count": COUNT,
                "client_stay": stay,
                "client_timeout": CLIENT_TIMEOUT,
            }
        )
        try:
            code = await asyncio.to_thread(process.wait, CLIENT_TIMEOUT + stay + WAIT_GRACE)
            # The consumer's answer to the relay's request may come after
            # the producer exited (the relay holds the consumer's side open).
            await relay.wait_ack(max(deadline, 1.0))
        finally:
            process.stop()
    return relay, code, process.tail(10) or "(no output)"


def require_negotiation(
    relay: RippRelay, code: int | None, tail: str
) -> tuple[Handshake, SchemaNegotiation]:
    handshakes = relay.messages("client->server", Handshake)
    answers = relay.messages("server->client", SchemaNegotiation)
    assert relay.connections, (
        f"the producer never connected to the relay (exit {code}); its output:\n{tail}"
    )
    assert handshakes, (
        "no Handshake from the producer crossed the relay; it sent: "
        + "; ".join(s.describe() for s in relay.messages("client->server")[:3])
        + f"; exit {code}, output:\n{tail}"
    )
    assert answers, (
        "the consumer did not answer the producer's Handshake with a Schema_negotiation; it sent: "
        + ("; ".join(s.describe() for s in relay.messages("server->client")[:3]) or "nothing")
        + f"\nHandshake: {handshakes[0].describe()}"
    )
    return handshakes[0].message, answers[0].message


@requirement(
    NEGOTIATED,
    "MUST",
    'RIPP, Handshake ("Responds with Schema_negotiation (compatible/incompatible + error details)"); '
    "Handshake Protocol (profile P5: the consumer accepts the producer's compatible schemas)",
    role="client",
    basis="profile: P5 handshake and schema negotiation (the consumer answers the producer's "
    "Handshake with one Schema_negotiation, ok=true when the declared schemas pass "
    "check_backward), docs/ripp-profile.md",
)
async def test_consumer_accepts_the_producers_handshake(target, peer_target, wire_trace, deadline):
    relay, code, tail = await exchange(target, peer_target, wire_trace, deadline, replay=False)
    handshake, negotiation = require_negotiation(relay, code, tail)
    assert negotiation.ok, (
        f"{peer_target.target.name} refused {target.target.name}'s Handshake (both use the suite's registry, so "
        f"the schemas are the same): errors {negotiation.errors}; Handshake "
        f"{relay.messages('client->server', Handshake)[0].describe()}"
    )
    assert code == 0, (
        f"{target.target.name} producer exited {code} after an ok negotiation; output:\n{tail}"
    )


@requirement(
    "ripp.interop.client.applies-each-delta-once",
    "MUST",
    'RIPP, Sequence Numbering ("The receiver tracks the last-seen sequence number per source"; '
    '"Idempotent delivery: duplicate messages (from at-least-once transport) are silently discarded") '
    "(profile P6, P7: the Checkpoint_ack's last_sequence_no, applied_count, state_digest per source)",
    role="client",
    depends=[NEGOTIATED],
    basis="profile: P6 sequence numbers and deltas (the consumer applies a Delta only when its "
    "sequence_no is above the last of its source, and discards the others silently) and P7 "
    "checkpoint (what was applied, shown in the Checkpoint_ack), docs/ripp-profile.md",
)
async def test_consumer_applies_each_delta_once(target, peer_target, wire_trace, deadline):
    relay, code, tail = await exchange(target, peer_target, wire_trace, deadline)
    handshake, negotiation = require_negotiation(relay, code, tail)
    assert negotiation.ok, f"negotiation refused: {negotiation.errors} (the rule of {NEGOTIATED})"
    schemas = dict(handshake.output_schemas)
    expected = {name: ExpectedState(schema) for name, schema in schemas.items()}
    received = []
    for seen in relay.messages("client->server", DeltaMsg):
        d = seen.message
        assert d.source_output in expected, (
            f"the producer sent a Delta for {d.source_output!r}, not declared in "
            f"its Handshake: {seen.describe()}"
        )
        try:
            expected[d.source_output].apply(d.sequence_no, d.key, decode_delta(d.delta_bytes))
        except PayloadError as exc:
            raise AssertionError(
                f"the producer's Delta does not decode as Delta.t ({exc}): {seen.describe()}"
            ) from exc
        received.append(f"{d.source_output}#{d.sequence_no}{'*' if seen.injected else ''}")
    own = relay.messages("client->server", DeltaMsg, injected=False)
    assert len(own) >= COUNT, (
        f"the producer sent {len(own)} Delta(s), {COUNT} asked (--count); exit {code}, "
        f"output:\n{tail}"
    )
    ack = relay.ack
    assert ack is not None, (
        f"{peer_target.target.name} sent no Checkpoint_ack for the relay's Checkpoint_request "
        f"{relay.checkpoint_id} (profile P7) within {max(deadline, 1.0):g} s after the producer ended; the "
        f"consumer {'closed the connection' if relay.consumer_closed_at else 'stayed silent'}; its last "
        f"envelopes: {'; '.join(s.describe() for s in relay.messages('server->client')[-3:]) or 'none'}"
    )
    assert ack.checkpoint_id == relay.checkpoint_id, (
        f"the Checkpoint_ack names checkpoint {ack.checkpoint_id}, the request {relay.checkpoint_id} (P7: echoes)"
    )
    got = {s.source_output: s for s in ack.sources}
    problems = []
    for name, state in expected.items():
        want = (state.track.last, state.track.applied, state.digest())
        have = got.get(name)
        if have is None:
            problems.append(f"source {name!r} missing from the ack (P7: one per declared output)")
        elif (have.last_sequence_no, have.applied_count, have.state_digest) != want:
            problems.append(
                f"source {name!r}: last_sequence_no {have.last_sequence_no}, applied_count {have.applied_count}, "
                f"state_digest {have.state_digest.hex()}; expected {want[0]}, {want[1]}, {want[2].hex()} "
                f"(each Delta applied once; empty state {EMPTY_DIGEST.hex()})"
            )
    assert not problems, (
        f"{peer_target.target.name} received the Deltas {', '.join(received)} (* = replayed by the relay) from "
        f"{target.target.name}; its Checkpoint_ack does not show each applied exactly once:\n"
        + "\n".join(problems)
        + f"\nack: {relay.messages('server->client', type(ack))[-1].describe()}"
    )


@requirement(
    "ripp.interop.client.heartbeats-keep-session",
    "SHOULD",
    'RIPP, Heartbeat ("Sent periodically (default every 5 seconds)") (profile P8: the producer adopts '
    "the consumer's heartbeat_interval_ms; the consumer closes after 3 silent intervals)",
    role="client",
    depends=[NEGOTIATED],
    basis="profile: P8 heartbeats (the producer adopts the consumer's heartbeat_interval_ms and "
    "sends one Heartbeat every interval; the consumer closes after 3 intervals without one), "
    "docs/ripp-profile.md",
)
async def test_heartbeats_keep_the_session(target, peer_target, wire_trace, deadline):
    # The producer stays for more than 3 of the consumer's intervals: a
    # producer that does not adopt the interval (or sends no Heartbeat) is
    # dropped by a consumer that enforces it.
    relay, code, tail = await exchange(
        target, peer_target, wire_trace, deadline, stay=2.0, replay=False
    )
    handshake, negotiation = require_negotiation(relay, code, tail)
    assert negotiation.ok, f"negotiation refused: {negotiation.errors} (the rule of {NEGOTIATED})"
    interval = negotiation.heartbeat_interval_ms / 1000
    beats = relay.messages("client->server", Heartbeat)
    stay_window = 2.0
    closed_first = relay.consumer_closed_at is not None and (
        relay.producer_closed_at is None or relay.consumer_closed_at < relay.producer_closed_at
    )
    assert not closed_first, (
        f"{peer_target.target.name} closed the session before {target.target.name} ended it: the producer sent "
        f"{len(beats)} Heartbeat(s) for the consumer's interval of {interval:g} s; producer exit {code}, "
        f"output:\n{tail}"
    )
    due = int(
        stay_window / interval
    )  # the first one interval after the negotiation, then one per interval
    if due >= 2:
        # One fewer than due: the stay starts after the Deltas, a little
        # after the negotiation the schedule counts from.
        assert len(beats) >= due - 1, (
            f"{target.target.name} sent {len(beats)} Heartbeat(s) in its {stay_window:g} s stay; at the consumer's "
            f"interval of {interval:g} s about {due} were due (P8)"
        )

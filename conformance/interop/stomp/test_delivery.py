"""Interop: one implementation's STOMP client delivers SMP messages to
another's STOMP server (Swaptacular STOMP transport, "STOMP Connections").

Each case launches the client afresh at the server through a recording relay
(conformance/interop/stomp/pair.py). TLS is end to end, so the cases judge by
outcomes: the client's ``DELIVERED=<n>`` lines and exit status, the server's
``accepted`` adapter (docs/stomp-adapter.md), and the number of connections
the client opened.
"""

from __future__ import annotations

from conformance.core.requirements import blocked, not_applicable, requirement

from .pair import PairRun, deliver, find_messages, header_problems

PROFILE = "Swaptacular STOMP transport"
CONNECTIONS = f"{PROFILE}, STOMP Connections"
DELIVERS = "stomp.interop.client.delivers-every-message"


_NOTHING_DELIVERED: dict[tuple[str, str], PairRun] = {}
"""(client, server) -> a delivery of this session in which the client
reported no message delivered. The cases after it that need a delivered
message are blocked at once by it instead of running the pair again (each
run waits out the client's 30 s): one pytest session per pair, so the
cases of one pair share this."""


def _remember(run: PairRun) -> PairRun:
    if not run.delivered:
        _NOTHING_DELIVERED[(run.client, run.server)] = run
    return run


def _blocked_by_an_earlier_run(target, peer_target) -> None:
    earlier = _NOTHING_DELIVERED.get((target.target.name, peer_target.target.name))
    if earlier is not None:
        blocked(
            DELIVERS,
            "failed",
            f"{earlier.client} reported no message delivered to {earlier.server}"
            + (f": {earlier.server_errors()}" if earlier.error_frames else "")
            + f"; not run again: {earlier.describe()}",
        )


def _needs_accepted(peer_target) -> None:
    if "accepted" not in peer_target.target.capabilities:
        not_applicable(
            f"server {peer_target.target.name} has no `accepted` adapter (docs/stomp-adapter.md): "
            "what it stored cannot be read"
        )


@requirement(
    DELIVERS,
    "MUST",
    f'{CONNECTIONS} ("the sending node opens a client STOMP connection to one (or more) of the receiving '
    "node's servers, and issues a SEND command for each of the messages. The client MUST consider a "
    'message to be successfully delivered, only after a RECEIPT command has been received")',
    role="client",
)
async def test_client_delivers_every_message(target, peer_target, wire_trace):
    run = _remember(await deliver(target, peer_target, wire_trace))
    missing = [n for n in range(len(run.messages)) if n not in run.delivered]
    assert run.exit_code == 0 and not missing, (
        f"{run.client} did not get every message receipted by {run.server}: "
        + (f"{run.server_errors()}; " if run.error_frames else "")
        + f"message(s) {missing} "
        f"({', '.join(run.messages[n]['type'] for n in missing) or '-'}) not reported delivered; "
        f"{run.describe()}; client output:\n{run.tail()}"
    )


@requirement(
    "stomp.interop.client.delivered-messages-are-stored",
    "MUST",
    f'{CONNECTIONS} (a RECEIPT confirms "that the message has been processed"; footnote 2: "Every STOMP '
    'RECEIPT command confirms the delivery of all preceding messages"); STOMP 1.2, RECEIPT',
    role="client",
)
async def test_delivered_messages_are_stored(target, peer_target, wire_trace):
    _needs_accepted(peer_target)
    _blocked_by_an_earlier_run(target, peer_target)
    run = _remember(await deliver(target, peer_target, wire_trace))
    delivered = sorted(set(run.delivered))
    if not delivered:
        blocked(
            DELIVERS,
            "failed within this case",
            f"{run.client} reported no message delivered, so there is nothing to look for"
            + (f": {run.server_errors()}" if run.error_frames else "")
            + f"; {run.describe()}",
        )
    found = await find_messages(peer_target, run, f"after {run.client} exited")
    problems = []
    for n in delivered:
        copies = found.copies[n]
        name = f"message {n} ({run.messages[n]['type']}, creditor_id {run.messages[n]['body']['creditor_id']})"
        if not copies:
            problems.append(
                f"{name} was reported delivered by {run.client} but is not among the {found.total} "
                f"record(s) {peer_target.target.name}'s accepted adapter printed"
            )
        elif all(header_problems(run, n, c) for c in copies):
            problems.append(
                f"{name} is stored altered: "
                + "; ".join(f"{c.brief()}: {', '.join(header_problems(run, n, c))}" for c in copies)
            )
    assert not problems, "\n".join(problems) + f"\n{run.describe()}"


@requirement(
    "stomp.interop.client.no-duplicate-without-reconnect",
    "SHOULD",
    f"{CONNECTIONS} (a message is delivered once its RECEIPT arrives, so a client on one connection has "
    'no reason to send it again); SMP 2.1, Overview ("Messages may arrive out-of-order, or be delivered '
    'more than once, without causing any problems": receivers cope, so this is not a MUST)',
    role="client",
    basis="inference: a message counts as delivered once its RECEIPT arrives, so a client that keeps "
    "its connection has no reason to send a message twice; no sentence forbids it",
)
async def test_no_duplicate_without_reconnect(target, peer_target, wire_trace):
    _needs_accepted(peer_target)
    _blocked_by_an_earlier_run(target, peer_target)
    run = _remember(await deliver(target, peer_target, wire_trace))
    if not run.delivered:
        blocked(
            DELIVERS,
            "failed within this case",
            f"{run.client} reported no message delivered"
            + (f": {run.server_errors()}" if run.error_frames else "")
            + f"; {run.describe()}",
        )
    found = await find_messages(peer_target, run, f"after {run.client} exited")
    twice = {n: copies for n, copies in found.copies.items() if len(copies) > 1}
    if twice and run.connections > 1:
        # Reconnecting is the one reason to send a message again (STOMP
        # Connections: a message not receipted before the connection ended
        # is not delivered); the copies are then the client's right.
        return
    assert not twice, (
        f"{peer_target.target.name} holds "
        + "; ".join(
            f"message {n} ({run.messages[n]['type']}) {len(c)} times (lines {', '.join(str(r.line) for r in c)})"
            for n, c in twice.items()
        )
        + f", although {run.client} used a single connection: {run.describe()}"
    )

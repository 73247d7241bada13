"""Interop: one implementation's Ripple host initiator (client role) against
another's acceptor (server role, ``--peer``).

The harness starts the acceptor, puts the recording TCP relay
(conformance/core/transport.TcpRelay) in front of it and launches the
client target's initiator at the relay with the client-role suite's
placeholders (``{peer_host}``, ``{peer_port}``, ``{messages_file}``,
``{client_timeout}``): after the host-id exchange it sends a ping and an
echo (docs/ripplehost-profile.md, the reference message service). The
relay's trace, parsed with the strict frame codec, shows the exchange.
"""

from __future__ import annotations

import asyncio
import json
import secrets

from conformance.core.requirements import requirement
from conformance.core.transport import TcpRelay, short_hex
from reference_impl.ripplehost.frame import FrameError, Message, MessageReader

CLIENT_TIMEOUT = 10
WAIT_GRACE = 10.0
HOST_IDS = "ripplehost.interop.client.exchanges-host-ids"
SPEC = "Ripple SCTP binding"
"""The label of sctp-binding.txt in conformance/coverage/ripplehost.toml (citations are checked against it)."""


def _messages(data: bytes, who: str) -> list[Message]:
    try:
        return MessageReader().receive_data(data)
    except FrameError as exc:
        raise AssertionError(
            f"the {who}'s bytes do not parse as Ripple frames ({exc}): {short_hex(data)}"
        ) from None


async def association(target, peer_target, wire_trace, messages: list[dict]):
    """Run the initiator through the relay; (exit code, output tail, the
    initiator's messages, the acceptor's messages)."""
    path = target.work_dir / f"ripple-interop-{secrets.token_hex(4)}.json"
    path.write_text(json.dumps(messages), encoding="utf-8")
    async with TcpRelay(peer_target.host, peer_target.port, wire_trace) as relay:
        process = target.launch_client(
            {
                "peer_host": relay.host,
                "peer_port": relay.port,
                "messages_file": path,
                "client_timeout": CLIENT_TIMEOUT,
            }
        )
        try:
            code = await asyncio.to_thread(process.wait, CLIENT_TIMEOUT + WAIT_GRACE)
        finally:
            process.stop()
    sent = _messages(wire_trace.bytes_in("client->server"), "initiator")
    answered = _messages(wire_trace.bytes_in("server->client"), "acceptor")
    return code, process.tail(10) or "(no output)", sent, answered


@requirement(
    HOST_IDS,
    "MUST",
    f'{SPEC}, Host Identification ("the initiating host must send a host-id message"; the accepting '
    'host "must reply with its own host-id message"; docs/ripplehost-profile.md section 4)',
    role="client",
    basis="plain-words",
)
async def test_host_id_exchange(target, peer_target, wire_trace):
    code, tail, sent, answered = await association(target, peer_target, wire_trace, [])
    assert sent, (
        f"the initiator sent no complete message through the relay (exit {code}); output:\n{tail}"
    )
    first = sent[0]
    assert first.type == "MSG" and first.body.get("type") == "host-id" and not first.is_node, (
        f"the initiator's first message is not a host-id MSG in a host frame: {first.type} {first.body}"
    )
    replies = [m for m in answered if m.msgno == first.msgno and m.type in ("RPY", "ERR")]
    assert replies, (
        f"{peer_target.target.name} did not answer the host-id MSG {first.msgno}; it sent "
        f"{[(m.type, m.msgno, m.body) for m in answered]}"
    )
    reply = replies[0]
    assert (
        reply.type == "RPY" and reply.body.get("type") == "host-id" and reply.body.get("hostname")
    ), (
        f"{peer_target.target.name} answered the host-id with {reply.type} {reply.body}, not its own host-id RPY"
    )
    assert code == 0, (
        f"{target.target.name} did not complete the host-id exchange with "
        f"{peer_target.target.name} (exit {code}); output:\n{tail}"
    )


@requirement(
    "ripplehost.interop.client.ping-echo-round-trip",
    "MUST",
    f'{SPEC}, Host Messages ("Message types MSG, RPY, and ERR correspond to the Ripple message types '
    'message, reply, and error"; "For RPY and ERR types, msgno must be identical to the original MSG"; '
    "docs/ripplehost-profile.md section 7: ping -> pong, echo -> same body)",
    role="client",
    depends=[HOST_IDS],
    basis="plain-words",
)
async def test_ping_and_echo_round_trip(target, peer_target, wire_trace):
    token = secrets.token_hex(8)
    echo = {"type": "echo", "token": token, "text": "interop \u00e9 " + "x" * 300}
    code, tail, sent, answered = await association(
        target, peer_target, wire_trace, [{"type": "ping"}, echo]
    )
    after = sent[1:]  # the first is the host-id
    ping = [m for m in after if m.type == "MSG" and m.body.get("type") == "ping"]
    echoes = [m for m in after if m.type == "MSG" and m.body.get("type") == "echo"]
    assert ping and echoes, (
        f"the initiator did not send the ping and the echo after the host-id (exit {code}); "
        f"it sent {[(m.type, m.msgno, m.body.get('type')) for m in sent]}; output:\n{tail}"
    )
    by_msgno = {m.msgno: m for m in answered if m.type in ("RPY", "ERR")}
    pong = by_msgno.get(ping[0].msgno)
    assert pong is not None and pong.type == "RPY" and pong.body == {"type": "pong"}, (
        f"the ping MSG {ping[0].msgno} got {None if pong is None else (pong.type, pong.body)}, not RPY "
        f'{{"type":"pong"}}'
    )
    back = by_msgno.get(echoes[0].msgno)
    assert back is not None and back.type == "RPY" and back.body == echoes[0].body, (
        f"the echo MSG {echoes[0].msgno} got {None if back is None else (back.type, back.body)}, not an RPY with "
        "the same body"
    )
    assert echoes[0].body == echo, (
        f"the initiator altered the echo body: sent {echoes[0].body}, asked {echo}"
    )
    assert code == 0, (
        f"{target.target.name} did not finish the association with {peer_target.target.name} "
        f"(exit {code}); output:\n{tail}"
    )

"""Interop: one implementation's BTP client against another's server.

The harness starts the server target (``--peer``), puts a recording
WebSocket relay in front of it, and launches the client target's client
command pointed at the relay with the *server's* auth token. The client
command's contract (docs/targets.md, "Client commands"): authenticate, send
the Message given by ``{send_message}``, and exit 0 only if every request
it sent was answered with a Response; non-zero otherwise (refused auth,
an Error, a timeout).
"""

from __future__ import annotations

import asyncio

from conformance.core.requirements import not_applicable, requirement
from conformance.core.websocket import WebSocketRelay
from reference_impl.btp.packet import BtpDecodeError, Error, Message, Response, decode_packet

CLIENT_TIMEOUT = 30
MESSAGE = "conformance:hello"


def _packets(trace, direction: str) -> list:
    decoded = []
    for entry in trace.entries:
        if entry.direction == direction:
            try:
                decoded.append(decode_packet(entry.data))
            except BtpDecodeError:
                decoded.append(None)
    return decoded


async def _run_client(
    target, peer_target, wire_trace, token_file: str
) -> tuple[int | None, object]:
    url = peer_target.url or f"ws://{peer_target.host}:{peer_target.port}/"
    async with WebSocketRelay(url, wire_trace) as relay:
        process = target.launch_client(
            {
                "peer_url": relay.url,
                "peer_host": relay.host,
                "peer_port": relay.port,
                "auth_token_file": token_file,
                "client_stay": 0,
                "send_message": MESSAGE,
            }
        )
        try:
            code = await asyncio.to_thread(process.wait, CLIENT_TIMEOUT + 10)
        finally:
            process.stop()
    return code, process


@requirement(
    "btp.interop.client.authenticates-and-exchanges-messages",
    "SHOULD",
    "BTP 2.0, Authentication; Flow (end to end: auth Message, Response, a Message and its Response)",
    role="client",
    basis="inference: a client and a server that each follow RFC 23's Authentication and Flow complete "
    "an auth Message and a Message exchange with Responses, though the text leaves a server free to "
    "answer a Message it cannot process with an Error",
)
async def test_client_authenticates_and_exchanges_a_message(target, peer_target, wire_trace):
    code, process = await _run_client(
        target, peer_target, wire_trace, peer_target.credential_file("auth_token")
    )
    sent = _packets(wire_trace, "client->server")
    answers = _packets(wire_trace, "server->client")
    assert sent and answers, (
        f"no BTP traffic went through the relay; client output:\n{process.tail(10)}"
    )
    assert code == 0, (
        f"{target.target.name} client did not complete auth and a Message exchange with "
        f"{peer_target.target.name} (exit {code}); client output:\n{process.tail(10)}"
    )
    first = sent[0]
    assert (
        isinstance(first, Message) and first.protocol_data and first.protocol_data[0].name == "auth"
    ), f"the client's first packet was not the auth Message: {first}"
    answered = {p.request_id for p in answers if isinstance(p, Response)}
    requests = [p for p in sent if isinstance(p, Message)]
    assert len(requests) >= 2 and all(r.request_id in answered for r in requests), (
        f"every Message the client sent must get a Response with its id; sent {requests}, answers {answers}"
    )


@requirement(
    "btp.interop.client.wrong-token-is-refused",
    "MUST",
    'BTP 2.0, Authentication ("the server responds with an Error if: ... the provided authentication '
    'data is invalid", then closes)',
    role="client",
    basis="profile: B1 a wrong auth_token gets an Error, then the connection closes (the client is "
    "not authenticated), docs/btp-profile.md",
)
async def test_wrong_token_is_refused_end_to_end(target, peer_target, wire_trace, tmp_path):
    if peer_target.params.get("accepts_any_token") is True:
        not_applicable(
            f"{peer_target.target.name} declares every auth_token valid (params.accepts_any_token), "
            'so no token is "invalid"'
        )
    wrong = tmp_path / "wrong-token"
    wrong.write_bytes(b"not-" + peer_target.credential("auth_token").strip())
    wrong.chmod(0o600)
    wire_trace.redactor.add(wrong.read_bytes())
    code, process = await _run_client(target, peer_target, wire_trace, str(wrong))
    answers = _packets(wire_trace, "server->client")
    assert code not in (0, None), (
        f"{target.target.name} client reported success with a wrong token against "
        f"{peer_target.target.name}; client output:\n{process.tail(10)}"
    )
    assert any(isinstance(p, Error) for p in answers), (
        f"{peer_target.target.name} did not answer the wrong token with an Error; it sent {answers}"
    )

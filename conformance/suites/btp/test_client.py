"""Target as client: the harness listens, launches the target's client
command pointed at it, and plays the server (BTP 2.0, "Authentication", "Flow")."""

from __future__ import annotations

from conformance.core.requirements import requirement
from reference_impl.btp.packet import ContentType, Message, Response, encode_packet

from .peer import new_request_id, probe_message, summary
from .prerequisites import CLIENT_AUTH, CLIENT_REQUEST_ID
from .test_flow_server import ANSWER_BY_ID, SILENCE_WINDOW

AUTH = "BTP 2.0, Authentication"
FLOW = "BTP 2.0, Flow"


async def accept_auth(peer, token: bytes) -> Message:
    first = await peer.next_packet("the client's auth Message")
    assert isinstance(first, Message), (
        f"the client's first packet must be the auth Message; got {summary(first)}"
    )
    await peer.send(Response(first.request_id), "accepting the auth")
    return first


@requirement(
    "btp.auth.client.sends-auth-first",
    "MUST",
    f'{AUTH} ("Before anything else ... it sends a special Message request. Its primary protocolData '
    "entry MUST have name 'auth', content type MIME_APPLICATION_OCTET_STREAM, and empty data\")",
    role="client",
)
async def test_client_sends_auth_message_first(launched_client, auth_token):
    async with launched_client() as peer:
        first = await peer.next_packet("the client's first packet")
        assert isinstance(first, Message), f"first packet must be a Message; got {summary(first)}"
        primary = first.protocol_data[0] if first.protocol_data else None
        assert (
            primary is not None
            and primary.name == "auth"
            and primary.content_type == ContentType.APPLICATION_OCTET_STREAM
            and primary.data == b""
        ), f"primary entry must be auth / octet-stream / empty; got {summary(first)}"


@requirement(
    "btp.auth.client.sends-utf8-auth-token",
    "MUST",
    f"{AUTH} (\"among the secondary entries, there MUST be a UTF-8 'auth_token' entry\")",
    role="client",
    depends=[CLIENT_AUTH],
)
async def test_client_sends_auth_token(launched_client, auth_token):
    async with launched_client() as peer:
        first = await peer.next_packet("the client's auth Message")
        tokens = [e for e in first.protocol_data[1:] if e.name == "auth_token"]
        assert tokens, f"no secondary auth_token entry: {summary(first)}"
        assert tokens[0].data == auth_token, (
            "the auth_token entry does not carry the configured token"
        )
        # "a UTF-8 'auth_token' entry": the entry says so in its content type,
        # the value the text fixes, not only in bytes that happen to decode.
        assert tokens[0].content_type == ContentType.TEXT_PLAIN_UTF8, (
            f"the auth_token entry must be UTF-8 text, content type "
            f"{int(ContentType.TEXT_PLAIN_UTF8)} (MIME_TEXT_PLAIN_UTF8), not "
            f"{tokens[0].content_type}: {summary(first)}"
        )


@requirement(
    "btp.flow.client.response-carries-request-id",
    "MUST",
    f'{FLOW} ("The responder should always send back a response to a request with the same requestId"; '
    '"At the BTP level, the client and server play identical roles")',
    role="client",
    depends=[CLIENT_AUTH],
    errata=["BTP-E2"],
    basis=f"erratum: {ANSWER_BY_ID}",
)
async def test_client_answers_with_request_id(launched_client, auth_token):
    async with launched_client() as peer:
        await accept_auth(peer, auth_token)
        probe = probe_message(new_request_id())
        reply = await peer.request(probe, "the client's answer to a Message")
        assert reply.request_id == probe.request_id


@requirement(
    "btp.flow.client.silent-on-response-for-unknown-request",
    "SHOULD",
    f'{FLOW} ("If an unexpected BTP packet is received, no response should be sent")',
    role="client",
    depends=[CLIENT_AUTH, CLIENT_REQUEST_ID],
    basis="plain-words",
)
async def test_client_silent_on_unexpected_response(launched_client, auth_token):
    async with launched_client() as peer:
        await accept_auth(peer, auth_token)
        await peer.send(Response(new_request_id()), "a Response to a request the client never sent")
        replies = await peer.unanswered(SILENCE_WINDOW)
        assert not [r for r in replies if '"Message"' not in r], (
            f"client answered an unexpected Response: {replies}"
        )
        await peer.assert_still_answers("an unexpected Response")


@requirement(
    "btp.flow.client.silent-on-second-response",
    "SHOULD",
    f'{FLOW} (unexpected: "a response for a request which has already been responded to")',
    role="client",
    depends=[CLIENT_AUTH, CLIENT_REQUEST_ID],
    basis="plain-words",
)
async def test_client_silent_on_second_response(launched_client, auth_token):
    async with launched_client(send_message="conformance:hello") as peer:
        await accept_auth(peer, auth_token)
        request = await peer.next_packet("the client's Message (launched with a message to send)")
        assert isinstance(request, Message), (
            f"expected the client's Message, got {summary(request)}"
        )
        await peer.send(Response(request.request_id), "the answer")
        await peer.send(Response(request.request_id), "a second answer to the same request")
        replies = await peer.unanswered(SILENCE_WINDOW)
        assert not [r for r in replies if '"Response"' in r or '"Error"' in r], (
            f"client answered a second Response: {replies}"
        )
        await peer.assert_still_answers("a second Response")


@requirement(
    "btp.flow.client.silent-on-unreadable-packet",
    "MUST",
    f'{FLOW} ("Unreadable packets must be ignored too")',
    role="client",
    depends=[CLIENT_AUTH, CLIENT_REQUEST_ID],
    basis="plain-words",
)
async def test_client_silent_on_unreadable(launched_client, auth_token):
    async with launched_client() as peer:
        await accept_auth(peer, auth_token)
        whole = encode_packet(probe_message(new_request_id()))
        await peer.send_raw(whole[:-4], "a Message cut 4 bytes short")
        replies = await peer.unanswered(SILENCE_WINDOW)
        assert not [r for r in replies if '"Response"' in r or '"Error"' in r], (
            f"client answered an unreadable packet: {replies}"
        )
        await peer.assert_still_answers("an unreadable packet")

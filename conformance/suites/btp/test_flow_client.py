"""Target as client: the rules of the coverage table that had no client case
(BTP 2.0, "Authentication", "Flow", "Error Codes"; ASN.1 module)."""

from __future__ import annotations

from conformance.core.node_grammar import exchange_cut_short
from conformance.core.requirements import requirement
from conformance.core.transport import Deadline, DeadlineExceeded, PeerClosed, ProtocolViolation
from reference_impl.btp.packet import (
    ContentType,
    Error,
    Message,
    ProtocolDataEntry,
    Response,
    encode_packet,
    generalized_time,
    is_request,
)

from .peer import new_request_id, probe_message, summary
from .prerequisites import CLIENT_AUTH, CLIENT_GRAMMAR, CLIENT_REQUEST_ID
from .test_client import accept_auth
from .test_flow_server import SILENCE_WINDOW
from .test_packet_server import (
    BYTES_AFTER_ENVELOPE,
    EXTRA_BYTES,
    GRAMMAR_BASIS,
    PACKET_GRAMMAR,
    envelope_with_extra_bytes,
)

AUTH = "BTP 2.0, Authentication"
FLOW = "BTP 2.0, Flow"
RETRY_WINDOW = 3.0
"""Seconds during which a client must not send a request again after a final
Error: its own requests go out within milliseconds on loopback."""


async def requests_within(peer, seconds: float) -> list:
    """The requests the client sends within ``seconds`` (decoded; other
    messages are left out). The caller answers them."""
    requests = []
    for message in await peer.conn.messages_within(seconds):
        packet = peer.judged(message, "the client's requests")
        if packet is not None and is_request(packet):
            requests.append(packet)
    return requests


@requirement(
    "btp.flow.client.silent-on-error-for-unknown-request",
    "SHOULD",
    f'{FLOW} ("If an unexpected BTP packet is received, no response should be sent")',
    role="client",
    depends=[CLIENT_AUTH, CLIENT_REQUEST_ID],
    basis="plain-words",
)
async def test_client_silent_on_error_for_no_request(launched_client, auth_token):
    async with launched_client() as peer:
        await accept_auth(peer, auth_token)
        await peer.send(
            Error(new_request_id(), "F00", "NotAcceptedError", generalized_time(), b""),
            "an Error for a request the client never sent",
        )
        replies = await peer.unanswered(SILENCE_WINDOW)
        assert not [r for r in replies if '"Response"' in r or '"Error"' in r], (
            f"client answered an Error for no request: {replies}"
        )
        await peer.assert_still_answers("an Error for no request")


@requirement(
    "btp.flow.client.request-ids-unique",
    "SHOULD",
    'BTP ASN.1, Prepare ("Each request should have a unique requestId"); BTP 2.0, Flow ("no two in-flight '
    'requests are sent out with the same requestId")',
    role="client",
    depends=[CLIENT_AUTH],
    basis="plain-words",
)
async def test_client_request_ids_differ(launched_client, auth_token):
    async with launched_client(send_message="conformance:first") as peer:
        auth = await accept_auth(peer, auth_token)
        # The first request after auth within the read deadline (a client may
        # take that long), then whatever follows within silence windows.
        first = await peer.next_packet(
            "the client's first request after auth (launched with a message to send)"
        )
        if is_request(first):
            await peer.send(Response(first.request_id), "answering the client's request")
        requests = [auth] + ([first] if is_request(first) else [])
        for _ in range(10):
            batch = await requests_within(peer, SILENCE_WINDOW)
            if not batch:
                break
            for packet in batch:
                await peer.send(Response(packet.request_id), "answering the client's request")
            requests += batch
        ids = [r.request_id for r in requests]
        assert len(requests) >= 2, (
            f"the client sent only its auth Message; launched with a message to send: {ids}"
        )
        assert len(set(ids)) == len(ids), (
            f"the client reused a request id: {[summary(r) for r in requests]}"
        )


@requirement(
    "btp.auth.client.accepts-auth-response-with-protocol-data",
    "SHOULD",
    f'{AUTH} ("Again, the protocolData field there MAY be used to send additional information to the client")',
    role="client",
    depends=[CLIENT_AUTH],
    basis="inference: the MAY lets a server put protocol data in its auth Response, so a client that "
    "does not take such a Response as the acceptance of its auth cannot work with a server that uses it; "
    "RFC 23 does not adopt RFC 2119, whose MAY would oblige the client to interoperate",
)
async def test_client_accepts_auth_response_with_entries(launched_client, auth_token):
    async with launched_client(send_message="conformance:hello") as peer:
        first = await peer.next_packet("the client's auth Message")
        assert isinstance(first, Message), (
            f"the client's first packet must be the auth Message; got {summary(first)}"
        )
        info = ProtocolDataEntry(
            "conformance_info", ContentType.TEXT_PLAIN_UTF8, b"additional information"
        )
        await peer.send(
            Response(first.request_id, (info,)), "accepting the auth, with one protocol data entry"
        )
        request = await peer.next_packet(
            "the client's Message after an auth Response with protocol data"
        )
        assert is_request(request), (
            f"after an auth Response carrying protocol data the client must go on as authenticated; got {summary(request)}"
        )


@requirement(
    "btp.error.client.no-retry-after-final-error",
    "MUST",
    'BTP 2.0, Error, Error Codes ("Errors marked with F are final, and the same request MUST NOT be retried")',
    role="client",
    depends=[CLIENT_AUTH],
)
async def test_client_does_not_retry_after_final_error(launched_client, auth_token):
    async with launched_client(send_message="conformance:refuse-me") as peer:
        await accept_auth(peer, auth_token)
        request = await peer.next_packet("the client's Message (launched with a message to send)")
        assert isinstance(request, Message), (
            f"expected the client's Message, got {summary(request)}"
        )
        # Every request of the client is refused, not only the first: the
        # first after auth need not be the one it was launched to send (a
        # client may send requests of its own at any moment after auth).
        refused = [request]
        await peer.send(
            Error(request.request_id, "F00", "NotAcceptedError", generalized_time(), b""),
            "refusing it with a final Error (F00)",
        )
        again = []
        window = Deadline(RETRY_WINDOW)
        while not window.expired:
            try:
                packet = await peer.next_packet("any request of the client", window)
            except (DeadlineExceeded, PeerClosed):
                break
            except ProtocolViolation:
                continue  # not a readable request (not this rule's business, as in requests_within)
            if not is_request(packet):
                continue
            same = [
                r
                for r in refused
                if type(r) is type(packet) and r.protocol_data == packet.protocol_data
            ]
            if same:
                again.append(f"{summary(same[0])}, then {summary(packet)}")
                continue
            refused.append(packet)
            await peer.send(
                Error(packet.request_id, "F00", "NotAcceptedError", generalized_time(), b""),
                "refusing this request too with a final Error (F00)",
            )
        assert not again, (
            f"after a final Error (F00) the client sent the same request again: {again}"
        )


async def assert_goes_on_after_extended_auth_response(peer, extend, where: str) -> None:
    """The client's auth Message is accepted with a Response whose bytes
    ``extend`` gives ``EXTRA_BYTES`` more ``where``: a client that ignores
    them goes on as authenticated and sends the Message it was launched
    with; one that takes the Response for unreadable waits for an answer
    to its auth that never comes."""
    first = await peer.next_packet("the client's auth Message")
    assert isinstance(first, Message), (
        f"the client's first packet must be the auth Message; got {summary(first)}"
    )
    await peer.send_raw(
        extend(Response(first.request_id)),
        f"accepting the auth with a Response with {len(EXTRA_BYTES)} extra bytes {where}",
    )
    try:
        request = await peer.next_packet(
            f"the client's Message after an auth Response with extra bytes {where}"
        )
    except DeadlineExceeded:
        raise AssertionError(
            f"the client sent nothing within {peer.conn.deadline} s after its auth Response with "
            f"{EXTRA_BYTES.hex()} appended {where} (launched with a message to send): it did not take "
            "the Response, whose extra bytes at the end must be ignored"
        ) from None
    assert is_request(request), (
        f"after an auth Response with extra bytes {where} the client must go on as authenticated "
        f"(send the Message it was launched with); got {summary(request)}"
    )


@requirement(
    "btp.packet.client.ignores-extra-bytes-in-envelope",
    "MUST",
    'RFC 0030, Extensibility ("implementations MUST ignore extra bytes at the end of the message")',
    role="client",
    depends=[CLIENT_AUTH],
)
async def test_client_ignores_extra_bytes_at_end_of_envelope(launched_client):
    async with launched_client(send_message="conformance:hello") as peer:
        await assert_goes_on_after_extended_auth_response(
            peer,
            lambda response: envelope_with_extra_bytes(response, EXTRA_BYTES),
            "inside its envelope, after protocolData",
        )


@requirement(
    "btp.packet.client.ignores-bytes-after-envelope",
    "MUST",
    'RFC 0030, Extensibility ("implementations MUST ignore extra bytes at the end of the message")',
    role="client",
    depends=[CLIENT_AUTH],
    errata=["BTP-E3"],
    basis=f"erratum: {BYTES_AFTER_ENVELOPE}",
)
async def test_client_ignores_bytes_after_envelope(launched_client):
    async with launched_client(send_message="conformance:hello") as peer:
        await assert_goes_on_after_extended_auth_response(
            peer,
            lambda response: encode_packet(response) + EXTRA_BYTES,
            "after its envelope (the length prefix unchanged)",
        )


@requirement(
    CLIENT_GRAMMAR,
    "MUST",
    PACKET_GRAMMAR,
    role="client",
    basis=GRAMMAR_BASIS,
    grammar=True,
)
async def test_client_sends_well_formed_packets(launched_client, auth_token, node_grammar):
    """Every message the client sent in this run, in every case's traffic,
    is one readable BTP packet (as the server's grammar case judges the
    server's; canonical lengths included): the violations the other cases
    met (each of them blocked by this case) and those of its own exchange,
    which shows each kind of packet a client sends: its auth Message, the
    Message it was launched with, its Response to a probe."""
    with node_grammar.judging():
        read = 0
        async with launched_client(send_message="conformance:hello") as peer:
            with exchange_cut_short(peer.conn.trace):
                await accept_auth(peer, auth_token)
                read += 1
                probe = probe_message(new_request_id())
                await peer.send(probe, "a probe Message")
                # Its own Message, answered, and the probe's answer, in either order.
                await peer.response_to(probe.request_id, "the client's answer to a probe Message")
                read += 1
        if not read:
            node_grammar.nothing_to_judge(
                (CLIENT_AUTH,),
                "the client sent no packet at all (not even its auth Message), so there was nothing "
                "to judge",
            )

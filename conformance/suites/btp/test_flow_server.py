"""Request/response flow after authentication, target as server
(BTP 2.0, "Flow", "Sub-protocols", "Error")."""

from __future__ import annotations

import asyncio
import re

from conformance.core.requirements import blocked, not_applicable, requirement
from conformance.core.transport import Deadline, DeadlineExceeded, short_hex
from reference_impl.btp.packet import (
    ERROR_CODES,
    ContentType,
    Error,
    Message,
    ProtocolDataEntry,
    Response,
    Transfer,
    encode_packet,
    generalized_time,
    is_response,
)

from .peer import (
    auth_message,
    error_code_problem,
    new_request_id,
    probe_message,
    summary,
    wrong_token_for,
)
from .prerequisites import AUTH, AUTHENTICATED, BALANCE_STATE, DUPLICATE_NAMES, REQUEST_ID

FLOW = "BTP 2.0, Flow"
UNEXPECTED = f'{FLOW} ("If an unexpected BTP packet is received, no response should be sent")'
UNREADABLE = f'{FLOW} ("Unreadable packets must be ignored too")'
ANSWER_BY_ID = (
    "BTP-E2 RFC 23 says the responder 'should' answer every request with its requestId; the "
    "implementations the network runs on find the answer to a call by its requestId alone and time the "
    "call out without it, so the harness holds it as a must"
)
"""The basis of the rules that every request gets one answer carrying its id."""
SILENCE_WINDOW = 1.0
"""Seconds of silence that count as "no reply": loopback answers take
milliseconds, and every silence check is followed by a probe that must be
answered, so a slow reply would still show up there."""
GENERALIZED_TIME_UTC = re.compile(r"^\d{14}(\.\d{1,3})?Z$")


async def assert_silent_then_alive(peer, what: str) -> None:
    replies = await peer.unanswered(SILENCE_WINDOW)
    assert not replies, f"target answered {what}; the spec wants silence. It sent: {replies}"
    await peer.assert_still_answers(what)


@requirement(
    "btp.flow.server.response-carries-request-id",
    "MUST",
    f'{FLOW} ("The responder should always send back a response to a request with the same requestId")',
    depends=[AUTH],
    errata=["BTP-E2"],
    basis=f"erratum: {ANSWER_BY_ID}",
)
async def test_response_carries_request_id(open_peer, auth_token):
    """The answer to a probe carries the probe's id. A further answer to the
    auth Message (answered already) is not an answer to the probe: how often
    a request is answered is btp.flow.server.answers-concurrent-requests-once-each's
    rule, so such a packet is noted and the next one judged."""
    peer = await open_peer()
    auth_id = (await peer.authenticate(auth_token)).request_id
    probe = probe_message(0xDEADBEEF)
    await peer.send(probe)
    # The next Response or Error, whatever its id (requests of the target's own are not answers),
    # within one deadline however many further answers to the auth Message come first.
    window = Deadline(peer.conn.deadline)
    reply = await peer.next_response("the answer to a Message with request id 0xdeadbeef", window)
    while reply.request_id == auth_id != probe.request_id:
        peer.conn.trace.event(
            f"a further answer to the auth Message (request id {auth_id}), answered already: "
            "not judged here"
        )
        reply = await peer.next_response(
            "the answer to a Message with request id 0xdeadbeef", window
        )
    assert is_response(reply) and reply.request_id == probe.request_id, (
        f"the answer must be a Response or Error with request id {probe.request_id}; got {summary(reply)}"
    )


@requirement(
    "btp.flow.server.answers-concurrent-requests-once-each",
    "MUST",
    f'{FLOW} (request IDs correlate requests and responses; "should always send back a response")',
    depends=[AUTH, REQUEST_ID],
    errata=["BTP-E2"],
    basis=f"erratum: {ANSWER_BY_ID}",
)
async def test_answers_each_of_many_in_flight_requests_once(open_peer, auth_token):
    """Every request of the connection, the auth Message too, is answered
    once: the answers that come until each of 25 in-flight probes has one,
    then within a silence window, are counted by request id."""
    peer = await open_peer()
    auth_id = (await peer.authenticate(auth_token)).request_id
    ids = [new_request_id() for _ in range(25)]
    await asyncio.gather(
        *(
            peer.send(probe_message(i), f"in-flight request {n + 1} of 25")
            for n, i in enumerate(ids)
        )
    )
    answers: dict[int, int] = {auth_id: 1}
    missing = set(ids)
    window = Deadline(peer.conn.deadline)  # one deadline for all 25 answers
    for _ in range(4 * len(ids)):
        if not missing:
            break
        try:
            packet = await peer.next_response("answers to 25 in-flight requests", window)
        except DeadlineExceeded:
            break
        assert is_response(packet), f"expected responses only, got {summary(packet)}"
        answers[packet.request_id] = answers.get(packet.request_id, 0) + 1
        missing.discard(packet.request_id)
    extra = await peer.unanswered(SILENCE_WINDOW / 2)
    named = {auth_id: "the auth Message", **{i: f"probe {n + 1} of 25" for n, i in enumerate(ids)}}
    twice = [
        f"request {i} ({named[i]}) {n} times" for i, n in answers.items() if n > 1 and i in named
    ]
    strays = {i: n for i, n in answers.items() if i not in named}
    assert not twice and not strays and not missing and not extra, (
        "each request must be answered exactly once with its own id; answered more than once: "
        f"{twice or 'none'}; not answered within {window.seconds} s: {sorted(missing) or 'none'}; answers to ids "
        f"never sent: {strays or 'none'}; further packets: {extra or 'none'}"
    )


@requirement(
    "btp.flow.server.silent-on-response-for-unknown-request",
    "SHOULD",
    UNEXPECTED,
    depends=AUTHENTICATED,
    basis="plain-words",
)
async def test_silent_on_response_to_no_request(authenticated_peer):
    peer = await authenticated_peer()
    await peer.send(
        Response(new_request_id(), (ProtocolDataEntry("x", ContentType.TEXT_PLAIN_UTF8, b"?"),)),
        "a Response to a request never sent",
    )
    await assert_silent_then_alive(peer, "a Response to no request")


@requirement(
    "btp.flow.server.silent-on-error-for-unknown-request",
    "SHOULD",
    UNEXPECTED,
    depends=AUTHENTICATED,
    basis="plain-words",
)
async def test_silent_on_error_to_no_request(authenticated_peer):
    peer = await authenticated_peer()
    await peer.send(
        Error(new_request_id(), "F00", "NotAcceptedError", generalized_time(), b""),
        "an Error for a request never sent",
    )
    await assert_silent_then_alive(peer, "an Error for no request")


@requirement(
    "btp.flow.server.silent-on-truncated-packet",
    "MUST",
    UNREADABLE,
    depends=AUTHENTICATED,
    basis="plain-words",
)
async def test_silent_on_truncated_packet(authenticated_peer):
    peer = await authenticated_peer()
    whole = encode_packet(probe_message(new_request_id()))
    await peer.send_raw(whole[: len(whole) - 5], "a Message cut 5 bytes short")
    await assert_silent_then_alive(peer, "a truncated packet")


@requirement(
    "btp.flow.server.silent-on-length-beyond-end",
    "MUST",
    UNREADABLE + ' ("terminates before length prefixes dictate")',
    depends=AUTHENTICATED,
    basis="plain-words",
)
async def test_silent_on_length_prefix_beyond_end(authenticated_peer):
    peer = await authenticated_peer()
    whole = bytearray(encode_packet(probe_message(new_request_id())))
    whole[5] = min(
        whole[5] + 40, 0x7F
    )  # the envelope's short-form length now claims more than follows
    await peer.send_raw(
        bytes(whole), "a Message whose length prefix claims 40 bytes more than are sent"
    )
    await assert_silent_then_alive(peer, "a packet whose length prefix runs past its end")


@requirement(
    "btp.flow.server.silent-on-garbage",
    "MUST",
    UNREADABLE,
    depends=AUTHENTICATED,
    basis="plain-words",
)
async def test_silent_on_garbage(authenticated_peer):
    peer = await authenticated_peer()
    await peer.send_raw(bytes.fromhex("ff00112233445566778899aabbccddeeff"), "17 bytes of garbage")
    await assert_silent_then_alive(peer, "garbage")


@requirement(
    "btp.flow.server.silent-on-illegal-characters",
    "MUST",
    UNREADABLE + ' ("contains illegal characters")',
    depends=AUTHENTICATED,
    basis="plain-words",
)
async def test_silent_on_non_ia5_name(authenticated_peer):
    peer = await authenticated_peer()
    good = encode_packet(
        Message(new_request_id(), (ProtocolDataEntry("probe", ContentType.TEXT_PLAIN_UTF8, b"x"),))
    )
    bad = good.replace(
        b"probe", "pr\u00f6b".encode("latin-1") + b"e"
    )  # one byte >= 0x80 in an IA5String
    await peer.send_raw(bad, "a Message whose sub-protocol name has the byte 0xf6 (not IA5)")
    await assert_silent_then_alive(peer, "a packet with a non-IA5 protocol name")


@requirement(
    "btp.flow.server.silent-on-text-message",
    "MUST",
    'BTP 2.0, Terminology ("BTP Packets" in WebSocket messages); Flow ("Unreadable packets must be ignored")',
    depends=AUTHENTICATED,
    basis="plain-words",
)
async def test_silent_on_text_websocket_message(authenticated_peer):
    peer = await authenticated_peer()
    await peer.send_raw('{"type": "message", "hello": "BTP is binary"}', "a text WebSocket message")
    await assert_silent_then_alive(peer, "a text message")


@requirement(
    "btp.subprotocol.server.rejects-duplicate-names",
    "SHOULD",
    'BTP 2.0, Authentication ("having two subprotos with the same name" violates the protocol rules); '
    'BTP ASN.1 (protocolData entries "each with a unique" protocolName)',
    depends=AUTHENTICATED,
    basis="inference: the ASN.1 module gives each protocolData entry 'a unique protocolName' and RFC "
    "23 lists two of one name among the rule violations 'the server responds with an Error' to while "
    "authenticating, in the indicative with no key word or must; the harness applies it after auth too",
)
async def test_rejects_duplicate_protocol_names_after_auth(authenticated_peer, target):
    """A negative case: the same Message without the duplicate must first be
    acknowledged with a Response (on an authenticated connection of its own,
    so that the case sends one request per connection), or an Error to the
    duplicate shows nothing. A peer may answer a sub-protocol it does not
    process with an Error (Message: "Error is returned if the peer is not
    able to process the Message"), so the harness's probe is tried first,
    then, for a target with the ``balance`` capability, the adapter's
    balance Message (docs/btp-adapter.md), which it processes; the first
    one acknowledged is sent again with its entry twice."""
    candidates = [ProtocolDataEntry("conformance_probe", ContentType.TEXT_PLAIN_UTF8, b"x")]
    if "balance" in target.target.capabilities:
        candidates.append(ProtocolDataEntry("balance", ContentType.APPLICATION_JSON, b"{}"))
    refused = []
    for entry in candidates:
        counterpart = await authenticated_peer(
            f"valid counterpart: the same Message with one {entry.name} entry"
        )
        valid = await counterpart.request(
            Message(new_request_id(), (entry,)),
            f"the answer to the same Message with one {entry.name} entry",
        )
        await counterpart.conn.close()
        if isinstance(valid, Response):
            break
        refused.append(f"{entry.name}: {summary(valid)}")
    else:
        not_applicable(
            f"the target answers even the Messages without a duplicate name with an Error ({refused}), so "
            "an Error to the duplicate cannot be told apart"
        )
    peer = await authenticated_peer("the Message with a duplicate name")
    request = Message(new_request_id(), (entry, entry))
    reply = await peer.request(
        request, "the answer to a Message with two sub-protocols of one name"
    )
    assert isinstance(reply, Error), (
        f"two sub-protocols with the same name must get an Error; got {summary(reply)}"
    )


def _duplicate_names_message() -> Message:
    entry = ProtocolDataEntry("conformance_probe", ContentType.TEXT_PLAIN_UTF8, b"x")
    return Message(new_request_id(), (entry, entry))


def _auth_with_token_twice(auth_token: bytes) -> Message:
    base = auth_message(new_request_id(), auth_token)
    return Message(base.request_id, base.protocol_data + (base.protocol_data[1],))


async def provoke_error(
    open_peer, auth_token: bytes, *, as_sent: bool = False
) -> tuple[Error, str]:
    """An Error from the target, to check its form, and the input that
    provoked it. Every input for which the text makes an Error mandatory is
    tried in turn, each on a fresh connection, until one gets an Error: a
    rule violation after auth (two sub-protocols of one name), then before
    auth a Transfer, a non-auth Message, a wrong token, an auth Message
    without auth_token and one with auth_token twice. A target that answers
    none of them with an Error broke those rules (their own cases say so);
    the form of its Errors cannot be judged, and the case is blocked.
    With ``as_sent`` the Error is returned as the bytes the target sent,
    undecoded (for btp.error.server.code-has-three-characters, which judges
    what the decoder needs to read it at all)."""
    wrong_token = wrong_token_for(auth_token)
    attempts = [
        ("two sub-protocols of one name after auth", True, _duplicate_names_message),
        ("a Transfer before auth", False, lambda: Transfer(new_request_id(), 1)),
        ("a non-auth Message first", False, lambda: probe_message(new_request_id())),
        ("auth with a wrong token", False, lambda: auth_message(new_request_id(), wrong_token)),
        (
            "auth without an auth_token entry",
            False,
            lambda: Message(
                new_request_id(),
                (ProtocolDataEntry("auth", ContentType.APPLICATION_OCTET_STREAM, b""),),
            ),
        ),
        ("auth with auth_token twice", False, lambda: _auth_with_token_twice(auth_token)),
    ]
    got = []
    for what, after_auth, make in attempts:
        try:
            peer = await open_peer(f"provoking an Error: {what}")
            if after_auth:
                await peer.authenticate(auth_token)
            request = make()
            if as_sent:
                await peer.send(request)
                raw = await peer.next_response_bytes(f"an Error ({what})")
            else:
                reply = await peer.request(request, f"an Error ({what})")
        except (AssertionError, OSError) as exc:
            got.append(f"{what}: {exc}")
            continue
        await peer.conn.close()
        if as_sent:
            if (
                isinstance(raw, bytes)
                and raw[:1] == b"\x02"
                and raw[1:5] == request.request_id.to_bytes(4, "big")
            ):
                return raw, what  # type: ignore[return-value]
            got.append(f"{what}: {short_hex(raw) if isinstance(raw, bytes) else repr(raw[:100])}")
            continue
        if isinstance(reply, Error):
            return reply, what
        got.append(f"{what}: {summary(reply)}")
    blocked(
        DUPLICATE_NAMES,
        "failed within this case",
        "no input the text answers with an Error got one, so the form of an Error cannot be judged: "
        + "; ".join(got),
    )
    raise AssertionError("unreachable: blocked() ends the case")


@requirement(
    "btp.error.server.code-has-three-characters",
    "MUST",
    'BTP ASN.1, Error (code IA5String (SIZE (3))); RFC 0030, Fixed-length octet string ("A fixed length '
    'octet string is encoded as itself with no added prefix or suffix")',
    depends=[AUTH],
    basis="wire-format: the code field of the Error, IA5String (SIZE (3)) in the BTP ASN.1 module, "
    "encoded as three bytes with no length prefix (RFC 0030, Fixed-length octet string)",
    shares=[BALANCE_STATE],
)
async def test_error_code_has_three_characters(open_peer, auth_token):
    """The code field of an Error as the target sent it: three IA5
    characters, no length prefix. The other cases that read an Error are
    blocked by this one when its code makes it unreadable (BtpPeer.next_packet)."""
    raw, what = await provoke_error(open_peer, auth_token, as_sent=True)
    problem = error_code_problem(raw)
    assert problem is None, (
        f"the Error to {what} is unreadable: {problem}; bytes: {short_hex(raw, 96)}"
    )


@requirement(
    "btp.error.server.code-from-table",
    "SHOULD",
    'BTP 2.0, Error, Error Codes ("Standardized error code")',
    depends=[AUTH],
    basis="inference: the code field is the 'Standardized error code' and RFC 23's Error Codes table "
    "lists the codes it defines, but no sentence forbids another code (the bytes of one stay readable)",
    shares=[BALANCE_STATE],
)
async def test_error_code_is_standard(open_peer, auth_token):
    error, what = await provoke_error(open_peer, auth_token)
    assert error.code in ERROR_CODES, (
        f"error code {error.code!r} (the Error to {what}) is not in the spec's table {sorted(ERROR_CODES)}"
    )


@requirement(
    "btp.error.server.name-matches-code",
    "SHOULD",
    'BTP 2.0, Error, Error Codes (name: "Corresponding error code")',
    depends=[AUTH],
    basis="inference: the name field is the 'Corresponding error code' and RFC 23's Error Codes table "
    "pairs each code with one name, with no key word or must on the pairing",
    shares=[BALANCE_STATE],
)
async def test_error_name_matches_code(open_peer, auth_token):
    error, what = await provoke_error(open_peer, auth_token)
    assert ERROR_CODES.get(error.code) == error.name, (
        f"error {error.code} (the Error to {what}) should be named {ERROR_CODES.get(error.code)!r}, got {error.name!r}"
    )


@requirement(
    "btp.error.server.triggered-at-is-utc",
    "MUST",
    'BTP 2.0, Error (triggeredAt GeneralizedTime); RFC 0030, Variable-length Timestamps, Encoding ("The date MUST end in Z, denoting UTC time")',
    depends=[AUTH],
    shares=[BALANCE_STATE],
)
async def test_error_triggered_at_is_utc_generalized_time(open_peer, auth_token):
    error, what = await provoke_error(open_peer, auth_token)
    assert GENERALIZED_TIME_UTC.match(error.triggered_at), (
        f"triggeredAt {error.triggered_at!r} (the Error to {what}) is not a UTC GeneralizedTime like "
        "20171115140000.000Z"
    )


@requirement(
    "btp.error.server.data-at-most-8192-bytes",
    "MUST",
    "BTP ASN.1, Error (data OCTET STRING (SIZE (0..8192)))",
    depends=[AUTH],
    basis="wire-format: the data field of the Error, OCTET STRING (SIZE (0..8192)) in the BTP ASN.1 "
    "module",
    shares=[BALANCE_STATE],
)
async def test_error_data_is_bounded(open_peer, auth_token):
    error, what = await provoke_error(open_peer, auth_token)
    assert len(error.data) <= 8192, (
        f"Error data is {len(error.data)} bytes (the Error to {what}); the spec allows at most 8192"
    )

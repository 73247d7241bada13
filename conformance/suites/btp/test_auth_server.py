"""Authentication, target as server (BTP 2.0, "Authentication")."""

from __future__ import annotations

from conformance.core.requirements import blocked, not_applicable, requirement
from reference_impl.btp.packet import (
    ContentType,
    Error,
    Message,
    ProtocolDataEntry,
    Response,
    Transfer,
)

from .peer import auth_message, new_request_id, probe_message, summary
from .prerequisites import AUTH, BALANCE_STATE, ERROR_BEFORE_AUTH, NON_AUTH_FIRST

CITE = "BTP 2.0, Authentication"


async def show_valid_auth(open_peer, auth_token: bytes, before: str) -> None:
    """The valid counterpart of a negative auth case, on a connection of its
    own and before the invalid step: a valid auth Message gets a Response. A
    target that refuses or drops everything would otherwise pass every case
    that wants an Error or a closed connection; here it is blocked by the
    auth rule instead."""
    try:
        peer = await open_peer(f"valid counterpart: a valid auth first, before {before}")
        await peer.authenticate(auth_token)
    except (AssertionError, OSError) as exc:
        blocked(
            AUTH,
            "failed within this case",
            f"a valid auth Message on a fresh connection did not get a Response ({exc}), so an Error or "
            f"a hang-up after {before} shows nothing",
        )
    await peer.conn.close()


async def expect_error_then_close(peer, request_id: int, what: str) -> None:
    reply = await peer.response_to(request_id, f"the Error for {what}")
    assert isinstance(reply, Error), f"{what} must get an Error, got {summary(reply)}"


@requirement(
    "btp.auth.server.accepts-valid-auth", "MUST", f'{CITE} ("The server responds with a Response")'
)
async def test_accepts_valid_auth(open_peer, auth_token):
    peer = await open_peer()
    request = auth_message(new_request_id(), auth_token)
    reply = await peer.request(request, "the answer to a valid auth Message")
    assert isinstance(reply, Response), f"valid auth must get a Response, got {summary(reply)}"


@requirement(
    "btp.auth.server.error-on-transfer-before-auth",
    "SHOULD",
    f'{CITE} ("If the client sends any BTP call that is not a Message, ... the server should respond '
    'with an Error"; "any other packet is sent before the auth data")',
    depends=[AUTH],
    basis="plain-words",
    shares=[BALANCE_STATE],
)
async def test_error_on_transfer_before_auth(open_peer, auth_token):
    await show_valid_auth(open_peer, auth_token, "a Transfer before auth")
    peer = await open_peer()
    transfer = Transfer(new_request_id(), 10)
    await peer.send(transfer, "a Transfer before any auth")
    await expect_error_then_close(peer, transfer.request_id, "a Transfer sent before auth")


@requirement(
    "btp.auth.server.error-on-non-auth-message-first",
    "SHOULD",
    f'{CITE} ("sends a Message call whose primary sub-protocol is not auth, the server should respond with an Error")',
    depends=[AUTH],
    basis="plain-words",
)
async def test_error_on_message_with_other_primary_first(open_peer, auth_token):
    await show_valid_auth(open_peer, auth_token, "a non-auth Message first")
    peer = await open_peer()
    message = probe_message(new_request_id())
    await peer.send(message, "a non-auth Message first")
    await expect_error_then_close(
        peer, message.request_id, "a Message whose primary sub-protocol is not auth"
    )


@requirement(
    "btp.auth.server.closes-after-auth-error",
    "SHOULD",
    f'{CITE} ("the server should respond with an Error and close the connection"; "If the server sent '
    'an Error, it subsequently closes the connection")',
    depends=[AUTH, ERROR_BEFORE_AUTH],
    basis="plain-words",
    shares=[BALANCE_STATE],
)
async def test_closes_connection_after_auth_error(open_peer, auth_token, deadline):
    await show_valid_auth(open_peer, auth_token, "a Transfer before auth")
    peer = await open_peer()
    transfer = Transfer(new_request_id(), 10)
    await peer.send(transfer, "a Transfer before any auth")
    await expect_error_then_close(peer, transfer.request_id, "a Transfer sent before auth")
    closed, more = await peer.conn.await_close(deadline)
    assert closed, (
        f"target kept the connection open {deadline} s after its auth Error; sent meanwhile: {len(more)} message(s)"
    )


@requirement(
    "btp.auth.server.rejects-wrong-token",
    "MUST",
    f'{CITE} ("the server responds with an Error if: ... the provided authentication data is invalid or '
    'incorrect"; "If the server sent an Error, it subsequently closes the connection")',
    depends=[AUTH],
    basis="profile: B1 a wrong auth_token gets an Error, then the connection closes, docs/btp-profile.md",
)
async def test_rejects_wrong_token(open_peer, auth_token, wrong_token, deadline, target):
    """A target whose every auth_token is valid has no wrong token: one that
    needs no authentication (the text: the token "can be set to the empty
    string"), or one that makes an account of each token, as
    ilp-plugin-mini-accounts does (account = sha256(token)). It says so with
    ``params.accepts_any_token = true``, and the case does not apply."""
    if target.params.get("accepts_any_token") is True:
        not_applicable(
            f"target {target.target.name} declares every auth_token valid (params.accepts_any_token), "
            'so no token is "invalid or incorrect"'
        )
    await show_valid_auth(open_peer, auth_token, "auth with a wrong token")
    peer = await open_peer()
    request = auth_message(new_request_id(), wrong_token)
    reply = await peer.request(request, "the answer to auth with a wrong token")
    assert isinstance(reply, Error), f"a wrong token must get an Error, got {summary(reply)}"
    closed, _ = await peer.conn.await_close(deadline)
    assert closed, f"target kept the connection open {deadline} s after rejecting the token"


@requirement(
    "btp.auth.server.rejects-missing-auth-token",
    "MUST",
    f"{CITE} (\"there MUST be a UTF-8 'auth_token' entry ... it cannot be omitted\")",
    depends=[AUTH],
)
async def test_rejects_auth_without_token_entry(open_peer, auth_token):
    await show_valid_auth(open_peer, auth_token, "auth without auth_token")
    peer = await open_peer()
    request = Message(
        new_request_id(), (ProtocolDataEntry("auth", ContentType.APPLICATION_OCTET_STREAM, b""),)
    )
    reply = await peer.request(request, "the answer to auth without auth_token")
    assert isinstance(reply, Error), (
        f"auth without an auth_token entry must get an Error, got {summary(reply)}"
    )


MALFORMED_AUTH_ENTRIES = (
    (
        "an auth entry of content type 1 (text/plain UTF-8) with empty data",
        ProtocolDataEntry("auth", ContentType.TEXT_PLAIN_UTF8, b""),
    ),
    (
        "an auth entry of content type 0 with 4 bytes of data",
        ProtocolDataEntry("auth", ContentType.APPLICATION_OCTET_STREAM, b"auth"),
    ),
)
"""The two ways an ``auth`` entry breaks "content type
MIME_APPLICATION_OCTET_STREAM, and empty data", each with the right name
and a valid token: only the entry's own fields are wrong."""


@requirement(
    "btp.auth.server.rejects-malformed-auth-entry",
    "SHOULD",
    f"{CITE} (\"Its primary protocolData entry MUST have name 'auth', content type "
    'MIME_APPLICATION_OCTET_STREAM, and empty data"; "the server responds with an Error if: ... the '
    'provided authentication data is invalid or incorrect"; "any of the other protocol rules are violated")',
    depends=[AUTH],
    basis="inference: RFC 23's MUST on the auth entry's content type and empty data binds the "
    "client's auth Message; that the server answers one that breaks it with an Error rests on its "
    "list of refusals ('the provided authentication data is invalid or incorrect', 'any of the other "
    "protocol rules are violated'), in the indicative with no key word and no must, and neither "
    "deployed server (ilp-plugin-btp 1.5.0, ilp-plugin-mini-accounts 4.2.0) checks more of the "
    "entry than its name, so no profile rule binds it",
)
async def test_rejects_auth_with_malformed_auth_entry(open_peer, auth_token):
    """Each malformed entry on a connection of its own (an Error closes the
    connection): the entry's content type and its data are one rule, one
    clause on one entry, and a server that checks the entry checks both.
    Both are sent whatever the first one got, so the failure names each."""
    await show_valid_auth(open_peer, auth_token, "auth with a malformed auth entry")
    accepted = []
    for what, entry in MALFORMED_AUTH_ENTRIES:
        peer = await open_peer(f"auth with {what}")
        base = auth_message(new_request_id(), auth_token)
        request = Message(base.request_id, (entry, *base.protocol_data[1:]))
        reply = await peer.request(request, f"the answer to auth with {what}")
        if not isinstance(reply, Error):
            accepted.append(f"{what} got {summary(reply)}")
        await peer.conn.close()
    assert not accepted, (
        "an auth Message whose auth entry is not content type 0 with empty data (the token valid) "
        "must get an Error; " + "; ".join(accepted)
    )


@requirement(
    "btp.auth.server.rejects-duplicate-subprotocol-names",
    "SHOULD",
    f'{CITE} (Error if "any of the other protocol rules are violated (e.g. having two subprotos with the same name)")',
    depends=[AUTH],
    basis="inference: RFC 23 lists two sub-protocols of one name among the cases where 'the server "
    "responds with an Error', in the indicative with no key word and no must, and the ASN.1 module "
    "gives each entry 'a unique protocolName'",
)
async def test_rejects_auth_with_duplicate_names(open_peer, auth_token):
    await show_valid_auth(open_peer, auth_token, "auth with auth_token twice")
    peer = await open_peer()
    base = auth_message(new_request_id(), auth_token)
    request = Message(base.request_id, base.protocol_data + (base.protocol_data[1],))
    reply = await peer.request(request, "the answer to auth with auth_token twice")
    assert isinstance(reply, Error), (
        f"two sub-protocols named auth_token must get an Error, got {summary(reply)}"
    )


@requirement(
    "btp.auth.server.disconnects-client-that-never-authenticates",
    "SHOULD",
    f'{CITE} ("If the client does not send an Auth packet within a reasonable time, the server optionally '
    'sends a Message ... and then closes the connection"; Error if "it takes too long before the '
    'authentication data is sent")',
    depends=[AUTH],
    basis="inference: RFC 23 describes the close of a connection that does not authenticate within "
    "'a reasonable time' in the indicative ('and then closes the connection'), with no key word and "
    "no must, and leaves the time to the server (params.auth_timeout)",
)
async def test_disconnects_silent_client(open_peer, auth_token, auth_timeout, deadline):
    """The target declares its auth timeout (params.auth_timeout, default 30 s);
    it must have closed the connection by then (plus the read deadline)."""
    await show_valid_auth(open_peer, auth_token, "a silent connection")
    peer = await open_peer()
    closed, messages = await peer.conn.await_close(auth_timeout + deadline)
    assert closed, (
        f"target kept an unauthenticated connection open for {auth_timeout + deadline:.0f} s"
    )


@requirement(
    "btp.auth.server.requires-reauth-after-reconnect",
    "SHOULD",
    f'{CITE} ("If the connection is ever dropped and reconnected then it must be re-authenticated"; the '
    'Error: "sends a Message call whose primary sub-protocol is not auth, the server should respond with '
    'an Error")',
    depends=[AUTH, NON_AUTH_FIRST],
    basis="plain-words",
)
async def test_requires_auth_again_after_reconnect(open_peer, authenticated_peer):
    first = await authenticated_peer("first connection")
    await first.conn.close()
    second = await open_peer("reconnected")
    probe = probe_message(new_request_id())
    await second.send(probe, "a Message on a new connection without auth")
    reply = await second.response_to(probe.request_id, "the answer to an unauthenticated Message")
    assert isinstance(reply, Error), (
        f"a new connection must authenticate again; got {summary(reply)}"
    )

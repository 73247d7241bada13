"""The BTP reference node's faults: ``python -m reference_impl.btp serve|client
--fault NAME`` (repeatable). Each breaks one rule of BTP 2.0 (RFC 23) on
purpose; ``cases`` are the conformance cases that must catch it (see
reference_impl/faults.py and docs/mutation.md).

The sans-I/O session takes them as ``BtpSession(faults=...)``, the node
layer as ``BtpNode(faults=...)`` and ``run_client(faults=...)``.

Each fault is declared by what it changes (``changes``): at each named point
of :data:`POINTS` the session (or the node) computes the correct value and
hands it to :meth:`~reference_impl.faults.FaultPoints.apply`; the functions
below are what a faulty node does with it instead. The session and the node
hold no fault branch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..faults import FaultSpec, fault_enum
from .oer import BtpDecodeError
from .packet import (
    ERROR_CODES,
    MAX_AMOUNT,
    MAX_REQUEST_ID,
    ContentType,
    Error,
    Message,
    Packet,
    ProtocolDataEntry,
    Response,
    Transfer,
    decode_packet,
    encode_packet,
    envelope_end,
    primary,
)

POINTS: dict[str, str] = {
    # --- reading the peer's packets (session)
    "reading": (
        "what one binary WebSocket message reads as: the decoded Packet, or the BtpDecodeError that "
        "makes it unreadable; context: payload (its bytes)"
    ),
    "answers-to-unreadable": (
        "the Errors the node answers an unreadable payload with, as (request_id, code, data) "
        "triples (correct: none, the Flow section's silence); context: payload, reason (the "
        "decoder's phrase)"
    ),
    "answers-to-unexpected": (
        "the Errors the node answers a Response or Error to no in-flight request with, as "
        "(request_id, code, data) triples (correct: none); context: packet"
    ),
    # --- authentication (session)
    "serve-before-auth": (
        "whether the server serves a packet that comes before the auth Message as a request "
        "(correct: False, it is checked as the auth Message); context: packet"
    ),
    "auth-problems": (
        "why the server refuses an auth Message: (rule, code, reason) triples in the order the "
        "rules are checked, the first answered with Error code (correct: none for a valid auth "
        "Message); context: packet"
    ),
    "close-after-auth-error": (
        "whether the server closes the connection after its Error to an auth Message (correct: True)"
    ),
    "requests-before-auth": (
        "the requests the client sends before its auth Message (correct: none); context: new_id "
        "(a function giving a request id not in flight)"
    ),
    "auth-entries": (
        "the protocol data entries of the client's auth Message (correct: auth, the auth_token, "
        "then any extra entries)"
    ),
    "auth-refusal": (
        "why the client takes the server's answer to its auth Message for a refusal (correct: "
        "None for a Response, the code and name for an Error); context: answer (the packet)"
    ),
    # --- requests and answers (session)
    "request-id": (
        "the request id of the node's next request when the caller names none (correct: a random "
        "one not in flight); context: auth_request_id, in_flight"
    ),
    "duplicate-names": (
        "the names occurring more than once in a request the node serves (any: Error F01); "
        "context: request"
    ),
    "responses": (
        "the encoded Responses that answer one request (correct: one); context: rule, which of "
        "the session's answers it is: 'auth', 'balance', 'echo', 'acknowledge' (any other "
        "Message), 'transfer' or 'application' (BtpSession.respond)"
    ),
    "answer-id": (
        "the request id an answer (Response or Error) carries (correct: the request's); context: "
        "authenticated (the session is open), auth_request_id"
    ),
    "error": (
        "an Error the node sends, before it is encoded (correct: a code of the table with its "
        "name, triggeredAt now in UTC, at most 8192 bytes of data); an Error a fault changes is "
        "encoded without the codec's checks, which it breaks on purpose"
    ),
    "transfer-credit": (
        "what a Transfer credits to the ledger (correct: its amount when it is answered with a "
        "Response, None when it is refused); context: transfer, balance (the ledger's before), "
        "refused_with (the Error's code, None for a Response)"
    ),
    # --- timings and the client's requests (node)
    "auth-timeout": (
        "seconds a connection may spend authenticating before it closes (correct: the node's "
        "auth timeout; None: no deadline); context: auth_failed (an auth Error was sent or "
        "received)"
    ),
    "send-again": (
        "whether the client sends a request again once it has its answer (correct: False); "
        "context: answer (the Response or Error)"
    ),
}
"""The fault points of the BTP session (reference_impl/btp/session.py) and
node (node.py): name -> what the value is, and the context that comes with it."""

ErrorAnswer = tuple[int, str, str]
"""(request_id, code, data): an Error the session is to answer with."""

AUTH_TOKEN = "auth_token"  # the entry the Authentication section names (session.AUTH_TOKEN)


# --------------------------------------------------------------------------- what the faults do


def read_unknown_type_as_message(reading: Packet | BtpDecodeError, *, payload: bytes, **_: Any):
    """serve-unknown-type-as-message: an undefined type whose envelope reads as
    a Message's is read as a Message."""
    if isinstance(reading, BtpDecodeError) and reading.reason == "unknown packet type":
        try:
            return decode_packet(b"\x06" + bytes(payload[1:]))
        except BtpDecodeError:
            pass
    return reading


def refuse_extra_envelope_bytes(reading: Packet | BtpDecodeError, *, payload: bytes, **_: Any):
    """reject-extra-bytes-in-envelope: what the decoder ignored inside the
    envelope (bytes after protocolData) makes the packet unreadable. Bytes
    after the envelope are left to reject-bytes-after-envelope."""
    if isinstance(reading, BtpDecodeError) or len(
        encode_packet(reading, validate=False)
    ) == envelope_end(payload):
        return reading
    return BtpDecodeError("extra bytes in the envelope", "bytes after protocolData")


def refuse_bytes_after_envelope(reading: Packet | BtpDecodeError, *, payload: bytes, **_: Any):
    """reject-bytes-after-envelope: bytes after the envelope, which the
    decoder ignores (erratum BTP-E3), make the packet unreadable (the
    reference's reading before that erratum)."""
    if isinstance(reading, BtpDecodeError):
        return reading
    end = envelope_end(payload)
    if end == len(payload):
        return reading
    return BtpDecodeError(
        "bytes after the envelope", f"{len(payload) - end} byte(s) after the envelope", end
    )


def _acknowledgements(change: Callable[[bytes], bytes]) -> Callable[..., list[bytes]]:
    """A change of the encoded Responses of rule ``acknowledge`` (the
    answer to an ordinary Message, a probe's) made by ``change``."""

    def apply(responses: list[bytes], *, rule: str, **_: Any) -> list[bytes]:
        return [change(r) for r in responses] if rule == "acknowledge" else responses

    apply.__name__ = change.__name__
    return apply


def length_beyond_end(response: bytes) -> bytes:
    """ack-length-beyond-end, client-ack-length-beyond-end: the envelope's
    length prefix one more than the bytes that follow it (a packet no
    reader can read: "length prefix beyond end")."""
    assert response[5] < 127, "an acknowledgement's envelope is short"
    return response[:5] + bytes((response[5] + 1,)) + response[6:]


def duplicate_entry_names(response: bytes) -> bytes:
    """ack-duplicate-names: two protocol data entries named reference_note
    after the Response's own (the ASN.1 module gives each entry a unique
    protocolName)."""
    packet = decode_packet(response)
    note = ProtocolDataEntry("reference_note", ContentType.TEXT_PLAIN_UTF8, b"one")
    notes = (note, replace(note, data=b"two"))
    return encode_packet(replace(packet, protocol_data=tuple(packet.protocol_data) + notes))


def long_form_length(response: bytes) -> bytes:
    """ack-length-long-form: the envelope's length in long form (81 nn)
    although it is below 128, where RFC 0030 wants the short form."""
    assert response[5] < 128, "an acknowledgement's envelope is short"
    return response[:5] + b"\x81" + response[5:]


def answer_unreadable(
    answers: list[ErrorAnswer], *, payload: bytes, reason: str, **_: Any
) -> list[ErrorAnswer]:
    """reply-to-unreadable, client-reply-to-unreadable: Error F01 to the
    request id the payload's bytes 1..4 would hold."""
    request_id = int.from_bytes(payload[1:5], "big") if len(payload) >= 5 else 0
    return [(request_id, "F01", f"unreadable packet: {reason}")]


def answer_unexpected(answers: list[ErrorAnswer], *, packet: Packet, **_: Any):
    """reply-to-unexpected, client-reply-to-unexpected: Error F00 to it."""
    return [(packet.request_id, "F00", "unexpected response")]


def answer_unexpected_error(answers: list[ErrorAnswer], *, packet: Packet, **_: Any):
    """client-reply-to-unexpected-error: Error F00 to an unexpected Error only."""
    return answer_unexpected(answers, packet=packet) if isinstance(packet, Error) else answers


def _is_auth_message(packet: Packet) -> bool:
    return isinstance(packet, Message) and getattr(primary(packet), "name", None) == "auth"


def serve_all_before_auth(serve: bool, *, packet: Packet, **_: Any) -> bool:
    """no-auth-required: any packet but the auth Message is served as if the
    client had authenticated."""
    return serve or not _is_auth_message(packet)


def serve_transfer_before_auth(serve: bool, *, packet: Packet, **_: Any) -> bool:
    return serve or isinstance(packet, Transfer)


def serve_message_before_auth(serve: bool, *, packet: Packet, **_: Any) -> bool:
    return serve or (isinstance(packet, Message) and not _is_auth_message(packet))


def _without(rule: str) -> Callable[..., list]:
    """A change that drops the auth problem ``rule`` (the other checks still count)."""

    def change(problems: list, **_: Any) -> list:
        return [problem for problem in problems if problem[0] != rule]

    change.__name__ = f"accept_{rule.replace('-', '_')}"
    return change


def refuse_extra_auth_entries(problems: list, *, packet: Packet, **_: Any) -> list:
    """refuse-extra-auth-entries: entries beyond auth and auth_token refused."""
    if len(packet.protocol_data) <= 2:
        return problems
    return [
        *problems,
        (
            "extra-entries",
            "F01",
            "further secondary entries refused (fault refuse-extra-auth-entries)",
        ),
    ]


def refuse_valid_auth(problems: list, **_: Any) -> list:
    return [*problems, ("refused", "F00", "refused although valid (fault refuse-valid-auth)")]


def stay_open(close: bool, **_: Any) -> bool:
    return False


def probe_before_auth(requests: list, *, new_id: Callable[[], int], **_: Any) -> list:
    """client-message-before-auth: a Message before the auth Message."""
    probe = ProtocolDataEntry("fault_probe", ContentType.TEXT_PLAIN_UTF8, b"before auth")
    return [Message(new_id(), (probe,)), *requests]


def omit_auth_token(entries: tuple, **_: Any) -> tuple:
    return tuple(entry for entry in entries if entry.name != AUTH_TOKEN)


def auth_token_as_octet_stream(entries: tuple, **_: Any) -> tuple:
    """client-auth-token-octet-stream: the auth_token entry (its UTF-8 bytes
    unchanged) is labelled MIME_APPLICATION_OCTET_STREAM."""
    return tuple(
        replace(entry, content_type=ContentType.APPLICATION_OCTET_STREAM)
        if entry.name == AUTH_TOKEN
        else entry
        for entry in entries
    )


def refuse_auth_response_with_data(refusal: str | None, *, answer: Packet, **_: Any):
    if isinstance(answer, Response) and answer.protocol_data:
        return (
            "the server's auth Response carries protocol data "
            "(fault client-refuse-auth-response-with-data)"
        )
    return refusal


def reuse_auth_request_id(
    request_id: int, *, auth_request_id: int | None, in_flight: frozenset[int], **_: Any
) -> int:
    """client-reuse-request-id: the auth Message's id again, once it is answered."""
    if auth_request_id is not None and auth_request_id not in in_flight:
        return auth_request_id
    return request_id


def serve_duplicate_names(names: list[str], **_: Any) -> list[str]:
    return []


def _twice_for(wanted: str) -> Callable[..., list]:
    """A change that sends the Responses of rule ``wanted`` twice."""

    def change(responses: list[bytes], *, rule: str, **_: Any) -> list[bytes]:
        return responses * 2 if rule == wanted else responses

    change.__name__ = f"answer_{wanted}_twice"
    return change


def next_request_id(
    request_id: int, *, authenticated: bool, auth_request_id: int | None, **_: Any
) -> int:
    """wrong-request-id, client-wrong-request-id: after auth, the id + 1."""
    if authenticated and request_id != auth_request_id:
        return (request_id + 1) & MAX_REQUEST_ID
    return request_id


def nonstandard_error_code(error: Error, **_: Any) -> Error:
    return replace(error, code="F99", name="NotAcceptedError")


def name_of_next_code(error: Error, **_: Any) -> Error:
    """error-name-mismatch: the name of the table's next code."""
    codes = list(ERROR_CODES)
    if error.code not in codes:
        return error
    return replace(error, name=ERROR_CODES[codes[(codes.index(error.code) + 1) % len(codes)]])


def local_time(error: Error, **_: Any) -> Error:
    return replace(error, triggered_at=error.triggered_at.removesuffix("Z"))


def trailing_zero(error: Error, **_: Any) -> Error:
    """triggered-at-trailing-zero: .mmmZ -> .m0Z."""
    text = error.triggered_at
    return replace(error, triggered_at=text[:15] + text[15] + "0Z")


def oversized_data(error: Error, **_: Any) -> Error:
    return replace(error, data=error.data.ljust(9000, b"."))


def four_character_code(error: Error, **_: Any) -> Error:
    """error-code-four-characters: written as 4 bytes where the fixed-size code has 3."""
    return replace(error, code=error.code + "0")


def credit_refused_transfer(
    credit: int | None, *, transfer: Transfer, balance: int, refused_with: str | None, **_: Any
) -> int | None:
    """balance-on-error: a refused Transfer is credited all the same (refused
    for the balance limit, whatever the sum; refused for another reason, when
    the sum stays a UInt64)."""
    if refused_with is None:
        return credit
    if refused_with == "F08" or balance + transfer.amount <= MAX_AMOUNT:
        return transfer.amount
    return credit


def no_credit_for_response(credit: int | None, *, refused_with: str | None, **_: Any):
    """response-without-balance-update: a Transfer answered with a Response credits nothing."""
    return None if refused_with is None else credit


def no_auth_deadline(seconds: float | None, **_: Any) -> None:
    return None


def no_auth_deadline_after_error(seconds: float | None, *, auth_failed: bool, **_: Any):
    """stay-open-after-auth-error: once an auth Error went out, the connection
    simply stays open (no auth deadline)."""
    return None if auth_failed else seconds


def retry_after_final_error(again: bool, *, answer: Packet | None, **_: Any) -> bool:
    """client-retry-after-final-error: the same request again after an F Error."""
    return again or (isinstance(answer, Error) and answer.code.startswith("F"))


AUTH = "btp.auth.server."
FLOW = "btp.flow.server."
ERROR = "btp.error.server."
TRANSFER = "btp.transfer.server."
PACKET = "btp.packet.server."

SPECS: tuple[FaultSpec, ...] = (
    # --- authentication, server
    FaultSpec(
        "refuse-valid-auth",
        "server",
        "answer a valid auth Message with Error F00 (and close)",
        (AUTH + "accepts-valid-auth",),
        changes={"auth-problems": refuse_valid_auth},
    ),
    FaultSpec(
        "refuse-extra-auth-entries",
        "server",
        "answer a valid auth Message with more than the auth and auth_token entries with Error F01",
        (AUTH + "accepts-extra-auth-entries",),
        changes={"auth-problems": refuse_extra_auth_entries},
    ),
    FaultSpec(
        "no-auth-required",
        "server",
        "serve requests sent before the auth Message (no Error, no close)",
        (AUTH + "error-on-transfer-before-auth", AUTH + "error-on-non-auth-message-first"),
        changes={"serve-before-auth": serve_all_before_auth},
    ),
    FaultSpec(
        "serve-transfer-before-auth",
        "server",
        "settle a Transfer sent before the auth Message (Messages still get the Error)",
        (AUTH + "error-on-transfer-before-auth",),
        changes={"serve-before-auth": serve_transfer_before_auth},
    ),
    FaultSpec(
        "serve-message-before-auth",
        "server",
        "answer a non-auth Message sent before the auth Message with a Response",
        (AUTH + "error-on-non-auth-message-first",),
        changes={"serve-before-auth": serve_message_before_auth},
    ),
    FaultSpec(
        "stay-open-after-auth-error",
        "server",
        "keep the connection open after an auth Error",
        (AUTH + "closes-after-auth-error", AUTH + "rejects-wrong-token"),
        changes={"close-after-auth-error": stay_open, "auth-timeout": no_auth_deadline_after_error},
    ),
    FaultSpec(
        "accept-wrong-token",
        "server",
        "accept any auth_token",
        (AUTH + "rejects-wrong-token",),
        changes={"auth-problems": _without("auth-token-rejected")},
    ),
    FaultSpec(
        "accept-missing-auth-token",
        "server",
        "accept an auth Message without an auth_token entry",
        (AUTH + "rejects-missing-auth-token",),
        changes={"auth-problems": _without("auth-token-missing")},
    ),
    FaultSpec(
        "accept-malformed-auth-entry",
        "server",
        "accept an auth Message whose auth entry has a content type other than 0 or non-empty data "
        "(only the entry's name is checked, as ilp-plugin-btp 1.5.0 and ilp-plugin-mini-accounts 4.2.0 do)",
        (AUTH + "rejects-malformed-auth-entry",),
        changes={"auth-problems": _without("auth-entry")},
    ),
    FaultSpec(
        "accept-duplicate-names-in-auth",
        "server",
        "accept an auth Message with two protocol data entries of one name",
        (AUTH + "rejects-duplicate-subprotocol-names",),
        changes={"auth-problems": _without("duplicate-names")},
    ),
    FaultSpec(
        "no-auth-timeout",
        "server",
        "never disconnect a client that does not authenticate",
        (AUTH + "disconnects-client-that-never-authenticates",),
        changes={"auth-timeout": no_auth_deadline},
    ),
    # --- flow, server
    FaultSpec(
        "wrong-request-id",
        "server",
        "after auth, answers carry the request's id + 1",
        (FLOW + "response-carries-request-id",),
        changes={"answer-id": next_request_id},
    ),
    FaultSpec(
        "answer-twice",
        "server",
        "answer each ordinary Message twice",
        (FLOW + "answers-concurrent-requests-once-each",),
        changes={"responses": _twice_for("acknowledge")},
    ),
    FaultSpec(
        "answer-auth-twice",
        "server",
        "answer a valid auth Message with two Responses (the same Response twice)",
        (FLOW + "answers-concurrent-requests-once-each",),
        changes={"responses": _twice_for("auth")},
    ),
    FaultSpec(
        "reply-to-unexpected",
        "server",
        "answer a Response or Error to no in-flight request with an Error",
        (
            FLOW + "silent-on-response-for-unknown-request",
            FLOW + "silent-on-error-for-unknown-request",
        ),
        changes={"answers-to-unexpected": answer_unexpected},
    ),
    FaultSpec(
        "reply-to-unreadable",
        "server",
        "answer an unreadable packet with an Error",
        tuple(
            FLOW + rule
            for rule in (
                "silent-on-truncated-packet",
                "silent-on-length-beyond-end",
                "silent-on-garbage",
                "silent-on-illegal-characters",
                "silent-on-text-message",
                "silent-on-unknown-type",
            )
        ),
        changes={"answers-to-unreadable": answer_unreadable},
    ),
    FaultSpec(
        "accept-duplicate-names",
        "server",
        "after auth, serve a request with two protocol data entries of one name",
        ("btp.subprotocol.server.rejects-duplicate-names",),
        changes={"duplicate-names": serve_duplicate_names},
    ),
    # --- Error packets, server
    FaultSpec(
        "nonstandard-error-code",
        "server",
        "Errors carry code F99, which is not in the spec's table (so no name can match it either)",
        (ERROR + "code-from-table", ERROR + "name-matches-code"),
        changes={"error": nonstandard_error_code},
    ),
    FaultSpec(
        "error-name-mismatch",
        "server",
        "Errors carry the name of another code (F00 named InvalidPacketError, ...)",
        (ERROR + "name-matches-code",),
        changes={"error": name_of_next_code},
    ),
    FaultSpec(
        "triggered-at-local-time",
        "server",
        "Errors carry triggeredAt as a local time, without the final Z (20171115140000.000)",
        (ERROR + "triggered-at-is-utc", ERROR + "triggered-at-valid-time"),
        changes={"error": local_time},
    ),
    FaultSpec(
        "triggered-at-trailing-zero",
        "server",
        "Errors carry triggeredAt with a two-digit fraction ending in 0 (20171115140000.50Z), a form RFC 30 "
        "lists as invalid",
        (ERROR + "triggered-at-valid-time",),
        changes={"error": trailing_zero},
    ),
    FaultSpec(
        "oversized-error-data",
        "server",
        "Errors carry 9000 bytes of data (the ASN.1 allows at most 8192)",
        (ERROR + "data-at-most-8192-bytes",),
        changes={"error": oversized_data},
    ),
    FaultSpec(
        "error-code-four-characters",
        "server",
        "Errors carry a 4-character code, the table's with a 0 appended (F000 for F00), where the ASN.1 "
        "fixes 3 (IA5String (SIZE (3)), no length prefix)",
        (ERROR + "code-has-three-characters",),
        changes={"error": four_character_code},
    ),
    # --- Transfers, server
    FaultSpec(
        "balance-on-error",
        "server",
        "a Transfer refused with Error F08 still increases the balance",
        (TRANSFER + "error-means-balance-unchanged",),
        changes={"transfer-credit": credit_refused_transfer},
    ),
    FaultSpec(
        "response-without-balance-update",
        "server",
        "a Transfer answered with a Response leaves the balance unchanged",
        (TRANSFER + "response-means-balance-updated",),
        changes={"transfer-credit": no_credit_for_response},
    ),
    # --- client role
    FaultSpec(
        "client-message-before-auth",
        "client",
        "the client sends a Message before its auth Message",
        ("btp.auth.client.sends-auth-first",),
        changes={"requests-before-auth": probe_before_auth},
    ),
    FaultSpec(
        "client-omits-auth-token",
        "client",
        "the client's auth Message has no auth_token entry",
        ("btp.auth.client.sends-utf8-auth-token",),
        changes={"auth-entries": omit_auth_token},
    ),
    FaultSpec(
        "client-auth-token-octet-stream",
        "client",
        "the client's auth_token entry has content type 0 (MIME_APPLICATION_OCTET_STREAM), its "
        "UTF-8 bytes unchanged",
        ("btp.auth.client.sends-utf8-auth-token",),
        changes={"auth-entries": auth_token_as_octet_stream},
    ),
    FaultSpec(
        "client-wrong-request-id",
        "client",
        "the client answers the server's requests with the request's id + 1",
        ("btp.flow.client.response-carries-request-id",),
        changes={"answer-id": next_request_id},
    ),
    FaultSpec(
        "client-reply-to-unexpected",
        "client",
        "the client answers a Response or Error to no in-flight request with an Error",
        (
            "btp.flow.client.silent-on-response-for-unknown-request",
            "btp.flow.client.silent-on-second-response",
            "btp.flow.client.silent-on-error-for-unknown-request",
        ),
        changes={"answers-to-unexpected": answer_unexpected},
    ),
    FaultSpec(
        "client-reply-to-unreadable",
        "client",
        "the client answers an unreadable packet with an Error",
        ("btp.flow.client.silent-on-unreadable-packet",),
        changes={"answers-to-unreadable": answer_unreadable},
    ),
    # --- cases from the coverage tables (issue 11)
    FaultSpec(
        "reject-extra-bytes-in-envelope",
        "server",
        "treat a packet with bytes after protocolData inside its envelope as unreadable (silence)",
        ("btp.packet.server.ignores-extra-bytes-in-envelope",),
        changes={"reading": refuse_extra_envelope_bytes},
    ),
    FaultSpec(
        "reject-bytes-after-envelope",
        "server",
        "treat a packet with bytes after its envelope as unreadable (silence), against erratum BTP-E3",
        ("btp.packet.server.ignores-bytes-after-envelope",),
        changes={"reading": refuse_bytes_after_envelope},
    ),
    FaultSpec(
        "ack-length-beyond-end",
        "server",
        "answer an ordinary Message (a probe) with a Response whose envelope length is one more than "
        "the bytes that follow: no reader can read it",
        (PACKET + "sends-well-formed-packets",),
        changes={"responses": _acknowledgements(length_beyond_end)},
    ),
    FaultSpec(
        "ack-length-long-form",
        "server",
        "answer an ordinary Message (a probe) with a Response whose envelope length is in long form "
        "(81 02) where RFC 0030 wants the short form (02)",
        (PACKET + "canonical-lengths",),
        changes={"responses": _acknowledgements(long_form_length)},
    ),
    FaultSpec(
        "ack-duplicate-names",
        "server",
        "answer an ordinary Message (a probe) with a Response carrying two protocol data entries of "
        "one name (reference_note)",
        (PACKET + "sends-well-formed-packets",),
        changes={"responses": _acknowledgements(duplicate_entry_names)},
    ),
    FaultSpec(
        "client-ack-length-beyond-end",
        "client",
        "the client answers the server's ordinary Messages with a Response whose envelope length is "
        "one more than the bytes that follow",
        ("btp.packet.client.sends-well-formed-packets",),
        changes={"responses": _acknowledgements(length_beyond_end)},
    ),
    FaultSpec(
        "client-reject-extra-bytes-in-envelope",
        "client",
        "the client treats a packet with bytes after protocolData inside its envelope as unreadable "
        "(an auth Response so extended is never taken)",
        ("btp.packet.client.ignores-extra-bytes-in-envelope",),
        changes={"reading": refuse_extra_envelope_bytes},
    ),
    FaultSpec(
        "client-reject-bytes-after-envelope",
        "client",
        "the client treats a packet with bytes after its envelope as unreadable, against erratum BTP-E3",
        ("btp.packet.client.ignores-bytes-after-envelope",),
        changes={"reading": refuse_bytes_after_envelope},
    ),
    FaultSpec(
        "serve-unknown-type-as-message",
        "server",
        "serve a packet of an undefined type (such as 9) whose envelope reads as a Message's",
        (FLOW + "silent-on-unknown-type",),
        changes={"reading": read_unknown_type_as_message},
    ),
    FaultSpec(
        "client-reply-to-unexpected-error",
        "client",
        "the client answers an Error to no in-flight request with an Error (Responses are still ignored)",
        ("btp.flow.client.silent-on-error-for-unknown-request",),
        changes={"answers-to-unexpected": answer_unexpected_error},
    ),
    FaultSpec(
        "client-reuse-request-id",
        "client",
        "the client gives its first request after auth the auth Message's request id",
        ("btp.flow.client.request-ids-unique",),
        changes={"request-id": reuse_auth_request_id},
    ),
    FaultSpec(
        "client-refuse-auth-response-with-data",
        "client",
        "the client takes an auth Response that carries protocol data for a refusal (and closes)",
        ("btp.auth.client.accepts-auth-response-with-protocol-data",),
        changes={"auth-refusal": refuse_auth_response_with_data},
    ),
    FaultSpec(
        "client-retry-after-final-error",
        "client",
        "the client sends a request again after a final (F) Error to it",
        ("btp.error.client.no-retry-after-final-error",),
        changes={"send-again": retry_after_final_error},
    ),
)

Fault = fault_enum("Fault", SPECS)
"""One member per fault (``Fault.NO_AUTH_REQUIRED`` is ``"no-auth-required"``)."""

REGISTRY: dict[str, FaultSpec] = {spec.name: spec for spec in SPECS}

NOT_ISOLABLE: dict[str, str] = {
    # --- cases from the coverage tables (issue 11)
    AUTH + "requires-reauth-after-reconnect": (
        "its wire sequence (authenticate, close, a new connection, a probe Message without auth) is the one "
        "btp.auth.server.error-on-non-auth-message-first already performs with its valid counterpart first "
        "(show_valid_auth), and that case is its prerequisite: a node that carries auth over to a new "
        "connection fails that case, and this one is blocked by it"
    ),
}
"""Cases whose rule cannot be broken without breaking other cases' rules too,
with the reason; the mutation table lists them (docs/mutation.md)."""

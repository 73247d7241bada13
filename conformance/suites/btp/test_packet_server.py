"""Packet encoding and the rules of the coverage table that had no case,
target as server (BTP 2.0 and the OER notes, RFC 0030)."""

from __future__ import annotations

from conformance.core.node_grammar import exchange_cut_short
from conformance.core.requirements import requirement
from conformance.core.transport import DeadlineExceeded, short_hex
from reference_impl.btp.oer import check_generalized_time
from reference_impl.btp.packet import (
    BtpDecodeError,
    ContentType,
    Message,
    Packet,
    ProtocolDataEntry,
    Response,
    Transfer,
    decode_packet,
    encode_packet,
)

from .peer import auth_message, new_request_id, probe_message, summary
from .prerequisites import AUTH, AUTHENTICATED, BALANCE_STATE, CANONICAL, SERVER_GRAMMAR
from .test_flow_server import assert_silent_then_alive, provoke_error

EXTRA_BYTES = bytes.fromhex("0a0b0c0d")
BYTES_AFTER_ENVELOPE = (
    "BTP-E3 RFC 30 asks implementations to ignore extra bytes at the end of the message, and btp-packet, "
    "the codec of ilp-plugin-btp, reads the envelope and ignores whatever follows it, so bytes after the "
    "envelope are ignored"
)
UNDEFINED_TYPE = 9
"""No BTP version defines packet type 9 (2.0 uses 1, 2, 6, 7; BTP 1 also 3-5)."""


def envelope_with_extra_bytes(packet: Packet, extra: bytes) -> bytes:
    """``packet`` with ``extra`` appended inside its envelope, after
    ``protocolData``, the envelope's length prefix grown to cover them: where
    a later BTP version would add a field (RFC 0030, Extensibility)."""
    plain = encode_packet(packet)
    assert plain[5] + len(extra) < 128, "the probe's envelope must stay in short form"
    return plain[:5] + bytes((plain[5] + len(extra),)) + plain[6:] + extra


@requirement(
    "btp.packet.server.ignores-extra-bytes-in-envelope",
    "MUST",
    'RFC 0030, Extensibility ("implementations MUST ignore extra bytes at the end of the message")',
    depends=AUTHENTICATED,
)
async def test_ignores_extra_bytes_at_end_of_envelope(authenticated_peer):
    await assert_extended_probe_answered_like_plain(
        await authenticated_peer(),
        lambda probe: envelope_with_extra_bytes(probe, EXTRA_BYTES),
        "inside its envelope, after protocolData",
    )


@requirement(
    "btp.packet.server.ignores-bytes-after-envelope",
    "MUST",
    'RFC 0030, Extensibility ("implementations MUST ignore extra bytes at the end of the message")',
    depends=AUTHENTICATED,
    errata=["BTP-E3"],
    basis=f"erratum: {BYTES_AFTER_ENVELOPE}",
)
async def test_ignores_bytes_after_envelope(authenticated_peer):
    await assert_extended_probe_answered_like_plain(
        await authenticated_peer(),
        lambda probe: encode_packet(probe) + EXTRA_BYTES,
        "after its envelope (the length prefix unchanged)",
    )


async def assert_extended_probe_answered_like_plain(peer, extend, where: str) -> None:
    """A plain probe Message, then another whose bytes ``extend`` gives
    ``EXTRA_BYTES`` more ``where``: the second must get the answer the first
    got (its type, the probe's request id), not silence."""
    plain = probe_message(new_request_id())
    expected = await peer.request(plain, "the answer to a plain probe Message")
    extended = probe_message(new_request_id())
    await peer.send_raw(
        extend(extended), f"a probe Message with {len(EXTRA_BYTES)} extra bytes {where}"
    )
    # Within the read deadline, as the plain probe's answer was: a target may answer late.
    try:
        reply = await peer.next_response(f"the answer to the probe with extra bytes {where}")
    except DeadlineExceeded:
        raise AssertionError(
            f"the same probe with {EXTRA_BYTES.hex()} appended {where} got no answer within "
            f"{peer.conn.deadline} s (the plain probe got {summary(expected)}); extra bytes at the "
            "end must be ignored"
        ) from None
    assert reply.request_id == extended.request_id and type(reply) is type(expected), (
        f"with extra bytes {where} the probe (request id {extended.request_id}) got {summary(reply)}, "
        f"without them {summary(expected)}: the extra bytes must be ignored, not change the answer"
    )


@requirement(
    "btp.flow.server.silent-on-unknown-type",
    "MUST",
    'BTP 2.0, Flow ("An unreadable BTP packet is one which is structurally invalid"; "Unreadable packets '
    'must be ignored too"); BTP Type IDs',
    depends=AUTHENTICATED,
    basis="plain-words",
)
async def test_silent_on_undefined_packet_type(authenticated_peer):
    peer = await authenticated_peer()
    packet = bytearray(encode_packet(probe_message(new_request_id())))
    packet[0] = UNDEFINED_TYPE
    await peer.send_raw(
        bytes(packet),
        f"a probe Message relabelled as packet type {UNDEFINED_TYPE} (defined nowhere)",
    )
    await assert_silent_then_alive(peer, f"a packet of undefined type {UNDEFINED_TYPE}")


@requirement(
    "btp.auth.server.accepts-extra-auth-entries",
    "MUST",
    "BTP 2.0, Authentication (\"Its primary protocolData entry MUST have name 'auth' ... there MUST be a "
    "UTF-8 'auth_token' entry\"; \"The further secondary protocol data entries of this Message request "
    'MAY also be used to send additional information to the server")',
    depends=[AUTH],
)
async def test_accepts_auth_with_further_secondary_entries(open_peer, auth_token):
    peer = await open_peer()
    base = auth_message(new_request_id(), auth_token)
    extra = ProtocolDataEntry(
        "conformance_info", ContentType.TEXT_PLAIN_UTF8, b"additional information"
    )
    request = Message(base.request_id, base.protocol_data + (extra,))
    reply = await peer.request(
        request, "the answer to a valid auth Message with one more secondary entry"
    )
    assert isinstance(reply, Response), (
        f"a valid auth Message with a further secondary entry must be accepted like one without; got {summary(reply)}"
    )


@requirement(
    "btp.error.server.triggered-at-valid-time",
    "MUST",
    'RFC 0030, Variable-length Timestamps, Encoding ("Years MUST be given as four digits"; "The period . '
    'MUST be used as the decimal separator"; "Midnight MUST be encoded as 000000 on the following day")',
    depends=[AUTH],
)
async def test_error_triggered_at_is_a_valid_generalized_time(open_peer, auth_token):
    error, what = await provoke_error(open_peer, auth_token)
    problem = check_generalized_time(error.triggered_at)
    assert problem is None, f"the Error to {what} has triggeredAt {error.triggered_at!r}: {problem}"


def length_determinant_problems(data: bytes, pos: int, what: str) -> tuple[list[str], int, int]:
    """The canonical-form problems of the length determinant at ``pos``
    (read leniently), its value and the position after it."""
    if pos >= len(data):
        raise AssertionError(f"packet ends where the {what} length was due: {short_hex(data, 96)}")
    first = data[pos]
    if first < 128:
        return [], first, pos + 1
    size = first & 0x7F
    raw = data[pos + 1 : pos + 1 + size]
    if size == 0 or len(raw) < size:
        raise AssertionError(
            f"{what}: malformed long-form length {data[pos : pos + 1 + size].hex()}"
        )
    value = int.from_bytes(raw, "big")
    problems = []
    if raw[0] == 0:
        problems.append(
            f"{what}: long-form length {data[pos : pos + 1 + size].hex()} has a leading zero byte"
        )
    if value < 128:
        problems.append(
            f"{what}: length {value} in long form ({data[pos : pos + 1 + size].hex()}); "
            "lengths below 128 take the short form"
        )
    return problems, value, pos + 1 + size


def encoding_problems(data: bytes) -> list[str]:
    """Every non-canonical length determinant and protocol data count of a
    Response or Error as the target sent it."""
    problems, _, pos = length_determinant_problems(data, 5, "envelope")
    if data[0] == 2:  # Error: code (3 bytes), name, triggeredAt, data
        pos += 3
        for field in ("name", "triggeredAt", "data"):
            found, size, pos = length_determinant_problems(data, pos, f"Error {field}")
            problems += found
            pos += size
    found, size, pos = length_determinant_problems(data, pos, "protocol data count")
    problems += found
    count_bytes = data[pos : pos + size]
    if size == 0 or (size > 1 and count_bytes[0] == 0):
        problems.append(
            f"protocol data count {data[pos - 1 : pos + size].hex()} is not canonical "
            "(a variable-length unsigned integer of at least one byte without leading zeros)"
        )
    count = int.from_bytes(count_bytes, "big")
    pos += size
    for index in range(min(count, 64)):
        found, size, pos = length_determinant_problems(data, pos, f"entry {index + 1} name")
        problems += found
        pos += size + 1  # the name, then the content type byte
        found, size, pos = length_determinant_problems(data, pos, f"entry {index + 1} data")
        problems += found
        pos += size
    return problems


PACKET_GRAMMAR = (
    "BTP 2.0, Overview (a packet is the type, the requestId and the length-prefixed envelope holding the "
    "type's fields, OER-encoded by the ASN.1 module); RFC 0030, Length determinant; Variable-length octet string"
)
GRAMMAR_BASIS = (
    "wire-format: the BTP ASN.1 module and RFC 0030's OER define the one layout of a packet, each "
    "WebSocket binary message one packet (RFC 23 uses no RFC 2119 keyword); a peer cannot read a "
    "message that does not have it"
)


async def shown_packets(open_peer, auth_token: bytes) -> int:
    """The grammar cases' own exchange: each kind of packet a server sends
    in answer (the auth Response, a probe's Response, the Error to two
    sub-protocols of one name after auth, the Error to a Transfer before
    auth), each read and judged as every case's traffic is (BtpPeer). An
    exchange cut short (the target refused the auth, closed, answered
    otherwise) judges what it read: the rest is the other cases' rules.
    Returns how many answers were read; their encoding is checked here
    too, field by field (:func:`encoding_problems`), a problem recorded for
    the canonical-lengths case."""
    read = 0
    entry = ProtocolDataEntry("conformance_probe", ContentType.TEXT_PLAIN_UTF8, b"x")
    peer = await open_peer("the packets a server sends")
    steps = (
        (peer, auth_message(new_request_id(), auth_token), "the auth Message"),
        (peer, probe_message(new_request_id()), "a probe Message"),
        (
            peer,
            Message(new_request_id(), (entry, entry)),
            "a Message with two sub-protocols of one name",
        ),
        (None, Transfer(new_request_id(), 1), "a Transfer before auth"),
    )
    refused = False
    for connection, request, what in steps:
        if refused and connection is peer:
            continue  # auth refused: what follows it on that connection is the auth cases'
        with exchange_cut_short(peer.conn.trace):
            # The unauthenticated connection is opened only now: the target may
            # drop it once its auth timeout passes, however long the answers above took.
            connection = connection or await open_peer("a Transfer before auth")
            await connection.send(request)
            raw = await connection.next_response_bytes(f"the answer to {what}")
            read += 1
            try:
                answer = (
                    decode_packet(raw, lenient_error_form=True) if isinstance(raw, bytes) else None
                )
            except BtpDecodeError:
                answer = None
            if answer is None:
                # Unreadable: recorded by next_response_bytes for its grammar case
                # (or left to the Error code's case); an unreadable auth answer is no
                # acceptance either.
                refused = refused or what == "the auth Message"
                continue
            # A packet that reads: the decoder refuses every non-canonical length
            # it meets; each field is checked again here, by name.
            problems = encoding_problems(raw)
            if problems:
                raise connection.grammar_violation(
                    f"the answer to {what} is not canonical OER: {problems}", raw, CANONICAL
                )
            if what == "the auth Message":
                refused = not isinstance(answer, Response)
    return read


@requirement(
    CANONICAL,
    "MUST",
    'RFC 0030, Long form ("This length MUST NOT contain leading zeros"; "the short form encoding MUST be '
    'used"); Variable-length unsigned integer ("Leading zeros MUST NOT be used")',
    shares=[BALANCE_STATE],
    grammar=True,
)
async def test_target_packets_use_canonical_lengths(open_peer, auth_token, node_grammar):
    """Every length determinant and protocol data count of every packet the
    server sent in this run, in every case's traffic, is canonical: the
    packets the strict decoder refused for a non-canonical one (each case
    that read one is blocked by this case) and those of its own exchange,
    each answer judged field by field (shown_packets)."""
    with node_grammar.judging():
        if not await shown_packets(open_peer, auth_token):
            node_grammar.nothing_to_judge(
                (AUTH,), "the server answered none of the requests, so there was nothing to judge"
            )


@requirement(
    SERVER_GRAMMAR,
    "MUST",
    PACKET_GRAMMAR,
    basis=GRAMMAR_BASIS,
    shares=[BALANCE_STATE],
    grammar=True,
)
async def test_sends_well_formed_packets(open_peer, auth_token, node_grammar):
    """Every message the server sent in this run, in every case's traffic,
    is one readable BTP packet: a binary message the strict decoder reads,
    nothing after its envelope. The violations the other cases met (each
    of them blocked by this case) and those of its own exchange, which
    shows each kind of answer a server sends (shown_packets). The rules an
    Error's code, triggeredAt and data size break, and non-canonical
    lengths, are their own cases'."""
    with node_grammar.judging():
        if not await shown_packets(open_peer, auth_token):
            node_grammar.nothing_to_judge(
                (AUTH,), "the server answered none of the requests, so there was nothing to judge"
            )

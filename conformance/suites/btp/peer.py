"""The harness's side of a BTP connection, driven by the reference codec.

Cases use :class:`BtpPeer` to speak BTP the way a correct peer would
(authenticate, send requests, match responses) and its raw ``send_raw`` to
put forged or broken packets on the wire. Every packet is noted in the
wire trace in decoded form beside its bytes.

Every message the target sends is judged by the packet grammar once, by a
case of its own (core/node_grammar.py): one that is no readable BTP packet
(a text message, a structure the strict decoder refuses, bytes after the
envelope, two protocol data entries of one name) is a NodeGrammarViolation of
``btp.packet.<role>.sends-well-formed-packets``, and one the strict decoder
refuses only for a non-canonical length or count is one of
``btp.packet.server.canonical-lengths`` (target as server). The case that
read it is blocked by that case, which fails listing the bytes. An Error
whose code is not three IA5 characters stays the code's case's
(``error_code_case``), and an Error's triggeredAt and data size their cases'
(read leniently here).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from conformance.core import node_grammar
from conformance.core.requirements import blocked
from conformance.core.target_errors import TargetError
from conformance.core.target_runtime import TargetRuntime
from conformance.core.transport import Deadline, short_hex
from conformance.core.websocket import WebSocketConnection
from reference_impl.btp.oer import encode_length, read_long_length
from reference_impl.btp.session import duplicate_names
from reference_impl.btp.packet import (
    BtpDecodeError,
    ContentType,
    Error,
    Message,
    Packet,
    ProtocolDataEntry,
    Response,
    decode_packet,
    encode_packet,
    envelope_end,
    is_request,
    is_response,
)

from .prerequisites import CANONICAL, CLIENT_GRAMMAR, SERVER_GRAMMAR

AUTH = "auth"
AUTH_TOKEN = "auth_token"
BALANCE = "balance"

NON_CANONICAL_REASONS = ("non-canonical length", "non-canonical integer")
"""The strict decoder's reasons (reference_impl/btp/oer.py) that are the
canonical-OER rule's, not the packet structure's: RFC 0030 Long form ("This
length MUST NOT contain leading zeros"; "the short form encoding MUST be
used") and Variable-length unsigned integer ("Leading zeros MUST NOT be
used")."""

MAX_PACKET_SIZE = 64 * 1024
"""Largest BTP packet the harness accepts from a target. BTP sets no limit;
an ILP packet carries at most 32767 data bytes, and no answer to the
harness's small requests comes near 64 KiB. A WebSocket frame declaring more
fails the case from its header, before its payload is read (OER length
prefixes inside a packet are bounded by the packet itself)."""

PACKET_BOUND_OF = "a BTP packet (MAX_PACKET_SIZE; BTP itself sets no size)"
"""How a refusal names the bound: a harness limit, not a sentence of BTP."""


def auth_message(request_id: int, token: bytes) -> Message:
    """The auth Message of the spec: primary ``auth`` (octet stream, empty),
    secondary ``auth_token`` as UTF-8 text."""
    return Message(
        request_id,
        (
            ProtocolDataEntry(AUTH, ContentType.APPLICATION_OCTET_STREAM, b""),
            ProtocolDataEntry(AUTH_TOKEN, ContentType.TEXT_PLAIN_UTF8, token),
        ),
    )


def target_auth_token(target: TargetRuntime) -> bytes:
    """The token the target accepts (credential ``auth_token``; may be empty
    when the target needs no authentication, but the credential must exist)."""
    if "auth_token" not in target.target.credentials:
        raise TargetError(
            f"target {target.target.name} has no auth_token credential "
            "(auth_token_file or auth_token_env)"
        )
    return target.credential("auth_token").rstrip(b"\r\n")


def wrong_token_for(auth_token: bytes) -> bytes:
    """A token the target does not accept: its own with more after it."""
    return auth_token + b"-wrong" if auth_token else b"not-the-token"


def probe_message(request_id: int) -> Message:
    """A harmless request whose only purpose is to get an answer."""
    return Message(
        request_id,
        (ProtocolDataEntry("conformance_probe", ContentType.TEXT_PLAIN_UTF8, b"are you there"),),
    )


def summary(packet: Packet) -> str:
    """A packet in one line for traces and failure messages."""
    fields: dict[str, Any] = {"type": type(packet).__name__, "request_id": packet.request_id}
    for name in ("amount", "code", "name", "triggered_at"):
        if hasattr(packet, name):
            fields[name] = getattr(packet, name)
    if isinstance(packet, Error):
        fields["data"] = packet.data[:64].hex()
    fields["protocol_data"] = [
        f"{e.name}/{e.content_type}/{e.data[:48].decode('utf-8', 'replace') if e.content_type else e.data[:48].hex()}"
        for e in packet.protocol_data
    ]
    return json.dumps(fields, ensure_ascii=False)


def new_request_id() -> int:
    return secrets.randbits(32)


ERROR_CODE_SIZES = (3, 4, 2, 5, 1, 6, 7, 8)
"""The sizes an Error's code field is tried at, nearest the right one (3) first."""


def error_code_problem(data: bytes | str) -> str | None:
    """Why the code of the Error packet ``data`` breaks ``code IA5String
    (SIZE (3))`` (BTP 2.0, Error: three IA5 characters, no length prefix),
    when that is what makes the packet unreadable: the rest of the Error
    reads once the code is taken as another number of bytes, or its three
    bytes are not IA5. None when ``data`` is no Error, reads as it is, or is
    unreadable for another reason (not the code's)."""
    if not isinstance(data, bytes) or len(data) < 6 or data[0] != 2:
        return None
    try:
        decode_packet(data, lenient_error_form=True)
        return None
    except BtpDecodeError:
        pass
    try:
        length, start = (data[5], 6) if data[5] < 128 else read_long_length(data, 5, len(data))
    except BtpDecodeError:
        return None
    if start + length > len(data):
        return None  # the envelope's length is wrong: not the code's doing
    data = data[: start + length]  # what follows the envelope is ignored (erratum BTP-E3)
    for size in ERROR_CODE_SIZES:
        if size > length:
            continue
        envelope = b"F00" + data[start + size :]
        try:
            decode_packet(
                data[:5] + encode_length(len(envelope)) + envelope, lenient_error_form=True
            )
        except BtpDecodeError:
            continue
        code = data[start : start + size]
        if size == 3:
            return f"its code {code.hex()} is not three IA5 characters (IA5 is 0..127)"
        return (
            f"its code field is {size} bytes, {code.decode('ascii', 'replace')!r} ({code.hex()}): the rest of "
            f"the Error reads only with a {size}-byte code, and the code is IA5String (SIZE (3)), three "
            "characters with no length prefix"
        )
    return None


class BtpPeer:
    def __init__(
        self,
        conn: WebSocketConnection,
        error_code_case: str | None = None,
        role: str = "server",
    ) -> None:
        self.conn = conn
        self.error_code_case = error_code_case
        """The case of the Error code's form (target as server): an Error
        unreadable because of its code blocks the reading case by it."""
        self.role = role
        """The target's role: whose grammar cases judge what it sends."""
        conn.limit_message_size(MAX_PACKET_SIZE, PACKET_BOUND_OF)

    @property
    def grammar_case(self) -> str:
        return SERVER_GRAMMAR if self.role == "server" else CLIENT_GRAMMAR

    def grammar_violation(
        self, rule: str, data: bytes, case: str | None = None
    ) -> node_grammar.NodeGrammarViolation:
        """The violation of ``case`` (default: the role's packet grammar
        case), recorded for the run as it is made."""
        return node_grammar.violation(
            case or self.grammar_case,
            rule,
            data,
            direction=f"{self.role} to harness",
            offset=None,
            connection=self.conn.label,
        )

    def _unreadable(
        self, message: bytes | str, what: str, error: BtpDecodeError | None
    ) -> node_grammar.NodeGrammarViolation:
        """The violation a message that is no readable packet makes:
        ``error`` is the strict decoder's (None for a text message)."""
        if isinstance(message, str):
            return self.grammar_violation(
                f"a text WebSocket message where {what} (a binary BTP packet) was due",
                message.encode("utf-8"),
            )
        if error is not None and error.reason in NON_CANONICAL_REASONS:
            return self.grammar_violation(
                f"a packet that is not canonical OER where {what} was due: {error}",
                message,
                CANONICAL if self.role == "server" else None,
            )
        return self.grammar_violation(
            f"an unreadable packet where {what} was due: {error}", message
        )

    def _judge_readable(self, message: bytes, what: str) -> None:
        """A packet that reads: bytes after its envelope are no part of it
        (the reader ignores them, erratum BTP-E3; a sender that writes
        them wrote a wrong length prefix). Recorded for the grammar case;
        the reading case goes on with the packet, its own rule unaffected."""
        end = envelope_end(message)
        if end != len(message):
            self.grammar_violation(
                f"{len(message) - end} byte(s) after the envelope of the packet where {what} was due "
                "(the message is one packet, the envelope's length prefix ends it)",
                message,
            )

    def _judge_names(self, packet: Packet, message: bytes, what: str) -> None:
        """The protocol data entries of a packet the node sends each have a
        unique protocolName (the BTP ASN.1 module: "Zero or more
        protocolData entries, each with a unique protocolName"): the
        strict decoder takes two of one name (a node must refuse such a
        request, RFC 23 Authentication, which the reader checks), so the
        grammar case judges it here. Recorded only: the reading case goes
        on with the packet."""
        dups = duplicate_names(packet)
        if dups:
            self.grammar_violation(
                f"protocol data entries of one name ({', '.join(repr(n) for n in dups)}) in the packet "
                f"where {what} was due (each protocolName is unique in a packet)",
                message,
            )

    def decode_own(self, message: bytes | str, what: str) -> Packet:
        """``message`` from the target decoded, judged by the grammar as
        :meth:`next_packet` judges it; raises the NodeGrammarViolation of a
        message that is no readable packet."""
        if isinstance(message, str):
            raise self._unreadable(message, what, None)
        try:
            packet = decode_packet(message, lenient_error_form=True)
        except BtpDecodeError as exc:
            raise self._unreadable(message, what, exc) from None
        self._judge_readable(message, what)
        self._judge_names(packet, message, what)
        return packet

    async def send(self, packet: Packet, note: str = "") -> bytes:
        data = encode_packet(packet)
        await self.conn.send(data, (note + ": " if note else "") + summary(packet))
        return data

    async def send_raw(self, payload: bytes | str, note: str) -> None:
        await self.conn.send(payload, note)

    async def next_packet(self, what: str, deadline: float | Deadline | None = None) -> Packet:
        """The target's next packet; one that does not decode raises the
        NodeGrammarViolation of its grammar case (a ProtocolViolation showing
        its bytes): the reading case is blocked by that case."""
        message = await self.conn.receive(what, deadline)
        if isinstance(message, str):
            raise self._unreadable(message, what, None)
        # An Error's triggeredAt and data size are read leniently: the cases of those rules
        # (btp.error.server.triggered-at-*, data-at-most-8192-bytes) judge them, no other case.
        # An Error unreadable for its code's form is that rule's case's failure alone.
        problem = error_code_problem(message) if self.error_code_case else None
        if problem:
            blocked(
                self.error_code_case,
                "failed within this case",
                f"the target's Error where {what} was due is unreadable: {problem}; bytes: {short_hex(message)}",
            )
        packet = self.decode_own(message, what)
        self.conn.trace.event(f"decoded: {summary(packet)}")
        return packet

    def _target_request(self, message: bytes | str) -> Packet | None:
        """``message`` decoded if it is a request of the target's own (a
        Message or Transfer), else None."""
        if not isinstance(message, bytes) or not message or message[0] not in (6, 7):
            return None
        try:
            packet = decode_packet(message)
        except BtpDecodeError:
            return None
        if not is_request(packet):
            return None
        self._judge_readable(message, "a request of the target's own")
        self._judge_names(packet, message, "a request of the target's own")
        return packet

    async def next_response(self, what: str, deadline: float | Deadline | None = None) -> Packet:
        """The target's next response-type packet (Response or Error), whatever
        its request id. Requests of the target's own that come first are
        answered with an empty Response, as a peer would, and are not taken
        for answers: once authenticated either side may send requests at any
        moment (BTP 2.0, Authentication: "At the BTP level, the client and
        server play identical roles"). The deadline is for the response."""
        response_deadline = (
            deadline
            if isinstance(deadline, Deadline)
            else Deadline(self.conn.deadline if deadline is None else deadline)
        )
        for _ in range(100):
            packet = await self.next_packet(what, response_deadline)
            if not is_request(packet):
                return packet
            await self.send(Response(packet.request_id), "answering the target's own request")
        raise AssertionError(f"no {what} among 100 packets")

    async def next_response_bytes(
        self, what: str, deadline: float | Deadline | None = None
    ) -> bytes | str:
        """Like :meth:`next_response`, but the message as the target sent it
        (for the cases that judge its encoding): the target's own requests
        that come first are answered and skipped; anything else is returned
        undecoded."""
        response_deadline = (
            deadline
            if isinstance(deadline, Deadline)
            else Deadline(self.conn.deadline if deadline is None else deadline)
        )
        for _ in range(100):
            message = await self.conn.receive(what, response_deadline)
            request = self._target_request(message)
            if request is None:
                self.judged(message, what)
                return message
            self.conn.trace.event(f"decoded: {summary(request)}")
            await self.send(Response(request.request_id), "answering the target's own request")
        raise AssertionError(f"no {what} among 100 messages")

    async def response_to(
        self, request_id: int, what: str, deadline: float | None = None
    ) -> Packet:
        """The response (Response or Error) carrying ``request_id``; requests
        the target makes meanwhile are answered with an empty Response, as a
        peer would, and responses to other ids are reported. The deadline is
        for the response, however many requests of the target come first."""
        strays: list[str] = []
        response_deadline = Deadline(self.conn.deadline if deadline is None else deadline)
        for _ in range(100):
            packet = await self.next_packet(what, response_deadline)
            if is_response(packet):
                if packet.request_id == request_id:
                    return packet
                strays.append(summary(packet))
                raise AssertionError(
                    f"awaiting {what} for request id {request_id}, the target answered "
                    f"with another id: {strays}"
                )
            await self.send(Response(packet.request_id), "answering the target's own request")
        raise AssertionError(f"no {what} among 100 packets")

    async def request(self, packet: Packet, what: str) -> Packet:
        await self.send(packet)
        return await self.response_to(packet.request_id, what)

    async def authenticate(self, token: bytes) -> Packet:
        reply = await self.request(
            auth_message(new_request_id(), token), "the answer to the auth Message"
        )
        assert isinstance(reply, Response), f"target refused valid authentication: {summary(reply)}"
        return reply

    async def unanswered(self, seconds: float) -> list[str]:
        """What the target sends within ``seconds`` (silence checks); decoded
        where possible. Requests of the target's own are answered (with an
        empty Response, as a peer would) and left out: a request is no
        response, and either side may send one at any moment after auth (see
        :meth:`next_response`)."""
        got = []
        for message in await self.conn.messages_within(seconds):
            request = self._target_request(message)
            if request is not None:
                self.conn.trace.event(
                    f"decoded: {summary(request)} (a request of the target's own, not an answer)"
                )
                await self.conn.send_quietly(
                    encode_packet(Response(request.request_id)),
                    "answering the target's own request",
                )
                continue
            packet = self.judged(message, "silence")
            if isinstance(message, str):
                got.append(f"text message {message[:120]!r}")
            elif packet is None:
                got.append(f"unreadable {short_hex(message)}")
            else:
                got.append(summary(packet))
        return got

    def judged(self, message: bytes | str, what: str) -> Packet | None:
        """A message the case reads itself (as sent, or where silence was
        due) judged by the grammar too, a violation recorded without
        raising: the case's own rule decides what to make of the message.
        The packet, or None when it does not read. An Error unreadable for
        its code's form is the code's case's, not recorded."""
        if isinstance(message, bytes) and error_code_problem(message):
            return None
        try:
            return self.decode_own(message, what)
        except node_grammar.NodeGrammarViolation:
            return None

    async def assert_still_answers(self, after: str) -> None:
        """The connection keeps working: a probe request gets its response.
        A target that closed the connection instead fails here, by name."""
        assert not self.conn.closed, (
            f"target closed the connection after {after} ({self.conn.close_description()}); the spec wants "
            "the packet ignored and the connection kept working"
        )
        probe = probe_message(new_request_id())
        reply = await self.request(probe, f"the answer to a probe Message sent after {after}")
        assert reply.request_id == probe.request_id

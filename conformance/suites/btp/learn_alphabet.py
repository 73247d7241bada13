"""The BTP alphabet of ``conformance learn`` (conformance/learn/): the
harness as a BTP client over WebSocket, the target in the server role.

One query is one WebSocket connection to the target's url (the reset).
Inputs are BTP packets built with the reference codec (reference_impl/btp)
and the suite's peer (conformance/suites/btp/peer.py), one WebSocket
message each: the auth Message with the target's token or a wrong one, a
Message the target has no reason to know (the suite's probe), a Transfer
of 1, a Response and an Error to no request, and the unreadable messages
of the flow cases (garbage, a packet cut short, a text message).

Outputs are the target's packets as words: ``RESPONSE`` and ``ERROR`` to
the harness's request (the abstract output says only whether and how it
was answered), ``ANSWER`` for the probe Message, and what breaks a rule
spelled in the word: ``RESPONSE(unknown-id)`` / ``ERROR(unknown-id)``
carry a request id the harness never sent, ``ERROR(to-an-answer)`` the
id of a Response or Error the harness sent; an Error's fields as the
error cases judge them: ``bad-code`` (not three IA5 characters),
``code-not-in-table``, ``name-not-the-code's``, ``bad-time`` (triggeredAt
no valid UTC GeneralizedTime), ``data-too-long`` (over 8192 bytes);
``UNREADABLE`` is a message that is no packet, ``TEXT`` a text message.

A target that declares every token valid (``params.accepts_any_token``)
gets no ``auth-wrong-token``, and one without the capability ``balance``
no ``transfer``: the cases of those rules are not applicable to it either.

Only what every conformant server answers is in a word (the variants of
reference_impl/btp/variants.py learn to the reference's model):

* the probe Message gets a Response or an Error (a server "not able to
  process the Message" answers with an Error: variant
  ``refuse-unknown-subprotocols``): both are ``ANSWER``; so is the answer
  to an auth Message once auth succeeded (on an open connection it is a
  Message like any other: the reference refuses it, ilp-plugin-btp
  accepts it, the text rules neither);
* an Error's code is not in the word (variant ``auth-refusals-f00``
  refuses auth with F00), only whether the code has its form;
* Requests of the target's own once auth succeeded (variant
  ``unprompted-traffic``: Messages and Transfers) are dropped and counted,
  and answered with an empty Response after the read window, as the
  suite's peer answers them (``ConnectionMapper.owed``); the same request
  before auth succeeded stays a word (``REQUEST``);
* Responses carrying more entries (``extra-protocol-data``), answers
  reordered within a window (``reordered-answers``), fragmented WebSocket
  messages and sequential request ids of the target's own requests change
  no word.

Read window: 0.4 s. The reference node answers within milliseconds on
loopback. A refusal is two writes, the Error and then the WebSocket close
frame, both within the window (``writes_per_answer``): ``late-answers``
makes each as late as a quarter of the window (0.1 s), so the close comes
by half of it, which leaves 0.2 s for a loaded machine. (With 0.2 s per
write the close came after the window, and the model said ``ERROR`` where
the reference's says ``ERROR+close``.) A node slower than that needs a
longer ``--read-window``.
"""

from __future__ import annotations

import secrets
import ssl
from typing import Any

from conformance.core.target_runtime import TargetRuntime
from conformance.core.transport import ProtocolViolation, WireTrace
from conformance.core.websocket import WebSocketConnection
from conformance.learn.alphabet import (
    AbstractInput,
    ConnectionMapper,
    LearnConnection,
    ProtocolAlphabet,
    Received,
)
from reference_impl.btp.oer import check_generalized_time
from reference_impl.btp.packet import (
    ERROR_CODES,
    MAX_ERROR_DATA,
    BtpDecodeError,
    ContentType,
    Error,
    Message,
    ProtocolDataEntry,
    Response,
    Transfer,
    decode_packet,
    encode_packet,
    generalized_time,
    is_request,
)

from .peer import (
    MAX_PACKET_SIZE,
    PACKET_BOUND_OF,
    auth_message,
    error_code_problem,
    probe_message,
    target_auth_token,
    wrong_token_for,
)

READ_WINDOW = 0.4

_S = "btp.{}.server.{}"


def _case(area: str, name: str) -> str:
    return _S.format(area, name)


INPUTS = (
    AbstractInput(
        "auth",
        "the auth Message (primary auth, auth_token with the target's token)",
        (_case("auth", "accepts-valid-auth"),),
    ),
    AbstractInput(
        "auth-wrong-token",
        "the auth Message with a token the target does not accept",
        (_case("auth", "rejects-wrong-token"), _case("auth", "closes-after-auth-error")),
        unless="accepts_any_token",
    ),
    AbstractInput(
        "auth-no-token",
        "the auth Message without its auth_token entry",
        (_case("auth", "rejects-missing-auth-token"),),
    ),
    AbstractInput(
        "message",
        "a Message of a sub-protocol the target has no reason to know (the suite's probe)",
        (
            _case("flow", "response-carries-request-id"),
            _case("auth", "error-on-non-auth-message-first"),
        ),
    ),
    AbstractInput(
        "transfer",
        "a Transfer of 1 (only to a target that keeps a balance: the answer to a Transfer "
        "after auth is judged by the balance cases, which need the capability)",
        (
            _case("transfer", "response-means-balance-updated"),
            _case("auth", "error-on-transfer-before-auth"),
        ),
        needs="balance",
    ),
    AbstractInput(
        "response-unknown",
        "a Response to no request of the target's",
        (_case("flow", "silent-on-response-for-unknown-request"),),
    ),
    AbstractInput(
        "error-unknown",
        "an Error (F00) to no request of the target's",
        (_case("flow", "silent-on-error-for-unknown-request"),),
    ),
    AbstractInput(
        "garbage",
        "a binary message that is no BTP packet (an unknown type and no envelope)",
        (_case("flow", "silent-on-garbage"),),
    ),
    AbstractInput(
        "truncated",
        "the probe Message cut short (its envelope's length says more than follows)",
        (_case("flow", "silent-on-truncated-packet"),),
    ),
    AbstractInput(
        "text",
        "a text WebSocket message",
        (_case("flow", "silent-on-text-message"),),
    ),
)

WORD_CASES = {
    "unknown-id": (_case("flow", "response-carries-request-id"),),
    "bad-code": (_case("error", "code-has-three-characters"),),
    "code-not-in-table": (_case("error", "code-from-table"),),
    "name-not-the-code's": (_case("error", "name-matches-code"),),
    "bad-time": (_case("error", "triggered-at-is-utc"), _case("error", "triggered-at-valid-time")),
    "data-too-long": (_case("error", "data-at-most-8192-bytes"),),
    "UNREADABLE": (_case("flow", "silent-on-garbage"),),
    "TEXT": (_case("flow", "silent-on-text-message"),),
}


class _WebSocketLearnConnection:
    """A :class:`~conformance.learn.alphabet.LearnConnection` over the
    harness's WebSocket connection (core/websocket.py: deadlines, bounds,
    the trace): one input is one message; what a read window brings is the
    list of messages."""

    def __init__(self, conn: WebSocketConnection) -> None:
        self.conn = conn

    async def send_quietly(self, data: bytes, note: str = "") -> bool:
        payload: bytes | str = data
        if data.startswith(TEXT_MARK):
            payload = data[len(TEXT_MARK) :].decode("utf-8")
        return await self.conn.send_quietly(payload, note)

    async def await_close(self, deadline: float | None = None) -> tuple[bool, Any]:
        try:
            return await self.conn.await_close(deadline)
        except ProtocolViolation as exc:
            # A frame the harness refuses (bigger than a packet can be): a
            # word, and nothing more is read on this connection.
            return True, [exc]

    def abort(self) -> None:
        self.conn.abort()


TEXT_MARK = b"\x00learn-text:"
"""``concrete`` returns bytes; an input meant as a text message is marked
with this prefix (no BTP packet starts with a zero byte and this text)."""


class ServerConnection(ConnectionMapper):
    def __init__(self, runtime: TargetRuntime) -> None:
        self.token = target_auth_token(runtime)
        self.requests: set[int] = set()
        """Request ids of the harness's requests not yet answered."""
        self.answers_sent: set[int] = set()
        """Request ids of the Responses and Errors the harness sent."""
        self.probes: set[int] = set()
        self.authenticated = False
        self.owed_responses: list[int] = []
        self.broken = False

    def _request(self, packet: Message | Transfer) -> bytes:
        self.requests.add(packet.request_id)
        return encode_packet(packet)

    @staticmethod
    def _new_id() -> int:
        return secrets.randbits(32)

    def _auth(self, message: Message) -> bytes:
        if self.authenticated:
            # On an open connection an auth Message is a Message like any
            # other ("At the BTP level, the client and server play identical
            # roles"): a Response and an Error are both an answer.
            self.probes.add(message.request_id)
        return self._request(message)

    def concrete(self, name: str) -> bytes:
        if name == "auth":
            return self._auth(auth_message(self._new_id(), self.token))
        if name == "auth-wrong-token":
            return self._auth(auth_message(self._new_id(), wrong_token_for(self.token)))
        if name == "auth-no-token":
            valid = auth_message(self._new_id(), self.token)
            return self._auth(Message(valid.request_id, valid.protocol_data[:1]))
        if name == "message":
            probe = probe_message(self._new_id())
            self.probes.add(probe.request_id)
            return self._request(probe)
        if name == "transfer":
            return self._request(Transfer(self._new_id(), 1))
        if name == "response-unknown":
            entry = ProtocolDataEntry("x", ContentType.TEXT_PLAIN_UTF8, b"?")
            answer: Response | Error = Response(self._new_id(), (entry,))
            self.answers_sent.add(answer.request_id)
            return encode_packet(answer)
        if name == "error-unknown":
            answer = Error(self._new_id(), "F00", "NotAcceptedError", generalized_time(), b"")
            self.answers_sent.add(answer.request_id)
            return encode_packet(answer)
        if name == "garbage":
            return b"\xff\xfe\xfd learn garbage"
        if name == "truncated":
            whole = encode_packet(probe_message(self._new_id()))
            return whole[: len(whole) // 2]
        if name == "text":
            return TEXT_MARK + b"learn: not a BTP packet"
        raise KeyError(name)

    def received(self, data: Any) -> Received:
        got = Received()
        for message in data or ():
            if self.broken:
                break
            if isinstance(message, ProtocolViolation):
                self.broken = True
                got.words.append("UNREADABLE(frame)")
            elif isinstance(message, str):
                got.words.append("TEXT")
            else:
                word = self._word(message, got)
                if word:
                    got.words.append(word)
        return got

    def _word(self, data: bytes, got: Received) -> str | None:
        try:
            packet = decode_packet(data, lenient_error_form=True)
        except BtpDecodeError:
            if error_code_problem(data) is None:
                return "UNREADABLE"
            # An Error that reads once its code is taken as another number
            # of bytes: the code's rule, not an unreadable packet.
            request_id = int.from_bytes(data[1:5], "big")
            known = request_id in self.requests
            self.requests.discard(request_id)
            return "ERROR(bad-code)" if known else "ERROR(unknown-id,bad-code)"
        if is_request(packet):
            if self.authenticated:
                # Traffic of the target's own once the connection is open (see the docstring).
                self.owed_responses.append(packet.request_id)
                got.unprompted += 1
                return None
            return "REQUEST"
        notes = []
        if packet.request_id in self.requests:
            self.requests.discard(packet.request_id)
        elif packet.request_id in self.answers_sent:
            # Answers a Response or Error of the harness's (before auth, the
            # reference refuses any first packet but auth so).
            notes.append("to-an-answer")
        else:
            notes.append("unknown-id")
        if isinstance(packet, Error):
            notes += _error_notes(packet, data)
        if packet.request_id in self.probes and not notes:
            self.probes.discard(packet.request_id)
            return "ANSWER"
        kind = "RESPONSE" if isinstance(packet, Response) else "ERROR"
        if kind == "RESPONSE" and not notes:
            self.authenticated = True  # only an accepted auth (or later request) gets one
        return f"{kind}({','.join(notes)})" if notes else kind

    def owed(self) -> bytes:
        # One message per call: the mapper sends what this returns as one
        # message, so a second owed Response waits for the next window.
        if not self.owed_responses:
            return b""
        return encode_packet(Response(self.owed_responses.pop(0)))


def _error_notes(error: Error, data: bytes) -> list[str]:
    """What of an Error's fields breaks the rule of its case, by the checks
    those cases make (an Error is read leniently, so that each field is
    judged on its own): the code's form (three IA5 characters), the code
    from RFC 23's table and the name that goes with it, triggeredAt a valid
    UTC GeneralizedTime, the data at most 8192 bytes."""
    notes = []
    if error_code_problem(data) is not None:
        return ["bad-code"]  # the other fields were read with a guessed code size
    if error.code not in ERROR_CODES:
        notes.append("code-not-in-table")
    elif ERROR_CODES[error.code] != error.name:
        notes.append("name-not-the-code's")
    if check_generalized_time(error.triggered_at) is not None:
        notes.append("bad-time")
    if len(error.data) > MAX_ERROR_DATA:
        notes.append("data-too-long")
    return notes


class BtpServerAlphabet(ProtocolAlphabet):
    protocol = "btp"
    role = "server"
    inputs = INPUTS
    read_window = READ_WINDOW
    writes_per_answer = 2
    word_cases = WORD_CASES

    async def open(
        self,
        runtime: TargetRuntime,
        trace: WireTrace,
        deadline: float,
        tls: ssl.SSLContext | None,
    ) -> LearnConnection:
        if not runtime.url:
            raise ConnectionError(f"target {runtime.target.name} has no url")
        conn = await WebSocketConnection.open(runtime.url, trace, deadline, "learn")
        conn.limit_message_size(MAX_PACKET_SIZE, PACKET_BOUND_OF)
        return _WebSocketLearnConnection(conn)

    def received_bytes(self, received: Any) -> bytes:
        return b"".join(
            message.encode("utf-8") if isinstance(message, str) else message
            for message in received or ()
            if isinstance(message, (bytes, str))
        )

    def new_connection(self, runtime: TargetRuntime) -> ConnectionMapper:
        return ServerConnection(runtime)


ALPHABETS = {"server": BtpServerAlphabet()}

"""Fuzzing a STOMP server (the Swaptacular STOMP profile over TLS 1.3).

The machine opens TLS connections to the target with the harness's client
certificate (as the suite does: conformance/suites/stomp/peer.py) and sends
CONNECTs, SENDs, DISCONNECTs, heart-beats, unsupported frames and mutated
bytes, each built with the reference codec (reference_impl/stomp/frame.py)
and the SMP strategies (reference_impl/stomp/smp_strategies.py), joined and
split into writes at drawn points. Each message is fed to the reference
server core (``ServerConnection``) too; its answers are what may come back.

What the texts allow beyond the plain reference (reference_impl/stomp/
variants.py) is no failure: heart-beat EOLs at any time, other or extra
headers, ERROR bodies of any kind, answers split or joined or late (within
the read deadline), a RECEIPT only for the last of SENDs stored together
(cumulative receipts), and processing a SEND the profile's sender rules
would have the server refuse (a second reference core with
``lenient-sends`` is fed the same bytes; the target may follow either).

Invariants, by case id (conformance/suites/stomp/): the answers' commands
and order; CONNECTED says ``version:1.2``; RECEIPT and CONNECTED carry no
body; a RECEIPT echoes the receipt header (as unescaped, spaces kept, the
first of repeated headers); RECEIPTs in order; an ERROR has ``message`` and,
answering a frame with a receipt, its ``receipt-id``, and the connection
closes after it; the connection stays open where the reference keeps it;
heart-beats come when agreed and an idle connection is kept; every
receipted message is in the store (the ``accepted`` adapter), also after a
cut connection and a restart; TLS 1.2, no certificate, an untrusted one are
refused.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from ..core.pki import run_pki
from ..core.target_errors import TargetError
from ..core.transport import Deadline, DeadlineExceeded, TcpConnection, TlsRefused
from ..suites.stomp.peer import (
    MAX_FRAME_BYTES,
    MAX_HEADER_LINE,
    MAX_HEADERS,
    client_context,
    settings_of,
    summary,
    tls_files,
)
from .machine import FuzzFailure, FuzzMachine, Message, send_action
from .strategies import STOMP_SPECIALS, mutated, stomp_valid_pieces
from reference_impl.stomp.frame import (
    HEARTBEAT,
    SERVER_COMMANDS,
    Frame,
    FrameError,
    FrameParser,
    encode_frame,
)
from reference_impl.stomp.server import ServerConnection
from reference_impl.stomp.smp_strategies import body_text, invalid_messages, valid_messages
from reference_impl.stomp.variants import LENIENT_SENDS

CONNECT = "stomp.connect.server."
FRAME = "stomp.frame.server."
SEND = "stomp.send.server."
RECEIPT = "stomp.receipt.server."
TLS = "stomp.tls.server."

IDLE_SECONDS = 3.0
"""A long pause: a heart-beat interval of up to 2 s agreed must show an EOL
within it, and an idle connection must be kept."""
SHORT_PAUSE = 0.02
QUIET_SECONDS = 0.1
"""How long the end of an example listens for frames nobody asked for."""
STORE_SETTLE_SECONDS = 0.5
POLL_SECONDS = 0.005
IDLE_CLOSE_SECONDS = 1.0
"""A close read this long after the harness's last write is the target
dropping a quiet connection, not an answer to what was sent."""
"""After a cut connection: time for the server to see it end."""

REFUSAL_CASES = {
    "malformed frame": FRAME + "error-then-close-on-malformed-frame",
    "unsupported protocol version": CONNECT + "error-on-no-common-version",
    "missing destination": SEND + "error-on-missing-destination",
    "missing receipt header": SEND + "processes-or-refuses-missing-receipt",
    "missing type header": SEND + "processes-or-refuses-missing-type",
    "missing content-type header": SEND + "processes-or-refuses-missing-content-type",
    "persistent must be true": SEND + "processes-or-refuses-non-persistent",
    "invalid SMP message": SEND + "processes-or-refuses-invalid-smp-body",
}
"""The rule of a refusal, by the ``message`` of the reference's ERROR: a
mutated message (no case of its own) is judged by what the reference made of it."""
GENERIC_REFUSAL = FRAME + "error-then-close-on-malformed-frame"

CASE_IDS = tuple(
    sorted(
        {
            *REFUSAL_CASES.values(),
            CONNECT + "connect-gets-connected",
            CONNECT + "stomp-command-gets-connected",
            CONNECT + "connected-says-version-1-2",
            CONNECT + "keeps-connect-header-spaces",
            CONNECT + "does-not-require-login",
            CONNECT + "does-not-require-passcode",
            CONNECT + "disconnect-gets-receipt",
            CONNECT + "sends-heart-beats",
            CONNECT + "accepts-heart-beats",
            CONNECT + "missing-heart-beat-means-none",
            CONNECT + "keeps-idle-connection",
            FRAME + "error-on-undefined-escape",
            FRAME + "error-on-trailing-backslash",
            FRAME + "accepts-body-with-nul",
            FRAME + "accepts-crlf-line-ends",
            FRAME + "repeated-header-first-wins",
            FRAME + "keeps-header-spaces",
            FRAME + "unescapes-header-values",
            FRAME + "no-body-on-connected-or-receipt",
            FRAME + "error-has-message-header",
            FRAME + "error-carries-receipt-id",
            FRAME + "sends-well-formed-frames",
            RECEIPT + "receipt-id-echoes-receipt",
            RECEIPT + "receipts-in-order",
            RECEIPT + "receipted-message-is-stored",
            RECEIPT + "stored-after-connection-cut",
            RECEIPT + "stored-after-restart",
            TLS + "completes-mutual-handshake",
            TLS + "refuses-tls-1-2",
            TLS + "requires-client-certificate",
            TLS + "refuses-untrusted-client-certificate",
        }
    )
)

# --- messages ----------------------------------------------------------------------------------

CONNECT_DEVIATIONS = (
    ("none", CONNECT + "connect-gets-connected"),
    ("stomp-command", CONNECT + "stomp-command-gets-connected"),
    ("no-login", CONNECT + "does-not-require-login"),
    ("no-passcode", CONNECT + "does-not-require-passcode"),
    ("versions-list", CONNECT + "connect-gets-connected"),
    ("no-common-version", CONNECT + "error-on-no-common-version"),
    ("no-accept-version", CONNECT + "error-on-no-common-version"),
    ("spaced-version", CONNECT + "keeps-connect-header-spaces"),
    ("crlf", FRAME + "accepts-crlf-line-ends"),
)
HEART_BEATS = ("0,0", None, "0,500", "0,1000")
"""The CONNECT's heart-beat header (None: none). The harness never promises
heart-beats of its own (cx 0): a pause would break that promise."""


@st.composite
def connect_messages(draw) -> Message:
    # Half the sessions start with a plain CONNECT, so that SENDs follow.
    deviation, case = draw(
        st.sampled_from(CONNECT_DEVIATIONS[:1] * (len(CONNECT_DEVIATIONS) - 1) + CONNECT_DEVIATIONS)
    )
    heart_beat = draw(st.sampled_from(HEART_BEATS))
    if heart_beat is None and deviation == "none":
        case = CONNECT + "missing-heart-beat-means-none"
    accept = {
        "versions-list": "1.0,1.1,1.2",
        "no-common-version": draw(st.sampled_from(["1.0", "1.1", "1.0,1.1", "2.0"])),
        "spaced-version": draw(st.sampled_from([" 1.2", "1.2 ", " 1.2 "])),
    }.get(deviation, "1.2")
    lines = [b"STOMP" if deviation == "stomp-command" else b"CONNECT"]
    if deviation != "no-accept-version":
        lines.append(b"accept-version:" + accept.encode())
    lines.append(b"host:@@HOST@@")
    if deviation != "no-login":
        lines.append(b"login:@@LOGIN@@")
    if deviation != "no-passcode":
        lines.append(b"passcode:@@PASSCODE@@")
    if heart_beat is not None:
        lines.append(b"heart-beat:" + heart_beat.encode())
    eol = b"\r\n" if deviation == "crlf" else b"\n"
    data = eol.join(lines) + eol + eol + b"\x00"
    return Message(data, case, f"{lines[0].decode()} ({deviation}, heart-beat {heart_beat})")


SEND_DEVIATIONS = (
    ("none", RECEIPT + "receipt-id-echoes-receipt"),
    ("receipt-spaces", FRAME + "keeps-header-spaces"),
    ("receipt-escaped", FRAME + "unescapes-header-values"),
    ("receipt-repeated", FRAME + "repeated-header-first-wins"),
    ("crlf", FRAME + "accepts-crlf-line-ends"),
    ("body-with-nul", FRAME + "accepts-body-with-nul"),
    ("no-destination", SEND + "error-on-missing-destination"),
    ("empty-destination", SEND + "error-on-missing-destination"),
    ("no-type", SEND + "processes-or-refuses-missing-type"),
    ("no-content-type", SEND + "processes-or-refuses-missing-content-type"),
    ("persistent-false", SEND + "processes-or-refuses-non-persistent"),
    ("no-receipt", SEND + "processes-or-refuses-missing-receipt"),
    ("body-not-json", SEND + "processes-or-refuses-non-json-body"),
    ("body-invalid-smp", SEND + "processes-or-refuses-invalid-smp-body"),
    ("undefined-escape", FRAME + "error-on-undefined-escape"),
    ("trailing-backslash", FRAME + "error-on-trailing-backslash"),
)


def _raw_frame(
    command: bytes, headers: list[tuple[bytes, bytes]], body: bytes, eol: bytes
) -> bytes:
    """A frame whose header lines are written as given (placeholders and
    escapes stay as they are); content-length counts the body."""
    lines = [command] + [name + b":" + value for name, value in headers]
    if body:
        lines.append(b"content-length:" + str(len(body)).encode())
    return eol.join(lines) + eol + eol + body + b"\x00"


@st.composite
def send_messages(draw) -> Message:
    deviation, case = draw(st.sampled_from(SEND_DEVIATIONS))
    message = draw(valid_messages())
    body = body_text(message).encode("utf-8")
    type_name = message["type"]
    if deviation == "body-not-json":
        body = body[: draw(st.integers(0, max(0, len(body) - 1)))] or b"{"
    elif deviation == "body-invalid-smp":
        broken, _, _ = draw(invalid_messages())
        type_name = str(broken.get("type", type_name))
        try:
            body = body_text(broken).encode("utf-8")
        except ValueError:  # NaN has no JSON form: a body cut short is as invalid
            body = body[:-1]
    elif deviation == "body-with-nul":
        smuggled = draw(st.integers(0, 10**6))
        body += b"\x00DISCONNECT\nreceipt:smuggled-" + str(smuggled).encode() + b"\n\n"
    receipt = b"@@R@@"
    if deviation == "receipt-spaces":
        receipt = draw(st.sampled_from([b" @@R@@", b"@@R@@ ", b" @@R@@ "]))
    elif deviation == "receipt-escaped":
        receipt = draw(st.sampled_from([b"a\\cb-@@R@@", b"n\\nl-@@R@@", b"b\\\\s-@@R@@"]))
    headers: list[tuple[bytes, bytes]] = []
    if deviation == "empty-destination":
        headers.append((b"destination", b""))
    elif deviation != "no-destination":
        headers.append((b"destination", b"@@DEST@@"))
    if deviation != "no-receipt":
        headers.append((b"receipt", receipt))
    if deviation == "receipt-repeated":
        headers.append((b"receipt", b"second-@@R@@"))
    if deviation != "no-type":
        headers.append((b"type", type_name.encode()))
    if deviation != "no-content-type":
        headers.append((b"content-type", b"application/json"))
    headers.append((b"persistent", b"false" if deviation == "persistent-false" else b"true"))
    if deviation == "undefined-escape":
        headers.append((b"x-note", b"tab\\there"))
    elif deviation == "trailing-backslash":
        headers.append((b"x-note", b"ends\\"))
    eol = b"\r\n" if deviation == "crlf" else b"\n"
    return Message(_raw_frame(b"SEND", headers, body, eol), case, f"SEND {type_name} ({deviation})")


@st.composite
def disconnect_messages(draw) -> Message:
    with_receipt = not draw(st.booleans())
    headers = [(b"receipt", b"bye-@@R@@")] if with_receipt else []
    return Message(
        _raw_frame(b"DISCONNECT", headers, b"", b"\n"),
        CONNECT + "disconnect-gets-receipt",
        f"DISCONNECT ({'receipt' if with_receipt else 'no receipt'})",
    )


heart_beat_messages = st.sampled_from(
    [
        Message(b"\n", CONNECT + "accepts-heart-beats", "heart-beat (LF)"),
        Message(b"\r\n", FRAME + "accepts-crlf-line-ends", "heart-beat (CR LF)"),
    ]
)
other_frames = st.sampled_from(
    [
        Message(
            encode_frame(Frame("SUBSCRIBE", (("id", "0"), ("destination", "/q")))),
            None,
            "SUBSCRIBE",
        ),
        Message(encode_frame(Frame("BEGIN", (("transaction", "t"),))), None, "BEGIN"),
        Message(encode_frame(Frame("ACK", (("id", "1"),))), None, "ACK"),
    ]
)


@st.composite
def stomp_messages(draw) -> Message:
    """One message of a connected session, perhaps mutated."""
    message = draw(
        st.one_of(
            # SENDs carry most of the rules: three in eight messages.
            send_messages(),
            send_messages(),
            send_messages(),
            heart_beat_messages,
            disconnect_messages(),
            other_frames,
            st.builds(lambda data: Message(data, None, "piece"), stomp_valid_pieces),
        )
    )
    if draw(st.integers(0, 3)) == 3:  # one message in four is mutated
        data = draw(mutated(message.data, STOMP_SPECIALS, 3))
        if data != message.data:
            return Message(data, None, f"{message.label} (mutated)")
    return message


cut_lists = st.lists(st.integers(0, 1 << 16), max_size=4)

# --- the reference, fed the same bytes ---------------------------------------------------------


@dataclass
class Expected:
    frame: Frame
    message: int
    kind: str
    """CONNECTED, SEND-RECEIPT, DISCONNECT-RECEIPT or ERROR."""
    stores: int
    """For a SEND-RECEIPT: the store requests it confirms (every one before it too)."""


class Track:
    """One reference core fed what the target is fed, and the target's
    answers matched against its own so far."""

    def __init__(self, name: str, variants: frozenset[str]) -> None:
        self.name = name
        self.core = ServerConnection(variants=variants)
        self.expected: list[Expected] = []
        self.pointer = 0
        self.divergence: FuzzFailure | None = None
        self.stores: list[str | None] = []
        self.confirmed = 0
        self.cases: list[str | None] = []

    @property
    def complete(self) -> bool:
        return self.pointer >= len(self.expected)

    @property
    def closing(self) -> bool:
        return self.core.closing

    def feed(self, data: bytes, case: str | None) -> None:
        index = len(self.cases)
        self.cases.append(case)
        if self.core.closing or self.core.ignore_input:
            return
        was_disconnected = self.core.disconnected
        for request in self.core.receive_data(data):
            self.stores.append(request.message.receipt)
            self.core.stored(request.request_id)
        frames = [
            item
            for item in FrameParser(max_frame_bytes=1 << 22).receive_data(self.core.data_to_send())
            if item is not HEARTBEAT
        ]
        receipts = [i for i, frame in enumerate(frames) if frame.command == "RECEIPT"]
        for i, frame in enumerate(frames):
            if frame.command == "RECEIPT":
                disconnect = not was_disconnected and self.core.disconnected and i == receipts[-1]
                kind = "DISCONNECT-RECEIPT" if disconnect else "SEND-RECEIPT"
            else:
                kind = frame.command
            receipt = frame.get("receipt-id")
            stores = 0
            if kind == "SEND-RECEIPT":
                stores = max(
                    (n + 1 for n, stored in enumerate(self.stores) if stored == receipt), default=0
                )
            self.expected.append(Expected(frame, index, kind, stores))

    def case_of(self, index: int) -> str:
        """The rule a message exercises: its own case, else what the
        reference made of it."""
        case = self.cases[index] if index < len(self.cases) else None
        if case:
            return case
        for item in self.expected:
            if item.message == index:
                if item.kind == "ERROR":
                    return REFUSAL_CASES.get(item.frame.get("message") or "", GENERIC_REFUSAL)
                if item.kind == "CONNECTED":
                    return CONNECT + "connect-gets-connected"
                if item.kind == "DISCONNECT-RECEIPT":
                    return CONNECT + "disconnect-gets-receipt"
                return RECEIPT + "receipt-id-echoes-receipt"
        return GENERIC_REFUSAL

    def fail(self, case: str, message: str, expected: str = "", observed: str = "") -> None:
        if self.divergence is None:
            self.divergence = FuzzFailure(case, message, expected, observed)

    def pending_text(self) -> str:
        return "; ".join(summary(item.frame) for item in self.expected[self.pointer :]) or "(none)"

    def consume(self, frame: Frame) -> None:
        if self.divergence is not None:
            return
        expected = self.expected
        if self.pointer >= len(expected):
            earlier = [
                item
                for item in expected
                if item.kind == "SEND-RECEIPT"
                and frame.command == "RECEIPT"
                and item.frame.get("receipt-id") == frame.get("receipt-id")
            ]
            case = RECEIPT + "receipts-in-order" if earlier else self.case_of(len(self.cases) - 1)
            self.fail(
                case,
                f"the target sent {summary(frame)} where the reference sends nothing more"
                + (" (a RECEIPT for an earlier SEND, after a later one's)" if earlier else ""),
                "(nothing)",
                summary(frame),
            )
            return
        item = expected[self.pointer]
        if frame.command == "RECEIPT" and item.kind == "SEND-RECEIPT":
            # Cumulative receipts: a RECEIPT may stand for the SEND RECEIPTs
            # before it that were stored together.
            named = frame.get("receipt-id")
            q = self.pointer
            while q < len(expected) and expected[q].kind == "SEND-RECEIPT":
                if expected[q].frame.get("receipt-id") == named:
                    self.pointer, item = q, expected[q]
                    break
                q += 1
        case = self.case_of(item.message)
        if frame.command != item.frame.command:
            self.fail(
                case,
                f"the target answered {summary(frame)} where the reference answers "
                f"{summary(item.frame)}",
                summary(item.frame),
                summary(frame),
            )
            return
        problem = frame_problem(item, frame, case)
        if problem:
            self.fail(problem[0], problem[1], summary(item.frame), summary(frame))
            return
        self.pointer += 1
        if item.kind == "SEND-RECEIPT":
            self.confirmed = max(self.confirmed, item.stores)

    def receipted(self) -> list[str]:
        """The receipts of the messages the target's RECEIPTs confirmed."""
        return [receipt for receipt in self.stores[: self.confirmed] if receipt is not None]


def frame_problem(item: Expected, frame: Frame, case: str) -> tuple[str, str] | None:
    """What is wrong with an answer of the right command (None: nothing)."""
    command = frame.command
    if command == "CONNECTED" and frame.get("version") != "1.2":
        return CONNECT + "connected-says-version-1-2", "CONNECTED without version:1.2"
    if command in ("CONNECTED", "RECEIPT") and frame.body:
        return FRAME + "no-body-on-connected-or-receipt", f"{command} with a body"
    if command == "RECEIPT" and frame.get("receipt-id") != item.frame.get("receipt-id"):
        return (
            case,
            f"RECEIPT receipt-id {frame.get('receipt-id')!r}; the receipt header read as the "
            f"reference reads it is {item.frame.get('receipt-id')!r}",
        )
    if command == "ERROR":
        if frame.get("message") is None:
            return FRAME + "error-has-message-header", "ERROR without a message header"
        wanted = item.frame.get("receipt-id")
        if wanted is not None and frame.get("receipt-id") != wanted:
            return (
                FRAME + "error-carries-receipt-id",
                f"ERROR answering a frame with receipt {wanted!r} carries receipt-id "
                f"{frame.get('receipt-id')!r}",
            )
    return None


# --- the machine -------------------------------------------------------------------------------

TLS_PROBES = ("tls-1.2", "no-certificate", "untrusted-certificate")
ASIDES = (
    *("pause",) * 8,
    *("check",) * 8,
    *("cut",) * 2,
    *("restart",) * 2,
    *TLS_PROBES * 3,
    "idle",
)
"""What the ``aside`` rule does, by weight: the 3 s idle pause costs as much
as a hundred sends, so it is rare (and once per example at most)."""
PROBE_CASES = {
    "tls-1.2": TLS + "refuses-tls-1-2",
    "no-certificate": TLS + "requires-client-certificate",
    "untrusted-certificate": TLS + "refuses-untrusted-client-certificate",
}


class StompServerMachine(FuzzMachine):
    protocol = "stomp"
    role = "server"
    case_ids = CASE_IDS

    def __init__(self) -> None:
        super().__init__()
        self.conn: TcpConnection | None = None
        self.tracks: list[Track] = []
        self.parser = self._parser()
        self.connected: Frame | None = None
        self.connect_heart_beat: str | None = None
        self.idled = False
        self.receipted: list[str] = []
        self.last_case: str | None = None
        self.last_write_at = 0.0
        self.closed_at: float | None = None
        """When the target's close was read (monotonic)."""

    @staticmethod
    def _parser() -> FrameParser:
        return FrameParser(
            max_frame_bytes=MAX_FRAME_BYTES,
            max_headers=MAX_HEADERS,
            max_header_line=MAX_HEADER_LINE,
            commands=SERVER_COMMANDS,
        )

    # -- rules: what Hypothesis draws
    @initialize(first=connect_messages(), cuts=cut_lists)
    def start(self, first: Message, cuts: list[int]) -> None:
        self.perform({"do": "connect"})
        self.perform(send_action([first], cuts))

    @precondition(lambda self: self.open)
    @rule(batch=st.lists(stomp_messages(), min_size=1, max_size=4), cuts=cut_lists)
    def send(self, batch: list[Message], cuts: list[int]) -> None:
        self.perform(send_action(batch, cuts))

    @precondition(lambda self: not self.open)
    @rule(first=connect_messages(), cuts=cut_lists)
    def reconnect(self, first: Message, cuts: list[int]) -> None:
        self.perform({"do": "connect"})
        self.perform(send_action([first], cuts))

    @rule(what=st.sampled_from(ASIDES))
    def aside(self, what: str) -> None:
        """Something other than sending: a pause, a look into the store, a
        TLS probe. One rule for all, so that sending stays half the steps."""
        connected = self.open and self.connected is not None
        if what in ("pause", "idle") and not connected:
            what = "tls-1.2"
        if what == "idle" and self.idled:
            what = "pause"  # one long pause per example is enough to judge
        if what in ("check", "cut", "restart") and not (
            self.runtime.has_adapter("accepted") and self.has_receipts
        ):
            what = "pause" if connected else "no-certificate"
        if what in ("pause", "idle"):
            seconds = IDLE_SECONDS if what == "idle" else SHORT_PAUSE
            self.perform({"do": "pause", "seconds": seconds})
        elif what in TLS_PROBES:
            self.perform({"do": "tls", "kind": what})
        else:
            self.perform({"do": "stored", "how": what})

    # -- state
    @property
    def open(self) -> bool:
        return (
            self.conn is not None
            and not self.conn.eof
            and any(t.divergence is None and not t.closing for t in self.tracks)
        )

    @property
    def has_receipts(self) -> bool:
        return bool(self.receipted) or any(t.confirmed for t in self.tracks)

    def best_track(self) -> Track | None:
        alive = [t for t in self.tracks if t.divergence is None]
        return alive[0] if alive else None

    def placeholder_values(self) -> dict[str, bytes | None]:
        cache = self.session.cache
        if "stomp" not in cache:
            runtime = self.runtime
            settings = settings_of(runtime)
            passcode = (
                runtime.credential("passcode").decode("utf-8").rstrip("\r\n").encode()
                if settings.has_passcode
                else None
            )
            cache["stomp"] = {
                "HOST": settings.host_header.encode(),
                "DEST": settings.destination.encode(),
                "LOGIN": None if settings.login is None else settings.login.encode(),
                "PASSCODE": passcode,
            }
        return cache["stomp"]

    def context(self, kind: str) -> ssl.SSLContext:
        cache = self.session.cache
        key = f"stomp-tls-{kind}"
        if key not in cache:
            files = tls_files(self.runtime)
            if kind == "harness":
                cache[key] = client_context(files.ca_file, (files.cert_file, files.key_file))
            elif kind == "tls-1.2":
                cache[key] = client_context(
                    files.ca_file,
                    (files.cert_file, files.key_file),
                    minimum=ssl.TLSVersion.TLSv1_2,
                    maximum=ssl.TLSVersion.TLSv1_2,
                )
            elif kind == "no-certificate":
                cache[key] = client_context(files.ca_file, None)
            else:
                pair = run_pki().cert_pair("untrusted-client")
                cache[key] = client_context(files.ca_file, (str(pair[0]), str(pair[1])))
        return cache[key]

    # -- actions
    async def execute(self, action: dict[str, Any]) -> None:
        do = action["do"]
        if do == "connect":
            await self._connect()
        elif do == "send":
            await self._send(action)
        elif do == "pause":
            await self._pause(float(action["seconds"]))
        elif do == "stored":
            await self._stored(action["how"])
        elif do == "tls":
            await self._tls_probe(action["kind"])
        else:
            raise ValueError(f"unknown action {do!r}")

    def _fail_unreachable(self, what: str) -> None:
        runtime = self.runtime
        if runtime.server is not None and not runtime.server.running():
            raise FuzzFailure(
                self.last_case or TLS + "completes-mutual-handshake",
                f"the target process exited (code {runtime.server.returncode}) after the "
                f"example's earlier messages; its last output:\n{runtime.server.tail(10)}",
            )
        self.session.unresponsive = True
        raise FuzzFailure(TLS + "completes-mutual-handshake", what)

    async def _connect(self) -> None:
        await self._retire()
        runtime = self.runtime
        try:
            self.conn = await TcpConnection.open(
                runtime.host,
                runtime.port,
                self.trace,
                self.deadline,
                "fuzz",
                ssl=self.context("harness"),
            )
        except TlsRefused as exc:
            self._fail_unreachable(
                f"the TLS handshake with the harness's certificate failed: {exc}"
            )
        except (DeadlineExceeded, ConnectionError, OSError) as exc:
            self._fail_unreachable(f"no connection: {exc}")
        self.tracks = [
            Track("plain", frozenset()),
            Track(LENIENT_SENDS, frozenset({LENIENT_SENDS})),
        ]
        self.parser = self._parser()
        self.closed_at = None
        self.connected = None
        self.connect_heart_beat = None

    async def _retire(self) -> None:
        """Leave the current connection: what its RECEIPTs confirmed stays
        to be checked in the store."""
        track = self.best_track()
        if track is not None:
            self.receipted += [r for r in track.receipted() if r not in self.receipted]
        if self.conn is not None:
            self.conn.abort()
            self.conn = None
        self.tracks = []

    async def _send(self, action: dict[str, Any]) -> None:
        assert self.conn is not None
        # What came while the harness did something else (a probe, a store
        # check): a close then is judged as of before this send, when the
        # connection was quiet, not as an answer to it.
        deadline = Deadline(POLL_SECONDS)
        try:
            while not self.conn.eof and await self._read(deadline):
                pass
        except DeadlineExceeded:
            pass
        if self.conn.eof:
            await self._settle()
            return
        messages, writes = self.expand(action)
        for item, data in zip(action["messages"], messages):
            for track in self.tracks:
                track.feed(data, item.get("case"))
            if item.get("case"):
                self.last_case = item["case"]
            if data.startswith((b"CONNECT", b"STOMP")) and self.connect_heart_beat is None:
                self.connect_heart_beat = _header_value(data, b"heart-beat")
        for write in writes:
            self.last_write_at = time.monotonic()
            if not await self.conn.send_quietly(write, f"{len(write)} bytes"):
                break  # the target hung up: the reads below judge whether it might
        await self._settle()

    def _raise_divergence(self) -> None:
        if self.tracks and all(t.divergence is not None for t in self.tracks):
            # The plain reference's reading is the one reported.
            raise self.tracks[0].divergence  # type: ignore[misc]

    async def _read(self, deadline: Deadline) -> bool:
        """One read into the parser and the tracks; False on a close."""
        assert self.conn is not None
        data = await self.conn.receive_some(deadline)
        if not data:
            if self.closed_at is None:
                self.closed_at = time.monotonic()
            return False
        try:
            items = self.parser.receive_data(data)
        except FrameError as exc:
            for track in self.tracks:
                track.fail(
                    FRAME + "sends-well-formed-frames",
                    f"the target sent a malformed frame ({exc.reason}): {exc.data[:200]!r}",
                )
            self._raise_divergence()
            return True
        for item in items:
            if item is HEARTBEAT:
                continue
            self.trace.event(f"decoded: {summary(item)}")
            if item.command == "CONNECTED" and self.connected is None:
                self.connected = item
            for track in self.tracks:
                track.consume(item)
        self._raise_divergence()
        return True

    async def _settle(self) -> None:
        """Read until some reference's answers so far all came (or the
        deadline passed, or the target closed), then judge the close."""
        assert self.conn is not None
        deadline = Deadline(self.deadline)
        while not any(t.divergence is None and t.complete for t in self.tracks):
            try:
                still_open = await self._read(deadline)
            except DeadlineExceeded:
                for track in self.tracks:
                    if track.divergence is None:
                        item = track.expected[track.pointer]
                        track.fail(
                            track.case_of(item.message),
                            f"no answer within {self.deadline:g} s where the reference answers "
                            f"{track.pending_text()}",
                            track.pending_text(),
                            "(nothing)",
                        )
                self._raise_divergence()
                return
            if not still_open:
                for track in self.tracks:
                    if track.divergence is None and not track.complete:
                        item = track.expected[track.pointer]
                        track.fail(
                            self._closed_case(track, item.message),
                            f"the target closed the connection{self._alert()} where the "
                            f"reference answers {track.pending_text()}",
                            track.pending_text(),
                            "(closed)",
                        )
                self._raise_divergence()
        await self._judge_close()

    def _alert(self) -> str:
        alert = self.conn.tls_alert if self.conn is not None else None
        return f" with TLS alert {alert}" if alert else ""

    def _closed_case(self, track: Track, index: int) -> str:
        if self.connected is None and self.conn is not None and self.conn.tls_alert:
            return TLS + "completes-mutual-handshake"
        return track.case_of(index)

    async def _judge_close(self) -> None:
        """Where a reference that has answered everything closes, the target
        must close (within the deadline); where it keeps the connection, so
        must the target."""
        assert self.conn is not None
        done = [t for t in self.tracks if t.divergence is None and t.complete]
        if any(t.closing for t in done) and not self.conn.eof:
            deadline = Deadline(self.deadline)
            try:
                while not self.conn.eof and await self._read(deadline):
                    pass
            except DeadlineExceeded:
                pass
        for track in done:
            if track.divergence is not None:
                continue
            last = len(track.cases) - 1
            if track.closing and not self.conn.eof:
                error = track.core.error
                case = track.case_of(last)
                if error is not None:
                    case = REFUSAL_CASES.get(error, case)
                    if error == "malformed frame" and track.cases[last] in (
                        FRAME + "error-on-undefined-escape",
                        FRAME + "error-on-trailing-backslash",
                    ):
                        case = FRAME + "error-then-close-on-malformed-frame"
                track.fail(
                    case,
                    f"the target kept the connection open {self.deadline:g} s after "
                    + (f"the ERROR ({error})" if error else "the session ended"),
                    "(closed)",
                    "(open)",
                )
            elif not track.closing and self.conn.eof:
                idle = (self.closed_at or time.monotonic()) - self.last_write_at
                case = self._closed_case(track, last)
                if idle >= IDLE_CLOSE_SECONDS:
                    # Closed on its own, long after the last input: an idle drop.
                    case = (
                        CONNECT + "missing-heart-beat-means-none"
                        if self.connect_heart_beat is None
                        else CONNECT + "keeps-idle-connection"
                    )
                track.fail(
                    case,
                    f"the target closed the connection{self._alert()} where the reference keeps "
                    "it open",
                    "(open)",
                    "(closed)",
                )
        self._raise_divergence()

    async def _pause(self, seconds: float) -> None:
        assert self.conn is not None
        long_pause = seconds >= IDLE_SECONDS
        if long_pause:
            self.idled = True
            # Whatever the target does unasked while the connection is quiet
            # (an ERROR, a close) is about keeping it, not about the last message.
            idle_case = (
                CONNECT + "missing-heart-beat-means-none"
                if self.connect_heart_beat is None
                else CONNECT + "keeps-idle-connection"
            )
            for track in self.tracks:
                track.feed(b"", idle_case)
        before = self.conn.trace.total("received")
        deadline = Deadline(seconds)
        try:
            while not self.conn.eof and await self._read(deadline):
                pass
        except DeadlineExceeded:
            pass
        if not self.conn.eof:
            # Late answers (within the deadline) count as answers.
            await self._settle()
        if not long_pause:
            if self.conn.eof:
                await self._judge_close()
            return
        if self.conn.eof and any(t.divergence is None and not t.closing for t in self.tracks):
            case = (
                CONNECT + "missing-heart-beat-means-none"
                if self.connect_heart_beat is None
                else CONNECT + "keeps-idle-connection"
            )
            for track in self.tracks:
                track.fail(
                    case,
                    f"the target closed the connection during a {seconds:g} s pause (CONNECT "
                    f"heart-beat {self.connect_heart_beat or 'missing'}; the harness promised none)",
                    "(open)",
                    "(closed)",
                )
            self._raise_divergence()
        offered = _heart_beat(self.connected.get("heart-beat") if self.connected else None)
        wanted = _heart_beat(self.connect_heart_beat)
        if offered[0] and wanted[1]:
            interval = max(offered[0], wanted[1])
            received = self.conn.trace.total("received") - before
            if interval <= seconds * 1000 * 2 / 3 and received == 0 and not self.conn.eof:
                raise FuzzFailure(
                    CONNECT + "sends-heart-beats",
                    f"heart-beats agreed every {interval} ms (CONNECTED heart-beat "
                    f"{self.connected.get('heart-beat')}, CONNECT {self.connect_heart_beat}); "
                    f"nothing came in {seconds:g} s",
                    f"an EOL every {interval} ms",
                    "(nothing)",
                )

    async def _stored(self, how: str) -> None:
        runtime = self.runtime
        if how == "restart" and not (
            "restart" in runtime.target.capabilities and runtime.target.harness_starts_server
        ):
            how = "cut"
        if how in ("cut", "restart"):
            await self._retire()
            if how == "restart":
                runtime.restart_server(kill=True)
            else:
                await asyncio.sleep(STORE_SETTLE_SECONDS)
        else:
            track = self.best_track()
            if track is not None:
                self.receipted += [r for r in track.receipted() if r not in self.receipted]
        case = {
            "check": RECEIPT + "receipted-message-is-stored",
            "cut": RECEIPT + "stored-after-connection-cut",
            "restart": RECEIPT + "stored-after-restart",
        }[how]
        try:
            output = runtime.run_adapter("accepted", timeout=30.0)
        except TargetError as exc:
            raise FuzzFailure(case, f"the accepted adapter failed: {exc}") from None
        held = set()
        for line in output.splitlines():
            try:
                held.add(json.loads(line).get("receipt"))
            except (ValueError, AttributeError):
                continue
        missing = [r for r in self.receipted if r not in held]
        self.trace.event(f"store ({how}): {len(self.receipted)} receipted, {len(missing)} missing")
        if missing:
            raise FuzzFailure(
                case,
                f"{len(missing)} of the {len(self.receipted)} receipted message(s) are not in the "
                f"store ({how}): receipts {missing[:5]}",
                f"receipts {self.receipted[:5]} stored",
                f"missing {missing[:5]}",
            )

    async def _tls_probe(self, kind: str) -> None:
        runtime = self.runtime
        try:
            conn = await TcpConnection.open(
                runtime.host,
                runtime.port,
                self.trace,
                self.deadline,
                f"probe {kind}",
                ssl=self.context(kind),
            )
        except (TlsRefused, ConnectionError, DeadlineExceeded, OSError):
            return  # refused: as it must be
        try:
            connect = Message(
                b"CONNECT\naccept-version:1.2\nhost:@@HOST@@\nlogin:@@LOGIN@@\npasscode:@@PASSCODE@@\n\n\x00",
                None,
                "CONNECT",
            )
            messages, _ = self.expand(send_action([connect], []))
            if not await conn.send_quietly(messages[0], "CONNECT"):
                return
            parser = self._parser()
            deadline = Deadline(self.deadline)
            while True:
                try:
                    data = await conn.receive_some(deadline)
                except DeadlineExceeded:
                    return
                if not data:
                    return
                try:
                    items = parser.receive_data(data)
                except FrameError:
                    return
                for item in items:
                    if item is not HEARTBEAT and item.command == "CONNECTED":
                        raise FuzzFailure(
                            PROBE_CASES[kind],
                            f"a connection with {kind} got a STOMP session: {summary(item)}",
                            "a refused handshake (or a close)",
                            summary(item),
                        )
        finally:
            conn.abort()

    async def finish(self) -> None:
        if self.conn is None or self.conn.eof or not self.tracks:
            return
        if not any(t.divergence is None and t.complete for t in self.tracks):
            await self._settle()
        # Frames nobody asked for, arriving late, and a close nobody asked for.
        deadline = Deadline(QUIET_SECONDS)
        try:
            while not self.conn.eof and await self._read(deadline):
                pass
        except DeadlineExceeded:
            pass
        if self.conn.eof:
            await self._judge_close()

    async def close(self) -> None:
        if self.conn is not None:
            self.conn.abort()
            self.conn = None


def _header_value(data: bytes, name: bytes) -> str | None:
    for line in data.split(b"\x00", 1)[0].replace(b"\r\n", b"\n").split(b"\n")[1:]:
        if not line:
            break
        key, _, value = line.partition(b":")
        if key == name:
            return value.decode("utf-8", "replace")
    return None


def _heart_beat(value: str | None) -> tuple[int, int]:
    try:
        x, y = (value or "0,0").split(",")
        return int(x), int(y)
    except ValueError:
        return 0, 0

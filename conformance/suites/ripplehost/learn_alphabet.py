"""The Ripple host alphabet of ``conformance learn`` (conformance/learn/):
the harness as the initiator, the target as the acceptor (server role).

Inputs are built with the reference codec (reference_impl/ripplehost/
frame.py); the harness numbers its MSGs even from 0, as an initiator must.
Outputs are the target's messages as words: ``RPY(<body type>)``,
``ERR(<error code>)``, with what breaks a rule spelled in the word
(``,unknown-msgno``, ``,users-not-swapped``, ``,version=X``, an ERR body
whose type is not ``error``: ``,type=X``; a host-id without a valid
hostname: ``,bad-hostname``).

Unprompted traffic: after its host-id RPY the acceptor may send MSGs of its
own (variant ``unprompted-traffic``: the text lets both hosts send MSGs;
the profile forbids them only before the host-id RPY). Such a MSG, with an
odd msgno not already awaiting our answer, is dropped and counted; one
before the host-id RPY, with an even msgno, or reusing an unanswered msgno
is a word (``MSG(<type>)``, ``MSG(even-msgno)``, ``MSG(reused-msgno)``).
The harness never answers them: an acceptor may not require it.

Read window: 0.3 s. The reference acceptor answers on loopback within a
few milliseconds, but a conformant node may answer later (variant
``late-answers``, as late as half the harness's read deadline: 0.15 s
here), and on a loaded 2-core machine another 0.15 s of scheduling delay
happens: at a window of 0.15 s (late answers at 0.075 s) the variant
learnt once to a model with one state too many. A late answer that still
misses the window disagrees with the cache and is repeated
(conformance/learn/mapper.py), not learnt.
"""

from __future__ import annotations

from typing import Any

from conformance.core.target_runtime import TargetRuntime
from conformance.learn.alphabet import AbstractInput, ConnectionMapper, ProtocolAlphabet, Received
from reference_impl.ripplehost.frame import (
    MAX_MSGNO,
    TRAILER,
    VERSION,
    Frame,
    FrameError,
    FrameParser,
    Reassembler,
    encode_body,
    encode_frame,
    frames_bytes,
    message_frames,
)
from reference_impl.ripplehost.node import MAX_HOLD_SECONDS
from reference_impl.ripplehost.session import HOST_ID, valid_hostname

READ_WINDOW = 0.3
HOSTNAME = "learner.ripple.test"
HOLD_SECONDS = MAX_HOLD_SECONDS
"""``reused-outstanding-msgno`` holds a MSG for the longest the reference
takes, far longer than any query lasts: its msgno stays outstanding for the
rest of the connection. The hold and the MSG reusing its msgno are one
input, so that the rule shows on one transition: as two inputs, the
equivalence oracle would have to draw them one after the other to find the
state between them."""
OTHER_VERSION = "9.9"
USERS = ("alice.learner", "bob.learner")

_S = "ripplehost.{}.server.{}"


def _case(area: str, name: str) -> str:
    return _S.format(area, name)


INPUTS = (
    AbstractInput(
        "host-id",
        "MSG host-id (next even msgno)",
        (
            _case("hostid", "replies-with-host-id"),
            _case("hostid", "sends-nothing-before-host-id-reply"),
        ),
    ),
    AbstractInput(
        "ping",
        "MSG ping (next even msgno)",
        (_case("msgno", "reply-carries-msgno"), _case("hostid", "refuses-msg-before-host-id")),
    ),
    AbstractInput(
        "reused-msgno",
        "MSG ping reusing the msgno of our last MSG (answered or not)",
        (_case("msgno", "closes-on-reused-msgno"),),
    ),
    AbstractInput(
        "odd-msgno", "MSG ping with an odd msgno", (_case("msgno", "closes-on-wrong-parity"),)
    ),
    AbstractInput(
        "rpy-unknown-msgno",
        f"RPY for msgno {MAX_MSGNO}, which the acceptor never sent",
        (_case("msgno", "closes-on-reply-to-unknown-msgno"),),
    ),
    AbstractInput(
        "garbage",
        "a line that is no frame header",
        (
            _case("frame", "closes-on-malformed-header"),
            _case("frame", "closes-silently-on-malformed-header"),
        ),
    ),
    AbstractInput(
        "double-space-header",
        "MSG ping whose header separates two fields with two spaces",
        (_case("frame", "closes-on-malformed-header"),),
    ),
    AbstractInput(
        "non-canonical-msgno",
        "MSG ping whose msgno has a leading zero",
        (_case("frame", "closes-on-non-canonical-number"),),
    ),
    AbstractInput(
        "missing-end",
        "MSG ping with XYZ instead of END after its content",
        (_case("frame", "closes-on-missing-end"),),
    ),
    AbstractInput(
        "bare-lf-trailer",
        "MSG ping ending END LF instead of END CRLF",
        (_case("frame", "closes-on-missing-end"),),
    ),
    AbstractInput(
        "short-size",
        "MSG ping whose size is one byte short of its content",
        (_case("frame", "closes-on-wrong-size"),),
    ),
    AbstractInput(
        "crlf-before-end",
        "MSG ping whose content ends in CRLF, counted in its size, before END",
        (_case("chunk", "counts-crlf-before-end"),),
    ),
    AbstractInput(
        "trailing-content",
        "MSG whose content is a ping object followed by more bytes",
        (_case("message", "closes-on-content-not-json-object"),),
    ),
    AbstractInput(
        "other-version",
        f"MSG ping of version {OTHER_VERSION}",
        (
            _case("message", "err-for-unsupported-version"),
            _case("message", "speaks-version-in-use"),
        ),
    ),
    AbstractInput(
        "unknown-type",
        "MSG of a type no host knows",
        (_case("message", "err-for-unknown-type"),),
    ),
    AbstractInput(
        "chunked-ping",
        "MSG ping in two frames",
        (_case("chunk", "reassembles-chunked"),),
    ),
    AbstractInput(
        "interleaved-pings",
        "two MSG pings in two frames each, their frames interleaved",
        (_case("chunk", "reassembles-interleaved"),),
    ),
    AbstractInput(
        "node-ping",
        "MSG ping in a node frame (to-user, from-user)",
        (_case("node", "accepts-node-frame"), _case("node", "answer-swaps-users")),
    ),
    AbstractInput(
        "reused-outstanding-msgno",
        f"MSG hold {HOLD_SECONDS:g} s, then at once a MSG ping with the same msgno (still awaiting "
        "its answer)",
        (_case("msgno", "closes-on-reused-msgno"),),
        needs="hold",
    ),
    AbstractInput(
        "ping-me",
        "MSG ping-me count 2: the acceptor sends two MSGs of its own",
        (_case("msgno", "uses-odd-msgnos"), _case("msgno", "unique-outstanding-msgnos")),
        needs="ping-me",
    ),
)

WORD_CASES = {
    "MSG(even-msgno)": (_case("msgno", "uses-odd-msgnos"),),
    "MSG(reused-msgno)": (_case("msgno", "unique-outstanding-msgnos"),),
    "unknown-msgno": (_case("msgno", "reply-carries-msgno"),),
    "users-not-swapped": (_case("node", "answer-swaps-users"),),
    "version=": (_case("message", "speaks-version-in-use"),),
    "type=": (
        _case("message", "err-for-unknown-type"),
        _case("message", "err-for-unsupported-version"),
        _case("hostid", "refuses-msg-before-host-id"),
    ),
    "bad-hostname": (_case("hostid", "replies-with-host-id"),),
}
"""Output words (or parts of them) -> the cases whose rule they break."""


class AcceptorConnection(ConnectionMapper):
    """One association with the harness as the initiator."""

    def __init__(self) -> None:
        self.next_msgno = 0
        self.last_msgno: int | None = None
        self.ours: dict[int, tuple[str, str] | None] = {}
        """Our MSGs awaiting an answer: msgno -> the users of a node frame (or None)."""
        self.identified = False
        self.theirs: set[int] = set()
        """The acceptor's MSGs we have not answered (we answer none)."""
        self.parser = FrameParser()
        self.reassembler = Reassembler()
        self.broken = False

    # -- inputs
    def _msgno(self) -> int:
        msgno = self.next_msgno
        self.next_msgno += 2
        self.last_msgno = msgno
        return msgno

    def _msg(self, body: dict[str, Any], msgno: int | None = None, **options: Any) -> bytes:
        msgno = self._msgno() if msgno is None else msgno
        users = (options["to_user"], options["from_user"]) if "to_user" in options else None
        self.ours[msgno] = users
        return frames_bytes(message_frames("MSG", msgno, body, **options))

    def concrete(self, name: str) -> bytes:
        ping = {"type": "ping"}
        if name == "host-id":
            return self._msg({"type": "host-id", "hostname": HOSTNAME})
        if name == "ping":
            return self._msg(ping)
        if name == "reused-msgno":
            return self._msg(ping, 0 if self.last_msgno is None else self.last_msgno)
        if name == "odd-msgno":
            return self._msg(ping, self.next_msgno + 1)
        if name == "rpy-unknown-msgno":
            return encode_frame(
                Frame("RPY", VERSION, MAX_MSGNO, False, encode_body({"type": "pong"}))
            )
        if name == "garbage":
            return b"HELLO THERE\r\n"
        content = encode_body(ping)
        if name == "double-space-header":
            return (
                f"MSG {VERSION}  {self._msgno()} . {len(content)}\r\n".encode() + content + TRAILER
            )
        if name == "non-canonical-msgno":
            msgno = self._msgno()
            self.ours[msgno] = None
            return f"MSG {VERSION} 0{msgno} . {len(content)}\r\n".encode() + content + TRAILER
        if name in ("missing-end", "bare-lf-trailer", "short-size"):
            msgno = self._msgno()
            self.ours[msgno] = None
            size = len(content) - 1 if name == "short-size" else len(content)
            trailer = {"missing-end": b"XYZ\r\n", "bare-lf-trailer": b"END\n"}.get(name, TRAILER)
            return f"MSG {VERSION} {msgno} . {size}\r\n".encode() + content + trailer
        if name == "crlf-before-end":
            msgno = self._msgno()
            self.ours[msgno] = None
            return encode_frame(Frame("MSG", VERSION, msgno, False, content + b"\r\n"))
        if name == "trailing-content":
            msgno = self._msgno()
            self.ours[msgno] = None
            return encode_frame(Frame("MSG", VERSION, msgno, False, content + b" x"))
        if name == "other-version":
            return self._msg(ping, version=OTHER_VERSION)
        if name == "unknown-type":
            return self._msg({"type": "learner-unknown-type"})
        if name == "chunked-ping":
            return self._msg(ping, chunk_size=8)
        if name == "interleaved-pings":
            first = self._msg(ping, chunk_size=8)
            second = self._msg(ping, chunk_size=8)
            a, b = _split_frames(first), _split_frames(second)
            return a[0] + b[0] + a[1] + b[1]
        if name == "node-ping":
            return self._msg(ping, to_user=USERS[0], from_user=USERS[1])
        if name == "reused-outstanding-msgno":
            held = self._msg({"type": "hold", "seconds": HOLD_SECONDS})
            return held + self._msg(ping, self.last_msgno)
        if name == "ping-me":
            return self._msg({"type": "ping-me", "count": 2})
        raise KeyError(name)

    # -- outputs
    def received(self, data: bytes) -> Received:
        got = Received()
        if self.broken or not data:
            return got
        try:
            frames = self.parser.receive_data(data)
            failure = None
        except FrameError as exc:
            frames, failure = exc.frames, exc
        for frame in frames:
            try:
                message = self.reassembler.add(frame)
            except FrameError as exc:
                failure = exc
                break
            if message is not None:
                word = self._word(message)
                if word is None:
                    got.unprompted += 1
                else:
                    got.words.append(word)
        if failure is not None:
            self.broken = True
            got.words.append(f"UNDECODABLE({failure.reason})")
        return got

    def _word(self, message: Any) -> str | None:
        kind = str(message.body.get("type"))
        notes = []
        if message.version != VERSION:
            notes.append(f"version={message.version}")
        if message.type == "MSG":
            if not self.identified:
                return f"MSG({kind})"
            if message.msgno % 2 == 0:
                return "MSG(even-msgno)"
            if message.msgno in self.theirs:
                return "MSG(reused-msgno)"
            self.theirs.add(message.msgno)
            return None
        label = kind if message.type == "RPY" else str(message.body.get("error"))
        if message.type == "ERR" and kind != "error":
            notes.append(f"type={kind}")
        if kind == HOST_ID and not valid_hostname(message.body.get("hostname")):
            notes.append("bad-hostname")
        if message.msgno not in self.ours:
            notes.append("unknown-msgno")
        else:
            users = self.ours.pop(message.msgno)
            if users is not None and (message.to_user, message.from_user) != (users[1], users[0]):
                notes.append("users-not-swapped")
            if kind == HOST_ID and message.type == "RPY":
                self.identified = True
        return f"{message.type}({','.join([label, *notes])})"


def _split_frames(data: bytes) -> list[bytes]:
    """The encoded frames of ``data`` (a message chunked in two), each with its trailer."""
    parts = data.split(TRAILER)
    return [part + TRAILER for part in parts if part]


class RipplehostServerAlphabet(ProtocolAlphabet):
    protocol = "ripplehost"
    role = "server"
    inputs = INPUTS
    read_window = READ_WINDOW
    word_cases = WORD_CASES

    def tls_context(self, runtime: TargetRuntime) -> Any:
        from .preflight import client_context, tls_enabled

        return client_context(runtime) if tls_enabled(runtime) else None

    def new_connection(self, runtime: TargetRuntime) -> ConnectionMapper:
        return AcceptorConnection()


ALPHABETS = {"server": RipplehostServerAlphabet()}

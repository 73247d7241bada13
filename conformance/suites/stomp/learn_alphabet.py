"""The STOMP alphabet of ``conformance learn`` (conformance/learn/): the
harness as a client over TLS with its client certificate, the target in
the server role.

Inputs are built with the reference codec (reference_impl/stomp/frame.py)
and the suite's own frames (peer.py: the CONNECT headers a target's params
ask for, a valid SEND with a unique SMP body and receipt). Outputs are the
server's frames as words: ``CONNECTED``, ``RECEIPT``, ``ERROR``, with what
breaks a rule spelled in the word (``CONNECTED(version=X)``,
``RECEIPT(unknown-id)``, ``RECEIPT(body)``, ``ERROR(no-message)``).

Only inputs whose answer every conformant server gives are in the
alphabet: a SEND the profile lets a server either process or refuse
(missing type, non-JSON body...) would make a conformant variant
(``lenient-sends``) learn to another model. CONNECT carries no heart-beat
header, so none is agreed; EOLs after a frame are allowed all the same
(the grammar's ``NULL *( EOL )``, variants ``unprompted-traffic`` and
``extra-eols``) and are dropped and counted once the server has sent a
frame; an EOL before its first frame is a word (``EOL``).

Read window: 0.4 s. The reference node answers a SEND after writing it to
its store (an fsync) and the harness reads through TLS: tens of
milliseconds on loopback, more on a loaded 2-core machine; a conformant
node may answer as late as half the harness's read deadline (variant
``late-answers``: 0.2 s here), which leaves 0.2 s for the rest. A late
answer that still misses the window disagrees with the cache and is
repeated (conformance/learn/mapper.py), not learnt.
"""

from __future__ import annotations

import secrets
import ssl

from conformance.core.target_runtime import TargetRuntime
from conformance.learn.alphabet import AbstractInput, ConnectionMapper, ProtocolAlphabet, Received
from reference_impl.stomp.frame import (
    HEARTBEAT,
    SERVER_COMMANDS,
    Frame,
    FrameError,
    FrameParser,
    encode_frame,
)

from .peer import (
    MAX_FRAME_BYTES,
    MAX_HEADER_LINE,
    MAX_HEADERS,
    STOMP_VERSION,
    client_context,
    settings_of,
    tls_files,
    valid_send,
)

READ_WINDOW = 0.4
NO_COMMON_VERSION = "9.9"

_S = "stomp.{}.server.{}"


def _case(area: str, name: str) -> str:
    return _S.format(area, name)


INPUTS = (
    AbstractInput(
        "CONNECT",
        "CONNECT accept-version:1.2 with the target's host, login and passcode",
        (
            _case("connect", "connect-gets-connected"),
            _case("connect", "connected-says-version-1-2"),
            _case("connect", "does-not-require-login"),
        ),
    ),
    AbstractInput(
        "STOMP",
        "STOMP (the 1.2 name of CONNECT), same headers",
        (_case("connect", "stomp-command-gets-connected"),),
    ),
    AbstractInput(
        "CONNECT-no-common-version",
        f"CONNECT accept-version:{NO_COMMON_VERSION} only (a version no STOMP server speaks; 1.0 "
        "would not do: a 1.2 server may speak 1.0 too, as RabbitMQ does)",
        (_case("connect", "error-on-no-common-version"),),
    ),
    AbstractInput(
        "SEND",
        "a valid SEND (profile headers, SMP body, a fresh receipt)",
        (
            _case("receipt", "receipt-id-echoes-receipt"),
            _case("frame", "no-body-on-connected-or-receipt"),
        ),
    ),
    AbstractInput(
        "SEND-no-destination",
        "a valid SEND without its destination header",
        (_case("send", "error-on-missing-destination"),),
    ),
    AbstractInput(
        "SEND-undefined-escape",
        "a valid SEND with a header value holding the undefined escape \\t",
        (_case("frame", "error-on-undefined-escape"),),
    ),
    AbstractInput(
        "SEND-trailing-backslash",
        "a valid SEND with a header value ending in a lone backslash",
        (_case("frame", "error-on-trailing-backslash"),),
    ),
    AbstractInput(
        "SEND-repeated-receipt",
        "a valid SEND with two receipt headers (the first counts)",
        (_case("frame", "repeated-header-first-wins"),),
    ),
    AbstractInput(
        "SEND-escaped-receipt",
        "a valid SEND whose receipt holds an escaped colon (\\c): the RECEIPT names it unescaped",
        (_case("frame", "unescapes-header-values"),),
    ),
    AbstractInput(
        "SEND-crlf",
        "a valid SEND with CRLF line ends",
        (_case("frame", "accepts-crlf-line-ends"),),
    ),
    AbstractInput(
        "DISCONNECT",
        "DISCONNECT with a receipt",
        (_case("connect", "disconnect-gets-receipt"),),
    ),
    AbstractInput(
        "garbage",
        "bytes that are no frame (an unknown command)",
        (_case("frame", "error-then-close-on-malformed-frame"),),
    ),
    AbstractInput("EOL", "a lone EOL (a heart-beat, none agreed)", ()),
)

WORD_CASES = {
    "version=": (_case("connect", "connected-says-version-1-2"),),
    "unknown-id": (_case("receipt", "receipt-id-echoes-receipt"),),
    "RECEIPT(body)": (_case("frame", "no-body-on-connected-or-receipt"),),
    "no-message": (_case("frame", "error-has-message-header"),),
}


class ServerConnection(ConnectionMapper):
    def __init__(self, runtime: TargetRuntime) -> None:
        self.runtime = runtime
        self.settings = settings_of(runtime)
        self.receipts: set[str] = set()
        """Receipts asked for and not yet confirmed."""
        self.framed = False
        """The server has sent a frame: EOLs may follow it."""
        self.parser = FrameParser(
            max_frame_bytes=MAX_FRAME_BYTES,
            max_headers=MAX_HEADERS,
            max_header_line=MAX_HEADER_LINE,
            commands=SERVER_COMMANDS,
        )
        self.broken = False

    def _send(self, label: str, *, drop: str | None = None, eol: bytes = b"\n") -> bytes:
        message, frame = valid_send(self.settings.destination, f"learn-{label}")
        self.receipts.add(message.receipt)
        if drop is not None:
            frame = frame.without(drop)
        return encode_frame(frame, eol=eol)

    def concrete(self, name: str) -> bytes:
        if name in ("CONNECT", "STOMP"):
            headers = self.settings.connect_headers(self.runtime)
            return encode_frame(Frame(name, headers))
        if name == "CONNECT-no-common-version":
            headers = self.settings.connect_headers(self.runtime, accept_version=NO_COMMON_VERSION)
            return encode_frame(Frame("CONNECT", headers))
        if name == "SEND":
            return self._send("send")
        if name == "SEND-no-destination":
            return self._send("no-destination", drop="destination")
        if name == "SEND-escaped-receipt":
            message, frame = valid_send(self.settings.destination, "learn-escaped")
            receipt = f"learn:{secrets.token_hex(4)}"
            self.receipts.add(receipt)  # encode_frame escapes the colon as \c
            return encode_frame(frame.with_headers(("receipt", receipt)))
        if name == "SEND-crlf":
            return self._send("crlf", eol=b"\r\n")
        if name in ("SEND-undefined-escape", "SEND-trailing-backslash"):
            data = self._send("escape")
            bad = b"x-learn:a\\tb\n" if name == "SEND-undefined-escape" else b"x-learn:a\\\n"
            return data.replace(b"\n", b"\n" + bad, 1)
        if name == "SEND-repeated-receipt":
            data = self._send("repeated")
            extra = f"receipt:other-{secrets.token_hex(4)}\n".encode()
            head, _, rest = data.partition(b"\n\n")
            return head + b"\n" + extra + b"\n" + rest
        if name == "DISCONNECT":
            receipt = f"learn-disconnect-{secrets.token_hex(4)}"
            self.receipts.add(receipt)
            return encode_frame(Frame("DISCONNECT", (("receipt", receipt),)))
        if name == "garbage":
            return b"HELLO\n\n\x00"
        if name == "EOL":
            return b"\n"
        raise KeyError(name)

    def received(self, data: bytes) -> Received:
        got = Received()
        if self.broken or not data:
            return got
        try:
            items = self.parser.receive_data(data)
        except FrameError as exc:
            self.broken = True
            got.words.append(f"UNDECODABLE({exc.reason})")
            return got
        for item in items:
            if item is HEARTBEAT:
                if self.framed:
                    got.unprompted += 1
                else:
                    got.words.append("EOL")
                continue
            self.framed = True
            got.words.append(self._word(item))
        return got

    def _word(self, frame: Frame) -> str:
        notes = []
        if frame.command == "CONNECTED":
            version = frame.get("version")
            if version != STOMP_VERSION:
                notes.append(f"version={version}")
        elif frame.command == "RECEIPT":
            receipt = frame.get("receipt-id")
            if receipt in self.receipts:
                self.receipts.discard(receipt)
            else:
                notes.append("unknown-id")
            if frame.body:
                notes.append("body")
        elif frame.command == "ERROR":
            if not frame.has("message"):
                notes.append("no-message")
        return f"{frame.command}({','.join(notes)})" if notes else frame.command


class StompServerAlphabet(ProtocolAlphabet):
    protocol = "stomp"
    role = "server"
    inputs = INPUTS
    read_window = READ_WINDOW
    word_cases = WORD_CASES

    def tls_context(self, runtime: TargetRuntime) -> ssl.SSLContext:
        files = tls_files(runtime)
        return client_context(files.ca_file, (files.cert_file, files.key_file))

    def new_connection(self, runtime: TargetRuntime) -> ConnectionMapper:
        return ServerConnection(runtime)


ALPHABETS = {"server": StompServerAlphabet()}

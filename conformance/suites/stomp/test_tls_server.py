"""TLS, target as server (Swaptacular STOMP profile, "STOMP Connections").

"STOMP connections MUST be secured by using Transport Layer Security version
1.3 or higher. Both the client and the server must present a certificate,
which the other side verifies before proceeding with the connection. ...
Servers MUST require clients to authenticate themselves by presenting a
trusted certificate chain."

How a refusal shows: in TLS 1.2 the server checks the client's certificate
inside the handshake, so a refusal fails the handshake. In TLS 1.3 the
client's handshake is over once it has sent its Finished message; the server
judges the certificate after that, and its refusal (an alert such as
``certificate required`` or ``unknown CA``, or a bare close) meets the
client on its first read. So each negative case sends a CONNECT and reads
with the run's deadline: a refusal is a failed handshake, an alert, or the
connection closed before any frame; a frame (CONNECTED or even ERROR) means
the server let the unauthenticated client in; silence until the deadline
means it neither refused nor served it, and fails the case too (the text
wants the certificate verified "before proceeding with the connection").
"""

from __future__ import annotations

import ssl

from conformance.core.requirements import requirement
from conformance.core.transport import DeadlineExceeded, PeerClosed, ProtocolViolation, TlsRefused
from reference_impl.stomp.frame import Frame, encode_frame

from .conftest import UNTRUSTED
from .peer import StompPeer, summary
from .prerequisites import CONNECTED, TLS

CITE = "Swaptacular STOMP profile, STOMP Connections"


async def refusal_of(open_peer, stomp, target, label: str, **tls) -> str:
    """Open a connection with ``tls`` options and send CONNECT; what the
    target did, as a sentence, when it refused; AssertionError when it did
    not."""
    try:
        peer: StompPeer = await open_peer(label, **tls)
    except TlsRefused as exc:
        return f"handshake refused: {exc}"
    version = peer.conn.tls.version() if peer.conn.tls else "?"
    # Quietly: a TLS 1.3 server may already have sent its alert and closed.
    await peer.conn.send_quietly(
        encode_frame(Frame("CONNECT", stomp.connect_headers(target))),
        "CONNECT (to see whether the server proceeds)",
    )
    try:
        frame = await peer.next_or_close(f"a refusal of the {label}")
    except DeadlineExceeded:
        raise AssertionError(
            f"with a {label} ({version}), the target neither refused the connection (no alert, no close) nor "
            f"answered CONNECT within {peer.conn.deadline:g} s: the connection must be refused, not left "
            "hanging"
        ) from None
    except PeerClosed as exc:
        return f"connection closed ({exc})"
    if frame is None:
        alert = peer.conn.tls_alert
        return f"after the {version} handshake, " + (
            f"TLS alert {alert}" if alert else "the connection was closed"
        )
    if frame.command == "ERROR":
        # A server judging the certificate above TLS (after the handshake)
        # refuses the session with ERROR, then must close (STOMP 1.2, ERROR).
        await peer.close_after_error(frame, f"CONNECT from a {label}")
        return f"ERROR then close: {summary(frame)}"
    raise AssertionError(
        f"with a {label} ({version}) the target proceeded with the connection: it answered "
        f"CONNECT with {summary(frame)}"
    )


@requirement(
    "stomp.tls.server.completes-mutual-handshake",
    "MUST",
    f'{CITE} ("Both the client and the server must present a certificate, which the other '
    'side verifies before proceeding"; TLS 1.3 or higher)',
)
async def test_completes_mutual_handshake(open_peer, stomp, target):
    """The valid counterpart of every TLS case: TLS 1.3 with the harness's
    trusted client certificate (whose name, ``stomp-client.invalid``, is no
    name of the host it connects from), and the server proceeds: it answers
    CONNECT with application data rather than an alert or a close. Which
    data, a CONNECTED frame, an ERROR, bytes that are no frame or a frame
    trickling in too slowly, is for connect-gets-connected and the frame
    rules to judge, not for this case: the handshake did complete."""
    try:
        peer: StompPeer = await open_peer("harness certificate, TLS 1.3")
    except TlsRefused as exc:
        raise AssertionError(
            f"the TLS 1.3 handshake with the harness's trusted client certificate failed: {exc}"
        ) from None
    # The harness's context allows nothing below TLS 1.3: no version check needed here.
    await peer.send_frame(Frame("CONNECT", stomp.connect_headers(target)), "CONNECT")
    what = "an answer to CONNECT on a mutually authenticated connection"
    try:
        frame = await peer.next_or_close(what)
    except (DeadlineExceeded, ProtocolViolation) as exc:
        if not peer.arrivals:
            raise AssertionError(
                f"after a TLS 1.3 handshake with a trusted client certificate the target sent "
                f"nothing: {exc}"
            ) from None
        # Bytes came over the authenticated connection: the server proceeded.
        peer.conn.trace.event(
            f"the target proceeded after the handshake (it sent application data); what it "
            f"sent is judged by {CONNECTED}: {exc}"
        )
        return
    if frame is None:
        alert = peer.conn.tls_alert
        if alert is None and peer.arrivals:
            peer.conn.trace.event(
                f"the target proceeded after the handshake (it sent application data), then "
                f"closed without a frame; judged by {CONNECTED}"
            )
            return
        raise AssertionError(
            "after the TLS 1.3 handshake the target refused the harness's trusted client "
            "certificate: "
            + (f"TLS alert {alert}" if alert else "it closed the connection without sending a byte")
        )


@requirement(
    "stomp.tls.server.refuses-tls-1-2",
    "MUST",
    f'{CITE} ("STOMP connections MUST be secured by using Transport Layer Security version 1.3 or '
    'higher")',
    depends=[TLS],
)
async def test_refuses_tls_1_2(open_peer, stomp, target):
    """A client offering at most TLS 1.2, with the trusted certificate: the
    handshake must fail, or, if it completes, the server must not serve
    STOMP over it (an alert, a close, or ERROR then close answering CONNECT)."""
    await refusal_of(
        open_peer,
        stomp,
        target,
        "client offering only TLS 1.2 (trusted certificate)",
        minimum=ssl.TLSVersion.TLSv1_2,
        maximum=ssl.TLSVersion.TLSv1_2,
    )


@requirement(
    "stomp.tls.server.requires-client-certificate",
    "MUST",
    f'{CITE} ("Servers MUST require clients to authenticate themselves by presenting a trusted '
    'certificate chain")',
    depends=[TLS],
)
async def test_requires_client_certificate(open_peer, stomp, target):
    await refusal_of(open_peer, stomp, target, "client without a certificate", cert=None)


@requirement(
    "stomp.tls.server.refuses-untrusted-client-certificate",
    "MUST",
    f'{CITE} ("Servers MUST require clients to authenticate themselves by presenting a trusted '
    'certificate chain")',
    depends=[TLS],
)
async def test_refuses_untrusted_client_certificate(open_peer, stomp, target):
    """The certificate comes from the run's second CA, which nobody trusts."""
    await refusal_of(
        open_peer, stomp, target, "client certificate from an untrusted CA", cert=UNTRUSTED
    )

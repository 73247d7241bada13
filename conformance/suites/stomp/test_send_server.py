"""SEND frames that break STOMP 1.2 or the Swaptacular profile, target as
server.

STOMP 1.2, SEND: the ``destination`` header is REQUIRED, and "If the server
cannot successfully process the SEND frame for any reason, the server MUST
send the client an ERROR frame and then close the connection." A SEND
without a destination cannot be processed: there is nowhere to put it.

The profile adds headers "every SEND command MUST include" (``receipt``,
``type``, ``content-type``; ``persistent`` "MUST have the value true") and
JSON bodies carrying SMP messages. Those MUSTs bind the node that *sends*
(the client cases ``stomp.send.client.*`` check them); no sentence of the
profile, of STOMP 1.2 or of SMP 2.1 tells a server to refuse a SEND that
lacks them. A server may process such a SEND (RabbitMQ, for one, stores
anything with a destination) or refuse it; what the texts oblige it to do
is STOMP 1.2's SEND rule: either process it (and then a requested receipt
gets its RECEIPT) or send an ERROR and close. So each case below, one per
way of breaking the profile, passes either outcome and fails a server that
does neither: silence, a close without ERROR, an ERROR with the connection
left open, another frame. Whether a server *should* refuse them has no
level in the texts (the coverage table gives this reason).
"""

from __future__ import annotations

import secrets

from conformance.core.requirements import requirement
from reference_impl.stomp.frame import Frame, encode_frame

from .peer import StompPeer, summary, valid_send
from .prerequisites import DISCONNECT_RECEIPT, MISSING_DESTINATION, RECEIPT_ECHO, SESSION

SEND_RULE = (
    'STOMP 1.2, SEND ("If the server cannot successfully process the SEND frame for any reason, the server '
    'MUST send the client an ERROR frame and then close the connection")'
)
PROFILE = "Swaptacular STOMP profile, A Subset of the STOMP Protocol"
PROCESS_OR_REFUSE = (
    f'{SEND_RULE} and RECEIPT ("sent ... once a server has successfully processed a client frame '
    'that requests a receipt"; the sentence of the profile the SEND breaks binds the client only)'
)
SESSION_AND_ECHO = [*SESSION, RECEIPT_ECHO]
PLAIN_REFUSAL = [*SESSION_AND_ECHO, MISSING_DESTINATION]
"""The profile cases rely on the plain ERROR-then-close answer to a SEND the
server cannot process: a server that never closes after an ERROR fails that
case once, not these six."""


@requirement(
    "stomp.send.server.error-on-missing-destination",
    "MUST",
    f'STOMP 1.2, SEND ("It has one REQUIRED header, destination"); {SEND_RULE}',
    depends=SESSION_AND_ECHO,
)
async def test_error_on_missing_destination(connected_peer, stomp):
    peer = await connected_peer("SEND without destination")
    message, frame = valid_send(stomp.destination, "nodest")
    await peer.send_frame(frame.without("destination"), "SEND without destination")
    await peer.await_error_then_close(
        f"a SEND receipt:{message.receipt} without a destination header"
    )


async def processed_or_refused(peer: StompPeer, receipt: str, what: str) -> str:
    """The answer to a SEND ``what`` carrying ``receipt``: its RECEIPT, or an
    ERROR then a close; anything else fails the case."""
    answer = await peer.next_or_close(f"a RECEIPT or an ERROR for {what}")
    if answer is None:
        raise AssertionError(
            f"after {what} the {peer.closed_text()} without an ERROR frame: a server that cannot "
            "process a SEND MUST send an ERROR frame, then close; one that can sends the RECEIPT"
        )
    if answer.command == "RECEIPT":
        got = answer.get("receipt-id")
        assert got == receipt, (
            f"{what} got a RECEIPT with receipt-id:{got!r}, not {receipt!r}: {summary(answer)}"
        )
        return "processed"
    if answer.command == "ERROR":
        await peer.close_after_error(answer, what)
        return "refused"
    raise AssertionError(
        f"{what} must get its RECEIPT (processed) or an ERROR then a close (refused); the target "
        f"sent {summary(answer)}"
    )


async def send_broken(connected_peer, stomp, label: str, change, what: str) -> None:
    peer = await connected_peer(what)
    message, frame = valid_send(stomp.destination, label)
    broken = change(frame)
    await peer.send_frame(broken, what)
    await processed_or_refused(peer, message.receipt, f"{what} (receipt:{message.receipt})")


@requirement(
    "stomp.send.server.processes-or-refuses-missing-type",
    "MUST",
    f'{PROCESS_OR_REFUSE} ("every SEND command MUST include ... type", {PROFILE})',
    depends=PLAIN_REFUSAL,
)
async def test_processes_or_refuses_missing_type(connected_peer, stomp):
    await send_broken(
        connected_peer, stomp, "notype", lambda f: f.without("type"), "a SEND without type"
    )


@requirement(
    "stomp.send.server.processes-or-refuses-missing-content-type",
    "MUST",
    f'{PROCESS_OR_REFUSE} ("every SEND command MUST include ... content-type", {PROFILE})',
    depends=PLAIN_REFUSAL,
)
async def test_processes_or_refuses_missing_content_type(connected_peer, stomp):
    await send_broken(
        connected_peer,
        stomp,
        "nocontenttype",
        lambda f: f.without("content-type"),
        "a SEND without content-type",
    )


@requirement(
    "stomp.send.server.processes-or-refuses-non-persistent",
    "MUST",
    f'{PROCESS_OR_REFUSE} ("persistent MUST have the value true", {PROFILE})',
    depends=PLAIN_REFUSAL,
)
async def test_processes_or_refuses_non_persistent(connected_peer, stomp):
    await send_broken(
        connected_peer,
        stomp,
        "notpersistent",
        lambda f: f.with_headers(("persistent", "false")),
        "a SEND with persistent:false",
    )


@requirement(
    "stomp.send.server.processes-or-refuses-non-json-body",
    "MUST",
    f'{PROCESS_OR_REFUSE} ("Every Swaptacular node MUST support the JSON serialization format", the '
    f"body here claims application/json and is not JSON; {PROFILE})",
    depends=PLAIN_REFUSAL,
)
async def test_processes_or_refuses_non_json_body(connected_peer, stomp):
    """The valid body cut one byte short: content-type application/json, not JSON."""

    def cut(frame: Frame) -> Frame:
        return Frame("SEND", frame.headers, frame.body[:-1])

    await send_broken(
        connected_peer, stomp, "notjson", cut, "a SEND whose application/json body is not JSON"
    )


@requirement(
    "stomp.send.server.processes-or-refuses-invalid-smp-body",
    "MUST",
    f"{PROCESS_OR_REFUSE}; SMP 2.1, ConfigureAccount (the body is JSON but not a valid message of its type)",
    depends=PLAIN_REFUSAL,
)
async def test_processes_or_refuses_invalid_smp_body(connected_peer, stomp):
    """A ConfigureAccount whose ``negligible_amount`` is a string: JSON, and
    not SMP 2.1 (a float, by the text)."""
    import json

    def break_smp(frame: Frame) -> Frame:
        body = json.loads(frame.body)
        body["negligible_amount"] = "not a number"
        return Frame("SEND", frame.headers, json.dumps(body, separators=(",", ":")).encode("utf-8"))

    await send_broken(
        connected_peer,
        stomp,
        "badsmp",
        break_smp,
        "a SEND whose JSON body is not a valid SMP ConfigureAccount (negligible_amount a string)",
    )


@requirement(
    "stomp.send.server.processes-or-refuses-missing-receipt",
    "MUST",
    f'{SEND_RULE} ("every SEND command MUST include ... receipt", {PROFILE}, binds the client only); STOMP '
    '1.2, RECEIPT ("the receipt is also a cumulative acknowledgment that all the previous frames have been '
    'received")',
    depends=[*PLAIN_REFUSAL, DISCONNECT_RECEIPT],
)
async def test_processes_or_refuses_missing_receipt(connected_peer, stomp):
    """A SEND without receipt can get no RECEIPT of its own: the harness
    sends it together with DISCONNECT receipt:..., whose RECEIPT shows the
    SEND was taken; the other conformant answer is an ERROR, then a close."""
    peer = await connected_peer("SEND without receipt")
    message, frame = valid_send(stomp.destination, "noreceipt")
    closing = f"after-noreceipt-{secrets.token_hex(4)}"
    # One write: a server that refuses the SEND and closes has then read
    # both frames, and its close does not reset the connection under its ERROR.
    data = encode_frame(frame.without("receipt")) + encode_frame(
        Frame("DISCONNECT", (("receipt", closing),))
    )
    await peer.send_raw(data, f"SEND without receipt, then DISCONNECT receipt:{closing}")
    await processed_or_refused(
        peer, closing, f"a SEND without receipt followed by DISCONNECT receipt:{closing}"
    )

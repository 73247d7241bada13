"""Receipt semantics, target as server (profile "STOMP Connections" and its
footnote 2; STOMP 1.2 "RECEIPT").

The wire shows RECEIPT frames; whether the message behind one was kept
lies behind the server. Targets with capability ``accepted`` print what
they hold through the adapter of docs/stomp-adapter.md, and the storage
cases read it (without it they are not applicable; the two wire rules,
receipt-id echo and receipt order, apply to every server). Every SEND is a
valid one: the profile's required headers (``receipt``, ``type``,
``content-type: application/json``, ``persistent:true``) and a valid SMP
body whose ``creditor_id`` is drawn afresh, so the harness finds its own
messages among whatever else the node holds. A RECEIPT is cumulative
(footnote 2), so the cases wait for the RECEIPT of the SEND they judge and
let RECEIPTs of earlier SENDs be left out.

Levels: STOMP 1.2 "RECEIPT": "A RECEIPT frame MUST include the header
receipt-id, where the value is the value of the receipt header in the frame
which this is a receipt for"; a RECEIPT "is sent ... once a server has
successfully processed a client frame". The profile: a client "MUST
consider a message to be successfully delivered, only after a RECEIPT
command has been received from the server, confirming that the message has
been processed", footnote 2: "Every STOMP RECEIPT command confirms the
delivery of all preceding messages". That client MUST is only sound if a
server's RECEIPT is true when it is sent, so the server side of it is a MUST
too: a receipted message is kept, whatever happens to the connection or the
process after the RECEIPT went out.
"""

from __future__ import annotations

import asyncio

from conformance.core.requirements import NODE_STATE, requirement
from conformance.core.transport import Deadline, WireTrace
from reference_impl.stomp.frame import Frame, encode_frame

from .adapter import ACCEPTED, RESTART, find_own
from .own_messages import OwnMessage, own_message, own_messages
from .peer import StompPeer, summary
from .prerequisites import ACCEPTED_STATE, SESSION

RECEIPT_CITE = "STOMP 1.2, RECEIPT"
PROFILE = "Swaptacular STOMP profile, STOMP Connections"
FOOTNOTE = f'{PROFILE}, footnote 2 ("Every STOMP RECEIPT command confirms the delivery of all preceding messages")'
STORED = (
    f'{PROFILE} ("MUST consider a message to be successfully delivered, only after a RECEIPT ... confirming '
    'that the message has been processed"); ' + RECEIPT_CITE
)

ECHO = "stomp.receipt.server.receipt-id-echoes-receipt"
IS_STORED = "stomp.receipt.server.receipted-message-is-stored"
STORED_BASIS = (
    "erratum: STOMP-E4 the profile's sentence binds the client; that a server's RECEIPT "
    "of a SEND means the message is kept (delivered, not only received as STOMP 1.2 says) is "
    "the erratum's reading, on what RabbitMQ and swpt_stomp do and what their clients rely on"
)

IN_ORDER_COUNT = 20
"""SENDs of receipts-in-order: enough that a node storing them in parallel
(a pool of writers) finishes some out of order."""
PIPELINED_COUNT = 50
"""SENDs of receipt-confirms-pipelined-sends, written in one go, so that a
node with a write-behind for bursts has a burst."""
RESTART_COUNT = 3
SETTLE_AFTER_CUT = 1.0
"""Seconds the harness lets the node notice a cut connection (and take
back what it would take back) before reading what it holds. Not a deadline
for anything the node must send."""


def send_frame(message: OwnMessage) -> Frame:
    return Frame("SEND", message.headers(), message.body.encode("utf-8"))


async def send_one(peer: StompPeer, message: OwnMessage, note: str) -> None:
    await peer.send_frame(send_frame(message), note)


async def send_all(peer: StompPeer, messages: list[OwnMessage], note: str) -> None:
    """All SENDs in one write: pipelined, none waits for a RECEIPT."""
    data = b"".join(encode_frame(send_frame(m)) for m in messages)
    await peer.send_raw(
        data,
        f"{note}: {len(messages)} SEND frames, receipt:{messages[0].receipt} .. "
        f"receipt:{messages[-1].receipt}",
    )


async def next_receipt(peer: StompPeer, what: str) -> Frame:
    """The next frame, which must be a RECEIPT (the SENDs are valid: an
    ERROR or another frame here fails the case, showing it). Its own
    deadline: one RECEIPT each, however many come."""
    frame = await peer.next_frame(what, Deadline(peer.conn.deadline))
    assert frame.command == "RECEIPT", (
        f"awaiting {what}, the target sent {summary(frame)}; every SEND was valid (the profile's headers, a "
        "valid SMP body), so a RECEIPT was due"
    )
    return frame


async def receipts_until(
    peer: StompPeer, messages: list[OwnMessage], last: OwnMessage, what: str
) -> list[str]:
    """The receipt-ids of the RECEIPTs that come, in arrival order, up to
    and including the one for ``last``. Receipts for other SENDs may be
    skipped: footnote 2 makes one RECEIPT confirm every preceding message,
    and Swaptacular's own server (swpt_stomp) sends a RECEIPT only for the
    last of the SENDs confirmed together. Bounded: a target sending RECEIPTs
    without end fails."""
    got: list[str] = []
    for _ in range(2 * len(messages) + 8):
        frame = await next_receipt(peer, f"the RECEIPT of {what}")
        receipt_id = frame.get("receipt-id")
        got.append(receipt_id)
        if receipt_id == last.receipt:
            return got
    raise AssertionError(
        f"{len(got)} RECEIPTs, none for {what} (receipt:{last.receipt}): receipt-ids {got[:10]}..."
    )


def note_records(trace: WireTrace, records, found, when: str) -> None:
    trace.event(
        f"accepted adapter {when}: {len(records)} record(s); ours stored: {len(found.stored)}, "
        f"altered: {len(found.altered)}, missing: {len(found.missing)}"
    )


@requirement(
    ECHO,
    "MUST",
    f'{RECEIPT_CITE} ("A RECEIPT frame MUST include the header receipt-id, where the value '
    'is the value of the receipt header in the frame which this is a receipt for")',
    depends=SESSION,
)
async def test_receipt_id_echoes_receipt(connected_peer, smp_destination):
    """One valid SEND with a fresh receipt value: the RECEIPT's receipt-id
    is that value, byte for byte (after STOMP unescaping). A wire rule:
    it needs no adapter."""
    peer = await connected_peer("receipt-id echo")
    message = own_message(smp_destination, "echo")
    await send_one(peer, message, "a valid SEND")
    frame = await next_receipt(peer, "the RECEIPT for the SEND")
    assert frame.has("receipt-id"), f"the RECEIPT has no receipt-id header: {summary(frame)}"
    assert frame.get("receipt-id") == message.receipt, (
        f"the SEND had receipt:{message.receipt}, the RECEIPT says receipt-id:{frame.get('receipt-id')!r}: "
        f"{summary(frame)}"
    )


@requirement(
    "stomp.receipt.server.receipts-in-order",
    "MUST",
    f'{FOOTNOTE}; {RECEIPT_CITE} ("Since STOMP is stream based, the receipt is also a cumulative '
    'acknowledgment")',
    depends=(ECHO,),
    errata=["STOMP-E4"],
    basis="erratum: STOMP-E4 footnote 2 as the harness applies it to SENDs: each RECEIPT confirms "
    "every SEND before it, so one for an earlier SEND after a later one's goes backwards (swpt_stomp's "
    "client acknowledges its source queue up to the receipt-id)",
)
async def test_receipts_in_order(connected_peer, smp_destination):
    """20 SENDs written at once; once the RECEIPT of the 20th arrives, a
    21st SEND: the RECEIPTs up to the 21st's come in the order of their
    SENDs (some may be left out: one RECEIPT confirms all preceding
    messages). Footnote 2 makes a RECEIPT cumulative, so a RECEIPT for an
    earlier SEND after one for a later SEND names a message already
    confirmed: a client following the profile has let it go (Swaptacular's
    swpt_stomp acknowledges its source queue up to the receipt-id, AMQP
    basic.ack multiple, and an acknowledgement going backwards is a channel
    error there: RabbitMQ's 406 PRECONDITION_FAILED "unknown delivery
    tag"). The 21st SEND bounds the wait for stragglers without a timed
    silence. No adapter is needed."""
    peer = await connected_peer("pipelined SENDs")
    messages = own_messages(smp_destination, IN_ORDER_COUNT + 1, "order")
    burst, closing = messages[:-1], messages[-1]
    await send_all(peer, burst, f"{IN_ORDER_COUNT} valid SENDs in one write")
    got = await receipts_until(peer, burst, burst[-1], f"SEND {IN_ORDER_COUNT}")
    await send_one(
        peer, closing, f"SEND {IN_ORDER_COUNT + 1}, after the RECEIPT of SEND {IN_ORDER_COUNT}"
    )
    got += await receipts_until(peer, messages, closing, f"SEND {IN_ORDER_COUNT + 1}")
    number = {m.receipt: n for n, m in enumerate(messages, start=1)}
    unknown = [r for r in got if r not in number]
    assert not unknown, f"RECEIPTs whose receipt-id names no SEND of this connection: {unknown[:5]}"
    order = [number[r] for r in got]
    for before, after in zip(order, order[1:]):
        assert after > before, (
            f"the RECEIPT for SEND {after} came after the RECEIPT for SEND {before}: receipts by SEND number, in "
            f"the order they arrived: {order}"
        )


@requirement(
    "stomp.receipt.server.receipt-confirms-pipelined-sends",
    "MUST",
    FOOTNOTE,
    needs=(ACCEPTED,),
    depends=(ECHO, IS_STORED),
    errata=["STOMP-E4"],
    basis="erratum: STOMP-E4 footnote 2 as the harness applies it to SENDs: a RECEIPT confirms that "
    "every SEND before it was processed (stored), not only received as STOMP 1.2 says; RabbitMQ "
    "receipts a SEND on the broker's confirm",
    shares=[ACCEPTED_STATE],
)
async def test_receipt_confirms_pipelined_sends(
    connected_peer, smp_destination, accepted_messages, wire_trace
):
    """50 SENDs written at once; the moment the RECEIPT of the last one
    arrives, the adapter must show all 50: that RECEIPT confirms the
    delivery of every preceding message (footnote 2), however the node
    batches a burst. (RECEIPTs arriving before it are read past, not
    judged: their order is receipts-in-order's rule.)"""
    peer = await connected_peer("pipelined SENDs")
    messages = own_messages(smp_destination, PIPELINED_COUNT, "burst")
    await send_all(peer, messages, f"{PIPELINED_COUNT} valid SENDs in one write")
    await receipts_until(peer, messages, messages[-1], f"SEND {PIPELINED_COUNT}")
    records = await accepted_messages(f"right after the RECEIPT of SEND {PIPELINED_COUNT}")
    found = find_own(records, messages)
    note_records(wire_trace, records, found, f"after the RECEIPT of SEND {PIPELINED_COUNT}")
    problems = found.problems(messages)
    assert not problems, (
        f"the RECEIPT of the last of {PIPELINED_COUNT} pipelined SENDs (receipt-id {messages[-1].receipt}) confirms "
        f"all of them, yet {len(problems)} are not stored as sent: "
        + "; ".join(problems[:5])
        + (f"; ... ({len(problems) - 5} more)" if len(problems) > 5 else "")
    )


@requirement(
    IS_STORED,
    "MUST",
    STORED,
    needs=(ACCEPTED,),
    depends=(ECHO,),
    shares=[ACCEPTED_STATE],
    errata=["STOMP-E4"],
    basis=STORED_BASIS,
)
async def test_receipted_message_is_stored(
    connected_peer, smp_destination, accepted_messages, wire_trace
):
    """One SEND; right after its RECEIPT the adapter shows it with the body,
    destination, type and content-type sent. The connection stays open: a
    node that only stores once the client leaves, or stores later in the
    background, fails here."""
    peer = await connected_peer("one SEND")
    message = own_message(smp_destination, "stored")
    await send_one(peer, message, "a valid SEND")
    await receipts_until(peer, [message], message, "the SEND")
    records = await accepted_messages("right after the RECEIPT, the connection still open")
    found = find_own(records, [message])
    note_records(wire_trace, records, found, "after the RECEIPT")
    problems = found.problems([message])
    assert not problems, f"the target receipted a SEND it does not hold: {problems[0]}"


@requirement(
    "stomp.receipt.server.stored-after-connection-cut",
    "MUST",
    STORED,
    needs=(ACCEPTED,),
    depends=(IS_STORED,),
    shares=[ACCEPTED_STATE],
    errata=["STOMP-E4"],
    basis=STORED_BASIS,
)
async def test_stored_after_connection_cut(
    connected_peer, smp_destination, accepted_messages, wire_trace
):
    """One SEND; the moment its RECEIPT arrives the harness aborts the TCP
    connection (RST, no DISCONNECT, no TLS close_notify), lets the node
    notice, and reads what it holds: the receipted message is still there.
    A node that treats the connection as a transaction and rolls it back
    when it breaks fails here."""
    peer = await connected_peer("cut after the RECEIPT")
    message = own_message(smp_destination, "cut")
    await send_one(peer, message, "a valid SEND")
    await receipts_until(peer, [message], message, "the SEND")
    peer.conn.trace.event("harness aborts the connection (TCP RST) right after the RECEIPT")
    peer.conn.abort()
    await asyncio.sleep(SETTLE_AFTER_CUT)
    records = await accepted_messages(f"{SETTLE_AFTER_CUT:g} s after the connection was cut")
    found = find_own(records, [message])
    note_records(wire_trace, records, found, "after the cut")
    problems = found.problems([message])
    assert not problems, (
        f"after the connection was cut right after its RECEIPT, the target no longer holds the "
        f"SEND: {problems[0]}"
    )


@requirement(
    "stomp.receipt.server.stored-after-restart",
    "MUST",
    STORED,
    needs=(ACCEPTED, RESTART),
    depends=(IS_STORED,),
    shares=[ACCEPTED_STATE, NODE_STATE],
    errata=["STOMP-E4"],
    basis=STORED_BASIS,
)
async def test_stored_after_restart(
    connected_peer, smp_destination, accepted_messages, restart_target_server, wire_trace
):
    """3 SENDs, each once the previous one is receipted (no burst: burst
    handling is receipt-confirms-pipelined-sends' rule); the moment the
    last RECEIPT arrives the harness kills the server's process group with
    SIGKILL (nothing gets a chance to flush), starts it again, and reads
    what it holds: every receipted message survived. A node that
    acknowledges from memory and writes later fails here."""
    peer = await connected_peer("SENDs, then SIGKILL")
    messages = own_messages(smp_destination, RESTART_COUNT, "restart")
    for number, message in enumerate(messages, start=1):
        await send_one(peer, message, f"valid SEND {number} of {RESTART_COUNT}")
        await receipts_until(peer, [message], message, f"SEND {number}")
    wire_trace.event(
        "harness kills the server (SIGKILL) right after the last RECEIPT and starts it again"
    )
    await restart_target_server()
    peer.conn.abort()
    records = await accepted_messages("after the server was killed and restarted")
    found = find_own(records, messages)
    note_records(wire_trace, records, found, "after the restart")
    problems = found.problems(messages)
    assert not problems, (
        f"{len(problems)} of the {len(messages)} receipted SENDs are gone after SIGKILL and restart: "
        + "; ".join(problems)
    )

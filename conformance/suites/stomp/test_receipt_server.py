"""Receipt semantics, target as server (profile "STOMP Connections" and its
footnote 2; STOMP 1.2 "RECEIPT").

The wire shows RECEIPT frames; whether the message behind one was kept
lies behind the server. Targets with capability ``accepted`` print what
they hold through the adapter of docs/stomp-adapter.md, and the storage
cases read it (without it they are not applicable; the two wire rules,
receipt-id echo and receipt order, apply to every server). Every SEND is a valid one:
the profile's required headers (``receipt``, ``type``, ``content-type:
application/json``, ``persistent:true``) and a valid SMP body whose
``creditor_id`` is drawn afresh, so the harness finds its own messages
among whatever else the node holds.

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

from conformance.core.requirements import requirement
from conformance.core.transport import Deadline
from reference_impl.stomp.frame import Frame

from .adapter import ACCEPTED, RESTART, OwnMessage, find_own, own_message, own_messages
from .prerequisites import CONNECTED

RECEIPT_CITE = "STOMP 1.2, RECEIPT"
PROFILE = "Swaptacular STOMP profile, STOMP Connections"
FOOTNOTE = f"{PROFILE}, footnote 2 (\"Every STOMP RECEIPT command confirms the delivery of all preceding messages\")"
STORED = f"{PROFILE} (\"MUST consider a message to be successfully delivered, only after a RECEIPT ... confirming " \
         "that the message has been processed\"); " + RECEIPT_CITE

ECHO = "stomp.receipt.server.receipt-id-echoes-receipt"
IS_STORED = "stomp.receipt.server.receipted-message-is-stored"

IN_ORDER_COUNT = 20
"""SENDs of receipts-in-order: enough that a node storing them in parallel
(a pool of writers) finishes some out of order."""
PIPELINED_COUNT = 50
"""SENDs of receipt-confirms-pipelined-sends, written in one go, so that a
node with a write-behind for bursts has a burst."""
RESTART_COUNT = 10
SETTLE_AFTER_CUT = 1.0
"""Seconds the harness lets the node notice a cut connection (and take
back what it would take back) before reading what it holds. Not a deadline
for anything the node must send."""


def send_frame(message: OwnMessage) -> Frame:
    return Frame("SEND", message.headers(), message.body.encode("utf-8"))


async def send_all(peer, messages: list[OwnMessage], note: str) -> None:
    """All SENDs in one write: pipelined, none waits for a RECEIPT."""
    await peer.send_many([send_frame(m) for m in messages], note)


async def next_receipt(peer, what: str, deadline: Deadline) -> Frame:
    """The next frame, which must be a RECEIPT (the SENDs are valid: an
    ERROR or another frame here fails the case, showing it)."""
    frame = await peer.next_frame(what, deadline)
    assert frame.command == "RECEIPT", (
        f"awaiting {what}, the target sent {frame.command} instead: {frame!r}; every SEND was valid "
        "(profile headers, valid SMP body), so a RECEIPT is due")
    return frame


async def receipts_for(peer, messages: list[OwnMessage], deadline_seconds: float, until: str | None = None
                       ) -> list[str]:
    """The receipt-ids of the RECEIPTs that come for ``messages``, in the
    order they arrive: all of them, or up to the one for ``until``. Each
    RECEIPT has its own deadline; one naming no SEND of ours fails the case
    (a receipt-id must echo the receipt: ECHO passed for a single SEND)."""
    wanted = {m.receipt for m in messages}
    got: list[str] = []
    while len(got) < len(messages):
        frame = await next_receipt(peer, f"RECEIPT {len(got) + 1} of {len(messages)} pipelined SENDs",
                                   Deadline(deadline_seconds))
        receipt_id = frame.get("receipt-id")
        assert receipt_id in wanted and receipt_id not in got, (
            f"RECEIPT with receipt-id {receipt_id!r}, which is "
            f"{'a second RECEIPT for one SEND' if receipt_id in got else 'no receipt of the SENDs sent'}: {frame!r}")
        got.append(receipt_id)
        if receipt_id == until:
            break
    return got


def note_records(trace, records, found, when: str) -> None:
    trace.event(f"accepted adapter {when}: {len(records)} record(s); ours stored: {len(found.stored)}, "
                f"altered: {len(found.altered)}, missing: {len(found.missing)}")


@requirement(ECHO, "MUST", f"{RECEIPT_CITE} (\"A RECEIPT frame MUST include the header receipt-id, where the value "
             "is the value of the receipt header in the frame which this is a receipt for\")",
             depends=(CONNECTED,))
async def test_receipt_id_echoes_receipt(connected_peer, smp_destination):
    """One valid SEND with a fresh receipt value: the RECEIPT's receipt-id
    is that value, byte for byte (after STOMP unescaping). A wire rule:
    it needs no adapter."""
    peer = await connected_peer("receipt-id echo")
    message = own_message(smp_destination, "echo")
    await peer.send(send_frame(message), "a valid SEND")
    frame = await next_receipt(peer, "the RECEIPT for the SEND", Deadline(peer.deadline))
    assert frame.has("receipt-id"), f"the RECEIPT has no receipt-id header: {frame!r}"
    assert frame.get("receipt-id") == message.receipt, (
        f"the SEND had receipt:{message.receipt}, the RECEIPT says receipt-id:{frame.get('receipt-id')!r}: {frame!r}")


@requirement("stomp.receipt.server.receipts-in-order", "MUST",
             f"{FOOTNOTE}; {RECEIPT_CITE} (\"Since STOMP is stream based, the receipt is also a cumulative "
             "acknowledgment\")", depends=(ECHO,))
async def test_receipts_in_order(connected_peer, smp_destination):
    """20 SENDs written at once: their RECEIPTs come in the order the SENDs
    were sent. A RECEIPT confirms every preceding message (footnote 2), so a
    RECEIPT for a later SEND before the one for an earlier SEND confirms the
    earlier one before its own processing was reported: the node receipts
    each message as its own processing ends, not in stream order, and a
    later one finishing first makes a RECEIPT claim what is not yet true.
    Receipt order is how the wire shows it; no adapter is needed."""
    peer = await connected_peer("pipelined SENDs")
    messages = own_messages(smp_destination, IN_ORDER_COUNT, "order")
    await send_all(peer, messages, f"{IN_ORDER_COUNT} valid SENDs in one write")
    got = await receipts_for(peer, messages, peer.deadline)
    sent = [m.receipt for m in messages]
    if got != sent:
        first = next(i for i, (a, b) in enumerate(zip(got, sent)) if a != b)
        raise AssertionError(
            f"RECEIPT {first + 1} is for SEND {sent.index(got[first]) + 1} (receipt-id {got[first]}), while SEND "
            f"{first + 1} (receipt:{sent[first]}) had no RECEIPT yet; order of the receipt-ids by SEND number: "
            f"{[sent.index(r) + 1 for r in got]}")


@requirement("stomp.receipt.server.receipt-confirms-pipelined-sends", "MUST", FOOTNOTE,
             needs=(ACCEPTED,), depends=(ECHO, IS_STORED))
async def test_receipt_confirms_pipelined_sends(connected_peer, smp_destination, accepted_messages, wire_trace):
    """50 SENDs written at once; the moment the RECEIPT of the last one
    arrives, the adapter must show all 50: that RECEIPT confirms the
    delivery of every preceding message (footnote 2), however the node
    batches a burst. (Receipts arriving before it are read past, not
    judged: their order is receipts-in-order's rule.)"""
    peer = await connected_peer("pipelined SENDs")
    messages = own_messages(smp_destination, PIPELINED_COUNT, "burst")
    await send_all(peer, messages, f"{PIPELINED_COUNT} valid SENDs in one write")
    last = messages[-1].receipt
    await receipts_for(peer, messages, peer.deadline, until=last)
    records = await accepted_messages(f"right after the RECEIPT of SEND {PIPELINED_COUNT}")
    found = find_own(records, messages)
    note_records(wire_trace, records, found, f"after the RECEIPT of SEND {PIPELINED_COUNT}")
    problems = found.problems(messages)
    assert not problems, (
        f"the RECEIPT of the last of {PIPELINED_COUNT} pipelined SENDs (receipt-id {last}) confirms all of them, "
        f"yet {len(problems)} are not stored as sent: " + "; ".join(problems[:5])
        + (f"; ... ({len(problems) - 5} more)" if len(problems) > 5 else ""))


@requirement(IS_STORED, "MUST", STORED, needs=(ACCEPTED,), depends=(ECHO,))
async def test_receipted_message_is_stored(connected_peer, smp_destination, accepted_messages, wire_trace):
    """One SEND; right after its RECEIPT the adapter shows it with the body,
    destination, type and content-type sent. The connection stays open: a
    node that only stores once the client leaves, or stores later in the
    background, fails here."""
    peer = await connected_peer("one SEND")
    message = own_message(smp_destination, "stored")
    await peer.send(send_frame(message), "a valid SEND")
    frame = await next_receipt(peer, "the RECEIPT for the SEND", Deadline(peer.deadline))
    assert frame.get("receipt-id") == message.receipt, f"a RECEIPT for another frame: {frame!r}"
    records = await accepted_messages("right after the RECEIPT, the connection still open")
    found = find_own(records, [message])
    note_records(wire_trace, records, found, "after the RECEIPT")
    problems = found.problems([message])
    assert not problems, f"the target receipted a SEND it does not hold: {problems[0]}"


@requirement("stomp.receipt.server.stored-after-connection-cut", "MUST", STORED,
             needs=(ACCEPTED,), depends=(IS_STORED,))
async def test_stored_after_connection_cut(connected_peer, smp_destination, accepted_messages, wire_trace):
    """One SEND; the moment its RECEIPT arrives the harness aborts the TCP
    connection (RST, no DISCONNECT), lets the node notice, and reads what it
    holds: the receipted message is still there. A node that treats the
    connection as a transaction and rolls it back when it breaks fails here."""
    peer = await connected_peer("cut after the RECEIPT")
    message = own_message(smp_destination, "cut")
    await peer.send(send_frame(message), "a valid SEND")
    frame = await next_receipt(peer, "the RECEIPT for the SEND", Deadline(peer.deadline))
    assert frame.get("receipt-id") == message.receipt, f"a RECEIPT for another frame: {frame!r}"
    peer.abort("harness aborts the connection (TCP RST) right after the RECEIPT")
    await asyncio.sleep(SETTLE_AFTER_CUT)
    records = await accepted_messages(f"{SETTLE_AFTER_CUT:g} s after the connection was cut")
    found = find_own(records, [message])
    note_records(wire_trace, records, found, "after the cut")
    problems = found.problems([message])
    assert not problems, (f"after the connection was cut right after its RECEIPT, the target no longer holds the "
                          f"SEND: {problems[0]}")


@requirement("stomp.receipt.server.stored-after-restart", "MUST", STORED,
             needs=(ACCEPTED, RESTART), depends=(IS_STORED,))
async def test_stored_after_restart(connected_peer, smp_destination, accepted_messages, restart_target_server,
                                    wire_trace):
    """10 SENDs written at once; the moment the RECEIPT of the last one
    arrives the harness kills the server's process group with SIGKILL
    (nothing gets a chance to flush), starts it again, and reads what it
    holds: every receipted message survived. A node that acknowledges from
    memory and writes later fails here."""
    peer = await connected_peer("SENDs, then SIGKILL")
    messages = own_messages(smp_destination, RESTART_COUNT, "restart")
    await send_all(peer, messages, f"{RESTART_COUNT} valid SENDs in one write")
    got = await receipts_for(peer, messages, peer.deadline, until=messages[-1].receipt)
    wire_trace.event(f"harness kills the server (SIGKILL) after {len(got)} RECEIPT(s) and starts it again")
    await restart_target_server()
    peer.abort("the server was killed; the harness drops its side")
    receipted = [m for m in messages if m.receipt in got]
    records = await accepted_messages("after the server was killed and restarted")
    found = find_own(records, receipted)
    note_records(wire_trace, records, found, "after the restart")
    problems = found.problems(receipted)
    assert not problems, (
        f"{len(problems)} of the {len(receipted)} receipted SENDs are gone after SIGKILL and restart: "
        + "; ".join(problems[:5]))

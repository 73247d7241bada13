"""Transfer and the balance, target as server (BTP 2.0, "Transfer").

The wire shows whether a Transfer got a Response or an Error, not whether
the balance moved; targets with the ``balance`` capability expose it
through the adapter of docs/btp-adapter.md, and these cases use it.
"""

from __future__ import annotations

import json

from conformance.core.requirements import not_applicable, requirement
from reference_impl.btp.packet import ContentType, Error, Message, ProtocolDataEntry, Response, Transfer

from .peer import new_request_id, summary

CITE = "BTP 2.0, Transfer"
MAX_UINT64 = 2**64 - 1


async def read_balance(peer) -> int:
    request = Message(new_request_id(), (ProtocolDataEntry("balance", ContentType.APPLICATION_JSON, b"{}"),))
    reply = await peer.request(request, "the answer to the balance adapter Message")
    assert isinstance(reply, Response) and reply.protocol_data and reply.protocol_data[0].name == "balance", (
        f"balance adapter: expected a Response whose primary entry is 'balance'; got {summary(reply)}")
    try:
        return int(json.loads(reply.protocol_data[0].data)["balance"])
    except (ValueError, KeyError, TypeError) as exc:
        raise AssertionError(f"balance adapter answered unreadable JSON ({exc}): {reply.protocol_data[0].data[:200]!r}") from None


@requirement("btp.transfer.server.response-means-balance-updated", "MUST",
             f"{CITE} (\"If a Response has been returned, balances MUST have been updated\")", needs=("balance",))
async def test_response_to_transfer_means_balance_updated(authenticated_peer):
    peer = await authenticated_peer()
    before = await read_balance(peer)
    reply = await peer.request(Transfer(new_request_id(), 7), "the answer to a Transfer of 7")
    after = await read_balance(peer)
    if isinstance(reply, Error):
        assert after == before, f"Error {reply.code} for the Transfer, yet the balance moved {before} -> {after}"
        not_applicable(f"the target refused a Transfer of 7 ({reply.code} {reply.name}), so no Response to judge")
    assert after == before + 7, f"Response to a Transfer of 7, but the balance went {before} -> {after}"


@requirement("btp.transfer.server.error-means-balance-unchanged", "MUST",
             f"{CITE} (\"If an Error has been returned, the peer MUST NOT have updated their balance\")", needs=("balance",))
async def test_error_to_transfer_means_balance_unchanged(authenticated_peer):
    """Transfers of 2^64-1 until one is refused (a balance cannot grow
    without bound); the refused one must leave the balance as it was."""
    peer = await authenticated_peer()
    for attempt in range(3):
        before = await read_balance(peer)
        reply = await peer.request(Transfer(new_request_id(), MAX_UINT64), "the answer to a Transfer of 2^64-1")
        after = await read_balance(peer)
        if isinstance(reply, Error):
            assert after == before, f"Error {reply.code} for the Transfer, yet the balance moved {before} -> {after}"
            return
        assert after == before + MAX_UINT64, f"Response to a Transfer of 2^64-1, but the balance went {before} -> {after}"
    not_applicable("the target accepted three Transfers of 2^64-1; no Error to judge")

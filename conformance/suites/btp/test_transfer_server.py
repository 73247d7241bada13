"""Transfer and the balance, target as server (BTP 2.0, "Transfer").

The wire shows whether a Transfer got a Response or an Error, not whether
the balance moved; targets with the ``balance`` capability expose it
through the adapter of docs/btp-adapter.md, and these cases use it.
"""

from __future__ import annotations

import json

from conformance.core.requirements import blocked, not_applicable, requirement
from conformance.core.transport import target_bytes
from reference_impl.btp.packet import (
    ContentType,
    Error,
    Message,
    ProtocolDataEntry,
    Response,
    Transfer,
)

from .peer import new_request_id, summary
from .prerequisites import AUTHENTICATED, BALANCE_STATE, DUPLICATE_NAMES

CITE = "BTP 2.0, Transfer"
MAX_UINT64 = 2**64 - 1


async def read_balance(peer) -> int:
    request = Message(
        new_request_id(), (ProtocolDataEntry("balance", ContentType.APPLICATION_JSON, b"{}"),)
    )
    reply = await peer.request(request, "the answer to the balance adapter Message")
    assert (
        isinstance(reply, Response)
        and reply.protocol_data
        and reply.protocol_data[0].name == "balance"
    ), (
        f"balance adapter: expected a Response whose primary entry is 'balance'; got {summary(reply)}"
    )
    data = reply.protocol_data[0].data
    # Not JSON, not UTF-8, no "balance" member, or not an integer: the
    # target's bytes are wrong, a failure that shows them.
    with target_bytes(
        'balance adapter answered no readable {"balance": <integer>} JSON',
        data,
        ValueError,
        KeyError,
        TypeError,
    ):
        return int(json.loads(data)["balance"])


@requirement(
    "btp.transfer.server.response-means-balance-updated",
    "MUST",
    f'{CITE} ("If a Response has been returned, balances MUST have been updated")',
    needs=("balance",),
    depends=AUTHENTICATED,
    shares=[BALANCE_STATE],
)
async def test_response_to_transfer_means_balance_updated(authenticated_peer):
    """Small Transfers until one gets a Response (the text makes no Transfer
    mandatory to accept, so a target that refuses them all leaves nothing to
    judge); every refused one must have left the balance alone."""
    peer = await authenticated_peer()
    refused = []
    for amount in (7, 1):
        before = await read_balance(peer)
        reply = await peer.request(
            Transfer(new_request_id(), amount), f"the answer to a Transfer of {amount}"
        )
        after = await read_balance(peer)
        if isinstance(reply, Error):
            assert after == before, (
                f"Error {reply.code} for a Transfer of {amount}, yet the balance moved "
                f"{before} -> {after}"
            )
            refused.append(f"{amount} ({reply.code} {reply.name})")
            continue
        assert after == before + amount, (
            f"Response to a Transfer of {amount}, but the balance went {before} -> {after}"
        )
        return
    not_applicable(
        f"the target refused every Transfer tried: {', '.join(refused)}; no Response to judge"
    )


@requirement(
    "btp.transfer.server.error-means-balance-unchanged",
    "MUST",
    f'{CITE} ("If an Error has been returned, the peer MUST NOT have updated their balance")',
    needs=("balance",),
    depends=AUTHENTICATED,
    shares=[BALANCE_STATE],
)
async def test_error_to_transfer_means_balance_unchanged(authenticated_peer):
    """Every input the text answers with an Error is tried until one is
    refused, and the refused one must leave the balance as it was: first a
    Transfer whose protocol data has two entries of one name (it breaks the
    protocol rules, which the Authentication section answers with an Error),
    then Transfers of 2^64-1 (a balance cannot grow without bound: "the peer
    believes that the sender's balance is insufficient")."""
    peer = await authenticated_peer()
    entry = ProtocolDataEntry("conformance_transfer_note", ContentType.TEXT_PLAIN_UTF8, b"x")
    attempts = [
        (
            "a Transfer of 5 whose protocol data names one sub-protocol twice",
            lambda: Transfer(new_request_id(), 5, (entry, entry)),
            5,
        )
    ]
    attempts += [
        (f"Transfer {n} of 2^64-1", lambda: Transfer(new_request_id(), MAX_UINT64), MAX_UINT64)
        for n in (1, 2, 3)
    ]
    accepted = []
    for what, make, amount in attempts:
        before = await read_balance(peer)
        reply = await peer.request(make(), f"the answer to {what}")
        after = await read_balance(peer)
        if isinstance(reply, Error):
            assert after == before, (
                f"Error {reply.code} for {what}, yet the balance moved {before} -> {after}"
            )
            return
        # A Response here is judged by its own rule: the balance must have moved by the amount.
        assert after == before + amount, (
            f"Response to {what}, but the balance went {before} -> {after}"
        )
        accepted.append(what)
    blocked(
        DUPLICATE_NAMES,
        "failed within this case",
        "every Transfer the text answers with an Error got a Response ("
        + "; ".join(accepted)
        + "), so no Error to judge",
    )

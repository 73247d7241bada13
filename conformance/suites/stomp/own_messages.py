"""The harness's own messages: the SENDs it makes to a STOMP server, each a
valid SMP ConfigureAccount with a body unique among everything the node
holds, so that the ``accepted`` adapter's records (adapter.py) can be
matched to them by body. The peer (peer.py) puts them on the wire; the
receipt cases look for them through the adapter."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass

from reference_impl.stomp.smp import example_message

JSON = "application/json"
MESSAGE_TYPE = "ConfigureAccount"
RESERVED_CREDITOR_IDS = 1 << 32
"""SMP 2.1, ConfigureAccount, footnote reserved-creditor-ids: creditor ids
0..4294967295 are reserved; ours are drawn above them."""
MAX_INT64 = (1 << 63) - 1


@dataclass(frozen=True)
class OwnMessage:
    """A SEND the harness makes: its receipt id and the headers and body it
    expects to find through the adapter."""

    receipt: str
    destination: str
    type: str
    content_type: str
    body: str

    def headers(self) -> tuple[tuple[str, str], ...]:
        """The SEND headers the profile requires ("A Subset of the STOMP
        Protocol": receipt, type, content-type, persistent:true)."""
        return (
            ("destination", self.destination),
            ("receipt", self.receipt),
            ("type", self.type),
            ("content-type", self.content_type),
            ("persistent", "true"),
        )


def own_message(destination: str, label: str = "m") -> OwnMessage:
    """A valid SMP ConfigureAccount with a creditor_id drawn at random above
    the reserved range, so that its body is unique among everything the
    node holds (this run's messages, earlier runs', other clients')."""
    message = dict(example_message(MESSAGE_TYPE))
    message["creditor_id"] = RESERVED_CREDITOR_IDS + secrets.randbelow(
        MAX_INT64 - RESERVED_CREDITOR_IDS
    )
    body = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    receipt = f"conformance-{label}-{secrets.token_hex(6)}"
    return OwnMessage(receipt, destination, MESSAGE_TYPE, JSON, body)


def own_messages(destination: str, count: int, label: str = "m") -> list[OwnMessage]:
    return [own_message(destination, f"{label}{n}") for n in range(count)]

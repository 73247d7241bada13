"""Which fuzzing machine plays which (protocol, role), and the defaults the
command line shows, apart from the engine: the parser of every
``conformance`` command is built from these, and importing the engine
(Hypothesis) there cost every command a third of its start-up."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .machine import FuzzMachine

MACHINES: dict[tuple[str, str], str] = {
    ("stomp", "server"): "conformance.fuzz.stomp_server:StompServerMachine",
    ("ripplehost", "server"): "conformance.fuzz.ripplehost_server:RippleHostServerMachine",
}
"""(protocol, role) -> the machine that fuzzes it."""
DEFAULT_STEPS = 10
"""Rules per example after the first (Hypothesis ``stateful_step_count``)."""


def machine_for(protocol: str, role: str) -> type[FuzzMachine]:
    where = MACHINES.get((protocol, role))
    if where is None:
        known = ", ".join(f"{p} {r}" for p, r in sorted(MACHINES))
        raise KeyError(f"no fuzzing machine for the {protocol} {role} role (there are: {known})")
    module, name = where.split(":")
    return getattr(importlib.import_module(module), name)

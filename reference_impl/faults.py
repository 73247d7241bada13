"""What the fault registries of the reference nodes share.

A reference node can break one rule on purpose (``--fault NAME``, repeatable)
so that the harness can prove its cases catch a node that breaks it: the
mutation score (``conformance mutation``, docs/mutation.md). Each protocol
lists its faults in ``reference_impl/<protocol>/faults.py``: the name, what it
changes, the role whose behaviour it changes, and the case ids that must fail
when it is on (and no other case may fail). Faults reach the sans-I/O cores
and the node layer as an explicit ``faults`` set of :class:`enum.Enum`
members, never through global state.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from enum import Enum

ROLES = ("server", "client")


@dataclass(frozen=True)
class FaultSpec:
    name: str
    role: str
    """The role whose behaviour the fault changes: "server" (``serve``) or
    "client" (the client command); the flag goes to that launch command."""
    description: str
    cases: tuple[str, ...]
    """The case ids that must catch it: each must fail, and only these."""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"fault {self.name}: role must be one of {ROLES}")
        if not self.cases:
            raise ValueError(f"fault {self.name}: a fault no case catches proves nothing")


def fault_enum(enum_name: str, specs: tuple[FaultSpec, ...]) -> type[Enum]:
    """A str Enum with one member per spec (``accept-any-network-key`` ->
    ``ACCEPT_ANY_NETWORK_KEY``), so code names a fault by attribute, and a
    typo is an AttributeError rather than a fault silently never on."""
    names = [spec.name for spec in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"{enum_name}: duplicate fault names")
    return Enum(enum_name, [(name.upper().replace("-", "_"), name) for name in names], type=str)


def parse_faults(enum: type[Enum], names: list[str] | tuple[str, ...] | None) -> frozenset:
    """The members for the names given on a command line (None: none)."""
    return frozenset(enum(name) for name in names or ())


def fault_help(specs: tuple[FaultSpec, ...], commands: dict[str, str]) -> str:
    """The epilog of a node's command line listing its faults by command
    (``commands``: role -> the command that plays it)."""
    width = max(len(spec.name) for spec in specs)
    lines = ["fault modes (--fault, repeatable), each breaking one rule on purpose:"]
    for role, command in commands.items():
        lines.append(f" {command} --fault:")
        lines += [
            f"  {spec.name:<{width}}  {spec.description}" for spec in specs if spec.role == role
        ]
    return "\n".join(lines)


def add_fault_option(
    parser: argparse.ArgumentParser, specs: tuple[FaultSpec, ...], role: str
) -> None:
    """``--fault MODE`` (repeatable) with the faults of one role as choices."""
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="MODE",
        choices=[spec.name for spec in specs if spec.role == role],
        help="break one protocol rule on purpose (see below; repeatable); default: none",
    )

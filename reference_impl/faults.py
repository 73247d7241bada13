"""What the fault registries of the reference nodes share.

A reference node can break one rule on purpose (``--fault NAME``, repeatable)
so that the harness can prove its cases catch a node that breaks it: the
mutation score (``conformance mutation``, docs/mutation.md). Each protocol
lists its faults in ``reference_impl/<protocol>/faults.py``: the name, what it
changes, the role whose behaviour it changes, and the case ids that must fail
when it is on (and no other case may fail). Faults reach the sans-I/O cores
and the node layer as an explicit ``faults`` set of :class:`enum.Enum`
members, never through global state.

**Faults live beside their specs, not inside the rules.** A fault is declared
in its protocol's ``faults.py`` as *what it changes*: a function for each
named *fault point* it touches (an output, how an input is handled, a
timing). A core computes the correct value at each point and hands it to
:meth:`FaultPoints.apply`; with no fault on, every point returns its value
unchanged, so the correct path reads as the rule alone. Each protocol's
``faults.py`` lists its points (``POINTS``: name -> what the value is and
what context comes with it), and :func:`check_points` holds every fault to
points that exist.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

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
    changes: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    """Fault point name -> ``change(value, **context) -> value``: what the
    fault does at that point, given the correct value there (see
    :class:`FaultPoints`)."""

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


class FaultPoints:
    """The active faults of one node, applied at the named points of its core.

    ``apply(point, value, **context)`` returns ``value`` when no active fault
    changes ``point`` (the correct behaviour), else the value after each such
    fault's change, in the order of the registry. Changes are pure functions
    of the value and the context the core passes: a fault needs no state of
    its own and no branch in the core.
    """

    def __init__(self, specs: tuple[FaultSpec, ...], active: frozenset | set | tuple = ()) -> None:
        names = {getattr(fault, "value", fault) for fault in active}
        unknown = names - {spec.name for spec in specs}
        if unknown:
            raise ValueError(f"unknown fault(s): {sorted(unknown)}")
        self._changes: dict[str, list[Callable[..., Any]]] = {}
        for spec in specs:
            if spec.name in names:
                for point, change in spec.changes.items():
                    self._changes.setdefault(point, []).append(change)
        self.active = frozenset(names)

    def apply(self, point: str, value: Any = None, /, **context: Any) -> Any:
        for change in self._changes.get(point, ()):
            value = change(value, **context)
        return value

    def changes(self, point: str) -> bool:
        """Whether an active fault changes ``point``: for a core that would
        otherwise compute a costly correct value nobody reads."""
        return point in self._changes

    def __bool__(self) -> bool:
        return bool(self.active)


def check_points(specs: tuple[FaultSpec, ...], points: Mapping[str, str]) -> list[str]:
    """Problems with a registry's fault points: a fault that changes no point
    (it cannot be on) or a point its protocol does not declare."""
    problems = []
    for spec in specs:
        if not spec.changes:
            problems.append(f"fault {spec.name}: changes no fault point")
        for point in spec.changes:
            if point not in points:
                problems.append(f"fault {spec.name}: unknown fault point {point!r}")
    return problems

"""The commands of a targets file (``launch``, ``adapters``, ``container``):
how one is split into an argv, the ``{placeholder}`` fields in it, and the
values the harness puts into the numeric ones. The declaration
(target_spec, container_spec) splits and checks commands with this module;
the runtime (target_runtime) fills the placeholders in."""

from __future__ import annotations

import math
import re
import shlex
from typing import Any

from .target_errors import TargetError

PLACEHOLDER = re.compile(r"\{([a-zA-Z_][a-zA-Z0-9_]*)\}")
"""A ``{name}`` field of a command, an env value, a path."""

PLACEHOLDER_TYPES: dict[str, type] = {
    "port": int,
    "peer_port": int,
    "container_port": int,
    "count": int,
    "client_timeout": int,
    "client_stay": float,
}
"""The placeholders that stand for numbers, and the type the harness passes
for each (docs/targets.md, "Placeholders"): ``int`` a whole number (``6``,
never ``6.0``: scripts/ssb-server.sh refuses anything but digits),
``float`` a number of seconds that may have a fraction (``0.5``, ``10.0``;
a whole number is one too). Every other placeholder is text (a path, a
host, an id). A value of another type from a suite is a harness bug; the
launch refuses it (TargetError) rather than hand a node an argument it may
refuse. tests/harness/test_placeholder_types.py checks every built-in
target's programs against these types."""


def client_timeout(deadline: float) -> int:
    """The ``{client_timeout}`` a suite gives a launched client for its whole
    exchange: four read deadlines, at least 5 s, in whole seconds (rounded
    up). A client may answer each message at the latest moment the read
    deadline allows, and a replicating client's exchange has about four
    such steps in sequence (SSB: hello, authenticate, request, goodbye), so
    twice the deadline cut short clients that were only slow (seen with the
    reference client's late-answers variant: "replication did not finish
    within 6 s")."""
    return max(5, math.ceil(4 * deadline))


def placeholder_text(name: str, value: Any, where: str) -> str:
    """``value`` as the text of placeholder ``{name}``, after checking it
    has the type PLACEHOLDER_TYPES gives the name."""
    kind = PLACEHOLDER_TYPES.get(name)
    if kind is not None:
        allowed = (int,) if kind is int else (int, float)
        if isinstance(value, bool) or not isinstance(value, allowed):
            raise TargetError(
                f"{where}: placeholder {{{name}}} takes "
                f"{'a whole number' if kind is int else 'a number'}, but the harness passed "
                f"{value!r} (a harness bug; see PLACEHOLDER_TYPES in "
                "conformance/core/target_commands.py)"
            )
    return str(value)


def command_argv(value: Any, where: str) -> tuple[str, ...]:
    """A command of a targets file as an argv: a string is split as a shell
    would split it (shlex; no shell ever runs it), a list of strings is the
    argv itself; absent or "" is no command."""
    if value in (None, ""):
        return ()
    if isinstance(value, str):
        return tuple(shlex.split(value))
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise TargetError(f"{where}: a command is a string or a list of strings, got {value!r}")

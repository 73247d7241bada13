"""``--impair PROFILE [--impair-seed N]`` of certify, interop and mutation:
the flags, their resolution into the run's impairment (or a refusal), and
how a run records and announces it (core/impair.py, docs/impairment.md).
The flags are defined here, once, because all three commands take them and
mean the same by them."""

from __future__ import annotations

import argparse

from ..core import impair
from ..core.targets import Target, TargetError


def _seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def add_impair_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--impair",
        default=None,
        metavar="PROFILE",
        help="every connection between the harness and a target through a loopback relay that "
        "impairs the TCP byte stream, both ways: fragment, coalesce, delay, throttle, stall, "
        "with parameters as NAME:KEY=VALUE,... (e.g. delay:ms=200,jitter=50); a profile "
        "breaking an answer time is refused (docs/impairment.md)",
    )
    parser.add_argument(
        "--impair-seed",
        type=_seed,
        default=None,
        metavar="N",
        help="with --impair: the seed of its draws, to replay a run (default: drawn, printed and "
        "recorded)",
    )


def resolve_impairment(
    text: str | None, seed: int | None, deadline: float, chosen: list[Target]
) -> impair.Impairment | None:
    """The run's impairment of ``--impair`` ``text`` (the seed drawn when not
    given), or None without one; refused (TargetError, a usage error) when
    it would break an answer time of a chosen target's protocol or of the
    harness (core/impair.py, docs/impairment.md)."""
    if not text:
        if seed is not None:
            raise TargetError("--impair-seed goes with --impair")
        return None
    try:
        profile = impair.parse_profile(text)
    except impair.ImpairmentError as exc:
        raise TargetError(str(exc)) from None
    for target in chosen:
        refused = impair.refusal(profile, target.protocol, deadline, target.params)
        if refused:
            raise TargetError(
                f'{refused} (target {target.name}; docs/impairment.md, "Refused profiles")'
            )
    return impair.Impairment(profile, seed if seed is not None else impair.new_seed())


def impairment_extra(impairment: impair.Impairment | None) -> dict:
    """summary.json's ``impairment`` (``fragment seed=123``), or null on clean loopback."""
    return {"impairment": impairment.describe() if impairment is not None else None}


def impairment_line(impairment: impair.Impairment | None) -> str | None:
    """The line a run under impairment prints first, with how to replay it."""
    if impairment is None:
        return None
    return (
        f"impairment: {impairment.describe()}: every connection with a target goes through the relay "
        f"(replay: --impair {impairment.profile.text()} --impair-seed {impairment.seed})"
    )

"""Argument types of the command line, shared by its subcommands
(``conformance.cli`` and the ``cli`` modules of learn, fuzz and aggregate):
a value argparse refuses is named in the error the user sees."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """A whole number, 1 or more (jobs, examples, repeats)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {text}")
    return value


def positive_seconds(text: str) -> float:
    """A number of seconds above 0 (deadlines, windows)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value

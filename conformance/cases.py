"""``conformance cases``: the case ids of the suites, to select with ``--case``.

    conformance cases --protocol ssb               # every ssb case: level, role, id, prerequisites
    conformance cases --protocol ssb --case 'ssb.shs.*'   # what a selection picks
    conformance cases --interop --protocol stomp   # the interop cases (conformance interop --case)
    conformance cases --json

The cases are read by collecting the suite with pytest (no target is
started), so what is listed is what ``certify --case`` selects from.
Exit status: 0 listed; 2 a pattern that matches no case.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

from .core.requirements import Requirement, requirement_of
from .core.selection import hint, no_match_message, select, unmatched
from .core.targets import KNOWN_PROTOCOLS

SUITES_DIR = Path(__file__).resolve().parent / "suites"
INTEROP_DIR = Path(__file__).resolve().parent / "interop"


def suite_protocols(base: Path) -> list[str]:
    return sorted(
        p.name
        for p in base.iterdir()
        if p.is_dir() and p.name in KNOWN_PROTOCOLS and any(p.glob("test_*.py"))
    )


class _Collector:
    def __init__(self) -> None:
        self.cases: list[Requirement] = []

    def pytest_collection_modifyitems(self, items: list[Any]) -> None:
        self.cases = [req for req in (requirement_of(item) for item in items) if req is not None]


def collect(suite: Path) -> list[Requirement]:
    """The cases of one suite folder, in file order, by collecting it with
    pytest in this process (its output is swallowed)."""
    collector = _Collector()
    argv = [
        str(suite),
        "--collect-only",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "pytest_asyncio.plugin",
        "-p",
        "conformance.plugin",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "--rootdir",
        str(suite.parent),
        "-c",
        os.devnull,
    ]
    import pytest

    out = io.StringIO()
    # As certify runs a suite: only the plugins named (the package's own
    # entry point would register conformance.plugin a second time).
    autoload = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = pytest.main(argv, plugins=[collector])
    finally:
        if autoload is None:
            del os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"]
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = autoload
    if code not in (0, 5):
        raise RuntimeError(
            f"collecting {suite} failed (pytest exit {code}):\n{out.getvalue()[-2000:]}"
        )
    return collector.cases


def describe(req: Requirement, kind: str) -> dict[str, Any]:
    return {
        "case_id": req.case_id,
        "protocol": req.protocol,
        "suite": kind,
        "level": req.level.value,
        "basis": str(req.basis),
        "role": req.role,
        "citation": req.full_citation,
        "depends": list(req.depends),
        "needs": list(req.needs),
    }


def cmd_cases(args: argparse.Namespace) -> int:
    base, kind = (INTEROP_DIR, "interop") if args.interop else (SUITES_DIR, "certify")
    have = suite_protocols(base)
    unknown = [p for p in args.protocol if p not in have]
    if unknown:
        print(
            f"conformance: error: no {kind} suite for {', '.join(unknown)}; suites: {', '.join(have)}",
            file=sys.stderr,
        )
        return 2
    protocols = args.protocol or have
    listed = {protocol: collect(base / protocol) for protocol in protocols}
    every = [req.case_id for cases in listed.values() for req in cases]
    missing = unmatched(args.case, every)
    if missing:
        text, near = no_match_message(missing, every)
        print(
            f"conformance: error: {text} of the {kind} suite of {', '.join(protocols)}"
            + (f"; {near}" if near else "")
            + f" ({hint(protocols, args.interop)})",
            file=sys.stderr,
        )
        return 2
    if args.case:
        chosen = set(select(every, args.case))
        listed = {p: [req for req in cases if req.case_id in chosen] for p, cases in listed.items()}
    if args.json:
        print(
            json.dumps(
                [describe(req, kind) for cases in listed.values() for req in cases], indent=2
            )
        )
        return 0
    command = "interop --client C --server S" if args.interop else "certify"
    for protocol, cases in listed.items():
        if not cases:
            continue
        example = f"{protocol}.{cases[0].case_id.split('.')[1]}.*"
        print(
            f"{protocol}: {len(cases)} {kind} case(s)"
            + (f" selected by {' '.join(args.case)}" if args.case else "")
            + f"; select with `conformance {command} --case ID` or a glob, e.g. --case '{example}'"
        )
        width = max(len(req.case_id) for req in cases)
        for req in cases:
            after = f"  after {', '.join(req.depends)}" if req.depends else ""
            # The basis's word in a column of its own after the id, so that
            # the level, role and id stay one word each.
            basis = f"  ({req.basis.word})" if req.basis.word else ""
            print(
                f"  {req.level.value:<6} {req.role:<6} {req.case_id:<{width}}{basis}{after}".rstrip()
            )
        print()
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "cases",
        help="list the case ids of the suites (for --case)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument(
        "--protocol",
        action="append",
        default=[],
        choices=KNOWN_PROTOCOLS,
        help="only this protocol's suite (repeatable; default: every suite)",
    )
    parser.add_argument(
        "--case",
        action="append",
        default=[],
        metavar="PATTERN",
        help="only the cases matching this id or shell-style glob (repeatable)",
    )
    parser.add_argument(
        "--interop", action="store_true", help="the interop cases (conformance interop)"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="machine-readable: id, protocol, level, role, citation, depends, needs",
    )
    parser.set_defaults(func=cmd_cases)

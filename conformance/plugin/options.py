"""The plugin's command-line options."""

from __future__ import annotations

import pytest

from ..core.transport import DEFAULT_READ_DEADLINE


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "conformance harness")
    group.addoption(
        "--target",
        default=None,
        help="name of the target to certify (see `conformance targets`); "
        "default: the built-in reference node of the suite's protocol",
    )
    group.addoption(
        "--targets-file",
        action="append",
        default=[],
        help="TOML file of target definitions (repeatable; later names win)",
    )
    group.addoption(
        "--protocol",
        action="append",
        default=[],
        help="only run cases of this protocol (repeatable)",
    )
    group.addoption(
        "--run-dir",
        default=None,
        help="directory for results.jsonl, traces and logs (default reports/runs/RUN_ID)",
    )
    group.addoption("--run-id", default=None, help="run id to record (default: generated)")
    group.addoption(
        "--peer",
        default=None,
        help="interop runs: the target playing the server role opposite --target (the client)",
    )
    group.addoption(
        "--progress",
        action="store_true",
        help="print one line per finished case (case id, level, outcome) to stderr",
    )
    group.addoption(
        "--deadline",
        type=float,
        default=DEFAULT_READ_DEADLINE,
        help=f"seconds to wait for bytes a target must send (default {DEFAULT_READ_DEADLINE})",
    )
    group.addoption(
        "--run-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="deadline of the whole run: cases not started when it passes are recorded as "
        "error (the running case ends at its own read deadline)",
    )
    group.addoption(
        "--impair",
        default=None,
        metavar="PROFILE",
        help="every connection with the target through a loopback relay that impairs the byte "
        "stream: fragment, coalesce, delay, throttle, stall, with parameters "
        "(delay:ms=200,jitter=50; docs/impairment.md)",
    )
    group.addoption(
        "--impair-seed",
        type=int,
        default=None,
        metavar="N",
        help="the impairment's seed (default: drawn at random and recorded)",
    )
    group.addoption(
        "--case",
        action="append",
        default=[],
        metavar="PATTERN",
        help="only the cases whose id matches (a case id or a shell-style glob, e.g. 'ssb.shs.*'; "
        "repeatable); their prerequisites run too (conformance.core.selection)",
    )

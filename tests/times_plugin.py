"""Where the test suite's time goes: one JSON line per test phase.

Enabled by ``CONFORMANCE_TEST_TIMES=FILE`` (``scripts/test.sh --times FILE``
sets it): every setup, call and teardown of every test appends one line
to FILE with its wall time, the CPU time of the pytest process and the
CPU time of its child processes in that phase: those it waited for (a
``conformance certify`` subprocess, an OCaml build) and those still running
(the Spark JVM, a broker a fixture started). ``scripts/test_times.py``
turns the lines into the table of docs/testing.md.

Safe under pytest-xdist: each line is one ``write`` on a file opened with
O_APPEND, so lines of several workers never interleave.
"""

from __future__ import annotations

import json
import os
import time

import pytest

_PATH_ENV = "CONFORMANCE_TEST_TIMES"


_TICKS = os.sysconf("SC_CLK_TCK")


def _live_descendants() -> dict[int, float]:
    """CPU seconds so far of every live process below this one (the Spark
    JVM, a broker, a node a fixture started): such a process is reaped
    long after the test, if ever by us, so os.times() would not show it."""
    found: dict[int, float] = {}
    pending = [os.getpid()]
    while pending:
        pid = pending.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as children:
                    pending.extend(int(child) for child in children.read().split())
            except OSError:
                continue
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # utime and stime are fields 14 and 15 of stat(5); index 11, 12 after
        # the ")". cutime and cstime (16, 17) are its children it has waited
        # for: the sessions a fork server (conformance/core/forkserver.py)
        # forked and reaped, which never become children of ours.
        found[pid] = sum(int(fields[n]) for n in (11, 12, 13, 14)) / _TICKS
    return found


def _cpu() -> tuple[float, float, dict[int, float]]:
    mine = time.process_time()
    times = os.times()
    return mine, times.children_user + times.children_system, _live_descendants()


def _descendants_delta(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def _phase(item: pytest.Item, phase: str):
    path = os.environ.get(_PATH_ENV)
    if not path:
        yield
        return
    wall0 = time.monotonic()
    own0, children0, live0 = _cpu()
    yield
    own1, children1, live1 = _cpu()
    line = {
        "nodeid": item.nodeid,
        "phase": phase,
        "wall": round(time.monotonic() - wall0, 4),
        "cpu": round(own1 - own0, 4),
        "children_cpu": round(
            children1 - children0 + max(0.0, _descendants_delta(live0, live1)), 4
        ),
        "fixtures": sorted(getattr(item, "fixturenames", ())),
        "markers": sorted({mark.name for mark in item.iter_markers()}),
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
    }
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    yield from _phase(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    yield from _phase(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item):
    yield from _phase(item, "teardown")

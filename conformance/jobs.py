"""Several pytest sessions at once: ``certify --jobs N`` and ``interop --all --jobs N``.

Each session is its own child process (``runner.run_suite``) with its own files
in the run dir (``planned-<session>.jsonl``, ``preflight-<session>.json``,
``pytest-<session>.log``, ``junit-<session>.xml``, ``traces/<session>/``,
uuid-named ``allure-results/`` files, logs named after the target and its
private work dir). The one file they share is ``results.jsonl``, which
every session appends to with single ``O_APPEND`` writes, one line each.

The children's stderr (the ``--progress`` lines) is read line by line and
written with the session's name in front, one whole line at a time under a
lock shared with the runner's own start and end lines, so that no two lines
mix. A session that must not overlap another (the same interop key, or the
same target not started by the harness) waits until the other has ended.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Hashable, TextIO

from .core.targets import Target

STOP_GRACE = 10.0
"""Seconds the children get to exit after SIGTERM (Ctrl-C) before SIGKILL."""
DRAIN_DEADLINE = 5.0
"""Seconds to wait, after a session's process ended, for the rest of its
stderr: a grandchild that inherited the pipe could keep it open."""
POLL_SECONDS = 0.2
"""How often the scheduler wakes while waiting, so that Ctrl-C is seen at once."""
KILLED_SESSIONS: list[str] = []
"""Sessions an interrupt had to SIGKILL (they did not stop within
STOP_GRACE): their work dirs are left for the next run to remove, which the
CLI's closing lines say."""


class Console:
    """Whole lines to stdout or stderr, one writer at a time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        """Held while a line is written; hold it to print several lines together."""

    def line(self, text: str, stream: TextIO | None = None) -> None:
        self.lines([text], stream)

    def lines(self, texts: list[str], stream: TextIO | None = None) -> None:
        """Several lines together, none of another writer's between them."""
        stream = stream or sys.stdout
        with self.lock:
            for text in texts:
                stream.write(text + "\n")
            stream.flush()

    def error(self, *texts: str) -> None:
        """Lines to stderr, together: what went wrong, apart from the results."""
        self.lines(list(texts), sys.stderr)


class ChildOutput:
    """Starts session processes with their stderr piped, copies each line of
    it to our stderr prefixed with the session's name (unless ``prefixed``
    is False: one session at a time needs no name), and stops them all on
    Ctrl-C."""

    def __init__(self, console: Console, prefixed: bool = True) -> None:
        self.console = console
        self.prefixed = prefixed
        self._lock = threading.Lock()
        self._processes: dict[str, subprocess.Popen] = {}
        self._readers: dict[str, threading.Thread] = {}

    def popen(
        self, label: str, argv: list[str], start: Callable[..., Any] = subprocess.Popen, **kwargs
    ) -> subprocess.Popen:
        """``start(argv, stderr=PIPE, **kwargs)`` (a Popen, or the runner's
        forked session answering like one), its stderr lines copied to the
        console under ``label``."""
        process = start(argv, stderr=subprocess.PIPE, **kwargs)
        reader = threading.Thread(
            target=self._copy, args=(label, process), daemon=True, name=f"stderr of {label}"
        )
        with self._lock:
            self._processes[label] = process
            self._readers[label] = reader
        reader.start()
        return process

    def _copy(self, label: str, process: subprocess.Popen) -> None:
        assert process.stderr is not None
        # readline returns whole lines (or the unterminated tail at EOF), so
        # every line reaches the console in one piece.
        for raw in iter(process.stderr.readline, b""):
            text = raw.decode("utf-8", errors="replace").rstrip("\n")
            self.console.line(f"[{label}] {text}" if self.prefixed else text, sys.stderr)
        process.stderr.close()

    def drain(self, label: str) -> None:
        """Wait (bounded) until the session's last stderr line is written,
        then forget it."""
        with self._lock:
            reader = self._readers.pop(label, None)
            self._processes.pop(label, None)
        if reader is not None:
            reader.join(DRAIN_DEADLINE)

    def stop_all(self) -> None:
        """Ctrl-C: SIGTERM every running session, SIGKILL what is left after
        STOP_GRACE. Their finished cases are in results.jsonl already."""
        with self._lock:
            running = [p for p in self._processes.values() if p.poll() is None]
        for process in running:
            process.terminate()
        deadline = time.monotonic() + STOP_GRACE
        for process in running:
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                KILLED_SESSIONS.append(str(process.pid))


@dataclass
class Session:
    """One pytest session to run: ``run`` starts it and returns its exit code."""

    label: str
    run: Callable[[], int]
    resources: frozenset[Hashable] = field(default_factory=frozenset)
    """Sessions sharing a resource never run at the same time."""


def exclusive_resources(*targets: Target) -> set[Hashable]:
    """What two sessions must not use at once: a server the harness does not
    start itself is one node with one state (balances, per-peer state), so
    sessions against the same address take turns. Servers the harness starts
    are fresh per session (own work dir, own port)."""
    resources: set[Hashable] = set()
    for target in targets:
        if "server" in target.roles and not target.harness_starts_server:
            resources.add(("address", target.url or f"{target.host}:{target.port}"))
    return resources


def run_sessions(
    sessions: list[Session],
    jobs: int,
    output: ChildOutput,
    on_start: Callable[[Session], None],
    on_end: Callable[[Session, int, float], bool],
) -> dict[str, int]:
    """Run the sessions, up to ``jobs`` at once, in the given order as far as
    their resources allow. ``on_start`` is called before a session starts,
    ``on_end`` (label, exit code, seconds) after it ended and its output is
    drained; when ``on_end`` returns False no further session is started and
    the running ones are let finish. Returns the exit code of each session
    that ran. On Ctrl-C every child is stopped and KeyboardInterrupt raised."""
    pending = list(sessions)
    running: dict[str, tuple[Session, threading.Thread]] = {}
    finished: queue.Queue[tuple[Session, int, float]] = queue.Queue()
    codes: dict[str, int] = {}
    keep_starting = True

    def work(session: Session) -> None:
        started = time.monotonic()
        code = -1
        try:
            code = session.run()
        finally:
            output.drain(session.label)
            finished.put((session, code, time.monotonic() - started))

    try:
        while running or (pending and keep_starting):
            busy = set().union(*(s.resources for s, _ in running.values()))
            while keep_starting and len(running) < jobs:
                ready = next((s for s in pending if not s.resources & busy), None)
                if ready is None:
                    break
                pending.remove(ready)
                on_start(ready)
                thread = threading.Thread(
                    target=work, args=(ready,), name=f"session {ready.label}", daemon=True
                )
                running[ready.label] = (ready, thread)
                busy |= ready.resources
                thread.start()
            try:
                session, code, seconds = finished.get(timeout=POLL_SECONDS)
            except queue.Empty:
                continue
            running.pop(session.label)[1].join()
            codes[session.label] = code
            if not on_end(session, code, seconds):
                keep_starting = False
    except KeyboardInterrupt:
        output.stop_all()
        for _, thread in running.values():
            thread.join(STOP_GRACE)
        raise
    return codes


SUMMARY_SECONDS_KEY = "target_seconds"
"""summary.json key: each target's session wall time, in seconds, read back
by :func:`last_durations` to start the longest targets first next time."""
DURATION_LOOKBACK = 50
"""How many of the newest runs :func:`last_durations` reads at most."""


def last_durations(runs_dir: Path, names: list[str]) -> dict[str, float]:
    """Each target's session time in the newest run under ``runs_dir`` that
    certified it (summary.json's ``target_seconds``); targets no recent run
    certified are left out. A summary that cannot be read is passed over."""
    try:
        summaries = sorted(
            runs_dir.glob("*/summary.json"), key=lambda p: p.stat().st_mtime, reverse=True
        )
    except OSError:
        return {}
    wanted, found = set(names), {}
    for path in summaries[:DURATION_LOOKBACK]:
        try:
            seconds = json.loads(path.read_text(encoding="utf-8")).get(SUMMARY_SECONDS_KEY) or {}
        except (OSError, ValueError):
            continue
        for name in wanted - found.keys():
            value = seconds.get(name)
            if isinstance(value, (int, float)) and value >= 0:
                found[name] = float(value)
        if found.keys() == wanted:
            break
    return found


def longest_first(
    targets: list[Target], durations: dict[str, float], case_counts: dict[str, int]
) -> list[Target]:
    """The targets in the order to start them under --jobs N: the longest
    first, so that the last to start is a short one and no worker idles at
    the end while one long session runs alone. A target's length is its
    session time in the last run; one never timed is estimated from its
    protocol's case count at the mean seconds per case of the timed ones
    (or, when none is timed, ordered by case count alone). Ties keep the
    given order."""
    timed = [t for t in targets if t.name in durations]
    per_case = (
        sum(durations[t.name] for t in timed)
        / max(1, sum(case_counts.get(t.protocol, 0) for t in timed))
        if timed
        else 1.0
    )

    def estimate(target: Target) -> float:
        if target.name in durations:
            return durations[target.name]
        return case_counts.get(target.protocol, 0) * per_case

    return sorted(targets, key=lambda t: -estimate(t))

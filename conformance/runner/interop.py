"""``interop``: a client target's interop suite against a server target,
for each pair of a run, up to ``jobs`` pairs at once, then the run's
summary.json (and, for ``--all``, interop-summary.json). The lines it
prints while the sessions run go through the Console it is given."""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..core.results import PASSED, read_results, write_summary
from ..core.run_folder import RunFolder
from ..core.targets import Target
from ..interop.pairs import Pair, tally
from ..interop.pairs import write_summary as write_pairs
from ..jobs import ChildOutput, Console, Session, exclusive_resources, run_sessions
from .impairment import impairment_extra
from .options import EXIT_CONFORMANT, EXIT_NOT_CONFORMANT, EXIT_USAGE, INTEROP_DIR, RunOptions
from .plan import case_ids
from .session import outcome_counts, preflight_error, run_deadline_line, run_suite


@dataclass
class InteropRun:
    """What an interop run came to; its console output is the caller's."""

    exit_code: int
    codes: dict[str, int]
    """pytest's exit code of each pair's session, by ``client->server``."""
    summary: dict | None = None
    """summary.json as written."""
    stopped: Pair | None = None
    """The pair whose preflight stopped the run (``--client/--server``)."""
    records: list[dict] = field(default_factory=list)
    """Every result record of the run (``--client/--server``)."""
    pairs_file: Path | None = None
    """interop-summary.json (``--all``)."""


def pair_records(results: Path, client: Target, server: Target) -> list[dict]:
    """The records of every session of this client against this server's
    implementation: (target, peer_implementation) is what tells an interop
    session's records apart (the key Spark ingest uses too). Sessions with
    one key never run at once (interop_jobs), so the records added while
    one runs are its own."""
    return [
        r
        for r in read_results(results)
        if r["target"] == client.name and r.get("peer_implementation") == server.implementation
    ]


def interop_jobs(
    to_run: list[Pair],
    targets: dict[str, Target],
    run_dir: Path,
    run_id: str,
    options: RunOptions,
    console: Console,
    stop_at_preflight: bool = False,
) -> dict[str, int]:
    """Every interop pair of a run (``interop --client/--server`` and
    ``interop --all [--jobs N]``): up to ``options.jobs`` pairs at once
    (conformance/jobs.py). Under --jobs N there is a start and an end line
    per pair and progress lines are prefixed with client+server; one at a
    time, a heading per pair and the progress lines as they are. A pair
    stopped by its preflight is "not run" (``pair.error``) and the others go
    on, or, with ``stop_at_preflight``, none is started after it. Fills each
    pair's counts; returns exit codes."""
    serial = options.jobs <= 1
    output = ChildOutput(console, prefixed=not serial)
    results = RunFolder(run_dir).results
    by_label: dict[str, tuple[Pair, Target, Target]] = {}
    before: dict[str, int] = {}
    sessions = []
    for pair in to_run:
        client, server = targets[pair.client], targets[pair.server]
        label = f"{client.name}+{server.name}"
        by_label[label] = (pair, client, server)
        resources = exclusive_resources(client, server) | {
            ("interop", client.name, server.implementation)
        }
        sessions.append(
            Session(
                label,
                functools.partial(
                    run_suite,
                    client,
                    run_dir,
                    run_id,
                    options,
                    INTEROP_DIR / client.protocol,
                    server,
                    output=output,
                ),
                frozenset(resources),
            )
        )

    def started(session: Session) -> None:
        pair, client, server = by_label[session.label]
        before[session.label] = len(pair_records(results, client, server))
        if serial:
            console.line(
                f"\n== {client.name} (client) -> {server.name} (server), {client.protocol}"
            )
        else:
            console.line(
                f"== start {session.label}: {client.name} (client) -> {server.name} (server), "
                f"{client.protocol}"
            )

    def ended(session: Session, code: int, seconds: float) -> bool:
        pair, client, server = by_label[session.label]
        mine = pair_records(results, client, server)[before[session.label] :]
        tally(pair, mine)
        pair.partial = bool(options.selection) and not (
            set(case_ids(pair.protocol, interop=True)) <= {r["case_id"] for r in mine}
        )
        pair.error = preflight_error(run_dir, client, server)
        if not serial:
            how = (
                f"not run: preflight: {pair.error.splitlines()[0]}"
                if pair.error
                else f"{pair.verdict}, {len(mine)} case(s): {outcome_counts(mine)}"
            )
            console.line(f"== end {session.label}: {how}; {seconds:.1f} s")
        if pair.error and stop_at_preflight:
            return False  # the caller says why the run stopped
        if pair.error and serial:
            console.error(f"   not run: preflight: {pair.error}")
        note = run_deadline_line(run_dir, client, code, options.run_timeout, server)
        if note:
            console.error(note)
        return True

    codes = run_sessions(sessions, options.jobs, output, started, ended)
    return {
        f"{by_label[label][1].name}->{by_label[label][2].name}": code
        for label, code in codes.items()
    }


def _summary_extra(codes: dict[str, int], options: RunOptions) -> dict:
    extra = {"kind": "interop", "pytest_exit_codes": codes, **impairment_extra(options.impairment)}
    if options.run_timeout is not None:
        extra["run_timeout_s"] = options.run_timeout
    return extra


def interop_pairs(
    to_run: list[Pair],
    targets: dict[str, Target],
    run_dir: Path,
    run_id: str,
    options: RunOptions,
    console: Console,
) -> InteropRun:
    """``interop --client/--server``: each pair in turn, stopping at the first
    pair stopped by its preflight (exit EXIT_USAGE, summary.json with
    preflight_error); interoperable (exit 0) when some case ran and every
    case passed."""
    started = time.monotonic()
    folder = RunFolder(run_dir)
    codes = interop_jobs(to_run, targets, run_dir, run_id, options, console, True)
    folder.results.touch()
    stopped = next((pair for pair in to_run if pair.error), None)
    if stopped is not None:
        summary = write_summary(
            run_dir,
            run_id,
            started,
            {
                "kind": "interop",
                "pytest_exit_codes": codes,
                "preflight_error": stopped.error,
                "preflight_target": f"{stopped.client}->{stopped.server}",
            },
        )
        return InteropRun(EXIT_USAGE, codes, summary, stopped=stopped)
    summary = write_summary(
        run_dir,
        run_id,
        started,
        _summary_extra(codes, options),
        options.selection,
        {pair.protocol: case_ids(pair.protocol, True) for pair in to_run},
    )
    records = [json.loads(line) for line in folder.results.read_text().splitlines() if line.strip()]
    ok = bool(records) and all(rec["outcome"] == PASSED for rec in records)
    return InteropRun(
        EXIT_CONFORMANT if ok else EXIT_NOT_CONFORMANT, codes, summary, records=records
    )


def interop_all(
    pairs: list[Pair],
    protocols: list[str],
    targets: dict[str, Target],
    run_dir: Path,
    run_id: str,
    options: RunOptions,
    console: Console,
) -> InteropRun:
    """``interop --all``: every pair not skipped (a pair stopped by its
    preflight is "not run", the others go on), then summary.json and the
    client x server table's interop-summary.json. Exit 0 when some pair ran
    and every pair that ran is interoperable."""
    started = time.monotonic()
    RunFolder(run_dir).results.touch()
    to_run = [p for p in pairs if not p.skipped]
    codes = interop_jobs(to_run, targets, run_dir, run_id, options, console)
    summary = write_summary(
        run_dir,
        run_id,
        started,
        _summary_extra(codes, options),
        options.selection,
        {p: case_ids(p, interop=True) for p in protocols},
    )
    path = write_pairs(run_dir, run_id, pairs, time.monotonic() - started)
    ok = bool(to_run) and all(p.verdict == "interoperable" for p in to_run)
    return InteropRun(
        EXIT_CONFORMANT if ok else EXIT_NOT_CONFORMANT, codes, summary, pairs_file=path
    )

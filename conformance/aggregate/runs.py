"""Run discovery: the run directories a path names, as ``RunInput``.

No Spark here: the CLI checks the paths it is given before it pays for a
JVM, and the ingest plan compares these against the dataset's manifest.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Iterable

from ..core.run_folder import RESULTS_FILE, RunFolder
from .errors import IngestError


@dataclass(frozen=True)
class RunInput:
    """One run directory to ingest."""

    run_dir: Path
    results: Path
    complete: bool
    """summary.json exists: the run finished."""
    size: int
    mtime_ns: int
    """With ``size``, how the manifest recognises a file already ingested."""
    partial: bool = False
    """summary.json marks the run partial (conformance.core.results.mark_partial)."""

    @property
    def uri(self) -> str:
        return self.results.as_uri()

    @property
    def key(self) -> str:
        """The manifest's name for this results file."""
        return str(self.results)

    @cached_property
    def torn(self) -> bool:
        """The file does not end with a newline: its last line was cut off.
        Read only for files that are parsed (a skipped file is not opened)."""
        if not self.size:
            return False
        with open(self.results, "rb") as handle:
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) != b"\n"


def run_input(run_dir: Path) -> RunInput:
    """The RunInput of a run directory (its results file must exist)."""
    folder = RunFolder(run_dir)
    stat = folder.results.stat()
    complete = folder.is_finished()
    return RunInput(
        run_dir,
        folder.results,
        complete,
        stat.st_size,
        stat.st_mtime_ns,
        complete and _summary_partial(folder),
    )


def _read_summary(folder: RunFolder) -> dict | None:
    """The run's summary.json, or None when it is missing or unreadable."""
    try:
        summary = json.loads(folder.summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) else None


def _summary_partial(folder: RunFolder) -> bool:
    """Whether the run's summary.json marks it partial (a selection left
    cases out); an unreadable summary does not."""
    summary = _read_summary(folder)
    return summary is not None and summary.get("partial") is True


def summary_run_id(run: RunInput) -> str | None:
    """The run id the run's summary.json names, if any."""
    value = (_read_summary(RunFolder(run.run_dir)) or {}).get("run_id")
    return value if isinstance(value, str) and value else None


def find_runs(paths: Iterable[str | os.PathLike]) -> list[RunInput]:
    """The runs named by ``paths``: a run directory (holds results.jsonl), a
    results.jsonl file, or a directory of run directories (such as
    ``reports/runs``, or ``reports`` itself). Sorted by directory name, which
    for harness run ids is start-time order."""
    found: dict[Path, RunInput] = {}
    missing = []
    for raw in paths:
        path = Path(raw).expanduser().resolve()
        candidates: list[Path] = []
        if path.is_file() and path.name == RESULTS_FILE:
            candidates = [path.parent]
        elif RunFolder(path).is_run():
            candidates = [path]
        elif path.is_dir():
            candidates = sorted(p.parent for p in path.glob(f"*/{RESULTS_FILE}"))
            if not candidates:
                candidates = sorted(p.parent for p in path.glob(f"runs/*/{RESULTS_FILE}"))
            if not candidates:
                missing.append(
                    f"{raw} (a directory without {RESULTS_FILE} in it or in its subdirectories)"
                )
        else:
            missing.append(f"{raw} (does not exist)")
        for run_dir in candidates:
            found.setdefault(run_dir, run_input(run_dir))
    if missing:
        raise IngestError(
            "no runs found in "
            + "; ".join(missing)
            + f": a run directory holds {RESULTS_FILE} (conformance certify writes reports/runs/<run-id>/)"
        )
    if not found:
        raise IngestError("no runs given")
    return sorted(found.values(), key=lambda r: (r.run_dir.name, str(r.run_dir)))

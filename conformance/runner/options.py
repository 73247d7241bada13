"""What every run is given: its options, where the suites are, a run
directory, and the exit statuses of the commands that run suites."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.results import new_run_id

if TYPE_CHECKING:
    from ..core.impair import Impairment

PACKAGE_DIR = Path(__file__).resolve().parent.parent
SUITES_DIR = PACKAGE_DIR / "suites"
INTEROP_DIR = PACKAGE_DIR / "interop"

EXIT_CONFORMANT = 0
EXIT_NOT_CONFORMANT = 1
EXIT_USAGE = 2
EXIT_HARNESS_ERROR = 3
EXIT_NOT_STARTED = 4
"""certify: a target did not start (results.NOT_STARTED) and none is NOT
CONFORMANT; the run says nothing about the rules."""


@dataclass
class RunOptions:
    """How each pytest session of a run is run (certify's and interop's
    flags of the same names; mutation sets its own)."""

    targets_file: list[str] = field(default_factory=list)
    deadline: float = 3.0
    """Seconds to wait for bytes a target must send (--deadline)."""
    run_timeout: float | None = None
    """Deadline of each session's whole run (--run-timeout), or none."""
    case_jobs: int = 1
    """pytest-xdist workers of one session (--case-jobs)."""
    jobs: int = 1
    """Sessions at once (--jobs)."""
    case: list[str] = field(default_factory=list)
    """--case patterns: only these cases (and their prerequisites)."""
    keyword: str | None = None
    """pytest's -k expression."""
    impairment: Impairment | None = None
    """The relay's impairment (--impair), or None on clean loopback."""

    @property
    def selection(self) -> dict | None:
        """The run's selection, for summary.json, or None for a whole run."""
        selection: dict = {}
        if self.case:
            selection["case"] = list(self.case)
        if self.keyword:
            selection["keyword"] = self.keyword
        return selection or None


def new_run_dir(run_dir: str | None, reports_dir: str) -> tuple[str, Path]:
    """A new run id and its directory, made: ``run_dir`` when given (a
    reused one is kept as it is), else ``reports_dir/runs/<run id>``."""
    run_id = new_run_id()
    path = Path(run_dir or Path(reports_dir) / "runs" / run_id).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return run_id, path

"""The runner: a suite against a target, alone (``certify``) or as a pair
(``interop``), with or without impairment, several targets or pairs at once.

It owns the pytest session of one target (session.py: its command line, its
run deadline, the cases a killed session leaves unfinished, its preflight),
the jobs of a run (certify.py, interop.py, over conformance/jobs.py), which
targets and cases a run covers (plan.py), the ``--impair`` flags
(impairment.py), the run's options and exit statuses (options.py), and the
summary.json each run writes. It prints only through the
:class:`conformance.jobs.Console` it is given (the start, end and note lines
of sessions, the sessions' own progress lines); what a command prints before
and after is the command's (conformance/cli.py, conformance/mutation.py).

Its callers: the ``certify`` and ``interop`` commands, ``conformance
mutation`` (one certification per fault), the interop cross-check (the
suites' case ids), scripts and benches. It imports none of them.
"""

from __future__ import annotations

from .certify import CertifyRun, certify, certify_jobs
from .impairment import add_impair_options, impairment_extra, impairment_line, resolve_impairment
from .interop import InteropRun, interop_all, interop_jobs, interop_pairs, pair_records
from .options import (
    EXIT_CONFORMANT,
    EXIT_HARNESS_ERROR,
    EXIT_NOT_CONFORMANT,
    EXIT_NOT_STARTED,
    EXIT_USAGE,
    INTEROP_DIR,
    SUITES_DIR,
    RunOptions,
    new_run_dir,
)
from .plan import (
    available_protocols,
    case_ids,
    choose_targets,
    narrow_to_cases,
    nothing_selected,
    suite_case_counts,
    suite_case_ids,
)
from .session import (
    KILLED_AFTER_RUN_TIMEOUT,
    RUN_TIMEOUT_GRACE,
    exit_code_line,
    outcome_counts,
    preflight_error,
    record_unfinished,
    run_deadline_line,
    run_suite,
)

__all__ = [
    "EXIT_CONFORMANT",
    "EXIT_HARNESS_ERROR",
    "EXIT_NOT_CONFORMANT",
    "EXIT_NOT_STARTED",
    "EXIT_USAGE",
    "INTEROP_DIR",
    "KILLED_AFTER_RUN_TIMEOUT",
    "RUN_TIMEOUT_GRACE",
    "SUITES_DIR",
    "CertifyRun",
    "InteropRun",
    "RunOptions",
    "add_impair_options",
    "available_protocols",
    "case_ids",
    "certify",
    "certify_jobs",
    "choose_targets",
    "exit_code_line",
    "impairment_extra",
    "impairment_line",
    "interop_all",
    "interop_jobs",
    "interop_pairs",
    "narrow_to_cases",
    "new_run_dir",
    "nothing_selected",
    "outcome_counts",
    "pair_records",
    "preflight_error",
    "record_unfinished",
    "resolve_impairment",
    "run_deadline_line",
    "run_suite",
    "suite_case_counts",
    "suite_case_ids",
]

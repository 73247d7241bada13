"""The errors of targets: a targets file that is wrong, a target that could
not be started. A leaf module (it imports nothing of the harness), so that
the declaration (target_spec, container_spec), the runtime (target_runtime,
containers) and the readiness rule (readiness) all raise the same types
without importing one another."""

from __future__ import annotations


class TargetError(Exception):
    """A targets file is wrong, or a target could not be started. The message
    says which target, which field, and what to do."""


class TargetNotStarted(TargetError):
    """The target (one of its roles) did not start: its process or container
    could not be run, exited before it was ready or before its client
    connected to the harness, was not ready within its readiness deadline,
    or an adapter command exited non-zero without printing anything. Not a
    verdict on any rule: the case ends in ``error``, and a run in which no
    MUST case failed for its own rule gets the verdict "NOT CERTIFIED: the
    target did not start" (exit status 4 of ``conformance certify``)."""


CANNOT_DRIVE = "CANNOT_DRIVE"
"""The line a launch adapter prints, before it is ready or connects, when the
release of the library it drives lacks an API it needs (``CANNOT_DRIVE
<library> <version>: <reason>``), then exits with EXIT_CANNOT_DRIVE: the
target did not start, which is no rule's failure (docs/targets.md,
"Adapters that cannot drive a release")."""

EXIT_CANNOT_DRIVE = 8
"""The launch adapters' exit status after a CANNOT_DRIVE line."""


def cannot_drive(output: str) -> str | None:
    """The reason of the first CANNOT_DRIVE line of a process's output, or None."""
    for line in output.splitlines():
        text = line.strip()
        if text.startswith(CANNOT_DRIVE + " "):
            return text[len(CANNOT_DRIVE) + 1 :].strip()
    return None


def not_started_message(message: str, output: str) -> str:
    """``message``, led by "adapter cannot drive ..." when the output says so."""
    reason = cannot_drive(output)
    return f"adapter cannot drive {reason}; {message}" if reason else message

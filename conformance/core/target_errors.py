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

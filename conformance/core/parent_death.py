"""A started node ends with the harness process that started it."""

from __future__ import annotations

import signal


def die_with_parent() -> None:
    """In a node's process, before exec (or, forked by the fork server,
    before its module runs): get SIGTERM when the process that started it
    dies, even by SIGKILL, so that no launched node outlives a killed run
    (Linux only).

    The "parent" of PR_SET_PDEATHSIG is the *thread* that forked: a node
    started from a worker thread (``asyncio.to_thread``, an executor) gets
    SIGTERM as soon as that thread ends. Start and restart nodes from the
    event-loop thread (conformance/suites/stomp/adapter.py does)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    except (OSError, AttributeError):
        pass

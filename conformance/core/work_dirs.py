"""The targets' work dirs: a private (0700) scratch directory per target and
run, for its key files and state, removed when the run ends; the dirs of
runs killed too hard to clean up are removed by the next run
(docs/targets.md, "Work dirs")."""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import tempfile
from pathlib import Path

WORK_DIR_PREFIX = "conformance-"
WORK_DIR_OWNER_LOCK = ".owner.lock"
"""A file in each work dir on which the process that made the dir holds an
exclusive flock(2) until it removes the dir. The kernel drops the lock when
that process dies, however it dies (SIGKILL included), so a work dir whose
lock can be taken has no live owner: the next run removes it."""
_owned_work_dirs: dict[Path, tuple[int, int]] = {}
"""Work dirs this process made and has not removed yet: path -> (the fd
holding the owner lock, the pid of the process that made it)."""


def make_work_dir(name: str) -> Path:
    """A private (0700) scratch directory for a target's key files and state.
    It lives outside the reports tree, because reports are shared and key
    files are secrets; it is deleted when the run ends (remove_work_dir,
    called by TargetRuntime.stop; at interpreter exit for any left). The
    dirs of runs killed too hard to clean up are removed here, by the next
    run (remove_abandoned_work_dirs)."""
    remove_abandoned_work_dirs()
    path = Path(tempfile.mkdtemp(prefix=f"{WORK_DIR_PREFIX}{name}."))
    os.chmod(path, 0o700)
    # Locked under a temporary name and then renamed, so that no other run
    # ever finds the owner lock unlocked while this one is starting.
    pending = path / f"{WORK_DIR_OWNER_LOCK}.{os.getpid()}"
    fd = os.open(pending, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.rename(pending, path / WORK_DIR_OWNER_LOCK)
    _owned_work_dirs[path] = (fd, os.getpid())
    return path


def remove_work_dir(path: Path) -> None:
    """Delete a work dir with what it holds (credentials, node state), then
    let go of its owner lock."""
    shutil.rmtree(path, ignore_errors=True)
    owned = _owned_work_dirs.pop(path, None)
    if owned is not None:
        os.close(owned[0])


def remove_abandoned_work_dirs(parent: Path | None = None) -> list[Path]:
    """Remove the work dirs under ``parent`` (the temp dir) whose owner is
    gone: ours (same user, a real directory, holding the owner lock file)
    and with the lock free. A dir whose lock is held belongs to a live run
    and is left alone; so is anything without the lock file (not made by
    make_work_dir, or made by a version without it). Returns what it removed."""
    parent = Path(parent or tempfile.gettempdir())
    removed = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(WORK_DIR_PREFIX):
            continue
        path = Path(entry.path)
        if path in _owned_work_dirs:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if not entry.is_dir(follow_symlinks=False) or info.st_uid != os.getuid():
                continue
            fd = os.open(path / WORK_DIR_OWNER_LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # held: its run is alive
            # Held by us now, so no other run removes it at the same time.
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        finally:
            os.close(fd)
    return removed


@atexit.register
def _remove_owned_work_dirs() -> None:
    """A run that ended without stopping its targets (an exception past the
    plugin, SystemExit) still leaves no secrets behind."""
    for path, (_, maker) in list(_owned_work_dirs.items()):
        # A forked child that exits normally must not take its parent's dirs.
        if maker == os.getpid():
            remove_work_dir(path)

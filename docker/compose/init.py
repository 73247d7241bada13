"""The `init` service of docker-compose.yml: makes this run's secrets and the
harness's targets file, then stays up until compose stops it.

Runs as root in conformance/harness:dev (which has trustme, PyNaCl and the
reference code) with the shared volumes mounted:

- ``--secrets-dir`` (the ``secrets`` volume): ``btp-token``, ``ssb/secret``
  (an ssb-keys secret file), ``stomp/`` (the run's test PKI from
  conformance/core/pki.py: CA, server and client certificates and keys, and
  a second CA nobody trusts), ``stomp/passcode``; all keys 0600. Beside
  them ``targets.toml``, rendered from ``--template`` with the SSB node's
  public id (public, not a secret), and ``.complete`` last, which the
  service's healthcheck waits for.
- ``--state-dir`` (the ``stomp-state`` volume): emptied, for the STOMP
  node's store and manifest, which the harness reads.
- ``--reports-dir`` (the reports bind mount): created if missing.

Everything is owned by ``--uid``/``--gid`` (CONFORMANCE_UID/GID, default
root), the user the nodes and the harness run as, so that the reports on
the host belong to that user. Every run makes fresh secrets: leftovers of a
run that was not taken down with ``down -v`` are deleted first.

Why it stays up instead of exiting: ``docker-compose up
--abort-on-container-exit`` stops the whole stack when *any* container
exits, a finished init service included (measured with Compose 1.29.2).
So readiness is a healthcheck on ``.complete`` and the nodes depend on
``service_healthy``. Nothing secret is printed: paths and the public id only.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import string
import sys
from pathlib import Path

from conformance.core.pki import make_pki
from reference_impl.ssb.keys import Keypair

COMPLETE_MARKER = ".complete"


def _empty(directory: Path) -> None:
    """Delete what is in ``directory`` (a volume's mount point, which itself
    cannot be removed)."""
    directory.mkdir(parents=True, exist_ok=True)
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(text)


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid)
    for parent, dirs, files in os.walk(root):
        for name in dirs + files:
            os.chown(os.path.join(parent, name), uid, gid, follow_symlinks=False)


def make_secrets(secrets_dir: Path, template: Path, uid: int, gid: int) -> str:
    """Writes the run's secrets and targets file; returns the SSB node's
    public id."""
    _empty(secrets_dir)
    _write_private(secrets_dir / "btp-token", secrets.token_hex(16))
    _write_private(secrets_dir / "stomp" / "passcode", secrets.token_hex(16))
    (secrets_dir / "ssb").mkdir(mode=0o700)
    keypair = Keypair.generate()
    keypair.save(secrets_dir / "ssb" / "secret")
    make_pki(secrets_dir / "stomp")
    # The template names paths and service host names only; the one value
    # known only now is the SSB node's public id.
    targets = string.Template(template.read_text(encoding="utf-8")).substitute(
        SSB_PUBLIC_KEY=keypair.feed_id
    )
    (secrets_dir / "targets.toml").write_text(targets, encoding="utf-8")
    _chown_tree(secrets_dir, uid, gid)
    return keypair.feed_id


def prepare_reports(reports_dir: Path, uid: int, gid: int) -> None:
    """The harness (running as uid:gid) writes runs/<run-id>/ here: the
    directory and its runs/ must be its own. Existing runs are left alone."""
    runs = reports_dir / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    for directory in (reports_dir, runs):
        os.chown(directory, uid, gid)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--secrets-dir", type=Path, required=True)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--reports-dir", type=Path, required=True)
    parser.add_argument("--template", type=Path, required=True)
    parser.add_argument("--uid", type=int, default=0)
    parser.add_argument("--gid", type=int, default=0)
    args = parser.parse_args(argv)

    feed_id = make_secrets(args.secrets_dir, args.template, args.uid, args.gid)
    _empty(args.state_dir)
    _chown_tree(args.state_dir, args.uid, args.gid)
    prepare_reports(args.reports_dir, args.uid, args.gid)
    (args.secrets_dir / COMPLETE_MARKER).touch()
    print(
        f"COMPOSE_INIT_READY secrets={args.secrets_dir} ssb_id={feed_id} uid={args.uid} gid={args.gid}",
        flush=True,
    )

    # Stay up (see the module docstring); tini forwards compose's SIGTERM.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    while True:
        signal.pause()


if __name__ == "__main__":
    sys.exit(main())

"""Builds the OCaml RIPP peer (interop/ripp-ocaml) once per test session.

scripts/build-ocaml-ripp.sh installs the toolchain from Debian's packages
when it is missing (scripts/install-ocaml.sh, root or sudo). The tests that
need the peer are skipped, with the script's own words as the reason, only
when that cannot be done: no apt-get, not root and no sudo, no network to
Debian's mirror. A build error of our OCaml code is a failure, never a skip.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "scripts" / "build-ocaml-ripp.sh"
INSTALL_SCRIPT = REPO_ROOT / "scripts" / "install-ocaml.sh"
BUILD_TIMEOUT = 900  # a first install downloads ~150 MB of Debian packages


@pytest.fixture(scope="session")
def ocaml_peer() -> Path:
    """Path of the built ripp_peer executable."""
    install = subprocess.run(
        [str(INSTALL_SCRIPT)], capture_output=True, text=True, timeout=BUILD_TIMEOUT
    )
    if install.returncode != 0:
        pytest.skip(
            f"the OCaml toolchain cannot be installed here: {install.stderr.strip() or install.stdout.strip()}"
        )
    build = subprocess.run(
        [str(BUILD_SCRIPT), "--no-install"], capture_output=True, text=True, timeout=BUILD_TIMEOUT
    )
    assert build.returncode == 0, (
        f"interop/ripp-ocaml does not build:\n{build.stdout}\n{build.stderr}"
    )
    exe = Path(build.stdout.strip().splitlines()[-1])
    assert exe.is_file(), f"build-ocaml-ripp.sh named {exe}, which does not exist"
    return exe

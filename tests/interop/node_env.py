"""Where the Node.js interop packages live, and the marker that skips a
test only when they were never installed (scripts/install-node-deps.sh)."""

import os
import shutil
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = REPO_ROOT / "interop" / "node"
NODE_MODULES = NODE_DIR / "node_modules"
INSTALL_SCRIPT = REPO_ROOT / "scripts" / "install-node-deps.sh"


def node_executable() -> str:
    # Once node_modules exists node must too; a missing node is a failure,
    # not a reason to skip.
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH although interop/node/node_modules exists")
    return node


# In CI (CI=true) the packages are always installed first, so a missing
# node_modules there must fail the interop tests, never skip them.
requires_node_modules = pytest.mark.skipif(
    not NODE_MODULES.is_dir() and not os.environ.get("CI"),
    reason=f"{NODE_MODULES} is missing: run {INSTALL_SCRIPT} (CI installs it)",
)

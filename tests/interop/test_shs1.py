"""shs1-test (the language-independent secret-handshake test suite) passes
against the reference handshake in both roles, through the stdio adapters
in interop/shs1/.  Each run is 20 good handshakes and 25 with a corrupted
peer message; a seed makes a run reproducible."""

import os
import shlex
import subprocess
import sys

import pytest

from .node_env import NODE_MODULES, REPO_ROOT, node_executable, requires_node_modules

pytestmark = [pytest.mark.node_interop, requires_node_modules]

ADAPTER_DIR = REPO_ROOT / "interop" / "shs1"
SHS1_TEST_DIR = NODE_MODULES / "shs1-test"

# Fixed seeds keep failures reproducible; several give different keys,
# network identifiers and corruptions.
SEEDS = ["conformance-1", "conformance-2", "conformance-3"]

ROLES = {
    # role: (shs1-test script, adapter, line printed on success)
    "server": ("test-server.js", "server_adapter.py", "Passed the server test suite"),
    "client": ("test-client.js", "client_adapter.py", "Passed the client test suite"),
}


def write_launcher(directory, adapter):
    """shs1-test spawns its argument directly, without a shell: give it an
    executable that runs the adapter with this test's Python (the venv's),
    whatever python3 on PATH is."""
    launcher = directory / (adapter.stem + "-launcher")
    launcher.write_text(
        f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(adapter))} "$@"\n'
    )
    launcher.chmod(0o755)
    return launcher


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("role", sorted(ROLES))
def test_shs1_test_suite_passes(role, seed, tmp_path):
    script, adapter, success_line = ROLES[role]
    launcher = write_launcher(tmp_path, ADAPTER_DIR / adapter)
    completed = subprocess.run(
        [node_executable(), str(SHS1_TEST_DIR / script), str(launcher), seed],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "FORCE_COLOR": "0"},
    )
    report = f"stdout:\n{completed.stdout}\nstderr:\n{completed.stderr}"
    assert completed.returncode == 0, f"shs1-test {role} suite failed (seed {seed!r}):\n{report}"
    assert success_line in completed.stdout, report

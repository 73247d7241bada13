"""ssb-server closes every session when the host's network interfaces
change; scripts/ssb-server.sh pins the interface list it sees, so that a
container starting beside a certification does not cut cases short
(docs/findings/ssb-server-16.md, "Sessions dropped on a host network change").

Both directions are checked, each in a private network namespace (the
host's interfaces are never touched): the pinned server keeps a session
across a veth pair appearing, and with ``--live-interfaces`` the same
change ends the session -- so the first check would see a drop if the pin
stopped working. Needs root and ``unshare -n`` (skipped otherwise, e.g. in
an unprivileged container); about 10 s.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from .node_env import REPO_ROOT, requires_node_modules


def namespace_problem() -> str | None:
    """Why a private network namespace with a veth pair cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (unshare -n, ip link add ... type veth)"
    missing = [tool for tool in ("unshare", "ip") if shutil.which(tool) is None]
    if missing:
        return f"missing {', '.join(missing)}"
    probe = subprocess.run(
        ["unshare", "-n", "sh", "-c", "ip link add probe-a type veth peer name probe-b"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if probe.returncode != 0:
        return f"cannot make a network namespace with a veth pair: {probe.stderr.strip()}"
    return None


PROBLEM = namespace_problem()

pytestmark = [
    pytest.mark.node_interop,
    requires_node_modules,
    pytest.mark.skipif(PROBLEM is not None, reason=f"network namespace: {PROBLEM}"),
]


def session_across_interface_change(*script_args: str) -> dict:
    completed = subprocess.run(
        [
            "unshare",
            "-n",
            sys.executable,
            "-m",
            "tests.interop.ssb_network_change_check",
            *script_args,
        ],
        capture_output=True,
        text=True,
        timeout=200,
        cwd=REPO_ROOT,
        env={**os.environ, "SSB_NETWORK_CHANGE_IN_NAMESPACE": "1"},
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_pinned_ssb_server_keeps_the_session_when_an_interface_appears():
    result = session_across_interface_change()
    assert result["survived"], result["detail"]


def test_ssb_server_seeing_live_interfaces_drops_the_session():
    """The behaviour the pin counters, still there: else the test above proves nothing."""
    result = session_across_interface_change("--live-interfaces")
    assert not result["survived"], result["detail"]
    assert "target ended the session (goodbye)" in result["detail"], result["detail"]

"""The golden SSB vectors agree with the JavaScript implementations
(shs1-crypto, secret-handshake, pull-box-stream, packet-stream-codec,
ssb-keys, ssb-validate) -- see interop/node/check-vectors.js."""

import subprocess

import pytest

from .node_env import NODE_DIR, REPO_ROOT, node_executable, requires_node_modules

pytestmark = [pytest.mark.node_interop, requires_node_modules]

VECTOR_DIR = REPO_ROOT / "vectors" / "ssb"
VECTOR_FILES = ["shs.json", "boxstream.json", "rpc.json", "feed.json"]


@pytest.mark.parametrize("vector_file", VECTOR_FILES)
def test_vectors_agree_with_javascript_implementations(vector_file):
    completed = subprocess.run(
        [node_executable(), str(NODE_DIR / "check-vectors.js"), str(VECTOR_DIR / vector_file)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
    )
    lines = completed.stdout.splitlines()
    failures = [line for line in lines if line.startswith("FAIL")]
    assert completed.returncode == 0, (
        f"check-vectors.js exited {completed.returncode}; failing vectors:\n"
        + ("\n".join(failures) or completed.stdout + completed.stderr)
    )
    assert any(line.startswith("ok ") for line in lines), completed.stdout + completed.stderr

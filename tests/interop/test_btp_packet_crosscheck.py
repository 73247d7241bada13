"""The BTP codec and npm btp-packet agree, both ways:

* interop/node/check-btp-vectors.js decodes every valid vector with
  btp-packet (and re-encodes its fields) and feeds it every malformed one;
  a disagreement is a failure unless the vector documents it as
  `js_divergence`, and a documented divergence must still be observed;
* interop/node/btp-encode-samples.js has btp-packet encode sample packets;
  the reference codec must decode each to the sample's fields and encode
  those fields to the same bytes."""

import json
import subprocess

import pytest

from reference_impl.btp.packet import decode_packet, encode_packet, packet_from_json

from .node_env import NODE_DIR, REPO_ROOT, node_executable, requires_node_modules

pytestmark = [pytest.mark.node_interop, requires_node_modules]

VECTOR_DIR = REPO_ROOT / "vectors" / "btp"
VECTOR_FILES = ["packets.json", "malformed.json"]


def run_node(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [node_executable(), str(NODE_DIR / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
    )


@pytest.mark.parametrize("vector_file", VECTOR_FILES)
def test_vectors_agree_with_btp_packet(vector_file):
    completed = run_node("check-btp-vectors.js", str(VECTOR_DIR / vector_file))
    lines = completed.stdout.splitlines()
    failures = [line for line in lines if line.startswith("FAIL")]
    assert completed.returncode == 0, (
        f"check-btp-vectors.js exited {completed.returncode}; failing vectors:\n"
        + ("\n".join(failures) or completed.stdout + completed.stderr)
    )
    assert any(line.startswith("ok ") for line in lines), completed.stdout + completed.stderr
    stale = [line for line in lines if "documented divergence not observed" in line]
    assert not stale, (
        "vectors document a btp-packet divergence that no longer shows:\n" + "\n".join(stale)
    )
    documented = {
        v["id"]
        for v in json.loads((VECTOR_DIR / vector_file).read_text())[
            "vectors" if vector_file == "packets.json" else "malformed"
        ]
        if "js_divergence" in v
    }
    diverging = {line.split()[2].rstrip(":") for line in lines if line.startswith("diverges ")}
    assert diverging == documented


def test_reference_codec_reads_what_btp_packet_writes():
    completed = run_node("btp-encode-samples.js")
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert document["tool"].startswith("btp-packet ")
    samples = document["samples"]
    assert len(samples) >= 20
    problems = []
    for sample in samples:
        wire = bytes.fromhex(sample["hex"])
        expected = packet_from_json(sample["packet"])
        try:
            decoded = decode_packet(wire)
        except ValueError as exc:
            problems.append(f"{sample['id']}: does not decode: {exc}")
            continue
        if decoded != expected:
            problems.append(
                f"{sample['id']}: decodes to {decoded!r}, btp-packet was given {expected!r}"
            )
        if encode_packet(expected) != wire:
            problems.append(
                f"{sample['id']}: the reference encoder writes {encode_packet(expected).hex()}, "
                f"btp-packet {sample['hex']}"
            )
    assert not problems, "\n".join(problems)

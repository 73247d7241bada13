"""Every RIPP vector through the real bin_prot library (the OCaml peer's
``ripp_peer roundtrip``): bin_prot decodes each valid encoding to the
vector's value and writes the same bytes back, writes the vector's value as
the vector's bytes, refuses each invalid one at the layer the vector names;
the OCaml envelope codec and CRC-32C agree with envelopes.json.

A difference is a disagreement between bin_prot and our Python codec (or
the vectors it generated): an erratum or a bug, never something to relax
here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from .ocaml_env import REPO_ROOT, ocaml_peer  # noqa: F401  (fixture)

VECTOR_FILES = sorted((REPO_ROOT / "vectors" / "ripp").glob("*.json"))
PROFILE = REPO_ROOT / "docs" / "ripp-profile.md"
TYPES_ML = REPO_ROOT / "interop" / "ripp-ocaml" / "bin" / "types.ml"


def test_there_are_vector_files():
    assert {p.name for p in VECTOR_FILES} >= {"binprot.json", "payloads.json", "envelopes.json"}


@pytest.mark.parametrize("vectors", VECTOR_FILES, ids=[p.name for p in VECTOR_FILES])
def test_bin_prot_round_trips_every_vector(ocaml_peer, vectors: Path):  # noqa: F811
    run = subprocess.run(
        [str(ocaml_peer), "roundtrip", str(vectors)], capture_output=True, text=True, timeout=120
    )
    lines = run.stdout.splitlines()
    summary = re.fullmatch(r"(\d+) passed, (\d+) failed", lines[-1] if lines else "")
    assert summary, (
        f"no summary line from ripp_peer roundtrip {vectors.name}:\n{run.stdout}\n{run.stderr}"
    )
    passed, failed = int(summary[1]), int(summary[2])
    failures = [line for line in lines if line.startswith("FAIL ")]
    assert run.returncode == 0 and failed == 0, (
        f"{failed} vector(s) of {vectors.name} differ under the real bin_prot:\n"
        + "\n".join(failures)
    )
    assert passed > 0
    assert passed == sum(1 for line in lines if line.startswith("ok "))


def test_the_peer_uses_the_profiles_type_definitions_verbatim():
    """types.ml is the P3 block of docs/ripp-profile.md, character for
    character (after its header comment): the bytes bin_prot derives are
    then those of the profile's types, not of a private copy."""
    profile = PROFILE.read_text(encoding="utf-8")
    block = re.search(r"```ocaml\n(.*?)```", profile, re.S)
    assert block, "docs/ripp-profile.md has no ```ocaml block"
    assert TYPES_ML.read_text(encoding="utf-8").endswith(block[1]), (
        "interop/ripp-ocaml/bin/types.ml differs from the ```ocaml block of docs/ripp-profile.md P3; "
        "copy the block again (after the file's header comment)"
    )

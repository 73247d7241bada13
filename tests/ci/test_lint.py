"""The tree keeps one style: `ruff format --check` and `ruff check` pass
([tool.ruff] in pyproject.toml: line length 100; pycodestyle errors and
warnings, pyflakes, bugbear), and each does flag a file that breaks it, so
a green run is not a ruff that looked at nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUFF = [sys.executable, "-m", "ruff"]


def ruff(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUFF, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_tree_is_formatted():
    result = ruff("format", "--check", ".")
    assert result.returncode == 0, f"run `ruff format .`:\n{result.stdout}{result.stderr}"


def test_the_tree_passes_the_linter():
    result = ruff("check", ".")
    assert result.returncode == 0, f"ruff check:\n{result.stdout}{result.stderr}"


def test_ruff_flags_what_the_project_configures(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nfor i in range(3):\n    fs = [lambda: i]\nx  =  1\n")
    checked = ruff("check", "--output-format", "concise", "bad.py", cwd=tmp_path)
    assert checked.returncode == 1
    assert "F401" in checked.stdout and "B023" in checked.stdout, checked.stdout
    formatted = ruff("format", "--check", "bad.py", cwd=tmp_path)
    assert formatted.returncode == 1, formatted.stdout

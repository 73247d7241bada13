"""The command line every golden-vector generator shares (scripts/gen_*_vectors*.py).

A generator computes its JSON documents; this writes them, or with
``--check`` compares them with the committed files, so that CI can tell
when the vectors and the code that reproduces them drift apart.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def write_or_check(
    description: str, outputs: Callable[[], Mapping[Path, str]], argv: Sequence[str] | None = None
) -> int:
    """Parse ``[--check]``; write every (path, text) of ``outputs()`` or, with
    --check, exit status 1 when a committed file differs."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--check", action="store_true", help="compare with the committed files instead of writing"
    )
    args = parser.parse_args(argv)
    documents = outputs()
    generator = Path(sys.argv[0]).name
    if args.check:
        stale = [
            path
            for path, text in documents.items()
            if not path.exists() or path.read_text(encoding="utf-8") != text
        ]
        for path in stale:
            print(
                f"{_shown(path)} differs from what {generator} generates; rerun it", file=sys.stderr
            )
        return 1 if stale else 0
    for path, text in documents.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {_shown(path)}")
    return 0


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)

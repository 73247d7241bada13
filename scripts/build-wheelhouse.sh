#!/usr/bin/env bash
# Builds the local wheelhouse the container images install from: wheels of
# the harness (conformance-harness: the `conformance` CLI, the suites and the
# reference nodes) and of all its runtime dependencies, in
# .cache/wheelhouse/ (gitignored). Image builds then run
# `pip install --no-index --find-links /wheels conformance-harness`, with no
# network inside the build.
#
# Usage: scripts/build-wheelhouse.sh [--force]
#
# Idempotent and quick when nothing changed: the dependency wheels are
# rebuilt only when the dependencies in pyproject.toml change, the project's own wheel only when
# a file of the package (conformance/, reference_impl/, setup.py,
# pyproject.toml) changes; each keeps a stamp with the hash it was built from.
# The wheels are built with .venv's Python (3.11, as in Debian bookworm's
# python3 of the base image); the C accelerators are compiled here, on
# Debian bookworm too, so the same glibc as in the image.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
house="$repo/.cache/wheelhouse"
force=0
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        *) echo "build-wheelhouse.sh: ERROR: unknown option $arg (--force)" >&2; exit 2 ;;
    esac
done
say() { echo "build-wheelhouse.sh: $*" >&2; }

[ -x .venv/bin/python ] || scripts/setup.sh
python=.venv/bin/python
mkdir -p "$house"

# The project's files that go into its wheel: every file of the two
# packages (cache and build debris excluded), plus the build files.
project_hash() {
    {
        find conformance reference_impl -type f \
            ! -path '*/__pycache__/*' ! -name '*.pyc' ! -name '*.so' -print0 \
            | LC_ALL=C sort -z | xargs -0 sha256sum
        sha256sum pyproject.toml setup.py
    } | sha256sum | cut -d' ' -f1
}

# Only what decides the dependency set: an edit elsewhere in pyproject.toml
# (pytest markers, extras) leaves the dependency wheels as they are.
deps_want="$("$python" -c 'import json, tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
print(json.dumps([p.get("requires-python"), p.get("dependencies")]))' | sha256sum | cut -d' ' -f1)"
if [ "$force" -eq 1 ] || [ "$(cat "$house/.deps-stamp" 2>/dev/null)" != "$deps_want" ]; then
    say "building the dependency wheels (dependencies changed or first run)"
    # Old versions are dropped first so pip in the image never has two to
    # choose from; `pip wheel` takes wheels from PyPI as they are and builds
    # those that come only as sources.
    find "$house" -maxdepth 1 -name '*.whl' -delete
    "$python" -m pip wheel --wheel-dir "$house" . >"$house/pip.log" 2>&1 \
        || { tail -n 30 "$house/pip.log" >&2; say "ERROR: pip wheel failed (log: $house/pip.log)"; exit 1; }
    rm -f "$house/.project-stamp"
    echo "$deps_want" >"$house/.deps-stamp"
fi

project_want="$(project_hash)"
if [ "$force" -eq 1 ] || [ "$(cat "$house/.project-stamp" 2>/dev/null)" != "$project_want" ]; then
    say "building the conformance-harness wheel"
    find "$house" -maxdepth 1 -name 'conformance_harness-*.whl' -delete
    # A fixed SOURCE_DATE_EPOCH: the same sources give the same wheel bytes,
    # so the image builds downstream see no change and are skipped.
    SOURCE_DATE_EPOCH=315532800 "$python" -m pip wheel --no-deps --wheel-dir "$house" . >"$house/pip.log" 2>&1 \
        || { tail -n 30 "$house/pip.log" >&2; say "ERROR: pip wheel failed (log: $house/pip.log)"; exit 1; }
    echo "$project_want" >"$house/.project-stamp"
fi
say "$(find "$house" -maxdepth 1 -name '*.whl' | wc -l) wheels in ${house#"$repo"/} ($(du -sh "$house" | cut -f1))"

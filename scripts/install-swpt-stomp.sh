#!/usr/bin/env bash
# Installs swpt_stomp 0.1.0 (Swaptacular's own STOMP server and client,
# github.com/swaptacular/swpt_stomp at commit
# 50f80ca3bc8efaeccafa3a1199b7eda8ed9c971b, MIT) for the STOMP targets
# `swpt-server` and `swpt-client` (interop/stomp/swpt_node.py starts them).
# It is a target, not part of the project: it gets a venv of its own,
# .tools/swpt-stomp/venv, and the project never imports its code.
#
# Usage: scripts/install-swpt-stomp.sh [--force] [--from-github] [--wheelhouse DIR]
#   --force        reinstall even if the venv already holds this commit
#   --from-github  take the commit from its public repository (needs the
#                  internet) instead of the source snapshot
#                  ../shared/thirdparty/swpt_stomp-50f80ca3bc8e.tar.gz
#                  (SWPT_STOMP_ARCHIVE=PATH names another copy of it)
#   --wheelhouse DIR  also build the wheels of swpt_stomp and its pinned
#                  dependencies into DIR (for the image conformance/swpt-stomp:dev,
#                  scripts/docker-build-images.sh); rebuilt only when the
#                  commit or the constraints change
#
# Dependencies are pinned to swpt_stomp's own poetry.lock
# (interop/stomp/swpt/constraints.txt). The broker it needs is Debian's
# RabbitMQ with the bundled rabbitmq_random_exchange plugin
# (scripts/install-rabbitmq.sh). Idempotent: a second run only checks that
# `swpt-server --help` runs. Prints the venv's bin directory at the end.
set -euo pipefail

die() {
    echo "install-swpt-stomp.sh: ERROR: $*" >&2
    exit 1
}

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$script_dir/.." && pwd)"
commit=50f80ca3bc8efaeccafa3a1199b7eda8ed9c971b
archive="${SWPT_STOMP_ARCHIVE:-$repo/../shared/thirdparty/swpt_stomp-${commit:0:12}.tar.gz}"
tools="$repo/.tools/swpt-stomp"
venv="$tools/venv"
constraints="$repo/interop/stomp/swpt/constraints.txt"

force=0 from_github=0 wheelhouse=""
while [ $# -gt 0 ]; do
    case "$1" in
        --force) force=1; shift ;;
        --from-github) from_github=1; shift ;;
        --wheelhouse) wheelhouse="${2:?--wheelhouse needs a directory}"; shift 2 ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) die "unknown argument: $1" ;;
    esac
done

# The wheels of what the venv holds (built with its pip, so the same Python).
build_wheels() {
    [ -n "$wheelhouse" ] || return 0
    mkdir -p "$wheelhouse"
    if [ -f "$wheelhouse/.built-from" ] && [ "$(cat "$wheelhouse/.built-from")" = "$want" ]; then
        echo "install-swpt-stomp.sh: wheels in $wheelhouse up to date" >&2
        return 0
    fi
    rm -f "$wheelhouse"/*.whl "$wheelhouse/.built-from"
    "$venv/bin/python" -m pip wheel --quiet -c "$constraints" -w "$wheelhouse" "$source_spec" 2>&1 \
        | grep -v "is ignored: it is neither a file nor a directory" >&2 || true
    ls "$wheelhouse"/swpt_stomp-*.whl >/dev/null 2>&1 || die "pip wheel built no swpt_stomp wheel in $wheelhouse"
    echo "$want" >"$wheelhouse/.built-from"
    echo "install-swpt-stomp.sh: $(ls "$wheelhouse"/*.whl | wc -l) wheels in $wheelhouse" >&2
}

python="${PYTHON:-python3}"
"$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
    || die "Python >= 3.10 is required for swpt_stomp (set PYTHON=...)"

stamp="$venv/.installed-commit"
want="$commit $(sha256sum "$constraints" | cut -d' ' -f1)"
# Where the source comes from; looked up only when something is to be built
# (an installed venv of this commit needs no archive).
resolve_source() {
    if [ "$from_github" -eq 1 ]; then
        source_spec="git+https://github.com/swaptacular/swpt_stomp.git@$commit"
        return 0
    fi
    [ -r "$archive" ] || die "no source snapshot of swpt_stomp ${commit:0:12} at $archive.
    It is shared/thirdparty/swpt_stomp-${commit:0:12}.tar.gz of the project's shared folder
    (its README says where it comes from). Give its path with
    SWPT_STOMP_ARCHIVE=/path/to/swpt_stomp-${commit:0:12}.tar.gz $0
    or take the commit from its public repository with $0 --from-github"
    # The snapshot is the commit's tree; check it is the one we pin.
    listing="$(tar -tzf "$archive")" || die "cannot read $archive"
    grep -qx "swpt_stomp-${commit:0:12}/swpt_stomp/server.py" <<<"$listing" \
        || die "$archive is not swpt_stomp at ${commit:0:12} (no swpt_stomp-${commit:0:12}/swpt_stomp/server.py)"
    source_spec="$archive"
}

if [ "$force" -eq 0 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/swpt-server" ]; then
    "$venv/bin/swpt-server" --help >/dev/null 2>&1 || die "$venv/bin/swpt-server --help fails; rerun with --force"
    echo "install-swpt-stomp.sh: swpt_stomp ${commit:0:12} already installed in $venv"
    [ -z "$wheelhouse" ] || resolve_source
    build_wheels
    echo "$venv/bin"
    exit 0
fi

resolve_source
rm -rf "$venv"
mkdir -p "$tools"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
"$venv/bin/python" -m pip install --quiet -c "$constraints" "$source_spec" 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" >&2 || true
[ -x "$venv/bin/swpt-server" ] || die "pip install of swpt_stomp failed (no $venv/bin/swpt-server)"
for command in swpt-server swpt-client configure-queue; do
    "$venv/bin/$command" --help >/dev/null || die "$command --help fails"
done
echo "$want" >"$stamp"
build_wheels
echo "install-swpt-stomp.sh: installed swpt_stomp ${commit:0:12} ($("$venv/bin/python" -m pip show swpt-stomp 2>/dev/null | awk '/^Version/ {print $2}')) in $venv"
echo "$venv/bin"

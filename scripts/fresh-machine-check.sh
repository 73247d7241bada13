#!/usr/bin/env bash
# Runs a test tier's setup the way a new user's machine runs it: in a new
# container of the project's own base image (conformance/base:bookworm, a
# debootstrapped Debian 12 with nothing of the project's installed), on a
# fresh clone of HEAD, with only the prerequisites the README names
# installed first. A missing install step then fails here, not on a new
# user's machine. tests/containers/test_fresh_machine.py runs it.
#
# Usage: scripts/fresh-machine-check.sh [--tier fast|full] [--log FILE] [--test]
#   --tier T   the tier whose setup runs: `scripts/test.sh --tier T --setup-only`
#              (default full: .venv with the test extra, the npm packages,
#              RabbitMQ, OCaml with bin_prot, swpt_stomp, ActiveMQ with Java 17,
#              the Allure command line and Chromium)
#   --log FILE the container's whole output (default: a file in the work folder)
#   --test     then run the tier's tests there too (`scripts/test.sh --tier T`),
#              timed: the tier's time on a new machine, nothing cached but the clone
#
# Needs: a Docker engine with conformance/base:bookworm (scripts/docker-setup.sh,
# as root) and the package registries (Debian's, PyPI, npm) from the host's
# network, trusted with the host's CA bundle (FRESH_MACHINE_CA_BUNDLE, default
# /etc/ssl/certs/ca-certificates.crt, mounted read-only). The full tier also needs the swpt_stomp source snapshot:
# $SWPT_STOMP_ARCHIVE, else ../shared/thirdparty/swpt_stomp-50f80ca3bc8e.tar.gz
# beside the checkout; it is mounted read-only into the container and named
# there by SWPT_STOMP_ARCHIVE, as a user without shared/ beside the clone
# would name it.
#
# Prints each step's time and, at the end, "fresh-machine-check: OK ..." with
# the total. Exit 0: the setup succeeded and a second run of it only checked;
# 1: a step failed (the log's tail is printed); 2: usage or no engine/image.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
image=conformance/base:bookworm
swpt_commit=50f80ca3bc8e

say() { echo "fresh-machine-check: $*" >&2; }
die() { say "ERROR: $*"; exit "${2:-1}"; }

tier=full log="" run_tests=0
while [ $# -gt 0 ]; do
    case "$1" in
        --tier) tier="${2:?--tier needs fast or full}"; shift 2 ;;
        --tier=*) tier="${1#--tier=}"; shift ;;
        --log) log="${2:?--log needs a file}"; shift 2 ;;
        --test) run_tests=1; shift ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) die "unknown argument $1 (see --help)" 2 ;;
    esac
done
case "$tier" in fast|full) ;; *) die "--tier takes fast or full, got '$tier'" 2 ;; esac
command -v docker >/dev/null 2>&1 || die "no docker client (scripts/docker-setup.sh)" 2
docker image inspect "$image" >/dev/null 2>&1 || die "no image $image (scripts/docker-setup.sh)" 2

work="$(mktemp -d "${TMPDIR:-/tmp}/fresh-machine.XXXXXX")"
name="conformance-fresh-$$-$RANDOM"
cleanup() {
    docker rm -f "$name" >/dev/null 2>&1 || true
    # The container wrote the clone as root: remove it from a container too
    # when the host user cannot.
    rm -rf "$work/clone" 2>/dev/null \
        || docker run --rm -v "$work:/w" "$image" rm -rf /w/clone >/dev/null 2>&1 || true
    [ -n "$log" ] && [ "$log" != "$work/container.log" ] && rm -rf "$work" || true
}
trap cleanup EXIT
log="${log:-$work/container.log}"
: >"$log"

# A fresh clone of what is committed: what a new user gets.
git clone --quiet --no-hardlinks "$repo" "$work/clone"
say "clone of $(git -C "$repo" rev-parse --short HEAD) in $work/clone; log: $log"

mounts=(-v "$work/clone:/home/user/conformance-harness")
envs=()
# The host's trust store, so that a network that inspects TLS on its way to
# the registries (as this project's machines' does) is trusted inside as it
# is outside; apt goes over plain HTTP and needs none. Mounted beside the
# container's own store, which installing ca-certificates rewrites.
host_ca="${FRESH_MACHINE_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
if [ -r "$host_ca" ]; then
    mounts+=(-v "$(realpath "$host_ca"):/host-ca/ca-certificates.crt:ro")
    envs+=(-e PIP_CERT=/host-ca/ca-certificates.crt -e SSL_CERT_FILE=/host-ca/ca-certificates.crt
           -e NODE_EXTRA_CA_CERTS=/host-ca/ca-certificates.crt
           -e npm_config_cafile=/host-ca/ca-certificates.crt)
fi
if [ "$tier" = full ]; then
    archive="${SWPT_STOMP_ARCHIVE:-$repo/../shared/thirdparty/swpt_stomp-$swpt_commit.tar.gz}"
    [ -r "$archive" ] || die "the full tier's setup needs swpt_stomp's source snapshot: set SWPT_STOMP_ARCHIVE=PATH (not at $archive)" 2
    mounts+=(-v "$(realpath "$archive"):/thirdparty/swpt_stomp-$swpt_commit.tar.gz:ro")
    envs+=(-e "SWPT_STOMP_ARCHIVE=/thirdparty/swpt_stomp-$swpt_commit.tar.gz")
fi

# Inside: the README's prerequisites (Python 3.11+ with venv and the headers
# and compiler the C accelerators build with, git, and for the full tier
# Node.js 18+ with npm), then the tier's setup twice: the second run must
# only check (every install script is idempotent).
read -r -d '' inside <<'SH' || true
set -euo pipefail
step() { echo "fresh-machine-check: step $1 done in $(( SECONDS - started )) s"; started=$SECONDS; }
started=$SECONDS; total=$SECONDS
export DEBIAN_FRONTEND=noninteractive
prereqs=(python3 python3-venv python3-dev gcc git ca-certificates)
[ "$TIER" = full ] && prereqs+=(nodejs npm)
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${prereqs[@]}" >/dev/null
step "prerequisites (${prereqs[*]})"
cd /home/user/conformance-harness
./scripts/test.sh --tier "$TIER" --setup-only
step "setup of the $TIER tier"
./scripts/test.sh --tier "$TIER" --setup-only
step "second setup (checks only)"
.venv/bin/conformance targets >/dev/null
.venv/bin/conformance certify --protocol ripplehost --run-dir /tmp/fresh-certify >/tmp/certify.log 2>&1 \
    || { tail -20 /tmp/certify.log; exit 1; }
step "certify of the Ripple host reference node"
if [ "$RUN_TESTS" = 1 ]; then
    # The spec texts are not beside this clone: their tests skip, saying so.
    ./scripts/test.sh --tier "$TIER" || { echo "fresh-machine-check: the $TIER tier's tests failed"; exit 1; }
    step "tests of the $TIER tier"
fi
echo "fresh-machine-check: inside OK in $(( SECONDS - total )) s"
SH

started=$SECONDS
set +e
docker run --name "$name" --network host "${mounts[@]}" "${envs[@]}" -e "TIER=$tier" -e "RUN_TESTS=$run_tests" \
    "$image" bash -c "$inside" >"$log" 2>&1
code=$?
set -e
grep '^fresh-machine-check: ' "$log" >&2 || true
if [ "$code" -ne 0 ]; then
    say "the $tier tier's setup failed in a fresh container (exit $code); the log's last lines:"
    tail -40 "$log" >&2
    exit 1
fi
say "OK: the $tier tier set itself up in a fresh $image container in $((SECONDS - started)) s"

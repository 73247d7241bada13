#!/usr/bin/env bash
# Sets up the container tier on a machine with no image registry: Debian's
# Docker engine, a running dockerd, and the local base image every project
# image starts FROM. Idempotent; when all is there it only checks (seconds).
#
# Usage: scripts/docker-setup.sh        (as root, or with sudo available)
#
#   1. installs Debian's docker.io, docker-compose and debootstrap (apt) if missing;
#   2. starts dockerd if no engine answers `docker info`, logging to
#      $DOCKERD_LOG (default /var/log/conformance-dockerd.log), and waits
#      until it answers;
#   3. builds conformance/base:bookworm if the engine lacks it: debootstrap
#      of Debian bookworm (minbase + python3, python3-venv, ca-certificates)
#      from this machine's configured Debian mirror, then `docker import`.
#
# Why no `docker pull debian:bookworm`: this project's machines reach PyPI,
# Debian's archive and npm, and no image registry. debootstrap makes the
# same thing from the Debian archive apt already uses.
#
# Environment: DOCKERD_LOG (dockerd's log), DOCKERD_FLAGS (extra dockerd
# flags, e.g. --storage-driver=vfs), DOCKERD (the dockerd binary; default
# Debian's), DEBIAN_MIRROR (override the mirror read from
# /etc/apt/sources.list*), DOCKER_SETUP_TIMEOUT (seconds to wait for
# dockerd, default 60).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
base_image="conformance/base:bookworm"
dockerd_log="${DOCKERD_LOG:-/var/log/conformance-dockerd.log}"
wait_seconds="${DOCKER_SETUP_TIMEOUT:-60}"
started=$SECONDS

say() { echo "docker-setup.sh: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

sudo=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "run as root (installs packages, starts dockerd, runs debootstrap)"
    sudo=(sudo)
fi

# One set-up at a time (two would both start a dockerd or debootstrap and
# import the base); a second one waits, then finds everything done.
mkdir -p "$repo/.cache"
exec 9>"$repo/.cache/docker-setup.lock"
flock 9

# --- 1. packages -------------------------------------------------------------
# docker.io brings dockerd, containerd, runc and a client; docker-compose is
# Compose v1 (Python), the one Debian bookworm ships; debootstrap builds the
# base image. A docker client elsewhere on PATH (e.g. /usr/local/bin) is fine:
# clients negotiate the API version with the daemon.
packages=(docker.io docker-compose debootstrap)
missing=()
for p in "${packages[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install ${missing[*]} by hand"
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # A fresh machine has no package lists: without an update the install finds nothing.
    "${sudo[@]}" apt-get update -q >/dev/null
    # The package's maintainer script tries to start the service through
    # invoke-rc.d; with no init system that fails harmlessly, and step 2
    # starts dockerd itself.
    "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null \
        || die "apt-get install ${missing[*]} failed"
fi
command -v dockerd >/dev/null 2>&1 || [ -x /usr/sbin/dockerd ] || die "dockerd not found after installing docker.io"
command -v docker >/dev/null 2>&1 || die "no docker client on PATH"
dockerd_bin="${DOCKERD:-$(command -v dockerd || echo /usr/sbin/dockerd)}"

# --- 2. the engine -------------------------------------------------------------
engine_up() { "${sudo[@]}" docker info >/dev/null 2>&1; }

# Can the kernel stack an overlay on the filesystem of /var/lib/docker? Not
# when that filesystem is itself an overlay (a machine that is a container),
# nor on a kernel without overlayfs: dockerd then fails to start with
# overlay2, and vfs (a full copy per layer: slower, bigger, always works) is
# the driver that does.
overlay_works() {
    local root=/var/lib/docker probe
    "${sudo[@]}" mkdir -p "$root"
    probe="$("${sudo[@]}" mktemp -d "$root/overlay-probe.XXXXXX")" || return 1
    "${sudo[@]}" mkdir -p "$probe/lower" "$probe/upper" "$probe/work" "$probe/merged"
    local ok=1
    if "${sudo[@]}" mount -t overlay overlay \
        -o "lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work" "$probe/merged" 2>/dev/null; then
        ok=0
        "${sudo[@]}" umount "$probe/merged" || true
    fi
    "${sudo[@]}" rm -rf "$probe"
    return "$ok"
}

# A dockerd process that is not a zombie (an exited daemon, orphaned by
# the detached start, stays a zombie until PID 1 reaps it).
dockerd_alive() {
    local pid
    for pid in $(pgrep -x dockerd 2>/dev/null); do
        [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] || return 0
    done
    return 1
}

start_dockerd() {
    # setsid + nohup: dockerd outlives this script and the shell that ran it.
    # 9>&-: the lock's descriptor must not live on in dockerd, or the next
    # set-up would wait for the lock forever.
    say "starting dockerd${*:+ $*} (log: $dockerd_log)"
    "${sudo[@]}" mkdir -p "$(dirname "$dockerd_log")"
    "${sudo[@]}" sh -c 'exec setsid nohup "$0" "$@" >>"'"$dockerd_log"'" 2>&1 </dev/null 9>&- &' "$dockerd_bin" "$@" 9>&-
    local deadline=$((SECONDS + wait_seconds))
    while [ "$SECONDS" -lt "$deadline" ]; do
        engine_up && return 0
        # dockerd gone: it refused to start; no point waiting for it.
        dockerd_alive || return 1
        sleep 0.5
    done
    return 1
}

stop_our_dockerd() {
    local pidfile=/var/run/docker.pid pid
    [ -f "$pidfile" ] || return 0
    pid="$(cat "$pidfile")"
    "${sudo[@]}" kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 100); do "${sudo[@]}" kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
}

# A dockerd that is still starting (another setup run a moment ago) gets
# the usual time to answer before anything else is tried.
if ! engine_up && dockerd_alive; then
    say "a dockerd runs but does not answer yet; waiting up to ${wait_seconds}s"
    deadline=$((SECONDS + wait_seconds))
    until engine_up; do
        [ "$SECONDS" -lt "$deadline" ] || die "a dockerd runs but \`docker info\` fails; see $dockerd_log"
        sleep 0.5
    done
fi
if engine_up; then
    say "engine already running ($("${sudo[@]}" docker info --format '{{.ServerVersion}}, storage {{.Driver}}'))"
else
    read -r -a flags <<<"${DOCKERD_FLAGS:-}"
    if [[ " ${flags[*]} " != *" --storage-driver"* ]] && ! overlay_works; then
        say "overlay mounts fail on /var/lib/docker's filesystem: using the vfs storage driver"
        flags+=(--storage-driver=vfs)
    fi
    if ! start_dockerd "${flags[@]}"; then
        # The usual failure on a container-less VM or a nested container:
        # dockerd cannot program iptables (no nat table / no xt modules) and
        # exits at "failed to create NAT chain DOCKER". Without iptables,
        # containers still get a bridge address and published ports still
        # work through docker-proxy (the userland proxy), which is all the
        # harness uses (loopback-published ports); outbound NAT is lost, and
        # nothing here needs the outside world.
        say "dockerd did not come up; last lines of $dockerd_log:"
        tail -n 5 "$dockerd_log" >&2 || true
        stop_our_dockerd
        say "retrying with --iptables=false --ip-masq=false"
        start_dockerd "${flags[@]}" --iptables=false --ip-masq=false \
            || { tail -n 20 "$dockerd_log" >&2; die "dockerd did not answer within ${wait_seconds}s"; }
    fi
    say "engine up ($("${sudo[@]}" docker info --format '{{.ServerVersion}}, storage {{.Driver}}'))"
fi

# --- 3. the base image ---------------------------------------------------------
if "${sudo[@]}" docker image inspect "$base_image" >/dev/null 2>&1; then
    say "$base_image present; done in $((SECONDS - started))s"
    exit 0
fi

# The mirror apt already uses for bookworm (deb822 .sources files or
# one-line sources.list entries); deb.debian.org otherwise.
mirror="${DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
    mirror="$(python3 - <<'PY' 2>/dev/null || true
import glob, re
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in re.split(r"\n\s*\n", open(path).read()):
        fields = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line:
                continue
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.split()
        if "bookworm" in fields.get("suites", []) and "deb" in fields.get("types", []):
            print(fields["uris"][0]); raise SystemExit
for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        m = re.match(r"\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+bookworm\s", line + " ")
        if m:
            print(m.group(1)); raise SystemExit
PY
)"
fi
mirror="${mirror:-http://deb.debian.org/debian}"

# debootstrap's downloads are kept (gitignored) so a rebuild after the engine
# lost its images does not fetch again.
cache="$repo/.cache/debootstrap"
mkdir -p "$cache/debs"
rootfs="$(mktemp -d "${TMPDIR:-/tmp}/conformance-rootfs.XXXXXX")"
trap '"${sudo[@]}" rm -rf "$rootfs"' EXIT
say "debootstrap bookworm from $mirror (minbase + python3, python3-venv, ca-certificates)"
"${sudo[@]}" debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    --cache-dir="$cache/debs" bookworm "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 \
    || { tail -n 20 "$cache/debootstrap.log" >&2; die "debootstrap failed (log: $cache/debootstrap.log)"; }
# Smaller image: package lists and downloaded .debs are not needed at run
# time (nothing installs from apt inside builds: there is no network there).
"${sudo[@]}" rm -rf "$rootfs/var/lib/apt/lists/"* "$rootfs/var/cache/apt/archives/"*.deb \
    "$rootfs/usr/share/doc" "$rootfs/usr/share/man" "$rootfs/usr/share/info"
say "importing as $base_image"
"${sudo[@]}" tar -C "$rootfs" --numeric-owner -c . | "${sudo[@]}" docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    --message "debootstrap --variant=minbase bookworm from $mirror" - "$base_image" >/dev/null
"${sudo[@]}" docker run --rm --network none "$base_image" python3 -c 'import venv, ssl' \
    || die "$base_image was imported but python3 does not run in it"
say "$base_image built ($("${sudo[@]}" docker image inspect -f '{{.Size}}' "$base_image" | awk '{printf "%.0f MB", $1/1e6}')); done in $((SECONDS - started))s"

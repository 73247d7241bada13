#!/usr/bin/env bash
# Installs RabbitMQ from Debian's packages (rabbitmq-server, which ships the
# rabbitmq_stomp plugin) for the `rabbitmq` conformance target
# (scripts/rabbitmq.sh). Idempotent: a second run only checks.
#
# Usage: scripts/install-rabbitmq.sh        (as root, or with sudo available)
#
# Pinned: RabbitMQ 3.10.8 (upstream version), the one docs/findings/
# rabbitmq-3.10.md was found with (Debian 12's 3.10.8-1.1 and its security
# revisions). RABBITMQ_VERSION=3.10.x installs another upstream release,
# whose findings are then unchecked.
#
# The package's own service is not started: the project runs a private
# RabbitMQ per run (scripts/rabbitmq.sh), with its own data directory, node
# name and ports, and never touches the system node.
set -euo pipefail

die() {
    echo "install-rabbitmq.sh: ERROR: $*" >&2
    exit 1
}

want="${RABBITMQ_VERSION:-3.10.8}"
# The Debian version's upstream part: 3.10.8-1.1+deb12u1 -> 3.10.8.
upstream() { local v="${1#*:}"; v="${v%%-*}"; echo "${v%%+*}"; }
if command -v rabbitmq-server >/dev/null 2>&1 \
    || [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ]; then
    if ls /usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins/rabbitmq_stomp-* >/dev/null 2>&1; then
        have="$(dpkg-query -W -f='${Version}' rabbitmq-server 2>/dev/null || echo '?')"
        [ "$(upstream "$have")" = "$want" ] \
            || die "rabbitmq-server $have is installed, the findings are for $want: remove it (apt-get remove rabbitmq-server) or set RABBITMQ_VERSION=$(upstream "$have")"
        echo "install-rabbitmq.sh: rabbitmq-server $have already installed"
        exit 0
    fi
fi

command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install rabbitmq-server (with the rabbitmq_stomp plugin) by hand"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "run as root (apt-get install rabbitmq-server)"
    sudo=(sudo)
fi

# policy-rc.d exit 101 tells the package scripts not to start the system
# service (no init system in containers; and the project never uses it).
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
    "${sudo[@]}" chmod 0755 "$policy"
    created_policy=1
fi
remove_policy() {
    if [ "$created_policy" -eq 1 ]; then
        "${sudo[@]}" rm -f "$policy"
    fi
}
trap remove_policy EXIT

export DEBIAN_FRONTEND=noninteractive
# The newest Debian revision of the pinned upstream version in the sources.
pinned() {
    apt-cache madison rabbitmq-server 2>/dev/null | awk -F'|' '{gsub(/ /, "", $2); print $2}' \
        | while read -r v; do [ "$(upstream "$v")" = "$want" ] && echo "$v"; done | head -n 1 || true
}
version="$(pinned)"
if [ -z "$version" ]; then
    "${sudo[@]}" apt-get update -qq
    version="$(pinned)"
fi
[ -n "$version" ] \
    || die "no rabbitmq-server $want in the apt sources (Debian 12 has 3.10.8-1.1; RABBITMQ_VERSION picks another)"
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "rabbitmq-server=$version" >/dev/null \
    || die "apt-get install rabbitmq-server=$version failed"

# If the package started the system node anyway, stop it: it would hold
# epmd's default port and a node named rabbit@<host>.
if command -v invoke-rc.d >/dev/null 2>&1; then
    "${sudo[@]}" invoke-rc.d rabbitmq-server stop >/dev/null 2>&1 || true
fi

ls /usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins/rabbitmq_stomp-* >/dev/null 2>&1 \
    || die "rabbitmq-server installed but the rabbitmq_stomp plugin is missing"
echo "install-rabbitmq.sh: installed rabbitmq-server $(dpkg-query -W -f='${Version}' rabbitmq-server)"

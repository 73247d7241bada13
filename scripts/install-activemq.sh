#!/usr/bin/env bash
# Installs Apache ActiveMQ 5.17 from Debian's packages (activemq, which
# ships the broker with its STOMP transport, activemq-stomp.jar) and a Java
# 17 runtime with keytool, for the `activemq` conformance target
# (scripts/activemq.sh). Idempotent: a second run only checks.
#
# Usage: scripts/install-activemq.sh        (as root, or with sudo available)
#
# Pinned: ActiveMQ 5.17.2 (upstream version), the one docs/findings/
# activemq-5.17.md was found with; Debian's revisions of it (5.17.2+dfsg-2,
# +deb12u1, ...) patch no STOMP or transport code. ACTIVEMQ_VERSION=5.17.x
# installs another upstream release, whose findings are then unchecked.
#
# The package's own service ("main" instance, /etc/activemq, /var/lib/activemq)
# is neither enabled nor started: the project runs a private broker per run
# (scripts/activemq.sh), with its own configuration, data and ports.
set -euo pipefail

die() {
    echo "install-activemq.sh: ERROR: $*" >&2
    exit 1
}

want="${ACTIVEMQ_VERSION:-5.17.2}"
# The Debian version's upstream part: 5.17.2+dfsg-2+deb12u1 -> 5.17.2.
upstream() { local v="${1#*:}"; v="${v%%-*}"; echo "${v%%+*}"; }
jar=/usr/share/activemq/bin/activemq.jar
stomp_jar=/usr/share/activemq/lib/activemq-stomp.jar
installed() {
    [ -r "$jar" ] && [ -r "$stomp_jar" ] && command -v java >/dev/null 2>&1 && command -v keytool >/dev/null 2>&1 \
        && command -v openssl >/dev/null 2>&1
}
if installed; then
    have="$(dpkg-query -W -f='${Version}' activemq 2>/dev/null || echo '?')"
    [ "$(upstream "$have")" = "$want" ] \
        || die "activemq $have is installed, the findings are for $want: remove it (apt-get remove activemq) or set ACTIVEMQ_VERSION=$(upstream "$have")"
    echo "install-activemq.sh: activemq $have already installed"
    exit 0
fi

command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install ActiveMQ 5.17 and Java 17 by hand"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "run as root (apt-get install activemq)"
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
# The policy is read whole before grep looks at it: under pipefail,
# `apt-cache policy | grep -q` fails with 141 whenever grep quits at its match
# while apt-cache is still writing (SIGPIPE).
# The newest Debian revision of the pinned upstream version in the sources.
pinned() {
    apt-cache madison activemq 2>/dev/null | awk -F'|' '{gsub(/ /, "", $2); print $2}' \
        | while read -r v; do [ "$(upstream "$v")" = "$want" ] && echo "$v"; done | head -n 1 || true
}
version="$(pinned)"
if [ -z "$version" ]; then
    "${sudo[@]}" apt-get update -qq
    version="$(pinned)"
fi
[ -n "$version" ] \
    || die "no activemq $want in the apt sources (Debian 12 has 5.17.2+dfsg; ACTIVEMQ_VERSION picks another)"
# openjdk-17-jre-headless brings java and keytool; openssl makes the key store.
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "activemq=$version" openjdk-17-jre-headless openssl >/dev/null \
    || die "apt-get install activemq=$version failed"

installed || die "activemq installed but $jar, $stomp_jar, java, keytool or openssl is missing"
echo "install-activemq.sh: installed activemq $(dpkg-query -W -f='${Version}' activemq)"

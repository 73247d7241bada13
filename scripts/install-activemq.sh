#!/usr/bin/env bash
# Installs Apache ActiveMQ 5.17 from Debian's packages (activemq, which
# ships the broker with its STOMP transport, activemq-stomp.jar) and a Java
# 17 runtime with keytool, for the `activemq` conformance target
# (scripts/activemq.sh). Idempotent: a second run only checks.
#
# Usage: scripts/install-activemq.sh        (as root, or with sudo available)
#
# The package's own service ("main" instance, /etc/activemq, /var/lib/activemq)
# is neither enabled nor started: the project runs a private broker per run
# (scripts/activemq.sh), with its own configuration, data and ports.
set -euo pipefail

die() {
    echo "install-activemq.sh: ERROR: $*" >&2
    exit 1
}

jar=/usr/share/activemq/bin/activemq.jar
stomp_jar=/usr/share/activemq/lib/activemq-stomp.jar
installed() {
    [ -r "$jar" ] && [ -r "$stomp_jar" ] && command -v java >/dev/null 2>&1 && command -v keytool >/dev/null 2>&1 \
        && command -v openssl >/dev/null 2>&1
}
if installed; then
    echo "install-activemq.sh: activemq $(dpkg-query -W -f='${Version}' activemq 2>/dev/null || echo '?') already installed"
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
candidate_517() { grep -q 'Candidate: 5\.17\.' <<<"$(apt-cache policy activemq 2>/dev/null || true)"; }
if ! candidate_517; then
    "${sudo[@]}" apt-get update -qq
fi
candidate_517 \
    || die "no activemq 5.17 candidate in the apt sources (Debian 12 has 5.17.2+dfsg)"
# openjdk-17-jre-headless brings java and keytool; openssl makes the key store.
"${sudo[@]}" apt-get install -y -qq --no-install-recommends activemq openjdk-17-jre-headless openssl >/dev/null \
    || die "apt-get install activemq failed"

installed || die "activemq installed but $jar, $stomp_jar, java, keytool or openssl is missing"
echo "install-activemq.sh: installed activemq $(dpkg-query -W -f='${Version}' activemq)"

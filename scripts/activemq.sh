#!/usr/bin/env bash
# Runs a private Apache ActiveMQ 5.17 (Debian's activemq package, installed
# by scripts/install-activemq.sh, on Java 17) as a STOMP conformance target:
# a stomp+ssl transport connector that requires client certificates
# (needClientAuth=true) and speaks TLS 1.3 only
# (transport.enabledProtocols=TLSv1.3, applied to the SSLServerSocket by
# TcpTransportServer.configureServerSocket), loopback only, and nothing
# shared with the package's own instance (own conf, data, key stores, ports;
# the package's /etc/activemq and /var/lib/activemq are never read).
#
#   scripts/activemq.sh --cert SERVER_PEM --key SERVER_KEY --ca CA_PEM
#       [--data-dir DIR]     keep the broker's conf and data here (created if
#                            missing): a second start with the same DIR is the
#                            same broker with the same KahaDB store (the
#                            harness's restart case). Default: a temporary
#                            directory, deleted on exit.
#       [--port PORT]        STOMP TLS port (default: a free loopback port)
#       [--listen ADDRESS]   address of the STOMP TLS listener (default
#                            127.0.0.1; 0.0.0.0 in a container)
#       [--adapter-port PORT] plain STOMP port on 127.0.0.1 for the
#                            "accepted" adapter only (interop/stomp/
#                            activemq_accepted.py browses the queue there);
#                            default: a free loopback port
#       [--queue NAME]       the queue SENDs go to, created at start
#                            (default smp: destination /queue/smp)
#       [--tls-versions LIST] enabled TLS versions, comma-separated (default
#                            TLSv1.3)
#       [--java PATH]        the java binary (default: java on PATH)
#       [--timeout SECONDS]  how long to wait for the broker (default 120)
#
# Once the broker logs that it started and the TLS listener accepts TCP,
# prints one line on stdout:
#   ACTIVEMQ_READY=1 port=<stomp tls port> adapter_port=<port> queue=<name> data_dir=<dir>
# A STOMP client then SENDs to destination /queue/<queue> (ActiveMQ's STOMP
# destinations start with /queue/ or /topic/); CONNECT needs no login (no
# authentication plugin is configured). Stays in the foreground;
# SIGTERM/SIGINT stop the broker. SIGKILL of the process group (the harness
# does that to test durability) kills everything without cleanup; the data
# directory stays for the next start.
set -euo pipefail

die() {
    echo "activemq.sh: ERROR: $*" >&2
    exit 1
}
# shellcheck source=lib/service.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/service.sh"

activemq_home=/usr/share/activemq
[ -r "$activemq_home/bin/activemq.jar" ] || die "ActiveMQ is not installed ($activemq_home/bin/activemq.jar); run scripts/install-activemq.sh"

cert="" key="" ca="" data_dir="" stomp_port="" adapter_port="" queue="smp" tls_versions="TLSv1.3"
listen=127.0.0.1 java="" timeout_seconds=120
while [ $# -gt 0 ]; do
    case "$1" in
        --cert) cert="${2:?--cert needs a value}"; shift 2 ;;
        --key) key="${2:?--key needs a value}"; shift 2 ;;
        --ca) ca="${2:?--ca needs a value}"; shift 2 ;;
        --data-dir) data_dir="${2:?--data-dir needs a value}"; shift 2 ;;
        --port) stomp_port="${2:?--port needs a value}"; shift 2 ;;
        --listen) listen="${2:?--listen needs a value}"; shift 2 ;;
        --adapter-port) adapter_port="${2:?--adapter-port needs a value}"; shift 2 ;;
        --queue) queue="${2:?--queue needs a value}"; shift 2 ;;
        --tls-versions) tls_versions="${2:?--tls-versions needs a value}"; shift 2 ;;
        --java) java="${2:?--java needs a value}"; shift 2 ;;
        --timeout) timeout_seconds="${2:?--timeout needs a value}"; shift 2 ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) die "unknown argument $1" ;;
    esac
done
require_tls_files
[ -n "$java" ] || java="$(command -v java || true)"
[ -n "$java" ] && [ -x "$java" ] || die "java not found (Java 17: apt-get install openjdk-17-jre-headless)"
keytool="$(dirname "$(readlink -f "$java")")/keytool"
[ -x "$keytool" ] || keytool="$(command -v keytool || true)"
[ -n "$keytool" ] || die "keytool (the JDK's key store tool) not found beside $java"
command -v openssl >/dev/null 2>&1 || die "openssl not found"
[[ "$timeout_seconds" =~ ^[0-9]+$ ]] || die "bad --timeout $timeout_seconds"
[[ "$queue" =~ ^[A-Za-z0-9_.-]+$ ]] || die "bad --queue $queue"
[[ "$tls_versions" =~ ^TLSv1\.[0-9](,TLSv1\.[0-9])*$ ]] || die "bad --tls-versions $tls_versions"
[[ "$listen" =~ ^[0-9]+(\.[0-9]+){3}$ ]] || die "bad --listen $listen (an IPv4 address)"
probe_address="$listen"
[ "$listen" != 0.0.0.0 ] || probe_address=127.0.0.1

free_port() {
    # A port nobody listens on now: bind port 0 on loopback and report it
    # (without Python: a random port that does not answer).
    local port
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
        return
    fi
    for _ in 1 2 3 4 5; do
        port=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return
        fi
    done
    die "no free port found"
}
assign_ports stomp_port adapter_port
[ "$stomp_port" != "$adapter_port" ] || die "--port and --adapter-port are the same"

use_data_dir activemq
conf="$data_dir/conf" store="$data_dir/data" tmp="$data_dir/tmp"
mkdir -p "$conf" "$store" "$tmp" "$data_dir/log"
log_file="$data_dir/log/broker.out"

# Key stores (PKCS12) from the PEM files, made at every start (the files may
# change between runs, never between a start and its restart). The key
# store holds the server's key and certificate; the trust store the CA,
# as a trusted certificate entry (keytool marks it trusted for Java, which
# a PKCS12 file written by openssl 3.0 is not).
if [ ! -s "$conf/store-password" ]; then
    od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$conf/store-password"
fi
password="$(cat "$conf/store-password")"
rm -f "$conf/keystore.p12" "$conf/truststore.p12"
openssl pkcs12 -export -in "$cert" -inkey "$key" -name server -out "$conf/keystore.p12" \
    -passout "pass:$password" >>"$data_dir/log/keystores.out" 2>&1 \
    || { cat "$data_dir/log/keystores.out" >&2; die "openssl pkcs12 -export of $cert and $key failed"; }
"$keytool" -importcert -noprompt -alias ca -file "$ca" -keystore "$conf/truststore.p12" -storetype PKCS12 \
    -storepass "$password" >>"$data_dir/log/keystores.out" 2>&1 \
    || { cat "$data_dir/log/keystores.out" >&2; die "keytool -importcert of $ca failed"; }

# The broker: no JMX, no advisories, KahaDB syncing the journal before a
# persistent message is acknowledged (journalDiskSyncStrategy always, the
# default, spelled out), the queue created at start, browsing (the adapter)
# not capped at the default 400 messages.
cat >"$conf/activemq.xml" <<EOF
<beans xmlns="http://www.springframework.org/schema/beans"
       xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
       xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
                           http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="conformance" useJmx="false"
          persistent="true" advisorySupport="false" schedulerSupport="false"
          dataDirectory="$store" tmpDataDirectory="$tmp">
    <destinationPolicy>
      <policyMap>
        <policyEntries>
          <policyEntry queue="&gt;" maxBrowsePageSize="200000" maxPageSize="1000"/>
        </policyEntries>
      </policyMap>
    </destinationPolicy>
    <destinations>
      <queue physicalName="$queue"/>
    </destinations>
    <persistenceAdapter>
      <kahaDB directory="$store/kahadb" journalDiskSyncStrategy="always"/>
    </persistenceAdapter>
    <systemUsage>
      <systemUsage>
        <memoryUsage><memoryUsage limit="64 mb"/></memoryUsage>
        <storeUsage><storeUsage limit="1 gb"/></storeUsage>
        <tempUsage><tempUsage limit="256 mb"/></tempUsage>
      </systemUsage>
    </systemUsage>
    <sslContext>
      <sslContext keyStore="file:$conf/keystore.p12" keyStorePassword="$password" keyStoreType="PKCS12"
                  trustStore="file:$conf/truststore.p12" trustStorePassword="$password" trustStoreType="PKCS12"/>
    </sslContext>
    <transportConnectors>
      <transportConnector name="stomp+ssl"
          uri="stomp+ssl://$listen:$stomp_port?needClientAuth=true&amp;transport.enabledProtocols=$tls_versions"/>
      <transportConnector name="adapter" uri="stomp://127.0.0.1:$adapter_port"/>
    </transportConnectors>
  </broker>
</beans>
EOF
# Debian's broker logs through slf4j-log4j12 to log4j 1.2 (lib/optional),
# which reads log4j.properties from the class path ($conf).
cat >"$conf/log4j.properties" <<'EOF'
log4j.rootLogger=INFO, console
log4j.logger.org.springframework=WARN
log4j.logger.org.apache.xbean=WARN
log4j.logger.org.apache.activemq.spring=WARN
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d | %-5p | %m | %c | %t%n
EOF
chmod 0600 "$conf"/*

server_pid=""
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    # The broker's shutdown hook stops the connectors and closes KahaDB.
    stop_process "$server_pid" 150
    if [ "$temporary" -eq 1 ]; then
        rm -rf "$data_dir"
    fi
    exit "$status"
}
trap_cleanup

show_log_tail() {
    echo "---- last lines of $log_file ----" >&2
    grep -v '^\s*at ' "$log_file" 2>/dev/null | tail -n 30 >&2 || true
}

# With setpriv (util-linux; death_signal) the JVM also dies when this script
# is killed with SIGKILL, which no trap can catch.
# The JVM options of Debian's /usr/bin/activemq (the --add-opens it needs on
# Java 17), a small heap, and C1 only (a broker living minutes on little
# data: far less CPU at start, no result changes).
start_offset=$(stat -c %s "$log_file" 2>/dev/null || echo 0)
(
    cd "$data_dir"
    exec "${death_signal[@]}" "$java" -Xms64m -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
        -Djava.awt.headless=true -Djava.io.tmpdir="$tmp" \
        --add-reads=java.xml=java.logging \
        --add-opens java.base/java.security=ALL-UNNAMED \
        --add-opens java.base/java.net=ALL-UNNAMED \
        --add-opens java.base/java.lang=ALL-UNNAMED \
        --add-opens java.base/java.util=ALL-UNNAMED \
        --add-opens java.naming/javax.naming.spi=ALL-UNNAMED \
        --add-opens java.rmi/sun.rmi.transport.tcp=ALL-UNNAMED \
        --add-opens java.base/java.util.concurrent=ALL-UNNAMED \
        --add-opens java.base/java.util.concurrent.atomic=ALL-UNNAMED \
        --add-exports=java.base/sun.net.www.protocol.http=ALL-UNNAMED \
        --add-exports=java.base/sun.net.www.protocol.https=ALL-UNNAMED \
        --add-exports=java.base/sun.net.www.protocol.jar=ALL-UNNAMED \
        -Dactivemq.classpath="$conf" -Dactivemq.home="$activemq_home" -Dactivemq.base="$data_dir" \
        -Dactivemq.conf="$conf" -Dactivemq.data="$store" \
        -jar "$activemq_home/bin/activemq.jar" start "xbean:file:$conf/activemq.xml"
) >>"$log_file" 2>&1 &
server_pid=$!

deadline=$((SECONDS + timeout_seconds))
# "Apache ActiveMQ 5.17.2 (conformance, ID:...) started" comes once every
# connector is up.
wait_for_log 'Apache ActiveMQ .* started' "$start_offset" \
    "the broker exited before it was ready" "the broker was not ready within ${timeout_seconds}s"
until (exec 3<>"/dev/tcp/$probe_address/$stomp_port") 2>/dev/null \
        && (exec 3<>"/dev/tcp/127.0.0.1/$adapter_port") 2>/dev/null; do
    kill -0 "$server_pid" 2>/dev/null || { show_log_tail; die "the broker exited before it was ready"; }
    [ "$SECONDS" -lt "$deadline" ] || { show_log_tail; die "STOMP listeners $listen:$stomp_port, 127.0.0.1:$adapter_port not open within ${timeout_seconds}s"; }
    sleep 0.2
done

echo "ACTIVEMQ_READY=1 port=$stomp_port adapter_port=$adapter_port queue=$queue data_dir=$data_dir"

wait_server "the broker"

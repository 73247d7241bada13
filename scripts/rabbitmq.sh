#!/usr/bin/env bash
# Runs a private RabbitMQ (Debian's rabbitmq-server, installed by
# scripts/install-rabbitmq.sh) as a STOMP conformance target: the
# rabbitmq_stomp plugin on a TLS 1.3 listener that requires client
# certificates, loopback only, and nothing shared with a system RabbitMQ
# (own data and log directories, node name, Erlang cookie, epmd and ports).
#
#   scripts/rabbitmq.sh --cert SERVER_PEM --key SERVER_KEY --ca CA_PEM
#       [--data-dir DIR]     keep the node's data here (created if missing):
#                            a second start with the same DIR is the same
#                            node with the same durable queue and messages
#                            (the harness's restart case). Default: a
#                            temporary directory, deleted on exit.
#       [--port PORT]        STOMP TLS port (default: a free loopback port)
#       [--listen ADDRESS]   address of the STOMP TLS listener (default
#                            127.0.0.1; 0.0.0.0 in a container, whose port
#                            the engine publishes on the host's loopback)
#       [--amqp-port PORT]   AMQP port, used by the "accepted" adapter
#                            (default: a free loopback port)
#       [--exchange NAME]    durable topic exchange SENDs go to (default smp)
#       [--queue NAME]       durable queue bound to it with "#" that keeps
#                            every message (default smp-accepted)
#       [--python PATH]      Python with pika (default: the repo's .venv)
#       [--timeout SECONDS]  how long to wait for the broker (default 120)
#       [--plugin NAME]      enable this bundled plugin too (repeatable; e.g.
#                            rabbitmq_random_exchange, which swpt_stomp needs)
#       [--amqp-only]        no STOMP plugin and no STOMP listener: the broker
#                            behind another STOMP server (swpt_stomp's,
#                            interop/stomp/swpt_node.py); --cert, --key and
#                            --ca are then not needed, and port= is 0
#       [--exchange-type T]  type of the exchange declared (default topic)
#
# Once the broker answers on AMQP and the STOMP listener accepts TCP, and the
# exchange and queue are declared, prints one line on stdout:
#   RABBITMQ_READY=1 port=<stomp tls port> amqp_port=<port> exchange=<name> queue=<name> data_dir=<dir>
# A STOMP client then SENDs to destination /exchange/<exchange>/<anything>
# (e.g. the Swaptacular form /exchange/smp/${NODE_ID}); CONNECT needs no
# login (stomp.default_user). The free ports are picked by binding and
# releasing them; if the broker finds one taken when it binds it (its log
# says eaddrinuse or dist_port_already_used), it is started again on other
# free ports, up to 3 starts (ports given with --port/--amqp-port are kept).
# Stays in the foreground; SIGTERM/SIGINT stop the
# broker and the epmd it started. SIGKILL of the process group (the harness
# does that to test durability) kills everything without cleanup; the data
# directory stays for the next start.
set -euo pipefail

die() {
    echo "rabbitmq.sh: ERROR: $*" >&2
    exit 1
}
# shellcheck source=lib/service.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/service.sh"

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$script_dir/.." && pwd)"
rabbit_bin=/usr/lib/rabbitmq/bin
[ -x "$rabbit_bin/rabbitmq-server" ] || die "rabbitmq-server is not installed; run scripts/install-rabbitmq.sh"
command -v epmd >/dev/null 2>&1 || die "epmd (erlang-base) not found"

cert="" key="" ca="" data_dir="" stomp_port="" amqp_port="" exchange="smp" queue="smp-accepted"
amqp_only=0 plugins=() exchange_type=topic
listen=127.0.0.1
python="$repo/.venv/bin/python" timeout_seconds=120
[ -x "$python" ] || python=python3
while [ $# -gt 0 ]; do
    case "$1" in
        --cert) cert="${2:?--cert needs a value}"; shift 2 ;;
        --key) key="${2:?--key needs a value}"; shift 2 ;;
        --ca) ca="${2:?--ca needs a value}"; shift 2 ;;
        --data-dir) data_dir="${2:?--data-dir needs a value}"; shift 2 ;;
        --port) stomp_port="${2:?--port needs a value}"; shift 2 ;;
        --listen) listen="${2:?--listen needs a value}"; shift 2 ;;
        --amqp-port) amqp_port="${2:?--amqp-port needs a value}"; shift 2 ;;
        --exchange) exchange="${2:?--exchange needs a value}"; shift 2 ;;
        --queue) queue="${2:?--queue needs a value}"; shift 2 ;;
        --python) python="${2:?--python needs a value}"; shift 2 ;;
        --timeout) timeout_seconds="${2:?--timeout needs a value}"; shift 2 ;;
        --plugin) plugins+=("${2:?--plugin needs a value}"); shift 2 ;;
        --amqp-only) amqp_only=1; shift ;;
        --exchange-type) exchange_type="${2:?--exchange-type needs a value}"; shift 2 ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) die "unknown argument $1" ;;
    esac
done
if [ "$amqp_only" -eq 0 ]; then
    require_tls_files
    cert="$(cd "$(dirname "$cert")" && pwd)/$(basename "$cert")"
    key="$(cd "$(dirname "$key")" && pwd)/$(basename "$key")"
    ca="$(cd "$(dirname "$ca")" && pwd)/$(basename "$ca")"
fi
for p in ${plugins[@]+"${plugins[@]}"}; do
    [[ "$p" =~ ^rabbitmq_[a-z_]+$ ]] || die "bad --plugin $p"
    ls -d /usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins/"$p"-* >/dev/null 2>&1 || die "plugin $p is not installed"
done
[[ "$exchange_type" =~ ^(topic|direct|fanout|headers)$ ]] || die "bad --exchange-type $exchange_type"
[[ "$timeout_seconds" =~ ^[0-9]+$ ]] || die "bad --timeout $timeout_seconds"
[[ "$exchange" =~ ^[A-Za-z0-9_.-]+$ ]] || die "bad --exchange $exchange"
[[ "$queue" =~ ^[A-Za-z0-9_.-]+$ ]] || die "bad --queue $queue"
[[ "$listen" =~ ^[0-9]+(\.[0-9]+){3}$ ]] || die "bad --listen $listen (an IPv4 address)"
# The readiness probe connects to the listener; a wildcard one answers on loopback.
probe_address="$listen"
[ "$listen" != 0.0.0.0 ] || probe_address=127.0.0.1

free_port() {
    "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
given_stomp_port="$stomp_port" given_amqp_port="$amqp_port"
pick_ports() {  # the ports the caller gave, and free ones for the others
    stomp_port="$given_stomp_port" amqp_port="$given_amqp_port"
    assign_ports stomp_port amqp_port
    # Private Erlang distribution: our own epmd on its own port, and the
    # node's distribution listener on a fixed free port, both on loopback only.
    epmd_port="$(free_port)"
    dist_port="$(free_port)"
}

use_data_dir rabbitmq
# The node name is kept in the data directory: Mnesia's directory is named
# after it, so a restart must use the same name to find its durable queue.
if [ ! -s "$data_dir/nodename" ]; then
    echo "conformance-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')@localhost" >"$data_dir/nodename"
fi
nodename="$(cat "$data_dir/nodename")"
mkdir -p "$data_dir/home" "$data_dir/mnesia" "$data_dir/log"
log_file="$data_dir/log/server.out"
# guest, the user a CONNECT without login gets, may log in from loopback
# only. A listener on another address (0.0.0.0 in a container) is reached
# from the host through docker-proxy, i.e. from the bridge gateway's address,
# not loopback: there guest must be allowed from any address, or every
# CONNECT gets "non-loopback access denied". AMQP stays on loopback anyway.
guest_loopback_only=true
[[ "$listen" == 127.* ]] || guest_loopback_only=false

write_config() {  # rabbitmq.conf and the environment, for the ports picked
    # rabbitmq.conf (cuttlefish). Only a TLS STOMP listener; the AMQP listener is
    # on loopback for the adapter (guest is loopback-only by default). CONNECT
    # without login/passcode logs in as guest (the profile: servers SHOULD NOT
    # require login). The low disk limit keeps a small container from raising the
    # disk alarm, which would block every publisher.
    cat >"$data_dir/rabbitmq.conf" <<EOF
listeners.tcp.1 = 127.0.0.1:$amqp_port
listeners.ssl = none
stomp.listeners.tcp = none
stomp.listeners.ssl.1 = $listen:$stomp_port
ssl_options.cacertfile = $ca
ssl_options.certfile = $cert
ssl_options.keyfile = $key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = true
ssl_options.versions.1 = tlsv1.3
stomp.default_user = guest
stomp.default_pass = guest
stomp.implicit_connect = false
loopback_users.guest = $guest_loopback_only
disk_free_limit.absolute = 20MB
log.file.level = info
log.console = false
EOF
    if [ "$amqp_only" -eq 1 ]; then
        # The broker alone: no STOMP plugin, no listener of its own on TLS.
        cat >"$data_dir/rabbitmq.conf" <<EOF
listeners.tcp.1 = 127.0.0.1:$amqp_port
listeners.ssl = none
loopback_users.guest = true
disk_free_limit.absolute = 20MB
log.file.level = info
log.console = false
EOF
        stomp_port=0
    fi
    enabled=(); [ "$amqp_only" -eq 1 ] || enabled=(rabbitmq_stomp)
    enabled+=(${plugins[@]+"${plugins[@]}"})
    echo "[$(IFS=,; echo "${enabled[*]}")]." >"$data_dir/enabled_plugins"
    : >"$data_dir/rabbitmq-env.conf"

    export HOME="$data_dir/home"
    export RABBITMQ_CONF_ENV_FILE="$data_dir/rabbitmq-env.conf"
    export RABBITMQ_CONFIG_FILE="$data_dir/rabbitmq.conf"
    export RABBITMQ_ADVANCED_CONFIG_FILE="$data_dir/advanced.config"
    export RABBITMQ_ENABLED_PLUGINS_FILE="$data_dir/enabled_plugins"
    export RABBITMQ_MNESIA_BASE="$data_dir/mnesia"
    export RABBITMQ_LOG_BASE="$data_dir/log"
    export RABBITMQ_PID_FILE="$data_dir/rabbitmq.pid"
    export RABBITMQ_PLUGINS_EXPAND_DIR="$data_dir/plugins-expand"
    export RABBITMQ_NODENAME="$nodename"
    export RABBITMQ_USE_LONGNAME=false
    export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
    export RABBITMQ_NODE_PORT="$amqp_port"
    export RABBITMQ_DIST_PORT="$dist_port"
    export ERL_EPMD_PORT="$epmd_port"
    export ERL_EPMD_ADDRESS=127.0.0.1
    export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
    unset RABBITMQ_ENABLED_PLUGINS RABBITMQ_SERVICENAME
}

epmd_pid="" server_pid=""
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    # RabbitMQ stops cleanly on SIGTERM (queues flushed, listeners closed).
    stop_process "$server_pid" 150
    if [ -n "$epmd_pid" ]; then
        kill -TERM "$epmd_pid" 2>/dev/null || true
        wait "$epmd_pid" 2>/dev/null || true
    fi
    if [ "$temporary" -eq 1 ]; then
        rm -rf "$data_dir"
    fi
    exit "$status"
}
trap_cleanup

show_log_tail() {
    echo "---- last lines of $log_file ----" >&2
    tail -n 30 "$log_file" >&2 2>/dev/null || true
    local node_log="$data_dir/log/$nodename.log"
    if [ -f "$node_log" ]; then
        echo "---- last lines of $node_log ----" >&2
        grep -E '\[(error|warning)\]' "$node_log" | tail -n 15 >&2 || true
    fi
}

# With setpriv (util-linux; death_signal) the children also die when this
# script is killed with SIGKILL, which no trap can catch.
start_broker() {
    "${death_signal[@]}" epmd -port "$epmd_port" -address 127.0.0.1 >>"$data_dir/log/epmd.out" 2>&1 &
    epmd_pid=$!
    (
        cd "$data_dir"
        exec "${death_signal[@]}" "$rabbit_bin/rabbitmq-server"
    ) >>"$log_file" 2>&1 &
    server_pid=$!
}

# broker_started OFFSET: 0 once the log, past OFFSET, says the broker
# started ("Starting broker... completed": every plugin, STOMP included, is
# up), 1 if rabbitmq-server exited first; dies at the deadline.
broker_started() {
    until tail -c +"$(($1 + 1))" "$log_file" 2>/dev/null | grep 'Starting broker.*completed' >/dev/null; do
        kill -0 "$server_pid" 2>/dev/null || return 1
        [ "$SECONDS" -lt "$deadline" ] || { show_log_tail; die "rabbitmq-server not ready within ${timeout_seconds}s"; }
        sleep 0.2
    done
}

# port_taken OFFSET: the log, past OFFSET, says a port the broker was to bind
# was taken. The free ports above are picked by binding and releasing them,
# and the broker binds them seconds later: on a busy host (a full test tier's
# thousands of connections) another process may take one in between.
port_taken() {
    # grep without -q: see wait_for_log (scripts/lib/service.sh).
    tail -c +"$(($1 + 1))" "$log_file" 2>/dev/null | grep -iE 'dist_port_already_used|eaddrinuse' >/dev/null
}

START_ATTEMPTS=3
deadline=$((SECONDS + timeout_seconds))
for ((attempt = 1; ; attempt++)); do
    pick_ports
    write_config
    start_offset=$(stat -c %s "$log_file" 2>/dev/null || echo 0)
    start_broker
    broker_started "$start_offset" && break
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
    stop_process "$epmd_pid" 20
    epmd_pid=""
    if [ "$attempt" -lt "$START_ATTEMPTS" ] && port_taken "$start_offset"; then
        echo "rabbitmq.sh: another process took a port before the broker bound it; starting it again on other free ports (attempt $((attempt + 1)) of $START_ATTEMPTS)" >&2
        continue
    fi
    show_log_tail
    die "rabbitmq-server exited before it was ready"
done
until [ "$amqp_only" -eq 1 ] || (exec 3<>"/dev/tcp/$probe_address/$stomp_port") 2>/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || { show_log_tail; die "STOMP TLS listener $listen:$stomp_port not open within ${timeout_seconds}s"; }
    sleep 0.2
done
remaining=$((deadline - SECONDS)); [ "$remaining" -gt 5 ] || remaining=5
"$python" "$repo/interop/stomp/amqp_accepted.py" declare --port "$amqp_port" \
    --exchange "$exchange" --exchange-type "$exchange_type" --queue "$queue" --timeout "$remaining" \
    || { show_log_tail; die "declaring exchange $exchange and queue $queue over AMQP failed"; }

echo "RABBITMQ_READY=1 port=$stomp_port amqp_port=$amqp_port exchange=$exchange queue=$queue data_dir=$data_dir"

wait_server rabbitmq-server

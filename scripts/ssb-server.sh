#!/usr/bin/env bash
# Runs the reference ssb-server (npm ssb-server 16, installed by
# scripts/install-node-deps.sh) as a conformance target, or publishes to one.
#
# Start (stays in the foreground until killed; SIGTERM/SIGINT stop the server
# and delete its temporary home):
#   scripts/ssb-server.sh [start] --port PORT [--host 127.0.0.1]
#       [--network-key HEX]   32-byte caps.shs; default: the main network's
#       [--seed HEX]          32-byte ed25519 seed of the server's identity;
#                             default: a fresh random identity
#       [--messages N]        seed messages published to its own feed (default 3)
#       [--info-file PATH]    also write the facts below to PATH (atomically,
#                             once everything is ready)
#       [--log PATH]          server output (default: server.log in the home)
#       [--keep-home]         do not delete the temporary home on exit
#       [--live-interfaces]   let ssb-server see the host's network interfaces
#                             change; by default it sees the list it started
#                             with (interop/node/pin-network-interfaces.js):
#                             it closes every connection on a change, e.g. a
#                             container starting beside it
#       [--timeout SECONDS]   how long to wait for the server (default 60)
#   Prints, once the server answers and the seed messages are published,
#   KEY=VALUE lines on stdout, SSB_READY=1 last:
#     SSB_ID=@<base64>.ed25519  SSB_SECRET=<secret file>  SSB_HOME=<dir>
#     SSB_HOST  SSB_PORT  SSB_NETWORK_KEY=<hex>  SSB_SEQUENCE=<last seq>
#     SSB_PID=<server pid>  SSB_LOG=<log file>  SSB_READY=1
#
# Publish one message to a running server's feed (e.g. for live streams):
#   scripts/ssb-server.sh publish --home SSB_HOME --text TEXT [--type post] [--count N]
#   Prints SSB_MSG_KEY=%... and SSB_MSG_SEQ=n per message.
#
# Replicate a feed from another SSB server, as ssb-server does on the network
# (the client role of the conformance target; see interop/node/ssb-replicate-from.js):
#   scripts/ssb-server.sh replicate --peer-host HOST --peer-port PORT
#       --peer-public-key @...ed25519 [--feed @...ed25519] [--until-sequence N]
#       [--network-key HEX] [--seed HEX] [--timeout SECONDS] [--log PATH] [--keep-home]
#       [--live-interfaces]
#   Starts a fresh ssb-server (own free loopback port, no seed messages),
#   makes it follow FEED (default: the peer's own feed) and connect to the
#   peer, and waits until it holds FEED up to N (without --until-sequence:
#   at least one message, then 3 s without a new one; only ssb-server's own
#   connection reaches the peer). --timeout bounds the whole run, start-up
#   included (default 60). Prints one
#   "SSB_MSG seq=n key=%... verified=true" line per message and
#   "SSB_REPLICATED feed=@... count=N latest_sequence=N"; exit 0 only then,
#   4 if a held message does not verify, 5 on timeout (with the server's
#   replication errors on stderr), 1 on other errors.
set -euo pipefail

die() {
    echo "ssb-server.sh: ERROR: $*" >&2
    exit 1
}
# shellcheck source=lib/service.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/service.sh"

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
node_dir="$(cd "$script_dir/../interop/node" && pwd)"
ssb_home_js="$node_dir/ssb-home.js"
# A versioned target (docs/versions.md) brings its own release in
# CONFORMANCE_PACKAGE_DIR; ssb-home.js and the replication client stay the pinned ones.
ssb_server_bin="${CONFORMANCE_PACKAGE_DIR:-$node_dir}/node_modules/ssb-server/bin.js"
main_network_key_hex="d4a1cb88a66f02f8db635ce26441cc5dac1b08420ceaac230839b755845a9ffb"

[ -f "$ssb_server_bin" ] || die "ssb-server is not installed; run scripts/install-node-deps.sh"

publish_command() {
    local home="" passthrough=()
    while [ $# -gt 0 ]; do
        case "$1" in
            --home) home="${2:?--home needs a value}"; shift 2 ;;
            --text|--type|--count) passthrough+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
            *) die "publish: unknown argument $1" ;;
        esac
    done
    [ -n "$home" ] || die "publish: --home is required (the SSB_HOME a start printed)"
    exec node "$ssb_home_js" publish --dir "$home" "${passthrough[@]}"
}

mode=start
case "${1:-}" in
    publish) shift; publish_command "$@" ;;
    start) shift ;;
    replicate) shift; mode=replicate ;;
esac

port="" host="127.0.0.1" network_key_hex="$main_network_key_hex" seed_hex=""
seed_messages=3 info_file="" log_file="" keep_home=0 timeout_seconds=60 live_interfaces=0
peer_host="" peer_port="" peer_public_key="" feed="" until_sequence=""
[ "$mode" = start ] || seed_messages=0
while [ $# -gt 0 ]; do
    case "$1" in
        --peer-host|--peer-port|--peer-public-key|--feed|--until-sequence)
            [ "$mode" = replicate ] || die "$1 is an option of the replicate mode"
            value="${2:?$1 needs a value}"
            case "$1" in
                --peer-host) peer_host="$value" ;;
                --peer-port) peer_port="$value" ;;
                --peer-public-key) peer_public_key="$value" ;;
                --feed) feed="$value" ;;
                --until-sequence) until_sequence="$value" ;;
            esac
            shift 2 ;;
        --port) port="${2:?--port needs a value}"; shift 2 ;;
        --host) host="${2:?--host needs a value}"; shift 2 ;;
        --network-key|--caps) network_key_hex="${2:?$1 needs a value}"; shift 2 ;;
        --seed) seed_hex="${2:?--seed needs a value}"; shift 2 ;;
        --messages) seed_messages="${2:?--messages needs a value}"; shift 2 ;;
        --info-file) info_file="${2:?--info-file needs a value}"; shift 2 ;;
        --log) log_file="${2:?--log needs a value}"; shift 2 ;;
        --keep-home) keep_home=1; shift ;;
        --live-interfaces) live_interfaces=1; shift ;;
        --timeout) timeout_seconds="${2:?--timeout needs a value}"; shift 2 ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) die "unknown argument $1" ;;
    esac
done
if [ "$mode" = replicate ]; then
    [ -n "$peer_host" ] && [ -n "$peer_port" ] && [ -n "$peer_public_key" ] \
        || die "replicate: --peer-host, --peer-port and --peer-public-key are required"
    [ -n "$feed" ] || feed="$peer_public_key"
    [ -n "$port" ] || port="$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close() })')"
    replicate_deadline=$((SECONDS + timeout_seconds))
fi
[ -n "$port" ] || die "--port is required"
[[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -gt 0 ] && [ "$port" -le 65535 ] || die "bad --port $port"
[[ "$seed_messages" =~ ^[0-9]+$ ]] || die "bad --messages $seed_messages"
[[ "$timeout_seconds" =~ ^[0-9]+$ ]] || die "bad --timeout $timeout_seconds"
network_key_hex="$(echo "$network_key_hex" | tr 'A-F' 'a-f')"
[[ "$network_key_hex" =~ ^[0-9a-f]{64}$ ]] || die "--network-key must be 32 bytes of hex"
if [ -n "$info_file" ]; then
    info_file="$(cd "$(dirname "$info_file")" && pwd)/$(basename "$info_file")" \
        || die "directory of --info-file $info_file does not exist"
fi

# HOME points ssb-config at the temporary home, and the app name is one no
# real installation uses, so no ~/.ssb, ./.ssbrc or /etc/ssb config of the
# machine can leak into the target.
app_name="ssb-conformance"
temp_root="$(mktemp -d "${TMPDIR:-/tmp}/ssb-server.XXXXXX")"
ssb_home="$temp_root/.$app_name"
# multiserver's unix-socket plugin makes its socket's directory under
# os.tmpdir() (plugins/unix-socket.js: mkdtempSync(tmpdir/multiserver-))
# and leaves it behind: TMPDIR inside the home, removed with it.
export TMPDIR="$temp_root"
[ -n "$log_file" ] || log_file="$temp_root/server.log"
server_pid=""

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    stop_process "$server_pid" 50
    if [ "$keep_home" -eq 0 ]; then
        rm -rf "$temp_root"
    else
        echo "ssb-server.sh: kept home $temp_root" >&2
    fi
    exit "$status"
}
trap_cleanup

show_log_tail() {
    echo "---- last lines of $log_file ----" >&2
    tail -n 40 "$log_file" >&2 2>/dev/null || true
}

init_args=(init --dir "$ssb_home" --host "$host" --port "$port" --caps-hex "$network_key_hex")
[ -z "$seed_hex" ] || init_args+=(--seed "$seed_hex")
ssb_id_line="$(node "$ssb_home_js" "${init_args[@]}")" || die "could not prepare $ssb_home"
ssb_id="${ssb_id_line#SSB_ID=}"

# With setpriv (util-linux; death_signal) the server also dies when this
# script is killed with SIGKILL, which no trap can catch; the temporary home
# then stays.
# ssb-gossip closes every connection when the host's network interfaces
# change (a container starting beside a run adds a veth); pinned by default
# so that cases are not cut by something outside the protocol
# (docs/findings/ssb-server-16.md, "Sessions dropped on a host network change").
pin_interfaces=(--require "$node_dir/pin-network-interfaces.js")
[ "$live_interfaces" -eq 0 ] || pin_interfaces=()
(
    cd "$temp_root"
    export HOME="$temp_root" ssb_appname="$app_name"
    exec "${death_signal[@]}" node "${pin_interfaces[@]}" "$ssb_server_bin" start
) >"$log_file" 2>&1 &
server_pid=$!

# Cheap TCP probe first (ssb-server takes a second or two to open its
# database), then one real secret-handshake + whoami round trip.
deadline=$((SECONDS + timeout_seconds))
until (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; do
    if ! kill -0 "$server_pid" 2>/dev/null; then
        show_log_tail
        die "ssb-server exited before listening on $host:$port"
    fi
    [ "$SECONDS" -lt "$deadline" ] || { show_log_tail; die "ssb-server did not listen on $host:$port within ${timeout_seconds}s"; }
    sleep 0.1
done
remaining=$((deadline - SECONDS)); [ "$remaining" -gt 0 ] || remaining=1
node "$ssb_home_js" wait --dir "$ssb_home" --timeout "$remaining" >/dev/null \
    || { show_log_tail; die "ssb-server on $host:$port does not answer a client with its own key"; }

sequence=0
if [ "$seed_messages" -gt 0 ]; then
    publish_output="$(node "$ssb_home_js" publish --dir "$ssb_home" --type post \
        --text "conformance seed message" --count "$seed_messages")" \
        || { show_log_tail; die "publishing the seed messages failed"; }
    sequence="$(echo "$publish_output" | sed -n 's/^SSB_MSG_SEQ=//p' | tail -n 1)"
fi

facts="SSB_ID=$ssb_id
SSB_SECRET=$ssb_home/secret
SSB_HOME=$ssb_home
SSB_HOST=$host
SSB_PORT=$port
SSB_NETWORK_KEY=$network_key_hex
SSB_SEQUENCE=$sequence
SSB_PID=$server_pid
SSB_LOG=$log_file
SSB_READY=1"

if [ "$mode" = replicate ]; then
    echo "ssb-server.sh: replicating $feed from $peer_host:$peer_port as $ssb_id" >&2
    remaining=$((replicate_deadline - SECONDS)); [ "$remaining" -gt 0 ] || remaining=1
    replicate_args=(--dir "$ssb_home" --peer-host "$peer_host" --peer-port "$peer_port"
        --peer-key "$peer_public_key" --feed "$feed" --timeout "$remaining")
    [ -z "$until_sequence" ] || replicate_args+=(--until-sequence "$until_sequence")
    set +e
    node "$node_dir/ssb-replicate-from.js" "${replicate_args[@]}" 2>"$temp_root/replicate.err"
    replicate_status=$?
    set -e
    if [ "$replicate_status" -ne 0 ]; then
        # What ssb-server logged about replication (ssb-replicate writes
        # "Error replicating with <peer>: ..." and "replication error"),
        # then the reason, last, where a reader of the tail sees it.
        echo "---- replication errors in $log_file (first lines) ----" >&2
        grep -iE -A1 'error replicating|replication error' "$log_file" | head -n 6 >&2 || true
    fi
    cat "$temp_root/replicate.err" >&2
    exit "$replicate_status"
fi

if [ -n "$info_file" ]; then
    # Written under a temporary name and renamed, so a harness polling for
    # the file never reads half of it.
    printf '%s\n' "$facts" >"$info_file.tmp.$$"
    mv -f "$info_file.tmp.$$" "$info_file"
fi
printf '%s\n' "$facts"

# Foreground until killed; if the server dies on its own, say so and fail.
wait_server ssb-server

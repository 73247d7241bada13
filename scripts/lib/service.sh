# Sourced by the scripts that run a server in the foreground as a
# conformance target (scripts/activemq.sh, rabbitmq.sh, ssb-server.sh): how
# they start, wait for and stop it. The caller defines die, show_log_tail and
# cleanup, and sets server_pid (the server's process id), log_file, deadline
# and timeout_seconds before it uses the functions that read them.
#
# death_signal: the prefix of a command whose process must also die when the
# calling script is killed with SIGKILL, which no trap can catch (setpriv
# from util-linux; empty without it).
death_signal=()
if command -v setpriv >/dev/null 2>&1; then
    death_signal=(setpriv --pdeathsig TERM)
fi

# require_tls_files: --cert, --key and --ca ($cert, $key, $ca) given and readable.
require_tls_files() {
    local f
    [ -n "$cert" ] && [ -n "$key" ] && [ -n "$ca" ] || die "--cert, --key and --ca are required"
    for f in "$cert" "$key" "$ca"; do
        [ -r "$f" ] || die "cannot read $f"
    done
}

# assign_ports VAR...: each empty VAR gets a port from the caller's free_port;
# each must then be a port number.
assign_ports() {
    local p
    for p in "$@"; do
        [ -n "${!p}" ] || printf -v "$p" '%s' "$(free_port)"
        [[ "${!p}" =~ ^[0-9]+$ ]] && [ "${!p}" -gt 0 ] && [ "${!p}" -le 65535 ] || die "bad port ${!p}"
    done
}

# use_data_dir PREFIX: $data_dir created (mode 0700) and made absolute; when
# it is empty, a new temporary directory PREFIX.XXXXXX, and temporary=1 (the
# caller's cleanup deletes it).
use_data_dir() {
    temporary=0
    if [ -z "$data_dir" ]; then
        data_dir="$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")"
        temporary=1
    fi
    mkdir -p "$data_dir"
    chmod 0700 "$data_dir"
    data_dir="$(cd "$data_dir" && pwd)"
}

# stop_process PID TENTHS: if PID still runs, SIGTERM, up to TENTHS tenths of
# a second for it to exit, then SIGKILL; reaps it.
stop_process() {
    local pid="$1" tenths="$2"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq "$tenths"); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
}

# trap_cleanup: the caller's cleanup runs on exit; SIGTERM and SIGINT exit
# with 143 and 130 (and so run it).
trap_cleanup() {
    trap cleanup EXIT
    trap 'exit 143' TERM
    trap 'exit 130' INT
}

# wait_for_log PATTERN OFFSET EXITED TIMED_OUT: until $log_file, from byte
# OFFSET on, has a line matching PATTERN (grep); dies with EXITED when the
# server is gone, with TIMED_OUT at $deadline (the log's tail first).
wait_for_log() {
    local pattern="$1" offset="$2" exited="$3" timed_out="$4"
    # grep without -q reads to the end: a -q that quits at its match while
    # tail still writes makes the pipe fail (141 under pipefail), read as
    # "not yet" until the deadline.
    until tail -c +"$((offset + 1))" "$log_file" 2>/dev/null | grep "$pattern" >/dev/null; do
        kill -0 "$server_pid" 2>/dev/null || { show_log_tail; die "$exited"; }
        [ "$SECONDS" -lt "$deadline" ] || { show_log_tail; die "$timed_out"; }
        sleep 0.2
    done
}

# wait_server NAME: the foreground until the server exits; exiting on its own
# is an error (the log's tail, then "NAME exited on its own").
wait_server() {
    local status
    set +e
    wait "$server_pid"
    status=$?
    set -e
    server_pid=""
    show_log_tail
    die "$1 exited on its own with status $status"
}

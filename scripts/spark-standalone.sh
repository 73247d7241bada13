#!/usr/bin/env bash
# A Spark standalone cluster on loopback -- one master and one worker -- from
# the Spark that pyspark ships (.venv), for `conformance ingest|matrix
# --master spark://HOST:PORT`.
#
# Usage: scripts/spark-standalone.sh start|stop|status
#   start   starts master and worker (if not running), waits until the worker
#           has registered, prints `SPARK_MASTER=spark://127.0.0.1:PORT`
#   stop    stops both (SIGTERM, then SIGKILL after 10 s)
#   status  prints the master URL and exits 0 if both run, 1 otherwise
#
# Environment: SPARK_STANDALONE_DIR (state: pid files, logs, worker dir;
# default reports/spark-standalone, kept out of git), SPARK_MASTER_PORT
# (default 7077; 0 is not supported by Spark's master), SPARK_WORKER_CORES
# (default 2), SPARK_WORKER_MEMORY (default 4g), PYTHON (default .venv/bin/python),
# SPARK_DAEMON_JAVA_OPTS (default: the quick JIT and the serial collector,
# see below).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-$repo/.venv/bin/python}"
state="${SPARK_STANDALONE_DIR:-$repo/reports/spark-standalone}"
host=127.0.0.1
port="${SPARK_MASTER_PORT:-7077}"
cores="${SPARK_WORKER_CORES:-2}"
memory="${SPARK_WORKER_MEMORY:-4g}"
url="spark://$host:$port"

die() { echo "spark-standalone: ERROR: $*" >&2; exit 1; }

[ -x "$python" ] || die "$python not found: run scripts/setup.sh first"
spark_home="$("$python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))' 2>/dev/null)" \
    || die "pyspark is not installed in $python (pip install -e '.[aggregate]')"
command -v java >/dev/null 2>&1 || [ -n "${JAVA_HOME:-}" ] || die "Java 17+ is needed (java not on PATH, JAVA_HOME unset)"

running() {  # running NAME: the pid file names a live process
    local pid_file="$state/$1.pid"
    [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null
}

# The master and the worker only keep the cluster's books (the jobs run in
# executors, with the job's own JIT choice): the quick compiler and one GC
# thread start them for about half the CPU (10.2 CPU-s for the pair here with
# HotSpot's defaults, 5.8 with these).
daemon_opts="${SPARK_DAEMON_JAVA_OPTS--XX:TieredStopAtLevel=1 -XX:+UseSerialGC}"

launch() {  # launch NAME CLASS ARGS...: a JVM in its own session, output to a log
    local name="$1"; shift
    mkdir -p "$state/logs"
    # Loopback only; the executors run the project's Python.
    SPARK_HOME="$spark_home" SPARK_LOCAL_IP="$host" SPARK_NO_DAEMONIZE=1 \
    SPARK_DAEMON_JAVA_OPTS="$daemon_opts" \
    PYSPARK_PYTHON="$python" SPARK_LOG_DIR="$state/logs" \
        setsid "$spark_home/bin/spark-class" "$@" >"$state/logs/$name.log" 2>&1 < /dev/null &
    echo $! > "$state/$name.pid"
}

wait_for() {  # wait_for NAME PATTERN SECONDS: PATTERN appears in NAME's log
    local name="$1" pattern="$2" seconds="$3" i
    for ((i = 0; i < seconds * 5; i++)); do
        grep -q "$pattern" "$state/logs/$name.log" 2>/dev/null && return 0
        running "$name" || { tail -20 "$state/logs/$name.log" >&2; die "$name exited while starting"; }
        sleep 0.2
    done
    tail -20 "$state/logs/$name.log" >&2
    die "$name did not log '$pattern' within $seconds s (log: $state/logs/$name.log)"
}

stop_one() {
    local name="$1" pid i
    running "$name" || { rm -f "$state/$name.pid"; return 0; }
    pid="$(cat "$state/$name.pid")"
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && { kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; }
    rm -f "$state/$name.pid"
    echo "spark-standalone: stopped $name ($pid)"
}

case "${1:-}" in
    start)
        mkdir -p "$state/work" "$state/logs"
        if ! running master; then
            : > "$state/logs/master.log" 2>/dev/null || true
            launch master org.apache.spark.deploy.master.Master --host "$host" --port "$port" --webui-port 0
            wait_for master "Starting Spark master at $url\|I have been elected leader" 60
            echo "spark-standalone: master $url (pid $(cat "$state/master.pid"))"
        fi
        if ! running worker; then
            : > "$state/logs/worker.log" 2>/dev/null || true
            launch worker org.apache.spark.deploy.worker.Worker "$url" --host "$host" --cores "$cores" \
                --memory "$memory" --work-dir "$state/work" --webui-port 0
            wait_for worker "Successfully registered with master" 60
            echo "spark-standalone: worker $cores core(s), $memory (pid $(cat "$state/worker.pid"))"
        fi
        echo "SPARK_MASTER=$url"
        ;;
    stop)
        stop_one worker
        stop_one master
        ;;
    status)
        if running master && running worker; then
            echo "SPARK_MASTER=$url (master pid $(cat "$state/master.pid"), worker pid $(cat "$state/worker.pid"))"
        else
            echo "spark-standalone: not running (master: $(running master && echo up || echo down), worker: $(running worker && echo up || echo down))"
            exit 1
        fi
        ;;
    -h|--help)
        awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}" ;;
    *)
        awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}" >&2
        exit 2 ;;
esac

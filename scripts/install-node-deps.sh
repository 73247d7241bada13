#!/usr/bin/env bash
# Installs the Node.js packages of interop/node (ssb-server, shs1-test,
# secret-handshake, pull-box-stream, ssb-validate, btp-packet, stompit for
# the STOMP client target `stompit`, ...) that the
# SSB and BTP interop tests and the vector cross-checks run against, and the
# stacks that need versions of their own, each a package of its own with its
# lock under interop/node/<stack>/ (STACKS below): ssb-db2 (secret-stack 6.4,
# ssb-db2 8, ssb-ebt 9, ssb-conn 6: the `ssb-db2` targets) and mini-accounts
# (ilp-plugin-mini-accounts 4.2: the `ilp-plugin-mini-accounts` target).
#
# Usage: scripts/install-node-deps.sh [--force]
#   --force   reinstall even if node_modules already matches the lock file
#
# Works from any current directory.  Idempotent: when node_modules was
# installed from the same package.json + package-lock.json with the same Node
# major version it only re-runs the smoke check.  Uses `npm ci` whenever
# package-lock.json exists, so CI gets exactly the committed versions; only
# without a lock (someone changed package.json on purpose) does it run
# `npm install` to write a new one.  Any failure exits non-zero with a message.
set -euo pipefail

die() {
    echo "install-node-deps: ERROR: $*" >&2
    exit 1
}

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
node_dir="$(cd "$script_dir/../interop/node" && pwd)"

force=0
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) die "unknown argument: $arg" ;;
    esac
done

command -v node >/dev/null 2>&1 || die "node is not on PATH (Node.js >= 18 needed)"
command -v npm >/dev/null 2>&1 || die "npm is not on PATH"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 18 ] || die "Node.js >= 18 needed, found $(node --version)"

cd "$node_dir"
[ -f package.json ] || die "$node_dir/package.json is missing"

# The stamp records what node_modules was built from; native addons
# (sodium-native, leveldown) are tied to the Node ABI, hence the major version.
stamp_file="node_modules/.conformance-install-stamp"
stamp_of_inputs() {
    {
        echo "node-major=$node_major"
        cat package.json
        if [ -f package-lock.json ]; then cat package-lock.json; fi
    } | sha256sum | cut -d' ' -f1
}

# Every package the harness requires directly must load and the dependency
# override must be in effect: that catches a broken native build or a lost
# override before any test runs.
smoke_check() {
    node -e '
        const wanted = ["btp-packet", "chloride", "ilp-plugin-btp", "packet-stream-codec", "pull-box-stream",
            "pull-stream", "secret-handshake", "shs1-crypto", "ssb-client",
            "ssb-keys", "ssb-validate", "ssb-friends", "ssb-server/package.json",
            "ssb-replicate/legacy.js", "ssb-db/indexes/clock.js",
            "shs1-test/package.json", "stompit"];
        for (const name of wanted) {
            try { require(name); }
            catch (err) {
                console.error("cannot load " + name + ": " + err.message);
                process.exit(1);
            }
        }
        const friends = require("ssb-friends/package.json").version;
        if (!friends.startsWith("4.1.")) {
            console.error("ssb-friends is " + friends + ", ssb-server 16 needs 4.1.x (see overrides in package.json)");
            process.exit(1);
        }
    ' || die "smoke check failed: a package does not load (try $0 --force)"
    [ -x node_modules/.bin/ssb-server ] || die "node_modules/.bin/ssb-server is missing"
    [ -x node_modules/.bin/shs1testserver ] || die "node_modules/.bin/shs1testserver is missing"
    [ -x node_modules/.bin/shs1testclient ] || die "node_modules/.bin/shs1testclient is missing"
}

# After an install, ssb-server must really start (the ssb-friends override
# is only proven by a running server): start it through scripts/ssb-server.sh
# on a free loopback port, let it publish one message, stop it.
server_start_check() {
    local port check_dir server_pid waited=0
    port="$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close() })')"
    check_dir="$(mktemp -d "${TMPDIR:-/tmp}/ssb-start-check.XXXXXX")"
    "$script_dir/ssb-server.sh" --port "$port" --messages 1 --info-file "$check_dir/info" \
        >"$check_dir/stdout" 2>"$check_dir/stderr" &
    server_pid=$!
    while [ ! -f "$check_dir/info" ]; do
        if ! kill -0 "$server_pid" 2>/dev/null || [ "$waited" -ge 900 ]; then
            kill -TERM "$server_pid" 2>/dev/null || true
            wait "$server_pid" 2>/dev/null || true
            cat "$check_dir/stderr" >&2
            rm -rf "$check_dir"
            die "ssb-server did not start and publish (scripts/ssb-server.sh output above)"
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    kill -TERM "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    echo "install-node-deps: ssb-server started and published: $(grep '^SSB_ID=' "$check_dir/info")" >&2
    rm -rf "$check_dir"
}

# A stack under interop/node/<stack>/: npm ci from its own lock (same stamp
# as above), then every package it depends on must load, then the stack's
# own start check (stack_start_check_<stack>, if defined).
STACKS=(ssb-db2 mini-accounts)

stack_start_check_ssb-db2() {
    local port out pid waited=0
    port="$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close() })')"
    out="$(mktemp "${TMPDIR:-/tmp}/ssb-db2-start-check.XXXXXX")"
    "$script_dir/ssb-db2.sh" serve --port "$port" --messages 1 >"$out" 2>&1 &
    pid=$!
    until grep -q '^SSB_READY=1' "$out"; do
        if ! kill -0 "$pid" 2>/dev/null || [ "$waited" -ge 600 ]; then
            kill -TERM "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            cat "$out" >&2
            rm -f "$out"
            die "the ssb-db2 node did not start and publish (scripts/ssb-db2.sh output above)"
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null || true
    echo "install-node-deps: ssb-db2 node started and published: $(grep '^SSB_ID=' "$out")" >&2
    rm -f "$out"
}

stack_start_check_mini-accounts() {
    local out pid waited=0
    out="$(mktemp "${TMPDIR:-/tmp}/mini-accounts-start-check.XXXXXX")"
    "$script_dir/ilp-plugin-mini-accounts.sh" --port 0 >"$out" 2>&1 &
    pid=$!
    until grep -q '^BTP_READY ' "$out"; do
        if ! kill -0 "$pid" 2>/dev/null || [ "$waited" -ge 300 ]; then
            kill -TERM "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            cat "$out" >&2
            rm -f "$out"
            die "ilp-plugin-mini-accounts did not start (scripts/ilp-plugin-mini-accounts.sh output above)"
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null || true
    echo "install-node-deps: ilp-plugin-mini-accounts started: $(grep '^BTP_READY ' "$out")" >&2
    rm -f "$out"
}

install_stack() {
    local stack="$1"
    (
        cd "$node_dir/$stack" || die "$node_dir/$stack is missing"
        [ -f package.json ] && [ -f package-lock.json ] || die "$node_dir/$stack needs package.json and package-lock.json"
        stack_smoke_check() {
            node -e '
                const deps = Object.keys(require("./package.json").dependencies || {});
                for (const name of deps) {
                    try { require(require.resolve(name, { paths: [process.cwd()] })); }
                    catch (err) { console.error("cannot load " + name + ": " + err.message); process.exit(1); }
                }
            ' || die "smoke check of $stack failed: a package does not load (try $0 --force)"
        }
        if [ "$force" -eq 0 ] && [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$(stamp_of_inputs)" ]; then
            stack_smoke_check
            echo "install-node-deps: $node_dir/$stack/node_modules is up to date"
            exit 0
        fi
        echo "install-node-deps: npm ci in $node_dir/$stack" >&2
        npm ci --no-audit --no-fund --loglevel=error || die "npm ci in $stack failed (see the npm output above)"
        stack_smoke_check
        if declare -F "stack_start_check_$stack" >/dev/null; then "stack_start_check_$stack"; fi
        stamp_of_inputs >"$stamp_file"
        echo "install-node-deps: installed into $node_dir/$stack/node_modules"
    )
}

for stack in "${STACKS[@]}"; do
    install_stack "$stack"
done

if [ "$force" -eq 0 ] && [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$(stamp_of_inputs)" ]; then
    smoke_check
    echo "install-node-deps: $node_dir/node_modules is up to date"
    exit 0
fi

npm_flags=(--no-audit --no-fund --loglevel=error)
if [ -f package-lock.json ]; then
    echo "install-node-deps: npm ci in $node_dir" >&2
    npm ci "${npm_flags[@]}" || die "npm ci failed (see the npm output above)"
else
    echo "install-node-deps: no package-lock.json, running npm install to create it" >&2
    # No registry URLs in the committed lock: npm ci finds each package by
    # name and version in whatever registry is configured, checked by hash.
    npm install --omit-lockfile-registry-resolved "${npm_flags[@]}" \
        || die "npm install failed (see the npm output above)"
    [ -f package-lock.json ] || die "npm install wrote no package-lock.json"
fi

smoke_check
server_start_check
stamp_of_inputs >"$stamp_file"
echo "install-node-deps: installed into $node_dir/node_modules"

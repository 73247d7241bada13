#!/usr/bin/env bash
# Installs what `conformance report` and the report UI test need:
#   - the Allure command line (npm package allure-commandline, pinned in
#     interop/report/package-lock.json), which runs on the machine's Java;
#   - Debian's Chromium and ChromeDriver (packages chromium, chromium-driver),
#     which tests/report drives headless to check a generated report;
#   - Debian's tshark (package tshark), with which tests/report opens every
#     pcapng capture of a run (the capture beside each case's wire trace)
#     and checks that Wireshark's dissectors read it without a malformed packet.
#
# Usage: scripts/install-report-deps.sh [--force]
#   --force   re-run npm ci even if node_modules already matches the lock file
#
# Works from any current directory.  Idempotent: npm ci runs only when
# package.json / package-lock.json / the Node major version changed since the
# last install (a stamp file in node_modules records them); apt-get runs only
# when /usr/bin/chromium, /usr/bin/chromedriver or /usr/bin/tshark is missing,
# and needs root (non-interactive: DEBIAN_FRONTEND=noninteractive, so tshark's
# question about capturing as non-root keeps its default, no).
# Every run then checks that `allure --version` runs on Java, that Chromium
# starts headless and renders a page, and that `tshark --version` runs.  Any
# failure exits non-zero with a message.
set -euo pipefail

die() {
    echo "install-report-deps: ERROR: $*" >&2
    exit 1
}

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
report_dir="$(cd "$script_dir/../interop/report" && pwd)"

force=0
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) die "unknown argument: $arg" ;;
    esac
done

# --- Java (Allure is a Java program) ------------------------------------------
command -v java >/dev/null 2>&1 || die "java is not on PATH (Allure needs Java >= 8; on Debian: apt-get install default-jre-headless)"
java -version >/dev/null 2>&1 || die "java does not run: $(java -version 2>&1 | head -1)"

# --- Allure command line from npm ----------------------------------------------
command -v node >/dev/null 2>&1 || die "node is not on PATH (Node.js >= 18 needed)"
command -v npm >/dev/null 2>&1 || die "npm is not on PATH"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 18 ] || die "Node.js >= 18 needed, found $(node --version)"

cd "$report_dir"
[ -f package.json ] || die "$report_dir/package.json is missing"
[ -f package-lock.json ] || die "$report_dir/package-lock.json is missing (allure-commandline is pinned there)"

stamp_file="node_modules/.conformance-install-stamp"
stamp_of_inputs() {
    {
        echo "node-major=$node_major"
        cat package.json package-lock.json
    } | sha256sum | cut -d' ' -f1
}
allure_bin="$report_dir/node_modules/.bin/allure"

if [ "$force" -eq 1 ] || [ ! -f "$stamp_file" ] || [ "$(cat "$stamp_file")" != "$(stamp_of_inputs)" ] \
        || [ ! -x "$allure_bin" ]; then
    echo "install-report-deps: npm ci in $report_dir" >&2
    npm ci --no-audit --no-fund --loglevel=error || die "npm ci failed (see the npm output above)"
    [ -x "$allure_bin" ] || die "npm ci did not install $allure_bin"
    stamp_of_inputs >"$stamp_file"
fi

pinned="$(node -p 'require("./package-lock.json").packages["node_modules/allure-commandline"].version')"
allure_version="$("$allure_bin" --version 2>&1)" \
    || die "allure --version failed on $(java -version 2>&1 | head -1): $allure_version"
allure_version="$(printf '%s\n' "$allure_version" | tail -1)"
[ "$allure_version" = "$pinned" ] \
    || die "allure --version printed '$allure_version', the lock pins allure-commandline $pinned (try $0 --force)"
echo "install-report-deps: allure $allure_version runs on $(java -version 2>&1 | head -1)" >&2

# --- Chromium, ChromeDriver and tshark from Debian --------------------------------
chromium_bin=/usr/bin/chromium
chromedriver_bin=/usr/bin/chromedriver
tshark_bin=/usr/bin/tshark
missing=()
[ -x "$chromium_bin" ] || missing+=(chromium)
[ -x "$chromedriver_bin" ] || missing+=(chromium-driver)
[ -x "$tshark_bin" ] || missing+=(tshark)
if [ "${#missing[@]}" -gt 0 ]; then
    [ "$(id -u)" -eq 0 ] || die "Debian packages ${missing[*]} are missing and installing them needs root: run as root, or ask an administrator for 'apt-get install ${missing[*]}'"
    command -v apt-get >/dev/null 2>&1 || die "Debian packages ${missing[*]} are missing and there is no apt-get: install them by hand"
    echo "install-report-deps: apt-get install ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=120 update -qq || die "apt-get update failed (see its output above)"
    apt-get -o DPkg::Lock::Timeout=120 install -y -qq --no-install-recommends "${missing[@]}" </dev/null \
        || die "apt-get install ${missing[*]} failed (see its output above)"
    [ -x "$chromium_bin" ] || die "apt-get installed no $chromium_bin"
    [ -x "$chromedriver_bin" ] || die "apt-get installed no $chromedriver_bin"
    [ -x "$tshark_bin" ] || die "apt-get installed no $tshark_bin"
fi
tshark_version="$("$tshark_bin" --version 2>/dev/null | head -1)" && [ -n "$tshark_version" ] \
    || die "$tshark_bin does not run: $("$tshark_bin" --version 2>&1 | tail -1)"
"$chromedriver_bin" --version >/dev/null 2>&1 || die "$chromedriver_bin does not run: $("$chromedriver_bin" --version 2>&1 | head -1)"

# Chromium must start headless and render a page.  The flags keep it off the
# network (this machine's network is closed: without them it hangs retrying).
check_dir="$(mktemp -d "${TMPDIR:-/tmp}/chromium-check.XXXXXX")"
trap 'rm -rf "$check_dir"' EXIT
echo '<html><body><p id="x">chromium-report-check</p></body></html>' >"$check_dir/page.html"
chromium_flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
    --disable-background-networking --disable-component-update --disable-sync
    --disable-dev-shm-usage --user-data-dir="$check_dir/profile")
if ! timeout 60 "$chromium_bin" "${chromium_flags[@]}" --dump-dom "file://$check_dir/page.html" \
        >"$check_dir/dom" 2>"$check_dir/stderr" || ! grep -q chromium-report-check "$check_dir/dom"; then
    tail -20 "$check_dir/stderr" >&2
    die "$chromium_bin did not start headless and render a page (its stderr above)"
fi
echo "install-report-deps: $("$chromium_bin" --version 2>/dev/null | head -1) renders headless; $("$chromedriver_bin" --version | head -1 | cut -d' ' -f1-2)" >&2
echo "install-report-deps: $tshark_version runs" >&2
echo "install-report-deps: ready (allure: $allure_bin)"

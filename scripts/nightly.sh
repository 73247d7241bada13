#!/usr/bin/env bash
# The nightly, step by step: what .github/workflows/nightly.yml runs, one
# `scripts/nightly.sh STEP` per workflow step, so that a local run and the
# workflow cannot drift apart (tests/ci/test_nightly_workflow.py checks it).
#
# Usage: scripts/nightly.sh [STEP...]     no STEP: every step in order
#        scripts/nightly.sh --list        the steps, one per line: NAME WHEN
#        scripts/nightly.sh --help
#
# Steps (WHEN: "on-success" runs only if no earlier step failed, "always"
# runs after a failure too, so that a broken night still keeps and
# publishes what it has; the workflow's `if:` says the same):
#   setup     on-success  system packages when missing (as root), scripts/setup.sh
#                         --aggregate with the config's setup_flags, scripts/install-report-deps.sh
#   images    on-success  scripts/docker-build-images.sh (engine, base image, images),
#                         only when a configured target runs in a container
#   certify   on-success  conformance certify of the configured targets, --jobs N; then the same
#                         targets again under each configured impairment (--impair PROFILE,
#                         runs/certify-<profile>; docs/impairment.md)
#   interop   on-success  conformance interop --all (per configured protocol), --jobs N
#   versions  always      every release of the config's `versioned` implementations, each its own
#                         target (docs/versions.md), in NIGHTLY_SHARDS shards: runs/versions-K. A shard
#                         whose run is not there yet is certified here (`versions-shard`); in the
#                         workflow the shard jobs ran them and this job downloaded them, and a missing
#                         one fails the step. Then their Allure results together in runs/versions
#   store     always      keeps tonight's results in the store: each run's results.jsonl,
#                         summary.json, interop-summary.json under STORE/runs/<run-id>/
#   ingest    always      conformance ingest of every stored night (idempotent) into STORE/dataset;
#                         a dataset it cannot update is rebuilt from the stored runs (a note)
#   matrix    always      conformance matrix over every night in STORE/dataset -> NIGHTLY_DIR/matrix,
#                         then conformance versions-view (every rule across each implementation's
#                         releases, and the verdict changes) -> NIGHTLY_DIR/versions
#   report    always      conformance report per run (certify, interop) -> NIGHTLY_DIR/allure/<kind>,
#                         with the Allure history of the previous night (STORE/allure-history/<kind>)
#   verdict   always      red or green, and why: NIGHTLY_DIR/verdict.json, verdict.md and
#                         verdict.html; with the verdict changes the version view found (between
#                         two releases, between a release's last two nights), in red in the HTML
#
# Steps the workflow's other jobs run (not part of a run of every step):
#   versions-plan    the night's versioned targets, one NAME@VERSION a line, from the
#                    registries: NIGHTLY_DIR/versions-targets.txt (the plan job; every shard
#                    then certifies its share of the same list)
#   versions-shard   `conformance versions certify --from-file ... --shard $NIGHTLY_SHARD`
#                    (K/N) into runs/versions-K (the shard jobs, a job matrix)
#
# The nightly is red (exit 1 from `verdict`) when the harness could not give a
# verdict (a step failed, a preflight error, a target or interop pair with no
# result), when a reference node is not CONFORMANT, or when two reference
# nodes are not interoperable. A third-party node that is not conformant or
# not interoperable is a finding: listed in the verdict, never red.
#
# Environment:
#   NIGHTLY_DIR       tonight's work dir (default reports/nightly/<UTC date>): runs/certify,
#                     runs/interop, matrix/, allure/, verdict.*, steps.tsv
#   NIGHTLY_STORE     what nights keep (default reports/nightly/store): runs/, dataset/,
#                     allure-history/; the workflow restores and saves it with actions/cache
#   NIGHTLY_CONFIG    the targets config (default .github/nightly-targets.toml)
#   NIGHTLY_TARGETS, NIGHTLY_TARGETS_FILES, NIGHTLY_INTEROP_PROTOCOLS, NIGHTLY_SETUP_FLAGS,
#   NIGHTLY_IMPAIRMENTS
#                     space-separated overrides of the config's lists; "none" = an empty list
#                     (NIGHTLY_INTEROP_PROTOCOLS=none: no interop; NIGHTLY_IMPAIRMENTS=none: clean
#                     loopback only); empty or unset = the config's
#   NIGHTLY_JOBS      targets / pairs at once (default 2; serial when the CLI has no --jobs)
#   NIGHTLY_RUN_TIMEOUT   deadline of each target's or pair's whole run, seconds (default 900)
#   NIGHTLY_MATRIX_ARGS   extra `conformance matrix` arguments, e.g. "--since 2026-11-01"
#   NIGHTLY_VERSIONED     space-separated override of the config's `versioned` ("none": no
#                         versioned target)
#   NIGHTLY_SHARDS        shards of the versioned targets (default 1; the workflow's matrix size)
#   NIGHTLY_SHARD         K/N, the shard `versions-shard` certifies
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

STEPS=(setup images certify interop versions store ingest matrix report verdict)
ALWAYS=" versions store ingest matrix report verdict "
JOB_STEPS=" versions-plan versions-shard "

night_dir="$(realpath -m "${NIGHTLY_DIR:-reports/nightly/$(date -u +%Y-%m-%d)}")"
store="$(realpath -m "${NIGHTLY_STORE:-reports/nightly/store}")"
config="${NIGHTLY_CONFIG:-.github/nightly-targets.toml}"
jobs="${NIGHTLY_JOBS:-2}"
run_timeout="${NIGHTLY_RUN_TIMEOUT:-900}"
conformance=(.venv/bin/conformance)

say() { echo "nightly: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; }

# config KEY: the config's list KEY, one item per line, or the override
# NIGHTLY_<KEY> (space-separated; "none" for an empty list) when it is not
# empty. Empty means "the config's": a scheduled workflow run passes its
# dispatch inputs as empty strings.
config() {
    local key="$1" var="NIGHTLY_${1^^}"
    if [ -n "${!var:-}" ]; then
        local word
        for word in ${!var}; do [ "$word" = none ] || printf '%s\n' "$word"; done
        return 0
    fi
    [ -f "$config" ] || die "config $config not found (NIGHTLY_CONFIG)"
    python3 - "$config" "$key" <<'PY'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    value = tomllib.load(f).get(sys.argv[2], [])
if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
    sys.exit(f"nightly: ERROR: {sys.argv[1]}: {sys.argv[2]} must be a list of strings")
for item in value:
    print(item)
PY
}

targets_file_args() {
    local f
    while IFS= read -r f; do [ -z "$f" ] || printf -- '--targets-file\n%s\n' "$f"; done < <(config targets_files)
}

has_flag() {  # has_flag SUBCOMMAND FLAG: the installed CLI knows FLAG
    local help
    help="$("${conformance[@]}" "$1" --help 2>/dev/null)" || return 1
    [[ "$help" == *"$2 "* ]]
}

jobs_args() {  # jobs_args SUBCOMMAND
    if has_flag "$1" "--jobs"; then
        printf -- '--jobs\n%s\n' "$jobs"
    else
        say "note: \`conformance $1\` has no --jobs here: running one at a time"
    fi
}

# --- steps ---------------------------------------------------------------------

step_setup() {
    # A fresh Debian machine or container (the workflow's debian:bookworm job)
    # lacks what the project's scripts take for granted; as root, install it.
    local want=(python3 python3-venv python3-dev gcc git procps ca-certificates) missing=() p
    for p in "${want[@]}"; do
        [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
    done
    if [ "${#missing[@]}" -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
        [ "$(id -u)" -eq 0 ] || die "missing ${missing[*]}; installing them needs root"
        say "apt-get install ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get -o DPkg::Lock::Timeout=120 update -q >/dev/null
        apt-get -o DPkg::Lock::Timeout=120 install -y -q --no-install-recommends "${missing[@]}" >/dev/null
    fi
    local flags=()
    mapfile -t flags < <(config setup_flags)
    # The aggregate extra: PySpark, for the ingest and matrix steps.
    scripts/setup.sh --aggregate "${flags[@]}"
    scripts/install-report-deps.sh
}

# Prints the configured targets (and, with interop, the targets of the
# interop protocols) that run in a container; nothing when none does.
container_targets() {
    local interop=1
    [ "${NIGHTLY_INTEROP_PROTOCOLS-}" != none ] || interop=0
    NIGHTLY_CHOSEN="$(config targets)" NIGHTLY_FILES="$(config targets_files)" \
    NIGHTLY_PROTOCOLS="$(config interop_protocols)" NIGHTLY_INTEROP_ON="$interop" .venv/bin/python - <<'PY'
import os
from conformance.core.targets import load_targets
chosen = os.environ["NIGHTLY_CHOSEN"].split()
protocols = os.environ["NIGHTLY_PROTOCOLS"].split()
interop = os.environ["NIGHTLY_INTEROP_ON"] == "1"
for name, target in load_targets(os.environ["NIGHTLY_FILES"].split()).items():
    in_interop = interop and (not protocols or target.protocol in protocols)
    if getattr(target, "container", None) is not None and (name in chosen or in_interop):
        print(name)
PY
}

step_images() {
    local needing
    needing="$(container_targets)"
    if [ -z "$needing" ]; then
        say "no configured target runs in a container: no engine or images needed"
        return 0
    fi
    say "images for: $(echo "$needing" | tr '\n' ' ')"
    scripts/docker-build-images.sh
}

# The certify and interop steps: exit 0 when the harness gave its verdicts
# (conformant or not: `verdict` judges them), the CLI's code otherwise
# (2 usage or preflight error, 3 harness error).
verdicts_given() {  # verdicts_given NAME SUMMARY_FILE CODE [WHY]: a step's status from its CLI's exit code
    local name="$1" summary="$2" code="$3" why="${4-}"
    if [ ! -f "$summary" ]; then
        say "$name wrote no ${summary##*/} (exit $code)"
        return $((code == 0 ? 3 : code))
    fi
    case "$code" in
        0|1) return 0 ;;
        *) say "$name exited $code${why:+: $why}"; return "$code" ;;
    esac
}

# impairment_tag PROFILE: the run dir suffix of a profile (delay:ms=200 -> delay-ms-200).
impairment_tag() { local tag="${1//[^A-Za-z0-9]/-}"; echo "${tag//--/-}"; }

step_certify() {
    local targets=() args=() code=0 status=0 impairments=() profile dir
    mapfile -t targets < <(config targets)
    [ "${#targets[@]}" -gt 0 ] || die "no targets configured"
    local run_dir="$night_dir/runs/certify"
    rm -rf "$run_dir" "$night_dir"/runs/certify-*
    mapfile -t args < <(targets_file_args; jobs_args certify)
    for t in "${targets[@]}"; do args+=(--target "$t"); done
    "${conformance[@]}" certify "${args[@]}" --run-dir "$run_dir" --run-timeout "$run_timeout" || code=$?
    verdicts_given certify "$run_dir/summary.json" "$code" "the harness could not give every verdict" || status=$?
    # The same targets through the impairment relay, one run per profile
    # (docs/impairment.md): a verdict that differs from the clean run's is a
    # finding about the node, or, for a reference node, a harness bug (red).
    mapfile -t impairments < <(config impairments)
    for profile in "${impairments[@]}"; do
        dir="$night_dir/runs/certify-$(impairment_tag "$profile")"
        code=0
        "${conformance[@]}" certify "${args[@]}" --impair "$profile" --run-dir "$dir" --run-timeout "$run_timeout" \
            || code=$?
        verdicts_given "certify --impair $profile" "$dir/summary.json" "$code" \
            "the harness could not give every verdict" || { [ "$status" -ne 0 ] || status=$?; }
    done
    return "$status"
}

step_interop() {
    local protocols=() args=() code=0
    if [ "${NIGHTLY_INTEROP_PROTOCOLS-}" = none ]; then
        say "interop: off (NIGHTLY_INTEROP_PROTOCOLS=none)"
        return 0
    fi
    mapfile -t protocols < <(config interop_protocols)
    local run_dir="$night_dir/runs/interop"
    rm -rf "$run_dir"
    mapfile -t args < <(targets_file_args; jobs_args interop)
    for p in "${protocols[@]}"; do args+=(--protocol "$p"); done
    # The cross-check reads tonight's certifications: a failing pair of two
    # CONFORMANT targets is a coverage gap (coverage-gaps.json; the verdict lists it).
    [ -d "$night_dir/runs/certify" ] && args+=(--certified-in "$night_dir/runs/certify")
    "${conformance[@]}" interop --all "${args[@]}" --run-dir "$run_dir" --run-timeout "$run_timeout" || code=$?
    verdicts_given interop "$run_dir/interop-summary.json" "$code"
}

# Tonight's run dirs that hold results (the impaired certifications too).
versions_list="$night_dir/versions-targets.txt"

step_versions_plan() {
    local impls=()
    mapfile -t impls < <(config versioned)
    mkdir -p "$night_dir"
    if [ "${#impls[@]}" -eq 0 ]; then
        : > "$versions_list"
        say "versions: no versioned implementation configured"
        return 0
    fi
    "${conformance[@]}" versions list "${impls[@]}" --every-release --names > "$versions_list.tmp"
    mv "$versions_list.tmp" "$versions_list"
    say "versions: $(wc -l < "$versions_list") release(s) of ${impls[*]} tonight"
}

step_versions_shard() {
    local shard="${NIGHTLY_SHARD:?versions-shard needs NIGHTLY_SHARD=K/N}" code=0
    [ -f "$versions_list" ] || step_versions_plan
    [ -s "$versions_list" ] || { say "versions: no versioned target tonight"; return 0; }
    local dir="$night_dir/runs/versions-${shard%/*}"
    rm -rf "$dir"
    "${conformance[@]}" versions certify --from-file "$versions_list" --shard "$shard" --jobs "$jobs" \
        --run-dir "$dir" --run-timeout "$run_timeout" || code=$?
    # 0 conformant, 1 not conformant, 4 not started: verdicts; a shard left
    # empty (more shards than targets) writes no run.
    case "$code" in
        0|1|4) return 0 ;;
        *) say "versions shard $shard exited $code"; return "$code" ;;
    esac
}

step_versions() {
    local shards="${NIGHTLY_SHARDS:-1}" k missing=() status=0 dir
    [ -f "$versions_list" ] || step_versions_plan
    [ -s "$versions_list" ] || { say "versions: no versioned target tonight"; return 0; }
    for k in $(seq 1 "$shards"); do
        [ ! -s "$night_dir/runs/versions-$k/results.jsonl" ] || continue
        if [ -n "${GITHUB_ACTIONS:-}" ]; then
            missing+=("$k/$shards")  # its shard job failed or uploaded nothing
        else
            NIGHTLY_SHARD="$k/$shards" step_versions_shard || status=$?
        fi
    done
    rm -rf "$night_dir/runs/versions" && mkdir -p "$night_dir/runs/versions/allure-results"
    for dir in "$night_dir"/runs/versions-[0-9]*; do
        [ -d "$dir/allure-results" ] && cp -r "$dir/allure-results/." "$night_dir/runs/versions/allure-results/"
        [ -f "$dir/results.jsonl" ] && cat "$dir/results.jsonl" >> "$night_dir/runs/versions/results.jsonl"
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        echo "versions: no runs from shard(s) ${missing[*]}" >> "$night_dir/notes.txt"
        say "versions: no runs from shard(s) ${missing[*]}"
        return 1
    fi
    return "$status"
}

tonight_runs() {
    local dir
    for dir in "$night_dir/runs/certify" "$night_dir"/runs/certify-* "$night_dir"/runs/versions-[0-9]* \
        "$night_dir/runs/interop"; do
        [ -s "$dir/results.jsonl" ] && echo "$dir"
    done
    return 0
}

step_store() {
    local runs=() run id dest
    mapfile -t runs < <(tonight_runs)
    [ "${#runs[@]}" -gt 0 ] || die "no results tonight in $night_dir/runs (certify and interop wrote none)"
    mkdir -p "$store/runs"
    for run in "${runs[@]}"; do
        id="$(python3 -c 'import json, sys
for line in open(sys.argv[1], encoding="utf-8"):
    try:
        print(json.loads(line)["run_id"]); break
    except (ValueError, KeyError):
        continue' "$run/results.jsonl")"
        [ -n "$id" ] || die "$run/results.jsonl names no run id"
        dest="$store/runs/$id"
        # Only what the matrices and the verdict read: the traces, logs and
        # Allure results stay in tonight's artifact.
        rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
        for f in results.jsonl summary.json interop-summary.json; do
            [ ! -f "$run/$f" ] || cp "$run/$f" "$dest.tmp/"
        done
        rm -rf "$dest" && mv "$dest.tmp" "$dest"
        echo "$id" >> "$night_dir/stored-runs.txt"
        say "kept $(basename "$run") as $dest"
    done
    say "the store holds $(find "$store/runs" -mindepth 1 -maxdepth 1 -type d | wc -l) run(s)"
}

step_ingest() {
    # Every stored night, not only tonight's: re-ingesting a run changes
    # nothing (docs/aggregation.md), and a night whose ingest failed is
    # picked up the next night.
    [ -d "$store/runs" ] || die "the store has no runs ($store/runs)"
    local code=0
    "${conformance[@]}" ingest "$store/runs" --dataset "$store/dataset" || code=$?
    [ "$code" -ne 0 ] || return 0
    [ "$code" -eq 3 ] && [ -d "$store/dataset" ] || return "$code"
    # The stored runs are the record; the dataset is derived from them. A
    # dataset the installed ingest cannot update (e.g. written by an older
    # version in an earlier night) is rebuilt from every stored run, said
    # in the verdict's notes.
    say "ingest into the kept dataset failed (exit $code): rebuilding it from the $(find "$store/runs" -mindepth 1 -maxdepth 1 -type d | wc -l) stored run(s)"
    rm -rf "$store/dataset.rebuild"
    "${conformance[@]}" ingest "$store/runs" --dataset "$store/dataset.rebuild"
    rm -rf "$store/dataset.old"
    mv "$store/dataset" "$store/dataset.old"
    mv "$store/dataset.rebuild" "$store/dataset"
    rm -rf "$store/dataset.old"
    echo "ingest: the kept dataset could not be updated (exit $code, see the ingest step's output); rebuilt from the stored runs" \
        >> "$night_dir/notes.txt"
}

step_matrix() {
    local extra=()
    read -r -a extra <<<"${NIGHTLY_MATRIX_ARGS:-}"
    local code=0
    "${conformance[@]}" matrix --dataset "$store/dataset" --out "$night_dir/matrix" "${extra[@]}" || code=$?
    # Every rule across the releases; its regressions.json is news the verdict tells.
    # Run even when the matrices failed: the step's status is the first failure's.
    "${conformance[@]}" versions-view --dataset "$store/dataset" --out "$night_dir/versions" \
        || { [ "$code" -ne 0 ] || code=$?; }
    return "$code"
}

step_report() {
    local kind run out history built=0
    for kind in certify interop versions; do
        run="$night_dir/runs/$kind"
        compgen -G "$run/allure-results/*-result.json" >/dev/null || { say "report: no Allure results in $run"; continue; }
        out="$night_dir/allure/$kind"
        history="$store/allure-history/$kind"
        if [ -f "$history/history.json" ]; then
            "${conformance[@]}" report "$run" --out "$out" --history-from "$history"
        else
            say "report: no earlier $kind report in the store: the history starts tonight"
            "${conformance[@]}" report "$run" --out "$out" --no-history
        fi
        # Tomorrow's report carries on from tonight's history.
        rm -rf "$history.tmp" && mkdir -p "$(dirname "$history")"
        cp -r "$out/history" "$history.tmp"
        rm -rf "$history" && mv "$history.tmp" "$history"
        built=$((built + 1))
    done
    [ "$built" -gt 0 ] || die "no run tonight has Allure results"
}

step_verdict() {
    local targets=() interop=1 impairments=() profile tags=""
    mapfile -t targets < <(config targets)
    mapfile -t impairments < <(config impairments)
    for profile in "${impairments[@]}"; do tags+="$profile=$(impairment_tag "$profile") "; done
    [ "${NIGHTLY_INTEROP_PROTOCOLS-}" != none ] || interop=0
    NIGHTLY_IMPAIRMENT_TAGS="$tags" python3 - "$night_dir" "$interop" "${targets[@]}" <<'PY'
import json, os, sys
from pathlib import Path

night = Path(sys.argv[1])
interop_on = sys.argv[2] == "1"
requested = sys.argv[3:]
impairments = [item.rsplit("=", 1) for item in os.environ.get("NIGHTLY_IMPAIRMENT_TAGS", "").split()]
red, findings, notes = [], [], []

def is_reference(implementation):
    return str(implementation or "").startswith("reference-")

def load(path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None

notes_file = night / "notes.txt"
if notes_file.is_file():
    notes += [line for line in notes_file.read_text(encoding="utf-8").splitlines() if line.strip()]

steps_file = night / "steps.tsv"
if steps_file.is_file():
    for line in steps_file.read_text(encoding="utf-8").splitlines():
        step, status, _seconds = (line.split("\t") + ["", ""])[:3]
        if status not in ("ok", "") and step != "verdict":
            red.append(f"step {step} failed ({status})")

summary = load(night / "runs" / "certify" / "summary.json")
certified = []
if summary is None:
    red.append("certify: no summary.json: the run did not finish")
else:
    if summary.get("preflight_error"):
        red.append(f"certify: preflight error ({summary.get('preflight_target')}): {summary['preflight_error']}")
    groups = {g["target"]: g for g in summary.get("targets", [])}
    for name in requested:
        group = groups.get(name)
        if group is None:
            red.append(f"certify: {name}: no case result recorded")
            continue
        verdict = "CONFORMANT" if group.get("conformant") else "NOT CONFORMANT"
        line = (f"{name} [{group.get('implementation')} {group.get('implementation_version')}, "
                f"{group.get('protocol')}]: {verdict}")
        certified.append({"target": name, "implementation": group.get("implementation"),
                          "protocol": group.get("protocol"), "conformant": bool(group.get("conformant")),
                          "reference": is_reference(group.get("implementation")),
                          "failed_must": group.get("failed_must", []),
                          "blocked_must": group.get("blocked_must", [])})
        if group.get("conformant"):
            continue
        detail = f" (MUST not passed: {', '.join(map(str, group.get('failed_must', [])[:5]))})" \
            if group.get("failed_must") else ""
        (red if is_reference(group.get("implementation")) else findings).append(line + detail)

# The same targets through each impairment: a reference node that is not
# CONFORMANT there is a harness bug (the verdicts must not change, docs/
# impairment.md): red; a third-party node's is a finding about the node.
clean = {c["target"]: c["conformant"] for c in certified}
for profile, tag in impairments:
    isummary = load(night / "runs" / f"certify-{tag}" / "summary.json")
    if isummary is None:
        red.append(f"certify --impair {profile}: no summary.json: the run did not finish")
        continue
    impairment = isummary.get("impairment") or profile
    if isummary.get("preflight_error"):
        red.append(f"certify --impair {profile}: preflight error ({isummary.get('preflight_target')}): "
                   f"{isummary['preflight_error']}")
    groups = {g["target"]: g for g in isummary.get("targets", [])}
    for name in requested:
        group = groups.get(name)
        if group is None:
            red.append(f"certify under {impairment}: {name}: no case result recorded")
            continue
        conformant = bool(group.get("conformant"))
        certified.append({"target": name, "implementation": group.get("implementation"),
                          "protocol": group.get("protocol"), "conformant": conformant,
                          "reference": is_reference(group.get("implementation")),
                          "failed_must": group.get("failed_must", []),
                          "blocked_must": group.get("blocked_must", []), "impairment": impairment})
        if conformant:
            continue
        differs = " (CONFORMANT on clean loopback)" if clean.get(name) else ""
        detail = f" (MUST not passed: {', '.join(map(str, group.get('failed_must', [])[:5]))})" \
            if group.get("failed_must") else ""
        line = (f"{name} [{group.get('implementation')} {group.get('implementation_version')}, "
                f"{group.get('protocol')}] under {impairment}: NOT CONFORMANT{differs}{detail}")
        (red if is_reference(group.get("implementation")) else findings).append(line)

pairs = []
gaps = []
if interop_on:
    isummary = load(night / "runs" / "interop" / "interop-summary.json")
    if isummary is None:
        red.append("interop: no interop-summary.json: the run did not finish")
    else:
        for p in isummary.get("pairs", []):
            both_reference = is_reference(p.get("client_implementation")) and is_reference(p.get("server_implementation"))
            pairs.append({k: p.get(k) for k in ("client", "server", "protocol", "verdict", "skipped", "error")}
                         | {"reference_pair": both_reference})
            label = f"{p['client']} (client) -> {p['server']} (server), {p['protocol']}: {p['verdict']}"
            if p["verdict"] == "interoperable":
                continue
            if p["verdict"] == "skipped":
                notes.append(f"{label}: {p.get('skipped')}")
            elif p["verdict"] in ("not run", "no result"):
                red.append(f"interop: {label}" + (f": {p['error']}" if p.get("error") else ""))
            elif both_reference:
                red.append(f"interop: {label}: {', '.join(p.get('must_not_passed', [])[:5])}")
            else:
                findings.append(f"{label}: {', '.join(p.get('must_not_passed', [])[:5])}")
    # Pairs of two CONFORMANT targets that do not interoperate: each a case
    # the suites lack (or an erratum to write). Red: the suites' own gap.
    gaps = (load(night / "runs" / "interop" / "coverage-gaps.json") or {}).get("gaps", [])
    for gap in gaps:
        cases = ", ".join(f["case_id"] for f in gap.get("failing", [])[:5])
        red.append(f"coverage gap: {gap['client']} (client) and {gap['server']} (server) are both certified "
                   f"CONFORMANT but fail {cases}")

# Regressions are news (docs/versions-view.md): every verdict change the
# version view found, between two releases of an implementation and between
# a release's last two nights (the harness version tells a flaky node or a
# changed environment from a harness change). Listed, never red by itself.
changes = load(night / "versions" / "regressions.json") or {}
change_lines = [str(line) for line in changes.get("lines", [])]

result = {"night": night.name, "red": bool(red), "why_red": red, "findings": findings, "notes": notes,
          "certified": certified, "interop_pairs": pairs, "coverage_gaps": gaps,
          "verdict_changes": change_lines}
(night / "verdict.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

md = [f"## Nightly {night.name}: {'RED' if red else 'green'}", ""]
conformant = sum(c["conformant"] for c in certified)
md.append(f"{conformant} of {len(certified)} certification(s) conformant "
          f"({len(impairments)} impairment(s): {', '.join(p for p, _ in impairments) or 'none'}); "
          f"{sum(p['verdict'] == 'interoperable' for p in pairs)} of {len(pairs)} interop pair(s) interoperable.")
for title, items in (("Why red", red), ("Findings (third-party nodes; expected, not red)", findings),
                     ("Notes", notes)):
    if items:
        md += ["", f"### {title}", ""] + [f"- {item}" for item in items]
if change_lines:
    md += ["", f"### Verdict changes ({len(changes.get('release_changes', []))} between releases, "
               f"{len(changes.get('night_changes', []))} between nights)", "",
           "See versions/index.html for every rule across the releases.", ""]
    md += [f"- {line}" for line in change_lines]
text = "\n".join(md) + "\n"
(night / "verdict.md").write_text(text, encoding="utf-8")
import html as _html
page = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>Nightly {_html.escape(night.name)}"
        "</title></head><body>"]
for line in md + [""]:
    if not line.startswith("- ") and page[-1].startswith("<li"):
        page.append("</ul>")
    if line.startswith("- ") and not page[-1].startswith("<li"):
        page.append("<ul>")
    if line.startswith("## "):
        page.append(f"<h1>{_html.escape(line[3:])}</h1>")
    elif line.startswith("### "):
        page.append(f"<h2>{_html.escape(line[4:])}</h2>")
    elif line.startswith("- "):
        red_line = line[2:] in change_lines or line[2:] in red
        page.append(f'<li style="color:#b00000">{_html.escape(line[2:])}</li>' if red_line
                    else f"<li>{_html.escape(line[2:])}</li>")
    elif line:
        page.append(f"<p>{_html.escape(line)}</p>")
page.append("</body></html>\n")
(night / "verdict.html").write_text("".join(page), encoding="utf-8")
print(text)
summary_path = os.environ.get("GITHUB_STEP_SUMMARY")
if summary_path:
    with open(summary_path, "a", encoding="utf-8") as f:
        f.write(text)
sys.exit(1 if red else 0)
PY
}

# --- running steps ---------------------------------------------------------------

# run_step NAME: runs it, prints its name and seconds, appends a line to
# steps.tsv (step, status, seconds); returns the step's exit status.
run_step() {
    local name="$1" start code=0 status
    mkdir -p "$night_dir"
    say "== step $name (night dir $night_dir)"
    start=$(date +%s.%N)
    # A subshell with errexit of its own: inside `( ... ) || code=$?` bash
    # would ignore errexit, and a failing command would not end the step.
    set +e
    ( set -e; "step_${name//-/_}" )
    code=$?
    set -e
    local seconds
    seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    if [ "$code" -eq 0 ]; then status=ok; else status="exit $code"; fi
    # One line per step: a step run again tonight replaces its line.
    if [ -f "$night_dir/steps.tsv" ]; then
        grep -v -P "^$name\t" "$night_dir/steps.tsv" > "$night_dir/steps.tsv.tmp" || true
        mv "$night_dir/steps.tsv.tmp" "$night_dir/steps.tsv"
    fi
    printf '%s\t%s\t%s\n' "$name" "$status" "$seconds" >> "$night_dir/steps.tsv"
    say "== step $name: $status in ${seconds} s"
    return "$code"
}

case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    --list)
        for s in "${STEPS[@]}"; do
            if [[ "$ALWAYS" == *" $s "* ]]; then echo "$s always"; else echo "$s on-success"; fi
        done
        exit 0 ;;
esac

if [ "$#" -gt 0 ]; then
    for s in "$@"; do
        [[ " ${STEPS[*]} $JOB_STEPS" == *" $s "* ]] || { usage >&2; die "unknown step $s (steps: ${STEPS[*]}${JOB_STEPS% })"; }
    done
    failed=0
    for s in "$@"; do
        run_step "$s" || { code=$?; [ "$failed" -ne 0 ] || failed=$code; }
    done
    exit "$failed"
fi

# Every step in order, as the workflow runs them: after a failure only the
# "always" steps run; the exit status is the first failure's.
rm -f "$night_dir/steps.tsv" "$night_dir/stored-runs.txt" "$night_dir/notes.txt"
failed=0 first=""
total_start=$SECONDS
for s in "${STEPS[@]}"; do
    if [ "$failed" -ne 0 ] && [[ "$ALWAYS" != *" $s "* ]]; then
        say "== step $s: skipped (step $first failed)"
        continue
    fi
    run_step "$s" || { code=$?; if [ "$failed" -eq 0 ]; then failed=$code; first=$s; fi; }
done
say "all steps done in $((SECONDS - total_start)) s: $(if [ "$failed" -eq 0 ]; then echo green; else echo "RED (first failure: $first)"; fi)"
column -t -s $'\t' "$night_dir/steps.tsv" >&2 || cat "$night_dir/steps.tsv" >&2
exit "$failed"

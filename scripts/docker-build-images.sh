#!/usr/bin/env bash
# Builds the project's container images, all FROM the local base image
# conformance/base:bookworm (scripts/docker-setup.sh), tagged
# conformance/<name>:dev. No network inside any build: Python packages come
# from the local wheelhouse (scripts/build-wheelhouse.sh), npm packages from
# interop/node/node_modules installed on the host (scripts/install-node-deps.sh).
#
# Usage: scripts/docker-build-images.sh [--force] [NAME...]
#   NAME: python harness reference node ssb-server ilp-plugin-btp rabbitmq
#   ocaml-ripp swpt-stomp activemq ssb-db2 ilp-plugin-mini-accounts (default: all;
#   a name also builds the images it starts FROM)
#
# Images (docker/<name>/Dockerfile):
#   python          venv with conformance-harness from the wheelhouse (parent of the next two)
#   harness         the `conformance` CLI
#   reference       the Python reference nodes: `reference-node ssb|btp|stomp|... ARGS`
#   node            Node.js + interop/node packages (parent of the next two)
#   ssb-server      ssb-server 16 via scripts/ssb-server.sh
#   ilp-plugin-btp  ilp-plugin-btp 1.5 via interop/node/ilp-plugin-btp-peer.js
#   ssb-db2         ssb-db2 8 + ssb-ebt 9 + ssb-conn 6 via scripts/ssb-db2.sh
#   ilp-plugin-mini-accounts  ilp-plugin-mini-accounts 4.2 via scripts/ilp-plugin-mini-accounts.sh
#   rabbitmq        RabbitMQ 3.10 + rabbitmq_stomp via scripts/rabbitmq.sh: the host's
#                   Debian installation (scripts/install-rabbitmq.sh) copied in
#   ocaml-ripp      the OCaml RIPP peer, its executable built on the host
#                   (scripts/build-ocaml-ripp.sh)
#   swpt-stomp      swpt_stomp 0.1.0 (Swaptacular's STOMP server and client) on the
#                   rabbitmq image, run by interop/stomp/swpt_node.py; its wheels
#                   built on the host (scripts/install-swpt-stomp.sh --wheelhouse)
#   activemq        ActiveMQ 5.17 on OpenJDK 17 via scripts/activemq.sh: the host's
#                   Debian installation (scripts/install-activemq.sh) copied in
#
# Unchanged images are skipped: each build context is staged in
# .cache/docker-context/<name>/ and hashed together with its Dockerfile and
# the id of its parent image; the hash is a label of the image, and an image
# whose label matches is not rebuilt. Prints one line per image with its
# size and build time.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
label=org.conformance.context-hash
ctx_root="$repo/.cache/docker-context"
all=(python harness reference node ssb-server ilp-plugin-btp rabbitmq ocaml-ripp swpt-stomp activemq
     ssb-db2 ilp-plugin-mini-accounts)

say() { echo "docker-build-images.sh: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

force=0 wanted=()
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
        -*) die "unknown option $arg" ;;
        *) [[ " ${all[*]} " == *" $arg "* ]] || die "unknown image $arg (${all[*]})"; wanted+=("$arg") ;;
    esac
done
[ "${#wanted[@]}" -gt 0 ] || wanted=("${all[@]}")

parent_of() {
    case "$1" in
        harness|reference) echo python ;;
        ssb-server|ilp-plugin-btp|ssb-db2|ilp-plugin-mini-accounts) echo node ;;
        swpt-stomp) echo rabbitmq ;;
        *) echo "" ;;
    esac
}
# The images to build, parents first, each once.
order=()
for name in "${all[@]}"; do
    for w in "${wanted[@]}"; do
        if [ "$w" = "$name" ] || [ "$(parent_of "$w")" = "$name" ]; then order+=("$name"); break; fi
    done
done

needs_python=0 needs_node=0 needs_rabbitmq=0 needs_ocaml=0 needs_swpt=0 needs_activemq=0
for name in "${order[@]}"; do
    case "$name" in
        python) needs_python=1 ;;
        node) needs_node=1 ;;
        rabbitmq) needs_rabbitmq=1 ;;
        ocaml-ripp) needs_ocaml=1 ;;
        swpt-stomp) needs_swpt=1 ;;
        activemq) needs_activemq=1 ;;
    esac
done

# One build at a time: two would stage into the same context directories.
mkdir -p "$ctx_root"
exec 9>"$ctx_root/.lock"
flock 9
scripts/docker-setup.sh
[ "$needs_python" -eq 0 ] || scripts/build-wheelhouse.sh
if [ "$needs_node" -eq 1 ]; then
    scripts/install-node-deps.sh >/dev/null
    node_bin="$(readlink -f "$(command -v node)")" || die "node is not on PATH"
fi
# The RabbitMQ image copies the host's installation, and needs pika's wheel
# (a runtime dependency, so in the wheelhouse); both are idempotent and
# quick when done (test.sh runs the same installs).
if [ "$needs_rabbitmq" -eq 1 ]; then
    scripts/install-rabbitmq.sh >/dev/null
    [ "$needs_python" -eq 1 ] || scripts/build-wheelhouse.sh
fi
if [ "$needs_ocaml" -eq 1 ]; then
    ocaml_ripp_bin="$(scripts/build-ocaml-ripp.sh | tail -n 1)" || die "scripts/build-ocaml-ripp.sh failed"
fi
# swpt_stomp's wheels (and the wheelhouse's cryptography for its launcher).
if [ "$needs_swpt" -eq 1 ]; then
    scripts/install-swpt-stomp.sh --wheelhouse "$repo/.cache/swpt-wheelhouse" >/dev/null
    [ "$needs_python" -eq 1 ] || scripts/build-wheelhouse.sh
fi
# The ActiveMQ image copies the host's installation (and its JRE).
if [ "$needs_activemq" -eq 1 ]; then
    scripts/install-activemq.sh >/dev/null
    activemq_jre="$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")"
    [ -r "$activemq_jre/lib/modules" ] || die "no Java runtime at $activemq_jre"
fi
tini_bin=/usr/bin/tini-static
[ -x "$tini_bin" ] || die "$tini_bin missing (Debian's docker.io ships it; run scripts/docker-setup.sh)"

# Copies (hard links where the filesystem allows: the staging dir is
# read-only input to docker build) SRC to DEST.
stage() {
    local src="$1" dest="$2"
    mkdir -p "$(dirname "$dest")"
    cp -al "$src" "$dest" 2>/dev/null || cp -a "$src" "$dest"
}

populate() {
    local name="$1" ctx="$2"
    cp docker/"$name"/* "$ctx"/
    case "$name" in
        python)
            mkdir -p "$ctx/wheels/deps" "$ctx/wheels/project"
            for whl in .cache/wheelhouse/*.whl; do
                case "$(basename "$whl")" in
                    conformance_harness-*) stage "$whl" "$ctx/wheels/project/$(basename "$whl")" ;;
                    *) stage "$whl" "$ctx/wheels/deps/$(basename "$whl")" ;;
                esac
            done
            cp "$tini_bin" "$ctx/tini" ;;
        node)
            cp "$node_bin" "$ctx/node"
            cp "$tini_bin" "$ctx/tini"
            mkdir -p "$ctx/interop/node" "$ctx/scripts"
            # The JS files and package manifests of interop/node, and its
            # node_modules; scripts/ssb-server.sh and ilp-plugin-btp.sh find
            # them as ../interop/node, as in the repository.
            find interop/node -maxdepth 1 -type f -exec cp {} "$ctx/interop/node/" \;
            stage interop/node/node_modules "$ctx/interop/node/node_modules"
            # The stacks with a lock of their own (interop/node/<stack>/:
            # ssb-db2, mini-accounts), likewise.
            for stack_dir in interop/node/*/; do
                [ -f "$stack_dir/package-lock.json" ] || continue
                stack="$(basename "$stack_dir")"
                mkdir -p "$ctx/interop/node/$stack"
                find "$stack_dir" -maxdepth 1 -type f -exec cp {} "$ctx/interop/node/$stack/" \;
                stage "$stack_dir/node_modules" "$ctx/interop/node/$stack/node_modules"
            done
            cp scripts/ssb-server.sh scripts/ilp-plugin-btp.sh scripts/ssb-db2.sh scripts/ilp-plugin-mini-accounts.sh \
                "$ctx/scripts/"
            cp -r scripts/lib "$ctx/scripts/" ;;
        rabbitmq)
            # Debian's layout, as dpkg installed it (erlang-* and
            # rabbitmq-server): everything lives under these two trees (their
            # symlinks stay inside them) but the entry points in /usr/bin,
            # symlinks into /usr/lib/erlang the Dockerfile makes.
            cp -a /usr/lib/erlang "$ctx/erlang"
            cp -a /usr/lib/rabbitmq "$ctx/rabbitmq"
            mkdir -p "$ctx/wheels"
            for whl in .cache/wheelhouse/pika-*.whl; do stage "$whl" "$ctx/wheels/$(basename "$whl")"; done
            [ -n "$(ls "$ctx/wheels")" ] || die "no pika wheel in .cache/wheelhouse (scripts/build-wheelhouse.sh)"
            mkdir -p "$ctx/conformance/scripts" "$ctx/conformance/interop/stomp"
            cp scripts/rabbitmq.sh "$ctx/conformance/scripts/"
            cp -r scripts/lib "$ctx/conformance/scripts/"
            cp interop/stomp/amqp_accepted.py "$ctx/conformance/interop/stomp/"
            cp "$tini_bin" "$ctx/tini" ;;
        swpt-stomp)
            mkdir -p "$ctx/swpt-wheels" "$ctx/tools-wheels"
            for whl in .cache/swpt-wheelhouse/*.whl; do stage "$whl" "$ctx/swpt-wheels/$(basename "$whl")"; done
            for whl in .cache/wheelhouse/cryptography-*.whl .cache/wheelhouse/cffi-*.whl \
                       .cache/wheelhouse/pycparser-*.whl; do
                stage "$whl" "$ctx/tools-wheels/$(basename "$whl")"
            done
            [ -n "$(ls "$ctx/tools-wheels"/cryptography-*.whl 2>/dev/null)" ] \
                || die "no cryptography wheel in .cache/wheelhouse (scripts/build-wheelhouse.sh)"
            # The launcher and what it imports, in the repository's layout.
            mkdir -p "$ctx/conformance/scripts" "$ctx/conformance/interop/stomp/swpt" "$ctx/conformance/conformance/core"
            cp scripts/rabbitmq.sh "$ctx/conformance/scripts/"
            cp -r scripts/lib "$ctx/conformance/scripts/"
            cp interop/stomp/swpt_node.py interop/stomp/amqp_accepted.py "$ctx/conformance/interop/stomp/"
            cp interop/stomp/swpt/constraints.txt "$ctx/conformance/interop/stomp/swpt/"
            cp conformance/__init__.py "$ctx/conformance/conformance/"
            cp conformance/core/__init__.py conformance/core/pki.py "$ctx/conformance/conformance/core/" ;;
        activemq)
            # Debian's layout, as dpkg installed it: the JRE (not the JDK's
            # jmods, headers, man pages), its /etc/java-17-openjdk (jvm.cfg,
            # java.security: the JRE links there), the broker and its jars.
            mkdir -p "$ctx/jvm/bin"
            cp -a "$activemq_jre/lib" "$activemq_jre/conf" "$activemq_jre/release" "$ctx/jvm/"
            cp -a "$activemq_jre/bin/java" "$activemq_jre/bin/keytool" "$ctx/jvm/bin/"
            cp -a /etc/java-17-openjdk "$ctx/etc-java"
            cp -a /usr/share/activemq "$ctx/activemq"
            cp -a /usr/share/java "$ctx/java"
            # The script, the adapter and the frame codec it imports, in the
            # repository's layout.
            mkdir -p "$ctx/conformance/scripts" "$ctx/conformance/interop/stomp" "$ctx/conformance/reference_impl/stomp"
            cp scripts/activemq.sh "$ctx/conformance/scripts/"
            cp -r scripts/lib "$ctx/conformance/scripts/"
            cp interop/stomp/activemq_accepted.py "$ctx/conformance/interop/stomp/"
            cp reference_impl/__init__.py "$ctx/conformance/reference_impl/"
            cp reference_impl/stomp/__init__.py reference_impl/stomp/frame.py "$ctx/conformance/reference_impl/stomp/"
            # Links dangling on the host too (recommended packages not
            # installed: optional jars, src.zip, the GTK accessibility bridge).
            find "$ctx" -xtype l -delete
            cp "$tini_bin" "$ctx/tini" ;;
        ocaml-ripp)
            cp "$ocaml_ripp_bin" "$ctx/ripp_peer"
            chmod 0755 "$ctx/ripp_peer"
            cp "$tini_bin" "$ctx/tini" ;;
    esac
}

context_hash() {
    local ctx="$1" parent_id="$2"
    {
        echo "parent=$parent_id"
        (cd "$ctx" && find . \( -type f -o -type l \) -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
        # Modes matter too (an entrypoint that lost its x bit).
        (cd "$ctx" && find . -type f -perm -u+x | LC_ALL=C sort)
    } | sha256sum | cut -d' ' -f1
}

for name in "${order[@]}"; do
    tag="conformance/$name:dev"
    parent="$(parent_of "$name")"
    parent_ref="${parent:+conformance/$parent:dev}"
    parent_ref="${parent_ref:-conformance/base:bookworm}"
    parent_id="$(docker image inspect -f '{{.Id}}' "$parent_ref" 2>/dev/null)" || die "parent image $parent_ref missing"
    ctx="$ctx_root/$name"
    rm -rf "$ctx"
    mkdir -p "$ctx"
    populate "$name" "$ctx"
    want="$(context_hash "$ctx" "$parent_id")"
    have="$(docker image inspect -f "{{index .Config.Labels \"$label\"}}" "$tag" 2>/dev/null || true)"
    if [ "$force" -eq 0 ] && [ "$have" = "$want" ]; then
        say "$tag unchanged ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}'))"
        continue
    fi
    t0=$SECONDS
    log="$ctx_root/$name.build.log"
    # DOCKER_BUILDKIT=0: the classic builder of Debian's engine 20.10. The
    # BuildKit path of a newer client needs the buildx plugin, which
    # Debian's docker.io does not ship; the classic builder needs nothing.
    if ! DOCKER_BUILDKIT=0 docker build --label "$label=$want" -t "$tag" "$ctx" >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        die "building $tag failed (log: $log)"
    fi
    say "$tag built in $((SECONDS - t0))s ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}'))"
done
# Dangling layers of replaced images: nothing refers to them any more.
docker image prune -f --filter "label=$label" >/dev/null 2>&1 || true

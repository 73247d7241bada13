# Sourced by the install scripts (scripts/install-*.sh): the Debian packages
# a script needs, installed when missing, the same way everywhere.
#
#   missing_debian_packages PKG...        prints those not installed, one a line
#   install_debian_packages WHO PKG...    apt-get installs them (as root, or with
#                                         sudo), then checks each one is installed;
#                                         on failure prints "WHO: ERROR: ..." and exits 1

missing_debian_packages() {
    local p
    for p in "$@"; do
        if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
            echo "$p"
        fi
    done
}

install_debian_packages() {
    local who="$1"
    shift
    local fail=(_debian_packages_die "$who")
    command -v apt-get >/dev/null 2>&1 || "${fail[@]}" "apt-get not found: install $* by hand"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || "${fail[@]}" "run as root (apt-get install $*)"
        sudo=(sudo)
    fi
    echo "$who: installing $*"
    # A fresh machine has no package lists: without an update the install
    # finds nothing.
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "$@" \
        >/dev/null || "${fail[@]}" "apt-get install $* failed"
    local p
    for p in "$@"; do
        [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] \
            || "${fail[@]}" "$p is still not installed"
    done
}

_debian_packages_die() {
    echo "$1: ERROR: $2" >&2
    exit 1
}

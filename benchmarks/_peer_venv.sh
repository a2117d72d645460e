# Shared by the peer_*_env.sh scripts: build one peer virtual environment, once.
#
#   source "$(dirname "$0")/_peer_venv.sh"
#   peer_venv "${1:-${SOME_VAR:-$(peer_venv_default NAME)}}" STAMP_NAME 'import check' PACKAGE...
#
# The environments live in the checkout, under benchmarks/.peer-venvs/NAME (ignored by
# git), so a machine needs nothing outside the repository. PEER_VENVS_DIR moves the whole
# folder; each script's own variable (PEER_VENV, PEER_ZMQ_VENV, ...) or its first argument
# moves one environment. With PEER_VENV_PRINT_ONLY=1 a script only prints the python path
# it would use, and builds nothing.
#
# Idempotent and safe to run concurrently: an flock serialises installers, and a stamp
# file (VENV_DIR/STAMP_NAME) records a finished install; the venv's `pip freeze` is kept
# beside it. tether never imports anything from these environments; benchmarks only run
# their python as a subprocess. Prints the venv's python path.

PEER_VENV_BENCHMARKS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

peer_venv_default() {  # NAME -> the default folder of that peer environment
    echo "${PEER_VENVS_DIR:-$PEER_VENV_BENCHMARKS/.peer-venvs}/$1"
}

peer_venv() {
    local venv="$1" stamp_name="$2" check="$3"
    shift 3
    if [[ "${PEER_VENV_PRINT_ONLY:-0}" == 1 ]]; then
        echo "$venv/bin/python"
        return 0
    fi
    local stamp="$venv/$stamp_name"
    local lock="${venv%/}.lock"
    if [[ ! -f "$stamp" ]]; then
        mkdir -p "$(dirname "$venv")"
        exec 9>"$lock"
        flock -w 900 9 || { echo "peer_venv: timed out waiting for $lock" >&2; return 1; }
        if [[ ! -f "$stamp" ]]; then
            [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv" >&2
            "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
                --upgrade pip >&2 || true
            "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" >&2
            "$venv/bin/python" -c "$check" >&2
            "$venv/bin/python" -m pip freeze > "$venv/${stamp_name%-installed}-freeze.txt"
            touch "$stamp"
        fi
        exec 9>&-
    fi
    echo "$venv/bin/python"
}

# shellcheck shell=bash
# The CANN environment of the Ascend image, sourced by entrypoint.sh (every container start) and by
# Dockerfile.ascend's apex stage. Sources, in the order the vendor's own CANN image entrypoint does
# (github.com/Ascend/cann-container-image, cann/9.1.0-910-ubuntu22.04-py3.11/Dockerfile, ENTRYPOINT),
# every one of these that exists, and names on stderr each one that is missing:
#   1. ${ASCEND_ROOT}/ascend-toolkit/set_env.sh
#   2. ${ASCEND_TOOLKIT_HOME}/share/info/ascendnpu-ir/bin/set_env.sh   (ASCEND_TOOLKIT_HOME is set by
#      the base image and by 1; else ${ASCEND_ROOT}/cann-${CANN_VERSION}, the vendor's /usr/local/Ascend/cann-9.1.0)
#   3. ${ASCEND_ROOT}/nnal/atb/set_env.sh --cxx_abi=${ATB_CXX_ABI:-1}
#      (torch 2.12's Linux wheels use the C++11 ABI: the vendor's default 1)
# No `set -u` here: the vendor's scripts read variables that may be unset.
ASCEND_ROOT="${ASCEND_ROOT:-/usr/local/Ascend}"
CANN_VERSION="${CANN_VERSION:-9.1.0}"

cann_source() {  # cann_source FILE [ARGS...]: source FILE with ARGS (never the caller's) if it exists
  local file="$1"
  shift
  if [ -f "$file" ]; then
    # shellcheck disable=SC1090
    source "$file" "$@"
  else
    echo "cann_env: $file not found; skipped" >&2
  fi
}

cann_source "$ASCEND_ROOT/ascend-toolkit/set_env.sh"
cann_source "${ASCEND_TOOLKIT_HOME:-$ASCEND_ROOT/cann-$CANN_VERSION}/share/info/ascendnpu-ir/bin/set_env.sh"
cann_source "$ASCEND_ROOT/nnal/atb/set_env.sh" "--cxx_abi=${ATB_CXX_ABI:-1}"

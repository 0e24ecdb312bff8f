#!/bin/bash
# Entrypoint of the Ascend image (Dockerfile.ascend): the CANN environment (cann_env.sh: the vendor's
# three set_env.sh scripts, in the vendor's order, each where it exists), then python -m harness ARGS.
# shellcheck source=docker/ascend/cann_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/cann_env.sh"
[ $# -gt 0 ] || set -- --help
exec "${HARNESS_PYTHON:-python}" -m harness "$@"

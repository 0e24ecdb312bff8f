#!/usr/bin/env bash
# CI's newcomer check: README's path walked whole from a fresh clone, natively (tools/walk.sh cpu: --check ready to
# build, --build makes .venv from the lock and stops, --check runs the training steps, ./reproduce.sh cpu on a slice
# with a scaling cell of each framework ends with every cell ok and the report rendered, then every dataset's loader
# under that .venv's Python), with a PATH that holds no virtual environment (tox puts its own on PATH, which once hid
# a launcher found by name). Real Cora from ../shared/data (or $HARNESS_DATA_DIR), synthetic CIFAR-10, one repeat a
# cell. Then the cuda and ascend walks on this host without the device: --check, the build's command, the run, each
# ending in the one line that says there is no GPU or NPU. Each step's exit code, time and disk are printed.
#
#   tools/check_main.sh        (tox -e main; about 5 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"

data="${HARNESS_DATA_DIR:-$repo/../shared/data}"
if [ ! -f "$data/cora_planetoid/ind.cora.x" ]; then
  if [ "${CI:-}" = true ]; then echo "check_main.sh: no Cora under $data (set HARNESS_DATA_DIR)" >&2; exit 1; fi
  echo "check_main.sh: skipped: no Cora under $data (set HARNESS_DATA_DIR to a folder holding cora_planetoid/)" >&2
  exit 0
fi
mkdir -p .tox/logs
tools/walk.sh cpu --data-dir "$data" --transcript .tox/logs/walk-cpu.md
for platform in cuda ascend; do
  tools/walk.sh "$platform" --transcript ".tox/logs/walk-$platform.md"
done
echo "check_main.sh: ok: the native walk and the cuda and ascend walks up to the device (transcripts in .tox/logs/)" >&2

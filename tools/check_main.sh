#!/usr/bin/env bash
# CI's newcomer check: README's path walked whole from a fresh clone on pristine hosts made from Debian's packages
# (tools/pristine.sh: Debian 12 as root and as a user without sudo, Debian 13 without Python 3.11), each in a chroot
# with a clean environment: --check ready to build, --build makes .venv from the lock and stops, --check runs the
# training steps, ./reproduce.sh cpu on a synthetic slice with a scaling cell of each framework ends with every cell
# ok and the report rendered; on Debian 13, the check and the build each refuse in one line naming --container and
# PYTHON=. Then the cuda and ascend walks on this host without the device: --check, the build's command, the run,
# each ending in the one line that says there is no GPU or NPU. Each step's exit code, time, disk and printed line
# are in the transcripts (.tox/logs/pristine-*.md, walk-cuda.md, walk-ascend.md).
#
# Nothing outside the checkout is read (no data folder: the slice is synthetic). A walk that cannot run here (not
# root, no debootstrap, no network to Debian or PyPI) fails: this check is never skipped.
#
#   tools/check_main.sh        (tox -e main; the time is in tox.ini's description)
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .tox/logs
failed=()
tools/pristine.sh || failed+=(pristine)
for platform in cuda ascend; do
  tools/walk.sh "$platform" --transcript ".tox/logs/walk-$platform.md" || failed+=("$platform")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "check_main.sh: FAILED: ${failed[*]} (transcripts in .tox/logs/)" >&2
  exit 1
fi
echo "check_main.sh: ok: the pristine hosts' walks and the cuda and ascend walks up to the device (transcripts in" \
  ".tox/logs/)" >&2

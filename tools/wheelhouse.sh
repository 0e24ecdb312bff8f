#!/usr/bin/env bash
# Download the wheels of a hash-locked requirements/PLATFORM.txt into wheelhouse/PLATFORM/, for an
# image build that needs no index (Dockerfile.PLATFORM installs from that folder with --no-index).
#
#   tools/wheelhouse.sh cpu|cuda|ascend [--arch x86_64|aarch64]... [--python PYTHON]
#
# Every file is checked against the lock's sha256 (pip --require-hashes). Without --arch the host's
# architecture is fetched; naming another (e.g. aarch64 wheels for a Kunpeng Ascend host, on an
# x86_64 machine) fetches that one's manylinux wheels for CPython 3.11. A stamp file records which
# lock the folder was made from, so a second call with an unchanged lock does nothing.
set -Eeuo pipefail
# Exit 2: a refusal, in one line; anything else that fails: one line and exit 3 (tools/unexpected.sh).
. "$(dirname "${BASH_SOURCE[0]}")/unexpected.sh"
trap 'unexpected $? $LINENO "$BASH_COMMAND" wheelhouse.sh "the command line and the output above"' ERR

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
die() { echo "wheelhouse.sh: $*" >&2; exit 2; }

platform="${1:-}"
case "$platform" in
  cpu|cuda|ascend) shift ;;
  *) die "usage: tools/wheelhouse.sh cpu|cuda|ascend [--arch x86_64|aarch64]... [--python PYTHON]" ;;
esac
arches=()
py="${PYTHON:-python3}"
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) [ $# -ge 2 ] || die "--arch needs x86_64 or aarch64"; arches+=("$2"); shift ;;
    --python) [ $# -ge 2 ] || die "--python needs an interpreter"; py="$2"; shift ;;
    *) die "unknown option '$1'" ;;
  esac
  shift
done
[ ${#arches[@]} -gt 0 ] || arches=("$(uname -m)")

lock="$root/requirements/$platform.txt"
[ -f "$lock" ] || die "no lock file $lock; make it with: python3 tools/lock_requirements.py"
# cuda: MindSpore's CUDA 11 libraries have their own lock (installed outside the venv); same wheelhouse.
files=("$lock")
[ "$platform" != cuda ] || files+=("$root/requirements/cuda11-libs.txt")
locks=()
for f in "${files[@]}"; do
  [ -r "$f" ] || die "cannot read the lock file $f; make it with: python3 tools/lock_requirements.py"
  locks+=(-r "$f")
done
out="$root/wheelhouse/$platform"
want="$(cat "${files[@]}" | sha256sum | cut -d' ' -f1) ${arches[*]}"
if [ "$(cat "$out/.lock.sha256" 2>/dev/null)" = "$want" ]; then
  echo "wheelhouse.sh: $out is up to date with $lock (${arches[*]})" >&2
  exit 0
fi
mkdir -p "$out" 2>/dev/null || die "cannot make $out; fix its permissions (or those of wheelhouse/)"
rm -f "$out/.lock.sha256"

for arch in "${arches[@]}"; do
  case "$arch" in x86_64|aarch64) ;; *) die "unknown architecture '$arch'; choose x86_64 or aarch64" ;; esac
  target=()
  if [ "$arch" != "$(uname -m)" ]; then
    for tag in manylinux1 manylinux2010 manylinux2014 manylinux_2_17 manylinux_2_24 manylinux_2_27 manylinux_2_28; do
      target+=(--platform "${tag}_$arch")
    done
    target+=(--python-version 3.11 --implementation cp --abi cp311 --abi abi3 --abi none)
  fi
  echo "wheelhouse.sh: fetching $platform wheels for $arch into $out" >&2
  # --no-cache-dir: the wheelhouse is the cache; pip's own would hold a second copy (5.3 GB for cuda).
  # One retry per index: a lock may name an index (e.g. the PyTorch one) this host cannot reach.
  log="$out/.pip-download-$arch.log"
  if ! PIP_RETRIES="${PIP_RETRIES:-1}" "$py" -m pip download --disable-pip-version-check --no-cache-dir --require-hashes \
      --no-deps --only-binary=:all: "${target[@]}" "${locks[@]}" -d "$out" > "$log" 2>&1; then
    # pip's last lines without its index warnings (a log of nothing else leaves none: grep's exit 1 is no failure)
    { grep -v "^WARNING: \(Location\|Retrying\)" "$log" || true; } | tail -15 >&2
    die "pip could not fetch every wheel of $lock for $arch (log: $log); on an air-gapped host copy a wheelhouse made elsewhere"
  fi
done
echo "$want" > "$out/.lock.sha256"
# The closing figures are for the reader: a du that cannot read every file says "?" rather than failing the fetch.
wheels=("$out"/*.whl)
[ -e "${wheels[0]}" ] || wheels=()
size="$({ du -sh "$out" 2>/dev/null || true; } | cut -f1)"
echo "wheelhouse.sh: ${#wheels[@]} wheels, ${size:-?} in $out" >&2

#!/usr/bin/env bash
# Source trees of Ascend's apex for Dockerfile.ascend's `apex` stage (see third_party/apex/README.md).
#
#   tools/apex_sources.sh fetch [--nvidia-url URL] [--ascend-url URL]   make third_party/apex/{nvidia-apex,ascend-apex}
#   tools/apex_sources.sh digest DIR                                    print DIR's content digest
#   tools/apex_sources.sh check                                         fetched trees against the pinned digests
#
# fetch clones each repository, takes the pinned commit with `git archive` (no .git, export-ignore
# honoured) and checks its content digest against the pin. The digest is sha256 over the sorted
# `sha256  ./path` lines of every regular file (LC_ALL=C order), so any copy of the same tree (a clone,
# a tarball, a mirror) gives the same value; the build recomputes it before it builds.
set -Eeuo pipefail
# Exit 2: a refusal, in one line; anything else that fails: one line and exit 3 (tools/unexpected.sh).
. "$(dirname "${BASH_SOURCE[0]}")/unexpected.sh"
trap 'unexpected $? $LINENO "$BASH_COMMAND" apex_sources.sh "the command line and the output above"' ERR

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
die() { echo "apex_sources.sh: $*" >&2; exit 2; }

# Pins (keep in step with the ARGs of Dockerfile.ascend). Ascend's apex as published on GitHub
# (Ascend/apex, "2.0.2.tr5" README update, 2022-07-09) and the NVIDIA apex commit its README names.
NVIDIA_APEX_URL="https://github.com/NVIDIA/apex.git"
NVIDIA_APEX_COMMIT=4ef930c1c884fdca5f472ab2ce7cb9b505d26c1a
NVIDIA_APEX_TREE_SHA256=0c74fd12c4fe8be7c03fbddba7e8031ad08b5bda1c3f8d2de06c0e1bf53a139f
ASCEND_APEX_URL="https://github.com/Ascend/apex.git"
ASCEND_APEX_COMMIT=8b8bd43f01d7c3b8497dd39eecdbc0cc7127660f
ASCEND_APEX_TREE_SHA256=5f9f29de77a781fdd117f9ceddfbaa758ada4ca0a70bcf854aa32fab58fdf1d8

digest() {
  [ -d "$1" ] || die "$1 is not a folder"
  (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum | sha256sum | cut -d' ' -f1)
}

fetch_one() {  # fetch_one URL COMMIT DIGEST DEST
  local url="$1" commit="$2" want="$3" dest="$4" tmp got
  tmp="$(mktemp -d)" || die "mktemp -d failed (its message is above); set TMPDIR to a writable folder"
  git clone --quiet --no-checkout "$url" "$tmp/repo" || die "cannot clone $url (git's message is above); check the network, or pass a mirror with --nvidia-url/--ascend-url"
  rm -rf "$dest"
  mkdir -p "$dest" || die "cannot make $dest; fix the permissions of third_party/apex"
  git -C "$tmp/repo" archive --format=tar "$commit" | tar -x -C "$dest" || die "$url has no commit $commit"
  rm -rf "$tmp"
  got="$(digest "$dest")"
  [ "$got" = "$want" ] || die "$dest: content digest $got, pinned $want (another tree than the pinned commit)"
  echo "apex_sources.sh: $dest = $commit (digest $got)" >&2
}

case "${1:-}" in
  fetch)
    shift
    while [ $# -gt 0 ]; do
      case "$1" in
        --nvidia-url) [ $# -ge 2 ] || die "--nvidia-url needs a URL"; NVIDIA_APEX_URL="$2"; shift ;;
        --ascend-url) [ $# -ge 2 ] || die "--ascend-url needs a URL"; ASCEND_APEX_URL="$2"; shift ;;
        *) die "unknown option '$1'" ;;
      esac
      shift
    done
    fetch_one "$NVIDIA_APEX_URL" "$NVIDIA_APEX_COMMIT" "$NVIDIA_APEX_TREE_SHA256" "$root/third_party/apex/nvidia-apex"
    fetch_one "$ASCEND_APEX_URL" "$ASCEND_APEX_COMMIT" "$ASCEND_APEX_TREE_SHA256" "$root/third_party/apex/ascend-apex" ;;
  digest)
    [ $# -eq 2 ] || die "usage: tools/apex_sources.sh digest DIR"
    digest "$2" ;;
  check)
    for pair in "nvidia-apex:$NVIDIA_APEX_TREE_SHA256" "ascend-apex:$ASCEND_APEX_TREE_SHA256"; do
      dir="$root/third_party/apex/${pair%%:*}"
      # here, not in digest's subshell: its die would be a line before this one's
      [ -d "$dir" ] || die "$dir is missing; make it with: tools/apex_sources.sh fetch"
      got="$(digest "$dir")"
      [ "$got" = "${pair#*:}" ] || die "$dir does not match its pinned digest ${pair#*:} (it has $got); make it again with: tools/apex_sources.sh fetch"
    done
    echo "apex_sources.sh: both trees match their pins" >&2 ;;
  *) die "usage: tools/apex_sources.sh fetch|digest DIR|check" ;;
esac

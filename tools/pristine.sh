#!/usr/bin/env bash
# README's path walked on pristine hosts: minimal Debian root filesystems made here from Debian's own packages
# (debootstrap --variant=minbase), each walked by tools/walk.sh chrooted into it, with `env -i` (a clean HOME, the
# stock PATH, LANG=C.UTF-8: no pip cache, no CI variables, nothing of this machine's Python):
#
#   bookworm-root   Debian 12 with git, ca-certificates and python3.11 only (no python3.11-venv, no libgomp1, no
#                   allocator libraries), as root: --check says ready to build, --build installs what it needs or says in one
#                   line what it could not, --check again says ready, the run ends with the report's path
#   bookworm-user   the same host, python3.11-venv and libgomp1 (MindSpore's OpenMP runtime) installed beforehand by
#                   root (the host's admin, as README asks), walked by a user without sudo: the check says what differs
#                   (the allocator row) and the run goes on
#   trixie-root     Debian 13, whose python3 is 3.13 (a host without Python 3.11), as root: --check and --build
#                   each end with the one line that names --container and PYTHON=
#
# Each step's exit code, wall time, disk and the line it printed are asserted and written as a Markdown transcript
# to .tox/logs/pristine-HOST.md (and printed). The run is a slice on synthetic data: nothing is read from outside
# the checkout. Everything comes from PyPI and Debian as on a reviewer's host, except two stand-ins for what this
# machine cannot reach that way, named in each transcript: a local folder holding the torch wheel, where PyTorch's
# CPU index does not answer (pip's find-links here names it), and pip's certificate bundle, where pip is configured
# with one (a network that re-signs TLS).
#
#   tools/pristine.sh [HOST...]      as root; needs debootstrap and unshare (tools/install_system_packages.sh)
#
# The finished root filesystems are kept as tarballs under .cache/pristine/ (git-ignored): a second run skips
# debootstrap. Remove them for a run from nothing, as CI's fresh checkout has. DEBIAN_MIRROR overrides Debian's.
set -Eeuo pipefail
on_err='echo "pristine.sh: FAILED: stopped at line $LINENO: $BASH_COMMAND" >&2'
trap "$on_err" ERR
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo="$PWD"
fail() { echo "pristine.sh: FAILED: $*" >&2; exit 1; }

hosts=("$@")
[ ${#hosts[@]} -gt 0 ] || hosts=(trixie-root bookworm-root bookworm-user)
for h in "${hosts[@]}"; do
  case "$h" in bookworm-root|bookworm-user|trixie-root) ;; *) fail "unknown host '$h' (bookworm-root, bookworm-user, trixie-root)" ;; esac
done
# A walk that cannot run is a failure, never a skip: say what is missing in one line.
[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, and chroot into the hosts' root filesystems); run it as root, as CI does"
for tool in debootstrap unshare chroot; do
  command -v "$tool" > /dev/null || fail "no $tool on PATH (tools/install_system_packages.sh installs debootstrap as root)"
done

mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
cache="$repo/.cache/pristine"
logs="$repo/.tox/logs"
mkdir -p "$cache" "$logs"
scratch="$(mktemp -d "${TMPDIR:-/var/tmp}/pristine.XXXXXX")"
# --one-file-system: should a mount inside a root filesystem outlive its walk, rm stops at it.
trap 'rm -rf --one-file-system "$scratch"' EXIT

# The suites' root filesystems: debootstrap once (both suites at once: mostly waiting on the mirror), then the cache.
declare -A include=([bookworm]=git,ca-certificates,python3.11 [trixie]=git,ca-certificates,python3)
tarball() { echo "$cache/$1-minbase-${include[$1]//,/+}.tar"; }
debootstrap_to_cache() {  # debootstrap_to_cache SUITE: its tarball made; its time in $scratch/SUITE.took
  local suite="$1" t0; t0=$(date +%s)
  debootstrap --variant=minbase --include="${include[$suite]}" "$suite" "$scratch/$suite.new" "$mirror" \
    > "$scratch/debootstrap-$suite.log" 2>&1 \
    || { tail -n 20 "$scratch/debootstrap-$suite.log" >&2; echo "pristine.sh: debootstrap of $suite failed (above)" >&2; return 1; }
  tar --numeric-owner -C "$scratch/$suite.new" -cf "$(tarball "$suite").part" . && mv "$(tarball "$suite").part" "$(tarball "$suite")"
  rm -rf --one-file-system "$scratch/$suite.new"
  echo $(($(date +%s) - t0)) > "$scratch/$suite.took"
}
# rootfs SUITE DIR: a fresh copy of SUITE's root filesystem in DIR; host_note says what it is
rootfs() {
  local suite="$1" dir="$2" made="from the cache (delete .cache/pristine/ for a fresh debootstrap)"
  [ ! -f "$scratch/$suite.took" ] || made="made by debootstrap in $(cat "$scratch/$suite.took") s"
  mkdir "$dir"
  tar --numeric-owner -xpf "$(tarball "$suite")" -C "$dir"
  cp /etc/resolv.conf "$dir/etc/resolv.conf"   # the host's resolver, as a reviewer's machine has its own
  host_note="Debian $suite minbase with ${include[$suite]} (debootstrap from $mirror), $made; its Pythons: "
  host_note+="$(chroot "$dir" /bin/sh -c 'for p in python3 python3.11; do
    command -v $p > /dev/null && printf "%s %s; " $p "$($p -c "import sys; print(sys.version.split()[0])")" || printf "no %s; " $p
  done')"
  host_note="${host_note%; }"
}
suites=()
for h in "${hosts[@]}"; do s="${h%%-*}"; [[ " ${suites[*]} " == *" $s "* ]] || suites+=("$s"); done
pids=()
for s in "${suites[@]}"; do
  [ ! -s "$(tarball "$s")" ] || continue
  echo "pristine.sh: debootstrap --variant=minbase --include=${include[$s]} $s ($mirror)" >&2
  debootstrap_to_cache "$s" & pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || fail "a root filesystem could not be made (above)"; done

# The stand-ins. PyTorch's CPU index (the lock's --extra-index-url) is asked first; where it does not answer, the
# torch wheel the lock pins comes from pip's find-links folder on this machine, copied into the host.
pip_setting() {  # pip_setting KEY: this machine's pip setting (its environment, then its config files)
  local key="$1" var="PIP_$(echo "$1" | tr 'a-z-' 'A-Z_')"
  { [ -z "${!var:-}" ] || echo "${!var}"
    python3 -m pip config list 2> /dev/null | sed -n "s/^[^=]*\.$key='\(.*\)'$/\1/p" || true; } | tr ' ' '\n' | sed 's|^file://||'
}
torch_ver="$(sed -n 's/^torch==\([^ ]*\) .*/\1/p' requirements/cpu.txt | head -1)"
[ -n "$torch_ver" ] || fail "requirements/cpu.txt pins no torch"
torch_wheel=""
if ! python3 -c 'import urllib.request; urllib.request.urlopen("https://download.pytorch.org/whl/cpu/torch/", timeout=15)' \
     2> /dev/null; then
  for d in $(pip_setting find-links); do
    for w in "$d"/torch-"$torch_ver"+cpu-cp311-cp311-*linux*_x86_64.whl; do [ -f "$w" ] && torch_wheel="$w"; done
  done
  [ -n "$torch_wheel" ] || fail "PyTorch's CPU index does not answer here and no folder of pip's find-links holds" \
    "torch-$torch_ver+cpu for CPython 3.11 (set PIP_FIND_LINKS to one)"
fi
cert="$(pip_setting cert | head -1)"
[ -z "$cert" ] || [ -f "$cert" ] || fail "pip's cert setting names $cert, which is not a file"

# walk HOST: the host's root filesystem, then tools/walk.sh in it; its transcript in .tox/logs/pristine-HOST.md
walk() {
  local host="$1" dir="$scratch/$1" args=() stand=()
  case "$host" in
    trixie-root) rootfs trixie "$dir"; args=(--without-python311) ;;
    bookworm-root)  # as root, --build installs what this host lacks, each said in its own line
      rootfs bookworm "$dir"
      args=(--build-says "apt-get install python3.11-venv" --build-says "apt-get install libgomp1"
            --build-says "apt-get install libtcmalloc-minimal4 libjemalloc2") ;;
    bookworm-user)  # the second walk of bookworm: the GCN cells alone (the root walk ran the scaling cells)
      rootfs bookworm "$dir"
      chroot "$dir" useradd --create-home --shell /bin/bash reviewer
      args=(--as reviewer --gcn-only --admin "apt-get update -q && apt-get install -y -q --no-install-recommends python3.11-venv libgomp1") ;;
  esac
  if [ -n "$torch_wheel" ]; then
    mkdir -p "$dir/opt/stand-in/wheels"
    cp "$torch_wheel" "$dir/opt/stand-in/wheels/"
    stand+=(--stand-in PIP_FIND_LINKS=/opt/stand-in/wheels
            --note "PIP_FIND_LINKS stands for PyTorch's CPU index, which does not answer here: a folder holding ${torch_wheel##*/}")
  fi
  if [ -n "$cert" ]; then
    mkdir -p "$dir/opt/stand-in"
    cp "$cert" "$dir/opt/stand-in/ca-certificates.crt"
    stand+=(--stand-in PIP_CERT=/opt/stand-in/ca-certificates.crt
            --note "PIP_CERT: this machine's certificate bundle, which its pip is set to use (a network that re-signs TLS; a reviewer's pip needs none)")
  fi
  echo "pristine.sh: $host: $host_note" >&2
  tools/walk.sh cpu --root "$dir" "${args[@]}" --note "host $host: $host_note" "${stand[@]}" \
    --transcript "$logs/pristine-$host.md" || return 1   # walk.sh said why
}

failed=()
summary=()
for host in "${hosts[@]}"; do
  t0=$(date +%s)
  # The walk in a subshell of its own with -e in force (in an `if` or `||` condition bash would ignore -e there);
  # its failure is counted here, not reported again by this shell's trap.
  trap - ERR; set +e
  (set -e; trap "$on_err" ERR; walk "$host"); rc=$?
  set -e; trap "$on_err" ERR
  if [ "$rc" = 0 ]; then status=OK; else status=FAILED; failed+=("$host"); fi
  summary+=("$(printf '  %-14s %-6s %5d s' "$host" "$status" $(($(date +%s) - t0)))")
  # A failed walk's step outputs, whole, beside its transcript (the root filesystem goes; a walk that passed has
  # removed its folder).
  rm -rf "$logs/pristine-$host"; mkdir -p "$logs/pristine-$host"
  find "$scratch/$host" -maxdepth 4 -path '*/walk.*/*.log' -exec cp {} "$logs/pristine-$host/" \; 2> /dev/null || true
  rm -rf --one-file-system "${scratch:?}/$host"
done
echo "pristine.sh: each host (status, wall time including its root filesystem; transcripts in ${logs#"$repo"/}/):" >&2
printf '%s\n' "${summary[@]}" >&2
[ ${#failed[@]} -eq 0 ] || fail "${failed[*]}"
echo "pristine.sh: ok: ${hosts[*]}" >&2

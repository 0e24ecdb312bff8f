#!/usr/bin/env bash
# The fresh-host walk: a reviewer's path through README.md and ARTIFACT.md, step by step, from a clean clone with
# no .venv and no image: check, build, check again, run a slice, the report. Each step's exit code and the next step
# it prints are asserted; its wall time and the disk it took (what grew under the walk's folder and the engine's
# storage) are recorded in a transcript (a Markdown table, printed at the end and written to --transcript FILE).
#
#   tools/walk.sh cpu [--data-dir D] [--transcript F]                     natively (.venv)
#   tools/walk.sh cpu --container --base-rootfs TGZ [--wheelhouse W] | --load ARCHIVE
#                 [--as USER] [--engine docker|podman] [--storage DIR] [--data-dir D]
#                 [--unbuildable TEXT] [--gcn-only] [--transcript F]   DIR: the engine's storage, for the disk column;
#                                                                      TEXT: the check before the build must fail
#                                                                      with it (an engine that cannot build here)
#   tools/walk.sh cpu --root ROOTFS [--as USER] [--stand-in VAR=VALUE]... [--admin CMD] [--note TEXT]...
#                 [--build-says TEXT]...
#                 [--without-python311] [--gcn-only] [--transcript F] natively inside a root filesystem (a pristine
#                                                                      host: tools/pristine.sh); --gcn-only: the
#                                                                      GCN cells, no scaling cell, no dataset check
#   tools/walk.sh cuda|ascend [--transcript F]                            on a host without the device: up to the
#                                                                         line that says there is none
#
# --base-rootfs TGZ: the build step is the reviewer's ./reproduce.sh cpu --container --build, from Dockerfile.cpu,
#   with BASE_IMAGE naming TGZ (a Debian bookworm root file system) imported into the engine first: public base
#   images cannot be pulled on CI's host, and this is the one stand-in, named in the transcript. --wheelhouse W: a
#   wheelhouse/cpu that tools/wheelhouse.sh cpu filled before the walk (with its caller's pip configuration),
#   copied into the clone, from which the Dockerfile installs.
# --load ARCHIVE: the build step loads an image archive (an image built by that command under another engine, for
#   an engine that cannot build here) instead of building; the transcript says so.
# --as USER: every step runs as that user (a reviewer is not root) in a clone the user owns.
# The container walk runs on synthetic data (nothing outside the clone is read); the datasets' loaders are checked in
# the image on their format-faithful fixtures (tools/check_datasets.py).
# The container walk also runs --resume into the same run folder (every run kept) and a second run on that folder
# while the first is going (refused in one line), and checks that every result file belongs to the caller and
# that the data was mounted read-only.
# --root ROOTFS: every step runs chrooted into ROOTFS (its own /proc and a fresh /dev/shm; /dev and /sys bound), as
#   root or the --as user of ROOTFS's passwd, with `env -i`: a clean HOME, the stock PATH, LANG=C.UTF-8 and nothing
#   of this host's environment but the --stand-in variables, each named in the transcript as a stand-in (for what a
#   reviewer's host reaches and this one cannot). --admin CMD runs first, as root there (the host's admin installing
#   a package). --without-python311: the host has no Python 3.11, and --check and --build must each end with the one
#   line that names --container and PYTHON=.
# -E: the ERR trap also fires inside functions and $(...), where a failure would otherwise end the walk unexplained.
set -Eeuo pipefail
trap 'echo "walk.sh: FAILED: stopped at line $LINENO: $BASH_COMMAND" >&2' ERR

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
platform="${1:-}"
case "$platform" in cpu|cuda|ascend) shift ;; *) echo "walk.sh: first argument: cpu, cuda or ascend" >&2; exit 2 ;; esac
container=0; archive=""; user=""; engine=""; transcript=""; storage=""; unbuildable=""; every_model=1
base_rootfs=""; wheelhouse=""
root=""; stand_ins=(); admin=""; notes=(); without_py311=0; build_says=()
data="${HARNESS_DATA_DIR:-$repo/../shared/data}"
while [ $# -gt 0 ]; do
  case "$1" in
    --container) container=1 ;;
    --load) archive="$2"; shift ;;
    --as) user="$2"; shift ;;
    --engine) engine="$2"; shift ;;
    --data-dir) data="$2"; shift ;;
    --transcript) transcript="$2"; shift ;;
    --storage) storage="$2"; shift ;;
    --unbuildable) unbuildable="$2"; shift ;;
    --gcn-only) every_model=0 ;;
    --base-rootfs) base_rootfs="$2"; shift ;;
    --wheelhouse) wheelhouse="$2"; shift ;;
    --root) root="$2"; shift ;;
    --stand-in) stand_ins+=("$2"); shift ;;
    --admin) admin="$2"; shift ;;
    --note) notes+=("$2"); shift ;;
    --without-python311) without_py311=1 ;;
    --build-says) build_says+=("$2"); shift ;;
    *) echo "walk.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done
# The data folder, absolute (only the container walks read it; the native one runs on synthetic data and reads
# nothing outside the checkout).
[ "$platform" != cpu ] || [ "$container" = 0 ] || data="$(cd "$data" && pwd)" || { echo "walk.sh: no data folder $data (--data-dir)" >&2; exit 2; }

# A clean clone of this checkout (its working tree's changes included, as CI's clone has them committed), owned by
# the user who walks; nothing ignored by git comes with it (no .venv, no wheelhouse, no results).
# --root: the walker (root or --as USER) as ROOTFS's passwd names it; the walk's folder in the walker's home there.
root_spec=""; root_home=""; parent=""
if [ -n "$root" ]; then
  [ -x "$root/bin/sh" ] || { echo "walk.sh: FAILED: --root $root holds no root filesystem" >&2; exit 1; }
  root="$(cd "$root" && pwd)"
  pw="$(awk -F: -v u="${user:-root}" '$1 == u' "$root/etc/passwd")"
  [ -n "$pw" ] || { echo "walk.sh: FAILED: no user ${user:-root} in $root/etc/passwd" >&2; exit 1; }
  root_spec="$(cut -d: -f3,4 <<< "$pw")"; root_home="$(cut -d: -f6 <<< "$pw")"; parent="$root$root_home"
fi
t_clone=$(date +%s)
work="$(mktemp -d "${parent:-${TMPDIR:-/tmp}}/walk.XXXXXX")"
chmod 0755 "$work"
clone="$work/artifact"
git clone -q "$repo" "$clone"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | xargs -0 -r sh -c \
  'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh | tar --null -T - -cf -) | tar -xf - -C "$clone"
[ -z "$user" ] || [ -n "$root" ] || chown -R "$user" "$work"
[ -z "$root" ] || chown -R "$root_spec" "$work"
t_clone=$(($(date +%s) - t_clone))
# The walker's names for the clone and the walk's folder (inside ROOTFS under --root; else the same as here).
clone_in="${clone#"$root"}"; work_in="${work#"$root"}"
as() {  # as CMD...: run as the walking user, from the clone, with a login-like environment
  if [ -n "$root" ]; then
    # A private mount and pid namespace: the mounts go with the last process, and nothing outlives the step.
    # (as_spec and as_home, set for one call, make it root: --admin)
    local spec="${as_spec:-$root_spec}" inner
    inner=(/usr/bin/env -i HOME="${as_home:-$root_home}" PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
           LANG=C.UTF-8 "${stand_ins[@]}" /bin/sh -c 'cd "$0" && exec "$@"' "$clone_in" "$@")
    unshare --mount --pid --fork --mount-proc="$root/proc" /bin/bash -c '
      r="$1" spec="$2"; shift 2
      mount --rbind /dev "$r/dev" && mount -t tmpfs -o mode=1777 tmpfs "$r/dev/shm" && mount --rbind /sys "$r/sys" \
        || { echo "walk.sh: could not mount /dev, /dev/shm or /sys in $r" >&2; exit 125; }
      exec chroot --userspec="$spec" --groups="${spec#*:}" "$r" "$@"' bash "$root" "$spec" "${inner[@]}"
  elif [ -n "$user" ]; then
    runuser -u "$user" -- env -i HOME="$(getent passwd "$user" | cut -d: -f6)" PATH=/usr/local/bin:/usr/bin:/bin \
      LANG=C.UTF-8 ${CONTAINER_ENGINE:+CONTAINER_ENGINE=$CONTAINER_ENGINE} ${DOCKER_HOST:+DOCKER_HOST=$DOCKER_HOST} \
      ${CONTAINERS_CONF:+CONTAINERS_CONF=$CONTAINERS_CONF} ${HARNESS_DEV_DIR:+HARNESS_DEV_DIR=$HARNESS_DEV_DIR} \
      bash -c 'cd "$0" && exec "$@"' "$clone" "$@"
  else
    (cd "$clone" && env -u VIRTUAL_ENV -u PYTHONPATH -u PYTHONHOME PATH="$clean_path" "$@")
  fi
}
# PATH without any virtual environment's bin/ (a folder next to a pyvenv.cfg), as in a newcomer's shell (tox puts
# its own first).
clean_path=""
IFS=: read -r -a parts <<< "$PATH"
for p in "${parts[@]}"; do
  [ -n "$p" ] && [ ! -f "$p/../pyvenv.cfg" ] && clean_path="${clean_path:+$clean_path:}$p"
done
[ -z "$engine" ] || export CONTAINER_ENGINE="$engine"

rows=()
fail() { echo "walk.sh: FAILED: $*" >&2; print_transcript; exit 1; }
# The disk a step took: what grew under the walk's folder (clone, .venv, data, results) and the engine's storage
# (--storage), measured with du, so that other jobs on the host do not count.
# (du reports files an engine removes while it counts as errors: what it could count is the figure.)
used_gb() { { du -sk "$work" ${storage:+"$storage"} 2> /dev/null || true; } | awk '{ k += $1 } END { printf "%.2f", k * 1024 / 1e9 }'; }
print_transcript() {
  local t
  t="$(printf '| step | command | exit | wall | disk | printed next |\n| --- | --- | --- | --- | --- | --- |\n'
       printf '%s\n' "${rows[@]}")"
  echo "walk.sh: $platform$([ -z "$root" ] || echo " in ${root##*/}")$([ "$container" = 0 ] || echo " in a container (${CONTAINER_ENGINE:-first engine that answers})")$([ -z "$user" ] || echo ", as $user"):" >&2
  echo "$t" >&2
  # What the commands above do not show: the host, the stand-ins, what the walk found besides.
  local s
  for s in "${stand_ins[@]}"; do notes+=("stand-in, in no command above: $s"); done
  [ ${#notes[@]} -eq 0 ] || t+=$'\n\n'"$(printf -- '- %s\n' "${notes[@]}")"
  [ ${#notes[@]} -eq 0 ] || printf -- '- %s\n' "${notes[@]}" >&2
  [ -z "$transcript" ] || echo "$t" > "$transcript"
}
# step NAME WANT_RC WANT_TEXT CMD...: run CMD as the walker, assert its exit code and that its output holds WANT_TEXT
last_log=""
step() {
  local name="$1" want_rc="$2" want="$3" rc=0 t0 f0 f1 took next
  shift 3
  last_log="$work/$name.log"
  t0=$(date +%s); f0="$(used_gb)"
  as "$@" > "$last_log" 2>&1 || rc=$?
  took=$(($(date +%s) - t0)); f1="$(used_gb)"
  # What the step said to do next: its failure line where it failed, else the line naming the next step, else the
  # line it was asserted to print (the report's path), else its last line.
  if [ "$rc" = 0 ]; then
    next="$(grep -o -m1 -e 'next[:,] .*' "$last_log" | cut -c1-110 || true)"
    [ -n "$next" ] || [ -z "$want" ] || next="$(grep -F -m1 -- "$want" "$last_log" | cut -c1-110 || true)"
    [ -n "$next" ] || next="$(tail -n 1 "$last_log" | cut -c1-110)"
  else
    next="$(tail -1 "$last_log" | cut -c1-240)"   # a failure's one line whole: it says what to do
  fi
  rows+=("| $name | \`$(echo "$*" | sed "s|$clone/||g; s|$work/||g; s|$work_in/||g" | cut -c1-90)\` | $rc | ${took} s | $(awk -v a="$f0" -v b="$f1" 'BEGIN { printf "%+.2f GB", b - a }') | ${next//|/\\|} |")
  echo "walk.sh: $name: exit $rc after ${took} s" >&2
  if [ "$rc" != "$want_rc" ] || ! grep -qF -- "$want" "$last_log"; then
    tail -n 25 "$last_log" >&2
    fail "$name: exit $rc (wanted $want_rc), output $(grep -qF -- "$want" "$last_log" && echo holds || echo lacks) '$want'"
  fi
}

# The clone, as the first row (git clone, then this checkout's uncommitted changes laid over it).
rows+=("| clone | \`git clone\` of this checkout, its uncommitted changes overlaid | 0 | ${t_clone} s | +$(used_gb) GB | |")
out="$work/run"
out_in="${out#"$root"}"   # the run folder as the walker names it
slice='model/gcn/*/*/amp-off/1dev'
# last_line_names TEXT...: the last step's last line holds every TEXT (the one line a refusal ends with)
last_line_names() {
  local t last; last="$(tail -n 1 "$last_log")"
  for t; do [[ "$last" == *"$t"* ]] || fail "$(basename "$last_log" .log): its last line does not name '$t': $last"; done
}
if [ -n "$admin" ]; then  # the host's admin, before the walker arrives
  as_spec=0:0 as_home=/root step admin 0 "" sh -c "$admin"
  rows[-1]="${rows[-1]/| admin |/| admin (as root, before the walk) |}"
fi
if [ "$platform" = cpu ] && [ "$container" = 0 ] && [ "$without_py311" = 1 ]; then
  # No Python 3.11 (Debian 13, Ubuntu 24.04): the check and the build each refuse in one line that names both ways
  # on: the CPU image, or a Python 3.11 by path.
  step check 2 "PYTHON=" ./reproduce.sh cpu --check
  last_line_names --container PYTHON=
  step build 2 "PYTHON=" ./reproduce.sh cpu --build
  last_line_names --container PYTHON=
elif [ "$platform" = cpu ] && [ "$container" = 0 ]; then
  step check 0 "ready to build: next, ./reproduce.sh cpu --build" ./reproduce.sh cpu --check
  step build 0 "reproduce.sh: next: ./reproduce.sh cpu --check" ./reproduce.sh cpu --build
  # What the build installed (as root: what a minimal host lacks) or said it could not, under the table; each
  # --build-says TEXT must be among its lines.
  while IFS= read -r line; do notes+=("the build said: ${line#reproduce.sh: }"); done \
    < <(grep -e '^reproduce.sh: apt-get ' -e '^reproduce.sh: this host has no ' "$last_log" || true)
  for said in "${build_says[@]}"; do
    grep -qF -- "$said" "$last_log" || fail "build: its output lacks '$said'"
  done
  step check-again 0 "ready: next, ./reproduce.sh cpu (the quick profile" ./reproduce.sh cpu --check
  # A walker who may not install the allocators (no root, no sudo): the check says what differs and how to fix it.
  if [ -n "$user" ] && ! grep -qF "libtcmalloc-minimal4" "$last_log"; then
    tail -n 25 "$last_log" >&2; fail "check-again: no allocator row naming libtcmalloc-minimal4 for $user"
  fi
  [ -z "$user" ] || notes+=("the check said: $(grep -m1 -F "libtcmalloc-minimal4" "$last_log" | sed 's/  */ /g' | cut -c1-240)")
  # Synthetic data only: the walk reads nothing outside the clone, and downloads nothing but the packages.
  # --gcn-only: the GCN cells alone (a second walk of the same host, kept short).
  cells="$slice"; [ "$every_model" = 0 ] || cells+=",scaling/resnet50/pytorch/*,scaling/resnet50/mindspore/graph/*"
  step run 0 "report: $out_in/report/report.html" ./reproduce.sh cpu --synthetic --only "$cells" --repeats 1 \
    --max-repeats 1 --out "$out_in"
  # Every dataset's loader under the newcomer's .venv, i.e. the host's first python3.11 (tools/check_datasets.py):
  # on a pristine Debian 12 its 3.11.2, which has no tarfile data filter (3.11.4 and newer extract through it).
  [ "$every_model" = 0 ] || step datasets 0 "" .venv/bin/python tools/check_datasets.py
elif [ "$platform" = cpu ]; then
  [ -n "$base_rootfs" ] || [ -n "$archive" ] \
    || fail "--container needs --base-rootfs TGZ (to build through reproduce.sh) or --load ARCHIVE"
  eng="${CONTAINER_ENGINE:-podman}"
  if [ -z "$unbuildable" ]; then
    step check 0 "ready to build: next, ./reproduce.sh cpu --container --build" ./reproduce.sh cpu --container --check
  else  # an engine that cannot build the Dockerfiles here: the check must say so, and why
    step check 2 "$unbuildable" ./reproduce.sh cpu --container --check
  fi
  if [ -n "$base_rootfs" ]; then
    # The stand-in for Dockerfile.cpu's debian:bookworm-slim: the root file system imported into the walker's engine
    # under a local name, which BASE_IMAGE hands to the build (reproduce.sh passes it as --build-arg BASE_IMAGE=).
    base_ref=localhost/harness-base:bookworm
    cp "$base_rootfs" "$work/base-rootfs.tgz"
    [ -z "$user" ] || chown "$user" "$work/base-rootfs.tgz"
    step base 0 "" "$eng" import --change 'CMD ["/bin/bash"]' "$work/base-rootfs.tgz" "$base_ref"
    rows[-1]="${rows[-1]%|*|}| stand-in: a debootstrap Debian bookworm (minbase) for Dockerfile.cpu's debian:bookworm-slim, which cannot be pulled here |"
    if [ -n "$wheelhouse" ]; then
      t0=$(date +%s); f0="$(used_gb)"
      mkdir -p "$clone/wheelhouse/cpu"
      cp -r "$wheelhouse/." "$clone/wheelhouse/cpu/"
      [ -z "$user" ] || chown -R "$user" "$clone/wheelhouse/cpu"
      rows+=("| wheels | \`tools/wheelhouse.sh cpu\` before the walk; its folder copied into the clone | 0 | $(($(date +%s) - t0)) s | $(awk -v a="$f0" -v b="$(used_gb)" 'BEGIN { printf "%+.2f GB", b - a }') | stand-in: fetched with the caller's pip configuration (the lock's PyTorch CPU index cannot be reached here) |")
    fi
    step build 0 "reproduce.sh: next: ./reproduce.sh cpu --container --check" \
      env BASE_IMAGE="$base_ref" ./reproduce.sh cpu --container --build
  else
    step build 0 "Loaded image" "$eng" load -i "$archive"
    rows[-1]="${rows[-1]%|*|}| $eng load of the image ./reproduce.sh cpu --container --build built under another engine$([ -z "$unbuildable" ] || echo ": this one $unbuildable (the check above)") |"
  fi
  step check-again 0 "ready: next, ./reproduce.sh cpu --container (the quick profile" ./reproduce.sh cpu --container --check
  if [ "$every_model" = 1 ]; then
    # Every dataset's real loader on its format-faithful fixture, under the image's Python and its non-root user.
    step datasets 0 "" "$eng" run --rm -v "$clone/tools:/tools:ro" --entrypoint python ms-pt-harness:cpu \
      /tools/check_datasets.py
  fi
  step dry-run 0 ":/data:ro" ./reproduce.sh cpu --container --data-dir "$data" --out "$out" --dry-run
  # The run goes on in the background while a second one on the same folder is refused.
  # One fp32 quick cell of every other model, as the image lists them (harness list --one-per-model).
  cells="$slice"
  if [ "$every_model" = 1 ]; then
    models="$(as "$eng" run --rm ms-pt-harness:cpu list --profile quick --one-per-model 2> /dev/null \
      | awk '{print $1}' | { grep -v '^model/gcn/' || true; } | paste -sd, -)" || true
    [ -n "$models" ] || fail "harness list --one-per-model in the image gave no cells"
    cells+=",$models"
  fi
  run_args=(--synthetic --only "$cells" --repeats 1 --max-repeats 1 --out "$out")
  t0=$(date +%s); f0="$(used_gb)"
  as ./reproduce.sh cpu --container "${run_args[@]}" > "$work/run.log" 2>&1 &
  bg=$!
  for _ in $(seq 1 120); do [ -s "$out/run.json" ] && break; sleep 1; done
  [ -s "$out/run.json" ] || { kill "$bg" 2> /dev/null || true; tail -20 "$work/run.log" >&2; fail "the run wrote no run.json in 120 s"; }
  # The second run on the folder: all data generated, so that no fetch container stands before it and it meets the
  # first while that one still runs (the lock is taken before anything of the folder is read).
  step concurrent 2 "is in use by another run" ./reproduce.sh cpu --container --synthetic --only "$cells" --repeats 1 \
    --max-repeats 1 --out "$out" --resume
  [ "$(grep -c '^error: ' "$last_log")" = 1 ] || fail "the refused run said more than one error line"
  rc=0; wait "$bg" || rc=$?
  rows+=("| run | \`./reproduce.sh cpu --container --only '$([ "$every_model" = 1 ] && echo "GCN fp32 + one cell per model" || echo "GCN fp32")' ...\` | $rc | $(($(date +%s) - t0)) s | $(awk -v a="$f0" -v b="$(used_gb)" 'BEGIN { printf "%+.2f GB", b - a }') | report: run/report/report.html |")
  [ "$rc" = 0 ] && grep -qF "report: $out/report/report.html" "$work/run.log" \
    || { tail -30 "$work/run.log" >&2; fail "run: exit $rc"; }
  step resume 0 "report: $out/report/report.html" ./reproduce.sh cpu --container "${run_args[@]}" --resume
  grep -q "running (timeout" "$last_log" && fail "--resume ran a cell again"
  owner="$(id -un "${user:-$(id -u)}")"
  strangers="$(find "$out" ! -user "$owner" | head -3)" || true  # head's early exit is find's SIGPIPE
  [ -z "$strangers" ] || fail "files in the run folder not owned by $owner: $strangers"
  echo "walk.sh: every file of the run folder belongs to $owner ($(find "$out" | wc -l) entries)" >&2
else
  no_device="no NVIDIA GPU visible"; [ "$platform" = cuda ] || no_device="no Ascend NPU visible"
  step check 2 "reproduce.sh: $no_device" ./reproduce.sh "$platform" --check
  step build-dry-run 0 " build -f " ./reproduce.sh "$platform" --build --dry-run
  step run 2 "reproduce.sh: $no_device" ./reproduce.sh "$platform" --only 'model/gcn/*'
  last_line_names "$no_device"
fi

if [ "$platform" = cpu ] && [ "$without_py311" = 0 ]; then
  # Every cell of the run ok, and the report there.
  python3 - "$out" "$([ "$container" = 1 ] && echo container || echo native)" "$every_model" <<'PY' || fail "the run's results (above)"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
results = [json.loads(p.read_text()) for p in sorted((out / "cells").rglob("r*.json")) if p.name[1:-5].isdigit()]
bad = [f"{r['cell']}: {r.get('status')} ({r.get('reason')})" for r in results if r.get("status") != "ok"]
for r in results:
    print(f"  {r.get('status'):8} {r['cell']}  synthetic={r.get('synthetic')}", file=sys.stderr)
problems = [f"not ok: {bad}"] if bad else []
problems += [f"no report/{n}" for n in ("report.html", "report.tex") if not (out / "report" / n).is_file()]
if sys.argv[2] == "container" and not all(r.get("synthetic") for r in results):
    problems.append("a dataset was not synthetic; the container walk reads nothing outside the clone")
if sys.argv[2] == "native" and not all(r.get("synthetic") for r in results):
    problems.append("a dataset was not synthetic; the native walk reads nothing outside the clone")
if not all(r.get("synthetic") for r in results if r.get("dataset") == "cifar10"):
    problems.append("CIFAR-10 was not synthetic")
kinds = {(r.get("kind"), r.get("framework")) for r in results}
want = {("model", "pytorch"), ("model", "mindspore")}
if sys.argv[2] == "native" and sys.argv[3] == "1":
    want = {("scaling", "pytorch"), ("scaling", "mindspore")}
problems += [f"no {k} cell of {fw} ran" for k, fw in sorted(want - kinds)]
if problems or not results:
    sys.exit(" | ".join(problems) or "no results")
PY
fi
print_transcript
echo "walk.sh: OK" >&2
rm -rf "$work"

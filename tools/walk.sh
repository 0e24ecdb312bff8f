#!/usr/bin/env bash
# The fresh-host walk: a reviewer's path through README.md and ARTIFACT.md, step by step, from a clean clone with
# no .venv and no image: check, build, check again, run a slice, the report. Each step's exit code and the next step
# it prints are asserted; its wall time and the disk it took (what grew under the walk's folder and the engine's
# storage) are recorded in a transcript (a Markdown table, printed at the end and written to --transcript FILE).
#
#   tools/walk.sh cpu [--data-dir D] [--transcript F]                     natively (.venv)
#   tools/walk.sh cpu --container --load ARCHIVE [--as USER] [--engine docker|podman] [--storage DIR] [--data-dir D]
#                 [--unbuildable TEXT] [--gcn-only] [--transcript F]   DIR: the engine's storage, for the disk column;
#                                                                      TEXT: the check before the build must fail
#                                                                      with it (an engine that cannot build here)
#   tools/walk.sh cuda|ascend [--transcript F]                            on a host without the device: up to the
#                                                                         line that says there is none
#
# --load ARCHIVE: the build step loads an image archive (tools/check_image.sh made it with buildah from a
#   debootstrap base, since public base images cannot be pulled on CI's host) instead of building; the transcript
#   says so. --as USER: every step runs as that user (a reviewer is not root) in a clone the user owns.
# The container walk also runs --resume into the same run folder (every run kept) and a second run on that folder
# while the first is going (refused in one line), and checks that every result file belongs to the caller and
# that the data was mounted read-only.
set -euo pipefail
trap 'echo "walk.sh: stopped at line $LINENO: $BASH_COMMAND" >&2' ERR

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
platform="${1:-}"
case "$platform" in cpu|cuda|ascend) shift ;; *) echo "walk.sh: first argument: cpu, cuda or ascend" >&2; exit 2 ;; esac
container=0; archive=""; user=""; engine=""; transcript=""; storage=""; unbuildable=""; every_model=1
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
    *) echo "walk.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done
# The data folder, absolute (only the cpu walks read it: a checkout elsewhere walks cuda and ascend without one).
[ "$platform" != cpu ] || data="$(cd "$data" && pwd)" || { echo "walk.sh: no data folder $data (--data-dir)" >&2; exit 2; }

# A clean clone of this checkout (its working tree's changes included, as CI's clone has them committed), owned by
# the user who walks; nothing ignored by git comes with it (no .venv, no wheelhouse, no results).
work="$(mktemp -d "${TMPDIR:-/tmp}/walk.XXXXXX")"
chmod 0755 "$work"
clone="$work/artifact"
git clone -q "$repo" "$clone"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | xargs -0 -r sh -c \
  'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh | tar --null -T - -cf -) | tar -xf - -C "$clone"
[ -z "$user" ] || chown -R "$user" "$work"
as() {  # as CMD...: run as the walking user, from the clone, with a login-like environment
  if [ -n "$user" ]; then
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
  echo "walk.sh: $platform$([ "$container" = 0 ] || echo " in a container (${CONTAINER_ENGINE:-first engine that answers})")$([ -z "$user" ] || echo ", as $user"):" >&2
  echo "$t" >&2
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
  # What the step said to do next: its failure line where it failed, else the line naming the next step.
  if [ "$rc" = 0 ]; then
    next="$(grep -o -m1 -e 'next[:,] .*' "$last_log" | cut -c1-110 || true)"
  else
    next="$(tail -1 "$last_log" | cut -c1-110)"
  fi
  rows+=("| $name | \`$(echo "$*" | sed "s|$clone/||g; s|$work/||g" | cut -c1-90)\` | $rc | ${took} s | $(awk -v a="$f0" -v b="$f1" 'BEGIN { printf "%+.2f GB", b - a }') | ${next//|/\\|} |")
  echo "walk.sh: $name: exit $rc after ${took} s" >&2
  if [ "$rc" != "$want_rc" ] || ! grep -qF -- "$want" "$last_log"; then
    tail -n 25 "$last_log" >&2
    fail "$name: exit $rc (wanted $want_rc), output $(grep -qF -- "$want" "$last_log" && echo holds || echo lacks) '$want'"
  fi
}

out="$work/run"
slice='model/gcn/*/*/amp-off/1dev'
if [ "$platform" = cpu ] && [ "$container" = 0 ]; then
  step check 0 "ready to build: next, ./reproduce.sh cpu --build" ./reproduce.sh cpu --check
  step build 0 "reproduce.sh: next: ./reproduce.sh cpu --check" ./reproduce.sh cpu --build
  step check-again 0 "ready: next, ./reproduce.sh cpu (the quick profile" ./reproduce.sh cpu --check
  step run 0 "report: $out/report/report.html" ./reproduce.sh cpu --data-dir "$data" --synthetic cifar10 \
    --only "$slice,scaling/resnet50/pytorch/*,scaling/resnet50/mindspore/graph/*" --repeats 1 --max-repeats 1 --out "$out"
  # Every dataset's loader under the newcomer's .venv, i.e. the host's first python3.11 (tools/check_datasets.py).
  # The images' Debian 3.11.2 has no tarfile data filter and is checked in them (tools/check_image.sh); a 3.11 of
  # 3.11.4 or newer extracts CIFAR-10 through the filter: on CI's host this is that path.
  step datasets 0 "" .venv/bin/python tools/check_datasets.py
elif [ "$platform" = cpu ]; then
  [ -n "$archive" ] || fail "--container needs --load ARCHIVE (the image built by tools/check_image.sh)"
  eng="${CONTAINER_ENGINE:-podman}"
  if [ -z "$unbuildable" ]; then
    step check 0 "ready to build: next, ./reproduce.sh cpu --container --build" ./reproduce.sh cpu --container --check
  else  # an engine that cannot build the Dockerfiles here: the check must say so, and why
    step check 2 "$unbuildable" ./reproduce.sh cpu --container --check
  fi
  step build 0 "Loaded image" "$eng" load -i "$archive"
  rows[-1]="${rows[-1]%|*|}| $eng load stands in for ./reproduce.sh cpu --container --build: public base images cannot be pulled here |"
  step check-again 0 "ready: next, ./reproduce.sh cpu --container (the quick profile" ./reproduce.sh cpu --container --check
  step dry-run 0 ":/data:ro" ./reproduce.sh cpu --container --data-dir "$data" --out "$out" --dry-run
  # The run goes on in the background while a second one on the same folder is refused.
  # One fp32 quick cell of every other model, as the image lists them (harness list --one-per-model).
  cells="$slice"
  if [ "$every_model" = 1 ]; then
    models="$(as "$eng" run --rm ms-pt-harness:cpu list --profile quick --one-per-model 2> /dev/null \
      | awk '{print $1}' | grep -v '^model/gcn/' | paste -sd, -)"
    [ -n "$models" ] || fail "harness list --one-per-model in the image gave no cells"
    cells+=",$models"
  fi
  run_args=(--data-dir "$data" --synthetic cifar10 --only "$cells" --repeats 1 --max-repeats 1 --out "$out")
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
  strangers="$(find "$out" ! -user "$owner" | head -3)"
  [ -z "$strangers" ] || fail "files in the run folder not owned by $owner: $strangers"
  echo "walk.sh: every file of the run folder belongs to $owner ($(find "$out" | wc -l) entries)" >&2
else
  no_device="no NVIDIA GPU visible"; [ "$platform" = cuda ] || no_device="no Ascend NPU visible"
  step check 2 "reproduce.sh: $no_device" ./reproduce.sh "$platform" --check
  step build-dry-run 0 " build -f " ./reproduce.sh "$platform" --build --dry-run
  step run 2 "reproduce.sh: $no_device" ./reproduce.sh "$platform" --only 'model/gcn/*'
  [ "$(tail -1 "$last_log" | grep -c "$no_device")" = 1 ] || fail "the run's last line is not the no-device line"
fi

if [ "$platform" = cpu ]; then
  # Every cell of the run ok, and the report there.
  python3 - "$out" "$([ "$container" = 1 ] && echo container || echo native)" <<'PY' || fail "the run's results (above)"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
results = [json.loads(p.read_text()) for p in sorted((out / "cells").rglob("r*.json")) if p.name[1:-5].isdigit()]
bad = [f"{r['cell']}: {r.get('status')} ({r.get('reason')})" for r in results if r.get("status") != "ok"]
for r in results:
    print(f"  {r.get('status'):8} {r['cell']}  synthetic={r.get('synthetic')}", file=sys.stderr)
problems = [f"not ok: {bad}"] if bad else []
problems += [f"no report/{n}" for n in ("report.html", "report.tex") if not (out / "report" / n).is_file()]
if any(r.get("synthetic") for r in results if r.get("dataset") == "cora"):
    problems.append("Cora was synthetic; the walk wants the real files")
if not all(r.get("synthetic") for r in results if r.get("dataset") == "cifar10"):
    problems.append("CIFAR-10 was not synthetic")
kinds = {(r.get("kind"), r.get("framework")) for r in results}
want = {("scaling", "pytorch"), ("scaling", "mindspore")} if sys.argv[2] == "native" else {("model", "pytorch"),
                                                                                        ("model", "mindspore")}
problems += [f"no {k} cell of {fw} ran" for k, fw in sorted(want - kinds)]
if problems or not results:
    sys.exit(" | ".join(problems) or "no results")
PY
fi
print_transcript
echo "walk.sh: OK" >&2
rm -rf "$work"

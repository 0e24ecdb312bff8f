#!/usr/bin/env bash
# The test command (README.md; CI's .ci/run runs exactly this), from a plain clone with nothing beside it, as root on
# Debian 12: the Debian tools some tests need (Debian's python3.11, pdflatex, Chromium, buildah, debootstrap, podman,
# docker; installed when missing and root), then tox: lint (ruff), test (pytest under /usr/bin/python3.11, Debian
# bookworm's 3.11.2 as in the CPU and CUDA images; with report.tex through pdflatex and report.html in headless
# Chromium), main (README's main command walked on pristine Debian hosts: tools/check_main.sh, tools/pristine.sh),
# image (hadolint; the CPU image built by ./reproduce.sh cpu --container --build and walked under podman and docker;
# inside it every dataset's loader on format-faithful fixtures and a quick cell of every model) and image-cuda (the
# CUDA image built with buildah and checked inside the same way: no GPU needed). Extra arguments replace the tox
# environments, e.g. `-e test`. The whole run's record (each environment's status and time, the disk it needed, the
# host and Python): .tox/logs/test-command.json.
set -Eeuo pipefail
# Exit 2: a refusal, in one line; anything else that fails: one line and exit 3 (tools/unexpected.sh).
. "$(dirname "${BASH_SOURCE[0]}")/unexpected.sh"
trap 'unexpected $? $LINENO "$BASH_COMMAND" tools/test.sh "the output above"' ERR
die() { echo "tools/test.sh: $*" >&2; exit 2; }
cd "$(dirname "$0")/.."
# The command's own record (.tox/logs/test-command.json, tools/test_summary.py): its wall time, and the disk it needs,
# from a sampler of the free space on the checkout's file system (images, wheels and walks all land there on CI).
t_start=$(date +%s)
mkdir -p .tox/logs
free_kb() { { df -Pk . 2> /dev/null || true; } | awk 'NR == 2 && $4 ~ /^[0-9]+$/ { print $4 }'; }
disk_start="$(free_kb)"
# The five environments at once fill the disk with two images, their wheels and three hosts' .venv builds: with less
# free than the published run needed at its peak, an image build would fail half an hour in on "no space left on
# device". Say so now instead, in one line.
need_record=docs/runs/fresh-host/test-command.json
need_gib="$(sed -n 's/^ *"disk_used_gib": *\([0-9.]*\).*/\1/p' "$need_record" 2> /dev/null || true)"
if [ $# = 0 ] && [ -n "$need_gib" ] && [ -n "$disk_start" ] \
    && awk -v f="$disk_start" -v n="$need_gib" 'BEGIN { exit !(f / 1048576 < n) }'; then
  die "$(awk -v f="$disk_start" 'BEGIN { printf "%.1f", f / 1048576 }') GiB free on the disk of $PWD, and the five" \
    "environments took up to $need_gib GiB of it at once in the published run ($need_record); free some disk there," \
    "or run a part of them, e.g. tools/test.sh -e lint,test"
fi
# The record, and so the sampler, is the whole set's alone: a part of it (-e) hands over to tox below.
low_file=.tox/logs/.disk-low
if [ $# = 0 ]; then
  echo "${disk_start:-0}" > "$low_file"
  ( while sleep 5; do
      f="$(free_kb)"
      if [ -n "$f" ] && [ "$f" -lt "$(cat "$low_file")" ]; then echo "$f" > "$low_file"; fi
    done ) < /dev/null > /dev/null 2>&1 &   # holds no pipe of the caller's open (its sleep outlives a kill)
  sampler=$!
  trap 'kill "$sampler" 2> /dev/null || true' EXIT
fi
tools/install_system_packages.sh
# tox itself runs under any Python 3 that can make a venv (its environments pick their own): python3, else Debian's
# python3.11 (installed above as root). Ubuntu's python3 (3.10, 3.12) has no venv without python3-venv.
tox_py=""
for py in python3 python3.11; do
  if "$py" -c 'import ensurepip, venv' > /dev/null 2>&1; then tox_py="$py"; break; fi
done
[ -n "$tox_py" ] || die "no python3 here can make a venv (no ensurepip/venv module): as root, apt-get install python3-venv python3.11-venv (Debian/Ubuntu), then run tools/test.sh again"
"$tox_py" -m venv .venv-tox || die "$tox_py -m venv .venv-tox failed (its message is above); remove .venv-tox and run again"
.venv-tox/bin/pip install -q tox==4.67.15 || die "pip could not install tox into .venv-tox (its message is above); check the network or the index"
if [ $# -gt 0 ]; then
  exec .venv-tox/bin/tox "$@"
fi
# Lanes at once (TEST_LANES, default 3): lint then test (pytest, on every core) on the terminal, beside main and image,
# and beside image-cuda (debootstraps, downloads and image builds: much of their time is the network's and the
# disk's), whose output goes to their logs alone, a line said as each ends. TEST_LANES=2: main, image and image-cuda in
# one lane beside lint and test; TEST_LANES=1: the five one after the other, all on the terminal.
# Each environment's output is kept in .tox/logs/ENV.log: when one fails, its last lines are printed again at the very
# end, where a reader of the output (or of its tail, as CI keeps it) sees why.
run_env() {  # run_env ENV [quiet]: its status and wall time into .tox/logs/ENV.status
  local t0 status=OK
  t0=$(date +%s)
  if [ "${2:-}" = quiet ]; then
    .venv-tox/bin/tox -e "$1" > ".tox/logs/$1.log" 2>&1 || status=FAILED
  else
    .venv-tox/bin/tox -e "$1" 2>&1 | tee ".tox/logs/$1.log" || status=FAILED
  fi
  echo "$1:$status:$(($(date +%s) - t0))" > ".tox/logs/$1.status"
}
lane() {  # lane ENV...: one after the other, quietly, a line as each ends
  for env in "$@"; do
    run_env "$env" quiet
    echo "tools/test.sh: $env ended: $(cut -d: -f2 ".tox/logs/$env.status") after $(cut -d: -f3 ".tox/logs/$env.status") s" \
      "(its output: .tox/logs/$env.log)"
  done
}
envs=(lint test main image image-cuda)
rm -f .tox/logs/*.status
lanes="${TEST_LANES:-3}"
case "$lanes" in 1|2|3) ;; *) die "TEST_LANES=$lanes: give 1, 2 or 3 (the lanes the five environments run in)" ;; esac
if [ "$lanes" = 1 ]; then
  for env in "${envs[@]}"; do run_env "$env"; done
else
  pids=()
  if [ "$lanes" = 2 ]; then
    lane main image image-cuda & pids+=($!)
    echo "tools/test.sh: main, image and image-cuda run beside lint and test; their output goes to .tox/logs/ENV.log"
  else
    lane main image & pids+=($!)
    lane image-cuda & pids+=($!)
    echo "tools/test.sh: main and image, and image-cuda, run beside lint and test; their output goes to .tox/logs/ENV.log"
  fi
  for env in lint test; do run_env "$env"; done
  running() { for p in "${pids[@]}"; do if kill -0 "$p" 2> /dev/null; then return 0; fi; done; return 1; }
  waited=0
  while running; do
    # a line every two minutes, so that a silent CI log is not taken for a hang
    sleep 5
    waited=$((waited + 5))
    if [ $((waited % 120)) = 0 ]; then echo "tools/test.sh: lint and test ended; waiting for main, image and image-cuda"; fi
  done
  for p in "${pids[@]}"; do wait "$p" || true; done
fi
kill "$sampler" 2> /dev/null || true
failed=()
summary=()
records=()
for env in "${envs[@]}"; do
  record="$(cat ".tox/logs/$env.status" 2> /dev/null || echo "$env:FAILED:0")"
  IFS=: read -r _ status seconds <<< "$record"
  [ "$status" = OK ] || failed+=("$env")
  summary+=("$(printf '  %-10s %-6s %5d s' "$env" "$status" "$seconds")")
  records+=("$record")
done
"$tox_py" tools/test_summary.py --out .tox/logs/test-command.json --wall $(($(date +%s) - t_start)) \
  ${disk_start:+--disk-start-kb "$disk_start" --disk-low-kb "$(cat "$low_file")"} "${records[@]}" \
  || echo "tools/test.sh: could not write .tox/logs/test-command.json (its message is above); the summary below stands" >&2
for env in "${failed[@]}"; do
  echo "--- $env failed; its last 40 lines (all of them in .tox/logs/$env.log):"
  tail -n 40 ".tox/logs/$env.log"
done
echo "tools/test.sh: each environment (status, wall time):"
printf '%s\n' "${summary[@]}"
echo "tools/test.sh: $(($(date +%s) - t_start)) s in all; its record: .tox/logs/test-command.json"
if [ ${#failed[@]} -gt 0 ]; then
  echo "tools/test.sh: FAILED: ${failed[*]}"
  exit 1
fi
echo "tools/test.sh: all passed"

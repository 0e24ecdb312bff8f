#!/usr/bin/env bash
# One command from a fresh checkout to the report:  ./reproduce.sh cpu|cuda|ascend [options]
# cpu natively in .venv (hash-locked requirements/cpu.txt) or in the CPU image (--container); cuda and ascend in their
# image, every GPU or NPU passed through, or --native. The shell keeps to its part: here the arguments, then the run
# natively (tools/reproduce/native.sh: the venv, the run line) or in the image (tools/reproduce/container.sh: the
# engine, the build, the run lines); what it decides is asked of harness/preflight (shell.py, venvbuild.py). Usage
# and exit codes: tools/reproduce_usage.txt (--help); see ARTIFACT.md.
# When this command began: the run counts the build and the downloads against the hours booked (--hours).
export HARNESS_BOOKING_START="${HARNESS_BOOKING_START:-$(date +%s)}"
set -Eeuo pipefail
# Exit 2: a refusal, in one line; anything else that fails: one line and exit 3 (tools/unexpected.sh).
. "$(dirname "${BASH_SOURCE[0]}")/tools/unexpected.sh"
trap 'unexpected $? $LINENO "$BASH_COMMAND" reproduce.sh "the command line (${HARNESS_COMMAND:-./reproduce.sh}) and the output above"' ERR

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

usage() { cat "$here/tools/reproduce_usage.txt" >&2; }

die() { echo "reproduce.sh: $*" >&2; exit 2; }
show() {  # print a command as one copy-pastable shell line
  local out="" a
  for a in "$@"; do out+="$(printf '%q' "$a") "; done
  echo "${out% }"
}
host_python() {  # host_python WHAT: $pf, the host's python3 (3.8 or newer), which runs harness/preflight; none: refused
  pf="$(command -v python3 || command -v python3.11 || true)"
  [ -n "$pf" ] || die "$1 needs python3 (3.8 or newer) to run harness/preflight; install it"
  "$pf" -c 'import sys; sys.exit(sys.version_info < (3, 8))' 2> /dev/null \
    || die "$1 needs Python 3.8 or newer; $pf does not run or is older: install a newer python3"
}
# preflight PYTHON MODULE ARGS...: harness/preflight's MODULE in that Python, in the checkout; its refusal (exit 2, its
# line said) ends the script, any other failure is returned.
preflight() {
  local rc=0
  (cd "$here" && PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" "$1" -m "harness.preflight.$2" "${@:3}") || rc=$?
  [ "$rc" != 2 ] || exit 2
  return "$rc"
}
# ask [-q] PYTHON QUESTION ARGS...: what harness/preflight/shell.py decides, as preflight runs it: its `say` lines on
# stderr, each other `NAME VALUE` line kept as $NAME (npu, arg and made: the arrays npus, device_args and made).
# -q: that Python's own stderr is not shown.
ask() {
  local quiet="" answer key value rc=0
  [ "$1" != -q ] || { quiet=1; shift; }
  answer="$([ -z "$quiet" ] || exec 2> /dev/null; preflight "$1" shell "${@:2}")" || rc=$?
  while read -r key value; do
    case "$key" in
      say) echo "$value" >&2 ;;
      npu) npus+=("$value") ;;
      arg) device_args+=("$value") ;;
      made) made+=("$value") ;;
      ?*) printf -v "$key" '%s' "$value" ;;
    esac
  done <<< "$answer"
  [ "$rc" != 2 ] || exit 2
  return "$rc"
}

# The command line as typed, recorded in the run folder (run.json) so that a reader knows what made it.
export HARNESS_COMMAND="./reproduce.sh $(show "$@")"
platform="${1:-}"
case "$platform" in
  cpu|cuda|ascend) shift ;;
  -h|--help) usage; exit 0 ;;
  "") usage; die "no platform given; choose cpu, cuda or ascend" ;;
  *) die "unknown platform '$platform'; choose cpu, cuda or ascend" ;;
esac

profile=""   # the platform's default below: quick on a CPU, accelerator on a GPU or NPU host
out=""
image=""
build=0
dry=0
check=0
resume=0
where=""
data_dir="${HARNESS_DATA_DIR:-$here/data}"
synthetic=""
only=""
run_args=()
apex=""          # ascend: the image's ASCEND_APEX build argument, when chosen (--apex or $ASCEND_APEX)
apex_from=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) profile=quick ;;
    --accelerator) profile=accelerator ;;
    --full) profile=full ;;
    --target) profile=target ;;
    --companion) profile=companion ;;
    --profile) [ $# -ge 2 ] || die "--profile needs a name (quick, accelerator, target, full, companion)"; profile="$2"; shift ;;
    --image) [ $# -ge 2 ] || die "--image needs an image reference"; image="$2"; shift ;;
    --build) build=1 ;;
    --container) where=container ;;
    --native) where=native ;;
    --out) [ $# -ge 2 ] || die "--out needs a folder"; out="$2"; shift ;;
    --data-dir) [ $# -ge 2 ] || die "--data-dir needs a folder"; data_dir="$2"; shift ;;
    --synthetic)  # optionally followed by the datasets to make synthetic (e.g. cifar10 or cifar10,multi30k)
      synthetic=all
      if [ $# -ge 2 ] && [ "${2#-}" = "$2" ]; then synthetic="$2"; shift; fi ;;
    --synthetic=*) synthetic="${1#--synthetic=}"; [ -n "$synthetic" ] || die "--synthetic= needs dataset names, e.g. --synthetic=cifar10" ;;
    --only) [ $# -ge 2 ] || die "--only needs a pattern"; only="$2"; run_args+=(--only "$2"); shift ;;
    --resume) resume=1; run_args+=(--resume) ;;
    --repeats|--max-repeats)
      [ $# -ge 2 ] && [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1 needs a whole number of repeats, 1 or more (e.g. $1 3)"
      run_args+=("$1" "$2"); shift ;;
    --hours)
      # a positive number of hours: digits with at most one decimal point, and not zero
      [ $# -ge 2 ] && [[ "$2" =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)$ ]] && [[ "$2" =~ [1-9] ]] \
        || die "--hours needs the hours booked, a positive number (e.g. --hours 8 or --hours 2.5)"
      run_args+=(--hours "$2"); shift ;;
    --apex) [ $# -ge 2 ] || die "--apex needs build or skip (e.g. --apex build)"; apex="$2"; apex_from="--apex"; shift ;;
    --dry-run) dry=1 ;;
    --check) check=1 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1'; see ./reproduce.sh --help" ;;
  esac
  shift
done

# --apex (or $ASCEND_APEX): Ascend's apex in the Ascend image (Dockerfile.ascend's ASCEND_APEX), or not.
[ -z "$apex_from" ] || [ "$platform" = ascend ] || die "--apex is for the Ascend image only; drop it, or choose ascend"
[ -n "$apex_from" ] || [ "$platform" != ascend ] || [ -z "${ASCEND_APEX:-}" ] || apex="$ASCEND_APEX" apex_from=ASCEND_APEX
case "$apex" in
  ""|build|skip) ;;
  *) [ "$apex_from" = --apex ] && said="--apex $apex" || said="ASCEND_APEX=$apex"
     die "$said is not an apex choice; choose build (Ascend's apex, after tools/apex_sources.sh fetch) or skip" ;;
esac

# --check: the preflight (harness/preflight), under the host's python3 (standard library only; the training
# steps run in .venv or the image). It ends, on a host without the device, with the line that says so.
if [ "$check" = 1 ]; then
  host_python --check
  cd "$here"
  PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" exec "$pf" -m harness.preflight "$platform" --prog reproduce.sh \
    ${image:+--image "$image"} ${where:+"--$where"}
fi

# The profile: quick (minutes on 2 cores) on a CPU; on a GPU or NPU host the one sized for a booked accelerator.
[ -n "$profile" ] || if [ "$platform" = cpu ]; then profile=quick; else profile=accelerator; fi

# Where it runs: cpu natively unless asked otherwise; cuda and ascend in their image unless --native.
[ -n "$where" ] || if [ "$platform" = cpu ] && [ -z "$image" ]; then where=native; else where=container; fi
if [ "$where" = native ] && { [ -n "$image" ] || [ "$apex_from" = --apex ] || { [ "$build" = 1 ] && [ "$platform" != cpu ]; }; }; then
  die "--native runs without a container; drop --image/--build/--apex, or drop --native"
fi

# --build builds what the run needs (.venv natively on cpu, else the image) and stops: what it will download, the disk
# it needs and its time are said before it starts (harness/preflight/buildplan.py), what it took after.
next_after_build() {
  local flags=""
  [ "$platform" != cpu ] || [ "$where" != container ] || flags=" --container"
  [ -z "$image_given" ] || flags+=" --image $(printf '%q' "$image_given")"
  echo "reproduce.sh: next: ./reproduce.sh $platform$flags --check (the training steps, seconds), then" \
    "./reproduce.sh $platform$flags to run the $profile profile" >&2
}
image_given="$image"

out="${out:-$here/results/$platform-$profile-$(date +%Y%m%d-%H%M%S)}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
case "$data_dir" in /*) ;; *) data_dir="$PWD/$data_dir" ;; esac

# --resume continues a run of the same platform only (the harness checks the rest: profile, data).
if [ "$resume" = 1 ] && [ -f "$out/run.json" ]; then
  was="$(sed -n 's/.*"platform": *"\([a-z]*\)".*/\1/p' "$out/run.json" | head -1)"
  [ -n "$was" ] || die "$out/run.json names no platform; it is not a run folder of this harness"
  [ "$was" = "$platform" ] || die "--resume $out: that folder holds a $was run, not $platform; choose a new --out"
fi

# --- devices: the GPUs or NPUs, and the chip the Ascend image is built for (harness/preflight/shell.py) -------------
npus=() device_args=()
chip="" chip_why="" chip_unknown="" chip_image=""
if [ "$platform" != cpu ]; then
  host_python "$platform"
  q=("$platform"); [ "$dry" = 0 ] || q+=(--dry-run); [ "$build" = 0 ] || q+=(--build)
  ask "$pf" devices "${q[@]}"
fi

# --synthetic alone: every dataset generated; --synthetic NAMES: those generated, the rest real (and downloaded).
data_args=(--data-dir "$data_dir" --download)
if [ "$synthetic" = all ]; then data_args=(--synthetic); elif [ -n "$synthetic" ]; then data_args+=(--synthetic "$synthetic"); fi

# A report that fails after a run: the harness's own refusal (exit 2, a report folder it cannot write, say) is its one
# line, passed on as it is; any other failure gets one line here and keeps the run's exit status (1 where the run
# itself passed: its report is missing).
report_failed() {  # report_failed STATUS COMMAND (reads $status, the run's)
  [ "$1" -ne 2 ] || exit 2
  echo "reproduce.sh: the run in $out finished (exit $status), but rendering its report failed (exit $1; its" \
    "output is above); render it again with: $2" >&2
  [ "$status" -ne 0 ] || exit 1
  exit "$status"
}

# The run itself: natively (tools/reproduce/native.sh) or in the platform's image (tools/reproduce/container.sh).
. "$here/tools/reproduce/$where.sh"

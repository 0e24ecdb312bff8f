#!/usr/bin/env bash
# One command from a fresh checkout to the report:  ./reproduce.sh cpu|cuda|ascend [options]
# cpu natively in .venv (hash-locked requirements/cpu.txt) or in the CPU image (--container); cuda and ascend in their
# image, every GPU or NPU passed through, or --native. The shell keeps to its part (the arguments, the venv or the
# engine, the run line); what it decides is asked of harness/preflight (shell.py, venvbuild.py). Usage and exit codes:
# tools/reproduce_usage.txt (--help); see ARTIFACT.md.
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
# aside QUESTION ARGS...: ask harness/preflight/shell.py a question whose answer is for the reader only (the lines
# around an image build) where the host has a python3: the CPU image's host may have none, and no answer is no failure.
aside() { local py3="${pf:-$(command -v python3 || true)}"; [ -z "$py3" ] || ask -q "$py3" "$@" || true; }
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

# --- native -------------------------------------------------------------------------------------------
report_native() {
  local py="$1" status=0
  cd "$here"
  # A host whose allocators differ from the expected results' (no tcmalloc, say): one line before the run.
  [ "$platform" != cpu ] || "$py" -m harness.preflight.checks_allocator >&2 2> /dev/null || true
  "$py" -m harness run --platform "$platform" --profile "$profile" --out "$out" "${data_args[@]}" "${run_args[@]}" \
    || status=$?
  [ "$status" -ne 2 ] || exit 2  # the harness refused its input and said why in one line
  report="$("$py" -m harness report "$out")" || report_failed $? "$(show "$py" -m harness report "$out")"
  echo "report: $report"
  echo "LaTeX:  $(dirname "$report")/report.tex and $(dirname "$report")/tables/"
  exit "$status"
}

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

if [ "$where" = native ]; then
  if [ "$platform" = cpu ]; then
    venv="$here/.venv"
    lock="$here/requirements/cpu.txt"
    want="$(sha256sum "$lock" | cut -d' ' -f1)"
    py="$venv/bin/python"
    # --build, or no .venv stamped as made from this lock: made (again) from the lock with the base Python 3.11 by
    # harness/preflight/venvbuild.py, which checks that Python, says each step and, after, what it took.
    if [ "$build" = 1 ] || [ ! -x "$py" ] || [ "$(cat "$venv/.requirements.sha256" 2> /dev/null)" != "$want" ]; then
      if [ "$dry" = 1 ]; then
        show "${PYTHON:-python3.11}" -m venv "$venv"
        show "$py" -m pip install --require-hashes -r "$lock"
      else
        # venvbuild checks BASE (that it runs, its version) as a program of its own, so it runs under BASE where BASE
        # can run harness/preflight (3.8 or newer), else under the host's python3. None can: only this line can say so.
        base="${PYTHON:-$(command -v python3.11 || command -v python3 || true)}"
        for pf in "$base" "$(command -v python3 || command -v python3.11 || true)" ""; do
          [ -n "$pf" ] && "$pf" -c 'import sys; sys.exit(sys.version_info < (3, 8))' &> /dev/null && break
        done
        [ -n "$pf" ] || die "no python3 found${base:+ that runs harness/preflight (3.8 or newer)}, and the lock pins wheels for Python 3.11; add --container to run in the CPU image (docker or podman; no host Python needed), or install Python 3.11 and set PYTHON=/path/to/python3.11"
        preflight "$pf" venvbuild prepare "$base" "$venv" "$lock" "$here"
        preflight "$base" venvbuild make "$base" "$venv" "$lock" "$want"
      fi
    fi
    [ "$build" = 0 ] || { [ "$dry" = 1 ] || next_after_build; exit 0; }
  else
    # The Python needs the selected cells' frameworks, or at least one of them: the cells of one it lacks are left
    # out (recorded as skipped), and said.
    py="${PYTHON:-python3}"
    q=("$platform" "$profile" "$py"); [ -z "$only" ] || q+=("--only=$only"); [ "$dry" = 0 ] || q+=(--dry-run)
    ask -q "$py" frameworks "${q[@]}" || [ "$dry" = 1 ] \
      || die "$py does not run (or is not Python 3 with this checkout's harness); set PYTHON to a Python 3.11, or drop --native to use the image"
  fi
  if [ "$dry" = 1 ]; then
    echo "cd $(printf '%q' "$here")"
    show "$py" -m harness run --platform "$platform" --profile "$profile" --out "$out" "${data_args[@]}" "${run_args[@]}"
    show "$py" -m harness report "$out"
    exit 0
  fi
  report_native "$py"
fi

# --- container: engine, image -------------------------------------------------------------------------
answers() { command -v "$1" > /dev/null && "$1" info > /dev/null 2>&1; }  # an engine installed and answering
engine="${CONTAINER_ENGINE:-}"
[ -n "$engine" ] || for candidate in docker podman; do if answers "$candidate"; then engine="$candidate"; break; fi; done
if [ -z "$engine" ]; then
  [ "$dry" = 1 ] || die "no container engine: neither docker nor podman is installed and answering (docker info / podman info); install one, or for cpu drop --container"
  engine=docker
elif [ "$dry" = 0 ] && ! answers "$engine"; then
  die "no container engine: $engine (CONTAINER_ENGINE) is not installed or does not answer '$engine info'"
fi
engine_name="$(basename "$engine")"
[ -z "$chip_unknown" ] || [ "$dry" = 1 ] || die "$chip_unknown"

dockerfile="$here/Dockerfile.$platform"
image="${image:-${chip_image:-ms-pt-harness:$platform}}"   # ascend's names its chip (harness/preflight/shell.py)
need_build="$build"  # and the images are not published: a missing one is built here
[ "$need_build" = 1 ] || "$engine" image inspect "$image" > /dev/null 2>&1 || need_build=1
# An apex choice the existing image was not built with (its label, harness/preflight/shell.py): built again with it.
[ "$need_build" = 1 ] || [ -z "$apex" ] || ask "$pf" apex "$engine" "$image" "$apex"
lock="$here/requirements/$platform.txt"
arch="$(uname -m)"
if [ "$need_build" = 1 ] && grep -q -e '^# LOCK-INCOMPLETE:' -e "^# LOCK-INCOMPLETE-ARCH $arch:" "$lock"; then
  why="$(grep -m1 -e '^# LOCK-INCOMPLETE:' -e "^# LOCK-INCOMPLETE-ARCH $arch:" "$lock" | sed 's/^# LOCK-INCOMPLETE[^:]*: *//')"
  fix="run python3 tools/lock_requirements.py --only $platform on a host that reaches that index"
  [ "$dry" = 1 ] || die "cannot build $image: ${lock#"$here"/} is incomplete ($why); $fix, or pass --image REF"
  echo "# ${lock#"$here"/} is incomplete ($why): first $fix" >&2
fi
base="$(sed -n 's/^ARG BASE_IMAGE=//p' "$dockerfile" | head -1)"
base="${base//\$\{ASCEND_CHIP\}/$chip}"
if [ "$need_build" = 1 ] && [ "${base#*@sha256:}" = "$base" ]; then
  echo "# warning: ${dockerfile##*/} names its base $base by tag only; tools/pin_base_images.sh pins its digest" >&2
fi
revision="$(git -C "$here" rev-parse HEAD 2> /dev/null || echo unknown)"
build_cmd=("$engine" build -f "$dockerfile" -t "$image" --build-arg "REVISION=$revision")
# podman builds OCI images by default, which have no SHELL: the Dockerfiles' `SHELL ["/bin/bash", "-o", "pipefail",
# "-c"]` would be dropped (podman warns) and their RUN lines run under /bin/sh, unlike docker's build of them.
[ "$engine_name" != podman ] || build_cmd+=(--format docker)
# BASE_IMAGE: another base than the Dockerfile's (a registry mirror's copy of it, or a local one)
[ -z "${BASE_IMAGE:-}" ] || build_cmd+=(--build-arg "BASE_IMAGE=$BASE_IMAGE")
[ "$platform" != ascend ] || build_cmd+=(--build-arg "ASCEND_CHIP=$chip")
[ -z "$apex" ] || build_cmd+=(--build-arg "ASCEND_APEX=$apex")
build_cmd+=("$here")

# --- container: run -----------------------------------------------------------------------------------
shm="${SHM_SIZE:-16g}"
[ "$platform" != cpu ] || shm="${SHM_SIZE:-2g}"
common=(--rm --shm-size "$shm" -e "HARNESS_IMAGE=$image")
made=()   # host folders a mount needs, made before the run
# The caller's uid and gid inside, so the results are the caller's: --user for every engine, and rootless podman also
# maps them onto themselves with keep-id (rootful podman refuses it: "keep-id is only supported in rootless mode");
# keep-id alone keeps the image's USER (1000), which can write the caller's folders only when the caller is uid 1000.
# SELinux labels off for podman, or an enforcing host denies the bind mounts (NVIDIA's podman example does the same).
rootless=0
[ "$engine_name" != podman ] || [ "$("$engine" info --format '{{.Host.Security.Rootless}}' 2> /dev/null || echo true)" != true ] \
  || { rootless=1; common+=(--userns=keep-id); }
common+=(--user "$(id -u):$(id -g)")
[ "$engine_name" != podman ] || common+=(--security-opt=label=disable)
for var in HARNESS_NNODES HARNESS_NODE_RANK HARNESS_MASTER_ADDR HARNESS_MASTER_PORT; do
  [ -z "${!var:-}" ] || common+=(-e "$var=${!var}")
done
# The devices (cuda, ascend), the host network, and on cuda the kept folder of the driver's JIT cache: harness/preflight.
[ "$platform" = cpu ] || ask "$pf" container "$platform" "$engine_name" "$rootless" "${npus[@]}"
common+=("${device_args[@]}")
mounts=(-v "$out:/results")
in_data=(--data-dir /data)
fetch_cmd=()
only_args=(); [ -z "$only" ] || only_args=(--only "$only")
if [ "$synthetic" = all ]; then
  in_data=(--synthetic)
else
  # The datasets are fetched and verified first, in a container of their own that may write the data folder;
  # the run then reads them read-only.
  mounts+=(-v "$data_dir:/data:ro")
  [ -z "$synthetic" ] || in_data+=(--synthetic "$synthetic")
  # HARNESS_DATA_MIRROR: the datasets from a mirror (an air-gapped site's copy), as natively
  mirror=(); [ -z "${HARNESS_DATA_MIRROR:-}" ] || mirror=(-e "HARNESS_DATA_MIRROR=$HARNESS_DATA_MIRROR")
  fetch_cmd=("$engine" run "${common[@]}" "${mirror[@]}" -v "$data_dir:/data" "$image"
             fetch --profile "$profile" "${only_args[@]}" "${in_data[@]}")
fi
run_cmd=("$engine" run "${common[@]}" "${mounts[@]}" -e "HARNESS_COMMAND=$HARNESS_COMMAND"
         -e "HARNESS_BOOKING_START=$HARNESS_BOOKING_START" "$image"
         run --platform "$platform" --profile "$profile" --out /results "${in_data[@]}" "${run_args[@]}")
report_cmd=("$engine" run "${common[@]}" -v "$out:/results" "$image" report /results)

if [ "$dry" = 1 ]; then
  [ "$platform" != ascend ] || echo "# ascend chip: $chip ($chip_why); base image: $base"
  [ "$need_build" = 0 ] || show "${build_cmd[@]}"
  [ "$build" = 0 ] || exit 0   # --build builds and stops
  show mkdir -p "$out" "$data_dir" "${made[@]}"
  [ ${#fetch_cmd[@]} -eq 0 ] || show "${fetch_cmd[@]}"
  show "${run_cmd[@]}"
  show "${report_cmd[@]}"
  exit 0
fi

if [ "$need_build" = 1 ]; then
  began=""
  aside build "$platform" "$engine" "$here"   # the plan, at the engine's storage; $began for the line after
  echo "reproduce.sh: building $image from ${dockerfile##*/}" >&2
  "${build_cmd[@]}" || die "building $image from ${dockerfile##*/} failed (see $engine_name's output above)"
  [ -z "$began" ] || aside built "$image" "$engine" "$began"
  [ "$build" = 0 ] || { next_after_build; exit 0; }
fi
for d in "$out" "${made[@]}"; do
  mkdir -p "$d" 2> /dev/null || die "cannot make the folder $d; choose another place (--out, --data-dir) or fix its permissions"
done
# The engine's own failure (docker and podman: 125 the container could not be made or started, 126 and 127 its
# command could not be run) is not the harness's: one line says which, and what to look at.
engine_failed() {  # engine_failed STATUS WHAT
  die "$engine_name could not run the $2 container (exit $1: the engine's own failure, not the harness's; its" \
    "message is above): check the mounts ($out${fetch_cmd[*]:+, $data_dir}: they exist and are yours), subuid and" \
    "subgid for a rootless user, the SELinux label of those folders, and that $image is this harness's image"
}
status=0
if [ ${#fetch_cmd[@]} -gt 0 ]; then
  mkdir -p "$data_dir" 2> /dev/null || die "cannot make the data folder $data_dir; choose another with --data-dir or fix its permissions"
  "${fetch_cmd[@]}" || status=$?
  case "$status" in
    0) ;;
    2) exit 2 ;;  # the harness said which dataset and why in one line
    125|126|127) engine_failed "$status" fetch ;;
    *) echo "reproduce.sh: fetching the datasets in $image failed (exit $status; its output is above), so the run" \
         "did not start; run it again, or pass --synthetic to run on generated data" >&2
       exit "$status" ;;
  esac
fi
"${run_cmd[@]}" || status=$?
case "$status" in
  2) exit 2 ;;  # the harness refused its input and said why in one line
  125|126|127) engine_failed "$status" run ;;
esac
status_report=0
"${report_cmd[@]}" > /dev/null || status_report=$?
case "$status_report" in
  0) ;;
  125|126|127) engine_failed "$status_report" report ;;
  *) report_failed "$status_report" "$(show "${report_cmd[@]}")" ;;
esac
echo "report: $out/report/report.html"
echo "LaTeX:  $out/report/report.tex and $out/report/tables/"
exit "$status"

#!/usr/bin/env bash
# One command from a fresh checkout to the report:  ./reproduce.sh cpu|cuda|ascend [options]
#
# cpu     natively, in .venv made from the hash-locked requirements/cpu.txt (default), or in the CPU image
#         (Dockerfile.cpu) with --container.
# cuda    in the image of Dockerfile.cuda (docker or podman), every GPU passed through.
# ascend  in the image of Dockerfile.ascend, every NPU and the host's NPU driver passed through.
# --native runs cuda/ascend with the Python named by $PYTHON instead (it needs that platform's build of at
# least one framework, torch (+ torch_npu) or mindspore; the cells of one it lacks are recorded as skipped,
# and the script says which). --dry-run prints every command and runs none. --check runs the preflight
# (harness/preflight): one table of what this host has against what the platform needs, ending with one
# training step per framework on the device; exit 0 when every row passes or waits for --build, which builds
# (.venv or the image) and stops. See ARTIFACT.md.
# When this command began: the run counts the build and the downloads against the hours booked (--hours).
export HARNESS_BOOKING_START="${HARNESS_BOOKING_START:-$(date +%s)}"
set -Eeuo pipefail
# Exit 2: a refusal, in one line; anything else that fails: one line and exit 3 (tools/unexpected.sh).
. "$(dirname "${BASH_SOURCE[0]}")/tools/unexpected.sh"
trap 'unexpected $? $LINENO "$BASH_COMMAND" reproduce.sh "the command line (${HARNESS_COMMAND:-./reproduce.sh}) and the output above"' ERR

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

usage() {
  cat >&2 <<'USAGE'
usage: ./reproduce.sh cpu|cuda|ascend [--quick|--accelerator|--target|--full|--companion|--profile NAME] [--image REF] [--build] [--container|--native]
                      [--data-dir DIR] [--out DIR] [--resume] [--synthetic [DATASETS]] [--only GLOB[,GLOB]] [--repeats N] [--max-repeats M] [--hours H] [--apex build|skip] [--dry-run]
       ./reproduce.sh cpu|cuda|ascend --check [--image REF] [--container|--native]
       ./reproduce.sh cpu|cuda|ascend --build [--image REF] [--container]

  On a fresh host: --check (exit 0: ready; it prints the next step), --build, --check again (now with the
  training steps), then the run.

  cpu|cuda|ascend  the platform to measure (required)
  --quick          the kick-the-tires profile (the default on cpu); on a GPU or NPU a smoke test
  --accelerator    the paper's tables from one booked GPU or NPU host, at the paper's sizes (the default on
                   cuda and ascend; its estimated time is printed before it starts: ARTIFACT.md)
  --target         time to target: GCN to 70% and the GRU to BLEU 10 on the real data, sized for a 2-core
                   CPU, each cell stopping at its target (ARTIFACT.md gives its measured time)
  --full           the paper's scale;  --companion: the companion studies at their scale
  --profile NAME   any profile of harness/config/matrix.toml (python -m harness list --profile NAME)
  --image REF      the container image to run (default: ms-pt-harness:PLATFORM, built when missing)
  --build          build what the run needs and stop: .venv on cpu (natively), else the image of
                   Dockerfile.PLATFORM (even if it exists); the download, disk and time are printed
                   before it starts and what it took after. Without it, a missing .venv or image is
                   made before the run
  --container      cpu only: run in the CPU image instead of .venv (cuda and ascend always use an image)
  --native         cuda/ascend: no container, run with $PYTHON (default python3); the cells of a
                   framework it lacks are left out (recorded as skipped)
  --data-dir DIR   datasets, one folder each (default: $HARNESS_DATA_DIR or ./data); missing files
                   are downloaded there and verified by sha256
  --out DIR        run folder (default: results/<platform>-<profile>-<date>)
  --resume         continue an earlier --out folder of the same platform, keeping its finished cells
  --synthetic [DATASETS]
                   generated data of the real shapes instead of the datasets: all of them, or only the
                   comma-separated ones named (e.g. --synthetic cifar10 keeps real Cora and Multi30K)
  --only GLOB[,GLOB]
                   only the cells whose id matches one of the globs (see: python -m harness list)
  --repeats N      at least N repeats of every cell (default: the profile's repeats, and its claim_repeats
                   for the cells a claim compares: 2 for quick, target and accelerator)
  --max-repeats M  a comparison whose verdict is not yet settled gets one more repeat of its cells at a time,
                   up to M (default: the profile's max_repeats in harness/config/matrix.toml: 2 for quick,
                   3 for target and accelerator)
  --hours H        the hours booked on this host (a positive number, e.g. 8 or 2.5), passed to the run, which
                   counts from when this command began, the build and the downloads included
  --apex build|skip
                   ascend only: build the image with Ascend's apex, the paper's O2 AMP path (build; fetch its
                   sources first with tools/apex_sources.sh fetch), or without it (skip, the default; also
                   $ASCEND_APEX). An image built with the other choice is built again
  --dry-run        print the commands (build, run, report) without running them
  --check          preflight, seconds to a minute: driver, device, container engine and toolkit, disk, image
                   against what the platform needs, then one training step per framework on the device; one
                   table, then the next step, or one line per failure saying what to do; exit 0 when every
                   row passes or waits for --build (a fresh host: no .venv or image yet)

environment: CONTAINER_ENGINE (docker or podman; default: the first that answers), SHM_SIZE (default
16g for cuda/ascend, 2g for cpu), ASCEND_APEX (build or skip, as --apex), HARNESS_BOOKING_START (when the
booking began, in seconds since 1970, for --hours; default: when this command began),
HARNESS_NNODES/NODE_RANK/MASTER_ADDR/MASTER_PORT (several hosts), HARNESS_DATA_MIRROR (a base URL the datasets
are downloaded from instead of their upstream hosts; passed into the fetch container too), PYTHON (the Python
3.11 that makes .venv on cpu, or runs --native).

exit status: 0 done; 1 the run finished but a cell failed (the report says which), or its report could not be
rendered; 2 refused, with one line saying why and what to do (the container engine's own failure included);
3 an unexpected failure of this script, with one line saying where (report it, with the command line).
USAGE
}

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
# ask [-q] PYTHON QUESTION ARGS...: what harness/preflight/shell.py decides, in that Python: its `say` lines on stderr,
# each other `NAME VALUE` line kept as $NAME (npu and package: the arrays npus and packages); its refusal (exit 2) ends
# the script, any other failure is returned. -q: that Python's own stderr is not shown.
ask() {
  local quiet="" answer key value rc=0
  [ "$1" != -q ] || { quiet=1; shift; }
  answer="$([ -z "$quiet" ] || exec 2> /dev/null
            cd "$here" && PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" "$1" -m harness.preflight.shell "${@:2}")" || rc=$?
  while read -r key value; do
    case "$key" in
      say) echo "$value" >&2 ;;
      npu) npus+=("$value") ;;
      package) packages+=("$value") ;;
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
if [ -n "$apex_from" ] && [ "$platform" != ascend ]; then
  die "--apex is for the Ascend image only; drop it, or choose ascend"
fi
if [ -z "$apex_from" ] && [ "$platform" = ascend ] && [ -n "${ASCEND_APEX:-}" ]; then
  apex="$ASCEND_APEX" apex_from=ASCEND_APEX
fi
case "$apex" in
  ""|build|skip) ;;
  *) [ "$apex_from" = --apex ] && said="--apex $apex" || said="ASCEND_APEX=$apex"
     die "$said is not an apex choice; choose build (Ascend's apex, after tools/apex_sources.sh fetch) or skip" ;;
esac

# --check: the preflight (harness/preflight), under the host's python3 (standard library only; the training
# steps run in .venv or the image). It ends, on a host without the device, with the line that says so.
if [ "$check" = 1 ]; then
  host_python --check
  pf_args=("$platform" --prog reproduce.sh)
  [ -z "$image" ] || pf_args+=(--image "$image")
  [ "$where" != container ] || pf_args+=(--container)
  [ "$where" != native ] || pf_args+=(--native)
  cd "$here"
  PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" exec "$pf" -m harness.preflight "${pf_args[@]}"
fi

# The profile: quick (minutes on 2 cores) on a CPU; on a GPU or NPU host the one sized for a booked accelerator.
if [ -z "$profile" ]; then
  if [ "$platform" = cpu ]; then profile=quick; else profile=accelerator; fi
fi

# Where it runs: cpu natively unless asked otherwise; cuda and ascend in their image unless --native.
if [ -z "$where" ]; then
  if [ "$platform" = cpu ] && [ -z "$image" ]; then where=native; else where=container; fi
fi
if [ "$where" = native ] && { [ -n "$image" ] || [ "$apex_from" = --apex ] || { [ "$build" = 1 ] && [ "$platform" != cpu ]; }; }; then
  die "--native runs without a container; drop --image/--build/--apex, or drop --native"
fi

# --build builds what the run needs (.venv natively on cpu, else the image) and stops: what it will download, the
# disk it needs and its time are printed before it starts (harness/preflight/host.toml [build.*], under the
# host's python3 where there is one), what it took after; the run is the next, separate command.
build_plan() {  # build_plan native|container PATH [PYTHON]: the line said before a build (where a Python runs)
  local pf="${3:-$(command -v python3 || true)}"
  [ -n "$pf" ] || return 0
  (cd "$here" && PYTHONPATH="$here" "$pf" -m harness.preflight.buildplan "$platform" "$1" "$2" 2> /dev/null) >&2 || true
}
# The figures around a build are for the reader only: a df or du that fails (an odd mount, a file system that does
# not say) makes them "unknown", never the build's failure.
free_kb() { { df -Pk "$1" 2> /dev/null || true; } | awk 'NR == 2 && $4 ~ /^[0-9]+$/ { print $4 }'; }
kb() { { du -sk "$1" 2> /dev/null || true; } | awk '$1 ~ /^[0-9]+$/ { print $1 }'; }
gb() { if [ -n "$1" ]; then awk -v k="$1" 'BEGIN { printf "%.1f GB", k * 1024 / 1e9 }'; else echo unknown; fi; }
built() {  # built WHAT SECONDS KB PATH FREE_BEFORE_KB: the line said after a build, measured
  echo "reproduce.sh: built $1 in $(($2 / 60)) min $(($2 % 60)) s; it holds $(gb "$3"); free disk at $4: $(gb "$5")" \
    "before, $(gb "$(free_kb "$4")") after" >&2
}
apt_install() {  # as root: a host whose package lists were never fetched (a fresh container) gets them first
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" > /dev/null 2>&1 \
    || { apt-get update -qq > /dev/null 2>&1 \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" > /dev/null 2>&1; }
}
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
npus=()
chip="" chip_why="" chip_unknown=""
if [ "$platform" != cpu ]; then
  host_python "$platform"
  q=("$platform")
  [ "$dry" = 0 ] || q+=(--dry-run)
  [ "$build" = 0 ] || q+=(--build)
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
  if [ "$status" -eq 2 ]; then
    exit 2  # the harness refused its input and said why in one line
  fi
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
    stamp="$venv/.requirements.sha256"
    want="$(sha256sum "$lock" | cut -d' ' -f1)"
    py="$venv/bin/python"
    if [ "$dry" = 1 ]; then
      if [ "$build" = 1 ] || [ ! -x "$py" ] || [ "$(cat "$stamp" 2> /dev/null)" != "$want" ]; then
        show "${PYTHON:-python3.11}" -m venv "$venv"
        show "$py" -m pip install --require-hashes -r "$lock"
      fi
    elif [ "$build" = 1 ] || [ ! -x "$py" ] || [ "$(cat "$stamp" 2> /dev/null)" != "$want" ]; then
      # Stock Ubuntu 22.04 and 24.04 have Python 3.10 and 3.12, Debian 13 3.13: the CPU image needs no host Python.
      instead="add --container to run in the CPU image (docker or podman; no host Python needed), or install Python 3.11 and set PYTHON=/path/to/python3.11"
      base="${PYTHON:-$(command -v python3.11 || command -v python3 || true)}"
      [ -n "$base" ] || die "no python3 found, and the lock pins wheels for Python 3.11; $instead"
      ver="$("$base" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2> /dev/null)" \
        || die "$base does not run; $instead"
      [ "$ver" = 3.11 ] || die "$base is Python $ver, and the lock pins wheels for Python 3.11; $instead"
      # Debian and Ubuntu ship venv and ensurepip apart from python3.11 (python3.11-venv): without them `-m venv`
      # leaves a .venv with no pip. Installed here where this may (root, apt-get), else one line says who can.
      if ! "$base" -c 'import ensurepip, venv' > /dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
          echo "reproduce.sh: apt-get install python3.11-venv ($base cannot make a venv without it)" >&2
          apt_install python3.11-venv \
            || die "apt-get could not install python3.11-venv (run apt-get install python3.11-venv to see why); fix apt's sources, or add --container to run in the CPU image"
          "$base" -c 'import ensurepip, venv' > /dev/null 2>&1 \
            || die "$base cannot make a venv even with python3.11-venv installed (a Python not from Debian's package?); set PYTHON=/usr/bin/python3.11, or add --container to run in the CPU image"
        else
          die "$base cannot make a venv (no ensurepip/venv module): as root, apt-get install python3.11-venv (Debian/Ubuntu), or add --container to run in the CPU image"
        fi
      fi
      # MindSpore's CPU kernels link the system's OpenMP runtime, libgomp.so.1 (Debian's libgomp1, which the images
      # install; PyTorch's wheel carries its own): a minimal host lacks it, and every MindSpore cell would fail.
      if ! "$base" -c 'import ctypes.util, sys; sys.exit(ctypes.util.find_library("gomp") is None)' > /dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
          echo "reproduce.sh: apt-get install libgomp1 (MindSpore's CPU kernels need libgomp.so.1)" >&2
          apt_install libgomp1 \
            || die "apt-get could not install libgomp1, which MindSpore's CPU kernels need (run apt-get install libgomp1 to see why); fix apt's sources, or add --container to run in the CPU image"
        else
          echo "reproduce.sh: this host has no libgomp.so.1, which MindSpore's CPU kernels need: as root, apt-get install libgomp1 (Debian/Ubuntu); until then its cells fail, and --check says so" >&2
        fi
      fi
      build_plan native "$here" "$base"
      echo "reproduce.sh: making $venv from $lock (hash-checked; torch and mindspore are large)" >&2
      t_build=$(date +%s)
      free_before="$(free_kb "$here")"
      # A stale or half-made .venv is made again whole; the stamp, written last, marks it finished (the check
      # calls a .venv without it an interrupted build).
      rm -rf "$venv"
      "$base" -m venv "$venv" \
        || die "$base -m venv $venv failed (see its message above); fix that Python's venv module, or add --container to run in the CPU image"
      # The allocators the expected results were measured with (harness/host/allocator.py preloads them when present):
      # installed here where this may (root, apt-get or dnf); otherwise the line before the run says what differs.
      # Never fatal: the run goes on with another allocator, and says so.
      tool=""
      packages=()
      [ "$(id -u)" != 0 ] || ask "$base" allocators || true
      case "$tool" in
        apt-get) echo "reproduce.sh: apt-get install ${packages[*]} (the allocators of the expected results)" >&2
                 apt_install "${packages[@]}" || echo "reproduce.sh: apt-get could not install them; the run goes on without" >&2 ;;
        dnf) echo "reproduce.sh: dnf install ${packages[*]} (tcmalloc, the expected results' allocator)" >&2
             dnf install -y -q "${packages[@]}" > /dev/null 2>&1 || echo "reproduce.sh: dnf could not install it; the run goes on without" >&2 ;;
      esac
      # One retry per index: the lock names the PyTorch CPU index, which an air-gapped host cannot reach.
      # pip's own progress bars on a terminal (minutes of downloads); quiet in CI logs.
      quiet=(--quiet); [ -t 2 ] && quiet=(--progress-bar on)
      PIP_RETRIES="${PIP_RETRIES:-1}" "$venv/bin/python" -m pip install "${quiet[@]}" --require-hashes -r "$lock" \
        || die "installing $lock into $venv failed (see pip's message above); fix the network or the lock and run again"
      echo "$want" > "$stamp"
      built "$venv" $(($(date +%s) - t_build)) "$(kb "$venv")" "$here" "$free_before"
    fi
    if [ "$build" = 1 ]; then
      [ "$dry" = 1 ] || next_after_build
      exit 0
    fi
  else
    # The Python needs the selected cells' frameworks, or at least one of them: the cells of one it lacks are left
    # out (recorded as skipped), and said.
    py="${PYTHON:-python3}"
    q=("$platform" "$profile" "$py")
    [ -z "$only" ] || q+=("--only=$only")
    [ "$dry" = 0 ] || q+=(--dry-run)
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
engine="${CONTAINER_ENGINE:-}"
if [ -z "$engine" ]; then
  for candidate in docker podman; do
    if command -v "$candidate" > /dev/null && "$candidate" info > /dev/null 2>&1; then engine="$candidate"; break; fi
  done
fi
if [ -z "$engine" ]; then
  [ "$dry" = 1 ] || die "no container engine: neither docker nor podman is installed and answering (docker info / podman info); install one, or for cpu drop --container"
  engine=docker
elif [ "$dry" = 0 ] && ! { command -v "$engine" > /dev/null && "$engine" info > /dev/null 2>&1; }; then
  die "no container engine: $engine (CONTAINER_ENGINE) is not installed or does not answer '$engine info'"
fi
engine_name="$(basename "$engine")"
[ -z "$chip_unknown" ] || [ "$dry" = 1 ] || die "$chip_unknown"

dockerfile="$here/Dockerfile.$platform"
if [ "$platform" = ascend ]; then image="${image:-ms-pt-harness:ascend-$chip}"; fi
image="${image:-ms-pt-harness:$platform}"
need_build="$build"
if [ "$need_build" = 0 ] && ! "$engine" image inspect "$image" > /dev/null 2>&1; then
  need_build=1  # the images are not published: a missing one is built here
fi
# An apex choice the existing image was not built with (its label io.ms-pt-harness.apex begins with the choice): the
# image is built again with it.
if [ "$need_build" = 0 ] && [ -n "$apex" ]; then
  had="$("$engine" image inspect --format '{{ index .Config.Labels "io.ms-pt-harness.apex" }}' "$image" 2> /dev/null \
         || true)"
  if [ "${had%%:*}" != "$apex" ]; then
    was="with ASCEND_APEX=${had%%:*}"; [ -n "$had" ] || was="without an io.ms-pt-harness.apex label"
    echo "reproduce.sh: $image was built $was; building it again with ASCEND_APEX=$apex" >&2
    need_build=1
  fi
fi
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
# The caller's uid and gid inside, so the results are the caller's: --user for every engine, and rootless podman
# also maps them onto themselves with keep-id (rootful podman refuses it: "keep-id is only supported in rootless
# mode"). keep-id alone keeps the image's USER (1000), which can write the caller's folders only when the caller
# happens to be uid 1000.
# SELinux labels off for podman, or an enforcing host denies the bind mounts (NVIDIA's podman example does the same).
rootless=0
if [ "$engine_name" = podman ] \
   && [ "$("$engine" info --format '{{.Host.Security.Rootless}}' 2> /dev/null || echo true)" = true ]; then
  rootless=1
  common+=(--userns=keep-id)
fi
common+=(--user "$(id -u):$(id -g)")
[ "$engine_name" != podman ] || common+=(--security-opt=label=disable)
for var in HARNESS_NNODES HARNESS_NODE_RANK HARNESS_MASTER_ADDR HARNESS_MASTER_PORT; do
  [ -z "${!var:-}" ] || common+=(-e "$var=${!var}")
done
case "$platform" in
  ascend)
    # As the CANN image documentation runs it: each NPU, the management devices, the host's driver
    # libraries and npu-smi (read-only); host network for HCCL across servers.
    for d in "${npus[@]}"; do common+=(--device "$d"); done
    # The driver's device files belong to the HwHiAiUser group; keep it for the non-root user: rootless
    # podman passes the caller's own groups (keep-groups, with the crun runtime as podman-run(1) says; a numeric
    # group is not mapped in its user namespace), docker and rootful podman the group's numeric id.
    if [ "$rootless" = 1 ]; then
      common+=(--group-add keep-groups)
    else
      hw_gid="$(getent group HwHiAiUser 2> /dev/null | cut -d: -f3 || true)"
      [ -z "$hw_gid" ] || common+=(--group-add "$hw_gid")
    fi
    common+=(--device /dev/davinci_manager --device /dev/devmm_svm --device /dev/hisi_hdc
             -v /usr/local/dcmi:/usr/local/dcmi:ro
             -v /usr/local/bin/npu-smi:/usr/local/bin/npu-smi:ro
             -v /usr/local/Ascend/driver/lib64/:/usr/local/Ascend/driver/lib64/:ro
             -v /usr/local/Ascend/driver/version.info:/usr/local/Ascend/driver/version.info:ro
             -v /etc/ascend_install.info:/etc/ascend_install.info:ro
             --network host) ;;
  cuda)
    if [ "$engine_name" = podman ]; then
      # CDI (nvidia-ctk cdi generate)
      common+=(--device nvidia.com/gpu=all)
    else
      common+=(--gpus all)
    fi
    # The driver compiles PTX for a GPU a framework has no machine code for (MindSpore's kernels on an H100: see
    # docs/platforms/cuda.md) on first use; its cache is kept on the host, so a second run does not pay it again.
    jit_cache="${XDG_CACHE_HOME:-$HOME/.cache}/ms-pt-harness/cuda-jit"
    made+=("$jit_cache")
    common+=(--network host -v "$jit_cache:/cache/cuda-jit") ;;
esac
mounts=(-v "$out:/results")
in_data=(--data-dir /data)
fetch_cmd=()
only_args=()
[ -z "$only" ] || only_args=(--only "$only")
if [ "$synthetic" = all ]; then
  in_data=(--synthetic)
else
  # The datasets are fetched and verified first, in a container of their own that may write the data folder;
  # the run then reads them read-only.
  mounts+=(-v "$data_dir:/data:ro")
  [ -z "$synthetic" ] || in_data+=(--synthetic "$synthetic")
  # HARNESS_DATA_MIRROR: the datasets from a mirror (an air-gapped site's copy), as natively
  mirror=()
  [ -z "${HARNESS_DATA_MIRROR:-}" ] || mirror=(-e "HARNESS_DATA_MIRROR=$HARNESS_DATA_MIRROR")
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
  store="$("$engine" info --format "$([ "$engine_name" = podman ] && echo '{{.Store.GraphRoot}}' || echo '{{.DockerRootDir}}')" 2> /dev/null || true)"
  [ -d "$store" ] || store="$here"
  build_plan container "$store"
  echo "reproduce.sh: building $image from ${dockerfile##*/}" >&2
  t_build=$(date +%s)
  free_before="$(free_kb "$store")"
  "${build_cmd[@]}" || die "building $image from ${dockerfile##*/} failed (see $engine_name's output above)"
  size="$("$engine" image inspect --format '{{.Size}}' "$image" 2> /dev/null || true)"
  [[ "$size" =~ ^[0-9]+$ ]] && size=$((size / 1024)) || size=""
  built "$image" $(($(date +%s) - t_build)) "$size" "$store" "$free_before"
  if [ "$build" = 1 ]; then
    next_after_build
    exit 0
  fi
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

#!/usr/bin/env bash
# One command from a fresh checkout to the report:  ./reproduce.sh cpu|cuda|ascend [options]
#
# cpu     makes (or reuses) .venv from the hash-locked requirements/cpu.txt and runs natively.
# cuda,   run natively with the Python named by $PYTHON (default python3), which must already hold
# ascend  the platform's builds of torch (torch_npu) and mindspore; see ARTIFACT.md.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

usage() {
  cat >&2 <<'USAGE'
usage: ./reproduce.sh cpu|cuda|ascend [--quick|--full] [--out DIR] [--data-dir DIR] [--synthetic]
                      [--only GLOB] [--resume]

  cpu|cuda|ascend  the platform to measure (required)
  --quick          the kick-the-tires profile (default); --full: the paper's scale
  --out DIR        run folder (default: results/<platform>-<profile>-<date>)
  --data-dir DIR   datasets, one folder each (default: $HARNESS_DATA_DIR or ./data); missing files
                   are downloaded there and verified by sha256
  --synthetic      generated data of the real shapes instead of the datasets
  --only GLOB      only the cells whose id matches (see: python -m harness list)
  --resume         continue an earlier --out folder, keeping its finished cells
USAGE
}

die() { echo "reproduce.sh: $*" >&2; exit 2; }

platform="${1:-}"
case "$platform" in
  cpu|cuda|ascend) shift ;;
  -h|--help) usage; exit 0 ;;
  "") usage; die "no platform given; choose cpu, cuda or ascend" ;;
  *) usage; die "unknown platform '$platform'; choose cpu, cuda or ascend" ;;
esac

profile=quick
out=""
data_dir="${HARNESS_DATA_DIR:-$here/data}"
data_args=()
run_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) profile=quick ;;
    --full) profile=full ;;
    --out) [ $# -ge 2 ] || die "--out needs a folder"; out="$2"; shift ;;
    --data-dir) [ $# -ge 2 ] || die "--data-dir needs a folder"; data_dir="$2"; shift ;;
    --synthetic) data_args=(--synthetic) ;;
    --only) [ $# -ge 2 ] || die "--only needs a pattern"; run_args+=(--only "$2"); shift ;;
    --resume) run_args+=(--resume) ;;
    -h|--help) usage; exit 0 ;;
    *) usage; die "unknown option '$1'" ;;
  esac
  shift
done
[ ${#data_args[@]} -gt 0 ] || data_args=(--data-dir "$data_dir" --download)
out="${out:-$here/results/$platform-$profile-$(date +%Y%m%d-%H%M%S)}"

# --- the Python that runs the harness -------------------------------------------------------------
if [ "$platform" = cpu ]; then
  venv="$here/.venv"
  lock="$here/requirements/cpu.txt"
  stamp="$venv/.requirements.sha256"
  want="$(sha256sum "$lock" | cut -d' ' -f1)"
  if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    base="${PYTHON:-$(command -v python3.11 || command -v python3 || true)}"
    [ -n "$base" ] || die "no python3 found; install Python 3.11 or set PYTHON=/path/to/python3.11"
    ver="$("$base" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    [ "$ver" = 3.11 ] || die "$base is Python $ver; the lock file pins wheels for Python 3.11: install it or set PYTHON"
    echo "reproduce.sh: making $venv from $lock (hash-checked; torch and mindspore are large)" >&2
    "$base" -m venv "$venv"
    # One retry per index: the lock names the PyTorch CPU index, which an air-gapped host cannot reach.
    PIP_RETRIES="${PIP_RETRIES:-1}" "$venv/bin/python" -m pip install --quiet --require-hashes -r "$lock" \
      || die "installing $lock into $venv failed (see pip's message above); fix the network or the lock and run again"
    echo "$want" > "$stamp"
  fi
  py="$venv/bin/python"
else
  py="${PYTHON:-python3}"
  "$py" -c 'import torch, mindspore' 2>/dev/null \
    || die "$py cannot import torch and mindspore; install the $platform builds (see ARTIFACT.md) or set PYTHON"
fi

# --- run, then report (also after failed cells or Ctrl-C: what finished is shown) -----------------
cd "$here"
status=0
"$py" -m harness run --platform "$platform" --profile "$profile" --out "$out" "${data_args[@]}" "${run_args[@]}" \
  || status=$?
if [ "$status" -eq 2 ]; then
  exit 2  # the harness refused its input and said why in one line
fi
report="$("$py" -m harness report "$out")"
echo "report: $report"
echo "LaTeX:  $(dirname "$report")/report.tex and $(dirname "$report")/tables/"
exit "$status"

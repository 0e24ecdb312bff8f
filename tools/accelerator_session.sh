#!/usr/bin/env bash
# One short session on a booked GPU host, PyTorch natively (no MindSpore there), each stage cut at its own time limit
# so that the session fits a fixed budget, and everything each stage wrote packed under OUT as it ends:
#   B  the reference gap: the harness against PyTorch's own way of training the same networks (benchmarks/);
#   C  the profiled pass's device busy time against CUDA events (benchmarks/why_device.py);
#   A  the accelerator profile's PyTorch cells in its own order (the cells C1-C4 compare first), eager then compile,
#      at one repeat, stopped at the limit (a run cut short keeps what finished and renders its report);
#   D  the quick profile's PyTorch cells in its order, for their cost per cell on the device.
# The reports are rendered where the run folders are brought back (python -m harness report DIR).
# The comparisons first (B, C), then the profile runs, whose limits cut them short anyway.
# usage: tools/accelerator_session.sh OUT [PLATFORM]   (PLATFORM cuda by default; cpu tries the stages here, on the
# quick profile, with small sizes). Limits: A_S B_S C_S D_S seconds (environment).
set -u
out="${1:?usage: tools/accelerator_session.sh OUT [PLATFORM]}"
platform="${2:-cuda}"
py="${PYTHON:-python3}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
mkdir -p "$out"
work="$(mktemp -d)"
log="$out/session.log"
profile=accelerator; small=(); synth=(--synthetic cifar10)
if [ "$platform" = cpu ]; then profile=quick; small=(--tiny); fi

stage() {  # stage NAME LIMIT_S command...: the command under a time limit, its output in the session log
  local name="$1" limit="$2" t0 rc; shift 2
  t0=$(date +%s)
  echo "=== $name: limit ${limit} s; load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
  timeout -s INT -k 30 "$limit" "$@" >> "$log" 2>&1
  rc=$?
  echo "=== $name: rc=$rc in $(( $(date +%s) - t0 )) s; load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
}
pack() {  # pack NAME FOLDER: the folder as OUT/NAME.tgz (the profiler's raw traces left out: the op tables stay)
  [ -d "$2" ] && tar czf "$out/$1.tgz" --exclude='*.pt.trace.json*' --exclude='*.json.gz' -C "$(dirname "$2")" "$(basename "$2")"
}

{ echo "platform $platform, profile $profile"; nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit \
    --format=csv,noheader 2> /dev/null; "$py" -c 'import sys, torch; print(sys.version.split()[0], torch.__version__)'
  git -C "$here" log -1 --format='commit %H' 2> /dev/null; } >> "$log" 2>&1

# B: the reference gap at fp32 and AMP for ResNet50, the GRU and BERT.
stage B-gap "${B_S:-210}" "$py" benchmarks/reference_gap.py --preset accelerator --platform "$platform" "${small[@]}" \
  --data-dir "${HARNESS_DATA_DIR:-$here/data}" --out "$out/reference_gap.json"

# C: the profiled pass against CUDA events.
stage C-why "${C_S:-40}" "$py" benchmarks/why_device.py --platform "$platform" --out "$out/why_device.json"

# A: eager first (C1-C4's cells and BERT-base), then compile, in one run folder.
run=("$py" -m harness run --platform "$platform" --profile "$profile" --out "$work/accel" "${synth[@]}"
     --repeats 1 --max-repeats 1)
stage A-eager "${A_S:-240}" "${run[@]}" --only 'model/*/pytorch/eager/*'
pack accel "$work/accel"
stage A-compile "${A2_S:-45}" "${run[@]}" --resume --only 'model/*/pytorch/eager/*,model/*/pytorch/compile/*'
pack accel "$work/accel"

# D: the quick profile's PyTorch cells in its order, for their cost per cell here.
stage D-quick "${D_S:-50}" "$py" -m harness run --platform "$platform" --profile quick --out "$work/quick" \
  "${synth[@]}" --repeats 1 --max-repeats 1 --only 'model/*/pytorch/*,operator/*/pytorch/*,inference/*/pytorch/*'
pack quick "$work/quick"
echo "=== end" >> "$log"

# Checks of the CUDA image that need no GPU; sourced by tools/check_image.sh --cuda, which defines
# buildah, ctr, mounts, runs, data_args, ctr_run, inside and fail. Each check prints what it saw, and each failure its
# `fail` line (a command whose failure is the verdict is guarded, so that set -e and pipefail do not end the check
# before that line).

# 5b. What a GPU host relies on, checked in the built image.
cuda_checks() {
  local arch fatbins ldd_out missing wrong torch_home
  # Each framework asked for the GPU in its cells' environment: without a driver, the driver must be the only
  # thing missing (tools/gpu_probe.py says what else it found). The probe's lines are kept beside the results.
  # (check_image.sh's mounts already carry tools/ at /tools.)
  inside python /tools/gpu_probe.py mindspore pytorch > "$runs/gpu_probe.jsonl" 2> "$runs/gpu_probe.err" \
    || { [ -s "$runs/gpu_probe.jsonl" ] || { tail -5 "$runs/gpu_probe.err" >&2; fail "tools/gpu_probe.py did not run in the image"; }
         python3 -c 'import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line); print("   ", r["framework"], r["verdict"], "| output:", r["output"][-600:], file=sys.stderr)' \
           "$runs/gpu_probe.jsonl"; fail "a framework failed on the GPU for a reason other than the missing driver"; }
  python3 -c 'import json, re, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    why = [l for l in r["output"].splitlines() if re.search(r"libmindspore_gpu|NVIDIA driver|libcuda", l)]
    print("check_image:", r["framework"], "on the GPU without a driver fails for the driver alone:",
          (why or [r["verdict"]])[-1][:300], file=sys.stderr)' "$runs/gpu_probe.jsonl"
  # torch.cuda.get_arch_list() is empty without a GPU (it asks is_available() first); the list it would
  # return is the build's, which torch._C._cuda_getArchFlags() gives without a device.
  arch="$(inside python -c 'import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), torch._C._cuda_getArchFlags())')" \
    || fail "torch does not import in the CUDA image"
  echo "check_image: torch version, CUDA, cuDNN, compiled architectures: $arch" >&2
  for sm in sm_70 sm_90; do
    grep -qw "$sm" <<< "$arch" || fail "torch in the image has no $sm kernels (compiled for: $arch)"
  done
  # The same from the binaries: the GPU code each library carries (tools/fatbin_archs.py reads the fat binaries).
  fatbins="$(ctr_run --volume "$root/tools:/tools:ro" -- bash -c \
    'sp=/opt/venv/lib/python3.11/site-packages; python /tools/fatbin_archs.py $sp/torch/lib/libtorch_cuda.so \
       $sp/mindspore/lib/plugin/gpu/libcuda_ops.so.11 /opt/cuda11/toolkit/lib64/libcudnn_cnn_infer.so.8 \
       /opt/cuda11/toolkit/lib64/libcublasLt.so.11')" || fail "could not read the fat binaries of the CUDA libraries"
  sed 's/^/    /; s|/opt/venv/lib/python3.11/site-packages/||' <<< "$fatbins" >&2
  fatbin_has() {  # fatbin_has LIBRARY KIND SM: that library carries KIND (sass|ptx) code for SM
    grep "/$1: " <<< "$fatbins" | sed "s/^[^:]*://" | grep -qE "$2( sm_[0-9]+)* $3( |\$)"
  }
  fatbin_has libtorch_cuda.so sass sm_70 && fatbin_has libtorch_cuda.so sass sm_90 \
    || fail "libtorch_cuda.so carries no sm_70 or no sm_90 machine code"
  fatbin_has libcuda_ops.so.11 sass sm_70 && fatbin_has libcuda_ops.so.11 sass sm_80 \
    || fail "MindSpore's libcuda_ops.so.11 carries no sm_70 or no sm_80 machine code"
  grep "/libcuda_ops.so.11: " <<< "$fatbins" | grep -q " ptx sm_" \
    || fail "MindSpore's libcuda_ops.so.11 carries no PTX: newer GPUs (H100) could not JIT its kernels"
  fatbin_has libcudnn_cnn_infer.so.8 sass sm_90 || fail "cuDNN 8 (CUDA 11 build) in the image has no sm_90 code"
  fatbin_has libcublasLt.so.11 sass sm_90 || fail "cuBLAS 11 (CUDA 11 build) in the image has no sm_90 code"
  gpu_arch_labels "$arch" "$fatbins"

  # MindSpore's GPU plug-in: every NEEDED library must resolve inside the image except libcuda.so.1, its CUDA ones
  # from MindSpore's CUDA_HOME (/opt/cuda11/toolkit/lib64, on the loader's path in MindSpore's cells only).
  ldd_out="$(inside bash -c 'export LD_LIBRARY_PATH="$HARNESS_MINDSPORE_CUDA_HOME/lib64"; ldd "$(python -c "import mindspore, os; print(os.path.dirname(mindspore.__file__))")/lib/plugin/libmindspore_gpu.so.11.6"')" \
    || fail "ldd could not read MindSpore's libmindspore_gpu.so.11.6 in the image"
  echo "check_image: ldd libmindspore_gpu.so.11.6 (CUDA libraries):" >&2
  # (grep finds nothing where every library resolves: under pipefail its exit 1 would end the check before the verdict)
  { grep -E 'libcu|libnvrtc|not found' <<< "$ldd_out" || true; } | sed 's/^\s*/    /' >&2
  missing="$({ grep 'not found' <<< "$ldd_out" || true; } | awk '{print $1}' | sort -u | tr '\n' ' ')"
  [ "$missing" = "libcuda.so.1 " ] \
    || fail "libmindspore_gpu.so.11.6 has unresolved libraries besides the driver's libcuda.so.1: '$missing'"
  wrong="$(grep -E '^\s*lib(cudart|cublas|cublasLt|cudnn|cufft|curand|cusolver|cusparse|nvrtc)\.so' <<< "$ldd_out" \
           | grep -v '=> /opt/cuda11/toolkit/lib64/' || true)"
  [ -z "$wrong" ] || fail "CUDA 11 libraries of the MindSpore plug-in resolve outside /opt/cuda11/toolkit/lib64: $wrong"
  # cuDNN 8 loads its sub-libraries (libcudnn_*_infer/train.so.8) itself: those must resolve too.
  missing="$(inside bash -c 'export LD_LIBRARY_PATH="$HARNESS_MINDSPORE_CUDA_HOME/lib64"; for f in "$LD_LIBRARY_PATH"/*.so*; do ldd "$f" | sed -n "s/^\s*\(\S*\) => not found/\1/p"; done' | sort -u | tr '\n' ' ')" \
    || fail "ldd could not read the libraries in /opt/cuda11/toolkit/lib64 in the image"
  [ -z "$missing" ] || [ "$missing" = "libcuda.so.1 " ] \
    || fail "libraries in /opt/cuda11/toolkit/lib64 need libraries the image lacks: $missing"
  echo "check_image: every library under /opt/cuda11/toolkit/lib64 resolves${missing:+ (but libcuda.so.1)}" >&2
  # PyTorch's CUDA 12 build must not find the CUDA 11 tree where it looks for a CUDA home (CUDA_HOME, CUDA_PATH,
  # nvcc on PATH, /usr/local/cuda): extensions and torch.compile's C++ paths would build against CUDA 11.
  torch_home="$(inside python -c 'import torch.utils.cpp_extension as c; print(c.CUDA_HOME)')" \
    || fail "could not ask torch.utils.cpp_extension for its CUDA home"
  [ "$torch_home" = None ] || fail "PyTorch sees a CUDA toolkit at $torch_home (it must see none: CUDA 11 is MindSpore's)"
  echo "check_image: torch.utils.cpp_extension.CUDA_HOME is None (PyTorch sees no CUDA 11 toolkit)" >&2
  echo "check_image: libcuda.so.1 is the NVIDIA driver's: the container toolkit mounts it from the host at run time" >&2

  mindspore_env_check
  cuda_jit_cache_check

  inside python -m harness env > "$runs/env.json" || fail "python -m harness env failed in the CUDA image"
  python3 -c 'import json, sys; e = json.load(open(sys.argv[1])); p = e.get("packages", {}); \
print("check_image: harness env:", {k: p.get(k) for k in ("torch", "mindspore", "numpy")}, "container:", e.get("container"))' \
    "$runs/env.json" >&2 || fail "python -m harness env in the CUDA image did not print JSON"
}

# The image's per-framework GPU architecture labels must say what the binaries carry: torch's machine code is its
# build's architecture list (and libtorch_cuda.so carries no PTX); MindSpore's machine code and PTX are exactly what
# its kernel library, libcuda_ops.so.11, carries. A label that drifts from the wheels fails here.
gpu_arch_labels() {  # gpu_arch_labels TORCH_ARCH_LINE FATBINS
  local torch_label ms_label
  torch_label="$(image_label io.ms-pt-harness.gpu_arch.torch)" || fail "could not read the image's gpu_arch.torch label"
  ms_label="$(image_label io.ms-pt-harness.gpu_arch.mindspore)" || fail "could not read the image's gpu_arch.mindspore label"
  echo "check_image: label gpu_arch.torch: $torch_label" >&2
  echo "check_image: label gpu_arch.mindspore: $ms_label" >&2
  python3 - "$1" "$2" "$torch_label" "$ms_label" <<'EOF' || fail "the image's gpu_arch labels do not match the GPU code its libraries carry"
import re, sys
arch_line, fatbins, torch_label, ms_label = sys.argv[1:]
fat = {}
for line in fatbins.splitlines():
    path, _, rest = line.partition(": ")
    kinds, kind = {"sass": set(), "ptx": set()}, None
    for word in rest.split():
        if word in kinds:
            kind = word
        else:
            kinds[kind].add(int(word.removeprefix("sm_")))
    fat[path.rsplit("/", 1)[-1]] = kinds
def nums(text, prefix):
    return {int(n) for n in re.findall(prefix + r"_(\d+)", text)}
torch_sass = nums(torch_label.split(" machine code")[0], "sm")
ms_sass = nums(ms_label.split(" machine code")[0], "sm")
ms_ptx = nums(ms_label.split("; ")[1].split(" PTX")[0], "compute")
torch_lib, ms_lib = fat["libtorch_cuda.so"], fat["libcuda_ops.so.11"]
problems = []
if torch_sass != nums(arch_line, "sm"):
    problems.append(f"torch label {sorted(torch_sass)} != torch's compiled architectures {sorted(nums(arch_line, 'sm'))}")
if not torch_sass <= torch_lib["sass"] or torch_lib["ptx"]:
    problems.append(f"libtorch_cuda.so carries {torch_lib}; the torch label says {sorted(torch_sass)} and no PTX")
if (ms_sass, ms_ptx) != (ms_lib["sass"], ms_lib["ptx"]):
    problems.append(f"libcuda_ops.so.11 carries {ms_lib}; the mindspore label says {sorted(ms_sass)}, PTX {sorted(ms_ptx)}")
if 90 not in ms_lib["sass"] and "JIT" not in ms_label:
    problems.append("the mindspore label must say that sm_90 goes through PTX JIT")
for problem in problems:
    print("   ", problem, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
  echo "check_image: the gpu_arch labels match torch's architecture list, libtorch_cuda.so and libcuda_ops.so.11" >&2
}
image_label() {  # image_label KEY: the value of one of the image's labels (from the working container)
  "${buildah[@]}" inspect --type container --format "{{index .OCIv1.Config.Labels \"$1\"}}" "$ctr"
}

# MindSpore's own GPU environment check, in a MindSpore cell's environment (harness/frameworks/mindspore.py): the
# callback mindspore/run_check/_check_version.py registers, set_env("GPU", <plug-in>), which MindSpore runs once it
# has loaded its GPU plug-in (without a GPU the plug-in never loads, so it is called here the same way). It reads the
# CUDA version from the libcudart.so.X.Y.Z beside the libcudart the plug-in links and puts lib/plugin/gpuX.Y first on
# LD_LIBRARY_PATH. It must read the locked cudart's version, not warn "Cannot find cuda libs", and the folder must
# exist and be gpu11.6, the folder of the libmindspore_gpu.so.11.6 MindSpore's loader picks. Then the same call with
# the CUDA 11 libraries under their sonames alone (how the image had them before: it read "0", gpu0.0), to show the
# check tells the two apart. Each run's output is printed.
mindspore_env_check() {
  local want out control
  want="$(sed -n 's/^nvidia-cuda-runtime-cu11==\([0-9.]*\).*/\1/p' "$root/requirements/cuda11-libs.txt")"
  [ -n "$want" ] || fail "no nvidia-cuda-runtime-cu11 pin in requirements/cuda11-libs.txt"
  cat > "$runs/mindspore_env_check.py" <<'EOF'
import os
import sys

if "MS_ENV_CHECK_CHILD" not in os.environ:  # re-run with a MindSpore cell's environment, as the runner starts it
    from harness.frameworks import mindspore as framework
    env = {**os.environ, **framework.process_env("cuda"), "MS_ENV_CHECK_CHILD": "1"}
    if len(sys.argv) > 1:  # a CUDA home whose lib64 holds the libraries under their sonames only
        env["LD_LIBRARY_PATH"] = f"{sys.argv[1]}/lib64"
    os.execve(sys.executable, [sys.executable, *sys.argv], env)

import mindspore
from mindspore.run_check import _check_version

plugin = os.path.join(os.path.dirname(mindspore.__file__), "lib", "plugin", "libmindspore_gpu.so.11.6")
print("LD_LIBRARY_PATH before the check:", os.environ.get("LD_LIBRARY_PATH"), flush=True)
_check_version.set_env("GPU", plugin)
checker = _check_version.GPUEnvChecker(plugin)
first = os.environ["LD_LIBRARY_PATH"].split(":")[0]
print("cuda libs at:", " ".join(checker.cuda_lib_path), "| cudart version read:", checker.get_cudart_version())
print("plug-in folder first on LD_LIBRARY_PATH:", first, "| exists:", os.path.isdir(first),
      "| resolves to:", os.path.realpath(first))
print("CUDA_CACHE_MAXSIZE set by the check:", os.environ.get("CUDA_CACHE_MAXSIZE"))
EOF
  out="$(inside python /results/mindspore_env_check.py 2>&1)" \
    || { sed 's/^/    /' <<< "$out" >&2; fail "MindSpore's GPU environment check raised in the image"; }
  echo "check_image: MindSpore's GPU environment check (set_env('GPU', libmindspore_gpu.so.11.6)) in the image:" >&2
  sed 's/^/    /' <<< "$out" >&2
  grep -q "cudart version read: $want\$" <<< "$out" || fail "MindSpore's check did not read the locked cudart $want"
  if grep -q "Cannot find cuda libs" <<< "$out"; then fail "MindSpore's check warns 'Cannot find cuda libs' in the image"; fi
  if grep -q "is not found" <<< "$out"; then fail "MindSpore's check does not find a CUDA library its plug-in links"; fi
  grep -qE "plug-in folder first on LD_LIBRARY_PATH: \S+/mindspore/lib/plugin/gpu[0-9.]+ \| exists: True \| resolves to: \S+/mindspore/lib/plugin/gpu11\.6\$" <<< "$out" \
    || fail "MindSpore's check did not put an existing gpu11.6 plug-in folder first on LD_LIBRARY_PATH"
  # shellcheck disable=SC2016  # expanded in the container
  control="$(inside bash -c 'd=/tmp/cuda11-sonames && mkdir -p $d/lib64 && ln -sf /opt/cuda11/nvidia/*/lib/lib*.so* $d/lib64/ \
    && ln -sfn "$HARNESS_MINDSPORE_CUDA_HOME/bin" $d/bin && python /results/mindspore_env_check.py $d' 2>&1)" \
    || { sed 's/^/    /' <<< "$control" >&2; fail "MindSpore's GPU environment check raised with the sonames only"; }
  echo "check_image: the same check with the CUDA 11 libraries under their sonames only (the image before):" >&2
  sed 's/^/    /' <<< "$control" >&2
  grep -q "Cannot find cuda libs" <<< "$control" && grep -q "cudart version read: 0\$" <<< "$control" \
    || fail "the check no longer tells the sonames-only layout from the image's, so it cannot show what it checks"
  echo "check_image: MindSpore's check reads cudart $want and puts gpu11.6 on the library path (sonames only: 0, gpu0.0)" >&2
}

# The driver's PTX JIT cache: CUDA_CACHE_PATH is /cache/cuda-jit (reproduce.sh mounts a kept host folder there), and
# a uid the image does not know (the container runs as the caller's) can write to it, also without the mount.
cuda_jit_cache_check() {
  local got label
  if ctr_run --user 4242:4242 -- id -un > /dev/null 2>&1; then
    fail "uid 4242 has a passwd entry in the image; the cache check needs a uid without one"
  fi
  # shellcheck disable=SC2016  # expanded in the container
  got="$(ctr_run --user 4242:4242 -- bash -c \
    'd="$CUDA_CACHE_PATH/probe.$$" && mkdir "$d" && echo x > "$d/f" && rm -r "$d" \
     && echo "$CUDA_CACHE_PATH $CUDA_CACHE_MAXSIZE $(stat -c %a "$CUDA_CACHE_PATH")"')" \
    || fail "uid 4242 cannot write to CUDA_CACHE_PATH in the image"
  label="$(image_label io.ms-pt-harness.cuda_jit_cache)" || fail "could not read the image's cuda_jit_cache label"
  echo "check_image: as uid 4242: CUDA_CACHE_PATH, CUDA_CACHE_MAXSIZE, mode: $got (label cuda_jit_cache: $label)" >&2
  [ "$got" = "/cache/cuda-jit 4294967296 1777" ] && [ "$label" = /cache/cuda-jit ] \
    || fail "the PTX JIT cache is not /cache/cuda-jit, 4 GiB, writable by any uid: $got (label: $label)"
}

# 8. torch.compile as a uid the image does not know (reproduce.sh runs the image as the caller's uid).
cuda_compile_cell() {
  local cell='model/gcn/pytorch/compile/amp-off/1dev' matrix="$runs/matrix-compile.toml"
  # One repeat of the full profile's compile cell: a copy of the matrix with repeats = 1.
  sed 's/^repeats = 3$/repeats = 1/' "$root/harness/config/matrix.toml" > "$matrix"
  grep -q '^repeats = 3$' "$matrix" && fail "could not make a one-repeat matrix for the compile cell"
  mkdir -p "$runs/compile-uid"
  chown 4242:4242 "$runs/compile-uid" "$matrix" 2> /dev/null || chmod 0777 "$runs/compile-uid"
  if ctr_run --user 4242:4242 "${mounts[@]}" -- id -un > /dev/null 2>&1; then
    fail "uid 4242 has a passwd entry in the image; the compile check needs a uid without one"
  fi
  echo "check_image: running $cell as uid 4242 (no passwd entry)" >&2
  ctr_run --limit 1800 --user 4242:4242 "${mounts[@]}" -- \
      python -m harness run --platform cpu --profile full --matrix /results/matrix-compile.toml --only "$cell" \
      "${data_args[@]}" --out /results/compile-uid/run \
    || echo "check_image: harness run (compile cell) exited non-zero; checking the result" >&2
  python3 - "$runs/compile-uid/run" <<'EOF' || fail "the compile cell is not ok as uid 4242 (results: $runs/compile-uid/run)"
import json, sys
from pathlib import Path
results = [json.loads(p.read_text()) for p in sorted((Path(sys.argv[1]) / "cells").rglob("r*.json")) if p.name[1:-5].isdigit()]
for r in results:
    print(f"  {r.get('status', '?'):8} {r['cell']}  best={r.get('best_metric')}  time_to_target_s={r.get('time_to_target_s')}"
          f"  first_epoch_throughput={r.get('first_epoch_throughput')}  {r.get('reason') or ''}", file=sys.stderr)
if len(results) != 1 or results[0].get("status") != "ok":
    sys.exit("not ok")
EOF
}

# Checks of the CUDA image that need no GPU; sourced by tools/check_image.sh --cuda, which defines
# buildah, ctr, mounts, runs, data_args, inside and fail. Each check prints what it saw.

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
  fatbins="$("${buildah[@]}" run --isolation chroot --volume "$root/tools:/tools:ro" "$ctr" -- bash -c \
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

  # MindSpore's GPU plug-in: every NEEDED library must resolve inside the image except libcuda.so.1, its CUDA ones
  # from MindSpore's CUDA_HOME (/opt/cuda11/toolkit/lib64, on the loader's path in MindSpore's cells only).
  ldd_out="$(inside bash -c 'export LD_LIBRARY_PATH="$HARNESS_MINDSPORE_CUDA_HOME/lib64"; ldd "$(python -c "import mindspore, os; print(os.path.dirname(mindspore.__file__))")/lib/plugin/libmindspore_gpu.so.11.6"')" \
    || fail "ldd could not read MindSpore's libmindspore_gpu.so.11.6 in the image"
  echo "check_image: ldd libmindspore_gpu.so.11.6 (CUDA libraries):" >&2
  grep -E 'libcu|libnvrtc|not found' <<< "$ldd_out" | sed 's/^\s*/    /' >&2
  missing="$(grep 'not found' <<< "$ldd_out" | awk '{print $1}' | sort -u | tr '\n' ' ')"
  [ "$missing" = "libcuda.so.1 " ] \
    || fail "libmindspore_gpu.so.11.6 has unresolved libraries besides the driver's libcuda.so.1: '$missing'"
  wrong="$(grep -E '^\s*lib(cudart|cublas|cublasLt|cudnn|cufft|curand|cusolver|cusparse|nvrtc)\.so' <<< "$ldd_out" \
           | grep -v '=> /opt/cuda11/toolkit/lib64/' || true)"
  [ -z "$wrong" ] || fail "CUDA 11 libraries of the MindSpore plug-in resolve outside /opt/cuda11/toolkit/lib64: $wrong"
  # cuDNN 8 loads its sub-libraries (libcudnn_*_infer/train.so.8) itself: those must resolve too.
  missing="$(inside bash -c 'export LD_LIBRARY_PATH="$HARNESS_MINDSPORE_CUDA_HOME/lib64"; for f in "$LD_LIBRARY_PATH"/*.so*; do ldd "$f" | sed -n "s/^\s*\(\S*\) => not found/\1/p"; done' | sort -u | tr '\n' ' ')"
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

  inside python -m harness env > "$runs/env.json" || fail "python -m harness env failed in the CUDA image"
  python3 -c 'import json, sys; e = json.load(open(sys.argv[1])); p = e.get("packages", {}); \
print("check_image: harness env:", {k: p.get(k) for k in ("torch", "mindspore", "numpy")}, "container:", e.get("container"))' \
    "$runs/env.json" >&2 || fail "python -m harness env in the CUDA image did not print JSON"
}

# 8. torch.compile as a uid the image does not know (reproduce.sh runs the image as the caller's uid).
cuda_compile_cell() {
  local cell='model/gcn/pytorch/compile/amp-off/1dev' matrix="$runs/matrix-compile.toml"
  # One repeat of the full profile's compile cell: a copy of the matrix with repeats = 1.
  sed 's/^repeats = 3$/repeats = 1/' "$root/harness/matrix.toml" > "$matrix"
  grep -q '^repeats = 3$' "$matrix" && fail "could not make a one-repeat matrix for the compile cell"
  mkdir -p "$runs/compile-uid"
  chown 4242:4242 "$runs/compile-uid" "$matrix" 2> /dev/null || chmod 0777 "$runs/compile-uid"
  if "${buildah[@]}" run --isolation chroot --user 4242:4242 "${mounts[@]}" "$ctr" -- id -un > /dev/null 2>&1; then
    fail "uid 4242 has a passwd entry in the image; the compile check needs a uid without one"
  fi
  echo "check_image: running $cell as uid 4242 (no passwd entry)" >&2
  timeout 1800 "${buildah[@]}" run --isolation chroot --user 4242:4242 "${mounts[@]}" "$ctr" -- \
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

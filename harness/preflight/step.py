"""The preflight's last check: one SGD step of a tiny MLP (8 -> 16 -> 1, MSE) in one framework on the device.

    python -m harness preflight-step --platform cpu|cuda|ascend --framework pytorch|mindspore

runs where the cells run: in .venv (cpu), in the image (cuda, ascend; its entrypoint is `python -m harness`), or
with $PYTHON (--native). It prints one line, `ok: ...` (framework version, device, the loss before and after the
step) or `error: <the exception's first line>`, and exits 0 or 1. `launch()` builds that command on the host side
(the container flags as reproduce.sh passes them: tests/test_preflight.py compares the two) and `summary()` reads
its output, adding the shared library a GPU plug-in could not open when the framework logged one (MindSpore logs
`libmindspore_gpu.so.11.6 failed. libcuda.so.1: cannot open shared object file` before its exception).
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys

FRAMEWORKS = ("pytorch", "mindspore")
TIMEOUT_S = 300
_TORCH_DEVICE = {"cpu": "cpu", "cuda": "cuda:0", "ascend": "npu:0"}
_MS_TARGET = {"cpu": "CPU", "cuda": "GPU", "ascend": "Ascend"}


def _data(n: int = 32):
    import numpy as np

    rng = np.random.default_rng(0)
    return rng.standard_normal((n, 8)).astype(np.float32), rng.standard_normal((n, 1)).astype(np.float32)


def step_pytorch(platform: str) -> str:
    import torch

    if platform == "ascend":
        import torch_npu  # noqa: F401  (registers the npu device)
    device = _TORCH_DEVICE[platform]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = (torch.from_numpy(a).to(device) for a in _data())
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        after = torch.nn.functional.mse_loss(model(x), y).item()
    name = device
    if platform == "cuda":
        name = f"{device} ({torch.cuda.get_device_name(0)}, CUDA {torch.version.cuda})"
    return _verdict(f"torch {torch.__version__}", name, loss.item(), after)


def step_mindspore(platform: str) -> str:
    import mindspore as ms
    from mindspore import nn

    ms.set_device(_MS_TARGET[platform])
    ms.set_seed(0)
    net = nn.SequentialCell([nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 1)])
    loss_fn = nn.MSELoss()
    opt = nn.SGD(net.trainable_params(), learning_rate=0.1)

    def forward(x, y):
        return loss_fn(net(x), y)

    grad_fn = ms.value_and_grad(forward, None, opt.parameters)
    x, y = (ms.Tensor(a) for a in _data())
    loss, grads = grad_fn(x, y)
    opt(grads)
    after = float(forward(x, y).asnumpy())
    return _verdict(f"mindspore {ms.__version__}", ms.get_context("device_target"), float(loss.asnumpy()), after)


def _verdict(what: str, device: str, before: float, after: float) -> str:
    if not (math.isfinite(before) and math.isfinite(after)):
        raise RuntimeError(f"the loss is not finite ({before} -> {after})")
    if after >= before:
        raise RuntimeError(f"one SGD step did not lower the loss ({before:.4f} -> {after:.4f})")
    return f"{what} on {device}: one SGD step, loss {before:.4f} -> {after:.4f}"


def main(platform: str, framework: str) -> int:
    """The `preflight-step` command: one line on stdout, exit 0 (ok) or 1 (error)."""
    try:
        line = (step_pytorch if framework == "pytorch" else step_mindspore)(platform)
    except Exception as e:  # noqa: BLE001 - any failure is the answer: its first line is reported
        first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), "")
        print(f"error: {type(e).__name__}: {first}"[:400], flush=True)
        return 1
    print(f"ok: {line}", flush=True)
    return 0


# --- host side ----------------------------------------------------------------------------------------------------


def device_flags(platform: str, podman: bool, rootless: bool, npus: list[str], hw_gid: int | None) -> list[str]:
    """What `ENGINE run` needs to reach the platform's devices: every GPU (docker's --gpus, podman's CDI request);
    each NPU in `npus`, the driver's group, the management devices and the host's driver files (read-only), as the
    CANN image documentation runs it. reproduce.sh's run lines and the step's container both take them from here."""
    if platform == "cuda":
        return ["--device", "nvidia.com/gpu=all"] if podman else ["--gpus", "all"]
    if platform != "ascend":
        return []
    flags = [arg for dev in npus for arg in ("--device", dev)]
    # The driver's device files belong to the HwHiAiUser group; it is kept for a non-root user: rootless podman
    # passes the caller's own groups (keep-groups, with the crun runtime as podman-run(1) says; a numeric group is not
    # mapped in its user namespace), docker and rootful podman the group's numeric id.
    if rootless:
        flags += ["--group-add", "keep-groups"]
    elif hw_gid is not None:
        flags += ["--group-add", str(hw_gid)]
    return flags + ["--device", "/dev/davinci_manager", "--device", "/dev/devmm_svm", "--device", "/dev/hisi_hdc",
                    "-v", "/usr/local/dcmi:/usr/local/dcmi:ro",
                    "-v", "/usr/local/bin/npu-smi:/usr/local/bin/npu-smi:ro",
                    "-v", "/usr/local/Ascend/driver/lib64/:/usr/local/Ascend/driver/lib64/:ro",
                    "-v", "/usr/local/Ascend/driver/version.info:/usr/local/Ascend/driver/version.info:ro",
                    "-v", "/etc/ascend_install.info:/etc/ascend_install.info:ro"]


def container_flags(platform: str, engine: str, facts: dict) -> list[str]:
    """The device and user flags reproduce.sh gives `ENGINE run` for this platform (its `common` array, less the
    run's mounts), so the step meets the devices as the cells will."""
    podman = os.path.basename(engine) == "podman"
    rootless = podman and facts.get("rootless", True)   # rootful podman refuses keep-id and keep-groups
    user = facts.get("user", {})
    uid_gid = f"{user.get('uid', os.getuid())}:{user.get('gid', os.getgid())}"
    flags = (["--userns=keep-id"] if rootless else []) + ["--user", uid_gid]
    if podman:
        flags += ["--security-opt=label=disable"]
    npus = [dev for dev, state in facts.get("ascend_devices", {}).items()
            if re.match(r"^/dev/davinci\d+$", dev) and state.get("exists")]
    return flags + device_flags(platform, podman, rootless, npus, user.get("hw_gid"))


def launch(platform: str, framework: str, facts: dict) -> list[str]:
    """The command that runs the step: in the image, or with the native Python."""
    args = ["preflight-step", "--platform", platform, "--framework", framework]
    if facts.get("mode") == "container":
        engine = facts["engine"]
        return [engine, "run", "--rm", *container_flags(platform, engine, facts), facts["image"], *args]
    python = facts.get("venv", {}).get("python") or facts.get("step_python") or sys.executable
    return [python, "-m", "harness", *args]


def run(cmd: list[str], cwd: str, timeout: float = TIMEOUT_S):
    """Run one step; its Output (harness.preflight.host) with the step's line first."""
    from harness.preflight.host import Output

    try:  # MindSpore's log stays as it is: the line naming a plug-in library it could not load may be a warning
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False)
    except FileNotFoundError:
        return Output(None, f"{cmd[0]} not found")
    except subprocess.TimeoutExpired:
        return Output(124, f"error: no answer within {timeout:.0f} s")
    return Output(p.returncode, (p.stdout or "") + (p.stderr or ""))


def summary(text: str) -> str:
    """The step's own line (`ok: ...` / `error: ...`), else the output's last line (a crash or an engine error),
    plus a shared library a plug-in could not open, when the output names one."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    own = [ln for ln in lines if ln.startswith(("ok: ", "error: "))]
    line = own[-1] if own else (lines[-1] if lines else "no output")
    if line.startswith("ok: "):
        return line[4:]
    lib = re.search(r"([\w.+-]+\.so[\w.]*) failed\.?\s*([\w.+-]+\.so[\w.]*): cannot open shared object file", text)
    if lib and lib.group(2) not in line:
        line += f" ({lib.group(1)}: {lib.group(2)}: cannot open shared object file)"
    return line[7:] if line.startswith("error: ") else line

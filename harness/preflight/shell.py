"""`python3 -m harness.preflight.shell QUESTION ...`: what reproduce.sh asks Python to decide, so that the script
keeps to the shell's part (its arguments, the venv or the container engine, the run line) and each decision is made
once, beside the preflight's own. Standard library only, any python3 from 3.8 on: it runs before any .venv exists.

    devices cuda|ascend [--dry-run] [--build]
        the GPUs or NPUs this host shows (HARNESS_DEV_DIR: a fake /dev, whose hosts have no real nvidia-smi either)
        and, on ascend, the chip the image is built for: ASCEND_CHIP, else the Name column of `npu-smi info` (NPU_SMI
        names the tool) looked up in ascend.toml, and the image that chip names (`chip_image`). No device is refused
        unless the commands are only printed (--dry-run: an 8-NPU server's) or only the image is built (--build).
    frameworks PLATFORM PROFILE PYTHON [--only GLOB] [--dry-run]
        asked of the --native Python itself: the frameworks it lacks (harness.host.platforms.missing_framework), and
        the selected cells `harness list` records as skipped for that; refused where that is every cell.
    container cuda|ascend ENGINE ROOTLESS [NPU ...]
        the arguments of every `ENGINE run` that reach the devices (harness.preflight.step.device_flags, which the
        preflight's step container takes too): the GPUs; the NPUs given, and HwHiAiUser's group unless ROOTLESS is 1
        (rootless podman keeps the caller's groups); the host network; on cuda the kept host folder of the driver's
        JIT cache (`made`: the script makes it before the run).
    apex ENGINE IMAGE APEX
        an image that is there and an apex choice (ascend): whether the image was built with it (its label
        io.ms-pt-harness.apex begins with the choice); when not, the line that says so, and `need_build 1`.
    build PLATFORM ENGINE CHECKOUT
        before an image is built: the build plan (harness.preflight.buildplan) at the folder where ENGINE keeps its
        images (`ENGINE info`, else CHECKOUT), and `began` (the time, the free disk there, that folder) for `built`.
    built IMAGE ENGINE BEGAN
        after it: the line of what it took (buildplan.built; the image's size as `ENGINE image inspect` says it).
        These two are for the reader only (the script asks them where the host has a python3, and goes on without).

The answer is plain lines, `NAME VALUE`: `say LINE` is a line for the user (the script prints it on stderr); any
other NAME is a value the script keeps (`npu`, `arg` and `made` once per item). Exit 0: answered; 2: refused, the
`say` line before it saying why and what to do.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter

PROG = "reproduce.sh"
DEFAULT_CHIP = "910"     # the chip where npu-smi cannot say (the dry run's 8-NPU server, a build without the driver)
SERVER_NPUS = 8


class Refused(Exception):
    """A refusal: its one line (the script's name is put before it)."""


def tell(name: str, value: object) -> None:
    print(f"{name} {value}")


def device_files(dev: str, pattern: str) -> list[str]:
    """The device files `dev` holds that match `pattern` (davinci[0-9]*), named as in /dev."""
    return ["/dev/" + os.path.basename(p) for p in sorted(glob.glob(os.path.join(glob.escape(dev), pattern)))]


def gpus(dev: str) -> int:
    """The GPUs as harness.host.platforms counts them (nvidia-smi -L), else the /dev/nvidia[0-9]* files of `dev`."""
    from harness.host import platforms

    return (platforms.visible_devices("cuda") if dev == "/dev" else 0) or len(device_files(dev, "nvidia[0-9]*"))


def chip(env: dict[str, str]) -> dict[str, str]:
    """{chip, chip_why, chip_unknown}: the ASCEND_CHIP the image is built for, how it was found, and (npu-smi missing)
    the refusal for when an image is needed."""
    from harness.preflight import data, parse
    from harness.preflight.host import run

    stacks = data.ascend()
    choices = " or ".join(sorted(stacks))
    said = {"chip": env.get("ASCEND_CHIP", ""), "chip_why": "ASCEND_CHIP", "chip_unknown": ""}
    smi = env.get("NPU_SMI") or "npu-smi"
    if not said["chip"] and not shutil.which(smi):
        said.update(chip=DEFAULT_CHIP, chip_why="no npu-smi on this host: the Ascend 910 default",
                    chip_unknown="npu-smi not found, so the chip (and the image's base) is unknown; install the "
                                 f"Ascend driver's tools, or set ASCEND_CHIP={choices}")
    elif not said["chip"]:
        names = parse.npu_smi_info(run([smi, "info"]).text)["names"]
        kinds = [f"{name} x{n}" for name, n in sorted(Counter(names).items())]
        if not kinds:
            raise Refused(f"{smi} info lists no NPU name; check the driver (npu-smi info), or set "
                          f"ASCEND_CHIP={choices}")
        if len(kinds) > 1:
            raise Refused(f"{smi} info lists several chip types ({' '.join(kinds)}); set ASCEND_CHIP={choices}")
        said.update(chip=parse.ascend_chip(names, stacks)[0] or "", chip_why=f"npu-smi info: {kinds[0]}")
        if not said["chip"]:
            raise Refused(f"chip {names[0]} ({smi} info) has no image here: Dockerfile.ascend builds for Ascend 910 "
                          "(ASCEND_CHIP=910) and 910B / Atlas A2 (910b); see ARTIFACT.md")
    if said["chip"] not in stacks:
        raise Refused(f"ASCEND_CHIP={said['chip']} is not a chip this image is built for; choose 910 (Ascend 910) or "
                      "910b (Atlas A2)")
    return said


def devices(platform: str, dry: bool, build: bool, env: dict[str, str]) -> None:
    from harness.preflight.checks_ascend import NO_NPU
    from harness.preflight.checks_cuda import NO_GPU

    dev = env.get("HARNESS_DEV_DIR") or "/dev"
    if platform == "cuda":
        n = gpus(dev)
        if not n and not (dry or build):
            raise Refused(NO_GPU.format(dev=dev))
        if not n and dry:
            tell("say", "# no NVIDIA GPU on this host: the commands below are what a GPU host runs")
        return
    npus = device_files(dev, "davinci[0-9]*")
    if not npus and not (dry or build):
        raise Refused(NO_NPU.format(dev=dev))
    if not npus and dry:
        tell("say", f"# no {dev}/davinci[0-9]* on this host: the commands below show an {SERVER_NPUS}-NPU Ascend 910 "
                    "server")
    for path in npus or [f"/dev/davinci{n}" for n in range(SERVER_NPUS)]:
        tell("npu", path)
    from harness.preflight.host import image_tag

    said = chip(env)
    for name, value in said.items():
        if value:
            tell(name, value)
    tell("chip_image", image_tag("ascend", said["chip"], None))


def frameworks(platform: str, profile: str, python: str, only: str | None, dry: bool) -> None:
    """Run in the --native Python: its missing frameworks, and the cells `harness list` skips for each (its verdict
    is that framework's missing_framework line)."""
    from harness.host import platforms

    missing = {}
    for fw in platforms.FRAMEWORK_MODULES:
        why = platforms.missing_framework(fw, platform)
        if why:
            missing[fw] = why
    if not missing:
        return
    cmd = [sys.executable, "-m", "harness", "list", "--profile", profile, "--platform", platform, "--json"]
    p = subprocess.run(cmd + (["--only", only] if only else []), capture_output=True, text=True, check=False)
    try:
        rows = json.loads(p.stdout) if p.returncode == 0 else None
    except ValueError:
        rows = None
    if rows is None:
        if dry:
            return
        raise Refused(f"python -m harness list found no cells for --only '{only or ''}'; see: {python} -m harness list "
                      f"--profile {profile}")
    left = {fw: [r["cell"] for r in rows if r.get("skip") == why] for fw, why in missing.items()}
    names = " ".join(missing)
    if sum(len(cells) for cells in left.values()) == len(rows):
        if dry:
            tell("say", f"# {python} has none of the frameworks these cells need ({names})")
            return
        raise Refused(f"{python} has none of the frameworks the selected cells need ({names}); install the {platform} "
                      "build of torch or mindspore (see ARTIFACT.md), set PYTHON, or drop --native to use the image")
    for fw, cells in left.items():
        if cells:
            tell("say", f"{PROG}: {python} has no {fw} for {platform}: its {len(cells)} of {len(rows)} cells are left "
                        f"out (recorded as skipped): {' '.join(cells[:3])}{' ...' if len(cells) > 3 else ''}")


def container(platform: str, engine: str, rootless: bool, npus: list[str]) -> None:
    from harness.preflight.step import device_flags

    hw_gid = None
    if platform == "ascend" and not rootless:
        try:
            import grp

            hw_gid = grp.getgrnam("HwHiAiUser").gr_gid
        except (ImportError, KeyError):
            pass
    flags = device_flags(platform, os.path.basename(engine) == "podman", rootless, npus, hw_gid) + ["--network", "host"]
    if platform == "cuda":
        # The driver compiles PTX for a GPU a framework has no machine code for (MindSpore's kernels on an H100: see
        # docs/platforms/cuda.md) on first use; its cache is kept on the host, so a second run does not pay it again.
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        jit = os.path.join(cache, "ms-pt-harness", "cuda-jit")
        tell("made", jit)
        flags += ["-v", f"{jit}:/cache/cuda-jit"]
    for flag in flags:
        tell("arg", flag)


def stdout(cmd: list[str]) -> str:
    """What `cmd` printed on stdout, whatever its exit status, as `$(cmd 2> /dev/null)` keeps it ("": not there)."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.rstrip("\n")
    except OSError:
        return ""


def apex(engine: str, image: str, choice: str) -> None:
    had = stdout([engine, "image", "inspect", "--format", '{{ index .Config.Labels "io.ms-pt-harness.apex" }}', image])
    if had.split(":", 1)[0] != choice:
        was = f"with ASCEND_APEX={had.split(':', 1)[0]}" if had else "without an io.ms-pt-harness.apex label"
        tell("say", f"{PROG}: {image} was built {was}; building it again with ASCEND_APEX={choice}")
        tell("need_build", 1)


def build(platform: str, engine: str, here: str) -> None:
    from harness.preflight import buildplan, data

    podman = os.path.basename(engine) == "podman"
    store = stdout([engine, "info", "--format", "{{.Store.GraphRoot}}" if podman else "{{.DockerRootDir}}"])
    store = store if os.path.isdir(store) else here
    try:
        tell("say", buildplan.plan(platform, "container", store, data.host()))
    except (data.DataError, OSError):
        pass
    free = buildplan.free_kb(store)
    tell("began", f"{int(time.time())} {'-' if free is None else free} {store}")


def built(image: str, engine: str, began: str) -> None:
    from harness.preflight import buildplan

    at, free, store = began.split(" ", 2)
    size = stdout([engine, "image", "inspect", "--format", "{{.Size}}", image]).strip()
    tell("say", buildplan.built(image, time.time() - int(at), int(size) // 1024 if size.isdigit() else None, store,
                                None if free == "-" else int(free), buildplan.free_kb(store)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m harness.preflight.shell", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="question", required=True)
    d = sub.add_parser("devices", help="the GPUs or NPUs, and the Ascend chip")
    d.add_argument("platform", choices=("cuda", "ascend"))
    f = sub.add_parser("frameworks", help="a --native Python's missing frameworks and the cells it leaves out")
    f.add_argument("platform")
    f.add_argument("profile")
    f.add_argument("python", help="the Python as the user named it")
    f.add_argument("--only", metavar="GLOB[,GLOB...]")
    for p in (d, f):
        p.add_argument("--dry-run", action="store_true")
    d.add_argument("--build", action="store_true")
    c = sub.add_parser("container", help="the arguments of `ENGINE run` that reach the devices")
    c.add_argument("platform", choices=("cuda", "ascend"))
    c.add_argument("engine")
    c.add_argument("rootless", choices=("0", "1"), help="1: rootless podman")
    c.add_argument("npus", nargs="*", metavar="NPU")
    a = sub.add_parser("apex", help="whether the image there was built with the apex choice")
    a.add_argument("engine")
    a.add_argument("image")
    a.add_argument("apex", choices=("build", "skip"))
    b = sub.add_parser("build", help="the build plan before an image build, and what the line after it compares")
    b.add_argument("platform", choices=("cpu", "cuda", "ascend"))
    b.add_argument("engine")
    b.add_argument("checkout", help="where the build's disk is said when ENGINE does not say where it keeps images")
    b2 = sub.add_parser("built", help="the line after an image build: what it took")
    b2.add_argument("image")
    b2.add_argument("engine")
    b2.add_argument("began", help="the `began` value `build` answered")
    args = ap.parse_args(argv)
    try:
        if args.question == "devices":
            devices(args.platform, args.dry_run, args.build, dict(os.environ))
        elif args.question == "frameworks":
            frameworks(args.platform, args.profile, args.python, args.only, args.dry_run)
        elif args.question == "container":
            container(args.platform, args.engine, args.rootless == "1", args.npus)
        elif args.question == "apex":
            apex(args.engine, args.image, args.apex)
        elif args.question == "build":
            build(args.platform, args.engine, args.checkout)
        else:
            built(args.image, args.engine, args.began)
    except Refused as e:
        tell("say", f"{PROG}: {e}")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

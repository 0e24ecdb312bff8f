#!/usr/bin/env python3
"""Regenerate the hash-pinned lock files requirements/*.txt from requirements/*.in.

Usage (from anywhere; stdlib only, needs network access to pypi.org):

    python3 tools/lock_requirements.py [--only NAME ...] [--keep-pins] [--python PYTHON3.11] [--torch-wheel-dir DIR ...]
 Locks produced (--only picks some; default: all):

    cpu     requirements/cpu.in     ->  requirements/cpu.txt     torch X+cpu; x86_64 + aarch64
    test    requirements/test.in    ->  requirements/test.txt    (resolved with cpu.txt's pins as
                                                                   constraints, so the two install together)
    image   requirements/image.in   ->  requirements/image.txt   hadolint for tox -e image
    ascend  requirements/ascend.in  ->  requirements/ascend.txt  torch X+cpu, torch_npu, MindSpore;
                                                                   x86_64 + aarch64 (Dockerfile.ascend)
    cuda    requirements/cuda.in    ->  requirements/cuda.txt    PyPI's torch X (its Linux wheel is a
                                                                   CUDA 12 build) and MindSpore; x86_64
    cuda11-libs  requirements/cuda11-libs.in -> requirements/cuda11-libs.txt   the nvidia-*-cu11 wheels
                                                                   MindSpore's CUDA 11.6 GPU plug-in loads;
                                                                   installed outside the venv (Dockerfile.cuda)
 Install with:

    pip install --require-hashes -r requirements/cpu.txt -r requirements/test.txt

How it works:

1. Versions: a real resolve. A throw-away venv is created with PYTHON (default: the
   interpreter running this script; use CPython 3.11), and its pip runs
   `pip install --dry-run --ignore-installed --report ...` on the .in file. The user's
   normal pip configuration (indexes, find-links) applies. Option lines of the .in file
   (e.g. --extra-index-url) are passed on only if their URL answers, so an unreachable
   index does not cost minutes of retries; they are always copied into the .txt.
   `torch==X` is constrained to `torch==X+cpu`, so the multi-GB CUDA build on PyPI is
   never picked (or downloaded).

2. Hashes: from PyPI's simple JSON API (https://pypi.org/simple/<name>/, PEP 691), for
   the files of the pinned version that CPython 3.11 on Linux x86_64 / aarch64 can use:
   tags cp311 / py3 / abi3, platforms manylinux*_x86_64, manylinux*_aarch64 and any.
   The sdist hash is added only when one of the two architectures has no wheel.
   Nothing big is downloaded.

   torch is special: PyPI's Linux torch wheels are CUDA builds (x86_64 *and* aarch64;
   the aarch64 one depends on cuda-toolkit / nvidia-* / triton). Its hashes come from the
   torch-X+cpu wheels of https://download.pytorch.org/whl/cpu (the index page carries
   #sha256= fragments) or, when that is unreachable, from sha256 of local copies of those
   wheels (--torch-wheel-dir, default /opt/wheels). The pin is written as `torch==X`;
   pip matches X+cpu with it.

   The cuda lock is the exception: it takes PyPI's torch X as it is (the CUDA build, with its
   nvidia-*-cu12 and triton dependencies), hashed from PyPI like every other package.

3. Where the torch index is unreachable and no local wheel exists, the resolve runs against
   PyPI's torch==X metadata instead (same Python dependencies, plus CUDA packages the
   X+cpu / X+cu118 builds do not use, which are dropped). With no hash for any architecture
   the torch line is written as a comment and the lock's header starts with
   `# LOCK-INCOMPLETE: ...`; with hashes for some architectures only (external hashes), each
   missing one gets a header line `# LOCK-INCOMPLETE-ARCH <arch>: ...`. Nothing is invented:
   Dockerfile.* and reproduce.sh refuse to build from such a lock (on that architecture) and
   say how to finish it (run this script again, on a host that reaches the index).

Anything not covered (missing architecture, sdist-only package) is printed as a warning
and noted as a comment next to the package in the .txt file.

--keep-pins resolves with the lock's current pins as constraints as well: a package added to the .in
file is resolved and hashed anew, every version already locked stays as it is (its hashes are read
again from the same sources). That is how a dependency is added without moving any other pin.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTERNAL_HASHES_REL = "requirements/external-wheel-hashes.txt"
PYPI_SIMPLE = "https://pypi.org/simple"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
ARCHES = ("x86_64", "aarch64")
# name -> input, output, lock whose pins constrain this one, torch build (local version) and its index, arches
LOCKS = {
    "cpu": dict(src="requirements/cpu.in", dst="requirements/cpu.txt", constrained_by=None,
                torch_build="cpu", torch_index=TORCH_CPU_INDEX, arches=ARCHES),
    "test": dict(src="requirements/test.in", dst="requirements/test.txt", constrained_by="requirements/cpu.txt",
                 torch_build="cpu", torch_index=TORCH_CPU_INDEX, arches=ARCHES),
    "image": dict(src="requirements/image.in", dst="requirements/image.txt", constrained_by=None,
                  torch_build=None, torch_index=None, arches=ARCHES),
    "ascend": dict(src="requirements/ascend.in", dst="requirements/ascend.txt", constrained_by=None,
                   torch_build="cpu", torch_index=TORCH_CPU_INDEX, arches=ARCHES),
    # torch_build None: PyPI's torch wheel itself (for torch 2.7.1 on Linux x86_64, the CUDA 12.6 build).
    "cuda": dict(src="requirements/cuda.in", dst="requirements/cuda.txt", constrained_by=None,
                 torch_build=None, torch_index=None, arches=("x86_64",)),
    "cuda11-libs": dict(src="requirements/cuda11-libs.in", dst="requirements/cuda11-libs.txt", constrained_by=None,
                        torch_build=None, torch_index=None, arches=("x86_64",)),
}
# Dependencies of PyPI's (CUDA) torch wheels that a +cpu build does not have.
PYPI_TORCH_ONLY = re.compile(r"^(nvidia-.*|triton|cuda-.*|pytorch-triton.*)$")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def load_external_hashes(path: Path | None) -> dict[str, tuple[str, list[str]]]:
    """FILENAME -> (sha256, sources) from an external-hashes file; '#' starts a comment."""
    out: dict[str, tuple[str, list[str]]] = {}
    if path is None or not path.is_file():
        return out
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split(None, 2)
        if len(parts) < 2 or not re.fullmatch(r"[0-9a-f]{64}", parts[1]):
            sys.exit(f"error: {path}:{n}: expected `FILENAME SHA256 SOURCE; SOURCE`, got {raw!r}")
        sources = [x.strip() for x in (parts[2] if len(parts) > 2 else "").split(";") if x.strip()]
        out[parts[0]] = (parts[1], sources)
    return out


def external_torch(external: dict, version: str, build: str, minor: int, arches: tuple[str, ...]) -> dict:
    """arch -> (sha256, sources) for the torch-X+<build> wheels whose external hash names >= 2 sources."""
    local = version if "+" in version else f"{version}+{build}"
    alternatives = "|".join(arches)
    pattern = re.compile(rf"torch-{re.escape(local)}-cp3{minor}-cp3{minor}-manylinux[0-9a-z_]*_({alternatives})\.whl$")
    found = {}
    for filename, (sha, sources) in external.items():
        m = pattern.match(filename)
        if m and len(sources) >= 2:
            found[m.group(1)] = (sha, sources, filename)
    return found


def fetch(url: str, accept: str | None = None, timeout: float = 60, tries: int = 3) -> bytes:
    headers = {"Accept": accept} if accept else {}
    for attempt in range(tries):
        try:
            req = urllib.request.Request(url, headers=headers)  # noqa: S310 - https URLs from this file only
            with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310
                return r.read()
        except OSError:
            if attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


def reachable(url: str) -> bool:
    try:
        fetch(url.rstrip("/") + "/", timeout=10, tries=1)
        return True
    except OSError:
        return False


# --------------------------------------------------------------------------- resolve


def read_in(path: Path) -> tuple[list[str], list[str]]:
    """Split a .in file into (header lines to copy, requirement lines).

    Header lines are option lines (starting with '-') together with the comment block
    directly above each of them.
    """
    header, reqs, comments = [], [], []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line.startswith("#"):
            comments.append(line)
        elif line.startswith("-"):
            header += comments + [line, ""]
            comments = []
        else:
            comments = []
            if line:
                reqs.append(line)
    return header, reqs


def resolve(pip: Path, header: list[str], reqs: list[str], constraints: list[str], tmp: Path,
            torch_build: str | None, wheel_dirs: list[Path], external: dict | None = None,
            minor: int = 11, arches: tuple[str, ...] = ARCHES) -> tuple[list[dict], str | None]:
    """Run pip's resolver (dry run); return the report's 'install' list and, when torch's own index
    could not be used and no hash of its wheels is known, why (the lock is then incomplete)."""
    options, unreachable = [], []
    for line in header:
        if line.startswith("-"):
            url = line.split()[-1]
            if "://" in url and not reachable(url):
                print(f"warning: {url} unreachable; resolving without `{line}`", file=sys.stderr)
                unreachable.append(url)
                continue
            options.append(line)
    incomplete = None
    via_pypi_metadata = False
    for req in reqs:  # torch==X -> only the X+<build> wheel
        m = re.match(r"torch\s*==\s*([^\s;#+]+)\s*(#.*)?$", req)
        if m and torch_build:
            version = m.group(1)
            local = any(next(d.glob(f"torch-{version}+{torch_build}-*.whl"), None) for d in wheel_dirs)
            known = external_torch(external or {}, version, torch_build, minor, arches)
            if unreachable and not local and known:
                # Hashes verified elsewhere; the versions of the other packages come from PyPI's
                # torch==X metadata (same dependencies; its CUDA-only ones are dropped below).
                via_pypi_metadata = True
            elif unreachable and not local:
                incomplete = (f"torch=={version}+{torch_build} has no hashes here ({', '.join(unreachable)} was "
                              "unreachable and no local copy of the wheel exists)")
                if torch_build != "cpu":
                    incomplete += f"; nor do the dependencies only its metadata names (nvidia-*-{torch_build[:4]})"
            else:
                constraints = constraints + [f"torch=={version}+{torch_build}"]
    (tmp / "req.txt").write_text("\n".join(options + reqs) + "\n")
    (tmp / "constraints.txt").write_text("\n".join(constraints) + "\n")
    report = tmp / "report.json"
    cmd = [str(pip), "install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report),
           "-r", str(tmp / "req.txt"), "-c", str(tmp / "constraints.txt")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"pip resolve failed:\n{proc.stdout}\n{proc.stderr}")
    install = json.loads(report.read_text())["install"]
    if incomplete or via_pypi_metadata:  # resolved against PyPI's torch: drop what only that (CUDA) build needs
        install = [i for i in install
                   if i.get("requested") or not PYPI_TORCH_ONLY.match(canonical(i["metadata"]["name"]))]
    return install, incomplete


# --------------------------------------------------------------------------- hashes


def wheel_arches(filename: str, minor: int, arches: tuple[str, ...] = ARCHES) -> set[str]:
    """Architectures (of `arches`) on which CPython 3.<minor>/Linux can install this wheel."""
    pys, abis, plats = (t.split(".") for t in filename[: -len(".whl")].split("-")[-3:])

    def py_ok(py: str, abi: str) -> bool:
        if abi not in ("none", "abi3", f"cp3{minor}"):
            return False
        if py in ("py3", f"py3{minor}", f"cp3{minor}"):
            return True
        ver = py[3:]
        if py.startswith("cp3") and abi == "abi3" and ver.isdigit():
            return int(ver) <= minor
        if py.startswith("py3") and abi == "none" and ver.isdigit():
            return int(ver) <= minor
        return False

    if not any(py_ok(py, abi) for py in pys for abi in abis):
        return set()
    found = set()
    for plat in plats:
        if plat == "any":
            found |= set(arches)
        for arch in arches:
            if plat.startswith("manylinux") and plat.endswith("_" + arch):
                found.add(arch)
    return found


def file_version(filename: str) -> str | None:
    if filename.endswith(".whl"):
        return filename.split("-")[1]
    for ext in (".tar.gz", ".zip"):
        if filename.endswith(ext):
            return filename[: -len(ext)].rsplit("-", 1)[-1]
    return None


def pypi_hashes(name: str, version: str, minor: int, arches: tuple[str, ...] = ARCHES) -> tuple[list[str], list[str]]:
    """sha256 hashes of the usable files of name==version on PyPI, plus notes on gaps."""
    data = json.loads(fetch(f"{PYPI_SIMPLE}/{canonical(name)}/", accept="application/vnd.pypi.simple.v1+json"))
    files = [f for f in data["files"] if (file_version(f["filename"]) or "").lower() == version.lower()]
    hashes, covered, sdists = [], set(), []
    for f in files:
        if f["filename"].endswith(".whl"):
            usable = wheel_arches(f["filename"], minor, arches)
            if usable:
                hashes.append(f["hashes"]["sha256"])
                covered |= usable
        else:
            sdists.append(f["hashes"]["sha256"])
    missing = [a for a in arches if a not in covered]
    notes = []
    if missing:
        if sdists:
            hashes += sdists
            notes.append(f"no cp3{minor} wheel for {'/'.join(missing)}: sdist hash included (builds from source there)")
        else:
            notes.append(f"no cp3{minor} wheel and no sdist for {'/'.join(missing)}: will not install there")
    if not hashes:
        sys.exit(f"error: no usable files for {name}=={version} on PyPI")
    return sorted(set(hashes)), notes


def torch_hashes(version: str, minor: int, wheel_dirs: list[Path], build: str = "cpu", index: str = TORCH_CPU_INDEX,
                 arches: tuple[str, ...] = ARCHES, external: dict | None = None,
                 used: dict | None = None) -> tuple[list[str], list[str]]:
    """Hashes of the torch X+<build> wheels (that build's PyTorch index, else local files, else external
    hashes with two sources). `used`, when given, receives arch -> (sha256, sources, filename) of the
    external hashes taken."""
    local = version if "+" in version else f"{version}+{build}"
    found: dict[str, str] = {}  # arch -> sha256
    alternatives = "|".join(arches)
    pattern = re.compile(rf"torch-{re.escape(local)}-cp3{minor}-cp3{minor}-manylinux[0-9a-z_]*_({alternatives})\.whl$")
    try:
        page = fetch(f"{index}/torch/", timeout=30, tries=1).decode()
        for href in re.findall(r'href="([^"]+)"', page):
            url, _, frag = href.partition("#sha256=")
            m = pattern.search(urllib.parse.unquote(url))
            if m and frag:
                found[m.group(1)] = frag
    except OSError:
        print(f"warning: {index} unreachable; using local torch wheels", file=sys.stderr)
    for d in wheel_dirs:
        for wheel in sorted(d.glob(f"torch-{local}-*.whl")):
            m = pattern.search(wheel.name)
            if m and m.group(1) not in found:
                found[m.group(1)] = hashlib.sha256(wheel.read_bytes()).hexdigest()
    for arch, (sha, sources, filename) in external_torch(external or {}, version, build, minor, arches).items():
        if arch not in found:
            found[arch] = sha
            if used is not None:
                used[arch] = (sha, sources, filename)
    notes = []
    for arch in arches:
        if arch not in found:
            notes.append(f"no hash for the {arch} torch-{local} wheel ({index} unreachable, no local copy, no "
                         "external hash with two agreeing sources); PyPI's Linux torch is another build, so it "
                         "is not used: will not install there")
    if not found:
        sys.exit(f"error: no torch {build} wheel hash found")
    return sorted(set(found.values())), notes


# --------------------------------------------------------------------------- output


def requirement_names(requires_dist: list[str]) -> set[str]:
    """Names of the unconditional-on-extras dependencies in a Requires-Dist list."""
    names = set()
    for req in requires_dist:
        if "extra ==" in req.replace('"', "").replace("'", ""):
            continue
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
        if m:
            names.add(canonical(m.group(1)))
    return names


def write_lock(src: str, dst: str, header: list[str], install: list[dict], minor: int, wheel_dirs: list[Path],
               cfg: dict | None = None, incomplete: str | None = None, external: dict | None = None) -> None:
    cfg = cfg or LOCKS["cpu"]
    arches = tuple(cfg["arches"])
    name_of = next((n for n, c in LOCKS.items() if c["dst"] == dst), None)
    pkgs = {canonical(i["metadata"]["name"]): i for i in install}
    via: dict[str, list[str]] = {name: [] for name in pkgs}
    for name, item in pkgs.items():
        if item.get("requested"):
            via[name].append(f"-r {src}")
        for dep in requirement_names(item["metadata"].get("requires_dist", [])):
            if dep in via and dep != name:
                via[dep].append(name)

    only = f" --only {name_of}" if name_of not in (None, "cpu", "test") else ""
    regen = "python3 tools/lock_requirements.py" + only
    out = [
        f"# This file is generated by tools/lock_requirements.py from {src} -- do not edit by hand.",
        f"# Regenerate: {regen}",
        f"# Resolved with pip for CPython 3.{minor}; hashes cover Linux {' + '.join(arches)} (manylinux) wheels,",
        "# pure-Python wheels, and sdists where an architecture has no wheel.",
    ]
    if incomplete:
        out = [f"# LOCK-INCOMPLETE: {incomplete}",
               "# The image build refuses this file until it is regenerated where that index answers.", *out]
    top = len(out)  # external-hash provenance and per-architecture gaps are inserted here
    used: dict = {}
    out += ["", *header]
    for name in sorted(pkgs):
        version = pkgs[name]["metadata"]["version"]
        if name == "torch" and incomplete:
            pin = version.split("+")[0]
            out.append(f"# torch=={pin}+{cfg['torch_build']}  (hashes missing: see LOCK-INCOMPLETE above;"
                       f" versions of the other packages were resolved against PyPI's torch=={pin} metadata)")
            continue
        if name == "torch" and cfg["torch_build"]:
            hashes, notes = torch_hashes(version, minor, wheel_dirs, cfg["torch_build"] or "cpu",
                                         cfg["torch_index"] or TORCH_CPU_INDEX, arches, external, used)
            local = version if "+" in version else f"{version}+{cfg['torch_build'] or 'cpu'}"
            gaps = [n for n in notes if n.startswith("no hash for the ")]
            extra = []
            for arch in arches:
                if arch in used:
                    sha, sources, filename = used[arch]
                    extra.append(f"# {filename} sha256 {sha}: not read from its index (unreachable) but from "
                                 f"{len(sources)} public sources that agree ({EXTERNAL_HASHES_REL}):")
                    extra += [f"#   - {source}" for source in sources]
                elif any(f" {arch} " in g for g in gaps):
                    extra.insert(0, f"# LOCK-INCOMPLETE-ARCH {arch}: torch=={local} has no hash here (its index was "
                                    "unreachable, no local wheel, no two agreeing public sources); the image build "
                                    f"refuses {arch} until this lock is regenerated where the index answers")
            out[top:top] = extra
        else:
            hashes, notes = pypi_hashes(name, version, minor, arches)
        pin = version.split("+")[0]  # torch 2.13.0+cpu is pinned as torch==2.13.0 (pip matches the local build)
        out.append(f"{name}=={pin} \\")
        out += [f"    --hash=sha256:{h}" + (" \\" if i < len(hashes) - 1 else "") for i, h in enumerate(hashes)]
        out.append(f"    # via {', '.join(sorted(via[name]))}")
        for note in notes:
            out.append(f"    # NOTE: {note}")
            print(f"warning: {name}=={pin}: {note}", file=sys.stderr)
    (ROOT / dst).write_text("\n".join(out) + "\n")
    print(f"wrote {dst} ({len(pkgs)} packages)")


def pins(lock: Path) -> list[str]:
    return [m.group(0) for m in re.finditer(r"^[A-Za-z0-9._-]+==\S+", lock.read_text(), re.M)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable, help="interpreter for the resolve venv (CPython 3.11)")
    ap.add_argument("--torch-wheel-dir", type=Path, action="append",
                    help="directory with torch-X+cpu wheels to hash if the PyTorch index is unreachable "
                         "(default: /opt/wheels)")
    ap.add_argument("--wheel-hashes", type=Path, default=ROOT / EXTERNAL_HASHES_REL,
                    help="externally verified wheel hashes (FILENAME SHA256 SOURCE; SOURCE ...), used for torch "
                         "wheels whose index is unreachable when a line names at least two agreeing sources")
    ap.add_argument("--keep-pins", action="store_true",
                    help="constrain the resolve by each lock's current pins too: only packages it lacks move")
    ap.add_argument("--only", nargs="+", choices=sorted(LOCKS), metavar="NAME",
                    help=f"regenerate only these locks (of: {', '.join(LOCKS)}; default: all)")
    args = ap.parse_args()
    wheel_dirs = args.torch_wheel_dir or [Path("/opt/wheels")]
    external = load_external_hashes(args.wheel_hashes)
    names = args.only or list(LOCKS)

    with tempfile.TemporaryDirectory(prefix="lockreq-") as tmpdir:
        tmp = Path(tmpdir)
        subprocess.run([args.python, "-m", "venv", str(tmp / "venv")], check=True)
        py = tmp / "venv" / "bin" / "python"
        minor = int(subprocess.run([str(py), "-c", "import sys; print(sys.version_info[1])"],
                                   capture_output=True, text=True, check=True).stdout)
        if minor != 11:
            print(f"warning: resolving with Python 3.{minor}; the project targets 3.11", file=sys.stderr)
        for name in names:
            cfg = LOCKS[name]
            header, reqs = read_in(ROOT / cfg["src"])
            constraints = pins(ROOT / cfg["constrained_by"]) if cfg["constrained_by"] else []
            if args.keep_pins and (ROOT / cfg["dst"]).is_file():
                constraints += pins(ROOT / cfg["dst"])
            install, incomplete = resolve(tmp / "venv" / "bin" / "pip", header, reqs, constraints, tmp,
                                          cfg["torch_build"], wheel_dirs, external, minor, tuple(cfg["arches"]))
            write_lock(cfg["src"], cfg["dst"], header, install, minor, wheel_dirs, cfg, incomplete, external)


if __name__ == "__main__":
    main()

"""`python3 -m harness.preflight cpu|cuda|ascend [--image REF] [--container|--native]`: the preflight
(`./reproduce.sh PLATFORM --check` calls it). Prints the table to stdout and one line per failure to stderr;
exit 0 when every row passes or waits for `--build` (the line after the table says what to run next), 2 otherwise
(a data file it cannot read: one `error:` line, exit 2).

--host-dir DIR evaluates a recorded host (tests/fixtures/preflight/<host>/) instead of probing this one: every row
comes from that folder's facts (and the harness's own data files), none from the host it runs on. --record DIR saves
the host it checked in that form.
"""

from __future__ import annotations

import argparse
import os
import platform as platform_mod
import sys
from pathlib import Path

from harness.paths import REPO
from harness.preflight import (
    Row,
    checks_allocator,
    checks_ascend,
    checks_common,
    checks_cuda,
    checks_host,
    data,
    render,
    step,
)
from harness.preflight.host import Host, collect


def evaluate(host: Host, cuda: dict, stacks: dict, hostdata: dict, steps: bool = True,
             measured: dict | None = None) -> list[Row]:
    """The rows, from the host's facts and the data files' numbers alone (`measured`: data.measured(), what the
    CPU rows quote). A row whose facts a recorded host lacks is left out, or says "not recorded"."""
    p, f = host.platform, host.facts
    container = f.get("mode") == "container"
    rows: list[Row] = []
    if p == "cuda":
        rows += checks_cuda.rows(host, cuda)
    elif p == "ascend":
        rows += checks_ascend.rows(host, stacks)
    elif not container:
        rows += checks_common.python_rows(host, hostdata) + checks_common.openmp_rows(host)
    if p == "cpu":
        rows.append(checks_allocator.row(host, measured))
        if not container:
            rows.append(checks_allocator.tuning_row(host))
    if container:
        rows += checks_common.engine_rows(host, hostdata, p)
        if p == "cuda":
            rows.append(checks_cuda.container_access_row(host, hostdata))
    rows.append(checks_common.disk_row(host, hostdata, p))
    rows += checks_host.rows(host)
    if p == "cpu" and "cpu" in f:
        rows.append(checks_allocator.cpu_row(host, measured))
    if container:
        rows.append(checks_common.image_row(host, p))
    return rows + (checks_common.step_rows(host, p) if steps else [])


def _why_no_step(host: Host, cuda: dict) -> str | None:
    """Why the training steps cannot run on this host (None: they can)."""
    f = host.facts
    if host.platform == "cuda" and not checks_cuda.gpus(host, cuda)[0] and not f.get("nvidia_devices"):
        return "no GPU"
    if host.platform == "ascend" and not any(d.startswith("/dev/davinci") and d[12:].isdigit() and s.get("exists")
                                             for d, s in f.get("ascend_devices", {}).items()):
        return "no NPU"
    if f.get("mode") == "container":
        if not f.get("engine") or not host.out("engine-info").ok:
            return "no container engine"
        if not host.out("image-inspect").ok:
            return f"image {f.get('image')} not built"
    elif host.platform == "cpu" and not f.get("venv", {}).get("python"):
        return "no .venv yet"
    elif host.platform == "cpu" and not (f["venv"].get("stamp") or f["venv"].get("stamp_ok")):
        return checks_common.UNFINISHED   # its packages may be missing: made again by --build first
    return None


def run_steps(host: Host, cuda: dict, timeout: float) -> None:
    why = _why_no_step(host, cuda)
    for fw in step.FRAMEWORKS:
        if why:
            host.facts.setdefault("step_not_run", {})[fw] = why
            continue
        cmd = step.launch(host.platform, fw, host.facts)
        host.facts.setdefault("step_cmd", {})[fw] = cmd
        host.outputs[f"step-{fw}"] = step.run(cmd, cwd=str(REPO), timeout=timeout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m harness.preflight", description=__doc__)
    ap.add_argument("platform", choices=("cpu", "cuda", "ascend"))
    ap.add_argument("--image", help="the image to check (default: the one reproduce.sh would use)")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--container", action="store_true", help="cpu: check the CPU image instead of .venv")
    where.add_argument("--native", action="store_true", help="cuda/ascend: check $PYTHON instead of the image")
    ap.add_argument("--host-dir", help="a recorded host (tests/fixtures/preflight/NAME) instead of this one")
    ap.add_argument("--record", metavar="DIR", help="save the host checked (its outputs and facts) to DIR, as "
                                                     "--host-dir reads it")
    ap.add_argument("--no-step", action="store_true", help="leave out the training steps (and their rows)")
    ap.add_argument("--step-timeout", type=float, default=step.TIMEOUT_S, help="seconds per training step")
    ap.add_argument("--prog", default="preflight", help="the name failure lines start with")
    args = ap.parse_args(argv)
    try:
        cuda, stacks, hostdata, measured = data.cuda(), data.ascend(), data.host(), data.measured()
    except (data.DataError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.host_dir:
        host = Host.from_folder(Path(args.host_dir))
    else:
        native = args.native or (args.platform == "cpu" and not args.container and not args.image)
        host = collect(args.platform, mode="native" if native else "container", image=args.image,
                       cdi_paths=tuple(hostdata["nvidia_container_toolkit"]["cdi_specs"]), stacks=stacks)
        if not args.no_step:
            run_steps(host, cuda, args.step_timeout)
    if args.record:
        host.to_folder(Path(args.record))
    f = host.facts
    where_text = (f"in the image {f.get('image')} ({f.get('engine') or 'no engine'})" if f.get("mode") == "container"
                  else "natively")
    on = f"the recorded host {Path(args.host_dir).name}" if args.host_dir else platform_mod.node() or "this host"
    print(f"{args.prog} --check {host.platform}: {where_text}, on {on} ({f.get('machine', '?')})\n")
    rows = evaluate(host, cuda, stacks, hostdata, steps=not args.no_step, measured=measured)
    print(render.table(rows))
    sources = {**cuda.get("sources", {}), **hostdata.get("sources", {}),
               **{f"ascend.toml chip.{c}": {"title": "; ".join(s["sources"]), "url": "harness/preflight/ascend.toml"}
                  for c, s in stacks.items()}}
    extra = render.notes(rows, sources)
    if extra:
        print("\n" + extra)
    command = " ".join([f"./reproduce.sh {host.platform}"]
                       + (["--container"] if host.platform == "cpu" and f.get("mode") == "container" else [])
                       + (["--native"] if host.platform != "cpu" and f.get("mode") == "native" else [])
                       + ([f"--image {args.image}"] if args.image else []))
    nxt = render.next_step(rows, command, "quick" if host.platform == "cpu" else "accelerator")
    if nxt:
        print("\n" + nxt)
    lines = render.failures(rows, args.prog)
    sys.stdout.flush()
    for line in lines:
        print(line, file=sys.stderr)
    return 0 if all(r.ok() for r in rows) else 2


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())

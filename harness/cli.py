"""`python -m harness ...`: run the matrix, list cells, capture the environment, read results,
render the report. User errors print one line (`error: ...`) and exit 2, never a traceback."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from harness import conformance
from harness.config import matrix as matrix_mod
from harness.config.cell import PLATFORMS
from harness.errors import HarnessError
from harness.paths import REPO

DEFAULT_DATA_DIR = os.environ.get("HARNESS_DATA_DIR", str(Path.home() / ".cache" / "ms-pt-harness" / "data"))


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (`error: ...` and where to look), exit code 2."""

    def error(self, message: str):
        print(f"error: {self.prog}: {message}; see `{self.prog} --help`", file=sys.stderr)
        sys.exit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m harness", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _run_options(sub.add_parser("run", help="run a profile's cells, each in its own process"))
    _fetch_options(sub.add_parser("fetch", help="download (where missing) and verify the datasets a profile's cells "
                                                "read, and nothing else: reproduce.sh runs it before a container run, "
                                                "which then mounts the data read-only"))
    _list_options(sub.add_parser("list", help="the cell ids a profile expands to"))
    sub.add_parser("env", help="this host's environment as JSON")
    _estimate_options(sub.add_parser("estimate", help="a profile's estimated time on a booked host, from a committed "
                                                      "run's step times (harness.estimate.stepmodel)"))
    mo = sub.add_parser("models", help="parameter and layer counts per model and framework")
    mo.add_argument("--json", action="store_true")
    mo.add_argument("--matrix", type=Path)
    rep = sub.add_parser("report", help="render HTML and LaTeX from one or more run folders")
    rep.add_argument("runs", nargs="+", type=Path, metavar="DIR")
    rep.add_argument("--out", type=Path, help="report folder (default: FIRST_DIR/report)")
    ps = sub.add_parser("preflight-step", help="one SGD step of a tiny MLP on the device (./reproduce.sh P --check)")
    ps.add_argument("--platform", required=True, choices=PLATFORMS)
    ps.add_argument("--framework", required=True, choices=("pytorch", "mindspore"))
    chk = sub.add_parser("check-logs", help="MLPerf's compliance checker on every model cell's event log of a run")
    chk.add_argument("run", type=Path, metavar="DIR")
    _docs_options(sub.add_parser("docs", help="the numbers of the committed runs (docs/runs) in ARTIFACT.md and "
                                              "README.md"))
    res = sub.add_parser("results", help="the results of a run folder")
    res.add_argument("run", type=Path, metavar="DIR")
    res.add_argument("--json", action="store_true", help="a JSON list, one object per cell and repeat")
    return p


def _run_options(r: argparse.ArgumentParser) -> None:
    r.add_argument("--platform", required=True, choices=PLATFORMS)
    r.add_argument("--profile", default="quick", help="a profile of the matrix file (default: quick)")
    r.add_argument("--out", required=True, type=Path, help="run folder (new, or an earlier one with --resume)")
    r.add_argument("--only", metavar="GLOB[,GLOB...]",
                   help="only cells whose id matches one of the comma-separated globs, e.g. 'model/gcn/*,scaling/*'")
    r.add_argument("--data-dir", type=Path, default=Path(DEFAULT_DATA_DIR),
                   help=f"folder of per-dataset folders (default: $HARNESS_DATA_DIR or {DEFAULT_DATA_DIR})")
    r.add_argument("--synthetic", nargs="?", const="all", metavar="DATASETS",
                   help="learnable synthetic data of the real shapes: for every dataset, or for the comma-separated "
                        "ones named (e.g. --synthetic cifar10); every result made from it says so")
    r.add_argument("--download", action="store_true", help="fetch missing dataset files into --data-dir (verified)")
    r.add_argument("--resume", action="store_true", help="keep cells already ok, run the rest")
    r.add_argument("--repeats", type=int, metavar="N",
                   help="N repeats of every cell (default: the profile's `repeats`, and its `claim_repeats` for the "
                        "cells the claims compare); with --resume only the repeats not yet ok run")
    r.add_argument("--max-repeats", type=int, metavar="M",
                   help="cap of the sequential repeats: a comparison not yet settled gets one more repeat of its cells "
                        "at a time, up to M (default: the profile's `max_repeats`; harness/launch/sequential.py)")
    r.add_argument("--matrix", type=Path, help="another matrix file (default: harness/config/matrix.toml)")
    r.add_argument("--hours", type=_hours, metavar="H",
                   help="plan the run to H hours booked, counted from $HARNESS_BOOKING_START (reproduce.sh sets it "
                        "when it starts) or from now: the claims' cells first, what does not fit left out and said "
                        "before the first cell, the rest re-planned after each cell (harness/estimate/fit.py)")
    r.add_argument("--shard", metavar="K/N", help="run only the K-th of N deterministic slices of the profile's cells "
                                                  "(round robin over the cell list), into its own --out; `report` "
                                                  "merges the N folders")


def _fetch_options(fe: argparse.ArgumentParser) -> None:
    fe.add_argument("--profile", default="quick")
    fe.add_argument("--only", metavar="GLOB[,GLOB...]")
    fe.add_argument("--data-dir", type=Path, default=Path(DEFAULT_DATA_DIR))
    fe.add_argument("--synthetic", nargs="?", const="all", metavar="DATASETS",
                    help="the datasets the run generates instead (not fetched)")
    fe.add_argument("--matrix", type=Path)


def _list_options(ls: argparse.ArgumentParser) -> None:
    ls.add_argument("--profile", default="quick")
    ls.add_argument("--platform", choices=PLATFORMS, default="cpu",
                    help="say which cells this host skips there, and why, as `run` would (default: cpu)")
    ls.add_argument("--only", metavar="GLOB[,GLOB...]")
    ls.add_argument("--repeats", type=int, metavar="N", help="as `run --repeats N`")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--one-per-model", action="store_true",
                    help="one fp32 single-device cell of every model, the frameworks in turn (the image checks')")
    ls.add_argument("--device", metavar="NAME",
                    help="as on a host of this device (its memory from the table: V100-16, V100-32, A100-40, A100-80, "
                         "H100-80, H200-141, 910-32, 910B-64), not this host's own")
    ls.add_argument("--devices", type=int, metavar="N", help="with --device: devices on that host (default 1)")
    ls.add_argument("--matrix", type=Path)


def _estimate_options(es: argparse.ArgumentParser) -> None:
    es.add_argument("--profile", default="accelerator")
    es.add_argument("--platform", choices=PLATFORMS, default="cuda")
    es.add_argument("--device", help="the device's name (e.g. 'Tesla V100-SXM2-32GB', Ascend910; default: the "
                                     "reference run's); or one of: " + ", ".join(sorted(_bookings())))
    es.add_argument("--devices", type=int, default=1, help="devices on the host (default 1)")
    es.add_argument("--reference", type=Path, help="the run folder the step times come from (default: "
                                                   "docs/runs/<platform>-<profile>, else docs/runs/cuda-<profile>)")
    es.add_argument("--synthetic", nargs="?", const="all", metavar="DATASETS",
                    help="the datasets the run would generate (default: none)")
    es.add_argument("--matrix", type=Path)
    es.add_argument("--hours", type=_hours, metavar="H",
                    help="plan the profile to H hours booked on that host, less the build, its downloads and the "
                         "first-run compilation: what runs and what each claim loses (harness/estimate/fit.py)")


def _hours(text: str) -> float:
    try:
        h = float(text)
    except ValueError:
        h = float("nan")
    if not h > 0 or h == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of hours above 0 (e.g. 8 or 7.5)")
    return h


def _docs_options(dc: argparse.ArgumentParser) -> None:
    how = dc.add_mutually_exclusive_group()
    how.add_argument("--check", action="store_true", help="exit 2 naming every rendered block that is not current")
    how.add_argument("--write", action="store_true", help="rewrite the blocks that are not current, in place")
    dc.add_argument("--repo", type=Path, metavar="DIR", help="the checkout whose docs to render (default: this one)")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _matrix(args) -> matrix_mod.Matrix:
    """The matrix file, with every model and dataset it names whole (harness.conformance): a part missing is one
    line now, not a traceback in every cell's log."""
    m = matrix_mod.load(args.matrix)
    conformance.require(m.data["models"])
    return m


def _run(args) -> int:
    from harness.data import fetch
    from harness.launch import faults, runner

    m = _matrix(args)
    try:
        return runner.run(m, args.profile, args.platform, args.out, only=args.only, data_dir=args.data_dir,
                          synthetic=args.synthetic, resume=args.resume, allow_download=args.download,
                          shard=args.shard, repeats=args.repeats, max_repeats=args.max_repeats, hours=args.hours,
                          log=lambda s: print(s, file=sys.stderr, flush=True))
    except OSError as e:
        if faults.storage(e, args.out):  # a full disk, a read-only or vanished run folder: one line, then --resume
            raise faults.run_folder(e, args.out) from None
        if _names(e, args.data_dir):  # a data folder a root run made, a read-only mount: one line, the fix
            raise fetch.data_folder_error(e, args.data_dir) from None
        if e.filename:  # any other file: its name and what the system said, not a traceback
            raise HarnessError(f"{os.fsdecode(e.filename)}: {e.strerror or e}; check it (ls -l) and run again"
                               + (" with --resume" if args.out.is_dir() else "")) from None
        raise


def _inside(path: Path, folder: Path) -> bool:
    path, folder = Path(os.path.abspath(path)), Path(os.path.abspath(folder))
    return path == folder or folder in path.parents


def _names(e: OSError, folder: Path) -> bool:
    """Whether the error is about a path inside folder."""
    return any(name and _inside(Path(os.fsdecode(name)), folder) for name in (e.filename, e.filename2))


def _fetch(args) -> int:
    from harness import data
    from harness.data import fetch

    cells = _matrix(args).expand(args.profile, args.only)
    if not cells:
        raise HarnessError(f"--only {args.only!r} matches no cell of the {args.profile} profile; see "
                           f"`python -m harness list --profile {args.profile}`")
    fake = data.synthetic_datasets(cells, args.synthetic)
    folders = data.prepare_data([c for c in cells if c.dataset not in fake], args.data_dir, True)
    for name, folder in sorted(folders.items()):
        got = [src for dest, src in fetch.FETCHED if _inside(dest.resolve(), Path(folder))]
        mirror = fetch.mirror()
        came = f" ({len(got)} downloaded from {f'the mirror {mirror}' if mirror else 'the upstream sources'})" \
            if got else ""
        print(f"data: {name}: verified in {folder}{came}", file=sys.stderr)
    for name in sorted(fake):
        print(f"data: {name}: synthetic (generated by each cell, nothing to fetch)", file=sys.stderr)
    return 0


def _bookings() -> dict:
    from harness.estimate.booking import BOOKINGS

    return BOOKINGS


def _estimate(args) -> int:
    from harness.devices import memory as devicememory
    from harness.estimate import booking
    from harness.estimate import runtime as estimate
    from harness.host import envinfo
    from harness.host.plan import Host

    m = _matrix(args)
    m.profile(args.profile)
    device, devices, platform = args.device, args.devices, args.platform
    if device in _bookings():
        platform, device, devices = _bookings()[device]
    if args.reference is not None:
        if not (Path(args.reference) / "run.json").is_file():
            raise HarnessError(f"--reference {args.reference} is not a run folder (no run.json); name one under "
                               f"docs/runs")
        folders = [Path(args.reference)]
    else:
        folders, _ = estimate.references(platform, args.profile, cpu=envinfo.cpu_for(platform))
    if not folders:
        raise HarnessError(f"no committed run to estimate the {args.profile} profile on {platform} from (docs/runs); "
                           f"pass one with --reference DIR")
    if devices < 1:
        raise HarnessError(f"--devices {devices}: a host has at least 1 device")
    fake = {estimate.stepmodel.ALL} if args.synthetic == "all" else set(
        filter(None, (args.synthetic or "").split(",")))
    # The device's memory from the table (a booking's device, or --device by name): the cells it cannot hold are
    # left out of the estimate as the run leaves them out (harness.devices.memory).
    gib, source = devicememory.table_gib(device or estimate.reference_device(folders[0]))
    proj = booking.project(m, args.profile, platform, run=folders, device=device, devices=devices, synthetic=fake,
                           memory=(gib, source))
    print("\n".join(booking.projection_lines(proj, folders)))
    goal = m.profile(args.profile).get("accelerator_hours") if platform != "cpu" else None
    if args.hours or goal:   # --hours, else the profile's own goal on an accelerator (counted from the run's start)
        print("\n".join(booking.hours(proj, m, args.profile, args.hours or float(goal), owe=bool(args.hours)).lines()))
    cells = m.expand(args.profile)
    print("\n".join(devicememory.fit_table(cells)))
    said = Host(platform, args.profile, devices, {}, m, gib, source).memory_line(cells)
    if said and gib is not None:
        print(f"{proj['device']}: {said}, and left out of the estimate above")
    return 0


def _list(args) -> int:
    from harness.devices import memory as devicememory
    from harness.host.plan import Host
    from harness.launch import process as launch

    m = _matrix(args)
    cells = m.expand(args.profile, args.only, args.repeats, launch.nodes().count)  # HARNESS_NNODES: a multi-node run's
    if args.one_per_model:
        cells = matrix_mod.one_per_model(cells)
    if args.devices is not None and (args.device is None or args.devices < 1):
        raise HarnessError(f"--devices {args.devices}: give it with --device NAME, and at least 1")
    memory = None
    if args.device is not None:   # a host of that device: the table's memory, --devices of them
        if args.platform == "cpu":
            raise HarnessError(f"--device {args.device} names a GPU or NPU; give --platform cuda or ascend with it")
        named = devicememory.device(args.device)
        memory = (float(named.gib), f"{named.name} as sold")
    # The runner's decisions: [[skip]] rules, frameworks, devices, device memory; gradient accumulation where the
    # device cannot hold the batch.
    host = Host.probe(m, args.platform, args.profile, devices=None if memory is None else args.devices or 1,
                      memory=memory)
    plans = {c.id: host.decide(c).plan for c in cells}
    rows = [{"cell": c.id, "kind": c.kind, "repeats": c.repeats, "skip": host.decide(c).skip,
             "memory_gib": (n := devicememory.need(c)) and round(n.gib, 3), "memory_basis": n and n.basis,
             "accumulation_steps": plans[c.id].steps,
             "micro_memory_gib": round(plans[c.id].need.gib, 3) if plans[c.id].steps > 1 and plans[c.id].need
             else None} for c in cells]
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for row in rows:  # the id first on every line (reproduce.sh reads them), then its repeats
            label, gib = plans[row["cell"]].label, row["micro_memory_gib"]
            how = f"    ({label}" + (f": {gib:.1f} GiB predicted" if gib is not None else "") + ")" if label else ""
            print(f"{row['cell']}    x{row['repeats']}"
                  + (f"    (skipped on {args.platform}: {row['skip']})" if row["skip"] else how))
        print(f"{len(rows)} cells, {sum(r['repeats'] for r in rows)} repeats in all, profile {args.profile}",
              file=sys.stderr)
        said = host.memory_line(cells)   # on stderr: stdout's lines are cell ids (reproduce.sh reads them)
        if args.platform != "cpu":
            print("\n".join(devicememory.fit_table(cells) + ([said] if said else [])), file=sys.stderr)
        elif said:
            print(said, file=sys.stderr)
    return 0


def _env(args) -> int:
    from harness.host import envinfo

    print(json.dumps(envinfo.capture(), indent=1))
    return 0


def _models(args) -> int:
    from harness.launch.describe import describe_all

    rows = describe_all(_matrix(args))
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            what = r.get("error") or f"{r['parameters']:,} parameters, {r['layers']} layers"
            print(f"{r['model']:10} {r['framework']:10} {what}")
    by_model: dict[str, set] = {}
    for r in rows:
        by_model.setdefault(r["model"], set()).add((r["parameters"], r["layers"]))
    disagree = sorted(m for m, counts in by_model.items() if len(counts) > 1)
    if disagree:
        print(f"error: the frameworks disagree on the size of: {', '.join(disagree)}", file=sys.stderr)
        return 1
    return 0


def _results(args) -> int:
    from harness.results.store import RunStore

    store = RunStore(args.run)
    store.require_run()
    store.read_meta()  # a run.json this harness can read (schema, keys) before its results are shown
    results = store.results()
    for r in results:
        if r.get("corrupt"):
            print(f"warning: {r['reason']}", file=sys.stderr)
    if args.json:
        print(json.dumps(results, indent=1, default=str))
        return 0
    for r in results:
        tput = r.get("mean_throughput_other_epochs")
        tput = f"{tput:,.0f} {r.get('throughput_unit', '')}" if tput else "-"
        best = r.get("best_metric")
        best = "-" if best is None else f"{best:.4f}"
        print(f"{r.get('status', '?'):8} {r['cell']} r{r.get('repeat', 0)}  best={best}"
              f"  ttt={r.get('time_to_target_s')}  throughput={tput}  {r.get('reason') or ''}")
    return 0


def _preflight_step(args) -> int:
    from harness.preflight import step

    return step.main(args.platform, args.framework)


def _check_logs(args) -> int:
    from harness import logcheck

    return logcheck.check_run(args.run, log=lambda s: print(s, flush=True))


def _report(args) -> int:
    from harness.report import build as report

    path = report.render(args.runs, args.out)
    print(path)
    return 0


def _docs(args) -> int:
    from harness.docs import blocks as docs

    repo = args.repo or REPO
    if args.check:
        stale = docs.check(repo)
        for label in stale:
            print(f"error: {label} is stale (not what docs/runs renders); run `{docs.FIX}`", file=sys.stderr)
        return 2 if stale else 0
    if args.write:
        for label in docs.write(repo):
            print(f"rewrote {label}")
        return 0
    runs = docs.load_runs(repo, docs.BLOCKS)
    for block in docs.BLOCKS:
        print(f"<!-- rendered:{block.name} --> ({block.file})\n{docs.content(block, runs)}")
    return 0


COMMANDS = {"run": _run, "fetch": _fetch, "list": _list, "env": _env, "models": _models, "results": _results,
            "report": _report, "preflight-step": _preflight_step, "check-logs": _check_logs, "docs": _docs,
            "estimate": _estimate}

"""The docs' rendered blocks about accelerators (harness.docs.blocks declares them): the accelerator profile's
estimated time on the hosts it is sized for, from the step times of the committed accelerator runs
(harness.estimate.booking.project),
and
what those runs measured on their GPU. Made from committed run folders and harness/config/matrix.toml only.

    accelerator_estimates(runs), gpu_measured(runs): (runs) -> Markdown
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.config import matrix
from harness.devices import memory as devicememory
from harness.docs.render import Run
from harness.estimate import booking
from harness.estimate import runtime as estimate
from harness.results.units import brief, duration

# (who books it, profile, platform, device name as its tool reports it, devices): the hosts ARTIFACT.md promises a fit,
# the estimate's bookings (harness.estimate.booking.BOOKINGS); None: the device the committed runs measured.
HOSTS = (
    ("one NVIDIA H200 (the GPU the runs measured)", "accelerator", "cuda", None, 1),
    ("one NVIDIA V100 32 GB", "accelerator", *booking.BOOKINGS["V100"]),
    ("one NVIDIA H100", "accelerator", *booking.BOOKINGS["H100"]),
    ("an Ascend 910 server, 8 NPUs (the paper's)", "accelerator", *booking.BOOKINGS["910x8"]),
    ("one NVIDIA H200, the quick profile", "quick", "cuda", None, 1),
)


# The hosts `--hours` is sized for (harness.estimate.fit): (who, booking name), each at BOOKED hours.
FITS = (("one V100 16 GB", "V100-16"), ("one V100 32 GB", "V100-32"), ("one H100", "H100"), ("one H200", "H200"),
        ("an Ascend 910 server, 8 NPUs", "910x8"))
BOOKED = (8, 24)


@functools.cache
def projection(root: Path, profile: str, platform: str, device: str | None, devices: int) -> dict[str, Any]:
    """harness.estimate.booking.project of a profile on one host, from the committed runs under `root` the run there
    would read (its profile's own first), the cells its device's memory cannot hold left out: made once per host for
    every block that states it (the tables here, the start blocks), with `memory_gib`, a device's memory it planned
    with. Read-only for its callers."""
    folders, _ = estimate.references(platform, profile, root)
    memory = devicememory.table_gib(device or estimate.reference_device(folders[0]))
    return {**booking.project(matrix.load(), profile, platform, run=folders, device=device, devices=devices,
                              memory=memory), "memory_gib": memory[0]}


def booking_fits(gpu: Sequence[Run], m) -> str:
    """Per host, what `--hours 8` and `--hours 24` plan at the estimate's upper bound: the runs that fit, what is not
    decided and why (every other part of every claim is), and the cells left out (harness.estimate.booking.hours)."""
    rows = ["| host | " + " | ".join(f"`--hours {h}`: the runs that fit; what is not decided, and why" for h in BOOKED)
            + " |", "|---|" + "---|" * len(BOOKED)]
    for who, name in FITS:
        platform, device, devices = booking.BOOKINGS[name]
        p = projection(gpu[0].path.parent, "accelerator", platform, device, devices)
        cols = []
        for h in BOOKED:
            f = booking.hours(p, m, "accelerator", h)
            _, no = f.short()
            cols.append(f"{len(f.first) + len(f.late)} of {p['runs'] - p['skipped']} ({duration(f.planned_s)}); "
                        f"not decided: {no}" + (f"; {len(f.left)} cells left out" if f.left else ""))
        rows.append(f"| {who} | " + " | ".join(cols) + " |")
    return "\n".join(rows)


def _accelerator_runs(runs: Sequence[Run]) -> list[Run]:
    return [r for r in runs if not r.name.startswith("cpu-")]


def accelerator_estimates(runs: Sequence[Run]) -> str:
    """A table of the estimated wall time per host, its largest parts and what it rests on."""
    gpu = _accelerator_runs(runs)
    m = matrix.load()
    rows = ["| host | profile | estimate (range) | the largest parts | training cells on a measured cell of the same "
            "model, precision and device kind | device factor | left out: device memory |",
            "|---|---|---|---|---|---|---|"]
    priced: set[str] = set()   # the models whose MindSpore cells some row priced from the CPU ratio
    for who, profile, platform, device, devices in HOSTS:
        # The runs the runner itself would read on that host (its profile's own first), among the committed ones.
        p = projection(gpu[0].path.parent, profile, platform, device, devices)
        parts = sorted(p["groups"].items(), key=lambda kv: -kv[1])[:3]
        priced.update(p["ms_priced"])
        # the cells the run there skips for memory, as the estimate decided them
        big = sorted({f"{d.cell.model} {devicememory.precision(d.cell.amp)}" for d in p["decisions"].values()
                      if d.plan.skip and d.cell.model and d.cell.devices_per_node <= devices})
        goal = m.profile(profile).get("accelerator_hours")
        planned = ""
        if goal:   # the run plans itself to the profile's own goal there (harness.launch.booking)
            f = booking.hours(p, m, profile, float(goal), owe=False)
            planned = (f"; the run plans itself to its goal, {duration(float(goal) * 3600)}: "
                       f"{len(f.first) + len(f.late)} runs fit ({duration(f.planned_s)}), {len(f.left)} cells left out")
        rows.append(f"| {who} | {profile} | {duration(p['total_s'])} for {p['runs'] - p['skipped']} runs "
                    f"({duration(p['low_s'])} to {duration(p['upper_s'])}){planned} | "
                    + ", ".join(f"{name} {duration(s)}" for name, s in parts) + " | "
                    + ", ".join(f"{model} {m['here']}/{m['cells']}" for model, m in sorted(p["per_model"].items()))
                    + f" | {p['device_short']} | "
                    + (f"{', '.join(big)} cells ({p['memory_gib']:.0f} GiB a device)" if big else "none") + " |")
    ratios = p["ratios"]
    ms = "; ".join(f"{m} {ratios.overall(m):.2f} ({lo:.2f}-{hi:.2f})" for m in sorted(priced)
                   if (s := ratios.spread(m)) for lo, hi in [s])
    hosts = sorted({estimate.reference_device(r.path) or "?" for r in gpu})
    dates = sorted({r.date() for r in gpu})
    return "\n".join(rows) + (
        f"\n\nFrom the step times of the committed runs {', '.join(f'`docs/runs/{r.name}`' for r in gpu)} "
        f"({', '.join(hosts)}, PyTorch only, {', '.join(dates)}): each cell at its own samples, epochs and devices "
        f"from the nearest measured cell; MindSpore's cells at PyTorch's times with their training steps multiplied by "
        f"its CPU ratio to PyTorch ({', '.join(f'`docs/runs/{r.name}`' for r in runs if r.name in ratios.runs())}: "
        f"{ms}), a weak proxy for a device's; another device scaled by the two devices' measured ratio where both have "
        f"one (the H100), else by datasheet ratios; real CIFAR-10 assumed; the cells a device cannot hold left out. "
        f"How, and the range: [docs/methodology/estimate.md](docs/methodology/estimate.md). Not in the figures: the "
        f"image build, the downloads and, on an H100, MindSpore's first-run PTX compilation (`harness estimate` prints "
        f"each). **Estimates, not measurements.**"
        f"\n\n**Fitting a booking.** `--hours H` (`./reproduce.sh cuda --hours 8`, `harness run`, `harness estimate "
        f"--device V100-16 --hours 8`) plans the run to the hours booked, at the estimate's upper bound: every claim's "
        f"parts at the repeats their intervals need, the cheapest part first, then the paper's tables' other cells, "
        f"the sequential repeats, the companion cells; the hours less the build, its downloads and the first-run "
        f"compilation (`harness/preflight/host.toml` [booking.*]: allowances). What it leaves out is said "
        f"before the first cell and in the report, and after each cell the rest is re-priced from the run's own cells "
        f"(`harness/estimate/fit.py`):\n\n" + booking_fits(gpu, m))


def gpu_measured(runs: Sequence[Run]) -> str:
    """What the committed GPU runs measured, cell by cell."""
    rows = ["| run | cell | first epoch | epochs after it | time to target | device memory | mean power | status |",
            "|---|---|---|---|---|---|---|---|"]
    for r in _accelerator_runs(runs):
        for res in sorted(r.results, key=lambda x: (x["cell"], x.get("repeat", 0))):
            if res.get("kind") != "model" or res.get("status") == "skipped":
                continue
            unit = res.get("throughput_unit") or ""
            epochs = res.get("epochs") or []
            first = (f"{res['first_epoch_throughput']:,.0f} {unit} ({epochs[0]['train_s']:.1f} s)"
                     if res.get("first_epoch_throughput") and epochs else "—")
            later = (f"{res['mean_throughput_other_epochs']:,.0f} {unit}" if res.get("mean_throughput_other_epochs")
                     else "—")
            ttt = f"{res['time_to_target_s']:.1f} s" if res.get("time_to_target_s") else "—"
            mem = f"{res['peak_device_memory_mb']:,.0f} MB" if res.get("peak_device_memory_mb") else "—"
            power = f"{res['mean_power_w']:.0f} W" if res.get("mean_power_w") else "—"
            status = res.get("status", "?")
            if status != "ok" and res.get("reason"):
                status += ": " + brief(res["reason"], 160).replace("|", "/")
            rows.append(f"| {r.name} | `{res['cell']}` r{res.get('repeat', 0)} | {first} | {later} | {ttt} | {mem} | "
                        f"{power} | {status} |")
    return "\n".join(rows)

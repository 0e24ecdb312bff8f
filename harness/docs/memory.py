"""The Markdown of docs/methodology/device-memory.md's rendered blocks (harness.docs.blocks), made from the committed
predictions (harness/devices/devicememory.json), the device table (harness.devices.memory.DEVICES, the sizes of
harness.devices.catalog) and the accelerator profile's cells (harness/config/matrix.toml): the same data the runner's
skip decision reads, so the page says what a run will do.

    memory_table(runs)   per model and precision: size, data, the predicted peak and its parts
    fit_plan(runs)       per device of PLAN: its usable memory, the cells a run there accumulates and those it skips
    device_table(runs)   the devices, their memory as sold and its source
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.config.matrix import load as load_matrix
from harness.devices import memory as devicememory

PROFILE = "accelerator"
PLAN = ("V100-16", "V100-32", "910-32")   # the hosts the accelerator profile is meant for that are short of memory
PARTS = (("parameters", "parameters"), ("gradients", "gradients"), ("optimizer", "optimizer state"),
         ("activations", "activations"), ("temporaries", "temporaries"), ("kept_tensors", "kept tensors"))


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f}"


def memory_table(runs: Sequence[Any] = ()) -> str:
    data = devicememory.load()
    head = ("| model | precision | batch x sequence | data | predicted peak (GiB) | "
            + " | ".join(label for _, label in PARTS) + " | steps traced |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for model, entry in data["models"].items():
        size = " x ".join(str(v) for v in (entry.get("batch"), entry.get("sequence")) if v) or "whole graph"
        for prec in ("fp32", "amp"):
            got = entry[prec]
            parts = got["parts_bytes"]
            lines.append(f"| {model} | {'fp32' if prec == 'fp32' else 'autocast (bf16 here, fp16 on a device)'} | "
                         f"{size} | {entry['dataset']} ({entry['data']}) | **{_gib(got['peak_bytes'])}** | "
                         + " | ".join(_gib(parts.get(k, 0)) for k, _ in PARTS) + f" | {got['steps']} |")
    acc = [f"{model} {prec} " + " and ".join(f"{_gib(b)} GiB at {m}" for m, b in zip(a["micro_batches"],
                                                                                   a["peak_bytes"], strict=True))
           for model, entry in data["models"].items() for prec in ("fp32", "amp")
           if (a := entry[prec].get("accumulated"))]
    return (f"Made by `{data['made_with']}` with PyTorch {data['torch']} on {data['date']}: {data['method']}. "
            f"The parts are what was alive at the peak, by MemTracker's kinds.\n\n" + "\n".join(lines)
            + (f"\n\nWith the batch in two micro-batches (gradient accumulation), the peak by micro-batch: "
               f"{'; '.join(acc)}." if acc else ""))


def device_table(runs: Sequence[Any] = ()) -> str:
    """The table, and what the committed GPU runs' nvidia-smi said of their device's memory beside its table entry."""
    lines = ["| device | memory as sold (GiB) | usable by the rule (GiB) | source |", "|---|---|---|---|"]
    for d in devicememory.DEVICES.values():
        lines.append(f"| {d.name} | {d.gib:g} | {devicememory.usable(d.gib):.1f} | {d.source} |")
    seen = []
    for run in runs:
        for gpu in (run.env.get("nvidia") or {}).get("gpus") or []:
            mib = str(gpu.get("memory", "")).removesuffix(" MiB")
            if mib.isdigit() and (gib := devicememory.table_gib(gpu.get("name"))[0]):
                seen.append(f"{run.name}'s {gpu['name']} showed {int(mib):,} MiB to nvidia-smi, "
                            f"{int(mib) / 1024 / gib:.1%} of the {gib:g} GiB it is sold with")
    return "\n".join(lines) + ("\n\n" + "; ".join(dict.fromkeys(seen)) + "." if seen else "")


def fit_plan(runs: Sequence[Any] = ()) -> str:
    cells = load_matrix().expand(PROFILE)
    rows = devicememory.rows(cells)
    lines = ["| device | usable (GiB) | gradient accumulation | skipped for memory | cells skipped | runs skipped |",
             "|---|---|---|---|---|---|"]
    for name in PLAN:
        have = devicememory.DEVICES[name].gib
        plans = {id(r): devicememory.by_memory(r.cells[0], have) for r in rows}
        out = [r for r in rows if plans[id(r)].skip]
        what = "; ".join(f"{r.model} {r.precision}{' data-parallel' if r.parallel else ''} ({r.gib:.1f} GiB: "
                         f"{_frameworks(r.cells)})" for r in out) or "nothing"
        acc = "; ".join(f"{r.model} {r.precision} ({r.gib:.1f} GiB at once): {p.label}, {p.need.gib:.1f} GiB "
                        f"({len(r.cells)} cells)" for r in rows if (p := plans[id(r)]).steps > 1) or "none"
        lines.append(f"| {name} | {devicememory.usable(have):.1f} | {acc} | {what} | {sum(len(r.cells) for r in out)} "
                     f"| {sum(c.repeats for r in out for c in r.cells)} |")
    return (f"From the {PROFILE} profile's {len(cells)} cells ({sum(c.repeats for c in cells)} runs at their minimum "
            f"repeats) and the predictions above:\n\n" + "\n".join(lines))


def plan_line(runs: Sequence[Any] = ()) -> str:
    """ARTIFACT.md's sentence of fit_plan: per short device, what takes its batch in micro-batches, what is skipped."""
    rows = devicememory.rows(load_matrix().expand(PROFILE))
    parts = []
    for name in PLAN:
        have = devicememory.DEVICES[name].gib
        plans = {id(r): devicememory.by_memory(r.cells[0], have) for r in rows}
        acc = ", ".join(f"{r.model} {r.precision} {p.label} ({p.need.gib:.1f} GiB predicted)"
                        for r in rows if (p := plans[id(r)]).steps > 1 and p.label and p.need)
        out = ", ".join(f"{r.model} {r.precision}" for r in rows if plans[id(r)].skip)
        parts.append(f"on a `{name}` ({have:g} GiB): " + (acc or "every cell whole")
                     + (f"; skipped: {out}" if out else ""))
    return "Planned from the predictions: " + "; ".join(parts) + "."


def _frameworks(cells: Sequence[Any]) -> str:
    """'PyTorch eager, compile; MindSpore graph, pynative' for a row's cells."""
    modes: dict[str, list[str]] = {}
    for c in cells:
        modes.setdefault(c.framework, [])
        label = c.mode if c.framework == "pytorch" else f"{c.mode} {c.amp}"
        if label not in modes[c.framework]:
            modes[c.framework].append(label)
    names = {"pytorch": "PyTorch", "mindspore": "MindSpore"}
    return "; ".join(f"{names.get(fw, fw)} {', '.join(m)}" for fw, m in modes.items())


def versus_device(runs: Sequence[Any]) -> str:
    """The prediction beside what the committed GPU runs measured (torch.cuda.max_memory_allocated: the results'
    framework_peak_memory_mb), for each of their model cells the profile has: the one check of the CPU-side figure
    against a device."""
    planned = {c.id: c for c in load_matrix().expand(PROFILE)}
    lines = ["| run | cell | measured on the device (MiB) | predicted (MiB) | measured / predicted |",
             "|---|---|---|---|---|"]
    for run in runs:
        for res in sorted(run.results, key=lambda r: r["cell"]):
            measured = res.get("framework_peak_memory_mb")
            n = devicememory.need(planned[res["cell"]]) if res["cell"] in planned else None
            if not measured or n is None:
                continue
            predicted = n.gib * 1024
            lines.append(f"| {run.name} | `{res['cell']}` | {measured:,.0f} | {predicted:,.0f} | "
                         f"{measured / predicted:.2f} |")
    return "\n".join(lines)

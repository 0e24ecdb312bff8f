"""The report's figures, drawn with matplotlib from the report's rows: each is saved as a PDF (for LaTeX) and
returned as inline SVG (for the self-contained HTML page).

    Figure 3  validation metric against wall time, per model, with the target line; with repeats, each cell's
              time to target as a whisker on that line (min to max over the repeats, a tick at the median) and the
              PyTorch/MindSpore time ratio with its interval (harness.results.measure.ratio_interval) in the panel
    Figure 4  global throughput and scaling efficiency against the number of devices, whiskers min to max over the
              repeats
    Figure 5  MindSpore / PyTorch throughput ratio against the operator's parameter count, line at 1
    Energy    joules per training sample, per model cell, where the platform measured energy

A figure with nothing to draw is not made (the report then says which cells it would need).
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import matplotlib

from harness.results.measure import interval_text
from harness.results.store import write_atomic

matplotlib.use("Agg")  # no display: the report renders on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

# One colour per framework and one line style per mode, so a curve reads the same in every figure.
COLOURS = {"pytorch": "#ee4c2c", "mindspore": "#1f6fb4"}
STYLES = {"eager": "-", "compile": "-.", "graph": "-", "pynative": ":"}
AMP_MARKERS = {"off": "o", "O2": "s", "O3": "^"}
OP_MARKERS = {"conv2d": "o", "linear": "s", "batchnorm2d": "^"}
DIRECTION_FILL = {"fwd": "none", "fwd+bwd": "full"}

plt.rcParams.update({"font.size": 8, "axes.titlesize": 9, "legend.fontsize": 6.5, "svg.hashsalt": "report",
                     "svg.fonttype": "none", "pdf.fonttype": 42, "axes.grid": True, "grid.alpha": 0.3})


def _label(row: dict[str, Any]) -> str:
    amp = "" if row["amp"] == "off" else f" AMP {row['amp']}"
    return f"{row['framework']} {row['mode']}{amp}"


def _legend(fig, axes) -> None:
    """One legend for all panels, right of them, each label once."""
    handles: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    fig.legend(list(handles.values()), list(handles), loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)


def _finish(fig, folder: Path, name: str) -> dict[str, str]:
    """Write NAME.pdf into folder and return the figure as inline SVG (XML prolog and fixed ids dropped)."""
    folder.mkdir(parents=True, exist_ok=True)
    pdf = io.BytesIO()
    fig.savefig(pdf, format="pdf", bbox_inches="tight")
    write_atomic(folder / f"{name}.pdf", pdf.getvalue())
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    # Several figures share one page: make their element ids unique so their clip paths don't collide.
    svg = re.sub(r'id="([^"]+)"', rf'id="{name}-\1"', svg)
    svg = re.sub(r'url\(#([^)]+)\)', rf'url(#{name}-\1)', svg)
    svg = re.sub(r'xlink:href="#([^"]+)"', rf'xlink:href="#{name}-\1"', svg)
    return {"name": name, "pdf": f"figures/{name}.pdf", "svg": svg}


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def curves(rows: list[dict[str, Any]], host: str, folder: Path,
           ttt: list[dict[str, Any]] | None = None) -> dict[str, str] | None:
    """Figure 3 for one host: one panel per model, one line per (framework, mode, AMP), 1 device; `ttt`: the host's
    time-to-target table (harness.claims.time_to_target_table), whose ratio intervals are written in the panels."""
    rows = [r for r in rows if r["host"] == host and r["kind"] == "model" and r.get("curve")]
    models = sorted({r["model"] for r in rows})
    if not models:
        return None
    fig, axes = plt.subplots(1, len(models), figsize=(2.6 * len(models) + 0.6, 2.4), squeeze=False)
    for ax, model in zip(axes[0], models, strict=True):
        mine = [r for r in rows if r["model"] == model]
        for r in sorted(mine, key=_label):
            t, v = zip(*r["curve"], strict=True)
            ax.plot(t, v, STYLES.get(r["mode"], "-"), color=COLOURS.get(r["framework"], "grey"),
                    marker=AMP_MARKERS.get(r["amp"], "."), markersize=3, linewidth=1, label=_label(r))
        target = mine[0].get("target")
        if target is not None:
            ax.axhline(target, color="black", linewidth=0.8, linestyle="--", label="target")
            for r in sorted(mine, key=_label):  # with repeats: the time to target's spread, on the target line
                t = r["time_to_target"]
                if t["n"] > 1 and t["median"] is not None:
                    ax.errorbar([t["median"]], [target], xerr=[[t["median"] - t["min"]],
                                                               [(t["max"] or t["median"]) - t["median"]]],
                                fmt="|", color=COLOURS.get(r["framework"], "grey"), capsize=2, linewidth=1)
        row = next((t for t in ttt or [] if t["model"] == model and t.get("ratio_interval")), None)
        if row:
            ax.text(0.98, 0.04, f"PyTorch/MindSpore {row['ratio']:.2f}\n({interval_text(row['ratio_interval'])})",
                    transform=ax.transAxes, ha="right", va="bottom", fontsize=6)
        ax.set_title(f"{model} (target {target:g})" if target is not None else model)
        ax.set_xlabel("wall time (s)")
        ax.set_ylabel(f"validation {mine[0].get('metric') or 'metric'}")
    _legend(fig, axes[0])
    fig.tight_layout()
    return _finish(fig, folder, f"fig3-{slug(host)}")


def scaling(rows: list[dict[str, Any]], host: str, folder: Path) -> dict[str, str] | None:
    """Figure 4 for one host: global throughput and efficiency against devices, per model and framework setting.
    Each point is the median over the cell's repeats with a whisker from the least to the greatest repeat (none with
    one repeat). The 1-device point is the model cell of the same setting (efficiency 1 by definition)."""
    scal = [r for r in rows if r["host"] == host and r["kind"] == "scaling" and r["global_throughput"] is not None]
    if not scal:
        return None
    # per setting: (devices, global throughput spread, efficiency spread), a spread being {median, min, max, ...}
    one = {"median": 1.0, "min": 1.0, "max": 1.0}
    # A setting over several nodes is a series of its own (devices counted over every node, ticks nodes x devices).
    series: dict[tuple, list[tuple[int, dict, dict]]] = {}
    ticks: dict[int, set[str]] = {1: {"1"}}   # a device count's tick: 4, 2x2 (nodes x devices per node), or both
    for r in scal:
        series.setdefault((r["model"], r["framework"], r["mode"], r["amp"], r["nodes"]), []).append(
            (r["devices"], r["global_throughput_spread"], r["efficiency_spread"]))
        ticks.setdefault(r["devices"], set()).add(
            str(r["devices"]) if r["nodes"] == 1 else f"{r['nodes']}x{r['devices'] // r['nodes']}")
    for r in rows:
        for key in [k for k in series if k[:4] == (r["model"], r["framework"], r["mode"], r["amp"])]:
            if r["host"] == host and r["kind"] == "model" and r["devices"] == 1 \
                    and r["other_epochs"]["median"] is not None:
                series[key].append((1, r["other_epochs"], one))
    fig, (left, right) = plt.subplots(1, 2, figsize=(6.4, 2.4))
    devices = set()
    for (model, fw, mode, amp, nodes), pts in sorted(series.items(), key=lambda kv: kv[0]):
        pts.sort(key=lambda p: p[0])
        devices.update(p[0] for p in pts)
        label = (f"{model}: {fw} {mode}" + ("" if amp == "off" else f" AMP {amp}")
                 + ("" if nodes == 1 else f", {nodes} nodes"))
        kw = {"color": COLOURS.get(fw, "grey"), "linestyle": STYLES.get(mode, "-"),
              "marker": AMP_MARKERS.get(amp, "o"), "markersize": 3, "linewidth": 1, "label": label, "capsize": 2,
              "elinewidth": 0.8}
        for ax, i in ((left, 1), (right, 2)):
            x = [p[0] for p in pts]
            y = [_nan(p[i]["median"]) for p in pts]
            low = [y_ - _nan(p[i]["min"], y_) for y_, p in zip(y, pts, strict=True)]
            high = [_nan(p[i]["max"], y_) - y_ for y_, p in zip(y, pts, strict=True)]
            ax.errorbar(x, y, yerr=[low, high] if any(low + high) else None, **kw)
    unit = next((r["unit"] for r in scal if r.get("unit")), "samples/s")
    left.set(xlabel="devices (nodes x devices per node)", ylabel=f"global throughput ({unit})", title="throughput")
    right.set(xlabel="devices (nodes x devices per node)", ylabel="efficiency", title="scaling efficiency",
              ylim=(0, 1.1))
    right.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    for ax in (left, right):
        ax.set_xticks(sorted(devices), ["/".join(sorted(ticks.get(d, {str(d)}))) for d in sorted(devices)])
    right.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
    fig.tight_layout()
    return _finish(fig, folder, f"fig4-{slug(host)}")


def _nan(x: float | None, default: float = float("nan")) -> float:
    """A spread's number for matplotlib: None (not measured) as `default` (NaN: no point; the median: no whisker)."""
    return default if x is None else x


def operator_ratios(ratios: list[dict[str, Any]], host: str, folder: Path) -> dict[str, str] | None:
    """Figure 5 for one host: per operator, MindSpore GRAPH / PyTorch eager throughput against parameters (log x);
    hollow markers forward only, filled forward+backward; PYNATIVE in grey; whiskers the ratio's interval."""
    mine = [e for e in ratios if e["host"] == host and (e["ratio_graph"] or e["ratio_pynative"])]
    ops = sorted({e["op"] for e in mine})
    if not ops:
        return None
    fig, axes = plt.subplots(1, len(ops), figsize=(2.4 * len(ops) + 0.6, 2.4), squeeze=False, sharey=True)
    for ax, op in zip(axes[0], ops, strict=True):
        for (mode, colour) in (("graph", COLOURS["mindspore"]), ("pynative", "#999999")):
            for direction, fill in DIRECTION_FILL.items():
                pts = sorted(((e["params"], e[f"ratio_{mode}"], e.get(f"interval_{mode}")) for e in mine
                              if e["op"] == op and e["direction"] == direction and e[f"ratio_{mode}"]),
                             key=lambda p: p[:2])
                if pts:
                    x, y = [p[0] for p in pts], [p[1] for p in pts]
                    # whiskers: the ratio's interval (processes and blocks resampled); none where there is none
                    err = [[p[1] - p[2][0] if p[2] else 0.0 for p in pts],
                           [p[2][1] - p[1] if p[2] else 0.0 for p in pts]]
                    ax.errorbar(x, y, yerr=err if any(p[2] for p in pts) else None, linestyle="none",
                                marker=OP_MARKERS.get(op, "o"), fillstyle=fill, color=colour, markersize=4,
                                elinewidth=0.8, capsize=1.5, label=f"MindSpore {mode}, {direction}")
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):  # label the decades only: minor labels overlap on narrow panels
            axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set(title=op, xlabel="parameters")
    axes[0][0].set_ylabel("MindSpore / PyTorch throughput")
    _legend(fig, axes[0])
    fig.tight_layout()
    return _finish(fig, folder, f"fig5-{slug(host)}")


def energy(rows: list[dict[str, Any]], host: str, folder: Path) -> dict[str, str] | None:
    """Joules per training sample (energy over the cell / samples trained) per model cell with a measured energy."""
    mine = [r for r in rows if r["host"] == host and r["kind"] in ("model", "scaling")
            and r.get("samples_per_joule", {}).get("median")]
    if not mine:
        return None
    mine.sort(key=lambda r: (r["model"], r["framework"], r["mode"], r["amp"], r["devices"]))
    names = [f"{r['model']} {_label(r)}" + (f" {r['devices_label']} dev" if r["devices"] != 1 else "") for r in mine]
    values = [1.0 / r["samples_per_joule"]["median"] for r in mine]
    fig, ax = plt.subplots(figsize=(6.4, 0.22 * len(mine) + 0.8))
    ax.barh(range(len(mine)), values, color=[COLOURS.get(r["framework"], "grey") for r in mine])
    ax.set_yticks(range(len(mine)), names)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("energy per training sample (J)")
    fig.tight_layout()
    return _finish(fig, folder, f"energy-{slug(host)}")


def step_categories(explanation: dict[str, Any], folder: Path) -> dict[str, str] | None:
    """Where a training step's time goes, for one workload on one host: time per step by category (harness.profiling),
    PyTorch eager beside MindSpore GRAPH and PYNATIVE, one bar per setting in each category."""
    from harness.profiling import CATEGORIES, OVERHEAD

    bars = explanation["bars"]
    if not bars:
        return None
    cats = [c for c in (*CATEGORIES, OVERHEAD) if any(b["per_step_s"].get(c, 0) > 0 for b in bars)]
    fig, ax = plt.subplots(figsize=(6.4, 0.35 * len(cats) + 0.9))
    height = 0.8 / len(bars)
    for i, b in enumerate(bars):
        y = [k + (i - (len(bars) - 1) / 2) * height for k in range(len(cats))]
        ax.barh(y, [b["per_step_s"].get(c, 0) * 1000 for c in cats], height=height,
                color=COLOURS.get(b["framework"], "grey"), hatch="//" if b["mode"] == "pynative" else None,
                alpha=0.9 if b["mode"] != "pynative" else 0.5, label=f"{b['framework']} {b['mode']}")
    ax.set_yticks(range(len(cats)), cats)
    ax.invert_yaxis()
    # On an accelerator: the device's busy time and its wait, per setting, as dashed lines of its colour.
    for b in bars:
        dev = b.get("device")
        if dev and dev.get("measured_busy_s") is not None:
            ax.axvline(dev["measured_busy_s"] * 1000, color=COLOURS.get(b["framework"], "grey"), linestyle="--",
                       linewidth=1, label=f"{b['framework']} {b['mode']}: device busy "
                                          f"{dev['measured_busy_share']:.0%} of the step, waits "
                                          f"{dev['measured_wait_s'] * 1000:.1f} ms")
    ax.set(xlabel="ms per training step", title=f"{explanation['model']}: where a step's time goes")
    ax.legend(frameon=False, fontsize=7)
    fig.tight_layout()
    return _finish(fig, folder, f"why-{explanation['model']}-{slug(explanation['host'])}")

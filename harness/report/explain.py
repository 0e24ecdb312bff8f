"""Why each verdict: for every workload and host, where a training step's time goes in each framework (from the
profiled pass, harness.profiling), and one sentence made from those numbers that names the categories which make most
of the difference between PyTorch eager and MindSpore GRAPH (C1's fair pair). The report renders them (a chart per
workload, a LaTeX table); nothing here formats HTML.
"""

from __future__ import annotations

import math
import re
from typing import Any

from harness.profiling import CATEGORIES, OVERHEAD

SETTINGS = (("pytorch", "eager"), ("mindspore", "graph"), ("mindspore", "pynative"))   # the chart's bars, in order
PAIR = (("pytorch", "eager"), ("mindspore", "graph"))   # the sentence's comparison: C1's fair baseline
NAMED_SHARE = 0.7   # the sentence names categories until they make this share of the difference (at most three)


def explanations(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (host, model) with a profiled fp32 cell: the settings' time per step by category, and the sentence."""
    found: dict[tuple[str, str], dict[tuple[str, str], dict]] = {}
    titles = {r["model"]: _short(r.get("title") or r["model"]) for r in rows if r.get("model")}
    for r in rows:
        if r["kind"] == "model" and r["amp"] == "off" and "per_step_s" in (r.get("profile") or {}) \
                and (r["framework"], r["mode"]) in SETTINGS:
            found.setdefault((r["host"], r["model"]), {})[(r["framework"], r["mode"])] = r["profile"]
    out = []
    for (host, model), by_setting in sorted(found.items()):
        bars = [{"framework": fw, "mode": mode, "step_s": p["step_wall_s"], "per_step_s": p["per_step_s"],
                 "profiler_cost": p.get("profiler_cost"), "top_ops": p.get("top_ops", []),
                 "device": p.get("device"), "pass_s": p.get("pass_s")}
                for (fw, mode) in SETTINGS if (p := by_setting.get((fw, mode)))]
        shown = [c for c in (*CATEGORIES, OVERHEAD) if any(b["per_step_s"].get(c, 0) >= 5e-5 for b in bars)]
        out.append({"host": host, "model": model, "bars": bars, "categories": shown, "profiles": by_setting,
                    "versus": None,   # set by the report where the expected run was measured on another processor
                    "by_setting": {f"{b['framework']}/{b['mode']}": b for b in bars},
                    "title": titles.get(model, model),
                    "sentence": sentence(host, titles.get(model, model), by_setting.get(PAIR[0]),
                                         by_setting.get(PAIR[1]))})
    return out


def sentence(host: str, title: str, pt: dict | None, ms: dict | None) -> str | None:
    """'GCN on Cora, cpu: of the 44 ms per step by which PyTorch eager is slower than MindSpore GRAPH (67 ms against
    23 ms), 37 ms is dropout/random.' The categories that go the slower framework's way, largest first, until they
    make NAMED_SHARE of the difference (at most three); then those that go the other way by a tenth of the difference
    or more ('while MindSpore GRAPH spends 9 ms more on host and framework overhead'). Where a side's profile has the
    device's timeline (an accelerator), what share of its step the device was busy follows (device_clause); with
    one side only, that alone. None without both sides and without a timeline (a CPU)."""
    if not pt or not ms:
        alone = [device_clause(name, p) for name, p in (("PyTorch eager", pt), ("MindSpore GRAPH", ms)) if p]
        alone = [c for c in alone if c]
        return f"{title}, {host}: " + " ".join(alone) if alone else None
    cats = (*CATEGORIES, OVERHEAD)
    diff = {c: pt["per_step_s"].get(c, 0.0) - ms["per_step_s"].get(c, 0.0) for c in cats}
    total = pt["step_wall_s"] - ms["step_wall_s"]
    head = f"{title}, {host}"
    if total == 0:
        return (f"{head}: PyTorch eager and MindSpore GRAPH take the same time per step "
                f"({milliseconds(pt['step_wall_s'])}).")
    sign = 1 if total > 0 else -1
    slower, faster = ("PyTorch eager", "MindSpore GRAPH") if sign > 0 else ("MindSpore GRAPH", "PyTorch eager")
    walls = (pt, ms) if sign > 0 else (ms, pt)
    named = _making_most(diff, total, " is ")
    against = [f"{milliseconds(abs(diff[c]))} more on {c}" for c in sorted(cats, key=lambda c: diff[c] * sign)
               if diff[c] * sign <= -0.1 * abs(total)][:2]
    text = (f"{head}: of the {milliseconds(abs(total))} per step by which {slower} is slower than {faster} "
            f"({milliseconds(walls[0]['step_wall_s'])} against {milliseconds(walls[1]['step_wall_s'])}), "
            f"{_and(named) if named else 'no category makes a share'}")
    if against:
        text += f", while {faster} spends {_and(against)}"
    extra = [c for c in (device_clause("PyTorch eager", pt), device_clause("MindSpore GRAPH", ms)) if c]
    return " ".join([text + ".", *extra])


def versus(title: str, here: dict[tuple[str, str], dict], there: dict[tuple[str, str], dict], where: str,
           at: tuple[str, str] = ("here", "there")) -> str | None:
    """Why a ratio moved between two hosts: each framework's profiled step here against there (C1's fair pair), and
    for the one that moved more, the categories that make most of its change. 'GRU on Multi30K: against docs/runs/
    cpu-quick (AMD EPYC), PyTorch eager's step 195 ms here against 180 ms there (1.08x), MindSpore GRAPH's 1,234 ms
    against 464 ms (2.66x): of its 770 ms more, 405 ms is loss, 259 ms host and framework overhead, ...'. None without
    both frameworks' profiles on both hosts."""
    pairs = [(name, here.get(s), there.get(s)) for name, s in zip(("PyTorch eager", "MindSpore GRAPH"), PAIR,
                                                                   strict=True)]
    if not all(h and t and h.get("step_wall_s") and t.get("step_wall_s") for _, h, t in pairs):
        return None
    factor = {name: h["step_wall_s"] / t["step_wall_s"] for name, h, t in pairs}
    steps = ", ".join(f"{name}'s step {milliseconds(h['step_wall_s'])} {at[0]} against "
                      f"{milliseconds(t['step_wall_s'])} {at[1]} ({factor[name]:.2f}x)" for name, h, t in pairs)
    name, h, t = max(pairs, key=lambda p: abs(math.log(factor[p[0]])))
    total = h["step_wall_s"] - t["step_wall_s"]
    cats = (*CATEGORIES, OVERHEAD)
    diff = {c: h["per_step_s"].get(c, 0.0) - t["per_step_s"].get(c, 0.0) for c in cats}
    named = _making_most(diff, total, " ")
    return (f"{title}: against {where}, {steps}: of {name}'s {milliseconds(abs(total))} "
            f"{'more' if total > 0 else 'less'} per step, {_and(named) if named else 'no category makes a share'}.")


def _making_most(diff: dict[str, float], total: float, sep: str) -> list[str]:
    """The categories that go the way of a difference of `total` seconds a step, largest first, until they make
    NAMED_SHARE of it (at most three): "405 ms<sep>loss" each."""
    sign = 1 if total > 0 else -1
    named, covered = [], 0.0
    for c in sorted(diff, key=lambda c: -diff[c] * sign):
        if diff[c] * sign <= 0 or len(named) == 3 or covered >= NAMED_SHARE * abs(total):
            break
        named.append(f"{milliseconds(abs(diff[c]))}{sep}{c}")
        covered += abs(diff[c])
    return named


HOST_BOUND, DEVICE_BOUND = 0.5, 0.8   # busy shares below / above which a step is said to be host- / device-bound


def device_clause(setting: str, profile: dict | None) -> str | None:
    """"PyTorch eager's step is host-bound: the GPU is busy 29% of its 24 ms." from the profile's device block (the
    device's kernels' union against the measured step); None without one (a CPU)."""
    dev = (profile or {}).get("device")
    if not dev or dev.get("measured_busy_share") is None:
        return None
    share, step = dev["measured_busy_share"], profile["step_wall_s"]
    kind = "NPU" if "npu" in str(dev.get("source", "")).lower() or "ascend" in str(dev.get("source", "")).lower() \
        else "GPU"
    bound = "host-bound" if share < HOST_BOUND else "device-bound" if share >= DEVICE_BOUND else "partly host-bound"
    note = "" if dev.get("verified", True) else " (the device timeline's reading is not verified)"
    return (f"{setting}'s step is {bound}: the {kind} is busy {share:.0%} of its {milliseconds(step)} and waits "
            f"{milliseconds(dev['measured_wait_s'])}{note}.")


NEAR_PEAK, FAR_FROM_PEAK = 0.5, 0.2   # shares of the device's peak above / below which the limit sentence says so


def limit_sentence(host: str, title: str, limits: dict[tuple[str, str], dict]) -> str | None:
    """"ResNet50 on CIFAR-10, cuda, against the device's limit: PyTorch eager reaches 41.0 TFLOP/s, 61% of the NVIDIA
    H200's fp32 peak (67.0 TFLOP/s): close to the device's limit." from the report rows' `limit` (harness.report.build.
    share_of_peak), per setting of SETTINGS that has one; on a CPU the achieved rate alone (no peak is known). None
    where no setting has a FLOP count."""
    parts = []
    for fw, mode in SETTINGS:
        lim = limits.get((fw, mode))
        if not lim:
            continue
        name = f"{'PyTorch' if fw == 'pytorch' else 'MindSpore'} {mode if fw == 'pytorch' else mode.upper()}"
        text = f"{name} reaches {flop_rate(lim['flops_per_s'])}FLOP/s"
        share = lim.get("share")
        if share is None:
            text += " (no peak is known for " + (f"the {lim['device']})" if lim.get("device") else "a CPU)")
        else:
            text += (f", {share:.0%} of the {lim['device']}'s {lim['precision']} peak "
                     f"({flop_rate(lim['peak'])}FLOP/s)")
            if share > 1 and lim.get("tf32"):
                text += " (cuDNN's TF32 convolutions can pass the FP32 peak)"
            if share >= NEAR_PEAK:
                text += ": close to the device's limit"
            elif share < FAR_FROM_PEAK:
                text += ": far from the device's limit, so the host and the framework set the pace"
        parts.append(text)
    return f"{title}, {host}, against the device's limit: " + "; ".join(parts) + "." if parts else None


def flop_rate(value: float | None) -> str:
    """41.0e12 -> "41.0 T", 5.2e10 -> "52.0 G": a rate with its SI prefix, the unit (FLOP/s) left to the caller."""
    if value is None or value != value:
        return "–"
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if value >= scale:
            return f"{value / scale:.1f} {prefix}"
    return f"{value:.0f} "


def _and(parts: list[str]) -> str:
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]


def _short(title: str) -> str:
    """A model's matrix title without its parentheses: "GCN (Kipf & Welling) on Cora" -> "GCN on Cora"."""
    return re.sub(r"\s*\([^)]*\)", "", title).strip()


def milliseconds(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.1f} ms" if ms >= 1 else f"{ms:.2f} ms"

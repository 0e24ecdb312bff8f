"""From a sampler's recording and the cell's event log to the result's telemetry keys.

Energy and means are taken over the cell's *work*, the same time its throughput counts:
- training cells: every epoch's training interval (epoch_stop's `train_s` back from its timestamp),
  with the epochs' samples;
- operator cells: the timed blocks at the end of the run (block_size x blocks iterations of the
  configuration's batch), which end at run_stop.
Energy over a set of intervals comes from a cumulative counter where the source has one (RAPL, NVML's
total energy), interpolated linearly at the interval ends, else from the power samples, integrated
as a piecewise-linear curve. Peaks are over the whole cell (set-up, compilation and evaluation too).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from harness.config.spec import OperatorSpec, Spec
from harness.results import eventlog

MAX_POINTS = 240  # per series in the result: enough for a power-over-time figure, small in JSON


def is_counter(field: str) -> bool:
    return field.endswith(("_j", "_s"))


def _column(samples: list[tuple[float, dict]], field: str) -> tuple[list[float], list[float]]:
    ts, vs = [], []
    for t, values in samples:
        v = values.get(field)
        if v is not None:
            ts.append(t)
            vs.append(float(v))
    return ts, vs


def counter_delta(ts: list[float], vs: list[float], windows: list[tuple[float, float]]) -> float | None:
    """Sum over windows of the counter's increase, interpolated linearly; None if a window lies outside
    the samples (the counter cannot say what happened there)."""
    if len(ts) < 2 or not windows:
        return None
    tol = 1e-6
    if min(a for a, _ in windows) < ts[0] - tol or max(b for _, b in windows) > ts[-1] + tol:
        return None

    def at(x: float) -> float:
        k = min(max(bisect_right(ts, x) - 1, 0), len(ts) - 2)
        t0, t1 = ts[k], ts[k + 1]
        return vs[k] + (vs[k + 1] - vs[k]) * (min(max(x, t0), t1) - t0) / (t1 - t0) if t1 > t0 else vs[k]

    return sum(at(b) - at(a) for a, b in windows)


def gauge_integral(ts: list[float], vs: list[float], windows: list[tuple[float, float]]) -> float | None:
    """Sum over windows of the integral of the piecewise-linear gauge (held constant beyond the first
    and last samples); None without samples."""
    if not ts or not windows:
        return None
    cum = [0.0]
    for k in range(1, len(ts)):
        cum.append(cum[-1] + (ts[k] - ts[k - 1]) * (vs[k] + vs[k - 1]) / 2)

    def F(x: float) -> float:  # integral from ts[0] to x
        if x <= ts[0]:
            return (x - ts[0]) * vs[0]
        if x >= ts[-1]:
            return cum[-1] + (x - ts[-1]) * vs[-1]
        k = bisect_right(ts, x) - 1
        dt, span = x - ts[k], ts[k + 1] - ts[k]
        slope = (vs[k + 1] - vs[k]) / span if span > 0 else 0.0
        return cum[k] + vs[k] * dt + slope * dt * dt / 2

    return sum(F(b) - F(a) for a, b in windows)


def work_windows(kind: str, events: list[dict], out: dict, spec: Spec) -> tuple[list[tuple[float, float]], int | None]:
    """The cell's work intervals on the event-log clock, and the samples processed in them."""
    if kind in ("model", "scaling"):
        windows, samples = [], 0
        for e in events:
            if e.get("key") == eventlog.EPOCH_STOP:
                m = e.get("metadata", {})
                windows.append((e["elapsed_s"] - m["train_s"], e["elapsed_s"]))
                samples += int(m.get("samples") or 0)
        return windows, (samples or None)
    if kind == "operator":
        stop = next((e["elapsed_s"] for e in events if e.get("key") == eventlog.RUN_STOP), None)
        times, block = out.get("block_times_s"), out.get("block_size")
        if stop is None or not times or not block:
            return [], None
        batch = spec.shape.get("batch") if isinstance(spec, OperatorSpec) else None
        timed = sum(times) * block
        return [(stop - timed, stop)], (batch * block * len(times) if batch else None)
    return [], None


def _round(x: float | None, digits: int = 4) -> float | None:
    if x is None:
        return None
    return float(f"{x:.{digits}g}")


def downsample(samples: list[tuple[float, dict]], t_ref: float, cpus: int | None = None,
               max_points: int = MAX_POINTS) -> dict[str, list]:
    """Columns for a figure: t_s (seconds from run_start, the curve's clock; negative = before it), and
    per field the bucket's mean (gauges), maximum (memory) or rate (counters: energy_j -> power_w,
    cpu_s -> cpu_pct of the usable cores). At most max_points rows."""
    n = len(samples)
    if n == 0:
        return {}
    size = max(1, -(-n // max_points))
    buckets = [list(range(i, min(i + size, n))) for i in range(0, n, size)]
    fields = sorted({f for _, v in samples for f in v})
    cols: dict[str, list] = {"t_s": [_round(sum(samples[i][0] for i in b) / len(b) - t_ref, 6) for b in buckets]}
    for f in fields:
        if is_counter(f):
            name = {"energy_j": "power_w", "cpu_s": "cpu_pct"}.get(f, f + "_rate")
            col = []
            for b in buckets:
                first = b[0] - 1 if b[0] > 0 else b[0]
                a, z = samples[first], samples[b[-1]]
                va, vz = a[1].get(f), z[1].get(f)
                rate = (vz - va) / (z[0] - a[0]) if va is not None and vz is not None and z[0] > a[0] else None
                if rate is not None and f == "cpu_s":
                    rate = 100 * rate / (cpus or 1)
                col.append(_round(rate))
            if name in cols or name in fields:  # a measured power beats one derived from a counter
                continue
            cols[name] = col
        else:
            col = []
            for b in buckets:
                vals = [samples[i][1][f] for i in b if samples[i][1].get(f) is not None]
                if not vals:
                    col.append(None)
                elif f.endswith("memory_mb") or f == "rss_mb":
                    col.append(_round(max(vals)))
                else:
                    col.append(_round(sum(vals) / len(vals)))
            cols[f] = col
    return {k: v for k, v in cols.items() if any(x is not None for x in v) or k == "t_s"}


def _energy(src: dict, windows: list[tuple[float, float]]) -> float | None:
    samples = src["samples"]
    ts, vs = _column(samples, "energy_j")
    if len(ts) >= 2:
        return counter_delta(ts, vs, windows)
    ts, vs = _column(samples, "power_w")
    return gauge_integral(ts, vs, windows)


def _peak(src: dict | None, field: str) -> float | None:
    if not src:
        return None
    vals = [v[field] for _, v in src["samples"] if v.get(field) is not None]
    return max(vals) if vals else None


def summarise(recording: dict[str, Any] | None, events: list[dict], out: dict, kind: str, spec: Spec,
              t_events0: float, framework_peak_mb: float | None = None,
              framework_reserved_mb: float | None = None) -> dict[str, Any]:
    """The result keys (see harness.telemetry.KEYS) and the `telemetry` details with downsampled series.
    `t_events0` is the event log's clock origin on the sampler's clock (time.perf_counter)."""
    result: dict[str, Any] = {"framework_peak_memory_mb": _round(framework_peak_mb, 6),
                              "framework_reserved_memory_mb": _round(framework_reserved_mb, 6)}
    if recording is None:
        return result
    sources = recording["sources"]
    host = sources.get("psutil")
    device_name = next((n for n in ("nvml", "npu-smi") if n in sources), None)
    device = sources.get(device_name) if device_name else None
    windows_ev, samples = work_windows(kind, events, out, spec)
    windows = [(t_events0 + a, t_events0 + b) for a, b in windows_ev]
    work_s = sum(b - a for a, b in windows) or None
    run_start = next((e["elapsed_s"] for e in events if e.get("key") == eventlog.RUN_START), 0.0)
    t_ref = t_events0 + run_start

    # Memory: sampled peaks, and the kernel's exact high-water mark of this process's RSS.
    hwm = (host or {}).get("info", {}).get("rss_high_water_mb")
    peaks = [v for v in (_peak(host, "rss_mb"), hwm) if v is not None]
    result["peak_rss_mb"] = _round(max(peaks), 6) if peaks else None
    result["peak_device_memory_mb"] = _round(_peak(device, "device_memory_mb"), 6)

    # Energy: the device's where there is one, else the CPU packages' (RAPL).
    energy_src, scope = None, None
    for name, src in ((device_name, device), ("psutil", host)):
        if src and any(v.get("energy_j") is not None or v.get("power_w") is not None for _, v in src["samples"]):
            energy_src, scope = name, ("device" if src is device else "host")
            break
    energy = _energy(sources[energy_src], windows) if energy_src and windows else None
    total = None
    if energy_src and sources[energy_src]["samples"]:  # the whole sampled cell: set-up, compilation, evaluation
        ss = sources[energy_src]["samples"]
        total = _energy(sources[energy_src], [(ss[0][0], ss[-1][0])])
    result["energy_j"] = _round(energy, 6) if energy is not None and energy >= 0 else None
    result["total_energy_j"] = _round(total, 6) if total is not None and total >= 0 else None
    result["mean_power_w"] = _round(energy / work_s, 6) if result["energy_j"] is not None and work_s else None
    result["samples_per_joule"] = (_round(samples / energy, 6) if samples and result["energy_j"] else None)

    # Utilisation over the work: the device's busy % where sampled, else this process's CPU use.
    util, util_scope = None, None
    if device and work_s:
        ts, vs = _column(device["samples"], "util_pct")
        integral = gauge_integral(ts, vs, windows)
        if integral is not None:
            util, util_scope = integral / work_s, "device"
    cpus = (host or {}).get("info", {}).get("cpus") or 1
    if util is None and host and work_s:
        ts, vs = _column(host["samples"], "cpu_s")
        cpu = counter_delta(ts, vs, windows)
        if cpu is not None:
            util, util_scope = 100 * cpu / (work_s * cpus), f"process CPU, % of {cpus} usable cores"
    result["mean_utilisation_pct"] = _round(util, 6)

    if device_name and device:
        result["telemetry_source"] = device_name
    elif host:
        result["telemetry_source"] = "psutil+rapl" if (host["info"].get("rapl")) else "psutil"
    else:
        result["telemetry_source"] = None
    details: dict[str, Any] = {
        "interval_s": recording["interval_s"], "unavailable": recording["unavailable"],
        "energy_source": energy_src, "energy_scope": scope, "utilisation_scope": util_scope,
        "work_s": _round(work_s, 6), "work_intervals": len(windows), "work_samples": samples,
        "peak_device_process_memory_mb": _round(_peak(device, "process_memory_mb"), 6),
        "sources": {}, "series": {},
    }
    if device and scope == "device" and host and any(v.get("energy_j") is not None for _, v in host["samples"]):
        details["host_energy_j"] = _round(_energy(host, windows), 6) if windows else None  # RAPL beside a device
    for name, src in sources.items():
        details["sources"][name] = {"samples": len(src["samples"]), "errors": src["errors"],
                                    "last_error": src["last_error"], "gave_up": src["gave_up"],
                                    "interval_s": src["interval_s"], "scope": src["scope"], **src["info"]}
        details["series"][name] = downsample(src["samples"], t_ref, cpus if name == "psutil" else None)
    result["telemetry"] = details
    return result


def merge_ranks(children: dict[int, dict]) -> dict[str, Any]:
    """A multi-process cell: each rank sampled itself (its own process, its own device). Memory peaks
    are per process / per device, like a 1-device cell's: the largest rank's, with every rank's kept.
    Energy: device energy adds up over the ranks' devices; host (RAPL) energy is the same CPU packages
    seen from every rank, so rank 0's is the cell's. samples_per_joule counts every rank's samples."""
    ranks = dict(sorted(children.items()))
    if not ranks:
        return {}

    def values(key):
        return [c.get(key) for c in ranks.values()]

    def largest(key):
        vs = [v for v in values(key) if v is not None]
        return max(vs) if vs else None

    first = ranks[min(ranks)]
    tel = dict(first.get("telemetry") or {})
    scope = tel.get("energy_scope")
    out: dict[str, Any] = {
        "peak_rss_mb": largest("peak_rss_mb"), "peak_device_memory_mb": largest("peak_device_memory_mb"),
        "framework_peak_memory_mb": largest("framework_peak_memory_mb"),
        "framework_reserved_memory_mb": largest("framework_reserved_memory_mb"),
        "telemetry_source": first.get("telemetry_source"),
        "rank_peak_rss_mb": {r: c.get("peak_rss_mb") for r, c in ranks.items()},
        "rank_peak_device_memory_mb": {r: c.get("peak_device_memory_mb") for r, c in ranks.items()},
        "rank_energy_j": {r: c.get("energy_j") for r, c in ranks.items()},
    }
    energies, powers = values("energy_j"), values("mean_power_w")
    if scope == "device":
        out["energy_j"] = sum(energies) if None not in energies else None
        out["total_energy_j"] = (sum(values("total_energy_j")) if None not in values("total_energy_j") else None)
        out["mean_power_w"] = sum(powers) if None not in powers else None
    else:
        out["energy_j"], out["mean_power_w"] = first.get("energy_j"), first.get("mean_power_w")
        out["total_energy_j"] = first.get("total_energy_j")
    samples = [(c.get("telemetry") or {}).get("work_samples") for c in ranks.values()]
    total_samples = sum(samples) if samples and None not in samples else None
    out["samples_per_joule"] = total_samples / out["energy_j"] if total_samples and out["energy_j"] else None
    utils = [u for u in values("mean_utilisation_pct") if u is not None]
    if len(utils) != len(ranks):
        out["mean_utilisation_pct"] = None
    elif tel.get("utilisation_scope") == "device":
        out["mean_utilisation_pct"] = sum(utils) / len(utils)  # the devices' average busy %
    else:
        out["mean_utilisation_pct"] = sum(utils)  # each rank's share of the host's cores: the cell's total
    tel["ranks_merged"] = len(ranks)
    tel["work_samples"] = total_samples
    out["telemetry"] = tel
    return out

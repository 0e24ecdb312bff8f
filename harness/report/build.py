"""Render a run (or several, from different hosts) into one HTML page, a LaTeX report and paper fragments.

    report/report.html        self-contained page: figures inline as SVG, no network fetches, printable
    report/report.tex         compiles on its own with pdflatex (figures from figures/*.pdf)
    report/tables/*.tex       booktabs fragments (table1, time_to_target, operators, claims) to \\input
    report/figures/*.pdf      Figures 3, 4, 5 and energy per sample, per host (matplotlib)

Several run folders merge (merge()): each host and experiment (its platform; beside it the host name where two runs
share a platform, the profile where the runs hold more than one, the matrix file where one profile ran two) becomes its
own column group in Table I, its own figures and its own claim verdicts. Only results of one experiment that ran the
same settings merge as repeats of a cell; two that did not are refused in one line.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Any

import jinja2

from harness import claims as claim_rules
from harness.config import cellid
from harness.devices import accumulation
from harness.devices.query import run_device
from harness.errors import HarnessError
from harness.host import configdiff, platforms
from harness.launch import faults
from harness.paths import TEMPLATES, cpu_family, expected_runs
from harness.report import companion, explain, figures
from harness.report.layout import planned_skips, sections
from harness.report.memory_measured import table as memory_table
from harness.results import arith, measure
from harness.results.store import RunStore, write_atomic

_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}"}
_LATEX_RE = re.compile("|".join(re.escape(k) for k in _LATEX_SPECIAL))
# Non-ASCII that pdflatex's default (OT1) fonts can set; anything else is transliterated or shown as '?'.
_LATEX_UNICODE = {"–": "--", "—": "---", "×": r"$\times$", "±": r"$\pm$", "µ": r"$\mu$", "®": "(R)",
                  "©": "(C)", "™": "(TM)", "≥": r"$\geq$", "≤": r"$\leq$", "∞": r"$\infty$", "…": "...", "’": "'",
                  "‘": "`", "“": "``", "”": "''"}

# The seed paper's set-up (Section IV.A), shown beside every host of this run.
PAPER_ENV = {"accelerators": "8x Ascend 910 (32 GB)", "cpu": "Kunpeng 920", "os": "EulerOS 2.0 SP8",
             "stack": "CANN 5.1.RC2.1", "python": "3.7.10", "torch": "1.8.1+ascend.rc2", "mindspore": "1.8.1"}
THROUGHPUT_KINDS = ("model", "scaling")
OTHER_EPOCHS = "mean_throughput_other_epochs"


def latex_escape(value: Any) -> str:
    text = _LATEX_RE.sub(lambda m: _LATEX_SPECIAL[m.group()], str(value))
    out = []
    for ch in text:
        if ord(ch) < 128:
            out.append(ch)
        elif ch in _LATEX_UNICODE:
            out.append(_LATEX_UNICODE[ch])
        else:  # é -> e; what has no ASCII base letter becomes '?', never a character that breaks pdflatex
            base = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
            out.append(_LATEX_RE.sub(lambda m: _LATEX_SPECIAL[m.group()], base) or "?")
    return "".join(out)


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if value != value:  # NaN
            return "–"
        return f"{value:,.{digits}f}"
    return str(value)


def _experiment(meta: dict[str, Any]) -> tuple[str, str | None, str | None]:
    """What makes two run folders one experiment: the platform, the profile and the matrix file (its hash). The same
    cell id in two experiments is two measurements (a profile's sizes, batches and epochs are its own: the quick
    profile's ResNet50 trains 16 images an epoch where a GPU profile's trains thousands), never repeats of one."""
    return meta.get("platform", "?"), meta.get("profile"), meta.get("matrix_sha256")


def _host_labels(runs: list[tuple[Path, dict, dict]]) -> list[str]:
    """Each run folder's column group: its platform, and in brackets what tells it apart from the report's other
    folders: the host name where two runs with different hosts share a platform, the profile where the runs hold more
    than one (beside every platform then, so that no column reads as the same experiment as another), and the matrix
    file's hash (its first 8 digits) where one platform and profile ran two matrix files. Folders of one label merge."""
    hosts_per_platform: dict[str, set] = {}
    matrices: dict[tuple, set] = {}
    allocs: dict[tuple, set] = {}
    for _, meta, env in runs:
        platform, profile, matrix = _experiment(meta)
        # Shards (run --shard K/N) of one profile are one measurement spread over hosts: they merge.
        host = "shards" if meta.get("shard") else env.get("hostname")
        hosts_per_platform.setdefault(platform, set()).add(host)
        matrices.setdefault((platform, profile), set()).add(matrix)
        allocs.setdefault((platform, profile), set()).add(configdiff.allocator_signature(env))
    profiles = {_experiment(meta)[1] for _, meta, _ in runs}
    labels = []
    for _, meta, env in runs:
        platform, profile, matrix = _experiment(meta)
        beside = [f"{env.get('hostname')}"] if len(hosts_per_platform[platform]) > 1 else []
        beside += [f"{profile}"] if len(profiles) > 1 else []
        beside += [f"matrix {(matrix or 'not recorded')[:8]}"] if len(matrices[platform, profile]) > 1 else []
        # Runs whose cells got different allocators are two configurations, never repeats of one (a host without
        # tcmalloc against one with it): labelled apart, like profiles.
        beside += [f"allocators: {configdiff.allocator_signature(env) or 'not recorded'}"] \
            if len(allocs[platform, profile]) > 1 else []
        labels.append(f"{platform} ({', '.join(beside)})" if beside else platform)
    return labels


# What of a repeat's r<k>.spec.json leaves what it measured as it is: how many repeats its run asked for (--repeats,
# raised on --resume) and its time limit; where the host kept its files is outside the cell, so is never compared.
_NOT_THE_EXPERIMENT = ("repeats", "timeout_s")


def _settings(spec: dict[str, Any] | None) -> dict[str, Any] | None:
    """The settings a repeat ran: its cell from r<k>.spec.json (less _NOT_THE_EXPERIMENT; the matrix's settings
    under their own names) and whether its data was synthetic, flat. None where it has no spec file (a cell skipped
    before it ran, a folder written by hand)."""
    if not spec or not isinstance(spec.get("cell"), dict):
        return None
    flat: dict[str, Any] = {"synthetic": spec.get("synthetic")}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and value:
            for k, v in value.items():
                walk(f"{prefix}{k}.", v)
        else:
            flat[prefix[:-1].removeprefix("spec.")] = value

    walk("", {k: v for k, v in spec["cell"].items() if k not in _NOT_THE_EXPERIMENT})
    flat["accumulation_steps"] = spec.get("accumulation_steps") or 1   # the batch in micro-batches: another step
    return flat


def merge(runs: list[Path]) -> tuple[list[dict[str, Any]], list[tuple[str, Path, dict[str, Any]]]]:
    """The one place that decides what merges. Returns the column groups (hosts: {"label", "runs", "meta", "env"})
    and every result as (its group's label, its run folder, the result); a group's results are the repeats of its
    cells (measure.summarise).

    Folders of different experiments (_experiment: platform, profile, matrix) stay apart, each its own labelled group
    (_host_labels), rather than being refused: a reviewer merging two hosts' runs wants them side by side in one
    report, and labelled column groups keep each run's numbers, claims and figures its own where a refusal would leave
    two reports to compare by hand. Folders of one experiment merge: shards, a multi-node run and
    its one-host run, two runs of one command. Within a group a cell's results merge as repeats only where each ran the
    same settings (_settings); where two did not (a matrix edited between two invocations of a resumed folder, two
    harness versions) no label can keep them apart, and the report is refused in one line naming both run folders and
    the fix."""
    loaded = []
    for run in runs:
        store = RunStore(run)
        store.require_run()
        loaded.append((Path(run), store.read_meta(), store.read_env()))
    hosts: list[dict[str, Any]] = []
    merged: list[tuple[str, Path, dict[str, Any]]] = []
    ran: dict[tuple[str, str], tuple[dict[str, Any], Path, int]] = {}  # (label, cell): the first settings seen
    for (run, meta, env), label in zip(loaded, _host_labels(loaded), strict=True):
        if label not in [h["label"] for h in hosts]:
            # its expected results, found once (configdiff.expected_for): the banner and the Why's "versus" read them
            hosts.append({"label": label, "runs": [str(run)], "meta": meta, "env": env,
                          "expected": configdiff.expected_for(meta, env)})
        else:
            next(h for h in hosts if h["label"] == label)["runs"].append(str(run))
        store = RunStore(run)
        for r in store.results():
            settings = _settings(store.read_spec(r["cell"], r["repeat"]))
            if settings is not None:
                first = ran.setdefault((label, r["cell"]), (settings, run, r["repeat"]))
                if first[0] != settings:
                    raise _not_repeats(r["cell"], first, (settings, run, r["repeat"]))
            merged.append((label, run, {**r, "platform": r.get("platform", meta.get("platform"))}))
    return hosts, merged


def _not_repeats(cell: str, a: tuple[dict[str, Any], Path, int], b: tuple[dict[str, Any], Path, int]) -> HarnessError:
    differ = sorted(k for k in a[0].keys() | b[0].keys() if a[0].get(k) != b[0].get(k))
    what = ", ".join(f"{k} {a[0].get(k)} vs {b[0].get(k)}" for k in differ[:3]) + (", ..." if differ[3:] else "")
    fix = (f"report each folder on its own (`python -m harness report {a[1]}`, then {b[1]} alike)" if a[1] != b[1] else
           f"re-run the cell into a new --out (`python -m harness run ... --only {cell}`)")
    return HarnessError(f"{cell} ran different settings in {a[1]} (r{a[2]}) and {b[1]} (r{b[2]}): {what}; they are "
                        f"not repeats of one cell: {fix}")


def _row(host: str, s: measure.Repeats) -> dict[str, Any]:
    """One (host, cell): its settings from its first repeat, every measured quantity as the spread over the ok ones."""
    first = s.first

    def spread(key):
        return s.measure(key).spread()

    return {
        "host": host, "platform": first.get("platform"), "cell": s.cell, "kind": first.get("kind"),
        "model": first.get("model"), "framework": first.get("framework"), "mode": first.get("mode"),
        "amp": first.get("amp"), "devices": first.get("devices"), "nodes": first.get("nodes") or 1,
        "devices_label": cellid.devices_label(first.get("devices") or 1, first.get("nodes") or 1),
        "unit": first.get("throughput_unit"),
        "status": "ok" if s.ok else first.get("status"), "repeats": s.repeats, "repeats_ok": len(s.ok),
        "synthetic": any(r.get("synthetic") for r in s.ok + s.not_ok), "curve": s.curve(),
        "first_epoch": spread("first_epoch_throughput"), "other_epochs": spread("mean_throughput_other_epochs"),
        "time_to_target": s.time_to_target.spread(), "best_metric": spread("best_metric"),
        "test_metric": spread("test_metric"), "metric": first.get("metric"), "target": first.get("target"),
        "settings": first.get("settings"), "process_env": first.get("process_env"),
        # "batch 256 as 2 x 128 accumulated" where the device could not hold the batch (harness.devices.memory.plan)
        "accumulation": accumulation.recorded(first.get("settings")),
        # the profiled pass (harness.profiling): one repeat has it
        "profile": next((r["profile"] for r in s.ok if r.get("profile")), None), "title": first.get("title"),
        # scaling cells
        "global_throughput": s.value("global_throughput"), "efficiency": s.value("efficiency"),
        "per_device_throughput": s.value("per_device_throughput"),
        "global_throughput_spread": spread("global_throughput"), "efficiency_spread": spread("efficiency"),
        # telemetry (null where the platform could not say)
        "peak_device_memory_mb": spread("peak_device_memory_mb"), "peak_rss_mb": spread("peak_rss_mb"),
        "mean_power_w": spread("mean_power_w"), "energy_j": spread("energy_j"),
        "samples_per_joule": spread("samples_per_joule"), "telemetry_source": first.get("telemetry_source"),
        # operator cells
        "op": first.get("op"), "params": first.get("params"), "shape": first.get("shape"),
        "dtype": first.get("dtype"), "direction": first.get("direction"),
        "median_s": spread("median_s"), "iqr_s": spread("iqr_s"), "throughput": spread("throughput"),
        "flops_per_s": spread("flops_per_s"), "percent_of_peak": spread("percent_of_peak"),
    }


def collect(runs: list[Path]) -> dict[str, Any]:
    """Results of every run folder, grouped per (host, cell) with the median and range over repeats."""
    hosts, merged = merge(runs)
    problems, skipped, results, served = [], [], {}, {}
    for label, run, r in merged:
        if r.get("status") == "served":   # a worker node's share of a multi-node cell: node 0 holds the result
            served.setdefault(str(run), set()).add(r.get("node_rank"))
        # decided before it ran, by a rule (harness.host.plan.Host.verdict): planned
        elif r.get("status") == "skipped":
            skipped.append({**r, "host": label})
        elif r.get("status") != "ok":
            problems.append({**r, "host": label})
        results.setdefault(label, []).append(r)
    index = {h["label"]: measure.summarise(results.get(h["label"], [])) for h in hosts}
    rows = _efficiency_from_one_device([_row(host, index[host][c]) for host in index for c in sorted(index[host])])
    share_of_peak(rows, hosts)
    profiles = sorted({h["meta"].get("profile") for h in hosts if h["meta"].get("profile")})
    claims = {h["label"]: claim_rules.evaluate(results.get(h["label"], []), platform=h["meta"].get("platform"),
                                               profile=h["meta"].get("profile")) for h in hosts}
    # What holds for every claim of a host (platform, profile, intervals, versions...): said once above its claims,
    # each claim's row keeping only its own caveats.
    run_caveats = {h["label"]: claim_rules.run_caveats(results.get(h["label"], []), platform=h["meta"].get("platform"),
                                                       profile=h["meta"].get("profile"), claims=claims[h["label"]])
                   for h in hosts}
    data = {"hosts": hosts, "rows": rows, "problems": problems, "skips": planned_skips(skipped),
            "op_ratios": operator_ratios(index),
            "served": {run: sorted(n for n in nodes if n is not None) for run, nodes in served.items()},
            "why": _versus_expected(_with_limits(explain.explanations(rows), rows), hosts),
            "table1": table1(rows, hosts, index), "settings": settings_summary(rows),
            # Table I's footnote: the cells that took their batch in micro-batches (gradient accumulation)
            "accumulated": sorted({r["accumulation"] for r in rows if r["accumulation"]}),
            # Table I's footnote: an fp32 GPU cell's share of the FP32 peak, which TF32 convolutions can pass
            "tf32_note": any((r.get("limit") or {}).get("tf32") and r["limit"]["share"] is not None for r in rows),
            "claims": claims, "run_caveats": run_caveats,
            # Whether any ratio has an interval (repeats): the pages then say how it is made and what it decides.
            "intervals": any(p.interval is not None for cs in claims.values() for c in cs for p in c.parts),
            "time_to_target": {h["label"]: claim_rules.time_to_target_table(results.get(h["label"], []),
                                                                            platform=h["meta"].get("platform"))
                               for h in hosts},
            "synthetic": any(r["synthetic"] for r in rows), "profiles": profiles, "paper_env": PAPER_ENV,
            "env_rows": environment_rows(hosts), "version_note": version_note(hosts), "at_best": at_best(hosts),
            # An accelerator run's device memory: the CPU-side prediction beside the framework's and NVML's peaks
            "device_memory": memory_table(hosts, merged),
            # The banner at the top: where a run's configuration differs from its expected results' (configdiff)
            "config_diff": {h["label"]: {"diffs": d, "run": _expected_name(h)} for h in hosts
                            if (d := configdiff.differences(h["meta"], h["env"], h["expected"]))},
            # A run planned to the hours booked (--hours, harness.estimate.fit): what it decided and left out, and why
            "booking": {h["label"]: booking_summary(h["meta"]["booking"]) for h in hosts if h["meta"].get("booking")}}
    data["sections"] = sections(data)
    return data


def booking_summary(b: dict[str, Any]) -> dict[str, Any]:
    """run.json's `booking` as the report says it: the hours, the claims' lines, what was left out per reason, and
    the re-plans' lines."""
    from harness.claims.reads import Need
    from harness.estimate.fit import claim_lines

    def need(name: str) -> Need:
        claim, _, subject = name.partition(" on ")
        return Need(claim, subject, ())

    left: dict[str, int] = {}
    for why in (b.get("left") or {}).values():
        left[why] = left.get(why, 0) + 1
    return {"hours": b.get("hours"), "reserved": b.get("reserved") or [],
            "claims": claim_lines([need(n) for n in b.get("decided") or []],
                                  [(need(n), why) for n, why in b.get("undecided") or []]),
            "left": sorted(left.items(), key=lambda kv: -kv[1]), "replans": b.get("replans") or [],
            "repeats_left_out": len(b.get("repeats_left_out") or [])}


def _efficiency_from_one_device(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A scaling cell whose run folder lacks its 1-device cell (a multi-node run: the 1-device cells run on one host,
    in a run of their own) stores no efficiency; the report makes it from the same host's 1-device row, as the claims
    do (its median over the 1-device cell's median)."""
    one = {(r["host"], r["model"], r["framework"], r["mode"], r["amp"]): r["other_epochs"]["median"]
           for r in rows if r["kind"] == "model" and r["devices"] == 1}
    for r in rows:
        base = one.get((r["host"], r["model"], r["framework"], r["mode"], r["amp"]))
        g = r["global_throughput_spread"]
        if r["kind"] == "scaling" and r["efficiency"] is None and base and g["median"] is not None:
            r["efficiency_spread"] = {**g, **{k: arith.efficiency(arith.per_device(g[k], r["devices"]), base)
                                              for k in ("median", "min", "max") if g.get(k) is not None}}
            r["efficiency"] = r["efficiency_spread"]["median"]
    return rows


def share_of_peak(rows: list[dict[str, Any]], hosts: list[dict[str, Any]]) -> None:
    """Each 1-device model row's `limit`: its achieved FLOP/s and their share of its device's dense peak at its
    precision, so that Table I says whether a comparison measures the device or the host.

    The model's FLOPs per training sample are counted once per model and column group, for every framework, mode and
    AMP level alike: the PyTorch cell whose profiled pass counted one step under torch.utils.flop_counter (its fp32
    eager cell); a MindSpore cell takes that count, not one of its own, so both frameworks are held to the same work.
    Achieved = FLOPs per sample x the mean throughput of the epochs after the first (samples/s); share = achieved /
    harness.devices.catalog.peak(device, precision), None where no peak is known (a CPU, an Ascend 910B). None as
    a whole where no count was made (no profiled PyTorch cell of the model in the group)."""
    from harness.devices import catalog, query

    counted: dict[tuple[str, str], tuple[float, str]] = {}
    for r in rows:
        fps = (r.get("profile") or {}).get("flops_per_sample")
        if r["kind"] == "model" and r["framework"] == "pytorch" and fps:
            counted.setdefault((r["host"], r["model"]), (fps, r["cell"]))
    platform = {h["label"]: (h["meta"].get("platform"), h["env"]) for h in hosts}
    for r in rows:
        r["limit"] = None
        found = counted.get((r["host"], r["model"]))
        rate = r["other_epochs"]["median"] if r["kind"] == "model" else None
        if not found or rate is None or (r["devices"] or 1) * (r["nodes"] or 1) != 1:
            continue
        fps, source = found
        name = query.run_device(*platform.get(r["host"], (r.get("platform"), {})))
        precision = catalog.precision(r["amp"])
        top = catalog.peak(name, precision)
        achieved = fps * rate
        r["limit"] = {"flops_per_sample": fps, "counted_by": source, "flops_per_s": achieved, "device": name,
                      "precision": precision, "peak": top, "share": achieved / top if top else None,
                      # cuDNN may run fp32 convolutions as TF32 from Ampere on: past 100% of the FP32 peak there
                      "tf32": precision == "fp32" and r.get("platform") == "cuda" and "V100" not in (name or "")}


def _with_limits(why: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The "Why" entries with the sentence that says how far each compared setting's cell is from its device's
    limit (explain.limit_sentence), from the same rows' `limit` as Table I."""
    for e in why:
        found = {(r["framework"], r["mode"]): r["limit"] for r in rows if r["host"] == e["host"]
                 and r["model"] == e["model"] and r["kind"] == "model" and r["amp"] == "off" and r.get("limit")}
        e["limit"] = explain.limit_sentence(e["host"], e["title"], found)
    return why


def _expected_name(h: dict[str, Any]) -> str:
    """The expected run a host's results are compared with, as the banner names it."""
    return f"docs/runs/{h['expected'].name}" if h["expected"] else "docs/runs/"


def _processor(meta: dict[str, Any], env: dict[str, Any]) -> str | None:
    return run_device(meta.get("platform"), env) or (env.get("cpu") or {}).get("model")


def _other_family_run(h: dict[str, Any]) -> tuple[Path, RunStore, str] | None:
    """The committed run of the host's platform and profile on a processor of another family than the host's (not one
    of its own runs): its expected run where that is one, else the first such; with its store and processor."""
    platform, profile = h["meta"].get("platform"), h["meta"].get("profile")
    mine = {Path(r).resolve() for r in h["runs"]}
    here = _processor(h["meta"], h["env"])
    for candidate in dict.fromkeys(filter(None, (h["expected"], *expected_runs(platform, profile)))):
        if candidate.resolve() in mine:
            continue
        store = RunStore(candidate)
        theirs = _processor(store.read_meta(), store.read_env())
        if theirs and cpu_family(theirs) != cpu_family(here):   # another family: another processor
            return candidate, store, theirs
    return None


def _versus_expected(why: list[dict[str, Any]], hosts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each "Why" says how each framework's profiled step moved between this host and the committed run of its
    platform and profile on another processor, of another family (harness.paths.cpu_family; a GPU's or an NPU's
    name): the nearest its CPU (harness.paths.expected_run) where that is another family, else the first such (on an
    AMD EPYC, the Intel Xeon's run), explain.versus: why a ratio, and a verdict near the tie band, moves on another
    CPU."""
    there: dict[str, tuple[str, dict]] = {}
    for h in hosts:
        found = _other_family_run(h)
        if found is None:
            continue
        run, store, theirs = found
        profiles: dict[str, dict] = {}
        for r in store.results():
            if r.get("kind") == "model" and r.get("amp") == "off" and (r.get("profile") or {}).get("per_step_s"):
                profiles.setdefault(r["model"], {})[(r["framework"], r["mode"])] = r["profile"]
        there[h["label"]] = (f"docs/runs/{run.name} ({theirs})", profiles)
    for e in why:
        if e["host"] in there:
            where, profiles = there[e["host"]]
            e["versus"] = explain.versus(e["title"], e["profiles"], profiles.get(e["model"], {}), where)
    return why


REFERENCE_GAP = "reference_gap.json"  # written into a run folder by benchmarks/reference_gap.py --out
PROCESS_GAP = "process_gap.json"  # written into a run folder by benchmarks/process_gap.py --out
GAP_LEVELS = ((REFERENCE_GAP, "in one process"), (PROCESS_GAP, "process level"))


def at_best(hosts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """'Each framework at its best': per host and level, the latest gap benchmark found in its run folders (harness
    workload throughput / the framework's own recommended loop, same network, weights and batches): in one process
    (benchmarks/reference_gap.py), and each side in its own fresh process (benchmarks/process_gap.py)."""
    out = []
    for h in hosts:
        for name, level in GAP_LEVELS:
            found = [Path(run) / name for run in h["runs"] if (Path(run) / name).is_file()]
            if not found:
                continue
            try:
                gap = json.loads(max(found, key=lambda p: p.stat().st_mtime).read_text())
                rows = [r for r in gap["rows"] if r.get("status") == "ok"]
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a damaged benchmark file leaves the section out; the run's own results stand
            out.append({"host": h["label"], "level": level, "measured_at": gap.get("measured_at"),
                        "command": gap.get("command"), "rows": rows})
    return out


def table1(rows: list[dict[str, Any]], hosts: list[dict[str, Any]],
           index: dict[str, dict[str, measure.Repeats]] | None = None) -> list[dict[str, Any]]:
    """Table I: one line per setting (model, framework, mode, AMP, devices), one column group per host. A MindSpore
    1-device line's `vs_pytorch[host]`: its mean throughput of the other epochs over PyTorch eager's at the same AMP,
    with the ratio's interval (harness.results.measure.ratio_interval), where both cells have the repeats for one."""
    lines: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        if r["kind"] not in THROUGHPUT_KINDS:
            continue
        key = (r["model"], r["framework"], r["mode"], r["amp"], r["devices"], r["nodes"])
        line = lines.setdefault(key, {"model": r["model"], "framework": r["framework"], "mode": r["mode"],
                                      "amp": r["amp"], "devices": r["devices"], "nodes": r["nodes"],
                                      "devices_label": r["devices_label"], "unit": r["unit"], "by_host": {},
                                      "vs_pytorch": {}})
        line["by_host"][r["host"]] = r
        cells = (index or {}).get(r["host"], {})
        ms, pt = cells.get(r["cell"]), cells.get(cellid.model_id(r["model"], "pytorch", measure.PT_MODE, r["amp"], 1))
        if r["framework"] == "mindspore" and r["kind"] == "model" and ms and pt:
            a, b = ms.measure(OTHER_EPOCHS), pt.measure(OTHER_EPOCHS)
            iv = measure.ratio_interval(a, b)
            if iv is not None and a.median and b.median:
                line["vs_pytorch"][r["host"]] = {"ratio": a.median / b.median, "interval": iv}
        line["unit"] = line["unit"] or r["unit"]
    return [lines[k] for k in sorted(lines, key=lambda k: tuple(str(x) for x in k))]


def settings_summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-framework settings applied, once per (host, framework, mode) with every distinct value seen."""
    out: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        if r["status"] != "ok" or not r["framework"]:
            continue
        entry = out.setdefault((r["host"], r["framework"], r["mode"]),
                               {"host": r["host"], "framework": r["framework"], "mode": r["mode"], "values": {}})
        for k, v in {**(r["process_env"] or {}), **(r["settings"] or {})}.items():
            entry["values"].setdefault(k, [])
            if str(v) not in entry["values"][k]:
                entry["values"][k].append(str(v))
    return [out[k] for k in sorted(out)]


def environment_rows(hosts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The environment as rows (what) x columns (the paper, then each host), so they read side by side."""
    def host_values(env: dict) -> dict[str, str]:
        cpu = env.get("cpu") or {}
        nvidia, ascend = env.get("nvidia") or {}, env.get("ascend") or {}
        if nvidia.get("gpus"):
            acc = ", ".join(g.get("name", "?") for g in nvidia["gpus"])
            stack = f"CUDA {env.get('packages', {}).get('torch_cuda') or nvidia.get('cuda') or '?'}, " \
                    f"driver {nvidia.get('driver', '?')}"
        elif ascend:
            acc, stack = f"{ascend.get('devices', '?')} Ascend NPU(s)", f"CANN {ascend.get('cann', '?')}"
        else:
            acc, stack = "none", "–"
        os_info = env.get("os") or {}
        packages = env.get("packages") or {}
        return {"accelerators": acc, "cpu": f"{cpu.get('model', '?')} ({cpu.get('cores', '?')} cores)",
                "os": f"{os_info.get('distro') or os_info.get('system', '?')} ({os_info.get('machine', '?')})",
                "stack": stack, "python": (env.get("python") or {}).get("version", "–"),
                "torch": packages.get("torch") or "–", "mindspore": packages.get("mindspore") or "–"}

    def pin(platform: str | None, torch: str | None) -> str:
        if platform not in platforms.PYTORCH_PINS:
            return "–"
        version, why = platforms.PYTORCH_PINS[platform]
        ran = "" if torch and torch.split("+")[0] == version else f"; this host ran {torch or 'no PyTorch'} instead"
        return f"{version} for {platform}: {why}{ran}"

    names = {"accelerators": "accelerators", "cpu": "CPU", "os": "operating system",
             "stack": "accelerator software", "python": "Python", "torch": "PyTorch", "torch_pin": "PyTorch pinned",
             "mindspore": "MindSpore"}
    per_host = [host_values(h["env"]) | {"torch_pin": pin(h["meta"].get("platform"),
                                                            (h["env"].get("packages") or {}).get("torch"))}
                for h in hosts]
    return [{"what": names[k], "paper": PAPER_ENV.get(k, "–"), "hosts": [v[k] for v in per_host]} for k in names]


def version_note(hosts: list[dict[str, Any]]) -> str | None:
    """Said beside every comparison across hosts (Table I) when the hosts ran different framework builds."""
    differ = []
    for package, name in (("torch", "PyTorch"), ("mindspore", "MindSpore")):
        seen = {h["label"]: (h["env"].get("packages") or {}).get(package) for h in hosts}
        if len(set(seen.values())) > 1:
            differ.append(f"{name} " + ", ".join(f"{v or 'not recorded'} ({label})" for label, v in seen.items()))
    if not differ:
        return None
    return (f"The hosts ran different framework versions: {'; '.join(differ)}. A difference between their columns "
            f"is the hardware and the framework build together, not the hardware alone (each platform's pinned "
            f"PyTorch, and why: the environment table).")


def operator_ratios(index: dict[str, dict[str, measure.Repeats]]) -> list[dict[str, Any]]:
    """Per host and operator configuration (harness.results.measure.operator_ratios): MindSpore throughput / PyTorch
    eager throughput per MindSpore mode (Figure 5's points and the operator table; above 1: MindSpore faster), with its
    interval (OpConfig.ratio_interval: Student's t over the turn groups; Figure 5's whiskers) and how many groups it
    is taken over and left out (taken in a contended stretch: harness.results.hostnoise)."""
    out = []
    for host, cells in sorted(index.items(), key=lambda kv: kv[0]):
        for c in measure.operator_ratios(cells):
            out.append({"host": host, "platform": next(iter(c.cells.values())).first.get("platform"), "op": c.op,
                        "dtype": c.dtype, "direction": c.direction, "shape": c.shape, "params": c.params,
                        "throughput": c.throughput, "ratio_graph": c.ratio("graph"),
                        "ratio_pynative": c.ratio("pynative"), "interval_graph": c.ratio_interval("graph"),
                        "interval_pynative": c.ratio_interval("pynative"),
                        # turn groups the ratio is taken over, and those left out (harness.results.hostnoise)
                        "groups_graph": len(c.turn_pairs("graph")), "left_out_graph": c.left_out("graph"),
                        "groups_pynative": len(c.turn_pairs("pynative")),
                        "left_out_pynative": c.left_out("pynative")})
    return out


def make_figures(data: dict[str, Any], folder: Path) -> dict[str, dict[str, Any]]:
    """Every figure for every host: {host: {"fig3": {...} | None, "fig4": ..., "fig5": ..., "energy": ...}}."""
    out = {}
    for h in data["hosts"]:
        host = h["label"]
        out[host] = {"fig3": figures.curves(data["rows"], host, folder, data["time_to_target"].get(host)),
                     "fig4": figures.scaling(data["rows"], host, folder),
                     "fig5": figures.operator_ratios(data["op_ratios"], host, folder),
                     "energy": figures.energy(data["rows"], host, folder),
                     "why": {e["model"]: figures.step_categories(e, folder) for e in data["why"] if e["host"] == host}}
    return out


def _environments() -> tuple[jinja2.Environment, jinja2.Environment]:
    html_env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                                  undefined=jinja2.StrictUndefined)
    html_env.filters["fmt"] = fmt
    html_env.filters["flop_rate"] = explain.flop_rate
    # LaTeX: every value from a run goes through |tex, and the delimiters avoid clashing with TeX braces.
    tex_env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=False,  # noqa: S701
                                 undefined=jinja2.StrictUndefined, block_start_string="<%", block_end_string="%>",
                                 variable_start_string="<<", variable_end_string=">>",
                                 comment_start_string="<#", comment_end_string="#>", trim_blocks=True,
                                 lstrip_blocks=True)
    tex_env.filters["tex"] = latex_escape
    tex_env.filters["fmt"] = fmt
    tex_env.filters["flop_rate"] = explain.flop_rate
    for env in (html_env, tex_env):
        env.filters["interval"] = measure.interval_text
    return html_env, tex_env


TABLES = ("table1", "time_to_target", "claims", "operators", "why")


def render(runs: list[Path], out: Path | None = None) -> Path:
    data = collect(runs)
    out = Path(out) if out else Path(runs[0]) / "report"
    try:
        (out / "tables").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        if faults.storage(e, out):
            raise faults.report_folder(e, out) from None
        raise HarnessError(f"report folder {out} cannot be created ({e.strerror}); choose another with --out") from None
    try:
        _write(data, out)
    except OSError as e:
        if faults.storage(e, out):  # a full disk or a folder turned read-only: one line; the runs are only read
            raise faults.report_folder(e, out) from None
        raise
    return out / "report.html"


def _write(data: dict[str, Any], out: Path) -> None:
    data["figures"] = make_figures(data, out / "figures")
    html_env, tex_env = _environments()
    tables = {}
    for name in TABLES:
        tables[name] = tex_env.get_template(f"{name}.tex.j2").render(**data)
        write_atomic(out / "tables" / f"{name}.tex", tables[name])
    companion.render(data, tex_env, out / "tables")  # the companion studies' section and its fragments
    write_atomic(out / "report.tex", tex_env.get_template("report.tex.j2").render(tables=tables, **data))
    write_atomic(out / "report.html", html_env.get_template("report.html.j2").render(**data))

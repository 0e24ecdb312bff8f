"""Render a run (or several, from different hosts) into one HTML page and LaTeX tables.

    report/report.html        self-contained page (no network fetches)
    report/report.tex         compiles on its own with pdflatex
    report/tables/*.tex       booktabs fragments (table1, operators) to \\input into a paper
"""

from __future__ import annotations

import re
from pathlib import Path
from statistics import median
from typing import Any

import jinja2

from harness.store import RunStore

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_LATEX_RE = re.compile("|".join(re.escape(k) for k in _LATEX_SPECIAL))


def latex_escape(value: Any) -> str:
    return _LATEX_RE.sub(lambda m: _LATEX_SPECIAL[m.group()], str(value))


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def _spread(values: list[float]) -> dict[str, Any]:
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": median(values), "min": min(values), "max": max(values), "n": len(values)}


def collect(runs: list[Path]) -> dict[str, Any]:
    """Results of every run folder, grouped per (platform, cell) with the median over repeats."""
    hosts, groups, problems = [], {}, []
    for run in runs:
        store = RunStore(run)
        store.require_run()
        meta, env = store.read_meta(), store.read_env()
        results = store.results()
        hosts.append({"run": str(run), "meta": meta, "env": env})
        for r in results:
            if r.get("status") != "ok":
                problems.append({**r, "platform": r.get("platform", meta.get("platform"))})
            key = (r.get("platform", meta.get("platform")), r["cell"])
            groups.setdefault(key, []).append(r)
    rows = []
    for (platform, cell), rs in sorted(groups.items()):
        ok = [r for r in rs if r.get("status") == "ok"]
        first = rs[0]
        rows.append({
            "platform": platform, "cell": cell, "kind": first.get("kind"), "model": first.get("model"),
            "framework": first.get("framework"), "mode": first.get("mode"), "amp": first.get("amp"),
            "devices": first.get("devices"), "unit": first.get("throughput_unit"),
            "status": "ok" if ok else first.get("status"), "repeats": len(rs), "repeats_ok": len(ok),
            "synthetic": any(r.get("synthetic") for r in rs),
            "first_epoch": _spread([r.get("first_epoch_throughput") for r in ok]),
            "other_epochs": _spread([r.get("mean_throughput_other_epochs") for r in ok]),
            "time_to_target": _spread([r.get("time_to_target_s") for r in ok]),
            "best_metric": _spread([r.get("best_metric") for r in ok]),
            "test_metric": _spread([r.get("test_metric") for r in ok]),
            "metric": first.get("metric"), "target": first.get("target"),
            "settings": (ok or rs)[0].get("settings"), "process_env": (ok or rs)[0].get("process_env"),
            # operator cells
            "op": first.get("op"), "params": first.get("params"), "shape": first.get("shape"),
            "dtype": first.get("dtype"), "direction": first.get("direction"),
            "median_s": _spread([r.get("median_s") for r in ok]), "iqr_s": _spread([r.get("iqr_s") for r in ok]),
            "throughput": _spread([r.get("throughput") for r in ok]),
            "flops_per_s": _spread([r.get("flops_per_s") for r in ok]),
        })
    return {"hosts": hosts, "rows": rows, "problems": problems, "op_ratios": operator_ratios(rows),
            "synthetic": any(r["synthetic"] for r in rows),
            "profiles": sorted({h["meta"].get("profile") for h in hosts if h["meta"].get("profile")})}


def operator_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per operator configuration: MindSpore throughput / PyTorch eager throughput, per MindSpore mode
    (Figure 5's points; above 1 means MindSpore is faster)."""
    by_config: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        if r["kind"] != "operator" or r["throughput"]["median"] is None:
            continue
        key = (r["platform"], r["op"], r["dtype"], r["direction"], tuple(sorted((r["shape"] or {}).items())))
        entry = by_config.setdefault(key, {"platform": r["platform"], "op": r["op"], "dtype": r["dtype"],
                                           "direction": r["direction"], "shape": r["shape"], "params": r["params"],
                                           "throughput": {}})
        entry["throughput"][f"{r['framework']}/{r['mode']}"] = r["throughput"]["median"]
    out = []
    for entry in by_config.values():
        pt = entry["throughput"].get("pytorch/eager")
        for mode in ("graph", "pynative"):
            ms = entry["throughput"].get(f"mindspore/{mode}")
            entry[f"ratio_{mode}"] = ms / pt if pt and ms else None
        out.append(entry)
    return sorted(out, key=lambda e: (e["platform"], e["op"], e["dtype"], e["direction"], e["params"]))


def render(runs: list[Path], out: Path | None = None) -> Path:
    data = collect(runs)
    out = Path(out) if out else Path(runs[0]) / "report"
    (out / "tables").mkdir(parents=True, exist_ok=True)
    html_env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                                  undefined=jinja2.StrictUndefined)
    html_env.filters["fmt"] = fmt
    # LaTeX: every value from a run goes through |tex, and the delimiters avoid clashing with TeX braces.
    tex_env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=False,  # noqa: S701
                                 undefined=jinja2.StrictUndefined, block_start_string="<%", block_end_string="%>",
                                 variable_start_string="<<", variable_end_string=">>",
                                 comment_start_string="<#", comment_end_string="#>")
    tex_env.filters["tex"] = latex_escape
    tex_env.filters["fmt"] = fmt
    (out / "report.html").write_text(html_env.get_template("report.html.j2").render(**data))
    tables = {}
    for name in ("table1", "operators"):
        tables[name] = tex_env.get_template(f"{name}.tex.j2").render(**data)
        (out / "tables" / f"{name}.tex").write_text(tables[name])
    (out / "report.tex").write_text(tex_env.get_template("report.tex.j2").render(tables=tables, **data))
    return out / "report.html"

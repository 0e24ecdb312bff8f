"""The report's companion-studies section: each study's published table beside what this run measured.
 Published figures are those of ../shared/COMPANION_STUDIES.md's summaries (S1 Tables 2-4, S2's PyTorch rows); S4's
summary gives its method but no figures, so its table shows this run only. Each table names its study, the hardware
the study used, and whether that hardware is this host's.
"""

from __future__ import annotations

from typing import Any

from harness.devices import accumulation
from harness.results import measure
from harness.results.store import RunStore, write_atomic

S1 = "Xia and Zhou, Performance Comparison between PyTorch and MindSpore (IJDMS 14(1/2), 2022)"
S2 = "ilkarman, DeepLearningFrameworks v1.0 (as summarised by Analytics India Magazine)"
S4 = "Bahrampour et al., Comparative Study of Deep Learning Software Frameworks (arXiv, 2015)"
# S1 Tables 2 (V100) and 3 (Ascend 910, MindSpore only): whole training time, final loss, accuracy.
_S1_COLUMNS = ("model", "framework", "hardware", "time", "loss", "accuracy")
S1_TRAINING = [dict(zip(_S1_COLUMNS, row, strict=True)) for row in (
    ("googlenet", "mindspore", "V100", "126.87 min", 0.0016, 0.93),
    ("googlenet", "pytorch", "V100", "152 min", 0.0016, 0.9468),
    ("lstm", "mindspore", "V100", "1049 s", 0.12, 0.84),
    ("lstm", "pytorch", "V100", "1154 s", 0.0057, 0.8395),
    ("bert", "mindspore", "V100", "610 h", 1.7, 0.5888),
    ("bert", "pytorch", "V100", "1147.5 h", 1.71, 0.5921),
    ("googlenet", "mindspore", "Ascend 910", "63.85 min", 0.0016, 0.934),
    ("lstm", "mindspore", "Ascend 910", "523 s", 0.12, 0.85),
    ("bert", "mindspore", "Ascend 910", "384 h", 1.7, 0.589))]
S1_MODELS = ("googlenet", "lstm", "bert")
# What S1 measured that this run does not: said beside the ratio of the model's times.
S1_CAVEATS = {"bert": "S1 timed BERT pre-training to a loss on Chinese Wikipedia (8 x 256 sequences of 128 tokens); "
                      "this run pre-trains on the English aclImdb reviews with its own WordPiece vocabulary"}
_UNIT_S = {"s": 1.0, "min": 60.0, "h": 3600.0}
S1_INFERENCE = [{"framework": "mindspore", "hardware": "V100", "images_s": 1490.2},
                {"framework": "pytorch", "hardware": "V100", "images_s": 856.5},
                {"framework": "mindspore", "hardware": "Ascend 910", "images_s": 2115.0}]
S2_PYTORCH = [{"task": "CNN on CIFAR-10, training time", "K80": "169 s", "P100": "51 s", "ours": None},
              {"task": "ResNet-50 feature extraction, time per 1,000 images", "K80": "7.7 s", "P100": "1.9 s",
               "ours": "resnet50_imagenet"},
              {"task": "GRU sentiment on IMDB, training time", "K80": "31 s", "P100": "16 s", "ours": "lstm"}]


def host_hardware(host: dict[str, Any]) -> str:
    env, platform = host.get("env") or {}, (host.get("meta") or {}).get("platform")
    gpus = [g.get("name", "?") for g in (env.get("nvidia") or {}).get("gpus", [])]
    if gpus:
        return ", ".join(gpus)
    if platform == "ascend":
        return "Ascend NPU"
    cpu = env.get("cpu") or {}
    return f"CPU: {cpu.get('model', '?')} ({cpu.get('cores', '?')} cores)"


def matches(study_hardware: list[str], host_hw: str) -> str:
    hit = [h for h in study_hardware if h.split()[0].lower() in host_hw.lower()]
    return f"yes ({', '.join(hit)})" if hit else f"no: this host is {host_hw}"


def _cells(results: list[dict], kind: str, models=None) -> list[measure.Repeats]:
    """The cells of a kind (and models) with an ok repeat; statistics over their ok repeats
    (harness.results.measure)."""
    index = measure.summarise(r for r in results
                              if r.get("kind") == kind and (models is None or r.get("model") in models))
    return [s for s in index.values() if s.ok]


def _last_loss(r: dict) -> float | None:
    return (r.get("epochs") or [{}])[-1].get("loss")


def training_rows(results: list[dict]) -> list[dict]:
    rows = []
    for s in _cells(results, "model", S1_MODELS):
        f = s.first
        epochs = measure.Sample(tuple(e["train_s"] for r in s.ok for e in (r.get("epochs") or [])))
        rows.append({"model": f["model"], "framework": f["framework"], "mode": f["mode"], "amp": f["amp"],
                     "repeats": len(s.ok), "wall_s": s.value("wall_s"), "loss": s.measure(_last_loss).median,
                     "accuracy": s.value("test_metric"), "time_to_target_s": s.time_to_target.median,
                     "epochs": max(len(r.get("epochs") or []) for r in s.ok), "epoch_s": epochs.median,
                     "synthetic": any(r.get("synthetic") for r in s.ok),
                     "accumulation": accumulation.recorded(f.get("settings"))})
    return sorted(rows, key=lambda r: (r["model"], r["framework"], r["mode"], r["amp"]))


def _s1_seconds(time: str) -> float:
    value, unit = time.split()
    return float(value) * _UNIT_S[unit]


def s1_ratio_rows(training: list[dict]) -> list[dict]:
    """Per S1 model: S1's V100 training time of MindSpore over PyTorch's (below 1: MindSpore faster) beside this run's
    wall time of each MindSpore mode over PyTorch eager's, both fp32 (None where a side was not run)."""
    v100 = {(r["model"], r["framework"]): _s1_seconds(r["time"]) for r in S1_TRAINING if r["hardware"] == "V100"}
    ours = {(r["model"], r["framework"], r["mode"]): r["wall_s"] for r in training if r["amp"] == "off"}
    rows = []
    for model in S1_MODELS:
        pt = ours.get((model, "pytorch", "eager"))
        for mode in ("graph", "pynative"):
            ms = ours.get((model, "mindspore", mode))
            if pt is None and ms is None:
                continue
            rows.append({"model": model, "s1_ratio": v100[model, "mindspore"] / v100[model, "pytorch"], "mode": mode,
                         "ratio": ms / pt if ms and pt else None, "caveat": S1_CAVEATS.get(model, "")})
    return rows


def inference_rows(results: list[dict]) -> list[dict]:
    rows = []
    for s in _cells(results, "inference"):
        f = s.first
        rows.append({"net": f["model"], "framework": f["framework"], "mode": f["mode"], "amp": f["amp"],
                     "batch": f.get("batch"), "repeats": len(s.ok), "images_s": s.value("throughput"),
                     "median_ms": 1e3 * s.value("median_s"), "iqr_ms": 1e3 * s.value("iqr_s")})
    return sorted(rows, key=lambda r: (*(str(r[k]) for k in ("net", "framework", "mode", "amp")), r["batch"]))


def passes_rows(results: list[dict]) -> list[dict]:
    rows = []
    for s in _cells(results, "passes"):
        f = s.first
        row = {"model": f["model"], "framework": f["framework"], "mode": f["mode"], "threads": f.get("threads"),
               "batch": f.get("batch"), "repeats": len(s.ok)}
        for name in ("forward", "gradient"):
            row[f"{name}_ms"] = 1e3 * s.value(f"{name}_median_s")
            row[f"{name}_iqr_ms"] = 1e3 * s.value(f"{name}_iqr_s")
        row["ratio"] = row["gradient_ms"] / row["forward_ms"] if row["forward_ms"] else None
        rows.append(row)
    return sorted(rows, key=lambda r: tuple(str(r[k]) for k in ("model", "framework", "mode", "threads")))


def collect(hosts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per host: its hardware, whether each study's hardware matches it, and the measured rows of each study."""
    out = []
    for h in hosts:
        results = [r for run in h["runs"] for r in RunStore(run).results()]
        hw = host_hardware(h)
        training, inference = training_rows(results), inference_rows(results)
        s2_ours = {"resnet50_imagenet": [r for r in inference if r["framework"] == "pytorch" and r["amp"] == "off"],
                   "lstm": [r for r in training if r["model"] == "lstm" and r["framework"] == "pytorch"]}
        out.append({"host": h["label"], "hardware": hw,
                    "s1_match": matches(["V100", "Ascend 910"], hw), "s2_match": matches(["K80", "P100"], hw),
                    "s4_match": ("same kind (a multi-threaded CPU), not S4's CPU" if hw.startswith("CPU")
                                 else f"S4's GPU set-up; this host is {hw}"),
                    "training": training, "s1_ratios": s1_ratio_rows(training), "inference": inference,
                    "passes": passes_rows(results), "s2_ours": s2_ours})
    return out


CONTEXT = {"s1": S1, "s2": S2, "s4": S4, "s1_training": S1_TRAINING, "s1_inference": S1_INFERENCE,
           "s2_pytorch": S2_PYTORCH}
FRAGMENTS = ("companion_s1_training", "companion_s1_inference", "companion_s2", "companion_s4")


def render(data: dict[str, Any], tex_env, out_tables) -> str:
    """Write the companion LaTeX fragments (tables/companion_*.tex) and return them joined, for report.tex."""
    data["companion"] = collect(data["hosts"])
    texts = []
    for name in FRAGMENTS:
        text = tex_env.get_template(f"{name}.tex.j2").render(companion=data["companion"], **CONTEXT)
        write_atomic(out_tables / f"{name}.tex", text)
        texts.append(text)
    data["companion_tex"] = "\n".join(texts)
    data.update(CONTEXT)
    return data["companion_tex"]

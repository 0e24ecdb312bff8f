"""The Markdown of the docs' rendered blocks (harness.docs.blocks), made from committed run folders only: their results
(r<k>.json), run.json and env.json. Nothing of the host that renders them is read, so the same folders always give
the same text.

    Run.load(path)      a run folder: meta (run.json), env (env.json), results
    duration(seconds)   "42 s", "12 min 34 s", "1 h 01 min 13 s": every time the docs show (harness.results.units)
    checklist_times, workflow_times, kick_the_tires, expected_cpu, expected_summary, time_to_target, readme_times,
    why_sentences, why: (runs) -> Markdown
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from harness import claims as claim_rules
from harness.errors import HarnessError
from harness.estimate import runtime as estimate
from harness.report import explain
from harness.results.measure import LEVEL, interval_text
from harness.results.store import RunStore
from harness.results.units import duration

PATH_FLAGS = {"--out": "DIR"}          # argv flags whose path value is shown as a placeholder
DROPPED_FLAGS = ("--data-dir", "--matrix", "--out")   # flags whose path value (and the flag) is left out
TOP_CELLS = 3


def _without_paths(args: list[str], keep_out: bool = True) -> list[str]:
    """A command's arguments with local paths left out: --out's value as DIR (or --out dropped), --data-dir and
    --matrix dropped with their values, any other absolute path dropped."""
    out, skip = [], False
    for a in args:
        flag = a.split("=", 1)[0]
        if skip:
            skip = False
        elif flag in PATH_FLAGS and keep_out:
            out += [flag, PATH_FLAGS[flag]]
            skip = "=" not in a
        elif flag in DROPPED_FLAGS:
            skip = "=" not in a
        elif not a.startswith("/"):
            out.append(a)
    return out


@dataclass
class Run:
    name: str                   # the folder's name under docs/runs
    path: Path
    meta: dict[str, Any]
    env: dict[str, Any]
    results: list[dict[str, Any]]

    @classmethod
    def load(cls, path: Path) -> Run:
        store = RunStore(path)
        store.require_run()
        return cls(path.name, path, store.read_meta(), store.read_env(), store.results())

    @property
    def profile(self) -> str:
        return self.meta["profile"]

    @property
    def invocations(self) -> list[dict[str, Any]]:
        return [i for i in self.meta.get("invocations") or [] if isinstance(i, dict)]

    def command(self) -> str:
        """reproduce.sh's command line where the invocation recorded it, else `python -m harness` with argv's paths
        left out (--out as DIR)."""
        first = self.invocations[0] if self.invocations else {}
        if first.get("command"):   # reproduce.sh's, as typed: its local paths left out the same way
            words = shlex.split(str(first["command"]))
            return shlex.join(words[:1] + _without_paths(words[1:], keep_out=False))
        return shlex.join(["python", "-m", "harness", *_without_paths(list(first.get("argv") or [])[1:])])

    def local_data(self) -> bool:
        """Whether the run read its data from a copy named with --data-dir (so no download is in its time)."""
        first = self.invocations[0] if self.invocations else {}
        words = shlex.split(str(first.get("command") or "")) + [str(a) for a in first.get("argv") or []]
        return any(w.split("=", 1)[0] == "--data-dir" for w in words)

    def wall_s(self) -> float:
        """Each invocation's start to its finish, summed over the invocations (harness.estimate.runtime.wall_s)."""
        if not self.invocations:
            return 0.0
        total = estimate.wall_s(self.meta)
        if total is None:
            raise HarnessError(f"{self.path / 'run.json'}: an invocation has no started_at/finished_at (the run "
                               f"did not finish); finish it with --resume before publishing it")
        return total

    def wall(self) -> str:
        n = len(self.invocations)
        return duration(self.wall_s()) + (f" (summed over {n} invocations)" if n > 1 else "")

    def date(self) -> str:
        days = sorted({i["started_at"][:10] for i in self.invocations if i.get("started_at")}
                      | {i["finished_at"][:10] for i in self.invocations if i.get("finished_at")})
        return days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}" if days else "undated"

    def host(self) -> str:
        cpu = self.env.get("cpu") or {}
        cores = cpu.get("usable_cores") or cpu.get("cores")
        memory = self.env.get("memory_gib")
        host = f"{cpu.get('model') or 'unknown CPU'} ({cores or '?'} cores" + (f", {memory} GiB)" if memory else ")")
        packages = self.env.get("packages") or {}
        versions = [f"{name} {packages[key]}" for key, name in (("torch", "PyTorch"), ("mindspore", "MindSpore"))
                    if packages.get(key)]
        return ", ".join([host, *versions])

    def cells(self) -> int:
        return len({r["cell"] for r in self.results})

    def statuses(self) -> str:
        """As the runner's closing `done:` line counts them: `18 ok`, `16 ok, 2 skipped`."""
        counts: dict[str, int] = {}
        for r in self.results:
            counts[r.get("status", "?")] = counts.get(r.get("status", "?"), 0) + 1
        return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))

    def runs(self) -> str:
        return f"{len(self.results)} runs ({self.statuses()}) of {self.cells()} cells"

    def extra(self) -> str:
        """The sequential repeats the run took: `12 of them in 2 rounds for 7 comparisons not yet settled`."""
        rounds = self.meta.get("rounds") or []
        n = sum(len(rnd.get("runs") or []) for rnd in rounds)
        asked = len({(q.get("claim"), q.get("part")) for rnd in rounds for q in rnd.get("requests") or []})
        return (f"{n} of them in {len(rounds)} extra round{'s' * (len(rounds) != 1)} for {asked} comparisons not yet "
                f"settled" if rounds else "no extra round of repeats" + (
                    f" (at most {self.cap()} repeats a cell)" if self.cap() else ""))

    def cap(self) -> int | None:
        caps = [i.get("max_repeats") for i in self.invocations if i.get("max_repeats")]
        return max(caps) if caps else None

    def loadavg(self) -> str:
        """The load average (1 minute) at the start and finish of each invocation, where the run recorded it."""
        pairs = [(i.get("load_average_at_start"), i.get("load_average_at_finish")) for i in self.invocations]
        pairs = [(a[0], b[0]) for a, b in pairs if a and b]
        return "; ".join(f"load average {a:.2f} at the start, {b:.2f} at the finish" for a, b in pairs)

    @cached_property
    def _ok_repeats(self) -> dict[str, int]:
        return Counter(r["cell"] for r in self.results if r.get("status") == "ok")

    def repeats_of(self, cells: list[str]) -> int:
        """The fewest ok repeats among these cells: the n a comparison's interval was taken at."""
        return min((self._ok_repeats.get(c, 0) for c in cells), default=0)

    def top_cells(self, k: int = TOP_CELLS) -> list[tuple[str, int, float]]:
        """The k cells with the most elapsed_s summed over their repeats: (cell, repeats, seconds)."""
        per: dict[str, list[float]] = {}
        for r in self.results:
            per.setdefault(r["cell"], []).append(float(r.get("elapsed_s") or 0.0))
        return sorted(((c, len(v), sum(v)) for c, v in per.items()), key=lambda t: (-t[2], t[0]))[:k]

    def claims(self) -> list[claim_rules.Claim]:
        return claim_rules.evaluate(self.results, platform=self.meta["platform"], profile=self.profile)


def seconds(x: float | None) -> str:
    """A measured time: 3 significant digits under a minute, else duration()."""
    return "—" if x is None else f"{x:.3g} s" if x < 60 else duration(x)


def _ratio(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# -- the blocks ------------------------------------------------------------------------------------------------
def checklist_times(runs: Sequence[Run]) -> str:
    return "\n".join(f"- {r.profile} profile, `{r.command()}`: {r.runs()}, {r.wall()} wall time on {r.host()}, "
                     f"{r.date()}." for r in runs)


def workflow_times(runs: Sequence[Run]) -> str:
    lines = ["| Profile | Command | Cells | Runs (cell × repeat) | Wall time | Most of the time (elapsed, summed over "
             "repeats) |", "|---|---|---|---|---|---|"]
    for r in runs:
        wall = r.wall_s()
        top = "; ".join(f"`{c}` ×{n}: {duration(s)}" + (f" ({s / wall:.0%})" if wall else "")
                        for c, n, s in r.top_cells())
        lines.append(f"| {r.profile} | `{r.command()}` | {r.cells()} | {len(r.results)} ({r.statuses()}; "
                     f"{r.extra()}) | {r.wall()} | {top} |")
    lines.append("")
    lines += [f"The {r.profile} profile ran on {r.date()} on {r.host()}." for r in runs]
    return "\n".join(lines)


def kick_the_tires(runs: Sequence[Run]) -> str:
    (r,) = runs
    load = r.loadavg()
    out = [f"```\n{r.command()}\n```", "",
           f"Measured: the run took {r.wall()} (the report rendered after it adds seconds) on {r.host()} "
           f"({r.date()}{f'; {load}' if load else ''}), {r.runs()}: "
           f"{r.extra()}." + (" The data came from a local copy (`--data-dir`), so no download is in that time."
                               if r.local_data() else "") + " Its last line is", "",
           f"```\ndone: {r.statuses()}; results in DIR\n```"]
    return "\n".join(out)


def _measured(detail: str, outcome: str, interval: Any) -> str:
    text = detail.removesuffix(f" — {outcome}")
    return text.removesuffix(f"; {LEVEL:.0%} interval {interval_text(interval)}") if interval else text


def expected_cpu(runs: Sequence[Run]) -> str:
    """Every measured part of every claim in each run: its numbers, repeats, interval, outcome and the claim's
    verdict."""
    pct = f"{LEVEL:.0%}"
    lines = [f"| Claim | Run | Measured | Repeats | {pct} interval | Outcome | Verdict |",
             "|---|---|---|---|---|---|---|"]
    evaluated = [(r, r.claims()) for r in runs]
    for cid in claim_rules.TITLES:
        unmeasured = []
        for r, claims in evaluated:
            c = next(c for c in claims if c.id == cid)
            parts = [p for p in c.parts if p.outcome != claim_rules.NOT_MEASURED]
            for p in parts:
                lines.append(f"| {cid} | {r.profile} | {_cell(_measured(p.detail, p.outcome, p.interval))} "
                             f"| {r.repeats_of(p.cells)} | {interval_text(p.interval) or '—'} | {p.outcome} "
                             f"| {c.verdict} |")
            if not parts:
                unmeasured.append(r.profile)
        if unmeasured:
            lines.append(f"| {cid} | {', '.join(dict.fromkeys(unmeasured))} | no cells of this claim in the profile "
                         f"| — | — | — | not measured |")
    return "\n".join(lines)


def _summary(c: claim_rules.Claim) -> str:
    parts = [p for p in c.parts if p.outcome != claim_rules.NOT_MEASURED]
    if not parts:
        return "not measured"
    agree = sum(p.outcome == claim_rules.SUPPORTS for p in parts)
    against = [p.name for p in parts if p.outcome == claim_rules.CONTRADICTS]
    unsure = [p.name for p in parts if p.outcome == claim_rules.INCONCLUSIVE]
    return (f"**{c.verdict}**: {agree} of {len(parts)} agree" + (f"; not: {', '.join(against)}" if against else "")
            + (f"; inconclusive: {', '.join(unsure)}" if unsure else ""))


def expected_summary(runs: Sequence[Run]) -> str:
    """Each claim's verdict in each run with how many of its measured parts agree with the paper, then the
    time-to-target table of the last run (the target profile's)."""
    evaluated = [(r, {c.id: c for c in r.claims()}) for r in runs]
    lines = ["| Claim | " + " | ".join(f"{r.profile} profile ({r.date()})" for r in runs) + " |",
             "|---|" + "---|" * len(runs)]
    for cid in claim_rules.TITLES:
        lines.append(f"| {cid} | " + " | ".join(_summary(claims[cid]) for _, claims in evaluated) + " |")
    return "\n".join(lines) + "\n\n" + time_to_target(runs[-1:])


def time_to_target(runs: Sequence[Run]) -> str:
    (target,) = runs
    pct = f"{LEVEL:.0%}"
    lines = [f"Time to target, {target.profile} profile ({target.date()}, {target.host()}), PyTorch eager vs "
             f"MindSpore GRAPH, AMP off, 1 device, median over the repeats:", "",
             f"| Model | PyTorch | MindSpore | PyTorch / MindSpore | {pct} interval | Paper |",
             "|---|---|---|---|---|---|"]
    for row in claim_rules.time_to_target_table(target.results, platform=target.meta["platform"]):
        measured = row["pytorch_s"] is not None or row["mindspore_s"] is not None
        lines.append(f"| {row['title']} | {seconds(row['pytorch_s'])} | {seconds(row['mindspore_s'])} "
                     f"| {_ratio(row['ratio']) if measured else 'not measured'} "
                     f"| {interval_text(row.get('ratio_interval')) or '—'} | {_ratio(row['paper_ratio'])} |")
    return "\n".join(lines)


def readme_times(runs: Sequence[Run]) -> str:
    parts = [f"the {r.profile} profile (`{r.command()}`) took {r.wall()} for {r.runs()} ({r.date()}"
             + ("; data from a local copy, no download in the time" if r.local_data() else "") + ")" for r in runs]
    host = runs[0].host()
    same = all(r.host() == host for r in runs)
    text = "; ".join(parts)
    return (f"On {host}, {text}." if same else
            f"Measured: {'; '.join(f'{p} on {r.host()}' for p, r in zip(parts, runs, strict=True))}.")


def _explanations(r: Run) -> list[dict[str, Any]]:
    """harness.report.explain's, each result's host named by the run's platform, as the report labels a one-host run."""
    return explain.explanations([{**res, "host": r.meta["platform"]} for res in r.results])


def why_sentences(runs: Sequence[Run]) -> str:
    """The report's "Why" sentences for the run (harness.report.explain), one item each."""
    (r,) = runs
    found = [e["sentence"] for e in _explanations(r) if e["sentence"]]
    return "\n".join([f"{r.profile} profile, {r.date()}, {r.host()}:", "", *(f"- {t}" for t in found)])


def why(runs: Sequence[Run]) -> str:
    """The report's "Why" sentences for the run (harness.report.explain), the largest categories of each profiled
    setting, and what the profiler cost each: its profiled epochs' mean against the measured ones'."""
    (r,) = runs
    found = _explanations(r)
    out = [why_sentences(runs), "",
           "| Model | Setting | Step | Largest categories (share of the step) | Profiled epoch against measured |",
           "|---|---|---|---|---|"]
    for e in found:
        for b in e["bars"]:
            step = b["step_s"]
            top = sorted(b["per_step_s"].items(), key=lambda kv: -kv[1])[:3]
            cats = ", ".join(f"{c} {v / step:.0%}" for c, v in top if step > 0 and v > 0)
            cost = b.get("profiler_cost")
            cost = f"{cost:+.0%}" if cost is not None else "no measured epoch after the first"
            out.append(f"| {e['title']} | {b['framework']} {b['mode']} | {explain.milliseconds(step)} | {cats} "
                       f"| {cost} |")
    return "\n".join(out)


CROSSCHECK = "why_crosscheck.json"   # benchmarks/why_crosscheck.py --out, beside the run it checks


def why_crosscheck(runs: Sequence[Run]) -> str:
    """benchmarks/why_crosscheck.py's runs against the committed run (its why_crosscheck.json): per run and check,
    the profile's figure, the standalone one and their ratio."""
    (r,) = runs
    path = r.path / CROSSCHECK
    if not path.is_file():
        return (f"No cross-check is kept beside this run: `python benchmarks/why_crosscheck.py RUN --out "
                f"RUN/{CROSSCHECK}`.")
    checks = json.loads(path.read_text())
    out = ["| run | check | reported | standalone | ratio |", "|---|---|---|---|---|"]
    for i, c in enumerate(checks, 1):
        load = f"load {c['load_average_before'][0]:.2f} before, {c['load_average_after'][0]:.2f} after"
        for row in c["rows"]:
            unit = " (ms a step)" if row["unit"] == "ms" else ""
            fmt = (lambda v: f"{v:.1f}") if row["unit"] == "ms" else (lambda v: f"{v:.3f}")
            within = "within 20%" if row["within_20_percent"] else "**not within 20%**"
            out.append(f"| {i} ({c['started_at'][:16].replace('T', ' ')} UTC, {load}) | {row['check']}{unit} "
                       f"| {fmt(row['reported'])} | {fmt(row['standalone'])} | {row['ratio']:.2f}, {within} |")
    return "\n".join(out)

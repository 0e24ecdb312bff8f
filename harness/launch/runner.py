"""Run the cells of a profile, each in its own process, and keep every result.

- One child process per cell and repeat (`python -m harness.launch.child`), in a new session so that a
  timeout or Ctrl-C can end it and everything it started.
- A cell that crashes, is killed or runs out of time is recorded (status, exit code or signal,
  the tail of its log, and whatever its event log had measured) and the run goes on.
- What this host does with each cell (run it, with its batch whole or in micro-batches, or skip it, and why) is
  decided once per cell before the first one runs (harness.host.plan.Host.decide); every step reads that decision,
  and each child gets its own through its spec.
- `--resume` keeps cells already `ok`, and `skipped` ones whose reason still holds (say, a framework this Python
  lacks), and runs the rest; an earlier result is moved aside, never overwritten. Without --resume a folder that
  already holds results is refused.
- Ctrl-C (or SIGTERM) ends the running child, keeps everything finished, and says how to resume.
- A full disk, a read-only run folder or a data folder gone mid-run stops the run with one line (harness.launch.faults);
  a result that could not be written leaves no file, so `--resume` runs that cell again.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import claims as claims_mod
from harness import scenarios, telemetry
from harness.config import cellid
from harness.config import matrix as matrix_mod
from harness.config.cell import Cell
from harness.config.matrix import Matrix
from harness.config.spec import ModelSpec
from harness.data import prepare_data, synthetic_datasets
from harness.devices import query as devicequery
from harness.errors import HarnessError
from harness.estimate import runtime as estimate
from harness.frameworks import backend as load_backend
from harness.host import envinfo, platforms
from harness.host.plan import ACCUMULATE, SKIP, CellDecision, Host
from harness.launch import booking, faults, sequential
from harness.launch import process as launch
from harness.launch.progress import EpochLines, RunProgress
from harness.paths import REPO
from harness.results import arith, eventlog
from harness.results.store import SCHEMA, RunStore, write_json_atomic
from harness.results.units import brief
from harness.scenarios.operator import ops as operators
from harness.scenarios.operator import turns

KEEP_ON_RESUME = ("ok", "skipped", "served")   # served: a worker node's share of a multi-node cell
PORT_TRIES = 3


def _load() -> list[float] | None:
    """The host's 1-, 5- and 15-minute load averages: a wall time taken beside other work is not a quiet figure."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


class Interrupted(Exception):
    pass


def _raise_interrupted(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def run(matrix: Matrix, profile: str, platform: str, out: Path, *, only: str | None = None,
        data_dir: Path = Path("data"), synthetic: str | None = None, resume: bool = False,
        allow_download: bool = False, shard: str | None = None, repeats: int | None = None,
        max_repeats: int | None = None, hours: float | None = None, log=print) -> int:
    """`repeats`: every cell's (run --repeats N; default the matrix's per cell, harness.config.matrix). With `resume` a
    (cell, repeat) already ok is kept: raising the repeats of a finished run runs only the repeats it lacks.
    `max_repeats`: the cap of the sequential repeats (harness.launch.sequential; default the profile's `max_repeats`):
    after the first pass, a comparison not yet settled gets one more repeat of its cells per round, up to the cap.

    The steps, in order: select the cells; open the run (every input checked, then the run folder claimed); decide
    what this host does with each cell; say the estimate; record the invocation; run the first pass, then the rounds
    of sequential repeats; close the run, whatever happened; say what came of it. `hours`: planned to the hours
    booked (harness.launch.booking): the companion cells run after the sequential repeats, and what does not fit is
    left out."""
    t0 = booking.started()   # a bad $HARNESS_BOOKING_START refuses the run before anything
    if hours is None and platform != "cpu" and matrix.profile(profile).get("accelerator_hours"):
        # the profile's own goal on an accelerator (the quick profile's 15 minutes), from this run's start
        hours, t0 = float(matrix.profile(profile)["accelerator_hours"]), time.time()
    node = launch.nodes()   # HARNESS_NNODES and the rest, checked before anything else
    cells, cap = _select(matrix, profile, only, shard, repeats, max_repeats, node)
    s = _open(matrix, profile, platform, out, node, cells, cap, log, data_dir=data_dir, synthetic=synthetic,
              resume=resume, allow_download=allow_download, shard=shard)
    _plan_cells(s)
    planned = _estimate(s)
    if hours:
        order = list(s.todo)
        s.booked = booking.plan(s, hours, t0, devicequery.device_name(s.platform))
        if planned is not None:   # each run's estimate, in the plan's order
            by_run = {(c.id, r): sec for (c, r), sec in zip(order, planned, strict=True)}
            # what the plan leaves out takes no time: the progress's "left" counts only what runs
            planned = [by_run[c.id, r] if c.id not in s.booked.clock.fit.left else 0.0
                       for c, r in s.todo + s.booked.late + s.booked.tail]
    _start_invocation(s, only, max_repeats, planned)
    old = {sig: signal.signal(sig, _raise_interrupted) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        _first_pass(s)
        _more_rounds(s)
        _last_pass(s)
    except Interrupted as e:
        s.invocation["interrupted"] = True
        log(f"interrupted ({e}); finished cells are kept in {out}; continue with --resume")
        return 130
    except NodeStop as e:
        # The next multi-node cell would wait for a node that is gone: this node's runner ends here, as the others do
        # at the same cell.
        s.invocation["stopped"] = str(e)
        log(f"stopped on node {node.rank}: {str(e).splitlines()[0][:400]}; every node's runner ends at this cell; "
            f"run the same command with --resume on every node (results so far are kept in {out})")
        return 1
    finally:
        # A fault already on its way to the user is the one it sees, not one from writing the run's records.
        _close(s, old, failing=sys.exc_info()[1] is not None)
    summary = ", ".join(f"{n} {st}" for st, n in sorted(s.counts.items()))
    log(f"done: {summary}; results in {out}")
    return 0 if all(st in KEEP_ON_RESUME for st in s.counts) else 1


@dataclass
class RunState:
    """One invocation of `run`: what its steps share."""
    matrix: Matrix
    profile: str
    platform: str
    out: Path
    log: Callable[[str], None]
    node: launch.Nodes
    cells: list[Cell]
    cap: int                    # the sequential repeats' cap
    host: Host                  # what runs here, and why not (harness.host.plan)
    store: RunStore
    fake: set[str]              # the datasets generated instead of read (--synthetic)
    folders: dict[str, str]     # every other dataset's verified folder
    meta: dict                  # run.json
    env: dict                   # env.json
    shim: Path                  # first on every cell's PATH: launchers' workers start as `python`
    # Set by the steps that follow opening the run:
    todo: list[tuple[Cell, int]] = field(init=False)       # the first pass's (cell, repeat), in run order
    decisions: dict[str, CellDecision] = field(init=False)  # cell id -> what this host does with it (_plan_cells)
    invocation: dict = field(init=False)                   # this invocation's entry in run.json
    progress: RunProgress = field(init=False)
    verdicts: Verdicts = field(init=False)
    booked: booking.Booked | None = None                   # --hours: the plan's clock and its later passes
    counts: dict[str, int] = field(default_factory=dict)   # status -> results of this invocation
    # A turn group's cells finish in threads of their own (harness.scenarios.operator.turns): the counts and lines take
    # turns.
    lock: threading.Lock = field(default_factory=threading.Lock)


def _select(matrix: Matrix, profile: str, only: str | None, shard: str | None, repeats: int | None,
            max_repeats: int | None, node: launch.Nodes) -> tuple[list[Cell], int]:
    """The cells this invocation runs (the profile's, --only's, this shard's) and the sequential repeats' cap."""
    cells = matrix_mod.shard(matrix.expand(profile, only, repeats, node.count), shard)
    if not cells:
        raise HarnessError(f"--shard {shard} holds no cell of the {len(matrix.expand(profile, only))} selected; "
                           f"use fewer shards")
    cap = matrix.max_repeats(profile, repeats, max_repeats)
    if node.count > 1:
        # Every node must run the same cells in the same order; only node 0 sees the verdicts, so no extra rounds.
        cap = max(c.repeats for c in cells)
    return cells, cap


def _open(matrix: Matrix, profile: str, platform: str, out: Path, node: launch.Nodes, cells: list[Cell], cap: int,
          log, *, data_dir: Path, synthetic: str | None, resume: bool, allow_download: bool,
          shard: str | None) -> RunState:
    """Check every input (the run folder, the platform, the operator cores, the data), then claim the run folder and
    record this host's environment: a refused run leaves no stray folder."""
    check_out(out)
    host = Host.probe(matrix, platform, profile, devices=platforms.require(platform))
    if any(c.kind == "operator" for c in cells):
        operators.cpu_cores(platform, "operator")  # a bad HARNESS_OPERATOR_CORES refuses the run before it starts
    store = RunStore(out)
    fake = synthetic_datasets(cells, synthetic)
    folders = prepare_data([c for c in cells if c.dataset not in fake], data_dir, allow_download)
    # After every input check: a refused run leaves no stray folder.
    meta = _claim(store, matrix, profile, platform, synthetic, resume, shard, node)
    env = envinfo.capture() | {"run_started_at": _now(), "run_finished_at": None}
    write_json_atomic(out / "env.json", env)
    return RunState(matrix, profile, platform, out, log, node, cells, cap, host, store, fake, folders, meta, env,
                    shim=launch.interpreter_bin(out))


def _plan_cells(s: RunState) -> None:
    """Put the cells in run order and decide, once, what this host does with each (run, accumulate, skip, and why):
    every later step reads these decisions, and each child gets its own through its spec. Say what was decided."""
    s.todo = matrix_mod.schedule(s.cells)
    for fw in sorted({c.framework for c in s.cells}):
        why = s.host.missing.get(fw)
        if why:
            s.log(f"{why}: its {sum(c.framework == fw for c in s.cells)} cells are recorded as skipped")
    s.decisions = {c.id: s.host.decide(c) for c in s.cells}
    memory = s.host.memory_line(s.cells)   # the device's memory, read once, and the cells too big for it
    if memory:
        s.log(memory)
    node = s.node
    if node.count > 1:
        s.log(f"multi-node run: node {node.rank} of {node.count}, rendezvous at {node.master_addr}:"
              f"{node.master_port}; the profile's {len(s.cells)} data-parallel cells over {node.count} nodes, "
              + ("this node records their results" if not node.is_worker else "node 0 records their results") +
              "; the 1-device cells they are measured against run on one host, without HARNESS_NNODES")


def _estimate(s: RunState) -> list[float] | None:
    """Say how long the run should take, from a committed reference run; each planned run's estimated seconds."""
    here = devicequery.device_name(s.platform)   # the estimate scales the reference's step times to this device
    said, planned = estimate.before_run(s.todo, s.profile, s.platform, s.cap, here=here,
                                        cpu=envinfo.cpu_for(s.platform), synthetic=s.fake,
                                        skip=s.host.verdict)   # the decisions' skips, made once
    s.log(said)
    return planned


def _start_invocation(s: RunState, only: str | None, max_repeats: int | None, planned: list[float] | None) -> None:
    """Record this invocation in run.json before the first cell (its end is recorded by _close), and start the
    progress and the verdicts."""
    s.invocation = {"argv": sys.argv, "started_at": _now(), "only": only, "finished_at": None, "interrupted": False,
                    "max_repeats": s.cap,
                    "operator_max_repeats": s.matrix.operator_max_repeats(s.profile, s.cap,
                                                                          given=max_repeats is not None),
                    "operator_budget_s": s.matrix.operator_budget_s(s.profile),
                    "load_average_at_start": _load()}
    if os.environ.get("HARNESS_COMMAND"):  # the command line the user typed (reproduce.sh sets it)
        s.invocation["command"] = os.environ["HARNESS_COMMAND"]
    if os.environ.get("HARNESS_DATA_MIRROR"):  # where the data was downloaded from, when not the upstream hosts
        s.invocation["data_mirror"] = os.environ["HARNESS_DATA_MIRROR"]
    s.meta["invocations"].append(s.invocation)
    s.store.write_meta(s.meta)
    every = s.todo + (s.booked.late + s.booked.tail if s.booked else [])
    s.progress = RunProgress(len(every), planned=planned)
    s.verdicts = Verdicts(s.store, s.cells, s.profile, s.platform, s.cap, every, s.log,
                          op_cap=s.invocation["operator_max_repeats"], op_budget_s=s.invocation["operator_budget_s"])


def _first_pass(s: RunState, todo: list[tuple[Cell, int]] | None = None) -> None:
    """Every (cell, repeat) of the plan once, in run order; the verdicts line after each comparison's last cell. With
    --hours, a run that would end past the hours does not start, and after each the rest is re-planned."""
    first = todo is None
    groups = _in_groups(s.todo if todo is None else todo)
    for k, entries in enumerate(groups):
        if s.booked:
            for cell, repeat in entries:
                booking.before(s, s.booked, cell, repeat)
        _run_entries(s, entries, s.progress.done + 1)
        for cell, repeat in entries:
            s.verdicts.after(cell, repeat)
        if s.booked:   # the runs to come: this pass's, and after the first pass the companion cells
            rest = [e for g in groups[k + 1:] for e in g] + (s.booked.late if first else [])
            booking.after(s, s.booked, entries, rest)


def _last_pass(s: RunState) -> None:
    """With --hours: the companion cells, after the sequential repeats, then the runs recorded as skipped."""
    if s.booked:
        _first_pass(s, s.booked.late)
        for entries in _in_groups(s.booked.tail):
            _run_entries(s, entries, s.progress.done + 1)
            for cell, repeat in entries:
                s.verdicts.after(cell, repeat)


def _more_rounds(s: RunState) -> None:
    """Sequential repeats: one more repeat of the cells of every comparison not yet settled, round by round, until
    every comparison is settled or at its cap (harness.launch.sequential). Each round is recorded in run.json."""
    s.meta.setdefault("rounds", [])
    while True:
        asked = s.verdicts.requests()
        if not asked:
            return
        extra = s.verdicts.next_repeats(asked)
        if s.booked:
            extra = booking.rounds(s, s.booked, extra)
            if not extra:
                return
        s.meta["rounds"].append({"started_at": _now(), "requests": [r.to_dict() for r in asked],
                                 "runs": [[c.id, k] for c, k in extra]})
        s.store.write_meta(s.meta)
        caps = f"cap {s.cap}" + (f", operators {s.verdicts.op_cap}" if s.verdicts.op_cap > s.cap else "")
        s.log(f"round {len(s.meta['rounds']) + 1}: {len(asked)} comparisons not yet settled ask for one more repeat "
              f"of {len(extra)} cells ({caps}):")
        for r in asked:
            s.log(f"    {r.why()}")
        s.progress.total += len(extra)
        for entries in _in_groups(extra):
            _run_entries(s, entries, s.progress.done + 1)
        s.verdicts.after(None, None)


def _in_groups(entries: list[tuple[Cell, int]]) -> list[list[tuple[Cell, int]]]:
    """Consecutive entries of one operator configuration at one repeat together; every other entry alone."""
    groups: list[list[tuple[Cell, int]]] = []
    for cell, repeat in entries:
        prev = groups[-1][-1] if groups else None
        if (prev is not None and cell.kind == prev[0].kind == "operator" and repeat == prev[1]
                and cellid.configuration(cell.id) == cellid.configuration(prev[0].id)):
            groups[-1].append((cell, repeat))
        else:
            groups.append([(cell, repeat)])
    return groups


def _run_entries(s: RunState, entries: list[tuple[Cell, int]], first: int) -> None:
    """Run entries (cell, repeat), the first numbered `first`: an operator configuration's cells that run now, at the
    same repeat, as a turn group (harness.scenarios.operator.turns); every other cell by itself."""
    heads = [f"[{first + k}/{s.progress.total}] {c.id} r{r}" for k, (c, r) in enumerate(entries)]
    going = [k for k, (c, r) in enumerate(entries)
             if not _keeps(s, c, s.store.read_result(c.id, r)) and s.decisions[c.id].action != SKIP] \
        if len(entries) > 1 and turns.enabled() else []
    if len(going) < 2:
        for (cell, repeat), head in zip(entries, heads, strict=True):
            _run_cell(s, cell, repeat, head)
        return
    for k in (k for k in range(len(entries)) if k not in going):   # kept or skipped: said first
        _run_cell(s, *entries[k], heads[k])
    _run_turn_group(s, [entries[k] for k in going], [heads[k] for k in going], first)


def _run_turn_group(s: RunState, entries: list[tuple[Cell, int]], heads: list[str], first: int) -> None:
    """The cells of one operator configuration at once, each in a thread of its own that starts its child, their
    timed blocks taking turns under one coordinator (harness.scenarios.operator.turns). A fault in any thread is raised
    here."""
    name = f"{' '.join(cellid.configuration(entries[0][0].id))} r{entries[0][1]} #{first}"
    group = turns.prepare(s.out / ".turns" / str(first), len(entries), name)
    coordinator = turns.Coordinator(group)
    faults_seen: list[BaseException] = []

    def member(cell: Cell, repeat: int, head: str, spec: dict) -> None:
        try:
            _run_cell(s, cell, repeat, head, spec)
        except BaseException as e:  # noqa: BLE001 - raised again in the runner's thread below
            faults_seen.append(e)

    threads = [threading.Thread(target=member, args=(*entry, head, group.spec(j)), daemon=True)
               for j, (entry, head) in enumerate(zip(entries, heads, strict=True))]
    try:
        for th in threads:
            th.start()
        coordinator.supervise(threads)
    except BaseException:
        coordinator.abort()
        for th in threads:
            th.join()
        raise
    finally:
        coordinator.close()
    if faults_seen:
        raise faults_seen[0]


def _keeps(s: RunState, cell: Cell, prev: dict | None) -> bool:
    """Whether this invocation keeps the result an earlier one left (else the cell runs, or is skipped): an ok one, or
    a skipped one whose reason is still the one decided now."""
    return prev is not None and prev.get("status") in KEEP_ON_RESUME and (
        prev["status"] == "ok" or prev.get("reason") == s.decisions[cell.id].skip)


def _run_cell(s: RunState, cell: Cell, repeat: int, head: str, turn: dict | None = None) -> None:
    """One (cell, repeat): kept from an earlier invocation, recorded as skipped with its decision's reason, or run in
    a child (`turn`: its place in a turn group)."""
    prev = s.store.read_result(cell.id, repeat)
    if _keeps(s, cell, prev):
        with s.lock:
            s.log(f"{head}: kept ({prev['status']}) from an earlier invocation; {s.progress.finished()}")
            s.counts[prev["status"]] = s.counts.get(prev["status"], 0) + 1
        return
    decision = s.decisions[cell.id]
    moved = s.store.retire(cell.id, repeat)   # an earlier result is moved aside, never overwritten
    if moved:
        s.log(f"{head}: earlier result ({prev.get('status')}) kept as {moved.relative_to(s.out)}")
    t = time.monotonic()
    if decision.action == SKIP:
        result = _base(cell, repeat, s.platform, cell.dataset in s.fake) | {"status": "skipped",
                                                                            "reason": decision.reason}
    else:
        result = _start_cell(s, cell, repeat, head, decision, turn)
    with s.lock:
        _finish_cell(s, cell, repeat, head, result, t)


def _start_cell(s: RunState, cell: Cell, repeat: int, head: str, decision: CellDecision, turn: dict | None) -> dict:
    """Run the cell in its child process: its result, or a failed one where it could not be run at all."""
    _require_data(cell, s.folders)
    label = decision.plan.label   # its batch in micro-batches where the device cannot hold it (or the override asks)
    s.log(f"{head}: running (timeout {cell.timeout_s:.0f} s" + (f"; {label}" if label else "") + ")")
    synthetic = cell.dataset in s.fake
    try:
        return _run_child(s.store, cell, repeat, s.platform, s.folders, synthetic, s.shim, s.node, s.log, turn,
                          decision)   # its micro-batches, and why: the child records the reason it is given
    except Interrupted:
        raise
    except Exception as e:  # noqa: BLE001 - a cell that cannot run is a failed cell; the run goes on
        if faults.storage(e, s.out):
            raise  # the run folder's fault, not the cell's: the run stops, the cell runs on --resume
        return _base(cell, repeat, s.platform, synthetic) | {
            "status": "failed", "reason": f"the cell could not be run: {type(e).__name__}: {e}"[:500]}


def _finish_cell(s: RunState, cell: Cell, repeat: int, head: str, result: dict, t: float) -> None:
    """Write the cell's result, count it and say it. A cell that failed because its data folder vanished stops the
    run, and so does a multi-node cell that did not finish (NodeStop)."""
    s.store.write_result(cell.id, repeat, result)
    if result["status"] not in KEEP_ON_RESUME:
        _require_data(cell, s.folders)
        if cell.nodes > 1:
            raise NodeStop(f"{cell.id} r{repeat} {result['status']}: {result.get('reason')}")
    s.counts[result["status"]] = s.counts.get(result["status"], 0) + 1
    tail = f" ({brief(result['reason'], 200)})" if result.get("reason") else ""
    took = time.monotonic() - t
    s.log(f"{head}: {result['status']} in {took:.1f} s{tail}; "
          f"{s.progress.finished(None if result['status'] == 'skipped' else took)}")


def _close(s: RunState, old_handlers: dict, failing: bool) -> None:
    """However the run ends: the signal handlers restored, the invocation's end recorded in run.json and env.json
    (a write that fails while another fault is on its way is dropped: that fault is the one the user sees), and the
    run folder released for the next runner (--resume) as soon as this one is done."""
    for sig, handler in old_handlers.items():
        signal.signal(sig, handler)
    s.invocation["finished_at"] = s.env["run_finished_at"] = _now()
    s.invocation["load_average_at_finish"] = _load()
    try:
        s.store.write_meta(s.meta)
        write_json_atomic(s.out / "env.json", s.env)
    except OSError:
        if not failing:
            raise
    finally:
        s.store.release()


class NodeStop(Exception):
    """A multi-node cell did not finish: the run stops on this node."""


class Verdicts:
    """What the run knows of its verdicts as it goes (harness.launch.sequential): after a cell's last repeat of the
    first pass it evaluates the claims on the run folder's results and prints the verdicts line where it changed; after
    the first pass it names the comparisons that ask for more repeats."""

    def __init__(self, store: RunStore, cells: list[Cell], profile: str, platform: str, cap: int,
                 todo: list[tuple[Cell, int]], log, op_cap: int | None = None, op_budget_s: float | None = None):
        self.store, self.profile, self.platform, self.cap, self.log = store, profile, platform, cap, log
        self.op_cap = cap if op_cap is None else op_cap   # Figure 5's precision rule's cap (harness.launch.sequential)
        self.op_budget_s = op_budget_s                    # ... and its budget of operator seconds
        self.budget_said = False
        self.results: list[dict] = []
        self.runnable = {c.id: c for c in cells if c.kind in ("model", "scaling", "operator")}
        self.left = {}   # cell kind -> first-pass runs still to come
        for c, _ in todo:
            self.left[c.kind] = self.left.get(c.kind, 0) + 1
        self.last_line = ""
        self.claims: list = []
        self.counts: dict[str, int] = {}

    def _evaluate(self) -> None:
        results = self.results = [r for r in self.store.results() if r.get("platform") in (self.platform, None)]
        self.claims = claims_mod.evaluate(results, platform=self.platform, profile=self.profile)
        self.counts = {}
        for r in results:
            self.counts[r["cell"]] = self.counts.get(r["cell"], 0) + 1

    def after(self, cell: Cell | None, repeat: int | None) -> None:
        if cell is not None:
            self.left[cell.kind] -= 1
            if cell.kind not in ("model", "scaling", "operator") or repeat != cell.repeats - 1:
                return   # only a compared cell's last first-pass repeat can change a verdict
        self._evaluate()
        unfinished = {k for k, n in self.left.items() if n > 0}
        line = sequential.states_line(sequential.states(self.claims, self.counts, self.cap, unfinished))
        if line != self.last_line:
            self.log(line)
            self.last_line = line

    def requests(self) -> list:
        """The claims' comparisons not yet settled (harness.launch.sequential.Request), then the operator configurations
        whose ratio's interval is still wider than Figure 5's precision (harness.launch.sequential.Precision)."""
        self._evaluate()
        asked = sequential.requests(self.claims, self.counts, self.cap, set(self.runnable))
        if any(c.kind == "operator" for c in self.runnable.values()):
            index = claims_mod.summarise(self.results)
            ratios = claims_mod.paired_ratios(index)
            # a result with no elapsed time (resumed from an older run, or one that failed before its clock) is not
            # a 0 s process: the estimate of one process's cost is taken over those that measured one
            times = [t for r in self.results if r.get("kind") == "operator" and (t := turns.own_seconds(r)) is not None]
            spent = sum(times)
            wide = sequential.precision_requests(ratios, self.counts, self.op_cap, set(self.runnable))
            more = sequential.within_budget(wide, spent, self.op_budget_s, spent / max(1, len(times)))
            wanted = len(wide)
            if len(more) < wanted and not self.budget_said:
                self.budget_said = True
                self.log(f"Figure 5's precision rule: the operator cells took {spent:.0f} s of the profile's "
                         f"operator_budget_s {self.op_budget_s:.0f}; {wanted - len(more)} of {wanted} configurations "
                         "still asking get no more groups, their intervals reported as they are")
            asked += more
        return asked

    def next_repeats(self, asked: list[sequential.Request]) -> list[tuple[Cell, int]]:
        """One more repeat of every cell asked for, each once, in the order asked; an operator configuration's
        cells one after another (they are asked for together)."""
        ids = list(dict.fromkeys(c for r in asked for c in r.cells))
        return [(self.runnable[i], self.counts.get(i, 0)) for i in ids]


def check_out(out: Path) -> None:
    """--out must be a folder, or creatable as one: said before any data is fetched or cell run."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise HarnessError(f"--out {out} is a file, not a folder; choose a folder (new, or a run folder with --resume)")
    why = faults.unwritable(out) if out.is_dir() else None
    if why:
        raise HarnessError(f"--out {out} cannot be written ({why}); make it writable, then run again (--resume "
                           f"continues a run there), or choose another --out")
    parent = out
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise HarnessError(f"--out {out} cannot be created: {parent} is a file; choose another folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise HarnessError(f"--out {out} cannot be created: {parent} is not writable; choose a folder you can write")


def _claim(store: RunStore, matrix: Matrix, profile: str, platform: str, synthetic: str | None,
           resume: bool, shard: str | None = None, node: launch.Nodes | None = None) -> dict:
    """Create the run folder, or check that --resume continues a run of the same kind."""
    node = node or launch.Nodes()
    if store.root.is_dir():
        store.hold()   # a second runner on this folder is refused here, before anything is read or written
    if store.is_run():
        meta = store.read_meta()
        if not resume:
            raise HarnessError(f"{store.root} already holds a run; continue it with --resume or choose a new --out")
        for key, want in (("platform", platform), ("profile", profile), ("synthetic", synthetic),
                          ("shard", shard), ("nodes", node.count), ("node_rank", node.rank)):
            if meta.get(key, {"nodes": 1, "node_rank": 0}.get(key)) != want:
                raise HarnessError(f"{store.root} holds a run with {key}={meta.get(key)}, not {want}; "
                                   f"--resume continues the same kind of run only, choose a new --out")
        store.results()  # every result readable by this harness (a newer schema is refused) before anything runs
        eventlog.require_mllog_folder(store.root, meta, "--resume would mix two event-log formats in one run")
        return meta
    if store.root.exists() and any(p.name != store.LOCK for p in store.root.iterdir()):
        raise HarnessError(f"{store.root} exists and is not empty; choose a new --out folder")
    try:
        store.root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise HarnessError(f"--out {store.root} cannot be created ({e.strerror}); "
                           f"choose a folder you can write") from None
    store.hold()
    meta = {"schema": SCHEMA, "platform": platform, "profile": profile, "synthetic": synthetic, "shard": shard,
            "nodes": node.count, "node_rank": node.rank,
            "matrix": str(matrix.path), "matrix_sha256": hashlib.sha256(matrix.path.read_bytes()).hexdigest(),
            "created_at": _now(), "invocations": []}
    store.write_meta(meta)
    return meta


def _require_data(cell: Cell, folders: dict[str, str]) -> None:
    dataset = cell.dataset
    if dataset in folders:
        faults.require_data(dataset, folders[dataset])


def _base(cell: Cell, repeat: int, platform: str, synthetic: bool) -> dict[str, Any]:
    trains = cell.spec if isinstance(cell.spec, ModelSpec) else None  # model, scaling and passes cells
    return {"schema": SCHEMA, "cell": cell.id, "repeat": repeat, "kind": cell.kind, "model": cell.model,
            "op": cell.op, "framework": cell.framework, "mode": cell.mode, "amp": cell.amp,
            "devices": cell.devices, "nodes": cell.nodes, "platform": platform, "synthetic": synthetic,
            "seed": cell.seed,
            "dataset": cell.dataset, "reason": None,
            # The results contract's keys are present in every result; what a kind does not measure stays null.
            "metric": trains.metric if trains else None, "target": trains.target if trains else None,
            "title": trains.title if trains else None,
            "best_metric": None, "test_metric": None, "time_to_target_s": None, "first_epoch_throughput": None,
            "mean_throughput_other_epochs": None, "throughput_unit": trains.throughput_unit if trains else None,
            "curve": [],
            # Why the step takes what it takes (harness.profiling): a model cell's first repeat, once it ran.
            "profile": None,
            # Telemetry (peak memory, energy, power): null until a child that ran measures them.
            **telemetry.null_keys()}


def _spec(store: RunStore, cell: Cell, repeat: int, platform: str, folders: dict, synthetic: bool,
          process_env: dict, turns: dict | None, decision: CellDecision | None = None) -> dict:
    """What the child reads (harness.launch.child SPEC.json): its cell, where it writes, and how it runs here."""
    return {"cell": cell.to_dict(), "repeat": repeat, "platform": platform,
            "synthetic": synthetic, "data_folder": folders.get(cell.dataset),
            "events": str(store.path(cell.id, repeat, eventlog.SUFFIX)),
            "child_result": str(store.path(cell.id, repeat, ".child.json")),
            "log": str(store.path(cell.id, repeat, ".log")), "process_env": process_env,
            # an operator cell on CPU: the cores its child confines itself to
            "cpu_cores": operators.cpu_cores(platform, cell.kind),
            # an operator cell timed by turns with its configuration's others (harness.scenarios.operator.turns)
            "turns": turns,
            # a training step's micro-batches (harness.devices.memory.plan; 1: the whole batch), and why it takes
            # more than one, as the host decided it (harness.host.plan.CellDecision: the override or the memory)
            "accumulation_steps": decision.plan.steps if decision else 1,
            "accumulation_why": decision.reason if decision and decision.action == ACCUMULATE else None}


def _run_child(store: RunStore, cell: Cell, repeat: int, platform: str, folders: dict, synthetic: bool,
               shim: Path, node: launch.Nodes, log=None, turns: dict | None = None,
               decision: CellDecision | None = None) -> dict:
    spec_path = store.path(cell.id, repeat, ".spec.json")
    child_result = store.path(cell.id, repeat, ".child.json")
    events_path = store.path(cell.id, repeat, eventlog.SUFFIX)
    log_path = store.path(cell.id, repeat, ".log")
    cell_dir = store.cell_dir(cell.id)
    for stale in (child_result, events_path, *cell_dir.glob(f"r{repeat}.rank*")):  # from an interrupted attempt
        stale.unlink(missing_ok=True)
    backend = load_backend(cell.framework)
    process_env = backend.process_env(platform, cell.kind)
    write_json_atomic(spec_path, _spec(store, cell, repeat, platform, folders, synthetic, process_env, turns,
                                       decision))
    env = {**os.environ, **process_env, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "PATH": os.pathsep.join(filter(None, [str(shim), os.environ.get("PATH")]))}
    fixed_port = node.master_port
    # Epoch lines from the event log as it grows (the first local rank's for a launched cell).
    first_local = node.rank * cell.devices_per_node if cell.nodes > 1 else 0
    watch = (events_path if cell.devices == 1 else store.path(cell.id, repeat, f".rank{first_local}" + eventlog.SUFFIX),
             EpochLines(cell.spec, log)) if log is not None and isinstance(cell.spec, ModelSpec) else None
    retries = 0
    for attempt in range(1, PORT_TRIES + 1):
        if cell.devices > 1:  # the framework's own launcher starts one process per device on this host
            # A port found free can be taken by another process before the launcher binds it: on a clash the
            # cell is started again with another port (a fixed HARNESS_MASTER_PORT is never changed).
            port = int(fixed_port or launch.free_port())
            argv = backend.launch_argv(cell.devices_per_node, str(spec_path), port,
                                       str(cell_dir / f"r{repeat}.launcher"),
                                       node.launcher_options() if cell.nodes > 1 else {})
        else:
            argv = [sys.executable, "-m", "harness.launch.child", str(spec_path)]
        result = _base(cell, repeat, platform, synthetic) | {"started_at": _now(), "launcher": argv[:3]}
        t = time.monotonic()
        try:
            rc = launch.start(argv, log_path, cell_dir, env, cell.timeout_s, watch)
        except OSError as e:  # launcher missing, not executable, bad argv: this cell fails, the run goes on
            if faults.storage(e, store.root):
                raise  # its log could not be opened: the run folder's fault
            return result | {"finished_at": _now(), "elapsed_s": 0.0, "exit_code": None, "signal": None,
                             "status": "failed", "reason": f"could not start {argv[0]}: {e}"[:500]}
        if (cell.devices == 1 or fixed_port or rc == 0 or attempt == PORT_TRIES
                or not launch.port_clash(cell_dir, repeat)):
            break
        retries = attempt
        for stale in (events_path, *cell_dir.glob(f"r{repeat}.rank*")):
            stale.unlink(missing_ok=True)
    if retries:
        result["port_retries"] = retries
    result["finished_at"] = _now()
    result["elapsed_s"] = time.monotonic() - t
    result["exit_code"] = rc if rc is None or rc >= 0 else None
    result["signal"] = signal.Signals(-rc).name if rc is not None and rc < 0 else None
    if cell.devices > 1:
        return _collect_ranks(store, cell, repeat, result, rc, node)
    child = _read_json(child_result)
    child_result.unlink(missing_ok=True)  # merged into the cell's result below
    if rc == 0 and child is not None:
        result.update(child)
    else:
        result.update(_failure(cell, rc, result["signal"], log_path))
    if result["status"] not in ("ok", "skipped"):
        result["log_tail"] = launch.tail(log_path)
    scenario = scenarios.for_kind(cell.kind)
    if scenario is not None and result["status"] != "skipped":
        # Measurements come from the event log, also for a cell that died: nothing measured is lost.
        result.update(scenario.summarise(eventlog.read(events_path), cell))
    return result


def _failure(cell: Cell, rc: int | None, sig: str | None, log_path: Path) -> dict:
    if rc is None:
        return {"status": "timeout", "reason": f"exceeded the cell timeout of {cell.timeout_s:.0f} s"}
    how = f"killed by {sig}" if sig else f"exit code {rc}"
    return {"status": "failed", "reason": f"{how}: {launch.last_error(log_path)}"}


def _collect_ranks(store: RunStore, cell: Cell, repeat: int, result: dict, rc: int | None,
                   node: launch.Nodes) -> dict:
    """Merge a launched cell: every rank's throughput, rank 0's metrics, and the scaling keys. A cell over several
    nodes finds every rank's files here too: the ranks share them over the cell's own collective at the end
    (harness.launch.child.share_ranks), so node 0 merges them all. A worker node (node rank > 0) records `served`, with
    its own ranks' figures: node 0's run folder holds the cell's result."""
    cell_dir = store.cell_dir(cell.id)
    per_node = cell.devices_per_node
    mine = range(node.rank * per_node, (node.rank + 1) * per_node) if cell.nodes > 1 else range(cell.devices)
    rank_logs = sorted(cell_dir.glob(f"r{repeat}.rank*.log"))   # this host's ranks' output
    children = {_rank_of(p): _read_json(p) for p in cell_dir.glob(f"r{repeat}.rank*.child.json")}
    for p in cell_dir.glob(f"r{repeat}.rank*.child.json"):
        p.unlink()
    if rc == 0 and len(children) == cell.devices and all(children.values()):
        result.update(children[0])
        result.update(telemetry.merge_ranks(children))  # every rank sampled its own process and device
        shas = {c.get("state_sha256") for c in children.values()}
        result["params_identical_across_ranks"] = len(shas) == 1 and None not in shas
        result["ranks_per_node"] = {str(n): sorted(r for r, c in children.items() if c.get("node", 0) == n)
                                    for n in sorted({c.get("node", 0) for c in children.values()})}
    elif children and all(c and c.get("status") == "skipped" for c in children.values()):
        result.update(next(iter(children.values())))   # not supported here (say, a mode): every rank said so
    else:
        result.update(_failure(cell, rc, result["signal"], store.path(cell.id, repeat, ".log")))
        if rc == 0:
            missing = ", ".join(str(r) for r in range(cell.devices) if not children.get(r))
            result["reason"] = f"the launcher ended with exit code 0, but rank(s) {missing} left no result"
        result["reason"] = _rank_failure(cell_dir, repeat, mine, cell, node, result["reason"], children)
    if result["status"] not in ("ok", "skipped"):
        tails = [f"--- {p.name} ---\n{launch.tail(p, launch.LOG_TAIL_LINES // 2)}" for p in rank_logs]
        launcher_tail = launch.tail(store.path(cell.id, repeat, ".log"), 10)
        result["log_tail"] = "\n".join(tails + [f"--- launcher ---\n{launcher_tail}"])
    scenario = scenarios.for_kind(cell.kind)
    if scenario is None or result["status"] == "skipped":
        return result
    per_rank = {_rank_of(p): scenario.summarise(eventlog.read(p), cell)
                for p in cell_dir.glob(f"r{repeat}.rank*{eventlog.SUFFIX}")}
    if node.is_worker and cell.nodes > 1:
        served = result["status"] == "ok"
        return result | {"status": "served" if served else result["status"],
                         "reason": f"node {node.rank} of {cell.nodes} served this cell; node 0's run folder holds its "
                                   f"result" if served else result["reason"],
                         "node_rank": node.rank, "global_throughput": None, "per_device_throughput": None,
                         "efficiency": None, "first_epoch_throughput": None, "mean_throughput_other_epochs": None,
                         "rank_throughput": {r: per_rank[r].get("mean_throughput_other_epochs") for r in mine
                                             if r in per_rank}}
    if 0 in per_rank:
        result.update(per_rank[0])  # metrics, curve and time to target as rank 0 saw them
    for key in ("first_epoch_throughput", "mean_throughput_other_epochs"):
        values = [s[key] for s in per_rank.values() if s.get(key) is not None]
        result[key] = sum(values) if len(values) == cell.devices else None  # global: every rank's samples
    result["rank_throughput"] = {r: s.get("mean_throughput_other_epochs") for r, s in sorted(per_rank.items())}
    result["global_throughput"] = result["mean_throughput_other_epochs"]
    result["per_device_throughput"] = arith.per_device(result["global_throughput"], cell.devices)
    single = store.read_result(cellid.single_device(cell.id), repeat)
    base = single.get("mean_throughput_other_epochs") if single and single.get("status") == "ok" else None
    result["efficiency"] = arith.efficiency(result["per_device_throughput"], base)
    return result


def _rank_of(path: Path) -> int:
    """r0.rank3.child.json -> 3"""
    return int(path.name.split(".")[1][4:])


def _rank_failure(cell_dir: Path, repeat: int, mine: range, cell: Cell, node: launch.Nodes, reason: str,
                  children: dict) -> str:
    """The reason a launched cell failed, naming the node and the rank, from what this host saw: the rank on another
    node that msrun's scheduler (node 0) lost first; else a rank of its own whose log ends in an error of its own;
    else the worker this host's launcher saw die first (launchers name it by pid; each rank's log starts with its
    pid); else, where this host's ranks only lost their connection to another node's, that."""
    where = f"node {node.rank} " if cell.nodes > 1 else ""
    logs = {r: cell_dir / f"r{repeat}.rank{r}.log" for r in mine}
    lost_peer = {r for r, log in logs.items() if launch.peer_lost(launch.tail(log, 200))}
    lost = launch.lost_worker(cell_dir / f"r{repeat}.scheduler.log")
    if lost is not None and lost not in mine:   # whatever this host's ranks said after, that came first
        return (f"rank {lost}, on another node, stopped answering msrun's scheduler, which then ended node "
                f"{node.rank}'s ranks")
    for r, log in logs.items():
        own = None if children.get(r) or r in lost_peer else launch.own_error(log)
        if own:
            return f"{where}rank {r}: {own}"[:500]
    dead = launch.dead_worker(cell_dir / f"r{repeat}.log")
    rank = launch.rank_pids(list(logs.values())).get(dead[0]) if dead else None
    if dead and rank is not None and rank not in lost_peer:
        code = dead[1]
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        return f"{where}rank {rank}: {how}"
    if lost_peer and cell.nodes > 1:
        return (f"node {node.rank} rank {', '.join(map(str, sorted(lost_peer)))} lost its connection to a rank on "
                f"another node; that node's run folder names the rank that ended")
    return f"{where}{reason}"[:500]


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None



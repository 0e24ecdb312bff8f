"""The process that measures one cell: `python -m harness.launch.child SPEC.json`.

Run by the runner in a fresh process per cell, so every cell starts with clean framework state.
It writes the event log as it goes and, at the end, its measurements to the spec's `child_result`
path. Exit code 0 means that file is complete; anything else is a failure the runner records.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import traceback

from harness import profiling, scenarios, telemetry
from harness.config.cell import Cell
from harness.config.context import CellContext
from harness.devices import accumulation
from harness.errors import Unsupported
from harness.frameworks import backend as load_backend
from harness.launch.process import nodes, pid_line
from harness.results import eventlog, mlperf
from harness.results.store import write_json_atomic
from harness.scenarios.operator import ops as operators


def rank_path(path: str, rank: int, world_size: int) -> str:
    """r0.mllog -> r0.rank1.mllog when a launcher started several ranks."""
    if world_size == 1:
        return path
    head, _, rest = os.path.basename(path).partition(".")
    return os.path.join(os.path.dirname(path), f"{head}.rank{rank}.{rest}")


def main(spec_path: str) -> int:
    with open(spec_path) as f:
        spec = json.load(f)
    cell = Cell.from_dict(spec["cell"])
    if cell.kind == "operator" and spec["platform"] == "cpu" and operators.fixed_layout():
        # the same addresses in every operator process (harness.scenarios.operator.ops.fixed_layout): start again with
        # them
        os.execv(sys.executable, [sys.executable, "-m", "harness.launch.child", *sys.argv[1:]])  # noqa: S606 (no shell)
    backend = load_backend(cell.framework)
    if spec.get("cpu_cores"):
        if spec.get("turns"):
            # A turn group's processes start together and time on one core; their imports (about 2 s each on the
            # 2-core machine) run on any core first, side by side (versions() imports the framework).
            backend.versions()
        confine(spec["cpu_cores"])   # before the framework starts its threads: they and the sampler's inherit it
    rank, local_rank, world = backend.rank_from_env()
    if world > 1:  # each rank logs to its own file, so a failure shows every rank's tail
        # msrun runs this file in its scheduler process too (MS_ROLE=MS_SCHED, RANK_ID=0): its output goes beside
        # the ranks', not into rank 0's file.
        name = spec["log"].removesuffix(".log") + ".scheduler.log" if os.environ.get("MS_ROLE") == "MS_SCHED" \
            else rank_path(spec["log"], rank, world)
        log = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        # The launchers name a dead worker by its pid: this line lets the runner name its rank and node.
        print(pid_line(rank, os.getpid()), flush=True)
    profiled = profiling.enabled() and profiling.runs_pass(cell, spec["repeat"], world)   # HARNESS_PROFILE=off: none
    ctx = CellContext(cell=cell, platform=spec["platform"], repeat=spec["repeat"], data_folder=spec["data_folder"],
                      synthetic=spec["synthetic"], rank=rank, local_rank=local_rank, world_size=world,
                      profile_dir=spec["log"].removesuffix(".log") + ".profile" if profiled else None,
                      turns=spec.get("turns"), accumulation_steps=int(spec.get("accumulation_steps") or 1))
    events_path = rank_path(spec["events"], rank, world)
    events = eventlog.EventLog(events_path)
    t_events0 = time.perf_counter() - events.elapsed()  # the event log's clock origin on the sampler's clock
    # Telemetry samples this process (this rank) from before the framework's set-up to after the scenario.
    # None for an operator cell timed by turns: its partners time their blocks while it waits, and a sampler waking in
    # it every 0.1 s would run during their blocks, on their core (harness.scenarios.operator.turns)
    sampler = None if ctx.turns else telemetry.for_platform(ctx.platform, ctx.local_rank)
    if sampler is not None:
        sampler.start()
    events.log(eventlog.INIT_START, event_type=eventlog.START, cell=cell.id, repeat=ctx.repeat, rank=rank)
    scenario = scenarios.for_kind(cell.kind)
    out: dict = {"process_env": spec.get("process_env", {}), "rank": rank, "world_size": world}
    framework: dict[str, float | None] = {}   # the framework's own peaks: allocated and reserved
    framework_why = None
    try:
        if scenario is None:
            raise Unsupported(f"no scenario measures '{cell.kind}' cells yet")
        ctx.settings = backend.setup(ctx)
        if cell.kind in mlperf.TRAINING_KINDS:   # its micro-batches, and why, as the runner decided (the spec)
            ctx.settings.update(accumulation.settings(ctx.accumulation_steps, ctx.hparams.get("batch"),
                                                      spec.get("accumulation_why")))
        if spec.get("cpu_cores"):
            ctx.settings["cpu_cores"] = process_cores()
        if cell.kind == "operator" and spec["platform"] == "cpu":
            ctx.settings["address_randomisation"] = operators.layout_state()
        out["settings"] = ctx.settings
        out["versions"] = backend.versions()
        mlperf.log_setup(events, ctx, os.path.join("cells", cell.id, os.path.basename(spec_path)))
        events.log(eventlog.INIT_STOP, event_type=eventlog.END)
        out.update(scenario.run(ctx, backend, events))
        framework, framework_why = _framework_memory(backend, ctx)
        out["status"] = "ok"
    except Unsupported as e:
        out.update(status="skipped", reason=str(e))
    finally:
        events.close()
        recording = sampler.stop() if sampler is not None else None
    if out.get("status") == "ok":
        out.update(_telemetry(recording, events_path, out, cell, t_events0, framework, framework_why))
    profiling.run_after(out)   # the profiled pass, after the measurements and telemetry (harness.profiling)
    out.update(node=nodes().rank, host=socket.gethostname())
    write_json_atomic(rank_path(spec["child_result"], rank, world), out)
    if world == 1:
        leave_now(0)
    if out.get("status") == "ok":
        share_ranks(backend, ctx, spec, events_path, out)
    return 0


def confine(cores: list[int]) -> None:
    """Every thread this process has to `cores` (sched_setaffinity sets one thread's; a thread started later inherits
    the affinity of the thread that starts it). An import leaves threads of its own (two threads after `import torch`
    or `import mindspore`)."""
    for tid in _threads():
        try:
            os.sched_setaffinity(tid, cores)
        except OSError:
            pass   # a thread that has ended since the listing
    os.sched_setaffinity(0, cores)   # this thread's, which must hold (an error here is the cell's)


def process_cores() -> list[int]:
    """The cores any thread of this process may run on."""
    cores: set[int] = set()
    for tid in _threads():
        try:
            cores |= os.sched_getaffinity(tid)
        except OSError:
            pass   # a thread that has ended since the listing
    return sorted(cores)


def _threads() -> list[int]:
    """This process's thread ids, as Linux lists them."""
    return [int(tid) for tid in os.listdir("/proc/self/task")]


def share_ranks(backend, ctx: CellContext, spec: dict, events_path: str, out: dict) -> None:
    """Every rank's result and event log to every host, over the cell's own collective: the first rank on each host
    writes the other hosts' ranks' files beside its own (r0.rank3.child.json, r0.rank3.mllog), so node 0's runner
    merges every rank of a cell that ran over several hosts, with no shared folder between them. On one host the
    files are all there already; the gather costs one collective (well under a second on the 2-core machine)."""
    with open(events_path) as f:
        mine = {"rank": ctx.rank, "node": out["node"], "child": out, "events": f.read()}
    everyone = backend.all_gather_object(ctx, mine)
    if ctx.local_rank != 0:
        return
    for other in everyone:
        if other["node"] == out["node"]:
            continue   # this host's own ranks wrote theirs
        write_json_atomic(rank_path(spec["child_result"], other["rank"], ctx.world_size), other["child"])
        tmp = rank_path(spec["events"], other["rank"], ctx.world_size) + ".part"
        with open(tmp, "w") as f:
            f.write(other["events"])
        os.replace(tmp, rank_path(spec["events"], other["rank"], ctx.world_size))


def leave_now(rc: int) -> None:
    """Exit without the interpreter's and the framework's teardown, once the result is written and the event log
    closed: it measures nothing and took 0.4 s a process with either framework (`import mindspore` or `import torch`
    and a normal exit: 1.47-1.53 s on one core of the 2-core machine; with os._exit: 1.05-1.09 s), a sixth of an
    operator cell's process. One process only: the ranks of a launched cell leave through their launcher's
    shutdown. Whatever the cell started (compile workers, say) the runner ends with the cell's process group."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


def _framework_memory(backend, ctx) -> tuple[dict[str, float | None], str | None]:
    """The framework's own peaks, allocated and reserved (MB), and why either is missing (None where both were
    read)."""
    peak, why = telemetry.framework_peak(backend, ctx)
    reserved, why_reserved = telemetry.framework_peak(backend, ctx, "reserved_memory_mb")
    return ({"framework_peak_mb": peak, "framework_reserved_mb": reserved},
            "; ".join(w for w in (why, why_reserved) if w) or None)


def _telemetry(recording, events_path, out, cell, t_events0, framework, framework_why) -> dict:
    """The result's telemetry keys; a failure here is recorded, it never fails a cell that was measured."""
    try:
        keys = telemetry.summarise(recording, eventlog.read(events_path), out, cell.kind, cell.spec, t_events0,
                                   **framework)
    except Exception as e:  # noqa: BLE001 - the cell's measurements stand without telemetry
        return {"telemetry": {"error": f"{type(e).__name__}: {e}"[:300]},
                "framework_peak_memory_mb": framework.get("framework_peak_mb"),
                "framework_reserved_memory_mb": framework.get("framework_reserved_mb")}
    details = keys.setdefault("telemetry", {})
    if recording is None:
        details["disabled"] = "HARNESS_TELEMETRY=off"
    if framework_why:
        details["framework_peak_unavailable"] = framework_why
    return keys


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1]))
    except Exception:  # noqa: BLE001 - the runner shows the last lines of this as the cell's reason
        traceback.print_exc()
        sys.exit(1)

"""What a training cell's event log says about its set-up: the keys MLPerf's training rules require of every log
(harness/logcheck/common.yaml, from the ruleset's common.yaml) and the ones each workload's rules file names
(harness/models/<model>/logcheck.yaml), with this artifact's values. What is particular to a model (its optimiser,
its schedule: the model package's MLPERF_KEYS) or a dataset (its validation split: the dataset module's
val_split_size and EVAL_LIMITED) is declared in its own folder or file (harness.contracts), never named here: the
training scenario hands the cell's model package and dataset module over.
 Two calls, both on the cell's EventLog: `log_setup` in the child before init_stop (what is known before any data is
touched: submission keys, seed, parallelism, the config file), `log_workload` in the training scenario once the
workload is built (samples, batch sizes, precision, optimiser). Operator, inference and passes cells are not MLPerf
training runs and log neither.

The honest values, and why:
- submission_division `open`: these are not MLPerf's benchmarks (models, data and targets are the study's), so the
  closed division's reference rules cannot apply; submission_status `research`; submission_org names the artifact.
- cache_clear `False`: the harness does not drop the OS page cache before a cell.
- tensor, pipeline, context and expert parallelism 1: the only parallelism is data parallel (scaling cells).
- gradient_accumulation_steps: the cell's micro-batches a step (1 but where the device cannot hold the batch:
  harness.devices.memory.plan); global_batch_size stays the matrix's batch (times the ranks), micro_batch_size is it
  over the accumulation steps.
- lowest_numerical_precision_*: fp32 without AMP; PyTorch's autocast type (bfloat16 on CPU, fp16 on GPU/NPU) or
  apex O2's fp16; MindSpore's auto_mixed_precision type, fp16 (its default, checked in 2.10). No model has attention
  layers: the attention entry repeats the linear one. Communication: gradients are all-reduced in the parameters'
  type, fp32 (fp16 under apex O2, which casts the model in place).
- train_samples: the samples an epoch trains on, all ranks together, as the harness counts them for throughput
  (GCN: every node of the graph, full-batch); eval_samples: what one evaluation of the validation metric reads.
"""

from __future__ import annotations

import platform as _platform
from types import ModuleType

from mlperf_logging.mllog import constants as C

from harness.config.spec import ModelSpec
from harness.results import eventlog

TRAINING_KINDS = ("model", "scaling")
ORG = "ms-pt-harness reproduction artifact (not an MLPerf submission)"

# hparams of harness/config/matrix.toml -> the key that logs them.
HPARAM_KEYS = {"lr": C.OPT_BASE_LR, "weight_decay": C.OPT_WEIGHT_DECAY, "momentum": eventlog.OPT_MOMENTUM,
               "adam_beta1": C.OPT_ADAM_BETA_1, "adam_beta2": C.OPT_ADAM_BETA_2, "adam_eps": C.OPT_ADAM_EPSILON,
               "warmup_epochs": C.OPT_LR_WARMUP_EPOCHS, "clip_norm": C.OPT_GRADIENT_CLIP_NORM,
               "max_len": C.MAX_SEQUENCE_LENGTH, "warmup_steps": C.OPT_LR_WARMUP_STEPS}


def log_setup(events: eventlog.EventLog, ctx, config_filename: str) -> None:
    """The submission and run-configuration keys, before init_stop (the ruleset wants submission_division there)."""
    cell = ctx.cell
    if cell.kind not in TRAINING_KINDS:
        return
    for key, value in ((C.SUBMISSION_ORG, ORG), (C.SUBMISSION_PLATFORM, platform_name(ctx.platform)),
                       (C.SUBMISSION_DIVISION, C.OPEN), (C.SUBMISSION_STATUS, C.RESEARCH),
                       (C.SUBMISSION_BENCHMARK, cell.model), (C.CACHE_CLEAR, False), (C.SEED, cell.seed),
                       (C.CONFIG_FILENAME, config_filename), (C.GRADIENT_ACCUMULATION_STEPS, ctx.accumulation_steps),
                       (C.TENSOR_PARALLELISM, 1), (C.PIPELINE_PARALLELISM, 1), (C.CONTEXT_PARALLELISM, 1),
                       (C.EXPERT_PARALLELISM, 1)):
        events.log(key, value)


def log_workload(events: eventlog.EventLog, ctx, workload, data: dict, package: ModuleType,
                 dataset: ModuleType) -> None:
    """Samples, batch sizes, precision and optimiser of a built training workload: `package` is the cell's model
    package (harness.models.model_package), `dataset` its dataset module (harness.data.module), `data` what that
    loaded."""
    cell, hp = ctx.cell, ctx.hparams
    per_rank_batch = int(hp.get("batch", workload.samples_per_epoch))   # no batch: full-batch (GCN)
    events.log(C.TRAIN_SAMPLES, workload.samples_per_epoch * ctx.world_size)
    events.log(C.EVAL_SAMPLES, eval_samples(cell.spec, dataset, data))
    events.log(C.GLOBAL_BATCH_SIZE, per_rank_batch * ctx.world_size)
    # The batch a forward pass takes: a rank's batch over the step's micro-batches (gradient accumulation; global =
    # micro x accumulation steps x ranks, as the ruleset has it).
    events.log(C.MICRO_BATCH_SIZE, per_rank_batch // ctx.accumulation_steps)
    compute = precision(ctx)
    events.log(C.LOWEST_NUMERICAL_PRECISION_IN_LINEAR, compute)
    events.log(C.LOWEST_NUMERICAL_PRECISION_IN_ATTN, compute, note="no attention layers: the linear layers' type")
    apex = str(ctx.settings.get("amp_impl", "")).startswith("apex")
    events.log(C.LOWEST_NUMERICAL_PRECISION_IN_COMM, "fp16" if apex else "fp32", devices=ctx.world_size)
    for key, value in package.MLPERF_KEYS.items():   # the model's folder says how it trains
        events.log(key, value)
    for name, key in HPARAM_KEYS.items():
        if name in hp:
            events.log(key, hp[name])


def eval_samples(spec: ModelSpec, dataset: ModuleType, data: dict) -> int:
    """How many samples one validation evaluation reads: the split the dataset module names (its val_split_size),
    cut to the spec's val_samples or else eval_samples where the dataset says a profile cuts it (as the models cut
    it)."""
    n = dataset.val_split_size(data)
    limit = (spec.eval_samples if spec.val_samples is None else spec.val_samples) if dataset.EVAL_LIMITED else None
    return n if limit is None else min(limit, n)


def precision(ctx) -> str:
    """The lowest type the linear layers compute in, in the ruleset's spelling."""
    if ctx.cell.amp == "off":
        return "fp32"
    if ctx.cell.framework == "pytorch":
        return {"bfloat16": "bfloat16", "float16": "fp16"}[str(ctx.settings["amp_dtype"])]
    return "fp16"


def platform_name(platform: str) -> str:
    """`cpu host, x86_64, <CPU model>` (the CPU model from /proc/cpuinfo where it is readable)."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return ", ".join(filter(None, (f"{platform} host", _platform.machine(), model)))

"""Every profile's model cells at that profile's own sizes, on the CPU: one training step and the evaluation.
 For every profile of harness/config/matrix.toml and every distinct model size among its model and scaling cells (the
framework, mode and AMP axes do not change a size; a scaling cell's per-device batch is its model cell's), the
model's workload is built as a cell builds it (`harness.launch.inprocess.set_up`, the model file's `build(ctx, data)`,
the training scenario's `_trainer`) at the profile's batch, sequence length, vocabulary, minimum frequency, buckets and
dataset sizes (`train_samples`, `eval_samples`, `val_samples`, or the whole split), in PyTorch eager (every case)
and MindSpore GRAPH (the models whose data feed indices into the network, one case per network shape: MS_INDEXED)
at fp32 on one device, each framework in its own process (as cells run; this file is that process's script:
`python tests/test_profile_sizes.py FRAMEWORK MODE OUT.json CASE_ID...`). Then:

- every training batch of the epoch is made and checked (shapes fixed, every index in range), and ONE training step
  runs on the epoch's last batch (the first part's, for a profile that evaluates several times an epoch);
- `evaluate("val")` and `evaluate("test")` run as the scenario calls them, every evaluation batch made and its index
  and shape arithmetic checked, and the network run on the LAST batch: BERT (each flat masked position inside the
  batch's B x S sequence output, a weighted one inside its own sequence: the index error appeared only from the
  third batch on, and BERT-base's 1,024 evaluation reviews are 4 batches), the LSTM (each row's last-token index
  inside the sequence), ResNet50 and GoogLeNet (the padded last batch; the accuracy is then the last batch's, against
  the last labels), the GRU (every batch encoded, the last decoded greedily in full, the others ended after one
  decoder step); GCN evaluates the whole graph.

Each framework runs in its own processes: PyTorch's and MindSpore's side by side, each case of a model in ALONE in a
process of its own (see ALONE), the other cases together. BERT's WordPiece vocabulary is trained once per process and
the reviews' encodings are shared between the processes through files (_memoise_bert_encoding): the same ids.
 Data: the real datasets where ../shared/data holds them (Cora, Multi30K, aclImdb: loaded once per process), else
their synthetic stand-ins; CIFAR-10 is the synthetic stand-in unless that folder holds it too (5,000 training and
1,000 test images, so at batch 128: 39 training and 8 evaluation batches, the last padded).

Widths are shrunk where they enter no index or shape arithmetic of the data, only the network's own weights:
- BERT: hidden 768 -> 32, heads 12 -> 2, layers 12 -> 1, intermediate 3072 -> 64. The data's arithmetic is
  batch x max_len (the flat positions), max_predictions (the slots per sequence) and the vocabulary (the token ids,
  the labels, the tied decoder's rows): all kept. Hidden, heads and intermediate only size the weight matrices and
  the per-head split of the hidden axis (hidden // heads, 16 here); the layers repeat the same (B, S, hidden) map.
- GRU: embedding 256 -> 16, hidden 512 -> 32 (the target profile's 128 / 256 too). Batch, max_len (T), buckets,
  min_freq (the vocabularies) and reverse_source are kept.
- LSTM: embedding 300 -> 16, hidden 100 -> 16. Batch, max_len (the last-token index), vocab and min_freq are kept;
  the layers (1) are kept.
- ResNet50: stage widths 64/128/256/512 -> 4/8/16/32, one bottleneck block per stage instead of 3/4/6/3, stem
  64 -> 8 (module constants STAGES and STEM, set in this process only). The strides (32x32 -> 4x4 before the
  global pool), the 3-channel 32x32 input, the 10 classes and the batch are kept.
- GoogLeNet: every Inception branch width / 16 (at least 1), each block's input the previous block's output, the
  classifier's input (FEATURES) the last block's output (module constants INCEPTION and FEATURES); the stem
  convolutions (64, 64, 192), the pools, the input and the batch are kept.
- GCN: nothing (hidden 16, the whole graph).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: the harness from this checkout
    sys.path.insert(0, str(REPO))

from harness.config import matrix  # noqa: E402
from harness.config.spec import ModelSpec  # noqa: E402

SHARED_DATA = Path(os.environ.get("HARNESS_SHARED_DATA", REPO.parent / "shared" / "data"))  # as tests/conftest.py
FRAMEWORKS = (("pytorch", "eager"), ("mindspore", "graph"))
# The widths of the docstring, by model (hparams); ResNet50's and GoogLeNet's are module constants (_shrink_modules).
SHRUNK = {"bert": {"hidden": 32, "heads": 2, "layers": 1, "intermediate": 64},
          "gru": {"embedding": 16, "hidden": 32},
          "lstm": {"embedding": 16, "hidden": 16}}
# Hyperparameters that size nothing (rates and schedules): cells differing only in these share a size.
NOT_SIZES = {"lr", "momentum", "weight_decay", "warmup_epochs", "warmup_steps", "adam_beta1", "adam_beta2",
             "adam_eps", "bn_momentum_pt", "bn_eps", "dropout", "clip_norm", "mask_rate"}
RESNET_STAGES, RESNET_STEM = ((4, 1, 1), (8, 1, 2), (16, 1, 2), (32, 1, 2)), 8
GOOGLENET_DIVISOR = 16
# MindSpore keeps a compiled network's memory until its process ends: BERT's head at the profiles' sizes (batch 256 x 20
# predictions x the 30,522-token vocabulary, a 625 MB logits tensor) took 15 GB in GRAPH on the CPU, and a second
# BERT case in the same process was killed for memory. Each case of these models runs in a process of its own.
ALONE = {"bert"}
CACHE_ENV = "HARNESS_TEST_SIZES_CACHE"  # a folder both frameworks' processes share BERT's encoded reviews through


@dataclass(frozen=True)
class Case:
    id: str                 # model[profile,profile]
    model: str
    profiles: tuple[str, ...]
    spec: ModelSpec         # the first profile's settings, widths shrunk


def _size_key(model: str, spec: ModelSpec) -> str:
    hp = {k: v for k, v in spec.to_dict()["hparams"].items() if k not in NOT_SIZES}
    return json.dumps([model, spec.dataset, spec.train_samples, spec.eval_samples, spec.val_samples,
                       spec.evals_per_epoch, hp], sort_keys=True)


def cases(m: matrix.Matrix) -> list[Case]:
    """One case per model and distinct size over every profile's model and scaling cells."""
    found: dict[str, tuple[str, list[str], ModelSpec]] = {}
    for profile in m.profiles:
        for cell in m.expand(profile):
            if cell.kind not in ("model", "scaling"):
                continue
            spec = replace(cell.spec, hparams={**cell.spec.hparams, **SHRUNK.get(cell.model, {})})
            entry = found.setdefault(_size_key(cell.model, spec), (cell.model, [], spec))
            if profile not in entry[1]:
                entry[1].append(profile)
    return [Case(f"{model}[{','.join(profiles)}]", model, tuple(profiles), spec)
            for model, profiles, spec in found.values()]


# ---------------------------------------------------------------------------------------------------------------
# The framework's process: build, one step, evaluate, per case.

_DATA: dict[str, dict] = {}


def _data_folder(dataset: str) -> Path | None:
    from harness import data as datasets

    if not (SHARED_DATA / datasets.module(dataset).FOLDER).is_dir():
        return None
    return datasets.prepare(dataset, SHARED_DATA, allow_download=False)


def _shrink_modules() -> None:
    """ResNet50's and GoogLeNet's widths (the docstring), in every module that holds them, in this process only."""
    import importlib

    from harness.models import googlenet

    inception, cin = [], 192
    for name, _, *widths in googlenet.INCEPTION:
        c1, c3r, c3, c5r, c5, pp = (max(1, w // GOOGLENET_DIVISOR) for w in widths)
        inception.append((name, cin, c1, c3r, c3, c5r, c5, pp))
        cin = c1 + c3 + c5 + pp
    for framework in ("", ".pytorch", ".mindspore"):
        try:
            r = importlib.import_module(f"harness.models.resnet50{framework}")
            g = importlib.import_module(f"harness.models.googlenet{framework}")
        except ImportError:  # the other framework is not installed in this process
            continue
        r.STAGES, r.STEM = RESNET_STAGES, RESNET_STEM
        g.INCEPTION, g.FEATURES = tuple(inception), cin


def _memoise_bert_encoding() -> None:
    """In this process, BERT's WordPiece vocabulary is trained once per (train split, size, min_freq), and a split
    encoded in full is encoded once per vocabulary, its rows then taken in the order a case asks for: the profiles'
    BERT cells share the 30,522-token vocabulary, and a prefix of the seeded order (the accelerator profile's 12,800
    and 1,024 reviews) is rows of the whole split's. The same ids as encoding each case afresh: the vocabulary is the
    same on every run (tests/test_bert.py) and a review's ids do not depend on the others'."""
    from harness.models import bert
    from harness.models.bert import vocab

    trained: dict = {}
    train, encode = vocab.wordpiece, bert.encode_reviews

    def wordpiece(texts, size, min_freq):
        key = (id(texts), size, min_freq)
        if key not in trained:
            trained[key] = (texts, train(texts, size, min_freq))  # the texts kept: their id stays theirs
        return trained[key][1]

    shared = Path(os.environ.get(CACHE_ENV, "")) if os.environ.get(CACHE_ENV) else None

    def cached(data, split, order, hp, max_len) -> Path | None:
        if shared is None:
            return None
        source = next(key for key, loaded in _DATA.items() if loaded is data)  # the dataset and its folder
        name = hashlib.sha256(json.dumps([source, int(hp["vocab"]), int(hp["min_freq"]), max_len, split,
                                          hashlib.sha256(np.asarray(order).tobytes()).hexdigest()]).encode())
        return shared / f"bert-{name.hexdigest()[:24]}.npz"

    def encoded(data, split, order, hp, max_len):
        """(vocabulary, ids) of the reviews at `order`, from an earlier process's encoding of the same reviews (a
        file in the folder CACHE_ENV names: the other framework's, or another case's), else encoded here."""
        path = cached(data, split, order, hp, max_len)
        if path is not None and path.exists():
            with np.load(path) as f:
                return [str(w) for w in f["words"]], f["ids"]
        words, ids = encode(data, {split: order}, hp, max_len)
        if path is not None:
            part = path.with_suffix(f".{os.getpid()}.npz")
            np.savez(part, words=np.array(words), ids=ids[split])
            os.replace(part, path)
        return words, ids[split]

    whole: dict = {}

    def encode_reviews(data, orders, hp, max_len):
        if data.get("synthetic"):
            return encode(data, orders, hp, max_len)
        key = (id(data), int(hp["vocab"]), int(hp["min_freq"]), max_len)
        words, out = None, {}
        for split, order in orders.items():
            every = np.arange(len(data[split]["label"]))
            path = cached(data, split, every, hp, max_len)
            if (key, split) not in whole and (len(order) == len(every) or (path is not None and path.exists())):
                whole[key, split] = (data, *encoded(data, split, every, hp, max_len))
            if (key, split) in whole:
                _, words, ids = whole[key, split]
                out[split] = ids[order]
            else:
                words, out[split] = encoded(data, split, order, hp, max_len)
        return words, out

    vocab.wordpiece, bert.encode_reviews = wordpiece, encode_reviews


def _check_bert(corpus, b: int):
    def check(batch):
        ids, keys, pos, labels, weights = batch
        s, p = corpus.max_len, corpus.max_pred
        assert ids.shape == keys.shape == (b, s), ids.shape
        assert pos.shape == labels.shape == weights.shape == (b * p,), pos.shape
        assert ids.min() >= 0 and ids.max() < corpus.vocab_size and labels.max() < corpus.vocab_size
        assert pos.min() >= 0 and pos.max() < b * s, f"flat positions {pos.min()}..{pos.max()} outside [0, {b * s})"
        real = weights > 0
        assert (pos[real] // s == np.arange(b * p)[real] // p).all(), "a masked position outside its own sequence"
    return check


def _check_lstm(corpus, b: int, max_len: int):
    def check(batch):
        ids, last, y = batch[:3]
        assert ids.shape == (b, max_len) and last.shape == (b,), ids.shape
        assert last.min() >= 0 and last.max() < max_len and ids.max() < len(corpus.vocab)
        if len(batch) == 4:  # evaluation: (ids, last, labels, valid)
            assert 1 <= batch[3] <= b and y.shape == (batch[3],)
        else:
            assert y.shape == (b,)
    return check


def _check_images(b: int, classes: int):
    def check(batch):
        x, y = batch
        assert x.shape == (b, 3, 32, 32), x.shape
        if isinstance(y, int | np.integer):  # evaluation: (x, valid)
            assert 1 <= y <= b
        else:
            assert y.shape == (b,) and y.min() >= 0 and y.max() < classes
    return check


def _last_only(make, check, counts: dict, key: str):
    """A batch generator's stand-in: every batch made and checked, only the last one yielded."""
    def batches(*args, **kwargs):
        last = None
        for batch in make(*args, **kwargs):
            check(batch)
            counts[key] = counts.get(key, 0) + 1
            last = batch
        assert last is not None, f"no {key} batch"
        yield last
    return batches


def _counted(make, check, counts: dict, key: str):
    def batches(*args, **kwargs):
        for batch in make(*args, **kwargs):
            check(batch)
            counts[key] = counts.get(key, 0) + 1
            yield batch
    return batches


def _hook(model: str, workload, module, hp, data: dict, counts: dict) -> dict:
    """Install the checks of the docstring; returns the module attributes replaced (to put back)."""
    if model == "bert":
        c, b = workload.corpus, workload.batch
        c.train_batches = _last_only(c.train_batches, _check_bert(c, b), counts, "train")
        c.eval_batches = _last_only(c.eval_batches, _check_bert(c, b), counts, "eval")
    elif model == "lstm":
        c, b = workload.corpus, workload.batch
        c.train_batches = _last_only(c.train_batches, _check_lstm(c, b, int(hp["max_len"])), counts, "train")
        c.eval_batches = _last_only(c.eval_batches, _check_lstm(c, b, int(hp["max_len"])), counts, "eval")
    elif model == "gru":
        c, b = workload.corpus, workload.batch_size

        def check(idx):
            src, last, tgt_in, tgt_out = c.batch("train", idx, b)
            assert 1 <= len(idx) <= b and src.shape == tgt_in.shape == tgt_out.shape and src.shape[0] == b
            assert src.shape[1] in c.widths and last.max() < src.shape[1], (src.shape, c.widths)

        make = c.epoch_part
        c.epoch_part = lambda *a: list(_last_only(lambda *a: iter(make(*a)), check, counts, "train")(*a))
        saved = {"greedy_decode": module.greedy_decode}
        module.greedy_decode = _decode_last_in_full(module.greedy_decode, counts)
        return saved
    elif model in ("resnet50", "googlenet"):
        check = _check_images(int(hp["batch"]), data["num_classes"])
        saved = {name: getattr(module, name) for name in ("epoch_batches", "eval_batches", "accuracy")}
        module.epoch_batches = _last_only(saved["epoch_batches"], check, counts, "train")
        module.eval_batches = _last_only(saved["eval_batches"], check, counts, "eval")
        # The predictions are the last batch's only: compared with the last of the evaluated labels.
        module.accuracy = lambda pred, labels: saved["accuracy"](pred, labels[len(labels) - len(pred):])
        return saved
    return {}


def _decode_last_in_full(greedy_decode, counts: dict):
    """The GRU's greedy decoding with every batch encoded and checked, the last one decoded in full and the others
    ended after their first step (their decoder's logits given <eos> as the argmax)."""
    from harness.models.gru import EOS

    def decode(corpus, split, batch, encode_fn, step_fn):
        n_batches = -(-len(corpus.refs[split]) // batch)
        seen = [0]

        def encode(src, last):
            assert src.shape == (batch, corpus.T) and last.shape == (batch,), src.shape
            assert last.min() >= 0 and last.max() < corpus.T and src.max() < len(corpus.src_vocab)
            seen[0] += 1
            counts["eval"] = counts.get("eval", 0) + 1
            return encode_fn(src, last)

        def step(tokens, state):
            logits, state = step_fn(tokens, state)
            assert logits.shape == (batch, len(corpus.tgt_vocab)), logits.shape
            if seen[0] < n_batches:
                logits = np.array(logits, copy=True)
                logits[:, EOS] = np.inf
            return logits, state

        hyps = greedy_decode(corpus, split, batch, encode, step)
        assert seen[0] == n_batches and len(hyps) == len(corpus.refs[split])
        return hyps
    return decode


def run_case(case: Case, framework: str, mode: str, seed: int) -> dict:
    from harness import data as datasets
    from harness.config.cell import Cell
    from harness.launch.inprocess import set_up
    from harness.models import model_module
    from harness.scenarios import training

    cell = Cell(id=f"sizes/{case.id}", kind="model", model=case.model, framework=framework, mode=mode, amp="off",
                devices=1, repeats=1, timeout_s=0, seed=seed, spec=case.spec)
    t_start = time.perf_counter()
    folder = _data_folder(case.spec.dataset)
    s = set_up(cell, str(folder) if folder else None, until="backend")
    key = f"{case.spec.dataset}:{folder}"
    if key not in _DATA:
        _DATA[key] = datasets.for_context(s.ctx)
    s.data = _DATA[key]
    t0 = time.perf_counter()
    workload = s.build()
    t1 = time.perf_counter()
    module = model_module(case.model, framework)
    counts: dict = {}
    saved = _hook(case.model, workload, module, s.ctx.hparams, s.data, counts)
    try:
        loss, _ = training._trainer(workload, cell, case.spec.evals_per_epoch)(0, case.spec.evals_per_epoch)
        assert math.isfinite(loss), f"training loss {loss}"
        t2 = time.perf_counter()
        metrics = {split: workload.evaluate(split) for split in ("val", "test")}
        t3 = time.perf_counter()
    finally:
        for name, value in saved.items():
            setattr(module, name, value)
    assert all(math.isfinite(v) for v in metrics.values()), metrics
    return {"loss": loss, "metrics": metrics, "batches": counts, "real_data": folder is not None,
            "times": {"data": round(t0 - t_start, 2), "build": round(t1 - t0, 2), "step": round(t2 - t1, 2),
                      "evaluate": round(t3 - t2, 2)}}


def main(framework: str, mode: str, out: str, *ids: str) -> None:
    _shrink_modules()
    _memoise_bert_encoding()
    seed = int(matrix.load().data["defaults"]["seed"])
    results = json.loads(Path(out).read_text()) if Path(out).exists() else {}
    for case in sorted((c for c in CASES if c.id in ids), key=lambda c: c.spec.train_samples is not None):
        t = time.perf_counter()
        try:
            results[case.id] = {"ok": True, **run_case(case, framework, mode, seed)}
        except Exception as e:  # noqa: BLE001 - recorded per case; the other cases still run
            results[case.id] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000],
                                "traceback": traceback.format_exc()[-4000:]}
        results[case.id]["seconds"] = round(time.perf_counter() - t, 2)
        Path(out).write_text(json.dumps(results, indent=1))


# ---------------------------------------------------------------------------------------------------------------
# The tests.

CASES = cases(matrix.load())


def _network_key(case: Case) -> str:
    """The case's network and batch shapes, without its dataset sizes (which only set how many batches there are)."""
    hp = {k: v for k, v in case.spec.to_dict()["hparams"].items() if k not in NOT_SIZES}
    return json.dumps([case.model, case.spec.dataset, hp], sort_keys=True)


# What each framework's process runs, for the suite's time (this file costs minutes of CPU on 2 cores): PyTorch every
# case. MindSpore GRAPH the models whose data feed indices into the network itself (BERT's masked positions and token
# ids, the LSTM's last-token index, the GRU's token ids and decoding), one case per network shape: a case that differs
# from another only in its dataset sizes has its batches' index arithmetic checked, for every batch, by the
# framework-neutral corpus both frameworks share (harness/models/<model>/__init__.py), which PyTorch's process runs.
# ResNet50's, GoogLeNet's and GCN's MindSpore networks take images or the whole graph: their shapes are the batch's,
# which PyTorch's process checks at every profile's size and the equivalence tests build in MindSpore.
MS_INDEXED = {"bert", "lstm", "gru"}


def planned(framework: str) -> list[Case]:
    if framework == "pytorch":
        return list(CASES)
    seen: set[str] = set()
    out = []
    for c in sorted(CASES, key=lambda c: c.spec.train_samples is None):   # a slice before a whole split: cheaper
        if c.model in MS_INDEXED and _network_key(c) not in seen:
            seen.add(_network_key(c))
            out.append(c)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Both frameworks' processes, side by side (the 2-core machine runs one of each at a time)."""
    from concurrent.futures import ThreadPoolExecutor

    from harness.frameworks import backend

    folder = tmp_path_factory.mktemp("sizes")
    def run(framework: str, mode: str) -> dict:
        # The cases of a model in ALONE each in a process of their own, the others together, one after the other.
        # Whole splits first: a later process takes its reviews' encoding from theirs (_memoise_bert_encoding).
        mine = planned(framework)
        alone = sorted((c for c in mine if c.model in ALONE), key=lambda c: c.spec.train_samples is not None)
        groups = [[c.id for c in mine if c.model not in ALONE]] + [[c.id] for c in alone]
        out, log = folder / f"{framework}.json", folder / f"{framework}.log"
        env = {**os.environ, **backend(framework).process_env("cpu"), "PYTHONPATH": str(REPO), CACHE_ENV: str(folder)}
        rcs = []
        for ids in groups:
            if not ids:
                continue
            with open(log, "a") as f:
                rcs.append(subprocess.run([sys.executable, __file__, framework, mode, str(out), *ids], stdout=f,
                                          stderr=subprocess.STDOUT, env=env, cwd=folder, timeout=900).returncode)
        results = json.loads(out.read_text()) if out.exists() else {}
        return {**results, "_rc": rcs, "_log": log.read_text()[-3000:]}

    with ThreadPoolExecutor(len(FRAMEWORKS)) as pool:
        futures = {framework: pool.submit(run, framework, mode) for framework, mode in FRAMEWORKS}
        return {framework: future.result() for framework, future in futures.items()}


def test_every_profile_has_its_model_sizes_covered():
    m = matrix.load()
    covered = {(p, c.model) for c in CASES for p in c.profiles}
    for profile in m.profiles:
        cells = {(profile, c.model) for c in m.expand(profile) if c.kind in ("model", "scaling")}
        assert cells <= covered, sorted(cells - covered)
    assert {p for c in CASES for p in c.profiles} == {p for p in m.profiles if m.profile(p).get("models")}


PAIRS = [(f, c) for f, _ in FRAMEWORKS for c in planned(f)]


def test_every_mindspore_network_shape_of_an_indexed_model_is_run():
    shapes = {_network_key(c) for c in CASES if c.model in MS_INDEXED}
    assert {_network_key(c) for c in planned("mindspore")} == shapes and len(planned("pytorch")) == len(CASES)


@pytest.mark.parametrize(("framework", "case"), PAIRS, ids=[f"{c.id}-{f}" for f, c in PAIRS])
def test_one_step_and_the_evaluation_at_the_profiles_sizes(runs, framework, case):
    got = runs[framework].get(case.id)
    assert got is not None, f"{framework}'s process ended before {case.id} (exit {runs[framework]['_rc']}):\n" \
                            f"{runs[framework]['_log']}"
    assert got["ok"], f"{framework} {case.id}: {got['error']}\n{got['traceback']}"
    if case.model in ("bert", "lstm"):  # the evaluation's batches were all made, the network ran on the last
        assert got["batches"]["eval"] >= 1


if __name__ == "__main__":
    main(*sys.argv[1:])

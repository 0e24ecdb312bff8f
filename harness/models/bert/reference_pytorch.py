"""BERT masked-LM pre-training reference loop in PyTorch, written with PyTorch's own transformer blocks: nn.Embedding,
nn.TransformerEncoder of nn.TransformerEncoderLayer (post-LayerNorm, GELU, batch first, padding keys masked with
src_key_padding_mask), an MLM head whose decoder nn.Linear shares the word embedding's weight, nn.CrossEntropyLoss
per token weighted by the mask weights, torch.optim.AdamW with parameter groups as Hugging Face's run_mlm.py makes
them (no decay on biases and LayerNorm weights), LambdaLR, and the standard loop (zero_grad(set_to_none=True),
forward, loss.backward(), optimizer.step(), scheduler.step()).

Same as the harness cell: the shared initial weights (harness.models.bert.init_weights, loaded into the blocks' own
layout: query, key and value packed into in_proj_weight), the sequences, masks and batches in the harness's order
(harness.models.bert.Corpus), the hyperparameters and the schedule (harness.models.bert.lr_factor).

AMP: torch.autocast("cpu", bfloat16) around the forward pass; the loss in fp32; no GradScaler on CPU. Given a CUDA
device, PyTorch's documented GPU way: a DataLoader worker building batches ahead into pinned memory, non_blocking
copies, the fused AdamW, torch.autocast("cuda", float16) with a GradScaler, the losses kept on the device until the
epoch's end.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from harness.models._reference_pytorch import amp_tools, gpu_batches
from harness.models.bert import Corpus, init_weights, lr_factor, steps_total


class BertForMaskedLM(nn.Module):
    def __init__(self, w: dict, hp: dict):
        super().__init__()
        vocab, h = w["embeddings.word.weight"].shape
        self.word, self.position, self.token_type = (nn.Embedding(*w[f"embeddings.{k}.weight"].shape)
                                                     for k in ("word", "position", "token_type"))
        self.norm = nn.LayerNorm(h, eps=1e-12)
        self.dropout = nn.Dropout(hp["dropout"])
        layer = nn.TransformerEncoderLayer(h, hp["heads"], hp["intermediate"], hp["dropout"], activation="gelu",
                                           layer_norm_eps=1e-12, batch_first=True, norm_first=False)
        self.encoder = nn.TransformerEncoder(layer, hp["layers"], enable_nested_tensor=False)
        self.transform = nn.Sequential(OrderedDict(dense=nn.Linear(h, h), act=nn.GELU(),
                                                   norm=nn.LayerNorm(h, eps=1e-12)))
        self.decoder = nn.Linear(h, vocab)
        self.decoder.weight = self.word.weight  # tied
        self._load(w, hp["layers"])

    def _load(self, w: dict, layers: int) -> None:
        t = {k: torch.from_numpy(v) for k, v in w.items()}
        state = {"word.weight": t["embeddings.word.weight"], "position.weight": t["embeddings.position.weight"],
                 "token_type.weight": t["embeddings.token_type.weight"], "norm.weight": t["embeddings.norm.weight"],
                 "norm.bias": t["embeddings.norm.bias"], "transform.dense.weight": t["head.dense.weight"],
                 "transform.dense.bias": t["head.dense.bias"], "transform.norm.weight": t["head.norm.weight"],
                 "transform.norm.bias": t["head.norm.bias"], "decoder.weight": t["embeddings.word.weight"],
                 "decoder.bias": t["head.bias"]}
        for i in range(layers):
            src, dst = f"layers.{i}", f"encoder.layers.{i}"
            for kind in ("weight", "bias"):
                state[f"{dst}.self_attn.in_proj_{kind}"] = torch.cat(
                    [t[f"{src}.attention.{n}.{kind}"] for n in ("query", "key", "value")])
                for a, b in (("self_attn.out_proj", "attention.out"), ("linear1", "up"), ("linear2", "down"),
                             ("norm1", "attention_norm"), ("norm2", "output_norm")):
                    state[f"{dst}.{a}.{kind}"] = t[f"{src}.{b}.{kind}"]
        self.load_state_dict(state)

    def forward(self, ids, keys, positions):
        pos = torch.arange(ids.size(1), device=ids.device)
        x = self.dropout(self.norm(self.word(ids) + self.position(pos) + self.token_type(torch.zeros_like(ids))))
        x = self.encoder(x, src_key_padding_mask=keys == 0)
        return self.decoder(self.transform(x.reshape(-1, x.size(-1))[positions]))


class Reference:
    def __init__(self, data: dict, hp: dict, spec, seed: int, amp: str, device="cpu"):
        self.device = torch.device(device)
        self.corpus = Corpus(data, hp, spec, seed)
        self.batch = int(hp["batch"])
        self.samples_per_epoch = self.corpus.n_train // self.batch * self.batch
        self.model = BertForMaskedLM(init_weights(seed, self.corpus.vocab_size, hp), hp).to(self.device)
        no_decay = ("bias", "norm")  # every LayerNorm's name here has "norm" in it (norm, norm1, norm2, transform.norm)
        params = list(self.model.named_parameters())
        groups = [{"params": [p for n, p in params if not any(k in n for k in no_decay)],
                   "weight_decay": hp["weight_decay"]},
                  {"params": [p for n, p in params if any(k in n for k in no_decay)], "weight_decay": 0.0}]
        self.optimizer = torch.optim.AdamW(groups, lr=hp["lr"], betas=(hp["adam_beta1"], hp["adam_beta2"]), eps=1e-6,
                                           **({"fused": True} if self.device.type == "cuda" else {}))
        total = steps_total(self.corpus, hp, spec)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer,
                                                           lambda s: lr_factor(s, hp["warmup_steps"], total))
        self.criterion = nn.CrossEntropyLoss(reduction="none")
        self.amp = amp != "off"
        self.autocast, self.scaler = amp_tools(self.device, self.amp)

    def train_epoch(self, epoch: int) -> float:
        self.model.train()
        losses = []
        for batch in gpu_batches(self.device, self.corpus.train_batches(self.batch, epoch)):
            ids, keys, positions, labels, weights = (torch.as_tensor(a).to(self.device, non_blocking=True)
                                                     for a in batch)
            self.optimizer.zero_grad(set_to_none=True)
            with self.autocast:
                logits = self.model(ids.long(), keys, positions.long())
            loss = (self.criterion(logits.float(), labels.long()) * weights).sum() / (weights.sum() + 1e-5)
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.scheduler.step()
            losses.append(loss.detach())
        return torch.stack(losses).mean().item()


def build(data: dict, hp: dict, spec, seed: int, amp: str, device="cpu") -> Reference:
    return Reference(data, hp, spec, seed, amp, device)

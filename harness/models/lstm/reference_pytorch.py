"""LSTM sentiment classifier reference loop in PyTorch, written as PyTorch's text-classification tutorials write
it: an nn.Module with nn.Embedding, nn.LSTM(batch_first=True) and an nn.Linear over the output at each review's
last real token; nn.CrossEntropyLoss, torch.optim.Adam and the standard loop (zero_grad(set_to_none=True),
forward, loss.backward(), optimizer.step()).

Same as the harness cell: the shared initial weights (harness.models.lstm.init_weights), the reviews, vocabulary
and batches in the harness's order (harness.models.lstm.Corpus), the hyperparameters.

AMP: torch.autocast("cpu", bfloat16) around the forward pass; the loss in fp32; no GradScaler on CPU.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from harness.models.lstm import Corpus, init_weights


class SentimentLSTM(nn.Module):
    def __init__(self, w: dict, layers: int):
        super().__init__()
        vocab, emb = w["embedding.weight"].shape
        hidden = w["lstm.weight_hh_l0"].shape[1]
        self.embedding = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, num_layers=layers, batch_first=True)
        self.fc = nn.Linear(hidden, w["fc.weight"].shape[0])
        self.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()})

    def forward(self, ids, last):
        output, _ = self.lstm(self.embedding(ids))
        return self.fc(output[torch.arange(ids.size(0)), last])


class Reference:
    def __init__(self, data: dict, hp: dict, spec: dict, seed: int, amp: str):
        self.corpus = Corpus(data, hp, spec, seed)
        self.batch, self.seed = int(hp["batch"]), seed
        self.samples_per_epoch = self.corpus.n_train // self.batch * self.batch
        w = init_weights(seed, len(self.corpus.vocab), hp["embedding"], hp["hidden"], hp["layers"])
        self.model = SentimentLSTM(w, hp["layers"])
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=hp["lr"],
                                          betas=(hp["adam_beta1"], hp["adam_beta2"]), eps=hp["adam_eps"])
        self.amp = amp != "off"

    def train_epoch(self, epoch: int) -> float:
        self.model.train()
        total, steps = 0.0, 0
        for ids, last, label in self.corpus.train_batches(self.batch, self.seed, epoch):
            ids, last, label = (torch.from_numpy(a).long() for a in (ids, last, label))
            self.optimizer.zero_grad(set_to_none=True)
            autocast = torch.autocast("cpu", dtype=torch.bfloat16) if self.amp else contextlib.nullcontext()
            with autocast:
                logits = self.model(ids, last)
            loss = self.criterion(logits.float(), label)
            loss.backward()
            self.optimizer.step()
            total += loss.item()
            steps += 1
        return total / steps


def build(data: dict, hp: dict, spec: dict, seed: int, amp: str) -> Reference:
    return Reference(data, hp, spec, seed, amp)

"""LSTM sentiment classifier reference loop in PyTorch, written as PyTorch's text-classification tutorials write
it: an nn.Module with nn.Embedding, nn.LSTM(batch_first=True) and an nn.Linear over the output at each review's
last real token; nn.CrossEntropyLoss, torch.optim.Adam and the standard loop (zero_grad(set_to_none=True),
forward, loss.backward(), optimizer.step()).

Same as the harness cell: the shared initial weights (harness.models.lstm.init_weights), the reviews, vocabulary
and batches in the harness's order (harness.models.lstm.Corpus), the hyperparameters.

AMP: torch.autocast("cpu", bfloat16) around the forward pass; the loss in fp32; no GradScaler on CPU. Given a CUDA
device, PyTorch's documented GPU way: a DataLoader worker building batches ahead into pinned memory, non_blocking
copies, the fused Adam, torch.autocast("cuda", float16) with a GradScaler, the losses kept on the device.
"""

from __future__ import annotations

import torch
from torch import nn

from harness.models._reference_pytorch import amp_tools, gpu_batches
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
        return self.fc(output[torch.arange(ids.size(0), device=ids.device), last])


class Reference:
    def __init__(self, data: dict, hp: dict, spec: dict, seed: int, amp: str, device="cpu"):
        self.device = torch.device(device)
        self.corpus = Corpus(data, hp, spec, seed)
        self.batch, self.seed = int(hp["batch"]), seed
        self.samples_per_epoch = self.corpus.n_train // self.batch * self.batch
        w = init_weights(seed, len(self.corpus.vocab), hp["embedding"], hp["hidden"], hp["layers"])
        self.model = SentimentLSTM(w, hp["layers"]).to(self.device)
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=hp["lr"],
                                          betas=(hp["adam_beta1"], hp["adam_beta2"]), eps=hp["adam_eps"],
                                          **({"fused": True} if self.device.type == "cuda" else {}))
        self.amp = amp != "off"
        self.autocast, self.scaler = amp_tools(self.device, self.amp)

    def train_epoch(self, epoch: int) -> float:
        self.model.train()
        losses = []
        for batch in gpu_batches(self.device, self.corpus.train_batches(self.batch, self.seed, epoch)):
            ids, last, label = (torch.as_tensor(a).long().to(self.device, non_blocking=True) for a in batch)
            self.optimizer.zero_grad(set_to_none=True)
            with self.autocast:
                logits = self.model(ids, last)
            loss = self.criterion(logits.float(), label)
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
            losses.append(loss.detach())
        return torch.stack(losses).mean().item()


def build(data: dict, hp: dict, spec: dict, seed: int, amp: str, device="cpu") -> Reference:
    return Reference(data, hp, spec, seed, amp, device)

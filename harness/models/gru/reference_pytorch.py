"""GRU encoder-decoder reference loop in PyTorch, written as PyTorch's seq2seq tutorial writes it (an Encoder
and a Decoder module, each nn.Embedding + nn.GRU(batch_first=True), the decoder's nn.Linear over its outputs,
teacher forcing), trained with the standard loop: zero_grad(set_to_none=True), forward, nn.CrossEntropyLoss
(ignore_index=<pad>), loss.backward(), torch.nn.utils.clip_grad_norm_, optimizer.step().

Same as the harness cell: the shared initial weights, the decoder started from the encoder's state at each row's
source <eos>, and the epoch's batches in the harness's order (harness.models.gru.Corpus).

AMP: torch.autocast("cpu", bfloat16) around the forward pass and loss; no GradScaler on CPU (bf16 needs none).
Given a CUDA device, PyTorch's documented GPU way: a DataLoader worker building batches ahead into pinned memory,
non_blocking copies, the fused Adam, torch.autocast("cuda", float16) with a GradScaler (unscale_ before clipping),
and the losses kept on the device until the epoch's end.
"""

from __future__ import annotations

import torch
from torch import nn

from harness.models._reference_pytorch import amp_tools, gpu_batches
from harness.models.gru import PAD, Corpus, init_weights


def _load_gru(gru: nn.GRU, w: dict, prefix: str) -> None:
    with torch.no_grad():
        gru.weight_ih_l0.copy_(torch.from_numpy(w[f"{prefix}_w_ih"]))
        gru.weight_hh_l0.copy_(torch.from_numpy(w[f"{prefix}_w_hh"]))
        gru.bias_ih_l0.copy_(torch.from_numpy(w[f"{prefix}_b_ih"]))
        gru.bias_hh_l0.copy_(torch.from_numpy(w[f"{prefix}_b_hh"]))


class Encoder(nn.Module):
    def __init__(self, w: dict, emb: int, hidden: int):
        super().__init__()
        self.embedding = nn.Embedding(w["enc_emb"].shape[0], emb)
        self.gru = nn.GRU(emb, hidden, batch_first=True)
        with torch.no_grad():
            self.embedding.weight.copy_(torch.from_numpy(w["enc_emb"]))
        _load_gru(self.gru, w, "enc")

    def forward(self, src, last):
        output, _ = self.gru(self.embedding(src))
        # (1, B, H): the state at each <eos>
        return output[torch.arange(src.size(0), device=src.device), last].unsqueeze(0)


class Decoder(nn.Module):
    def __init__(self, w: dict, emb: int, hidden: int):
        super().__init__()
        self.embedding = nn.Embedding(w["dec_emb"].shape[0], emb)
        self.gru = nn.GRU(emb, hidden, batch_first=True)
        self.out = nn.Linear(hidden, w["dec_emb"].shape[0])
        with torch.no_grad():
            self.embedding.weight.copy_(torch.from_numpy(w["dec_emb"]))
            self.out.weight.copy_(torch.from_numpy(w["out_w"]))
            self.out.bias.copy_(torch.from_numpy(w["out_b"]))
        _load_gru(self.gru, w, "dec")

    def forward(self, tgt_in, hidden):
        embedded = self.embedding(tgt_in)
        output, hidden = self.gru(embedded, hidden.to(embedded.dtype))
        return self.out(output), hidden


class Seq2Seq(nn.Module):
    def __init__(self, w: dict, emb: int, hidden: int):
        super().__init__()
        self.encoder = Encoder(w, emb, hidden)
        self.decoder = Decoder(w, emb, hidden)

    def forward(self, src, last, tgt_in):
        logits, _ = self.decoder(tgt_in, self.encoder(src, last))
        return logits


class Reference:
    def __init__(self, data: dict, hp: dict, spec: dict, seed: int, amp: str, device="cpu"):
        self.device = torch.device(device)
        self.corpus = Corpus(data, hp, spec)
        self.samples_per_epoch = self.corpus.n_train
        self.batch_size, self.seed, self.clip = hp["batch"], seed, hp["clip_norm"]
        w = init_weights(seed, len(self.corpus.src_vocab), len(self.corpus.tgt_vocab), hp["embedding"], hp["hidden"])
        self.model = Seq2Seq(w, hp["embedding"], hp["hidden"]).to(self.device)
        self.criterion = nn.CrossEntropyLoss(ignore_index=PAD)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=hp["lr"],
                                          betas=(hp["adam_beta1"], hp["adam_beta2"]), eps=hp["adam_eps"],
                                          **({"fused": True} if self.device.type == "cuda" else {}))
        self.amp = amp != "off"
        self.autocast, self.scaler = amp_tools(self.device, self.amp)

    def train_epoch(self, epoch: int) -> float:
        self.model.train()
        losses = []
        batches = (self.corpus.batch("train", idx, self.batch_size)
                   for idx in self.corpus.epoch_batches(self.batch_size, self.seed, epoch))
        for batch in gpu_batches(self.device, batches):
            src, last, tgt_in, tgt_out = (torch.as_tensor(a).long().to(self.device, non_blocking=True)
                                          for a in batch)
            self.optimizer.zero_grad(set_to_none=True)
            with self.autocast:
                logits = self.model(src, last, tgt_in)
                loss = self.criterion(logits.reshape(-1, logits.size(-1)).float(), tgt_out.reshape(-1))
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
            self.scaler.step(self.optimizer)
            self.scaler.update()
            losses.append(loss.detach())
        return torch.stack(losses).mean().item()


def build(data: dict, hp: dict, spec: dict, seed: int, amp: str, device="cpu") -> Reference:
    return Reference(data, hp, spec, seed, amp, device)

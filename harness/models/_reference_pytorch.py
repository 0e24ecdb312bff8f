"""PyTorch's documented way of feeding and mixed-precision training, for the reference loops
(harness/models/<model>/reference_pytorch.py) only: the harness's own workloads never import it
(harness.conformance checks), so a reference loop shares no code with the cell it is compared with, and the loops
share this recipe instead of repeating it."""

from __future__ import annotations

import torch


class _Batches(torch.utils.data.IterableDataset):
    def __init__(self, batches):
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)


def gpu_batches(device: torch.device, batches):
    """The batches as a loop on `device` reads them: on CPU the generator itself; on a GPU through PyTorch's
    documented input pipeline, a DataLoader whose worker process runs the generator ahead (one worker: the order
    stays the generator's) with pin_memory=True, so that .to(device, non_blocking=True) copies without waiting."""
    if device.type == "cpu":
        return batches
    return torch.utils.data.DataLoader(_Batches(batches), batch_size=None, num_workers=1, pin_memory=True,
                                       prefetch_factor=4, multiprocessing_context="fork")


def amp_tools(device: torch.device, amp: bool):
    """(autocast, GradScaler) as PyTorch's AMP recipe writes them: bf16 without loss scaling on CPU, fp16 with a
    GradScaler on a GPU."""
    cpu = device.type == "cpu"
    autocast = torch.autocast(device.type, dtype=torch.bfloat16 if cpu else torch.float16, enabled=amp)
    return autocast, torch.amp.GradScaler(device.type, enabled=amp and not cpu)

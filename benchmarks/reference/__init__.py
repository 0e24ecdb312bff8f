"""Reference training loops: each model written the way its framework's own documentation and model zoo write it,
independent of the harness's model and back-end code (harness/models/*/<fw>.py, harness/frameworks/*), so that
benchmarks/reference_gap.py can tell how close each harness workload runs to its framework's recommended loop.

What a reference shares with the harness, on purpose, is only what makes the comparison fair and is
framework-neutral numpy: the initial weights (harness.models.<model>.init_weights), the data and its batches in
order (the dataset modules and epoch batch generators) and the hyperparameters (the matrix). The network, the
loss, the optimiser and the training loop are written here again, in each framework's own idiom:

- MindSpore: nn.Cell networks, nn.WithLossCell / a loss Cell, nn.TrainOneStepCell (ms.amp.build_train_network
  for AMP), Tensors fed per step; GRAPH or PYNATIVE as set in the context.
- PyTorch: nn.Module networks, the standard loop (zero_grad(set_to_none=True), forward, loss.backward(),
  optimizer.step()), torch.autocast for AMP.

Contract, one module per model x framework (`<model>_<framework>.py`):

    build(data: dict, hp: Mapping, spec: ModelSpec, seed: int, amp: str) -> reference
        data: the dataset module's load()/synthetic() dict; hp: the cell's hyperparameters (read-only); spec: the
        cell's harness.spec.ModelSpec (epochs, train_samples, ...); amp: "off" or the cell's AMP level. The
        framework's context (mode, device, threads) is already set by the caller.
    reference.samples_per_epoch: int
    reference.train_epoch(epoch: int) -> float     one epoch on the same batches as the harness's epoch `epoch`;
                                                    returns the mean loss as a Python float (waits for the device)
"""

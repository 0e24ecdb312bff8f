"""What every MindSpore model file builds its workload with: the AMP copy of a network (amp_network), the training
step (make_train_step, with loss scaling from loss_scaler) and dataset sinking (dataset_sink, SunkEpochs). Kept beside
the models, not in the back-end (harness/frameworks/mindspore.py), which holds only what contracts.Backend names; the
inference file uses amp_network too."""

from __future__ import annotations


def amp_network(ctx, net):
    """Cast a network for the cell's AMP level (O2: fp16 but BatchNorm and loss in fp32; O3: all fp16).
    Returns the network unchanged with AMP off."""
    if ctx.cell.amp == "off":
        return net
    import mindspore as ms

    return ms.amp.auto_mixed_precision(net, ctx.cell.amp)


def loss_scaler(ctx):
    """Dynamic loss scaling for fp16 on GPU/Ascend; None with AMP off and on CPU, where MindSpore's
    O2/O3 train only without a loss-scale manager."""
    if ctx.cell.amp == "off" or ctx.platform == "cpu":
        return None
    import mindspore as ms

    return ms.amp.DynamicLossScaler(scale_value=2.0**16, scale_factor=2, scale_window=1000)


def make_train_step(ctx, loss_fn, optimizer, clip_norm: float | None = None, accumulation_steps: int = 1):
    """The one training step every MindSpore model uses: gradients of `loss_fn(*inputs)` w.r.t. the
    optimiser's parameters, optional global-norm clipping (PyTorch's formula), dynamic loss scaling where
    loss_scaler(ctx) gives one (fp16 on GPU/Ascend; the update is skipped on overflow, as GradScaler does), and
    `ops.depend(loss, update)` so that reading the loss back waits for the update, also in PYNATIVE
    mode where ops are dispatched asynchronously. With several ranks (msrun) the gradients are averaged over
    them before the update. With `accumulation_steps` above 1 it is an Accumulating step instead, called with the
    batch's micro-batches (see there).

    The step is an nn.Cell built as MindSpore's own nn.TrainOneStepCell / TrainOneStepWithLossScaleCell are
    (GradOperation with a sensitivity, the loss scale; the network set to record its forward for the gradient),
    which GRAPH mode compiles whole. Measured side by side with TrainOneStepCell on the 2-core machine
    (ResNet50, batch 32, fp32), the step it replaced, an `ms.jit`-decorated function of `value_and_grad`, ran at
    0.53-0.68 of it in GRAPH mode and the plain function at 0.86-0.92 in PYNATIVE; this cell runs level with it in
    both (benchmarks/reference_gap.py)."""
    import mindspore as ms
    from mindspore import nn, ops

    scaler = loss_scaler(ctx)
    reducer = (nn.DistributedGradReducer(optimizer.parameters, mean=True, degree=ctx.world_size)
               if ctx.world_size > 1 else None)

    def clip(grads):
        """torch.nn.utils.clip_grad_norm_'s formula, g * min(1, clip / (global_norm + 1e-6)), so both
        frameworks clip alike (ops.clip_by_global_norm computes g * clip / max(global_norm, clip))."""
        norm = ops.sqrt(ops.addn([ops.square(g.astype(ms.float32)).sum() for g in grads]))
        coef = ops.clamp(clip_norm / (norm + 1e-6), max=1.0)
        return tuple([(g * coef).astype(g.dtype) for g in grads])

    def update(loss, grads):
        """Average over ranks, unscale, clip, and apply unless a scaled gradient overflowed."""
        if reducer is not None:
            grads = reducer(grads)
        if scaler is not None:
            grads = scaler.unscale(grads)
        if clip_norm is not None:
            grads = clip(grads)
        if scaler is None:
            return ops.depend(loss, optimizer(grads))
        finite = ms.amp.all_finite(grads)
        scaler.adjust(finite)
        if finite:
            loss = ops.depend(loss, optimizer(grads))
        return loss

    class TrainStep(nn.Cell):
        def __init__(self):
            super().__init__(auto_prefix=False)  # parameter names stay the network's
            self.network, self.weights, self.optimizer = loss_fn, optimizer.parameters, optimizer
            self.grad = ops.GradOperation(get_by_list=True, sens_param=True)
            # PYNATIVE: the forward below records what the gradient needs, so it is not run a second time
            # (as nn.TrainOneStepCell does; without it the step ran at 0.76 of TrainOneStepCell).
            self.network.set_grad()

        def construct(self, *inputs):
            loss = self.network(*inputs)
            sens = ops.fill(loss.dtype, loss.shape, scaler.scale_value if scaler is not None else 1.0)
            return update(loss, self.grad(self.network, self.weights)(*inputs, sens))

    if accumulation_steps > 1:
        return Accumulating(loss_fn, optimizer, scaler, update)
    step = TrainStep()
    step.set_train(True)
    return step


class Accumulating:
    """A training step over micro-batches (gradient accumulation), as MindSpore's tutorial on it does: gradients
    summed into Parameters of the parameters' shapes (ops.assign_add through HyperMap), then one optimiser call on the
    sums and the sums set to zero. Called with contracts.AccumulatingModel's micro_batches as tensors,
    [(tensors, share)]: each micro-batch's forward and backward (a cell, which GRAPH mode compiles once) with the
    sensitivity share x the loss scale, so its gradients are those of its loss times its share; then one update
    (a second cell): unscale the sums, clip, skip on an overflow in any micro-batch and adjust the loss scale once a
    step, as make_train_step's update. Returns the batch's loss: the micro-batches' losses times their shares."""

    def __init__(self, loss_fn, optimizer, scaler, update):
        import mindspore as ms
        from mindspore import nn, ops

        sums = optimizer.parameters.clone(prefix="accumulated", init="zeros")

        class MicroStep(nn.Cell):
            def __init__(self):
                super().__init__(auto_prefix=False)
                self.network, self.weights, self.sums = loss_fn, optimizer.parameters, sums
                self.grad = ops.GradOperation(get_by_list=True, sens_param=True)
                self.hyper_map = ops.HyperMap()
                self.network.set_grad()

            def construct(self, share, *inputs):
                loss = self.network(*inputs)
                sens = ops.fill(loss.dtype, loss.shape, scaler.scale_value if scaler is not None else 1.0) * share
                grads = self.grad(self.network, self.weights)(*inputs, sens)
                return ops.depend(loss, self.hyper_map(ops.partial(ops.assign_add), self.sums, grads))

        class Apply(nn.Cell):
            def __init__(self):
                super().__init__(auto_prefix=False)
                self.optimizer, self.sums, self.hyper_map = optimizer, sums, ops.HyperMap()

            def construct(self, loss):
                loss = update(loss, self.sums)
                # After the update in program order, which MindSpore keeps for side effects (auto-monad).
                return ops.depend(loss, self.hyper_map(ops.partial(ops.assign), self.sums,
                                                       self.hyper_map(ops.zeros_like, self.sums)))

        self.micro, self.apply, self.float32 = MicroStep(), Apply(), ms.float32
        self.micro.set_train(True)
        self.apply.set_train(True)

    def __call__(self, parts):
        import numpy as np
        from mindspore import Tensor

        total = None
        for tensors, share in parts:
            weight = Tensor(np.float32(share))
            loss = self.micro(weight, *tensors) * weight
            total = loss if total is None else total + loss
        return self.apply(total)


def dataset_sink(ctx, fixed_shapes: bool) -> tuple[bool, str]:
    """Whether a model feeds its batches by dataset sinking (the host pipeline runs ahead of the device and a
    whole epoch runs as one device loop), which a MindSpore user tuning for speed turns on in GRAPH mode on
    Ascend and GPU. Returns (on, why) and records both in the cell's settings."""
    if ctx.cell.mode != "graph":
        on, why = False, "PYNATIVE mode: sinking needs GRAPH mode"
    elif ctx.platform == "cpu":
        on, why = False, "CPU: mindspore.data_sink supports Ascend and GPU only"
    elif not fixed_shapes:
        on, why = False, "batches vary in shape, a sunk graph needs fixed shapes"
    else:
        on, why = True, "GRAPH mode on Ascend/GPU, fixed batch shapes"
    ctx.settings["dataset_sink"] = on
    ctx.settings["dataset_sink_why"] = why
    return on, why


class SunkEpochs:
    """One epoch per call through mindspore.data_sink. The dataset is one generator over every epoch's batches,
    made by the same `epoch_batches(epoch)` the non-sunk loop uses, so both paths (and PyTorch) see identical
    batches in the same order; one dataset and one sink function for the whole run, so the step is compiled once.
    A call returns the last step's loss (sinking hands back only that)."""

    def __init__(self, step, epoch_batches, epochs: int, steps_per_epoch: int, columns: list[str]):
        import mindspore as ms
        from mindspore import dataset as ds

        def every_epoch():
            for epoch in range(epochs):
                yield from epoch_batches(epoch)

        # One worker, no multiprocessing: the order must be the generator's, and the batches are already made.
        self.dataset = ds.GeneratorDataset(every_epoch, columns, shuffle=False, num_parallel_workers=1,
                                           python_multiprocessing=False)
        self.run_epoch = ms.data_sink(step, self.dataset, sink_size=steps_per_epoch)

    def __call__(self):
        return self.run_epoch()


class ImageProbes:
    """The probes (contracts.ProbedWorkload) of an image classifier with BatchNorm, the same for ResNet50 and
    GoogLeNet: a workload that has the fp32 `net`, its `fp32_loss` and `fp32_step` cells, the optimiser `opt`, the BN
    moving statistics `buffers`, `probe_lr` and the probe tensors (`probe_test`, `probe_x`, `probe_y`) gets them
    from here."""

    def probe_forward(self):
        """Eval-mode logits (fp32) of the first test images."""
        self.net.set_train(False)
        return self.net(self.probe_test).asnumpy()

    def probe_step(self) -> float:
        """One fp32 optimiser step (train mode, learning rate probe_lr) on the first training images,
        unaugmented; returns the loss before the update. The schedule and its step counter are put back."""
        import numpy as np
        from mindspore import Tensor

        lrs, step = self.opt.learning_rate.learning_rate, self.opt.global_step  # the per-step list, its index
        saved_lrs, saved_step = lrs.asnumpy().copy(), step.asnumpy().copy()
        lrs.set_data(Tensor(np.full_like(saved_lrs, self.probe_lr)))
        self.net.set_train(True)
        loss = float(self.fp32_step(self.probe_x, self.probe_y).asnumpy())
        lrs.set_data(Tensor(saved_lrs))
        step.set_data(Tensor(saved_step))
        return loss

    def probe_loss(self) -> float:
        """The loss on the probe step's batch after the step, computed as the step computed it (BN with batch
        statistics), with the BN running statistics left as they were: see tests/test_cifar10.py."""
        from mindspore import Tensor

        saved = [p.asnumpy().copy() for p in self.buffers]
        self.net.set_train(True)
        loss = float(self.fp32_loss(self.probe_x, self.probe_y).asnumpy())
        for p, v in zip(self.buffers, saved, strict=True):
            p.set_data(Tensor(v))
        return loss

    def state_arrays(self) -> list:
        # Trainable parameters: data parallelism keeps them equal on every rank (BatchNorm's running statistics
        # are each rank's own, so they are not compared).
        return [p.asnumpy() for p in self.net.trainable_params()]

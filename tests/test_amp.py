"""PyTorch AMP selection: autocast + GradScaler everywhere; apex O2 (the paper's path) on Ascend when Ascend's apex
is installed. apex cannot run here, so a stand-in records how it is driven: initialize before DDP/compile, the
backward pass inside scale_loss, clipping on the master weights, a plain optimiser step."""

import contextlib
import sys
import types
from types import SimpleNamespace

import pytest
import torch

from harness.models import _pytorch as pt


def _ctx(platform, amp):
    return SimpleNamespace(platform=platform, cell=SimpleNamespace(amp=amp), settings={})


def _model_and_opt():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def test_native_amp_on_cpu_trains_in_bf16_and_records_it():
    ctx = _ctx("cpu", "O2")
    model, opt = _model_and_opt()
    before = model.weight.detach().clone()
    model, opt, amp = pt.mixed_precision(ctx, model, opt)
    assert isinstance(amp, pt.NativeAmp)
    with amp.autocast():
        out = model(torch.ones(3, 4))
    assert out.dtype == torch.bfloat16
    amp.backward(out.float().sum())
    amp.clip_(model.parameters(), 1.0)
    amp.step()
    assert not torch.equal(before, model.weight)
    assert ctx.settings == {"amp_impl": pt.NativeAmp.name, "amp_dtype": "bfloat16"}


def test_amp_off_is_a_plain_fp32_step_with_nothing_recorded():
    ctx = _ctx("cpu", "off")
    model, opt = _model_and_opt()
    model, opt, amp = pt.mixed_precision(ctx, model, opt)
    with amp.autocast():
        assert model(torch.ones(1, 4)).dtype == torch.float32
    assert ctx.settings == {}


def test_ascend_without_apex_falls_back_to_autocast_and_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "apex", None)  # import apex -> ImportError
    ctx = _ctx("ascend", "O2")
    model, opt = _model_and_opt()
    _, _, amp = pt.mixed_precision(ctx, model, opt)
    assert isinstance(amp, pt.NativeAmp) and "apex" in ctx.settings["amp_impl_note"]


def test_ascend_with_apex_uses_o2_the_way_apex_wants(monkeypatch):
    calls = []
    master = [torch.nn.Parameter(torch.ones(2))]

    @contextlib.contextmanager
    def scale_loss(loss, optimizer, delay_unscale=False):   # apex.amp.scale_loss's keyword for accumulation
        calls.append("scale_loss" + (" delayed" if delay_unscale else ""))
        yield loss * 128.0
        calls.append("unscaled")

    fake = types.SimpleNamespace(
        initialize=lambda m, o, **kw: calls.append(("initialize", kw)) or (m, o),
        scale_loss=scale_loss, master_params=lambda o: calls.append("master_params") or master)
    monkeypatch.setitem(sys.modules, "apex", types.SimpleNamespace(amp=fake))
    ctx = _ctx("ascend", "O2")
    model, opt = _model_and_opt()
    model, opt, amp = pt.mixed_precision(ctx, model, opt)
    assert isinstance(amp, pt.ApexO2)
    assert calls[0] == ("initialize", {"opt_level": "O2", "loss_scale": "dynamic", "combine_grad": True})
    with amp.autocast():  # the model is fp16 under apex O2 already: no autocast
        loss = model(torch.ones(1, 4)).sum()
    amp.backward(loss)
    amp.clip_(model.parameters(), 1.0)
    amp.step()
    assert calls[1:] == ["scale_loss", "unscaled", "master_params"]
    assert model.weight.grad is not None and ctx.settings["amp_impl"] == pt.ApexO2.name


@pytest.mark.parametrize("platform", ["cpu", "cuda"])
def test_apex_is_never_used_off_ascend(monkeypatch, platform):
    monkeypatch.setitem(sys.modules, "apex", types.SimpleNamespace(amp=None))
    model, opt = _model_and_opt()
    ctx = _ctx(platform, "O2")
    if platform == "cuda" and not torch.cuda.is_available():
        pytest.skip("GradScaler('cuda') needs CUDA")
    assert isinstance(pt.mixed_precision(ctx, model, opt)[2], pt.NativeAmp)

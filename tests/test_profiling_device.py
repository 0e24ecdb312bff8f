"""The profiled pass on an accelerator: the device's kernels' categories, its busy time (the union of their
intervals), the windowed profiler (checked here on the CPU, the only device this suite has), the FLOP count and the
peaks a cell's share of the device's limit is read against."""

import tempfile
import types

import pytest

from harness import profiling
from harness.devices import catalog
from harness.profiling import device


@pytest.mark.parametrize("name, category", [
    ("sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x32", "convolution"),
    ("sm90_xmma_wgrad_implicit_gemm_indexed_f32f32_tf32f32_f32_nhwckrsc_nhwc", "convolution"),
    ("void cudnn::detail::dgrad_engine<float, 128, 6, 7, 3, 3, 5, false>(int, int, int, float const*)", "convolution"),
    ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(cudnnTensorStruct)", "normalisation"),
    ("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float, float)", "normalisation"),
    ("ampere_sgemm_128x64_tn", "matmul/dense"), ("nvjet_tst_128x64_64x6_1x1_v_bz_TNN", "matmul/dense"),
    ("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>", "matmul/dense"),
    ("void elemWiseRNNcell<float, float, float, (cudnnRNNMode_t)3, (cudnnRNNBiasMode_t)2>", "recurrent"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar("
     "at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}>",
     "activation"),
    ("void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, float, unsigned int, 1, 4, bool>",
     "dropout/random"),
    ("void (anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, (anonymous namespace)::"
     "LogSoftMaxForwardEpilogue>(float*, float const*, int)", "loss"),
    ("void at::native::indexSelectLargeIndex<float, long, unsigned int, 2, 2, -2, true>", "embedding/gather"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
     "TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4>>", "optimizer update"),
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::"
     "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda(float)#1}>>",
     "copy/cast/layout"),
    ("Memcpy HtoD (Pageable -> Device)", "copy/cast/layout"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float>>>",
     "elementwise"),
    ("triton_poi_fused_add_relu_threshold_backward_0", "activation"), ("triton_tem_fused_mm_3", "matmul/dense"),
    ("triton_red_fused__native_batch_norm_legit_functional_1", "normalisation"),
    ("Conv2DBackpropFilter", "convolution"), ("BNTrainingUpdate", "normalisation"), ("TransData", "copy/cast/layout"),
    ("DropOutDoMask", "dropout/random"), ("MatMulV2", "matmul/dense"), ("DynamicGRUV2Grad", "recurrent")])
def test_device_kernels_have_categories(name, category):
    assert profiling.kernel_category(name) == category


def test_runtime_calls_are_host_work_not_ops():
    assert profiling.host_call("cudaLaunchKernel") and profiling.host_call("ProfilerStep#3")
    assert not profiling.host_call("aten::cudnn_convolution")
    assert profiling.categorise("pytorch", "aten::_cudnn_rnn_backward") == "recurrent"
    assert profiling.categorise("pytorch", "aten::cudnn_batch_norm_backward") == "normalisation"
    assert profiling.categorise("mindspore", "BNTrainingUpdateGrad") == "normalisation"


def test_busy_time_is_the_union_of_the_intervals():
    assert device.busy_seconds([(0, 2), (1, 3), (5, 6), (5.5, 5.7)]) == pytest.approx(4)
    block = device.timeline([("ampere_sgemm", 0.000, 0.004), ("ampere_sgemm", 0.002, 0.006),
                             ("fused_dropout_kernel", 0.010, 0.012)], steps=2, window_s=0.020, source="test",
                            category=profiling.kernel_category)
    assert block["busy_s"] == pytest.approx(0.004) and block["step_s"] == pytest.approx(0.010)
    assert block["wait_s"] == pytest.approx(0.006) and block["busy_share"] == pytest.approx(0.4)
    assert block["by_category_s"] == pytest.approx({"matmul/dense": 0.004, "dropout/random": 0.001})
    assert device.timeline([], 2, 0.02, "test") is None


def test_the_measured_step_keeps_the_kernels_time_and_the_rest_is_waiting():
    dev = device.timeline([("ampere_sgemm", 0.0, 0.004)], steps=1, window_s=0.010, source="test")
    s = profiling.summarise("pytorch", {"aten::mm": (0.004, 1)}, 1, step_wall_s=0.008, profiled_step_s=0.010,
                            device=dev)
    assert s["device"]["measured_busy_s"] == pytest.approx(0.004)
    assert s["device"]["measured_wait_s"] == pytest.approx(0.004)
    assert profiling.summarise("pytorch", {"aten::mm": (0.004, 1)}, 1, 0.008)["device"] is None   # a CPU


def test_the_windowed_profiler_records_its_steps_and_counts_one_steps_flops():
    torch = pytest.importorskip("torch")
    from harness.frameworks import pytorch as pt

    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))

    def run():
        for _ in range(12):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()

    window = {"warmup": 1, "active": 5, "count_flops": True}
    ops = pt.profile_ops(types.SimpleNamespace(platform="cpu"), run, tempfile.mkdtemp(), window=window)
    assert window["steps"] == 5 and window["window_s"] > 0
    assert ops["aten::linear"][1] == 10   # two layers, five recorded steps
    # forward 2*4*(8*16 + 16*2); backward: both weights' gradients and the hidden layer's input gradient
    assert window["flops_per_step"] == 2 * 4 * (8 * 16 + 16 * 2) * 2 + 2 * 4 * 16 * 2
    assert not any(profiling.host_call(op) for op in ops)


def test_resnet50s_training_step_is_7_78_gflop_an_image():
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    from harness.models.resnet50.pytorch import ResNet50

    net = ResNet50(10, 0.1, 1e-5)
    with FlopCounterMode(display=False) as fc:
        torch.nn.functional.cross_entropy(net(torch.randn(2, 3, 32, 32)), torch.tensor([0, 1])).backward()
    assert fc.get_total_flops() / 2 / 1e9 == pytest.approx(7.78, abs=0.01)


def test_peaks_by_device_and_precision():
    assert catalog.peak("NVIDIA H200", "fp32") == 67e12 and catalog.peak("NVIDIA H200", "fp16") == 989e12
    assert catalog.peak("NVIDIA H100 PCIe", "fp32") == 51e12 and catalog.peak("NVIDIA H100 80GB HBM3", "bf16") == 989e12
    assert catalog.peak("Tesla V100-SXM2-16GB", "fp16") == 125e12
    assert catalog.peak("NVIDIA A100-SXM4-40GB", "fp32") == 19.5e12
    assert catalog.peak("Ascend910", "fp16") == 256e12
    assert catalog.peak("Ascend910B", "fp16") is None and catalog.peak(None, "fp32") is None


def test_the_sentence_says_how_busy_the_device_was():
    from harness.report import explain

    dev = {"measured_busy_share": 0.29, "measured_wait_s": 0.017, "source": "torch.profiler", "verified": True}
    pt = {"per_step_s": {}, "step_wall_s": 0.024, "device": dev}
    assert explain.sentence("cuda", "ResNet50 on CIFAR-10", pt, None) == (
        "ResNet50 on CIFAR-10, cuda: PyTorch eager's step is host-bound: the GPU is busy 29% of its 24 ms and waits "
        "17 ms.")
    assert explain.sentence("cpu", "GCN on Cora", {"per_step_s": {}, "step_wall_s": 0.02}, None) is None


@pytest.mark.parametrize("name, flagged, work", [
    # names and flags as torch.profiler 2.11 gave them on the device's lane of an H200
    ("ProfilerStep#7", True, False), ("Optimizer.step#SGD.step", True, False),
    ("ProfilerStep#7", False, False), ("Optimizer.zero_grad#Adam.zero_grad", None, False),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", False, True),
    ("Memset (Device)", False, True), ("Memcpy HtoD (Pinned -> Device)", None, True),
])
def test_host_ranges_on_the_device_lane_are_not_device_work(name, flagged, work):
    from harness.frameworks import pytorch as pt

    event = types.SimpleNamespace(name=name) if flagged is None else types.SimpleNamespace(
        name=name, is_user_annotation=flagged)
    assert pt.device_work(event) is work

"""A failed cell's reason is the error itself (harness.launch.process.last_error, own_error): the line that names it,
with a CUDA kernel's failed assertion where there is one, never the advice a framework prints after it.
 tests/fixtures/h200_bert_device_assert.log is the tail of a real cell's log: BERT-base at batch 256 x 128 on an
NVIDIA H200 (PyTorch 2.11), failing in its first evaluation with a device-side assert (local paths replaced by
PROJECT)."""

from pathlib import Path

from harness.launch import process as launch

FIXTURE = Path(__file__).parent / "fixtures" / "h200_bert_device_assert.log"
CUDA_ASSERT = ("torch.AcceleratorError: CUDA error: device-side assert triggered; vectorized_gather_kernel: Assertion "
               '`ind >=0 && ind < ind_dim_size && "vectorized gather kernel index out of bounds"` failed.')


def _log(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "r0.log"
    path.write_text(text)
    return path


def test_a_cuda_error_is_its_error_line_and_the_kernels_assertion_not_the_advice_after_it():
    assert FIXTURE.read_text().rstrip().endswith("Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    assert launch.last_error(FIXTURE) == CUDA_ASSERT
    assert launch.own_error(FIXTURE) == CUDA_ASSERT   # a launched rank's reason too


def test_an_ordinary_python_error_is_its_last_line_as_before(tmp_path):
    log = _log(tmp_path, 'epoch 0 loss 2.3\nTraceback (most recent call last):\n  File "x.py", line 3, in <module>\n'
                         "    f()\nValueError: batch 0 has 3 columns, not 4\n")
    assert launch.last_error(log) == "ValueError: batch 0 has 3 columns, not 4"
    assert launch.own_error(log) == "ValueError: batch 0 has 3 columns, not 4"


def test_the_last_of_chained_errors_is_the_reason(tmp_path):
    log = _log(tmp_path, "Traceback (most recent call last):\nKeyError: 'x'\n\nDuring handling of the above exception, "
                         "another exception occurred:\n\nTraceback (most recent call last):\nRuntimeError: no x\n")
    assert launch.last_error(log) == "RuntimeError: no x"


def test_a_mindspore_error_is_not_the_call_stack_or_the_pointer_below_it(tmp_path):
    named = _log(tmp_path, "Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>\n"
                           "RuntimeError: Launch kernel failed, name: Default/MatMul-op0\n\n"
                           "----------------------------------------------------\n"
                           "- C++ Call Stack: (For framework developers)\n"
                           "----------------------------------------------------\n"
                           "mindspore/ccsrc/runtime/device/kernel_runtime.cc:1234 LaunchKernel\n")
    assert launch.last_error(named) == "RuntimeError: Launch kernel failed, name: Default/MatMul-op0"
    unnamed = tmp_path / "unnamed.log"
    unnamed.write_text("EZ9999: Inner Error!\n"
                       "EZ9999: The error from device(chipId:0, dieId:0), there is an aicore error.\n"
                       "(Please search \"CANN Common Error Analysis\" at https://www.mindspore.cn for error code "
                       "description)\n"
                       "For more details, please refer to the FAQ at https://www.mindspore.cn\n\n"
                       "----------------------------------------------------\n"
                       "- C++ Call Stack: (For framework developers)\n"
                       "----------------------------------------------------\n"
                       "mindspore/ccsrc/plugin/device/ascend/hal/device/ascend_kernel_runtime.cc:987 SyncStream\n")
    assert launch.own_error(unnamed) is None
    assert launch.last_error(unnamed) == ("EZ9999: The error from device(chipId:0, dieId:0), there is an aicore "
                                          "error.")


def test_a_log_that_names_no_error_gives_its_last_line(tmp_path):
    assert launch.last_error(_log(tmp_path, "epoch 0 loss 2.3\nKilled\n")) == "Killed"
    assert launch.last_error(_log(tmp_path, "")) == "no output"


def test_the_rank_line_the_child_writes_is_the_one_the_runner_reads(tmp_path):
    """A dead worker is named by its pid (the launchers'): each rank's log starts with pid_line, rank_pids reads it."""
    logs = []
    for rank, pid in ((0, 4242), (1, 4343)):
        logs.append(tmp_path / f"r0.rank{rank}.log")
        logs[-1].write_text(launch.pid_line(rank, pid) + "\nepoch 1\n")
    (tmp_path / "other.log").write_text("harness.child: rank 2 pid 4444\n")   # no other wording is read
    assert launch.rank_pids([*logs, tmp_path / "other.log", tmp_path / "missing.log"]) == {4242: 0, 4343: 1}

"""Reproduction harness for "Performance Evaluation of PyTorch and MindSpore Frameworks for Ascend NPU"."""

__version__ = "0.1.0"

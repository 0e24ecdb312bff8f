"""Models: one package per model (`harness/models/<model>/`), holding the framework-neutral parts
(initial weights made with numpy from the seed, shapes) in `__init__.py` and one file per framework
(`pytorch.py`, `mindspore.py`), each with `build(ctx, data) -> Workload` (see scenarios/training.py).
"""

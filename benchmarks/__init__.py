"""The benchmarks' shared helpers."""

import contextlib
import os
from statistics import mean, pstdev


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages, as every benchmark prints them before and after its timings."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cv(values: list[float]) -> float:
    """Coefficient of variation: the population standard deviation over the mean."""
    return pstdev(values) / mean(values)


@contextlib.contextmanager
def allocator_requested(name: str):
    """HARNESS_ALLOCATOR=name in this process while a back-end's `process_env` is computed (it reads the variable),
    the environment as it was afterwards."""
    before = os.environ.get("HARNESS_ALLOCATOR")
    os.environ["HARNESS_ALLOCATOR"] = name
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("HARNESS_ALLOCATOR", None)
        else:
            os.environ["HARNESS_ALLOCATOR"] = before

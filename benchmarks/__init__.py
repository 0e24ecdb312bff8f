"""The benchmarks' shared helpers."""

import os


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages, as every benchmark prints them before and after its timings."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())

"""The ops the profiled pass saw in a run's model cells, for the category coverage check:

    python tools/profile_ops.py RUN_FOLDER > tests/fixtures/profile_ops_quick.json

One entry per profiled cell ("model/framework/mode/amp"): op name -> its share of the profiled step. The test
(tests/test_profiling.py) checks that every op has a category (harness/profiling/categories.toml) and that "other"
stays under harness.profiling.OTHER_LIMIT of a step. Run it on a fresh quick run after adding a model or changing a
framework's version.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.results.store import RunStore  # noqa: E402


def main(run: str) -> int:
    out = {}
    for r in RunStore(Path(run)).results():
        p = r.get("profile")
        if r.get("status") == "ok" and p:
            whole = max(p["profiled_step_s"], sum(p["self_s"].values()))   # as harness.profiling.summarise reads shares
            out[f"{r['model']}/{r['framework']}/{r['mode']}/{r['amp']}"] = {
                "framework": r["framework"],
                "ops": {op: round(s / whole, 6) for op, (s, _) in sorted(p["ops"].items())}}
    json.dump(dict(sorted(out.items())), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

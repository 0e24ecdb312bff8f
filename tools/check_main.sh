#!/usr/bin/env bash
# CI's newcomer check: README's main command, run as a new user runs it, must end with every cell ok and the
# report rendered. It runs ./reproduce.sh cpu in this checkout (CI's is a fresh clone, so .venv is made from the
# lock exactly as a newcomer's is) with a PATH that holds no virtual environment (tox puts its own on PATH, which
# once hid a launcher found by name), on a slice with a scaling cell of each framework: real Cora from
# ../shared/data (or $HARNESS_DATA_DIR), synthetic CIFAR-10, one repeat a cell (--repeats 1 --max-repeats 1: the
# check is that each cell runs and the report renders; the repeats the verdicts need are the suite's and the committed
# runs'). Then every dataset's loader on format-faithful fixtures under that .venv's Python (tools/check_datasets.py).
#
#   tools/check_main.sh [extra reproduce.sh options]        (tox -e main; about 5 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"

data="${HARNESS_DATA_DIR:-$repo/../shared/data}"
if [ ! -f "$data/cora_planetoid/ind.cora.x" ]; then
  if [ "${CI:-}" = true ]; then echo "check_main.sh: no Cora under $data (set HARNESS_DATA_DIR)" >&2; exit 1; fi
  echo "check_main.sh: skipped: no Cora under $data (set HARNESS_DATA_DIR to a folder holding cora_planetoid/)" >&2
  exit 0
fi

# PATH without any virtual environment's bin/ (a folder next to a pyvenv.cfg), as in a newcomer's shell.
clean=""
IFS=: read -r -a parts <<< "$PATH"
for p in "${parts[@]}"; do
  [ -n "$p" ] && [ ! -f "$p/../pyvenv.cfg" ] && clean="${clean:+$clean:}$p"
done
unset VIRTUAL_ENV PYTHONPATH PYTHONHOME

out="$(mktemp -d "${TMPDIR:-/tmp}/check-main.XXXXXX")/run"
slice='model/gcn/*/*/amp-off/1dev,scaling/resnet50/pytorch/*,scaling/resnet50/mindspore/graph/*'
echo "check_main.sh: PATH=$clean" >&2
echo "check_main.sh: ./reproduce.sh cpu --data-dir $data --synthetic cifar10 --only '$slice' --repeats 1" \
  "--max-repeats 1 --out $out" >&2
start=$(date +%s)
status=0
env PATH="$clean" ./reproduce.sh cpu --data-dir "$data" --synthetic cifar10 --only "$slice" --repeats 1 --max-repeats 1 \
  --out "$out" "$@" \
  || status=$?
echo "check_main.sh: reproduce.sh exited $status after $(( $(date +%s) - start )) s" >&2

# Every cell of the slice ok, Cora real and CIFAR-10 synthetic, and the report there.
env PATH="$clean" "$repo/.venv/bin/python" - "$out" "$status" <<'PY'
import json, pathlib, subprocess, sys

out, status = pathlib.Path(sys.argv[1]), int(sys.argv[2])
rows = json.loads(subprocess.run([sys.executable, "-m", "harness", "results", str(out), "--json"],
                                 check=True, capture_output=True, text=True).stdout)
bad = [f"{r['cell']}: {r['status']} ({r.get('reason')})" for r in rows if r["status"] != "ok"]
kinds = {(r["kind"], r["framework"]) for r in rows}
problems = []
if status != 0:
    problems.append(f"reproduce.sh exited {status}")
if bad:
    problems.append("cells not ok: " + "; ".join(bad))
for fw in ("pytorch", "mindspore"):
    if ("scaling", fw) not in kinds:
        problems.append(f"no scaling cell of {fw} ran")
if any(r["synthetic"] for r in rows if r["dataset"] == "cora"):
    problems.append("Cora was synthetic; the check wants the real files")
if not all(r["synthetic"] for r in rows if r["dataset"] == "cifar10"):
    problems.append("CIFAR-10 was not synthetic")
for name in ("report.html", "report.tex"):
    if not (out / "report" / name).is_file():
        problems.append(f"no report/{name}")
for r in rows:
    print(f"  {r['cell']}: {r['status']}", file=sys.stderr)
if problems:
    sys.exit("check_main.sh: FAILED: " + " | ".join(problems))
print(f"check_main.sh: ok: {len(rows)} cells ok, report in {out / 'report'}", file=sys.stderr)
PY

# Every dataset's loader under the newcomer's .venv, i.e. the host's first python3.11 (tools/check_datasets.py). The
# images' Debian 3.11.2 has no tarfile data filter and is checked in them (tools/check_image.sh); a 3.11 >= 3.11.4,
# like the Ascend image's source-built 3.11.15, extracts CIFAR-10 through the filter: on CI's host this is that path.
env PATH="$clean" "$repo/.venv/bin/python" tools/check_datasets.py >&2 \
  || { echo "check_main.sh: FAILED: a dataset's loader under $("$repo/.venv/bin/python" -V 2>&1) (line above)" >&2; exit 1; }

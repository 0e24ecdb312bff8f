#!/usr/bin/env bash
# The test command (README.md; CI's .ci/run runs exactly this): the Debian tools some tests need (Debian's
# python3.11, pdflatex, Chromium, buildah, debootstrap; installed when missing and root), then tox: lint (ruff), test
# (pytest under /usr/bin/python3.11, Debian bookworm's 3.11.2 as in the CPU and CUDA images, whatever python3.11
# comes first on PATH; with report.tex through pdflatex and report.html in headless Chromium), main (README's main
# command, ./reproduce.sh cpu, on a slice with no virtual environment on PATH: tools/check_main.sh), image (hadolint,
# the CPU image built with buildah; inside it every dataset's loader on format-faithful fixtures, the GCN quick cells
# and a quick cell of every other model) and image-cuda (the CUDA image built with buildah and checked inside the same
# way: no GPU needed). Extra arguments replace the tox environments, e.g. `-e test`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_system_packages.sh
python3 -m venv .venv-tox
.venv-tox/bin/pip install -q tox==4.67.15
if [ $# -gt 0 ]; then
  exec .venv-tox/bin/tox "$@"
fi
# One tox environment at a time, each one's output kept in .tox/logs/: when one fails, its last lines are printed
# again at the very end, where a reader of the output (or of its tail, as CI keeps it) sees why.
mkdir -p .tox/logs
failed=()
summary=()
for env in lint test main image image-cuda; do
  t0=$(date +%s)
  if .venv-tox/bin/tox -e "$env" 2>&1 | tee ".tox/logs/$env.log"; then status=OK; else status=FAILED; failed+=("$env"); fi
  summary+=("$(printf '  %-10s %-6s %5d s' "$env" "$status" $(($(date +%s) - t0)))")
done
for env in "${failed[@]}"; do
  echo "--- $env failed; its last 40 lines (all of them in .tox/logs/$env.log):"
  tail -n 40 ".tox/logs/$env.log"
done
echo "tools/test.sh: each environment (status, wall time):"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "tools/test.sh: FAILED: ${failed[*]}"
  exit 1
fi
echo "tools/test.sh: all passed"

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
exec .venv-tox/bin/tox -e lint,test,main,image,image-cuda

#!/usr/bin/env bash
# The test command (README.md; CI's .ci/run runs exactly this): the Debian tools some tests need (pdflatex,
# Chromium, buildah, debootstrap; installed when missing and root), then tox: lint (ruff), test (pytest, with
# report.tex through pdflatex and report.html in headless Chromium), main (README's main command, ./reproduce.sh cpu,
# on a slice with no virtual environment on PATH: tools/check_main.sh), image (hadolint, the CPU image built with
# buildah and the GCN quick cells run inside it) and image-cuda (the CUDA image built with buildah and checked
# inside: no GPU needed). Extra arguments replace the tox environments, e.g. `-e test`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_system_packages.sh
python3 -m venv .venv-tox
.venv-tox/bin/pip install -q tox==4.67.15
if [ $# -gt 0 ]; then
  exec .venv-tox/bin/tox "$@"
fi
exec .venv-tox/bin/tox -e lint,test,main,image,image-cuda

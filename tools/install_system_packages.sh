#!/usr/bin/env bash
# Debian packages the test suite needs beyond Python: Debian's python3.11 with its venv module (tox's `test`
# environment runs the suite under /usr/bin/python3.11, the Python the CPU and CUDA images ship), pdflatex
# (report.tex must compile), Chromium (report.html must load without console errors), buildah and debootstrap (the
# CPU image is built and run), podman and docker (the images run through reproduce.sh), jemalloc and tcmalloc
# (preloaded for real by the allocator tests). Installs what is missing when run as root with apt-get (CI, a fresh
# Debian/Ubuntu box); otherwise says what to install.
set -euo pipefail

need=()
/usr/bin/python3.11 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3.11 python3.11-venv)
command -v pdflatex >/dev/null || need+=(texlive-latex-base texlive-latex-recommended texlive-fonts-recommended)
command -v chromium >/dev/null || need+=(chromium)
command -v buildah >/dev/null || need+=(buildah)
command -v debootstrap >/dev/null || need+=(debootstrap)
# podman (with runc, and uidmap for a rootless user) and docker's engine: tools/check_engines.sh runs the images
# through reproduce.sh under both, as a reviewer's user. docker.io only where no dockerd is there (a host with
# Docker's own docker-ce keeps it).
command -v podman >/dev/null || need+=(podman)
command -v runc >/dev/null || need+=(runc)
command -v newuidmap >/dev/null || need+=(uidmap)
command -v dockerd >/dev/null || need+=(docker.io)
# jemalloc and tcmalloc: the allocator tests preload them for real (harness/host/allocator.py), and the native cells of
# tools/check_main.sh get PyTorch's choice, as the images do.
[ -e "/usr/lib/$(uname -m)-linux-gnu/libjemalloc.so.2" ] || need+=(libjemalloc2)
[ -e "/usr/lib/$(uname -m)-linux-gnu/libtcmalloc_minimal.so.4" ] || need+=(libtcmalloc-minimal4)
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "install_system_packages.sh: apt-get install ${need[*]}" >&2
  # Lists apt-get cannot refresh (offline, a mirror down) leave the ones there are: what they hold is still installed.
  stale=""
  apt-get update -qq >/dev/null 2>&1 || stale="; apt-get update failed too, so the package lists may be old or empty"
  # All at once first (one resolver run); where that fails, one at a time, so that a name this release lacks (Ubuntu
  # has no python3.11 package, say) costs that package alone, named below.
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1; then
    failed=()
    for pkg in "${need[@]}"; do
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null 2>&1 || failed+=("$pkg")
    done
    # Not fatal, as below: the tests that need them skip outside CI and fail in CI (CI=true) with the package's name.
    [ ${#failed[@]} -eq 0 ] || echo "install_system_packages.sh: apt-get could not install ${failed[*]} (apt-get install ${failed[*]} says why: not in this release's lists, or a conflict$stale); the rest is installed, and the tests that need these skip (fail under CI=true)" >&2
  fi
else
  # Not fatal here: the tests that need them skip outside CI and fail in CI (CI=true) with the package's name.
  echo "install_system_packages.sh: missing Debian packages ${need[*]} (install them as root to run every test)" >&2
fi

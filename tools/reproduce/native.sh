# shellcheck shell=bash
# reproduce.sh's native run, sourced by it once the arguments are read (it reads their variables: platform, profile,
# out, build, dry, only, data_args, run_args, here): on cpu the .venv made from requirements/cpu.txt, on cuda and
# ascend the Python given ($PYTHON, else python3); then the run line and the report. It ends the script.

# report_native PY: the run, then its report; exits with the run's status.
report_native() {
  local py="$1" status=0
  cd "$here"
  # A host whose allocators differ from the expected results' (no tcmalloc, say): one line before the run.
  [ "$platform" != cpu ] || "$py" -m harness.preflight.checks_allocator >&2 2> /dev/null || true
  "$py" -m harness run --platform "$platform" --profile "$profile" --out "$out" "${data_args[@]}" "${run_args[@]}" \
    || status=$?
  [ "$status" -ne 2 ] || exit 2  # the harness refused its input and said why in one line
  report="$("$py" -m harness report "$out")" || report_failed $? "$(show "$py" -m harness report "$out")"
  echo "report: $report"
  echo "LaTeX:  $(dirname "$report")/report.tex and $(dirname "$report")/tables/"
  exit "$status"
}

if [ "$platform" = cpu ]; then
  venv="$here/.venv"
  lock="$here/requirements/cpu.txt"
  want="$(sha256sum "$lock" | cut -d' ' -f1)"
  py="$venv/bin/python"
  # --build, or no .venv stamped as made from this lock: made (again) from the lock with the base Python 3.11 by
  # harness/preflight/venvbuild.py, which checks that Python, says each step and, after, what it took.
  if [ "$build" = 1 ] || [ ! -x "$py" ] || [ "$(cat "$venv/.requirements.sha256" 2> /dev/null)" != "$want" ]; then
    if [ "$dry" = 1 ]; then
      show "${PYTHON:-python3.11}" -m venv "$venv"
      show "$py" -m pip install --require-hashes -r "$lock"
    else
      # venvbuild checks BASE (that it runs, its version) as a program of its own, so it runs under BASE where BASE
      # can run harness/preflight (3.8 or newer), else under the host's python3. None can: only this line can say so.
      base="${PYTHON:-$(command -v python3.11 || command -v python3 || true)}"
      for pf in "$base" "$(command -v python3 || command -v python3.11 || true)" ""; do
        [ -n "$pf" ] && "$pf" -c 'import sys; sys.exit(sys.version_info < (3, 8))' &> /dev/null && break
      done
      [ -n "$pf" ] || die "no python3 found${base:+ that runs harness/preflight (3.8 or newer)}, and the lock pins wheels for Python 3.11; add --container to run in the CPU image (docker or podman; no host Python needed), or install Python 3.11 and set PYTHON=/path/to/python3.11"
      preflight "$pf" venvbuild prepare "$base" "$venv" "$lock" "$here"
      preflight "$base" venvbuild make "$base" "$venv" "$lock" "$want"
    fi
  fi
  [ "$build" = 0 ] || { [ "$dry" = 1 ] || next_after_build; exit 0; }
else
  # The Python needs the selected cells' frameworks, or at least one of them: the cells of one it lacks are left
  # out (recorded as skipped), and said.
  py="${PYTHON:-python3}"
  q=("$platform" "$profile" "$py"); [ -z "$only" ] || q+=("--only=$only"); [ "$dry" = 0 ] || q+=(--dry-run)
  ask -q "$py" frameworks "${q[@]}" || [ "$dry" = 1 ] \
    || die "$py does not run (or is not Python 3 with this checkout's harness); set PYTHON to a Python 3.11, or drop --native to use the image"
fi
if [ "$dry" = 1 ]; then
  echo "cd $(printf '%q' "$here")"
  show "$py" -m harness run --platform "$platform" --profile "$profile" --out "$out" "${data_args[@]}" "${run_args[@]}"
  show "$py" -m harness report "$out"
  exit 0
fi
report_native "$py"

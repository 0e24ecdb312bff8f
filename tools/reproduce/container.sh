# shellcheck shell=bash
# reproduce.sh's run in the platform's image, sourced by it once the arguments are read (it reads their variables and,
# on cuda and ascend, what harness/preflight/shell.py answered: chip, chip_image, chip_unknown, npus): the engine
# (docker or podman), the image (built when missing), then the fetch, run and report containers. Bash alone: the CPU
# image's host may have no Python. It ends the script.

# aside QUESTION ARGS...: ask harness/preflight/shell.py a question whose answer is for the reader only (the lines
# around an image build) where the host has a python3: the CPU image's host may have none, and no answer is no failure.
aside() { local py3="${pf:-$(command -v python3 || true)}"; [ -z "$py3" ] || ask -q "$py3" "$@" || true; }
# --- the engine and the image ------------------------------------------------------------------------------
answers() { command -v "$1" > /dev/null && "$1" info > /dev/null 2>&1; }  # an engine installed and answering
engine="${CONTAINER_ENGINE:-}"
[ -n "$engine" ] || for candidate in docker podman; do if answers "$candidate"; then engine="$candidate"; break; fi; done
if [ -z "$engine" ]; then
  [ "$dry" = 1 ] || die "no container engine: neither docker nor podman is installed and answering (docker info / podman info); install one, or for cpu drop --container"
  engine=docker
elif [ "$dry" = 0 ] && ! answers "$engine"; then
  die "no container engine: $engine (CONTAINER_ENGINE) is not installed or does not answer '$engine info'"
fi
engine_name="$(basename "$engine")"
[ -z "$chip_unknown" ] || [ "$dry" = 1 ] || die "$chip_unknown"

dockerfile="$here/Dockerfile.$platform"
image="${image:-${chip_image:-ms-pt-harness:$platform}}"   # ascend's names its chip (harness/preflight/shell.py)
need_build="$build"  # and the images are not published: a missing one is built here
[ "$need_build" = 1 ] || "$engine" image inspect "$image" > /dev/null 2>&1 || need_build=1
# An apex choice the existing image was not built with (its label, harness/preflight/shell.py): built again with it.
[ "$need_build" = 1 ] || [ -z "$apex" ] || ask "$pf" apex "$engine" "$image" "$apex"
lock="$here/requirements/$platform.txt"
arch="$(uname -m)"
if [ "$need_build" = 1 ] && grep -q -e '^# LOCK-INCOMPLETE:' -e "^# LOCK-INCOMPLETE-ARCH $arch:" "$lock"; then
  why="$(grep -m1 -e '^# LOCK-INCOMPLETE:' -e "^# LOCK-INCOMPLETE-ARCH $arch:" "$lock" | sed 's/^# LOCK-INCOMPLETE[^:]*: *//')"
  fix="run python3 tools/lock_requirements.py --only $platform on a host that reaches that index"
  [ "$dry" = 1 ] || die "cannot build $image: ${lock#"$here"/} is incomplete ($why); $fix, or pass --image REF"
  echo "# ${lock#"$here"/} is incomplete ($why): first $fix" >&2
fi
base="$(sed -n 's/^ARG BASE_IMAGE=//p' "$dockerfile" | head -1)"
base="${base//\$\{ASCEND_CHIP\}/$chip}"
if [ "$need_build" = 1 ] && [ "${base#*@sha256:}" = "$base" ]; then
  echo "# warning: ${dockerfile##*/} names its base $base by tag only; tools/pin_base_images.sh pins its digest" >&2
fi
revision="$(git -C "$here" rev-parse HEAD 2> /dev/null || echo unknown)"
build_cmd=("$engine" build -f "$dockerfile" -t "$image" --build-arg "REVISION=$revision")
# podman builds OCI images by default, which have no SHELL: the Dockerfiles' `SHELL ["/bin/bash", "-o", "pipefail",
# "-c"]` would be dropped (podman warns) and their RUN lines run under /bin/sh, unlike docker's build of them.
[ "$engine_name" != podman ] || build_cmd+=(--format docker)
# BASE_IMAGE: another base than the Dockerfile's (a registry mirror's copy of it, or a local one)
[ -z "${BASE_IMAGE:-}" ] || build_cmd+=(--build-arg "BASE_IMAGE=$BASE_IMAGE")
[ "$platform" != ascend ] || build_cmd+=(--build-arg "ASCEND_CHIP=$chip")
[ -z "$apex" ] || build_cmd+=(--build-arg "ASCEND_APEX=$apex")
build_cmd+=("$here")

# --- the containers: the datasets fetched, the run, the report ---------------------------------------------
shm="${SHM_SIZE:-16g}"
[ "$platform" != cpu ] || shm="${SHM_SIZE:-2g}"
common=(--rm --shm-size "$shm" -e "HARNESS_IMAGE=$image")
made=()   # host folders a mount needs, made before the run
# The caller's uid and gid inside, so the results are the caller's: --user for every engine, and rootless podman also
# maps them onto themselves with keep-id (rootful podman refuses it: "keep-id is only supported in rootless mode");
# keep-id alone keeps the image's USER (1000), which can write the caller's folders only when the caller is uid 1000.
# SELinux labels off for podman, or an enforcing host denies the bind mounts (NVIDIA's podman example does the same).
rootless=0
[ "$engine_name" != podman ] || [ "$("$engine" info --format '{{.Host.Security.Rootless}}' 2> /dev/null || echo true)" != true ] \
  || { rootless=1; common+=(--userns=keep-id); }
common+=(--user "$(id -u):$(id -g)")
[ "$engine_name" != podman ] || common+=(--security-opt=label=disable)
for var in HARNESS_NNODES HARNESS_NODE_RANK HARNESS_MASTER_ADDR HARNESS_MASTER_PORT; do
  [ -z "${!var:-}" ] || common+=(-e "$var=${!var}")
done
# The devices (cuda, ascend), the host network, and on cuda the kept folder of the driver's JIT cache: harness/preflight.
[ "$platform" = cpu ] || ask "$pf" container "$platform" "$engine_name" "$rootless" "${npus[@]}"
common+=("${device_args[@]}")
mounts=(-v "$out:/results")
in_data=(--data-dir /data)
fetch_cmd=()
only_args=(); [ -z "$only" ] || only_args=(--only "$only")
if [ "$synthetic" = all ]; then
  in_data=(--synthetic)
else
  # The datasets are fetched and verified first, in a container of their own that may write the data folder;
  # the run then reads them read-only.
  mounts+=(-v "$data_dir:/data:ro")
  [ -z "$synthetic" ] || in_data+=(--synthetic "$synthetic")
  # HARNESS_DATA_MIRROR: the datasets from a mirror (an air-gapped site's copy), as natively
  mirror=(); [ -z "${HARNESS_DATA_MIRROR:-}" ] || mirror=(-e "HARNESS_DATA_MIRROR=$HARNESS_DATA_MIRROR")
  fetch_cmd=("$engine" run "${common[@]}" "${mirror[@]}" -v "$data_dir:/data" "$image"
             fetch --profile "$profile" "${only_args[@]}" "${in_data[@]}")
fi
run_cmd=("$engine" run "${common[@]}" "${mounts[@]}" -e "HARNESS_COMMAND=$HARNESS_COMMAND"
         -e "HARNESS_BOOKING_START=$HARNESS_BOOKING_START" "$image"
         run --platform "$platform" --profile "$profile" --out /results "${in_data[@]}" "${run_args[@]}")
report_cmd=("$engine" run "${common[@]}" -v "$out:/results" "$image" report /results)

if [ "$dry" = 1 ]; then
  [ "$platform" != ascend ] || echo "# ascend chip: $chip ($chip_why); base image: $base"
  [ "$need_build" = 0 ] || show "${build_cmd[@]}"
  [ "$build" = 0 ] || exit 0   # --build builds and stops
  show mkdir -p "$out" "$data_dir" "${made[@]}"
  [ ${#fetch_cmd[@]} -eq 0 ] || show "${fetch_cmd[@]}"
  show "${run_cmd[@]}"
  show "${report_cmd[@]}"
  exit 0
fi

if [ "$need_build" = 1 ]; then
  began=""
  aside build "$platform" "$engine" "$here"   # the plan, at the engine's storage; $began for the line after
  echo "reproduce.sh: building $image from ${dockerfile##*/}" >&2
  "${build_cmd[@]}" || die "building $image from ${dockerfile##*/} failed (see $engine_name's output above)"
  [ -z "$began" ] || aside built "$image" "$engine" "$began"
  [ "$build" = 0 ] || { next_after_build; exit 0; }
fi
for d in "$out" "${made[@]}"; do
  mkdir -p "$d" 2> /dev/null || die "cannot make the folder $d; choose another place (--out, --data-dir) or fix its permissions"
done
# The engine's own failure (docker and podman: 125 the container could not be made or started, 126 and 127 its
# command could not be run) is not the harness's: one line says which, and what to look at.
engine_failed() {  # engine_failed STATUS WHAT
  die "$engine_name could not run the $2 container (exit $1: the engine's own failure, not the harness's; its" \
    "message is above): check the mounts ($out${fetch_cmd[*]:+, $data_dir}: they exist and are yours), subuid and" \
    "subgid for a rootless user, the SELinux label of those folders, and that $image is this harness's image"
}
status=0
if [ ${#fetch_cmd[@]} -gt 0 ]; then
  mkdir -p "$data_dir" 2> /dev/null || die "cannot make the data folder $data_dir; choose another with --data-dir or fix its permissions"
  "${fetch_cmd[@]}" || status=$?
  case "$status" in
    0) ;;
    2) exit 2 ;;  # the harness said which dataset and why in one line
    125|126|127) engine_failed "$status" fetch ;;
    *) echo "reproduce.sh: fetching the datasets in $image failed (exit $status; its output is above), so the run" \
         "did not start; run it again, or pass --synthetic to run on generated data" >&2
       exit "$status" ;;
  esac
fi
"${run_cmd[@]}" || status=$?
case "$status" in
  2) exit 2 ;;  # the harness refused its input and said why in one line
  125|126|127) engine_failed "$status" run ;;
esac
status_report=0
"${report_cmd[@]}" > /dev/null || status_report=$?
case "$status_report" in
  0) ;;
  125|126|127) engine_failed "$status_report" report ;;
  *) report_failed "$status_report" "$(show "${report_cmd[@]}")" ;;
esac
echo "report: $out/report/report.html"
echo "LaTeX:  $out/report/report.tex and $out/report/tables/"
exit "$status"

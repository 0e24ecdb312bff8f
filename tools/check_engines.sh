#!/usr/bin/env bash
# The images under real container runtimes, through reproduce.sh's own command lines, as a reviewer's user runs
# them (tools/check_image.sh calls this; CI only: it needs root to make the user and start dockerd).
#
#   tools/check_engines.sh cpu [--keep] BASE_ROOTFS WHEELHOUSE
#        BASE_ROOTFS: a Debian bookworm root file system (.tgz), which stands in for Dockerfile.cpu's base (public
#        base images cannot be pulled here); WHEELHOUSE: wheelhouse/cpu as tools/wheelhouse.sh cpu filled it
#   tools/check_engines.sh cuda IMAGE STORAGE   IMAGE in buildah's STORAGE (root, runroot, driver: "R:RR:D")
#
# cpu:  as a non-root user with rootless podman, tools/walk.sh cpu --container from a fresh clone: check, the base
#       imported (the one stand-in), the wheelhouse, ./reproduce.sh cpu --container --build (THE build of the CPU
#       image: Dockerfile.cpu, BASE_IMAGE the imported base), check again, every dataset's loader in the image, a GCN
#       slice and one cell of every other model, a second run refused, --resume, the results the caller's. Then the
#       image's labels and user. Then docker (its own daemon, data root and socket, stopped after) on the GCN cells
#       with that same image, saved by the walking user's podman and loaded (Debian's docker 20.10 builds without
#       BuildKit, and its check must say so), or one line why docker does not start here. The walking user's podman
#       storage is emptied at the end (--keep leaves the image there).
# cuda: rootful podman reads buildah's storage; with a stand-in /dev/nvidia0 (HARNESS_DEV_DIR) and a stand-in CDI
#       spec for nvidia.com/gpu=all (no devices, one variable), `./reproduce.sh cuda` executes its real run line
#       (mounts, environment, podman's CDI request): the harness inside must end in its one no-GPU line. The walk
#       of cuda and ascend on a host without the device follows (tools/walk.sh).
# The machine's limits (runc, cgroupfs, explicit rlimits, the host network) come from tools/ci/containers.conf.
set -Eeuo pipefail
# -E: the ERR trap also fires inside functions; in a subshell ($(...), a pipeline) it stays quiet, and the command
# that holds it is reported.
stopped() {  # stopped LINE COMMAND
  [ "$BASHPID" = "$$" ] || return 0
  echo "check_engines: FAILED: stopped at line $1: ${2//$'\n'/ }" >&2
}
trap 'stopped $LINENO "$BASH_COMMAND"' ERR

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
what="${1:-}"
export CONTAINERS_CONF="$root/tools/ci/containers.conf"
fail() { echo "check_engines: FAILED: $*" >&2; exit 1; }
command -v podman > /dev/null || fail "no podman (tools/install_system_packages.sh installs Debian's podman)"
[ "$(id -u)" = 0 ] || fail "needs root (to make the walking user and start dockerd)"
cache="$root/.cache/image-check"
mkdir -p "$cache"
t_phase=$(date +%s)
phase() {  # phase NAME: the time since the last phase
  local now; now=$(date +%s)
  echo "check_engines: $1 done in $((now - t_phase)) s" >&2
  t_phase=$now
}

if [ "$what" = cpu ]; then
  keep=0
  args=("${@:2}")
  [ "${args[0]:-}" != --keep ] || { keep=1; args=("${args[@]:1}"); }
  [ ${#args[@]} -eq 2 ] || fail "usage: tools/check_engines.sh cpu [--keep] BASE_ROOTFS WHEELHOUSE"
  base_rootfs="${args[0]}"
  wheelhouse="${args[1]}"
  [ -s "$base_rootfs" ] || fail "no base root file system $base_rootfs"
  [ -n "$(find "$wheelhouse" -maxdepth 1 -name '*.whl' -print -quit 2> /dev/null)" ] \
    || fail "no wheels in $wheelhouse (tools/wheelhouse.sh cpu fills it)"
  user=harness-walk
  if ! id "$user" > /dev/null 2>&1; then
    useradd --create-home --shell /bin/bash "$user"
  fi
  # Rootless podman maps the user's containers onto subordinate ids; a fresh useradd on Debian adds them, but an
  # older base may not.
  for f in /etc/subuid /etc/subgid; do
    grep -q "^$user:" "$f" 2> /dev/null || echo "$user:300000:65536" >> "$f"
  done
  home="$(getent passwd "$user" | cut -d: -f6)"
  as_user() { runuser -u "$user" -- env -i HOME="$home" PATH=/usr/local/bin:/usr/bin:/bin CONTAINERS_CONF="$CONTAINERS_CONF" "$@"; }
  # The image's hand-over to docker: a folder of the walking user's (podman save runs as that user).
  handoff="$cache/handoff"
  archive="$handoff/cpu-image.tar"
  dpid=""
  finish() {  # on every exit: docker's daemon and its folders, the archive, and unless --keep the podman storage
    if [ -n "$dpid" ]; then
      kill "$dpid" 2> /dev/null || true; wait "$dpid" 2> /dev/null || true
      rm -rf "$cache/docker-root" "$cache/docker-exec"
    fi
    rm -rf "$handoff"
    [ "$keep" = 1 ] || as_user podman system reset --force > /dev/null 2>&1 || true
  }
  trap finish EXIT
  as_user podman system reset --force > /dev/null 2>&1 || true
  mkdir -p "$home/.config/containers"
  # Native rootless overlay (kernel 5.13 or newer) instead of podman's fallback vfs, which copies the 4 GB image
  # for every container.
  printf '[storage]\ndriver = "overlay"\n' > "$home/.config/containers/storage.conf"
  chown -R "$user" "$home/.config"
  # The walk's --data-dir: an empty folder. Its runs are on synthetic data (nothing outside the checkout is read);
  # the dry run shows the folder mounted read-only.
  data="$cache/walk-data"
  rm -rf "$data" "$handoff"
  mkdir -p "$data" "$handoff"
  chown "$user" "$handoff"
  phase "podman: setup"

  "$root/tools/walk.sh" cpu --container --base-rootfs "$base_rootfs" --wheelhouse "$wheelhouse" --as "$user" \
    --engine podman --data-dir "$data" --storage "$home/.local/share/containers" \
    --transcript "$cache/walk-podman.md" \
    || fail "the walk in rootless podman (above)"
  phase "podman: walk (the build through reproduce.sh, the runs)"

  # The image the walk built: its labels (its base the one BASE_IMAGE named) and its user.
  image=localhost/ms-pt-harness:cpu
  info="$(as_user podman image inspect --format '{{.Config.User}}|{{.Size}}|{{json .Labels}}' "$image")" \
    || fail "the walking user's podman has no $image after ./reproduce.sh cpu --container --build"
  IFS='|' read -r image_user size labels <<< "$info"
  for key in io.ms-pt-harness.torch io.ms-pt-harness.mindspore org.opencontainers.image.revision; do
    grep -q "\"$key\":" <<< "$labels" || fail "$image has no label $key (labels: $labels)"
  done
  grep -q '"org.opencontainers.image.base.name":"localhost/harness-base:bookworm"' <<< "$labels" \
    || fail "$image was not built FROM the base BASE_IMAGE named (labels: $labels)"
  case "${image_user%%:*}" in
    ''|0|root) fail "$image runs as '${image_user:-root}'; it must run as its non-root user" ;;
  esac
  echo "check_engines: $image, built by ./reproduce.sh cpu --container --build under rootless podman:" \
    "$(awk -v b="$size" 'BEGIN { printf "%.1f GB", b / 1e9 }'), user $image_user, labels $labels" >&2

  # docker: its own daemon here, when it starts; the walking user in the group that owns its socket.
  if ! command -v dockerd > /dev/null; then
    echo "check_engines: docker: not run: no dockerd on this host (Debian's docker.io provides it)" >&2
    exit 0
  fi
  # The same image for docker, by the walking user: podman save, docker load (the walk's build step). The name is
  # docker's spelling of ms-pt-harness:cpu, which reproduce.sh runs.
  as_user podman tag "$image" docker.io/library/ms-pt-harness:cpu \
    && as_user podman save --quiet --format docker-archive -o "$archive" docker.io/library/ms-pt-harness:cpu \
    || fail "the walking user's podman could not save $image to $archive"
  # The podman storage is not needed any more: emptied before docker stores its own copy (unless --keep).
  [ "$keep" = 1 ] || as_user podman system reset --force > /dev/null 2>&1 || true
  phase "podman: image checks, podman save"
  sock="$cache/docker.sock"
  rm -rf "$cache/docker-root" "$cache/docker-exec"
  getent group harness-docker > /dev/null || groupadd harness-docker
  usermod -aG harness-docker "$user"
  dockerd --data-root "$cache/docker-root" --exec-root "$cache/docker-exec" -H "unix://$sock" --group harness-docker \
    --pidfile "$cache/docker.pid" > "$cache/dockerd.log" 2>&1 &
  dpid=$!
  for _ in $(seq 1 30); do DOCKER_HOST="unix://$sock" docker info > /dev/null 2>&1 && break; sleep 1; done
  if ! DOCKER_HOST="unix://$sock" docker info > /dev/null 2>&1; then
    why="$({ grep -m1 -i -e 'level=fatal' -e 'failed' "$cache/dockerd.log" || true; } | cut -c1-200)"
    echo "check_engines: docker: not run: dockerd did not start here (${why:-see $cache/dockerd.log})" >&2
    exit 0
  fi
  version="$(DOCKER_HOST="unix://$sock" docker info --format '{{.ServerVersion}}')" || fail "docker info failed"
  echo "check_engines: docker: $version started here" >&2
  # Docker Engine before 23 builds without BuildKit (Debian bookworm's docker.io is 20.10): the check before the
  # build must say that this engine cannot build the Dockerfiles, and what to do.
  unbuildable=()
  [ "${version%%.*}" -ge 23 ] 2> /dev/null || unbuildable=(--unbuildable "builds without BuildKit")
  DOCKER_HOST="unix://$sock" "$root/tools/walk.sh" cpu --container --load "$archive" --as "$user" --engine docker \
    --data-dir "$data" --gcn-only \
    --storage "$cache/docker-root" "${unbuildable[@]}" --transcript "$cache/walk-docker.md" \
    || fail "the walk in docker (above)"
  phase "docker: walk (the image loaded, the GCN cells)"
  exit 0
fi

[ "$what" = cuda ] || fail "first argument: cpu or cuda"
image="$2"
IFS=: read -r graphroot runroot driver <<< "$3"
conf="$cache/storage.conf"
printf '[storage]\ndriver = "%s"\ngraphroot = "%s"\nrunroot = "%s"\n' "$driver" "$graphroot" "$runroot" > "$conf"
export CONTAINERS_STORAGE_CONF="$conf"
podman image inspect "$image" > /dev/null || fail "podman does not see $image in buildah's storage"
spec=/var/run/cdi/harness-check-stand-in.yaml
mkdir -p /var/run/cdi "$cache/fake-dev"
trap 'rm -f "$spec"' EXIT
cat > "$spec" <<'EOF'
cdiVersion: "0.5.0"
kind: "nvidia.com/gpu"
devices:
  - name: all
    containerEdits:
      env: ["HARNESS_CDI_STAND_IN=1"]
EOF
touch "$cache/fake-dev/nvidia0"
out="$cache/cuda-run"
rm -rf "$out"
log="$cache/cuda-run.log"
rc=0
HARNESS_DEV_DIR="$cache/fake-dev" CONTAINER_ENGINE=podman "$root/reproduce.sh" cuda --image "$image" --synthetic \
  --only 'model/gcn/pytorch/eager/amp-off/1dev' --out "$out" > "$log" 2>&1 || rc=$?
cat "$log" >&2
last="$(tail -1 "$log")"
# The harness inside the container, not podman, must be the one that stops: the run line, its mounts and the CDI
# request were all accepted.
[ "$rc" = 2 ] && [[ $last == error:* ]] && grep -qi "gpu\|cuda" <<< "$last" \
  || fail "./reproduce.sh cuda under podman: exit $rc, last line '$last' (wanted the harness's one no-GPU line)"
echo "check_engines: cuda: podman ran reproduce.sh's run line with the CDI request; the harness inside said: $last" >&2
rm -f "$spec"
for platform in cuda ascend; do
  "$root/tools/walk.sh" "$platform" --transcript "$cache/walk-$platform.md" || fail "the $platform walk (above)"
done

#!/usr/bin/env bash
# The images under real container runtimes, through reproduce.sh's own command lines, as a reviewer's user runs
# them (tools/check_image.sh calls this after its build; CI only: it needs root to make the user and start
# dockerd).
#
#   tools/check_engines.sh cpu ARCHIVE [ENGINE...]   ARCHIVE: the CPU image, a docker-archive tagged
#                                                    ms-pt-harness:cpu; ENGINE: podman, docker (default both)
#   tools/check_engines.sh cuda IMAGE STORAGE   IMAGE in buildah's STORAGE (root, runroot, driver: "R:RR:D")
#
# cpu:  tools/walk.sh cpu --container (check, load, check again, a GCN slice and one cell of every other model,
#       a second run refused, --resume, the results the caller's) as a non-root user, with rootless podman; then
#       the same with docker on the GCN cells when its engine starts here (its own daemon, data root and socket,
#       stopped after), or one line why not.
# cuda: rootful podman reads buildah's storage; with a stand-in /dev/nvidia0 (HARNESS_DEV_DIR) and a stand-in CDI
#       spec for nvidia.com/gpu=all (no devices, one variable), `./reproduce.sh cuda` executes its real run line
#       (mounts, environment, podman's CDI request): the harness inside must end in its one no-GPU line. The walk
#       of cuda and ascend on a host without the device follows (tools/walk.sh).
# The machine's limits (runc, cgroupfs, explicit rlimits, the host network) come from tools/ci/containers.conf.
set -euo pipefail
trap 'echo "check_engines.sh: stopped at line $LINENO: $BASH_COMMAND" >&2' ERR

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
what="${1:-}"
export CONTAINERS_CONF="$root/tools/ci/containers.conf"
fail() { echo "check_engines: FAILED: $*" >&2; exit 1; }
command -v podman > /dev/null || fail "no podman (tools/install_system_packages.sh installs Debian's podman)"
[ "$(id -u)" = 0 ] || fail "needs root (to make the walking user and start dockerd)"
cache="$root/.cache/image-check"
data="${HARNESS_SHARED_DATA:-$root/../shared/data}"   # real Cora, Multi30K and aclImdb, as tools/check_image.sh reads
mkdir -p "$cache"

if [ "$what" = cpu ]; then
  archive="$2"
  engines=("${@:3}")
  [ ${#engines[@]} -gt 0 ] || engines=(podman docker)
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
  chmod 0644 "$archive"
  if [[ " ${engines[*]} " == *" podman "* ]]; then
    as_user podman system reset --force > /dev/null 2>&1 || true
    mkdir -p "$home/.config/containers"
    # Native rootless overlay (kernel 5.13 or newer) instead of podman's fallback vfs, which copies the 4 GB image
    # for every container.
    printf '[storage]\ndriver = "overlay"\n' > "$home/.config/containers/storage.conf"
    chown -R "$user" "$home/.config"
    "$root/tools/walk.sh" cpu --container --load "$archive" --as "$user" --engine podman --data-dir "$data" \
      --storage "$home/.local/share/containers" --transcript "$cache/walk-podman.md" \
      || fail "the walk in rootless podman (above)"
    as_user podman system reset --force > /dev/null 2>&1 || true
  fi
  [[ " ${engines[*]} " == *" docker "* ]] || exit 0

  # docker: its own daemon here, when it starts; the walking user in the group that owns its socket.
  if ! command -v dockerd > /dev/null; then
    echo "check_engines: docker: not run: no dockerd on this host (Debian's docker.io provides it)" >&2
    exit 0
  fi
  sock="$cache/docker.sock"
  rm -rf "$cache/docker-root" "$cache/docker-exec"
  getent group harness-docker > /dev/null || groupadd harness-docker
  usermod -aG harness-docker "$user"
  dockerd --data-root "$cache/docker-root" --exec-root "$cache/docker-exec" -H "unix://$sock" --group harness-docker \
    --pidfile "$cache/docker.pid" > "$cache/dockerd.log" 2>&1 &
  dpid=$!
  stop_docker() { kill "$dpid" 2> /dev/null || true; wait "$dpid" 2> /dev/null || true; rm -rf "$cache/docker-root" "$cache/docker-exec"; }
  trap stop_docker EXIT
  for _ in $(seq 1 30); do DOCKER_HOST="unix://$sock" docker info > /dev/null 2>&1 && break; sleep 1; done
  if ! DOCKER_HOST="unix://$sock" docker info > /dev/null 2>&1; then
    echo "check_engines: docker: not run: dockerd did not start here ($(grep -m1 -i -e 'level=fatal' -e 'failed' "$cache/dockerd.log" | cut -c1-200))" >&2
    exit 0
  fi
  version="$(DOCKER_HOST="unix://$sock" docker info --format '{{.ServerVersion}}')"
  echo "check_engines: docker: $version started here" >&2
  # Docker Engine before 23 builds without BuildKit (Debian bookworm's docker.io is 20.10): the check before the
  # build must say that this engine cannot build the Dockerfiles, and what to do.
  unbuildable=()
  [ "${version%%.*}" -ge 23 ] 2> /dev/null || unbuildable=(--unbuildable "builds without BuildKit")
  DOCKER_HOST="unix://$sock" "$root/tools/walk.sh" cpu --container --load "$archive" --as "$user" --engine docker \
    --data-dir "$data" --gcn-only \
    --storage "$cache/docker-root" "${unbuildable[@]}" --transcript "$cache/walk-docker.md" \
    || fail "the walk in docker (above)"
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

# shellcheck shell=bash
# Sourced by tools/check_image.sh, which defines buildah (its command and storage) and ctr (the working container).
# ctr_run [--limit S] [RUN_OPTION...] -- COMMAND...: COMMAND in the working container under buildah's chroot isolation
# (--limit: ended after S seconds). Before it starts COMMAND, buildah copies its own binary into a sealed memfd, and on
# a loaded host the kernel can refuse that seal for a moment: "sealing memfd copy: Device or resource busy" (seen once,
# on Linux 6.18 under the test command's three lanes), and COMMAND never began. Only such a start is tried again, twice
# at most and said each time; every other failure is COMMAND's.
ctr_run() {
  local limit=() opts=() err rc try
  if [ "$1" = --limit ]; then limit=(timeout "$2"); shift 2; fi
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  err="$(mktemp)"
  for try in 1 2 3; do
    rc=0
    # stderr as it comes (a long cell's progress; what a killed check had said), and a copy for the test below;
    # stdout as it is (fd 3). Under pipefail the pipeline fails with COMMAND.
    { "${limit[@]}" "${buildah[@]}" run --isolation chroot "${opts[@]}" "$ctr" -- "$@" 2>&1 1>&3 3>&- \
        | tee "$err" >&2; } 3>&1 || rc=$?
    { [ "$rc" != 0 ] && [ "$try" != 3 ] && grep -q "sealing memfd copy: Device or resource busy" "$err"; } || break
    echo "check_image: buildah could not start the container (its binary's sealed copy: busy, try $try of 3);" \
      "starting it again" >&2
    sleep 5
  done
  rm -f "$err"
  return "$rc"
}

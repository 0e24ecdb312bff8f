#!/usr/bin/env bash
# Pin each Dockerfile's default base image (ARG BASE_IMAGE=...) by digest: tag -> tag@sha256:...
#
#   tools/pin_base_images.sh           resolve and rewrite (needs the registries and skopeo, crane or
#                                      docker buildx, whichever is installed)
#   tools/pin_base_images.sh --check   list the bases still pinned by tag only; exit 1 if any
#
# The digest written is the one the registry serves for the tag now (for multi-architecture images,
# the index digest, so aarch64 and x86_64 builds both resolve through it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
check=0
[ "${1:-}" != --check ] || check=1

digest_of() {
  local ref="$1"
  if command -v skopeo > /dev/null; then skopeo inspect --raw "docker://$ref" | sha256sum | sed 's/ .*//; s/^/sha256:/'; return; fi
  if command -v crane > /dev/null; then crane digest "$ref"; return; fi
  if command -v docker > /dev/null && docker buildx version > /dev/null 2>&1; then
    docker buildx imagetools inspect "$ref" --format '{{json .Manifest.Digest}}' | tr -d '"'; return
  fi
  echo "pin_base_images.sh: no skopeo, crane or docker buildx to ask the registry with" >&2
  return 1
}

unpinned=0
for file in "$root"/Dockerfile.*; do
  ref="$(sed -n 's/^ARG BASE_IMAGE=//p' "$file" | head -1)"
  [ -n "$ref" ] || continue
  case "$ref" in
    *@sha256:*) echo "${file##*/}: $ref" ;;
    *)
      unpinned=$((unpinned + 1))
      if [ "$check" = 1 ]; then echo "${file##*/}: $ref (tag only)"; continue; fi
      digest="$(digest_of "$ref")" || exit 1
      case "$digest" in sha256:????????????????????????????????????????????????????????????????) ;;
        *) echo "pin_base_images.sh: no digest for $ref (got '$digest')" >&2; exit 1 ;; esac
      sed -i "s|^ARG BASE_IMAGE=.*|ARG BASE_IMAGE=$ref@$digest|" "$file"
      echo "${file##*/}: $ref@$digest (pinned now)" ;;
  esac
done
[ "$check" = 0 ] || [ "$unpinned" = 0 ]

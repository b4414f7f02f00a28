#!/usr/bin/env bash
# Builds mgpu's container image from docker/Dockerfile with whichever engine works here
# (scripts/container_engine.sh: docker with a daemon, else podman), making the Debian 12 base
# locally where no registry is reachable, and says which engine and base it used.
#   scripts/build_image.sh [--from-tree BUILD_DIR] [--tag TAG]
#   --from-tree BUILD_DIR  the runtime stage only, from the binaries already built in BUILD_DIR
#                          (collected by scripts/collect_runtime.sh, as the from-source build
#                          does): what CI and the `container` tests use
#   --tag TAG              the image's name (default mgpu:latest)
# Without --from-tree, the build stage sets up and builds from source (`make image`).
# An image of TAG labelled with the same sources hash (mgpu.sources-hash: the sources, or for
# --from-tree the Dockerfile, the collect script and the two binaries) is reused, not rebuilt.
set -euo pipefail
# shellcheck source=scripts/container_engine.sh
source "$(dirname "${BASH_SOURCE[0]}")/container_engine.sh"

usage="usage: scripts/build_image.sh [--from-tree BUILD_DIR] [--tag TAG]"
from_tree="" tag="mgpu:latest"
while [ $# -gt 0 ]; do
  case "$1" in
    --from-tree) [ $# -ge 2 ] || engine_fail "--from-tree needs the build folder" "$usage"; from_tree=$2; shift 2 ;;
    --tag) [ $# -ge 2 ] || engine_fail "--tag needs a name" "$usage"; tag=$2; shift 2 ;;
    *) engine_fail "unknown argument '$1'" "$usage" ;;
  esac
done
cd "$MGPU_REPO_ROOT"

# The hash an image built from the current inputs is labelled with.
sources_hash() {
  if [ -n "$from_tree" ]; then
    sha256sum docker/Dockerfile scripts/collect_runtime.sh "$from_tree/bin/mgpu" "$from_tree/bin/mgpu-worker" \
      | awk '{print $1}' | sha256sum | cut -c1-16
  else
    # The files the build context sends that git knows of (tracked, and new ones not ignored).
    git ls-files -z --cached --others --exclude-standard | sort -z | xargs -0 sha256sum 2>/dev/null \
      | sha256sum | cut -c1-16
  fi
}

if [ -n "$from_tree" ]; then
  for binary in mgpu mgpu-worker; do
    [ -x "$from_tree/bin/$binary" ] || engine_fail "--from-tree $from_tree: no $from_tree/bin/$binary" \
      "build first (\`make build\`), or build from source with \`make image\`"
  done
fi
detect_engine
hash=$(sources_hash)
variant=${from_tree:+from-tree}
variant=${variant:-from-source}
if [ "$("$ENGINE" image inspect --format '{{ index .Config.Labels "mgpu.sources-hash" }}' "$tag" 2>/dev/null)" = "$hash" ]; then
  engine_say "image: reusing $tag (built $variant from the same sources, mgpu.sources-hash $hash)"
  exit 0
fi
ensure_base_images
check_engine_starts_containers

started=$(date +%s)
build=("$ENGINE" build -f "$MGPU_REPO_ROOT/docker/Dockerfile" --label "mgpu.sources-hash=$hash"
       --label "mgpu.variant=$variant" -t "$tag")
if [ -n "$from_tree" ]; then
  # The build context is only the collected folder, so nothing else is sent to the engine.
  context=$(mktemp -d)
  trap 'rm -rf "$context"' EXIT
  bash scripts/collect_runtime.sh "$from_tree" "$context/mgpu" >&2
  engine_say "image: building $tag with $ENGINE, runtime stage only (binaries from $from_tree)"
  "${build[@]}" --build-arg MGPU_BINARIES=from-tree "$context" >&2
else
  engine_say "image: building $tag with $ENGINE from source (scripts/setup.sh and make build inside)"
  # Named although it is the default: podman 4.3 (buildah 1.28) takes an ARG's default in FROM for
  # an image name, not a stage, unless it is passed.
  # The host's CA bundle, for pip inside the build (docker/Dockerfile says why).
  ca_bundle=/etc/ssl/certs/ca-certificates.crt
  secret=()
  [ -s "$ca_bundle" ] && secret=(--secret "id=host-ca,src=$ca_bundle")
  "${build[@]}" --build-arg MGPU_BINARIES=from-source "${secret[@]}" . >&2
fi
# The image this one replaces keeps its layers until removed: drop untagged mgpu images.
"$ENGINE" image prune -f --filter label=mgpu.variant >/dev/null 2>&1 || true
size=$("$ENGINE" image inspect --format '{{ .Size }}' "$tag")
engine_say "image: built $tag ($variant) in $(( $(date +%s) - started )) s, $(( size / 1000000 )) MB, mgpu.sources-hash $hash"

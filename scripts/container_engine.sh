#!/usr/bin/env bash
# Finds a container engine that can start containers, and the Debian 12 base images
# docker/Dockerfile builds on, making them locally where no registry is reachable.
#   scripts/container_engine.sh        prints the engine (docker or podman) on stdout, what it
#                                      found and did on stderr; exit 2, naming the cause and the
#                                      fix, when no engine here can start containers
# scripts/build_image.sh sources it for the same functions. The engine is, in order:
#   - docker, when `docker info` answers (a client alone, without a daemon, is not an engine);
#   - podman, with docker/containers.conf (CONTAINERS_CONF): runc instead of crun, no default
#     ulimits, cgroupfs, netavark (the file says why); nothing in /etc is changed.
# MGPU_CONTAINER_ENGINE=docker|podman picks one instead.
# The bases, debian:bookworm (build stage) and debian:bookworm-slim (runtime stage), are used
# when the engine has them, else pulled, else made with `mmdebstrap --variant=minbase bookworm`
# from Debian's mirror and imported as docker.io/library/debian:bookworm and ...-slim, the names
# `FROM debian:bookworm` and `FROM debian:bookworm-slim` resolve to.
set -euo pipefail

MGPU_REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly MGPU_REPO_ROOT
readonly MGPU_BASE_IMAGES=(debian:bookworm debian:bookworm-slim)
ENGINE=""

engine_say() { printf '[image] %s\n' "$*" >&2; }
# Prints the cause and the fix, and exits 2 (the engine set-up is the user's input here).
engine_fail() {
  printf 'error: %s\n' "$1" >&2
  printf 'fix: %s\n' "$2" >&2
  exit 2
}
# The line of an engine's output that says what went wrong: the first naming an error or a
# failure, else the last (podman's CNI warnings left out).
error_line() {
  local lines
  lines=$(printf '%s\n' "$1" | grep -v -e '^\s*$' -e 'level=warning' || true)
  [ -n "$lines" ] || { echo "no output (timed out?)"; return; }
  { printf '%s\n' "$lines" | grep -i -m 1 -E 'error|cannot|fail|denied|refused' || printf '%s\n' "$lines" | tail -n 1; } || true
}

# Sets ENGINE, or fails naming what each candidate lacked.
detect_engine() {
  local wanted=${MGPU_CONTAINER_ENGINE:-}
  local docker_why="not installed" podman_why="not installed" out
  case "$wanted" in ""|docker|podman) ;; *)
    engine_fail "MGPU_CONTAINER_ENGINE='$wanted' is not an engine mgpu knows" \
      "set MGPU_CONTAINER_ENGINE to docker or podman, or unset it to let mgpu pick" ;;
  esac
  if [ "$wanted" != podman ] && command -v docker >/dev/null; then
    if out=$(timeout 30 docker info 2>&1); then
      ENGINE=docker
      engine_say "engine: docker ($(command -v docker), its daemon answers \`docker info\`)"
      return
    fi
    docker_why="installed, but \`docker info\` fails (a client without a running daemon): $(error_line "$out")"
  fi
  if [ "$wanted" != docker ] && command -v podman >/dev/null; then
    export CONTAINERS_CONF=$MGPU_REPO_ROOT/docker/containers.conf
    # Its image store opens (`podman info` would do too, but queries dpkg for minutes on a busy machine).
    if out=$(timeout 300 podman image ls -q 2>&1); then
      ENGINE=podman
      engine_say "engine: podman ($(command -v podman), CONTAINERS_CONF=docker/containers.conf: runc, no default ulimits)"
      return
    fi
    podman_why="installed, but \`podman image ls\` fails: $(error_line "$out")"
  fi
  engine_fail "no container engine can run here: docker is ${docker_why}; podman is ${podman_why}" \
    "start Docker's daemon (dockerd), or install podman as scripts/setup.sh does (apt-get install podman runc netavark aardvark-dns iptables mmdebstrap)"
}

# Makes both base names exist in the engine: present, pulled, or made with mmdebstrap.
ensure_base_images() {
  local missing=() image out
  for image in "${MGPU_BASE_IMAGES[@]}"; do
    "$ENGINE" image inspect "$image" >/dev/null 2>&1 || missing+=("$image")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    engine_say "base: ${MGPU_BASE_IMAGES[*]} (already in $ENGINE)"
    return
  fi
  if out=$(timeout 300 "$ENGINE" pull "docker.io/library/${missing[0]}" 2>&1); then
    for image in "${missing[@]:1}"; do timeout 300 "$ENGINE" pull -q "docker.io/library/$image" >/dev/null; done
    engine_say "base: ${missing[*]} pulled from Docker Hub"
    return
  fi
  engine_say "base: no registry reachable ($(error_line "$out")); making Debian 12 from Debian's mirror"
  command -v mmdebstrap >/dev/null || engine_fail \
    "no base image ${missing[*]}: Docker Hub cannot be reached and mmdebstrap, which makes one from Debian's mirror, is not installed" \
    "apt-get install mmdebstrap (scripts/setup.sh installs it), or load a debian:bookworm image into $ENGINE"
  local scratch
  scratch=$(mktemp -d)
  if ! out=$(mmdebstrap --variant=minbase bookworm "$scratch/base.tar" 2>&1); then
    rm -rf "$scratch"
    engine_fail "mmdebstrap --variant=minbase bookworm failed: $(printf '%s' "$out" | tail -n 3)" \
      "check that this machine reaches Debian's mirror (apt-get update), then run again"
  fi
  for image in "${MGPU_BASE_IMAGES[@]}"; do
    if ! out=$("$ENGINE" import --change 'CMD ["bash"]' "$scratch/base.tar" "docker.io/library/$image" 2>&1); then
      rm -rf "$scratch"
      engine_fail "$ENGINE import of the mmdebstrap base as $image failed: $(error_line "$out")" \
        "check that $ENGINE can store images (free disk space, its storage settings), then run again"
    fi
  done
  rm -rf "$scratch"
  engine_say "base: ${MGPU_BASE_IMAGES[*]} made locally (mmdebstrap --variant=minbase bookworm, $ENGINE import)"
}

# Starts one container from the slim base; fails naming the engine's own error otherwise.
check_engine_starts_containers() {
  local out
  if ! out=$(timeout 120 "$ENGINE" run --rm "${MGPU_BASE_IMAGES[1]}" true 2>&1); then
    local fix="start Docker's daemon with a working runtime, or set MGPU_CONTAINER_ENGINE=podman"
    [ "$ENGINE" = podman ] && fix="install runc and iptables (scripts/setup.sh does), and run as root or with subuids for rootless podman; docker/containers.conf already selects runc and drops default ulimits"
    engine_fail "$ENGINE cannot start a container (\`$ENGINE run --rm ${MGPU_BASE_IMAGES[1]} true\`): $(error_line "$out")" "$fix"
  fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  detect_engine
  ensure_base_images
  check_engine_starts_containers
  printf '%s\n' "$ENGINE"
fi

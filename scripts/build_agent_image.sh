#!/usr/bin/env bash
# Builds the local container image that `executor = "container"` profiles run
# (docs/deploy.md), from nothing: no container registry is needed.
#
#   1. base: a Debian bookworm rootfs from Debian's packages (debootstrap
#      --variant=minbase, with python3, python3-venv, ca-certificates),
#      kept as a tarball in the cache and imported as localhost/turnvisor-base:<key>;
#   2. turnvisor: a venv at /opt/turnvisor in that base with the turnvisor wheel
#      built from this checkout and its dependencies (wheels fetched on the host by
#      pip, installed in the image with --no-index: the build itself is offline);
#      the entrypoint is `turnvisor agentctl`, as PID 1 (no init: an init's
#      environment, which holds the token, would be readable by the agent; see
#      supervisor/container_executor.py);
#   3. optional (--agents "codex claude ..."): Node.js from Debian and the agent CLIs
#      pinned in scripts/install_agents.sh, installed with npm on top.  Not run in CI;
#      Debian's Node.js (18) may be older than some CLIs want.
#
# Tag: localhost/turnvisor-agent:<version>-<hash of the inputs> (product sources,
# pyproject.toml, README.md, this script, the --agents list), also tagged
# localhost/turnvisor-agent:<version> (the backend's default image).  An image whose
# tag exists is not rebuilt, so a second run takes about a second.  The last line
# printed is the tag.
#
# Options: --agents "NAME..."   layer the named agent CLIs
#          --print-tag          print the tag this checkout builds and exit
# Environment: TURNVISOR_IMAGE_CACHE (default ~/.cache/turnvisor/images),
#   TURNVISOR_IMAGE_NAME (default localhost/turnvisor-agent), PYTHON (the pip used
#   to fetch wheels; default .venv/bin/python, else python3), DEBIAN_MIRROR
#   (default: debootstrap's own), PODMAN (default podman).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCRIPT="$ROOT/scripts/build_agent_image.sh"
CACHE="${TURNVISOR_IMAGE_CACHE:-$HOME/.cache/turnvisor/images}"
NAME="${TURNVISOR_IMAGE_NAME:-localhost/turnvisor-agent}"
PODMAN="${PODMAN:-podman}"
SUITE=bookworm
INCLUDE=python3,python3-venv,ca-certificates
AGENTS=""
PRINT_TAG=0

while [ $# -gt 0 ]; do
  case "$1" in
    --agents) AGENTS="${2:-}"; shift 2 ;;
    --print-tag) PRINT_TAG=1; shift ;;
    *) echo "build_agent_image.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

if [ -z "${PYTHON:-}" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi

say() { echo "build_agent_image: $*" >&2; }

version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -n 1)"
# The inputs' hash: every product file (what the wheel holds), the packaging, this
# script and the agent list.  Sorted paths with their contents' hashes, hashed again.
inputs_hash="$(
  cd "$ROOT"
  {
    find supervisor protocols web -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 \
      | sort -z | xargs -0 sha256sum
    sha256sum pyproject.toml README.md scripts/build_agent_image.sh
    echo "agents: $AGENTS"
  } | sha256sum | cut -c1-12
)"
TAG="$NAME:$version-$inputs_hash"
if [ "$PRINT_TAG" = 1 ]; then echo "$TAG"; exit 0; fi

command -v "$PODMAN" >/dev/null || { say "$PODMAN not found (scripts/install_container_deps.sh)"; exit 1; }
if "$PODMAN" image exists "$TAG"; then
  "$PODMAN" tag "$TAG" "$NAME:$version"
  say "$TAG is up to date"
  echo "$TAG"
  exit 0
fi
mkdir -p "$CACHE"
start=$SECONDS

# -- 1. the base image ---------------------------------------------------------------
base_key="$(echo "$SUITE minbase $INCLUDE $(uname -m)" | sha256sum | cut -c1-12)"
BASE="localhost/turnvisor-base:$SUITE-$base_key"
ROOTFS_TAR="$CACHE/rootfs-$SUITE-$base_key.tar"
if ! "$PODMAN" image exists "$BASE"; then
  if [ ! -s "$ROOTFS_TAR" ]; then
    command -v debootstrap >/dev/null || { say "debootstrap not found"; exit 1; }
    say "debootstrap $SUITE (minbase + $INCLUDE) ..."
    tmp="$(mktemp -d "$CACHE/rootfs.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    # shellcheck disable=SC2086
    debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$tmp/root" ${DEBIAN_MIRROR:-} \
      >"$CACHE/debootstrap.log" 2>&1 \
      || { say "debootstrap failed; last lines of $CACHE/debootstrap.log:"; tail -n 20 "$CACHE/debootstrap.log" >&2; exit 1; }
    # Nothing the image needs: the apt lists and the downloaded packages.
    rm -rf "$tmp/root/var/cache/apt/archives/"*.deb "$tmp/root/var/lib/apt/lists/"*
    tar --numeric-owner -C "$tmp/root" -cf "$ROOTFS_TAR.part" .
    mv "$ROOTFS_TAR.part" "$ROOTFS_TAR"
    rm -rf "$tmp"
    trap - EXIT
    say "debootstrap done ($((SECONDS - start)) s so far)"
  fi
  say "importing $ROOTFS_TAR as $BASE"
  "$PODMAN" import --quiet --change 'CMD ["/bin/bash"]' "$ROOTFS_TAR" "$BASE" >/dev/null
  say "base image imported ($((SECONDS - start)) s so far)"
fi

# -- 2. turnvisor in a venv ----------------------------------------------------------
# Two layers: the dependencies (cached by pyproject.toml's hash, so a change to the
# product alone reinstalls only the turnvisor wheel), then the turnvisor wheel.
pip_log="$CACHE/pip.log"
deps_hash="$(sha256sum "$ROOT/pyproject.toml" | cut -c1-12)"
DEPS="$CACHE/deps-$deps_hash"
if [ ! -f "$DEPS/.complete" ]; then
  say "fetching the dependencies' wheels"
  rm -rf "$DEPS" && mkdir -p "$DEPS"
  "$PYTHON" -c 'import sys, tomllib; print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))' \
    "$ROOT/pyproject.toml" >"$DEPS/requirements.txt"
  # The image's Python is bookworm's 3.11: ask for wheels for it, whatever runs pip here.
  "$PYTHON" -m pip download --quiet --dest "$DEPS" --only-binary=:all: \
    --python-version 3.11 --implementation cp --abi cp311 \
    --platform "manylinux_2_36_$(uname -m)" --platform "manylinux_2_17_$(uname -m)" \
    --platform "manylinux2014_$(uname -m)" -r "$DEPS/requirements.txt" >"$pip_log" 2>&1 \
    || { say "pip download failed:"; tail -n 20 "$pip_log" >&2; exit 1; }
  # The wheel's build backend, for the host's pip (not installed in the image).
  "$PYTHON" -m pip download --quiet --dest "$DEPS/build" "setuptools>=68" wheel \
    >"$pip_log" 2>&1 || { say "pip download failed:"; tail -n 20 "$pip_log" >&2; exit 1; }
  touch "$DEPS/.complete"
fi
ctx="$(mktemp -d "$CACHE/context.XXXXXX")"
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/wheel"
cp -r "$DEPS" "$ctx/deps"
say "building the turnvisor wheel"
# From a copy of the product files (the build leaves build/ and *.egg-info behind),
# with the build backend from the cache (no index is asked on a rebuild).
mkdir -p "$ctx/src"
tar -C "$ROOT" --exclude=__pycache__ --exclude='*.pyc' -cf - supervisor protocols web \
  pyproject.toml README.md | tar -C "$ctx/src" -xf -
PIP_NO_INDEX=1 PIP_FIND_LINKS="$DEPS/build" \
  "$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$ctx/wheel" "$ctx/src" \
  >"$pip_log" 2>&1 || { say "pip wheel failed:"; tail -n 20 "$pip_log" >&2; exit 1; }

cat >"$ctx/Containerfile" <<EOF
FROM $BASE
# The hashes in the commands: the layer cache must not serve older wheels.
RUN --mount=type=bind,source=deps,target=/tmp/deps \\
    : deps $deps_hash \\
 && python3 -m venv /opt/turnvisor \\
 && /opt/turnvisor/bin/pip install --quiet --no-index --no-cache-dir /tmp/deps/*.whl
RUN --mount=type=bind,source=wheel,target=/tmp/wheel \\
    : inputs $inputs_hash \\
 && /opt/turnvisor/bin/pip install --quiet --no-index --no-cache-dir --no-deps \\
      /tmp/wheel/turnvisor-*.whl \\
 && /opt/turnvisor/bin/turnvisor --help >/dev/null
ENV PATH=/opt/turnvisor/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    PYTHONUNBUFFERED=1 LANG=C.UTF-8
WORKDIR /workspace
LABEL org.opencontainers.image.title="turnvisor agentctl" \\
      io.turnvisor.version="$version" io.turnvisor.inputs="$inputs_hash"
# agentctl is PID 1: it handles SIGTERM (graceful stop), hides its environment (the
# token) from the agent, and its launcher reaps the agent's orphans.
ENTRYPOINT ["/opt/turnvisor/bin/turnvisor", "agentctl"]
EOF

if [ -n "$AGENTS" ]; then
  # name npm-package version, as pinned for the host in scripts/install_agents.sh.
  pkgs=""
  for a in $AGENTS; do
    pin="$(grep -E "^ *\"$a @?[^ ]+ [^ ]+\"" "$ROOT/scripts/install_agents.sh" | tr -d '"' || true)"
    [ -n "$pin" ] || { say "unknown agent $a (see PINS in scripts/install_agents.sh)"; exit 2; }
    read -r _ pkg ver <<<"$pin"
    pkgs="$pkgs $pkg@$ver"
  done
  cat >>"$ctx/Containerfile" <<EOF
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm \\
 && npm install -g --no-audit --no-fund --loglevel=error$pkgs \\
 && rm -rf /var/lib/apt/lists/* /root/.npm
EOF
  network=(--network=host)
else
  network=(--network=none)
fi

say "wheels ready ($((SECONDS - start)) s so far); building $TAG"
"$PODMAN" build --quiet "${network[@]}" --tag "$TAG" --tag "$NAME:$version" \
  --file "$ctx/Containerfile" "$ctx" >/dev/null
say "built $TAG in $((SECONDS - start)) s"
# Older builds of this name go (an image a container still uses stays, quietly).
"$PODMAN" images --format '{{.Repository}}:{{.Tag}}' "$NAME" \
  | grep -v -x -e "$TAG" -e "$NAME:$version" | xargs -r "$PODMAN" rmi >/dev/null 2>&1 || true
echo "$TAG"

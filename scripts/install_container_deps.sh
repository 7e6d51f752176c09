#!/usr/bin/env bash
# Installs what the container tests need from Debian's packages: podman (the
# engine, serving the Docker Engine API), runc, and debootstrap (the image's base,
# scripts/build_agent_image.sh); and openssl, which makes the Kubernetes stand-in's
# temporary CA (tests/kube, whose Pods run with the same Podman).  Does nothing
# when all are there.
set -euo pipefail
missing=()
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v runc >/dev/null 2>&1 || missing+=(runc)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
podman --version

#!/usr/bin/env bash
# Installs Debian's bubblewrap, the agent sandbox (protocols/sandbox.py; its tests need it).
set -euo pipefail
if command -v bwrap >/dev/null 2>&1; then exit 0; fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq bubblewrap >/dev/null
bwrap --version

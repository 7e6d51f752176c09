#!/usr/bin/env bash
# Installs Debian's bubblewrap (the agent sandbox, protocols/sandbox.py) and passt
# (its pasta gives each sandboxed agent a network namespace of its own with outbound
# access, protocols/netns.py).  The sandbox's tests need both.
set -euo pipefail
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v pasta >/dev/null 2>&1 || missing+=(passt)
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
bwrap --version

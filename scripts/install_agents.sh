#!/usr/bin/env bash
# Installs the pinned real agent CLIs into a cache folder outside the repo.
# Tests that need one skip with a reason when it is absent.
set -uo pipefail
CACHE="${TURNVISOR_AGENTS_DIR:-$HOME/.cache/turnvisor/agents}"
mkdir -p "$CACHE"
echo "agent CLIs: $CACHE (nothing pinned yet)"

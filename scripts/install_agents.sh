#!/usr/bin/env bash
# Installs the pinned real agent CLIs with npm into a cache folder outside the repo
# (default $HOME/.cache/turnvisor/agents, override with TURNVISOR_AGENTS_DIR).
#
# Each package gets its own npm prefix: <cache>/<name>/node_modules/... (tests/agents/cli.py
# finds the binaries there).  A package whose installed version already matches its pin is
# skipped, so a second run takes well under a second.  A package that cannot be installed
# prints one "agent CLI NAME: NOT installed" line and the script goes on: the tests that need
# it skip with that reason; the script itself never fails CI.
set -uo pipefail

CACHE="${TURNVISOR_AGENTS_DIR:-$HOME/.cache/turnvisor/agents}"

# name  npm package  version
PINS=(
  "codex @openai/codex 0.171.0"
  "auggie @augmentcode/auggie 0.36.0"
  "claude @agentclientprotocol/claude-agent-acp 0.101.0"
  "gemini @google/gemini-cli 0.61.0"
  "codex-acp @agentclientprotocol/codex-acp 2.6.0"
  "qwen @qwen-code/qwen-code 0.24.4"
  "opencode opencode-ai 1.18.33"
)

if ! command -v npm >/dev/null 2>&1; then
  echo "agent CLIs: npm not found; none installed (the agent tests will skip)"
  exit 0
fi
if ! mkdir -p "$CACHE" 2>/dev/null; then
  echo "agent CLIs: cannot create $CACHE; none installed (the agent tests will skip)"
  exit 0
fi

installed_version() {  # prefix package -> prints the installed version or nothing
  local pj="$1/node_modules/$2/package.json"
  [ -f "$pj" ] || return 0
  node -e 'try { process.stdout.write(require(process.argv[1]).version || "") } catch (e) {}' "$pj"
}

for pin in "${PINS[@]}"; do
  read -r name pkg version <<<"$pin"
  prefix="$CACHE/$name"
  have="$(installed_version "$prefix" "$pkg")"
  if [ "$have" = "$version" ]; then
    echo "agent CLI $name: $pkg@$version already installed"
    continue
  fi
  mkdir -p "$prefix"
  # A package.json of its own keeps npm from walking up into some other project.
  [ -f "$prefix/package.json" ] || echo '{"name":"turnvisor-agent-'"$name"'","private":true}' \
    >"$prefix/package.json"
  log="$prefix/install.log"
  start=$SECONDS
  if npm install --prefix "$prefix" --no-audit --no-fund --no-save --loglevel=error \
      "$pkg@$version" >"$log" 2>&1 \
     && [ "$(installed_version "$prefix" "$pkg")" = "$version" ]; then
    echo "agent CLI $name: installed $pkg@$version in $((SECONDS - start)) s"
  else
    echo "agent CLI $name: NOT installed ($pkg@$version; npm said: $(tail -n 3 "$log" | tr '\n' ' '))"
  fi
done
exit 0

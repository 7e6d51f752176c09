#!/usr/bin/env bash
# Installs Debian's OpenSSH client and server: the ssh executor and remote container
# engines use the system's `ssh` (supervisor/executors/ssh*.py); their tests start a
# throwaway `sshd` on a loopback port (tests/ssh/).
set -euo pipefail
missing=()
command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# The package's own service is not wanted (the tests run their own sshd).
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
ssh -V

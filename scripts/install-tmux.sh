#!/bin/sh
# install-tmux.sh installs tmux for the spawn --tmux test
# (e2e/spawn_test.go) when it is missing. It is safe to run again.
set -eu
if command -v tmux >/dev/null 2>&1; then
	exit 0
fi
SUDO=
if [ "$(id -u)" != 0 ]; then
	SUDO=sudo
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq tmux >/dev/null
command -v tmux

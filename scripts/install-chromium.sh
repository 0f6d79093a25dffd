#!/bin/sh
# install-chromium.sh installs Debian's chromium for the ui browser test
# (ui/browser_test.go) when it is missing. It is safe to run again.
set -eu
if command -v chromium >/dev/null 2>&1; then
	exit 0
fi
SUDO=
if [ "$(id -u)" != 0 ]; then
	SUDO=sudo
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
command -v chromium

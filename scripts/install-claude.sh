#!/usr/bin/env bash
# Installs the pinned Claude Code that the real-Claude test (e2e/claude_test.go)
# runs against, into a cache directory CI keeps between runs, and prints the
# path of its `claude` binary. An unpinned install resolved to 2.1.197 here,
# which predates CLAUDE_PID (2.1.214): keep the pin.
set -euo pipefail
version="${CLAUDE_CODE_VERSION:-2.1.330}"
cache="${TEAMBUS_CACHE:-$HOME/.cache/teambus}/npm"
bin="$cache/node_modules/.bin/claude"
if ! command -v npm >/dev/null 2>&1; then
	echo "install-claude: npm is not installed" >&2
	exit 3
fi
if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -q "^$version"; then
	echo "$bin"
	exit 0
fi
mkdir -p "$cache"
npm install --prefix "$cache" --no-audit --no-fund --loglevel=error "@anthropic-ai/claude-code@$version" >&2
"$bin" --version >&2
echo "$bin"

#!/usr/bin/env bash
# Installs the pinned npm packages of the test clients (package.json +
# package-lock.json, `npm ci`) into a cache directory outside the work
# tree, once per lock file content, and prints that directory.
#   scripts/npm-install.sh [PROJECT_DIR]   (default agent/mcpserver/testdata/ts)
# The cache is $TEAMBUS_NPM_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/teambus/npm.
# Exits 3 when node or npm is missing (the tests then skip, saying so).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
project="${1:-$root/agent/mcpserver/testdata/ts}"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "npm-install: node or npm not installed" >&2
	exit 3
fi
cache="${TEAMBUS_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/teambus/npm}"
stamp="$(cat "$project/package.json" "$project/package-lock.json" | sha256sum | cut -c1-16)"
target="$cache/$(basename "$project")-$stamp"
if [ ! -f "$target/.installed" ]; then
	mkdir -p "$cache"
	tmp="$(mktemp -d "$cache/.install.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	cp "$project/package.json" "$project/package-lock.json" "$tmp/"
	(cd "$tmp" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2)
	touch "$tmp/.installed"
	rm -rf "$target"
	mv "$tmp" "$target"
	trap - EXIT
fi
echo "$target"

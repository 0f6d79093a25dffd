// Package claudetest gives tests the real Claude Code: the version pinned
// by scripts/install-claude.sh, installed once into its cache.
package claudetest
